# SPDX-License-Identifier: Apache-2.0
"""The startup budget in the restart (issue 35 item 2): server_restart's action derives the ready wait's timeout from the
host's record of good starts and reports the start (the wait's wall time, SGLang's breakdown from /metrics); last_good
keeps it as the newest record; the plan names what a budget is learnt for. Neither the record nor the metrics cost a
round trip of their own (issue 31): the module's run reads the record, the probe that finds the server healthy reads
/metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.action import server_restart as restart_plugin
from ansible_collections.blackwell.sglang.plugins.action import wait_ready
from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_startup as su
from reference import host_with
from rendering import render
from test_merged_steps import HEALTHY, RESTARTED, WAIT, action
from test_restart_modules import load

KEY = {"model": "org/m", "revision": "abc", "release": "0.5.23", "host_class": "8xsm100"}
METRICS = "\n".join([
    'sglang:startup_time_seconds{model_name="m",engine_type="unified",phase="load_weight"} 30.0',
    'sglang:startup_time_seconds{model_name="m",engine_type="unified",phase="tokenizer_e2e"} 80.0',
    'sglang:startup_cuda_graph_time_seconds{model_name="m",engine_type="unified",phase="decode"} 9.5',
])


def restarted(history: Any) -> dict[str, Any]:
    """The module's answer when it read ``history`` from startup.record."""
    return {**RESTARTED, "startup_record": history}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_ready.display, "display", lambda *_a, **_k: None)


def test_the_wait_timeout_comes_from_the_last_good_start_and_the_start_is_reported() -> None:
    history = su.recorded(None, {**KEY, "seconds": 100})
    startup = {"key": KEY, "record": "/etc/sglang/last-good/startup.json", "metrics": True,
               "floor": 60, "factor": 2, "slack": 30}
    healthy = {**HEALTHY, "startup_breakdown": su.startup_breakdown(METRICS), "metrics_error": None}
    result, calls = action({"unit": "sglang.service", "wait": {**WAIT, "timeout": 3600}, "startup": startup},
                           [restarted(history), healthy])
    names = [name for name, _ in calls]
    assert names == ["blackwell.sglang.server_restart", "blackwell.sglang.server_probe"]  # one round trip each
    assert calls[0][1]["startup"] == {"record": "/etc/sglang/last-good/startup.json"} and "wait" not in calls[0][1]
    assert calls[1][1]["metrics"] is True and calls[1][1]["url"] == WAIT["url"]
    assert "startup_record" not in result  # the record is the action's input, not the task's result
    found = result["startup"]
    assert found["budget"]["timeout"] == 230 and found["budget"]["last"] == 100
    assert found["source"] == "metrics" and found["breakdown"]["weight_load_seconds"] == 30.0
    assert {k: found[k] for k in KEY} == KEY and isinstance(found["seconds"], float)


def test_without_a_record_or_metrics_the_operators_timeout_and_the_wall_time() -> None:
    startup = {"key": KEY, "record": "/etc/sglang/last-good/startup.json"}
    result, calls = action({"unit": "sglang.service", "wait": {**WAIT, "timeout": 1234}, "startup": startup},
                           [restarted(None), dict(HEALTHY)])
    assert len(calls) == 2 and not result.get("failed") and not calls[1][1].get("metrics")
    assert result["startup"]["budget"]["timeout"] == 1234 and result["startup"]["source"] == "wait"
    assert result["startup"]["breakdown"] is None


def test_a_garbled_record_is_ignored_and_budget_off_reads_nothing() -> None:
    startup = {"key": KEY, "record": "/r"}
    result, _ = action({"unit": "sglang.service", "wait": WAIT, "startup": startup},
                       [restarted(["not", "a", "record"]), dict(HEALTHY)])
    assert result["startup"]["budget"]["timeout"] == WAIT["timeout"]
    result, calls = action({"unit": "sglang.service", "wait": WAIT, "startup": {**startup, "budget": False}},
                           [dict(RESTARTED), dict(HEALTHY)])
    assert "startup" not in calls[0][1] and result["startup"]["budget"]["timeout"] == WAIT["timeout"]


def test_metrics_that_could_not_be_read_are_reported_and_the_wall_time_kept() -> None:
    startup = {"key": KEY, "record": "", "metrics": True}
    result, calls = action({"unit": "sglang.service", "wait": WAIT, "startup": startup},
                           [dict(RESTARTED), {**HEALTHY, "startup_breakdown": None, "metrics_error": "HTTP 404"}])
    assert "startup" not in calls[0][1]  # no record named: nothing to read
    assert result["startup"]["source"] == "wait" and result["startup"]["metrics_error"] == "HTTP 404"


def test_the_module_reads_the_record_and_the_probe_the_breakdown(tmp_path: Path) -> None:
    record = tmp_path / "startup.json"
    assert su.read_record(str(record)) is None and su.read_record("") is None  # none yet
    record.write_text(json.dumps(su.recorded(None, {**KEY, "seconds": 42})))
    assert su.usable_records(su.read_record(str(record)))[0]["seconds"] == 42
    record.write_bytes(b"\xff not json")
    assert su.read_record(str(record)) is None
    record.write_text(" " * (su.MAX_RECORD_BYTES + 1))
    assert su.read_record(str(record)) is None
    asked: list[Any] = []

    def get(answer: Any) -> Any:
        def fake(url: str, timeout: float) -> tuple[int, bytes]:
            asked.append((url, timeout))
            if isinstance(answer, Exception):
                raise answer
            return answer
        return fake

    breakdown, error = su.read_breakdown("https://h:30000/health", get((200, METRICS.encode())))
    assert error is None and breakdown["weight_load_seconds"] == 30.0 and asked[-1][0] == "https://h:30000/metrics"
    assert su.read_breakdown("http://h/health", get((404, b""))) == (None, "HTTP 404")
    assert su.read_breakdown("http://h/health", get(OSError("refused"))) == (None, "refused")
    assert su.read_breakdown("http://h/health", get((200, b"x" * (su.MAX_METRICS_BYTES + 1))))[0] is None
    assert su.read_breakdown("http://h/health", get((200, b"# no startup samples\n"))) == (None, None)


def test_a_wait_that_times_out_under_a_derived_budget_says_so() -> None:
    history = su.recorded(None, {**KEY, "seconds": 10})
    startup = {"key": KEY, "record": "/r", "floor": 1, "factor": 1, "slack": 0}
    clock = iter(float(n) for n in range(100))
    original = wait_ready.wait

    def fast_wait(args: dict[str, Any], probe: Any, **kwargs: Any) -> dict[str, Any]:
        return original(args, probe, clock=lambda: next(clock), **kwargs)

    pending = {"status": 503, "unit_state": {"ActiveState": "active"}, "log": ["loading"]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(restart_plugin, "wait", fast_wait)
        result, _ = action({"unit": "sglang.service", "wait": {**WAIT, "timeout": 3600}, "startup": startup},
                           [restarted(history), *[dict(pending) for _ in range(40)], {"log": []}])
    assert result["failed"] and "ready budget 10s" in result["msg"]


def test_a_bad_startup_option_is_refused_before_anything_runs() -> None:
    with pytest.raises(Exception, match="startup"):
        action({"unit": "sglang.service", "wait": WAIT, "startup": {"key": KEY, "factr": 2}}, [])


def test_last_good_keeps_the_start_as_the_newest_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    last_good = load("last_good")
    monkeypatch.setattr(last_good.os, "chown", lambda *_a: None)
    monkeypatch.setattr(last_good, "OWNER", (__import__("os").getuid(), __import__("os").getgid()))
    params = {"path": str(tmp_path / "lg"), "files": [], "remove": [], "venv": None,
              "startup": {**KEY, "seconds": 123.4, "source": "metrics", "breakdown": {"phases": {"load_weight": 3.0}},
                          "budget": {"timeout": 9}}}
    result = last_good.save(params, check_mode=False)
    assert result["saved"] == ["startup.json"] and result["startup"]["seconds"] == 123.4
    document = json.loads((tmp_path / "lg" / "startup.json").read_text())
    assert document["starts"][0]["breakdown"] == {"phases": {"load_weight": 3.0}} and "budget" not in document["starts"][0]
    again = last_good.save({**params, "startup": {**KEY, "release": "0.5.24", "seconds": 50}}, check_mode=False)
    assert again["saved"] == ["startup.json"]
    document = json.loads((tmp_path / "lg" / "startup.json").read_text())
    assert [r["release"] for r in document["starts"]] == ["0.5.24", "0.5.23"]
    # no start, or a start without seconds, leaves the record alone
    assert last_good.save({**params, "startup": {**KEY, "seconds": 0}}, check_mode=False)["saved"] == []
    assert last_good.save({**params, "startup": None}, check_mode=False)["startup"] is None


def test_the_plan_names_what_a_budget_is_learnt_for() -> None:
    plan = render(host_with()).context["__sglang_server_plan"]
    key = plan["startup_key"]
    assert set(key) == set(su.KEY_FIELDS) and key["release"] == plan["version"]
    assert key["model"] == plan["model"] and key["host_class"].endswith(plan["kernel_cache"]["key"].rsplit("_", 1)[1])
    assert key["host_class"].startswith(f"{len(plan['gpus'])}x")
    other = render(host_with(sglang_model_revision="0123456789abcdef")).context["__sglang_server_plan"]["startup_key"]
    assert other["revision"] == "0123456789abcdef" and other != key


def test_last_good_keeps_the_quality_gates_record_in_the_same_module_run(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    last_good = load("last_good")
    monkeypatch.setattr(last_good.os, "chown", lambda *_a: None)
    monkeypatch.setattr(last_good, "OWNER", (__import__("os").getuid(), __import__("os").getgid()))
    record = {"key": {"model": "org/m"}, "answers": [{"prompt": "2+2?", "answer": "4"}], "checksum": "abc"}
    params = {"path": str(tmp_path / "lg"), "files": [], "remove": [], "venv": None, "startup": None, "quality": record}
    first = last_good.save(params, check_mode=False)
    assert first["saved"] == ["quality.json"] and first["quality"] is True
    assert json.loads((tmp_path / "lg" / "quality.json").read_text()) == record
    assert (tmp_path / "lg" / "quality.json").stat().st_mode & 0o777 == 0o600
    assert last_good.save(params, check_mode=False)["saved"] == []  # the same record again changes nothing
    untouched = last_good.save({**params, "quality": None}, check_mode=False)
    assert untouched["saved"] == [] and untouched["quality"] is False and (tmp_path / "lg" / "quality.json").exists()
    assert "quality.json" in last_good.RESERVED  # never a file name of the files option


def test_the_probe_reads_the_breakdown_from_a_real_http_server() -> None:
    """server_probe's getter (open_url, the probe's TLS settings) against a real HTTP server: /metrics beside the health
    URL gives the breakdown; a server without it says why."""
    from http_answers import module, serving  # noqa: PLC0415 (only here)

    server_probe = module("server_probe")
    asked: list[str] = []

    def answer(request: Any) -> tuple[int, bytes]:
        asked.append(request.path)
        return (200, METRICS.encode()) if request.path == "/metrics" and len(asked) == 1 else (404, b"")

    with serving(answer) as port:
        health = f"http://127.0.0.1:{port}/health"
        breakdown, error = su.read_breakdown(health, server_probe.getter(None))
        assert error is None and breakdown["phases"]["tokenizer_e2e"] == 80.0 and breakdown["cuda_graph_seconds"] == 9.5
        assert su.read_breakdown(health, server_probe.getter(None)) == (None, "HTTP 404")
    assert asked == ["/metrics", "/metrics"]
