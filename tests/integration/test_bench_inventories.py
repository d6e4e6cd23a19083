"""The inventories the benchmarks write pass validate.yml, so a new launch rule cannot break `make bench` unseen.

Each benchmark builds its own inventory from the project's simulated-host group variables; a rule added later
(e.g. the refusal to listen on 0.0.0.0 without an API key) once rejected the fleet-rollout bench's inventory, and
only a full `make bench` found out. Validation runs on the control node: no container is needed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import fleet_rollout  # noqa: E402
import noop_deploy  # noqa: E402
import restart_overhead  # noqa: E402
import task_floor  # noqa: E402
from simfleet import ansible_env, stock_config, write_hosts  # noqa: E402


def _rollout(tmp: Path) -> Path:
    inv = fleet_rollout.inventory(tmp, [f"{fleet_rollout.PREFIX}{i}" for i in (1, 2)])
    fleet_rollout.write_group_vars(inv, fleet_rollout.VALUES[0], 5.0, 1.0)
    return inv


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "fleet_rollout": _rollout,
    "noop_deploy": lambda tmp: noop_deploy.inventory(tmp, [f"{noop_deploy.PREFIX}{i}" for i in (1, 2)]),
    "restart_overhead": restart_overhead.inventory,
}


@pytest.mark.parametrize("bench", sorted(BUILDERS))
def test_the_bench_inventory_validates(bench: str, tmp_path: Path) -> None:
    inv = BUILDERS[bench](tmp_path)
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                           str(REPO / "playbooks" / "validate.yml")],
                          env=ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts")),
                          cwd=REPO, text=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


@pytest.mark.parametrize("setting", ["project", "stock"])
def test_the_task_floor_playbooks_parse_and_list_their_tasks(setting: str, tmp_path: Path) -> None:
    """bench/task_floor.py's generated playbooks: valid YAML plays with the asked number of tasks of each kind."""
    inv = write_hosts(tmp_path / "inventory", [f"{task_floor.PREFIX}1"])
    env = ansible_env(stock_config(tmp_path)) if setting == "stock" else ansible_env()
    for kind, body in {"empty": "", **task_floor.KINDS}.items():
        book = task_floor.play(tmp_path / f"{kind}.yml", body, 3 if body else 0)
        done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(book),
                               "--list-tasks"], env=env, cwd=REPO, text=True, capture_output=True, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        listed = [line for line in done.stdout.splitlines() if line.startswith("      ")]
        assert len(listed) == (3 if body else 0), (kind, done.stdout)
