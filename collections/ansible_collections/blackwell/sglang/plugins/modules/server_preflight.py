#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: the restart chain's checks before anything stops, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: server_preflight
version_added: 0.3.0
short_description: Before a server is stopped, check its GPUs' holders, run its preflight command and pre-read its weights
description:
  - The host side of roles/sglang_server's preflight, in one module run instead of two (each run costs a round trip to
    the host). Changes nothing.
  - First the GPU holders, exactly as M(blackwell.sglang.gpu_holders) with C(state=query) finds them (the same code). A
    foreign process holding one of the service's GPUs fails the module, naming it, unless O(kill_foreign) (the restart
    then terminates it).
  - Then, with O(argv), the preflight command (roles/sglang_server's C(sglang-preflight.py), which lets the installed
    SGLang resolve and check the new unit's C(ExecStart=) inside the unit's sandbox). Its exit code and output are
    returned in RV(preflight) as M(ansible.builtin.command) returns them; a non-zero exit does not fail the module, so
    that the role can put the last known good files back and fail with the preflight's own report.
  - Then, with O(preread) and a preflight that passed (or none), the weights' pre-read exactly as
    M(blackwell.sglang.weights_preread) does it (the same code), its result in RV(preread). One module run instead of
    two before the drain of a restart.
options:
  owner_unit:
    description: systemd unit of the service (e.g. C(sglang.service)); processes in its cgroup are the service's.
    type: str
    required: true
  argv:
    description: The preflight command and its arguments; unset, only the GPU holders are checked.
    type: list
    elements: str
  preread:
    description:
      - The options of M(blackwell.sglang.weights_preread), which see; unset, nothing is read.
      - Skipped when the preflight command exits non-zero (the restart does not go on).
    type: dict
    suboptions:
      paths:
        description: The model directories to read.
        type: list
        elements: str
        required: true
      mode:
        description: V(auto), V(always) or V(never), as in M(blackwell.sglang.weights_preread).
        type: str
        choices: [auto, always, never]
        default: auto
      margin_gib:
        description: Memory kept free beyond the checkpoint, GiB.
        type: float
        default: 8
      margin_percent:
        description: Memory kept free beyond the checkpoint, percent of C(MemTotal).
        type: float
        default: 10
      parallelism:
        description: Reader threads.
        type: int
        default: 8
      patterns:
        description: Shell patterns of the weight file names, tried in order.
        type: list
        elements: str
        default: ['*.safetensors', '*.bin', '*.pt']
      timeout:
        description: Seconds after which no further window is read; V(0) for no limit.
        type: float
        default: 0
extends_documentation_fragment:
  - blackwell.sglang.gpu_holders
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Read-only; the preflight command runs in check mode too (it changes nothing); the pre-read only measures.
  diff_mode:
    support: none
seealso:
  - module: blackwell.sglang.gpu_holders
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the GPUs' holders and the new unit's arguments before the stop
  blackwell.sglang.server_preflight:
    owner_unit: sglang.service
    owner_user: sglang
    owner_devices: [/dev/nvidia0, /dev/nvidia1]
    argv: [/opt/sglang/current/bin/python, /usr/local/libexec/sglang/sglang-preflight.py, --unit, /etc/systemd/system/sglang.service]
    preread:
      paths: [/opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4]
  register: preflight
"""

RETURN = r"""
holders:
  description: Every holder found, with pid, name, user, cmdline, devices and kind (see M(blackwell.sglang.gpu_holders)).
  type: list
  returned: always
foreign:
  description: Foreign holders.
  type: list
  returned: always
preflight:
  description:
    - The preflight command's exit code (C(rc)), standard output and error (C(stdout), C(stderr), and line by line
      C(stdout_lines), C(stderr_lines)), as M(ansible.builtin.command) returns them.
    - Nested, not at the top of the result, so that Ansible does not read a non-zero C(rc) as the module's failure.
  type: dict
  returned: with argv
preread:
  description: The pre-read's result, as M(blackwell.sglang.weights_preread) returns it.
  type: dict
  returned: with preread, when the preflight passed
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_gpu_holders import HOLDER_OPTIONS, release
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_preread import MEMINFO, PREREAD_SPEC, PrereadError, run


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **HOLDER_OPTIONS,
            "owner_unit": {"type": "str", "required": True},
            "argv": {"type": "list", "elements": "str"},
            "preread": {"type": "dict", "options": PREREAD_SPEC},
        },
        supports_check_mode=True,
    )
    result = release(module, module.params, "query", {"changed": False})
    result.pop("killed", None)
    if module.params["argv"]:
        rc, out, err = module.run_command(module.params["argv"])
        result["preflight"] = {"rc": rc, "stdout": out, "stderr": err, "stdout_lines": out.splitlines(),
                               "stderr_lines": err.splitlines()}
    if module.params["preread"] and result.get("preflight", {}).get("rc", 0) == 0:
        try:
            with open(MEMINFO, encoding="ascii") as handle:
                text = handle.read()
            result["preread"] = run(module.params["preread"], module.check_mode, text)
        except (PrereadError, OSError) as exc:
            module.fail_json(msg=f"preread.{exc}" if isinstance(exc, PrereadError) else f"cannot measure the weights: {exc}",
                             **result)
            return
        for error in result["preread"]["errors"]:
            module.warn(f"preread: {error}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
