"""Shared fixtures of the molecule verify tests (testinfra's `host` comes from molecule), and their two tiers.

A case marked ``extended`` runs only when ``BSA_MOLECULE_EXTENDED=1`` (``make molecule-extended``). It is either a
variation of a failure path that another, unmarked case of the scenario already drives end to end (another fault on
the same rollback, a second rollout order), or a long story whose parts unmarked cases and unit tests cover, kept out
of make test's 45-minute budget (docs/maintainers.md, "Test tiers"): a second run of the README examples and of the
profiles' deploy (molecule default's idempotence step runs in make test), the fleet's SGLang upgrade with kernels
shared from the canary, the gateway's migration from sglang-router to smg. ``make test`` and CI run the unmarked
cases, which cover every playbook, role and failure class; each marker's comment says where its path is covered. An
extended case must leave the host as the cases after it expect, so that either tier runs in file order.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "shared"))

from sglang_judge import judge_scenario  # noqa: E402
from simrun import REPO, make_inventory, scenario_host  # noqa: E402
from tiers import EXTENDED_ENV  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"extended: a long variation of a covered path; runs only with {EXTENDED_ENV}=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the ``extended`` cases unless BSA_MOLECULE_EXTENDED=1 (reported as deselected)."""
    if os.environ.get(EXTENDED_ENV) == "1":
        return
    extended = [item for item in items if item.get_closest_marker("extended")]
    if extended:
        config.hook.pytest_deselected(items=extended)
        items[:] = [item for item in items if not item.get_closest_marker("extended")]


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An inventory for ansible-runner with the scenario's container as the only GPU host."""
    return make_inventory(tmp_path_factory.mktemp("inventory"), scenario_host())


JUDGEMENT = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The judge's counts (sglang_judges_every_start), in their own section of the verify's output."""
    line = terminalreporter.config.stash.get(JUDGEMENT, None)
    if line:
        terminalreporter.section("SGLang's verdicts on the stand-in's starts")
        terminalreporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
def sglang_judges_every_start(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the scenario's last case, SGLang 0.5.23 itself judges every start of the stand-in on the scenario's hosts
    (molecule/shared/sglang_judge.py): a start the stand-in accepted and SGLang refuses, or the other way round, fails
    the verify, naming the host, the arguments and SGLang's file:line."""
    yield
    name = os.environ.get("MOLECULE_SCENARIO_NAME", "default")
    scenario = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY") or REPO / "molecule" / name)
    result = judge_scenario(scenario, tmp_path_factory.mktemp("sglang-judge"))
    request.config.stash[JUDGEMENT] = f"molecule {name}: {result.summary()}"
    if result.problems:
        pytest.fail(f"SGLang and the stand-in disagree on {len(result.problems)} start(s) of molecule {name}:\n"
                    + "\n".join(result.problems), pytrace=False)
