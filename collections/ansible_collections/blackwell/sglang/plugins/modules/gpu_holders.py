#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: find the processes holding NVIDIA device files and release the ones of a service."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_holders
version_added: 0.1.0
short_description: List the processes holding NVIDIA devices, and release those of one service
description:
  - Scans C(/proc/*/fd) for processes holding the NVIDIA device files and sorts them into kinds.
    C(allowed) are on the O(allow) list (nvidia-persistenced, DCGM) and are never touched. C(ours) belong to
    the service, that is, they run in its systemd unit's cgroup, or they run as its user (or have a process title
    starting with one of O(title_prefixes)) outside every O(sibling_units) cgroup and hold one of
    O(owner_devices). C(sibling) belong to another instance on the same host (its unit's cgroup, or the
    service user holding none of O(owner_devices)) and are never touched. Everything else is C(foreign)
    when it holds one of O(owner_devices) (or O(owner_devices) is not given), else C(other) (listed only).
  - With O(state=released) the service's holders get SIGTERM, then SIGKILL after O(term_timeout); then the
    module waits until none is left, the port is free and C(nvidia-smi --query-compute-apps) no longer lists
    them (the driver frees GPU memory asynchronously after a kill).
  - A foreign holder fails the task, naming its PID, user and devices, unless O(kill_foreign) is true.
    This replaces C(fuser -k /dev/nvidia*), which also kills nvidia-persistenced, DCGM and other users' jobs.
options:
  owner_unit:
    description: systemd unit of the service (e.g. C(sglang.service)); processes in its cgroup are the service's.
    type: str
  state:
    description: C(query) only reports; C(released) terminates the service's holders and waits until they are gone.
    type: str
    choices: [query, released]
    default: query
extends_documentation_fragment:
  - blackwell.sglang.gpu_holders
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: With O(state=released), reports the processes it would terminate and terminates none.
  diff_mode:
    support: none
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Release the GPUs held by what is left of sglang.service
  blackwell.sglang.gpu_holders:
    owner_unit: sglang.service
    owner_user: sglang
    state: released
    port: 30000
"""

RETURN = r"""
holders:
  description: Every holder found before any kill, with pid, name, user, cmdline, devices and kind (ours, allowed, foreign).
  type: list
  returned: always
killed:
  description: The holders that were terminated (empty in check mode or with state=query).
  type: list
  returned: always
foreign:
  description: Foreign holders.
  type: list
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_gpu_holders import (  # noqa: F401 (re-exported)
    HOLDER_OPTIONS,
    classify,
    describe,
    in_unit,
    listening,
    release,
    scan,
    terminate,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **HOLDER_OPTIONS,
            "owner_unit": {"type": "str"},
            "state": {"type": "str", "choices": ["query", "released"], "default": "query"},
        },
        supports_check_mode=True,
    )
    result = release(module, module.params, module.params["state"], {"changed": False})
    module.exit_json(**result)


if __name__ == "__main__":
    main()
