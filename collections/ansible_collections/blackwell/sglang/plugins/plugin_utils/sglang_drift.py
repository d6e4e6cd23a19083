# SPDX-License-Identifier: Apache-2.0
"""Drift: what an SGLang instance runs, set against its plan (playbooks/drift.yml).

The plan is the validate play's public plan of the instance (no secret in it). What runs is SGLang's own
``/server_info``: in SGLang 0.5.23 its fields are "the resolution result -- what the launcher was given with every
decision resolution made applied over it" (``sglang/srt/entrypoints/http_server.py:861-866``), keyed by the
ServerArgs field names the plan's ``args`` use. Only the arguments the plan sets are compared (SGLang resolves
the others itself, so their values are not drift); secret arguments are neither read nor compared.

Beside them, each record carries the loaded weights' checksum (SGLang 0.5.23 ``GET /weights_checker``,
``per_engine_checksum``: sglang/srt/entrypoints/http_server.py:1599-1618) and the instance's last good start (the
host's ``startup.json``, module_utils/sglang_startup.py). :func:`fleet_drift` compares the checksums across the play:
instances of the same model revision on the same release, weight layout and host class (the quality gate's checksum
key, module_utils/sglang_quality.py: a release or layout may lay the tensors out otherwise) must load the same weights.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_quality import CHECKSUM_FIELDS, key_of, layout
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import SECRET_MARKER

# Read beside the planned arguments: the release (``version``) and the weights the server reports loaded.
INFO_KEYS = ("version", "weight_version")

FILES_DIFFER = "installed files differ from the plan (a deploy would rewrite them and restart the instance)"
# How much of a weights checksum the table and the findings show.
SHOWN_CHECKSUM = 12

# Explicit values SGLang itself replaces while it resolves (so /server_info shows another value that is no drift):
# argument -> planned value -> the values SGLang may report for it.
RESOLVED_AS: dict[str, dict[Any, tuple[Any, ...]]] = {
    # SGLang 0.5.23 sglang/srt/arg_groups/speculative_hook.py:109-116: NEXTN is an alias of EAGLE, and both become
    # FROZEN_KV_MTP with a Gemma4 assistant draft model.
    "speculative_algorithm": {"NEXTN": ("EAGLE", "FROZEN_KV_MTP"), "EAGLE": ("EAGLE", "FROZEN_KV_MTP")},
}


def runs_as_planned(arg: str, planned: Any, running: Any) -> bool:
    """Whether SGLang running ``running`` for ``arg`` is what the plan's ``planned`` resolves to."""
    if same(planned, running):
        return True
    aliases = RESOLVED_AS.get(arg, {})
    return isinstance(planned, str) and any(same(alias, running) for alias in aliases.get(planned, ()))


def planned_args(plan: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """The plan's arguments that drift is checked on: set, not secret, not in ``ignore``."""
    skip = set(ignore)
    args = plan.get("args") or {}
    return {k: v for k, v in args.items() if k not in skip and v != SECRET_MARKER and v is not None}


def probe_keys(plan: Mapping[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """The /server_info keys to read for ``plan``: its compared arguments and INFO_KEYS (never a secret one)."""
    return sorted(set(planned_args(plan, ignore)) | set(INFO_KEYS))


def _canonical(value: Any) -> Any:
    """A JSON value compared by meaning: a JSON text as what it holds, tuples as lists, integral floats as ints."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                return _canonical(json.loads(text))
            except ValueError:
                return value
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return int(value) if isinstance(value, float) and math.isfinite(value) and value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return str(value)


def same(planned: Any, running: Any) -> bool:
    """Whether two values are equal: whole numbers exactly, other numbers within a relative 1e-9, JSON texts by their
    content."""
    a, b = _canonical(planned), _canonical(running)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def args_hash(args: Mapping[str, Any]) -> str:
    """A short hash of arguments, equal for equal values (the fleet table's "arguments" column)."""
    text = json.dumps(_canonical(dict(args)), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def instance_drift(plan: Mapping[str, Any], probe: Mapping[str, Any], files_differ: bool,
                   ignore: Iterable[str] = ()) -> dict[str, Any]:
    """One instance's drift record.

    ``probe`` is drift_probe's result for the instance (``status``, and once healthy ``info`` read from /server_info
    and ``weights_checksum`` from /weights_checker; ``startup``, the last good start the host recorded; ``node_rank``
    above 0 for a node of a multi-node instance that serves no API); ``files_differ``: its installed unit, environment
    or --config file is not what the plan renders.
    """
    if int(probe.get("node_rank") or 0) > 0:
        # A node of a multi-node instance other than 0 serves no API: only its files are compared.
        reasons = [FILES_DIFFER] if files_differ else []
        return {"name": plan.get("name"), "service": plan.get("service"), "healthy": None, "release": None,
                "planned_release": plan.get("version"), "args_planned": args_hash(planned_args(plan, ignore)),
                "args_running": None, "weight_version": None, "weights_checksum": None, "weights_error": None,
                "checksum_key": None, "startup": None, "differs": [], "files_differ": bool(files_differ),
                "drift": bool(reasons), "reasons": reasons}
    planned = planned_args(plan, ignore)
    info = probe.get("info") if isinstance(probe.get("info"), Mapping) else None
    healthy = probe.get("status") == 200 and info is not None
    differs: list[dict[str, Any]] = []
    running: dict[str, Any] = {}
    if info is not None:
        differs = [{"arg": k, "planned": planned[k], "running": info.get(k)}
                   for k in sorted(planned) if not runs_as_planned(k, planned[k], info.get(k))]
        # What runs, in the plan's terms: a value SGLang resolved the planned one to counts as the planned one, so the
        # two hashes are equal exactly when nothing differs.
        drifted = {d["arg"] for d in differs}
        running = {k: (info.get(k) if k in drifted else planned[k]) for k in planned}
    release = info.get("version") if info is not None else None
    planned_release = plan.get("version")
    reasons = []
    if not healthy:
        reasons.append(f"not serving (health {probe.get('status')})"
                       + (f": {probe['info_error']}" if probe.get("info_error") else ""))
    if differs:
        reasons.append("arguments differ: " + ", ".join(
            f"{d['arg']} planned {json.dumps(d['planned'], default=str)} running {json.dumps(d['running'], default=str)}"
            for d in differs))
    if healthy and planned_release and release != planned_release:
        reasons.append(f"release {release} (planned {planned_release})")
    if files_differ:
        reasons.append(FILES_DIFFER)
    checksum = probe.get("weights_checksum") if healthy and isinstance(probe.get("weights_checksum"), str) else None
    startup = probe.get("startup") if isinstance(probe.get("startup"), Mapping) else None
    return {
        "name": plan.get("name"), "service": plan.get("service"), "healthy": healthy,
        "release": release, "planned_release": planned_release,
        "args_planned": args_hash(planned), "args_running": args_hash(running) if info is not None else None,
        "weight_version": info.get("weight_version") if info is not None else None,
        "weights_checksum": checksum or None,
        "weights_error": probe.get("weights_error") if healthy and not checksum else None,
        # The quality gate's checksum key (model, revision, host class, layout, release): whose checksums must agree.
        "checksum_key": key_of(CHECKSUM_FIELDS, {**dict(plan.get("startup_key") or {}),
                                                 "layout": layout(plan.get("args") or {}), "release": release})
        if checksum else None,
        "startup": dict(startup) if startup else None,
        "differs": differs, "files_differ": bool(files_differ), "drift": bool(reasons), "reasons": reasons,
    }


def fleet_drift(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``records`` (drift records by host) with the fleet's weights checksums compared: an instance whose checksum
    differs from that of another instance with the same checksum key (same model revision, release, layout and host
    class) is drift, naming the other instance(s) and both checksums. Where most instances of a key agree, only the
    others are flagged, each naming those it differs from; where no checksum is the most common, every instance of
    the key that differs from another is."""
    groups: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for host in sorted(records):
        for r in records[host]:
            if r.get("weights_checksum") and isinstance(r.get("checksum_key"), Mapping):
                groups.setdefault(json.dumps(r["checksum_key"], sort_keys=True), []).append((host, r))
    findings: dict[tuple[str, Any], str] = {}
    for members in groups.values():
        counts: dict[str, int] = {}
        for _, r in members:
            counts[r["weights_checksum"]] = counts.get(r["weights_checksum"], 0) + 1
        if len(counts) < 2:
            continue
        top = max(counts.values())
        common = [c for c, n in counts.items() if n == top]
        reference = common[0] if len(common) == 1 else None
        for host, r in members:
            mine = r["weights_checksum"]
            if mine == reference:
                continue
            others = [(h, o) for h, o in members if o["weights_checksum"] != mine
                      and (reference is None or o["weights_checksum"] == reference)]
            named = ", ".join(f"{h} {o.get('name')} ({o['weights_checksum'][:SHOWN_CHECKSUM]})" for h, o in others)
            key = r["checksum_key"]
            findings[(host, r.get("name"))] = (
                f"weights checksum {mine[:SHOWN_CHECKSUM]} differs from {named}, for the same model revision "
                f"({key.get('model')}@{key.get('revision') or '-'}, release {key.get('release')})")
    out: dict[str, list[dict[str, Any]]] = {}
    for host in records:
        out[host] = []
        for r in records[host]:
            finding = findings.get((host, r.get("name")))
            reasons = [*r.get("reasons", []), finding] if finding else list(r.get("reasons", []))
            out[host].append({**r, "reasons": reasons, "drift": bool(reasons)})
    return out


def _startup(record: Mapping[str, Any]) -> str:
    """The table's startup cell: the seconds of the last good start of the planned model, release and host class."""
    start = record.get("startup")
    if not isinstance(start, Mapping) or start.get("seconds") is None:
        return "-"
    return f"{float(start['seconds']):g}s"


def fleet_table(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """One line per instance of every host (host, instance, release, arguments hash, weight version, weights checksum,
    last good startup time, state), aligned; ``records`` as :func:`fleet_drift` returns them."""
    rows = [("host", "instance", "release", "args (plan/running)", "weights", "checksum", "startup", "state")]
    for host in sorted(records):
        for r in records[host]:
            args = r["args_planned"] if r.get("args_running") == r["args_planned"] else f"{r['args_planned']}/{r.get('args_running')}"
            checksum = str(r.get("weights_checksum") or "-")[:SHOWN_CHECKSUM]
            rows.append((host, str(r.get("name")), str(r.get("release") or "-"), args, str(r.get("weight_version") or "-"),
                         checksum, _startup(r), "DRIFT: " + "; ".join(r["reasons"]) if r.get("drift") else "as planned"))
    columns = len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(columns)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row[:columns], widths, strict=True)) + "  " + row[columns]
            for row in rows]
