"""What may run while a rolled-out instance is out of the routers (issue 34): between its drain and its join.

The floor of a restart is the drain, the stop, the GPU release, the start, the ready wait and the health gate's
request. Everything else (preflight, retiring old units, file installs, the report, the last known good copy, the
canary's soak) runs before the drain or after the join. WINDOW names every task of roles/sglang_server that may run
in between, with what it is; tests/unit/test_rollout_window.py checks the task files against it, and molecule's
restart tests check the events of a real rollout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The tasks of roles/sglang_rollout/tasks/instance.yml around the window.
DRAIN = "Take the server out of the routers and let it finish its requests"
JOIN = "Put the server back into the routers"
# The drain's tasks file: its tasks report after the drain's include task, and are the drain.
DRAIN_TASKS = "roles/sglang_router/tasks/drain.yml"

# task name -> (action, what it is). Includes are listed too: they run (and show in the events) but do no work.
WINDOW: dict[str, tuple[str, str]] = {
    "Run the restart chain (stop, release the GPUs, start, health, gate; rollback on failure)":
        ("ansible.builtin.include_role", "include"),
    # One-host instance: stop, GPU release, start and ready wait in one module run.
    "Stop the server, release the GPUs it left behind, start it and wait for its health":
        ("blackwell.sglang.server_restart", "stop, release, start, ready wait"),
    # Multi-node instance, in lockstep across its hosts (restart_nodes.yml).
    "Stop, release the GPUs and start the nodes of the multi-node instance in node-rank order, and wait for them":
        ("ansible.builtin.include_tasks", "include"),
    "Stop the server (drain; the cgroup is SIGKILLed after sglang_server_drain_timeout)":
        ("ansible.builtin.systemd_service", "stop"),
    "Stop the other nodes of the multi-node instance (node 0 has told them to shut down)":
        ("ansible.builtin.systemd_service", "stop"),
    "Release the GPUs the stopped server left behind": ("ansible.builtin.include_tasks", "include"),
    "Release the GPUs still held by the instance, never touching allow-listed processes or other instances":
        ("blackwell.sglang.gpu_holders", "release"),
    "Start the server": ("ansible.builtin.systemd_service", "start"),
    "Start the other nodes of the multi-node instance (they join node 0 at dist_init_addr)":
        ("ansible.builtin.systemd_service", "start"),
    "Wait for the node to be healthy (node 0 reads what SGLang resolved, for the report)":
        ("ansible.builtin.include_tasks", "include"),
    "Wait for the health endpoint (model load included)": ("blackwell.sglang.wait_ready", "ready wait"),
    # The lockstep of the nodes' ready waits: each node records its outcome, and all fail when one did.
    "Record the healthy node": ("ansible.builtin.set_fact", "ready wait (multi-node lockstep)"),
    "Check that every node of this multi-node instance is healthy": ("ansible.builtin.fail", "ready wait (multi-node lockstep)"),
    # The health gate (gate.yml).
    "Health gate (the server answers health and, on node 0, lists its model and answers a chat completion)":
        ("ansible.builtin.include_tasks", "include"),
    "Health gate (the server answers health and, on node 0, lists its model)": ("ansible.builtin.uri", "gate request"),
    "Send one real chat completion (the model answers, with the API key, over verified TLS)":
        ("blackwell.sglang.chat_probe", "gate request"),
}


def window_events(events: Iterable[Mapping[str, Any]], host: str | None = None) -> list[list[str]]:
    """The tasks that ran between each drain and the join after it, from ansible-runner's events.

    One list per instance rolled out (on ``host``, or on every host); a task counts when it reported ok, changed or
    failed (skipped tasks did not run).
    """
    windows: list[list[str]] = []
    current: dict[str, list[str]] = {}
    for event in events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            continue
        data = event.get("event_data", {})
        where = str(data.get("host", ""))
        if host is not None and where != host:
            continue
        task = data.get("task", "")
        if DRAIN_TASKS in str(data.get("task_path", "")):
            continue  # the drain's own tasks (its include comes first, they run after it)
        if task == DRAIN:
            current[where] = []
        elif task == JOIN and where in current:
            windows.append(current.pop(where))
        elif where in current and event["event"] != "runner_on_skipped":
            current[where].append(task)
    return windows
