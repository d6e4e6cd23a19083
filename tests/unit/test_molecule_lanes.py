"""tests/molecule_lanes.py: every scenario runs exactly once, the lanes balanced by measured minutes."""

from __future__ import annotations

import itertools
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


def test_the_side_lane_takes_scenarios_after_its_own_minutes() -> None:
    minutes = {"a": 30, "b": 10, "c": 10, "d": 8, "e": 5}
    # The side lane starts 25 minutes loaded: it takes the scenarios that fit best after its commands.
    assert molecule_lanes.lanes(list(minutes), 2, minutes, side=25) == [["a"], ["b", "c", "d"], ["e"]]
    assert molecule_lanes.lanes(["a"], 2, minutes, side=25) == [["a"], []]  # none for it: an empty list last
    # make test's plan: every scenario once, and no assignment of the scenarios to the two lanes and the side lane has
    # a shorter longest lane (by the measured minutes).
    names, start = molecule_lanes.scenarios(), sum(molecule_lanes.SIDE_MINUTES.values())
    *plan, side = molecule_lanes.lanes(names, 2, side=start)
    assert len(plan) == 2 and sorted(n for lane in [*plan, side] for n in lane) == sorted(names)

    def longest(lanes: list[list[str]], loads: list[float]) -> float:
        return max(load + sum(molecule_lanes.MINUTES[n] for n in lane) for lane, load in zip(lanes, loads, strict=True))

    every = [[[n for n, lane in zip(names, choice, strict=True) if lane == k] for k in range(3)]
             for choice in itertools.product(range(3), repeat=len(names))]
    assert longest([*plan, side], [0, 0, start]) == min(longest(other, [0, 0, start]) for other in every)


def test_the_side_lanes_scenarios_run_after_its_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def fake(name, argv, log, env, results, lock, side=False):  # noqa: ANN001, ANN202 - run_one's signature
        ran.append(name)
        results.append(molecule_lanes.Result(name, 0, 1.0, log, "" if side else "molecule "))

    monkeypatch.setattr(molecule_lanes, "run_one", fake)
    monkeypatch.setattr(molecule_lanes, "lanes", lambda names, jobs, side=None: [[], ["monitoring"]])
    assert molecule_lanes.main(["--logs", str(tmp_path), "--lint", "monitoring"]) == 0
    assert ran == ["lint", "monitoring"]


def test_longest_first_to_the_least_loaded_lane() -> None:
    minutes = {"a": 30, "b": 10, "c": 10, "d": 8, "e": 5}
    assert molecule_lanes.lanes(list(minutes), 2, minutes) == [["a"], ["b", "c", "d", "e"]]
    assert molecule_lanes.lanes(["x", "a"], 2, minutes) == [["a"], ["x"]]  # unknown: DEFAULT_MINUTES


def test_a_shorter_longest_lane_than_the_greedy_one_wins() -> None:
    # Longest first to the least loaded lane ends at 7 (a c e | b d); the lanes can end at 6.
    minutes = {"a": 3, "b": 3, "c": 2, "d": 2, "e": 2}
    assert molecule_lanes.lanes(list(minutes), 2, minutes) == [["a", "b"], ["c", "d", "e"]]
    # Where the greedy assignment is as good, it stands: one scenario a lane when there are lanes enough.
    assert molecule_lanes.lanes(list(minutes), 8, minutes) == [["a"], ["b"], ["c"], ["d"], ["e"]]


REPO = Path(__file__).resolve().parents[2]


def _collected(env_extra: dict[str, str]) -> str:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != molecule_lanes.EXTENDED_ENV} | env_extra
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "molecule/default/tests"],
                          cwd=REPO, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_extended_cases_run_only_when_asked() -> None:
    # The default scenario: its own conftest sorts the cases; molecule/conftest.py leaves the extended ones out.
    marked = sum(p.read_text().count("@pytest.mark.extended") + p.read_text().count("marks=pytest.mark.extended")
                 for p in (REPO / "molecule" / "default").rglob("test_*.py"))
    assert marked > 0
    plain = _collected({})
    assert f"({marked} deselected)" in plain and "test_a_crash_loop" not in plain, plain[-600:]
    extended = _collected({molecule_lanes.EXTENDED_ENV: "1"})
    assert "deselected" not in extended and "test_a_crash_loop_hits_the_start_limit" in extended, extended[-600:]


def test_every_extended_case_says_which_case_covers_its_path() -> None:
    for path in (REPO / "molecule").rglob("test_*.py"):
        for line in path.read_text().splitlines():
            if line.startswith("@pytest.mark.extended") or "marks=pytest.mark.extended" in line:
                assert ": " in line.partition("#")[2], f"{path.relative_to(REPO)}: {line}"


def test_a_lane_command_records_its_result_and_log(tmp_path: Path) -> None:
    import threading

    results: list[molecule_lanes.Result] = []
    lock = threading.Lock()
    molecule_lanes.run_one("pytest", [sys.executable, "-c", "print('out'); raise SystemExit(3)"], tmp_path / "p.log",
                           {}, results, lock)
    [result] = results
    assert (result.scenario, result.rc) == ("pytest", 3) and (tmp_path / "p.log").read_text() == "out\n"


def test_lint_sanity_then_pytest_run_in_the_side_lane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[tuple[str, list[str]]] = []

    def fake(name, argv, log, env, results, lock, side=False):  # noqa: ANN001, ANN202 - run_one's signature
        ran.append((name, argv))
        assert side
        results.append(molecule_lanes.Result(name, 1 if name == "lint" else 0, 0.0, log, "", 250))
        log.write_text(f"{name} output\n")

    monkeypatch.setattr(molecule_lanes, "run_one", fake)
    monkeypatch.setattr(molecule_lanes, "lanes", lambda names, jobs, side=None: [[]])  # no molecule scenario
    rc = molecule_lanes.main(["--logs", str(tmp_path), "--lint", "--sanity", "--pytest", "tests/unit", "tests/conformance"])
    assert [name for name, _ in ran] == ["lint", "sanity", "pytest"]
    assert dict(ran)["sanity"][-1] == "sanity"
    assert ran[0][1][1:] == ["run", "--all-files", "--show-diff-on-failure"] and Path(ran[0][1][0]).name == "pre-commit"
    assert ran[2][1][1:] == ["-q", "tests/unit", "tests/conformance"]
    out = capsys.readouterr().out
    assert rc == 1 and "===== lint failed: last 1 lines of its log =====" in out and "lint output" in out


# A molecule verify's log as molecule prints it: the verifier's output behind its box, coloured (shortened).
MOLECULE_LOG = """\
\x1b[36mINFO    \x1b[0m default \u279c verify: Executing
  \x1b[2m\u2502\x1b[0m tests/test_restart.py ....F...
  \x1b[2m\u2502\x1b[0m =========================== short test summary info ============================
  \x1b[2m\u2502\x1b[0m FAILED - RETRYING: [localhost]: Wait for instance(s) creation to complete
  \x1b[2m\u2502\x1b[0m FAILED tests/test_restart.py::test_a_start_stuck[docker://bsa-mol-default] - AssertionError: """ + "x" * 500 + """
  \x1b[2m\u2502\x1b[0m FAILED
  \x1b[2m\u2502\x1b[0m   tests/test_restart.py::test_a_run_without_the_spec_override_does_not_silen
  \x1b[2m\u2502\x1b[0m   tly_undo_it[ansible://bsa-mol-default]
  \x1b[2m\u2502\x1b[0m ========= 1 failed, 29 passed, 4 deselected in 804.46s (0:13:24) =========
  \x1b[2m\u2502\x1b[0m TASK [Gathering Facts] *********************************************************
  \x1b[2m\u2502\x1b[0m ok: [bsa-mol-default]
  \x1b[2m\u2502\x1b[0m TASK [Destroy the simulated host] ***********************************************
  \x1b[2m\u2502\x1b[0m fatal: [localhost]: FAILED! => {"msg": "gone"}
\x1b[31mERROR   \x1b[0m Verifier tests failed
"""


def test_a_failed_runs_summary_names_the_failed_tests_and_fatal_tasks() -> None:
    lines = molecule_lanes.failure_lines(MOLECULE_LOG)
    assert lines[0].startswith("FAILED tests/test_restart.py::test_a_start_stuck[docker://bsa-mol-default] - Assert")
    assert lines[0].endswith(" ...") and len(lines[0]) == molecule_lanes.SUMMARY_WIDTH + 4
    assert lines[1] == ("FAILED tests/test_restart.py::test_a_run_without_the_spec_override_does_not_silently_undo_it"
                        "[ansible://bsa-mol-default]")
    assert lines[2:] == ["========= 1 failed, 29 passed, 4 deselected in 804.46s (0:13:24) =========",
                         "TASK [Destroy the simulated host] ***********************************************",
                         'fatal: [localhost]: FAILED! => {"msg": "gone"}', "ERROR    Verifier tests failed"]
    assert molecule_lanes.failure_lines("all good\n================ 30 passed in 1.00s ================\n") == []
    assert len(molecule_lanes.failure_lines("FAILED t::a - x\n" * 100)) == molecule_lanes.SUMMARY_LINES


def test_the_summary_of_what_failed_is_printed_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def fake(name, argv, log, env, results, lock, side=False):  # noqa: ANN001, ANN202 - run_one's signature
        results.append(molecule_lanes.Result(name, 1, 0.0, log))
        log.write_text(MOLECULE_LOG + "destroy output\n" * 100)

    monkeypatch.setattr(molecule_lanes, "run_one", fake)
    monkeypatch.setattr(molecule_lanes, "lanes", lambda names, jobs: [["default"]])
    assert molecule_lanes.main(["--logs", str(tmp_path), "default"]) == 1
    out = capsys.readouterr().out.splitlines()
    summary = out.index("===== what failed in molecule default =====")
    assert out[summary + 1].startswith("FAILED tests/test_restart.py::test_a_start_stuck")
    assert out[-2] == "molecule_lanes times: lane 1: default 0s = 0s"
    assert out[-1].startswith("molecule_lanes: 0 of 1 passed") and len(out) - summary < 10


def test_the_last_lines_give_each_lanes_times() -> None:
    results = [molecule_lanes.Result("fleet", 0, 2237.4, Path("f.log")), molecule_lanes.Result("profiles", 1, 458.0,
               Path("p.log")), molecule_lanes.Result("pytest", 0, 1926.2, Path("t.log"), "")]
    line = molecule_lanes.lane_times([["fleet", "profiles"], ["default"]], ["lint", "pytest"], results)
    assert line == ("lane 1: fleet 2237s + profiles 458s = 2695s; lane 2: default ? = 0s; "
                    "side: lint ? + pytest 1926s = 1926s")


# How CI's provision verify ended when docker exec lost the temporary directory command's output (shortened, wrapped
# at the console's width as molecule prints it).
LOST_OUTPUT_LOG = """\
  \x1b[2m\u2502\x1b[0m E   AssertionError: ['Run nvidia-persistenced with persistence mode on: Task failed: failed to resolve remote
  \x1b[2m\u2502\x1b[0m   temporary directory from ansible-tmp-1796515295.15-20947-1708,`( umask 77 && mkdir -p "` echo ~/.ansible/tmp `"
  \x1b[2m\u2502\x1b[0m   )`, input_data=None)` returned empty string']
\x1b[31mERROR   \x1b[0m Verifier tests failed
"""


@pytest.mark.parametrize(("first_log", "second_rc", "runs"), [
    (LOST_OUTPUT_LOG, 0, 2),   # lost output, then passed: passed, after two runs
    (LOST_OUTPUT_LOG, 1, 2),   # lost output twice: failed, no third run
    (MOLECULE_LOG, 0, 1),      # any other failure: failed, not run again
])
def test_a_scenario_that_lost_an_exec_output_runs_once_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str], first_log: str,
                                                            second_rc: int, runs: int) -> None:
    calls: list[str] = []

    def fake(name, argv, log, env, results, lock, side=False):  # noqa: ANN001, ANN202 - run_one's signature
        calls.append(name)
        first = len(calls) == 1
        log.write_text(first_log if first else "second run\n")
        results.append(molecule_lanes.Result(name, 1 if first else second_rc, 100.0 if first else 300.0, log))

    monkeypatch.setattr(molecule_lanes, "run_one", fake)
    monkeypatch.setattr(molecule_lanes, "lanes", lambda names, jobs: [["provision"]])
    rc = molecule_lanes.main(["--logs", str(tmp_path), "provision"])
    out = capsys.readouterr().out
    assert len(calls) == runs
    if runs == 1:
        assert rc == 1 and "ran twice" not in out and not (tmp_path / "provision.exec-lost.log").exists()
        return
    assert rc == second_rc
    assert (tmp_path / "provision.exec-lost.log").read_text() == LOST_OUTPUT_LOG
    assert (tmp_path / "provision.log").read_text() == "second run\n"
    # One result, both runs' seconds, and the report says why it ran twice.
    assert "molecule_lanes times: lane 1: provision 400s = 400s" in out
    assert f"molecule_lanes: {1 - second_rc} of 1 passed" in out
    assert "molecule provision ran twice: docker exec lost a command's output in the first run" in out
    assert ("the second passed" if second_rc == 0 else "the second failed too") in out


def test_lost_output_is_found_only_as_ansible_words_it() -> None:
    line = molecule_lanes.lost_exec_output(LOST_OUTPUT_LOG)
    assert line is not None and line.startswith("E   AssertionError: ['Run nvidia-persistenced")
    assert molecule_lanes.lost_exec_output(MOLECULE_LOG) is None
    assert molecule_lanes.lost_exec_output("fatal: [h]: FAILED! => {\"msg\": \"returned empty string\"}\n") is None


# pytest's own log (no molecule box) of an integration test that failed where docker lost the output, and of one that
# failed otherwise.
PYTEST_LOST_LOG = """\
..........F.....F
E   AssertionError: deploy.yml failed: fatal: [bsa-simhost]: UNREACHABLE! => {"msg": "Failed to create temporary directory. \
failed to resolve remote temporary directory from ansible-tmp-1796515295.15-20947-1708,`( umask 77 && mkdir -p \
"` echo ~/.ansible/tmp `" )`, input_data=None)` returned empty string"}
=========================== short test summary info ============================
FAILED tests/integration/test_simhost.py::test_demo_deploy[a - b] - AssertionError: deploy.yml failed: fatal
ERROR tests/integration/test_walk.py::test_walk - RuntimeError: setup
FAILED tests/integration/test_simhost.py::test_demo_deploy[a - b] - again
2 failed, 3401 passed in 1200.00s (0:20:00)
"""


def test_the_failed_tests_of_a_pytest_summary() -> None:
    assert molecule_lanes.failed_tests(PYTEST_LOST_LOG) == [
        "tests/integration/test_simhost.py::test_demo_deploy[a - b]", "tests/integration/test_walk.py::test_walk"]
    assert molecule_lanes.failed_tests("ERROR tests/unit/test_x.py - ImportError: no\nFAILED - RETRYING: [h]: x\n") == [
        "tests/unit/test_x.py"]
    assert molecule_lanes.failed_tests("2 failed\n") == []


@pytest.mark.parametrize(("first_log", "second_rc", "runs"), [
    (PYTEST_LOST_LOG, 0, 2),                                        # lost output, the failed tests then pass
    (PYTEST_LOST_LOG, 1, 2),                                        # they fail again: failed, no third run
    (PYTEST_LOST_LOG.replace("returned empty string", "x"), 0, 1),  # any other failure: not run again
])
def test_a_pytest_run_that_lost_an_exec_output_reruns_its_failed_tests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], first_log: str,
        second_rc: int, runs: int) -> None:
    calls: list[list[str]] = []

    def fake(name, argv, log, env, results, lock, side=False):  # noqa: ANN001, ANN202 - run_one's signature
        calls.append(argv)
        first = len(calls) == 1
        log.write_text(first_log if first else "second run\n")
        results.append(molecule_lanes.Result(name, 1 if first else second_rc, 1000.0 if first else 60.0, log, "", 250))

    monkeypatch.setattr(molecule_lanes, "run_one", fake)
    monkeypatch.setattr(molecule_lanes, "lanes", lambda names, jobs, side=None: [[]])
    rc = molecule_lanes.main(["--logs", str(tmp_path), "--pytest", "tests/unit", "tests/integration"])
    out = capsys.readouterr().out
    assert len(calls) == runs and calls[0][1:] == ["-q", "tests/unit", "tests/integration"]
    if runs == 1:
        assert rc == 1 and "ran twice" not in out and not (tmp_path / "pytest.exec-lost.log").exists()
        return
    assert calls[1][1:] == ["-q", "tests/integration/test_simhost.py::test_demo_deploy[a - b]",
                            "tests/integration/test_walk.py::test_walk"]
    assert rc == second_rc
    assert (tmp_path / "pytest.exec-lost.log").read_text() == first_log
    assert "running its 2 failed test(s) once more" in out
    assert f"molecule_lanes: {1 - second_rc} of 1 passed" in out
    assert "pytest ran twice: docker exec lost a command's output in the first run" in out
    assert ("the second passed" if second_rc == 0 else "the second failed too") in out
