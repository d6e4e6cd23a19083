#!/usr/bin/env python3
"""Fleet rollout on simulated hosts: playbooks/rollout.yml in batches of 1 against batches of 2.

Creates HOSTS simulated Blackwell hosts (tests/fixtures/simhost, named bsa-bench-roll-N) with the
wheelhouse copied in, an inventory with inventory/fleet-sim's GPU host variables and no
sglang_routers group (rollout.yml then leaves out the drain and join steps), and converges them with
playbooks/deploy.yml --skip-tags driver,cuda as molecule's fleet scenario does (not timed). The
stand-in SGLang takes LOAD seconds to "load the model" and DRAIN seconds to drain, on every host and
in every rollout.

Then, RUNS times, interleaved (serial 1 first in odd runs, serial 2 first in even ones), it times
`rollout.yml -e rollout_confirm=yes -e rollout_serial=S` for S = 1 and 2 (canary: the first host,
rollout.yml's default, so 4 hosts go in 4 batches with S = 1 and in 3 with S = 2). Each rollout has
a real change to roll: sglang_args.max_running_requests alternates between two values in the
inventory's group_vars file, rewritten before each run; after each run every host must serve the new
value (/server_info) from a new server process (MainPID), else a warning line is printed.
Prints the wall time of each rollout, in total and per host, and the ratio serial 1 / serial 2.

Usage: bench/fleet_rollout.py [--runs 1] [--hosts 4] [--load 5] [--drain 1] [--keep] [--json FILE]
Needs: make venv simhost wheelhouse (the README's `make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from simfleet import REPO, ansible_env, dexec, down, fail, sh, up, write_hosts
from simfleet import playbook as run_playbook

PREFIX = "bsa-bench-roll-"
VALUES = (64, 96)  # sglang_args.max_running_requests, alternated: every rollout changes every host
SERIALS = (1, 2)
CANARY = 1


def write_group_vars(inv: Path, value: int, load: float, drain: float) -> None:
    """inventory/fleet-sim's GPU host variables with max_running_requests = ``value`` and the stand-in's timings."""
    group = yaml.safe_load((REPO / "inventory" / "fleet-sim" / "group_vars" / "sglang_servers.yml").read_text())
    # Plain HTTP, no TLS front (roles/sglang_worker_tls): the fleet scenario's TLS files come from its prepare (a
    # throwaway CA), which the bench does not run.
    args = {k: v for k, v in group["sglang_args"].items() if k not in ("ssl_certfile", "ssl_keyfile")}
    group = {k: v for k, v in group.items() if not k.startswith("sglang_worker_tls_")}
    group["sglang_args"] = {**args, "max_running_requests": value}
    group["sglang_env"] = {**group["sglang_env"], "SGLANG_STANDIN_LOAD_SECONDS": str(load),
                           "SGLANG_STANDIN_DRAIN_SECONDS": str(drain)}
    # A host that does not come up fails the run in two minutes, not in the default hour.
    group["sglang_server_ready_timeout"] = 120
    # No router here, and the bench asks each server on the host itself: loopback, so the servers need no API key
    # (the fleet inventory's key lives in its all.yml).
    group["sglang_listen_host"] = "127.0.0.1"
    (inv / "group_vars" / "sglang_servers.yml").write_text("---\n" + yaml.safe_dump(group, sort_keys=False))


def inventory(tmp: Path, hosts: list[str]) -> Path:
    """The bench's hosts as sglang_servers, no sglang_routers group."""
    inv = tmp / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    return write_hosts(inv, hosts)


def playbook(inv: Path, name: str, log: Path, *extra: str) -> tuple[float, int, str]:
    """(wall seconds, exit status, output) of one run with the project's ansible.cfg; output also written to ``log``."""
    env = ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(log.parent / "facts"))  # not the repository's .cache/facts
    return run_playbook(inv, f"playbooks/{name}", env, log, *extra)


def served(hosts: list[str]) -> dict[str, tuple[Any, str]]:
    """Per host: (max_running_requests from /server_info, the service's MainPID)."""
    found = {}
    for host in hosts:
        info = dexec(host, "curl -fsS http://127.0.0.1:30000/server_info", check=False)
        try:
            value = json.loads(info).get("max_running_requests")
        except ValueError:
            value = None
        found[host] = (value, dexec(host, "systemctl show -p MainPID --value sglang", check=False))
    return found


def batches(hosts: int, serial: int) -> int:
    """Batches rollout.yml runs one after another: the canary, then the rest ``serial`` at a time."""
    return CANARY + math.ceil((hosts - CANARY) / serial)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="rollouts of each batch size")
    parser.add_argument("--hosts", type=int, default=4, help="simulated hosts")
    parser.add_argument("--load", type=float, default=5.0, help="stand-in model load seconds")
    parser.add_argument("--drain", type=float, default=1.0, help="stand-in drain seconds")
    parser.add_argument("--keep", action="store_true", help="leave the containers (and the run logs) in place")
    parser.add_argument("--json", type=Path, help="write the results to this file as JSON")
    args = parser.parse_args()
    hosts = [f"{PREFIX}{i}" for i in range(1, args.hosts + 1)]
    tmp = Path(tempfile.mkdtemp(prefix="bsa-bench-roll."))
    started = time.monotonic()
    times: dict[int, list[float]] = {s: [] for s in SERIALS}
    problems: list[str] = []
    try:
        up(hosts)
        for host in hosts:
            sh("docker", "exec", host, "mkdir", "-p", "/srv")
            sh("docker", "cp", str(REPO / "build" / "wheelhouse"), f"{host}:/srv/wheelhouse")
        inv = inventory(tmp, hosts)
        value = VALUES[0]
        write_group_vars(inv, value, args.load, args.drain)
        converge, rc, out = playbook(inv, "deploy.yml", tmp / "converge.log", "--skip-tags", "driver,cuda")
        if rc:
            return fail("the converging deploy.yml", out)
        before = served(hosts)
        if any(v != value for v, _ in before.values()):
            return fail("the converge", f"hosts do not serve max_running_requests={value}: {before}")
        for run in range(args.runs):
            for serial in (SERIALS if run % 2 == 0 else SERIALS[::-1]):
                value = VALUES[1] if value == VALUES[0] else VALUES[0]
                write_group_vars(inv, value, args.load, args.drain)
                wall, rc, out = playbook(inv, "rollout.yml", tmp / f"serial{serial}-{run}.log",
                                         "-e", json.dumps({"rollout_confirm": "yes", "rollout_serial": serial}))
                after = served(hosts)
                stale = [h for h in hosts if after[h][0] != value or after[h][1] in ("", "0", before[h][1])]
                if rc or stale:
                    problems.append(f"serial {serial} run {run + 1}: exit {rc}; not serving max_running_requests="
                                    f"{value} from a new process: {', '.join(stale) or '-'} (log {tmp / f'serial{serial}-{run}.log'})")
                    print(f"WARNING: {problems[-1]}")
                times[serial].append(wall)
                before = after
    finally:
        if args.keep:
            print(f"kept: containers {', '.join(hosts)}; logs and inventory in {tmp}")
        else:
            down(hosts)
            shutil.rmtree(tmp, ignore_errors=True)
    median = {s: statistics.median(times[s]) for s in SERIALS}
    print(f"{args.hosts} simulated hosts, no router, canary {CANARY}; stand-in stop + start per host: "
          f"{args.drain:.1f} s + {args.load:.1f} s; converge {converge:.1f} s (not compared); {args.runs} run(s) each; median shown")
    print(f"{'rollout.yml':28} {'batches':>8} {'total s':>9} {'per host s':>11}")
    for s in SERIALS:
        print(f"{'rollout_serial=' + str(s):28} {batches(args.hosts, s):8d} {median[s]:9.2f} {median[s] / args.hosts:11.2f}")
    print(f"{'ratio serial 1 / serial 2':28} {'':8} {median[1] / median[2]:8.2f}x")
    if args.json:
        result: dict[str, Any] = {
            "benchmark": "fleet_rollout", "hosts": args.hosts, "runs": args.runs, "canary": CANARY,
            "load_s": args.load, "drain_s": args.drain, "converge_s": converge,
            "serial": {str(s): {"batches": batches(args.hosts, s), "total_s": times[s], "median_total_s": median[s],
                                "median_per_host_s": median[s] / args.hosts} for s in SERIALS},
            "ratio": median[1] / median[2], "problems": problems, "bench_wall_s": time.monotonic() - started,
        }
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
