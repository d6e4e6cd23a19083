#!/usr/bin/env python3
"""No-op deploy on simulated hosts: the project's ansible.cfg against stock Ansible settings.

Creates HOSTS simulated Blackwell hosts (tests/fixtures/simhost, named bsa-bench-noop-N), serves the
test fixtures inside them as `make demo` does (molecule/provision/fixtures.yml: the stand-in apt
repository, Hugging Face Hub and wheelhouse), converges them once with playbooks/deploy.yml (not
timed), then times RUNS no-op runs of the same deploy.yml on the same hosts with

* the project's ansible.cfg (pipelining, forks, smart gathering with a JSON fact cache, the
  default callback in YAML without skipped hosts); only the cache's directory is moved to a temporary
  one, so the bench neither reads nor leaves facts in the repository's .cache/facts;
* stock settings: an ansible.cfg with only roles_path and collections_path (forks 5, implicit
  gathering of every fact, no fact cache, no pipelining, the default callback);

interleaved (project, stock, stock, project, ...). Every no-op run must report changed=0 (a warning
line is printed when one does not). Prints the median wall time of each, the ratio stock / project,
and the top tasks of one more project run under ansible.posix.profile_tasks.

Usage: bench/noop_deploy.py [--runs 3] [--hosts 4] [--keep] [--profile-stock] [--json FILE]
Needs: make venv simhost wheelhouse provision-fixtures (the README's `make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from simfleet import REPO, ansible_env, down, fail, playbook, serve_fixtures, stock_config, up, write_hosts

PREFIX = "bsa-bench-noop-"
PROFILE_CALLBACK = "ansible.posix.profile_tasks"
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")
PROFILE_LINE = re.compile(r"^(?P<task>.+?) -+ (?P<seconds>\d+\.\d+)s$")


def inventory(tmp: Path, hosts: list[str]) -> Path:
    """inventory/sim's group variables with the bench's hosts as the GPU hosts."""
    inv = tmp / "inventory"
    shutil.copytree(REPO / "inventory" / "sim" / "group_vars", inv / "group_vars")
    return write_hosts(inv, hosts)


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP per host: ok, changed, unreachable, failed."""
    found = {}
    for line in output.splitlines():
        m = RECAP.match(line.strip())
        if m:
            found[m.group(1)] = dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()[1:]), strict=True))
    return found


def profile(output: str) -> list[tuple[str, float]]:
    """profile_tasks' TASKS RECAP: (task, seconds), slowest first."""
    _, _, tail = output.partition("TASKS RECAP")
    rows = [PROFILE_LINE.match(line.strip()) for line in tail.splitlines()]
    return sorted(((m.group("task"), float(m.group("seconds"))) for m in rows if m), key=lambda r: -r[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed no-op runs of each configuration")
    parser.add_argument("--hosts", type=int, default=4, help="simulated hosts")
    parser.add_argument("--keep", action="store_true", help="leave the containers (and the run logs) in place")
    parser.add_argument("--profile-stock", action="store_true", help="also profile one run with the stock settings")
    parser.add_argument("--json", type=Path, help="write the results to this file as JSON")
    args = parser.parse_args()
    hosts = [f"{PREFIX}{i}" for i in range(1, args.hosts + 1)]
    tmp = Path(tempfile.mkdtemp(prefix="bsa-bench-noop."))
    started = time.monotonic()
    try:
        up(hosts)
        inv = inventory(tmp, hosts)
        project = ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "facts"))
        stock = ansible_env(stock_config(tmp))
        rc, out = serve_fixtures(inv, project, tmp)
        if rc:
            return fail("molecule/provision/fixtures.yml", out)
        converge, rc, out = playbook(inv, "playbooks/deploy.yml", project, tmp / "converge.log")
        if rc:
            return fail("the converging deploy.yml", out)
        times: dict[str, list[float]] = {"project": [], "stock": []}
        changed: dict[str, list[int]] = {"project": [], "stock": []}
        for run in range(args.runs):
            # Interleaved, alternating which goes first: drift in the machine's load hits both alike.
            for name in (("project", "stock") if run % 2 == 0 else ("stock", "project")):
                wall, rc, out = playbook(inv, "playbooks/deploy.yml", project if name == "project" else stock,
                                         tmp / f"{name}-{run}.log")
                stats = recap(out)
                total = sum(s["changed"] for s in stats.values())
                if rc or set(stats) != set(hosts) or any(s["failed"] or s["unreachable"] for s in stats.values()):
                    print(f"WARNING: {name} run {run + 1}: exit {rc}, recap {stats}; log {tmp / f'{name}-{run}.log'}")
                elif total:
                    hosts_changed = ", ".join(f"{h}={s['changed']}" for h, s in stats.items() if s["changed"])
                    print(f"WARNING: {name} run {run + 1} is not a no-op: changed={total} ({hosts_changed})")
                times[name].append(wall)
                changed[name].append(total)
        prof_env = {"ANSIBLE_CALLBACKS_ENABLED": PROFILE_CALLBACK, "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all"}
        prof_wall, _, out = playbook(inv, "playbooks/deploy.yml", {**project, **prof_env}, tmp / "profile-project.log")
        tasks = profile(out)
        stock_tasks: list[tuple[str, float]] = []
        if args.profile_stock:
            _, _, out = playbook(inv, "playbooks/deploy.yml", {**stock, **prof_env}, tmp / "profile-stock.log")
            stock_tasks = profile(out)
    finally:
        if args.keep:
            print(f"kept: containers {', '.join(hosts)}; logs and inventory in {tmp}")
        else:
            down(hosts)
            shutil.rmtree(tmp, ignore_errors=True)
    ours, base = statistics.median(times["project"]), statistics.median(times["stock"])
    print(f"{args.hosts} simulated hosts, playbooks/deploy.yml no-op after a converge ({converge:.1f} s, not compared); "
          f"{args.runs} runs each, interleaved; median shown")
    print(f"{'configuration':46} {'seconds':>8} {'changed':>8}")
    print(f"{'project ansible.cfg':46} {ours:8.2f} {max(changed['project']):8d}")
    print(f"{'stock settings (roles_path, collections_path)':46} {base:8.2f} {max(changed['stock']):8d}")
    print(f"{'ratio stock / project (target >= 2x)':46} {base / ours:7.2f}x")
    if tasks:
        print(f"profile_tasks, project ansible.cfg, one more run ({prof_wall:.1f} s wall, "
              f"{sum(s for _, s in tasks):.1f} s in {len(tasks)} tasks); top 10:")
        for task, seconds in tasks[:10]:
            print(f"  {seconds:6.2f} s  {task}")
    else:
        print(f"profile_tasks: no TASKS RECAP in the output (is {PROFILE_CALLBACK} installed?)")
    if stock_tasks:
        print(f"profile_tasks, stock settings ({sum(s for _, s in stock_tasks):.1f} s in {len(stock_tasks)} tasks); top 10:")
        for task, seconds in stock_tasks[:10]:
            print(f"  {seconds:6.2f} s  {task}")
    if args.json:
        result: dict[str, Any] = {
            "benchmark": "noop_deploy", "hosts": args.hosts, "runs": args.runs, "converge_s": converge,
            "project_s": times["project"], "stock_s": times["stock"], "project_median_s": ours, "stock_median_s": base,
            "ratio": base / ours, "target_ratio": 2.0, "changed": changed,
            "profile_project": [{"task": t, "seconds": s} for t, s in tasks],
            "profile_stock": [{"task": t, "seconds": s} for t, s in stock_tasks],
            "bench_wall_s": time.monotonic() - started,
        }
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
