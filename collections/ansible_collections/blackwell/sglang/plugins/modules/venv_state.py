#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: one read-only look at a host's SGLang virtualenvs (roles/sglang), instead of one module run per question."""

from __future__ import annotations

DOCUMENTATION = r"""
module: venv_state
version_added: 0.3.0
short_description: Read the state of a host's SGLang virtualenvs in one step (read-only)
description:
  - The host side of roles/sglang's install step before it changes anything, in one module run instead of four (each
    run costs a round trip to the host).
  - Whether the virtualenv of this release's requirements is complete (its marker file exists), and then whether it
    still imports what it must (O(import_check) run by its own Python; a virtualenv that lost a library fails there).
  - Where the current link points, and which virtualenvs are installed in O(venvs_dir) with their change times (the
    role prunes the oldest beyond its limit).
  - Changes nothing; runs in check mode too.
options:
  venv:
    description: The virtualenv of this release's requirements.
    type: path
    required: true
  marker:
    description: The file a complete build of O(venv) leaves.
    type: path
    required: true
  import_check:
    description:
      - Python code run by O(venv)C(/bin/python) when O(marker) exists; its output's last line is reported in
        RV(imported) (C(last_line)).
    type: str
    required: true
  import_timeout:
    description: Seconds the import check may take.
    type: int
    default: 600
  current_link:
    description: The link to the virtualenv in use.
    type: path
    required: true
  venvs_dir:
    description: The directory holding the virtualenvs (each a directory); absent, none are listed.
    type: path
    required: true
  kernel_caches_dir:
    description:
      - The directory holding the SGLang servers' kernel caches, one directory per key
        (C(sglang-<release>_<torch>_cu<N>_<arch>), the plan's C(kernel_cache.root)); the names of its directories are
        returned in RV(kernel_caches), so that the role removes a release's caches with its last virtualenv.
      - Empty, none are listed.
    type: path
    default: ""
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Read-only; it runs the same in check mode.
  diff_mode:
    support: none
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Look at the virtualenvs
  blackwell.sglang.venv_state:
    venv: /opt/sglang/venvs/0.5.23-0123456789ab
    marker: /opt/sglang/venvs/0.5.23-0123456789ab/.sglang-venv-complete
    import_check: "import importlib.metadata as m; import sglang; print(m.version('sglang'))"
    current_link: /opt/sglang/current
    venvs_dir: /opt/sglang/venvs
  register: venvs
"""

RETURN = r"""
complete:
  description: The marker of a complete build exists.
  type: bool
  returned: always
imported:
  description: The import check's exit code (C(rc), -1 when it could not run or did not finish) and last output line
    (C(last_line)); C(rc) is null when the build is not complete (the check did not run).
  type: dict
  returned: always
current:
  description: The current link as ansible.builtin.stat reports it (C(exists), C(islnk), C(lnk_source)).
  type: dict
  returned: always
venvs:
  description: The directories in O(venvs_dir), each C(path) and C(mtime), newest first.
  type: list
  elements: dict
  returned: always
kernel_caches:
  description: The names of the directories in O(kernel_caches_dir) (empty without it), sorted.
  type: list
  elements: str
  returned: always
"""

import os
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def link_state(path: str) -> dict[str, Any]:
    """What ansible.builtin.stat says of the current link (the keys the role reads)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False, "islnk": False, "lnk_source": None}
    is_link = stat.S_ISLNK(info.st_mode)
    return {"exists": True, "islnk": is_link, "lnk_source": os.path.realpath(path) if is_link else None}


def listed(directory: str) -> list[dict[str, Any]]:
    """The directories in ``directory`` (links not followed), newest first."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    found = [{"path": entry.path, "mtime": entry.stat(follow_symlinks=False).st_mtime}
             for entry in entries if entry.is_dir(follow_symlinks=False)]
    return sorted(found, key=lambda item: item["mtime"], reverse=True)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "venv": {"type": "path", "required": True},
            "marker": {"type": "path", "required": True},
            "import_check": {"type": "str", "required": True},
            "import_timeout": {"type": "int", "default": 600},
            "current_link": {"type": "path", "required": True},
            "venvs_dir": {"type": "path", "required": True},
            "kernel_caches_dir": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    complete = os.path.isfile(params["marker"])
    checked: dict[str, Any] = {"rc": None, "last_line": ""}
    if complete:
        python = os.path.join(params["venv"], "bin", "python")
        try:
            rc, out, err = module.run_command(["timeout", str(params["import_timeout"]), python, "-c", params["import_check"]])
        except OSError as exc:
            rc, out, err = -1, "", str(exc)
        lines = out.strip().splitlines()
        checked = {"rc": rc, "last_line": lines[-1].strip() if lines else "", "stderr_tail": err.strip().splitlines()[-10:]}
    module.exit_json(changed=False, complete=complete, current=link_state(params["current_link"]),
                     venvs=listed(params["venvs_dir"]), imported=checked,
                     kernel_caches=sorted(os.path.basename(d["path"]) for d in listed(params.get("kernel_caches_dir") or ""))
                     if params.get("kernel_caches_dir") else [])


if __name__ == "__main__":
    main()
