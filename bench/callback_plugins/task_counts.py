"""Bench-only Ansible callback: counts the tasks of a run per play and per host, and which of them ran a module on the host.

Loaded beside the stdout callback, never instead of it::

    ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins ANSIBLE_CALLBACKS_ENABLED=task_counts \\
    BENCH_TASK_COUNTS_FILE=counts.json ansible-playbook ...

At the end of the run it writes ``$BENCH_TASK_COUNTS_FILE`` (nothing when the variable is unset), JSON::

    {"plays": [{"name": PLAY, "hosts": {HOST: COUNTS}}], "totals": {HOST: COUNTS}}

    COUNTS = {ok, changed, skipped, failed, ignored, unreachable,  # as PLAY RECAP counts them (ok includes changed)
              tasks,                                 # ok + skipped + failed + ignored + unreachable
              module_tasks, module_executions, retry_attempts, controller_tasks,
              modules: [{task, action, role, executions, attempts, changed, delegate_to}],  # each task that ran a module
              controller: [{task, action, role, why}],                  # each controller-side task that ran
              skips: [{task, action, role}]}                            # each skipped task

Classification of a task that was not skipped (a skipped task is only counted as skipped; a loop whose every
item was skipped is skipped), from the task's action name and where it was delegated, never from timings:

* controller-side, ``why = "action"``: its action (``ansible.builtin.`` / ``ansible.legacy.`` prefixes dropped)
  is one of :data:`CONTROLLER_ACTIONS`: Ansible's own actions that never open a connection to the host
  (``set_fact``, ``debug``, ``assert``, ``fail``, ``meta``, ``include_*`` / ``import_*``, ``include_vars``,
  ``add_host``, ``group_by``, ``set_stats``, ``pause``, and ``validate_argument_spec``, the task Ansible adds
  at the start of a role that has ``meta/argument_specs.yml``) and the project's action plugins that only compute on
  the controller (``blackwell.sglang.validate``, ``blackwell.sglang.check_inputs``);
* controller-side, ``why = "delegate_to"``: delegated to the controller (``localhost``, ``127.0.0.1``, ``::1``,
  or a delegated host whose ``ansible_connection`` is ``local``), or run with ``connection: local``;
* otherwise a module execution on the host (or on the inventory host it was delegated to, named in
  ``delegate_to``). ``executions`` counts each run of the module: every loop item that was not skipped, and
  a task looping over 3 items counts 3. The ``until`` retries beyond each execution's first attempt depend on
  timing (how long the host took to answer): they are counted apart, in ``retry_attempts``, so that
  ``module_executions`` is the same on every machine.

``module_tasks`` counts the tasks, ``module_executions`` the executions. An action plugin such as
``template`` or ``copy`` may send more than one module to the host for one execution (a ``stat``, then the
copy when it differs): the classification does not see inside the action; bench/hooks/sitecustomize.py
counts the connection's round trips themselves when a run needs them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: task_counts
    type: aggregate
    short_description: Bench only - per play and host, tasks run and module executions on the host (JSON)
    description:
      - Writes the JSON summary to the file named by the environment variable BENCH_TASK_COUNTS_FILE.
    requirements:
      - enable it in ANSIBLE_CALLBACKS_ENABLED, with bench/callback_plugins in ANSIBLE_CALLBACK_PLUGINS
"""

ENV_FILE = "BENCH_TASK_COUNTS_FILE"

# Actions that run on the controller only, without a connection to the host (see the module docstring).
CONTROLLER_ACTIONS = frozenset({
    "set_fact", "debug", "assert", "fail", "meta", "include", "include_tasks", "include_role", "import_tasks",
    "import_role", "import_playbook", "include_vars", "add_host", "group_by", "set_stats", "pause",
    "validate_argument_spec",  # a role's argument spec check (meta/argument_specs.yml): an action, on the controller
    "blackwell.sglang.validate", "blackwell.sglang.check_inputs",
})
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
COUNTERS = ("ok", "changed", "skipped", "failed", "ignored", "unreachable")


def short_action(action: str) -> str:
    """``action`` without the ``ansible.builtin.`` / ``ansible.legacy.`` prefix (collections keep their name)."""
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if action.startswith(prefix):
            return action[len(prefix):]
    return action


def delegated_host(task: Any, result: Mapping[str, Any]) -> str | None:
    """Where the task ran when delegated: the resolved delegated host of the result, else the task's ``delegate_to``."""
    delegated = result.get("_ansible_delegated_vars") or {}
    return delegated.get("ansible_delegated_host") or getattr(task, "delegate_to", None) or None


def controller_reason(task: Any, result: Mapping[str, Any]) -> str | None:
    """Why a task that ran is controller-side (``"action"``, ``"delegate_to"``), or None: it ran a module on a host."""
    if short_action(str(task.action)) in CONTROLLER_ACTIONS:
        return "action"
    delegated = result.get("_ansible_delegated_vars") or {}
    target = delegated_host(task, result)
    if (target in LOCAL_HOSTS or delegated.get("ansible_connection") in ("local", "ansible.builtin.local")
            or getattr(task, "connection", None) in ("local", "ansible.builtin.local")):
        return "delegate_to"
    return None


def _ran(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The results of the module's runs behind one task result: its loop items not skipped, else itself."""
    items = result.get("results")
    if isinstance(items, list):
        return [item for item in items if isinstance(item, Mapping) and not item.get("skipped")]
    return [result]


def executions(result: Mapping[str, Any]) -> int:
    """Module runs behind one task result: the loop items not skipped, else 1 (``until`` retries not included)."""
    return len(_ran(result))


def retries(result: Mapping[str, Any]) -> int:
    """``until`` attempts beyond the first of each run behind one task result (they depend on timing)."""
    return sum(max(int(item.get("attempts") or 1) - 1, 0) for item in _ran(result))


def role_name(task: Any) -> str | None:
    role = getattr(task, "_role", None)
    return role.get_name() if role is not None else None


def new_counts() -> dict[str, Any]:
    counts: dict[str, Any] = dict.fromkeys(COUNTERS, 0)
    counts.update(tasks=0, module_tasks=0, module_executions=0, retry_attempts=0, controller_tasks=0, modules=[], controller=[],
                  skips=[])
    return counts


def record(counts: dict[str, Any], status: str, task: Any, result: Mapping[str, Any]) -> None:
    """Add one task result (``status``: ok, skipped, failed, ignored or unreachable) of one host to ``counts``."""
    counts["tasks"] += 1
    changed = bool(result.get("changed"))
    if status == "ok":
        counts["ok"] += 1
        counts["changed"] += changed
    else:
        counts[status] += 1
    name, action, role = task.get_name(), str(task.action), role_name(task)
    if status == "skipped" or executions(result) == 0:  # a loop whose items were all skipped ran nothing
        counts["skips"].append({"task": name, "action": action, "role": role})
        return
    why = controller_reason(task, result)
    if why:
        counts["controller_tasks"] += 1
        counts["controller"].append({"task": name, "action": action, "role": role, "why": why})
        return
    runs, again = (executions(result), retries(result)) if status != "unreachable" else (0, 0)
    counts["module_tasks"] += 1
    counts["module_executions"] += runs
    counts["retry_attempts"] += again
    counts["modules"].append({"task": name, "action": action, "role": role, "executions": runs, "attempts": runs + again,
                              "changed": changed, "delegate_to": delegated_host(task, result)})


def add(total: dict[str, Any], counts: Mapping[str, Any]) -> None:
    for key, value in counts.items():
        total[key] += value


class CallbackModule(CallbackBase):
    """Counts task results per play and host; writes them as JSON at the end of the run (see the module docstring)."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_counts"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.plays: list[dict[str, Any]] = []

    def _hosts(self) -> dict[str, dict[str, Any]]:
        if not self.plays:  # a result before any play: cannot happen in ansible-playbook, kept safe
            self.plays.append({"name": "", "hosts": {}})
        return self.plays[-1]["hosts"]

    def _record(self, status: str, result: Any) -> None:
        task = getattr(result, "task", None) or result._task
        host = getattr(result, "host", None) or result._host
        data = getattr(result, "result", None)
        data = data if isinstance(data, Mapping) else result._result
        record(self._hosts().setdefault(host.get_name(), new_counts()), status, task, data)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self.plays.append({"name": play.get_name(), "hosts": {}})

    def v2_runner_on_ok(self, result: Any) -> None:
        self._record("ok", result)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._record("skipped", result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._record("ignored" if ignore_errors else "failed", result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._record("unreachable", result)

    def summary(self) -> dict[str, Any]:
        totals: dict[str, dict[str, Any]] = {}
        for play in self.plays:
            for host, counts in play["hosts"].items():
                add(totals.setdefault(host, new_counts()), counts)
        return {"plays": self.plays, "totals": totals}

    def v2_playbook_on_stats(self, stats: Any) -> None:
        path = os.environ.get(ENV_FILE)
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(self.summary(), out, indent=1)
