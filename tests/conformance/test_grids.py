"""CI's fixed-seed sample of the grids (grids.yaml, grids.py): our validator against SGLang itself.

Each grid is every combination of the arguments one of SGLang's checks reads, on named GPU profiles and fixture
models. CI probes GRIDS_SAMPLE (default 3) configurations of each grid, drawn with seed 0, and judges them as
differential.py judges a generated case: none may be MISSED, OUR-ARGV, CRASH or STRICTER-UNEXPLAINED (the table:
build/conformance-grids-sample.md). ``make conformance-grids`` (differential.py --grid all) probes every configuration
of every grid, with the raise-site coverage and shrunk MISSED cases; run it after a change to the rules or the SGLang
pin, as ``make fuzz-sglang``.

  test_grids_are_sound            every argument is one of the pinned release's schema, every value one of its choices,
                                  every model a fixture and every profile a GPU the fuzzer knows; names are unique and
                                  each grid says which check it is for.
  test_expansion                  a grid is the product of its profiles, models and axes; "*" is every speculative
                                  algorithm of the schema; drafts are named where an algorithm needs one.
  test_sample_agrees_with_sglang  the sample, probed.
  test_cli_refuses_...            differential.py --grid: an unknown grid, or a grid next to --cases-from, is a usage
                                  error (exit 2) naming the grids there are.
  test_offender_lines_...         the lines a failing sample prints (differential.offenders, shared with test_targeted).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import differential  # noqa: E402
import grids  # noqa: E402
from conformance_support import REPO, ProbeError, fixed_seed_sample  # noqa: E402

SAMPLE = os.environ.get("GRIDS_SAMPLE", "3")
SAMPLE_MD = REPO / "build" / "conformance-grids-sample.md"


@functools.cache
def expansion() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """grids.yaml and every configuration of every grid, expanded once per session (76,116 of them: about 0.7 s)."""
    doc, _, cases = differential.grid_cases(["all"])
    return doc, cases


def argument_sets(grid: dict[str, Any], algorithms: list[str]) -> list[dict[str, Any]]:
    """Every argument set a grid names: its fixed set, then each axis's options."""
    return [grid.get("fixed", {})] + [option for axis in grid["axes"] for option in grids.axis_options(axis, algorithms)]


def sample(per_grid: str) -> list[dict[str, Any]]:
    """``per_grid`` configurations of each grid (every one for ``all``), drawn with seed 0."""
    doc, cases = expansion()
    return fixed_seed_sample(cases, lambda c: c["family"], [g["name"] for g in doc["grids"]], per_grid,
                             "GRIDS_SAMPLE", 0)


def test_grids_are_sound() -> None:
    doc = grids.load()
    schema = differential.schema_arguments()
    algorithms = differential.speculative_algorithms(schema)
    models = grids.fixture_models()
    names = [g["name"] for g in doc["grids"]]
    assert len(set(names)) == len(names), "duplicate grid names"
    for name, profile in doc["profiles"].items():
        major, minor = (int(part) for part in profile["compute_capability"].split("."))
        assert (major, minor) in differential.GPUS, f"profile {name}: no GPU of compute capability {major}.{minor}"
        assert profile["gpu_count"] in (1, 2, 4, 8), name
    for algorithm, draft in doc["drafts"].items():
        assert algorithm in algorithms and draft in models, (algorithm, draft)
    for grid in doc["grids"]:
        assert grid.get("why") and "py:" in grid["why"], f"grid {grid['name']}: name the check (file:line)"
        assert set(grid["profiles"]) <= set(doc["profiles"]), grid["name"]
        assert grid["models"] == "all" or set(grid["models"]) <= set(models), grid["name"]
        for args in argument_sets(grid, algorithms):
            for name, value in args.get("env", {}).items():  # an environment switch: a string, as the probe sets it
                assert name.startswith("SGLANG_") and isinstance(value, str), f"grid {grid['name']}: env {name}"
            for dest, value in ((d, v) for d, v in args.items() if d != "env"):
                assert dest in schema, f"grid {grid['name']}: {dest} is no argument of {differential.SGLANG_VERSION}"
                choices = schema[dest].get("choices")
                many = schema[dest].get("nargs") in ("*", "+") and isinstance(value, list)  # each word a choice
                assert not choices or all(v in choices for v in (value if many else [value])), \
                    f"grid {grid['name']}: {dest} {value!r} not in {choices}"


def test_expansion() -> None:
    doc, _, cases = differential.grid_cases(["all"])
    algorithms = differential.speculative_algorithms(differential.schema_arguments())
    for grid in doc["grids"]:
        models = len(grids.fixture_models()) if grid["models"] == "all" else len(grid["models"])
        size = len(grid["profiles"]) * models * math.prod(len(grids.axis_options(a, algorithms)) for a in grid["axes"])
        assert len([c for c in cases if c["family"] == grid["name"]]) == size, grid["name"]
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids)
    spec = [c for c in cases if c["family"] == "nvfp4-speculative"]
    assert {c["args"].get("speculative_algorithm") for c in spec} == {None, *algorithms}
    # the tp_size values a grid sets itself, fixed or on an axis
    sets_tp = {g["name"]: {o["tp_size"] for o in argument_sets(g, algorithms) if "tp_size" in o} for g in doc["grids"]}
    for c in cases:
        assert c["args"]["tp_size"] in {c["gpu_count"], *sets_tp[c["family"]]}, c["id"]
        draft = doc["drafts"].get(c["args"].get("speculative_algorithm"))
        assert c["args"].get("speculative_draft_model_path") == (f"tests/conformance/models/{draft}" if draft else None)
    assert sample("8") == sample("8"), "the sample is not reproducible"
    # ``cases`` was expanded afresh above, sample() reads the cached expansion: equal, so the expansion is reproducible.
    assert len(sample("8")) == 8 * len(doc["grids"]) and sample("all") == cases


@pytest.fixture(scope="module")
def judged() -> dict[str, Any]:
    try:
        cases = sample(SAMPLE)
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
    contexts: dict[str, Any] = {}
    start = time.monotonic()
    try:
        verdicts, mine, sglang = differential.evaluate([dict(c) for c in cases], contexts=contexts)
    except ProbeError as exc:  # no conformance venv, or the probe itself failed
        pytest.fail(str(exc), pytrace=False)
    text = differential.report(cases, verdicts, mine, sglang, time.monotonic() - start, 0, contexts=contexts,
                               source=f"grids, GRIDS_SAMPLE={SAMPLE}")
    SAMPLE_MD.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_MD.write_text(text, encoding="utf-8")
    return {"cases": cases, "verdicts": verdicts, "mine": mine, "sglang": sglang}


def test_sample_agrees_with_sglang(judged: dict[str, Any]) -> None:
    offenders = differential.offenders(judged["cases"], judged["verdicts"], judged["mine"], judged["sglang"])
    assert not offenders, f"{len(offenders)} of {len(judged['cases'])} grid configurations:\n" + "\n".join(offenders)


@pytest.mark.parametrize("argv", [["--grid", "no-such-grid"], ["--grid", "all", "--cases-from", "cases.json"]])
def test_cli_refuses_an_unknown_grid_and_two_sources(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        differential.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert ("no grid no-such-grid in grids.yaml" if "no-such-grid" in argv else "--cases-from and --grid") in err


def test_offender_lines_name_what_failed() -> None:
    """differential.offenders, which this test and test_targeted.py fail with: one line per FAILING verdict."""
    refused = type("Result", (), {"ok": False, "errors": [type("Problem", (), {"rule": "kv4.attention"})()]})()
    accepted = type("Result", (), {"ok": True, "errors": []})()
    cases = [{"id": f"c{n}", "model": "Llama-3.1-8B-Instruct", "compute_capability": "12.0", "args": {"tp_size": 8},
              "intent": f"why {n}"} for n in range(4)]
    lines = differential.offenders(
        cases, {"c0": "STRICTER-UNEXPLAINED", "c1": "agree", "c2": "MISSED", "c3": "CRASH"},
        {"c0": refused, "c1": accepted, "c2": accepted, "c3": ValueError("boom")},
        {"c0": {"status": "accepted"}, "c2": {"status": "rejected", "where": "sglang/srt/x.py:1"}}, "intent")
    assert lines == [
        'STRICTER-UNEXPLAINED c0 (why 0): SGLang accepted ; ours reject kv4.attention; Llama-3.1-8B-Instruct cc 12.0, '
        'args {"tp_size": 8}, env {}',
        'MISSED c2 (why 2): SGLang rejected sglang/srt/x.py:1; ours accept; Llama-3.1-8B-Instruct cc 12.0, '
        'args {"tp_size": 8}, env {}',
        "CRASH c3 (why 3): SGLang None ; ours ValueError('boom'); Llama-3.1-8B-Instruct cc 12.0, "
        'args {"tp_size": 8}, env {}',
    ]
