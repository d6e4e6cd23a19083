"""The role's preflight against the real SGLang 0.5.23 (issue 36, build item 3).

Units the role renders (preflight_real.py: the collection's rendering function on the role's variables) are checked
by the role's own ``sglang-preflight.py`` inside ``.venv-conformance``, whose SGLang is the real 0.5.23, on a pretend
GPU host (preflight_host.py). The stand-in SGLang of the molecule scenarios never sees these units: what is proven
here is what the preflight does on a real host.

* the reference host's unit passes, and the preflight reports what SGLang resolved (the speculative triple it
  chose), as the corpus recorded it from SGLang's own resolver;
* every ``valid`` corpus case, planned and rendered as the role does, passes (the preflight raises no false alarm:
  its own host checks, the launcher's ``--config`` reading, the environment file's switches): a fixed-seed sample of
  40 in CI (conformance_support.preflight_sample), all of them in ``make conformance`` (CORPUS_SAMPLE=all);
* the incident's arguments are refused with SGLang's own AssertionError at the file:line the corpus recorded;
* every corpus case that SGLang refuses at a catalog entry mapped ``preflight`` is refused by the preflight at the
  same site: that entry is confirmed. ``preflight-confirmed-0.5.23.yml`` records the confirmed entries and the case
  that confirms each; the test fails when the record and the run disagree either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import preflight_real
import pytest
import yaml
from conformance_support import CORPUS_SAMPLE, REPO, load_cases, preflight_sample

CATALOG = REPO / "tests" / "catalog" / "catalog-0.5.23.json"
MAPPING = REPO / "tests" / "catalog" / "mapping-0.5.23.yml"
CONFIRMED = Path(__file__).resolve().parent / "preflight-confirmed-0.5.23.yml"
REFERENCE = "valid-reference-nextn-modelopt"
INCIDENT = "spec-incident"


def catalog_entry(where: str, entries: list[dict[str, Any]]) -> str | None:
    """The catalog entry whose statement holds ``where`` (``file:line``), as the fuzzer's coverage matches them."""
    path, _, line = where.rpartition(":")
    if not line.isdigit():
        return None
    for entry in entries:
        if entry["file"] == path and entry["line"] <= int(line) <= entry.get("end_line", entry["line"]):
            return str(entry["id"])
    return None


def launch_args(case: dict[str, Any]) -> list[str] | None:
    """The case's arguments as the validator renders argv (sglang_validate.render_argv on the pinned schema); None
    for a case with a JSON-valued argument (rendered by the plan only)."""
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import load_schema  # noqa: PLC0415
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import render_argv  # noqa: PLC0415

    args = dict(case.get("args") or {})
    if any(isinstance(value, dict) for value in args.values()):
        return None
    return render_argv(load_schema("0.5.23"), args)


@pytest.fixture(scope="module")
def corpus() -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, str]]:
    """The cases by id, the models, and the cases SGLang refuses at a ``preflight`` entry (case id -> entry id)."""
    cases, models = load_cases()
    entries = json.loads(CATALOG.read_text())["entries"]
    mapping = yaml.safe_load(MAPPING.read_text())["entries"]
    at_preflight = {}
    for case in cases:
        entry = catalog_entry(str(case.get("sglang_where") or ""), entries)
        if entry and "preflight" in mapping.get(entry, {}) and launch_args(case) is not None:
            at_preflight[case["id"]] = entry
    return {c["id"]: c for c in cases}, models, at_preflight


@pytest.fixture(scope="module")
def runs(corpus: tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, str]]) -> dict[str, preflight_real.Report]:
    """One preflight_host.py process for every unit below (SGLang's import, ~25 s, is paid once)."""
    by_id, models, at_preflight = corpus
    jobs = [preflight_real.render(case, models, case["id"]) for case in valid_units(by_id)]
    jobs.append(preflight_real.render(by_id[INCIDENT], models, INCIDENT, argv=launch_args(by_id[INCIDENT])))
    jobs += [preflight_real.render(by_id[case_id], models, case_id, argv=launch_args(by_id[case_id]))
             for case_id in at_preflight if case_id != INCIDENT]
    return preflight_real.run(jobs)


def valid_units(by_id: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The valid-family cases whose units the real preflight runs: a fixed-seed sample in CI (preflight_sample), every
    one with CORPUS_SAMPLE=all (make conformance); the reference host's always."""
    chosen = preflight_sample([case for case in by_id.values() if case.get("family") == "valid"])
    return chosen if REFERENCE in {case["id"] for case in chosen} else [by_id[REFERENCE], *chosen]


def test_the_reference_host_passes_and_reports_what_sglang_resolved(corpus: Any, runs: dict[str, Any]) -> None:
    by_id, _models, _at = corpus
    run = runs[REFERENCE]
    assert run.rc == 0 and run.report["ok"], (run.report, run.stderr[-3000:])
    recorded = by_id[REFERENCE]["sglang_resolved"]
    assert {k: v for k, v in run.report["resolved"].items() if k in recorded} == \
        {k: recorded[k] for k in run.report["resolved"] if k in recorded}
    assert run.report["resolved"]["speculative_num_steps"] == 3  # chosen by SGLang, not written in the unit
    assert "--speculative-num-steps" not in run.argv


def test_every_valid_corpus_unit_passes_the_real_preflight(corpus: Any, runs: dict[str, Any]) -> None:
    by_id, _models, _at = corpus
    valid = [case["id"] for case in valid_units(by_id)]
    failed = {case_id: (runs[case_id].rc, runs[case_id].report.get("error"), runs[case_id].report.get("where"))
              for case_id in valid if runs[case_id].rc != 0}
    assert len(valid) >= (300 if CORPUS_SAMPLE == "all" else 40) and not failed, failed


def test_the_incident_is_refused_with_sglangs_own_assertion_and_its_file_line(corpus: Any, runs: dict[str, Any]) -> None:
    by_id, _models, _at = corpus
    run = runs[INCIDENT]
    assert run.rc == 1 and not run.report["ok"], run.report
    assert run.report["error"].startswith("AssertionError"), run.report
    assert run.report["where"] == by_id[INCIDENT]["sglang_where"] == "sglang/srt/arg_groups/speculative_hook.py:1162"
    assert "Traceback" in run.stderr and "speculative_hook.py" in run.stderr


def test_every_preflight_only_case_is_run_by_the_real_preflight(corpus: Any) -> None:
    """A corpus case marked ``ours: preflight`` (our validator cannot decide it) refuses at a ``preflight`` entry with
    an argv the role renders, so the test below runs the preflight on it and requires the refusal."""
    by_id, _models, at_preflight = corpus
    only = sorted(case_id for case_id, case in by_id.items() if case.get("ours") == "preflight")
    assert [case_id for case_id in only if case_id not in at_preflight] == []


def test_preflight_entries_are_confirmed_by_the_real_preflight_and_recorded(corpus: Any, runs: dict[str, Any]) -> None:
    by_id, _models, at_preflight = corpus
    confirmed: dict[str, list[str]] = {}
    wrong = {}
    for case_id, entry in at_preflight.items():
        run = runs[case_id]
        if run.rc in (1, 2) and run.report.get("where") == by_id[case_id]["sglang_where"]:
            confirmed.setdefault(entry, []).append(case_id)
        else:
            wrong[case_id] = (entry, run.rc, run.report.get("error"), run.report.get("where"))
    assert not wrong, wrong
    record = yaml.safe_load(CONFIRMED.read_text())["confirmed"]
    assert {entry: sorted(ids) for entry, ids in record.items()} == {entry: sorted(ids) for entry, ids in confirmed.items()}


def test_every_preflight_family_is_confirmed_or_says_why_not() -> None:
    """Each file ("family") of `preflight`-mapped entries has a confirmed entry in the record, or is listed under
    ``unconfirmed_files`` with why no corpus case reaches it; never both, and no stale file."""
    mapping = yaml.safe_load(MAPPING.read_text())["entries"]
    record = yaml.safe_load(CONFIRMED.read_text())
    families = {entry.rpartition(":")[0].rpartition(":")[0] for entry, kinds in mapping.items() if "preflight" in kinds}
    confirmed = {entry.rpartition(":")[0].rpartition(":")[0] for entry in record["confirmed"]}
    explained = set(record.get("unconfirmed_files") or {})
    assert not confirmed & explained, confirmed & explained
    assert families == confirmed | explained, (sorted(families - confirmed - explained), sorted(explained - families))
    assert all(str(why).strip() for why in record["unconfirmed_files"].values())
