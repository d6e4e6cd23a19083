# SPDX-License-Identifier: Apache-2.0
"""What a host's SGLang instances look like now, in one read-only look (blackwell.sglang.server_state, and the look
blackwell.sglang.server_files takes after installing the files): the units the role installed, which instances run,
whether the running ones answer their health check, and which last-known-good records name the running virtualenv."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_http import get

# The options of the look (server_state's arguments, server_files' look suboptions).
STATE_OPTIONS: dict[str, Any] = {
    "instances": {"type": "list", "elements": "dict", "required": True, "options": {
        "name": {"type": "str", "required": True},
        "unit": {"type": "str", "required": True},
        "url": {"type": "str", "required": True},
        "ca_path": {"type": "str"},
    }},
    "health_timeout": {"type": "float", "default": 5},
    "health_status_codes": {"type": "list", "elements": "int", "default": [-1, 200, 503]},
    "unit_dir": {"type": "path", "default": "/etc/systemd/system"},
    "unit_patterns": {"type": "list", "elements": "str", "required": True},
    "unit_marker": {"type": "str", "default": "^# SGLang [0-9]"},
    "venv": {"type": "path", "required": True},
    "config_dir": {"type": "path", "required": True},
    "venv_record_name": {"type": "str", "default": "venv"},
}


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return list(handle)
    except OSError:
        return []


def installed_units(unit_dir: str, patterns: list[str], marker: str) -> list[str]:
    """The unit files of ``unit_dir`` named like ``patterns`` with a line matching ``marker``, as unit names."""
    prog = re.compile(marker)
    try:
        names = os.listdir(unit_dir)
    except OSError:
        return []
    found = [name for name in names if not name.startswith(".") and any(fnmatch.fnmatch(name, p) for p in patterns)
             and _regular(os.path.join(unit_dir, name))
             and any(prog.match(line) for line in _lines(os.path.join(unit_dir, name)))]
    return sorted(name.removesuffix(".service") for name in found)


def running_venv(venv: str) -> str:
    """The virtualenv a link points at (fully resolved), or ``venv`` itself when it is not a link."""
    return os.path.realpath(venv) if os.path.islink(venv) else venv


def venv_records(config_dir: str, name: str, venv: str) -> list[str]:
    """Records ``config_dir``/``name`` and ``config_dir``/*/``name`` (regular files) with a line that is ``venv``."""
    candidates = [os.path.join(config_dir, name)]
    try:
        entries = os.listdir(config_dir)
    except OSError:
        entries = []
    for entry in entries:
        sub = os.path.join(config_dir, entry)
        if os.path.isdir(sub) and not os.path.islink(sub):
            candidates.append(os.path.join(sub, name))
    return sorted(path for path in candidates if _regular(path)
                  and any(line.removesuffix("\n") == venv for line in _lines(path)))


def health_status(url: str, timeout: float, ca_path: str | None) -> tuple[int, str]:
    """HTTP status of one GET of ``url`` (sglang_http: no redirect followed, no proxy) and why it is no answer:
    ``HTTP STATUS`` for an error status, the error with -1 when nothing answered, empty otherwise."""
    status, _body, error = get(url, timeout=timeout, ca_path=ca_path, limit=0)  # the status only: no body read
    return status, error or ""


def look(module: AnsibleModule, params: dict[str, Any]) -> dict[str, Any]:
    """The module's result (fail_json on a health status that is not an answer)."""
    instances = params["instances"]
    result: dict[str, Any] = {"changed": False, "active": {}, "health": {}}
    result["installed_units"] = installed_units(params["unit_dir"], params["unit_patterns"], params["unit_marker"])
    _rc, out, _err = module.run_command(["systemctl", "is-active", *(i["unit"] for i in instances)])
    states = out.splitlines()
    for index, instance in enumerate(instances):
        result["active"][instance["name"]] = states[index].strip() if index < len(states) else "unknown"
    for instance in instances:
        if result["active"][instance["name"]] != "active":
            continue
        status, error = health_status(instance["url"], params["health_timeout"], instance.get("ca_path"))
        result["health"][instance["name"]] = status
        if status not in params["health_status_codes"]:
            module.fail_json(msg=f"{instance['name']}: {instance['url']}: Status code was {status} and not "
                             f"{params['health_status_codes']}: {error}", **result)
    result["venv"] = running_venv(params["venv"])
    result["venv_records"] = venv_records(params["config_dir"], params["venv_record_name"], result["venv"])
    return result
