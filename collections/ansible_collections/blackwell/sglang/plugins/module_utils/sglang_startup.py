# SPDX-License-Identifier: Apache-2.0
"""The startup budget (issue 35 item 2): how long the ready wait of a restart waits, from the last good start of the
same model, release and host class; what a start measured; SGLang's startup breakdown read from its ``/metrics``.

No Ansible (module_utils: modules on the host and the server_restart action on the controller import it): the
server_restart module reads the record of good starts (:func:`read_record`, in its one run before the stop), the action
derives the timeout from it, the server_probe module reads the breakdown in the round trip that finds the server healthy
(:func:`read_breakdown`), the last_good module keeps the records (``startup.json`` in the instance's last-known-good
directory); tests/unit/test_startup_budget.py and test_startup_restart.py check them.

The rule (:func:`ready_timeout`), with ``cap`` the operator's sglang_server_ready_timeout (always the upper bound):

* a good start of the same model, release and host class is known: ``max(floor, last * factor + slack)``;
* only a start of the same model and host class on another release (an upgrade, or a rollback): the same, plus the
  ``first_start`` allowance (the new release compiles its kernels into a new cache key: sglang_kernel_cache);
* nothing known (a new model, host class, or the first restart): ``cap``.

SGLang 0.5.23's startup metrics (sglang/srt/observability/metrics_collector.py), labels ``model_name, engine_type``
(and ``priority`` and custom labels where configured; tokenizer_metric_labels, :1804-1819) plus ``phase``:

* ``sglang:startup_time_seconds`` (:1842-1847), phases ``load_weight``, ``kv_cache_allocation``, ``scheduler_e2e``,
  ``tokenizer_e2e`` (emit_startup_time, :2074-2085; the maximum over the scheduler ranks:
  sglang/srt/observability/startup_time.py:31-59);
* ``sglang:startup_cuda_graph_time_seconds`` (:1848-1853), phases ``prefill``, ``decode``, ``target_verify``,
  ``draft_prefill``, ``draft_decode``, ``draft_extend`` (sglang/srt/model_executor/graph_memory_usage.py:5-12);
* ``sglang:weight_load_duration_seconds`` (:496-505), labels ``model_name, engine_type, tp_rank ...`` and ``source``:
  the wall time of the last ``update_weights_from_*`` call (a weight update, :1482-1488), not of the load at start;
  it has no sample until a weight update. The start's weight load is ``startup_time_seconds{phase="load_weight"}``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

STARTUP_METRIC = "sglang:startup_time_seconds"
CUDA_GRAPH_METRIC = "sglang:startup_cuda_graph_time_seconds"
WEIGHT_UPDATE_METRIC = "sglang:weight_load_duration_seconds"
STARTUP_PHASES = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
CUDA_GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
# The fields of a start's key: a budget is learnt per model (and revision), SGLang release and host class.
KEY_FIELDS = ("model", "revision", "release", "host_class")
# At most this many records (one per key) are kept on the host, newest first.
MAX_RECORDS = 8
SCHEMA = 1
# The largest record of good starts read back (a few records of a few hundred bytes each).
MAX_RECORD_BYTES = 1 << 20
# The largest /metrics answer read (a server's full exposition is some hundred KiB), and how long to wait for it.
MAX_METRICS_BYTES = 32 << 20
METRICS_TIMEOUT = 30.0

# name{labels} value: the Prometheus text format's sample lines (no timestamp is written by SGLang).
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _unescape(text: str) -> str:
    out, escaped = [], False
    for char in text:
        if escaped:
            out.append({"n": "\n"}.get(char, char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def samples(text: str, names: Iterable[str]) -> list[tuple[str, dict[str, str], float]]:
    """The samples of the metrics ``names`` in Prometheus text ``text``: ``(name, labels, value)``; lines that do not
    parse, and values that are not finite numbers, are skipped."""
    wanted = set(names)
    out = []
    for line in str(text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match or match.group("name") not in wanted:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        labels = {k: _unescape(v) for k, v in _LABEL.findall(match.group("labels") or "")}
        out.append((match.group("name"), labels, value))
    return out


def startup_breakdown(text: str) -> dict[str, Any] | None:
    """SGLang's startup breakdown from its ``/metrics``: ``{phases: {phase: s}, cuda_graph: {phase: s},
    weight_update_seconds}`` (the largest over the label sets of one phase), or None without a startup sample (metrics
    off, or a release without them)."""
    phases: dict[str, float] = {}
    graphs: dict[str, float] = {}
    update = None
    for name, labels, value in samples(text, (STARTUP_METRIC, CUDA_GRAPH_METRIC, WEIGHT_UPDATE_METRIC)):
        if name == WEIGHT_UPDATE_METRIC:
            update = value if update is None else max(update, value)
            continue
        phase = labels.get("phase")
        if not phase:
            continue
        table = phases if name == STARTUP_METRIC else graphs
        table[phase] = max(table.get(phase, value), value)
    if not phases:
        return None
    return {"phases": phases, "cuda_graph": graphs, "cuda_graph_seconds": round(sum(graphs.values()), 3),
            "weight_load_seconds": phases.get("load_weight"), "weight_update_seconds": update}


def read_record(path: str) -> Any:
    """The JSON document of the record of good starts at ``path``, or None: no path, no such file, unreadable, larger
    than MAX_RECORD_BYTES, or not JSON (a garbled record is ignored: the wait then uses the operator's timeout)."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_RECORD_BYTES:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def metrics_url(health_url: str) -> str:
    """The server's ``/metrics`` beside its health URL (same scheme, host and port)."""
    parts = urlsplit(health_url)
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def read_breakdown(health_url: str, get: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(SGLang's startup breakdown, None) from the ``/metrics`` beside ``health_url``, or (None, why it was not read).

    ``get(url, timeout)`` answers (HTTP status, body bytes of at most MAX_METRICS_BYTES + 1) or raises OSError /
    ValueError (the server_probe module passes module_utils/sglang_http.get with its TLS settings). A server without
    startup samples (a release without them) gives (None, None).
    """
    try:
        status, body = get(metrics_url(health_url), METRICS_TIMEOUT)
    except (OSError, ValueError) as exc:
        return None, str(exc)[:300]
    if status != 200:
        return None, f"HTTP {status}"
    if len(body) > MAX_METRICS_BYTES:
        return None, f"larger than {MAX_METRICS_BYTES} bytes"
    return startup_breakdown(body.decode("utf-8", "replace")), None


def start_key(model: Any, revision: Any, release: Any, host_class: Any) -> dict[str, str]:
    """A start's key, each field as text."""
    return {"model": str(model or ""), "revision": str(revision or ""), "release": str(release or ""),
            "host_class": str(host_class or "")}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number > 0 else None


def usable_records(history: Any) -> list[dict[str, Any]]:
    """The records of a ``startup.json`` document that hold a key and a positive number of seconds; anything else
    (a file from elsewhere, a hand edit) is ignored, never trusted."""
    starts = history.get("starts") if isinstance(history, Mapping) else None
    out = []
    for record in starts if isinstance(starts, list) else []:
        if not isinstance(record, Mapping) or _number(record.get("seconds")) is None:
            continue
        if not all(isinstance(record.get(f), str) for f in KEY_FIELDS):
            continue
        out.append(dict(record))
    return out


def ready_timeout(history: Any, key: Mapping[str, str], cap: int, floor: float = 300, factor: float = 2.0,
                  slack: float = 120, first_start: float = 1800) -> dict[str, Any]:
    """The ready wait's timeout (whole seconds) and why: see the module docstring. ``history``: the host's
    ``startup.json`` document (or None); ``key``: this start's :func:`start_key`."""
    cap = int(cap)
    same_class = [r for r in usable_records(history)
                  if all(r[f] == key.get(f) for f in ("model", "revision", "host_class"))]
    exact = [r for r in same_class if r["release"] == key.get("release")]
    if exact:
        last, allowance, basis = exact[0], 0.0, "the last good start of this model, release and host class"
    elif same_class:
        last, allowance = same_class[0], float(first_start)
        basis = (f"the last good start of this model and host class on release {last['release']}, "
                 f"plus {first_start:g}s for the first start of release {key.get('release')} (its kernels compile)")
    else:
        why = "no good start of this model, release and host class is known: the whole sglang_server_ready_timeout"
        return {"timeout": cap, "last": None, "why": why}
    seconds = float(last["seconds"])
    derived = max(float(floor), seconds * float(factor) + float(slack) + allowance)
    timeout = min(cap, math.ceil(derived))
    capped = " (capped by sglang_server_ready_timeout)" if timeout < math.ceil(derived) else ""
    return {"timeout": timeout, "last": seconds,
            "why": f"max({floor:g}, {seconds:g}s x {factor:g} + {slack:g}s{f' + {allowance:g}s' if allowance else ''})"
                   f" from {basis}{capped}"}


def recorded(history: Any, start: Mapping[str, Any], at: str = "") -> dict[str, Any]:
    """``history`` with ``start`` (a key, ``seconds`` and its breakdown) as the newest record: the record of the same
    key is replaced, at most :data:`MAX_RECORDS` are kept."""
    record = {**start_key(*(start.get(f) for f in KEY_FIELDS)), "seconds": round(float(start["seconds"]), 1),
              "source": str(start.get("source") or ""), "breakdown": start.get("breakdown"), "at": str(at or "")}
    same = tuple(record[f] for f in KEY_FIELDS)
    rest = [r for r in usable_records(history) if tuple(r[f] for f in KEY_FIELDS) != same]
    return {"schema": SCHEMA, "starts": [record, *rest][:MAX_RECORDS]}


__all__ = ["CUDA_GRAPH_METRIC", "CUDA_GRAPH_PHASES", "KEY_FIELDS", "STARTUP_METRIC", "STARTUP_PHASES",
           "WEIGHT_UPDATE_METRIC", "ready_timeout", "recorded", "samples", "start_key", "startup_breakdown",
           "usable_records"]
