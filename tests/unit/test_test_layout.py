"""Test modules have unique basenames across tests/ (what `make test` collects in one pytest run).

The test folders are not packages, so pytest imports each module by its basename ("rootdir-relative" import
mode is not in use): two files called ``test_x.py`` under ``tests/unit`` and ``tests/integration`` pass when
each folder runs alone and fail the whole collection, before any test runs, when ``make test`` collects both.
That is how CI failed once; this check names the clash in ``make unit`` instead.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# What `make test` hands to one pytest run (Makefile: PYTEST_TIERS).
COLLECTED = ("unit", "integration", "conformance")


def test_test_module_basenames_are_unique() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for folder in COLLECTED:
        for path in sorted((TESTS / folder).rglob("*.py")):
            if path.name.startswith("test_") or path.name.endswith("_test.py"):
                where[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not clashes, f"test modules share a basename, so one pytest run cannot collect them all: {clashes}"


def test_the_check_sees_every_collected_folder() -> None:
    # The check is only as good as its folder list: a folder the Makefile collects and this file does not
    # would let a clash through.
    makefile = (TESTS.parent / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if x.startswith("PYTEST_TIERS :="))
    assert sorted(p.removeprefix("tests/") for p in line.split()[2:]) == sorted(COLLECTED)
    assert "--pytest $(PYTEST_TIERS)" in makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
