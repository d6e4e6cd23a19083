#!/usr/bin/env python3
"""Counts, not clocks: the tasks, module executions and planner calls of deploy.yml and restart.yml (issue 31).

On one simulated Blackwell host like `make demo`'s (tests/fixtures/simhost, named bsa-bench-counts, with
inventory/sim's group variables as bench/restart_overhead.py writes them: its stand-in loads in LOAD s and
drains in DRAIN s), after serving the fixtures and converging it once with playbooks/deploy.yml, counts:

* a no-op deploy.yml: tasks run (PLAY RECAP's ok + skipped + changed) and module executions on the host;
* restart.yml of its one instance: module executions on the host and controller-side tasks; and its wall
  time beyond the stand-in's stop + start, against a by-hand restart (`systemctl restart` + a curl loop on
  /health) measured in the same run, RUNS times each, interleaved;
* restart.yml -e spec=auto: the same counts (the demo's restart).

Then (--fleet N, default 2; 0 skips it) N-1 more simulated hosts join the same inventory (bsa-bench-counts-2 ...),
deploy.yml converges them, and one more deploy.yml (a no-op) over all N counts the planner calls per host:
``plan_host`` by caller (the validate action on the controller, the filters that bind the plan to the GPU
facts), the planning filters and the rendering function (server_files).

How it counts (the same on every machine): bench/callback_plugins/task_counts.py classifies every task
result by its action and delegation (its docstring says how); bench/hooks/sitecustomize.py, put on
PYTHONPATH, logs each call of the planners and each command an action sends to a host (``round trips``:
one per module run with pipelining; a template or copy sends a stat first, a polling action one per poll).
Each run's PLAY RECAP is checked against the callback's counts. The wall times are reported beside the
counts, never compared with a fixed figure except the issue's 5 s.

Usage: bench/task_counts.py [--runs 3] [--fleet 2] [--host NAME] [--load 5] [--drain 1] [--keep] [--json FILE]
Needs: make venv simhost wheelhouse provision-fixtures (`make bench-counts` does it).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import restart_overhead
import simfleet
from noop_deploy import recap
from simfleet import ansible_env, fail, serve_fixtures, up, write_hosts

HOST = "bsa-bench-counts"
HERE = Path(__file__).resolve().parent
# Issue 31's targets: (figure key, target, the issue's words).
TARGETS = {
    "noop_tasks": 70, "noop_module_executions": 30, "restart_module_executions": 6, "restart_controller_tasks": 25,
    "restart_wall_beyond_s": 5.0, "plan_host_per_host": 2,
}


@dataclass
class Counted:
    """One counted ansible-playbook run."""

    label: str
    wall_s: float
    rc: int
    counts: dict[str, Any]
    calls: list[dict[str, Any]]
    recap: dict[str, dict[str, int]]
    problems: list[str] = field(default_factory=list)

    def host(self, host: str) -> dict[str, Any]:
        """The callback's totals of ``host`` over every play of the run."""
        return self.counts.get("totals", {}).get(host, {})


def counting_env(tmp: Path, label: str) -> tuple[dict[str, str], Path, Path]:
    """The project's ansible.cfg with the counting callback and call log on: (environment, counts file, call log)."""
    counts, calls = tmp / f"{label}.counts.json", tmp / f"{label}.calls.jsonl"
    calls.unlink(missing_ok=True)
    env = ansible_env(
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "facts"),
        ANSIBLE_CALLBACK_PLUGINS=str(HERE / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="task_counts",
        BENCH_TASK_COUNTS_FILE=str(counts),
        BENCH_CALL_LOG=str(calls),
        PYTHONPATH=str(HERE / "hooks"),
    )
    return env, counts, calls


def counted(inv: Path, path: str, tmp: Path, label: str, extra: dict[str, Any]) -> Counted:
    """Run playbook ``path`` counted; its log is ``tmp``/``label``.log."""
    env, counts_file, calls_file = counting_env(tmp, label)
    wall, rc, out = simfleet.playbook(inv, path, env, tmp / f"{label}.log", "-e", json.dumps(extra))
    counts = json.loads(counts_file.read_text()) if counts_file.exists() else {}
    calls = [json.loads(line) for line in calls_file.read_text().splitlines()] if calls_file.exists() else []
    run = Counted(label, wall, rc, counts, calls, recap(out))
    for host, stats in run.recap.items():
        mine = run.host(host)
        if stats["ok"] != mine.get("ok") or stats["changed"] != mine.get("changed") or stats["failed"] != mine.get("failed"):
            run.problems.append(f"{label}: {host}: PLAY RECAP {stats} differs from the callback's ok={mine.get('ok')} "
                                f"changed={mine.get('changed')} failed={mine.get('failed')}")
    if not counts:
        run.problems.append(f"{label}: the task_counts callback wrote nothing (log {tmp / f'{label}.log'})")
    return run


def round_trips(run: Counted, host: str) -> int:
    """Commands the actions sent to ``host`` in ``run`` (one per module run with pipelining)."""
    return sum(1 for c in run.calls if c["fn"] == "exec" and c["host"] == host)


def trips_by_task(run: Counted, host: str) -> collections.Counter[str]:
    return collections.Counter(f"{c['task']} [{c['action']}]" for c in run.calls if c["fn"] == "exec" and c["host"] == host)


def planner_calls(run: Counted) -> dict[str, dict[str, int]]:
    """Per host: ``plan_host`` calls by caller (``plan_host <- validate``) and each counted filter's and render's calls."""
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for c in run.calls:
        if c["fn"] == "exec":
            continue
        # plan_host by caller: "plan_host <- action.validate", "plan_host <- filter.sglang"
        name = c["fn"] if c["fn"] != "plan_host" else "plan_host <- " + ".".join(str(c["caller"]).split(".")[-2:])
        per[c["host"] or "(no host)"][name] += 1
    return {host: dict(sorted(counter.items())) for host, counter in sorted(per.items())}


def figures(run: Counted, host: str) -> dict[str, Any]:
    """The counts of ``host`` in ``run``, with the lists a reader cuts from."""
    mine = run.host(host)
    keys = ("tasks", "ok", "changed", "skipped", "failed", "module_tasks", "module_executions", "retry_attempts",
            "controller_tasks")
    return {**{k: mine.get(k, 0) for k in keys}, "round_trips": round_trips(run, host), "wall_s": run.wall_s, "rc": run.rc,
            "modules": mine.get("modules", []), "controller": mine.get("controller", []), "skips": mine.get("skips", []),
            "round_trips_by_task": dict(trips_by_task(run, host).most_common()), "planner_calls": planner_calls(run)}


def by_role(entries: list[dict[str, Any]], weight: str | None = None) -> list[tuple[str, int]]:
    counter: collections.Counter[str] = collections.Counter()
    for e in entries:
        counter[e["role"] or "(play)"] += e[weight] if weight else 1
    return counter.most_common()


def print_lists(title: str, fig: dict[str, Any]) -> None:
    """What makes up the counts of one run: module executions one by one, controller-side and skipped tasks by role."""
    print(f"\n{title}: {fig['module_executions']} module executions in {fig['module_tasks']} tasks "
          f"({fig['round_trips']} round trips), {fig['controller_tasks']} controller-side tasks, {fig['skipped']} skipped")
    for m in fig["modules"]:
        where = f" -> {m['delegate_to']}" if m["delegate_to"] else ""
        runs = f" x{m['executions']}" if m["executions"] != 1 else ""
        tries = f" ({m['attempts']} attempts)" if m["attempts"] != m["executions"] else ""
        print(f"  module {m['role'] or '(play)'}: {m['task']} [{m['action']}]{runs}{tries}{where}")
    print("  controller-side tasks by role: " + ", ".join(f"{r} {n}" for r, n in by_role(fig["controller"])))
    print("  skipped tasks by role: " + ", ".join(f"{r} {n}" for r, n in by_role(fig["skips"])))
    print("  round trips, most per task: " + "; ".join(f"{t} {n}" for t, n in list(fig["round_trips_by_task"].items())[:6]))


def met(value: float, limit: float) -> str:
    return f"<= {limit:g}: {'met' if value <= limit else 'NOT met'}"


def by_hand() -> float:
    """Wall seconds of a restart without the project: `systemctl restart` + a curl loop on /health, as bench/restart_overhead.py does."""
    start = time.monotonic()
    restart_overhead.dexec("systemctl restart sglang && until curl -fs -o /dev/null http://127.0.0.1:30000/health; do sleep 0.5; done")
    return time.monotonic() - start


def set_host(name: str) -> None:
    """Name the bench's container (and the prefix of its fleet's)."""
    global HOST
    HOST = name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed restarts of each kind (restart.yml, by hand)")
    parser.add_argument("--fleet", type=int, default=2, help="hosts of the planner-call count (0: skip it)")
    parser.add_argument("--load", type=float, default=5.0, help="the stand-in's model load seconds")
    parser.add_argument("--drain", type=float, default=1.0, help="the stand-in's drain seconds")
    parser.add_argument("--keep", action="store_true", help="leave the containers, logs and counts in place")
    parser.add_argument("--json", type=Path, help="write every figure and list to this file as JSON")
    parser.add_argument("--host", default=HOST, help=f"the simulated host's container (default {HOST}); side-by-side runs need two")
    args = parser.parse_args()
    set_host(args.host)
    restart_overhead.HOST = HOST  # its dexec() and inventory() act on this host
    hosts = [HOST] + [f"{HOST}-{i}" for i in range(2, args.fleet + 1)]
    tmp = Path(tempfile.mkdtemp(prefix="bsa-bench-counts."))
    env = {"NCCL_IB_DISABLE": "1", "SGLANG_STANDIN_LOAD_SECONDS": str(args.load), "SGLANG_STANDIN_DRAIN_SECONDS": str(args.drain)}
    extra = {"sglang_env": env}
    steps: dict[str, float] = {}
    runs: dict[str, Counted] = {}
    problems: list[str] = []
    started = time.monotonic()

    def step(name: str, since: float) -> None:
        steps[name] = time.monotonic() - since
        print(f"[{time.monotonic() - started:6.0f} s] {name}: {steps[name]:.1f} s", flush=True)

    def run(label: str, path: str, inv: Path, more: dict[str, Any] | None = None) -> Counted:
        since = time.monotonic()
        result = counted(inv, path, tmp, label, {**extra, **(more or {})})
        step(label, since)
        problems.extend(result.problems)
        if result.rc:
            fail(f"{label} ({path})", (tmp / f"{label}.log").read_text())
            raise RuntimeError(f"{label} failed")
        return result

    ours: list[float] = []
    hand: list[float] = []
    try:
        since = time.monotonic()
        up([HOST])
        inv = restart_overhead.inventory(tmp)
        rc, out = serve_fixtures(inv, ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "facts")), tmp)
        if rc:
            return fail("molecule/provision/fixtures.yml", out)
        step("host up + fixtures", since)
        runs["converge"] = run("converge", "playbooks/deploy.yml", inv)
        runs["noop"] = run("noop", "playbooks/deploy.yml", inv)
        for i in range(args.runs):  # interleaved: drift in the machine's load hits both alike
            label = "restart" if i == 0 else f"restart-{i + 1}"
            runs[label] = run(label, "playbooks/restart.yml", inv)
            ours.append(runs[label].wall_s - args.load - args.drain)
            since = time.monotonic()
            hand.append(by_hand() - args.load - args.drain)
            step(f"by-hand restart {i + 1}", since)
        runs["restart_auto"] = run("restart_auto", "playbooks/restart.yml", inv, {"spec": "auto"})
        if args.fleet > 1:
            since = time.monotonic()
            up(hosts[1:])
            write_hosts(inv, hosts)
            rc, out = serve_fixtures(inv, ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "facts")), tmp)
            if rc:
                return fail("molecule/provision/fixtures.yml (fleet)", out)
            step(f"{args.fleet - 1} more hosts up + fixtures", since)
            runs["fleet_converge"] = run("fleet_converge", "playbooks/deploy.yml", inv)
            runs["fleet_noop"] = run("fleet_noop", "playbooks/deploy.yml", inv)
    except RuntimeError:
        return 1
    finally:
        if args.keep:
            print(f"kept: containers {', '.join(hosts)}; logs, counts and call logs in {tmp}")
        else:
            simfleet.down(hosts)
            shutil.rmtree(tmp, ignore_errors=True)

    noop, restart, auto = (figures(runs[k], HOST) for k in ("noop", "restart", "restart_auto"))
    wall_ours, wall_hand = statistics.median(ours), statistics.median(hand)
    table: list[tuple[str, str, str]] = [
        ("no-op deploy.yml: tasks run (ok + skipped + changed)", f"{noop['tasks']} ({noop['ok']} ok, {noop['skipped']} skipped, "
         f"{noop['changed']} changed)", met(noop["tasks"], TARGETS["noop_tasks"])),
        ("no-op deploy.yml: module executions on the host", f"{noop['module_executions']} ({noop['round_trips']} round trips)",
         met(noop["module_executions"], TARGETS["noop_module_executions"])),
        ("no-op deploy.yml: controller-side tasks", str(noop["controller_tasks"]), "-"),
        ("restart.yml: module executions on the host", f"{restart['module_executions']} ({restart['round_trips']} round trips)",
         met(restart["module_executions"], TARGETS["restart_module_executions"])),
        ("restart.yml: controller-side tasks", f"{restart['controller_tasks']} (+{restart['skipped']} skipped; {restart['tasks']} tasks)",
         met(restart["controller_tasks"], TARGETS["restart_controller_tasks"])),
        (f"restart.yml: wall beyond stop + start, median of {args.runs}", f"{wall_ours:.2f} s (by hand {wall_hand:.2f} s, "
         f"ratio {wall_ours / wall_hand if wall_hand > 0 else float('inf'):.1f}x)", met(wall_ours, TARGETS["restart_wall_beyond_s"])),
        ("restart.yml -e spec=auto: module executions on the host", f"{auto['module_executions']} ({auto['round_trips']} round trips)",
         "-"),
        ("restart.yml -e spec=auto: controller-side tasks",
         f"{auto['controller_tasks']} (+{auto['skipped']} skipped; {auto['tasks']} tasks)", "-"),
    ]
    fleet: dict[str, Any] = {}
    if "fleet_noop" in runs:
        fleet = {"hosts": hosts, "converge": planner_calls(runs["fleet_converge"]), "noop": planner_calls(runs["fleet_noop"])}
        per_host = [sum(n for k, n in fleet["noop"].get(h, {}).items() if k.startswith("plan_host")) for h in hosts]
        table.append((f"no-op deploy.yml on {len(hosts)} hosts: plan_host calls per host", " / ".join(map(str, per_host)),
                      met(max(per_host), TARGETS["plan_host_per_host"])))
    width = max(len(row[0]) for row in table)
    cwidth = max(len(row[1]) for row in table)
    print(f"\n{'figure':{width}} | {'count':{cwidth}} | target (issue 31)")
    print(f"{'-' * width}-+-{'-' * cwidth}-+-{'-' * 18}")
    for figure, count, target in table:
        print(f"{figure:{width}} | {count:{cwidth}} | {target}")
    print(f"by hand = systemctl restart + curl loop on /health; stand-in stop + start = {args.drain:g} s + {args.load:g} s; "
          "ratio = restart.yml / by hand")
    print_lists("no-op deploy.yml", noop)
    print_lists("restart.yml", restart)
    print_lists("restart.yml -e spec=auto", auto)
    for label, calls in (("converge", planner_calls(runs["converge"])), ("no-op", noop["planner_calls"]),
                         ("restart", restart["planner_calls"])):
        print(f"\nplanner calls, {label} deploy/restart on {HOST}: " + json.dumps(calls))
    for label in ("converge", "noop"):
        if fleet:
            print(f"planner calls, fleet {label} deploy.yml on {len(hosts)} hosts:")
            for host, calls in fleet[label].items():
                print(f"  {host}: " + ", ".join(f"{k} {n}" for k, n in calls.items()))
    print("\ntook: " + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items()) + f"; total {time.monotonic() - started:.0f} s")
    for problem in problems:
        print(f"WARNING: {problem}")
    if noop["changed"]:
        print(f"WARNING: the no-op deploy.yml changed {noop['changed']} task(s)")
    if args.json:
        args.json.write_text(json.dumps({
            "benchmark": "task_counts", "host": HOST, "targets": TARGETS, "runs": args.runs, "load_s": args.load,
            "drain_s": args.drain, "noop": noop, "restart": restart, "restart_auto": auto,
            "converge": figures(runs["converge"], HOST), "restart_wall_beyond_s": ours, "by_hand_wall_beyond_s": hand,
            "restart_wall_beyond_median_s": wall_ours, "by_hand_wall_beyond_median_s": wall_hand, "fleet": fleet,
            "table": [{"figure": f, "count": c, "target": t} for f, c, t in table], "steps_s": steps, "problems": problems,
        }, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
