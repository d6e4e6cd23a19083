#!/usr/bin/env python3
"""Every benchmark of bench/ in one run, then one table: benchmark | ours | baseline | ratio | target.

Runs, one after another, each printing its own table as it goes and writing its results as JSON:

1. bench/validate_scale.py   validate.yml at 10 to 5,000 hosts against one assert per rule per host;
                             both inventory layouts against --list-hosts; render_dir at 1,000 hosts;
2. bench/restart_overhead.py restart downtime and wall time beyond the server's own stop + start,
                             against `systemctl restart` + a curl loop;
3.                           (same script) time to reject the incident's flags, server untouched;
4. bench/noop_deploy.py      a no-op deploy.yml on 4 simulated hosts, the project's ansible.cfg against
                             stock settings, with the profile_tasks top 10;
5. bench/fleet_rollout.py    rollout.yml on 4 simulated hosts, batches of 2 against batches of 1;
6. bench/model_fanout.py     deploy.yml --tags model on 4 simulated hosts and a rate-limited stand-in Hub:
                             bytes from the Hub and wall time, the fan-out against per-host Hub downloads;
7. bench/task_floor.py       what one task costs (a module run, a controller-side task, a skipped task) on
                             1 and 4 simulated hosts, the project's ansible.cfg against stock settings: the
                             floor under the restart and no-op figures;
8. bench/task_counts.py      counts, not clocks (issue 31): tasks and module executions of a no-op deploy.yml
                             and of restart.yml on one simulated host, plan_host calls per host on 2 hosts,
                             and restart.yml's wall time beyond stop + start against a by-hand restart.

Every baseline is measured in the same run as what it is compared with. The machine (CPUs, CPU
model, load average) is printed first: the figures depend on it. Ratio = baseline / ours, so above 1
means ours is faster. Timings are reported, never asserted: a benchmark fails only when it cannot
run (its exit status is then that of this script).

Usage: bench/run_all.py [--only validate,restart,noop,rollout,fanout,floor,counts] [--runs N] [--validate-sizes 10,100,1000,5000]
                        [--validate-baseline-max 100] [--json FILE]
Needs: make venv simhost wheelhouse provision-fixtures (`make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
Row = tuple[str, str, str, str, str]  # benchmark, ours, baseline, ratio, target


def machine() -> str:
    """CPUs, CPU model, memory, load average, kernel, Python and ansible-core versions."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    mem = next((int(line.split()[1]) / 2**20 for line in meminfo.splitlines() if line.startswith("MemTotal:")), 0.0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ansible = subprocess.run([str(BIN / "ansible-playbook"), "--version"], text=True, capture_output=True, check=False)
    version = ansible.stdout.splitlines()[0] if ansible.stdout else "ansible-playbook not found"
    return (f"machine: nproc {usable} (cpu_count {os.cpu_count()}), {model}, {mem:.1f} GiB, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
            f"         {platform.platform()}, Python {platform.python_version()}, {version}")


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def ratio(base: float | None, ours: float | None) -> str:
    return "-" if not base or not ours else f"{base / ours:.2f}x"


def target(min_ratio: float | None, base: float | None, ours: float | None) -> str:
    if min_ratio is None:
        return "-"
    met = bool(base and ours and base / ours >= min_ratio)
    return f">= {min_ratio:g}x: {'met' if met else 'NOT met'}"


def within(ours: float | None, limit: float) -> str:
    """A wall-time target of the issue: under ``limit`` seconds."""
    return "-" if ours is None else f"< {limit:g} s: {'met' if ours < limit else 'NOT met'}"


# The targets (2-core machine): wall time at 1,000 and 5,000 hosts, and >= 30x the baseline at 1,000.
_VALIDATE_TARGETS = {1000: (3.0, 30.0), 5000: (10.0, None)}


def validate_rows(data: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for r in data["rows"]:
        limit, min_ratio = _VALIDATE_TARGETS.get(r["hosts"], (None, None))
        goals = [g for g in (within(r["ours_s"], limit) if limit else "",
                             target(min_ratio, r["baseline_s"], r["ours_s"]) if min_ratio else "") if g]
        rows.append((f"validate {r['hosts']:,} hosts: validate.yml / assert per rule", seconds(r["ours_s"]),
                     seconds(r["baseline_s"]), ratio(r["baseline_s"], r["ours_s"]), "; ".join(goals) or "-"))
    for r in data.get("layouts", []):
        layout = "one hosts.yml" if r["layout"] == "inline" else "host_vars per host"
        goals = []
        if r["layout"] == "files" and r["hosts"] == 1000:
            goals.append(f"beyond list-hosts {within(r['beyond_s'], 1)}")
        if r["layout"] == "files" and r["hosts"] == 5000:
            goals.append(within(r["ours_s"], 10))
        rows.append((f"validate {r['hosts']:,} hosts, {layout}: validate.yml / --list-hosts (beyond: "
                     f"{r['beyond_s']:.2f} s; reading every host's vars alone: {r['read_vars_s']:.2f} s)",
                     seconds(r["ours_s"]), seconds(r["list_hosts_s"]), ratio(r["list_hosts_s"], r["ours_s"]),
                     "; ".join(goals) or "-"))
    render = data.get("render")
    if render:
        rows.append((f"validate.yml -e render_dir, {render['hosts']:,} distinct hosts ({render['files']:,} files, the "
                     "install's rendering function): / without render_dir", seconds(render["ours_s"]),
                     seconds(render["without_s"]), ratio(render["without_s"], render["ours_s"]), within(render["ours_s"], 30)))
    return rows


def restart_rows(data: dict[str, Any]) -> list[Row]:
    base = "systemctl restart + curl"
    return [
        (f"restart downtime beyond stop + start / {base}", seconds(data["downtime_ours_s"]), seconds(data["downtime_base_s"]),
         ratio(data["downtime_base_s"], data["downtime_ours_s"]), within(data["downtime_ours_s"], 1)),
        (f"restart wall time beyond stop + start / {base}", seconds(data["wall_ours_s"]), seconds(data["wall_base_s"]),
         ratio(data["wall_base_s"], data["wall_ours_s"]), within(data["wall_ours_s"], 5)),
        (f"reject incident flags (exit {data['reject_rc']}, server untouched: {data['untouched']})",
         seconds(data["reject_s"]), "model load", "-", within(data["reject_s"], 3)),
    ]


def noop_rows(data: dict[str, Any]) -> list[Row]:
    ours, base = data["project_median_s"], data["stock_median_s"]
    changed = max(data["changed"]["project"] + data["changed"]["stock"])
    note = "" if changed == 0 else f", changed={changed}!"
    return [(f"no-op deploy.yml, {data['hosts']} hosts: ansible.cfg / stock{note}", seconds(ours), seconds(base),
             ratio(base, ours), target(data.get("target_ratio"), base, ours))]


def rollout_rows(data: dict[str, Any]) -> list[Row]:
    one, two = data["serial"]["1"], data["serial"]["2"]
    note = "" if not data["problems"] else ", PROBLEMS (see above)"
    return [
        (f"rollout {data['hosts']} hosts, total: serial 2 / serial 1{note}", seconds(two["median_total_s"]),
         seconds(one["median_total_s"]), ratio(one["median_total_s"], two["median_total_s"]), "-"),
        (f"rollout {data['hosts']} hosts, per host: serial 2 / serial 1", seconds(two["median_per_host_s"]),
         seconds(one["median_per_host_s"]), ratio(one["median_per_host_s"], two["median_per_host_s"]), "-"),
    ]


def fanout_rows(data: dict[str, Any]) -> list[Row]:
    base, fan = data["baseline"], data["fanout"]
    note = "" if not data["problems"] else ", PROBLEMS (see above)"
    mb = data["model_bytes"] / 1e6
    return [
        (f"model staging, {data['hosts']} hosts, {mb:.0f} MB, Hub link {data['rate_bytes_per_s'] / 1e6:g} MB/s: "
         f"MB from the Hub, fan-out / per host{note}", f"{fan['median_hub_bytes'] / 1e6:.0f} MB",
         f"{base['median_hub_bytes'] / 1e6:.0f} MB", f"{base['median_hub_bytes'] / max(fan['median_hub_bytes'], 1):.2f}x",
         f"one copy: {'met' if round(fan['copies'], 2) <= 1.0 else 'NOT met'}"),
        (f"model staging, {data['hosts']} hosts: wall time, fan-out / per host", seconds(fan["median_wall_s"]),
         seconds(base["median_wall_s"]), ratio(base["median_wall_s"], fan["median_wall_s"]), "-"),
    ]


def floor_rows(data: dict[str, Any]) -> list[Row]:
    what = {"module": "a module run (ping, become)", "controller": "a controller-side task (set_fact)",
            "skipped": "a skipped task"}
    return [(f"per task, {r['hosts']} host{'s' if r['hosts'] > 1 else ''}: {what[kind]}, ansible.cfg / stock",
             f"{r['project'][f'{kind}_per_task_s']:.3f} s",
             f"{r['stock'][f'{kind}_per_task_s']:.3f} s",
             ratio(r["stock"][f"{kind}_per_task_s"], r["project"][f"{kind}_per_task_s"]), "-")
            for r in data["rows"] for kind in what]


def counts_rows(data: dict[str, Any]) -> list[Row]:
    """bench/task_counts.py's figures: a count in ours, its issue-31 target; the restart's wall time against by hand."""
    targets = data["targets"]
    noop, restart = data["noop"], data["restart"]

    def most(count: int, limit: int) -> str:
        return f"<= {limit}: {'met' if count <= limit else 'NOT met'}"

    rows: list[Row] = [
        ("no-op deploy.yml, 1 host: tasks run (count)", str(noop["tasks"]), "-", "-", most(noop["tasks"], targets["noop_tasks"])),
        ("no-op deploy.yml, 1 host: module executions on the host (count)", str(noop["module_executions"]), "-", "-",
         most(noop["module_executions"], targets["noop_module_executions"])),
        ("restart.yml: module executions on the host (count)", str(restart["module_executions"]), "-", "-",
         most(restart["module_executions"], targets["restart_module_executions"])),
        ("restart.yml: controller-side tasks (count)", str(restart["controller_tasks"]), "-", "-",
         most(restart["controller_tasks"], targets["restart_controller_tasks"])),
        ("restart.yml wall time beyond stop + start / by hand (task_counts)", seconds(data["restart_wall_beyond_median_s"]),
         seconds(data["by_hand_wall_beyond_median_s"]),
         ratio(data["by_hand_wall_beyond_median_s"], data["restart_wall_beyond_median_s"]),
         within(data["restart_wall_beyond_median_s"], targets["restart_wall_beyond_s"])),
    ]
    fleet = data.get("fleet") or {}
    if fleet:
        per_host = [sum(n for k, n in fleet["noop"].get(h, {}).items() if k.startswith("plan_host")) for h in fleet["hosts"]]
        rows.append((f"no-op deploy.yml, {len(per_host)} hosts: plan_host calls per host (count, most)", str(max(per_host)),
                     "-", "-", most(max(per_host), targets["plan_host_per_host"])))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="validate,restart,noop,rollout,fanout,floor,counts",
                        help="benchmarks to run, comma-separated")
    parser.add_argument("--runs", type=int, help="runs per measurement of restart, noop and rollout (default: each script's)")
    parser.add_argument("--validate-sizes", default="10,100,1000,5000")
    parser.add_argument("--validate-baseline-max", type=int, default=1000,
                        help="largest size the per-rule assert baseline runs at (about 3 min at 1,000)")
    parser.add_argument("--json", type=Path, help="also write every benchmark's results to this file as JSON")
    args = parser.parse_args()
    runs = ["--runs", str(args.runs)] if args.runs else []
    benchmarks: dict[str, tuple[str, list[str], Callable[[dict[str, Any]], list[Row]]]] = {
        "validate": ("validate_scale.py", ["--sizes", args.validate_sizes, "--baseline-max", str(args.validate_baseline_max)],
                     validate_rows),
        "restart": ("restart_overhead.py", runs, restart_rows),
        "noop": ("noop_deploy.py", runs, noop_rows),
        "rollout": ("fleet_rollout.py", runs, rollout_rows),
        "fanout": ("model_fanout.py", runs, fanout_rows),
        "floor": ("task_floor.py", runs, floor_rows),
        "counts": ("task_counts.py", runs, counts_rows),
    }
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in benchmarks]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(benchmarks)}")
    print(machine(), flush=True)
    rows: list[Row] = []
    results: dict[str, Any] = {}
    took: list[str] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="bsa-bench-all.") as tmp:
        for name in chosen:
            script, extra, to_rows = benchmarks[name]
            out = Path(tmp) / f"{name}.json"
            command = [sys.executable, str(HERE / script), *extra, "--json", str(out)]
            print(f"\n== bench/{script} {' '.join(extra)}", flush=True)
            start = time.monotonic()
            rc = subprocess.run(command, check=False).returncode
            took.append(f"{script} {time.monotonic() - start:.0f} s")
            if rc or not out.exists():
                failed = True
                rows.append((f"{script} FAILED (exit {rc})", "-", "-", "-", "-"))
                continue
            results[name] = json.loads(out.read_text())
            rows.extend(to_rows(results[name]))
    print()
    print(machine().splitlines()[0].replace("machine:", "machine at the end:"))
    widths = [max(len(r[i]) for r in [("benchmark", "ours", "baseline", "ratio", "target"), *rows]) for i in range(5)]
    header = ("benchmark", "ours", "baseline", "ratio", "target")
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(cell.ljust(w) if i == 0 else cell.rjust(w) if i < 4 else cell.ljust(w)
                         for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    print("ratio = baseline / ours (above 1: ours is faster); rollout: ours = batches of 2, baseline = batches of 1")
    print(f"took: {', '.join(took)}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results,
                                         "table": [dict(zip(header, r, strict=True)) for r in rows]}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
