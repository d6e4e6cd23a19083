# SPDX-License-Identifier: Apache-2.0
"""The startup budget (module_utils/sglang_startup.py, issue 35 item 2): the ready timeout from the last good start of
the same model, release and host class; the records kept on the host; SGLang's startup breakdown from /metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_startup as su
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
KEY = su.start_key("org/model", "abc123", "0.5.23", "8xsm100")


def history(*starts: dict[str, object]) -> dict[str, object]:
    doc: dict[str, object] = {}
    for start in reversed(starts):
        doc = su.recorded(doc, start)
    return doc


def start(seconds: float, **key: str) -> dict[str, object]:
    return {**KEY, **key, "seconds": seconds, "source": "wait"}


def test_nothing_known_waits_the_whole_cap() -> None:
    for known in (None, {}, {"starts": "x"}, history(start(100, model="other")), history(start(100, host_class="4xsm100")),
                  history(start(100, revision="def"))):
        budget = su.ready_timeout(known, KEY, cap=3600)
        assert budget["timeout"] == 3600 and budget["last"] is None


def test_the_last_good_start_of_the_same_key_sets_the_timeout() -> None:
    budget = su.ready_timeout(history(start(400)), KEY, cap=3600, floor=300, factor=2, slack=120)
    assert budget["timeout"] == 920 and budget["last"] == 400
    # a fast model still gets the floor
    assert su.ready_timeout(history(start(20)), KEY, cap=3600, floor=300, factor=2, slack=120)["timeout"] == 300
    # the operator's sglang_server_ready_timeout stays the upper bound
    capped = su.ready_timeout(history(start(3000)), KEY, cap=3600, floor=300, factor=2, slack=120)
    assert capped["timeout"] == 3600 and "capped" in capped["why"]


def test_an_upgrade_adds_the_first_start_allowance() -> None:
    known = history(start(400, release="0.5.22"))
    budget = su.ready_timeout(known, KEY, cap=7200, floor=300, factor=2, slack=120, first_start=1800)
    assert budget["timeout"] == 400 * 2 + 120 + 1800 and "first start" in budget["why"]
    # once the new release started well, its own start counts, without the allowance
    known = su.recorded(known, start(500))
    assert su.ready_timeout(known, KEY, cap=7200, floor=300, factor=2, slack=120, first_start=1800)["timeout"] == 1120


def test_records_are_one_per_key_newest_first_and_bounded() -> None:
    doc = history(start(400), start(300, release="0.5.22"))
    doc = su.recorded(doc, start(450))
    assert [(r["release"], r["seconds"]) for r in doc["starts"]] == [("0.5.23", 450.0), ("0.5.22", 300.0)]
    for n in range(20):
        doc = su.recorded(doc, start(100 + n, model=f"m{n}"))
    assert len(doc["starts"]) == su.MAX_RECORDS
    json.dumps(doc)  # what the host keeps is JSON


@settings(max_examples=200, deadline=None)
@given(doc=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)),
       cap=st.integers(1, 100000))
def test_any_document_on_the_host_gives_a_timeout_within_the_cap(doc: object, cap: int) -> None:
    budget = su.ready_timeout({"starts": [doc]} if not isinstance(doc, dict) else doc, KEY, cap=cap)
    assert isinstance(budget["timeout"], int) and 0 < budget["timeout"] <= cap


@settings(max_examples=100, deadline=None)
@given(seconds=st.floats(0.1, 1e5), cap=st.integers(1, 10**6), factor=st.floats(1, 10), slack=st.floats(0, 1e4))
def test_the_timeout_is_monotonic_in_the_last_start(seconds: float, cap: int, factor: float, slack: float) -> None:
    low = su.ready_timeout(history(start(seconds)), KEY, cap=cap, factor=factor, slack=slack)["timeout"]
    high = su.ready_timeout(history(start(seconds * 2)), KEY, cap=cap, factor=factor, slack=slack)["timeout"]
    assert low <= high <= cap


def test_the_breakdown_is_read_from_sglangs_metric_names_and_labels() -> None:
    text = "\n".join([
        "# HELP sglang:startup_time_seconds Engine startup duration by phase in seconds.",
        "# TYPE sglang:startup_time_seconds gauge",
        'sglang:startup_time_seconds{model_name="m",engine_type="unified",phase="load_weight"} 12.5',
        'sglang:startup_time_seconds{model_name="m",engine_type="unified",phase="kv_cache_allocation"} 1.0',
        'sglang:startup_time_seconds{model_name="m",engine_type="unified",phase="scheduler_e2e"} 40.0',
        'sglang:startup_time_seconds{model_name="m",engine_type="unified",phase="tokenizer_e2e"} 45.0',
        'sglang:startup_cuda_graph_time_seconds{model_name="m",engine_type="unified",phase="decode"} 8.0',
        'sglang:startup_cuda_graph_time_seconds{model_name="m",engine_type="unified",phase="prefill"} 0.0',
        'sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0"} 0.0',
        'sglang:startup_time_seconds{model_name="a\\"b",engine_type="unified",phase="load_weight"} NaN',
    ])
    found = su.startup_breakdown(text)
    assert found is not None
    assert found["phases"] == {"load_weight": 12.5, "kv_cache_allocation": 1.0, "scheduler_e2e": 40.0, "tokenizer_e2e": 45.0}
    assert found["cuda_graph"] == {"decode": 8.0, "prefill": 0.0} and found["cuda_graph_seconds"] == 8.0
    assert found["weight_load_seconds"] == 12.5 and found["weight_update_seconds"] is None
    assert su.startup_breakdown("sglang:num_running_reqs 0\n") is None
    assert su.startup_breakdown("") is None


def test_the_standin_exports_the_startup_metrics_as_sglang_does() -> None:
    sys.path.insert(0, str(REPO / "tests/fixtures/sglang_standin/src"))
    from sglang._standin import metrics  # pylint: disable=import-outside-toplevel

    class State:
        started = 0.0
        cfg: dict[str, object] = {}

    text = metrics.Metrics().render("m", None, startup=metrics.startup_figures(State(), load_seconds=3.0))
    found = su.startup_breakdown(text)
    assert found is not None and set(found["phases"]) == set(su.STARTUP_PHASES)
    assert set(found["cuda_graph"]) == set(su.CUDA_GRAPH_PHASES)
    assert found["weight_load_seconds"] == 3.0
    # like SGLang, no weight-update sample before a weight update
    assert not su.samples(text, [su.WEIGHT_UPDATE_METRIC])
    for name, labels, _ in su.samples(text, [su.STARTUP_METRIC, su.CUDA_GRAPH_METRIC]):
        assert set(labels) == {"model_name", "engine_type", "phase"}, name
