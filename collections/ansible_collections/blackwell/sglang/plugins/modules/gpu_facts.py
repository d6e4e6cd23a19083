#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: gather a host's NVIDIA GPU facts (GPUs, topology, IOMMU, NVSwitch, OS, Python, compiler) in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
version_added: 0.1.0
short_description: Gather the host's NVIDIA GPU facts into C(nvidia_gpu_facts)
description:
  - >-
    Runs C(nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,compute_cap,memory.total,persistence_mode --format=csv,noheader,nounits),
    C(nvidia-smi --version), C(nvidia-smi topo -m) and C(nvidia-smi topo -p2p r), reads
    C(/proc/driver/nvidia/gpus/<bus id>/information) (device minor), C(/sys/bus/pci/devices) (IOMMU mode of the GPUs,
    NVSwitch PCI functions: vendor C(0x10de), class C(0x0680xx)), the device nodes under C(/dev)
    (C(/dev/nvidia-nvswitch<N>), C(/dev/infiniband/*), C(/dev/nvidia-caps-imex-channels/channel<N>)) and C(/etc/os-release),
    runs O(python) once to learn its version and whether C(Python.h) is installed, and looks for C(cc), then C(gcc), on PATH.
  - >-
    Returns everything as the fact C(nvidia_gpu_facts); every key is always present (null, empty or false when unknown).
  - >-
    When nvidia-smi is missing or exits non-zero (exit 9, "couldn't communicate with the NVIDIA driver", when the
    driver is not loaded), C(driver_loaded) is false, C(gpus) is empty and C(topology) is empty, but the PCI scan still
    reports C(nvswitch_pci), so a play can decide about the fabric manager before the driver is installed.
  - >-
    Read-only; never reports a change; safe in check mode.
options:
  python:
    description:
      - >-
        The Python interpreter SGLang's virtualenv is built from (an absolute path, or a name looked up on PATH).
        C(python) in the result is null when it is not found or does not run.
    type: str
    default: python3
  nvidia_smi:
    description: nvidia-smi to run (an absolute path, or a name looked up on PATH).
    type: str
    default: nvidia-smi
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Gather the NVIDIA GPU facts
  blackwell.sglang.gpu_facts:
    python: /usr/bin/python3

- name: Show the GPU count and the NVLink state
  ansible.builtin.debug:
    msg: "{{ nvidia_gpu_facts.gpu_count }} GPUs, NVLink {{ nvidia_gpu_facts.topology.nvlink }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts gathered.
  returned: always
  type: dict
  contains:
    nvidia_gpu_facts:
      description:
        - >-
          C(schema) (1); C(driver_loaded) (nvidia-smi ran and answered); C(driver_version) and C(cuda_version) (strings or null).
        - >-
          C(gpus), in nvidia-smi index order, each with C(index), C(uuid), C(bus_id) (C(0000:18:00.0): 4-hex-digit
          domain, lower case), C(minor) (C(Device Minor) of the driver's information file, or null), C(name),
          C(compute_capability) (string as nvidia-smi prints it) and C(memory_mib) (int, or null when nvidia-smi
          prints C([N/A]) or C([Not Supported]), as on GB10's unified memory) and C(persistence) (persistence mode on:
          true, false, or null when not reported); C(gpu_count); C(compute_capabilities)
          (distinct, sorted numerically).
        - >-
          C(topology) with C(links) (C("i,j") with i < j, nvidia-smi indexes, to PIX, PXB, PHB, NODE, SYS or NV<n>),
          C(p2p_read) (C("i,j") to OK, NS, CNS, GNS, TNS, DR or U) and C(nvlink) (some link is NV<n>).
        - >-
          C(iommu) (off, passthrough or translated, from the GPUs' C(iommu_group/type); null when no NVIDIA GPU is on
          the PCI bus); C(nvswitch_pci); C(nvswitch_devices); C(infiniband_devices); C(imex_channels).
        - >-
          C(os) (C(id), C(version_id), C(codename)); C(python) (C(path), C(version), C(headers)) or null;
          C(compilers) (C(cc): the first of cc, gcc on PATH, or null).
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_gpu_facts import DEFAULT_PYTHON, gather


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "python": {"type": "str", "default": DEFAULT_PYTHON},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        supports_check_mode=True,
    )
    facts = gather(module, module.params["python"], module.params["nvidia_smi"])
    module.exit_json(changed=False, ansible_facts={"nvidia_gpu_facts": facts})


if __name__ == "__main__":
    main()
