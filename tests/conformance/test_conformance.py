"""Conformance: our validator never accepts what SGLang 0.5.23 itself rejects.

Runs in the main venv (no torch). SGLang's verdicts come from sglang_probe.py run once
per session inside .venv-conformance (see conftest.py); a missing venv FAILS the tier
with "run tests/conformance/setup-venv.sh".

Per case (tests/conformance/cases.yaml):
  test_sglang_expectation  SGLang does what cases.yaml says it does (accept/reject,
                           exception, message, where, resolved values, warnings): pins
                           down SGLang 0.5.23's behaviour, which our rules are built on.
                           On the cases probed: CI's fixed-seed sample (CORPUS_SAMPLE,
                           conformance_support.corpus_sample), every case in make conformance.
  test_agreement           one-directional, on every case: SGLang rejects => our validator
                           rejects (SGLang's verdict from the probe where the case was
                           probed, else the one cases.yaml records, which make conformance
                           confirms); and, on the cases probed, when our validator accepts,
                           SGLang accepts the very argv our
                           renderer produced (res.argv). A case marked ``ours: preflight``
                           is a refusal only the checkpoint's config.json decides: our
                           validator must accept it (it cannot tell), and
                           test_preflight_real.py proves the role's preflight refuses it
                           with the real SGLang at the same file:line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_support import OURS_ARGV_SUFFIX, corpus_sample, load_cases, preflight_sample  # noqa: E402

CASES, _MODELS = load_cases()
IDS = [c["id"] for c in CASES]
SAMPLED = corpus_sample(CASES)  # the cases the session's probe asks SGLang about (Conformance.sampled)


def _fmt(r: dict) -> str:
    return (
        f"{r.get('status')} {r.get('exception') or ''} at {r.get('where') or '-'}: "
        f"{(r.get('message') or '')[:300]!r} (stage {r.get('stage')})"
    )


def _probe_result(conformance, case_id: str) -> dict:
    r = conformance.sglang.get(case_id)
    assert r is not None, f"the probe returned nothing for {case_id}"
    if r.get("status") == "probe_error":
        pytest.fail(
            f"the probe could not run SGLang's check for {case_id}: {r.get('exception')}: "
            f"{r.get('message')}\n{r.get('traceback', '')}",
            pytrace=False,
        )
    return r


def test_cases_file_is_sound():
    assert len(CASES) >= 45
    assert len(set(IDS)) == len(IDS), "duplicate case ids"
    families = {c.get("family") for c in CASES}
    assert {"schema", "speculative", "sm120", "parallel", "numeric", "valid"} <= families
    for c in CASES:
        assert c.get("why"), f"{c['id']}: missing why"
        assert c.get("sglang") in ("accept", "reject"), f"{c['id']}: sglang must be accept|reject"
        assert c["model"] in _MODELS, f"{c['id']}: unknown model {c['model']}"
        if c.get("ours") == "preflight":
            assert c["sglang"] == "reject" and c.get("sglang_where"), (
                f"{c['id']}: ours: preflight is for a refusal at a recorded file:line (sglang_where)")
    assert sum(1 for c in CASES if c["family"] == "valid") >= 8


def test_corpus_sample_keeps_every_family_and_verdict():
    """CI's sample: reproducible, CORPUS_SAMPLE (or every) case of each family and recorded verdict, all with ``all``;
    the preflight's sample of the valid family likewise."""
    picked = corpus_sample(CASES, "8")
    assert picked == corpus_sample(CASES, "8"), "the sample is not reproducible"
    for group in {(c["family"], c["sglang"]) for c in CASES}:
        size = sum(1 for c in CASES if (c["family"], c["sglang"]) == group)
        assert sum(1 for c in picked if (c["family"], c["sglang"]) == group) == min(8, size), group
    assert corpus_sample(CASES, "all") == CASES
    valid = [c for c in CASES if c["family"] == "valid"]
    assert len(preflight_sample(valid, "8")) == 40 and preflight_sample(valid, "all") == valid
    with pytest.raises(ValueError, match="CORPUS_SAMPLE"):
        corpus_sample(CASES, "none")


@pytest.mark.parametrize("case", SAMPLED, ids=[c["id"] for c in SAMPLED])
def test_sglang_expectation(conformance, case):
    r = _probe_result(conformance, case["id"])
    want = case["sglang"]
    got = "accept" if r["status"] == "accepted" else "reject"
    assert got == want, f"{case['id']}: cases.yaml says SGLang will {want}, it did: {_fmt(r)}"
    if want == "reject":
        if "sglang_exception" in case:
            assert r.get("exception") == case["sglang_exception"], _fmt(r)
        if "sglang_message_contains" in case:
            assert case["sglang_message_contains"] in (r.get("message") or ""), _fmt(r)
        if "sglang_message" in case:  # exact (e.g. the empty assertion message)
            assert (r.get("message") or "") == case["sglang_message"], _fmt(r)
        if "sglang_where" in case:
            assert case["sglang_where"] in (r.get("where") or ""), _fmt(r)
    resolved = r.get("resolved") or {}
    for field, value in (case.get("sglang_resolved") or {}).items():
        assert resolved.get(field) == value, (
            f"{case['id']}: SGLang resolved {field}={resolved.get(field)!r}, cases.yaml says {value!r}"
        )
    if "sglang_warning_contains" in case:
        assert any(case["sglang_warning_contains"] in w for w in r.get("warnings") or []), (
            f"{case['id']}: no warning containing {case['sglang_warning_contains']!r}: "
            f"{r.get('warnings')}"
        )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_agreement(conformance, case):
    cid = case["id"]
    probed = cid in conformance.probed
    if probed:
        r = _probe_result(conformance, cid)
        sglang_accepts, said = r["status"] == "accepted", _fmt(r)
    else:  # not in this run's sample: the verdict cases.yaml records (make conformance probes every case)
        sglang_accepts, said = case["sglang"] == "accept", "as cases.yaml records"
    if conformance.validator_error:
        pytest.fail(
            f"our validator could not be imported: {conformance.validator_error}",
            pytrace=False,
        )
    res = conformance.ours.get(cid)
    if isinstance(res, Exception):
        pytest.fail(f"our validator crashed on {cid}: {type(res).__name__}: {res}", pytrace=False)
    if case.get("ours") == "preflight":
        assert not sglang_accepts, f"{cid}: ours: preflight on a case SGLang accepts ({said})"
        assert res.ok, (f"{cid}: our validator refuses ({[p.rule for p in res.errors]}): mark it `ours: reject <rule>`, "
                        "ours: preflight is for what only the checkpoint's config.json decides")
        return
    if not sglang_accepts:
        assert not res.ok, (
            f"{cid}: SGLang {case['sglang']}s ({said}) but our validator accepts "
            f"(warnings: {[p.rule for p in res.warnings]})"
        )
    if res.ok and probed:
        variant = conformance.sglang.get(cid + OURS_ARGV_SUFFIX)
        assert variant is not None, f"{cid}: our argv was not probed"
        assert variant.get("status") == "accepted", (
            f"{cid}: our validator accepts, but SGLang does not accept the argv our renderer "
            f"produced {variant.get('argv')}: {_fmt(variant)}"
        )


def test_corpus_resolves_like_sglang(conformance):
    """On the corpus cases probed that both accept, resolve.py's defaults (the backends, page size, MoE backends, speculative
    top-k, ... the rules read) are what SGLang resolved, or the difference is explained in resolution-expected.yaml
    (resolution.py)."""
    import resolution  # noqa: PLC0415

    compared, found = resolution.differences(SAMPLED, conformance.ours, conformance.contexts, conformance.sglang)
    assert sum(compared.values()), "no resolved value compared: no corpus case both accept"
    unexplained = [d for d in found if d.explained is None]
    assert not unexplained, "\n".join(resolution.report_lines(compared, unexplained))
