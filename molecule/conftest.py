"""Shared fixtures of the molecule verify tests (testinfra's `host` comes from molecule)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "shared"))

from simrun import make_inventory, scenario_host  # noqa: E402


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An inventory for ansible-runner with the scenario's container as the only GPU host."""
    return make_inventory(tmp_path_factory.mktemp("inventory"), scenario_host())
