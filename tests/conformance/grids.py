"""Grids (grids.yaml): every combination of the arguments one of SGLang's checks reads, as differential.py cases.

The random generator (differential.generate) draws a few arguments per case; a check that reads four arguments and a
default SGLang fills from the GPU is rarely met with all of them at once. A grid meets every combination: two grids
found MISSED cases that ten 10,000-case seeds had not (tests/conformance/README.md). Each configuration is a case in
differential.py's shape (model, GPU, arguments), judged as a generated case is: ``differential.py --grid NAME`` (or
``all``), ``make conformance-grids`` for every grid; CI probes a fixed-seed sample of each (test_grids.py).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import yaml
from conformance_support import HERE, MODELS_DIR, REPO

GRIDS = HERE / "grids.yaml"
ANY_ALGORITHM = "*"


def load(path: Path = GRIDS) -> dict[str, Any]:
    """grids.yaml as written."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("grids"), list):
        raise ValueError(f"{path.name}: a mapping with a list of grids")
    return doc


def fixture_models() -> list[str]:
    """The fixture checkpoints a grid may name (directories under conformance_support.MODELS_DIR)."""
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / "config.json").is_file())


def axis_options(axis: dict[str, Any], algorithms: list[str]) -> list[dict[str, Any]]:
    """The argument sets one axis contributes: ``one_of``'s sets (a set's ``env`` holds environment switches), or
    ``{arg: value}`` per value (None: unset, an empty set), with ``*`` as the release's speculative algorithms."""
    if set(axis) == {"one_of"}:
        return [dict(option) for option in axis["one_of"]]
    if len(axis) != 1:
        raise ValueError(f"an axis is one argument or one_of, not {sorted(axis)}")
    (dest, values), = axis.items()
    options: list[dict[str, Any]] = []
    for value in values:
        if value == ANY_ALGORITHM and dest == "speculative_algorithm":
            options.extend({dest: algorithm} for algorithm in algorithms)
        else:
            options.append({} if value is None else {dest: value})
    return options


def expand(grid: dict[str, Any], doc: dict[str, Any], algorithms: list[str],
           gpus: dict[tuple[int, int], list[tuple[str, int, bool]]]) -> list[dict[str, Any]]:
    """The grid's configurations, as differential.py cases (ids grid-NAME-NNNNN, family the grid's name): the product
    of its profiles, models and axes, in that order. ``gpus`` gives each compute capability's GPU (its first:
    differential.GPUS), ``algorithms`` what ``*`` stands for."""
    models = fixture_models() if grid["models"] == "all" else list(grid["models"])
    axes = [axis_options(axis, algorithms) for axis in grid["axes"]]
    cases: list[dict[str, Any]] = []
    for profile_name, model, *chosen in itertools.product(grid["profiles"], models, *axes):
        profile = doc["profiles"][profile_name]
        major, minor = (int(part) for part in profile["compute_capability"].split("."))
        gpu_name, memory, integrated = gpus[(major, minor)][0]
        args: dict[str, Any] = {"tp_size": profile["gpu_count"]}
        env: dict[str, str] = {}
        for option in (grid.get("fixed", {}), *chosen):  # fixed: the set every configuration takes, axes' sets over it
            env.update(option.get("env", {}))
            args.update({dest: value for dest, value in option.items() if dest != "env"})
        draft = doc.get("drafts", {}).get(args.get("speculative_algorithm"))
        if draft and "speculative_draft_model_path" not in args:
            args["speculative_draft_model_path"] = str((MODELS_DIR / draft).relative_to(REPO))
        cases.append({"id": f"grid-{grid['name']}-{len(cases):05d}", "family": grid["name"], "model": model,
                      "compute_capability": profile["compute_capability"], "gpu_name": gpu_name,
                      "gpu_memory_mib": memory, "gpu_integrated": integrated, "gpu_count": profile["gpu_count"],
                      "args": args, "env": env})
    return cases


def select(doc: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    """The grids ``names`` names (``all``: every grid), in the file's order."""
    known = [g["name"] for g in doc["grids"]]
    if "all" in names:
        return list(doc["grids"])
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"no grid {', '.join(unknown)} in {GRIDS.name} (grids: {', '.join(known)})")
    return [g for g in doc["grids"] if g["name"] in names]
