"""The quality gate of a restart (issue 35 item 4): module_utils/sglang_quality's comparison, and
blackwell.sglang.chat_probe's quality option against the SGLang stand-in served in-process (its deterministic answers,
its /weights_checker in SGLang 0.5.23's shape, and the stand-in's switches that make a server "regress")."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_quality as q
from hypothesis import given
from hypothesis import strategies as st
from standin_inproc import REPO, serve, standin

_spec = importlib.util.spec_from_file_location(
    "chat_probe_quality", REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/chat_probe.py")
chat_probe: ModuleType = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(chat_probe)  # type: ignore[union-attr]

_, _, proc = standin()
KEY = {"model": "org/m", "revision": "abc", "release": "0.5.23", "host_class": "8xsm120", "layout": "tp_size=8"}
PROMPTS = ["What is 2+2?", "Name the capital of France."]


def record_of(outcome: dict[str, Any]) -> dict[str, Any]:
    """The record as the host keeps it (JSON), read back."""
    record, why = q.load(json.dumps(outcome["record"]))
    assert why is None
    return record


def test_first_start_records_and_passes() -> None:
    empty, why = q.load(None)
    assert why is None
    outcome = q.compare(empty, KEY, {"a": "1"}, "c" * 64)
    assert outcome["status"] == "recorded" and outcome["differences"] == []
    assert "recorded, passed" in outcome["summary"]
    again = q.compare(record_of(outcome), KEY, {"a": "1"}, "c" * 64)
    assert again["status"] == "passed" and again["compared"] == {"answers": 1, "checksum": True, "fleet": 0}


def test_a_different_answer_fails_and_names_the_whole_prompt() -> None:
    prompt = "Continue the sequence with the next number only, 2, 4, 8, 16, and nothing else at all"
    record = record_of(q.compare(q.load(None)[0], KEY, {prompt: " 32"}, None))
    [difference] = q.compare(record, KEY, {prompt: " 31"}, None)["differences"]
    assert json.dumps(prompt) in difference["detail"]
    long_answer = "x" * 200
    record = record_of(q.compare(q.load(None)[0], KEY, {"a": long_answer}, None))
    [difference] = q.compare(record, KEY, {"a": "y"}, None)["differences"]
    assert '"' + "x" * q.SHOWN + '..."' in difference["detail"]


def test_a_different_answer_fails_and_names_the_prompt() -> None:
    record = record_of(q.compare(q.load(None)[0], KEY, {"What is 2+2?": " four", "b": "x"}, None))
    outcome = q.compare(record, KEY, {"What is 2+2?": " five", "b": "x"}, None)
    assert outcome["status"] == "failed"
    [difference] = outcome["differences"]
    assert difference["what"] == "answer"
    assert '"What is 2+2?"' in difference["detail"] and '" four"' in difference["detail"] and '" five"' in difference["detail"]
    assert "release 0.5.23" in difference["detail"]
    assert outcome["summary"].startswith("quality gate failed (answer)")


def test_answers_are_compared_across_releases_the_checksum_is_not() -> None:
    record = record_of(q.compare(q.load(None)[0], KEY, {"a": "1"}, "c" * 64))
    upgrade = {**KEY, "release": "0.5.24"}
    outcome = q.compare(record, upgrade, {"a": "1"}, "d" * 64)
    assert outcome["status"] == "passed", outcome["summary"]
    assert outcome["compared"] == {"answers": 1, "checksum": False, "fleet": 0}
    assert "first start of this release" in outcome["summary"]
    regressed = q.compare(record, upgrade, {"a": "2"}, "d" * 64)
    assert regressed["status"] == "failed" and [d["what"] for d in regressed["differences"]] == ["answer"]


def test_a_different_checksum_of_the_same_release_fails() -> None:
    record = record_of(q.compare(q.load(None)[0], KEY, {"a": "1"}, "c" * 64))
    outcome = q.compare(record, KEY, {"a": "1"}, "d" * 64)
    assert outcome["status"] == "failed"
    assert [d["what"] for d in outcome["differences"]] == ["weights_checksum"]
    assert "cccccccccccccccc" in outcome["summary"] and "dddddddddddddddd" in outcome["summary"]


def test_another_layout_or_revision_starts_a_new_record() -> None:
    record = record_of(q.compare(q.load(None)[0], KEY, {"a": "1"}, "c" * 64))
    for changed in ({"layout": "tp_size=4"}, {"revision": "def"}, {"model": "org/other"}, {"host_class": "4xsm100"}):
        outcome = q.compare(record, {**KEY, **changed}, {"a": "2"}, "d" * 64)
        assert outcome["status"] == "recorded", changed
        assert len(outcome["record"]["answers"]) == 2 and outcome["record"]["answers"][0]["answers"] == {"a": "2"}


def test_the_fleet_checksum_of_the_same_key_must_match() -> None:
    empty = q.load(None)[0]
    canary = q.compare(empty, KEY, {"a": "1"}, "c" * 64)
    fleet = [{"host": "gpu-01", "instance": "sglang", "key": canary["key"], "checksum": "c" * 64},
             {"host": "gpu-09", "instance": "sglang", "key": {**canary["key"], "checksum": {"other": "key"}},
              "checksum": "e" * 64}]
    same = q.compare(empty, KEY, {"a": "1"}, "c" * 64, fleet)
    assert same["status"] == "passed" and same["compared"]["fleet"] == 1
    other = q.compare(empty, KEY, {"a": "1"}, "d" * 64, fleet)
    assert other["status"] == "failed"
    [difference] = other["differences"]
    assert difference["what"] == "fleet_weights_checksum" and "gpu-01 sglang" in difference["detail"]


def test_a_new_prompt_is_recorded_not_judged() -> None:
    record = record_of(q.compare(q.load(None)[0], KEY, {"a": "1"}, None))
    outcome = q.compare(record, KEY, {"a": "1", "b": "2"}, None)
    assert outcome["status"] == "passed" and outcome["compared"]["answers"] == 1
    assert outcome["record"]["answers"][0]["answers"] == {"a": "1", "b": "2"}


@pytest.mark.parametrize("text", ["{", "[]", '{"schema": 99}', '{"schema": 1, "answers": 3}'])
def test_an_unreadable_record_reads_as_empty(text: str) -> None:
    record, why = q.load(text)
    assert record["answers"] == [] and record["checksums"] == []
    assert why is not None or text.startswith('{"schema": 1')


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=12, unique=True))
def test_the_record_keeps_the_newest_records_only(layouts: list[str]) -> None:
    record = q.load(None)[0]
    for layout in layouts:
        record = record_of(q.compare(record, {**KEY, "layout": layout}, {"a": layout}, layout))
    assert len(record["answers"]) == min(len(layouts), q.MAX_RECORDS)
    assert record["answers"][0]["key"]["layout"] == layouts[-1]
    assert len(record["checksums"]) == min(len(layouts), q.MAX_RECORDS)


def test_layout_reads_the_weight_layout_arguments_only() -> None:
    assert q.layout({"tp_size": 8, "quantization": "modelopt_fp4", "mem_fraction_static": 0.85, "dtype": None,
                     "enable_dp_attention": False}) == "tp_size=8,quantization=modelopt_fp4"


# chat_probe's quality option against the stand-in.

@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "FAULTS_FILE", str(tmp_path / "faults.env"))
    for var in ("SGLANG_STANDIN_ANSWER_SALT", "SGLANG_STANDIN_WEIGHTS_SALT", "http_proxy", "https_proxy",
                "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        chat_probe.main()
    out = capsys.readouterr().out
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def gate(srv: Any, record: Path, fleet: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"url": srv.url, "model": "m", "max_tokens": 4, "use_proxy": False, **extra,
            "quality": {"prompts": PROMPTS, "max_tokens": 8, "record": str(record), "key": KEY, "fleet": fleet or []}}


def test_the_gate_records_then_passes_then_catches_changed_answers_and_weights(tmp_path, monkeypatch, capsys):
    record = tmp_path / "quality.json"
    with serve(["--tp-size", "2"], monkeypatch) as srv:
        first = run_module(capsys, **gate(srv, record))
        assert not first.get("failed"), first.get("msg")
        assert first["quality"]["status"] == "recorded" and len(first["quality"]["checksum"]) == 64
        assert all(first["quality"]["answers"][p] for p in PROMPTS)
        record.write_text(json.dumps(first["quality"]["record"]), encoding="utf-8")  # what finish.yml keeps
        again = run_module(capsys, **gate(srv, record))
        assert again["quality"]["status"] == "passed", again["quality"]["summary"]
        assert again["quality"]["answers"] == first["quality"]["answers"]  # temperature 0: the same answers

        (tmp_path / "faults.env").write_text("ANSWER_SALT=regressed\n", encoding="utf-8")
        answers = run_module(capsys, **gate(srv, record))
        assert answers["failed"] and answers["quality"]["status"] == "failed"
        assert "quality gate failed (answer)" in answers["msg"] and PROMPTS[0] in answers["msg"]

        (tmp_path / "faults.env").write_text("WEIGHTS_SALT=other-shards\n", encoding="utf-8")
        weights = run_module(capsys, **gate(srv, record))
        assert weights["failed"] and "quality gate failed (weights_checksum)" in weights["msg"]

        fleet = [{"host": "gpu-01", "instance": "sglang", "key": first["quality"]["key"],
                  "checksum": first["quality"]["checksum"]}]
        record.unlink()
        across = run_module(capsys, **gate(srv, record, fleet))
        assert across["failed"] and "differs from gpu-01 sglang's" in across["msg"]


def test_the_weights_checker_needs_the_key_and_the_admin_key_when_set(tmp_path, monkeypatch, capsys):
    record = tmp_path / "quality.json"
    with serve(["--api-key", "k1", "--admin-api-key", "sk-admin-93xq"], monkeypatch) as srv:
        refused = run_module(capsys, **gate(srv, record, api_key="k1"))
        assert refused["failed"] and "/weights_checker: HTTP 401" in refused["msg"]
        allowed = run_module(capsys, **gate(srv, record, api_key="k1", admin_api_key="sk-admin-93xq"))
        assert not allowed.get("failed"), allowed.get("msg")
        assert "sk-admin-93xq" not in json.dumps(allowed)
