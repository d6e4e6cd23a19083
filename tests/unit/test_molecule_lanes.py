"""tests/molecule_lanes.py: every scenario runs exactly once, the lanes balanced by measured minutes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import molecule_lanes  # noqa: E402


def test_every_scenario_of_the_repository_is_found_and_has_a_measured_time() -> None:
    found = molecule_lanes.scenarios()
    assert "default" in found and "fleet" in found
    # A new scenario without a figure is scheduled as DEFAULT_MINUTES: give it its measured time.
    assert set(found) == set(molecule_lanes.MINUTES)


@pytest.mark.parametrize("jobs", [1, 2, 3, 8])
def test_each_scenario_runs_once_in_at_most_jobs_lanes(jobs: int) -> None:
    names = molecule_lanes.scenarios()
    plan = molecule_lanes.lanes(names, jobs)
    assert len(plan) == min(jobs, len(names))
    assert sorted(n for lane in plan for n in lane) == sorted(names)


def test_longest_first_to_the_least_loaded_lane() -> None:
    minutes = {"a": 30, "b": 10, "c": 10, "d": 8, "e": 5}
    assert molecule_lanes.lanes(list(minutes), 2, minutes) == [["a"], ["b", "c", "d", "e"]]
    assert molecule_lanes.lanes(["x", "a"], 2, minutes) == [["a"], ["x"]]  # unknown: DEFAULT_MINUTES
