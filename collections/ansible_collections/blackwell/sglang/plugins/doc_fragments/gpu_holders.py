# SPDX-License-Identifier: Apache-2.0
"""The options of the GPU-holder scan that blackwell.sglang.gpu_holders and blackwell.sglang.server_restart share."""

from __future__ import annotations


class ModuleDocFragment:
    """module_utils/sglang_gpu_holders.py HOLDER_OPTIONS, documented once."""

    DOCUMENTATION = r"""
options:
  devices:
    description: Device files (globs) to consider.
    type: list
    elements: str
    default: ["/dev/nvidia*"]
  owner_user:
    description: User the service runs as; its processes are the service's.
    type: str
  sibling_units:
    description: systemd units of the other SGLang instances of the host; processes in their cgroups are never touched.
    type: list
    elements: str
    default: []
  owner_devices:
    description:
      - The GPU device files of this instance (e.g. C(/dev/nvidia4)). When given, a process outside the unit's cgroup is
        the instance's (or a foreign holder in its way) only when it holds one of them.
    type: list
    elements: str
    default: []
  foreign_fails:
    description: Fail when a foreign holder is found (and O(kill_foreign) is false).
    type: bool
    default: true
  title_prefixes:
    description: Process titles (first word of the command line) that mark the service's processes.
    type: list
    elements: str
    default: ["sglang::"]
  allow:
    description: Process names never touched (compared with the kernel's 15-character name and the executable's name).
    type: list
    elements: str
    default: [nvidia-persistenced, nv-hostengine, dcgm-exporter, nvidia-fabricmanager]
  kill_foreign:
    description: Also terminate foreign holders instead of failing.
    type: bool
    default: false
  term_timeout:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 10
  wait_timeout:
    description: Seconds to wait, after the kills, for the devices, the port and nvidia-smi to be clear.
    type: float
    default: 60
  port:
    description: TCP port that must not be listening any more (the server's HTTP port).
    type: int
  nvidia_smi:
    description: Path of nvidia-smi for the compute-apps check; skipped when not installed.
    type: str
    default: nvidia-smi
"""
