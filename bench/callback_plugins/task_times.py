"""Bench-only Ansible callback: when each task started and ended on each host, as JSON lines.

Loaded beside the stdout callback, never instead of it::

    ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins ANSIBLE_CALLBACKS_ENABLED=task_times \\
    BENCH_TASK_TIMES_FILE=times.jsonl ansible-playbook ...

One line per task result: ``{"host", "task", "action", "status", "start", "end"}`` (``time.time()`` seconds; ``start``
is when the task started in the play, the same for every host of a batch). Nothing is written when the variable is
unset. bench/rollout_window.py reads it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: task_times
    type: aggregate
    short_description: when each task started and ended on each host (bench only)
    description: Writes one JSON line per task result to $BENCH_TASK_TIMES_FILE.
    requirements: [enabled in callbacks_enabled]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.path = os.environ.get("BENCH_TASK_TIMES_FILE")
        self.started: dict[str, float] = {}

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self.started[task._uuid] = time.time()

    def _write(self, result: Any, status: str) -> None:
        if not self.path:
            return
        # ansible-core 2.19 gives callbacks a CallbackTaskResult (task, host); older ones a TaskResult (_task, _host).
        task = getattr(result, "task", None) or result._task
        host = getattr(result, "host", None) or result._host
        line = {"host": host.get_name(), "task": task.get_name(), "action": task.action, "status": status,
                "start": self.started.get(task._uuid), "end": time.time()}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    def v2_runner_on_ok(self, result: Any) -> None:
        self._write(result, "ok")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._write(result, "failed")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._write(result, "skipped")
