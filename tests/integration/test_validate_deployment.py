"""playbooks/validate.yml over a whole deployment (GPU hosts, a gateway, a monitoring host), as a user runs it: the
simulated fleet's own configuration passes; a value injected into any host's variables, of every class issue 30
names, is refused naming the variable and the host, and nothing is rendered. The same inventory layout as molecule's
fleet scenario (its group_vars), with a monitoring host added."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAYOUT = {"sglang_servers": ["gpu1", "gpu2"], "sglang_routers": ["gw"], "sglang_monitoring": ["mon"]}


def inventory(tmp_path: Path, host_vars: dict[str, dict[str, Any]]) -> Path:
    inv = tmp_path / "inventory"
    shutil.copytree(REPO / "inventory" / "fleet-sim" / "group_vars", inv / "group_vars")
    (inv / "host_vars").mkdir()
    for hosts in LAYOUT.values():
        for host in hosts:
            (inv / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(host_vars.get(host, {}) or {"bsa_host": host}))
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {
        group: {"hosts": {h: {} for h in hosts}} for group, hosts in LAYOUT.items()}}}))
    return inv


def validate(tmp_path: Path, inv: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """rc, the validate task's per-host result, and the report text."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["ansible-playbook", "-i", str(inv), str(REPO / "playbooks" / "validate.yml"), *extra],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    [task] = [t for t in report["plays"][0]["tasks"] if t["task"]["name"].startswith("Validate every host")]
    result = next(iter(task["hosts"].values()))
    return proc.returncode, result, result.get("report", "")


def test_the_simulated_fleet_with_a_gateway_and_a_monitoring_host_passes(tmp_path: Path) -> None:
    rc, result, report = validate(tmp_path, inventory(tmp_path, {}))
    assert rc == 0, report
    assert sorted(result["hosts"]) == ["gpu1", "gpu2", "gw", "mon"]


# (host, variable, value, the variable the refusal names): one injection per class of issue 30.
INJECTIONS = [
    ("gw", "sglang_router_prometheus_host", "127.0.0.1\nExecStartPre=+/bin/sh -c id\nUser=root",
     "sglang_router_prometheus_host"),
    ("gw", "sglang_router_extra_args", ["--host", "0.0.0.0"], "sglang_router_extra_args[0]"),
    ("gw", "sglang_router_extra_args", ["--api-key", "k"], "sglang_router_extra_args[0]"),
    ("gw", "sglang_router_user", "root", "sglang_router_user"),
    ("gw", "sglang_router_group", "docker", "sglang_router_group"),
    ("gw", "sglang_router_service_name", "ssh", "sglang_router_service_name"),
    ("gpu1", "sglang_router_worker_url", "http://10.0.0.5:30000\nLD_PRELOAD=/tmp/x.so", "sglang_router_worker_url"),
    ("gpu1", "ansible_host", "10.0.0.5 http://evil.example:1", "ansible_host"),
    ("gpu1", "sglang_models_dir", "/etc/sudoers.d", "sglang_models_dir"),
    ("gpu1", "sglang_server_state_dir", "/usr/local/libexec/sglang", "sglang_server_state_dir"),
    ("gpu1", "sglang_server_model_path", "/etc/ssl/private", "sglang_server_model_path"),
    ("gpu1", "sglang_server_user", "ubuntu", "sglang_server_user"),
    ("gpu1", "sglang_server_group", "shadow", "sglang_server_group"),
    ("gpu1", "sglang_server_service_name", "systemd-journald", "sglang_server_service_name"),
    ("gpu1", "sglang_listen_host", "localhost.attacker.example", "sglang_listen_host"),
    ("gpu2", "node_exporter_port", 30000, "node_exporter_port"),  # alone: it compares the plan's ports
    ("gpu1", "sglang_proxy_env", {"LD_PRELOAD": "/tmp/x.so"}, "sglang_proxy_env"),
    ("mon", "sglang_monitoring_listen_host", "0.0.0.0 --web.enable-admin-api", "sglang_monitoring_listen_host"),
    ("mon", "sglang_monitoring_config_file", "/etc/prometheus/../shadow", "sglang_monitoring_config_file"),
]


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[str]]:
    """One validate run per host, every injection of that host at once: host -> the variables its errors name."""
    out: dict[tuple[str, str], list[str]] = {}
    for host in {h for h, *_ in INJECTIONS}:
        tmp = tmp_path_factory.mktemp(host)
        changes = {var: value for h, var, value, _ in INJECTIONS if h == host}
        if host == "gpu1" and "sglang_listen_host" in changes:  # the fleet's key would make the listener legitimate
            changes["sglang_api_key"] = ""
        rc, result, report = validate(tmp, inventory(tmp, {host: changes}), "-e", f"render_dir={tmp / 'plan'}")
        assert rc != 0 and not (tmp / "plan").exists(), report
        for failed, data in result["hosts"].items():
            out[(host, failed)] = [line.split(": ")[0] for line in data.get("errors", [])]
        assert "LD_PRELOAD=/tmp/x.so" not in report.replace("\\n", "\n").split("ERROR")[0]
    return out


@pytest.mark.parametrize(("host", "variable", "value", "named"), INJECTIONS, ids=[f"{h}-{v}" for h, v, *_ in INJECTIONS])
def test_an_injected_value_is_refused_naming_the_variable(
        refused: dict[tuple[str, str], list[str]], host: str, variable: str, value: Any, named: str) -> None:
    assert named in refused[(host, host)], refused[(host, host)]


def test_a_gateway_refuses_what_it_would_render_from_a_gpu_hosts_variables(refused: dict[tuple[str, str], list[str]]) -> None:
    """The worker URL a GPU host injects is refused on the gateway too (it renders it), naming the GPU host's variable."""
    assert {"sglang_router_worker_url", "ansible_host"} <= set(refused[("gpu1", "gw")]), refused[("gpu1", "gw")]


def test_a_misspelled_variable_is_named_with_the_one_meant(tmp_path: Path) -> None:
    """A variable with a role's prefix that no role reads (a typo) passes today's run unnoticed otherwise: it is a
    warning naming it and the closest variables (issue 33's silent pass)."""
    rc, result, report = validate(tmp_path, inventory(tmp_path, {"gpu2": {"sglang_arg": {"tp_size": 4}},
                                                                "gw": {"sglang_router_prot": 30001}}))
    assert rc == 0, report
    def warned(host: str) -> list[tuple[str, str]]:
        return [(w["variable"], w["rule"]) for w in result["hosts"][host]["warnings"]]

    assert ("sglang_arg", "input.unknown") in warned("gpu2")
    assert "did you mean sglang_args" in report
    assert ("sglang_router_prot", "input.unknown") in warned("gw")
