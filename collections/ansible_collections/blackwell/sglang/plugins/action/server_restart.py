# SPDX-License-Identifier: Apache-2.0
"""Action plugin: the restart of a one-host instance (stop, GPU release, start) and, with ``wait``, its ready wait.

Documented by the module ``plugins/modules/server_restart.py``: the module runs the stop, the release and the start on
the host in one run; this action then waits for the server's health as blackwell.sglang.wait_ready does (the same
code, printing the same progress), so that the restart chain's downtime is one task, not two.

With ``startup`` (issue 35 item 2), the module's run also reads the host's record of good starts (``startup.json``
beside the last known good files; the action passes ``startup.record`` only) and the action derives the wait's timeout
from it (module_utils/sglang_startup.ready_timeout, ``wait.timeout`` the upper bound); once healthy it reports the
start as ``startup``: the wall time the wait measured and, with ``startup.metrics``, SGLang's startup breakdown, which
the wait's last probe read from ``/metrics`` in the same round trip. Neither is a round trip of its own (issue 31: the
restart's wall time beyond the stop and the start).

With ``kernel_cache`` (issue 35 item 1), a start that failed is judged by module_utils/sglang_precompile.stuck_in_compile
from the lines of that start (its systemd invocation) that name the kernel compile or a phase after it, read by the
failed wait's last probe (server_probe's ``markers``; not the last journal lines, where on an 8-rank host the other
ranks' load lines soon push the compile line out): one that hung in the kernel compile beyond its budget (the wait's timeout, or its
no-progress limit when that ended it) is restarted once by a second module run that clears the instance's kernel
directory of that key between the stop and the start, then waited for again; ``compile_retry`` reports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.blackwell.sglang.plugins.action.wait_ready import WAIT_SPEC, prober, wait
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_precompile import (
    AFTER_COMPILE_LINES,
    COMPILE_LINES,
    stuck_in_compile,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_startup import (
    KEY_FIELDS,
    ready_timeout,
    start_key,
)

# What the ready wait adds to the module's result (the rest of the wait's result names the failure).
READY_KEYS = ("elapsed", "probes", "unit_state", "info", "stalled", "log")
# The startup budget's arguments (the startup option of server_restart).
STARTUP_SPEC: dict[str, Any] = {
    "key": {"type": "dict", "required": True, "options": {f: {"type": "str", "default": ""} for f in KEY_FIELDS}},
    "record": {"type": "str", "default": ""},
    "budget": {"type": "bool", "default": True},
    "floor": {"type": "float", "default": 600},
    "factor": {"type": "float", "default": 3},
    "slack": {"type": "float", "default": 300},
    "first_start": {"type": "float", "default": 1800},
    "metrics": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    """Run the server_restart module, then (``wait``) wait for the server's health and report the start."""

    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        module_args = dict(self._task.args)
        wait_args = module_args.pop("wait", None)
        startup_args = module_args.pop("startup", None)
        kernel_cache = module_args.pop("kernel_cache", None)
        checked = startup = None
        if wait_args is not None:
            checked = ArgumentSpecValidator(WAIT_SPEC).validate(wait_args)
            if checked.error_messages:
                raise AnsibleActionFail(f"server_restart: wait: {'; '.join(checked.error_messages)}")
        if startup_args is not None:
            startup = ArgumentSpecValidator(STARTUP_SPEC).validate(startup_args)
            if startup.error_messages:
                raise AnsibleActionFail(f"server_restart: startup: {'; '.join(startup.error_messages)}")
        measured = checked is not None and startup is not None and not self._play_context.check_mode
        # The module's run reads the record too (a compile retry's second run reads nothing).
        read = ({"startup": {"record": startup.validated_parameters["record"]}}
                if measured and startup.validated_parameters["budget"] and startup.validated_parameters["record"] else {})
        result.update(self._execute_module(module_name="blackwell.sglang.server_restart",
                                           module_args={**module_args, **read}, task_vars=task_vars))
        history = result.pop("startup_record", None)
        if result.get("failed") or checked is None or self._play_context.check_mode:
            return result
        wait_params = dict(checked.validated_parameters)
        budget = None
        if measured:
            budget = self._budget(startup.validated_parameters, wait_params, history)
            wait_params.update(timeout=budget["timeout"], metrics=bool(startup.validated_parameters["metrics"]))
        host = task_vars.get("inventory_hostname", "?")
        # With a kernel cache, a failed wait also reads this start's compile lines and the lines of the phases after it
        # (every rank's, however many lines followed them): what _compile_retry judges.
        markers = (*COMPILE_LINES, *AFTER_COMPILE_LINES) if kernel_cache else ()
        ready = wait(wait_params, prober(self._execute_module, task_vars), host=host, markers=markers)
        if ready.get("failed") and kernel_cache:
            ready = self._compile_retry(result, module_args, wait_params, ready, kernel_cache, host, task_vars, markers)
        result["ready"] = {key: ready[key] for key in READY_KEYS if key in ready}
        if startup is not None:
            result["startup"] = self._startup(startup.validated_parameters, ready, budget)
        if ready.get("failed"):
            msg = ready["msg"]
            if budget is not None and budget["timeout"] < int(checked.validated_parameters["timeout"]):
                msg = f"{msg} (ready budget {budget['timeout']}s: {budget['why']})"
            result.update(failed=True, msg=msg, log=ready.get("log", []))
        return result

    def _compile_retry(self, result: dict[str, Any], module_args: dict[str, Any], wait_params: dict[str, Any],
                       ready: dict[str, Any], kernel_cache: dict[str, Any], host: str,
                       task_vars: dict[str, Any], markers: Sequence[str]) -> dict[str, Any]:
        """The failed start judged by stuck_in_compile; a start stuck in the kernel compile is started once more with
        its kernel directory cleared and waited for again. Returns the wait that counts (the second one after a retry)."""
        # A wait the no-progress limit ended ran out of its budget of progress: that limit is the budget it exceeded.
        budget = float(ready.get("elapsed") or 0) if ready.get("stalled") else float(wait_params["timeout"])
        decision = stuck_in_compile(ready.get("marked") or [], ready=False, waited=float(ready.get("elapsed") or 0),
                                    budget=budget, attempt=0, kernel_cache=kernel_cache)
        result["compile_retry"] = {**decision, "retried": False}
        if not decision["retry"]:
            return ready
        Display().display(f"[{host}] {wait_params['unit']}: {decision['why']}")
        again = self._execute_module(module_name="blackwell.sglang.server_restart", task_vars=task_vars,
                                     module_args={**module_args, "clear": decision["clear"]})
        if again.get("failed"):
            return {**ready, "msg": f"{ready['msg']}; the retry with the kernel cache cleared failed: {again.get('msg')}"}
        result["compile_retry"].update(retried=True, cleared=again.get("cleared", []))
        second = wait(wait_params, prober(self._execute_module, task_vars), host=host, markers=markers)
        result["compile_retry"]["ready"] = {key: second[key] for key in READY_KEYS if key in second and key != "log"}
        if second.get("failed"):
            second = {**second, "msg": f"{second['msg']} (after one retry with the kernel cache cleared: {decision['why']})"}
        return second

    @staticmethod
    def _budget(params: dict[str, Any], wait_params: dict[str, Any], history: Any) -> dict[str, Any]:
        """The ready wait's timeout: the operator's (``wait.timeout``), or derived from the host's record (``history``,
        the JSON the module read from ``startup.record``; None when there was none or it was not JSON)."""
        cap = int(wait_params["timeout"])
        if not params["budget"]:
            return {"timeout": cap, "last": None, "why": "derived budget off: sglang_server_ready_timeout"}
        key = start_key(*(params["key"].get(f) for f in KEY_FIELDS))
        return ready_timeout(history, key, cap, floor=params["floor"], factor=params["factor"], slack=params["slack"],
                             first_start=params["first_start"])

    @staticmethod
    def _startup(params: dict[str, Any], ready: dict[str, Any], budget: dict[str, Any] | None) -> dict[str, Any]:
        """What the start measured: the wait's wall time, and SGLang's own breakdown when its metrics are on (read by
        the wait's last probe)."""
        out: dict[str, Any] = {**start_key(*(params["key"].get(f) for f in KEY_FIELDS)), "seconds": ready.get("elapsed"),
                               "source": "wait", "breakdown": None, "budget": budget}
        if ready.get("failed") or not params["metrics"]:
            return out
        if ready.get("metrics_error"):
            out["metrics_error"] = str(ready["metrics_error"])[:300]
        elif ready.get("startup_breakdown") is not None:
            out.update(source="metrics", breakdown=ready["startup_breakdown"])
        return out
