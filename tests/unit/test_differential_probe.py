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
