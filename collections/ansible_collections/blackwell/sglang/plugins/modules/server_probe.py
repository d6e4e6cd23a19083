#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: one look at an SGLang server: its health endpoint, its systemd unit, its last log line."""

from __future__ import annotations

DOCUMENTATION = r"""
module: server_probe
version_added: 0.1.0
short_description: Probe an SGLang server once (HTTP health, systemd state, last log lines)
description:
  - Fetches O(url) once and reads the unit's state and the last O(log_lines) journal lines.
    Never fails for a server that is down; the caller (the C(wait_ready) action) decides.
options:
  url:
    description: Health URL, e.g. http://127.0.0.1:30000/health.
    type: str
    required: true
  unit:
    description: systemd unit of the server.
    type: str
    required: true
  ca_path:
    description: >-
      PEM CA bundle that verifies the server's TLS certificate when O(url) is https (the plan's
      C(endpoint.ca_file), from C(sglang_tls_ca_file)); unset or empty, the system's CA store.
    type: str
  timeout:
    description: HTTP timeout in seconds.
    type: float
    default: 5
  log_lines:
    description: How many of the unit's last journal lines to return.
    type: int
    default: 1
  wait:
    description: >-
      Keep probing on the host for up to this many seconds, every O(interval), and return as soon as the
      server is healthy or its unit has failed or stopped (0 probes once).
    type: float
    default: 0
  interval:
    description: Seconds between probes while waiting.
    type: float
    default: 0.25
  gpus:
    description: >-
      nvidia-smi indices of the server's GPUs whose used memory to report as RV(gpu_memory_mib) (an empty
      list: every GPU); unset, nvidia-smi is not run.
    type: list
    elements: int
  info_url:
    description: >-
      Once O(url) answers 200, read this URL too (SGLang's C(/server_info): the arguments it resolved) and return
      the values of O(info_keys) from its JSON as RV(info). Unset, nothing more is read.
    type: str
  info_keys:
    description: >-
      The keys of O(info_url)'s JSON to return; only these are returned (C(/server_info) also holds the API key
      and other secrets of the server's arguments).
    type: list
    elements: str
    default: []
  api_key:
    description: "The server's API key, sent as C(Authorization: Bearer) to O(info_url) only. Kept out of the output."
    type: str
  metrics:
    description: >-
      Once O(url) answers 200, read SGLang's C(/metrics) beside it (same scheme, host and port) and return its startup
      breakdown as RV(startup_breakdown), in the same run (the server runs with C(--enable-metrics)).
    type: bool
    default: false
  markers:
    description: >-
      Also return, as RV(marked), the journal lines of the unit's current start (its systemd invocation, not only
      the last O(log_lines)) that contain any of these strings, oldest first. On a host with many ranks the lines a
      start logged in one phase are soon pushed out of a short tail by the other ranks' lines; the phase a stalled
      start stopped in (the server_restart action's kernel-compile retry) is judged on these. Empty: not read.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Look at the server once, with its last 20 journal lines
  blackwell.sglang.server_probe:
    url: http://127.0.0.1:30000/health
    unit: sglang.service
    log_lines: 20
  register: probe

- name: Wait on the host up to 30 seconds for the server to answer, reporting the memory used on its GPUs
  blackwell.sglang.server_probe:
    url: https://127.0.0.1:30000/health
    unit: sglang.service
    ca_path: /etc/sglang/ca.pem
    wait: 30
    gpus: [0, 1]
"""

RETURN = r"""
status:
  description: HTTP status, or -1 when nothing answered.
  type: int
  returned: always
unit_state:
  description: ActiveState, SubState, Result, NRestarts and MainPID of the unit.
  type: dict
  returned: always
log:
  description: The last journal lines of the unit.
  type: list
  returned: always
cursor:
  description: The journal cursor of the unit's last line (a new line moves it), or null when it has none.
  type: str
  returned: always
gpu_memory_mib:
  description: Memory used on O(gpus) in MiB (nvidia-smi --query-gpu memory.used, summed), or null.
  type: int
  returned: always
info:
  description: >-
    The values of O(info_keys) in O(info_url)'s JSON (a key it lacks is left out), when O(url) answered 200 and
    O(info_url) is set; null otherwise.
  type: dict
  returned: always
info_error:
  description: Why O(info_url) could not be read (null when it was, or was not asked for).
  type: str
  returned: always
startup_breakdown:
  description: >-
    With O(metrics), once O(url) answered 200, SGLang's startup breakdown from C(/metrics) (C(phases), C(cuda_graph),
    C(cuda_graph_seconds), C(weight_load_seconds), C(weight_update_seconds)); null otherwise or without its samples.
  type: dict
  returned: always
metrics_error:
  description: Why C(/metrics) could not be read (null when it was, or was not asked for).
  type: str
  returned: always
marked:
  description: >-
    With O(markers), the lines of the unit's current start that contain one of them, oldest first (at most the
    last 200); an empty list otherwise.
  type: list
  elements: str
  returned: always
"""

import time
from collections.abc import Callable

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_http import get, get_json
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_startup import MAX_METRICS_BYTES, read_breakdown


def probe(url: str, timeout: float, ca_path: str | None = None) -> tuple[int, str]:
    """HTTP status of one GET (-1 and the error when nothing answered, e.g. a certificate that does not verify)."""
    status, _, error = get(url, timeout=timeout, ca_path=ca_path, limit=0)  # the status only: no body read
    return status, (error or "") if status == -1 else ""


def server_info(url: str, keys: list[str], api_key: str | None, timeout: float,
                ca_path: str | None = None) -> tuple[dict[str, object] | None, str | None]:
    """(the values of ``keys`` in the JSON object at ``url``, None) or (None, why it could not be read)."""
    _, body, error = get_json(url, timeout=timeout, ca_path=ca_path, api_key=api_key)
    if error is not None:
        return None, error
    if not isinstance(body, dict):
        return None, "not a JSON object"
    return {key: body[key] for key in keys if key in body}, None


def getter(ca_path: str | None) -> Callable[[str, float], tuple[int, bytes]]:
    """GET with the probe's TLS settings: (status, at most MAX_METRICS_BYTES + 1 bytes of the body); OSError when
    nothing answered (read_breakdown's contract)."""

    def get_metrics(url: str, timeout: float) -> tuple[int, bytes]:
        status, body, error = get(url, timeout=timeout, ca_path=ca_path, limit=MAX_METRICS_BYTES)
        if status == -1:
            raise OSError(error)
        return status, body

    return get_metrics


# The most lines of one start that markers returns (the newest): enough for every rank's lines of one phase.
MARKED_LINES = 200
# Without an invocation ID (a unit that never started), the unit's last lines this many.
MARKED_FALLBACK_LINES = 5000


def marked_lines(module: AnsibleModule, unit: str, markers: list[str]) -> list[str]:
    """The journal lines of ``unit``'s current start (its InvocationID) that contain one of ``markers``, oldest
    first, at most MARKED_LINES (the newest)."""
    _, out, _ = module.run_command(["systemctl", "show", "-p", "InvocationID", "--value", unit])
    invocation = out.strip()
    if len(invocation) == 32 and all(c in "0123456789abcdef" for c in invocation):
        argv = ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "cat", "--no-pager"]
    else:
        argv = ["journalctl", "-u", unit, "-n", str(MARKED_FALLBACK_LINES), "-o", "cat", "--no-pager"]
    rc, log, _ = module.run_command(argv)
    if rc != 0:
        return []
    return [line for line in log.splitlines() if any(marker in line for marker in markers)][-MARKED_LINES:]


def unit_state(module: AnsibleModule, unit: str) -> dict[str, str]:
    """ActiveState, SubState, Result, NRestarts and MainPID of the unit."""
    _, out, _ = module.run_command(["systemctl", "show", "-p", "ActiveState,SubState,Result,NRestarts,MainPID", unit])
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def gpu_memory_mib(module: AnsibleModule, gpus: list[int]) -> int | None:
    """memory.used of the GPUs ``gpus`` (all when empty) summed in MiB; None when nvidia-smi does not answer."""
    rc, out, _ = module.run_command(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"])
    if rc != 0:
        return None
    total, seen = 0, False
    for line in out.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and (not gpus or int(parts[0]) in gpus):
            total, seen = total + int(parts[1]), True
    return total if seen else None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "unit": {"type": "str", "required": True},
            "ca_path": {"type": "str"},
            "timeout": {"type": "float", "default": 5},
            "log_lines": {"type": "int", "default": 1},
            "wait": {"type": "float", "default": 0},
            "interval": {"type": "float", "default": 0.25},
            "gpus": {"type": "list", "elements": "int"},
            "info_url": {"type": "str"},
            "info_keys": {"type": "list", "elements": "str", "default": [], "no_log": False},  # key names, not keys
            "api_key": {"type": "str", "no_log": True},
            "metrics": {"type": "bool", "default": False},
            "markers": {"type": "list", "elements": "str", "default": [], "no_log": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    deadline = time.monotonic() + params["wait"]
    while True:
        status, error = probe(params["url"], params["timeout"], params["ca_path"])
        state = unit_state(module, params["unit"])
        if status == 200 or state.get("ActiveState") in ("failed", "inactive") or time.monotonic() >= deadline:
            break
        time.sleep(params["interval"])
    _, log, _ = module.run_command(
        ["journalctl", "-u", params["unit"], "-n", str(params["log_lines"]), "-o", "cat", "--no-pager", "--show-cursor"]
    )
    lines = log.splitlines()
    cursor = lines.pop()[len("-- cursor: "):] if lines and lines[-1].startswith("-- cursor: ") else None
    memory = gpu_memory_mib(module, params["gpus"]) if params["gpus"] is not None else None
    info, info_error = None, None
    if status == 200 and params["info_url"]:
        info, info_error = server_info(params["info_url"], params["info_keys"], params["api_key"], params["timeout"],
                                       params["ca_path"])
    breakdown, metrics_error = None, None
    if status == 200 and params["metrics"]:
        breakdown, metrics_error = read_breakdown(params["url"], getter(params["ca_path"]))
    marked = marked_lines(module, params["unit"], params["markers"]) if params["markers"] else []
    module.exit_json(changed=False, status=status, error=error, unit_state=state, log=lines[-params["log_lines"]:],
                     cursor=cursor, gpu_memory_mib=memory, info=info, info_error=info_error,
                     startup_breakdown=breakdown, metrics_error=metrics_error, marked=marked)


if __name__ == "__main__":
    main()
