#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: build an instance's kernel cache before its restart (python -m sglang.compile_deep_gemm)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kernel_precompile
version_added: 0.3.0
short_description: Build an SGLang instance's DeepGEMM kernel cache before its restart, under the service's identity
description:
  - Runs SGLang's C(python -m sglang.compile_deep_gemm) with the instance's own arguments (O(args), the public launch
    arguments of the plan) while the running server still serves, so that the restart after it finds the kernels
    compiled instead of compiling them inside the downtime window (10 to 30 minutes for an FP8 MoE model on a cold
    cache).
  - The command runs as a transient systemd service (C(systemd-run --wait --pipe)) with the credentials and environment
    of the installed unit O(unit_path) and its drop-ins (C(User=), C(Group=), C(SupplementaryGroups=),
    C(WorkingDirectory=), C(Environment=), C(EnvironmentFile=), C(UnsetEnvironment=), C(UMask=)), so it compiles into
    the very cache directories the unit's environment file names. Its server listens on a free loopback port, without
    TLS; C(RuntimeMaxSec=) stops it, with every process it started, O(timeout) seconds plus a minute after the start.
  - After a successful build it writes a marker (C(.blackwell-precompiled.json)) into O(cache_dir) with a digest of
    the kernel cache key and the arguments that change kernels. With that marker in place the module changes nothing
    (C(changed=false)); clearing the directory clears the marker with it.
  - With O(mode=auto) it builds only where DeepGEMM runs, FP8 weights (C(--quantization) or the model's
    C(config.json)) on SM90 or SM100-class GPUs, and says why not in RV(skip_reason) otherwise. A multi-node
    instance is never pre-compiled (every node would have to run the command at once).
  - The compile server loads the model on the instance's GPUs next to the running server. Where the GPUs cannot hold
    both, the build fails; with O(fail_on_error=false) the module then reports it and changes nothing, and the start
    compiles as it did before.
options:
  key:
    description: The instance's kernel cache key (the plan's C(kernel_cache.key)); its last part is the GPU architecture.
    type: str
    required: true
  cache_dir:
    description: The instance's kernel directory of that key (the plan's C(kernel_cache.dir)), where the marker goes.
    type: path
    required: true
  args:
    description: The instance's public launch arguments (the plan's C(argv)), as C(launch_server) takes them.
    type: list
    elements: str
    required: true
  python:
    description: The Python of the virtualenv the instance will start with.
    type: path
    required: true
  unit_path:
    description: The instance's installed unit file; its drop-in directory C(<unit_path>.d) is read too.
    type: path
    required: true
  transient_unit:
    description: The name of the transient service the command runs as (a running one of that name is stopped first).
    type: str
    required: true
  mode:
    description: V(auto) builds where DeepGEMM runs (see above), V(always) wherever the instance is single-node.
    type: str
    choices: [auto, always]
    default: auto
  timeout:
    description: Seconds the compile may take (C(compile_deep_gemm --timeout)); the transient service is stopped a minute later.
    type: int
    default: 3600
  fail_on_error:
    description: Fail when the build fails; otherwise report it (RV(error)) and change nothing.
    type: bool
    default: true
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Decides and reports whether it would build; runs nothing.
  diff_mode:
    support: none
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Build the new release's DeepGEMM kernels before the instance is drained
  blackwell.sglang.kernel_precompile:
    key: sglang-0.5.23_torch-2.14.1_cu13_sm100
    cache_dir: /var/cache/sglang/kernels/sglang-0.5.23_torch-2.14.1_cu13_sm100/sglang
    args: [--model-path, /opt/sglang/models/deepseek-ai/DeepSeek-V3, --tp-size, "8", --port, "30000"]
    python: /opt/sglang/current/bin/python
    unit_path: /etc/systemd/system/sglang.service
    transient_unit: sglang-precompile
    timeout: 3600
"""

RETURN = r"""
built:
  description: Whether this run built the kernels.
  type: bool
  returned: always
skip_reason:
  description: Why nothing was built (the marker is there, not useful on this GPU or model, multi-node); empty when built.
  type: str
  returned: always
marker:
  description: The marker file's path.
  type: str
  returned: always
seconds:
  description: Wall time of the compile command.
  type: float
  returned: when it ran
argv:
  description: The compile command.
  type: list
  elements: str
  returned: always
error:
  description: Why the build failed (with O(fail_on_error=false)); empty otherwise.
  type: str
  returned: always
compile:
  description:
    - The command's exit code (C(rc)) and the last lines of its output (C(output_tail)).
    - Nested, so that a non-zero C(rc) does not fail the task by itself.
  type: dict
  returned: when it ran
"""

import json
import os
import pwd
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_precompile import (
    MARKER,
    compile_argv,
    deepgemm_applies,
    kernel_inputs,
    marker_document,
    marker_matches,
)

# The unit's directives that make the transient service the instance's identity and environment.
PASSED = ("User", "Group", "SupplementaryGroups", "WorkingDirectory", "Environment", "EnvironmentFile",
          "UnsetEnvironment", "UMask")


def service_directives(unit_path: str) -> list[tuple[str, str]]:
    """The PASSED directives of the unit's [Service] section and of its drop-ins, in systemd's reading order."""
    files = [unit_path]
    dropins = f"{unit_path}.d"
    if os.path.isdir(dropins):
        files += [os.path.join(dropins, f) for f in sorted(os.listdir(dropins)) if f.endswith(".conf")]
    out: list[tuple[str, str]] = []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().replace("\\\n", " ")
        section = ""
        for line in text.splitlines():
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            name, sep, value = line.partition("=")
            if sep and section == "[Service]" and name.strip() in PASSED:
                out.append((name.strip(), value.strip()))
    return out


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def model_config(args: list[str]) -> dict | None:
    """The model's config.json when --model-path is a local directory."""
    path = None
    for i, word in enumerate(args):
        if word == "--model-path" and i + 1 < len(args):
            path = args[i + 1]
        elif word.startswith("--model-path="):
            path = word.split("=", 1)[1]
    if not path or not os.path.isabs(path):
        return None
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            loaded = json.load(handle)
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _nnodes(args: list[str]) -> int:
    for i, word in enumerate(args):
        if word == "--nnodes" and i + 1 < len(args) and args[i + 1].isdigit():
            return int(args[i + 1])
    return 1


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "key": {"type": "str", "required": True, "no_log": False},
            "cache_dir": {"type": "path", "required": True},
            "args": {"type": "list", "elements": "str", "required": True},
            "python": {"type": "path", "required": True},
            "unit_path": {"type": "path", "required": True},
            "transient_unit": {"type": "str", "required": True},
            "mode": {"type": "str", "choices": ["auto", "always"], "default": "auto"},
            "timeout": {"type": "int", "default": 3600},
            "fail_on_error": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    args = [str(a) for a in p["args"]]
    marker = os.path.join(p["cache_dir"], MARKER)
    inputs = kernel_inputs(p["key"], args)
    result = {"changed": False, "built": False, "skip_reason": "", "marker": marker, "argv": [], "error": ""}

    try:
        with open(marker, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        found = None
    if marker_matches(found, inputs):
        module.exit_json(**{**result, "skip_reason": f"the kernels of {p['key']} for these arguments are built ({marker})"})
    if _nnodes(args) > 1:
        module.exit_json(**{**result, "skip_reason": "a multi-node instance: every node would have to run the compile at once"})
    applies, why = deepgemm_applies(args, model_config(args), p["key"])
    if p["mode"] == "auto" and not applies:
        module.exit_json(**{**result, "skip_reason": why})

    argv = compile_argv(p["python"], args, free_port(), p["timeout"])
    result["argv"] = argv
    if module.check_mode:
        module.exit_json(**{**result, "changed": True})

    try:
        directives = service_directives(p["unit_path"])
    except OSError as exc:
        module.fail_json(msg=f"cannot read the unit {p['unit_path']}: {exc}", **result)
    unit = p["transient_unit"]
    module.run_command(["systemctl", "stop", f"{unit}.service"])  # a run left by an interrupted play
    module.run_command(["systemctl", "reset-failed", f"{unit}.service"])
    command = ["systemd-run", f"--unit={unit}", "--wait", "--pipe", "--quiet", "--collect", "--service-type=exec",
               "-p", f"RuntimeMaxSec={int(p['timeout']) + 60}", "-p", "KillMode=control-group"]
    for name, value in directives:
        command += ["-p", f"{name}={value}"]
    start = time.monotonic()
    rc, out, err = module.run_command([*command, "--", *argv])
    seconds = round(time.monotonic() - start, 1)
    tail = (out + err).splitlines()[-30:]
    result.update(seconds=seconds, compile={"rc": rc, "output_tail": tail})
    if rc != 0:
        error = f"{' '.join(argv[:3])} exited {rc} after {seconds:g}s"
        if p["fail_on_error"]:
            module.fail_json(msg=f"{error}; last output: {' | '.join(tail[-10:])}", **result)
        module.warn(f"the kernel pre-compile failed ({error}); the start compiles its kernels itself")
        module.exit_json(**{**result, "error": error})

    document = marker_document(inputs, seconds, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    os.makedirs(p["cache_dir"], exist_ok=True)
    tmp = f"{marker}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(document, handle, sort_keys=True)
        handle.write("\n")
    user = dict(directives).get("User")
    if user:
        try:
            entry = pwd.getpwnam(user)
            os.chown(tmp, entry.pw_uid, entry.pw_gid)
        except (KeyError, OSError):
            pass
    os.chmod(tmp, 0o644)
    os.replace(tmp, marker)
    module.exit_json(**{**result, "changed": True, "built": True})


if __name__ == "__main__":
    main()
