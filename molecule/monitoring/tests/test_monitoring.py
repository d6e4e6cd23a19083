"""Metrics, dashboards and alerts of a simulated fleet (molecule scenario `monitoring`).

A GPU host (one SGLang instance, node exporter, fixture DCGM) and a gateway that also runs Debian's
Prometheus (playbooks/monitoring.yml). The cases run in file order against that Prometheus (its API on
the gateway's loopback, asked with curl inside the container): promtool accepts what the role installed,
every target is up, smg's own series (its worker's health) is queried through the HTTP API, requests
through the router fill the histograms, every dashboard query and every alert signal returns data, no
alert is pending or firing on the healthy fleet, a second run changes nothing, the GPU health gate passes
(its dcgmi diag answered by the fixture DCGM), and a PCIe link injected at x8 (the fake nvidia-smi's
faults.json) fires GPUPCIeLinkWidthDegraded and fails playbooks/health.yml.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import ansible_runner
import promcheck
import pytest
import yaml
from simrun import REPO

GPU = "bsa-mon-gpu"
GATEWAY = "bsa-mon-gw"
PROMETHEUS = "http://127.0.0.1:9090"
ROUTER = "http://127.0.0.1:30000"
FAULTS = "/etc/fake-nvidia/faults.json"
INVENTORY = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "inventory"
# The fleet's API key, read from the scenario's inventory (one source).
API_KEY: str = yaml.safe_load((Path(__file__).resolve().parents[1] / "inventory" / "group_vars" / "all.yml").read_text())["sglang_api_key"]
# What the inventory declares: the instance, the router, a node exporter on both hosts, DCGM on the GPU host.
EXPECTED_TARGETS = {
    ("prometheus", GATEWAY, f"{GATEWAY}:9090", "prometheus"),
    ("sglang", GPU, f"{GPU}:30000", "sglang"),
    ("sglang-ready", GPU, f"{GPU}:30000", "sglang"),
    ("sglang-router", GATEWAY, f"{GATEWAY}:29000", "sglang-router"),
    ("node", GPU, f"{GPU}:9100", "prometheus-node-exporter"),
    ("node", GATEWAY, f"{GATEWAY}:9100", "prometheus-node-exporter"),
    ("dcgm", GPU, f"{GPU}:9400", "nvidia-dcgm-exporter"),
}


def sh(container: str, command: str, check: bool = True) -> str:
    done = subprocess.run(["docker", "exec", container, "bash", "-c", command], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{container}: {command}: rc {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def api(path: str, params: dict[str, str] | None = None) -> Any:
    """GET Prometheus's API on the gateway."""
    url = PROMETHEUS + path + ("?" + urllib.parse.urlencode(params) if params else "")
    return json.loads(sh(GATEWAY, f"curl -fsS '{url}'"))


def wait_until_empty(what: str, problems: Any, timeout: float = 90, pause: float = 2) -> None:
    """Poll ``problems()`` (a list) until it is empty; fail with the last one."""
    deadline = time.monotonic() + timeout
    while (last := problems()) and time.monotonic() < deadline:
        time.sleep(pause)
    assert not last, f"{what} after {timeout:.0f}s: {last}"


def play(playbook: str, workdir: Path, limit: str = "") -> ansible_runner.Runner:
    """Run a project playbook against the scenario's inventory (molecule's), events kept."""
    return ansible_runner.run(
        private_data_dir=str(workdir), project_dir=str(REPO), playbook=str(REPO / "playbooks" / playbook),
        inventory=str(INVENTORY), limit=limit or None, quiet=True,
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
                 "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections")})


def test_promtool_accepts_the_installed_configuration_and_rules() -> None:
    out = sh(GATEWAY, "promtool check config /etc/prometheus/prometheus.yml && promtool check rules /etc/prometheus/sglang-rules.yml")
    assert "SUCCESS" in out and "/etc/prometheus/sglang-rules.yml" in out
    installed = sh(GATEWAY, "cat /var/lib/grafana/dashboards/sglang/sglang-fleet.json")
    assert json.loads(installed) == json.loads(promcheck.DASHBOARD.read_text(encoding="utf-8"))


def test_grafana_provisioning_names_this_prometheus_and_the_dashboards() -> None:
    """The data source points at this Prometheus (its URL answers the API) and the provider at the dashboard's directory."""
    sources = yaml.safe_load(sh(GATEWAY, "cat /etc/grafana/provisioning/datasources/sglang.yml"))
    providers = yaml.safe_load(sh(GATEWAY, "cat /etc/grafana/provisioning/dashboards/sglang.yml"))
    assert sources["apiVersion"] == 1 and providers["apiVersion"] == 1
    [source] = sources["datasources"]
    assert source["type"] == "prometheus" and source["access"] == "proxy" and source["url"] == PROMETHEUS
    assert json.loads(sh(GATEWAY, f"curl -fsS '{source['url']}/api/v1/query?query=up'"))["status"] == "success"
    [provider] = providers["providers"]
    assert provider["type"] == "file"
    assert "sglang-fleet.json" in sh(GATEWAY, f"ls {provider['options']['path']}").split()


def test_every_target_of_the_inventory_is_up() -> None:
    def down() -> list[str]:
        active = api("/api/v1/targets")["data"]["activeTargets"]
        seen = {(t["labels"]["job"], t["labels"]["host"], t["labels"]["instance"], t["labels"]["service"]) for t in active}
        if seen != EXPECTED_TARGETS:
            return [f"targets {sorted(seen)} != {sorted(EXPECTED_TARGETS)}"]
        # the server serves HTTPS (its plan): Prometheus scrapes it so, verifying the certificate against the CA
        plain = [f"{t['scrapeUrl']}: not https" for t in active
                 if t["labels"]["job"] in ("sglang", "sglang-ready") and not t["scrapeUrl"].startswith("https://")]
        return plain + [f"{t['scrapeUrl']}: {t['health']} {t['lastError']}" for t in active if t["health"] != "up"]

    wait_until_empty("targets not up", down, timeout=60)


def test_requests_through_the_router_are_served() -> None:
    for i in range(12):
        body = json.dumps({"model": "qwen3.5-397b", "messages": [{"role": "user", "content": f"request {i}"}],
                           "max_tokens": 16, "stream": i % 2 == 1})
        out = sh(GATEWAY, f"curl -fsS -H 'Content-Type: application/json' -H 'Authorization: Bearer {API_KEY}' "
                          f"-d '{body}' {ROUTER}/v1/chat/completions")
        assert ("[DONE]" in out) if i % 2 else json.loads(out)["choices"][0]["message"]["content"]


def test_the_gateways_series_reach_prometheus() -> None:
    """smg 1.13.0 (the default gateway) is scraped: Prometheus's HTTP API returns its smg_worker_health of the GPU
    host's instance, healthy, and the workers the gateway is given (from the plan) are all there."""
    execstart = sh(GATEWAY, "systemctl show -p ExecStart --value sglang-router.service")
    assert "/opt/sglang-router/smg-1.13.0/bin/python" in execstart, execstart

    def missing() -> list[str]:
        health = api("/api/v1/query", {"query": 'smg_worker_health{job="sglang-router"}'})["data"]["result"]
        found = {(s["metric"]["host"], s["metric"]["worker"], s["value"][1]) for s in health}
        if found != {(GATEWAY, f"https://{GPU}:30000", "1")}:
            return [f"smg_worker_health: {sorted(found)}"]
        gap = api("/api/v1/query", {"query": "signal:sglang_gateway_workers_missing"})["data"]["result"]
        expected = api("/api/v1/query", {"query": "sglang_gateway:workers_expected"})["data"]["result"]
        if [(s["metric"]["host"], s["value"][1]) for s in expected] != [(GATEWAY, "1")] or [s["value"][1] for s in gap] != ["0"]:
            return [f"expected {expected}, missing {gap}"]
        return []

    wait_until_empty("the gateway's series in Prometheus", missing, timeout=60)
    print(f"smg_worker_health{{host={GATEWAY!r}, worker='https://{GPU}:30000'}} == 1 through {PROMETHEUS}/api/v1/query")


def test_every_dashboard_query_returns_data() -> None:
    wait_until_empty("dashboard queries without data", lambda: promcheck.empty_queries(
        api, promcheck.dashboard_queries() + promcheck.variable_queries()))


# Signals that compare with history this scenario's fresh Prometheus cannot have: the series they are computed from
# must return data instead (the names and labels as scraped).
NEEDS_HISTORY = {
    # The last start over the median of the 7 days before the last hour (roles/sglang_monitoring sglang-rules.yml.j2).
    "signal:sglang_startup_regression": 'sglang:startup_time_seconds{phase="tokenizer_e2e"}',
}


def test_every_alert_signal_returns_data() -> None:
    signals = promcheck.alert_signals(api("/api/v1/rules")["data"]["groups"])
    assert len(signals) == 16
    assert set(NEEDS_HISTORY) <= {s for _, s, _, _ in signals}
    wait_until_empty("alert signals without data", lambda: promcheck.empty_queries(
        api, [(a, NEEDS_HISTORY.get(s, s)) for a, s, _, _ in signals]))


def test_no_alert_is_pending_or_firing_on_the_healthy_fleet() -> None:
    """No false alarm: no alert's condition holds (an idle GPU's lower PCIe generation included)."""
    assert api("/api/v1/alerts")["data"]["alerts"] == []


def test_a_second_monitoring_run_changes_nothing(tmp_path: Path) -> None:
    runner = play("monitoring.yml", tmp_path)
    assert runner.rc == 0, runner.stdout.read()
    changed = [f"{e['event_data']['host']}: {e['event_data']['task']}" for e in runner.events
               if e.get("event") == "runner_on_ok" and e["event_data"]["res"].get("changed")]
    assert changed == []


def test_the_gpu_health_gate_passes_with_dcgm(tmp_path: Path) -> None:
    """playbooks/health.yml on the healthy host, its dcgmi diag -r 1 answered by the fixture DCGM."""
    runner = play("health.yml", tmp_path, limit=GPU)
    assert runner.rc == 0, runner.stdout.read()
    diag = json.loads(sh(GPU, "dcgmi diag -r 1 -j"))
    assert diag["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"]["status"] == "Pass"


@pytest.fixture
def degraded_link() -> Any:
    """GPU 0 of the GPU host trains its PCIe link at x8 (of x16) until the test ends."""
    sh(GPU, f"echo '{json.dumps({'gpus': {'0': {'pcie.link.width.current': '8'}}})}' > {FAULTS}")
    yield
    sh(GPU, f"rm -f {FAULTS}")


def test_a_degraded_pcie_link_fires_its_alert_and_fails_the_health_gate(degraded_link: None, tmp_path: Path) -> None:
    def not_firing() -> list[str]:
        alerts = api("/api/v1/alerts")["data"]["alerts"]
        found = [a for a in alerts if a["labels"]["alertname"] == "GPUPCIeLinkWidthDegraded" and a["state"] == "firing"]
        return [] if found else [f"{a['labels']['alertname']} {a['state']}" for a in alerts] or ["no alert"]

    start = time.monotonic()
    wait_until_empty("GPUPCIeLinkWidthDegraded not firing", not_firing, timeout=60, pause=1)
    print(f"GPUPCIeLinkWidthDegraded fired {time.monotonic() - start:.1f}s after the fault")
    firing = [a for a in api("/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]
    [alert] = firing  # only that GPU: the other links are whole, nothing else fires
    assert alert["labels"]["host"] == GPU and alert["labels"]["gpu"] == "0"
    assert float(alert["value"]) == 8 and "lacks 8 lanes" in alert["annotations"]["summary"]

    runner = play("health.yml", tmp_path, limit=GPU)
    assert runner.rc != 0
    failed = [str(e["event_data"]["res"].get("msg", "")) for e in runner.events if e.get("event") == "runner_on_failed"]
    assert any(GPU in m and "pcie_width" in m and "x8" in m for m in failed), failed
