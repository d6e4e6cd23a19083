#!/usr/bin/env python3
"""Run every molecule scenario in parallel lanes, and the pytest tiers beside them (make molecule, make test).

Each scenario is a ``molecule test -s NAME`` of its own (create, prepare, converge, verify, destroy, as
``molecule test --all`` runs them); the scenarios use their own containers and docker networks, so two can
run at once. Molecule keeps both cores of the 2-core machine busy (Ansible's controller, ``docker exec`` and the
modules in the containers: 93-99 % busy, sampled from /proc/stat), so more molecule lanes do not finish sooner.
pytest alone, though, leaves about half the machine idle (one process for most of its 21 minutes, 51 % busy during
the conformance tier): with ``--pytest PATH ...`` it runs beside the molecule lanes (its output in
``LOGS/pytest.log``) instead of before them, and the two share both cores; ``--lint`` runs ``make lint``'s hooks in
that lane first (``LOGS/lint.log``), ``--sanity`` then ``make sanity`` (``LOGS/sanity.log``, a few minutes, mostly
ansible-test installing its test requirements).

Scenarios go to the lanes so that the longest lane is as short as the measured minutes below allow (an unlisted
scenario counts as ``DEFAULT_MINUTES``; lanes() searches every assignment); with a side lane, that lane counts as one
more, starting with its commands' minutes (``SIDE_MINUTES``), and runs the scenarios it gets after them. Each scenario's output goes to
``LOGS/NAME.log``; a line per scenario (and for pytest) says how it ended and how long it took; the last lines of
each failed log are printed at the end, then (last, where a truncated CI log still shows them) the lines of each
failed log that name what failed (pytest's FAILED/ERROR lines, Ansible's fatal task), and the exit status is 1 when
any failed. ``--extended`` sets BSA_MOLECULE_EXTENDED=1: the verify cases marked ``extended`` run too (molecule/conftest.py).

    python tests/molecule_lanes.py [SCENARIO ...] [--jobs 2] [--logs build/molecule-logs] [--extended] [--lint]
                                   [--sanity] [--pytest PATH ...]

``--pytest`` takes every word after it: name the scenarios before it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "molecule" / "shared"))

from tiers import EXTENDED_ENV  # noqa: E402  (the variable molecule/conftest.py reads)

# molecule and the ansible tools it calls, from the virtualenv this runs in.
BIN = Path(sys.executable).parent
# A wide console for molecule and pytest (both wrap at $COLUMNS, 80 without a terminal): the failure lines of a log
# stay whole.
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "240"}
# Minutes each scenario took in make test's two lanes, pytest beside them, on the 2-core machine (without the
# extended cases), in the run of 2026-12-07 after the long stories went to the extended tier (fleet 1604 s, default
# 1216 s, standalone 944 s, provision 860 s, profiles 602 s, monitoring 535 s).
MINUTES = {"fleet": 27, "default": 20, "standalone": 16, "provision": 14, "profiles": 10, "monitoring": 9}
# Minutes of the side lane's commands in that run (lint 133 s, sanity 98 s, pytest 1718 s). With a side lane, it is
# one more lane for the scenarios, starting at these minutes: a single molecule scenario keeps about one core busy
# (one host, one task at a time), so a molecule lane left alone at the end leaves the other idle. With the figures
# above, lanes() gives fleet and standalone (43), default, provision and monitoring (43), the side lane then profiles
# (43); that run's assignment (longest first to the least loaded lane) ended its lanes at 2548, 2678 and 2484 s.
SIDE_MINUTES = {"lint": 2, "sanity": 2, "pytest": 29}
DEFAULT_MINUTES = 5
TAIL_LINES = 60
# pytest prints its failures' tracebacks and the summary last; pre-commit its hooks' findings and the diff.
SIDE_TAIL_LINES = 250
# The lines of a log that name what failed: pytest's short summary (FAILED/ERROR test - message) and its last line,
# molecule's errors, Ansible's fatal task (not its "FAILED - RETRYING" of a task that retries). Molecule prints the
# verifier's output behind a box-drawing prefix, coloured, and wraps it at the console's width (ENV sets a wide one;
# a wrapped line goes on indented by two more spaces), so colour and prefix are stripped and wrapped lines joined.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
BOX = re.compile(r"^ *[\u2502\u2514\u2500\u250c|] ?")
FAILURE_LINE = re.compile(r"^(?:FAILED (?!- RETRYING)|ERROR |=+ .*\b(?:failed|error|errors)\b.* in [0-9.]+s|fatal: |TASK \[)")
SUMMARY_LINES = 40
SUMMARY_WIDTH = 400
# docker exec, on a loaded machine, now and then returns a command's exit status without its output (moby's
# stream race, moby/moby#27289; community.docker#644): Ansible then cannot read the temporary directory it has just
# made and fails the task with this message. Nothing the roles did causes it, and the same run on a new container
# passes; a scenario that ends failed with it runs once more (run_lane), and the report says so.
# Matched with the spaces taken out: molecule's console wraps a long line at a space and drops it.
EXEC_OUTPUT_LOST = ("failed to resolve remote temporary directory from", "returned empty string")


@dataclass
class Result:
    """How one scenario ended."""

    scenario: str
    rc: int
    seconds: float
    log: Path
    kind: str = "molecule "  # how the report names it: "molecule NAME", or the side lane's command name alone
    tail_lines: int = TAIL_LINES  # how much of its log a failure prints
    rerun: str | None = None  # the lost-output line that made it run a second time (run_lane)


def logical_lines(text: str) -> list[str]:
    """The lines of a log, colour and molecule's box stripped, each line that molecule wrapped joined again."""
    logical: list[str] = []
    for raw in text.splitlines():
        plain = ANSI.sub("", raw)
        boxed = BOX.match(plain)
        line = plain[boxed.end():] if boxed else plain
        if boxed and logical and line.startswith("  ") and line.strip():
            joint = " " if logical[-1] in ("FAILED", "ERROR") else ""
            logical[-1] += joint + line.strip()
            continue
        logical.append(line.strip())
    return logical


def failure_lines(text: str, limit: int = SUMMARY_LINES) -> list[str]:
    """The lines of a failed run's log that name what failed (FAILURE_LINE), colour and molecule's box stripped, each
    cut to SUMMARY_WIDTH characters; an Ansible ``TASK [...]`` header is kept only right before its ``fatal:``. At
    most ``limit`` lines, the last ones."""
    out: list[str] = []
    header = ""
    for line in logical_lines(text):
        if not FAILURE_LINE.match(line):
            continue
        if line.startswith("TASK ["):
            header = line
            continue
        if line.startswith("fatal: ") and header:
            out.append(header)
        header = ""
        out.append(line if len(line) <= SUMMARY_WIDTH else line[:SUMMARY_WIDTH] + " ...")
    return out[-limit:]


def scenarios(root: Path = REPO / "molecule") -> list[str]:
    """Every scenario directory (one with a molecule.yml) under ``root``, sorted."""
    return sorted(p.parent.name for p in root.glob("*/molecule.yml"))


def lanes(names: list[str], jobs: int, minutes: dict[str, float] | None = None,
          side: float | None = None) -> list[list[str]]:
    """``names`` in ``jobs`` lanes, assigned so that the longest lane is as short as the measured minutes allow.

    Every assignment is searched (longest names first, each to the least loaded lane first, lanes that are still
    empty and equally loaded tried once, a branch dropped as soon as a lane reaches the best found so far): a handful
    of scenarios in three lanes is a few hundred assignments. The first one found is the greedy one (longest first,
    each to the lane with the least work so far; ties: lowest lane), and another replaces it only when its longest
    lane is shorter. Each lane lists its scenarios longest first. With ``side`` (the minutes of the side lane's own
    commands), the side lane is one more lane that starts that loaded, and its scenarios come last in the result, as
    a list of their own (empty when it gets none)."""
    weights = minutes if minutes is not None else MINUTES

    def took(name: str) -> float:
        return weights.get(name, DEFAULT_MINUTES)

    order = sorted(names, key=lambda n: (-took(n), n))
    count = max(1, jobs) + (side is not None)
    load = [0.0] * count
    if side is not None:
        load[-1] = side
    plan: list[list[str]] = [[] for _ in range(count)]
    best: list[list[str]] = []
    best_load = float("inf")

    def place(i: int) -> None:
        nonlocal best, best_load
        if max(load) >= best_load:
            return
        if i == len(order):
            best, best_load = [list(lane) for lane in plan], max(load)
            return
        tried: set[tuple[float, bool]] = set()
        for lane in sorted(range(count), key=lambda n: (load[n], n)):  # the least loaded first: greedy is found first
            if not plan[lane]:  # empty lanes of the same kind and load are interchangeable
                kind = (load[lane], side is not None and lane == count - 1)
                if kind in tried:
                    continue
                tried.add(kind)
            plan[lane].append(order[i])
            load[lane] += took(order[i])
            place(i + 1)
            load[lane] -= took(order[i])
            plan[lane].pop()

    place(0)  # with no scenario at all, the first leaf is the empty plan
    if side is not None:
        return [lane for lane in best[:-1] if lane] + [best[-1]]
    return [lane for lane in best if lane]


def lane_times(plan: list[list[str]], side: list[str], results: list[Result]) -> str:
    """One line: each lane's runs with their seconds and the lane's sum, e.g. 'lane 1: fleet 2237s + profiles 458s =
    2695s; side: lint 61s + pytest 1926s + monitoring 235s = 2222s' (a run that did not end shows '?'; ``side``: the
    side lane's commands, then its scenarios)."""
    took = {r.scenario: r.seconds for r in results}

    def one(label: str, names: list[str]) -> str:
        parts = [(n, took.get(n)) for n in names]
        total = sum(t for _, t in parts if t is not None)
        return f"{label}: " + " + ".join(f"{n} {t:.0f}s" if t is not None else f"{n} ?" for n, t in parts) + f" = {total:.0f}s"

    lines = [one(f"lane {i}", lane) for i, lane in enumerate(plan, 1)]
    if side:
        lines.append(one("side", side))
    return "; ".join(lines)


def run_one(name: str, argv: list[str], log: Path, env: dict[str, str], results: list[Result],
            lock: threading.Lock, side: bool = False) -> None:
    """Run ``argv`` with its output in ``log``, then record and print how it ended (``side``: lint or pytest)."""
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        rc = subprocess.run(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode
    result = (Result(name, rc, time.monotonic() - start, log, "", SIDE_TAIL_LINES) if side
              else Result(name, rc, time.monotonic() - start, log))
    with lock:
        results.append(result)
        print(f"{result.kind}{name}: {'passed' if rc == 0 else f'FAILED (rc {rc})'} in {result.seconds:.0f}s "
              f"(log: {log.relative_to(REPO) if log.is_relative_to(REPO) else log})", flush=True)


def run_side(commands: list[tuple[str, list[str]]], logs: Path, results: list[Result], lock: threading.Lock,
             scenarios: list[str] | None = None, env: dict[str, str] | None = None) -> None:
    """The lane beside the molecule lanes: lint, sanity, then pytest (each runs whatever the one before it did), then
    the molecule ``scenarios`` the plan gave it. A pytest run that failed where docker lost a command's output
    (lost_exec_output: the integration tier runs playbooks on simulated hosts too) runs its failed tests once more."""
    for name, argv in commands:
        run_one(name, argv, logs / f"{name}.log", ENV, results, lock, side=True)
        if name == "pytest":
            rerun_failed_tests(argv, logs / f"{name}.log", results, lock)
    if scenarios:
        run_lane(scenarios, logs, env if env is not None else ENV, results, lock)


# A failed test's node id in pytest's short summary: ``FAILED path.py::test[params] - message`` (or ``ERROR ...``, a
# collection error naming the file alone); the parameters end at the first "]" that the message separator follows.
FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (?!- )(\S+?\.py(?:::[^\s\[]+)*(?:\[.*?\])?)(?: - |$)")


def failed_tests(text: str) -> list[str]:
    """The node ids of the failed and erroring tests in a pytest log's short summary, in order, each once."""
    found: list[str] = []
    for line in logical_lines(text):
        match = FAILED_TEST.match(line)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


def rerun_failed_tests(argv: list[str], log: Path, results: list[Result], lock: threading.Lock) -> None:
    """After a failed pytest run whose log shows lost docker exec output (EXEC_OUTPUT_LOST): its failed tests run once
    more, alone (``argv``'s options, the node ids instead of its paths), the first log kept as ``pytest.exec-lost.log``;
    the result then counts both runs' seconds and says so. Any other failure is left as it is."""
    first = next((r for r in reversed(results) if r.log == log), None)
    if first is None or first.rc == 0:
        return
    text = log.read_text(encoding="utf-8", errors="replace")
    lost, tests = lost_exec_output(text), failed_tests(text)
    if lost is None or not tests:
        return
    options = [word for word in argv[1:] if word.startswith("-")]
    run_again(first, lost, f"{first.scenario}: docker exec lost a command's output ({lost[:200]}); running its "
              f"{len(tests)} failed test(s) once more", [argv[0], *options, *tests], ENV, results, lock, side=True)


def run_again(first: Result, lost: str, why: str, argv: list[str], env: dict[str, str], results: list[Result],
              lock: threading.Lock, side: bool = False) -> None:
    """Run ``argv`` once more after ``first`` failed where docker lost a command's output (``lost``): its log kept as
    ``NAME.exec-lost.log``, ``why`` printed, and the second run's result counting both runs' seconds (``rerun``)."""
    log = first.log
    kept = log.with_name(f"{first.scenario}.exec-lost.log")
    log.replace(kept)
    with lock:
        results.remove(first)
        print(f"{why} (first log: {kept.name})", flush=True)
    run_one(first.scenario, argv, log, env, results, lock, side=side)
    with lock:
        again = next(r for r in reversed(results) if r.log == log)
        again.seconds += first.seconds
        again.rerun = lost


def lost_exec_output(text: str) -> str | None:
    """The line of a scenario's log where ``docker exec`` lost the output of Ansible's temporary-directory command
    (EXEC_OUTPUT_LOST), as logical_lines gives it; None when there is none."""
    start, end = ("".join(words.split()) for words in EXEC_OUTPUT_LOST)
    for line in logical_lines(text):
        squeezed = "".join(line.split())
        if start in squeezed and end in squeezed[squeezed.index(start):]:
            return line
    return None


def run_lane(names: list[str], logs: Path, env: dict[str, str], results: list[Result], lock: threading.Lock) -> None:
    """Run the scenarios of one lane one after the other, recording each result. A scenario that failed where docker
    lost a command's output (lost_exec_output) runs once more from a new container, its first log kept as
    ``NAME.exec-lost.log``; its result then counts both runs' seconds and says so (``rerun``)."""
    for name in names:
        argv = [str(BIN / "molecule"), "test", "-s", name]
        log = logs / f"{name}.log"
        run_one(name, argv, log, env, results, lock)
        first = results[-1] if results and results[-1].log == log else None
        if first is None or first.rc == 0:
            continue
        lost = lost_exec_output(log.read_text(encoding="utf-8", errors="replace"))
        if lost is None:
            continue
        run_again(first, lost, f"molecule {name}: docker exec lost a command's output ({lost[:200]}); running the "
                  "scenario once more", argv, env, results, lock)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MOLECULE_JOBS", "2")),
                        help="lanes that run at once (default: $MOLECULE_JOBS or 2)")
    parser.add_argument("--logs", type=Path, default=REPO / "build" / "molecule-logs", help="one log per scenario")
    parser.add_argument("--extended", action="store_true",
                        help=f"also the verify cases marked extended ({EXTENDED_ENV}=1)")
    parser.add_argument("--lint", action="store_true",
                        help="also run `pre-commit run --all-files` (make lint) beside the lanes, before pytest, its "
                             "output in LOGS/lint.log")
    parser.add_argument("--sanity", action="store_true",
                        help="also run `make sanity` (ansible-test sanity on the collection tarball) beside the lanes, "
                             "after lint and before pytest, its output in LOGS/sanity.log")
    parser.add_argument("--pytest", nargs="+", metavar="PATH", default=[],
                        help="also run `pytest -q PATH ...` beside the lanes, its output in LOGS/pytest.log (every word "
                             "after it is a PATH: name scenarios before it)")
    parser.add_argument("scenario", nargs="*", help="scenarios to run (default: all)")
    args = parser.parse_intermixed_args(argv)
    known = scenarios()
    unknown = sorted(set(args.scenario) - set(known))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(known)}")
    side: list[tuple[str, list[str]]] = []
    if args.lint:
        side.append(("lint", [str(BIN / "pre-commit"), "run", "--all-files", "--show-diff-on-failure"]))
    if args.sanity:
        side.append(("sanity", [os.environ.get("MAKE", "make"), "--no-print-directory", "sanity"]))
    if args.pytest:
        side.append(("pytest", [str(BIN / "pytest"), "-q", *args.pytest]))
    side_scenarios: list[str] = []
    if side:
        *plan, side_scenarios = lanes(args.scenario or known, args.jobs,
                                      side=sum(SIDE_MINUTES.get(name, DEFAULT_MINUTES) for name, _ in side))
    else:
        plan = lanes(args.scenario or known, args.jobs)
    args.logs.mkdir(parents=True, exist_ok=True)
    env = {**ENV, EXTENDED_ENV: "1"} if args.extended else ENV
    for i, lane in enumerate(plan, 1):
        print(f"molecule lane {i}: {' '.join(lane)}{' (extended cases too)' if args.extended else ''}", flush=True)
    results: list[Result] = []
    lock = threading.Lock()
    start = time.monotonic()
    threads = [threading.Thread(target=run_lane, args=(lane, args.logs, env, results, lock)) for lane in plan]
    if side:
        print(f"side lane: {', then '.join(' '.join([Path(cmd[0]).name, *cmd[1:]]) for _, cmd in side)}"
              f"{', then molecule ' + ' '.join(side_scenarios) if side_scenarios else ''}", flush=True)
        threads.insert(0, threading.Thread(target=run_side,
                                           args=(side, args.logs, results, lock, side_scenarios, env)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in results if r.rc != 0]
    for r in failed:
        tail = r.log.read_text(encoding="utf-8", errors="replace").splitlines()[-r.tail_lines:]
        print(f"\n===== {r.kind}{r.scenario} failed: last {len(tail)} lines of its log =====", flush=True)
        print("\n".join(tail), flush=True)
    # Last, where a truncated CI log still shows it: what failed in each failed run, in a few lines.
    for r in failed:
        lines = failure_lines(r.log.read_text(encoding="utf-8", errors="replace"))
        print(f"\n===== what failed in {r.kind}{r.scenario} =====", flush=True)
        print("\n".join(lines) if lines else "(no FAILED, ERROR or fatal line in its log: see its tail above)", flush=True)
    for r in results:
        if r.rerun:
            print(f"{r.kind}{r.scenario} ran twice: docker exec lost a command's output in the first run "
                  f"({r.rerun[:200]}); the second {'passed' if r.rc == 0 else 'failed too'}", flush=True)
    # And each lane's times, which CI's truncated log would otherwise lose: where the budget goes.
    print(f"molecule_lanes times: {lane_times(plan, [name for name, _ in side] + side_scenarios, results)}",
          flush=True)
    print(f"molecule_lanes: {len(results) - len(failed)} of {len(results)} passed in "
          f"{time.monotonic() - start:.0f}s with {len(plan) + bool(side_scenarios)} molecule lane(s)"
          f"{' and ' + ', '.join(name for name, _ in side) if side else ''}",
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
