"""Helpers for molecule verify tests that drive the project's playbooks through ansible-runner."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import ansible_runner
import yaml

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[2]))
# The simulated GPU hosts' settings (inventory/sim): the arguments and environment cases start from.
SIM_VARS = yaml.safe_load((REPO / "inventory" / "sim" / "group_vars" / "sglang_servers.yml").read_text())
BASE_ARGS: dict[str, Any] = SIM_VARS["sglang_args"]
BASE_ENV: dict[str, Any] = SIM_VARS["sglang_env"]


def scenario_host() -> str:
    """The scenario's container: bsa-mol-<scenario>."""
    return f"bsa-mol-{os.environ.get('MOLECULE_SCENARIO_NAME', 'default')}"


def make_inventory(directory: Path, host: str) -> Path:
    """inventory/sim's group variables with the scenario's container as the only GPU host."""
    shutil.copytree(REPO / "inventory" / "sim" / "group_vars", directory / "group_vars")
    (directory / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": {"hosts": {host: {}}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    return directory


def play(inventory: Path, workdir: Path, playbook: str, verbosity: int = 0, skip_tags: str = "", limit: str = "",
         diff: bool = False, **extravars: Any) -> ansible_runner.Runner:
    """Run a project playbook against the container with the project's ansible.cfg; events kept. ``diff``: with
    --diff, so that changes() shows what a changed task changed."""
    private = workdir / f"runner-{playbook}-{time.monotonic_ns()}"
    private.mkdir(parents=True)
    return ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(REPO / "playbooks" / playbook),
        inventory=str(inventory),
        extravars=extravars or None,
        verbosity=verbosity,
        skip_tags=skip_tags or None,
        limit=limit or None,
        cmdline="--diff" if diff else None,
        envvars={
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
        quiet=True,
    )


def failures(runner: ansible_runner.Runner) -> list[dict[str, Any]]:
    """event_data of failed tasks (rescued ones included)."""
    return [e["event_data"] for e in runner.events if e.get("event") == "runner_on_failed"]


VALIDATE_TASK = "Validate every host's SGLang arguments against the pinned release"


def unreachable(runner: ansible_runner.Runner) -> list[str]:
    """'host: message' of each host the run lost (a connection that failed), which no failed task reports."""
    return [f"{e['event_data'].get('host')}: {e['event_data'].get('res', {}).get('msg', '')}"
            for e in runner.events if e.get("event") == "runner_on_unreachable"]


def stdout_tail(runner: ansible_runner.Runner, lines: int = 40) -> str:
    """The run's last lines of output: what ended a run that neither failed a task nor lost a host."""
    return "\n".join(runner.stdout.read().splitlines()[-lines:]) if runner.stdout else ""


def changes(runner: ansible_runner.Runner) -> str:
    """Each changed task result of the run, a line each: host, task, and what it changed (its diff where the run had
    --diff, and the paths a blackwell.sglang.server_files run wrote); what an idempotence assertion prints."""
    lines = []
    for event in runner.events:
        data = event.get("event_data", {})
        res = data.get("res") or {}
        if event.get("event") in ("runner_on_ok", "runner_item_on_ok") and res.get("changed"):
            diff = res.get("diff") or []
            shown = {"written": res.get("written"), "diff": diff if isinstance(diff, list) else [diff]}
            lines.append(f"{data.get('host')}: {data.get('task')}: {json.dumps(shown, default=str)[:4000]}")
    return "\n".join(lines)


def final_failure(runner: ansible_runner.Runner) -> str:
    """The message of the last failed task; for the validation's stop, with the validation report it refers to.

    Without a failed task: the unreachable hosts, or else the tail of the output, so that an assertion on a run names
    why it ended (rc and stats alone do not)."""
    found = failures(runner)
    if not found:
        lost = unreachable(runner)
        return f"rc {runner.rc}, no failed task; " + ("unreachable: " + "; ".join(lost) if lost
                                                      else "the output ends:\n" + stdout_tail(runner))
    msg = str(found[-1]["res"].get("msg", ""))
    if found[-1].get("task") == "Stop when any host is invalid":
        msg += "\n" + str(task_result(runner, VALIDATE_TASK).get("report", ""))
    return msg


def task_result(runner: ansible_runner.Runner, task: str) -> dict[str, Any]:
    """res of the last ok/failed event of a task."""
    found = [
        e["event_data"]["res"]
        for e in runner.events
        if e.get("event") in ("runner_on_ok", "runner_on_failed") and e["event_data"].get("task") == task
    ]
    assert found, f"task {task!r} did not run"
    return found[-1]
