"""Drift (issue 35, playbooks/drift.yml): what an instance runs against its plan (plugin_utils/sglang_drift.py).

The comparison itself, property by property; then the reference host's own plan served by the stand-in SGLang
(in-process, its /server_info) is "as planned" (no false alarm), and the same server started with one argument changed
is flagged naming that argument.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_drift import (
    INFO_KEYS,
    args_hash,
    fleet_drift,
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


CHECKSUM_KEY = {"model": "m", "revision": "r1", "host_class": "8xsm100", "layout": "tp_size=8", "release": "0.5.23"}


def checked(name: str, checksum: str, key: dict[str, str] | None = None, startup: float | None = None) -> dict[str, Any]:
    """A healthy instance's record as instance_drift makes it, with its weights checksum (and last good start)."""
    plan = {**plan_of({"tp_size": 8}), "name": name,
            "startup_key": {"model": "m", "revision": "r1", "release": "0.5.23", "host_class": "8xsm100"}}
    probe = {**healthy({"tp_size": 8}), "weights_checksum": checksum,
             "startup": None if startup is None else {"seconds": startup, "release": "0.5.23", "at": "", "source": ""}}
    record = instance_drift(plan, probe, False)
    if key is not None:
        record["checksum_key"] = key
    return record


def test_a_record_carries_the_weights_checksum_its_key_and_the_last_good_start() -> None:
    record = checked("sglang", "ab" * 32, startup=41.5)
    assert record["weights_checksum"] == "ab" * 32 and record["checksum_key"] == CHECKSUM_KEY
    assert record["startup"]["seconds"] == 41.5 and not record["drift"]
    # Not healthy: no checksum is taken from the probe, and a probe without one has no key.
    down = instance_drift(plan_of({"tp_size": 8}), {"status": -1, "info": None, "weights_checksum": "x", "node_rank": 0},
                          False)
    assert down["weights_checksum"] is None and down["checksum_key"] is None
    unread = instance_drift(plan_of({"tp_size": 8}), {**healthy({"tp_size": 8}), "weights_error": "HTTP 400"}, False)
    assert unread["weights_checksum"] is None and unread["weights_error"] == "HTTP 400" and not unread["drift"]


def test_the_fleet_flags_the_instance_whose_weights_checksum_differs_naming_both() -> None:
    good, bad = "aa" * 32, "bb" * 32
    fleet = fleet_drift({"gpu1": [checked("sglang", good)], "gpu2": [checked("sglang", good)],
                         "gpu3": [checked("sglang", bad)]})
    assert [r["drift"] for h in ("gpu1", "gpu2", "gpu3") for r in fleet[h]] == [False, False, True]
    [reason] = fleet["gpu3"][0]["reasons"]
    assert reason.startswith(f"weights checksum {bad[:12]} differs from gpu1 sglang ({good[:12]}), gpu2 sglang ({good[:12]})")
    assert "same model revision (m@r1, release 0.5.23)" in reason
    # Two that disagree: each is flagged, naming the other.
    given = {"gpu1": [checked("sglang", good)], "gpu2": [checked("sglang", bad)]}
    pair = fleet_drift(given)
    assert "gpu2 sglang" in pair["gpu1"][0]["reasons"][0] and "gpu1 sglang" in pair["gpu2"][0]["reasons"][0]
    assert given["gpu1"][0]["reasons"] == [] and not given["gpu1"][0]["drift"]  # the records given are not changed


@pytest.mark.parametrize("field", ["model", "revision", "host_class", "layout", "release"])
def test_checksums_of_another_model_revision_release_layout_or_host_class_are_not_compared(field: str) -> None:
    other = {**CHECKSUM_KEY, field: "other"}
    fleet = fleet_drift({"gpu1": [checked("sglang", "aa" * 32, CHECKSUM_KEY)],
                         "gpu2": [checked("sglang", "bb" * 32, other)]})
    assert not any(r["drift"] for records in fleet.values() for r in records), fleet


def test_the_fleet_table_shows_release_arguments_hash_weights_checksum_and_startup_time() -> None:
    fleet = fleet_drift({"gpu1": [checked("sglang", "aa" * 32, startup=41.5)], "gpu2": [checked("sglang", "bb" * 32)]})
    header, first, second = fleet_table(fleet)
    assert header.split()[:9] == ["host", "instance", "release", "args", "(plan/running)", "weights", "checksum",
                                  "startup", "state"]
    assert first.split()[:7] == ["gpu1", "sglang", "0.5.23", args_hash({"tp_size": 8}), "default", "aa" * 6, "41.5s"]
    assert second.split()[:7] == ["gpu2", "sglang", "0.5.23", args_hash({"tp_size": 8}), "default", "bb" * 6, "-"]
    assert "DRIFT: weights checksum bbbbbbbbbbbb differs from gpu1 sglang (aaaaaaaaaaaa)" in second
    assert first.index("aa" * 6) == second.index("bb" * 6) and header.index("checksum") == first.index("aa" * 6)


def test_the_drift_probe_reads_health_server_info_weights_and_the_last_good_start(tmp_path: Path) -> None:
    """drift_probe's one module run against a real HTTP server and a startup.json on disk."""
    from http_answers import module, serving  # noqa: PLC0415 (only here)

    drift_probe = module("drift_probe")
    asked: list[tuple[str, str | None]] = []
    answers = {"/ready": (200, b""),
               "/server_info": (200, json.dumps({"version": "0.5.23", "tp_size": 8, "api_key": "secret"}).encode()),
               "/weights_checker": (200, json.dumps({"success": True, "message": "", "per_engine_checksum": "cd" * 32}).encode())}

    def answer(request: Any) -> tuple[int, bytes]:
        asked.append((request.path, request.headers.get("Authorization")))
        return answers.get(request.path, (404, b""))

    key = {"model": "m", "revision": "r1", "release": "0.5.23", "host_class": "8xsm100"}
    record = tmp_path / "startup.json"
    record.write_text(json.dumps({"schema": 1, "starts": [
        {**key, "release": "0.5.22", "seconds": 90.0}, {**key, "seconds": 41.5, "at": "t", "source": "metrics"}]}))
    with serving(answer) as port:
        base = f"http://127.0.0.1:{port}"
        status, _, error = drift_probe.get_json(f"{base}/ready", api_key="k", timeout=5)
        assert (status, error) == (200, "not JSON: Expecting value: line 1 column 1 (char 0)")
        _, info, _ = drift_probe.get_json(f"{base}/server_info", api_key="k", timeout=5)
        assert info["tp_size"] == 8
        _, weights, _ = drift_probe.get_json(f"{base}/weights_checker", api_key="admin", timeout=5)
        assert drift_probe.checksum_of(weights) == ("cd" * 32, None)
        assert drift_probe.get_json(f"{base}/nothing", api_key=None, timeout=5) == (404, None, "HTTP 404")
    assert asked[-2] == ("/weights_checker", "Bearer admin") and asked[-1] == ("/nothing", None)
    assert drift_probe.checksum_of({"success": False, "message": "not supported"}) == (None, "no checksum: not supported")
    assert drift_probe.last_start(json.loads(record.read_text()), key) == {"seconds": 41.5, "release": "0.5.23", "at": "t",
                                                                           "source": "metrics"}
    assert drift_probe.last_start(json.loads(record.read_text()), {**key, "release": "0.5.24"}) is None
    assert drift_probe.last_start(None, key) is None
    assert drift_probe.base_url("https://127.0.0.1:30000/ready") == "https://127.0.0.1:30000"
