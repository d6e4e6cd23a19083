"""differential.probe: the fuzzer's payload split over several SGLang probes, every answer kept once."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
import differential  # noqa: E402


@pytest.mark.parametrize(("entries", "jobs"), [(7, 1), (7, 2), (7, 3), (2, 4), (0, 2)])
def test_probe_splits_and_merges(monkeypatch: pytest.MonkeyPatch, entries: int, jobs: int) -> None:
    calls: list[list[str]] = []
    lock = threading.Lock()

    def fake(payload: list[dict[str, Any]], timeout: int = 0) -> dict[str, Any]:
        with lock:
            calls.append([p["id"] for p in payload])
        return {"results": [{"id": p["id"], "status": "accepted", "seen": p["args"]} for p in payload]}

    monkeypatch.setattr(differential, "run_sglang_probe", fake)
    payload = [{"id": f"c{i}", "args": {"n": i}} for i in range(entries)]
    answers = differential.probe(payload, jobs)
    assert sorted(answers) == sorted(p["id"] for p in payload)
    assert all(answers[p["id"]]["seen"] == p["args"] for p in payload)
    # Every entry went to exactly one probe, and no probe ran empty.
    sent = [cid for call in calls for cid in call]
    assert sorted(sent) == sorted(answers) and all(calls)
    assert len(calls) == min(max(1, jobs), entries)


def test_cached_probe_reuses_answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """SGLang's answers are kept by probe input: a second run probes only what is new, and every answer comes back
    under the id it was asked with."""
    probed: list[str] = []

    def fake(payload: list[dict[str, Any]], timeout: int = 0) -> dict[str, Any]:
        probed.extend(p["id"] for p in payload)
        return {"results": [{"id": p["id"], "status": "rejected" if p["args"].get("bad") else "accepted"}
                            for p in payload]}

    monkeypatch.setattr(differential, "run_sglang_probe", fake)
    store = tmp_path / "answers.jsonl"
    first = [{"id": "a", "args": {"bad": True}}, {"id": "b", "args": {}}]
    assert {k: v["status"] for k, v in differential.cached_probe(first, 2, store).items()} == \
        {"a": "rejected", "b": "accepted"}
    assert sorted(probed) == ["a", "b"]
    probed.clear()
    again = [{"id": "a2", "args": {"bad": True}}, {"id": "c", "args": {"new": 1}}]
    answers = differential.cached_probe(again, 2, store)
    assert probed == ["c"]
    assert answers["a2"] == {"id": "a2", "status": "rejected"} and answers["c"]["status"] == "accepted"
    assert len(store.read_text().splitlines()) == 3
    probed.clear()
    differential.cached_probe(again, 1, None)
    assert sorted(probed) == ["a2", "c"]


def _parser_of(schema: Any) -> Any:
    """An argparse parser with the switches of ``schema`` (SGLang's own kinds: store_true, BooleanOptionalAction)."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser()
    for spec in schema.arguments.values():
        if spec.action == "BooleanOptionalAction":
            parser.add_argument(spec.flag, dest=spec.dest, action=argparse.BooleanOptionalAction, default=None)
        elif spec.is_switch:
            parser.add_argument(*spec.option_strings, dest=spec.dest, action="store_true")
    return parser


@pytest.mark.parametrize("value", [True, False])
def test_probe_renders_switches_as_our_renderer(value: bool) -> None:
    """The probe hands SGLang the argv our renderer writes for a switch, true or false: a tri-state switch's false is
    its --no- spelling (memory_hook.py:40 reads `ple_offload_embedding is False`), not dropped (SGLang's None), a
    store_true switch's false is no flag at all."""
    import sglang_probe  # noqa: PLC0415
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import load_schema  # noqa: PLC0415
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import render_argv  # noqa: PLC0415

    schema = load_schema("0.5.23")
    options = sglang_probe._option_strings(_parser_of(schema))  # noqa: SLF001
    tri = [d for d, s in schema.arguments.items() if s.action == "BooleanOptionalAction"]
    plain = [d for d, s in schema.arguments.items() if s.is_switch and s.action != "BooleanOptionalAction"]
    assert len(tri) >= 10 and "ple_offload_embedding" in tri and len(plain) > 100
    for dest in tri + plain:
        ours = render_argv(schema, {"model_path": "m", dest: value})
        assert sglang_probe.render_argv("m", {dest: value}, options) == ours, dest


def test_probe_hands_an_unknown_key_to_argparse_whatever_its_value() -> None:
    import sglang_probe  # noqa: PLC0415

    assert sglang_probe.render_argv("m", {"no_such_flag": False}, {}) == ["--model-path", "m", "--no-such-flag"]
