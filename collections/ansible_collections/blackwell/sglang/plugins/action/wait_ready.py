"""Action plugin: wait for an SGLang server to become healthy, printing progress while it loads."""

from __future__ import annotations

DOCUMENTATION = r"""
module: wait_ready
short_description: Wait until an SGLang server answers its health endpoint, with progress output
description:
  - Polls the host with the C(blackwell.sglang.server_probe) module, which checks O(url) every O(interval)
    seconds on the host itself and returns when it answers 200, when the unit fails, or after
    O(progress_every) seconds; then the elapsed time, the unit's state and the server's last log line are
    printed, so a 397B model's minutes of loading are visible at little cost per round trip.
  - Fails early when the unit has failed (crash loop that hit the start limit) or exited, with the last
    journal lines; fails after O(timeout) otherwise.
options:
  url:
    description: Health URL.
    type: str
    required: true
  unit:
    description: systemd unit of the server.
    type: str
    required: true
  timeout:
    description: Seconds to wait in total.
    type: int
    default: 3600
  interval:
    description: Seconds between health checks on the host (each round trip to the host waits up to O(progress_every)).
    type: float
    default: 0.5
  progress_every:
    description: Seconds between progress lines.
    type: float
    default: 15
"""

import time
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


class ActionModule(ActionBase):
    """Poll server_probe until healthy, failed, or timed out."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("url", "unit", "timeout", "interval", "progress_every"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(
            argument_spec={
                "url": {"type": "str", "required": True},
                "unit": {"type": "str", "required": True},
                "timeout": {"type": "int", "default": 3600},
                "interval": {"type": "float", "default": 0.5},
                "progress_every": {"type": "float", "default": 15},
            }
        )
        host = task_vars.get("inventory_hostname", "?")
        start = time.monotonic()
        last_progress = start
        probes = 0
        probe: dict[str, Any] = {}
        while True:
            probes += 1
            # One round trip waits on the host until healthy, failed, or the next progress line is due.
            remaining = args["timeout"] - (time.monotonic() - start)
            probe = self._execute_module(
                module_name="blackwell.sglang.server_probe",
                module_args={"url": args["url"], "unit": args["unit"], "log_lines": 1, "interval": args["interval"],
                             "wait": max(0.0, min(args["progress_every"], remaining))},
                task_vars=task_vars,
            )
            elapsed = time.monotonic() - start
            state = probe.get("unit_state", {})
            if probe.get("status") == 200:
                result.update(changed=False, elapsed=round(elapsed, 1), probes=probes, unit_state=state)
                return result
            failed_unit = state.get("ActiveState") in ("failed", "inactive")
            if probe.get("failed") or failed_unit or elapsed > args["timeout"]:
                tail = self._execute_module(
                    module_name="blackwell.sglang.server_probe",
                    module_args={"url": args["url"], "unit": args["unit"], "log_lines": 20},
                    task_vars=task_vars,
                )
                why = (
                    probe.get("msg")
                    or (f"{args['unit']} is {state.get('ActiveState')} ({state.get('Result')}, {state.get('NRestarts')} restarts)"
                        if failed_unit else f"{args['url']} not healthy after {args['timeout']}s")
                )
                result.update(failed=True, msg=why, elapsed=round(elapsed, 1), unit_state=state, log=tail.get("log", []))
                return result
            if time.monotonic() - last_progress >= args["progress_every"]:
                last_progress = time.monotonic()
                line = (probe.get("log") or [""])[-1][:160]
                display.display(
                    f"[{host}] waiting for {args['url']}: {elapsed:.0f}s, HTTP {probe.get('status')}, "
                    f"{args['unit']} {state.get('ActiveState')}/{state.get('SubState')}; last log: {line}"
                )
