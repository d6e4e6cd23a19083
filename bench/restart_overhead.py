#!/usr/bin/env python3
"""Restart overhead and time-to-reject on a simulated Blackwell host.

Measures, in one run, on one simulated host (tests/fixtures/simhost) whose stand-in SGLang takes
LOAD seconds to "load the model" and DRAIN seconds to drain:

* restart.yml wall time, minus the stand-in's own stop + start time = the project's overhead
  (validation, preflight, GPU release, health wait, report, last-known-good save);
* the baseline a user gets without the project: `systemctl restart` + a curl loop on /health,
  minus the same stop + start time;
* for both, the downtime: how long /health (polled every 0.1 s inside the host) did not answer 200,
  minus the same stop + start time (validation, preflight and file installs happen while the old
  server still serves; the report and the last-known-good save after the new one is up);
* time to reject the incident's flags: restart.yml from start to non-zero exit, server untouched.

Usage: bench/restart_overhead.py [--runs 3] [--load 5] [--drain 1] [--json FILE] [--host NAME] [--profile DIR]
--profile DIR keeps each timed restart.yml's output in DIR, with ansible.posix.profile_tasks' per-task times
(the callback's own cost is in the figures then: compare against a run without it).
Needs: make venv simhost wheelhouse provision-fixtures (the README's `make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import simfleet
from simfleet import REPO, ansible_env, fail, serve_fixtures, sh, up, write_hosts

HOST = "bsa-bench-restart"


# The profile_tasks settings of --profile (empty: the project's configuration as it is).
PROFILE_ENV: dict[str, str] = {}


def dexec(script: str, check: bool = True) -> str:
    return simfleet.dexec(HOST, script, check=check)


def inventory(tmp: Path) -> Path:
    """inventory/sim's group variables with this host as the only GPU host."""
    inv = tmp / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    group = (REPO / "inventory" / "sim" / "group_vars" / "sglang_servers.yml").read_text()
    group += "\n# bench: poll health as often as the baseline's curl loop does\nsglang_server_ready_poll_interval: 0.5\n"
    (inv / "group_vars" / "sglang_servers.yml").write_text(group)
    return write_hosts(inv, [HOST])


def downtime(action: Callable[[], float]) -> tuple[float, float]:
    """(seconds /health did not answer 200 while ``action`` ran, polled every 0.1 s inside the host; its result)."""
    dexec("rm -f /tmp/health.log")
    sh("docker", "exec", "-d", HOST, "sh", "-c",
       "while :; do printf '%s %s\\n' $(date +%s.%N) $(curl -s -o /dev/null -w '%{http_code}' "
       "http://127.0.0.1:30000/health); sleep 0.1; done > /tmp/health.log")
    try:
        value = action()
    finally:
        dexec("pkill -f 'health.log' || true", check=False)
    samples = [line.split() for line in dexec("cat /tmp/health.log").splitlines() if len(line.split()) == 2]
    down, since = 0.0, None
    for stamp, code in samples:
        if code != "200" and since is None:
            since = float(stamp)
        elif code == "200" and since is not None:
            down, since = max(down, float(stamp) - since), None
    return down, value


def playbook(inv: Path, name: str, extra: dict, log: Path | None = None) -> tuple[float, int, str]:
    return simfleet.playbook(inv, f"playbooks/{name}", ansible_env(**(PROFILE_ENV if log else {})), log,
                             "-e", json.dumps(extra))


def main() -> int:
    global HOST
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=float, default=5.0)
    parser.add_argument("--drain", type=float, default=1.0)
    parser.add_argument("--json", type=Path, help="also write the results to this file as JSON")
    parser.add_argument("--host", default=HOST, help=f"name of the simulated host's container (default {HOST})")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="keep each timed restart.yml's output in DIR, with per-task times (profile_tasks)")
    args = parser.parse_args()
    HOST = args.host
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE_ENV.update({"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
                            "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "100", "PROFILE_TASKS_SORT_ORDER": "descending"})
    up([HOST])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inv = inventory(Path(tmp))
            rc, out = serve_fixtures(inv, ansible_env(), Path(tmp))
            if rc:
                return fail("molecule/provision/fixtures.yml", out)
            env = {"NCCL_IB_DISABLE": "1", "SGLANG_STANDIN_LOAD_SECONDS": str(args.load),
                   "SGLANG_STANDIN_DRAIN_SECONDS": str(args.drain)}
            _, rc, out = playbook(inv, "deploy.yml", {"sglang_env": env})
            if rc:
                return fail("deploy.yml", out)
            own = args.load + args.drain
            ours, base, ours_down, base_down = [], [], [], []
            def restart_yml() -> float:
                log = args.profile / f"restart-{len(ours) + 1}.log" if args.profile else None
                wall, rc, out = playbook(inv, "restart.yml", {"sglang_env": env}, log)
                assert rc == 0, "restart.yml failed: " + "\n".join(out.splitlines()[-40:])
                return wall

            def restart_by_hand() -> float:
                start = time.monotonic()
                dexec("systemctl restart sglang && until curl -fs -o /dev/null http://127.0.0.1:30000/health; "
                      "do sleep 0.5; done")
                return time.monotonic() - start

            for _ in range(args.runs):
                down, wall = downtime(restart_yml)
                ours_down.append(down - own)
                ours.append(wall - own)
                down, wall = downtime(restart_by_hand)
                base_down.append(down - own)
                base.append(wall - own)
            pid = dexec("systemctl show -p MainPID --value sglang")
            incident = {"sglang_env": env, "sglang_args": {"speculative_algorithm": "NEXTN", "tp_size": 8,
                        "quantization": "modelopt_fp4", "attention_backend": "triton",
                        "speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}}
            reject, rc, _ = playbook(inv, "restart.yml", incident)
            untouched = dexec("systemctl show -p MainPID --value sglang") == pid
    finally:
        simfleet.down([HOST])
    print(f"stand-in stop + start: {args.drain:.1f} s + {args.load:.1f} s; {args.runs} runs each; median shown")
    print(f"{'measure':44} {'seconds':>8}")
    print(f"{'downtime beyond stop + start: restart.yml':44} {statistics.median(ours_down):8.2f}")
    print(f"{'downtime beyond stop + start: by hand':44} {statistics.median(base_down):8.2f}")
    print(f"{'wall time beyond stop + start: restart.yml':44} {statistics.median(ours):8.2f}")
    print(f"{'wall time beyond stop + start: by hand':44} {statistics.median(base):8.2f}")
    print(f"{'reject incident flags (restart.yml, exit ' + str(rc) + ')':44} {reject:8.2f}")
    print(f"{'running server untouched by the rejection':44} {str(untouched):>8}")
    if args.json:
        args.json.write_text(json.dumps({
            "benchmark": "restart_overhead", "runs": args.runs, "load_s": args.load, "drain_s": args.drain,
            "downtime_ours_s": statistics.median(ours_down), "downtime_base_s": statistics.median(base_down),
            "wall_ours_s": statistics.median(ours), "wall_base_s": statistics.median(base),
            "reject_s": reject, "reject_rc": rc, "untouched": untouched}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
