"""Shared by the benchmarks that need simulated hosts: containers, inventories and timed playbook runs.

The hosts are tests/fixtures/simhost containers (systemd, fake GPUs) reached through the docker
connection; every playbook runs with an ansible.cfg chosen by the caller and none of the caller's
ANSIBLE_* settings, so a benchmark measures the configuration it names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIMHOST = REPO / "tests" / "fixtures" / "simhost" / "simhost.sh"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PROJECT_CONFIG = REPO / "ansible.cfg"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, text=True, capture_output=True)


def dexec(host: str, script: str, check: bool = True) -> str:
    """Run a shell snippet inside a simulated host; its stdout, stripped."""
    return sh("docker", "exec", host, "sh", "-c", script, check=check).stdout.strip()


def up(hosts: list[str]) -> None:
    """Start one simulated 8-GPU host per name."""
    for host in hosts:
        sh(str(SIMHOST), "up", host, "--gpus", "8")


def down(hosts: list[str]) -> None:
    sh(str(SIMHOST), "down", *hosts, check=False)


def write_hosts(inv: Path, hosts: list[str]) -> Path:
    """``inv``/hosts.yml: ``hosts`` as sglang_servers, reached through the docker connection."""
    inv.mkdir(parents=True, exist_ok=True)
    (inv / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": {"hosts": {h: {} for h in hosts}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    return inv


def ansible_env(config: Path = PROJECT_CONFIG, **extra: str) -> dict[str, str]:
    """The caller's environment without ANSIBLE_* / PROFILE_TASKS_* settings, plus ANSIBLE_CONFIG and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PROFILE_TASKS_"))}
    return {**env, "ANSIBLE_CONFIG": str(config), **extra}


def stock_config(tmp: Path) -> Path:
    """``tmp``/stock/ansible.cfg: only what finds the project's roles and collection, Ansible's defaults otherwise.

    The "stock settings" the project's ansible.cfg is compared with (bench/noop_deploy.py, bench/task_floor.py).
    """
    cfg = tmp / "stock" / "ansible.cfg"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text(f"[defaults]\nroles_path = {REPO / 'roles'}\ncollections_path = {REPO / 'collections'}\n")
    return cfg


def playbook(inv: Path, path: str, env: dict[str, str], log: Path | None = None, *extra: str,
             repo: Path = REPO) -> tuple[float, int, str]:
    """(wall seconds, exit status, output) of one ansible-playbook run of ``path`` (relative to ``repo``: this
    repository, or another tree of it such as a worktree of an earlier revision)."""
    start = time.monotonic()
    proc = subprocess.run([str(PLAYBOOK), "-i", str(inv), str(repo / path), *extra], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=repo)
    wall = time.monotonic() - start
    if log is not None:
        log.write_text(proc.stdout)
    return wall, proc.returncode, proc.stdout


def serve_fixtures(inv: Path, env: dict[str, str], tmp: Path) -> tuple[int, str]:
    """inventory/sim's fixtures (apt repository, Hugging Face Hub, wheelhouse) in the hosts, as `make demo` serves them.

    The fixtures' tarball goes to ``tmp`` (TMPDIR), so a concurrent `make demo` cannot remove it.
    """
    _, rc, out = playbook(inv, "molecule/provision/fixtures.yml", {**env, "TMPDIR": str(tmp)}, tmp / "fixtures.log")
    return rc, out


def fail(what: str, output: str) -> int:
    print(f"{what} failed; last lines of its output:", file=sys.stderr)
    print("\n".join(output.splitlines()[-40:]), file=sys.stderr)
    return 1
