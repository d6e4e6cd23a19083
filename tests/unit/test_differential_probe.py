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
