# SPDX-License-Identifier: Apache-2.0
"""Action plugin: wait for an SGLang server to become healthy, printing progress while it loads.

Documented by the docs-only module ``plugins/modules/wait_ready.py``, where ansible-doc and ansible-test read it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

# One look at the server: server_probe's module arguments in, its result out.
# A deadline closer than this is due now (a round trip cannot wait less).
_SLACK = 0.001
Probe = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Progress:
    """When the server last showed progress, from what the probes saw: a moved journal cursor, more GPU memory."""

    since: float
    cursor: str | None = None
    line: str = ""
    memory_mib: int | None = None
    primed: bool = False

    def observe(self, probe: dict[str, Any], now: float) -> None:
        """Take one probe's observations; progress when the journal moved or GPU memory grew past its highest."""
        log = probe.get("log") or []
        cursor = probe.get("cursor")
        # Without a cursor (a journal that keeps none for the unit) a different last line is the evidence.
        mark = cursor if cursor is not None else (log[-1] if log else None)
        if mark is not None and mark != self.cursor:
            if self.primed:  # the first look only sets the baseline
                self.since = now
            self.cursor = mark
        self.primed = True
        if log:
            self.line = log[-1]
        memory = probe.get("gpu_memory_mib")
        if isinstance(memory, int):
            if self.memory_mib is not None and memory > self.memory_mib:
                self.since = now
            self.memory_mib = memory if self.memory_mib is None else max(self.memory_mib, memory)

    def stalled(self, now: float, limit: float) -> bool:
        return limit > 0 and now - self.since >= limit - _SLACK


def stall_message(unit: str, limit: float, progress: Progress, gpus: list[int]) -> str:
    """The failure of a stalled start: what was not seen for how long, the last log line, the variable."""
    where = f"GPU(s) {', '.join(str(g) for g in gpus)}" if gpus else "the host's GPUs"
    memory = f"{progress.memory_mib} MiB used" if progress.memory_mib is not None else "nvidia-smi gave no reading"
    return (f"{unit} made no progress for {limit:.0f}s: no new journal line (last: {progress.line[:300]!r}) and no growth "
            f"of the GPU memory used on {where} ({memory}). The start looks stalled (a hung model load, download or "
            f"collective). Look at `journalctl -u {unit}`; if the start only needs longer between signs of life, "
            "raise sglang_server_no_progress_timeout (0 disables the check and waits the whole sglang_server_ready_timeout).")


# Failures whose log line names a cause the operator can fix on the host, and the fix.
KNOWN_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"system not yet initialized|cudaErrorSystemNotReady|CUDA error 802", re.IGNORECASE),
     "CUDA error 802 (system not yet initialized): on an NVSwitch host (HGX/DGX B200, B300) fabric manager is not "
     "running or has not finished training the fabric. Check `systemctl status nvidia-fabricmanager` (and nvlsm on NVLink 5 "
     "fabrics); roles/nvidia_driver installs and starts it where the PCI bus holds an NVSwitch "
     "(nvidia_driver_fabricmanager: always if the detection missed it)."),
)


def known_cause(lines: list[Any]) -> str | None:
    """The fix for the first log line that names a known cause, or None."""
    for line in lines:
        for pattern, fix in KNOWN_CAUSES:
            if pattern.search(str(line)):
                return fix
    return None


def wait(args: dict[str, Any], probe: Probe, clock: Callable[[], float] = time.monotonic,
         show: Callable[[str], None] = display.display, host: str = "?", markers: Sequence[str] = ()) -> dict[str, Any]:
    """Probe until healthy, failed, stalled or timed out; the action's result (``failed`` and ``msg`` on failure).

    ``probe`` runs server_probe with the given module arguments, ``clock`` is monotonic seconds: the loop
    takes no time of its own, so tests drive it with recorded observations and a fake clock. With ``markers``, a
    failed wait's result also holds ``marked``: the lines of this start that contain one of them (server_probe's
    ``markers``, read in the failure's last round trip), however many lines followed them.
    """
    start = clock()
    last_progress_line = start
    progress = Progress(since=start)
    limit = float(args.get("no_progress_timeout") or 0)
    gpus = list(args.get("gpus") or [])
    tls = {"ca_path": args["ca_path"]} if args.get("ca_path") else {}
    # Read once healthy, in the same round trip: the arguments the server resolved (its /server_info) and, with metrics,
    # SGLang's startup breakdown (its /metrics; the server_restart action's report).
    once_healthy = {**({"info_url": args["info_url"], "info_keys": list(args.get("info_keys") or []),
                        **({"api_key": args["api_key"]} if args.get("api_key") else {})} if args.get("info_url") else {}),
                    **({"metrics": True} if args.get("metrics") else {})}
    probes = 0
    while True:
        probes += 1
        now = clock()
        remaining = args["timeout"] - (now - start)
        # One round trip waits on the host until healthy, failed, the next progress line or the stall limit is due.
        due = [args["progress_every"], remaining] + ([progress.since + limit - now] if limit > 0 else [])
        result = probe({"url": args["url"], "unit": args["unit"], "log_lines": 1, "interval": args["interval"],
                        "wait": max(0.0, min(due)), "gpus": gpus, **tls, **once_healthy})
        now = clock()
        elapsed = now - start
        state = result.get("unit_state", {})
        if result.get("status") == 200:
            done = {"changed": False, "elapsed": round(elapsed, 1), "probes": probes, "unit_state": state}
            if args.get("metrics"):
                done.update(startup_breakdown=result.get("startup_breakdown"), metrics_error=result.get("metrics_error"))
            if args.get("info_url"):
                if result.get("info") is None:
                    return {**done, "failed": True,
                            "msg": f"{args['url']} is healthy but {args['info_url']} could not be read: "
                                   f"{result.get('info_error')}"}
                done["info"] = result["info"]
                unset = [key for key in args.get("require_info") or [] if result["info"].get(key) is None]
                if unset:
                    return {**done, "failed": True,
                            "msg": f"{args['url']} is healthy but SGLang resolved no value for {', '.join(unset)} "
                                   f"({args['info_url']}): {args.get('require_info_why') or 'the plan requires one'}. "
                                   f"Resolved: {result['info']}"}
            return done
        progress.observe(result, now)
        failed_unit = state.get("ActiveState") in ("failed", "inactive")
        stalled = progress.stalled(now, limit)
        if result.get("failed") or failed_unit or stalled or elapsed >= args["timeout"] - _SLACK:
            tail = probe({"url": args["url"], "unit": args["unit"], "log_lines": 20, **tls,
                          **({"markers": list(markers)} if markers else {})})
            if result.get("msg"):
                why = result["msg"]
            elif failed_unit:
                why = f"{args['unit']} is {state.get('ActiveState')} ({state.get('Result')}, {state.get('NRestarts')} restarts)"
            elif stalled:
                why = stall_message(args["unit"], limit, progress, gpus)
            else:
                why = f"{args['url']} not healthy after {args['timeout']}s"
                if result.get("error"):
                    why = f"{why} (last error: {result['error']})"
            cause = known_cause(list(tail.get("log", [])))
            if cause:
                why = f"{why}. {cause}"
            failed = {"failed": True, "msg": why, "elapsed": round(elapsed, 1), "unit_state": state, "stalled": stalled,
                      "log": tail.get("log", [])}
            return {**failed, "marked": list(tail.get("marked") or [])} if markers else failed
        if now - last_progress_line >= args["progress_every"]:
            last_progress_line = now
            memory = f", GPU memory {progress.memory_mib} MiB" if progress.memory_mib is not None else ""
            show(f"[{host}] waiting for {args['url']}: {elapsed:.0f}s, HTTP {result.get('status')}, "
                 f"{args['unit']} {state.get('ActiveState')}/{state.get('SubState')}{memory}; "
                 f"last log: {progress.line[:160]}")


# The wait's arguments (wait_ready's options; the wait option of server_restart).
WAIT_SPEC: dict[str, Any] = {
    "url": {"type": "str", "required": True},
    "unit": {"type": "str", "required": True},
    "ca_path": {"type": "str", "default": ""},
    "timeout": {"type": "int", "default": 3600},
    "interval": {"type": "float", "default": 0.5},
    "progress_every": {"type": "float", "default": 15},
    "no_progress_timeout": {"type": "float", "default": 600},
    "gpus": {"type": "list", "elements": "int", "default": []},
    "info_url": {"type": "str"},
    "info_keys": {"type": "list", "elements": "str", "default": []},
    "api_key": {"type": "str", "no_log": True},
    # Keys of info_url's answer that must have a value once healthy (e.g. speculative_algorithm under spec=auto):
    # the ready wait is the health check that fails, so nothing else runs while the instance is out of rotation.
    "require_info": {"type": "list", "elements": "str", "default": []},
    "require_info_why": {"type": "str", "default": ""},
    # Read SGLang's startup breakdown from /metrics in the round trip that finds the server healthy (the server_restart
    # action sets it from its startup option; not an option of wait_ready's module documentation).
    "metrics": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    """Poll server_probe until healthy, failed, stalled, or timed out."""

    TRANSFERS_FILES = False
    # Monotonic seconds of the wait (tests put a fake clock here).
    clock: Callable[[], float] = staticmethod(time.monotonic)
    _VALID_ARGS = frozenset(WAIT_SPEC)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=WAIT_SPEC)

        result.update(wait(args, prober(self._execute_module, task_vars), clock=self.clock,
                           host=task_vars.get("inventory_hostname", "?")))
        return result


def prober(execute: Callable[..., dict[str, Any]], task_vars: dict[str, Any]) -> Probe:
    """One server_probe module run on the action's host per call (``execute``: the action's _execute_module)."""

    def probe(module_args: dict[str, Any]) -> dict[str, Any]:
        return execute(module_name="blackwell.sglang.server_probe", module_args=module_args, task_vars=task_vars)

    return probe
