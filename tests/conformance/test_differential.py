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
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import differential  # noqa: E402
from conformance_support import REPO, ProbeError  # noqa: E402

SAMPLE_MD = REPO / "build" / "fuzz-sglang-sample.md"
SEED = 0
COUNT = int(os.environ.get("FUZZ_SGLANG_CASES", "200"))


@pytest.fixture(scope="module")
def sample() -> dict[str, Any]:
    start = time.monotonic()
    cases = differential.generate(COUNT, SEED)
    contexts: dict[str, Any] = {}
    try:
        verdicts, mine, sglang = differential.evaluate(cases, contexts=contexts)
    except ProbeError as exc:  # no conformance venv, or the probe itself failed
        pytest.fail(str(exc), pytrace=False)
    text = differential.report(cases, verdicts, mine, sglang, time.monotonic() - start, SEED, contexts=contexts)
    SAMPLE_MD.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_MD.write_text(text, encoding="utf-8")
    return {"cases": cases, "verdicts": verdicts, "sglang": sglang, "text": text, "mine": mine, "contexts": contexts}


def test_fixed_seed_sample_agrees_with_sglang(sample: dict[str, Any]) -> None:
    cases, verdicts, text = sample["cases"], sample["verdicts"], sample["text"]
    offenders = [c["id"] for c in cases if verdicts[c["id"]] in differential.FAILING]
    if offenders:
        # The report's lines of the offending cases: id, model, GPUs, arguments and why.
        lines = [line for line in text.splitlines() if any(f"`{cid}`" in line for cid in offenders)]
        pytest.fail(f"{len(offenders)} of {len(cases)} generated cases disagree with SGLang "
                    f"(table: {SAMPLE_MD.relative_to(REPO)}):\n" + "\n".join(lines), pytrace=False)
    errors = sum(1 for v in verdicts.values() if v == "probe-error")
    print(f"\n{text.splitlines()[2]}"
          + (f" ({errors} probe errors: see {SAMPLE_MD.relative_to(REPO)})" if errors else ""))


def test_sample_resolves_like_sglang(sample: dict[str, Any]) -> None:
    """On the cases both accept, resolve.py's defaults are SGLang's resolved values, or the difference is explained
    in resolution-expected.yaml (SGLang changes the value after every check that reads it)."""
    compared, found = differential.resolution.differences(sample["cases"], sample["mine"], sample["contexts"],
                                                          sample["sglang"])
    assert sum(compared.values()), "no resolved value compared: the sample has no case both accept"
    unexplained = [d for d in found if d.explained is None]
    assert not unexplained, "\n".join(differential.resolution.report_lines(compared, unexplained))


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


def test_resolution_contexts_are_schema_arguments_and_reach_the_sample() -> None:
    """Every RESOLUTION_CONTEXTS key is an argument of the schema with a value it takes (a renamed argument or a
    dropped choice would turn a context into a refusal at argparse), and the contexts join the generated cases."""
    schema = differential.schema_arguments()
    for context in differential.RESOLUTION_CONTEXTS:
        for dest, value in context.items():
            arg = schema[dest]
            assert arg["choices"] is None or value in arg["choices"], (dest, value)
            assert (arg["type"] == "int") is (isinstance(value, int) and not isinstance(value, bool)), (dest, value)
    cases = differential.generate(60, SEED)
    carrying = [case for case in cases if any(all(case["args"].get(dest) == value for dest, value in context.items())
                                              for context in differential.RESOLUTION_CONTEXTS)]
    assert len(carrying) >= 10, len(carrying)  # 18 of 60 at seed 0; 4 would hold a context by chance alone


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


def test_resolution_expected_entries_are_sound() -> None:
    """Each explained difference names a compared field, arguments of the schema, the SGLang file:line of the change
    and a reason; an entry matches only the arguments it names (``"*"``: any set value, a switch set to false is
    unset)."""
    resolution = differential.resolution
    schema = differential.schema_arguments()
    for entry in resolution.expected():
        assert set(entry) <= {"field", "when", "sglang", "source", "reason"}, entry
        assert entry["field"] in resolution.OURS, entry
        assert all(dest in schema for dest in entry.get("when") or {}), entry
        assert re.fullmatch(r"sglang/srt/\S+\.py:\d+(-\d+)?(, \S+\.py:\d+(-\d+)?)*", entry["source"]), entry
        assert len(str(entry.get("reason", "")).split()) >= 8, entry
    entry = {"field": "moe_a2a_backend", "when": {"moe_a2a_backend": "ascend_tp", "enable_waterfill": "*"},
             "sglang": "none"}
    assert resolution._matches(entry, "moe_a2a_backend", {"moe_a2a_backend": "ascend_tp", "enable_waterfill": True}, "none")
    assert not resolution._matches(entry, "moe_a2a_backend", {"moe_a2a_backend": "ascend_tp", "enable_waterfill": False},
                                   "none")
    assert not resolution._matches(entry, "moe_a2a_backend", {"moe_a2a_backend": "ascend_tp", "enable_waterfill": True},
                                   "deepep")
    assert not resolution._matches(entry, "page_size", {"moe_a2a_backend": "ascend_tp", "enable_waterfill": True}, "none")
    assert resolution.sglang_value({"attention_backend": "fa3", "decode_attention_backend": None},
                                   "decode_attention_backend") == "fa3"
