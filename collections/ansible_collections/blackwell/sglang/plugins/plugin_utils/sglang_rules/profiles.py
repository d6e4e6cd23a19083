# SPDX-License-Identifier: Apache-2.0
"""Hardware profiles: what each compute capability runs.

One profile per GPU architecture SGLang 0.5.23 tells apart (get_platform().is_sm90 / is_sm100 / is_sm110 /
is_sm120 / is_blackwell: sglang/srt/utils/common.py:289-335 match on the MAJOR only, so 10.3 is "sm100" and
12.1 is "sm120").  Each entry says what that architecture refuses and where SGLang refuses it; an entry
without a source is stricter than SGLang (it fails only at run time) and its reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@dataclass(frozen=True)
class Refusal:
    """Why an architecture cannot run a backend or format; ``source`` is SGLang's own check, if any."""

    why: str
    source: str | None = None


@dataclass(frozen=True)
class ArchProfile:
    """The hardware rules of one compute-capability family; ``family`` prefixes the rule ids."""

    family: str
    gpus: str
    attention: Mapping[str, Refusal]  # text attention backends (attention, prefill, decode, draft)
    mla_attention: Mapping[str, Refusal]  # refused only for MLA models (DeepSeek)
    hybrid_attention: tuple[str, ...] | None  # full-attention backends hybrid GDN models may use; None: any
    mm_attention: Mapping[str, Refusal]  # the vision encoder's mm_attention_backend
    moe_runners: Mapping[str, Refusal]
    kv_cache: Mapping[str, Refusal]
    trtllm_mha_fp8_kv: bool = False  # TRTLLM FMHAv2 prefill (SM120) has no fp8_e4m3 KV cache
    trtllm_mha_cp: bool = False  # trtllm_mha prefill with attn_cp_size > 1 needs SM100's context kernel
    nvfp4_moe_explicit: bool = False  # NVFP4 MoE checkpoints need quantization modelopt_fp4 (or flashinfer_cutlass)
    sm100: bool = False  # datacenter Blackwell SM100/SM103 (get_platform().is_sm100)
    # FlashInfer's linear-attention (GDN) decode/verify kernels on SM100+ (major >= 10) keep a bf16 state.
    linear_flashinfer_bf16: bool = False


_REG = "sglang/srt/layers/attention/attention_registry.py"


_NON_NVIDIA = {
    "aiter": Refusal("aiter is AMD ROCm only"),
    "wave": Refusal("wave is AMD ROCm only"),
    "ascend": Refusal("ascend is Huawei Ascend NPU only"),
    "intel_amx": Refusal("intel_amx is a CPU backend"),
    "intel_xpu": Refusal("intel_xpu is an Intel GPU backend"),
}


_FA3 = Refusal("FlashAttention 3 runs on SM80 (non-MLA models) and SM90 only; SGLang asserts it when it builds the "
               "backend, after loading the weights", f"{_REG}:241-246")


_FA3_MLA = Refusal("FlashAttention 3 on SM80/SM86/SM89 serves non-MLA models only; SGLang asserts it when it builds "
                   "the backend, after loading the weights", f"{_REG}:241-246")


_HPC_OPS = Refusal("the hpc_ops kernels ship for SM90 (Hopper) only; SGLang refuses other GPUs when it builds the backend",
                   "sglang/srt/layers/attention/hpc_ops_backend.py:138-143")


_TRTLLM_MHA = Refusal("the TRTLLM MHA backend runs on SM90, SM100 and SM120 only",
                      "sglang/srt/arg_groups/attention_hook.py:200-225")


_TRTLLM_MLA = Refusal("the TRTLLM MLA backend runs on Blackwell only", "sglang/srt/arg_groups/overrides.py:1210-1213")


_TRTLLM_MLA_SM12X = Refusal("TensorRT-LLM MLA kernels are SM100-only (stricter than SGLang, which lets SM12x through "
                            "at start-up: the kernels then fail at run time)")


_CUTEDSL_MLA = Refusal("the CuTe-DSL MLA kernels target datacenter Blackwell (SM100) only",
                       "sglang/srt/arg_groups/overrides.py:1244-1247")


_FLASHMLA = Refusal("FlashMLA supports SM90/SM100 only (stricter than SGLang, which fails at run time)")


_MM_FA3 = Refusal("the vision encoder's FlashAttention 3 does not run on Blackwell",
                  "sglang/srt/layers/attention/vision.py:1330-1331")


_MM_NON_NVIDIA = {
    "aiter_attn": Refusal("aiter_attn is AMD ROCm only"),
    "ascend_attn": Refusal("ascend_attn is Huawei Ascend NPU only"),
    "amx_attn": Refusal("amx_attn is a CPU backend"),
    "xpu_attn": Refusal("xpu_attn is an Intel GPU backend"),
}


_TRTLLM_MOE = Refusal("uses TensorRT-LLM (trtllm-gen) MoE kernels built for datacenter Blackwell (SM100) only "
                      "(SGLang says so where it picks a runner, sglang/srt/arg_groups/overrides.py:1513-1522, but "
                      "lets an explicit choice through: stricter, it fails at run time)")


_MOE_SM100 = dict.fromkeys(("flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm"), _TRTLLM_MOE)


_MOE_NON_NVIDIA = {"aiter": Refusal("aiter is AMD ROCm only"), "intel_xpu": Refusal("intel_xpu is an Intel GPU backend")}


_KV = "sglang/srt/arg_groups/kv_cache_hook.py"


_KV_MXFP8 = Refusal("an MXFP8 KV cache needs Blackwell (SM100+) block-scaled operands", f"{_KV}:105-109")


_KV_NVFP4 = Refusal("an NVFP4 KV cache needs Blackwell SM100 or SM120", f"{_KV}:126-131")


# The hybrid GDN models' full-attention backends (sglang/srt/layers/attention/attention_registry.py:462-476).
HYBRID_SM12X_ATTENTION = ("triton", "trtllm_mha", "flashinfer")


HYBRID_SM100_ATTENTION = ("triton", "trtllm_mha", "fa4", "flashinfer")  # HYBRID_GDN_SM100_BACKENDS, :44


_SM8X = dict(
    attention={**_NON_NVIDIA, "hpc_ops": _HPC_OPS, "trtllm_mha": _TRTLLM_MHA, "trtllm_mla": _TRTLLM_MLA,
               "cutedsl_mla": _CUTEDSL_MLA, "flashmla": _FLASHMLA},
    mla_attention={"fa3": _FA3_MLA}, hybrid_attention=None, mm_attention=_MM_NON_NVIDIA,
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100}, kv_cache={"mxfp8": _KV_MXFP8, "nvfp4": _KV_NVFP4},
)


_SM8X_AMPERE = ArchProfile("sm8x", "Ampere (A100, A10, RTX 30)", **_SM8X)


_SM8X_ADA = ArchProfile("sm8x", "Ada (L40S, L4, RTX 40)", **_SM8X)


_SM90 = ArchProfile(
    "sm90", "Hopper (H100, H200, GH200)",
    attention={**_NON_NVIDIA, "trtllm_mla": _TRTLLM_MLA, "cutedsl_mla": _CUTEDSL_MLA},
    mla_attention={}, hybrid_attention=None, mm_attention=_MM_NON_NVIDIA,
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100}, kv_cache={"mxfp8": _KV_MXFP8, "nvfp4": _KV_NVFP4},
    trtllm_mha_cp=True,
)


_SM10X = ArchProfile(
    "sm10x", "datacenter Blackwell (B200, GB200, B300, GB300)",
    attention={**_NON_NVIDIA, "fa3": _FA3, "hpc_ops": _HPC_OPS},
    mla_attention={}, hybrid_attention=HYBRID_SM100_ATTENTION, mm_attention={**_MM_NON_NVIDIA, "fa3": _MM_FA3},
    moe_runners=_MOE_NON_NVIDIA, kv_cache={}, sm100=True, linear_flashinfer_bf16=True,
)


_SM110 = ArchProfile(
    "sm110", "Jetson Thor",
    attention={**_NON_NVIDIA, "fa3": _FA3, "hpc_ops": _HPC_OPS, "trtllm_mha": _TRTLLM_MHA, "cutedsl_mla": _CUTEDSL_MLA},
    mla_attention={}, hybrid_attention=HYBRID_SM100_ATTENTION, mm_attention={**_MM_NON_NVIDIA, "fa3": _MM_FA3},
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100}, kv_cache={"nvfp4": _KV_NVFP4}, nvfp4_moe_explicit=True,
    linear_flashinfer_bf16=True,
)


_SM12X = ArchProfile(
    "sm12x", "workstation Blackwell (RTX PRO 6000, RTX 50, GB10)",
    attention={**_NON_NVIDIA, "fa3": _FA3, "hpc_ops": _HPC_OPS, "cutedsl_mla": _CUTEDSL_MLA, "trtllm_mla": _TRTLLM_MLA_SM12X,
               "flashmla": _FLASHMLA},
    mla_attention={}, hybrid_attention=HYBRID_SM12X_ATTENTION, mm_attention={**_MM_NON_NVIDIA, "fa3": _MM_FA3},
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100,
                 "flashinfer_cutedsl": Refusal("starts, but produced garbage output on SM120 in the deployment that "
                                               "started this project (stricter than SGLang)")},
    kv_cache={}, trtllm_mha_fp8_kv=True, trtllm_mha_cp=True, nvfp4_moe_explicit=True, linear_flashinfer_bf16=True,
)


# Compute capability -> profile (nvidia-smi --query-gpu=compute_cap).
PROFILES: dict[tuple[int, int], ArchProfile] = {
    (8, 0): _SM8X_AMPERE, (8, 6): _SM8X_AMPERE, (8, 7): _SM8X_AMPERE, (8, 9): _SM8X_ADA,
    (9, 0): _SM90,
    (10, 0): _SM10X, (10, 3): _SM10X,
    (11, 0): _SM110,
    (12, 0): _SM12X, (12, 1): _SM12X,
}


# Quantization methods and the least capability (major * 10 + minor) SGLang loads them on: the loader refuses
# less (sglang/srt/model_loader/loader.py:254-265, after the model's config is read, before the weights).
_Q = "sglang/srt/layers/quantization"


QUANT_MIN_CAPABILITY: dict[str, tuple[int, str]] = {
    "modelopt": (89, f"{_Q}/modelopt_quant.py:462-463"),
    "modelopt_fp8": (89, f"{_Q}/modelopt_quant.py:462-463"),
    "w8a8_fp8": (89, f"{_Q}/w8a8_fp8.py:66-67"),
    "w4afp8": (90, f"{_Q}/w4afp8.py:70-71"),
    "petit_nvfp4": (90, f"{_Q}/petit.py:62-64"),
    "mxfp8": (100, f"{_Q}/fp8.py:329-339"),
    "nvfp4_online": (100, f"{_Q}/nvfp4_online.py:135-136"),
}


# --quantization nvfp4_online is for SM100/SM103 only (is_sm100: major 10).
NVFP4_ONLINE_SOURCE = "sglang/srt/arg_groups/overrides.py:1457-1461"


MIN_PROFILED = (8, 0)


def arch_profile(ctx: Context) -> ArchProfile | None:
    """The profile of the declared compute capability; None when it is not declared or has none."""
    return PROFILES.get(ctx.compute_capability) if ctx.compute_capability else None
