#!/usr/bin/env python3
"""Run every molecule scenario, in parallel lanes (``make molecule``, ``make test``).

Each scenario is a ``molecule test -s NAME`` of its own (create, prepare, converge, verify, destroy, as
``molecule test --all`` runs them); the scenarios use their own containers and docker networks, so two can
run at once. Most of a scenario's time is waiting (systemd, the servers' start, Ansible's round trips
through ``docker exec``), not the CPU, so two lanes finish well before one does on a 2-core machine.

Scenarios go to the lanes longest first (the measured minutes below; an unlisted scenario counts as
``DEFAULT_MINUTES``), each to the lane with the least work so far. Each scenario's output goes to
``LOGS/NAME.log``; a line per scenario says how it ended and how long it took; the last lines of each failed
scenario's log are printed at the end, and the exit status is 1 when any failed.

    python tests/molecule_lanes.py [--jobs 2] [--logs build/molecule-logs] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# molecule and the ansible tools it calls, from the virtualenv this runs in.
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
# Minutes each scenario took alone on the 2-core machine (molecule test -s NAME; the closing notes' figures).
MINUTES = {"fleet": 30, "default": 22, "profiles": 13, "standalone": 20, "monitoring": 6, "provision": 12}
DEFAULT_MINUTES = 5
TAIL_LINES = 60


@dataclass
class Result:
    """How one scenario ended."""

    scenario: str
    rc: int
    seconds: float
    log: Path


def scenarios(root: Path = REPO / "molecule") -> list[str]:
    """Every scenario directory (one with a molecule.yml) under ``root``, sorted."""
    return sorted(p.parent.name for p in root.glob("*/molecule.yml"))


def lanes(names: list[str], jobs: int, minutes: dict[str, float] | None = None) -> list[list[str]]:
    """``names`` in ``jobs`` lanes: longest first, each to the lane with the least work so far (ties: lowest lane)."""
    weights = minutes if minutes is not None else MINUTES
    out: list[list[str]] = [[] for _ in range(max(1, jobs))]
    load = [0.0] * len(out)
    for name in sorted(names, key=lambda n: (-weights.get(n, DEFAULT_MINUTES), n)):
        lane = load.index(min(load))
        out[lane].append(name)
        load[lane] += weights.get(name, DEFAULT_MINUTES)
    return [lane for lane in out if lane]


def run_lane(names: list[str], logs: Path, results: list[Result], lock: threading.Lock) -> None:
    """Run the scenarios of one lane one after the other, recording each result."""
    for name in names:
        log = logs / f"{name}.log"
        start = time.monotonic()
        with log.open("w", encoding="utf-8") as out:
            rc = subprocess.run([str(BIN / "molecule"), "test", "-s", name], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, env=ENV, check=False).returncode
        result = Result(name, rc, time.monotonic() - start, log)
        with lock:
            results.append(result)
            print(f"molecule {name}: {'passed' if rc == 0 else f'FAILED (rc {rc})'} in {result.seconds:.0f}s "
                  f"(log: {log.relative_to(REPO) if log.is_relative_to(REPO) else log})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MOLECULE_JOBS", "2")),
                        help="lanes that run at once (default: $MOLECULE_JOBS or 2)")
    parser.add_argument("--logs", type=Path, default=REPO / "build" / "molecule-logs", help="one log per scenario")
    parser.add_argument("scenario", nargs="*", help="scenarios to run (default: all)")
    args = parser.parse_args(argv)
    known = scenarios()
    unknown = sorted(set(args.scenario) - set(known))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(known)}")
    plan = lanes(args.scenario or known, args.jobs)
    args.logs.mkdir(parents=True, exist_ok=True)
    for i, lane in enumerate(plan, 1):
        print(f"molecule lane {i}: {' '.join(lane)}", flush=True)
    results: list[Result] = []
    lock = threading.Lock()
    start = time.monotonic()
    threads = [threading.Thread(target=run_lane, args=(lane, args.logs, results, lock)) for lane in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in results if r.rc != 0]
    for r in failed:
        tail = r.log.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
        print(f"\n===== molecule {r.scenario} failed: last {len(tail)} lines of its log =====", flush=True)
        print("\n".join(tail), flush=True)
    print(f"molecule: {len(results) - len(failed)} of {len(results)} scenario(s) passed in "
          f"{time.monotonic() - start:.0f}s with {len(plan)} lane(s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
