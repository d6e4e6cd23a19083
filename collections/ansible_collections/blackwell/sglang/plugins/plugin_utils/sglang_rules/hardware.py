# SPDX-License-Identifier: Apache-2.0
"""The host's gathered GPU facts: the weights against the GPUs' memory, and the links between the instance's GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import combinations
from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import _int
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import gpu_memory_mib, instance_gpus

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("hardware.fit",
      stricter=("SGLang loads the weights before it finds out they do not fit the GPUs (an out-of-memory error after minutes)"))
def _fit(ctx: Context, report: Report) -> None:
    """The checkpoint's weights, split over tp_size x pp_size GPUs, must fit each GPU's memory share.

    SGLang loads the weights first and only then finds out (an out-of-memory error after minutes); the
    table's weight_bytes is a lower bound and, without mem_fraction_static, the share is the whole GPU, so
    this never refuses what fits.
    """
    weights, (mib, source) = ctx.model.weight_bytes, gpu_memory_mib(ctx)
    tp, pp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1)
    if not weights or mib is None or tp < 1 or pp < 1:
        return
    frac = ctx.args.get("mem_fraction_static")
    frac = frac if isinstance(frac, (int, float)) and not isinstance(frac, bool) and 0 < frac < 1 else None
    usable = mib * 2**20 * (frac or 1.0)
    per_gpu = weights / (tp * pp)
    if per_gpu <= usable:
        return
    gib = 2**30
    need = -(-weights // int(usable))  # GPUs' worth of memory the weights need at this share
    shares = f"mem_fraction_static={frac} of {mib} MiB" if frac else f"all of its {mib} MiB"
    ctx.error("hardware.fit", "tp_size",
              f"{ctx.model.path}: at least {weights / gib:.0f} GiB of weights over tp_size={tp} x pp_size={pp} is "
              f"{per_gpu / gib:.1f} GiB per GPU, more than {usable / gib:.1f} GiB ({shares}; memory from {source}). "
              "SGLang would run out of memory loading them, minutes into the start.",
              f"spread the weights over at least {need} GPUs (tp_size x pp_size >= {need}), serve a quantized checkpoint "
              "(FP8 halves and NVFP4 quarters bf16 weights)" + (", or raise mem_fraction_static" if frac else ""),
              value=tp)


def nccl_flag(env: Mapping[str, str], name: str) -> bool:
    """True when NCCL reads ``name`` as on: it parses the value as an integer (strtol), so "1" is on and "true" is 0."""
    value = env.get(name, "").strip()
    return bool(re.fullmatch(r"[+-]?\d+", value)) and int(value) != 0


def _tp_groups(ctx: Context) -> list[list[int]]:
    """The instance's GPUs on this node, grouped by the TP group whose all-reduce they share (tp fastest)."""
    ids = instance_gpus(ctx)
    tp, pp, nnodes = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), max(_int(ctx, "nnodes", 1), 1)
    size = min(tp, max(tp * pp // nnodes, 1))
    return [ids[k:k + size] for k in range(0, len(ids), size)] if size > 1 else []


@rule("host.p2p", ids=("host.iommu", "host.p2p"), sources=(
    "sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py:487-507",
))
def _p2p(ctx: Context, report: Report) -> None:
    """PCIe peer-to-peer between the GPUs of a TP group, from the facts (nvidia-smi topo -m / -p2p r, the IOMMU)."""
    if ctx.facts is None or _int(ctx, "tp_size", 1) < 2:
        return
    topology = ctx.facts.get("topology") if isinstance(ctx.facts.get("topology"), Mapping) else {}
    links = topology.get("links") if isinstance(topology.get("links"), Mapping) else {}
    p2p = topology.get("p2p_read") if isinstance(topology.get("p2p_read"), Mapping) else {}
    pcie, no_p2p = [], []
    for group in _tp_groups(ctx):
        for a, b in combinations(sorted(set(group)), 2):
            key = f"{a},{b}"
            link = links.get(key)
            if link is None or str(link).startswith("NV"):
                continue  # NVLink, or not in the facts
            pcie.append(f"GPU{a}-GPU{b} {link}")
            if key in p2p and str(p2p[key]) != "OK":
                no_p2p.append(f"GPU{a}-GPU{b} {p2p[key]}")
    if pcie and ctx.facts.get("iommu") == "translated" and not nccl_flag(ctx.env, "NCCL_P2P_DISABLE"):
        ctx.error("host.iommu", "sglang_env.NCCL_P2P_DISABLE",
                  f"the GPUs of a TP group talk over PCIe ({', '.join(pcie[:4])}{' ...' if len(pcie) > 4 else ''}) and the "
                  "host's IOMMU translates DMA (nvidia_gpu_facts.iommu: translated). NCCL's PCIe peer-to-peer then hangs at "
                  "the first all-reduce, and the server sits there until the whole ready timeout runs out. Stricter than "
                  "SGLang, which does not look at the IOMMU.",
                  "set sglang_env.NCCL_P2P_DISABLE: \"1\" (NCCL goes through host memory), or put the IOMMU in "
                  "passthrough (iommu=pt on the kernel command line) and gather the facts again",
                  value=ctx.env.get("NCCL_P2P_DISABLE"))
    if no_p2p and not ctx.is_set("disable_custom_all_reduce"):
        ctx.warn("host.p2p", "disable_custom_all_reduce",
                 f"nvidia-smi topo -p2p r reports no peer-to-peer reads between GPUs of a TP group ({', '.join(no_p2p[:4])}"
                 f"{' ...' if len(no_p2p) > 4 else ''}). SGLang's custom all-reduce needs P2P: it tests it at start and "
                 "falls back to NCCL with a warning (on more than two PCIe-only GPUs it is off anyway).",
                 "set sglang_args.disable_custom_all_reduce: true to say so and skip the test",
                 "sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py:487-507")
