"""The targeted set (targeted-0.5.23.json): our validator against SGLang itself on hand-written configurations.

The fuzzer's "0 MISSED" counts only where its generator reaches. The targeted set is built the way the planners'
held-out set is: configurations written from SGLang 0.5.23's argument handling by reading only SGLang's source (not
the validator), most as pairs on both sides of one check (a default SGLang fills from the model, the GPU or another
argument; a model override; an environment switch; a check that reads several arguments), spread over the GPU
profiles and the four fixture checkpoints, each verdict recorded from SGLang's own resolver through the conformance
probe. The first judgement of each area's cases found what the fuzzer had not (tests/conformance/README.md).

CI probes a fixed-seed sample of the set: TARGETED_SAMPLE (default 5) accepted and as many refused cases of each area,
drawn with seed 0, so every area keeps both sides of its checks (190 cases in nineteen areas). ``make
conformance-targeted`` (TARGETED_SAMPLE=all) probes every case; run it after a change to the rules or the SGLang pin,
as ``make fuzz-sglang``. Every finding of the set is also a corpus case (cases.yaml), which test_conformance.py
judges on every run against its recorded verdict (and probes in make conformance).

One probe run for the chosen cases, judged as differential.py judges a generated case, with the GPU memory the case
names (what the host's GPU facts give the plan binding, before anything on the host changes):
  test_recorded_verdicts_hold       SGLang still gives each case the recorded verdict, at the recorded file:line:
                                    the set keeps testing what it was written for.
  test_validator_agrees             no MISSED (SGLang refuses, we accept), no unexplained stricter refusal (a rule
                                    not documented as stricter in differential.STRICTER), no crash, and SGLang
                                    accepts the argv our renderer produces for every case we accept.
  test_targeted_resolves_like_sglang on the cases both accept, resolve.py's values are SGLang's (resolution.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import differential  # noqa: E402
from conformance_support import REPO, ProbeError, fixed_seed_sample, load_cases  # noqa: E402

TARGETED = Path(__file__).resolve().parent / "targeted-0.5.23.json"
SEED = 0
SAMPLE = os.environ.get("TARGETED_SAMPLE", "5")


def _load() -> dict[str, Any]:
    return json.loads(TARGETED.read_text(encoding="utf-8"))


def sample(doc: dict[str, Any], per_side: str, seed: int = SEED) -> list[dict[str, Any]]:
    """The cases to probe: every case for ``all``, else up to ``per_side`` accepted and as many refused cases of each
    area, drawn with ``seed`` (the set's order kept, so a report reads as the file does)."""
    groups = [(area, verdict) for area in doc["areas"] for verdict in ("accept", "reject")]
    return fixed_seed_sample(doc["cases"], lambda c: (c["area"], c["sglang"]), groups, per_side, "TARGETED_SAMPLE", seed)


@pytest.fixture(scope="module")
def judged() -> dict[str, Any]:
    doc = _load()
    try:
        cases = sample(doc, SAMPLE)
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
    contexts: dict[str, Any] = {}
    try:
        verdicts, mine, sglang = differential.evaluate([dict(c) for c in cases], contexts=contexts)
    except ProbeError as exc:  # no conformance venv, or the probe itself failed
        pytest.fail(str(exc), pytrace=False)
    return {"cases": cases, "total": len(doc["cases"]), "verdicts": verdicts, "mine": mine, "sglang": sglang,
            "contexts": contexts}


def test_set_is_sound() -> None:
    doc = _load()
    cases = doc["cases"]
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids), "duplicate ids"
    _, models = load_cases()
    for c in cases:
        assert c["area"] in doc["areas"], c["id"]
        assert c["id"].startswith(f"targeted-{c['area']}-"), c["id"]
        assert c["model"] in models, f"{c['id']}: unknown fixture model {c['model']}"
        assert c["sglang"] in ("accept", "reject") and c.get("intent"), c["id"]
        assert (c["sglang"] == "reject") == bool(c.get("sglang_where")), f"{c['id']}: a refusal records its file:line"
        for value in c["args"].values():  # draft paths are repository-relative, as in cases.yaml
            assert not (isinstance(value, str) and value.startswith("/")), f"{c['id']}: absolute path {value}"
    for area in doc["areas"]:  # each area tests both sides of its checks
        verdicts = {c["sglang"] for c in cases if c["area"] == area}
        assert verdicts == {"accept", "reject"}, f"area {area}: {verdicts}"


def test_recorded_verdicts_hold(judged: dict[str, Any]) -> None:
    wrong = []
    for c in judged["cases"]:
        r = judged["sglang"].get(c["id"]) or {}
        got = {"accepted": "accept", "rejected": "reject"}.get(r.get("status"), r.get("status"))
        if got != c["sglang"] or (got == "reject" and c["sglang_where"] not in (r.get("where") or "")):
            wrong.append(f"{c['id']}: recorded {c['sglang']} {c.get('sglang_where', '')}, SGLang now {got} "
                         f"{r.get('where') or ''} {(r.get('message') or '')[:160]!r}")
    assert not wrong, "\n".join(wrong)


def test_validator_agrees(judged: dict[str, Any]) -> None:
    offenders = differential.offenders(judged["cases"], judged["verdicts"], judged["mine"], judged["sglang"], "intent")
    counts = {v: list(judged["verdicts"].values()).count(v) for v in sorted(set(judged["verdicts"].values()))}
    assert not offenders, f"{len(offenders)} of {len(judged['cases'])} targeted cases ({counts}):\n" + "\n".join(offenders)
    print(f"\ntargeted set: {len(judged['cases'])} of {judged['total']} cases (TARGETED_SAMPLE={SAMPLE}), {counts}")


def test_targeted_resolves_like_sglang(judged: dict[str, Any]) -> None:
    import resolution  # noqa: PLC0415

    compared, found = resolution.differences(judged["cases"], judged["mine"], judged["contexts"], judged["sglang"])
    assert sum(compared.values()), "no resolved value compared: no targeted case both accept"
    unexplained = [d for d in found if d.explained is None]
    assert not unexplained, "\n".join(resolution.report_lines(compared, unexplained))


def test_sample_keeps_every_area_and_both_verdicts() -> None:
    doc = _load()
    picked = sample(doc, "5")
    assert picked == sample(doc, "5"), "the sample is not reproducible"
    for area in doc["areas"]:
        for verdict in ("accept", "reject"):
            assert len([c for c in picked if c["area"] == area and c["sglang"] == verdict]) == 5, (area, verdict)
    assert sample(doc, "all") == doc["cases"]
    assert len(sample(doc, "1000")) == len(doc["cases"])
    with pytest.raises(ValueError, match="TARGETED_SAMPLE"):
        sample(doc, "0")


def test_the_set_is_where_the_readme_says() -> None:
    readme = (REPO / "tests" / "conformance" / "README.md").read_text(encoding="utf-8")
    assert TARGETED.name in readme and Path(__file__).name in readme
