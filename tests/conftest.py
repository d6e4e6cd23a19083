"""Shared pytest setup.

Loads the hypothesis profile (``ci`` unless ``HYPOTHESIS_PROFILE`` says otherwise).

Puts ``<repo>/collections`` on ``sys.path`` so the project's own collection imports as
``ansible_collections.blackwell.sglang...`` without installing it, and offers the repository
root as a fixture (``REPO``, alias ``repo``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]

# Property-based tests: CI runs a bounded, derandomised (fixed-seed) sample; `make fuzz` runs them long
# (HYPOTHESIS_PROFILE=fuzz, FUZZ_EXAMPLES cases per property, random seeds).
settings.register_profile("ci", max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "60")), derandomize=True,
                          deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("fuzz", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "10000")), deadline=None,
                          database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

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
