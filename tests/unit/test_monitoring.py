"""The monitoring roles without a container: scrape targets from the inventory, the rules file, the dashboard,
the stand-in's /metrics and the fixture DCGM.

The molecule scenario ``monitoring`` is the proof that a real Prometheus evaluates every dashboard query and
every alert signal to data; here the pieces are checked one by one: what the targets filter generates (and
refuses), that every alert has the documented ``signal <comparison> threshold`` shape over a recorded signal,
that the dashboard uses only its own variables and metric names that something exports, and that the
stand-in and the fixture DCGM export SGLang 0.5.23's and DCGM's names.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter import monitoring
from ansible_collections.blackwell.sglang.plugins.filter.monitoring import FilterModule, address_problem, gateway_workers, scrape_configs
from hypothesis import given
from hypothesis import strategies as st
from reference import host_with

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_monitoring"
sys.path.insert(0, str(REPO / "molecule" / "shared"))
import promcheck  # noqa: E402
from standin_inproc import serve  # noqa: E402

DEFAULTS = {
    "node_exporter_listen_host": "", "node_exporter_port": 9100, "node_exporter_service_name": "prometheus-node-exporter",
    "dcgm_exporter_enabled": True, "dcgm_exporter_listen_host": "", "dcgm_exporter_port": 9400,
    "dcgm_exporter_service_name": "nvidia-dcgm-exporter", "sglang_router_prometheus_host": "127.0.0.1",
    "sglang_router_prometheus_port": 29000, "sglang_router_service_name": "sglang-router",
    "sglang_router_worker_group": "sglang_servers",
}
SETTINGS = {"server_group": "sglang_servers", "router_group": "sglang_routers",
            "node_exporter_groups": ["sglang_servers", "sglang_routers"], "dcgm_exporter_groups": ["sglang_servers"],
            "tls_ca_file": "", "defaults": DEFAULTS}


def fleet(**gpu2: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Two GPU hosts (the reference host, listening on the network with a key) and a gateway that also monitors."""
    server = {"sglang_listen_host": "0.0.0.0", "sglang_api_key": "k3y-0123456789abcdef"}
    hostvars = {"gpu1": host_with(ansible_host="10.0.0.5", **server),
                "gpu2": host_with(ansible_host="10.0.0.6", **{**server, **gpu2}),
                "gw": {"ansible_host": "10.0.0.9"}}
    groups = {"all": ["gpu1", "gpu2", "gw"], "sglang_servers": ["gpu1", "gpu2"], "sglang_routers": ["gw"],
              "sglang_monitoring": ["gw"]}
    return hostvars, groups


def job_of(config: dict[str, Any]) -> str:
    """The job label of a scrape configuration's targets."""
    return config["relabel_configs"][0]["replacement"] if "relabel_configs" in config else config["job_name"]


def targets(configs: list[dict[str, Any]], job: str) -> list[tuple[str, dict[str, str]]]:
    return [(sc["targets"][0], sc["labels"]) for c in configs if job_of(c) == job for sc in c["static_configs"]]


# --- the targets filter ----------------------------------------------------------------------------------------


def test_the_filter_is_registered() -> None:
    assert set(FilterModule().filters()) == {"scrape_configs", "gateway_workers"}


def test_every_server_router_and_exporter_of_the_inventory_is_a_target() -> None:
    hostvars, groups = fleet()
    configs = scrape_configs("gw", hostvars, groups, SETTINGS)
    assert [c["job_name"] for c in configs] == ["sglang", "sglang-ready", "sglang-router", "node", "dcgm"]
    assert targets(configs, "sglang") == [
        ("10.0.0.5:30000", {"host": "gpu1", "instance": "gpu1:30000", "service": "sglang", "sglang_instance": "sglang"}),
        ("10.0.0.6:30000", {"host": "gpu2", "instance": "gpu2:30000", "service": "sglang", "sglang_instance": "sglang"})]
    ready = next(c for c in configs if c["job_name"] == "sglang-ready")
    assert ready["metrics_path"] == "/ready" and ready["scheme"] == "http"
    # the gateway's own services over loopback; the GPU hosts' at their ansible_host
    assert targets(configs, "sglang-router") == [("127.0.0.1:29000", {"host": "gw", "instance": "gw:29000", "service": "sglang-router"})]
    assert [t for t, _ in targets(configs, "node")] == ["10.0.0.5:9100", "10.0.0.6:9100", "127.0.0.1:9100"]
    assert [t for t, _ in targets(configs, "dcgm")] == ["10.0.0.5:9400", "10.0.0.6:9400"]


def test_a_hosts_own_settings_win_over_the_role_defaults() -> None:
    hostvars, groups = fleet(node_exporter_port=9101, dcgm_exporter_enabled=False, dcgm_exporter_port="x")
    hostvars["gpu1"]["dcgm_exporter_listen_host"] = "10.1.0.5"
    configs = scrape_configs("gw", hostvars, groups, SETTINGS)
    assert [t for t, _ in targets(configs, "node")][1] == "10.0.0.6:9101"
    assert [t for t, _ in targets(configs, "dcgm")] == ["10.1.0.5:9400"]  # gpu2 runs no DCGM exporter


def test_instances_are_targets_on_their_own_ports() -> None:
    hostvars, groups = fleet()
    hostvars["gpu1"]["sglang_instances"] = [
        {"name": "chat", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0, 1, 2, 3], "port": 30001,
         "args": {"tp_size": 4, "attention_backend": "triton"}},
        {"name": "code", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [4, 5, 6, 7], "port": 30002,
         "args": {"tp_size": 4, "attention_backend": "triton"}}]
    hostvars["gpu1"]["sglang_args"] = {"enable_metrics": True}
    found = [(t, lab["sglang_instance"], lab["service"]) for t, lab in targets(scrape_configs("gw", hostvars, groups, SETTINGS), "sglang")]
    assert found[:2] == [("10.0.0.5:30001", "chat", "sglang-chat"), ("10.0.0.5:30002", "code", "sglang-code")]


def test_only_node_rank_0_of_a_multinode_instance_is_scraped(monkeypatch: pytest.MonkeyPatch) -> None:
    def instances(host: str, *_: Any) -> list[dict[str, Any]]:
        rank = {"gpu1": 0, "gpu2": 1}[host]
        return [{"name": "big", "service": "sglang", "scheme": "http", "listen_host": "0.0.0.0", "port": 30000,
                 "local_url": "http://127.0.0.1:30000", "url": f"http://{host}:30000", "node_rank": rank}]

    monkeypatch.setattr(monitoring, "server_instances", instances)
    hostvars, groups = fleet()
    assert [t for t, _ in targets(scrape_configs("gw", hostvars, groups, SETTINGS), "sglang")] == ["gpu1:30000"]


def test_https_servers_are_scraped_with_their_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    def instances(host: str, *_: Any) -> list[dict[str, Any]]:
        scheme = "https" if host == "gpu1" else "http"
        return [{"name": "sglang", "service": "sglang", "scheme": scheme, "listen_host": "0.0.0.0", "port": 30000,
                 "local_url": f"{scheme}://127.0.0.1:30000", "url": f"{scheme}://{host}.example:30000", "node_rank": 0,
                 "ca_file": "/etc/ssl/fleet-ca.pem" if scheme == "https" else ""}]

    monkeypatch.setattr(monitoring, "server_instances", instances)
    hostvars, groups = fleet()
    configs = scrape_configs("gw", hostvars, groups, SETTINGS)
    https = [c for c in configs if c["scheme"] == "https"]
    assert [c["job_name"] for c in https] == ["sglang", "sglang-ready"]
    assert all(c["tls_config"] == {"ca_file": "/etc/ssl/fleet-ca.pem"} for c in https)
    plain = [c for c in configs if c["job_name"] in ("sglang-2", "sglang-ready-2")]
    # the second scheme needs its own scrape configuration; the job label stays the job's
    assert [c["relabel_configs"] for c in plain] == [[{"target_label": "job", "replacement": "sglang"}],
                                                     [{"target_label": "job", "replacement": "sglang-ready"}]]
    override = scrape_configs("gw", hostvars, groups, {**SETTINGS, "tls_ca_file": "/etc/prometheus/ca.pem"})
    assert {c["tls_config"]["ca_file"] for c in override if "tls_config" in c} == {"/etc/prometheus/ca.pem"}


@pytest.mark.parametrize(("host", "variable", "value"), [
    ("gw", "sglang_router_prometheus_host", "127.0.0.1"),
    ("gpu2", "node_exporter_listen_host", "::1"),
    ("gpu2", "dcgm_exporter_listen_host", "localhost"),
])
def test_a_service_on_loopback_of_another_host_is_refused(host: str, variable: str, value: str) -> None:
    hostvars, groups = fleet()
    hostvars["gw"]["sglang_router_prometheus_host"] = "0.0.0.0"
    hostvars[host][variable] = value
    with pytest.raises(AnsibleFilterError) as info:
        scrape_configs("mon", {**hostvars, "mon": {}}, {**groups, "sglang_monitoring": ["mon"]}, SETTINGS)
    assert f"{host}: {variable} {value!r}: it listens on loopback only, out of reach of Prometheus on mon" in str(info.value)


def test_a_server_on_loopback_is_refused_for_another_monitoring_host() -> None:
    hostvars, groups = fleet(sglang_listen_host="127.0.0.1", sglang_api_key="")
    with pytest.raises(AnsibleFilterError, match="gpu2: sglang_listen_host '127.0.0.1': the SGLang server listens on loopback"):
        scrape_configs("gw", hostvars, groups, SETTINGS)


def test_a_server_on_loopback_is_scraped_by_a_prometheus_on_the_same_host() -> None:
    hostvars, groups = fleet(sglang_listen_host="127.0.0.1", sglang_api_key="")
    groups["sglang_monitoring"] = ["gpu2"]
    configs = scrape_configs("gpu2", hostvars, {**groups, "sglang_routers": []}, SETTINGS)
    assert [t for t, _ in targets(configs, "sglang")] == ["10.0.0.5:30000", "127.0.0.1:30000"]


@pytest.mark.parametrize(("change", "message"), [
    ({"ansible_host": "10.0.0.6 --bad"}, "gpu2: ansible_host '10.0.0.6 --bad'"),
    ({"node_exporter_port": 70000}, "gpu2: node_exporter_port 70000: 70000 is not a TCP port"),
    ({"node_exporter_port": True}, "gpu2: node_exporter_port True"),
    ({"dcgm_exporter_enabled": "maybe"}, "gpu2: dcgm_exporter_enabled 'maybe': it is not a boolean"),
    ({"node_exporter_listen_host": "a/b"}, "gpu2: node_exporter_listen_host 'a/b'"),
    ({"node_exporter_service_name": "x\ny"}, "gpu2: the service label 'x\\ny': it contains a line break"),
])
def test_bad_settings_are_refused_naming_the_variable(change: dict[str, Any], message: str) -> None:
    hostvars, groups = fleet()
    hostvars["gpu2"].update(change)
    with pytest.raises(AnsibleFilterError) as info:
        scrape_configs("gw", hostvars, groups, SETTINGS)
    assert message in str(info.value)


def test_a_bad_ca_override_and_unknown_defaults_are_refused() -> None:
    hostvars, groups = fleet()
    with pytest.raises(AnsibleFilterError, match="sglang_monitoring_tls_ca_file 'ca.pem'"):
        scrape_configs("gw", hostvars, groups, {**SETTINGS, "tls_ca_file": "ca.pem"})
    with pytest.raises(AnsibleFilterError, match="does not know the defaults node_exporter_typo"):
        scrape_configs("gw", hostvars, groups, {**SETTINGS, "defaults": {**DEFAULTS, "node_exporter_typo": 1}})


@given(st.text(max_size=40))
def test_an_accepted_address_is_a_host_name_or_an_ip_address(text: str) -> None:
    if address_problem(text) is None:
        assert re.fullmatch(r"[A-Za-z0-9_.:\[\]-]+", text), text


@given(st.text(min_size=1, max_size=30).filter(lambda t: monitoring.text_problem(t) is None))
def test_label_values_round_trip_through_the_yaml_written(service: str) -> None:
    hostvars, groups = fleet(node_exporter_service_name=service)
    configs = scrape_configs("gw", hostvars, groups, SETTINGS)
    assert yaml.safe_load(yaml.safe_dump(configs)) == configs
    assert targets(configs, "node")[1][1]["service"] == service


def test_each_gateway_is_given_node_0_of_every_instance_of_its_worker_group(monkeypatch: pytest.MonkeyPatch) -> None:
    hostvars, groups = fleet()
    [gateway] = gateway_workers("gw", hostvars, groups, SETTINGS)
    assert gateway == {"labels": {"job": "sglang-router", "host": "gw", "instance": "gw:29000", "service": "sglang-router"},
                       "workers": 2}
    # the labels are those of the gateway's scrape target
    [(_, labels)] = targets(scrape_configs("gw", hostvars, groups, SETTINGS), "sglang-router")
    assert {k: v for k, v in gateway["labels"].items() if k != "job"} == labels
    # its own worker group, and node 0 only of a multi-node instance
    hostvars["gw"]["sglang_router_worker_group"] = "pool"
    groups["pool"] = ["gpu1"]
    assert gateway_workers("gw", hostvars, groups, SETTINGS)[0]["workers"] == 1
    real = monitoring.server_instances
    monkeypatch.setattr(monitoring, "server_instances", lambda h, hv, g: [{**i, "node_rank": 1} for i in real(h, hv, g)])
    assert gateway_workers("gw", hostvars, groups, SETTINGS)[0]["workers"] == 0
    hostvars["gw"]["sglang_router_worker_group"] = 5
    with pytest.raises(AnsibleFilterError, match="sglang_router_worker_group"):
        gateway_workers("gw", hostvars, groups, SETTINGS)


# --- the rules file ----------------------------------------------------------------------------------------------


GATEWAY_WORKERS = {"labels": {"job": "sglang-router", "host": "gw", "instance": "gw:29000", "service": "sglang-router"},
                   "workers": 2}


def rules(**overrides: Any) -> dict[str, Any]:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    alert_for = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))["__sglang_monitoring_alert_for_defaults"]
    env = jinja2.Environment(variable_start_string="[[", variable_end_string="]]", undefined=jinja2.StrictUndefined)
    text = env.from_string((ROLE / "templates" / "sglang-rules.yml.j2").read_text(encoding="utf-8")).render(
        ansible_managed="managed", __sglang_monitoring_alert_for={**alert_for, **overrides.pop("alert_for", {})},
        __sglang_monitoring_gateway_workers=overrides.pop("gateway_workers", [GATEWAY_WORKERS]),
        **{**defaults, **overrides})
    return yaml.safe_load(text)


def test_every_alert_is_a_recorded_signal_compared_with_a_threshold() -> None:
    groups = rules()["groups"]
    recorded = {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    as_api = [{"rules": [{"type": "alerting", "name": a["alert"], "query": a["expr"]} for a in alerts]}]
    signals = promcheck.alert_signals(as_api)
    signal_records = {r for r in recorded if r.startswith("signal:")}
    assert {s for _, s, _, _ in signals} == signal_records, "every signal recorded, every signal: recording a signal"
    assert set(recorded) - signal_records == {"sglang_gateway:workers_expected"}
    assert {a for a, *_ in signals} == {
        "SGLangServerDown", "SGLangServerNotReady", "SGLangQueueGrowing", "SGLangSpeculativeAcceptanceCollapsed",
        "SGLangStartupRegressed",
        "SGLangRouterDown", "SGLangGatewayWorkersMissing", "SGLangGatewayErrors", "SGLangGatewayCircuitOpen",
        "GPUXidError", "GPUUncorrectableECCError", "GPUTemperatureHigh", "GPUThermalThrottling",
        "GPUPCIeLinkWidthDegraded", "GPUPCIeLinkGenDegradedUnderLoad", "MetricsExporterDown"}
    for alert in alerts:
        assert alert["labels"]["severity"] in ("critical", "warning")
        assert "{{ $labels.host }}" in alert["annotations"]["summary"]


def test_thresholds_and_durations_come_from_the_variables() -> None:
    alerts = {r["alert"]: r for g in rules(sglang_monitoring_spec_accept_length_min=1.2, sglang_monitoring_gpu_temperature_max=80,
                                           alert_for={"GPUPCIeLinkWidthDegraded": "10s"})["groups"]
              for r in g["rules"] if "alert" in r}
    assert alerts["SGLangSpeculativeAcceptanceCollapsed"]["expr"] == "signal:sglang_spec_accept_length < 1.2"
    assert alerts["GPUTemperatureHigh"]["expr"] == "signal:gpu_temperature_celsius > 80"
    assert alerts["GPUPCIeLinkWidthDegraded"]["for"] == "10s" and alerts["GPUXidError"]["for"] == "0s"


def test_each_gateway_has_its_expected_workers_recorded_with_its_target_labels() -> None:
    [group] = [g for g in rules()["groups"] if g["name"] == "sglang-gateway-workers"]
    assert group["rules"] == [{"record": "sglang_gateway:workers_expected", "expr": "vector(2)", "labels": GATEWAY_WORKERS["labels"]}]
    [group] = [g for g in rules(gateway_workers=[])["groups"] if g["name"] == "sglang-gateway-workers"]
    assert [r["expr"] for r in group["rules"]] == ["vector(0) < 0"]
    alerts = {r["alert"]: r for g in rules(sglang_monitoring_gateway_error_ratio_max=0.2)["groups"] for r in g["rules"] if "alert" in r}
    assert alerts["SGLangGatewayErrors"]["expr"] == "signal:sglang_gateway_error_ratio > 0.2"
    assert alerts["SGLangGatewayWorkersMissing"]["expr"] == "signal:sglang_gateway_workers_missing > 0"


def test_a_gpu_at_idle_never_counts_as_a_degraded_link_generation() -> None:
    recorded = {r["record"]: r["expr"] for g in rules()["groups"] for r in g["rules"] if "record" in r}
    assert ">= bool 50" in recorded["signal:gpu_pcie_link_gen_missing_under_load"]
    assert "WIDTH" in recorded["signal:gpu_pcie_link_width_missing_lanes"]


# --- the dashboard -----------------------------------------------------------------------------------------------

PANELS = {"Token throughput", "Requests per second", "Time to first token (TTFT)", "Inter-token latency (ITL)",
          "End-to-end request latency", "Queue", "KV cache use", "Speculative acceptance length", "Targets up",
          "GPU utilization", "GPU memory used", "GPU memory used (MiB)", "GPU temperature", "GPU power", "PCIe link width",
          "Gateway responses", "Gateway request latency", "Gateway workers", "Gateway circuit breakers"}
METRIC = re.compile(r"\b((?:sglang:|DCGM_FI_|smg_|sglang_gateway:)[A-Za-z0-9_:]+|up)\b")
# What the gateways export, as smg 1.13.0 and sglang-router 0.3.2 name it (both: smg_*; seen on their /metrics and
# in their wheels' Rust modules, which test_gateway_names_are_in_both_wheels reads when build/ has them), and the
# monitoring role's own recording rule of the workers each gateway is given.
GATEWAY_NAMES = {"smg_http_responses_total", "smg_router_request_duration_seconds", "smg_worker_health",
                 "smg_worker_cb_state"}
RECORDED = {"sglang_gateway:workers_expected"}


def test_the_dashboard_has_the_panels_of_the_docs() -> None:
    dashboard = json.loads(promcheck.DASHBOARD.read_text(encoding="utf-8"))
    titles = [p["title"] for p in dashboard["panels"] if p["type"] != "row"]
    assert set(titles) == PANELS and len(titles) == len(PANELS)
    # docs/monitoring.md (the README's Monitoring section before issue 33): its Dashboard and Alerts sections.
    page = (REPO / "docs" / "monitoring.md").read_text(encoding="utf-8")
    assert page.startswith("# Monitoring\n")
    section = page.split("\n## Dashboard\n", 1)[1].split("\n## Variables\n", 1)[0]
    for title in PANELS:
        assert f"**{title}**" in section, f"docs/monitoring.md does not describe the panel {title!r}"
    for alert, *_ in promcheck.alert_signals([{"rules": [{"type": "alerting", "name": r["alert"], "query": r["expr"]}
                                                         for g in rules()["groups"] for r in g["rules"] if "alert" in r]}]):
        assert f"`{alert}`" in section, f"docs/monitoring.md does not describe the alert {alert}"
    assert all(p["datasource"] == {"type": "prometheus", "uid": "${datasource}"} for p in dashboard["panels"] if p["type"] != "row")


def test_the_dashboard_uses_only_its_variables_and_exported_names() -> None:
    queries = promcheck.dashboard_queries() + promcheck.variable_queries()
    names = {m for _, expr in queries for m in METRIC.findall(expr)}
    exported = standin_names() | dcgm_names() | GATEWAY_NAMES | RECORDED | {"up"}
    assert names - {n.removesuffix("_bucket") for n in names} <= {n + "_bucket" for n in exported}
    assert {n.removesuffix("_bucket") for n in names} <= exported


def test_the_rules_use_only_exported_names() -> None:
    exprs = [r["expr"] for g in rules()["groups"] for r in g["rules"]]
    names = {m for e in exprs for m in METRIC.findall(e) if m.startswith(("smg_", "sglang_gateway:"))}
    assert names == GATEWAY_NAMES - {"smg_router_request_duration_seconds"} | RECORDED


@pytest.mark.parametrize("wheel", ["smg-1.13.0-", "sglang_router-0.3.2-"])
def test_gateway_names_are_in_both_wheels(wheel: str) -> None:
    """Every gateway series the rules and the dashboard read is in both gateways' Rust modules."""
    import zipfile

    found = sorted((REPO / "build" / "router-wheelhouse").glob(f"{wheel}*.whl"))
    if not found:
        pytest.skip(f"no {wheel}*.whl in build/router-wheelhouse (make router-wheelhouse)")
    with zipfile.ZipFile(found[0]) as whl:
        module = next(n for n in whl.namelist() if n.endswith(".abi3.so"))
        binary = whl.read(module)
    missing = {n for n in GATEWAY_NAMES if n.encode() not in binary}
    assert not missing, f"{found[0].name} does not export {missing}"


def test_sglang_names_are_sglang_0_5_23s() -> None:
    """The stand-in's names against SGLang's own metrics collector, when the pinned wheel is in .cache."""
    wheels = sorted((REPO / ".cache" / "sglang-wheels").glob("sglang-0.5.23-*.whl"))
    if not wheels:
        pytest.skip("the SGLang 0.5.23 wheel is not in .cache/sglang-wheels (make wheel)")
    import zipfile

    with zipfile.ZipFile(wheels[0]) as whl:
        source = whl.read("sglang/srt/observability/metrics_collector.py").decode()
    real = set(re.findall(r'name="(sglang:[a-z0-9_]+)"', source))
    assert standin_names() <= real, standin_names() - real


# --- the stand-in's /metrics and the fixture DCGM --------------------------------------------------------------


def exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text format: metric name -> [(labels, value)] (HELP/TYPE lines must precede their samples)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        found = re.fullmatch(r'([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        assert found, line
        name, labels, value = found.groups()
        family = re.sub(r"_(bucket|count|sum)$", "", name)
        assert family in typed or name in typed, f"{name} has no # TYPE"
        pairs = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', labels or ""))
        out.setdefault(name, []).append((pairs, float(value)))
    return out


def standin_names() -> set[str]:
    sys.path.insert(0, str(REPO / "tests/fixtures/sglang_standin/src"))
    from sglang._standin import metrics

    book = metrics.Metrics()
    book.started(8)
    book.finished(8, 8, 0.05, 0.12, True)
    return {re.sub(r"_(bucket|count|sum)$", "", n) for n in exposition(book.render("m", 2.5))}


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fake_dcgm = load("fake_dcgm", REPO / "tests/fixtures/aptrepo/payload/fake_dcgm.py")


def counters_file(tmp: Path) -> Path:
    text = jinja2.Template((REPO / "roles/dcgm_exporter/templates/dcgm-counters.csv.j2").read_text(encoding="utf-8")).render(
        ansible_managed="managed", dcgm_exporter_service_name="nvidia-dcgm-exporter",
        dcgm_exporter_extra_counters=[{"field": "DCGM_FI_PROF_SM_ACTIVE", "type": "gauge", "help": "SM active"}])
    (tmp / "counters.csv").write_text(text, encoding="utf-8")
    return tmp / "counters.csv"


def dcgm_names() -> set[str]:
    text = (REPO / "roles/dcgm_exporter/templates/dcgm-counters.csv.j2").read_text(encoding="utf-8")
    return set(re.findall(r"^(DCGM_FI_[A-Z0-9_]+), (?:gauge|counter)", text, re.M))


ROW = {"index": "0", "uuid": "GPU-1", "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "pci.bus_id": "00000000:01:00.0",
       "driver_version": "580.95.05", "pcie.link.width.current": "16", "pcie.link.width.max": "16", "pcie.link.gen.current": "1",
       "pcie.link.gen.max": "5", "utilization.gpu": "0", "memory.used": "0", "memory.free": "97000", "memory.reserved": "887",
       "temperature.gpu": "32", "temperature.memory": "[N/A]", "ecc.errors.uncorrected.volatile.total": "0",
       "persistence_mode": "Enabled", "retired_pages.pending": "[N/A]", "remapped_rows.pending": "No", "remapped_rows.failure": "No"}


def test_the_fixture_exporter_serves_dcgm_names_with_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    faults = tmp_path / "faults.json"
    monkeypatch.setattr(fake_dcgm, "FAULTS", str(faults))
    monkeypatch.setattr(fake_dcgm, "query", lambda fields: [dict(ROW)])
    counters = fake_dcgm.read_counters(str(counters_file(tmp_path)))
    metrics = exposition(fake_dcgm.render(counters))
    assert dcgm_names() - set(metrics) == {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
                                           "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_POWER_USAGE",
                                           "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                                           "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                                           "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"}  # not in ROW: blank, left out
    [(labels, width)] = metrics["DCGM_FI_DEV_PCIE_LINK_WIDTH"]
    assert width == 16 and labels["gpu"] == "0" and labels["UUID"] == "GPU-1" and labels["DCGM_FI_DRIVER_VERSION"] == "580.95.05"
    assert metrics["DCGM_FI_DEV_XID_ERRORS"][0][1] == 0
    faults.write_text(json.dumps({"gpus": {"*": {"DCGM_FI_DEV_XID_ERRORS": "79"}, "0": {"pcie.link.width.current": "8"}}}))
    assert exposition(fake_dcgm.render(counters))["DCGM_FI_DEV_XID_ERRORS"][0][1] == 79  # DCGM keys are the exporter's


def test_the_fixture_dcgmi_fails_the_software_test_like_dcgm() -> None:
    healthy = fake_dcgm.software_test([dict(ROW)])
    assert healthy == [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}]
    [bad] = fake_dcgm.software_test([{**ROW, "remapped_rows.pending": "Yes", "persistence_mode": "Disabled"}])
    assert bad["status"] == "Fail"
    assert [(w["error_id"], w["warning"]) for w in bad["warnings"]] == [
        (85, "GPU 0 had memory errors and row remappings are pending"), (29, "Persistence mode for GPU 0 is disabled.")]


def test_the_standin_exports_requests_as_sglang_does(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(["--enable-metrics", "--served-model-name", "qwen", "--speculative-algorithm", "NEXTN"], monkeypatch) as srv:
        before = exposition(urllib.request.urlopen(srv.url + "/metrics", timeout=5).read().decode())
        assert "sglang:spec_accept_length" not in before  # no sample before a request was decoded
        for stream in (False, True):
            body = json.dumps({"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "stream": stream}).encode()
            request = urllib.request.Request(srv.url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=10).read()
        after = exposition(urllib.request.urlopen(srv.url + "/metrics", timeout=5).read().decode())
    scheduler = {"model_name": "qwen", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    assert after["sglang:num_running_reqs"] == [(scheduler, 0.0)]
    assert after["sglang:spec_accept_length"][0][1] > 1
    requests = {labels["is_streaming"]: value for labels, value in after["sglang:num_requests_total"]}
    assert requests == {"false": 1.0, "true": 1.0}
    assert sum(v for _, v in after["sglang:generation_tokens_total"]) > 8
    assert [v for labels, v in after["sglang:time_to_first_token_seconds_count"]] == [1.0, 1.0]
    assert after["sglang:inter_token_latency_seconds_count"][0][1] > 0
    assert after["sglang:token_usage"][0][1] == 0.0


def test_without_speculative_decoding_the_acceptance_length_is_0(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(["--enable-metrics"], monkeypatch) as srv:
        metrics = exposition(urllib.request.urlopen(srv.url + "/metrics", timeout=5).read().decode())
    assert metrics["sglang:spec_accept_length"][0][1] == 0.0


# --- the roles' interfaces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["node_exporter", "dcgm_exporter", "sglang_monitoring"])
def test_argument_specs_document_every_default_with_its_value(role: str) -> None:
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8"))
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    options = specs["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, value in defaults.items():
        assert name.startswith(f"{role}_"), name
        if not (isinstance(value, str) and "{{" in value) and not (isinstance(value, list) and any("{{" in str(v) for v in value)):
            assert options[name]["default"] == value, name


def test_the_monitoring_role_reads_the_target_defaults_of_the_other_roles() -> None:
    """One source of truth: the keys the targets filter takes are those roles' defaults, with those values."""
    keys = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))["__sglang_monitoring_target_keys"]
    assert set(keys) == set(monitoring.DEFAULT_KEYS)
    found: dict[str, Any] = {}
    for role in ("node_exporter", "dcgm_exporter", "sglang_router"):
        found.update(yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8")))
    assert {k: found[k] for k in keys} == DEFAULTS


# --- workers behind their verifying TLS front (roles/sglang_worker_tls) ----------------------------------------
FRONT = {"sglang_worker_tls_client_ca_file": "/etc/ssl/sglang/clients-ca.pem",
         "sglang_worker_tls_cert_file": "/etc/ssl/sglang/server.pem", "sglang_worker_tls_key_file": "/etc/ssl/sglang/server.key",
         "sglang_tls_ca_file": "/etc/ssl/sglang/ca.pem"}
CLIENT = {"client_cert_file": "/etc/prometheus/client.pem", "client_key_file": "/etc/prometheus/client.key"}


def test_a_worker_behind_its_front_is_scraped_with_prometheus_client_certificate() -> None:
    hostvars, groups = fleet(**FRONT)
    configs = scrape_configs("gw", hostvars, groups, {**SETTINGS, **CLIENT})
    fronted = [c for c in configs if job_of(c) == "sglang" and c["scheme"] == "https"]
    assert [c["static_configs"][0]["targets"] for c in fronted] == [["10.0.0.6:30000"]]  # the front's, not the backend
    assert fronted[0]["tls_config"] == {"ca_file": "/etc/ssl/sglang/ca.pem", "cert_file": CLIENT["client_cert_file"],
                                        "key_file": CLIENT["client_key_file"]}
    plain = [c for c in configs if job_of(c) == "sglang" and c["scheme"] == "http"]
    assert [c["static_configs"][0]["targets"] for c in plain] == [["10.0.0.5:30000"]] and "tls_config" not in plain[0]


def test_a_worker_behind_its_front_without_a_client_certificate_is_refused_naming_it() -> None:
    hostvars, groups = fleet(**FRONT)
    with pytest.raises(AnsibleFilterError, match="sglang_monitoring_client_cert_file"):
        scrape_configs("gw", hostvars, groups, SETTINGS)
    with pytest.raises(AnsibleFilterError, match="sglang_monitoring_client_key_file"):
        scrape_configs("gw", hostvars, groups, {**SETTINGS, "client_cert_file": CLIENT["client_cert_file"]})


@given(st.text(max_size=40))
def test_an_untrusted_client_certificate_path_is_kept_or_refused_naming_it(value: str) -> None:
    hostvars, groups = fleet(**FRONT)
    settings = {**SETTINGS, "client_cert_file": value, "client_key_file": CLIENT["client_key_file"]}
    try:
        configs = scrape_configs("gw", hostvars, groups, settings)
    except AnsibleFilterError as exc:
        assert "sglang_monitoring_client_" in str(exc)
    else:
        [fronted] = [c for c in configs if job_of(c) == "sglang" and c["scheme"] == "https"]
        assert fronted["tls_config"]["cert_file"] == value
