#!/usr/bin/env python3
"""Out-of-rotation time of a rolled-out instance: from its drain to its join, this tree against an earlier revision.

On one simulated Blackwell host (tests/fixtures/simhost) whose stand-in SGLang takes LOAD seconds to "load the model"
and DRAIN seconds to drain, `playbooks/restart.yml` (roles/sglang_rollout: prepare, drain, restart chain, join, ...)
runs RUNS times with this tree and RUNS times with the tree of --rev (a temporary git worktree, default the last
commit before issue 34's reordering), interleaved. A bench-only callback (bench/callback_plugins/task_times.py)
records when each task ended on the host; the out-of-rotation window of a run is the time from the drain task's
result to the join task's result (the inventory has no sglang_routers group, so both are skipped: the window is what
runs between them, which with routers adds the drain's wait for in-flight requests and the join's health wait). The
stand-in's own stop + start (DRAIN + LOAD) is subtracted. Prints, per tree, the median window beyond stop + start, the
ratio, and the tasks that ran in the window with their median seconds.

Usage: bench/rollout_window.py [--runs 3] [--load 5] [--drain 1] [--rev REV] [--host NAME] [--json FILE]
Needs: make venv simhost wheelhouse provision-fixtures (the README's `make bench` does it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import simfleet
from simfleet import REPO, fail, serve_fixtures, up, write_hosts

# The tasks that open and close the window, named once (molecule/shared/rollout_window.py; the same module name as
# this script's, so loaded by path).
_SPEC = importlib.util.spec_from_file_location("shared_rollout_window", REPO / "molecule" / "shared" / "rollout_window.py")
_SHARED = importlib.util.module_from_spec(_SPEC)  # type: ignore[arg-type]
_SPEC.loader.exec_module(_SHARED)  # type: ignore[union-attr]
DRAIN, JOIN = _SHARED.DRAIN, _SHARED.JOIN

HOST = "bsa-bench-window"
# The last commit whose rollout ran the restart's report, last known good copy and the health gate's report between
# the drain and the join (the preflight had moved before the drain one session earlier, in 7258032..be55ef1).
BEFORE = "be55ef1"


def worktree(rev: str, tmp: Path) -> Path:
    """A detached worktree of ``rev`` sharing this tree's build outputs and virtualenvs."""
    path = tmp / f"tree-{rev}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(path), rev], check=True,
                   capture_output=True)
    for shared in ("build", ".venv"):
        if (REPO / shared).exists():
            (path / shared).symlink_to(REPO / shared)
    return path


def run(tree: Path, inv: Path, playbook: str, extra: dict, times: Path | None) -> tuple[float, int, str]:
    """One playbook of ``tree`` with that tree's ansible.cfg; with ``times``, the task_times callback writes there."""
    callback = ({"ANSIBLE_CALLBACK_PLUGINS": str(REPO / "bench" / "callback_plugins"),
                 "ANSIBLE_CALLBACKS_ENABLED": "task_times", "BENCH_TASK_TIMES_FILE": str(times)} if times else {})
    env = simfleet.ansible_env(tree / "ansible.cfg", **callback)
    return simfleet.playbook(inv, f"playbooks/{playbook}", env, None, "-e", json.dumps(extra), repo=tree)


def window(times: Path, host: str) -> tuple[float, list[tuple[str, float]]]:
    """(seconds from the drain's result to the join's result, [(task, seconds) of each task that ran between])."""
    lines = [json.loads(line) for line in times.read_text().splitlines() if line.strip()]
    lines = [line for line in lines if line["host"] == host]
    start = next(i for i, line in enumerate(lines) if line["task"] == DRAIN)
    end = next(i for i, line in enumerate(lines) if line["task"] == JOIN and i > start)
    ran, previous = [], lines[start]["end"]
    for line in lines[start + 1:end]:
        if line["status"] != "skipped":
            ran.append((line["task"], line["end"] - previous))
        previous = line["end"]
    return lines[end]["end"] - lines[start]["end"], ran


def main() -> int:
    global HOST
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=float, default=5.0)
    parser.add_argument("--drain", type=float, default=1.0)
    parser.add_argument("--rev", default=BEFORE, help=f"the revision to compare with (default {BEFORE})")
    parser.add_argument("--host", default=HOST, help=f"name of the simulated host's container (default {HOST})")
    parser.add_argument("--json", type=Path, help="also write the results to this file as JSON")
    args = parser.parse_args()
    HOST = args.host
    own = args.load + args.drain
    env = {"NCCL_IB_DISABLE": "1", "SGLANG_STANDIN_LOAD_SECONDS": str(args.load),
           "SGLANG_STANDIN_DRAIN_SECONDS": str(args.drain)}
    results: dict[str, list[float]] = defaultdict(list)
    tasks: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    up([HOST])
    tmp = Path(tempfile.mkdtemp(prefix="bench-window-"))
    trees = {"this tree": REPO}
    try:
        trees[args.rev] = worktree(args.rev, tmp)
        inv = tmp / "inventory"
        (inv / "group_vars").mkdir(parents=True)
        (inv / "group_vars" / "sglang_servers.yml").write_text(
            (REPO / "inventory" / "sim" / "group_vars" / "sglang_servers.yml").read_text())
        write_hosts(inv, [HOST])
        rc, out = serve_fixtures(inv, simfleet.ansible_env(), tmp)
        if rc:
            return fail("molecule/provision/fixtures.yml", out)
        _, rc, out = run(REPO, inv, "deploy.yml", {"sglang_env": env}, None)
        if rc:
            return fail("deploy.yml", out)
        for i in range(args.runs):
            order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
            for label, tree in order:
                times = tmp / f"times-{i}-{label.replace(' ', '_')}.jsonl"
                _, rc, out = run(tree, inv, "restart.yml", {"sglang_env": env}, times)
                if rc:
                    return fail(f"restart.yml ({label})", out)
                seconds, ran = window(times, HOST)
                results[label].append(seconds - own)
                for task, spent in ran:
                    tasks[label][task].append(spent)
    finally:
        simfleet.down([HOST])
        for tree in trees.values():
            if tree != REPO:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False,
                               capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    now, before = statistics.median(results["this tree"]), statistics.median(results[args.rev])
    print(f"stand-in stop + start: {args.drain:.1f} s + {args.load:.1f} s; {args.runs} runs per tree, interleaved; medians")
    print(f"{'out of rotation beyond stop + start':40} {'seconds':>8}")
    for label in trees:
        print(f"  {label:38} {statistics.median(results[label]):8.2f}")
    print(f"  {'ratio this tree / ' + args.rev:38} {now / before if before else float('nan'):8.2f}")
    for label in trees:
        print(f"tasks in the window ({label}):")
        for task, spent in tasks[label].items():
            print(f"  {statistics.median(spent):6.2f}  {task}")
    if args.json:
        args.json.write_text(json.dumps({
            "benchmark": "rollout_window", "runs": args.runs, "load_s": args.load, "drain_s": args.drain, "rev": args.rev,
            "window_beyond_stop_start_s": {label: statistics.median(v) for label, v in results.items()},
            "tasks": {label: {t: statistics.median(v) for t, v in per.items()} for label, per in tasks.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
