# SPDX-License-Identifier: Apache-2.0
"""The startup budget in the restart (issue 35 item 2): server_restart's action derives the ready wait's timeout from the
host's record of good starts and reports the start (the wait's wall time, SGLang's breakdown from /metrics); last_good
keeps it as the newest record; the plan names what a budget is learnt for."""

from __future__ import annotations

import base64
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


def slurped(document: Any) -> dict[str, Any]:
    return {"content": base64.b64encode(json.dumps(document).encode()).decode(), "encoding": "base64"}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_ready.display, "display", lambda *_a, **_k: None)


def test_the_wait_timeout_comes_from_the_last_good_start_and_the_start_is_reported() -> None:
    history = su.recorded(None, {**KEY, "seconds": 100})
    startup = {"key": KEY, "record": "/etc/sglang/last-good/startup.json", "metrics": True,
               "floor": 60, "factor": 2, "slack": 30}
    result, calls = action({"unit": "sglang.service", "wait": {**WAIT, "timeout": 3600}, "startup": startup},
                           [slurped(history), dict(RESTARTED), dict(HEALTHY), {"status": 200, "content": METRICS}])
    names = [name for name, _ in calls]
    assert names == ["ansible.builtin.slurp", "blackwell.sglang.server_restart", "blackwell.sglang.server_probe",
                     "ansible.builtin.uri"]
    assert "startup" not in calls[1][1] and "wait" not in calls[1][1]
    assert calls[0][1] == {"src": "/etc/sglang/last-good/startup.json"}
    assert calls[3][1]["url"] == "http://127.0.0.1:30000/metrics"
    found = result["startup"]
    assert found["budget"]["timeout"] == 230 and found["budget"]["last"] == 100
    assert found["source"] == "metrics" and found["breakdown"]["weight_load_seconds"] == 30.0
    assert {k: found[k] for k in KEY} == KEY and isinstance(found["seconds"], float)


def test_without_a_record_or_metrics_the_operators_timeout_and_the_wall_time() -> None:
    startup = {"key": KEY, "record": "/etc/sglang/last-good/startup.json"}
    missing = {"failed": True, "msg": "file not found: /etc/sglang/last-good/startup.json"}
    result, calls = action({"unit": "sglang.service", "wait": {**WAIT, "timeout": 1234}, "startup": startup},
                           [missing, dict(RESTARTED), dict(HEALTHY)])
    assert len(calls) == 3 and not result.get("failed")
    assert result["startup"]["budget"]["timeout"] == 1234 and result["startup"]["source"] == "wait"
    assert result["startup"]["breakdown"] is None


def test_a_garbled_record_is_ignored_and_budget_off_reads_nothing() -> None:
    startup = {"key": KEY, "record": "/r"}
    result, _ = action({"unit": "sglang.service", "wait": WAIT, "startup": startup},
                       [{"content": "not base64 !!"}, dict(RESTARTED), dict(HEALTHY)])
    assert result["startup"]["budget"]["timeout"] == WAIT["timeout"]
    result, calls = action({"unit": "sglang.service", "wait": WAIT, "startup": {**startup, "budget": False}},
                           [dict(RESTARTED), dict(HEALTHY)])
    assert calls[0][0] == "blackwell.sglang.server_restart" and result["startup"]["budget"]["timeout"] == WAIT["timeout"]


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
                           [slurped(history), dict(RESTARTED), *[dict(pending) for _ in range(40)], {"log": []}])
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
