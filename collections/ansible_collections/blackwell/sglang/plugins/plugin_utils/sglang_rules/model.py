# SPDX-License-Identifier: Apache-2.0
"""Numeric sanity SGLang does not check at argument time, the context length, the model table and the
checkpoint's quantization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _choice,
    _given,
    _int,
    _json_arg,
    env_true,
    nextn_as_eagle,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import (
    Report,
    added_in,
    release_line,
    rule,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    CONTEXT_SOURCE,
    EXAONE_ARCHITECTURES,
    adaptive_stays_on,
    cache_radix_off,
    capture_only,
    certain_architecture,
    chunk_dp_width,
    deepseek_cp_attention_dp,
    derived_context_length,
    dsa_backends,
    dsa_glm_sm12_fp8,
    dsa_kv_cache_dtype,
    dsa_override,
    effective_eagle_topk,
    exaone_sliding_window,
    kv_shard_rounds_chunk,
    mis_chunked_prefill_off,
    qwen35_sm100_backend,
    resolved_page_size,
    table_deepseek_v3,
    transfer_backend,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("numeric",
      ids=("numeric.context_length", "numeric.mem_fraction_static", "numeric.page_size", "numeric.chunked_prefill_size",
           "numeric.served_model_name", "numeric.grpc_port", "numeric.max_running_requests", "numeric.cuda_graph_max_bs_decode",
           "numeric.cuda_graph_max_bs_prefill",),
      sources=("sglang/srt/arg_groups/validation_hook.py:244",
               "sglang/srt/arg_groups/validation_hook.py:215",
               "sglang/srt/arg_groups/validation_hook.py:360",
               "sglang/srt/managers/tp_worker.py:420"))
def _numeric(ctx: Context, report: Report) -> None:
    mem = ctx.args.get("mem_fraction_static")
    if mem is not None and not 0 < mem < 1:
        ctx.error("numeric.mem_fraction_static", "mem_fraction_static",
                  f"mem_fraction_static={mem} must be strictly between 0 and 1 (share of each GPU's memory for weights + KV cache).",
                  "use e.g. 0.85 on a dedicated GPU; lower it if other processes share the GPUs")
    for dest in ("max_running_requests", "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill"):
        value = ctx.args.get(dest)
        if isinstance(value, int) and value < 1:
            why = (" (SGLang's argument checks let it through; its workers assert it after loading the weights, "
                   "sglang/srt/managers/tp_worker.py:420)" if dest == "max_running_requests" else "")
            ctx.error(f"numeric.{dest}", dest, f"{dest}={value} must be at least 1{why}.",
                      f"set {ctx.var(dest)} >= 1, or remove it (auto)")
    page_size = ctx.args.get("page_size")
    if isinstance(page_size, int) and page_size < 1:
        ctx.error("numeric.page_size", "page_size", f"page_size={page_size} must be at least 1 (SGLang divides by it).",
                  "remove page_size (auto) or set 1, 16, 64 ...", "sglang/srt/arg_groups/validation_hook.py:244")
    chunk, page = ctx.args.get("chunked_prefill_size"), ctx.get("page_size", 1)
    # check_server_args sees the size per attention-DP rank (parallel_hook.py:326-331), DWDP's included
    # (chunk_dp_width), and none with enable_mis, which sets it -1 first (attention_hook.py:565-570).
    width = chunk_dp_width(ctx)
    rank = chunk // width if isinstance(chunk, int) and not isinstance(chunk, bool) and \
        not mis_chunked_prefill_off(ctx) else 0
    # Qwen3.5 / Qwen3-Next on SM100 without an attention backend: SGLang's model override replaces the host's page
    # size (1 or 64, qwen35_sm100_backend), which memory.chunked_page checks instead. A disaggregation decode server
    # does no prefill: SGLang skips the check there (validation_hook.py:241-243, the same in 0.5.20-0.5.22).
    # Likewise an attention backend that forces its page (PAGE_FORCING_BACKENDS: e.g. trtllm_mha, SGLang's default for
    # Llama on SM100, turns page 17 into 64): SGLang checks the chunk against that page, and so does memory.chunked_page.
    # With KV-cache sharding SGLang rounds the chunk up to the page first, or refuses the launch before
    # (kv_shard_hook.py:287-292, kv_shard_rounds_chunk).
    decode = str(ctx.get("disaggregation_mode", "null")) == "decode"
    if (rank > 0 and isinstance(page, int) and page > 1 and rank % page and qwen35_sm100_backend(ctx) is None
            and not decode and not kv_shard_rounds_chunk(ctx)
            and (ctx.model.family == "unknown" or resolved_page_size(ctx) in (None, page))):
        ctx.error("numeric.chunked_prefill_size", "chunked_prefill_size",
                  f"chunked_prefill_size={chunk} is not a multiple of page_size={page}." if width == 1 else
                  f"chunked_prefill_size={chunk} per attention-DP rank ({chunk} // {width} = {rank}) is not a multiple "
                  f"of page_size={page}.",
                  f"use a multiple of {page}, e.g. {chunk - chunk % page or page}" if width == 1 else
                  f"use a multiple of {page * width} (page_size x the attention-DP width), e.g. {page * width * max(rank // page, 1)}",
                  "sglang/srt/arg_groups/validation_hook.py:244")
    _context_length(ctx)
    name = ctx.args.get("served_model_name")
    if name is not None and ":" in str(name):
        ctx.error("numeric.served_model_name", "served_model_name",
                  "served_model_name must not contain ':' (SGLang reserves it for the model:adapter LoRA syntax).",
                  f"use e.g. {str(name).replace(':', '-')!r}", "sglang/srt/arg_groups/validation_hook.py:215")
    grpc, port = ctx.args.get("grpc_port") if _given(ctx, "grpc_port") else None, ctx.get("port", 30000)
    if grpc is None:
        # handle_deprecated_args fills an unset grpc_port from SGLANG_GRPC_PORT (an EnvInt) before check_server_args
        # compares it with the port (serving_hook.py:360-366, the same in 0.5.20-0.5.22; targeted-serving-35).
        try:
            grpc = int(str(ctx.env.get("SGLANG_GRPC_PORT", "")).strip())
        except ValueError:
            grpc = None
    if grpc is not None and grpc == port and not ctx.is_set("smg_grpc_mode") and not ctx.is_set("grpc_mode"):
        src = "" if _given(ctx, "grpc_port") else " (from SGLANG_GRPC_PORT)"
        ctx.error("numeric.grpc_port", "grpc_port", f"grpc_port {grpc}{src} equals the HTTP port {port}.",
                  "give the gRPC listener its own port", "sglang/srt/arg_groups/validation_hook.py:"
                  + release_line(ctx, {"0.5.23": "360", "0.5.22": "359", "0.5.21": "270", "0.5.20": "242"}))


def _context_length(ctx: Context) -> None:
    ctxlen, table = ctx.args.get("context_length"), ctx.model.max_context
    limit = derived_context_length(ctx)
    if not isinstance(ctxlen, int) or not limit or ctxlen <= limit:
        pinned = {"original_max_position_embeddings": None}  # what would keep an override's factor out
        if isinstance(ctxlen, int) and ctx.model.rope_scaling is None and ctxlen > (derived_context_length(ctx, pinned) or ctxlen):
            ctx.warn("numeric.context_length", "context_length",
                     f"context_length={ctxlen} fits only through the rope_scaling factor in json_model_override_args "
                     f"(derived maximum {limit}, {table} as shipped); the validator does not know this checkpoint's config.json, which "
                     "SGLang merges the override into: if its rope_scaling names original_max_position_embeddings or "
                     "rope_type llama3, SGLang keeps the factor out, and the factor multiplies max_position_embeddings.",
                     "check config.json: SGLang allows factor x max_position_embeddings (or max_position_embeddings alone "
                     "with original_max_position_embeddings / rope_type llama3 in rope_scaling)", CONTEXT_SOURCE)
        return
    # SGLang lifts the check when either switch is on (model_config.py:1302-1304, sglang/utils.py:424).
    if env_true(ctx.env, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") or env_true(ctx.env, "SGLANG_IS_IN_CI"):
        return
    raised = f" ({table} as shipped, {limit} after json_model_override_args)" if limit != table else ""
    override = ctx.args.get("json_model_override_args")
    nested = ctx.model.text_config and override is not None and '"text_config"' not in str(override)
    ctx.error("numeric.context_length", "context_length",
              f"context_length={ctxlen} exceeds the model's maximum of {limit} tokens{raised}; SGLang refuses it at start-up.",
              f"use at most {limit}, or set sglang_env.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: \"1\" if you know "
              "the model extrapolates (RoPE scaling)"
              + ("; this model's overrides take effect only under \"text_config\" in json_model_override_args" if nested else ""),
              CONTEXT_SOURCE)


@rule("model",
      ids=("model.unknown",),
      stricter=("a model outside the validator's table skips the model-specific checks; SGLang itself has no such table, so "
                "this warns"))
def _model(ctx: Context, report: Report) -> None:
    if ctx.model.known or ctx.model.max_context or not ctx.args.get("model_path"):
        return
    ctx.warn("model.unknown", "sglang_model_path",
             f"{ctx.model.path or ctx.args.get('model_path')} is not in the validator's model table, so the model-specific "
             "checks were skipped: hybrid-attention backends, NVFP4 MoE kernels, the context length limit and the "
             "speculative values SGLang would choose for it.",
             "declare the model's facts: sglang_model_architecture (config.json architectures[0]), "
             "sglang_model_quantization (nvfp4, fp8 or none) and sglang_model_max_context (its max_position_embeddings)",
             value=ctx.model.path)


# ModelConfig's MLA branch (sglang/srt/configs/model_config.py:1366-1398 in 0.5.23; 0.5.22 :1289, 0.5.21 :1210,
# 0.5.20 :1122): for these architectures it reads kv_lora_rank (and the MLA head sizes) from the text config without a
# fallback. GigaChat 3.5 joined the list in 0.5.21.
MLA_CONFIG_ARCHITECTURES = (
    "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "Glm4MoeLiteForCausalLM", "Glm4MoeLiteForCausalLMNextN", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGeneration", "Glm5NextForConditionalGenerationNextN", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "HYV4ForCausalLM", "HYV4ForCausalLMNextN", "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle",
    "KimiK25ForConditionalGeneration", "Eagle3DeepseekV2ForCausalLM",
)
MLA_CONFIG_ARCHITECTURES_0521 = ("GigaChat35ForCausalLM", "GigaChat35ForCausalLMNextN")
MLA_CONFIG_SOURCE = "sglang/srt/configs/model_config.py:1398 (0.5.22 :1289, 0.5.21 :1210, 0.5.20 :1122)"


@rule("model.override_architecture", sources=(
    "sglang/srt/configs/model_config.py:1398",
))
def _override_architecture(ctx: Context, report: Report) -> None:
    """json_model_override_args renaming the architecture to an MLA one on a checkpoint without MLA: SGLang merges the
    override into the checkpoint's config (utils/hf_transformers/config.py:405-415), and ModelConfig's MLA branch then
    reads kv_lora_rank, which the checkpoint's config does not have: AttributeError when the launch builds its model
    config (the conformance probe: Llama-3.1-8B as GlmMoeDsaForCausalLM or DeepseekV3ForCausalLM). Decided for a
    checkpoint whose own architecture is in the model table without MLA, and an override that does not bring
    kv_lora_rank itself; anything else is the preflight's."""
    override = _json_arg(ctx, "json_model_override_args")
    names = override.get("architectures") if isinstance(override, dict) else None
    own = ARCHITECTURES.get(str(ctx.model.checkpoint_architecture or ctx.model.architecture or ""))
    if not isinstance(names, list) or own is None or own.mla:
        return
    text = override.get("text_config")
    if "kv_lora_rank" in override or (isinstance(text, dict) and "kv_lora_rank" in text):
        return
    mla = MLA_CONFIG_ARCHITECTURES + (MLA_CONFIG_ARCHITECTURES_0521 if added_in(ctx, "0.5.21") else ())
    renamed = next((name for name in names if name in mla), None)
    if renamed is not None:
        own_name = ctx.model.checkpoint_architecture or ctx.model.architecture
        report.refuse("json_model_override_args", f"json_model_override_args names the MLA architecture {renamed}, but "
                      f"the checkpoint ({own_name}) has no kv_lora_rank: SGLang's model config reads it for {renamed} "
                      "and the launch fails (AttributeError).",
                      f"remove \"architectures\" from {ctx.var('json_model_override_args')}, or serve a checkpoint of "
                      f"{renamed}", MLA_CONFIG_SOURCE)


# is_deepseek_dsa (sglang/srt/configs/model_config.py:191-212, the same list in 0.5.20-0.5.22): these architectures
# are DSA models when their config.json has index_topk (DeepSeek-V3.2 has, DeepSeek-V3 has not), which only the on-host
# preflight can read; every other architecture is not a DSA model.
DSA_ARCHITECTURES = (
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
)
# is_deepseek_v4 (model_config.py:395-400) and is_minimax_sparse (model_config.py:426-431, new in 0.5.21).
DEEPSEEK_V4_ARCHITECTURES = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark")
MINIMAX_SPARSE_ARCHITECTURES = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
_MH = "sglang/srt/arg_groups/model_hook.py"


@rule("server.model_features", shared=True, sources=(
    "sglang/srt/arg_groups/hisparse_hook.py:104",
    "sglang/srt/arg_groups/model_hook.py:188",
))
def _model_features(ctx: Context, report: Report) -> None:
    """Switches SGLang allows only for some architectures, decided by the declared architecture (config.json's
    architectures[0]): validate_hisparse (hisparse_hook.py:91-107) and handle_model_specific_adjustments' DSA cache
    layer split (model_hook.py:187-191). For a DSA architecture the checkpoint's index_topk decides (the preflight)."""
    arch = str(ctx.model.architecture or "") if ctx.model.known else ""
    if not arch or (arch in DSA_ARCHITECTURES and not table_deepseek_v3(ctx)):
        return
    sparse = DEEPSEEK_V4_ARCHITECTURES + (MINIMAX_SPARSE_ARCHITECTURES if added_in(ctx, "0.5.21") else ())
    if ctx.is_set("enable_hisparse") and arch not in sparse:
        report.refuse("enable_hisparse", f"enable_hisparse runs DSA models (DeepSeek-V3.2, GLM-5...), DeepSeek-V4 and "
                      f"MiniMax M3 only, not {arch}.", f"remove {ctx.var('enable_hisparse')}",
                      "sglang/srt/arg_groups/hisparse_hook.py:104 (0.5.22 :104, 0.5.21 :96, 0.5.20 :94)")
    if ctx.is_set("enable_dsa_cache_layer_split"):
        report.refuse("enable_dsa_cache_layer_split", f"enable_dsa_cache_layer_split runs DSA (DeepSeek Sparse Attention) "
                      f"models only, not {arch}.", f"remove {ctx.var('enable_dsa_cache_layer_split')}",
                      f"{_MH}:188 (0.5.22 :188, 0.5.21 :179, 0.5.20 :125)")


_OV = "sglang/srt/arg_groups/overrides.py"
_DV2 = "sglang/srt/arg_groups/model_overrides/deepseek_v2.py"


@rule("server.model_features", shared=True, sources=(
    "sglang/srt/arg_groups/model_hook.py:67",
    "sglang/srt/arg_groups/model_hook.py:362",
    "sglang/srt/arg_groups/overrides.py:528",
    "sglang/srt/arg_groups/overrides.py:541",
    "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:22",
    "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:24",
    "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:26",
    "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:164",
))
def _dsa_by_override(ctx: Context, report: Report) -> None:
    """DeepSeek-V3 / V3.2 made a DSA model by json_model_override_args' index_topk (resolve.dsa_override): the DSA
    checks of handle_model_specific_adjustments and its override on a CUDA device, which read the merged config
    (the targeted set's MISSED: targeted-arch-05, -14, -17, -40, -41, -51, -61). Two-batch overlap with index-topk sharing
    (index_topk_freq > 1, an "S" in index_topk_pattern, a "shared" indexer type: model_hook.py:55-67); DSA decode
    context parallelism with HiSparse or HiCache, PD disaggregation or an EAGLE top-k other than 1
    (model_overrides/deepseek_v2.py:18-26, new in 0.5.22) or with pooled index keys (index_kpool > 1, :160-164, new
    in 0.5.22); the KV cache dtype _dsa_kv_cache_dtype_default allows (bfloat16 / fp8_e4m3, bfloat16 alone with
    learnable_sink: overrides.py:524-541); prefill CP on a PD decode worker (model_hook.py:360-363)."""
    override = dsa_override(ctx)
    if override is None or _choice(ctx, "device", "cuda") != "cuda":
        return
    freq, pattern, indexers = (override.get(k) for k in ("index_topk_freq", "index_topk_pattern", "indexer_types"))
    shared = ((isinstance(freq, int) and freq > 1) or (isinstance(pattern, str) and "S" in pattern)
              or (isinstance(indexers, list) and "shared" in indexers))
    if ctx.is_set("enable_two_batch_overlap") and shared:
        report.refuse("enable_two_batch_overlap", "enable_two_batch_overlap does not run with DSA index-topk sharing "
                      "(index_topk_freq, index_topk_pattern or indexer_types in json_model_override_args).",
                      f"remove {ctx.var('enable_two_batch_overlap')}",
                      f"{_MH}:" + release_line(ctx, {"0.5.23": "67", "0.5.22": "67", "0.5.21": "63", "0.5.20": "61"}))
        return
    dcp = _int(ctx, "dcp_size", 1) > 1 and added_in(ctx, "0.5.22")
    if dcp:
        topk = ctx.args.get("speculative_eagle_topk")
        for bad, why, fix, line in (
                (ctx.is_set("enable_hisparse") or ctx.is_set("enable_hierarchical_cache"), "HiSparse or HiCache",
                 "enable_hierarchical_cache", 22),
                (_choice(ctx, "disaggregation_mode", "null") != "null", "PD disaggregation", "disaggregation_mode", 24),
                (topk is not None and topk != 1, "an EAGLE top-k other than 1", "speculative_eagle_topk", 26)):
            if bad:
                report.refuse("dcp_size", f"DSA decode context parallelism (dcp_size > 1) does not run with {why}.",
                              f"set {ctx.var('dcp_size')}: 1, or remove {ctx.var(fix)}", f"{_DV2}:{line}")
                return
    kpool = override.get("index_kpool")
    if dcp and isinstance(kpool, int) and kpool > 1:
        report.refuse("dcp_size", f"dcp_size > 1 does not run with DSA pooled index keys (index_kpool={kpool}).",
                      f"set {ctx.var('dcp_size')}: 1", f"{_DV2}:" + release_line(ctx, {"0.5.23": "164", "0.5.22": "165"}))
        return
    kv = _choice(ctx, "kv_cache_dtype", "auto")
    sink = bool(override.get("learnable_sink"))
    allowed = ("auto", "bf16", "bfloat16") + (() if sink else ("fp8_e4m3",))
    if kv not in allowed:
        what = "learnable DSA attention sinks need a bfloat16 KV cache" if sink else \
            "DeepSeek DSA runs a bfloat16 or fp8_e4m3 KV cache only"
        lines = {"0.5.23": "528", "0.5.22": "519", "0.5.21": "517", "0.5.20": "599"} if sink else \
            {"0.5.23": "541", "0.5.22": "517", "0.5.21": "515", "0.5.20": "612"}
        report.refuse("kv_cache_dtype", f"{what}, not kv_cache_dtype={kv}.",
                      f"set {ctx.var('kv_cache_dtype')}: bfloat16, or remove it", f"{_OV}:" + release_line(ctx, lines))
        return
    if ctx.is_set("enable_prefill_cp") and _choice(ctx, "disaggregation_mode", "null") == "decode":
        report.refuse("enable_prefill_cp", "DSA prefill context parallelism does not run on a PD decode worker.",
                      f"remove {ctx.var('enable_prefill_cp')}",
                      f"{_MH}:" + release_line(ctx, {"0.5.23": "362", "0.5.22": "356", "0.5.21": "324", "0.5.20": "264"}))
        return
    if ctx.is_set("enable_dsa_cache_layer_split"):
        # The layer split's own conditions on a DSA model (model_hook.py:365-407; 0.5.22 :359-401, 0.5.21 :327-369,
        # 0.5.20 :267-309): targeted-arch-03 and -04, refused before for the wrong reason (the model is not DSA).
        mode = _choice(ctx, "disaggregation_mode", "null")
        transfer = transfer_backend(ctx)
        for bad, why, fix, lines in (
                (mode == "decode", "a PD decode worker", "disaggregation_mode",
                 ("370", "364", "332", "272")),
                (mode != "prefill", "a worker other than a PD prefill worker", "disaggregation_mode",
                 ("376", "370", "338", "278")),
                (not ctx.is_set("enable_prefill_cp") or _choice(ctx, "cp_strategy", "") != "interleave",
                 "anything but enable_prefill_cp with cp_strategy interleave", "cp_strategy", ("384", "378", "346", "286")),
                (transfer != "mooncake", f"disaggregation_transfer_backend {transfer}",
                 "disaggregation_transfer_backend", ("395", "389", "357", "297")),
                (_int(ctx, "pp_size", 1) > 1, "pipeline parallelism", "pp_size", ("403", "397", "365", "305"))):
            if bad:
                report.refuse("enable_dsa_cache_layer_split", f"enable_dsa_cache_layer_split does not run on {why}.",
                              f"remove {ctx.var('enable_dsa_cache_layer_split')}, or fix {ctx.var(fix)}",
                              f"{_MH}:" + release_line(ctx, dict(zip(("0.5.23", "0.5.22", "0.5.21", "0.5.20"), lines, strict=True))))
                return
    if ctx.is_set("enable_hisparse") and cache_radix_off(ctx) is None:
        # validate_hisparse on a DSA model (hisparse_hook.py:109; 0.5.22 :109, 0.5.21 :101, 0.5.20 :99): targeted-arch-13.
        report.refuse("enable_hisparse", "enable_hisparse needs the radix cache off.",
                      f"set {ctx.var('disable_radix_cache')}: true",
                      "sglang/srt/arg_groups/hisparse_hook.py:"
                      + release_line(ctx, {"0.5.23": "109", "0.5.22": "109", "0.5.21": "101", "0.5.20": "99"}))
        return
    _dsa_resolved_checks(ctx, report, override)


def _dsa_resolved_checks(ctx: Context, report: Report, override: dict) -> None:
    """_dsa_by_override's checks on what SGLang resolves for the DSA model by GPU (resolve.dsa_kv_cache_dtype,
    resolve.dsa_backends; targeted-arch-49, -53, -57 were MISSED): the DSA context-parallel sizes (0.5.20 / 0.5.21's
    interleave strategy without attention DP, deepseek_v2.py:105 / :98 there; tp_size <= 8,
    model_overrides/deepseek_v2.py:123, and interleave keeping an explicit attn_cp_size > 1 from 0.5.22, :129-133,
    which handle_context_parallelism divides, parallel_hook.py:159-164: cp_sizes leaves the DSA override alone); the
    DSA backend constraints (_check_dsa_backend_constraints, overrides.py:553-583: triton is ROCm's; an fp8_e4m3 KV
    cache with tilelang needs tilelang for both, no dcp_size > 1 and SM89+ from 0.5.22, and refuses tilelang outright
    in 0.5.20 / 0.5.21; learnable sinks' flashmla_sparse, :645-654; TileLang FP8 without HiSparse, :692); HiSparse's
    backends by the KV dtype (validate_hisparse_dsa_backend, hisparse_hook.py:18-21, 43-62)."""
    tp = _int(ctx, "tp_size", 1)
    if ctx.is_set("enable_prefill_cp"):
        dp = _int(ctx, "dp_size", 1)
        if not deepseek_cp_attention_dp(ctx) and dp != 1:
            # Where the override does not read dp_size as attention-DP groups (0.5.20 / 0.5.21's interleave), it asserts
            # dp_size 1, before the tp_size check. Was MISSED for tp_size 4, dp_size 2 on 8 GPUs (probed on both releases).
            report.refuse("dp_size", f"SGLang {ctx.version}'s DSA interleave prefill context parallelism runs "
                          f"without attention data parallelism (dp_size 1), not dp_size={dp}.",
                          f"set {ctx.var('dp_size')}: 1, or {ctx.var('cp_strategy')}: zigzag, or SGLang 0.5.22 or later",
                          f"{_DV2}:" + release_line(ctx, {"0.5.21": "98", "0.5.20": "105"}))
            return
        if tp > 8:
            report.refuse("tp_size", f"DSA prefill context parallelism runs on one machine (tp_size <= 8), not "
                          f"tp_size={tp}.", f"set {ctx.var('tp_size')} <= 8, or remove {ctx.var('enable_prefill_cp')}",
                          f"{_DV2}:" + release_line(ctx, {"0.5.23": "123", "0.5.22": "123", "0.5.21": "101",
                                                          "0.5.20": "108"}))
            return
        cp, width = _int(ctx, "attn_cp_size", 1), _int(ctx, "attn_dp_size", 1) * dp
        if added_in(ctx, "0.5.22") and _choice(ctx, "cp_strategy", "") == "interleave" and cp > 1 and tp >= 1 and \
                width >= 1 and (tp % cp or tp % (width * cp)):
            report.refuse("attn_cp_size", f"DSA interleave prefill CP keeps attn_cp_size={cp}: tp_size={tp} must be "
                          f"divisible by attn_dp_size x attn_cp_size = {width} x {cp}.",
                          f"set {ctx.var('attn_cp_size')} to a divisor of tp_size, or leave it unset",
                          "sglang/srt/arg_groups/parallel_hook.py:"
                          + release_line(ctx, {"0.5.23": "159-164", "0.5.22": "153-158"}))
            return
    backends, kv = dsa_backends(ctx), dsa_kv_cache_dtype(ctx)
    written = {str(ctx.args.get(d)) for d in ("dsa_prefill_backend", "dsa_decode_backend") if _given(ctx, d)}
    glm = dsa_glm_sm12_fp8(ctx) or ctx.model.architecture == "GlmMoeDsaForCausalLM" and kv is None
    if "triton" in written and not override.get("learnable_sink") and not glm:
        report.refuse("dsa_prefill_backend", "The triton DSA backend runs on ROCm only.",
                      "pick a CUDA DSA backend (flashmla_kv on Hopper, trtllm on Blackwell)",
                      f"{_OV}:" + release_line(ctx, {"0.5.23": "563", "0.5.22": "539", "0.5.21": "536", "0.5.20": "633"}))
        return
    if backends is None or kv is None:
        return
    prefill, decode = backends
    if override.get("learnable_sink"):
        bad = sorted(written - {"flashmla_sparse"})
        if bad:
            report.refuse("dsa_prefill_backend", f"learnable DSA attention sinks need the flashmla_sparse DSA backends, "
                          f"not {', '.join(bad)}.", "set dsa_prefill_backend / dsa_decode_backend: flashmla_sparse",
                          f"{_OV}:" + release_line(ctx, {"0.5.23": "650", "0.5.22": "626", "0.5.21": "621",
                                                         "0.5.20": "717"}))
        return
    if kv == "fp8_e4m3" and "tilelang" in (prefill, decode) and not glm:
        cc = ctx.compute_capability
        for bad, why, lines in (
                (not added_in(ctx, "0.5.22"), "an fp8_e4m3 KV cache takes no tilelang DSA backend on CUDA",
                 {"0.5.21": "544", "0.5.20": "641"}),
                (ctx.is_set("enable_hisparse"), "CUDA TileLang FP8 KV does not run with HiSparse",
                 {"0.5.23": "692", "0.5.22": "668"}),
                ((prefill, decode) != ("tilelang", "tilelang"), "CUDA TileLang FP8 KV needs tilelang for both DSA "
                 f"backends (resolved prefill={prefill}, decode={decode})", {"0.5.23": "572", "0.5.22": "548"}),
                (_int(ctx, "dcp_size", 1) > 1, "CUDA TileLang FP8 KV does not run with dcp_size > 1",
                 {"0.5.23": "577", "0.5.22": "553"}),
                (cc is not None and cc < (8, 9), "CUDA TileLang FP8 KV needs SM89 or newer",
                 {"0.5.23": "583", "0.5.22": "559"})):
            if bad:
                report.refuse("dsa_prefill_backend", f"{why} (KV cache fp8_e4m3"
                              f"{'' if _given(ctx, 'kv_cache_dtype') else ', the DSA default on this GPU'}).",
                              "set both DSA backends to tilelang, or kv_cache_dtype: bfloat16",
                              f"{_OV}:" + release_line(ctx, lines))
                return
    if ctx.is_set("enable_hisparse"):
        allowed = {"bfloat16": ("flashmla_sparse",), "fp8_e4m3": ("flashinfer_sparse_mla", "flashmla_kv")}[kv]
        for dest, backend in (("dsa_prefill_backend", prefill), ("dsa_decode_backend", decode)):
            if backend not in allowed:
                report.refuse(dest, f"HiSparse runs the DSA backends {', '.join(allowed)} with a {kv} KV cache"
                              f"{'' if _given(ctx, 'kv_cache_dtype') else ' (the DSA default on this GPU)'}, not "
                              f"{dest}={backend}.", f"set {ctx.var(dest)} to one of {', '.join(allowed)}, or remove it",
                              "sglang/srt/arg_groups/hisparse_hook.py:55")
                return


# The speculative algorithms that keep enable_mixed_chunk on (SpeculativeAlgorithm.supports_mixed_chunk,
# speculative/spec_info.py:147-158, the same in 0.5.22; NEXTN resolves to EAGLE): _handle_eagle_family and _handle_ngram
# turn it off for the others (speculative_hook.py:1108-1113, :1304-1308), UNO and FROZEN_KV_MTP too (:596-601, :1002-1007).
MIXED_CHUNK_SPEC_ALGORITHMS = ("", "EAGLE", "EAGLE3", "NEXTN", "DFLASH", "DSPARK")
_HS = "sglang/srt/arg_groups/hisparse_hook.py"


@rule("server.model_features", since="0.5.22", shared=True, file=_HS, sources=(
    f"{_HS}:84",
    f"{_HS}:119",
    f"{_HS}:124",
))
def _hisparse_combos(ctx: Context, report: Report) -> None:
    """validate_hisparse's feature checks after the model and radix-cache gates (hisparse_hook.py:84, :118-124, new in
    0.5.22 at the same lines), run by check_server_args after the speculative resolution (validation_hook.py:312): no
    enable_mixed_chunk where SGLang keeps it on (MIXED_CHUNK_SPEC_ALGORITHMS, no dllm_algorithm: dllm_hook.py:115-123),
    and with speculative decoding the resolved eagle_topk 1 (effective_eagle_topk: SGLang's own triple where none is
    set) and no speculative_adaptive where SGLang keeps it on (adaptive_stays_on). Only where the radix cache is
    surely off (SGLang refuses at :109 first, model._dsa_by_override) and the architecture can run HiSparse (the other
    refusal, :104, is model._model_features'): targeted-lora-47 (mixed chunk) and targeted-lora-48 (NEXTN with
    speculative_adaptive) on the DSA-by-override DeepSeek-V3 were MISSED."""
    if not ctx.is_set("enable_hisparse") or cache_radix_off(ctx) is None:
        return
    arch = str(ctx.model.architecture or "") if ctx.model.known else ""
    if arch and arch not in DSA_ARCHITECTURES + DEEPSEEK_V4_ARCHITECTURES + MINIMAX_SPARSE_ARCHITECTURES:
        return
    raw = "" if capture_only(ctx) or not _given(ctx, "speculative_algorithm") else \
        str(ctx.args.get("speculative_algorithm")).upper()
    raw = "" if raw == "NONE" else raw
    if ctx.is_set("enable_mixed_chunk") and raw in MIXED_CHUNK_SPEC_ALGORITHMS and not _given(ctx, "dllm_algorithm"):
        report.refuse("enable_mixed_chunk", "enable_hisparse does not support enable_mixed_chunk yet.",
                      f"remove {ctx.var('enable_mixed_chunk')}", 84)
        return
    if not raw:
        return
    algo = nextn_as_eagle(raw)
    topk = effective_eagle_topk(ctx, algo) if algo in ("EAGLE", "EAGLE3", "STANDALONE") else None
    if topk is not None and topk != 1:
        report.refuse("speculative_eagle_topk", f"HiSparse speculative decoding is linear only: speculative_eagle_topk "
                      f"{topk} is not 1.", f"set {ctx.var('speculative_eagle_topk')}: 1", 119)
    elif adaptive_stays_on(ctx):
        report.refuse("speculative_adaptive", "HiSparse speculative decoding uses statically sized swap state; "
                      "speculative_adaptive is not supported.", f"remove {ctx.var('speculative_adaptive')}", 124)


# CP_DECODE_ATTN_TP_SUPPORTED_ARCHS (sglang/srt/layers/cp/cp_decode_attn_tp.py:29-37, the same in 0.5.20-0.5.22): the
# models whose attention linears are replicated across the context-parallel ranks.
CP_DECODE_ATTN_TP_ARCHITECTURES = DEEPSEEK_V4_ARCHITECTURES + ("GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN")


@rule("server.model_features", shared=True, file=_MH, sources=(
    "sglang/srt/arg_groups/model_hook.py:199",
))
def _cp_decode_attn_tp(ctx: Context, report: Report) -> None:
    """handle_model_specific_adjustments refuses enable_cp_decode_attn_tp on any architecture (config.json's
    architectures[0]) outside CP_DECODE_ATTN_TP_SUPPORTED_ARCHS (model_hook.py:193-204; :193-204 in 0.5.22, :184-195 in
    0.5.21, :130-141 in 0.5.20): the seed-0 fuzzer's MISSED on DeepSeek-V3 and Qwen3-Next (issue 36)."""
    arch = str(ctx.model.architecture or "") if ctx.model.known else ""
    if arch and ctx.is_set("enable_cp_decode_attn_tp") and arch not in CP_DECODE_ATTN_TP_ARCHITECTURES:
        report.refuse("enable_cp_decode_attn_tp", "enable_cp_decode_attn_tp needs a model whose attention linears are "
                      f"replicated across the context-parallel ranks (DeepSeek-V4, GLM-5 DSA), not {arch}.",
                      f"remove {ctx.var('enable_cp_decode_attn_tp')}", 199)


@rule("server.model_features", since="0.5.23", shared=True, file=_MH, sources=(
    "sglang/srt/arg_groups/model_hook.py:1045",
))
def _encoder_replay(ctx: Context, report: Report) -> None:
    """handle_model_capability_adjustments (model_hook.py:1038-1045, new in 0.5.23): enable_encoder_swa_bounded_replay
    on any model but DeepSeek-V4.1 (config.json model_type deepseek_v41, a DeepseekV4ForCausalLM checkpoint: the
    preflight decides those). 0.5.21 and 0.5.22 refuse it on DeepSeek-V4 models only (deepseek_v4_hook.py), which
    the architecture alone cannot tell from V4.1."""
    arch = str(ctx.model.architecture or "") if ctx.model.known else ""
    if arch and not arch.startswith("DeepseekV4") and ctx.is_set("enable_encoder_swa_bounded_replay"):
        report.refuse("enable_encoder_swa_bounded_replay", f"enable_encoder_swa_bounded_replay needs DeepSeek-V4.1, not "
                      f"{arch}.", f"remove {ctx.var('enable_encoder_swa_bounded_replay')}", 1045)


# handle_model_specific_adjustments' per-architecture attention backends (model_hook.py:515-720), on
# hf_config.architectures[0]: (architectures, the backends allowed, whether both the prefill and the decode backend are
# checked (attention_backends_of) or attention_backend alone, the backends never allowed instead of a list, the line
# per release (release_line)). The model overrides fill attention_backend only where it is unset
# (GptOss: all three unset, is_attention_backend_not_set; the others: attention_backend unset), with allowed backends,
# so only the written backends decide.
ARCH_ATTENTION_BACKENDS = (
    (("GptOssForCausalLM",), ("triton", "trtllm_mha", "fa3", "fa4", "ascend", "intel_amx", "intel_xpu", "aiter"), True,
     (), {"0.5.23": "538", "0.5.22": "532", "0.5.21": "500", "0.5.20": "442"}),
    (("Llama4ForConditionalGeneration", "Llama4ForCausalLM"), ("fa3", "aiter", "triton", "ascend", "trtllm_mha",
                                                               "intel_xpu"), False,
     (), {"0.5.23": "622", "0.5.22": "616", "0.5.21": "582", "0.5.20": "522"}),
    (("Olmo2ForCausalLM",), (), False, ("flashinfer",),
     {"0.5.23": "690", "0.5.22": "684", "0.5.21": "645", "0.5.20": "585"}),
    (("Lfm2ForCausalLM", "Lfm2MoeForCausalLM"), (), False, ("triton",),
     {"0.5.23": "719", "0.5.22": "713", "0.5.21": "674", "0.5.20": "614"}),
)


# Gemma 4's branch (model_hook.py:636-660; 0.5.20-0.5.22 the same): the prefill and the decode backend
# (attention_backends_of) must be one of these; fa4 joined in 0.5.22. _gemma4_overrides (model_overrides/gemma4.py:
# 35-44) fills attention_backend with triton (trtllm_mha on SM100) whenever it is unset, so only the written backends
# decide.
GEMMA4_ARCHITECTURES = ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4UnifiedForConditionalGeneration")
GEMMA4_ATTENTION_BACKENDS = ("trtllm_mha", "triton", "fa4", "ascend", "intel_xpu", "intel_amx", "aiter")


# EXAONE 4's branch (model_hook.py:668-681): with hf_config.sliding_window_pattern not None, the resolved
# attention_backend alone must be one of these; _exaone_overrides (model_overrides/exaone.py:18-29) fills an unset
# one with trtllm_mha / fa3 / triton. ExaoneMoeForCausalLM joined the branch in 0.5.22.
EXAONE_ATTENTION_BACKENDS = ("fa3", "triton", "trtllm_mha")  # before 0.5.22 one must be written


@rule("server.model_features", shared=True, file=_MH, sources=(
    "sglang/srt/arg_groups/model_hook.py:538",
    "sglang/srt/arg_groups/model_hook.py:569",
    "sglang/srt/arg_groups/model_hook.py:622",
    "sglang/srt/arg_groups/model_hook.py:656",
    "sglang/srt/arg_groups/model_hook.py:679",
    "sglang/srt/arg_groups/model_hook.py:690",
    "sglang/srt/arg_groups/model_hook.py:719",
))
def _arch_attention_backends(ctx: Context, report: Report) -> None:
    """handle_model_specific_adjustments' architecture branches (model_hook.py:515-720; the same lists in 0.5.20-0.5.22):
    GPT-OSS's, Llama 4's, OLMo 2's and LFM2's attention backends (ARCH_ATTENTION_BACKENDS) and GPT-OSS's triton_kernel
    MoE with expert parallelism (:568-571); Gemma 4's (GEMMA4_ATTENTION_BACKENDS, :636-660) and EXAONE 4's with a
    sliding_window_pattern (EXAONE_ATTENTION_BACKENDS, :668-681). Refused only where the architecture is certain
    (certain_architecture: the model table's, or json_model_override_args' architectures); the preflight's for other
    checkpoints."""
    arch = certain_architecture(ctx)
    if arch is None:
        return
    base = ctx.args.get("attention_backend") if _given(ctx, "attention_backend") else None
    for archs, allowed, split, banned, lines in ARCH_ATTENTION_BACKENDS:
        if arch not in archs:
            continue
        if split:
            written = [_given(ctx, d) for d in ("attention_backend", "prefill_attention_backend", "decode_attention_backend")]
            if not any(written):
                break  # _gpt_oss_overrides fills an allowed backend (gpt_oss.py:28-44)
            sides = ("prefill_attention_backend", "decode_attention_backend")
            seen = [str(ctx.args.get(d)) if _given(ctx, d) else base for d in sides]
        else:
            seen = [base] if base is not None else []  # an unset one: the override's allowed default
        bad = [str(b) for b in seen if (allowed and str(b) not in allowed) or str(b) in banned or b is None]
        if bad:
            what = f"one of {', '.join(allowed)}" if allowed else f"an attention backend other than {banned[0]}"
            report.refuse("attention_backend" if base is not None else "prefill_attention_backend",
                          f"{arch} needs {what} (prefill and decode); the launch gives {', '.join(bad)}.",
                          f"set {ctx.var('attention_backend')} to {allowed[0] if allowed else 'another backend'} (or "
                          "leave it unset: SGLang picks one for the model)", release_line(ctx, lines))
            return
        break
    if arch in GEMMA4_ARCHITECTURES:
        allowed = tuple(b for b in GEMMA4_ATTENTION_BACKENDS if b != "fa4" or added_in(ctx, "0.5.22"))
        sides = ("prefill_attention_backend", "decode_attention_backend")
        seen = [str(ctx.args.get(d)) if _given(ctx, d) else base for d in sides]
        bad = [str(b) for b in seen if b is not None and str(b) not in allowed]
        if bad:
            report.refuse("attention_backend" if base is not None else "prefill_attention_backend",
                          f"{arch} needs one of {', '.join(allowed)} (prefill and decode); the launch gives "
                          f"{', '.join(bad)}.",
                          f"set {ctx.var('attention_backend')} to triton (or leave it unset: SGLang picks one for the "
                          "model)",
                          release_line(ctx, {"0.5.23": "656", "0.5.22": "650", "0.5.21": "615", "0.5.20": "555"}))
            return
    # The MoE spelling ExaoneMoeForCausalLM joined the branch in 0.5.22.
    exaone = EXAONE_ARCHITECTURES if added_in(ctx, "0.5.22") else EXAONE_ARCHITECTURES[:2]
    # Before 0.5.22 _exaone_overrides fills no backend (0.5.21 exaone.py:14-20): an unset attention_backend is None at
    # the assert, refused whatever the prefill / decode sides say (conformance-all on 0.5.20 / 0.5.21).
    filled = added_in(ctx, "0.5.22")
    if arch in exaone and exaone_sliding_window(ctx) and (
            str(base) not in EXAONE_ATTENTION_BACKENDS if base is not None else not filled):
        report.refuse("attention_backend", f"{arch} with a sliding_window_pattern needs attention_backend one of "
                      f"{', '.join(EXAONE_ATTENTION_BACKENDS)}; the launch gives {base}.",
                      f"set {ctx.var('attention_backend')} to triton" + (
                          " (or leave it unset: SGLang picks one for the model)" if filled else ""),
                      release_line(ctx, {"0.5.23": "679", "0.5.22": "673", "0.5.21": "634", "0.5.20": "574"}))
        return
    if arch == "GptOssForCausalLM" and _given(ctx, "moe_runner_backend") and \
            str(ctx.args.get("moe_runner_backend")) == "triton_kernel" and _int(ctx, "ep_size", 1) > 1:
        report.refuse("ep_size", "GPT-OSS's triton_kernel MoE runs with ep_size 1 only.",
                      f"set {ctx.var('ep_size')}: 1, or another moe_runner_backend",
                      release_line(ctx, {"0.5.23": "569", "0.5.22": "563", "0.5.21": "531", "0.5.20": "471"}))


# _verify_quantization (sglang/srt/configs/model_config.py:2042-2054): --quantization values SGLang keeps next to a
# checkpoint of another quant_method (the value's checkpoint methods).
COMPATIBLE_QUANTIZATION = {
    "modelopt_fp8": ("modelopt",),
    "modelopt_fp4": ("modelopt", "fp8"),
    "modelopt_mixed": ("modelopt",),
    "nvfp4_online": ("fp8", "modelopt_fp8"),
    "minimax_m3_nvfp4": ("mxfp8",),
    "petit_nvfp4": ("modelopt",),
    "w8a8_int8": ("compressed-tensors", "compressed_tensors"),
    "w8a8_fp8": ("compressed-tensors", "compressed_tensors"),
    "auto-round-int8": ("compressed-tensors", "compressed_tensors"),
}


# Choices of --quantization that SGLang registers only off CUDA (sglang/srt/layers/quantization/__init__.py:63-146):
# on an NVIDIA GPU _verify_quantization calls them unknown (model_config.py:2150-2154).
NOT_ON_CUDA_QUANTIZATION = ("gptq", "mlx_q4", "mlx_q8")


QUANT_SOURCE = "sglang/srt/configs/model_config.py:2086-2154 (_verify_quantization)"


def _override_quant_method(ctx: Context, method: str | None) -> str | None:
    """The checkpoint's quant_method after json_model_override_args: SGLang merges the override into config.json
    before ModelConfig reads ``quantization_config`` (utils/hf_transformers/config.py:405-424 sets a dict value in place
    of the checkpoint's; 0.5.20-0.5.22 the same through config.update), and _parse_quant_hf_config reads that
    (configs/model_config.py:1727-1741). An override naming quant_method fp8 is that checkpoint (the table's FP8
    format, no override of QUANTIZATION_METHODS applies); any other ``quantization_config`` (ModelOpt, which the
    parse rewrites, AWQ/GPTQ, which the overrides rewrite, none) is not certain: None. Without one, ``method``. Only
    for a checkpoint known for certain (``method`` not None): a ModelSlim config beside other checkpoints' weights
    wins over config.json's (model_config.py:2062-2064).
    targeted-moe-40: Llama-3.1-8B with quantization awq and an fp8 quantization_config override, refused at
    model_config.py:2143."""
    override = _json_arg(ctx, "json_model_override_args")
    if method is None or not isinstance(override, dict) or "quantization_config" not in override:
        return method
    given = override["quantization_config"]
    declared = given.get("quant_method") if isinstance(given, dict) else None
    return "fp8" if isinstance(declared, str) and declared.lower() == "fp8" else None


@rule("quantization.checkpoint", sources=(
    "sglang/srt/arg_groups/serving_hook.py:695-701",
    "sglang/srt/layers/quantization/base_config.py:223-253",
))
def _checkpoint_quantization(ctx: Context, report: Report) -> None:
    """--quantization against the checkpoint's own quant_method, as SGLang's ModelConfig settles them.

    Only for checkpoints whose quant_method is known for certain (ModelFacts.quant_method: the model table, or
    sglang_model_quantization spelled modelopt_fp4 / modelopt_fp8 / none).  ``unquant`` becomes None before
    (sglang/srt/arg_groups/serving_hook.py:695-701) and ``quark_mxfp4`` requantizes any checkpoint
    (REQUANTIZATION_METHODS, model_config.py:545, :2135).  On a ModelOpt checkpoint the first override in
    QUANTIZATION_METHODS' order, ModelOptFp8Config's (sglang/srt/layers/quantization/base_config.py:223-253),
    replaces every other value by the checkpoint's method, except nvfp4_online (then only the compatibility list
    decides); on other checkpoints no override of the table's formats applies (the AWQ/GPTQ/MoE-WNA16 ones need
    those checkpoints).
    """
    quant, method = ctx.args.get("quantization"), ctx.model.quant_method
    if quant is None:
        return
    method = _override_quant_method(ctx, method)
    if method is None:
        return
    value = str(quant).lower()
    if value in ("unquant", "quark_mxfp4"):
        return
    resolved = method if method in ("modelopt_fp4", "modelopt_fp8") and value != "nvfp4_online" else value
    if resolved == "humming" and method != "mxfp4":
        return  # HummingConfig claims any checkpoint but MXFP4 (sglang/srt/layers/quantization/humming.py:503-508)
    if method and resolved != method and method not in COMPATIBLE_QUANTIZATION.get(resolved, ()):
        fits = sorted({method, "quark_mxfp4", *(k for k, v in COMPATIBLE_QUANTIZATION.items() if method in v)})
        ctx.error("quantization.checkpoint", "quantization",
                  f"quantization {quant!r} does not match the checkpoint's own quantization ({method}, "
                  f"{ctx.model.path or 'the model'}"
                  f"{'' if method == ctx.model.quant_method else ', as json_model_override_args sets it'}); "
                  "SGLang refuses the pair when it reads the model's config.",
                  f"remove sglang_args.quantization (SGLang reads it from the checkpoint) or use one of {', '.join(fits)}",
                  QUANT_SOURCE)
    elif resolved in NOT_ON_CUDA_QUANTIZATION:
        ctx.error("quantization.checkpoint", "quantization",
                  f"quantization {quant!r} is not available on NVIDIA GPUs in SGLang {ctx.schema.version} (it is "
                  "registered for other platforms only); SGLang calls it an unknown quantization method.",
                  "use gptq_marlin for a GPTQ checkpoint, or remove sglang_args.quantization", QUANT_SOURCE)
