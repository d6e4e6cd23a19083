#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: the manifest of an instance's built kernel directory, to share it with the rest of the fleet."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kernel_manifest
version_added: 0.3.0
short_description: List an SGLang instance's built kernel directory (files, sizes, SHA-256) and its build marker
description:
  - Reads the marker that M(blackwell.sglang.kernel_precompile) left in O(dir) (C(.blackwell-precompiled.json)) and,
    when there is one, lists every regular file under O(dir) with its size and SHA-256, so that the other hosts of
    the same kernel cache key can copy the directory from this one (M(blackwell.sglang.model_fetch), every file
    checked against this manifest) instead of compiling it.
  - Left out - the marker itself (a copy writes it only once complete), symbolic links, lock files and directories
    (C(locks/), C(*.lock)), unfinished writes (C(*.tmp)) and a copy in progress (C(.sglang-peer-partial/)).
  - Without a marker (nothing was built, or the build did not finish) nothing is listed - RV(marker) is null.
  - Changes nothing.
options:
  dir:
    description: The instance's kernel directory of its key (the plan's C(kernel_cache.dir)).
    type: path
    required: true
  max_files:
    description: Refuse to list a directory with more files than this (RV(error) says so, nothing is shared).
    type: int
    default: 100000
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: List the canary's built kernels
  blackwell.sglang.kernel_manifest:
    dir: /var/cache/sglang/kernels/sglang-0.5.23_torch-2.14.1_cu13_sm100/sglang
  register: kernels
"""

RETURN = r"""
marker:
  description: The build marker's document (C(schema), C(digest), C(key), ...), or null when there is none.
  type: dict
  returned: always
files:
  description: Every file to copy, C(path) (relative to O(dir)), C(size) and C(sha256), sorted by path.
  type: list
  elements: dict
  returned: always
bytes:
  description: The files' total size.
  type: int
  returned: always
error:
  description: Why nothing is listed although there is a marker (too many files, an unreadable file); empty otherwise.
  type: str
  returned: always
"""

import hashlib
import json
import os
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_precompile import MARKER

# Left out of the manifest: the marker, locks, unfinished writes and a copy in progress.
PARTIAL = ".sglang-peer-partial"
LOCK_DIRS = ("locks", PARTIAL)
SKIPPED_SUFFIXES = (".lock", ".tmp")
CHUNK = 1 << 20


def read_marker(directory: str) -> dict[str, Any] | None:
    """The marker document in ``directory``, or None (none, unreadable or not a JSON object)."""
    try:
        with open(os.path.join(directory, MARKER), encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def listed(directory: str, max_files: int) -> list[dict[str, Any]]:
    """The files of the manifest (see DOCUMENTATION), sorted by path. Raises ValueError past ``max_files``."""
    out = []
    for root, dirs, files in os.walk(directory, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in LOCK_DIRS)
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            if rel == MARKER or name.endswith(SKIPPED_SUFFIXES):
                continue
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            if len(out) >= max_files:
                raise ValueError(f"more than {max_files} files under {directory}: not shared")
            out.append({"path": rel, "size": info.st_size, "sha256": sha256(path)})
    return sorted(out, key=lambda f: f["path"])


def main() -> None:
    module = AnsibleModule(
        argument_spec={"dir": {"type": "path", "required": True}, "max_files": {"type": "int", "default": 100000}},
        supports_check_mode=True,
    )
    directory = os.path.normpath(module.params["dir"])
    if not os.path.isabs(directory):
        module.fail_json(msg=f"dir must be an absolute path, got {module.params['dir']!r}")
    result: dict[str, Any] = {"changed": False, "marker": None, "files": [], "bytes": 0, "error": ""}
    marker = read_marker(directory)
    if marker is None:
        module.exit_json(**result)
    try:
        files = listed(directory, module.params["max_files"])
    except (OSError, ValueError) as exc:
        module.exit_json(**{**result, "marker": marker, "error": str(exc)[:300]})
    module.exit_json(**{**result, "marker": marker, "files": files, "bytes": sum(f["size"] for f in files)})


if __name__ == "__main__":
    main()
