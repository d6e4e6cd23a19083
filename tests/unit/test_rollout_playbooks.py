"""Safe by default (issue 13): every playbook that restarts servers on more than one host goes through
roles/sglang_rollout, canary first, then serial batches, stopping at the first failure.

The playbooks' structure is read as YAML; the rollout plan they compute (playbooks/vars/rollout.yml) is
evaluated by ansible-playbook on the control node (a debug task, no host contacted).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
ROLE = REPO / "roles" / "sglang_rollout"
SAMPLE_HOST = yaml.safe_load((REPO / "inventory" / "sample" / "host_vars" / "blackwell-01.yml").read_text())
RESTARTING = ["deploy.yml", "restart.yml", "rollout.yml"]
GPU_ROLES = {"nvidia_driver", "cuda_toolkit", "sglang", "sglang_server", "sglang_rollout"}


def plays(name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((PLAYBOOKS / name).read_text())


def roles_of(play: dict[str, Any]) -> list[str]:
    return [r if isinstance(r, str) else r["role"] for r in play.get("roles") or []]


@pytest.mark.parametrize("name", RESTARTING)
def test_validation_comes_first(name: str) -> None:
    assert plays(name)[0] == {"name": "Validate SGLang launch configuration", "ansible.builtin.import_playbook": "validate.yml"}


@pytest.mark.parametrize("name", RESTARTING)
def test_gpu_hosts_go_canary_then_serial_batches_through_the_rollout_role(name: str) -> None:
    gpu = [p for p in plays(name)[1:] if GPU_ROLES & set(roles_of(p))]
    assert [p["hosts"] for p in gpu] == ["{{ __rollout_canary_hosts }}", "{{ __rollout_rest_hosts }}"]
    canary, rest = gpu
    assert "serial" not in canary and rest["serial"] == "{{ sglang_rollout_plan.batches }}"
    for play in gpu:
        assert play["max_fail_percentage"] == 0
        assert play["vars_files"] == ["vars/rollout.yml"]
        assert roles_of(play)[-1] == "sglang_rollout", "the restarts go through the rollout role"
        assert "sglang_server" not in roles_of(play), "roles/sglang_server's main tasks restart without a drain"
        assert not play.get("tasks") and not play.get("pre_tasks") and not play.get("post_tasks"), "a thin role list"
    assert roles_of(canary) == roles_of(rest)
    # No other play touches the GPU hosts' servers.
    others = [p for p in plays(name)[1:] if p not in gpu]
    for play in others:
        assert not GPU_ROLES & set(roles_of(play))
        for task in play.get("tasks") or []:
            role = (task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role") or {})
            assert role.get("tasks_from") in (None, "confirm.yml"), task


def test_deploy_provisions_inside_the_batches_after_the_routers() -> None:
    deploy = plays("deploy.yml")
    assert [roles_of(p) for p in deploy[1:]] == [
        ["sglang_router"], *[["nvidia_driver", "cuda_toolkit", "sglang", "gpu_health", "sglang_worker_tls", "sglang_rollout"]] * 2]
    assert deploy[1]["hosts"] == "sglang_routers"


def test_restart_restarts_every_instance_unless_told_otherwise() -> None:
    for play in plays("restart.yml")[1:]:
        assert play["vars"]["sglang_rollout_force_restart"] == "{{ force_restart | default(true) }}"
    for name in ("deploy.yml", "rollout.yml"):
        for play in plays(name)[1:]:
            assert "sglang_rollout_force_restart" not in (play.get("vars") or {})
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["sglang_rollout_force_restart"] == "{{ force_restart | default(false) }}"


def test_only_rollout_asks_for_confirmation() -> None:
    confirming = [n for n in RESTARTING if "confirm.yml" in (PLAYBOOKS / n).read_text()]
    assert confirming == ["rollout.yml"]


def test_the_playbooks_and_the_role_share_the_defaults() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    plan = (PLAYBOOKS / "vars" / "rollout.yml").read_text()
    canary = re.search(r"rollout_canary \| default\(([^)]*)\)", defaults["sglang_rollout_canary"]).group(1)
    serial = re.search(r"rollout_serial \| default\((.*)\)", defaults["sglang_rollout_serial"]).group(1)
    assert (canary, serial) == ("1", "['25%']")
    assert f"canary=rollout_canary | default({canary})" in plan
    assert plan.count(f"rollout_serial | default({serial})") == 1  # once: the filter handles "100%"


def test_argument_specs_document_every_default() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(defaults) == set(specs)


def inventory(tmp_path: Path, hosts: list[str], pair: list[str] | None = None) -> Path:
    inv = tmp_path / "inventory"
    (inv / "host_vars").mkdir(parents=True)
    for host in hosts + (pair or []):
        (inv / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(SAMPLE_HOST))
    servers: dict[str, Any] = {"hosts": {h: {} for h in hosts}}
    if pair:
        servers["children"] = {"pair": {"hosts": {h: {} for h in pair}, "vars": {
            "sglang_multinode_group": "pair", "ansible_host": "10.1.2.3",
            "sglang_args": {**SAMPLE_HOST["sglang_args"], "tp_size": 16}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": servers}}}))
    return inv


def plan(tmp_path: Path, inv: Path, *args: str) -> dict[str, Any]:
    """sglang_rollout_plan as playbooks/vars/rollout.yml computes it, for the given -e / --limit arguments."""
    book = tmp_path / "plan.yml"
    book.write_text(yaml.safe_dump([{
        "name": "Show the plan", "hosts": "localhost", "gather_facts": False,
        "vars_files": [str(PLAYBOOKS / "vars" / "rollout.yml")],
        "tasks": [{"name": "Plan", "ansible.builtin.debug": {"var": "sglang_rollout_plan"}}]}]))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), "-i", "localhost,",
                           "-c", "local", str(book), *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["sglang_rollout_plan"]


def test_default_plan_is_a_canary_then_quarter_batches(tmp_path: Path) -> None:
    hosts = [f"gpu-{i:02d}" for i in range(1, 10)]
    inv = inventory(tmp_path, hosts)
    assert plan(tmp_path, inv) == {"canary": ["gpu-01"], "rest": hosts[1:], "batches": [2, 2, 2, 2]}
    small = plan(tmp_path, inv, "--limit", "gpu-01,gpu-02,gpu-03,gpu-04,localhost")
    assert small == {"canary": ["gpu-01"], "rest": ["gpu-02", "gpu-03", "gpu-04"], "batches": [1, 1, 1]}


def test_all_at_once_needs_rollout_serial_100_percent(tmp_path: Path) -> None:
    hosts = [f"gpu-{i:02d}" for i in range(1, 5)]
    inv = inventory(tmp_path, hosts)
    assert plan(tmp_path, inv, "-e", "rollout_serial=100%") == {"canary": [], "rest": hosts, "batches": [4]}
    # The list form keeps the canary.
    assert plan(tmp_path, inv, "-e", '{"rollout_serial": ["100%"]}') == {"canary": hosts[:1], "rest": hosts[1:], "batches": [3]}
    assert plan(tmp_path, inv, "-e", "rollout_serial=2", "-e", "rollout_canary=2") == {
        "canary": hosts[:2], "rest": hosts[2:], "batches": [2]}


def test_a_multinode_instance_is_one_unit_in_one_batch(tmp_path: Path) -> None:
    inv = inventory(tmp_path, ["gpu-a", "gpu-b"], pair=["gpu-m1", "gpu-m2"])
    assert plan(tmp_path, inv, "-e", "rollout_serial=1") == {
        "canary": ["gpu-a"], "rest": ["gpu-b", "gpu-m1", "gpu-m2"], "batches": [1, 2]}


def restarts(names: list[str], due: list[str], force: bool, only: Any) -> list[str]:
    """__sglang_rollout_restart for a host with instances ``names`` (roles/sglang_rollout/vars/main.yml)."""
    from rendering import _evaluate, jinja_env

    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    context: dict[str, Any] = {"__sglang_rollout_names": names, "__sglang_rollout_due": due,
                               "sglang_rollout_force_restart": force, "sglang_rollout_instances": only}
    env = jinja_env()
    env.filters["bool"] = bool  # Ansible's, for the booleans used here
    for name in ("__sglang_rollout_only", "__sglang_rollout_restart"):
        context[name] = _evaluate(env, variables[name], context)
    return context["__sglang_rollout_restart"]


@pytest.mark.parametrize(("due", "force", "only", "expected"), [
    (["code"], False, [], ["code"]),  # deploy / rollout: the due ones
    ([], True, [], ["chat", "code"]),  # restart.yml: all of them
    ([], True, "chat", ["chat"]),  # restart.yml -e rollout_instances=chat
    ([], True, " code, chat ", ["chat", "code"]),  # host order, spaces ignored
    (["code"], False, ["chat"], []),  # only chat, which is not due
    ([], True, ["other"], []),  # a name this host does not run
])
def test_rollout_instances_picks_instances(due: list[str], force: bool, only: Any, expected: list[str]) -> None:
    assert restarts(["chat", "code"], due, force, only) == expected


@pytest.mark.parametrize("name", ["deploy.yml", "restart.yml", "rollout.yml"])
def test_the_gpu_health_gate_runs_right_before_every_rollout_of_a_server(name: str) -> None:
    # A host joins the routers only through sglang_rollout, and only after its GPUs passed the gate (and its verifying
    # TLS front, roles/sglang_worker_tls, is up: the gateways reach it through the front).
    gpu = [p for p in plays(name)[1:] if "sglang_rollout" in roles_of(p)]
    assert gpu, name
    for play in gpu:
        names = roles_of(play)
        assert names[-3:] == ["gpu_health", "sglang_worker_tls", "sglang_rollout"], (name, names)
