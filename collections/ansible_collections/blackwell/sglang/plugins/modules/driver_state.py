#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: one read-only look at a host's NVIDIA driver stack (roles/nvidia_driver, roles/cuda_toolkit)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: driver_state
version_added: 0.3.0
short_description: Read the state of a host's NVIDIA driver and CUDA toolkit in one step (read-only)
description:
  - The host side of roles/nvidia_driver and roles/cuda_toolkit before they change anything, in one module run instead
    of one per question (each run costs a round trip to the host). The roles compare the answer with what they would
    write and run their changing tasks only when something differs.
  - Installed packages and their holds (C(dpkg-query)), files (existence, type, owner, group, mode, SHA-256 and text),
    systemd units (enabled, active), the loaded driver (C(nvidia-smi)), the kernel module installed for the running
    kernel (C(modinfo nvidia)), the loaded module's banner (C(/proc/driver/nvidia/version)), the Secure Boot state (its
    EFI variable), and C(nvcc --version) found on a given PATH.
  - Changes nothing; runs in check mode too.
options:
  packages:
    description:
      - Glob patterns (C(fnmatch)) of package names; the installed packages matching one are reported with their
        versions in RV(packages), the held ones among them in RV(held); both are empty without dpkg.
    type: list
    elements: str
    default: []
  files:
    description: Paths reported in RV(files) (links followed).
    type: list
    elements: path
    default: []
  units:
    description: systemd units reported in RV(units).
    type: list
    elements: str
    default: []
  driver:
    description: Also ask the NVIDIA driver, the kernel module and the firmware (RV(driver)).
    type: bool
    default: false
  nvcc_path:
    description: A PATH on which C(nvcc) is looked up and run with C(--version) (RV(nvcc)); empty, nvcc is not run.
    type: str
    default: ""
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the driver's state
  blackwell.sglang.driver_state:
    packages: [nvidia-*, libnvidia-*, python3-debian]
    files: [/etc/apt/preferences.d/nvidia-driver]
    units: [nvidia-persistenced.service]
    driver: true
  register: driver

- name: Read the toolkit's state
  blackwell.sglang.driver_state:
    packages: [cuda-*, "libcu*"]
    nvcc_path: /usr/local/cuda-13.0/bin:/usr/bin:/bin
  register: toolkit
"""

RETURN = r"""
packages:
  description: The installed packages matching O(packages), name to version.
  type: dict
  returned: always
held:
  description: Those of RV(packages) whose dpkg selection is C(hold), sorted.
  type: list
  elements: str
  returned: always
files:
  description:
    - Per path of O(files), C(exists), C(type) (C(file), C(directory) or C(other); null when missing), C(owner),
      C(group), C(mode) (four octal digits, e.g. C("0644")), C(sha256) (files) and C(content) (files up to 64 KiB
      that are UTF-8 text; null otherwise).
  type: dict
  returned: always
units:
  description: Per unit of O(units), C(enabled) (C(systemctl is-enabled) succeeds) and C(active) (C(systemctl is-active) does).
  type: dict
  returned: always
driver:
  description:
    - With O(driver), C(smi_rc) (exit code of C(nvidia-smi --query-gpu=driver_version --format=csv,noheader); 127 when
      it is missing; 9 when no driver is loaded), C(versions) (the distinct versions it printed when it answered),
      C(smi_output) (its first two lines of output), C(module_license) and C(module_version) (C(modinfo nvidia);
      empty when no module is installed), C(banner) (C(/proc/driver/nvidia/version), null when absent) and
      C(secure_boot) (true or false from the EFI variable C(SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c), null
      without one). Empty without O(driver).
  type: dict
  returned: always
nvcc:
  description: With O(nvcc_path), C(rc) (127 when nvcc is not on it), C(stdout) and C(stderr) of C(nvcc --version). Empty otherwise.
  type: dict
  returned: always
"""

import fnmatch
import grp
import hashlib
import os
import pwd
import shutil
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule

SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
PROC_VERSION = "/proc/driver/nvidia/version"
SMI_QUERY = ["--query-gpu=driver_version", "--format=csv,noheader"]
TEXT_LIMIT = 64 * 1024
# dpkg states in which a package counts as installed (as package_facts reports it): all but these.
NOT_INSTALLED = {"not-installed", "config-files"}


def run(module: AnsibleModule, argv: list[str]) -> tuple[int, str, str]:
    """``argv`` run on the host (its program looked up on PATH and in the sbin directories); 127 when not found."""
    program = argv[0] if os.path.isabs(argv[0]) else module.get_bin_path(argv[0])
    if program is None or not os.access(program, os.X_OK):
        return 127, "", f"{argv[0]}: not found"
    return module.run_command([program, *argv[1:]])


def parse_dpkg(output: str, patterns: list[str]) -> tuple[dict[str, str], list[str]]:
    """``dpkg-query -W -f='${db:Status-Want} ${db:Status-Status} ${Package} ${Version}\\n'`` -> (installed, held)."""
    installed: dict[str, str] = {}
    held: set[str] = set()
    for line in output.splitlines():
        fields = line.split()
        if len(fields) != 4 or fields[1] in NOT_INSTALLED:
            continue
        want, _status, name, version = fields
        if name in installed or not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        installed[name] = version
        if want == "hold":
            held.add(name)
    return installed, sorted(held)


def file_state(path: str) -> dict[str, Any]:
    """What the roles compare of a file with what they would write."""
    try:
        info = os.stat(path)
    except OSError:
        return {"exists": False, "type": None, "owner": None, "group": None, "mode": None, "sha256": None, "content": None}
    kind = "file" if stat.S_ISREG(info.st_mode) else "directory" if stat.S_ISDIR(info.st_mode) else "other"
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    digest = content = None
    if kind == "file":
        with open(path, "rb") as handle:
            data = handle.read()
        digest = hashlib.sha256(data).hexdigest()
        if len(data) <= TEXT_LIMIT:
            try:
                content = data.decode("utf-8")
            except UnicodeDecodeError:
                content = None
    return {"exists": True, "type": kind, "owner": owner, "group": group, "mode": f"{stat.S_IMODE(info.st_mode):04o}",
            "sha256": digest, "content": content}


def modinfo_field(output: str, field: str) -> str:
    """The first ``field:`` line of ``modinfo`` output, its value trimmed; empty when none."""
    for line in output.splitlines():
        if line.startswith(f"{field}:"):
            return line.split(":", 1)[1].strip()
    return ""


def secure_boot() -> bool | None:
    """The EFI variable's value byte (after its 4 bytes of attributes): 1 is on; null without the variable."""
    try:
        with open(SECURE_BOOT_VAR, "rb") as handle:
            data = handle.read(5)
    except OSError:
        return None
    return len(data) == 5 and data[4] == 1


def driver_state(module: AnsibleModule) -> dict[str, Any]:
    """The loaded driver, the installed kernel module, its banner and Secure Boot."""
    rc, out, err = run(module, ["nvidia-smi", *SMI_QUERY])
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    versions = sorted(set(lines)) if rc == 0 else []
    modinfo_rc, modinfo = run(module, ["modinfo", "nvidia"])[:2]
    try:
        with open(PROC_VERSION, encoding="utf-8", errors="replace") as handle:
            banner: str | None = handle.read()
    except OSError:
        banner = None
    return {"smi_rc": rc, "versions": versions, "smi_output": (out + err).strip().splitlines()[:2],
            "module_license": modinfo_field(modinfo, "license") if modinfo_rc == 0 else "",
            "module_version": modinfo_field(modinfo, "version") if modinfo_rc == 0 else "",
            "banner": banner, "secure_boot": secure_boot()}


def nvcc_state(module: AnsibleModule, path: str) -> dict[str, Any]:
    """``nvcc --version`` as found on ``path``."""
    nvcc = shutil.which("nvcc", path=path)
    if nvcc is None:
        return {"rc": 127, "stdout": "", "stderr": f"nvcc: not found on {path}"}
    rc, out, err = run(module, [nvcc, "--version"])
    return {"rc": rc, "stdout": out, "stderr": err}


def unit_state(module: AnsibleModule, unit: str) -> dict[str, bool]:
    """Whether ``unit`` is enabled and active, as ``systemctl is-enabled`` and ``is-active`` answer."""
    return {"enabled": run(module, ["systemctl", "is-enabled", unit])[0] == 0,
            "active": run(module, ["systemctl", "is-active", unit])[0] == 0}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "str", "default": []},
            "files": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "driver": {"type": "bool", "default": False},
            "nvcc_path": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    packages: dict[str, str] = {}
    held: list[str] = []
    if params["packages"]:
        rc, out, err = run(module, ["dpkg-query", "-W", "-f=${db:Status-Want} ${db:Status-Status} ${Package} ${Version}\n"])
        if rc not in (0, 127):
            module.fail_json(msg=f"dpkg-query failed ({rc}): {err.strip()}")
        packages, held = parse_dpkg(out, params["packages"])
    module.exit_json(
        changed=False, packages=packages, held=held,
        files={path: file_state(path) for path in params["files"]},
        units={unit: unit_state(module, unit) for unit in params["units"]},
        driver=driver_state(module) if params["driver"] else {},
        nvcc=nvcc_state(module, params["nvcc_path"]) if params["nvcc_path"] else {},
    )


if __name__ == "__main__":
    main()
