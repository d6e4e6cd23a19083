"""Shared fixtures of the molecule verify tests (testinfra's `host` comes from molecule), and their two tiers.

A case marked ``extended`` is a variation of a failure path that another, unmarked case of the scenario already
drives end to end (another fault on the same rollback, a second rollout order): it runs only when
``BSA_MOLECULE_EXTENDED=1`` (``make molecule-extended``). ``make test`` and CI run the unmarked cases, which cover
every playbook, role and failure class; an extended case must leave the host as the cases after it expect, so that
either tier runs in file order.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "shared"))

from simrun import make_inventory, scenario_host  # noqa: E402
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
