"""Conformance tier (see conformance_support.py and test_conformance.py).

The probe runs once per session (fixture ``conformance``); the agreement table is
printed at the end of the run and written to build/conformance-report.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import conformance_support as cs  # noqa: E402


@pytest.fixture(scope="session")
def conformance() -> cs.Conformance:
    return cs.session_conformance()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    c = cs._STATE.get("c")
    if c is None or not c.sglang:
        return
    text = cs.build_report(c)
    cs.REPORT_MD.parent.mkdir(parents=True, exist_ok=True)
    cs.REPORT_MD.write_text(text)
    terminalreporter.section("conformance: our validator vs SGLang " + cs.SGLANG_VERSION)
    for line in text.splitlines():
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"(written to {cs.REPORT_MD.relative_to(cs.REPO)})")
