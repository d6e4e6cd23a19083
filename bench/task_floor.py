#!/usr/bin/env python3
"""What one Ansible task costs on the simulated hosts: the floor under the restart and no-op deploy figures.

Times, on HOSTS simulated hosts (tests/fixtures/simhost, named bsa-bench-floor-N) reached through the
docker connection, playbooks made of TASKS tasks of one kind, against an empty play (the start-up of
ansible-playbook, the inventory and the play), with the project's ansible.cfg and with the stock
settings of simfleet.stock_config (only roles_path and collections_path), interleaved:

* module: ``ansible.builtin.ping`` with become, the cheapest module run (a round trip, Python's start-up
  on the host and the module's imports; pipelining makes it one ``docker exec`` instead of about five);
* controller: ``ansible.builtin.set_fact``, a task that never reaches the host (every role's asserts,
  set_facts and includes are of this kind);
* skipped: a module task whose ``when`` is false (the "nothing changed" branches of a no-op run).

Per task = (playbook - empty play) / TASKS, for all hosts together (they run in parallel). Prints each
figure for both settings and their ratio. The ratio of the module row bounds what any ansible.cfg can
gain on this connection for a run of module tasks; controller and skipped tasks cost both settings the
same, so a playbook that mixes them gains less. Fact gathering is not in these figures: the stock
settings gather every fact in each play, the project's cache gathers a few once an hour.

Usage: bench/task_floor.py [--hosts 1,4] [--tasks 40] [--runs 3] [--json FILE]
Needs: make venv simhost (the README's `make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from simfleet import ansible_env, down, fail, playbook, stock_config, up, write_hosts

PREFIX = "bsa-bench-floor-"
KINDS = {
    "module": "    - ansible.builtin.ping:\n",
    "controller": "    - ansible.builtin.set_fact:\n        __bench_floor: {i}\n",
    "skipped": "    - ansible.builtin.ping:\n      when: false\n",
}


def play(path: Path, body: str, tasks: int) -> Path:
    """A playbook of ``tasks`` copies of ``body`` (empty: no task) on the bench's hosts, become, no facts."""
    head = "- hosts: sglang_servers\n  gather_facts: false\n  become: true\n"
    path.write_text(head + ("  tasks:\n" + "".join(body.format(i=i) for i in range(tasks)) if tasks else "  tasks: []\n"))
    return path


def measure(hosts: list[str], tasks: int, runs: int, tmp: Path) -> dict[str, Any]:
    """Per-task seconds of each kind, project and stock, on ``hosts`` (medians of ``runs``)."""
    inv = write_hosts(tmp / f"inventory-{len(hosts)}", hosts)
    envs = {"project": ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "facts")),
            "stock": ansible_env(stock_config(tmp))}
    books = {"empty": play(tmp / "empty.yml", "", 0)}
    books.update({kind: play(tmp / f"{kind}.yml", body, tasks) for kind, body in KINDS.items()})
    walls: dict[str, dict[str, list[float]]] = {cfg: {book: [] for book in books} for cfg in envs}
    for run in range(runs):
        for cfg in (("project", "stock") if run % 2 == 0 else ("stock", "project")):
            for book, path in books.items():
                wall, rc, out = playbook(inv, str(path), envs[cfg])  # an absolute path: REPO / path is path
                if rc:
                    raise RuntimeError(f"{book}.yml with the {cfg} settings failed:\n" + "\n".join(out.splitlines()[-30:]))
                walls[cfg][book].append(wall)
    result: dict[str, Any] = {"hosts": len(hosts), "tasks": tasks, "runs": runs, "walls_s": walls}
    for cfg in envs:
        empty = statistics.median(walls[cfg]["empty"])
        result[cfg] = {"empty_s": empty, **{f"{kind}_per_task_s": (statistics.median(walls[cfg][kind]) - empty) / tasks
                                            for kind in KINDS}}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,4", help="host counts to measure, comma-separated")
    parser.add_argument("--tasks", type=int, default=40, help="tasks per playbook")
    parser.add_argument("--runs", type=int, default=3, help="runs of each playbook and setting")
    parser.add_argument("--json", type=Path, help="write the results to this file as JSON")
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.hosts.split(",") if n.strip()})
    hosts = [f"{PREFIX}{i}" for i in range(1, max(counts) + 1)]
    tmp = Path(tempfile.mkdtemp(prefix="bsa-bench-floor."))
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    try:
        up(hosts)
        for count in counts:
            results.append(measure(hosts[:count], args.tasks, args.runs, tmp))
    except RuntimeError as exc:
        return fail("a task-floor playbook", str(exc))
    finally:
        down(hosts)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"per task, {args.tasks} tasks a playbook less an empty play, {args.runs} runs each interleaved, median; "
          "all hosts of a row together")
    print(f"{'hosts':>5} {'kind':12} {'project':>9} {'stock':>9} {'stock / project':>16}")
    for r in results:
        for kind in KINDS:
            ours, base = r["project"][f"{kind}_per_task_s"], r["stock"][f"{kind}_per_task_s"]
            print(f"{r['hosts']:5d} {kind:12} {ours:8.3f}s {base:8.3f}s {base / ours if ours > 0 else float('nan'):15.2f}x")
        print(f"{r['hosts']:5d} {'empty play':12} {r['project']['empty_s']:8.3f}s {r['stock']['empty_s']:8.3f}s")
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "task_floor", "rows": results,
                                         "bench_wall_s": time.monotonic() - started}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
