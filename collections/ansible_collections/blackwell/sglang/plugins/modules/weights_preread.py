#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: read a host's staged model weights into the page cache before a restart, when they fit."""

from __future__ import annotations

DOCUMENTATION = r"""
module: weights_preread
version_added: 0.3.0
short_description: Read the staged model weights into the page cache before a server restart, when they fit in memory
description:
  - Before the stop of a restart, reads the weight files of the model directories in O(paths) into the host's page
    cache, so that the new server's load after the start reads memory instead of the disk. A checkpoint of hundreds of
    GB read at disk speed is most of a minute of downtime per restart; read before the stop it costs no downtime.
  - First measures, for every weight file, how much of it is already in the page cache (C(mincore) on a read-only
    mapping, which reads nothing), then reads only the windows that are not resident, in O(parallelism) threads with
    C(posix_fadvise) readahead hints (C(SEQUENTIAL), C(WILLNEED)), then measures again.
  - The weight files are those SGLang's loader reads from a model directory, at its top level only, the first of
    O(patterns) that names a file (C(*.safetensors), else C(*.bin), else C(*.pt)); with a
    C(model.safetensors.index.json), only the safetensors files it maps weights to. Several instances of one model list
    its directory several times (or through links), it is read once; a file reached twice (a hard link) too.
  - The memory rule of O(mode=auto) reads when the bytes not resident fit in the host's C(MemAvailable) (C(/proc/meminfo))
    minus the checkpoint's bytes already resident (C(MemAvailable) counts clean page cache as available, and reading
    must not evict the checkpoint's own pages) minus the margin, the larger of O(margin_gib) and O(margin_percent) of
    C(MemTotal). Otherwise it reads nothing and says why in RV(skip_reason), with the figures. The whole set of
    O(paths) is one decision.
  - It never touches a GPU, never locks memory (no C(mlock)) and writes nothing. The page cache it fills is ordinary
    clean cache, charged to the module's own control group (not the server unit's, whose memory limits it therefore
    does not count against), and the kernel reclaims it under memory pressure like any other cache. The running
    server is not signalled or slowed beyond the disk reads themselves.
  - The module reports C(changed=false). It changes no state an operator manages (no file, unit or setting); the page
    cache is the kernel's and a second run only finds the pages resident.
  - The module is safe with untrusted O(paths). Every entry must be an absolute path without C(..) components naming a
    directory, and a weight file that is a symbolic link must resolve inside that directory. Anything else is refused,
    the message naming the option entry (e.g. C(paths[1])). Only regular files are opened, read-only.
  - Not for unified-memory hosts (GB10, where the GPU's memory is the host's RAM and page cache competes with the
    model's own allocation); use O(mode=never) there.
options:
  paths:
    description:
      - The model directories of the host's instances to restart (the C(--model-path) of each that is a local
        directory). Duplicates are read once.
    type: list
    elements: str
    required: true
  mode:
    description:
      - V(auto) reads the weights not yet resident when they fit in memory (see the memory rule above), V(always)
        reads them regardless of memory, V(never) only measures their residency.
    type: str
    choices: [auto, always, never]
    default: auto
  margin_gib:
    description:
      - Memory, in GiB, that O(mode=auto) keeps free beyond the checkpoint (with O(margin_percent), the larger applies).
      - The default 8 GiB covers the starting server's own host memory on a small host (the Python runtime, torch and a
        CUDA context per rank, a few GiB) and the rest of the host's working set.
    type: float
    default: 8
  margin_percent:
    description:
      - Memory, in percent of C(MemTotal), that O(mode=auto) keeps free beyond the checkpoint (with O(margin_gib), the
        larger applies).
      - The default 10 scales with large hosts, whose servers hold more host memory (pinned buffers, a host KV cache
        tier) on top of the checkpoint; on a 2 TiB host it keeps about 205 GiB free.
    type: float
    default: 10
  parallelism:
    description:
      - Reader threads. Several reads in flight keep an NVMe device or a RAID of them busy; use 1 for a single
        rotating disk.
    type: int
    default: 8
  patterns:
    description:
      - Shell patterns of the weight file names, tried in order; the first that names a file in a directory selects that
        directory's weight files.
    type: list
    elements: str
    default: ['*.safetensors', '*.bin', '*.pt']
  timeout:
    description:
      - Seconds after which the threads take no further window to read (the windows in flight finish); V(0) for no
        limit. The result then has RV(timed_out) set and the bytes read so far.
    type: float
    default: 0
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Measures the residency and applies the memory rule, reads nothing; RV(preread) says whether it would read.
  diff_mode:
    support: N/A
    details: The module changes no managed state.
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the staged weights into the page cache before the stop, when they fit
  blackwell.sglang.weights_preread:
    paths:
      - /opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4
  register: preread

- name: Show what it did
  ansible.builtin.debug:
    msg: >-
      {{ preread.bytes_read | human_readable }} read in {{ preread.read_seconds }} s,
      {{ preread.resident_percent_after }} % resident{{ (', skipped: ' ~ preread.skip_reason) if preread.skip_reason else '' }}

- name: Two instances of one model and one of another, on a host with little free memory to spare
  blackwell.sglang.weights_preread:
    paths:
      - /opt/sglang/models/org/chat-model
      - /opt/sglang/models/org/chat-model
      - /opt/sglang/models/org/code-model
    margin_gib: 32
    parallelism: 16
    timeout: 600
"""

RETURN = r"""
paths:
  description: The model directories measured (real paths, each once).
  type: list
  elements: str
  returned: always
mode:
  description: The mode applied.
  type: str
  returned: always
files:
  description: Number of weight files (each once).
  type: int
  returned: always
bytes_total:
  description: Bytes of the weight files.
  type: int
  returned: always
bytes_resident_before:
  description: Bytes of the weight files in the page cache before the read (measured).
  type: int
  returned: always
bytes_to_read:
  description: Bytes not in the page cache before the read (RV(bytes_total) minus RV(bytes_resident_before)).
  type: int
  returned: always
bytes_read:
  description:
    - Bytes read from the files (whole windows of 64 MiB whose pages were not all resident, so it can exceed
      RV(bytes_to_read) a little); 0 when skipped and in check mode.
  type: int
  returned: always
bytes_resident_after:
  description: Bytes in the page cache after the read (measured again; the value before in check mode or when skipped).
  type: int
  returned: always
resident_percent_before:
  description: RV(bytes_resident_before) in percent of RV(bytes_total) (100 without weight files).
  type: float
  returned: always
resident_percent_after:
  description: RV(bytes_resident_after) in percent of RV(bytes_total).
  type: float
  returned: always
preread:
  description: Whether it read (in check mode, whether it would).
  type: bool
  returned: always
skip_reason:
  description:
    - Why it did not read, or null; e.g. C(does not fit) with the bytes needed, C(MemAvailable), the resident bytes and
      the margin, C(already resident), C(mode is never), C(no weight files).
  type: str
  returned: always
mem_available:
  description: C(MemAvailable) of C(/proc/meminfo) before the read, bytes.
  type: int
  returned: always
mem_total:
  description: C(MemTotal) of C(/proc/meminfo), bytes.
  type: int
  returned: always
margin:
  description: The margin applied, bytes.
  type: int
  returned: always
seconds:
  description: Wall time of the whole module run (measurements included), seconds.
  type: float
  returned: always
measure_seconds:
  description: Time of the residency measurement before the read, seconds.
  type: float
  returned: always
read_seconds:
  description: Time of the read, seconds (0 when it did not read).
  type: float
  returned: always
timed_out:
  description: Whether O(timeout) stopped the read before every window was read.
  type: bool
  returned: always
errors:
  description: Files or windows that could not be read (the module does not fail for them; the server reads them).
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_preread import (
    MEMINFO,
    PREREAD_SPEC,
    PrereadError,
    run,
)


def main() -> None:
    module = AnsibleModule(argument_spec=PREREAD_SPEC, supports_check_mode=True)
    try:
        with open(MEMINFO, encoding="ascii") as handle:
            text = handle.read()
        result = run(module.params, module.check_mode, text)
    except PrereadError as exc:
        module.fail_json(msg=str(exc), changed=False)
        return
    except OSError as exc:
        module.fail_json(msg=f"cannot measure the weights: {exc}", changed=False)
        return
    for error in result["errors"]:
        module.warn(f"weights_preread: {error}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
