# SPDX-License-Identifier: Apache-2.0
"""Filters of roles/sglang_bench: the speculative-decoding candidates of a benchmark run, and its table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import SPEC_TRIPLE, spec_triple

# The modes a candidate may name (the spec override's modes; explicit needs the triple, so it is written as one).
MODES = ("keep", "auto", "off")
# The figures of SGLang's benchmark record (sglang/benchmark/serving.py:1878-1905 of the 0.5.23 wheel) the table shows.
FIGURES = ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "accept_length")
HEADER = ("candidate", "host", "instance", "output tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms",
          "accept len", "result")
SYNTHETIC = "synthetic (stand-in server)"


def label(spec: Any) -> str:
    """A candidate's short name: its mode, or ``steps=3 topk=1 draft=4`` for a triple."""
    if isinstance(spec, Mapping):
        return "steps={} topk={} draft={}".format(*(spec[d] for d in SPEC_TRIPLE))
    return str(spec)


def bench_candidates(value: Any, variable: str = "spec_candidates") -> list[dict[str, Any]]:
    """``[{label, spec}]`` for ``value``: a list of C(off), C(auto), C(keep) or triples (a JSON/YAML string of one too).

    ``spec`` is what the spec override takes (a mode, or the triple as a mapping of whole numbers). A malformed
    candidate raises, naming it (``spec_candidates[1]: ...``); two that are the same raise too.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise AnsibleFilterError(f"{variable} must be a non-empty list of candidates: off, auto, keep or "
                                 "{speculative_num_steps: N, speculative_eagle_topk: N, speculative_num_draft_tokens: N}, "
                                 f"got {value!r}")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"{variable}[{index}]"
        if item is False:  # YAML reads an unquoted off as false
            item = "off"
        if isinstance(item, str) and item.strip().lower() in MODES:
            spec: Any = item.strip().lower()
        elif isinstance(item, Mapping):
            triple, why = spec_triple(item)
            if triple is None:
                raise AnsibleFilterError(f"{where} {dict(item)!r}: {why}. Fix: give all three of {', '.join(SPEC_TRIPLE)} "
                                         "as whole numbers, e.g. {speculative_num_steps: 3, speculative_eagle_topk: 1, "
                                         "speculative_num_draft_tokens: 4}")
            spec = triple
        else:
            raise AnsibleFilterError(f"{where} {item!r} is not a candidate. Fix: use one of {', '.join(MODES)}, or the "
                                     f"triple {{{': N, '.join(SPEC_TRIPLE)}: N}}")
        name = label(spec)
        if name in (c["label"] for c in out):
            raise AnsibleFilterError(f"{where} {name!r} is listed twice. Fix: list each candidate once")
        out.append({"label": name, "spec": spec})
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def bench_record(text: Any) -> dict[str, Any]:
    """The figures of the last line of SGLang's benchmark JSONL ``text`` (the file appends one record per run),
    and ``synthetic``: whether the record says its clock is a stand-in's model (``standin.synthetic``).

    Only these keys are kept: the record's ``server_info`` may carry the server's arguments, secrets included.
    """
    lines = [line for line in str(text or "").splitlines() if line.strip()]
    if not lines:
        raise AnsibleFilterError("the benchmark wrote no record (an empty --output-file)")
    try:
        record = json.loads(lines[-1])
    except ValueError as exc:
        raise AnsibleFilterError(f"the benchmark's record is not JSON: {exc}") from exc
    if not isinstance(record, Mapping):
        raise AnsibleFilterError("the benchmark's record is not a JSON object")
    out: dict[str, Any] = {key: _number(record.get(key)) for key in FIGURES}
    for key in ("completed", "total_output_tokens", "duration", "request_rate", "random_input_len", "random_output_len",
                "dataset_name", "backend"):
        out[key] = record.get(key)
    standin = record.get("standin")
    out["synthetic"] = bool(isinstance(standin, Mapping) and standin.get("synthetic"))
    return out


def _cell(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def adopt_lines(spec: Any, resolved: Mapping[str, Any] | None = None) -> list[str]:
    """The host variables that make a candidate the host's own setting (host_vars, or spec: of an instance entry)."""
    if isinstance(spec, Mapping):
        return ["sglang_spec: explicit",
                "sglang_args:  # merged into the host's own",
                *(f"  {d}: {spec[d]}" for d in SPEC_TRIPLE)]
    if spec == "off":
        return ['sglang_spec: "off"']
    if spec == "keep":
        return ["(the host's current settings: nothing to change)"]
    lines = ["sglang_spec: auto"]
    triple = {d: (resolved or {}).get(d) for d in SPEC_TRIPLE}
    if all(isinstance(v, int) and not isinstance(v, bool) for v in triple.values()):
        lines.append("# or pin what SGLang chose: sglang_spec: explicit and sglang_args "
                     + json.dumps(triple).replace('"', ""))
    return lines


def bench_report(runs: Any, title: str = "") -> dict[str, Any]:
    """The table of a benchmark run. ``runs``: ``[{label, spec, host, instance, record (bench_record), argv, resolved,
    error}]`` in run order (``error``: why the candidate has no figures, e.g. the validator's refusal); ``title``:
    the first line of ``text``.

    Returns ``rows`` (one per run, with its figures and launch plan), ``best`` (the row with the highest output
    tokens/s among the candidates, or None), ``adopt`` (host-variable lines that adopt it), ``synthetic`` (any figure
    from a stand-in), ``table`` (its lines) and ``text`` (the table, the best candidate and the adopt lines).
    """
    if not isinstance(runs, (list, tuple)):
        raise AnsibleFilterError(f"bench_report takes a list of runs, got {type(runs).__name__}")
    rows = []
    for run in runs:
        record = run.get("record") or {}
        rows.append({"label": run.get("label"), "spec": run.get("spec"), "host": run.get("host"),
                     "instance": run.get("instance"), "argv": list(run.get("argv") or []),
                     "resolved": dict(run.get("resolved") or {}), "error": run.get("error") or "",
                     "synthetic": bool(record.get("synthetic")), **{k: record.get(k) for k in FIGURES},
                     "completed": record.get("completed")})
    # The best of the candidates (runs with a spec); a plain run of what runs has nothing to choose from.
    measured = [r for r in rows if not r["error"] and r["output_throughput"] is not None and r["spec"] is not None]
    best = max(measured, key=lambda r: r["output_throughput"]) if measured else None
    synthetic = any(r["synthetic"] for r in rows)
    cells = [list(HEADER)]
    for r in rows:
        result = r["error"] or ("best" if r is best else "ok")
        if r["synthetic"] and not r["error"]:
            result += ", " + SYNTHETIC
        cells.append([str(r["label"]), str(r["host"]), str(r["instance"]), _cell(r["output_throughput"]),
                      _cell(r["median_ttft_ms"]), _cell(r["p99_ttft_ms"]), _cell(r["median_itl_ms"], 2),
                      _cell(r["p99_itl_ms"], 2), _cell(r["accept_length"], 2), result])
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER) - 1)]
    table = [" | ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + " | " + row[-1] for row in cells]
    table.insert(1, "-+-".join("-" * w for w in widths) + "-+-" + "-" * len(HEADER[-1]))
    if synthetic:
        table.append(f"figures: {SYNTHETIC}: the stand-in's speed model, not a GPU's")
    adopt = adopt_lines(best["spec"], best["resolved"]) if best else []
    text = "\n".join(([title] if title else []) + table)
    if best:
        text += (f"\nbest: {best['label']} ({best['output_throughput']:.1f} output tokens/s on {best['host']} "
                 f"{best['instance']})\nto adopt it, set for the host (host_vars or group_vars; spec: in its entry of "
                 "sglang_instances):\n" + "\n".join(f"  {line}" for line in adopt))
    return {"rows": rows, "best": best, "adopt": adopt, "synthetic": synthetic, "table": table, "text": text + "\n"}


class FilterModule:
    """blackwell.sglang bench filters."""

    def filters(self) -> dict[str, Any]:
        return {"bench_candidates": bench_candidates, "bench_record": bench_record, "bench_report": bench_report}
