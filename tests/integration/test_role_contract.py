"""Each role's first task (blackwell.sglang.check_inputs) through ansible-playbook: a role run alone refuses every
variable of its argument spec that breaks the input contract, naming it, before anything on the host changes;
its own defaults pass. The kinds themselves are tested in tests/unit/test_contract.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_contract import CONTRACT, PLANNED

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/tasks/main.yml"))


def _options(role: str) -> list[str]:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return list(specs["argument_specs"]["main"].get("options") or {})


def _bad(name: str) -> Any:
    """A value the variable's kind refuses: a line break reaches no unit, file or argv, whatever the kind."""
    kind = CONTRACT[name]
    if kind.spec_type == "list":
        return ["ok", "x\nExecStartPre=+/bin/sh"]
    if kind.spec_type == "dict":
        return {"X": "x\ny"}
    return "x\n[Service]\nUser=root"


def _playbook(tmp_path: Path, extra: dict[str, Any]) -> dict[str, Any]:
    """One play on localhost with every role's defaults and a check_inputs task per role; the json callback's
    result of each, by role."""
    tasks = [{"name": f"contract {role}", "blackwell.sglang.check_inputs": {"role_path": str(REPO / "roles" / role)},
              "ignore_errors": True} for role in ROLES]
    play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
             "vars_files": [str(REPO / "roles" / r / "defaults" / "main.yml") for r in ROLES
                            if (REPO / "roles" / r / "defaults" / "main.yml").exists()],
             "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json",
           "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", str(tmp_path / "play.yml"), "-e", f"@{tmp_path / 'extra.json'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    out = {}
    for task in report["plays"][0]["tasks"]:
        out[task["task"]["name"].removeprefix("contract ")] = task["hosts"]["localhost"]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[str]]]:
    good = _playbook(tmp_path_factory.mktemp("good"), {})
    bad_vars = {role: [n for n in _options(role) if n in CONTRACT and CONTRACT[n].check is not PLANNED.check
                       and CONTRACT[n].spec_type != "raw"] for role in ROLES}
    extra = {name: _bad(name) for names in bad_vars.values() for name in names}
    bad = _playbook(tmp_path_factory.mktemp("bad"), extra)
    return good, bad, bad_vars


@pytest.mark.parametrize("role", ROLES)
def test_the_roles_defaults_pass(role: str, runs: tuple[dict[str, Any], dict[str, Any], dict[str, list[str]]]) -> None:
    good, _, _ = runs
    assert not good[role].get("failed"), good[role].get("msg")


@pytest.mark.parametrize("role", ROLES)
def test_a_line_break_in_any_variable_is_refused_naming_it(
        role: str, runs: tuple[dict[str, Any], dict[str, Any], dict[str, list[str]]]) -> None:
    _, bad, bad_vars = runs
    result = bad[role]
    assert result.get("failed"), result
    named = {line.split(" ", 1)[0].rstrip(":") for line in result["problems"]}
    assert set(bad_vars[role]) <= named, sorted(set(bad_vars[role]) - named)


def test_every_role_checks_its_inputs_first() -> None:
    for role in ROLES:
        tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / "main.yml").read_text())
        assert "blackwell.sglang.check_inputs" in tasks[0], role
        assert "always" in tasks[0].get("tags", []), role


def test_the_gateway_role_refuses_what_a_gpu_host_would_hand_it(tmp_path: Path) -> None:
    """roles/sglang_router's first task (check_inputs, gateway: true) reads its workers' variables: a GPU host whose
    address would add a second worker to the router's list is refused there, naming the GPU host and the variable,
    and the gateway's key never shows."""
    key = "gateway-key-canary"
    inventory = {"all": {"children": {
        "sglang_routers": {"hosts": {"localhost": {"ansible_connection": "local", "sglang_router_api_key": key}}},
        "sglang_servers": {"hosts": {"gpu1": {"ansible_host": "10.0.0.5 http://evil.example:1",
                                              "sglang_api_key": key + "-other"}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    role = REPO / "roles" / "sglang_router"
    play = [{"hosts": "sglang_routers", "gather_facts": False, "vars_files": [str(role / "defaults" / "main.yml")],
             "tasks": [{"blackwell.sglang.check_inputs": {"role_path": str(role), "gateway": True}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-vvv"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "gpu1" in proc.stdout and "ansible_host" in proc.stdout and "sglang_api_key" in proc.stdout
    assert key not in proc.stdout + proc.stderr
