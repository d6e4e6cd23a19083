#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: stop an SGLang server's unit, release the GPUs it left behind and start it, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: server_restart
version_added: 0.2.0
short_description: Stop a server's systemd unit, release the GPUs it left behind and start it, in one step
description:
  - The host side of the restart chain of a one-host instance, in one module run (the chain's downtime is the time
    between the stop and the start, so no controller round trip falls in it).
  - Stops O(unit) (C(systemctl stop), which drains the server and SIGKILLs the unit's cgroup after its stop timeout),
    then releases its GPUs exactly as M(blackwell.sglang.gpu_holders) with C(state=released) and C(owner_unit=unit)
    does (allow-listed processes and sibling instances are never touched; a foreign holder in the way fails unless
    O(kill_foreign)), then starts O(unit) (C(systemctl start)).
  - Before the stop, while the server still serves, it reloads systemd when the unit's files changed on disk since
    systemd loaded them (C(NeedDaemonReload=yes), O(daemon_reload)) and resets the unit's failed state and start
    rate limit (C(systemctl reset-failed)); only the stop, the release and the start fall in the downtime.
  - The first step that fails fails the module, naming the step; the later steps do not run.
  - The nodes of a multi-node instance stop and start in node-rank order across hosts, so they use
    M(ansible.builtin.systemd_service) and M(blackwell.sglang.gpu_holders) as separate tasks instead.
  - In check mode nothing is stopped, killed or started; the holders found are reported.
  - With O(wait), the action plugin then waits for the server's health in the same task.
  - With O(kernel_cache) and O(wait), a start that hung in the kernel compile (the unit's last journal lines stop at a
    DeepGEMM compile line, and the wait ran out of time or saw no progress) is started once more with the instance's
    kernel directory of that key cleared by a second module run with O(clear); a cache left by a killed compile or
    another release can hang a start. The retry and its evidence are in RV(compile_retry).
options:
  unit:
    description: systemd unit of the server (e.g. C(sglang.service)); its cgroup's processes are the service's.
    type: str
    required: true
  daemon_reload:
    description:
      - Run C(systemctl daemon-reload) before the stop when systemd reports that the unit's files changed on disk
        since it loaded them (C(NeedDaemonReload=yes)), so the start runs the installed unit.
        M(blackwell.sglang.server_files) already reloads when it writes a unit; this covers a file changed otherwise.
      - Independently of this option, C(systemctl reset-failed) resets the unit's start rate limit
        (C(StartLimitBurst=); seen with systemd 252) before the stop, so that deliberate restarts in quick
        succession are not refused as a crash loop would be.
    type: bool
    default: true
  wait:
    description:
      - After the start, wait for the server's health as M(blackwell.sglang.wait_ready) does (the same code, the same
        progress lines), in the same task; the action plugin runs it, so no controller round trip falls between the start
        and the wait. The wait's result is RV(ready); a failed wait fails the task with its message and the unit's last
        log lines (C(log)).
      - Unset, the task ends after the start.
    type: dict
    suboptions:
      url:
        description: Health URL.
        type: str
        required: true
      ca_path:
        description: PEM CA bundle that verifies the server's certificate when O(wait.url) is https (empty, the system's store).
        type: str
        default: ""
      unit:
        description: systemd unit of the server.
        type: str
        required: true
      timeout:
        description: Seconds to wait in total.
        type: int
        default: 3600
      interval:
        description: Seconds between health checks on the host (each round trip to the host waits up to O(wait.progress_every)).
        type: float
        default: 0.5
      progress_every:
        description: Seconds between progress lines.
        type: float
        default: 15
      no_progress_timeout:
        description: >-
          Fail when neither a new journal line of O(wait.unit) (its journal cursor moved) nor growth of the GPU memory
          used on O(wait.gpus) was seen for this many seconds; 0 disables the check.
        type: float
        default: 600
      gpus:
        description: nvidia-smi indices of the server's GPUs (empty, every GPU of the host).
        type: list
        elements: int
        default: []
      info_url:
        description: >-
          Once healthy, read this URL in the same round trip (SGLang's C(/server_info)) and return the values of
          O(wait.info_keys) as C(ready.info); the wait fails when it cannot be read. Unset, nothing more is read.
        type: str
      info_keys:
        description: The keys of O(wait.info_url)'s JSON to return (only these, because C(/server_info) also holds the server's secrets).
        type: list
        elements: str
        default: []
      api_key:
        description: The server's API key, sent to O(wait.info_url) only. Kept out of the output.
        type: str
      require_info:
        description: >-
          Keys of O(wait.info_keys) that must have a value once the server is healthy (for example
          C(speculative_algorithm) when speculative decoding was asked for); the wait fails naming the keys without
          one. Needs O(wait.info_url).
        type: list
        elements: str
        default: []
      require_info_why:
        description: Why O(wait.require_info) must be set, for the failure message.
        type: str
        default: ""
      metrics:
        description: >-
          Read SGLang's startup breakdown from C(/metrics) in the round trip that finds the server healthy (the action
          sets it from O(startup.metrics)).
        type: bool
        default: false
  startup:
    description:
      - With O(wait), the startup budget and the start's report (docs/restarts-and-rollouts.md, "Startup budget").
      - The module reads O(startup.record) on the host in its run, before the stop (the good starts the last_good module
        kept), and, with O(startup.budget), the action waits at most C(max(floor, last * factor + slack)) for the last good start
        of the same O(startup.key) (plus O(startup.first_start) when only another release of the same model and host
        class started well); O(wait.timeout) stays the upper bound and is the timeout when nothing is known.
      - Once healthy, RV(startup) reports the wall time of the wait and, with O(startup.metrics), SGLang's startup
        breakdown read from C(/metrics) beside O(wait.url) in the wait's last round trip.
    type: dict
    suboptions:
      key:
        description: What a budget is learnt for (the plan's C(startup_key)).
        type: dict
        required: true
        suboptions:
          model:
            description: The model (C(--model-path) as planned).
            type: str
            default: ""
          revision:
            description: The model's revision.
            type: str
            default: ""
          release:
            description: The SGLang release.
            type: str
            default: ""
          host_class:
            description: The instance's GPUs (count and architecture, for example C(8xsm100)).
            type: str
            default: ""
      record:
        description: The host's record of good starts (C(startup.json) in the instance's last-known-good directory); empty, none is read.
        type: str
        default: ""
      budget:
        description: Derive the wait's timeout from the record; false waits O(wait.timeout).
        type: bool
        default: true
      floor:
        description: The least derived timeout, in seconds.
        type: float
        default: 600
      factor:
        description: The last good start's wall time is multiplied by this.
        type: float
        default: 3
      slack:
        description: Seconds added to the multiplied wall time.
        type: float
        default: 300
      first_start:
        description: >-
          Seconds added for the first start of a release (its kernels compile), when only another release of the same
          model and host class is known.
        type: float
        default: 1800
      metrics:
        description: Read SGLang's startup metrics from C(/metrics) once healthy (the server runs with C(--enable-metrics)).
        type: bool
        default: false
  kernel_cache:
    description:
      - The instance plan's C(kernel_cache) (C(root), C(key), C(dir)); with O(wait), the action retries a start stuck
        in the kernel compile once, clearing C(dir) (only when it is C(<root>/<key>/<instance>)).
    type: dict
    suboptions:
      root:
        description: The root of the host's kernel caches.
        type: str
        default: ""
      key:
        description: The cache key (release, torch and CUDA stack, GPU architecture).
        type: str
        default: ""
      dir:
        description: The instance's kernel directory under the key.
        type: str
        default: ""
  clear:
    description:
      - Directories removed after the stop and the release, before the start (the action's compile retry sets it).
      - Each must be an absolute, normalised path of at least three components, and not a symbolic link; a missing one
        is fine.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - blackwell.sglang.gpu_holders
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Reports the stop, the GPU holders it would release and the start, and changes nothing.
  diff_mode:
    support: none
notes:
  - An action plugin (plugins/action/server_restart.py) runs this module, then, with O(wait), the wait.
seealso:
  - module: blackwell.sglang.wait_ready
  - module: blackwell.sglang.gpu_holders
  - module: ansible.builtin.systemd_service
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Stop sglang.service, release the GPUs it left behind and start it again
  blackwell.sglang.server_restart:
    unit: sglang.service
    owner_user: sglang
    owner_devices: [/dev/nvidia0, /dev/nvidia1]
    port: 30000
  register: restarted
"""

RETURN = r"""
ready:
  description: With O(wait), what the wait saw (C(elapsed), C(probes), C(unit_state), and C(info), what SGLang resolved).
  type: dict
  returned: when wait is set and the unit was started
startup:
  description:
    - With O(startup) and O(wait), the start as measured, C(model), C(revision), C(release) and C(host_class) (the key),
      C(seconds) (the wait's wall time from the start to health), C(source) (C(metrics) when SGLang's breakdown was
      read, else C(wait)), C(breakdown) (C(phases), C(cuda_graph), C(cuda_graph_seconds), C(weight_load_seconds),
      C(weight_update_seconds); null without metrics) and C(budget) (C(timeout), C(last), C(why)).
    - What M(blackwell.sglang.last_good) keeps with its C(startup) option.
  type: dict
  returned: when startup and wait are set and the unit was started
compile_retry:
  description:
    - With O(kernel_cache) and O(wait), when the first start failed, the decision on it (C(stuck), C(retry), C(clear),
      C(evidence), C(why)) and, after a retry, C(retried) true and C(ready), what the second wait saw.
  type: dict
  returned: when kernel_cache and wait are set and the first start failed
cleared:
  description: The directories of O(clear) that existed and were removed.
  type: list
  elements: str
  returned: always
stopped:
  description: Whether the unit was running (active, activating, deactivating or reloading) and was stopped.
  type: bool
  returned: always
started:
  description: Whether the unit was started (false in check mode).
  type: bool
  returned: always
reloaded:
  description: Whether systemd was reloaded (before the stop, because the unit's files had changed on disk).
  type: bool
  returned: always
holders:
  description: Every holder found after the stop, before any kill (see M(blackwell.sglang.gpu_holders)).
  type: list
  returned: when the unit was found
killed:
  description: The leftovers that were terminated.
  type: list
  returned: when the unit was found
foreign:
  description: Foreign holders.
  type: list
  returned: when the unit was found
"""

import os
import shutil
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_gpu_holders import HOLDER_OPTIONS, release
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_startup import read_record

RUNNING = ("active", "activating", "deactivating", "reloading")


def clear_problem(path: str) -> str | None:
    """Why ``path`` may not be removed by O(clear), or None."""
    if not path.startswith("/") or os.path.normpath(path) != path or len(path.strip("/").split("/")) < 3:
        return "is not an absolute, normalised path of at least three components"
    if os.path.islink(path):
        return "is a symbolic link"
    return None


def unit_states(module: AnsibleModule, unit: str) -> dict[str, str]:
    """LoadState, ActiveState and NeedDaemonReload of ``unit``."""
    _, out, _ = module.run_command(["systemctl", "show", "-p", "LoadState,ActiveState,NeedDaemonReload", unit])
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def systemctl(module: AnsibleModule, result: dict[str, Any], action: str, *args: str) -> None:
    """``systemctl ACTION ARGS``; fails the module with systemctl's error, like ansible.builtin.systemd_service."""
    rc, out, err = module.run_command(["systemctl", action, *args])
    if rc != 0:
        what = f"service {args[0]}" if args else "systemd"
        module.fail_json(msg=f"Unable to {action.replace('daemon-', '')} {what}: {(err or out).strip()}", **result)


def restart(module: AnsibleModule, params: dict[str, Any]) -> dict[str, Any]:
    """(Reload,) reset the rate limit, stop, release, start; the module's result (fail_json on the first failing step)."""
    unit = params["unit"]
    result: dict[str, Any] = {"changed": False, "stopped": False, "started": False, "reloaded": False, "cleared": []}
    clear = list(params.get("clear") or [])
    for index, path in enumerate(clear):
        problem = clear_problem(path)
        if problem:
            module.fail_json(msg=f"clear[{index}]: {path!r} {problem}", **result)
    # The record of good starts, for the action's startup budget (read here: no round trip of its own).
    record = (params.get("startup") or {}).get("record")
    if record and not module.check_mode:
        result["startup_record"] = read_record(str(record))
    state = unit_states(module, unit)
    if state.get("LoadState") in (None, "not-found"):
        module.fail_json(msg=f"Could not find the requested service {unit}: {state or 'systemctl show answered nothing'}",
                         **result)
    result["changed"] = True
    if not module.check_mode:
        # While the server still serves: load a unit file changed on disk, reset the start rate limit.
        if params["daemon_reload"] and state.get("NeedDaemonReload") == "yes":
            systemctl(module, result, "daemon-reload")
            result["reloaded"] = True
        # Best effort: a unit that never failed has nothing to reset (some systemd releases answer non-zero), and
        # a start refused by the rate limit fails below with systemd's own message.
        module.run_command(["systemctl", "reset-failed", unit])
    if state.get("ActiveState") in RUNNING:
        result["stopped"] = True
        if not module.check_mode:
            systemctl(module, result, "stop", unit)
    release(module, {**params, "owner_unit": unit}, "released", result)
    if module.check_mode:
        return result
    for path in clear:
        if os.path.lexists(path):
            shutil.rmtree(path)
            result["cleared"].append(path)
    systemctl(module, result, "start", unit)
    result["started"] = True
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **HOLDER_OPTIONS,
            "unit": {"type": "str", "required": True},
            "daemon_reload": {"type": "bool", "default": True},
            # Handled by the action plugin (plugins/action/server_restart.py): it never passes wait to the module, and
            # passes startup's record only (read here, in the module's one run; returned as startup_record).
            "wait": {"type": "dict"},
            "startup": {"type": "dict"},
            "kernel_cache": {"type": "dict", "options": {"root": {"type": "str", "default": ""},
                                                         # a kernel cache key (release, stack, arch), not a secret
                                                         "key": {"type": "str", "default": "", "no_log": False},
                                                         "dir": {"type": "str", "default": ""}}},
            "clear": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(**restart(module, module.params))


if __name__ == "__main__":
    main()
