"""Drift (issue 35, playbooks/drift.yml): what an instance runs against its plan (plugin_utils/sglang_drift.py).

The comparison itself, property by property; then the reference host's own plan served by the stand-in SGLang
(in-process, its /server_info) is "as planned" (no false alarm), and the same server started with one argument changed
is flagged naming that argument.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_drift import (
    INFO_KEYS,
    args_hash,
    fleet_table,
    instance_drift,
    planned_args,
    probe_keys,
    same,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import plan_host
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import SECRET_MARKER
from hypothesis import given
from hypothesis import strategies as st
from reference import host_with
from role_defaults import ROLE_DEFAULTS
from standin_inproc import serve

HOST = "blackwell-01"
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


def plan_of(args: dict[str, Any], version: str = "0.5.23") -> dict[str, Any]:
    return {"name": "sglang", "service": "sglang", "version": version, "args": args, "endpoint": {"node_rank": 0}}


def healthy(info: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "info": {"version": "0.5.23", "weight_version": "default", **info}, "node_rank": 0}


@given(JSON)
def test_a_value_is_the_same_as_itself_and_as_its_json_text(value: Any) -> None:
    assert same(value, value)
    if isinstance(value, (dict, list)):
        assert same(value, json.dumps(value)) and same(json.dumps(value), value)


@given(st.integers(-2**50, 2**50))
def test_an_integral_float_is_its_integer(number: int) -> None:
    if abs(number) < 2**53:  # where a float holds every integer
        assert same(number, float(number)) and same(float(number), number)
    assert not same(number, number + 1)


@pytest.mark.parametrize(("planned", "running", "ok"), [
    ("NEXTN", "EAGLE", True), ("EAGLE", "FROZEN_KV_MTP", True), ("NEXTN", "NEXTN", True), ("EAGLE3", "EAGLE", False),
    ("NEXTN", "DFLASH", False),
])
def test_what_sglang_resolves_an_explicit_value_to_is_no_drift(planned: str, running: str, ok: bool) -> None:
    record = instance_drift(plan_of({"speculative_algorithm": planned}), healthy({"speculative_algorithm": running}), False)
    assert record["drift"] is not ok
    assert (record["args_planned"] == record["args_running"]) is ok


@pytest.mark.parametrize(("planned", "running"), [
    (True, 1), (False, 0), (0, None), ("", None), ([1, 2], [2, 1]), ({"a": 1}, {"a": 1, "b": 2}), ("triton", "fa3"),
    (0.8, 0.85),
])
def test_values_that_differ_are_not_the_same(planned: Any, running: Any) -> None:
    assert not same(planned, running)


def test_secret_and_ignored_arguments_are_neither_read_nor_compared() -> None:
    plan = plan_of({"api_key": SECRET_MARKER, "tp_size": 4, "mem_fraction_static": 0.8, "page_size": None})
    assert planned_args(plan) == {"tp_size": 4, "mem_fraction_static": 0.8}
    assert probe_keys(plan, ["mem_fraction_static"]) == sorted(["tp_size", *INFO_KEYS])
    record = instance_drift(plan, healthy({"tp_size": 4, "mem_fraction_static": 0.7}), False, ["mem_fraction_static"])
    assert not record["drift"], record


def test_an_argument_that_differs_is_drift_naming_it_with_both_values() -> None:
    plan = plan_of({"tp_size": 4, "max_running_requests": 64})
    record = instance_drift(plan, healthy({"tp_size": 4, "max_running_requests": 32}), False)
    assert record["drift"] and record["differs"] == [{"arg": "max_running_requests", "planned": 64, "running": 32}]
    assert record["reasons"] == ["arguments differ: max_running_requests planned 64 running 32"]
    assert record["args_planned"] != record["args_running"]
    same_args = instance_drift(plan, healthy({"tp_size": 4, "max_running_requests": 64}), False)
    assert not same_args["drift"] and same_args["args_planned"] == same_args["args_running"]


@pytest.mark.parametrize(("probe", "files", "reason"), [
    ({"status": -1, "info": None, "info_error": "connection refused", "node_rank": 0}, False,
     "not serving (health -1): connection refused"),
    (healthy({"tp_size": 4, "version": "0.5.22"}), False, "release 0.5.22 (planned 0.5.23)"),
    (healthy({"tp_size": 4}), True, "installed files differ from the plan"),
])
def test_not_serving_another_release_or_other_files_are_drift(probe: dict[str, Any], files: bool, reason: str) -> None:
    record = instance_drift(plan_of({"tp_size": 4}), probe, files)
    assert record["drift"] and any(r.startswith(reason) for r in record["reasons"]), record


def test_a_node_other_than_0_is_judged_by_its_files_only() -> None:
    probe = {"status": None, "info": None, "node_rank": 1}
    assert not instance_drift(plan_of({"tp_size": 8}), probe, False)["drift"]
    assert instance_drift(plan_of({"tp_size": 8}), probe, True)["reasons"][0].startswith("installed files differ")


def test_the_fleet_table_has_one_aligned_line_per_instance() -> None:
    plan = plan_of({"tp_size": 4})
    records = {"b": [instance_drift(plan, healthy({"tp_size": 2}), False)],
               "a": [instance_drift(plan, healthy({"tp_size": 4}), False)]}
    header, first, second = fleet_table(records)
    assert header.startswith("host") and first.startswith("a ") and second.startswith("b ")
    assert first.endswith("as planned") and "DRIFT: arguments differ: tp_size planned 4 running 2" in second
    assert first.index(args_hash({"tp_size": 4})) == second.index(args_hash({"tp_size": 4}))


def _server_info(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/server_info", context=ssl.create_default_context(), timeout=5) as answer:  # noqa: S310
        return json.loads(answer.read())


@pytest.mark.parametrize("changed", [None, ("--max-running-requests", "7", "max_running_requests")])
def test_the_reference_plan_served_by_the_stand_in_is_as_planned_and_a_changed_flag_is_flagged(
        monkeypatch: pytest.MonkeyPatch, changed: tuple[str, str, str] | None) -> None:
    hostplan = plan_host(HOST, {HOST: host_with({"max_running_requests": 64})}, {"all": [HOST]}, role_defaults=ROLE_DEFAULTS)
    [instance] = hostplan.instances
    plan = instance.public()
    argv = list(plan["argv"])
    if changed is not None:
        flag, value, _ = changed
        argv[argv.index(flag) + 1] = value
    with serve(argv, monkeypatch) as srv:
        info = _server_info(srv.url)
    keys = probe_keys(plan)
    record = instance_drift(plan, {"status": 200, "info": {k: info.get(k) for k in keys}, "node_rank": 0}, False)
    if changed is None:
        assert not record["drift"], record["reasons"]
    else:
        assert record["drift"] and [d["arg"] for d in record["differs"]] == [changed[2]]
