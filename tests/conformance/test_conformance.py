"""Conformance: our validator never accepts what SGLang 0.5.23 itself rejects.

Runs in the main venv (no torch). SGLang's verdicts come from sglang_probe.py run once
per session inside .venv-conformance (see conftest.py); a missing venv FAILS the tier
with "run tests/conformance/setup-venv.sh".

Per case (tests/conformance/cases.yaml):
  test_sglang_expectation  SGLang does what cases.yaml says it does (accept/reject,
                           exception, message, where, resolved values, warnings): pins
                           down SGLang 0.5.23's behaviour, which our rules are built on.
                           On the cases probed: CI's fixed-seed sample (CORPUS_SAMPLE,
                           conformance_support.corpus_sample) and every case the confirmation
                           record (corpus-confirmed-0.5.23.json) does not hold as it is now
                           (the session adds what SGLang confirmed to it); every case in make
                           conformance, which rebuilds it.
  test_agreement           one-directional, on every case: SGLang rejects => our validator
                           rejects (SGLang's verdict from the probe where the case was
                           probed, else the one cases.yaml records, which the record says
                           SGLang confirmed); and when our validator accepts, SGLang accepts
                           the very argv our renderer produced (res.argv): probed in this
                           session unless the record holds that argv as accepted. A case
                           marked ``ours: preflight`` is a refusal only the checkpoint's
                           config.json decides: our
                           validator must accept it (it cannot tell), and
                           test_preflight_real.py proves the role's preflight refuses it
                           with the real SGLang at the same file:line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_support import (  # noqa: E402
    OURS_ARGV_SUFFIX,
    case_fingerprint,
    corpus_sample,
    describe,
    expectation_failures,
    load_cases,
    preflight_sample,
    probed_cases,
)

CASES, _MODELS = load_cases()
IDS = [c["id"] for c in CASES]
SAMPLED = probed_cases(CASES)  # the cases the session's probe asks SGLang about (Conformance.sampled)


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


def test_unconfirmed_cases_are_probed():
    """A case the record does not hold as it is now (new, its input or recorded verdict changed) is probed, whatever the
    sample draws; a confirmed one outside the sample is not."""
    case = next(c for c in CASES if c["sglang"] == "reject" and c not in corpus_sample(CASES, "1"))
    record = {c["id"]: case_fingerprint(c) for c in CASES}
    assert probed_cases(CASES, "1", record) == corpus_sample(CASES, "1")
    changed = {**case, "sglang_where": (case.get("sglang_where") or "") + "x"}
    assert case_fingerprint(changed) != record[case["id"]]
    assert changed["id"] in {c["id"] for c in probed_cases([*CASES[:1], changed], "1", record)}
    del record[case["id"]]
    assert case in probed_cases(CASES, "1", record)


def test_expectation_failures_name_what_sglang_did_otherwise():
    refused = {"id": "x", "sglang": "reject", "sglang_exception": "AssertionError", "sglang_where": "a.py:3",
               "sglang_message_contains": "topk"}
    answer = {"status": "rejected", "exception": "AssertionError", "where": "sglang/a.py:3", "message": "eagle topk"}
    assert expectation_failures(refused, answer) == []
    assert expectation_failures(refused, {**answer, "where": "b.py:3"})
    assert expectation_failures(refused, {**answer, "exception": "ValueError"})
    assert expectation_failures(refused, {**answer, "message": "page"})
    assert expectation_failures(refused, {"status": "accepted"})
    accepted = {"id": "y", "sglang": "accept", "sglang_resolved": {"page_size": 64}, "sglang_warning_contains": "w"}
    assert expectation_failures(accepted, {"status": "accepted", "resolved": {"page_size": 64}, "warnings": ["a w"]}) == []
    assert expectation_failures(accepted, {"status": "accepted", "resolved": {"page_size": 1}, "warnings": ["a w"]})
    assert expectation_failures(accepted, {"status": "accepted", "resolved": {"page_size": 64}, "warnings": []})


@pytest.mark.parametrize("case", SAMPLED, ids=[c["id"] for c in SAMPLED])
def test_sglang_expectation(conformance, case):
    failures = expectation_failures(case, _probe_result(conformance, case["id"]))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_agreement(conformance, case):
    cid = case["id"]
    probed = cid in conformance.probed
    if probed:
        r = _probe_result(conformance, cid)
        sglang_accepts, said = r["status"] == "accepted", describe(r)
    else:  # confirmed, outside this run's sample: the verdict cases.yaml records, which SGLang confirmed
        assert conformance.confirmed.get(cid) == case_fingerprint(case), f"{cid}: neither probed nor confirmed"
        sglang_accepts, said = case["sglang"] == "accept", "as cases.yaml records and SGLang confirmed"
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
    variant = conformance.sglang.get(cid + OURS_ARGV_SUFFIX)
    if res.ok and variant is None:
        assert conformance.argv_confirmed(case), f"{cid}: our argv {res.argv} was neither probed nor confirmed"
    elif res.ok:
        assert variant.get("status") == "accepted", (
            f"{cid}: our validator accepts, but SGLang does not accept the argv our renderer "
            f"produced {variant.get('argv')}: {describe(variant)}"
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
