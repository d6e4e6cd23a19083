"""CI's fixed-seed sample of the differential fuzzing (differential.py): our validator against SGLang itself.

FUZZ_SGLANG_CASES (default 200) cases generated with seed 0 go through our validator and through SGLang's own
argument handling (sglang_probe.py in .venv-conformance).  None may be MISSED (SGLang rejects, we accept),
OUR-ARGV (SGLang refuses the argv our renderer produced), CRASH (our validator raised) or STRICTER-UNEXPLAINED
(we reject what SGLang accepts under a rule not documented in differential.STRICTER).  probe-error cases (the
probe could not run SGLang's check) are reported, not failed.

"0 MISSED" counts only where the generator reaches, so the sample's raise-site coverage (the share of the catalog's
`rule`-mapped entries SGLang refused a generated input at) may not drop below the committed baseline
(coverage-baseline.json, for the default sample).  The table is written to build/fuzz-sglang-sample.md;
``make fuzz-sglang`` runs 10,000 cases.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import differential  # noqa: E402
from conformance_support import REPO, ProbeError  # noqa: E402

SAMPLE_MD = REPO / "build" / "fuzz-sglang-sample.md"
FAILING = ("MISSED", "OUR-ARGV", "CRASH", "STRICTER-UNEXPLAINED")
SEED = 0
COUNT = int(os.environ.get("FUZZ_SGLANG_CASES", "200"))


@pytest.fixture(scope="module")
def sample() -> dict[str, Any]:
    start = time.monotonic()
    cases = differential.generate(COUNT, SEED)
    try:
        verdicts, mine, sglang = differential.evaluate(cases)
    except ProbeError as exc:  # no conformance venv, or the probe itself failed
        pytest.fail(str(exc), pytrace=False)
    text = differential.report(cases, verdicts, mine, sglang, time.monotonic() - start, SEED)
    SAMPLE_MD.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_MD.write_text(text, encoding="utf-8")
    return {"cases": cases, "verdicts": verdicts, "sglang": sglang, "text": text}


def test_fixed_seed_sample_agrees_with_sglang(sample: dict[str, Any]) -> None:
    cases, verdicts, text = sample["cases"], sample["verdicts"], sample["text"]
    offenders = [c["id"] for c in cases if verdicts[c["id"]] in FAILING]
    if offenders:
        # The report's lines of the offending cases: id, model, GPUs, arguments and why.
        lines = [line for line in text.splitlines() if any(f"`{cid}`" in line for cid in offenders)]
        pytest.fail(f"{len(offenders)} of {len(cases)} generated cases disagree with SGLang "
                    f"(table: {SAMPLE_MD.relative_to(REPO)}):\n" + "\n".join(lines), pytrace=False)
    errors = sum(1 for v in verdicts.values() if v == "probe-error")
    print(f"\n{text.splitlines()[2]}"
          + (f" ({errors} probe errors: see {SAMPLE_MD.relative_to(REPO)})" if errors else ""))


def test_sample_raise_site_coverage_does_not_drop(sample: dict[str, Any]) -> None:
    baseline = json.loads(differential.COVERAGE_BASELINE.read_text(encoding="utf-8"))
    if (COUNT, SEED) != (baseline["cases"], baseline["seed"]):
        pytest.skip(f"the baseline is for {baseline['cases']} cases of seed {baseline['seed']}")
    cov, _, kinds = differential.sample_coverage(sample["sglang"])
    hit, total = cov.share(kinds, "rule")
    assert cov.uncatalogued == {}, (
        f"SGLang refused generated inputs at sites the catalog lacks: add them to "
        f"tests/catalog/implicit-{differential.SGLANG_VERSION}.yml: {dict(cov.uncatalogued)}")
    assert hit / total >= baseline["rule_share"], (
        f"the sample reaches {hit} of {total} `rule` entries ({hit / total:.1%}), below the baseline "
        f"{baseline['rule_share']:.1%} ({differential.COVERAGE_BASELINE.name}): the generator lost reach "
        f"(table: {SAMPLE_MD.relative_to(REPO)})")


def test_generated_cases_do_not_depend_on_the_constants_of_loaded_modules(tmp_path: Path) -> None:
    """Hypothesis draws literal constants of loaded local modules now and then; a new constant in a rule must not
    change the cases a seed gives (differential.without_local_constants), or the baseline above would move with
    every rule edit and a pytest run would see other cases than the command line."""
    before = differential.generate(30, SEED)
    module = tmp_path / "i36_constants_probe.py"
    module.write_text("CONSTANTS = [" + ", ".join(str(1000003 + 7919 * i) for i in range(200)) + "]\n"
                      "WORDS = [" + ", ".join(f"'word{i}'" for i in range(200)) + "]\n", encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        __import__("i36_constants_probe")
        assert differential.generate(30, SEED) == before
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("i36_constants_probe", None)


def test_gates_name_catalogued_handlers_and_schema_arguments() -> None:
    """Every GATES key is the file:function of catalog entries and opens them with arguments of the schema (a renamed
    handler or argument would silently stop opening its raise sites)."""
    entries, _ = differential.load_catalog()
    handlers = {f"{e['file']}:{e['function']}" for e in entries}
    schema = differential.schema_arguments()
    for handler, opening in differential.GATES.items():
        assert handler in handlers, handler
        assert opening and all(dest in schema and values for dest, values in opening.items()), handler


def test_each_unreachable_entry_is_a_rule_entry_no_corpus_case_reaches() -> None:
    """unreachable-entries.yaml names catalog entries mapped `rule`, each with its reason, and no case of cases.yaml
    refuses at one of them (a case that does shows the entry reachable: drop it from the file); the committed table
    of unreached entries gives each of its entries without a corpus case a reason."""
    entries, kinds = differential.load_catalog()
    unreachable = differential.unreachable_entries()
    corpus = differential.corpus_sites(entries)
    for eid, reason in unreachable.items():
        assert kinds.get(eid) == "rule", eid
        assert isinstance(reason, str) and len(reason.split()) >= 5, eid
        assert not corpus.get(eid), (eid, corpus.get(eid))
    table = (Path(differential.HERE) / "unreached-rule-entries.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows and not [row for row in rows if row.endswith("| none yet |")], "an entry with no case and no reason"
    for row in rows:
        if row.endswith("| none: unreachable |"):
            assert row.split("`")[1] in unreachable, row
