# SPDX-License-Identifier: Apache-2.0
"""What the validation rules need to know about a model, without downloading it.

A small table of well-known checkpoints (the reference model and a few common
ones) and of architectures.  Hosts serving anything else declare the facts
with ``sglang_model_architecture``, ``sglang_model_quantization`` and
``sglang_model_max_context``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ArchFacts:
    """Facts that follow from the architecture (``config.json`` ``architectures[0]``)."""

    family: str
    mla: bool = False
    hybrid_linear_attention: bool = False
    # What SGLang's _auto_choose_speculative_params picks: (num_steps, eagle_topk, num_draft_tokens).
    spec_auto: tuple[int, int, int] = (3, 1, 4)
    moe: bool = False  # mixture-of-experts layers (SGLang picks a MoE runner for them)
    # The language model's settings live under config.json "text_config" (vision-language checkpoints):
    # json_model_override_args must name them there (sglang/srt/utils/hf_transformers/common.py:547).
    text_config: bool = False


@dataclass(frozen=True)
class ModelFacts:
    """Everything the rules know about the served model."""

    architecture: str | None
    quantization: str | None  # checkpoint format: None (bf16/fp16), "nvfp4", "fp8", ...
    max_context: int | None
    known: bool  # False when nothing about the model is known
    family: str = "unknown"
    mla: bool = False
    hybrid_linear_attention: bool = False
    spec_auto: tuple[int, int, int] = (3, 1, 4)
    moe: bool | None = None  # None: the architecture is not in the table
    text_config: bool = False
    # The checkpoint's own rope_scaling (the keys SGLang's get_context_length reads); None when unknown.
    rope_scaling: dict[str, Any] | None = None
    path: str | None = None  # sglang_model_path, as the facts were looked up
    # A lower bound of the checkpoint's weight bytes (see WEIGHT_BYTES); None when unknown.
    weight_bytes: int | None = None
    # The checkpoint's quant_method as SGLang's ModelConfig reads it ("fp8", "modelopt_fp4", "modelopt_fp8"; ""
    # for an unquantized checkpoint); None when not known for certain (see QUANT_METHODS).
    quant_method: str | None = None
    # The checkpoint's own architecture where json_model_override_args names another (sglang_rules.base.
    # model_after_overrides); None when no override changes it (``architecture`` is the checkpoint's).
    checkpoint_architecture: str | None = None


# sglang/srt/arg_groups/speculative_hook.py _auto_choose_speculative_params (0.5.23):
# Llama and Grok get (5, 4, 8); everything else, STANDALONE included, (3, 1, 4).
ARCHITECTURES: dict[str, ArchFacts] = {
    "Qwen3_5MoeForConditionalGeneration": ArchFacts("qwen3.5", hybrid_linear_attention=True, moe=True, text_config=True),
    "Qwen3_5ForConditionalGeneration": ArchFacts("qwen3.5", hybrid_linear_attention=True, text_config=True),
    "Qwen3_5MoeForCausalLM": ArchFacts("qwen3.5", hybrid_linear_attention=True, moe=True),
    "Qwen3_5ForCausalLM": ArchFacts("qwen3.5", hybrid_linear_attention=True),
    "Qwen3NextForCausalLM": ArchFacts("qwen3-next", hybrid_linear_attention=True, moe=True),
    "Qwen3MoeForCausalLM": ArchFacts("qwen3", moe=True),
    "Qwen3ForCausalLM": ArchFacts("qwen3"),
    "DeepseekV3ForCausalLM": ArchFacts("deepseek-v3", mla=True, moe=True),
    "DeepseekV32ForCausalLM": ArchFacts("deepseek-v3.2", mla=True, moe=True),
    "DeepseekV2ForCausalLM": ArchFacts("deepseek-v2", mla=True, moe=True),
    "LlamaForCausalLM": ArchFacts("llama", spec_auto=(5, 4, 8)),
    "Grok1ForCausalLM": ArchFacts("grok", spec_auto=(5, 4, 8), moe=True),
    "GptOssForCausalLM": ArchFacts("gpt-oss", moe=True),
}

# rope_scaling of the checkpoints' config.json (text_config for Qwen3.5), as far as SGLang's context
# length reads it: "original_max_position_embeddings" or rope_type "llama3" keep the factor out of it.
_ROPE_NONE: dict[str, Any] = {}
_ROPE_LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
_ROPE_DEEPSEEK_V3 = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}

# Checkpoints by Hugging Face id: (architecture, checkpoint quantization, max context, rope_scaling).
CHECKPOINTS: dict[str, tuple[str, str | None, int, dict[str, Any]]] = {
    "nvidia/Qwen3.5-397B-A17B-NVFP4": ("Qwen3_5MoeForConditionalGeneration", "nvfp4", 262144, _ROPE_NONE),
    "Qwen/Qwen3.5-397B-A17B": ("Qwen3_5MoeForConditionalGeneration", None, 262144, _ROPE_NONE),
    "Qwen/Qwen3.5-397B-A17B-FP8": ("Qwen3_5MoeForConditionalGeneration", "fp8", 262144, _ROPE_NONE),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": ("Qwen3NextForCausalLM", None, 262144, _ROPE_NONE),
    "Qwen/Qwen3-Next-80B-A3B-Thinking": ("Qwen3NextForCausalLM", None, 262144, _ROPE_NONE),
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": ("Qwen3NextForCausalLM", "fp8", 262144, _ROPE_NONE),
    "nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4": ("Qwen3NextForCausalLM", "nvfp4", 262144, _ROPE_NONE),
    "deepseek-ai/DeepSeek-V3": ("DeepseekV3ForCausalLM", "fp8", 163840, _ROPE_DEEPSEEK_V3),
    "deepseek-ai/DeepSeek-V3-0324": ("DeepseekV3ForCausalLM", "fp8", 163840, _ROPE_DEEPSEEK_V3),
    "deepseek-ai/DeepSeek-R1": ("DeepseekV3ForCausalLM", "fp8", 163840, _ROPE_DEEPSEEK_V3),
    "deepseek-ai/DeepSeek-R1-0528": ("DeepseekV3ForCausalLM", "fp8", 163840, _ROPE_DEEPSEEK_V3),
    "nvidia/DeepSeek-V3-0324-FP4": ("DeepseekV3ForCausalLM", "nvfp4", 163840, _ROPE_DEEPSEEK_V3),
    "nvidia/DeepSeek-R1-0528-FP4": ("DeepseekV3ForCausalLM", "nvfp4", 163840, _ROPE_DEEPSEEK_V3),
    "meta-llama/Llama-3.1-8B-Instruct": ("LlamaForCausalLM", None, 131072, _ROPE_LLAMA31),
    "meta-llama/Llama-3.1-70B-Instruct": ("LlamaForCausalLM", None, 131072, _ROPE_LLAMA31),
    "meta-llama/Llama-3.3-70B-Instruct": ("LlamaForCausalLM", None, 131072, _ROPE_LLAMA31),
    "meta-llama/Meta-Llama-3-8B-Instruct": ("LlamaForCausalLM", None, 8192, _ROPE_NONE),
    "nvidia/Llama-3.3-70B-Instruct-FP4": ("LlamaForCausalLM", "nvfp4", 131072, _ROPE_LLAMA31),
}

# A LOWER BOUND of each checkpoint's weight bytes, for the "will it fit" check (rule hardware.fit):
# the nominal parameter count (the name's "397B", "80B", "671B" ...) times the bits per parameter of the
# checkpoint's format (bf16 16, fp8 8, NVFP4 4), rounded down.  Real checkpoints are larger: NVFP4 and FP8
# keep scales, and the embeddings, norms, attention or gates stay in bf16 (nvidia/Qwen3.5-397B-A17B-NVFP4 is
# about a quarter larger than 397e9 x 0.5 bytes), and DeepSeek's 671B leaves out its 14B MTP layer.  An
# underestimate only lets a too-large model through (it then fails at load, as without the check); it never
# refuses one that fits.
_GB = 10**9
WEIGHT_BYTES: dict[str, int] = {
    "nvidia/Qwen3.5-397B-A17B-NVFP4": 198 * _GB,  # 397e9 x 0.5
    "Qwen/Qwen3.5-397B-A17B": 794 * _GB,  # 397e9 x 2
    "Qwen/Qwen3.5-397B-A17B-FP8": 397 * _GB,
    "Qwen/Qwen3-Next-80B-A3B-Instruct": 160 * _GB,  # 80e9 x 2
    "Qwen/Qwen3-Next-80B-A3B-Thinking": 160 * _GB,
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": 80 * _GB,
    "nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4": 40 * _GB,
    "deepseek-ai/DeepSeek-V3": 671 * _GB,  # 671e9 x 1 (FP8)
    "deepseek-ai/DeepSeek-V3-0324": 671 * _GB,
    "deepseek-ai/DeepSeek-R1": 671 * _GB,
    "deepseek-ai/DeepSeek-R1-0528": 671 * _GB,
    "nvidia/DeepSeek-V3-0324-FP4": 335 * _GB,  # 671e9 x 0.5
    "nvidia/DeepSeek-R1-0528-FP4": 335 * _GB,
    "meta-llama/Llama-3.1-8B-Instruct": 16 * _GB,  # 8.03e9 x 2
    "meta-llama/Llama-3.1-70B-Instruct": 141 * _GB,  # 70.6e9 x 2
    "meta-llama/Llama-3.3-70B-Instruct": 141 * _GB,
    "meta-llama/Meta-Llama-3-8B-Instruct": 16 * _GB,
    "nvidia/Llama-3.3-70B-Instruct-FP4": 35 * _GB,  # 70.6e9 x 0.5
}

# The table's checkpoint formats as SGLang 0.5.23 reads them (sglang/srt/configs/model_config.py:1727-1869): the
# NVFP4 checkpoints are ModelOpt exports (quant_algo NVFP4 -> quant_method modelopt_fp4), the FP8 ones carry
# quant_method "fp8" in config.json.
TABLE_QUANT_METHODS = {"nvfp4": "modelopt_fp4", "fp8": "fp8", None: ""}
# sglang_model_quantization spellings that name the format unambiguously; "fp8" or "nvfp4" alone may be a
# ModelOpt, a plain FP8 or a compressed-tensors checkpoint, which SGLang treats differently.
DECLARED_QUANT_METHODS = {"modelopt_fp4": "modelopt_fp4", "modelopt_fp8": "modelopt_fp8", "none": "", "bf16": "",
                          "fp16": ""}

# Spellings of checkpoint quantization accepted in sglang_model_quantization.
QUANTIZATION_ALIASES = {
    "nvfp4": "nvfp4",
    "modelopt_fp4": "nvfp4",
    "fp4": "nvfp4",
    "fp8": "fp8",
    "modelopt_fp8": "fp8",
    "none": None,
    "bf16": None,
    "fp16": None,
}


def lookup_model(
    model_path: str | None,
    architecture: str | None = None,
    quantization: str | None = None,
    max_context: int | None = None,
) -> ModelFacts:
    """Facts for ``model_path``; explicit per-host overrides win over the table."""
    arch, quant, ctx, known, rope, weights, method = None, None, None, False, None, None, None
    key = (model_path or "").rstrip("/")
    name = key if key in CHECKPOINTS else None
    if name is None:
        # A local directory named like the checkpoint (/models/Qwen3.5-397B-A17B-NVFP4).
        base = key.rsplit("/", 1)[-1].lower()
        name = next((k for k in CHECKPOINTS if k.rsplit("/", 1)[-1].lower() == base), None)
    if name is not None:
        arch, quant, ctx, rope = CHECKPOINTS[name]
        weights = WEIGHT_BYTES.get(name)
        method = TABLE_QUANT_METHODS.get(quant)
        known = True
    if architecture:
        arch, known = architecture, True
    if quantization is not None:
        declared = QUANTIZATION_ALIASES.get(str(quantization).lower(), str(quantization).lower())
        if declared != quant or name is None:
            weights = None if declared != quant else weights  # another format than the table's: size not known
            method = DECLARED_QUANT_METHODS.get(str(quantization).lower())
        quant, known = declared, True
    if max_context:
        ctx = int(max_context)
    facts = ModelFacts(architecture=arch, quantization=quant, max_context=ctx, known=known,
                       rope_scaling=None if rope is None else dict(rope), path=key or None, weight_bytes=weights,
                       quant_method=method)
    arch_facts = ARCHITECTURES.get(arch or "")
    if arch_facts is not None:
        facts = replace(
            facts,
            family=arch_facts.family,
            mla=arch_facts.mla,
            hybrid_linear_attention=arch_facts.hybrid_linear_attention,
            spec_auto=arch_facts.spec_auto,
            moe=arch_facts.moe,
            text_config=arch_facts.text_config,
        )
    return facts
