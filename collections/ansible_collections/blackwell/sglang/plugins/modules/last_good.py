#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: keep an SGLang server's running files and virtualenv as its last known good configuration."""

from __future__ import annotations

DOCUMENTATION = r"""
module: last_good
version_added: 0.2.0
short_description: Save a healthy server's files and virtualenv as its last known good configuration, in one step
description:
  - After a healthy start, copies the server's running files (unit, environment file, C(--config) file, spec record)
    into O(path) under the names given, removes the saved files named in O(remove) (a C(--config) file the running
    configuration does not have) and records in O(path)C(/venv) the virtualenv the server runs (the target of the O(venv) link, or
    O(venv) itself when it is not a link), one line.
  - O(path) is made a directory owned by root, mode 0700; every file in it is owned by root, mode 0600. A file is
    rewritten (atomically) only when its content, owner or mode differ.
  - The restart chain's rollback (roles/sglang_server tasks/restore_files.yml) puts these files back.
  - The files hold secrets; the module never returns their content.
options:
  path:
    description: The last-known-good directory of the instance (e.g. C(/etc/sglang/last-good)).
    type: path
    required: true
  files:
    description: The files to save, each as C(name) (the file's name in O(path)) and C(src) (the running file).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name of the copy in O(path) (C(unit), C(env), C(config), C(spec)).
        type: str
        required: true
      src:
        description: The running file; it must exist.
        type: path
        required: true
  remove:
    description: Names of saved files to remove from O(path) (the running configuration has no such file).
    type: list
    elements: str
    default: []
  venv:
    description: The virtualenv link the server runs from; unset, no C(venv) record is written.
    type: path
  startup:
    description:
      - The start that made this configuration good, as M(blackwell.sglang.server_restart) reports it (its C(startup)
        result; C(model), C(revision), C(release), C(host_class) and C(seconds) are read, C(source) and C(breakdown)
        kept). It becomes the newest record of O(path)C(/startup.json) (one record per model, revision, release and
        host class; the eight newest kept), which the next restart's startup budget reads.
      - Unset, or without a positive C(seconds), the record is left as it is.
    type: dict
  quality:
    description:
      - The quality gate's record of this good start (M(blackwell.sglang.chat_probe)'s C(quality.record) result, the
        fixed prompts' answers and the weights checksum), written as O(path)C(/quality.json), which the next restart's
        quality gate compares with. Unset, the record is left as it is.
    type: dict
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Reports the files it would save or remove and writes none.
  diff_mode:
    support: none
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Keep the running files as last known good (no --config file)
  blackwell.sglang.last_good:
    path: /etc/sglang/last-good
    files:
      - {name: unit, src: /etc/systemd/system/sglang.service}
      - {name: env, src: /etc/sglang/sglang.env}
    remove: [config]
    venv: /opt/sglang/venvs/current
  no_log: true
"""

RETURN = r"""
saved:
  description: Names of the files written (their content, owner or mode differed), C(venv) included.
  type: list
  elements: str
  returned: always
removed:
  description: Names of the files removed.
  type: list
  elements: str
  returned: always
venv:
  description: The virtualenv recorded (null without O(venv)).
  type: str
  returned: always
startup:
  description: The start recorded in C(startup.json) (null without O(startup)).
  type: dict
  returned: always
quality:
  description: Whether C(quality.json) was given (O(quality)), whether or not its content changed.
  type: bool
  returned: always
"""

import json
import math
import os
import stat
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_startup import read_record, recorded, usable_records

# The record of good starts in the directory (the startup budget's: module_utils/sglang_startup.py).
STARTUP_FILE = "startup.json"
# The quality gate's record of the last good start (module_utils/sglang_quality.py reads it).
QUALITY_FILE = "quality.json"
RESERVED = (".", "..", "venv", STARTUP_FILE, QUALITY_FILE)
DIR_MODE = 0o700
FILE_MODE = 0o600
# (uid, gid) of the directory and its files: root's.
OWNER = (0, 0)


def running_venv(venv: str) -> str:
    """The virtualenv a link points at (fully resolved), or ``venv`` itself when it is not a link."""
    return os.path.realpath(venv) if os.path.islink(venv) else venv


def differs(path: str, content: bytes) -> bool:
    """True when ``path`` is not a regular root-owned 0600 file holding exactly ``content``."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != FILE_MODE or (info.st_uid, info.st_gid) != OWNER:
        return True
    with open(path, "rb") as handle:
        return handle.read() != content


def write(path: str, content: bytes) -> None:
    """Replace ``path`` atomically with ``content``, root-owned, mode 0600."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".last-good-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, FILE_MODE)
        os.chown(tmp, *OWNER)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def startup_content(path: str, start: Any) -> tuple[bytes, dict[str, Any]] | None:
    """The new text of ``path``/startup.json with ``start`` as its newest record, and that record; None when ``start``
    is no start (no positive seconds). A record file that does not read as JSON is replaced."""
    if not isinstance(start, dict):
        return None
    try:
        seconds = float(start.get("seconds"))
    except (TypeError, ValueError):
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    history = read_record(os.path.join(path, STARTUP_FILE))
    document = recorded({"starts": usable_records(history)}, {**start, "seconds": seconds}, at=str(start.get("at") or ""))
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode(), document["starts"][0]


def save(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """Bring ``params["path"]`` to the running configuration; the module's result."""
    path = params["path"]
    result: dict[str, Any] = {"changed": False, "saved": [], "removed": [], "venv": None, "startup": None,
                              "quality": isinstance(params.get("quality"), dict)}
    wanted: list[tuple[str, bytes]] = []
    for item in params["files"]:
        with open(item["src"], "rb") as handle:
            wanted.append((item["name"], handle.read()))
    if params["venv"]:
        result["venv"] = running_venv(params["venv"])
        wanted.append(("venv", f"{result['venv']}\n".encode()))
    start = startup_content(path, params.get("startup"))
    if start is not None:
        result["startup"] = start[1]
        wanted.append((STARTUP_FILE, start[0]))
    if result["quality"]:
        wanted.append((QUALITY_FILE, (json.dumps(params["quality"], indent=4, sort_keys=True) + "\n").encode()))
    try:
        info = os.lstat(path)
        dir_ok = stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == DIR_MODE and (info.st_uid, info.st_gid) == OWNER
    except FileNotFoundError:
        info, dir_ok = None, False
    if not dir_ok:
        result["changed"] = True
        if not check_mode:
            if info is None:
                os.makedirs(path, mode=DIR_MODE)
            os.chmod(path, DIR_MODE)
            os.chown(path, *OWNER)
    for name, content in wanted:
        target = os.path.join(path, name)
        if differs(target, content):
            result["saved"].append(name)
            if not check_mode:
                write(target, content)
    for name in params["remove"]:
        target = os.path.join(path, name)
        if os.path.lexists(target):
            result["removed"].append(name)
            if not check_mode:
                os.unlink(target)
    result["changed"] = bool(result["changed"] or result["saved"] or result["removed"])
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "files": {"type": "list", "elements": "dict", "default": [], "options": {
                "name": {"type": "str", "required": True},
                "src": {"type": "path", "required": True},
            }},
            "remove": {"type": "list", "elements": "str", "default": []},
            "venv": {"type": "path"},
            "startup": {"type": "dict"},
            "quality": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    for name in [item["name"] for item in module.params["files"]] + module.params["remove"]:
        if not name or "/" in name or name in RESERVED:
            module.fail_json(msg=f"not a last-known-good file name: {name!r}")
    try:
        result = save(module.params, module.check_mode)
    except OSError as exc:
        module.fail_json(msg=f"could not save the last known good files in {module.params['path']}: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
