"""Out of rotation, only the restart's floor (issue 34): the tasks between an instance's drain and its join.

roles/sglang_rollout/tasks/instance.yml is read as YAML and every task that can run between the drain and the join
is collected, following include_role (roles/sglang_server tasks_from) and include_tasks into their files and blocks.
Each must be one of molecule/shared/rollout_window.WINDOW (stop, GPU release, start, ready wait, the gate's request,
and the includes that lead to them) with the action listed there. A preflight, a file install, a report, the last
known good copy or a soak placed in the window fails this test. Molecule's restart test checks a real rollout's
events against the same list.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
sys.path.insert(0, str(REPO / "molecule" / "shared"))

from rollout_window import DRAIN, JOIN, WINDOW, window_events  # noqa: E402

STRUCTURE = {"block", "rescue", "always", "name", "when", "vars", "tags", "loop", "loop_control", "register", "no_log",
             "check_mode", "changed_when", "failed_when", "delegate_to", "run_once", "become", "environment",
             "ignore_errors", "listen", "until", "retries", "delay", "args", "notify", "timeout", "async", "poll",
             "throttle", "any_errors_fatal", "diff", "debugger", "module_defaults", "collections", "delegate_facts"}


def load(role: str, name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((ROLES / role / "tasks" / name).read_text(encoding="utf-8")) or []


def action_of(task: dict[str, Any]) -> str:
    [action] = [key for key in task if key not in STRUCTURE]
    return action


def leaves(tasks: list[dict[str, Any]], role: str, path: str, failure_path: bool = False) -> list[tuple[str, str, str, bool]]:
    """(name, action, where, on the failure path) of every task these tasks can run, includes expanded."""
    found: list[tuple[str, str, str, bool]] = []
    for task in tasks:
        if "block" in task:
            found += leaves(task["block"], role, path, failure_path)
            found += leaves(task.get("rescue", []), role, path, True)
            found += leaves(task.get("always", []), role, path, failure_path)
            continue
        action = action_of(task)
        found.append((task.get("name", ""), action, path, failure_path))
        if action == "ansible.builtin.include_tasks":
            target = task[action] if isinstance(task[action], str) else task[action]["file"]
            found += leaves(load(role, target), role, f"{role}/{target}", failure_path)
        elif action == "ansible.builtin.include_role":
            spec = task[action]
            name = spec["name"]
            target = spec.get("tasks_from", "main.yml")
            found += leaves(load(name, target), name, f"{name}/{target}", failure_path)
    return found


def window() -> list[tuple[str, str, str, bool]]:
    """The tasks of instance.yml's block after the drain and before the join, expanded."""
    [outer] = [t for t in load("sglang_rollout", "instance.yml") if "block" in t]
    names = [t.get("name") for t in outer["block"]]
    assert DRAIN in names and JOIN in names, "instance.yml no longer has its drain and join tasks"
    between = outer["block"][names.index(DRAIN) + 1:names.index(JOIN)]
    return leaves(between, "sglang_rollout", "sglang_rollout/instance.yml")


def test_only_the_restart_floor_runs_between_drain_and_join() -> None:
    success = [(name, action, where) for name, action, where, failure in window() if not failure]
    unexpected = [f"{where}: {name!r} ({action})" for name, action, where in success
                  if WINDOW.get(name, (None,))[0] != action]
    assert not unexpected, (
        "tasks that run while the instance is out of the routers but are not the stop, GPU release, start, ready "
        "wait or the gate's request (move them before the drain, into prepare.yml, or after the join, into "
        f"finish.yml; or list them in molecule/shared/rollout_window.py with why): {unexpected}")


def test_every_task_the_window_allows_is_still_there() -> None:
    # A renamed task would otherwise leave a stale entry that allows nothing (and the molecule check blind).
    names = {name for name, _action, _where, failure in window() if not failure}
    assert set(WINDOW) - names == set()


def test_the_gate_is_inside_the_chain_so_that_a_failed_gate_rolls_back_before_the_join() -> None:
    [chain] = [t for t in load("sglang_server", "restart_chain.yml") if "block" in t]
    in_block = [name for name, *_ in leaves(chain["block"], "sglang_server", "restart_chain.yml")]
    assert "Send one real chat completion (the model answers, with the API key, over verified TLS)" in in_block
    assert any(name == "Roll back to the last known good configuration" for name, *_ in
               leaves(chain["rescue"], "sglang_server", "restart_chain.yml"))


@pytest.mark.parametrize("moved", [
    "Save the running files and virtualenv as last known good",
    "Keep the resolved speculative and backend settings",
    "Soak the canary, polling its health",
])
def test_what_the_floor_does_not_need_runs_after_the_join(moved: str) -> None:
    [outer] = [t for t in load("sglang_rollout", "instance.yml") if "block" in t]
    names = [t.get("name") for t in outer["block"]]
    after = leaves(outer["block"][names.index(JOIN) + 1:], "sglang_rollout", "sglang_rollout/instance.yml")
    assert moved in [name for name, *_ in after]
    assert moved not in [name for name, *_ in window()]


def test_a_walk_that_finds_a_foreign_task_fails() -> None:
    # The check can fail: the preflight placed after the drain is reported.
    [outer] = [t for t in load("sglang_rollout", "instance.yml") if "block" in t]
    names = [t.get("name") for t in outer["block"]]
    prepare = outer["block"][0]
    assert prepare["ansible.builtin.include_role"]["tasks_from"] == "prepare.yml"
    swapped = outer["block"][names.index(DRAIN) + 1:names.index(JOIN)] + [prepare]
    found = leaves(swapped, "sglang_rollout", "x")
    assert any(WINDOW.get(name, (None,))[0] != action for name, action, _w, failure in found if not failure)


def test_window_events_lists_what_ran_between_drain_and_join() -> None:
    def ev(kind: str, task: str, host: str = "h") -> dict[str, Any]:
        return {"event": kind, "event_data": {"task": task, "host": host}}

    events = [ev("runner_on_ok", "Run the preflight"), ev("runner_on_skipped", DRAIN),
              ev("runner_on_ok", "Stop the server, release the GPUs it left behind, start it and wait for its health"),
              ev("runner_on_skipped", "Health gate (the server answers health and, on node 0, lists its model)"),
              ev("runner_on_ok", "Other host's task", host="other"),
              {"event": "runner_on_ok", "event_data": {"task": "List the routers' workers", "host": "h",
                                                       "task_path": "/x/roles/sglang_router/tasks/drain.yml:25"}},
              ev("runner_on_skipped", JOIN), ev("runner_on_ok", "Save the running files and virtualenv as last known good")]
    assert window_events(events, "h") == [["Stop the server, release the GPUs it left behind, start it and wait for its health"]]
