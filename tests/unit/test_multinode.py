"""Multi-node instances from inventory groups: layouts, rollout units and plans, validation across nodes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.sglang import multinode_layout, rollout_plan
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_multinode import (
    DEFAULT_PORT,
    LayoutError,
    host_layout,
    rollout_units,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_multinode import rollout_plan as plan_of
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from reference import load_reference
from test_action_plugin import report, run_action

REFERENCE = load_reference()


def inventory(**extra: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Six GPU hosts: a, b single; pair p1 p2 (group pair); trio t1 t2 t3 ... as needed."""
    hostvars: dict[str, dict[str, Any]] = {h: {} for h in ("a", "p1", "p2", "b", "t1", "t2", "t3")}
    for h in ("p1", "p2"):
        hostvars[h]["sglang_multinode_group"] = "pair"
    for h in ("t1", "t2", "t3"):
        hostvars[h]["sglang_multinode_group"] = "trio"
    for host, values in extra.items():
        hostvars[host].update(values)
    groups = {"all": list(hostvars), "sglang_servers": list(hostvars), "pair": ["p1", "p2"], "trio": ["t1", "t2", "t3"]}
    return hostvars, groups


def getter(hostvars: dict[str, dict[str, Any]]) -> Any:
    return lambda host, name: hostvars.get(host, {}).get(name)


# --- layouts ------------------------------------------------------------------------------------


def test_ranks_follow_the_group_order_and_share_the_first_hosts_address() -> None:
    hostvars, groups = inventory(p1={"ansible_host": "10.0.0.5"})
    first, second = (host_layout(h, getter(hostvars), groups) for h in ("p1", "p2"))
    assert first is not None and second is not None
    assert (first.node_rank, second.node_rank) == (0, 1)
    assert first.nnodes == second.nnodes == 2
    assert first.dist_init_addr == second.dist_init_addr == f"10.0.0.5:{DEFAULT_PORT}"
    assert first.as_dict() == {"group": "pair", "members": ["p1", "p2"], "nnodes": 2, "node_rank": 0,
                               "dist_init_addr": f"10.0.0.5:{DEFAULT_PORT}"}


def test_address_and_port_come_from_the_first_host() -> None:
    hostvars, groups = inventory(t1={"sglang_multinode_addr": "fd00::1", "sglang_multinode_port": "5000"},
                                 t3={"sglang_multinode_port": 6000, "ansible_host": "10.9.9.9"})
    layout = host_layout("t3", getter(hostvars), groups)
    assert layout is not None and layout.node_rank == 2 and layout.dist_init_addr == "[fd00::1]:5000"
    hostvars, groups = inventory()
    assert host_layout("t2", getter(hostvars), groups).dist_init_addr == f"t1:{DEFAULT_PORT}"  # type: ignore[union-attr]


def test_a_single_node_host_has_no_layout() -> None:
    hostvars, groups = inventory()
    assert host_layout("a", getter(hostvars), groups) is None


@pytest.mark.parametrize(
    ("change", "host", "words"),
    [
        ({"a": {"sglang_multinode_group": "nope"}}, "a", "does not have"),
        ({"a": {"sglang_multinode_group": "pair"}}, "a", "not a host of that group"),
        ({"p2": {"sglang_multinode_group": "trio"}}, "p1", "must all name its group"),
        ({"p2": {"sglang_multinode_group": None}}, "p1", "must all name its group"),
        ({"p1": {"sglang_multinode_port": "70000"}}, "p2", "TCP port"),
        ({"p1": {"sglang_multinode_port": "x"}}, "p1", "TCP port"),
    ],
)
def test_misdeclared_groups_are_named(change: dict[str, dict[str, Any]], host: str, words: str) -> None:
    hostvars, groups = inventory(**change)
    with pytest.raises(LayoutError) as err:
        host_layout(host, getter(hostvars), groups)
    assert words in err.value.message and err.value.fix


def test_a_group_of_one_host_is_refused() -> None:
    hostvars, groups = inventory()
    groups["pair"] = ["p1"]
    with pytest.raises(LayoutError, match="at least 2"):
        host_layout("p1", getter(hostvars), groups)


# --- rollout units and plans ----------------------------------------------------------------------


def test_units_keep_each_instance_together_in_rank_order() -> None:
    hostvars, groups = inventory()
    assert rollout_units(["p2", "a", "t3", "p1", "b", "t1", "t2"], getter(hostvars), groups) == [
        ["p1", "p2"], ["a"], ["t1", "t2", "t3"], ["b"]]
    # Hosts outside the run are left out of their unit (the validator refuses such a run).
    assert rollout_units(["a", "p2"], getter(hostvars), groups) == [["a"], ["p2"]]


@pytest.mark.parametrize(
    ("canary", "serial", "expected_canary", "expected_batches"),
    [
        (1, 1, ["a"], [2, 1, 3]),           # units after the canary: pair, b, trio
        (1, 2, ["a"], [3, 3]),
        (2, 1, ["a", "p1", "p2"], [1, 3]),  # the canary counts units: a and the pair
        (1, "50%", ["a"], [2, 1, 3]),       # 50% of 3 units = 1
        (1, "100%", ["a"], [6]),
        (1, [1, "100%"], ["a"], [2, 4]),
        ("1", "2", ["a"], [3, 3]),
        (1, [], ["a"], [6]),
    ],
)
def test_plan_counts_canary_and_serial_in_units(canary: Any, serial: Any, expected_canary: list[str],
                                                expected_batches: list[int]) -> None:
    hostvars, groups = inventory()
    plan = plan_of(["a", "p1", "p2", "b", "t1", "t2", "t3"], getter(hostvars), groups, canary, serial)
    assert plan["canary"] == expected_canary
    assert sum(plan["batches"]) == len(plan["rest"]) == 7 - len(expected_canary)
    assert plan["batches"] == expected_batches


def test_plan_refuses_bad_settings() -> None:
    hostvars, groups = inventory()
    with pytest.raises(ValueError, match="at least 1"):
        plan_of(["a"], getter(hostvars), groups, 0, 1)
    with pytest.raises(ValueError, match="neither a number"):
        plan_of(["a", "b"], getter(hostvars), groups, 1, "some")


def test_filters_wrap_the_same_functions() -> None:
    hostvars, groups = inventory()
    assert multinode_layout("p2", hostvars, groups)["node_rank"] == 1  # type: ignore[index]
    assert multinode_layout("a", hostvars, groups) is None
    assert rollout_plan(["b", "p1", "p2"], hostvars, groups)["batches"] == [2]
    limited = rollout_plan(["a", "p1", "p2", "b"], hostvars, groups, within=["b", "p2", "p1"])
    assert limited["canary"] == ["p1", "p2"] and limited["rest"] == ["b"]  # inventory order, not the limit's
    with pytest.raises(AnsibleFilterError, match="sglang_multinode_group"):
        multinode_layout("a", {**hostvars, "a": {"sglang_multinode_group": "nope"}}, groups)
    with pytest.raises(AnsibleFilterError, match="at least 1"):
        rollout_plan(["a"], hostvars, groups, canary=0)


# --- validation of one node -------------------------------------------------------------------------


def node(rank: int, nnodes: int = 2, args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    host = copy.deepcopy(REFERENCE)
    host["sglang_args"].update(args or {})
    host["sglang_multinode"] = {"group": "pair", "members": [f"n{i}" for i in range(nnodes)], "nnodes": nnodes,
                                "node_rank": rank, "dist_init_addr": "10.0.0.5:20000"}
    host.update(hostvars)
    return host


def test_the_derived_arguments_reach_the_argv() -> None:
    result = validate_host(node(1, args={"tp_size": 16}))
    assert result.ok, [p.message for p in result.errors]
    argv = result.argv
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.5:20000"
    assert result.gpu_ids == list(range(8))  # tp 16 over 2 nodes: 8 GPUs on each


def test_the_multinode_rules_apply_to_the_derived_values() -> None:
    result = validate_host(node(0, nnodes=3, args={"tp_size": 8}))  # 8 is not divisible by 3 nodes
    assert "parallel.nnodes" in {p.rule for p in result.errors}
    result = validate_host(node(0, args={"tp_size": 32}))  # 16 GPUs per node on an 8-GPU host
    assert "parallel.gpus" in {p.rule for p in result.errors}


@pytest.mark.parametrize("key", ["nnodes", "node_rank", "dist_init_addr", "node-rank"])
def test_typing_a_derived_argument_is_refused(key: str) -> None:
    value = "10.0.0.9:1" if "addr" in key else 1
    result = validate_host(node(0, args={"tp_size": 16, key: value}))
    problems = [p for p in result.errors if p.rule == "multinode.derived"]
    assert len(problems) == 1 and problems[0].variable == f"sglang_args.{key}"
    assert "pair" in problems[0].message and problems[0].fix == "remove it from sglang_args"


def test_the_rendezvous_port_must_not_be_the_server_port() -> None:
    result = validate_host(node(0, args={"tp_size": 16, "port": 20000}))
    assert [p.rule for p in result.errors] == ["multinode.port"]


# --- validation across the nodes (action plugin) ------------------------------------------------------


def fleet(**changes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    hostvars = {}
    for name in ("gpu-01", "mn-1", "mn-2"):
        host = copy.deepcopy(REFERENCE)
        if name.startswith("mn"):
            host["sglang_args"]["tp_size"] = 16
            host["sglang_multinode_group"] = "mn"
        host.update(changes.get(name, {}))
        hostvars[name] = host
    return hostvars, {"sglang_servers": list(hostvars), "mn": ["mn-1", "mn-2"]}


def test_two_nodes_get_ranks_0_and_1_and_one_address() -> None:
    hostvars, groups = fleet(**{"mn-1": {"ansible_host": "192.0.2.7"}})
    result = run_action(hostvars, groups=groups)
    assert not result.get("failed"), result["msg"]
    argvs = {h: result["hosts"][h]["argv"] for h in ("mn-1", "mn-2")}
    for rank, host in enumerate(("mn-1", "mn-2")):
        argv = argvs[host]
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert argv[argv.index("--dist-init-addr") + 1] == "192.0.2.7:20000"
    assert "--nnodes" not in result["hosts"]["gpu-01"]["argv"]


def test_a_run_with_part_of_an_instance_is_refused() -> None:
    hostvars, groups = fleet()
    result = run_action(hostvars, play_hosts=["gpu-01", "mn-2"], groups=groups)
    assert result["failed"] is True and result["invalid_hosts"] == ["mn-2"]
    assert "[multinode.partial]" in report(result) and "mn-1" in report(result) and "--limit mn" in report(result)


def test_nodes_of_one_instance_must_agree() -> None:
    hostvars, groups = fleet(**{"mn-2": {"sglang_args": {**REFERENCE["sglang_args"], "tp_size": 16,
                                                         "mem_fraction_static": 0.7}}})
    result = run_action(hostvars, groups=groups)
    assert result["invalid_hosts"] == ["mn-2"]
    assert "[multinode.mismatch]" in report(result) and "mem_fraction_static=0.7 vs 0.85" in report(result)
    # 0.5.22 has no lock in roles/sglang: unlocked, so that the release the nodes disagree on is the only problem.
    hostvars, groups = fleet(**{"mn-2": {"sglang_version": "0.5.22", "sglang_lock": False}})
    result = run_action(hostvars, groups=groups)
    assert result["invalid_hosts"] == ["mn-2"]
    assert result["hosts"]["mn-2"]["errors"] == ["sglang_version: multinode.mismatch"], report(result)


def test_hand_typed_nodes_are_refused_with_the_way_to_declare_them() -> None:
    hostvars, groups = fleet(**{"gpu-01": {"sglang_args": {**REFERENCE["sglang_args"], "tp_size": 16, "nnodes": 2,
                                                           "node_rank": 0, "dist_init_addr": "gpu-01:20000"}}})
    result = run_action(hostvars, groups=groups)
    assert result["invalid_hosts"] == ["gpu-01"]
    assert "[multinode.manual]" in report(result) and "sglang_multinode_group" in report(result)


def test_a_misdeclared_group_fails_its_host_with_the_fix() -> None:
    hostvars, groups = fleet(**{"gpu-01": {"sglang_multinode_group": "missing"}})
    result = run_action(hostvars, groups=groups)
    assert result["invalid_hosts"] == ["gpu-01"] and "[multinode.layout]" in report(result)


def test_node_0_behind_its_tls_front_agrees_with_node_1_on_the_instances_port() -> None:
    """roles/sglang_worker_tls: node 0 moves to loopback on its backend port, node 1 (no API, no front) keeps the
    instance's port; they agree. A node 1 on another port still disagrees."""
    front = {"sglang_worker_tls_client_ca_file": "/etc/ssl/sglang/clients-ca.pem", "sglang_listen_host": "0.0.0.0",
             "sglang_worker_tls_cert_file": "/etc/ssl/sglang/server.pem", "sglang_api_key": "k3y-value",
             "sglang_worker_tls_key_file": "/etc/ssl/sglang/server.key"}
    hostvars, groups = fleet(**{"mn-1": front, "mn-2": front})
    result = run_action(hostvars, groups=groups)
    assert not result.get("failed"), result["msg"]
    argvs = {h: result["hosts"][h]["argv"] for h in ("mn-1", "mn-2")}
    assert argvs["mn-1"][argvs["mn-1"].index("--port") + 1] == "31000" and "--port" not in argvs["mn-2"]
    hostvars["mn-2"]["sglang_args"] = {**hostvars["mn-2"]["sglang_args"], "port": 30001}
    result = run_action(hostvars, groups=groups)
    assert result["invalid_hosts"] == ["mn-2"] and "[multinode.mismatch]" in report(result)
