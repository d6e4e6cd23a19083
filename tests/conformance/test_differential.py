"""CI's fixed-seed sample of the differential fuzzing (differential.py): our validator against SGLang itself.

FUZZ_SGLANG_CASES (default 200) cases generated with seed 0 go through our validator and through SGLang's own
argument handling (sglang_probe.py in .venv-conformance).  None may be MISSED (SGLang rejects, we accept),
OUR-ARGV (SGLang refuses the argv our renderer produced), CRASH (our validator raised) or STRICTER-UNEXPLAINED
(we reject what SGLang accepts under a rule not documented in differential.STRICTER).  probe-error cases (the
probe could not run SGLang's check) are reported, not failed.  The table is written to build/fuzz-sglang-sample.md;
``make fuzz-sglang`` runs 10,000 cases.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import differential  # noqa: E402
from conformance_support import REPO, ProbeError  # noqa: E402

SAMPLE_MD = REPO / "build" / "fuzz-sglang-sample.md"
FAILING = ("MISSED", "OUR-ARGV", "CRASH", "STRICTER-UNEXPLAINED")
SEED = 0


def test_fixed_seed_sample_agrees_with_sglang() -> None:
    count = int(os.environ.get("FUZZ_SGLANG_CASES", "200"))
    start = time.monotonic()
    cases = differential.generate(count, SEED)
    try:
        verdicts, mine, sglang = differential.evaluate(cases)
    except ProbeError as exc:  # no conformance venv, or the probe itself failed
        pytest.fail(str(exc), pytrace=False)
    text = differential.report(cases, verdicts, mine, sglang, time.monotonic() - start, SEED)
    SAMPLE_MD.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_MD.write_text(text, encoding="utf-8")
    offenders = [c["id"] for c in cases if verdicts[c["id"]] in FAILING]
    if offenders:
        # The report's lines of the offending cases: id, model, GPUs, arguments and why.
        lines = [line for line in text.splitlines() if any(f"`{cid}`" in line for cid in offenders)]
        pytest.fail(f"{len(offenders)} of {len(cases)} generated cases disagree with SGLang "
                    f"(table: {SAMPLE_MD.relative_to(REPO)}):\n" + "\n".join(lines), pytrace=False)
    errors = sum(1 for v in verdicts.values() if v == "probe-error")
    print(f"\n{text.splitlines()[2]}"
          + (f" ({errors} probe errors: see {SAMPLE_MD.relative_to(REPO)})" if errors else ""))
