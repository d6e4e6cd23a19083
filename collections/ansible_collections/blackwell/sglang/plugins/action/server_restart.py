# SPDX-License-Identifier: Apache-2.0
"""Action plugin: the restart of a one-host instance (stop, GPU release, start) and, with ``wait``, its ready wait.

Documented by the module ``plugins/modules/server_restart.py``: the module runs the stop, the release and the start on
the host in one run; this action then waits for the server's health as blackwell.sglang.wait_ready does (the same
code, printing the same progress), so that the restart chain's downtime is one task, not two.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.blackwell.sglang.plugins.action.wait_ready import WAIT_SPEC, prober, wait

# What the ready wait adds to the module's result (the rest of the wait's result names the failure).
READY_KEYS = ("elapsed", "probes", "unit_state", "info", "stalled", "log")


class ActionModule(ActionBase):
    """Run the server_restart module, then (``wait``) wait for the server's health."""

    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        module_args = dict(self._task.args)
        wait_args = module_args.pop("wait", None)
        checked = None
        if wait_args is not None:
            checked = ArgumentSpecValidator(WAIT_SPEC).validate(wait_args)
            if checked.error_messages:
                raise AnsibleActionFail(f"server_restart: wait: {'; '.join(checked.error_messages)}")
        result.update(self._execute_module(module_name="blackwell.sglang.server_restart", module_args=module_args,
                                           task_vars=task_vars))
        if result.get("failed") or checked is None or self._play_context.check_mode:
            return result
        ready = wait(checked.validated_parameters, prober(self._execute_module, task_vars), host=task_vars.get("inventory_hostname", "?"))
        result["ready"] = {key: ready[key] for key in READY_KEYS if key in ready}
        if ready.get("failed"):
            result.update(failed=True, msg=ready["msg"], log=ready.get("log", []))
        return result
