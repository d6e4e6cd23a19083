# SPDX-License-Identifier: Apache-2.0
"""SGLang's own default resolution: what SGLang picks where the host sets nothing.

The default attention backends, page size, chunked-prefill size, MoE runner and all-to-all backends, the
speculative triple SGLang chooses, the GPUs a node's ranks use and their memory.  The rules read these to check
what SGLang will run, and the validator and the host planner use them (``gpu_ids``) without the rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES, lookup_model
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    EAGLE_FAMILY,
    MAMBA_EXTRA_BUFFER,
    _choice,
    _given,
    _int,
    _json_arg,
    _num,
    _override_architectures,
    _spec_values,
    env_true,
    nextn_as_eagle,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import added_in

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


# What SGLang's environment registry does with old names when it is imported (sglang/srt/environ.py,
# _handle_deprecated_envs: 0.5.23 :2294-2305, 0.5.22 :2039-2050, 0.5.21 :1948-1959, 0.5.20 :1909-1920): first each
# deprecated name with a replacement forwards its value to the new name (_DEPRECATED_ENVS; of those, the rules read
# only SGLANG_MOE_NVFP4_DISPATCH, forwarded from its old name until 0.5.21 removed the entry: 0.5.20 :1830), then
# every SGL_* name is copied to its SGLANG_* name, over a value written there too. The rules read the environment
# as SGLang does after that; the unit's environment keeps each name as written. A few SGL_ names SGLang also reads as
# written (READ_AS_LEGACY, {name: the first release that no longer reads it}): SGL_FORCE_SHUTDOWN in every release
# (stack.FORCE_SHUTDOWN), and until 0.5.23 SGL_CPU_QUANTIZATION (0.5.22 model_loader/loader.py:1509),
# SGL_DG_USE_NVRTC (layers/deep_gemm_wrapper/compile_utils.py:56) and SGL_USE_DEEPGEMM_BMM
# (models/deepseek_common/deepseek_weight_loader.py:670): the warning does not ask to rename those.
LEGACY_PREFIX, CURRENT_PREFIX = "SGL_", "SGLANG_"
FORWARDED_ENV = {"SGLANG_CUTEDSL_MOE_NVFP4_DISPATCH": ("SGLANG_MOE_NVFP4_DISPATCH", "0.5.21")}  # old: (new, gone in)
FORCE_SHUTDOWN_ENV = "SGL_FORCE_SHUTDOWN"
READ_AS_LEGACY: dict[str, str | None] = {FORCE_SHUTDOWN_ENV: None, "SGL_CPU_QUANTIZATION": "0.5.23",
                                         "SGL_DG_USE_NVRTC": "0.5.23", "SGL_USE_DEEPGEMM_BMM": "0.5.23"}


def legacy_alias(name: str) -> str | None:
    """The SGLANG_* name SGLang copies a legacy SGL_* entry to when it starts, or None for any other name."""
    return CURRENT_PREFIX + name[len(LEGACY_PREFIX):] if name.startswith(LEGACY_PREFIX) else None


def env_renames(ctx: Context) -> list[tuple[str, str, str]]:
    """SGLang's renames of the host's old environment names, in SGLang's order: (old, new, how). ``how`` is
    "forwarded" (a deprecated name's replacement in the context's release), "copied" (the SGL_ prefix) or "read"
    (copied, and the release also reads the old name as written: not a name to rename)."""
    renames = [(old, new, "forwarded") for old, (new, gone) in FORWARDED_ENV.items() if old in ctx.env and not added_in(ctx, gone)]
    for old in ctx.env:
        new = legacy_alias(old)
        if new is not None:
            gone = READ_AS_LEGACY.get(old, "0")
            renames.append((old, new, "copied" if gone is not None and added_in(ctx, gone) else "read"))
    return renames


def dwdp_on(ctx: Context) -> bool:
    """handle_dwdp runs (dwdp_size > 1: parallel_hook.py:433-515, run by pipeline.py:189; 0.5.22 :410, 0.5.21 :334,
    0.5.20 :266). Past its asserts (:438-457, server.parallel) it forces, for every hook and check after it: attn_dp_size
    = dwdp_size and dp_size 1 (:466-471; 0.5.20 / 0.5.21 dp_size = dwdp_size with enable_dp_attention, the same
    attention-DP width inside the one TP group), enable_dp_lm_head, moe_dense_tp_size 1, ep_size = dwdp_size, moe_dp_size
    1, moe_a2a_backend none and disable_cuda_graph (:472-507). The hooks before it (handle_deprecated_dp_attention,
    check_mega_moe_compat, handle_expert_pack, handle_pd_disaggregation: pipeline.py:45-171) read the host's values."""
    return _int(ctx, "dwdp_size", 1) > 1


def attention_dp_width(ctx: Context) -> int:
    """The attention-DP width SGLang divides chunked_prefill_size by (parallel_hook.py:314-331): attn_dp_size, or
    the deprecated dp_size + enable_dp_attention of releases that still have it (0.5.23 moves it to attn_dp_size
    first, and so does schema.deprecated_dp_attention here); 1 without attention DP. With DWDP dwdp_size, which
    handle_dwdp forces before every check its callers mirror (dwdp_on; they all run after pipeline.py:189:
    handle_cuda_graph_config on, the model overrides, handle_hicache, handle_data_parallelism, handle_context_parallelism,
    the MoE hooks, the speculative and layernorm-SP hooks, check_server_args). The DWDP probes: attn_cp_size 2 with
    dwdp_size = tp_size 4 (parallel_hook.py:162), enable_lmcache (kv_cache_hook.py:454), both refused."""
    if dwdp_on(ctx):
        return _int(ctx, "dwdp_size", 1)
    width = _int(ctx, "attn_dp_size", 1)
    if width <= 1 and ctx.args.get("enable_dp_attention") is True:
        width = _int(ctx, "dp_size", 1)
    elif deepseek_cp_attention_dp(ctx):
        # DeepSeek's prefill-CP overrides run dp_size as attention-DP groups, attn_dp_size x dp_size
        # (context_parallel_attn_dp_size, model_override_base.py:229-247; 0.5.20 / 0.5.21 turn enable_dp_attention on
        # with dp_size instead), before handle_data_parallelism divides the chunk (pipeline.py:225 before :274):
        # targeted-pd-39, tp_size 8 and dp_size 2 with MLA prefill CP, SGLang's chunk 8192 // 2.
        width = max(width, 1) * _int(ctx, "dp_size", 1)
    return max(width, 1)


def attention_dp_on(ctx: Context) -> bool:
    """Attention DP as the release's checks test it: attn_dp_enabled_of, attn_dp_size > 1 (0.5.22 on); before 0.5.22,
    which has no attn_dp_size, enable_dp_attention itself (e.g. 0.5.21 kv_cache_hook.py:454, moe_hook.py:272)."""
    if dwdp_on(ctx):  # 0.5.20 / 0.5.21's handle_dwdp sets enable_dp_attention itself (parallel_hook.py:375 in 0.5.21)
        return True
    return attention_dp_width(ctx) > 1 if added_in(ctx, "0.5.22") else ctx.args.get("enable_dp_attention") is True


def chunk_dp_width(ctx: Context) -> int:
    """What handle_data_parallelism divides chunked_prefill_size by (parallel_hook.py:326-331, pipeline.py:274), as the
    checks after it read the chunk (check_server_args' page divisibility, validation_hook.py:244; the MoE dispatch
    budgets): attention_dp_width, or dwdp_size where DWDP is on, whose handle_dwdp sets attn_dp_size = dwdp_size first
    (parallel_hook.py:466-471, pipeline.py:189; 0.5.20 / 0.5.21 set dp_size and enable_dp_attention instead,
    parallel_hook.py:302-307 / :370-375 there, the same divisor). The resolver-differential's fuzz-4-07854: dwdp_size 8
    on an A100, SGLang's chunk 8192 // 8 = 1024."""
    dwdp = _int(ctx, "dwdp_size", 1)
    return dwdp if dwdp > 1 else attention_dp_width(ctx)


def mis_chunked_prefill_off(ctx: Context) -> bool:
    """enable_mis: handle_multi_item_scoring sets chunked_prefill_size -1 (attention_hook.py:565-570, pipeline.py:263;
    0.5.20-0.5.22 the same, before handle_data_parallelism and every check that reads the chunk: check_server_args'
    page divisibility, validation_hook.py:243; the MoRI / pplx budgets, moe_hook.py:566 / :614, which skip a chunk
    off; MegaMoE's and FlashInfer A2A's refusal of it, mega_moe_hook.py:192, moe_hook.py:755; DeepEP v2's prefill
    budget, which falls back to max_prefill_tokens, moe_hook.py:644)."""
    return ctx.is_set("enable_mis")


def kv_shard_chunk(ctx: Context) -> int | None:
    """chunked_prefill_size as handle_kv_cache_sharding reads it (kv_shard_hook.py:280, pipeline.py:284; 0.5.22
    :220, pipeline.py:272): -1 with enable_mis (pipeline.py:263), else the written chunk or the default by the GPUs'
    memory (handle_gpu_memory_settings, pipeline.py:218), floor-divided by chunk_dp_width (handle_data_parallelism,
    pipeline.py:274). None where the memory is not known or the chunk is not a number."""
    if mis_chunked_prefill_off(ctx):
        return -1
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is None:
        chunk = default_chunked_prefill_size(gpu_memory_mib(ctx)[0])
    if not isinstance(chunk, int) or isinstance(chunk, bool):
        return None
    return chunk // chunk_dp_width(ctx)


def kv_shard_rounds_chunk(ctx: Context) -> bool:
    """enable_kv_cache_sharding (new in 0.5.22): handle_kv_cache_sharding rounds chunked_prefill_size up to a multiple
    of the page size (kv_shard_hook.py:287-292; 0.5.22 :227-232) before check_server_args' page divisibility reads it
    (validation_hook.py:244), or refuses the launch before that (its own checks, server.kv_shard; :99-104 outside a
    PD prefill server, server.combination). Either way that check never refuses a sharded launch: the rules that
    mirror it (numeric.chunked_prefill_size, memory.chunked_page) stay silent."""
    return added_in(ctx, "0.5.22") and ctx.is_set("enable_kv_cache_sharding")


def transfer_backend(ctx: Context) -> str:
    """disaggregation_transfer_backend as SGLang's checks read it: mooncake_tcp is Mooncake with the TCP transport
    forced, which handle_pd_disaggregation rewrites to mooncake (and sets MC_FORCE_TCP) before any other hook reads the
    backend (pd_disaggregation_hook.py:30-36; 0.5.20-0.5.22 :29-35 / :30-36; pipeline.py:147, the unified pool's
    check at :338). fuzz-13-04614: enable_unified_memory on a PD prefill server with mooncake_tcp, which the rules had
    refused as "not mooncake" (kv_cache_hook.py:537) and SGLang accepts."""
    transfer = _choice(ctx, "disaggregation_transfer_backend", "mooncake")
    return "mooncake" if transfer == "mooncake_tcp" else transfer


def capture_only(ctx: Context) -> bool:
    """enable_return_aux_hidden_states (0.5.23): speculative_algorithm only names the capture convention, and
    _handle_aux_hidden_state_capture resets it to None before any speculative hook reads it (validation_hook.py:748-753,
    run by pipeline.py:94 before the speculative, KV-cache and unified-pool hooks), so no check keyed on the algorithm
    runs (the capture's own checks: speculative._aux_hidden_states)."""
    return added_in(ctx, "0.5.23") and ctx.is_set("enable_return_aux_hidden_states")


def decode_host_receive_on(ctx: Context) -> bool:
    """Whether handle_pd_disaggregation turns the decode host receive on, and with it
    disaggregation_decode_retraction_backup host_pool (pd_disaggregation_hook.py:68-80, with or without PD
    disaggregation): disaggregation_decode_host_receive_threshold below 1 from 0.5.22 (the default 1.0 is off), above
    0 in 0.5.21 (its default 0 is off; :57-69 there); 0.5.20 has no threshold. A threshold outside [0, 1] is refused
    first (:65)."""
    share = _num(ctx, "disaggregation_decode_host_receive_threshold")
    if share is None or not 0 <= share <= 1 or not added_in(ctx, "0.5.21"):
        return False
    return share < 1 if added_in(ctx, "0.5.22") else share > 0


def nvfp4_kv_decodes_with_trtllm_mha(ctx: Context) -> bool:
    """handle_nvfp4_prefill_kv_dequant_dtype (kv_cache_hook.py:77-89, new in 0.5.21): an NVFP4 KV cache decodes with
    trtllm_mha (server.kv_cache refuses another decode backend)."""
    return ctx.args.get("kv_cache_dtype") == "nvfp4" and added_in(ctx, "0.5.21")


def auto_spec_triple(ctx: Context, algo: str) -> tuple[int, int, int]:
    """_auto_choose_speculative_params (speculative_hook.py:1430-1461): (num_steps, eagle_topk, num_draft_tokens)
    SGLang picks when none of the three is set."""
    return (3, 1, 4) if algo == "STANDALONE" else ctx.model.spec_auto


def adaptive_stays_on(ctx: Context) -> bool:
    """speculative_adaptive as SGLang keeps it: _maybe_disable_adaptive (speculative_hook.py:1375-1389) turns it off,
    with a warning, unless adaptive_unsupported_reason (speculative/adaptive_spec_params.py:56-100) finds nothing:
    EAGLE or EAGLE3 (NEXTN resolves to EAGLE), speculative_eagle_topk unset or 1, no attention DP (nor an EP scale
    joiner, which runs its DP-attention paths: runtime_context.py:191-199), no multi-layer EAGLE, two-batch overlap
    or PD multiplexing.  Where it is off, _handle_eagle_family's own triple checks run (speculative_hook.py:1159)."""
    raw = _choice(ctx, "speculative_algorithm", "").upper()
    return ctx.is_set("speculative_adaptive") and nextn_as_eagle(raw) in ("EAGLE", "EAGLE3") \
        and _num(ctx, "speculative_eagle_topk") in (None, 1) and not attention_dp_on(ctx) \
        and _choice(ctx, "ep_join_mode", "") != "scale" \
        and not any(ctx.is_set(d) for d in ("enable_multi_layer_eagle", "enable_two_batch_overlap", "enable_pdmux"))


def effective_eagle_topk(ctx: Context, algo: str) -> int | float | None:
    """speculative_eagle_topk as an EAGLE-family algorithm runs it: the host's value, else, with none of the triple
    set, SGLang's choice (auto_spec_triple) or 1 where speculative_adaptive stays on; None where the model is not
    known. None under the aux hidden-state capture (capture_only): no speculative algorithm runs, so SGLang chooses no
    triple and leaves speculative_eagle_topk unset (the resolver-differential's fuzz-3-03937, fuzz-1-03533,
    fuzz-1-04863: EAGLE3 with enable_return_aux_hidden_states; every rule reading this skips the capture already)."""
    if capture_only(ctx):
        return None
    topk = _num(ctx, "speculative_eagle_topk")
    if topk is None and all(v is None for v in _spec_values(ctx)):
        topk = 1 if adaptive_stays_on(ctx) else auto_spec_triple(ctx, algo)[1] if (
            algo == "STANDALONE" or ctx.model.known) else None
    return topk


# More GPUs than any host has (nvidia_gpu_count is refused above this): the sizes are typos, and a list of
# that many GPU ids would only exhaust the controller's memory.
MAX_GPUS_PER_HOST = 1024


def _per_node(ctx: Context) -> int:
    """The ranks (GPUs) on one node: tp * pp / nnodes, times dp_size for data-parallel replicas. dp_size with
    enable_dp_attention (the spelling before 0.5.23, which schema.deprecated_dp_attention turns into attn_dp_size
    from 0.5.23 on) is attention-DP groups inside the one TP group, no extra GPUs: the DP controller launches the TP
    group's ranks once (launch_dp_attention_schedulers, sglang/srt/managers/data_parallel_controller.py:206-214 in
    0.5.21). A probe found parallel.gpus asking 16 GPUs for tp_size 4, dp_size 4 and enable_dp_attention."""
    tp, pp, dp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), _int(ctx, "dp_size", 1)
    if ctx.args.get("enable_dp_attention") is True or dwdp_on(ctx) or deepseek_cp_attention_dp(ctx):
        # DWDP: handle_dwdp sets dp_size 1 (0.5.20 / 0.5.21: dp_size = dwdp_size with enable_dp_attention), one TP
        # group of tp_size ranks whatever dp_size the host wrote (dwdp_on). DeepSeek's prefill CP: the same
        # (deepseek_cp_attention_dp).
        dp = 1
    return max(tp * pp // max(_int(ctx, "nnodes", 1), 1) * dp, 1)


def gpu_ids(ctx: Context) -> list[int]:
    """The GPU indices this node's ranks use: tp*pp/nnodes*dp of them, from base_gpu_id every gpu_id_step.

    At most MAX_GPUS_PER_HOST of them (rule ``parallel.gpus`` refuses more).
    """
    base, step = _int(ctx, "base_gpu_id", 0), _int(ctx, "gpu_id_step", 1)
    return [base + k * step for k in range(min(_per_node(ctx), MAX_GPUS_PER_HOST))]


def instance_gpus(ctx: Context) -> list[int]:
    """The GPU indexes (as the facts number them) the instance's ranks on this node use."""
    return list(ctx.host_gpus) if ctx.host_gpus is not None else gpu_ids(ctx)


def gpu_memory_mib(ctx: Context) -> tuple[int | None, str]:
    """(memory of each GPU in MiB, where that came from): nvidia_gpu_memory_mib, else the smallest memory_mib of
    the instance's GPUs in the facts; (None, "") when neither says (GB10's unified memory reports none)."""
    if ctx.gpu_memory_mib is not None:
        return ctx.gpu_memory_mib, ctx.gpu_memory_source
    if ctx.facts is None:
        return None, ""
    by_index = {g.get("index"): g.get("memory_mib") for g in ctx.facts["gpus"]}
    ids = instance_gpus(ctx)
    sizes = [by_index.get(i) for i in ids]
    if not sizes or not all(isinstance(m, int) and not isinstance(m, bool) and m > 0 for m in sizes):
        return None, ""
    return min(sizes), f"nvidia_gpu_facts, the smallest of GPUs {ids}"


# sglang/srt/utils/hf_transformers/common.py:668-674: the first of these the text config has is its length.
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")


CONTEXT_SOURCE = ("sglang/srt/configs/model_config.py:1291-1316 (checks against get_context_length, "
                  "sglang/srt/utils/hf_transformers/common.py:677-692)")


def derived_context_length(ctx: Context, base_rope: Mapping[str, Any] | None = None) -> int | None:
    """The model's maximum context as SGLang derives it, after json_model_override_args.

    SGLang json-loads the overrides (sglang/srt/configs/model_config.py:612) and applies them to config.json:
    a rope_scaling/rope_parameters mapping is merged into the existing one, anything else set
    (sglang/srt/utils/hf_transformers/config.py:405-422); vision-language configs take the language model's
    settings from "text_config" (common.py:547-613; there a mapping replaces rope_scaling, which reads the same
    for the table's models: they have no rope factor of their own).  get_context_length (common.py:677-692) then
    multiplies the first length key by rope_scaling's factor, unless rope_scaling names
    original_max_position_embeddings or rope_type llama3 (the length is the scaled one then).  The table's
    max_context is that length as shipped (its key is max_position_embeddings, the last SGLang looks at, so any
    length key of the override wins); ``base_rope`` (default: the table's) is the checkpoint's own rope_scaling.
    """
    limit = ctx.model.max_context
    raw = ctx.args.get("json_model_override_args")
    try:
        override = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        override = None
    if ctx.model.text_config and isinstance(override, dict):
        override = override.get("text_config")
    if not limit or not isinstance(override, dict):
        return limit
    rope = dict((ctx.model.rope_scaling or {}) if base_rope is None else base_rope)
    for key in ("rope_scaling", "rope_parameters"):
        if key in override:
            rope = {**rope, **override[key]} if isinstance(override[key], dict) else dict(override[key] or {})
    length = next((override[k] for k in CONTEXT_LENGTH_KEYS if override.get(k) is not None), limit)
    factor = rope.get("factor", 1) if rope else 1
    if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
        factor = 1
    try:
        return int(factor * length)
    except (TypeError, ValueError):
        return limit  # not numbers: SGLang fails on them elsewhere


def table_deepseek_v3(ctx: Context) -> bool:
    """The served checkpoint is one of the model table's DeepseekV3ForCausalLM checkpoints (DeepSeek-V3, R1 and their
    NVFP4 exports, sglang_models.CHECKPOINTS), whose config.json has no index_topk: an MLA model, not a DSA model for
    SGLang (is_deepseek_dsa, sglang/srt/configs/model_config.py:191-212). json_model_override_args naming index_topk
    makes it one (dsa_override): then it is not this (targeted-arch-02, -12, -50: false alarms on the DSA switches)."""
    table = lookup_model(ctx.model.path)
    return table.known and table.architecture == ctx.model.architecture == "DeepseekV3ForCausalLM" and \
        dsa_override(ctx) is None


def dsa_override(ctx: Context) -> dict[str, Any] | None:
    """json_model_override_args as SGLang merges it into config.json, where it names index_topk (not null) on
    DeepSeek-V3 / V3.2 (the table's architectures, after its own ``architectures``; also renamed by it to GLM-5 or
    LongCat-Flash, DSA_OVERRIDE_ARCHITECTURES): is_deepseek_dsa reads
    hf_config.index_topk after the merge (sglang/srt/configs/model_config.py:191-212, the same in 0.5.20-0.5.22), so
    the model is a DSA model whatever config.json says; None otherwise (what config.json says decides: the
    preflight's)."""
    override = _model_override(ctx)
    if not override or override.get("index_topk") is None or not ctx.model.known or \
            ctx.model.architecture not in DSA_OVERRIDE_ARCHITECTURES:
        return None
    return override


# The architectures dsa_override claims (ctx.model.architecture: json_model_override_args' architectures[0] where it
# renames the table's DeepSeek-V3, model_after_overrides): in is_deepseek_dsa's list (configs/model_config.py:191-212)
# and the DeepSeek family's (_DEEPSEEK_FAMILY_ARCHS, overrides.py:745-760; the same lists in 0.5.20-0.5.22), whose DSA
# KV-dtype and backend resolution the DeepSeek-V3 fixture renamed confirmed (GLM-5's SM120 FP8 arm: dsa_glm_sm12_fp8).
# Not claimed: the multimodal, HYV4 (own CP / DCP refusals, deepseek_v2.py:60-76) and NextN ones.
DSA_OVERRIDE_ARCHITECTURES = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
                              "LongcatFlashForCausalLM")


def dsa_glm_sm12_fp8(ctx: Context) -> bool:
    """GLM-5 (GlmMoeDsaForCausalLM) with an fp8_e4m3 KV cache on SM120 / SM121 and no learnable sinks: SGLang's DSA
    backend resolution fills flashinfer_sparse_mla for both and returns before the HiSparse arm and the backend
    constraints (is_glm_sm12_fp8, overrides.py:637-642, 665-675; 0.5.22 :613-618, 0.5.21 :608-613, 0.5.20 :704-709)."""
    cc = ctx.compute_capability
    return ctx.model.architecture == "GlmMoeDsaForCausalLM" and cc is not None and cc[0] == 12 and \
        dsa_kv_cache_dtype(ctx) == "fp8_e4m3" and not (dsa_override(ctx) or {}).get("learnable_sink")


def dsa_kv_cache_dtype(ctx: Context) -> str | None:
    """The KV cache dtype SGLang runs a DSA-by-override model (dsa_override) with on a CUDA GPU:
    _dsa_kv_cache_dtype_default (sglang/srt/arg_groups/overrides.py:491-547; 0.5.22 :467-523, 0.5.21 :465-521,
    0.5.20 :559-615), run by handle_model_specific_adjustments before the DSA backends resolve: kv_cache_dtype auto is
    fp8_e4m3 on SM100 and newer (major >= 10) without learnable_sink, bfloat16 otherwise; bf16 reads bfloat16. None
    where it is not certain: no DSA by override, another device, the GPU generation unknown with auto, a dtype DSA
    refuses (_dsa_by_override's), tokenspeed_mla (which sets fp8_e4m3 first, serving_hook.py:324-330)."""
    override = dsa_override(ctx)
    if override is None or _choice(ctx, "device", "cuda") != "cuda" or "tokenspeed_mla" in (
            str(ctx.args.get("attention_backend")), str(ctx.args.get("decode_attention_backend"))):
        return None
    kv = _choice(ctx, "kv_cache_dtype", "auto")
    if kv == "auto":
        cc = ctx.compute_capability
        if cc is None:
            return None
        return "fp8_e4m3" if cc[0] >= 10 and not override.get("learnable_sink") else "bfloat16"
    return {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8_e4m3"}.get(kv)


def dsa_backends(ctx: Context) -> tuple[str, str] | None:
    """(dsa_prefill_backend, dsa_decode_backend) as SGLang resolves them for a DSA-by-override model on a CUDA GPU
    (_dsa_split_backend_resolution, overrides.py:601-741; 0.5.22 :577-717, 0.5.21 :567-698, 0.5.20 :664-794), the KV
    dtype dsa_kv_cache_dtype's: a written backend stays; DSA decode context parallelism (dcp_size > 1, 0.5.22 on) fills
    trtllm first (_dsa_dcp_overrides, model_overrides/deepseek_v2.py:27-31); learnable_sink flashmla_sparse for both;
    GLM-5's SM120 FP8 flashinfer_sparse_mla for both (dsa_glm_sm12_fp8); HiSparse flashmla_kv with an fp8_e4m3 KV
    cache, flashmla_sparse with bfloat16 (_hisparse_default_backend, hisparse_hook.py:26-29); otherwise fp8_e4m3
    trtllm on SM100 and newer and flashmla_kv below, bfloat16 flashmla_sparse for prefill and trtllm (SM100+) or fa3
    for decode (overrides.py:711-726). None where the KV dtype
    or, for a default, the GPU generation is not certain."""
    kv = dsa_kv_cache_dtype(ctx)
    if kv is None:
        return None
    override = dsa_override(ctx) or {}
    written = [str(ctx.args.get(d)) if _given(ctx, d) else None for d in ("dsa_prefill_backend", "dsa_decode_backend")]
    if _int(ctx, "dcp_size", 1) > 1 and added_in(ctx, "0.5.22"):
        written = [w or "trtllm" for w in written]
    cc = ctx.compute_capability
    if None in written and cc is None:
        return None
    blackwell = cc is not None and cc[0] >= 10
    if override.get("learnable_sink"):
        default = ("flashmla_sparse", "flashmla_sparse")
    elif dsa_glm_sm12_fp8(ctx):
        default = ("flashinfer_sparse_mla",) * 2
    elif ctx.is_set("enable_hisparse"):
        default = ("flashmla_kv",) * 2 if kv == "fp8_e4m3" else ("flashmla_sparse",) * 2
    elif kv == "fp8_e4m3":
        default = ("trtllm",) * 2 if blackwell else ("flashmla_kv",) * 2
    else:
        default = ("flashmla_sparse", "trtllm" if blackwell else "fa3")
    return written[0] or default[0], written[1] or default[1]


def dsa_attention_backend(ctx: Context) -> str | None:
    """The attention backend the DeepSeek-family override declares for a DSA-by-override model (dsa_override) when
    none of attention_backend, prefill_attention_backend and decode_attention_backend is set: dsa, on every platform
    (_deepseek_family_overrides, model_overrides/deepseek_v2.py:99-104, is_attention_backend_not_set
    model_override_base.py:176-182; 0.5.22 :99-104, 0.5.21 :78-81, 0.5.20 :85-88), where the MLA DeepSeek-V3 gets
    trtllm_mla on SM100 and get_default_attn_backend's MLA pick elsewhere (the targeted set's targeted-arch-02, -10,
    -18: triton, trtllm_mla, fa3 against SGLang's dsa). None otherwise (a backend written: get_default_attn_backend's
    MLA pick fills the base, default_attention_backend)."""
    if dsa_override(ctx) is None or any(_given(ctx, d) for d in _ALL_DESTS):
        return None
    return "dsa"


DSA_PAGE = 64


def dsa_page_size(ctx: Context) -> int | None:
    """The page size the DeepSeek-family override declares for a DSA-by-override model on a CUDA GPU, whatever the
    host wrote: 64 x index_kpool (get_dsa_index_kpool, configs/model_config.py:530-531: 1 unless the merged config
    names it; model_overrides/deepseek_v2.py:162-172, 0.5.22 :163-173), 64 in 0.5.20 / 0.5.21 (:144, :137). The
    page-size handling of handle_attention_backend_compatibility reads it afterwards (resolved_page_size: trtllm_mla
    makes 128 64). None where it is not certain: no DSA by override, another device (ROCm's legacy path sets 1, XPU
    128: deepseek_v2.py:151-176), an index_kpool that is not a positive number. The targeted set's targeted-arch-02,
    -08, -12 (page 1 against SGLang's 64); chunked_prefill_size 1000 is refused then (validation_hook.py:244)."""
    override = dsa_override(ctx)
    if override is None or _choice(ctx, "device", "cuda") != "cuda":
        return None
    if not added_in(ctx, "0.5.22"):
        return DSA_PAGE
    kpool = override.get("index_kpool", 1)
    if not isinstance(kpool, int) or isinstance(kpool, bool) or kpool < 1:
        return None
    return DSA_PAGE * kpool


def dsa_prefill_cp_a2a_certain(ctx: Context) -> bool:
    """DSA prefill context parallelism on a DSA-by-override model on a CUDA GPU: the DeepSeek-family override's DSA
    branch sets moe_a2a_backend deepep for cp_strategy zigzag only and leaves it alone otherwise
    (model_overrides/deepseek_v2.py:105-122; 0.5.22 :105-117, 0.5.21 :83-91, 0.5.20 :90-98), not the MLA branch's
    deepep whatever the strategy (mla_prefill_cp_deepep): what the checks read is certain (dsa_prefill_cp_deepep, else
    the host's). The targeted set's targeted-arch-02, -18 (interleave: ours deepep, SGLang's none)."""
    return ctx.is_set("enable_prefill_cp") and dsa_override(ctx) is not None and _choice(ctx, "device", "cuda") == "cuda"


def dsa_prefill_cp_deepep(ctx: Context) -> bool:
    """dsa_prefill_cp_a2a_certain with cp_strategy zigzag: deepep (deepseek_v2.py:115-117)."""
    return dsa_prefill_cp_a2a_certain(ctx) and _choice(ctx, "cp_strategy", "") == "zigzag"


def _a2a_may_change(ctx: Context) -> bool:
    """DeepSeek's prefill context-parallel overrides set moe_a2a_backend deepep themselves
    (sglang/srt/arg_groups/model_overrides/deepseek_v2.py:117, 201): with enable_prefill_cp on an MLA or unknown model,
    the backend SGLang checks may not be the one written. Both branches run only under enable_prefill_cp (:106, :191;
    0.5.22 :106, :192, 0.5.21 :84, :156, 0.5.20 :91, :163), and nothing else in SGLang sets the backend but
    enable_waterfill (handled_a2a_backend): attn_cp_size alone leaves it as written."""
    return ctx.is_set("enable_prefill_cp") and (not ctx.model.known or ctx.model.mla)


def prefill_cp_sets_moe_dense_tp(ctx: Context) -> bool:
    """DeepSeek's prefill context-parallel override sets moe_dense_tp_size 1 whatever was written, before check_server_args
    reads it: the MLA branch always (model_overrides/deepseek_v2.py:200; 0.5.22 :201, 0.5.21 :163, 0.5.20 :170), the
    DSA branch of a DSA-by-override model for zigzag only from 0.5.22 (:116), for any strategy before (0.5.21 :89, 0.5.20
    :96). True there, and where the override may apply but its branch is not certain (_a2a_may_change: an unknown or
    renamed MLA model). The seed-18 10,000-case run's false alarm fuzz-18-05333, moe_dense_tp_size 0 on DeepSeek-V3 with
    zigzag prefill CP."""
    if not _a2a_may_change(ctx):
        return False
    if dsa_prefill_cp_a2a_certain(ctx):
        return dsa_prefill_cp_deepep(ctx) or not added_in(ctx, "0.5.22")
    return True


def v2_lora_unsupported_mode(ctx: Context) -> str | None:
    """_check_v2_lora_modes (sglang/srt/arg_groups/lora_hook.py:20-30): what the triton_v2 LoRA paths do not run."""
    for bad, mode in (
        # attention_dp_width: handle_dwdp's attn_dp_size = dwdp_size, before check_server_args runs this (dwdp_on).
        (attention_dp_width(ctx) > 1, "attn_dp_size > 1 (DP attention)"),
        (ctx.is_set("enable_pdmux"), "enable_pdmux (PD-multiplexing)"),
        (ctx.is_set("enable_two_batch_overlap"), "enable_two_batch_overlap"),
        (env_true(ctx.env, "SGLANG_EXPERIMENTAL_LORA_OPTI"), "sglang_env.SGLANG_EXPERIMENTAL_LORA_OPTI"),
    ):
        if bad:
            return mode
    return None


def _fa3_everywhere(ctx: Context) -> bool:
    """fa3 chosen for prefill and decode: then the profile's attention rule refuses it, for the reason it fails."""
    base = _choice(ctx, "attention_backend", "")
    return all(_choice(ctx, d, base) == "fa3" for d in ("prefill_attention_backend", "decode_attention_backend"))


# _handle_dflash's block size when neither speculative_num_draft_tokens nor speculative_dflash_block_size is set
# (speculative_hook.py:389-424; 0.5.22 :364-400, 0.5.21 :342-378, 0.5.20 :286-321): the draft's config.json,
# json_model_override_args merged in, is read for dflash_config.block_size or a top-level block_size
# (speculative/dflash_utils.py:588-617); without one, or when reading it fails, 16.
DFLASH_DEFAULT_BLOCK = 16
_DFLASH_CONFIG_KEYS = ("dflash_config", "block_size", "num_target_layers", "num_hidden_layers", "text_config")


def _model_override(ctx: Context) -> dict[str, Any] | None:
    """json_model_override_args as the mapping SGLang merges into config.json: {} when unset, None when it is not a
    JSON object (SGLang's own json.loads or merge fails first, or reads it otherwise: not the table's to decide)."""
    override = _json_arg(ctx, "json_model_override_args")
    if override is None:
        return None if str(ctx.args.get("json_model_override_args") or "").strip() else {}
    return override if isinstance(override, dict) else None


def dflash_draft_block_size(ctx: Context) -> int | None:
    """The DFLASH block size SGLang infers from the draft model, where it is known without the draft's files: the
    draft is one of the model table's checkpoints (sglang_models.CHECKPOINTS, target models whose config.json has no
    DFLASH block size) and json_model_override_args, which SGLang merges into the draft's config too, names none of
    the keys the parse reads. None (only the on-host preflight can tell) for any other draft."""
    if not lookup_model(ctx.args.get("speculative_draft_model_path")).known:
        return None
    override = _model_override(ctx)
    if override is None or any(key in override for key in _DFLASH_CONFIG_KEYS):
        return None
    return DFLASH_DEFAULT_BLOCK


# The model table's architectures that is_hybrid_swa_model names (sglang/srt/configs/model_config.py:2651-2697: its
# SWA_SINK_ARCHS, :88-96); the table's others have no sliding-window layers.
HYBRID_SWA_ARCHITECTURES = ("GptOssForCausalLM",)


def hybrid_swa(ctx: Context) -> bool:
    """ModelConfig.is_hybrid_swa for the model table's architectures (off with disable_hybrid_swa_memory,
    model_config.py:1213-1217): HYBRID_SWA_ARCHITECTURES, or json_model_override_args opting the language model's
    config in with is_hybrid_swa true (is_hybrid_swa_model, :2693-2696: the text config, config.json's text_config for
    the vision-language checkpoints). unreached-unified-pd-offload-hybrid-swa-refused: Llama-3.1-8B opted in, the
    unified pool's decode KV offload (kv_cache_hook.py:578), was MISSED."""
    if ctx.is_set("disable_hybrid_swa_memory") or ctx.model.architecture not in ARCHITECTURES:
        return False
    override = _model_override(ctx) or {}
    text = override.get("text_config") if ctx.model.text_config else override
    return ctx.model.architecture in HYBRID_SWA_ARCHITECTURES or (
        isinstance(text, dict) and text.get("is_hybrid_swa") is True)


def unified_memory_target(ctx: Context) -> bool | None:
    """Whether the target is what handle_unified_memory_pool calls a unified target for EAGLE / EAGLE3
    (kv_cache_hook.py:608-614; 0.5.22 :606-612): hybrid SWA (ModelConfig.is_hybrid_swa, off with
    disable_hybrid_swa_memory, model_config.py:1213-1217) or a Mamba-like hybrid (mambaish_config,
    configs/hybrid_arch.py:145-155: the table's hybrid linear attention). None when only the checkpoint's config.json
    can tell: an architecture outside the model table (sglang_models.ARCHITECTURES), or json_model_override_args
    setting is_hybrid_swa, which is_hybrid_swa_model reads too (:2693-2696)."""
    override = _model_override(ctx) if ctx.model.architecture in ARCHITECTURES else None
    text = override.get("text_config") if override is not None else None
    if override is None or "is_hybrid_swa" in override or (isinstance(text, dict) and "is_hybrid_swa" in text):
        return None
    return hybrid_swa(ctx) or ctx.model.hybrid_linear_attention


# The architectures SGLang 0.5.23 runs DeepEP v2 MoE for (sglang/srt/configs/moe_model_registry.py:20-28).
DEEPEP_V2_ARCHITECTURES = ("DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Qwen3MoeForCausalLM",
                           "Glm5NextForConditionalGeneration", "GlmMoeDsaForCausalLM", "MiMoV2ForCausalLM",
                           "MiMoV2FlashForCausalLM")


# How many of them each release has: the first three in 0.5.20 (moe_hook.py:616-620 there), Glm5Next added in
# 0.5.21 (moe_model_registry.py:20-25 there), the rest in 0.5.22.
DEEPEP_V2_SINCE = (("0.5.22", 7), ("0.5.21", 4), ("0.5.20", 3))


def deepep_v2_architectures(ctx: Context) -> tuple[str, ...]:
    """DEEPEP_V2_ARCHITECTURES as far as the context's release has them."""
    return DEEPEP_V2_ARCHITECTURES[:next((n for version, n in DEEPEP_V2_SINCE if added_in(ctx, version)), 3)]


# _handle_gpu_memory_settings (sglang/srt/arg_groups/memory_hook.py:88-180): the default chunked_prefill_size by
# the GPU's memory in MiB (upper bound exclusive, size).
CHUNKED_PREFILL_DEFAULTS = ((20 * 1024, 2048), (35 * 1024, 4096), (60 * 1024, 4096), (90 * 1024, 8192),
                            (160 * 1024, 8192), (None, 16384))


def default_chunked_prefill_size(mib: int | None) -> int | None:
    """SGLang's chunked_prefill_size for GPUs of ``mib`` MiB; None when the memory is not known."""
    if mib is None:
        return None
    return next(size for bound, size in CHUNKED_PREFILL_DEFAULTS if bound is None or mib < bound)


# The GPUs of each architecture family, by memory, where that settles SGLang's default chunked_prefill_size without
# the memory figure (facts not gathered): every SM80-SM89, Hopper and SM120 GPU has under 160 GiB (A100 and H100
# 80 GB, H200 141 GB, RTX PRO 6000 96 GB: 2048-8192), every SM100/SM103 GPU more (B200 180 GB, GB200 186 GB, B300
# 288 GB: 16384).
# GB10 (12.1, DGX Spark and its OEM twins, all 128 GB of unified LPDDR5X): nvidia-smi answers the memory.total query
# with "[N/A]" (NVIDIA's DGX Spark known issues), so get_nvgpu_memory_capacity finds no number
# (sglang/srt/utils/common.py:818-829) and falls back to torch.cuda.mem_get_info()'s total (common.py:769-795),
# which is the unified pool CUDA sees, about 121.7 GiB: between 90 and 160 GiB, so 8192
# (sglang/srt/arg_groups/memory_hook.py:146-157). The facts carry no memory for it (gpu_memory_mib), hence this entry.
# Thor (11.0, Jetson AGX Thor) has unified memory too, 64 GB (T4000) or 128 GB (T5000) modules: the pool CUDA sees
# is under 60 GiB or just over it on the 64 GB module (4096 or 8192) and about 120 GiB on the 128 GB one (8192), so
# 4096 or 8192, never 16384.
_CHUNK_DEFAULTS_BY_CC = {(8, None): (2048, 4096, 8192), (9, 0): (2048, 4096, 8192), (12, 0): (2048, 4096, 8192),
                         (12, 1): (8192,), (11, 0): (4096, 8192), (10, 0): (16384,), (10, 3): (16384,)}


def possible_default_chunked_prefill_sizes(ctx: Context) -> tuple[int, ...]:
    """The chunked_prefill_size defaults SGLang may settle on for this host: the one for the GPUs' memory when known,
    else those of the architecture's GPUs (_CHUNK_DEFAULTS_BY_CC), else every default."""
    known = default_chunked_prefill_size(gpu_memory_mib(ctx)[0])
    if known is not None:
        return (known,)
    cc = ctx.compute_capability
    if cc is not None:
        for (major, minor), sizes in _CHUNK_DEFAULTS_BY_CC.items():
            if cc[0] == major and minor in (None, cc[1]):
                return sizes
    return tuple(sorted({s for _, s in CHUNKED_PREFILL_DEFAULTS}))


# _handle_gpu_memory_settings' decode CUDA-graph max_bs by the GPU's memory (memory_hook.py:88-180; the same tiers in
# 0.5.20-0.5.22): (upper bound in MiB, exclusive; the tier's default chunked_prefill_size, CHUNKED_PREFILL_DEFAULTS;
# max_bs with tp_size < 4; with tp_size >= 4).
DECODE_GRAPH_MAX_BS_DEFAULTS = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
                                (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512), (None, 16384, 512, 512))


def default_decode_graph_max_bs(ctx: Context) -> int:
    """The least decode CUDA-graph max_bs SGLang may default to on this host (memory_hook.py:88-180): the one for the
    GPUs' memory when known, else the least of the tiers whose default chunk the capability's GPUs get
    (possible_default_chunked_prefill_sizes: 512 on SM100 / SM103, whose GPUs all have 160 GiB or more)."""
    small = _int(ctx, "tp_size", 1) < 4
    mib, chunks = gpu_memory_mib(ctx)[0], possible_default_chunked_prefill_sizes(ctx)
    if mib is not None:
        return next(few if small else many for bound, _, few, many in DECODE_GRAPH_MAX_BS_DEFAULTS
                    if bound is None or mib < bound)
    return min(few if small else many for _, chunk, few, many in DECODE_GRAPH_MAX_BS_DEFAULTS if chunk in chunks)


# What may turn the decode CUDA graph off, or stand for a graph SGLang sizes otherwise, before
# validate_deepep_v2_dispatch_token_budget reads it: the graph flags and config (cuda_graph_hook.py:32-100),
# speculative decoding (tokens per request and its own max_running_requests, speculative_hook.py:442 ...), and
# whatever turns every graph off (cuda_graphs_unsettled).
_DECODE_GRAPH_UNSETTLED = ("disable_cuda_graph", "disable_decode_cuda_graph", "cuda_graph_config", "cuda_graph_max_bs",
                           "speculative_algorithm")


def cuda_graphs_unsettled(ctx: Context) -> bool:
    """Whether something may turn every CUDA graph off, or size it otherwise, whatever the phase: tensor dumps
    (serving_hook.py:545-580), diffusion LLMs (dllm_hook.py:35-48), a device other than cuda, which xpu, cpu, npu and
    hpu turn off or size otherwise (platform_hook.py:113-190), torch_native / flex_attention (attention_hook.py:122-160).
    What the decode graph's and the prefill graph's readers share (deepep_v2_decode_graph_requests,
    moe._prefill_graph_max_bs)."""
    return any(_given(ctx, d) for d in ("debug_tensor_dump_output_folder", "msprobe_dump_config", "dllm_algorithm")) \
        or _choice(ctx, "device", "cuda") != "cuda" \
        or any(_choice(ctx, d, "") in ("torch_native", "flex_attention") for d in _ALL_DESTS)


# The EAGLE family (NEXTN is EAGLE's alias) but STANDALONE, whose handler settles the draft-token count written
# below and sets max_running_requests 48 when it is unset (_handle_eagle_family, speculative_hook.py:1072-1283).
_EAGLE_FAMILY = EAGLE_FAMILY - {"STANDALONE"}


def speculative_decode_tokens(ctx: Context) -> int | None:
    """Tokens per request of the largest decode / verify forward, as the speculative handlers resolve
    speculative_num_draft_tokens: 1 without speculative decoding (the aux-hidden-state capture resets the algorithm,
    capture_only); for the EAGLE family with speculative_eagle_topk 1 and speculative_num_steps written, or none of the
    triple written on a known model (SGLang's auto choice, auto_spec_triple; no adaptive steps),
    speculative_num_steps + 1 whatever speculative_num_draft_tokens says (speculative_hook.py:1255-1266; 0.5.22
    :1165-1176, 0.5.20 :969-980). None otherwise: not settled here."""
    if not _given(ctx, "speculative_algorithm") or capture_only(ctx):
        return 1
    if str(ctx.args.get("speculative_algorithm")).upper() not in _EAGLE_FAMILY or ctx.is_set("speculative_adaptive"):
        return None
    steps, topk = ctx.args.get("speculative_num_steps"), ctx.args.get("speculative_eagle_topk")
    if ctx.model.known and all(v is None for v in _spec_values(ctx)):
        # None of the triple written: _auto_choose_speculative_params' choice (speculative_hook.py:1159-1174,
        # 1430-1461; auto_spec_triple), e.g. DeepSeek-V3 NEXTN (3, 1, 4): 4 tokens per request.
        steps, topk = auto_spec_triple(ctx, str(ctx.args.get("speculative_algorithm")).upper())[:2]
    if topk != 1 or isinstance(topk, bool) or not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        return None
    return steps + 1


def deepep_v2_decode_graph_requests(ctx: Context, speculative: bool = False,
                                    per_rank_cap: bool = True) -> tuple[int, str] | None:
    """(requests per rank, how) of the largest decode CUDA graph as _decode_graph_dispatch_tokens_per_rank reads it
    (moe_hook.py:656-676; 0.5.22 :580-600, 0.5.20 :569-585 and 0.5.21 :576-592 inline, the same figure): the graph's max_bs (the largest of
    cuda_graph_bs_decode, else cuda_graph_max_bs_decode, else default_decode_graph_max_bs capped by
    max_running_requests, memory_hook.py:182-188), then capped by max_running_requests // attn_dp_size where that is set.
    A lower bound where the GPUs' memory is not known. None where the graph may be off or sized otherwise
    (_DECODE_GRAPH_UNSETTLED, a device other than cuda, which xpu, cpu, npu and hpu turn off or size otherwise
    (platform_hook.py:113-190), torch_native / flex_attention (attention_hook.py:122-160), DeepSeek-V4's own
    max_running_requests), or a value is not a number. With ``speculative``, an EAGLE-family launch whose tokens per
    request speculative_decode_tokens settles counts too: its max_running_requests default, 48 (speculative_hook.py:
    1086-1091), is set after the memory defaults (which saw none) and caps the graph per rank as a written one does.
    The memory defaults' own cap of a default max_bs by max_running_requests (memory_hook.py:182-188) is 0.5.22's and
    later's (0.5.21 has none). Without ``per_rank_cap``, the graph's max_bs only: what MegaMoE's decode bound reads
    before 0.5.23 (mega_moe_decode_tokens_per_rank, mega_moe_hook.py:94-106 in 0.5.22, without the per-rank cap of
    0.5.23's :97-102; the targeted set's targeted-memory-16, -29 and -55 on 0.5.21 / 0.5.22)."""
    spec = speculative and _given(ctx, "speculative_algorithm") and not capture_only(ctx) and \
        speculative_decode_tokens(ctx) is not None
    unsettled = tuple(d for d in _DECODE_GRAPH_UNSETTLED if not (spec and d == "speculative_algorithm"))
    if any(_given(ctx, d) for d in unsettled) or cuda_graphs_unsettled(ctx) or \
            "DeepseekV4" in str(ctx.model.architecture or ""):
        return None
    backend = _choice(ctx, "cuda_graph_backend_decode", "full")
    if backend not in ("full", "breakable"):
        return None
    running = ctx.args.get("max_running_requests")
    if running is not None and (not isinstance(running, int) or isinstance(running, bool) or running < 1):
        return None
    listed, given = ctx.args.get("cuda_graph_bs_decode"), ctx.args.get("cuda_graph_max_bs_decode")
    if listed is not None:
        numbers = isinstance(listed, list) and all(isinstance(b, int) and not isinstance(b, bool) for b in listed)
        if not numbers or not listed:
            return None
        graph, how = max(listed), f"the largest of cuda_graph_bs_decode, {max(listed)}"
    elif given is not None:
        if not isinstance(given, int) or isinstance(given, bool) or given < 1:
            return None
        graph, how = given, f"cuda_graph_max_bs_decode={given}"
    else:
        graph = default_decode_graph_max_bs(ctx)
        least = "at least " if gpu_memory_mib(ctx)[0] is None else ""
        how = f"SGLang's default decode graph max_bs for these GPUs and tp_size, {least}{graph}"
        if running is not None and running < graph and added_in(ctx, "0.5.22"):
            graph, how = running, f"max_running_requests={running}"
    if not per_rank_cap:
        return graph, how
    if running is not None:
        per_rank = max(1, running // attention_dp_width(ctx))
        if per_rank < graph:
            graph, how = per_rank, f"max_running_requests={running} over attn_dp_size={attention_dp_width(ctx)}"
    elif spec:
        per_rank = max(1, 48 // attention_dp_width(ctx))
        if per_rank < graph:
            graph, how = per_rank, (f"speculative decoding's default max_running_requests=48 over attn_dp_size="
                                    f"{attention_dp_width(ctx)}")
    return graph, how


KV4_DTYPES = ("nvfp4", "fp4_mx_block16")


# handle_kv4_compatibility (sglang/srt/arg_groups/kv_cache_hook.py:277-316): the attention backends an FP4 KV
# cache runs with, (FA4 prefill or not, MLA or not) -> the backends allowed for decode (FA4) or attention.
KV4_BACKENDS = {
    (True, True): ("flashinfer", "trtllm_mla"),
    (True, False): ("triton", "torch_native", "flex_attention"),
    (False, True): ("flashinfer", "trtllm_mla"),
    (False, False): ("triton", "torch_native", "flex_attention", "trtllm_mha"),
}


def default_attention_backend(ctx: Context) -> str | None:
    """SGLang's attention backend when none is set, where it is certain for the model table's architectures.

    get_default_attn_backend (sglang/srt/arg_groups/model_override_base.py:277-351): MHA models get fa3 on Hopper
    (unless an explicit speculative_eagle_topk makes a tree, or topk 1 runs with pages), flashinfer elsewhere
    except SM100 (trtllm_mha, claimed for Llama only: fa4 for asymmetric K/V heads and per-model overrides; a tree
    topk gets flashinfer there too) and
    models with attention sinks (gpt-oss: not claimed); MLA models fa3 on Hopper, triton off Blackwell SM100,
    where DeepSeek V3 gets trtllm_mla (sglang/srt/arg_groups/model_overrides/deepseek_v2.py:179-185) when no attention,
    prefill or decode backend is written; with one side written that override picks nothing and
    get_default_attn_backend's MLA choice on SM100 fills the base in, flashinfer (model_override_base.py:340-341;
    probed on 0.5.20-0.5.23 beside the seed-4 10,000-case run: enable_mis with prefill_attention_backend flashinfer,
    and chunked_prefill_size 100 with no page forced, both accepted).
    """
    cc = ctx.compute_capability
    if dsa_attention_backend(ctx):
        return "dsa"  # a DSA-by-override model's override picks it before (dsa_attention_backend)
    if cc is None or ctx.model.family in ("unknown", "gpt-oss", "deepseek-v3.2"):
        return None
    if ctx.model.mla:
        sm100 = None
        if ctx.model.family == "deepseek-v3":
            sm100 = "flashinfer" if any(_choice(ctx, d, "") for d in _ALL_DESTS) else "trtllm_mla"
        return {9: "fa3", 10: sm100}.get(cc[0], "triton")
    if cc[0] == 9:
        return "fa3" if no_spec_or_topk_one(ctx) else "flashinfer"
    if cc[0] == 10:
        # Else flashinfer, which Llama has no attention sinks against. Claimed for Llama only: symmetric K/V heads and
        # no per-model override (others: fa4 or their own choice).
        return ("trtllm_mha" if sm100_default_is_trtllm_mha(ctx) else "flashinfer") if ctx.model.family == "llama" else None
    return "flashinfer"


def no_spec_or_topk_one(ctx: Context) -> bool:
    """is_no_spec_infer_or_topk_one (sglang/srt/utils/common.py:3960-3966), which get_default_attn_backend asks
    mid-resolution, before the speculative defaults fill speculative_eagle_topk in: an unset topk counts as "no tree",
    topk 1 only without pages."""
    topk, page = ctx.args.get("speculative_eagle_topk"), ctx.args.get("page_size")
    return topk is None or (topk == 1 and page in (None, 1))


def sm100_default_is_trtllm_mha(ctx: Context) -> bool:
    """Whether get_default_attn_backend picks trtllm_mha for an MHA model with symmetric K/V heads on SM100
    (model_override_base.py:310-323): no tree topk, and no speculative decoding with topk unset unless DFLASH (the
    speculative hooks leave attention_backend alone). DFLASH only from 0.5.21: 0.5.20 asks before DFLASH's handler
    sets speculative_eagle_topk, so DFLASH with topk unset gets flashinfer there (model_override_base.py:330-342 in
    0.5.20; make conformance-all's MISSED on arch100-kv-nvfp4-dflash, KV4 MHA refusing flashinfer)."""
    # No algorithm under the aux hidden-state capture, which resets it before (capture_only): EAGLE3 with
    # enable_return_aux_hidden_states gets trtllm_mha on SM100 (a MISSED: page_size 17 forced to 64 against chunk 34).
    algo = "" if capture_only(ctx) else _choice(ctx, "speculative_algorithm", "").upper()
    return no_spec_or_topk_one(ctx) and (not algo or ctx.args.get("speculative_eagle_topk") is not None
                                         or (algo == "DFLASH" and added_in(ctx, "0.5.21")))


# Attention backends that leave the page size alone, and those that force one: (dests it is read from, pages kept)
# in the order sglang/srt/arg_groups/overrides.py:1144-1199 applies them; any other page becomes 64.
# dsv4 forces no page by itself: DeepSeek V4's own override sets 256 (model_overrides/deepseek_v4.py:51-61), and V4
# is not in the model table (its rules return early on an unknown family).
# minicpm_flashattn / minicpm_flashinfer and qsa: only their models' own overrides read them (model_overrides/minicpm.py:
# 28-60, qwen4_exp.py:70-90: models the table does not know, so memory.chunked_page is silent for them); the page-size
# handling of overrides.py:1146-1199 leaves them alone.
# dsa (and its deprecated alias nsa, choices.py:74-75): the DSA models' own override sets their page
# (model_overrides/deepseek_v2.py:140-173; resolved_page_size returns None for them and for models it does not know);
# on another model the backend leaves the page alone.
# llada2_cfg_flashinfer (choices.py:83, new in 0.5.22; LLaDA2's classifier-free-guidance flashinfer, chosen only by the
# host): no override and no page handling reads it (overrides.py:1144-1199, 0.5.22 the same), so check_server_args
# sees the host's page against the chunk: the seed-4 10,000-case run's MISSED fuzz-4-01872, page_size 11 on an RTX PRO
# 6000, whose default chunked_prefill_size (8192) is not a multiple (validation_hook.py:244).
PAGE_NEUTRAL_BACKENDS = ("triton", "flashinfer", "fa3", "torch_native", "flex_attention", "dsv4", "minicpm_flashattn",
                         "minicpm_flashinfer", "qsa", "dsa", "nsa", "llada2_cfg_flashinfer")


_ALL_DESTS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


PAGE_FORCING_BACKENDS = {
    "flashmla": (("attention_backend", "decode_attention_backend"), (64,)),
    "trtllm_mla": (("attention_backend", "decode_attention_backend"), (32, 64)),
    "cutedsl_mla": (_ALL_DESTS, (32, 64)),
    "trtllm_mha": ((*_ALL_DESTS, "speculative_draft_attention_backend"), (16, 32, 64, 128)),
    "hpc_ops": (_ALL_DESTS, (64,)),
}


# _qwen3_5_hybrid_overrides (sglang/srt/arg_groups/model_overrides/qwen3_5.py:17-49) is registered for these
# architectures (not the text-only Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM).
QWEN35_OVERRIDE_ARCHS = ("Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                         "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
                         "Qwen3_5ForConditionalGeneration")


# The page size the override declares with each backend it picks (qwen3_5.py:48), whatever the host's page_size.
QWEN35_OVERRIDE_PAGE = {"triton": 1, "trtllm_mha": 64}


def qwen35_sm100_backend(ctx: Context) -> str | None:
    """The attention backend _qwen3_5_hybrid_overrides (sglang/srt/arg_groups/model_overrides/qwen3_5.py:17-49)
    declares, together with page_size QWEN35_OVERRIDE_PAGE[backend] in place of the host's; None where it does not
    apply (another architecture, not SM100/SM103, or an explicit attention_backend).

    On SM100 (is_sm100 matches the major 10) with attention_backend unset it picks trtllm_mha when
    get_default_attn_backend would (model_override_base.py:312-325, asked mid-resolution: the host's
    speculative_eagle_topk and page_size, before the speculative defaults fill them in; trtllm_mha unless a tree
    draft or pages with topk 1 rule it out, or speculative decoding runs with topk unset and is not DFLASH; both
    architectures have symmetric K/V heads, so never fa4) and an explicit extra_buffer mamba strategy, a disabled
    radix cache or speculative decoding asks for it (qwen3_5.py:39-45: the strategy is read before ``auto``
    resolves); triton otherwise. The model's mamba checks (model_hook.py:737) and check_server_args see its page.
    """
    cc = ctx.compute_capability
    # Device cpu / hpu fill attention_backend in first (handle_cpu_backends / handle_hpu_backends, platform_hook.py:158-183,
    # pipeline.py:205-206, before the override at :225), and npu's hook its own defaults (:33-38): the override sees one
    # set (the resolver-differential's fuzz-3-01919, device cpu on a B300: torch_native, page 1).
    if (ctx.model.architecture not in QWEN35_OVERRIDE_ARCHS or cc is None or cc[0] != 10
            or _choice(ctx, "attention_backend", "") or _choice(ctx, "device", "cuda") in ("cpu", "hpu", "npu")):
        return None
    # cfg.disable_radix_cache as handle_pd_disaggregation leaves it for a PD decode server (radix_cache_off: the
    # resolver-differential's fuzz-3-01445, page 64 with trtllm_mha); cfg.speculative_algorithm None under the aux
    # hidden-state capture (capture_only), which resets it first (qwen3_5.py:36-45; 0.5.20-0.5.22 the same).
    wanted = (_choice(ctx, "mamba_radix_cache_strategy", "auto") in MAMBA_EXTRA_BUFFER
              or radix_cache_off(ctx) or (bool(_choice(ctx, "speculative_algorithm", "")) and not capture_only(ctx)))
    return "trtllm_mha" if sm100_default_is_trtllm_mha(ctx) and wanted else "triton"


def resolved_page_size(ctx: Context) -> int | None:
    """The page size SGLang settles on, where certain: the host's (1 when unset) unless a backend forces one.

    None when an attention backend is neither page-neutral nor one of PAGE_FORCING_BACKENDS or fa4 (fa4_forces_page,
    decided for the model table's architectures on a known GPU), or when SGLang's default backend is needed (no
    attention_backend, and prefill and decode not one backend) and not certain (default_attention_backend).
    """
    page = ctx.args.get("page_size")
    if page is not None and (not isinstance(page, int) or isinstance(page, bool)):
        return None
    if ctx.model.family == "deepseek-v3.2":
        return None  # DSA sets 64 x the index pool's width whatever the backend (model_overrides/deepseek_v2.py:161-173)
    if dsa_override(ctx) is not None:
        # A DSA-by-override model: the override's page whatever the host wrote (dsa_page_size), which the forcing
        # backends below still change (trtllm_mla turns 128 into 64: overrides.py:1144-1199 reads the declared page).
        page = dsa_page_size(ctx)
        if page is None:
            return None
    resolved = {d: ctx.args.get(d) for d in (*_ALL_DESTS, "speculative_draft_attention_backend")}
    if nvfp4_kv_decodes_with_trtllm_mha(ctx):
        # trtllm_mha forces its page size whatever the prefill side (flashinfer or trtllm_mha) is.
        resolved["decode_attention_backend"] = "trtllm_mha"
        resolved["prefill_attention_backend"] = resolved["prefill_attention_backend"] or "trtllm_mha"
    prefill, decode = resolved["prefill_attention_backend"], resolved["decode_attention_backend"]
    override = qwen35_sm100_backend(ctx)
    if override is not None:
        # Qwen3.5 / Qwen3-Next on SM100: the model override sets the backend and replaces the page size
        # (qwen35_sm100_backend); a forcing backend among prefill / decode still applies on top of it (decode is in
        # every forcing list, so a shared prefill/decode backend taking the base's place changes nothing).
        page = QWEN35_OVERRIDE_PAGE[override]
        resolved["attention_backend"] = override
    elif prefill is not None and prefill == decode:
        resolved["attention_backend"] = prefill  # sglang/srt/arg_groups/overrides.py:1127-1131
    else:
        # The base backend as the hooks before the page handling fill it (filled_attention_backend: device hpu's
        # torch_native over the host's, device cpu's, deterministic inference's flashinfer where the default would be
        # trtllm_mha, the resolver-differential's fuzz-2-05138, page_size 8192 kept on a B300), else SGLang's default
        # (overrides.py:1133-1138): a side not set falls back to it, and the page handling reads it even when both
        # sides are set.
        filled = filled_attention_backend(ctx)
        resolved["attention_backend"] = default_attention_backend(ctx) if filled == "" else filled
        if resolved["attention_backend"] is None:
            return None
    used = {b for b in resolved.values() if b is not None}
    fa4 = "fa4" in (resolved[d] for d in _ALL_DESTS)
    if any(b not in PAGE_NEUTRAL_BACKENDS and b not in PAGE_FORCING_BACKENDS and b != "fa4" for b in used) or (
            not ctx.model.known and used & {"dsa", "nsa"}) or (fa4 and (
            ctx.compute_capability is None or ctx.model.architecture not in ARCHITECTURES)):  # MLA or not: unknown
        return None
    for backend, (dests, kept) in PAGE_FORCING_BACKENDS.items():
        if any(resolved[d] == backend for d in dests) and page not in kept:
            page = 64
    if fa4 and fa4_forces_page(ctx):
        page = FA4_PAGE  # after the others (attention_hook.py:184, then :241)
    return page if page is not None else 1


# _fa4_page_constraint (sglang/srt/arg_groups/overrides.py:1273-1297; 0.5.22 :1236-1260, 0.5.21 :1217-1237, 0.5.20
# :1334-1354): fa4 as the base, prefill or decode backend of a non-MLA model on SM100 / SM103 (is_sm100: the major 10)
# sets page_size 128 whatever the host wrote, unless speculative_eagle_topk is above 1 when it runs (the host's value:
# handle_attention_backend_compatibility runs before the speculative hook fills the automatic triple in,
# pipeline.py:242 and :306). The seed-1 10,000-case fuzz run's MISSED fuzz-1-08889, chunked_prefill_size 1 on a B300.
FA4_PAGE = 128


def fa4_forces_page(ctx: Context) -> bool:
    """Whether fa4 sets page_size FA4_PAGE (SGLang's DiffusionGemmaForBlockDiffusion gets 1; not a model of the table)."""
    cc, topk = ctx.compute_capability, _num(ctx, "speculative_eagle_topk")
    return cc is not None and cc[0] == 10 and not ctx.model.mla and (topk or 0) <= 1


def resolved_mamba_strategy(ctx: Context) -> str | None:
    """mamba_radix_cache_strategy as SGLang resolves it (overrides.py:438-488), the way kv_cache._mamba_extra_buffer
    reads it: ``auto`` becomes extra_buffer on a hybrid linear-attention model of the table when the overlap scheduler
    is on or pages are larger than 1 (the Qwen3.5 SM100 override's page first) with linear_attn_backend triton, else
    no_buffer. None where the model is not in the table or the radix cache is off (mamba_extra_buffer_of is then
    false, model_override_base.py:260-265), a PD decode server's included (radix_cache_off: handle_pd_disaggregation
    turns it off before _mamba_radix_cache_resolution returns nothing for it, overrides.py:473-474, and leaves
    ``auto``: the resolver-differential's fuzz-3-01445, fuzz-3-01919); a non-hybrid model keeps what the host wrote."""
    if ctx.model.family == "unknown" or radix_cache_off(ctx):
        return None
    strategy = str(ctx.get("mamba_radix_cache_strategy", "auto"))
    if strategy != "auto" or not ctx.model.hybrid_linear_attention:
        return strategy
    page, override = _num(ctx, "page_size"), qwen35_sm100_backend(ctx)
    if override is not None:
        page = QWEN35_OVERRIDE_PAGE[override]
    paging = page is not None and page > 1
    backend = str(ctx.get("linear_attn_backend", "triton"))
    return "extra_buffer" if (not ctx.is_set("disable_overlap_schedule") or paging) and backend == "triton" else "no_buffer"


def linear_decode_backend(ctx: Context) -> str | None:
    """The linear-attention decode backend handle_linear_attn_backend settles on (attention_hook.py:289-330).

    None when SGLang's SM100 default (flashinfer when mamba_ssm_dtype resolves to bfloat16, which the model decides
    when unset) may apply.
    """
    decode, base = _choice(ctx, "linear_attn_decode_backend", ""), _choice(ctx, "linear_attn_backend", "triton")
    if decode:
        return decode
    cc, mamba = ctx.compute_capability, ctx.args.get("mamba_ssm_dtype")
    if base != "helion" and (cc is None or cc[0] == 10):
        if cc is None or mamba is None:
            return None
        if mamba == "bfloat16":
            return "flashinfer"
    return linear_base_decode_backend(ctx)


def linear_base_decode_backend(ctx: Context) -> str:
    """The decode backend linear_attn_backend gives where SGLang's SM100 default does not apply: the base backend, but
    flashkda, which decodes on triton (attention_hook.py:289-330)."""
    base = _choice(ctx, "linear_attn_backend", "triton")
    return "triton" if base == "flashkda" else base


# The attention backend handle_cpu_backends sets for device cpu where none is written (platform_hook.py:158-168,
# pipeline.py:206; 0.5.20-0.5.22 the same): intel_amx, which _attention_backend_platform_fallbacks turns into
# torch_native on a host CPU without AMX (overrides.py:1301-1310, run by handle_attention_backend_compatibility,
# attention_hook.py:272; an arm64 host gets torch_native at once). Which one depends on the host's CPU; the checks that
# read the backends afterwards (enable_mis's flashinfer, attention_hook.py:573; UNO's fa3, speculative_hook.py:606-611;
# prefill_only_disable_kv_cache's fa3 / fa4, kv_cache_hook.py:344; the paged tree draft's flashinfer / fa3 / triton,
# speculative_hook.py:1278; NGRAM's flashinfer, :1361) refuse both alike, and the resolver takes torch_native, what the
# probe's host (no AMX) settles on. The resolver-differential's fuzz-4-01128, fuzz-3-09224, fuzz-1-08691: device cpu
# on a GPU host, where the GPU's default (flashinfer, fa3) never applies.
CPU_ATTENTION_BACKEND = "torch_native"


def platform_fallback(ctx: Context, backend: str) -> str:
    """``backend`` after _attention_backend_platform_fallbacks (overrides.py:1300-1319, a post-process pass of
    handle_attention_backend_compatibility): device cpu's intel_amx is CPU_ATTENTION_BACKEND (a host CPU without AMX,
    above), device xpu's intel_xpu is triton without Intel XMX, which no NVIDIA host has (xpu_has_xmx_support). The
    seed-6 10,000-case run's STRICTER-UNEXPLAINED fuzz-6-03732: intel_xpu with device xpu and enable_unified_memory,
    whose page-major allow-list SGLang checks against triton."""
    device = _choice(ctx, "device", "cuda")
    if backend == "intel_amx" and device == "cpu":
        return CPU_ATTENTION_BACKEND
    if backend == "intel_xpu" and device == "xpu":
        return "triton"
    return backend


def filled_attention_backend(ctx: Context) -> str | None:
    """view.attention_backend as the hooks before _attention_backend_default (overrides.py:1126-1138, run by
    handle_attention_backend_compatibility, pipeline.py:242) leave it: device hpu's torch_native whatever is written
    (handle_hpu_backends, platform_hook.py:176-183, pipeline.py:205), the host's, device cpu's (CPU_ATTENTION_BACKEND),
    deterministic inference's fill (deterministic_attention_backend, pipeline.py:240: fa3 on an A100, flashinfer for
    Llama on a B300, where SGLang's default would be flashinfer / trtllm_mha: the resolver-differential's fuzz-0-06567,
    fuzz-0-09193 of the seed-0 run and fuzz-2-05138) or a model override's (model_override_attention_backend,
    pipeline.py:225). "" where nothing fills it (SGLang's default does then), None where not certain (device npu, whose
    hook fills in its own defaults, platform_hook.py:33-38; deterministic inference where its fill is not certain)."""
    device, backend = _choice(ctx, "device", "cuda"), _choice(ctx, "attention_backend", "")
    if added_in(ctx, "0.5.23"):
        backend = BACKEND_ALIASES.get(backend, backend)  # handle_deprecated_args renames first (serving_hook.py:304)
    if device == "hpu":
        return "torch_native"
    if backend:
        return platform_fallback(ctx, backend)
    if device == "cpu":
        return CPU_ATTENTION_BACKEND
    if device == "npu":
        return None
    if deterministic_on(ctx):
        return deterministic_attention_backend(ctx)
    return model_override_attention_backend(ctx) or ""


def nvfp4_kv_attention_backends(ctx: Context) -> tuple[str | None, str]:
    """(prefill, decode) as handle_nvfp4_prefill_kv_dequant_dtype leaves them for an NVFP4 KV cache
    (kv_cache_hook.py:35-92, pipeline.py:241, new in 0.5.21: nvfp4_kv_decodes_with_trtllm_mha): decode trtllm_mha; the
    host's prefill backend, else the one of the prefill dequant dtype (NVFP4_PREFILL_BACKEND): the host's dtype, else the
    one the base backend selects (flashinfer fp8_e4m3, trtllm_mha nvfp4: the base as the hooks before leave it,
    filled_attention_backend), else nvfp4 on SM100 (is_sm100: the major 10) and fp8_e4m3 elsewhere. Every other pairing
    is refused there (:53-80, server.kv_cache). The prefill side None where not certain. The resolver-differential's
    fuzz-4-00909, fuzz-4-01359: flashinfer / trtllm_mha on an RTX PRO 6000, where enable_mis's check (attention_hook.py:573)
    then refuses the trtllm_mha decode side."""
    decode, prefill = "trtllm_mha", _choice(ctx, "prefill_attention_backend", "")
    if prefill:
        return prefill, decode
    requested = _choice(ctx, "prefill_kv_cache_dequant_dtype", "auto")
    if requested == "auto":
        base, cc = filled_attention_backend(ctx), ctx.compute_capability
        if base:
            requested = {b: d for d, b in NVFP4_PREFILL_BACKEND.items()}.get(base, "")
        elif base is None or cc is None:
            return None, decode
        else:
            requested = "nvfp4" if cc[0] == 10 else "fp8_e4m3"
    return NVFP4_PREFILL_BACKEND.get(requested), decode


def fa3_fp8_fallback(ctx: Context, base: str | None) -> str | None:
    """The base backend after _attention_backend_fa3_fp8_fallback (overrides.py:1263-1269, run by
    handle_attention_backend_compatibility, attention_hook.py:239; 0.5.20 :170, 0.5.21 :170, 0.5.22 :238): fa3 with
    kv_cache_dtype fp8_e5m2 becomes triton, before UNO's fa3 check (speculative_hook.py:606-611) and
    prefill_only_disable_kv_cache's (kv_cache_hook.py:344) read it (the re-judged 10,000-case runs' fuzz-4-03472,
    fuzz-1-03825, fuzz-0-02369: fa3 against SGLang's triton on Hopper). An explicit prefill / decode fa3 stays."""
    return "triton" if base == "fa3" and _choice(ctx, "kv_cache_dtype", "") == "fp8_e5m2" else base


def resolved_attention_backends(ctx: Context) -> tuple[str | None, str | None]:
    """(prefill, decode) attention backends as attention_backends_of reads them (model_override_base.py:138-152) from
    handle_attention_backend_compatibility on (pipeline.py:242; every check that reads them runs there or later): an
    NVFP4 KV cache's pair (nvfp4_kv_attention_backends), else the host's prefill / decode backend over the base as the
    hooks before fill it (filled_attention_backend) or SGLang's default (default_attention_backend). None where a side is
    not certain."""
    if nvfp4_kv_decodes_with_trtllm_mha(ctx):
        return nvfp4_kv_attention_backends(ctx)
    prefill, decode = _choice(ctx, "prefill_attention_backend", ""), _choice(ctx, "decode_attention_backend", "")
    written_base = _choice(ctx, "attention_backend", "")
    if added_in(ctx, "0.5.23"):
        # 0.5.23's deprecated aliases (handle_deprecated_args, serving_hook.py:304-323, before any attention hook):
        # tokenspeed_mla is cutedsl_mla, and a prefill side named so becomes trtllm_mla (cutedsl_mla decodes only).
        prefill = "trtllm_mla" if prefill == "tokenspeed_mla" else BACKEND_ALIASES.get(prefill, prefill)
        decode, written_base = BACKEND_ALIASES.get(decode, decode), BACKEND_ALIASES.get(written_base, written_base)
    if not prefill and "cutedsl_mla" in (decode, written_base):
        # _cutedsl_prefill_backend_fill (overrides.py:1233-1259, run by attention_hook.py:196; 0.5.20-0.5.22 the same
        # pass): CuteDSL MLA decodes only, and an unset prefill side gets trtllm_mla. The seed-5 run's fuzz-5-00473:
        # decode cutedsl_mla on a B200, SGLang's prefill trtllm_mla.
        prefill = "trtllm_mla"
    if not (prefill and decode):
        base = filled_attention_backend(ctx)
        if base == "":
            base = default_attention_backend(ctx)
        base = fa3_fp8_fallback(ctx, base)
        prefill, decode = prefill or base, decode or base
    return prefill or None, decode or None


NVFP4_PREFILL_BACKEND = {"fp8_e4m3": "flashinfer", "nvfp4": "trtllm_mha"}  # kv_cache_hook.py:23-26
BACKEND_ALIASES = {"compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}  # 0.5.23's, serving_hook.py:304


def moe_backends(ctx: Context) -> tuple[str, str]:
    """(moe_a2a_backend, moe_runner_backend) after handle_moe_runner_backend_alias
    (sglang/srt/arg_groups/mega_moe_hook.py:259-276): moe_runner_backend megamoe means moe_a2a_backend megamoe."""
    a2a, runner = _choice(ctx, "moe_a2a_backend", "none"), _choice(ctx, "moe_runner_backend", "auto")
    return ("megamoe", "auto") if runner == "megamoe" else (a2a, runner)


def deepseek_cp_attention_dp(ctx: Context) -> bool:
    """DeepSeek's prefill context-parallel overrides read dp_size as attention-DP groups: attn_dp_size = attn_dp_size x
    dp_size and dp_size 1 (model_override_base.py:229-247, model_overrides/deepseek_v2.py:110-114 for DSA, :196-198 for
    MLA; 0.5.22 :110-114 / :197-199; 0.5.20 / 0.5.21 set enable_dp_attention instead, deepseek_v2.py:95 / :168 and :88 / :161),
    before check_server_args counts replicas (its multi-node assert, validation_hook.py:199, exempts them) and the
    ranks are launched: one TP group, no extra GPUs. The MLA branch (mla_prefill_cp_deepep) and the DSA-by-override
    branch on CUDA (dsa_prefill_cp_a2a_certain). targeted-pd-39: tp_size 8, dp_size 2, enable_prefill_cp on DeepSeek-V3,
    which parallel.gpus had refused by counting 16 GPUs. Not 0.5.20 / 0.5.21's DSA interleave CP, which asserts
    dp_size == 1 instead (deepseek_v2.py:105 / :98 there; model._dsa_resolved_checks)."""
    return mla_prefill_cp_deepep(ctx) or dsa_prefill_cp_a2a_certain(ctx) and (
        added_in(ctx, "0.5.22") or _choice(ctx, "cp_strategy", "") == "zigzag")


def mla_prefill_cp_deepep(ctx: Context) -> bool:
    """DeepSeek's model override sets moe_a2a_backend deepep for MLA prefill context parallelism, whatever was written
    (model_overrides/deepseek_v2.py:191-202; 0.5.22 :192-202, 0.5.21 :156-164, 0.5.20 :163-171), before handle_a2a_moe
    and check_server_args read it: certain for DeepSeek-V3 (MLA, not DSA) with enable_prefill_cp. The resolver
    differential's fuzz-5-03265 (SGLang's deepep); LoRA's MoE runners need none (lora_hook.py:221), a MISSED. Not a
    DSA-by-override DeepSeek-V3 (dsa_override: the DSA branch, dsa_prefill_cp_deepep)."""
    return ctx.is_set("enable_prefill_cp") and ctx.model.known and ctx.model.mla and \
        ctx.model.family == "deepseek-v3" and dsa_override(ctx) is None


def override_a2a_backend(ctx: Context) -> str:
    """moe_a2a_backend as the model overrides (handle_model_specific_adjustments, pipeline.py:225) and
    handle_moe_kernel_config (:294) read it: deepep under DeepSeek's MLA prefill context parallelism (mla_prefill_cp_deepep,
    deepseek_v2.py:201, declared before the DeepSeek pass) and a DSA-by-override model's zigzag prefill CP
    (dsa_prefill_cp_deepep, :117), none under DWDP (handle_dwdp, parallel_hook.py:495-499,
    pipeline.py:189; dwdp_on: the DWDP probes' false alarms, flashinfer / pplx / mori / deepep_v2 / flashinfer_megamoe
    with dwdp_size = tp_size), else moe_backends'. handle_a2a_moe changes it further (handled_a2a_backend)."""
    if mla_prefill_cp_deepep(ctx) or dsa_prefill_cp_deepep(ctx):
        return "deepep"
    return "none" if dwdp_on(ctx) else moe_backends(ctx)[0]


def handled_a2a_backend(ctx: Context) -> str:
    """moe_a2a_backend as the checks from handle_a2a_moe on read it (moe_hook.py:283-469, pipeline.py:295; 0.5.20-0.5.22
    the same): moe_backends' backend, which _a2a_backend_overrides, run first by handle_a2a_moe (moe_hook.py:292),
    turns into deepep under enable_waterfill unless it is deepep or megamoe (overrides.py:1596-1606; 0.5.22 :1548-1558,
    0.5.21 :1524-1535, 0.5.20 :1642-1653), and which handle_a2a_moe then resets from ascend_tp to none on CUDA
    (moe_hook.py:462-469; 0.5.22 :398-405, 0.5.21 :388-395, 0.5.20 :390-397). Its per-backend blocks (flashinfer's,
    flashinfer_megamoe's, deepep's, deepep_v2's, pplx's, mori's: moe_hook.py:300-620), validate_flashinfer_a2a_token_budget
    and the DeepEP v2 checks (pipeline.py:318, :374-375), handle_shared_experts_tp (parallel_hook.py:227),
    handle_eplb_and_dispatch (:764), DSpark's (speculative_hook.py:677-710) and check_server_args' (the LoRA MoE runner,
    lora_hook.py:220; two-batch overlap, validation_hook.py:765) all read it so (a resolving view sees the declaration);
    ascend_tp has no block of its own, so the blocks reading it before the reset see the same. handle_moe_kernel_config
    (moe_hook.py:106-120, pipeline.py:294), the model overrides and the PD hook read moe_backends' backend, before.
    The resolver-differential's fuzz-1-08858 (waterfill: none, SGLang's deepep) and fuzz-4-04145 (ascend_tp, SGLang's
    none). DeepSeek's context-parallel override sets deepep earlier (mla_prefill_cp_deepep); its other cases stay
    uncertain (_a2a_may_change)."""
    a2a = override_a2a_backend(ctx)
    if ctx.is_set("enable_waterfill") and a2a not in ("deepep", "megamoe"):
        a2a = "deepep"
    return "none" if a2a == "ascend_tp" else a2a


# The MoE runners MXFP8 runs on CUDA (sglang/srt/arg_groups/choices.py:161-167, MXFP8_MOE_RUNNER_BACKEND_CHOICES).
MXFP8_RUNNERS = ("cutlass", "deep_gemm", "flashinfer_megamoe", "flashinfer_trtllm", "flashinfer_trtllm_routed")


def modelopt_fp4_moe_runner(ctx: Context) -> str | None:
    """The MoE runner SGLang puts in for an unset one under quantization modelopt_fp4: flashinfer_cutlass on SM120, and
    SM110 too from 0.5.22 (_moe_runner_backend_quant_constraints, overrides.py:1513-1518; :1559-1564 in 0.5.20,
    :1444-1449 in 0.5.21, :1468-1473 in 0.5.22), before handle_moe_kernel_config reads it. None elsewhere (the
    runner stays as written, or auto)."""
    cc = ctx.compute_capability
    if moe_backends(ctx)[1] != "auto" or _choice(ctx, "quantization", "") != "modelopt_fp4" or cc is None:
        return None
    return "flashinfer_cutlass" if cc[0] == 12 or (cc[0] == 11 and added_in(ctx, "0.5.22")) else None


def mxfp8_moe_runner(ctx: Context) -> str | None:
    """The MoE runner SGLang runs under quantization mxfp8 (_moe_runner_backend_quant_constraints,
    sglang/srt/arg_groups/overrides.py:1484-1512; 0.5.20-0.5.22 the same), before handle_moe_kernel_config,
    handle_a2a_moe and the hardware profiles read it: the runner as written where MXFP8 runs it (MXFP8_RUNNERS), else,
    auto included, MXFP8's default, flashinfer_megamoe under moe_a2a_backend flashinfer_megamoe and flashinfer_trtllm
    otherwise (SGLang warns "Overriding" for an explicit one). None without quantization mxfp8. The one place the
    replacement is computed: server.moe and arch.moe both read it."""
    if _choice(ctx, "quantization", "") != "mxfp8":
        return None
    a2a, runner = moe_backends(ctx)
    if runner in MXFP8_RUNNERS:
        return runner
    return "flashinfer_megamoe" if a2a == "flashinfer_megamoe" else "flashinfer_trtllm"


FLASHINFER_A2A_RUNNERS = ("flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "flashinfer_trtllm_routed",
                          "deep_gemm")  # moe_hook.py:531-537


# _qwen3_moe_family_overrides' architectures (sglang/srt/arg_groups/model_overrides/qwen3_moe.py:29-37; 0.5.20 :32-40,
# 0.5.21-0.5.22 :29-37, the same list).
QWEN3_MOE_FAMILY_ARCHS = ("Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration", "Qwen3NextForCausalLM",
                          "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
                          "Qwen3_5ForConditionalGeneration", "Qwen4ExpForConditionalGeneration")
# The quantizations (None: bf16) under which the SM100 overrides pick flashinfer_trtllm for an unset runner: the Qwen3
# MoE family's (qwen3_moe.py:76-86) and the DeepSeek family's (overrides.py:810-823, which adds modelopt_fp8 and Kimi
# K2.5's int4 compressed-tensors checkpoints).
QWEN3_TRTLLM_QUANT = ("fp8", "modelopt_fp4", "modelopt_mixed", None)
DEEPSEEK_TRTLLM_QUANT = ("fp8", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed", None)


def _sm100_override_moe_runner(ctx: Context, arch: str) -> str | None:
    """The runner the SM100 model overrides leave for an unset moe_runner_backend of the Qwen3 MoE family
    (_qwen3_moe_family_overrides, model_overrides/qwen3_moe.py:38-90) and the DeepSeek family but LongCat
    (_deepseek_moe_quant_resolution, overrides.py:763-842, run at model_hook.py:439), both in
    handle_model_specific_adjustments (pipeline.py:225; 0.5.20-0.5.22 the same conditions): flashinfer_trtllm where the
    moe_a2a_backend is none there and the quantization, the host's or the checkpoint's quant_method filled in for an
    unset one, is one of QWEN3_TRTLLM_QUANT / DEEPSEEK_TRTLLM_QUANT; "auto" where it is not, and on any other GPU. None
    where not certain: the GPU is not known, the checkpoint's quantization is not known (or json_model_override_args may change it), Qwen's
    modelopt_mixed (marlin for W4A16 NVFP4 MoE layers, qwen3_moe.py:50-73, which only the checkpoint's
    quantized_layers tell), DeepSeek's compressed-tensors (Kimi K2.5's int4 is trtllm, overrides.py:779-786), context
    parallelism that may set deepep first (_a2a_may_change, but DeepSeek-V3's MLA prefill CP: deepep, auto)."""
    cc = ctx.compute_capability
    if cc is None:
        return None
    if cc[0] != 10:
        return "auto"
    if _a2a_may_change(ctx) and not mla_prefill_cp_deepep(ctx):
        return None
    # enable_waterfill's deepep and ascend_tp's reset come after the overrides (handle_a2a_moe, pipeline.py:295).
    a2a = override_a2a_backend(ctx)
    if a2a != "none":
        return "auto"
    override = _model_override(ctx)
    quant = ctx.args.get("quantization")
    if quant is not None and quant is not False:
        quant = None if str(quant) == "unquant" else str(quant)  # serving_hook.py:692-703: unquant is none, not filled
    elif override is None or "quantization_config" in override or ctx.model.quant_method is None or not ctx.model.known:
        return None
    else:
        quant = ctx.model.quant_method or None
    if arch in QWEN3_MOE_FAMILY_ARCHS:
        if quant == "modelopt_mixed":
            return None
        return "flashinfer_trtllm" if quant in QWEN3_TRTLLM_QUANT else "auto"
    if quant == "compressed-tensors":
        return None
    return "flashinfer_trtllm" if quant in DEEPSEEK_TRTLLM_QUANT else "auto"


def resolved_moe_runner(ctx: Context) -> str | None:
    """moe_runner_backend as the checks from handle_moe_kernel_config on read it (moe_hook.py:78-163, pipeline.py:294;
    then handle_a2a_moe, :295, layernorm SP, :315, validate_experimental_sgl_marlin, validation_hook.py:567, and
    check_server_args' LoRA checks, lora_hook.py:51, :197, :285): MXFP8's or NVFP4's replacement (mxfp8_moe_runner,
    modelopt_fp4_moe_runner; nvfp4_online's flashinfer_trtllm for an unset one, overrides.py:1462-1465), the runner as
    written (moe_backends: megamoe is auto), else, unset, what the SM100 model overrides put in
    (_sm100_override_moe_runner: flashinfer_trtllm for Qwen3-Next, Qwen3.5 and DeepSeek-V3 on a B200 / B300 with no
    A2A backend), "auto" for the table's other architectures. None where not certain (another architecture, GptOss,
    the overrides' inputs not known, nvfp4_online under flashinfer_megamoe). handle_a2a_moe later turns auto into
    flashinfer_megamoe / deep_gemm under those A2A backends (moe_hook.py:328-330, :405-409, :603-608), and
    flashinfer_trtllm into flashinfer_trtllm_routed under FlashInfer A2A with a dispatch type (:511-517): not here.

    None of the checks reading the runner after the overrides refuses differently for their flashinfer_trtllm than
    for auto (the resolver differential's 411 cases, fuzz-5-00257): the TRT-LLM runner's quantization assert
    (moe_hook.py:123-135) takes every quantization the overrides pick it under, the A2A blocks see no A2A backend (the
    overrides need none; enable_waterfill's deepep checks only flashinfer_cutedsl, :362-378), the LoRA checks test a
    lora_* prefix or experimental_sgl_trtllm, layernorm SP's runner check is Muse Spark's (layernorm_sp_hook.py:167),
    and SM100's profile refuses no TRT-LLM runner."""
    replaced = modelopt_fp4_moe_runner(ctx) or mxfp8_moe_runner(ctx)
    if replaced is not None:
        return replaced
    a2a, runner = moe_backends(ctx)
    if runner != "auto":
        return runner
    if _choice(ctx, "quantization", "") == "nvfp4_online":
        return None if a2a == "flashinfer_megamoe" else "flashinfer_trtllm"
    arch = certain_architecture(ctx)
    if arch in QWEN3_MOE_FAMILY_ARCHS or (arch in DEEPSEEK_FAMILY_ARCHS and not arch.startswith("LongcatFlash")):
        return _sm100_override_moe_runner(ctx, arch)
    # The table's other architectures: no model override picks a MoE runner for them (model_overrides/*.py register
    # none); GptOssForCausalLM's may (gpt_oss.py:64-117, by the checkpoint, the driver and triton_kernels).
    return "auto" if arch in ARCHITECTURES and arch != "GptOssForCausalLM" else None


NVFP4_ONLINE_RUNNERS = ("flashinfer_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutedsl")  # overrides.py:1466-1470


UNCERTAIN = "?"


def radix_cache_off(ctx: Context) -> bool:
    """Whether the radix cache is off when the model-specific checks run: disable_radix_cache, or a PD decode server
    without disaggregation_decode_enable_radix_cache (handle_pd_disaggregation sets disable_radix_cache=True there,
    pd_disaggregation_hook.py:98-127; :66-111 in 0.5.20, :86-119 in 0.5.21, :99-134 in 0.5.22), which runs before
    handle_model_specific_adjustments (pipeline.py:147, :225)."""
    return ctx.is_set("disable_radix_cache") or (
        _choice(ctx, "disaggregation_mode", "null") == "decode" and not ctx.is_set("disaggregation_decode_enable_radix_cache"))


# DETERMINISTIC_ATTENTION_BACKEND_CHOICES (choices.py:113-120): the backends deterministic inference runs on.
DETERMINISTIC_ATTENTION = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")
# RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND (choices.py:249; 0.5.20 :250, 0.5.21 :244, 0.5.22 :247, the same
# list): on any other backend handle_deterministic_inference turns the radix cache off.
RADIX_DETERMINISTIC_ATTENTION = ("ascend", "fa3", "fa4", "triton")
# _deterministic_is_deepseek_model (overrides.py:1039-1058, the same list in 0.5.20-0.5.22): these get triton, not
# flashinfer, when _deterministic_attention_backend fills an unset backend on SM100 / SM120.
DETERMINISTIC_TRITON_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                              "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                              "Glm4MoeLiteForCausalLM")


def deterministic_on(ctx: Context) -> bool:
    """Deterministic inference: enable_deterministic_inference, or rl_on_policy_target, which turns it on first
    (attention_hook.py:586-592, the same in 0.5.20-0.5.22)."""
    return ctx.is_set("enable_deterministic_inference") or _given(ctx, "rl_on_policy_target")


# The architectures _exaone_overrides is registered for (model_overrides/exaone.py:15; the same from 0.5.22, when it
# began to fill an attention backend) and model_hook.py:668-671 checks.
EXAONE_ARCHITECTURES = ("Exaone4ForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM")


def exaone_sliding_window(ctx: Context) -> bool:
    """True when json_model_override_args sets sliding_window_pattern to a value (not null): the condition of
    SGLang's EXAONE override and branch, known for certain only there (a checkpoint's own config.json is the
    preflight's)."""
    override = _json_arg(ctx, "json_model_override_args")
    return isinstance(override, dict) and override.get("sliding_window_pattern") is not None


def exaone_attention_backend(ctx: Context) -> str | None:
    """The attention backend _exaone_overrides fills for EXAONE 4 with a sliding_window_pattern and no
    attention_backend written (model_overrides/exaone.py:18-29, from 0.5.22; 0.5.21's fills none): trtllm_mha on
    SM100 (is_sm100: the major 10), fa3 from SM80 on (RTX PRO 6000 and Thor included), else triton. None where it fills
    none, or the architecture or the GPU is not certain."""
    cc = ctx.compute_capability
    if (cc is None or not added_in(ctx, "0.5.22") or certain_architecture(ctx) not in EXAONE_ARCHITECTURES
            or not exaone_sliding_window(ctx) or _given(ctx, "attention_backend")):
        return None
    return "trtllm_mha" if cc[0] == 10 else "fa3" if cc >= (8, 0) else "triton"


def model_override_attention_backend(ctx: Context) -> str | None:
    """The attention backend a model override of the table's checkpoints sets where the host sets none, before
    handle_deterministic_inference reads it (handle_model_specific_adjustments, pipeline.py:225 before :240; the same
    order in 0.5.20-0.5.22): trtllm_mla for the table's DeepseekV3ForCausalLM checkpoints on SM100 with no attention,
    prefill or decode backend written (model_overrides/deepseek_v2.py:178-185; 0.5.20 :151-157, 0.5.21 :144-150,
    0.5.22 :180-186), and Qwen3.5 / Qwen3-Next's SM100 pick (qwen35_sm100_backend); a DSA-by-override model's dsa on any
    GPU (dsa_attention_backend, deepseek_v2.py:102-103); EXAONE 4's with a sliding window (exaone_attention_backend).
    None where none applies."""
    if dsa_override(ctx) is not None:
        return dsa_attention_backend(ctx)
    exaone = exaone_attention_backend(ctx)
    if exaone:
        return exaone
    cc = ctx.compute_capability
    if cc is None or cc[0] != 10:
        return None
    if table_deepseek_v3(ctx):
        return None if any(_choice(ctx, d, "") for d in _ALL_DESTS) else "trtllm_mla"
    return qwen35_sm100_backend(ctx)


def deterministic_attention_backend(ctx: Context) -> str | None:
    """view.attention_backend as handle_deterministic_inference reads it (attention_hook.py:640-642, after
    _deterministic_attention_backend, overrides.py:1093-1123; 0.5.20 :1123-1153, 0.5.21 :1015-1045, 0.5.22
    :1034-1064): device hpu's torch_native whatever is written and device cpu's intel_amx for an unset one (the platform
    hooks, pipeline.py:205-206), the host's attention_backend, a model override's (model_override_attention_backend),
    else the fill: triton for the DeepSeek-like architectures (DETERMINISTIC_TRITON_ARCHS) and flashinfer for the others
    on SM100 / SM120 (is_sm100 / is_sm120, by the major), fa3 elsewhere. prefill_attention_backend and
    decode_attention_backend do not count: the fill reads attention_backend alone, and so does it on device xpu or mps,
    whose hooks leave it alone and whose fill asks the GPU (get_platform). None where it is not certain (device npu
    with no backend written, an unknown GPU or model, gpt-oss and DeepSeek-V3.2 with their own
    overrides, another DeepSeek-family checkpoint on SM100)."""
    device, backend = _choice(ctx, "device", "cuda"), _choice(ctx, "attention_backend", "")
    if added_in(ctx, "0.5.23"):
        backend = BACKEND_ALIASES.get(backend, backend)  # handle_deprecated_args renames first (serving_hook.py:304)
    if device == "hpu":
        return "torch_native"
    if device == "cpu" and not backend:
        return "intel_amx"
    if backend or device == "npu":  # the NPU hook fills in its own defaults (platform_hook.py:33-38)
        return backend or None
    cc, arch = ctx.compute_capability, ctx.model.architecture
    if cc is None or not ctx.model.known or ctx.model.family in ("unknown", "gpt-oss", "deepseek-v3.2"):
        return None
    override = model_override_attention_backend(ctx)
    if override:
        return override
    if cc[0] == 10 and arch in DEEPSEEK_FAMILY_ARCHS and not table_deepseek_v3(ctx):
        return None
    if cc[0] in (10, 12):
        return "triton" if arch in DETERMINISTIC_TRITON_ARCHS else "flashinfer"
    return "fa3"


def deterministic_radix_off(ctx: Context) -> bool | None:
    """Whether handle_deterministic_inference turns the radix cache off (attention_hook.py:656-665; 0.5.22 :655-664,
    0.5.21 :567-576, 0.5.20 :570-579): deterministic inference on an attention backend it runs
    (DETERMINISTIC_ATTENTION) outside RADIX_DETERMINISTIC_ATTENTION, as deterministic_attention_backend reads it, the
    fill for an unset one included. False without deterministic inference or where the backend keeps the radix cache;
    None where the backend is not certain, or is one SGLang refuses for deterministic inference before it gets here.
    The checks after it in the pipeline (from pipeline.py:240; handle_model_specific_adjustments' mamba checks come
    before) see the radix cache off."""
    if not deterministic_on(ctx):
        return False
    backend = deterministic_attention_backend(ctx)
    if backend not in DETERMINISTIC_ATTENTION:
        return None
    return backend not in RADIX_DETERMINISTIC_ATTENTION


def cache_radix_off(ctx: Context) -> tuple[str, str, str] | None:
    """What has the radix cache off by the time handle_hicache and handle_cache_compatibility read it (pipeline.py:272,
    :334; the same order in 0.5.20-0.5.22): (the variable to name, why, the fix), or None where it is on or not known to
    be off. disable_radix_cache; a PD decode server without disaggregation_decode_enable_radix_cache (radix_cache_off);
    enable_mis (handle_multi_item_scoring, attention_hook.py:556-562; 0.5.20 :470-476, 0.5.21 :467-473, 0.5.22
    :555-561); deterministic inference on an attention backend outside RADIX_DETERMINISTIC_ATTENTION
    (handle_deterministic_inference, attention_hook.py:656-665; 0.5.20 :570-579, 0.5.21 :567-576, 0.5.22 :655-664),
    the fill included: the seed-3 10,000-case run's MISSED fuzz-3-00420, Qwen3-Next with deterministic inference and
    LMCache on an RTX 5090, whose unset backend becomes flashinfer (kv_cache_hook.py:445)."""
    if ctx.is_set("disable_radix_cache"):
        return "disable_radix_cache", "disable_radix_cache", f"remove {ctx.var('disable_radix_cache')}"
    if radix_cache_off(ctx):
        return ("disaggregation_mode", "a PD decode server turns off (handle_pd_disaggregation sets disable_radix_cache "
                "unless disaggregation_decode_enable_radix_cache is set)",
                f"set {ctx.var('disaggregation_decode_enable_radix_cache')}: true")
    if ctx.is_set("enable_mis"):
        return ("enable_mis", "enable_mis turns off (handle_multi_item_scoring sets disable_radix_cache)",
                f"remove {ctx.var('enable_mis')}")
    if deterministic_radix_off(ctx):
        backend = deterministic_attention_backend(ctx)
        dest = "enable_deterministic_inference" if ctx.is_set("enable_deterministic_inference") else "rl_on_policy_target"
        written = "" if _choice(ctx, "attention_backend", "") else ", which SGLang picks for an unset attention_backend here"
        return (dest, f"deterministic inference turns off on attention backend {backend}{written} "
                f"(handle_deterministic_inference keeps it for {', '.join(RADIX_DETERMINISTIC_ATTENTION)} only)",
                f"set {ctx.var('attention_backend')}: triton (or fa3 / fa4 where the GPU runs them)")
    return None


# The quantizations the TRT-LLM MoE runners take (moe_hook.py:124-133 flashinfer_trtllm / experimental_sgl_trtllm,
# :138-146 flashinfer_trtllm_routed; 0.5.20-0.5.22 the same but minimax_m3_nvfp4, new in 0.5.23); None: bf16.
TRTLLM_MOE_QUANT = ("modelopt_fp4", "nvfp4_online", "fp8", "mxfp8", "modelopt_fp8", "modelopt_mixed", "compressed-tensors",
                    None)


def trtllm_routed_quant(ctx: Context) -> tuple[str | None, ...]:
    """What flashinfer_trtllm_routed runs in the context's release (moe_hook.py:138-146)."""
    return ("fp8", "mxfp8", "modelopt_fp4", "modelopt_mixed", "nvfp4_online",
            *(("minimax_m3_nvfp4",) if added_in(ctx, "0.5.23") else ()), None)


CUTLASS_MOE_QUANT = ("modelopt_fp4", "modelopt_fp8", "modelopt_mixed", None)  # moe_hook.py:80-87


CUTEDSL_MOE_QUANT = ("modelopt_fp4", "modelopt_mixed", "nvfp4_online")  # moe_hook.py:95-100


# _deepseek_moe_quant_resolution (overrides.py:745-809) fills an unset quantization in from the checkpoint on SM100.
DEEPSEEK_FAMILY_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
                         "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                         "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
                         "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")


# The model overrides that fill an unset --quantization in from config.json's quantization_config.quant_method before
# handle_moe_kernel_config reads it (handle_model_specific_adjustments, pipeline.py:225, before :294; the same order
# and overrides in 0.5.20-0.5.22): on SM100 (is_sm100, by the major) the DeepSeek family (_deepseek_moe_quant_resolution,
# overrides.py:763-809), the Qwen3 MoE family (model_overrides/qwen3_moe.py:29-49) and GLM-4 MoE (glm4_moe.py:15-33);
# MiniMax-M3 on any GPU (minimax_m3.py:37-54).
SM100_QUANT_FILL_ARCHS = (*DEEPSEEK_FAMILY_ARCHS, "Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration",
                          "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                          "InternS2PreviewForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                          "Qwen4ExpForConditionalGeneration", "Glm4MoeForCausalLM")
ANY_GPU_QUANT_FILL_ARCHS = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")


def checkpoint_quantization_filled(ctx: Context) -> str | None:
    """The quantization a model override puts in for an unset --quantization before handle_moe_kernel_config reads
    it: the checkpoint's quant_method (get_quantization_config, as ModelConfig reads it: the model table's) for
    SM100_QUANT_FILL_ARCHS on SM100 (model_overrides/qwen3_moe.py:41-49, glm4_moe.py:19-32) and
    ANY_GPU_QUANT_FILL_ARCHS on any GPU (minimax_m3.py:46-53). None where nothing is filled: the host wrote one, the
    checkpoint is unquantized or not known for certain, or another GPU. The DeepSeek family's fill is claimed for its
    FP8 checkpoints only (what the fuzzer confirmed, checkpoint_fp8_filled). Qwen3.5-397B-A17B-NVFP4 on a B200 with
    moe_runner_backend flashinfer_cutedsl is modelopt_fp4 there, which the CuteDSL runner runs (moe_hook.py:95-101):
    a false alarm while the rules read "none".

    A ``quantization_config`` in json_model_override_args replaces the checkpoint's before the overrides read it
    (get_quantization_config, utils/common.py:3849-3854, on the merged config): its quant_method is what is filled in
    (a string ModelConfig's parse keeps: "modelopt" or none is rewritten by quant_algo, model_config.py:1727-1741, and
    DeepSeek-V3 with no quant_method reads the weights' headers, overrides.py:794-797: UNCERTAIN). Qwen3-Next with an
    fp8 quantization_config override on a B200 is fp8 there (flashinfer_cutlass refused, moe_hook.py:81), DeepSeek-V3
    with quant_method w8a8_fp8 is w8a8_fp8 (flashinfer_trtllm refused, moe_hook.py:124)."""
    arch, cc = ctx.model.architecture, ctx.compute_capability
    if _given(ctx, "quantization") or not ctx.model.known or not (
            arch in ANY_GPU_QUANT_FILL_ARCHS or (cc is not None and cc[0] == 10 and arch in SM100_QUANT_FILL_ARCHS)):
        return None
    override = _model_override(ctx)
    if override and "quantization_config" in override:
        given = override["quantization_config"]
        declared = given.get("quant_method") if isinstance(given, dict) else None
        if isinstance(declared, str) and declared and declared != "modelopt":
            return declared
        return None if given is None and arch not in DEEPSEEK_FAMILY_ARCHS else UNCERTAIN
    method = ctx.model.quant_method
    return None if not method or (arch in DEEPSEEK_FAMILY_ARCHS and method != "fp8") else method


def checkpoint_fp8_filled(ctx: Context) -> bool:
    """Whether a model override turns an unset --quantization into the checkpoint's fp8 before handle_moe_kernel_config
    (checkpoint_quantization_filled): DeepSeek-V3 / R1, the Qwen3-Next and Qwen3.5 FP8 exports. The seed-3 10,000-case
    run's MISSED fuzz-3-00403: DeepSeek-V3 with moe_runner_backend cutlass and ep_size 2048 on a B200, refused as FP8
    (moe_hook.py:161)."""
    return checkpoint_quantization_filled(ctx) == "fp8"


def moe_kernel_quantization(ctx: Context) -> str | None:
    """The quantization handle_moe_kernel_config compares (view.quantization, moe_hook.py:78-100): the host's
    --quantization (unquant: none, serving_hook.py:692-699), else none, except where SGLang fills it in first: the
    checkpoint's (checkpoint_quantization_filled: DeepSeek-V3's fp8 with flashinfer_cutlass or flashinfer_cutedsl on a
    B200 is refused, moe_hook.py:81, :98; Qwen3.5's modelopt_fp4 there is not), UNCERTAIN for the DeepSeek family's
    other checkpoints on SM100, a GGUF file or a model that is not known. MXFP8 and nvfp4_online are UNCERTAIN too: their runner
    constraints come first (overrides.py:1449-1512: MXFP8 replaces a runner it does not run, nvfp4_online refuses one;
    server.moe and the hardware profiles report those)."""
    quant = ctx.args.get("quantization")
    if quant is not None and quant is not False:
        quant = str(quant)
        # mxfp8 and nvfp4_online: their runner constraints act first (overrides.py:1452-1512, which raise or replace).
        return UNCERTAIN if quant in ("mxfp8", "nvfp4_online") else None if quant == "unquant" else quant
    cc = ctx.compute_capability
    if not ctx.model.known or cc is None or str(ctx.model.path or "").endswith(".gguf"):
        return UNCERTAIN
    filled = checkpoint_quantization_filled(ctx)
    if filled is not None:
        return UNCERTAIN if filled in ("mxfp8", "nvfp4_online") else filled
    if cc[0] == 10 and ctx.model.architecture in DEEPSEEK_FAMILY_ARCHS:
        return UNCERTAIN
    return None


PAGE_TREE_SPEC_BACKENDS = ("flashinfer", "fa3", "triton")  # speculative_hook.py:1271


def resolved_base_attention_backend(ctx: Context) -> str | None:
    """view.attention_backend where certain, as the checks from handle_attention_backend_compatibility on read it
    (pipeline.py:242; the paged tree draft's, speculative_hook.py:1278, and NGRAM's, :1361): the shared prefill/decode
    one, which replaces the base whatever it is (_attention_backend_default, overrides.py:1127-1131; an NVFP4 KV cache's
    pair included, nvfp4_kv_attention_backends: trtllm_mha for both with native NVFP4 on SM100), else the base as the
    hooks before fill it (filled_attention_backend: the host's, device cpu's / hpu's, deterministic inference's, a model
    override's), else SGLang's default (default_attention_backend). The resolver-differential's fuzz-1-05769:
    attention_backend triton with prefill and decode llada2_cfg_flashinfer, whose base is llada2_cfg_flashinfer (a
    paged EAGLE tree there is refused, :1278; flashinfer with triton for both is refused NGRAM's paged tree, :1361)."""
    if nvfp4_kv_decodes_with_trtllm_mha(ctx):
        prefill, decode = nvfp4_kv_attention_backends(ctx)
    else:
        prefill, decode = _choice(ctx, "prefill_attention_backend", ""), _choice(ctx, "decode_attention_backend", "")
    if prefill and prefill == decode:
        return fa3_fp8_fallback(ctx, prefill)
    base = filled_attention_backend(ctx)
    return fa3_fp8_fallback(ctx, default_attention_backend(ctx) if base == "" else base)


def linear_decode_backend_settled(ctx: Context) -> str | None:
    """linear_decode_backend with an unset mamba_ssm_dtype decided: SGLang's SM100 flashinfer default needs it bfloat16
    (attention_hook.py:289-293), and argument handling leaves it None (config.json's mamba_ssm_dtype is read only when
    the model loads, configs/mamba_utils.py:52-100; enable_linear_replayssm_spec sets float32 only after the decode
    backend is chosen, attention_hook.py:506-516), so the base backend stays (flashkda decoding on triton). None only
    where mamba_ssm_dtype is bfloat16 and the GPU is unknown."""
    decode = linear_decode_backend(ctx)
    if decode is None and ctx.args.get("mamba_ssm_dtype") is None:
        return linear_base_decode_backend(ctx)
    return decode


def certain_architecture(ctx: Context) -> str | None:
    """``hf_config.architectures[0]`` as SGLang's architecture gates read it (handle_shared_experts_tp,
    parallel_hook.py:224; handle_layernorm_sp, layernorm_sp_hook.py:29-31), where it is certain: ctx.model's (the
    architecture after json_model_override_args, which run_rules publishes: base.model_after_overrides) when the
    override names one or the model is the table's or declared; None where only the checkpoint's config.json tells
    (the preflight's), or the override's first entry is not a name."""
    names = _override_architectures(ctx)
    certain = isinstance(names[0], str) if names is not None else ctx.model.known
    return str(ctx.model.architecture) if certain and ctx.model.architecture else None
