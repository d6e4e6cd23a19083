"""Shared pytest setup.

Puts ``<repo>/collections`` on ``sys.path`` so the project's own collection imports as
``ansible_collections.blackwell.sglang...`` without installing it, and offers the repository
root as a fixture (``REPO``, alias ``repo``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_COLLECTIONS = str(REPO / "collections")
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)


@pytest.fixture(scope="session", name="REPO")
def repo_fixture() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root (lower-case alias of ``REPO``)."""
    return REPO
