# SPDX-License-Identifier: Apache-2.0
"""Further launch checks of SGLang on the arguments alone: minimums, refused pairs, CUDA-graph buckets and
feature combinations (tests/catalog/mapping-*.yml maps each to its rule).

Each condition is SGLang 0.5.23's own, on the values its resolution pipeline leaves them at; where a hook may
change a value first, the rule reads the same.  SGLang refuses all of them before or just after the weights load.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _AH,
    _SH,
    _VH,
    _below,
    _cc,
    _choice,
    _given,
    _int,
    _json_arg,
    _num,
    _override_architectures,
    env_true,
    nextn_as_eagle,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    DETERMINISTIC_ATTENTION,
    RADIX_DETERMINISTIC_ATTENTION,
    attention_dp_on,
    attention_dp_width,
    cache_radix_off,
    capture_only,
    certain_architecture,
    chunk_dp_width,
    decode_host_receive_on,
    deepseek_cp_attention_dp,
    derived_context_length,
    deterministic_attention_backend,
    deterministic_on,
    dsa_backends,
    dsa_kv_cache_dtype,
    dsa_override,
    dwdp_on,
    gpu_memory_mib,
    kv_shard_chunk,
    model_override_attention_backend,
    moe_backends,
    resolved_attention_backends,
    resolved_mamba_strategy,
    resolved_page_size,
    transfer_backend,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("server.minimum", shared=True, sources=(
    "sglang/srt/arg_groups/validation_hook.py:183",
    "sglang/srt/arg_groups/validation_hook.py:273",
    "sglang/srt/arg_groups/validation_hook.py:275",
    "sglang/srt/arg_groups/validation_hook.py:276",
    "sglang/srt/arg_groups/validation_hook.py:314",
    "sglang/srt/arg_groups/validation_hook.py:660",
    "sglang/srt/arg_groups/validation_hook.py:662",
    "sglang/srt/arg_groups/validation_hook.py:688",
    "sglang/srt/arg_groups/serving_hook.py:127",
    "sglang/srt/arg_groups/serving_hook.py:132",
    "sglang/srt/arg_groups/serving_hook.py:145",
    "sglang/srt/arg_groups/serving_hook.py:379",
    "sglang/srt/arg_groups/mamba_hook.py:22",
    "sglang/srt/arg_groups/validation_hook.py:274",
    "sglang/srt/arg_groups/mamba_hook.py:25",
    "sglang/srt/arg_groups/validation_hook.py:370",
))
def _minimums(ctx: Context, report: Report) -> None:
    """Numeric arguments SGLang bounds from below (each check names its file:line and the release that added it)."""
    for dest, least, strict, where, since in (
        ("pp_max_micro_batch_size", 1, False, f"{_VH}:183", "0.5.20"),
        ("tokenizer_worker_num", 0, True, f"{_VH}:273", "0.5.20"),
        ("mm_processor_worker_num", 0, False, f"{_VH}:275", "0.5.20"),
        ("mm_io_worker_num", 0, False, f"{_VH}:276", "0.5.20"),
        ("schedule_conservativeness", 0, False, f"{_VH}:314", "0.5.20"),
        ("prefill_decode_interval", 0, False, f"{_VH}:660", "0.5.20"),
        ("prefill_decode_interval_min_bs", 0, False, f"{_VH}:662", "0.5.23"),
        ("sampling_mask_max_tokens", 0, True, f"{_VH}:688", "0.5.20"),
        ("asr_max_buffer_seconds", 0, True, f"{_SH}:127", "0.5.20"),
        ("asr_max_concurrent_sessions", 0, True, f"{_SH}:132", "0.5.20"),
        ("mm_preprocess_cache_size_mb", 0, False, f"{_SH}:145", "0.5.20"),
        ("grpc_response_timeout_secs", 0, True, f"{_SH}:379", "0.5.21"),
        ("mamba_cache_philox_rounds", 0, False, "sglang/srt/arg_groups/mamba_hook.py:22", "0.5.20"),
    ):
        if added_in(ctx, since):
            _below(ctx, "server.minimum", dest, least, where, strict)
    # skip_tokenizer_init leaves nothing to detokenize: SGLang then forces detokenizer_worker_num to 1 first
    # (serving_hook.py:764-772, unless SGLANG_RUST_SERVER).
    if not ctx.is_set("skip_tokenizer_init") or env_true(ctx.env, "SGLANG_RUST_SERVER"):
        _below(ctx, "server.minimum", "detokenizer_worker_num", 0, f"{_VH}:274", strict=True)
    states = _num(ctx, "mamba_max_states_per_path")
    if states is not None and (states == 0 or states < -1):
        ctx.error("server.minimum", "mamba_max_states_per_path",
                  f"mamba_max_states_per_path={states}: SGLang takes -1 (unlimited) or a positive number only.",
                  f"set {ctx.var('mamba_max_states_per_path')} to -1 or a positive number, or remove it",
                  "sglang/srt/arg_groups/mamba_hook.py:25")
    gc = ctx.args.get("gc_threshold")
    if isinstance(gc, list) and len(gc) > 3:
        ctx.error("server.minimum", "gc_threshold", f"gc_threshold has {len(gc)} values; SGLang takes 1 to 3 integers.",
                  f"give {ctx.var('gc_threshold')} at most 3 integers", f"{_VH}:370")


@rule("server.pdmux", file=_VH, sources=(
    "sglang/srt/arg_groups/validation_hook.py:250",
    "sglang/srt/arg_groups/validation_hook.py:253",
    "sglang/srt/arg_groups/validation_hook.py:256",
    "sglang/srt/arg_groups/validation_hook.py:259",
))
def _pdmux(ctx: Context, report: Report) -> None:
    """check_server_args' PD-multiplexing asserts (validation_hook.py:249-261), on the resolved values: pp_size 1,
    chunked prefill off (-1), no PD disaggregation, the overlap scheduler off.  SGLang sets chunked_prefill_size -1
    itself for some models (decision and embedding checkpoints, multimodal ones without chunked prefill:
    model_hook.py:206-221, :763-781, :850-887, :1024-1032) and with enable_mis (attention_hook.py:565-570), and turns
    the overlap scheduler off for pipeline parallelism, Mamba no_buffer, diffusion LLMs, a sparse embedding head and
    CPU / MPS (overrides.py:478-486, :917-923, :1622-1627, :1719-1727): those two are checked on the model table's
    models only, outside those cases (a hybrid model's overlap where its Mamba strategy resolves to extra_buffer; the
    fresh 2000-case run of issue 36: enable_pdmux alone on Qwen3.5)."""
    if not ctx.is_set("enable_pdmux"):
        return
    chunk = ctx.args.get("chunked_prefill_size")
    plain = ctx.model.known and not ctx.is_set("enable_mis") and not ctx.is_set("is_embedding")
    # On a hybrid linear-attention model the Mamba radix cache's auto strategy turns the overlap scheduler off where
    # it settles on no_buffer (overrides.py:477-486); every other strategy keeps it on: extra_buffer, extra_buffer_lazy
    # or no_buffer as written (which mamba.no_buffer refuses with the overlap on, mamba_hook.py:158), and ``auto`` with
    # the radix cache off, which the pass leaves alone (overrides.py:473-474; resolved_mamba_strategy None): the
    # resolver-differential's MISSED with disable_radix_cache, and with extra_buffer_lazy (validation_hook.py:259).
    auto_no_buffer = ctx.model.hybrid_linear_attention and str(ctx.get("mamba_radix_cache_strategy", "auto")) == "auto" \
        and resolved_mamba_strategy(ctx) == "no_buffer"
    overlap_kept = plain and not auto_no_buffer \
        and not _given(ctx, "dllm_algorithm") \
        and not ctx.env.get("SGLANG_EMBEDDINGS_SPARSE_HEAD") and _choice(ctx, "device", "cuda") not in ("cpu", "mps")
    for bad, dest, why, line in (
        (_int(ctx, "pp_size", 1) != 1, "pp_size", "pipeline parallelism (it needs pp_size 1)", 250),
        (plain and chunk != -1, "chunked_prefill_size",
         f"chunked prefill (chunked_prefill_size {chunk if chunk is not None else 'unset: SGLang picks one by the GPU memory'}"
         "; it needs -1)", 253),
        (_choice(ctx, "disaggregation_mode", "null") != "null", "disaggregation_mode", "PD disaggregation", 256),
        (overlap_kept and not ctx.is_set("disable_overlap_schedule"), "disable_overlap_schedule",
         "the overlap scheduler (it needs disable_overlap_schedule)", 259),
    ):
        if bad:
            report.refuse(dest, f"enable_pdmux (PD-multiplexing) does not work with {why}.",
                          f"fix {ctx.var(dest)}, or remove {ctx.var('enable_pdmux')}", line)
            return


# --dtype values SGLang maps to a torch dtype other than bfloat16 (sglang/srt/configs/model_config.py:2274-2280).
_NOT_BFLOAT16 = ("half", "float16", "float", "float32")


@rule("server.combination", sources=(
    "sglang/srt/arg_groups/validation_hook.py:188",
    "sglang/srt/arg_groups/validation_hook.py:282",
    "sglang/srt/arg_groups/validation_hook.py:304",
    "sglang/srt/arg_groups/validation_hook.py:341",
    "sglang/srt/arg_groups/validation_hook.py:375",
    "sglang/srt/arg_groups/validation_hook.py:484",
    "sglang/srt/arg_groups/validation_hook.py:165",
    "sglang/srt/arg_groups/serving_hook.py:757",
    "sglang/srt/arg_groups/mamba_hook.py:32",
    "sglang/srt/arg_groups/mamba_hook.py:45",
    "sglang/srt/arg_groups/memory_hook.py:34",
    "sglang/srt/arg_groups/memory_hook.py:41",
    "sglang/srt/arg_groups/model_overrides/qwen4_exp.py:42-47",
    "sglang/srt/arg_groups/kv_shard_hook.py:99-104",
    "sglang/srt/arg_groups/model_path_hook.py:271",
    "sglang/srt/arg_groups/model_path_hook.py:282",
    "sglang/srt/arg_groups/platform_hook.py:30",
    "sglang/srt/hardware_backend/mlx/runtime.py:35",
    "sglang/srt/dllm/config.py:72",
    "sglang/srt/arg_groups/expert_pack_hook.py:192",
))
def _combinations(ctx: Context, report: Report) -> None:
    """Pairs of arguments SGLang refuses together (or one without the other)."""
    if ctx.args.get("load_format") == "expert_pack":
        # handle_expert_pack (expert_pack_hook.py:32-192, pipeline.py:139; 0.5.20 / 0.5.21 without --attn-dp-size):
        # every parallel size 1, and a deepseek_v4 or Kimi-K3 kimi_linear config.json
        # (model_loader/expert_pack_config.py:25-34), which no architecture of the model table has. The pack and
        # manifest files on the host stay the preflight's. targeted-memory-44: expert_pack on Llama-3.1-8B.
        dests = ("tp_size", "dp_size", "attn_dp_size", "ep_size") if added_in(ctx, "0.5.22") else \
            ("tp_size", "dp_size", "ep_size")
        bad = [f"{d}={size}" for d in dests if (size := _int(ctx, d, 1)) != 1]
        arch = certain_architecture(ctx)
        if bad or arch in ARCHITECTURES:
            report.refuse("load_format", "load_format expert_pack needs " + " and ".join(
                (["every parallel size 1 (" + ", ".join(bad) + ")"] if bad else []) +
                ([f"a DeepSeek-V4 or Kimi-K3 checkpoint, not {arch}"] if arch in ARCHITECTURES else [])) + ".",
                f"remove {ctx.var('load_format')}, or serve a DeepSeek-V4 / Kimi-K3 expert pack on one GPU",
                "sglang/srt/arg_groups/expert_pack_hook.py:192")
    arch = certain_architecture(ctx) if _given(ctx, "dllm_algorithm") else None
    if arch is not None and arch not in DLLM_ARCHITECTURES:
        # handle_dllm_inference's _dllm_page_size pass builds DllmConfig.from_server_args (dllm_hook.py:43, pipeline.py:
        # 342), which knows the block size of these diffusion architectures only (dllm/config.py:52-72; 0.5.20 :39-51,
        # without DiffusionGemma): targeted-memory-45, dllm_algorithm LowConfidence on Llama-3.1-8B.
        report.refuse("dllm_algorithm", f"dllm_algorithm runs diffusion language models only; {arch} is not one SGLang "
                      f"knows ({', '.join(DLLM_ARCHITECTURES)}).", f"remove {ctx.var('dllm_algorithm')}",
                      "sglang/srt/dllm/config.py:" + release_line(ctx, DLLM_UNKNOWN_LINES))
    if env_true(ctx.env, "SGLANG_USE_MLX"):
        # handle_hardware_runtime_validation calls use_mlx() first thing (platform_hook.py:23-30, pipeline.py:104; the
        # same in 0.5.20-0.5.22), whose _validate_runtime needs MLX, Torch 2.13 and an Apple MPS / Metal device
        # (hardware_backend/mlx/runtime.py:31-60): on an NVIDIA host it always raises. targeted-memory-19.
        report.refuse("sglang_env.SGLANG_USE_MLX", "SGLANG_USE_MLX turns on SGLang's MLX backend for Apple silicon, "
                      "which needs MLX and an MPS / Metal device; on an NVIDIA GPU host SGLang refuses to start.",
                      "remove sglang_env.SGLANG_USE_MLX (or set it to 0)", "sglang/srt/hardware_backend/mlx/runtime.py:35")
    if ctx.is_set("disable_cuda_graph_padding") and ctx.is_set("enable_torch_compile"):
        report.refuse("disable_cuda_graph_padding", "disable_cuda_graph_padding and enable_torch_compile: without padding every "
                      "batch size gets its own torch.compile cycle.",
                      f"remove {ctx.var('disable_cuda_graph_padding')} or {ctx.var('enable_torch_compile')}", f"{_VH}:188")
    if ctx.is_set("enable_priority_scheduling") and _choice(ctx, "schedule_policy", "fcfs") not in ("fcfs", "lof"):
        report.refuse("schedule_policy", f"enable_priority_scheduling needs schedule_policy fcfs or lof, not "
                      f"{_choice(ctx, 'schedule_policy', 'fcfs')!r}.", f"set {ctx.var('schedule_policy')}: fcfs (or lof)", f"{_VH}:282")
    if ctx.args.get("retraction_policy") == "priority" and not ctx.is_set("enable_priority_scheduling"):
        report.refuse("retraction_policy", "retraction_policy priority needs enable_priority_scheduling.",
                      f"set {ctx.var('enable_priority_scheduling')}: true, or retraction_policy: length", f"{_VH}:304")
    if ctx.is_set("export_metrics_to_file") and not ctx.is_set("export_metrics_to_file_dir"):
        report.refuse("export_metrics_to_file", "export_metrics_to_file needs export_metrics_to_file_dir.",
                      f"set {ctx.var('export_metrics_to_file_dir')} (a directory on the host), or remove "
                      f"{ctx.var('export_metrics_to_file')}", f"{_VH}:341")
    if ctx.is_set("enable_quant_communications"):
        tp1 = _int(ctx, "tp_size", 1) == 1
        report.refuse("enable_quant_communications", "enable_quant_communications (INT8 TP communications) "
                      + ("is only used with tp_size > 1, and " if tp1 else "") + "is supported on Ascend NPUs only.",
                      f"remove {ctx.var('enable_quant_communications')}", f"{_VH}:{350 if tp1 else 353}")
    if (_num(ctx, "kv_canary_sweep_interval") or 0) > 0 and _choice(ctx, "kv_canary", "none") == "none":
        report.refuse("kv_canary_sweep_interval", "kv_canary_sweep_interval > 0 needs kv_canary log or raise.",
                      f"set {ctx.var('kv_canary')}: log, or remove {ctx.var('kv_canary_sweep_interval')}", f"{_VH}:375")
    # Deterministic inference (enable_deterministic_inference, or rl_on_policy_target) rewrites every sampling backend
    # but ascend to pytorch before the device check (_deterministic_sampling_backend, overrides.py:1029-1036, run by
    # attention_hook.py:620; the seed-10 run's STRICTER-UNEXPLAINED fuzz-10-06339 and fuzz-10-02118).
    if added_in(ctx, "0.5.21") and ctx.args.get("sampling_backend") == "intel_xpu" and \
            _choice(ctx, "device", "cuda") != "xpu" and not deterministic_on(ctx):
        report.refuse("sampling_backend", "sampling_backend intel_xpu is for Intel GPUs (device xpu).",
                      f"use flashinfer or pytorch, or remove {ctx.var('sampling_backend')}",
                      f"{_VH}:" + release_line(ctx, {"0.5.23": "484", "0.5.22": "483", "0.5.21": "392"}))
    if _int(ctx, "pp_size", 1) > 1 and _given(ctx, "min_free_slots_delay"):
        report.refuse("min_free_slots_delay", f"min_free_slots_delay does not work with pipeline parallelism "
                      f"(pp_size={_int(ctx, 'pp_size', 1)}).", f"remove {ctx.var('min_free_slots_delay')}", f"{_VH}:165")
    if ctx.is_set("enable_tokenizer_batch_encode") and ctx.is_set("enable_dynamic_batch_tokenizer"):
        report.refuse("enable_dynamic_batch_tokenizer", "enable_tokenizer_batch_encode and enable_dynamic_batch_tokenizer are "
                      "two tokenizer batching approaches; choose one.",
                      f"remove {ctx.var('enable_tokenizer_batch_encode')} or {ctx.var('enable_dynamic_batch_tokenizer')}",
                      f"{_SH}:757")
    # Unset counts: SGLang compares the argument itself, which nothing fills in from the model's config before this
    # check (only enable_linear_replayssm_spec sets it, to float32: attention_hook.py:506-516), so None is refused too
    # (the seed-0 fuzzer's MISSED, issue 36).
    if ctx.is_set("enable_mamba_cache_stochastic_rounding") and ctx.args.get("mamba_ssm_dtype") != "float16":
        report.refuse("mamba_ssm_dtype", "enable_mamba_cache_stochastic_rounding needs mamba_ssm_dtype float16, "
                      + ("and it is unset (SGLang does not take it from the model's config here)."
                         if ctx.args.get("mamba_ssm_dtype") is None else f"not {ctx.args.get('mamba_ssm_dtype')!r}."),
                      f"set {ctx.var('mamba_ssm_dtype')}: float16, or remove "
                      f"{ctx.var('enable_mamba_cache_stochastic_rounding')}", "sglang/srt/arg_groups/mamba_hook.py:32")
    # With float16, the Triton Mamba kernels round with a PTX instruction of SM100 only: SGLang's is_sm100 is the
    # capability's major (10.0 and 10.3; sglang/srt/utils/common.py:289-335), the rest are refused (the fresh
    # 2000-case run of issue 36, on SM80). flashinfer's Mamba kernels are the preflight's (mamba_hook.py:53-72).
    elif ctx.is_set("enable_mamba_cache_stochastic_rounding") and _choice(ctx, "mamba_backend", "triton") == "triton" \
            and ctx.compute_capability is not None and ctx.compute_capability[0] != 10:
        report.refuse("mamba_backend", f"enable_mamba_cache_stochastic_rounding with the Triton Mamba backend needs "
                      f"SM100 (its cvt.rs.f16x2.f32 PTX instruction), not compute capability {_cc(ctx)}.",
                      f"set {ctx.var('mamba_backend')}: flashinfer, or remove "
                      f"{ctx.var('enable_mamba_cache_stochastic_rounding')}", "sglang/srt/arg_groups/mamba_hook.py:45")
    ple = ctx.args.get("ple_offload_embedding")
    if ple is True and ((_num(ctx, "cpu_offload_gb") or 0) > 0 or (_num(ctx, "offload_group_size") or 0) > 0):
        report.refuse("ple_offload_embedding", "ple_offload_embedding with cpu_offload_gb or offload_group_size: generic layer "
                      "offload would stage the pinned embedding back to the GPU.",
                      f"remove {ctx.var('cpu_offload_gb')} / offload_group_size, or ple_offload_embedding",
                      "sglang/srt/arg_groups/memory_hook.py:34")
    if ctx.args.get("ple_offload_backend") == "file" and ple is False:  # false renders --no-ple-offload-embedding
        report.refuse("ple_offload_backend", "ple_offload_backend file with ple_offload_embedding false "
                      "(--no-ple-offload-embedding): the file-backed table is the offloaded table.",
                      f"set {ctx.var('ple_offload_embedding')}: true (or leave it unset), or ple_offload_backend: pinned",
                      "sglang/srt/arg_groups/memory_hook.py:41")
    elif ctx.args.get("ple_offload_backend") == "file" and ple is None and \
            ctx.model.architecture == "Qwen4ExpForConditionalGeneration" and \
            _choice(ctx, "dtype", "auto") in _NOT_BFLOAT16:
        # Qwen4-Exp's override resolves an unset ple_offload_embedding to "CUDA and the model dtype is bfloat16"
        # (model_overrides/qwen4_exp.py:42-47); any other --dtype leaves it False, which memory_hook.py:41 refuses.
        report.refuse("ple_offload_backend", f"ple_offload_backend file on Qwen4-Exp with dtype "
                      f"{_choice(ctx, 'dtype', 'auto')!r}: SGLang turns ple_offload_embedding off for any dtype but "
                      "bfloat16, and the file-backed table is the offloaded table.",
                      f"set {ctx.var('dtype')}: bfloat16 (or leave it unset for a bfloat16 checkpoint), or "
                      "ple_offload_backend: pinned", "sglang/srt/arg_groups/memory_hook.py:41, "
                      "sglang/srt/arg_groups/model_overrides/qwen4_exp.py:42-47")
    if added_in(ctx, "0.5.22") and ctx.is_set("enable_kv_cache_sharding") and \
            _choice(ctx, "disaggregation_mode", "null") != "prefill":
        report.refuse("enable_kv_cache_sharding", "enable_kv_cache_sharding works on PD prefill workers only (a rank's pool "
                      "holds just its stripe of each page, which local decode cannot use).",
                      f"remove {ctx.var('enable_kv_cache_sharding')}", "sglang/srt/arg_groups/kv_shard_hook.py:99-104")
    if ctx.args.get("load_format") == "ipc_cache":
        report.refuse("load_format", "load_format ipc_cache is internal to SGLang's weight cache.",
                      "use weight_cache_mode client or daemon instead", "sglang/srt/arg_groups/model_path_hook.py:271")
    # enable_return_aux_hidden_states resets the algorithm to None first (capture_only, pipeline.py:94 before
    # handle_load_format at :326): targeted-memory-11, weight_cache_mode client with the EAGLE3 capture convention, is accepted.
    if _choice(ctx, "weight_cache_mode", "off") != "off" and _given(ctx, "speculative_algorithm") and \
            not capture_only(ctx):
        report.refuse("weight_cache_mode", "weight_cache_mode with speculative decoding: the weight cache daemon does not "
                      "export the draft model's weights.", f"set {ctx.var('weight_cache_mode')}: off, or turn speculative "
                      "decoding off (-e spec=off)", "sglang/srt/arg_groups/model_path_hook.py:282")


# DllmConfig.from_server_args' DLLM_PARAMS (sglang/srt/dllm/config.py:52-61; DiffusionGemma since 0.5.21) and where
# each release raises "Unknown diffusion LLM" for any other architecture (release_line).
DLLM_ARCHITECTURES = ("LLaDA2MoeModelLM", "SDARForCausalLM", "SDARMoeForCausalLM", "DiffusionGemmaForBlockDiffusion")
DLLM_UNKNOWN_LINES = {"0.5.23": "72", "0.5.22": "72", "0.5.21": "66", "0.5.20": "51"}

_KS = "sglang/srt/arg_groups/kv_shard_hook.py"

# The prefill attention backends validate_kv_shard_attention_backend lets through (fa3, and trtllm_mla with its own
# checks, kv_shard_hook.py:68-84), takes down the DSA path (dsa and its deprecated alias nsa, choices.py:74-75,
# :33-65), or that handle_deprecated_args may rename into trtllm_mla first (cutedsl_mla / tokenspeed_mla,
# serving_hook.py:303-323): never refused as "not fa3 / trtllm_mla" here.
KV_SHARD_PREFILL_BACKENDS = ("fa3", "trtllm_mla", "dsa", "nsa", "cutedsl_mla", "tokenspeed_mla")

# The switches handle_kv_cache_sharding refuses outright (kv_shard_hook.py; the 0.5.22 line where it differs): no
# hook before it (pipeline.py:284; 0.5.22 :272) turns them off.
KV_SHARD_REFUSED_SWITCHES = (
    ("enable_unified_cache_external_linker", "the unified cache's external linker (load-back allocates through the "
     "flat allocator API)", 146, 93),
    ("enable_streaming_session", "streaming sessions (their virtual nodes carry no KV-shard rotation metadata)", 152, 99),
    ("enable_session_radix_cache", "the session radix cache", 157, 104),
    ("enable_flexkv", "FlexKV (its load-back allocates through the stock flat allocator API)", 161, 108),
    ("enable_unified_memory", "the unified memory pool (another virtual-id allocator and layout)", 166, 113),
    ("enable_lmcache", "LMCache", 195, 130),
    ("enable_hisparse", "HiSparse (a non-sharded allocator, each rank owning whole KV pages)", 199, 134),
    ("enable_two_batch_overlap", "two-batch overlap (it rebuilds the attention metadata and clobbers the shard "
     "gather plan)", 214, 149),
)


KV_SHARD_SPEC_ARCHITECTURE = "GlmMoeDsaForCausalLM"  # kv_shard_hook.py:110


def _dsa_kv_shard(ctx: Context, report: Report, prefill: str, fix: str) -> None:
    """validate_kv_shard_attention_backend's DSA path for a DSA-by-override model (resolve.dsa_override), on the values
    SGLang resolved for it: the prefill backend dsa (resolve.dsa_attention_backend), the DSA backends, KV dtype and page
    (resolve.dsa_backends, dsa_kv_cache_dtype, dsa_page_size). 0.5.23 (kv_shard_hook.py:33-67): interleave prefill CP
    with attn_cp_size > 1 as the DSA CP override leaves it (the host's with interleave, else tp_size // attention-DP
    width: deepseek_v2.py:129-134) and pp_size 1 (:42), trtllm for both DSA backends with an fp8_e4m3 KV cache and
    page 64 (:51), Mooncake, index_kpool 1 uncompressed, no DSA cache layer split (:61); another prefill backend on a
    DSA model is refused (:67). 0.5.22 has no DSA path: dsa is not fa3 / trtllm_mla (:32). Before, the rule read the
    MLA DeepSeek-V3's triton and page 1 and refused for those reasons (probe: enable_kv_cache_sharding with
    disaggregation_mode prefill on the RTX PRO 6000, refused at :42)."""
    if not added_in(ctx, "0.5.23"):
        report.refuse("enable_kv_cache_sharding", "enable_kv_cache_sharding in SGLang 0.5.22 needs the fa3 prefill "
                      "attention backend (or trtllm_mla for an MLA model), not dsa, which SGLang picks for this DSA model "
                      "(index_topk in json_model_override_args).", f"upgrade SGLang, {fix}", 32)
        return
    if prefill != "dsa":
        report.refuse("enable_kv_cache_sharding", f"DSA KV sharding needs the dsa attention backend, not {prefill} (the "
                      "model is DSA by index_topk in json_model_override_args).",
                      f"remove the attention backends you set, {fix}", 67)
        return
    tp, cp, width = _int(ctx, "tp_size", 1), _int(ctx, "attn_cp_size", 1), \
        _int(ctx, "attn_dp_size", 1) * _int(ctx, "dp_size", 1)
    interleave = _choice(ctx, "cp_strategy", "") == "interleave"
    resolved_cp = cp if interleave and cp > 1 else tp // width if width >= 1 else None
    if not ctx.is_set("enable_prefill_cp") or not interleave or _int(ctx, "pp_size", 1) != 1 or \
            _choice(ctx, "device", "cuda") != "cuda" or \
            resolved_cp is not None and resolved_cp <= 1:
        report.refuse("enable_prefill_cp", "DSA KV sharding needs CUDA interleave prefill CP (enable_prefill_cp, "
                      "cp_strategy interleave, attn_cp_size > 1) and pp_size 1.",
                      f"set {ctx.var('enable_prefill_cp')}: true and cp_strategy: interleave, {fix}", 42)
        return
    backends, kv, page = dsa_backends(ctx), dsa_kv_cache_dtype(ctx), resolved_page_size(ctx)
    if backends is not None and backends != ("trtllm", "trtllm") or kv is not None and kv != "fp8_e4m3" or \
            page is not None and page != 64:
        report.refuse("dsa_prefill_backend", f"DSA KV sharding needs trtllm for both DSA backends with an fp8_e4m3 KV "
                      f"cache and page size 64 (SGLang resolves {backends}, {kv}, page {page} here).",
                      f"set kv_cache_dtype: fp8_e4m3 and both DSA backends to trtllm, {fix}", 51)
        return
    override = dsa_override(ctx) or {}
    if transfer_backend(ctx) != "mooncake" or \
            ctx.is_set("enable_dsa_cache_layer_split") or override.get("index_kpool", 1) != 1 or \
            override.get("index_kpool_compress"):
        report.refuse("enable_kv_cache_sharding", "DSA KV sharding needs Mooncake, an uncompressed index_kpool 1 and no "
                      "DSA cache layer split.", f"fix those, {fix}", 61)


@rule("server.kv_shard", since="0.5.22", file=_KS, sources=(
    f"{_KS}:71", f"{_KS}:77", f"{_KS}:79", f"{_KS}:84", f"{_KS}:115", f"{_KS}:120", f"{_KS}:126", f"{_KS}:140", f"{_KS}:146",
    f"{_KS}:152", f"{_KS}:157", f"{_KS}:161", f"{_KS}:166", f"{_KS}:171", f"{_KS}:177", f"{_KS}:195", f"{_KS}:199",
    f"{_KS}:207", f"{_KS}:214", f"{_KS}:237", f"{_KS}:245", f"{_KS}:254", f"{_KS}:260", f"{_KS}:266", f"{_KS}:274",
    f"{_KS}:282", f"{_KS}:312", f"{_KS}:42", f"{_KS}:51", f"{_KS}:61", f"{_KS}:67", f"{_KS}:191",
))
def _kv_cache_sharding(ctx: Context, report: Report) -> None:
    """handle_kv_cache_sharding and validate_kv_shard_attention_backend (kv_shard_hook.py:30-316, new in 0.5.22) on a PD
    prefill server (elsewhere server.combination refuses the flag, :99-104), on the values SGLang has resolved when the
    hook runs (pipeline.py:284, after the attention backends, the page size, the memory default of the chunk,
    enable_mis and the attention-DP division; 0.5.22 pipeline.py:272 the same): the prefill backend
    (resolved_attention_backends), the page (resolved_page_size), the chunk (kv_shard_chunk). Where a value is not
    certain (None), or the architecture is outside the model table, the check stays silent. Left to the preflight
    (they read config.json): the speculative gate's NextN layer count (:111), encoder-decoder and chunked-attention
    models (:223, :229), the DSA checks (:42-67, :186-191), and the rounding's device-memory query (:303)."""
    if not ctx.is_set("enable_kv_cache_sharding") or _choice(ctx, "disaggregation_mode", "null") != "prefill":
        return
    new = added_in(ctx, "0.5.23")
    tabled = ctx.model.family not in ("unknown", "deepseek-v3.2")
    fix = f"or remove {ctx.var('enable_kv_cache_sharding')}"
    # The speculative gate (:106-118; 0.5.22 :66-68 refuses every speculative algorithm), past the capture's reset
    # of the algorithm (capture_only, pipeline.py:94). The hook runs before handle_speculative_decoding (pipeline.py:284
    # against :306), so it reads the algorithm as written (NEXTN is not EAGLE yet) and the host's topk. 0.5.23 passes
    # only GLM DSA's single-layer NextN MTP: EAGLE with topk 1, no multi-layer EAGLE, architecture GlmMoeDsaForCausalLM.
    # Refused where one of these certainly fails; the architecture where certain (certain_architecture), and an unset
    # topk not at all (a GLM DSA override may fill it in); the NextN layer count is config.json's (the preflight's).
    algo = str(ctx.args.get("speculative_algorithm") or "").upper() if _given(ctx, "speculative_algorithm") else ""
    if algo and not capture_only(ctx):
        arch, topk = certain_architecture(ctx), _num(ctx, "speculative_eagle_topk")
        why = (f"speculative_algorithm {algo} (only EAGLE)" if algo != "EAGLE" else
               f"the architecture {arch}" if arch is not None and arch != KV_SHARD_SPEC_ARCHITECTURE else
               f"speculative_eagle_topk {topk}" if topk is not None and topk != 1 else
               "enable_multi_layer_eagle" if ctx.is_set("enable_multi_layer_eagle") else "")
        if not new:
            report.refuse("speculative_algorithm", "enable_kv_cache_sharding does not support speculative decoding in "
                          "SGLang 0.5.22.", f"turn speculative decoding off (-e spec=off), {fix}", 67)
        elif why:
            report.refuse("speculative_algorithm", "enable_kv_cache_sharding supports speculative decoding only for GLM "
                          f"DSA's single-layer NextN MTP with EAGLE and topk 1, not {why}.",
                          f"turn speculative decoding off (-e spec=off), {fix}", 115)
    if _given(ctx, "dllm_algorithm"):
        report.refuse("dllm_algorithm", "enable_kv_cache_sharding does not support diffusion language models "
                      "(dllm_algorithm).", f"remove {ctx.var('dllm_algorithm')}, {fix}", 120 if new else 71)
    if _given(ctx, "radix_cache_backend"):
        report.refuse("radix_cache_backend", "enable_kv_cache_sharding needs the built-in UnifiedRadixCache, not "
                      f"radix_cache_backend {ctx.args.get('radix_cache_backend')!r}.",
                      f"remove {ctx.var('radix_cache_backend')}, {fix}", 126 if new else 77)
    # SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND: 0.5.23 sets an unset one to python first (:132-135); 0.5.22 reads its
    # default, rust (environ.py:688 there). Only where the radix cache is surely still on when the hook runs: not
    # disabled, nor turned off by enable_mis or deterministic inference (cache_radix_off; deterministic inference only
    # where its backend is certain and keeps the radix cache), for the table's models.
    tree = ctx.env.get("SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND", "python" if new else "rust")
    if tree != "python" and tabled and cache_radix_off(ctx) is None and (
            not deterministic_on(ctx) or deterministic_attention_backend(ctx) in RADIX_DETERMINISTIC_ATTENTION):
        report.refuse("enable_kv_cache_sharding", f"enable_kv_cache_sharding needs the Python radix tree core, and "
                      f"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND is {tree!r}"
                      + ("" if new or "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND" in ctx.env else
                         " (SGLang 0.5.22's default)") + " while the radix cache is on.",
                      f"set SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=python, or disable_radix_cache: true, {fix}",
                      140 if new else 87)
    for dest, what, line, line22 in KV_SHARD_REFUSED_SWITCHES:
        if ctx.is_set(dest):
            report.refuse(dest, f"enable_kv_cache_sharding does not support {what}.", f"remove {ctx.var(dest)}, {fix}",
                          line if new else line22)
    if _int(ctx, "dcp_size", 1) > 1:
        report.refuse("dcp_size", "enable_kv_cache_sharding and decode context parallelism (dcp_size > 1) are mutually "
                      "exclusive.", f"remove {ctx.var('dcp_size')}, {fix}", 171 if new else 118)
    if ctx.is_set("enable_hierarchical_cache") and (_given(ctx, "hicache_storage_backend") or not new):
        report.refuse("enable_hierarchical_cache", "enable_kv_cache_sharding supports HiCache host offload "
                      + ("but not hicache_storage_backend." if new else "only from SGLang 0.5.23."),
                      f"remove {ctx.var('hicache_storage_backend' if new else 'enable_hierarchical_cache')}, {fix}",
                      177 if new else 124)
    elif new and ctx.is_set("enable_hierarchical_cache") and dsa_override(ctx) is not None and (
            _choice(ctx, "hicache_io_backend", "kernel") != "kernel"
            or _choice(ctx, "hicache_mem_layout", "page_first") not in ("layer_first", "page_first")):
        # CP-sharded DSA HiCache (:182-191, new in 0.5.23) wants kernel I/O with layer_first or page_first, read after
        # handle_hicache (pipeline.py:272 before :284), whose rewrites only move direct I/O or page_first_direct further
        # from it (hicache_hook.py:171-195): targeted-lora-43, direct I/O, was MISSED. Its buffer_only refusal (:186) needs a
        # storage backend, refused above (:177). A DSA-by-override model (dsa_override); config.json's is the preflight's.
        report.refuse("hicache_io_backend", "CP-sharded DSA HiCache needs kernel I/O with the layer_first or page_first "
                      "host layout.", f"remove {ctx.var('hicache_io_backend')} and {ctx.var('hicache_mem_layout')}, {fix}",
                      191)
    if ctx.is_set("enable_dynamic_chunking") and _int(ctx, "pp_size", 1) > 1:
        report.refuse("enable_dynamic_chunking", "enable_kv_cache_sharding does not support dynamic chunk sizing with "
                      "pipeline parallelism.", f"remove {ctx.var('enable_dynamic_chunking')}, {fix}", 207 if new else 142)
    prefill, _decode = resolved_attention_backends(ctx)
    if dsa_override(ctx) is not None and prefill is not None and (new or prefill == "dsa"):
        _dsa_kv_shard(ctx, report, prefill, fix)
    elif tabled and prefill is not None and prefill not in KV_SHARD_PREFILL_BACKENDS:
        set_ = next((d for d in ("prefill_attention_backend", "attention_backend") if _choice(ctx, d, "")), "")
        report.refuse(set_ or "attention_backend", f"enable_kv_cache_sharding needs the fa3 prefill attention backend "
                      f"(or trtllm_mla for an MLA model), not {prefill!r}"
                      + ("." if set_ else ", which SGLang picks for this model on this GPU."),
                      f"set {ctx.var('prefill_attention_backend')}: fa3 (trtllm_mla for an MLA model), {fix}",
                      71 if new else 32)
    elif tabled and prefill == "trtllm_mla":
        if not ctx.model.mla:
            report.refuse("prefill_attention_backend", "enable_kv_cache_sharding with trtllm_mla needs an MLA model.",
                          f"set {ctx.var('prefill_attention_backend')}: fa3, {fix}", 77 if new else 38)
        elif _int(ctx, "attn_cp_size", 1) > 1:
            report.refuse("attn_cp_size", "enable_kv_cache_sharding with trtllm_mla supports plain-TP MLA only "
                          "(attn_cp_size 1).", f"remove {ctx.var('attn_cp_size')}, {fix}", 79 if new else 40)
        elif ctx.is_set("disable_chunked_prefix_cache"):
            report.refuse("disable_chunked_prefix_cache", "enable_kv_cache_sharding with trtllm_mla needs the chunked "
                          "prefix cache.", f"remove {ctx.var('disable_chunked_prefix_cache')}, {fix}", 84 if new else 45)
    transfer = transfer_backend(ctx)
    if transfer not in ("mooncake", "nixl"):
        report.refuse("disaggregation_transfer_backend", f"enable_kv_cache_sharding needs the mooncake or nixl transfer "
                      f"backend, not {transfer!r}.", f"set {ctx.var('disaggregation_transfer_backend')}: mooncake, {fix}",
                      237 if new else 172)
    if env_true(ctx.env, "SGLANG_DISAGG_STAGING_BUFFER"):
        report.refuse("enable_kv_cache_sharding", "enable_kv_cache_sharding with SGLANG_DISAGG_STAGING_BUFFER (the "
                      "staging path assumes contiguous send slices).", f"unset SGLANG_DISAGG_STAGING_BUFFER, {fix}",
                      245 if new else 180)
    if tabled and ctx.model.mla and _int(ctx, "attn_cp_size", 1) <= 1 and not (
            dsa_override(ctx) is not None and ctx.is_set("enable_prefill_cp")):  # DSA CP derives attn_cp_size
        # attn_dp_enabled_of: attn_dp_size > 1 as handle_dwdp / the deprecated dp_size leave it (chunk_dp_width).
        if chunk_dp_width(ctx) > 1:
            report.refuse("attn_dp_size", "enable_kv_cache_sharding for an MLA model without prefill CP shards across "
                          "attention-TP ranks and needs plain TP attention (no attention DP).",
                          f"remove {ctx.var('attn_dp_size')}, {fix}", 254 if new else 194)
        elif _int(ctx, "tp_size", 1) <= 1:
            report.refuse("tp_size", "enable_kv_cache_sharding for an MLA model without prefill CP shards across "
                          "attention-TP ranks and needs tp_size > 1.", f"set {ctx.var('tp_size')} > 1, {fix}",
                          260 if new else 200)
    elif tabled and not ctx.model.mla and (not ctx.is_set("enable_prefill_cp") or _int(ctx, "attn_cp_size", 1) <= 1):
        report.refuse("enable_prefill_cp", f"enable_kv_cache_sharding for a GQA model ({ctx.model.architecture}) shards "
                      "across attention-CP ranks and needs enable_prefill_cp with attn_cp_size > 1.",
                      f"set {ctx.var('enable_prefill_cp')}: true and attn_cp_size > 1, {fix}", 266 if new else 206)
    page = resolved_page_size(ctx) if tabled else None
    if page is not None and page <= 1:
        report.refuse("page_size", "enable_kv_cache_sharding needs a real page size (page_size > 1; 64 recommended)"
                      + (", and SGLang settles on 1 here." if not _given(ctx, "page_size") else "."),
                      f"set {ctx.var('page_size')}: 64, {fix}", 274 if new else 214)
    chunk = kv_shard_chunk(ctx) if tabled else None
    if chunk is not None and chunk <= 0:
        why = " (enable_mis turns chunked prefill off)" if ctx.is_set("enable_mis") else ""
        report.refuse("chunked_prefill_size", f"enable_kv_cache_sharding needs chunked prefill (chunked_prefill_size > 0, "
                      f"per attention-DP rank){why}.", f"set {ctx.var('chunked_prefill_size')} > 0, {fix}",
                      282 if new else 222)
    elif chunk is not None and page is not None and page > 1 and chunk % page and not _given(ctx, "mem_fraction_static"):
        # The chunk rounded up to the page takes 1.5 MB per token more activation memory off the automatic
        # mem_fraction_static (:287-317); at least the whole GPU (resolved fractions are below 1) leaves none.
        rounded, mib = -(-chunk // page) * page, gpu_memory_mib(ctx)[0]
        delta = 1.5 * (max(rounded, 2048) - max(chunk, 2048))
        if mib and delta >= mib:
            report.refuse("chunked_prefill_size", f"enable_kv_cache_sharding rounds chunked_prefill_size {chunk} up to "
                          f"the page ({rounded}), whose activation memory ({delta:.0f} MiB) takes all of the GPU's "
                          f"{mib} MiB.", f"set {ctx.var('chunked_prefill_size')} to a smaller multiple of {page}, {fix}",
                          312 if new else 252)


@rule("server.buckets", sources=(
    "sglang/srt/arg_groups/validation_hook.py:384-431",
))
def _buckets(ctx: Context, report: Report) -> None:
    """validate_buckets_rule (sglang/srt/arg_groups/validation_hook.py:384-431) on the two histogram bucket rules."""
    for dest in ("prompt_tokens_buckets", "generation_tokens_buckets"):
        rule_ = ctx.args.get(dest)
        if not isinstance(rule_, list) or not rule_:
            continue
        problem, kind, rest = None, str(rule_[0]), [str(v) for v in rule_[1:]]
        if kind not in ("tse", "default", "custom"):
            problem = f"its first word {kind!r} is not a rule type (tse, default or custom)"
        elif kind == "tse":
            try:
                middle, base, count = (float(rest[0]), float(rest[1]), int(rest[2])) if len(rest) == 3 else (None, None, None)
            except ValueError:
                middle = base = count = None
                problem = "tse takes <float middle> <float base> <int count>"
            if problem is None and middle is None:
                problem = f"tse takes exactly 3 parameters (middle, base, count), got {len(rest)}"
            elif problem is None and not (base > 1 and count > 0 and middle > 0):  # type: ignore[operator]
                problem = "tse needs base > 1, count > 0 and middle > 0"
        elif kind == "default" and rest:
            problem = "default takes no parameters"
        elif kind == "custom":
            try:
                values = [float(v) for v in rest]
            except ValueError:
                values, problem = [], "custom bucket values must be numbers"
            if problem is None and not values:
                problem = "custom needs at least one bucket value"
            elif problem is None and len(set(values)) != len(values):
                problem = "custom bucket values must not repeat"
            elif problem is None and any(v < 0 for v in values):
                problem = "custom bucket values must be non-negative"
        if problem:
            ctx.error("server.buckets", dest, f"{dest} {rule_}: {problem}; SGLang asserts it at start-up.",
                      f"set {ctx.var(dest)} to e.g. [default], [tse, 1000, 2, 8] or [custom, 10, 50, 100]",
                      f"{_VH}:384-431")


# The architectures handle_encoder_disaggregation serves with encoder_only / language_only
# (pd_disaggregation_hook.py:352-371); the last two are new in 0.5.23.
ENCODER_DISAGGREGATION_ARCHITECTURES = (
    "Qwen2VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
    "Qwen2_5OmniForConditionalGeneration", "Dots3NoteForCausalLM", "KimiVLForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "KimiK3ForConditionalGeneration", "MiMoV2ForCausalLM",
    "Glm5NextForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration", "MuseSparkForConditionalGeneration",
)
DETERMINISTIC_LINE = "1119 (0.5.22 :1060, 0.5.21 :1041, 0.5.20 :1149)"  # _deterministic_attention_backend's raise
# ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES (server_args.py:335-340; DeepseekV4ForCausalLM from 0.5.22, the other
# three since 0.5.20).
LANGUAGE_MODEL_ONLY_ARCHITECTURES = ("DeepseekV4ForCausalLM", "MuseGlimmerForConditionalGeneration",
                                     "Cosmos3ForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration")


def _language_model_only_architectures(ctx: Context) -> list[str] | None:
    """hf_config.architectures as handle_language_model_only reads them: json_model_override_args' list where it names
    one (merged into the checkpoint's config), else the model table's architecture; None where not known."""
    names = _override_architectures(ctx)
    if names and all(isinstance(n, str) for n in names):
        return names
    if ctx.model.known and ctx.model.architecture and ctx.model.checkpoint_architecture is None:
        return [ctx.model.architecture]
    return None


@rule("server.features", shared=True, ids=("server.combination", "server.speculative"), sources=(
    "sglang/srt/arg_groups/overrides.py",
    "sglang/srt/arg_groups/validation_hook.py:680",
    "sglang/srt/arg_groups/attention_hook.py:161",
    "sglang/srt/arg_groups/attention_hook.py:645",
    "sglang/srt/arg_groups/attention_hook.py:649",
    "sglang/srt/arg_groups/serving_hook.py:895",
    "sglang/srt/arg_groups/serving_hook.py:915",
    "sglang/srt/arg_groups/model_hook.py:1094",
    "sglang/srt/arg_groups/model_hook.py:1106 (0.5.22 :1082, 0.5.21 :992, 0.5.20 :926)",
    "sglang/srt/arg_groups/overrides.py:1119 (0.5.22 :1060, 0.5.21 :1041, 0.5.20 :1149)",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:306",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:310",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:312",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:372",
))
def _features(ctx: Context, report: Report) -> None:
    """Further flag pairs SGLang refuses: LM-head layouts, multimodal transport, language-model-only, deterministic
    inference, Flex Attention, the prefill CUDA-graph context and a retired variable (LoRA MoE runners: lora.py)."""
    tp, attn_dp, cp = _int(ctx, "tp_size", 1), attention_dp_width(ctx), _int(ctx, "attn_cp_size", 1)
    lm = "sglang/srt/arg_groups/overrides.py"
    if ctx.args.get("enable_tp_lm_head_all_to_all") is True:
        # Before 0.5.22: enable_dp_attention and tp_size == dp_size (0.5.21 overrides.py:1369-1376).
        for bad, dest, why, line in (
            (not attention_dp_on(ctx), "attn_dp_size", "needs attention DP (attn_dp_size > 1)", 1429),
            (ctx.is_set("enable_dp_lm_head"), "enable_dp_lm_head", "is incompatible with enable_dp_lm_head", 1432),
            (tp != attn_dp, "attn_dp_size", f"needs tp_size == attn_dp_size ({tp} != {attn_dp})", 1436),
            (cp != 1, "attn_cp_size", "needs attn_cp_size 1", 1441),
        ):
            if bad:
                report.of("server.combination").refuse(dest, f"enable_tp_lm_head_all_to_all {why}.",
                                                       f"fix {ctx.var(dest)}, or remove enable_tp_lm_head_all_to_all", f"{lm}:{line}")
                break
    transport = _choice(ctx, "mm_feature_transport", "")
    if not transport and env_true(ctx.env, "SGLANG_USE_CUDA_IPC_TRANSPORT"):
        # The deprecated switch picks cuda_ipc when the argument is unset, for any model (serving_hook.py:814-821,
        # the same in 0.5.20-0.5.22); off, or any other value, picks cpu.
        transport = "cuda_ipc"
    if not ctx.is_set("encoder_only"):  # encoder-only servers fall back to cpu (serving_hook.py:882-889)
        if transport == "cuda_vmm" and _int(ctx, "pp_size", 1) != 1:
            report.of("server.combination").refuse(
                "mm_feature_transport", "mm_feature_transport cuda_vmm does not support pipeline "
                "parallelism.", f"set {ctx.var('mm_feature_transport')}: cpu, or pp_size: 1", f"{_SH}:895")
        elif transport == "cuda_ipc" and _int(ctx, "nnodes", 1) != 1:
            report.of("server.combination").refuse("mm_feature_transport", "mm_feature_transport cuda_ipc works on a single node "
                                                   "only.", f"set {ctx.var('mm_feature_transport')}: cpu (or cuda_vmm)",
                                                   f"{_SH}:" + release_line(ctx, {"0.5.23": "915", "0.5.22": "894",
                                                                                  "0.5.21": "858", "0.5.20": "871"}))
    language_model_only = [d for d in ("encoder_only", "language_only", "enable_prefix_mm_cache",
                                       "enable_broadcast_mm_inputs_process", "mm_enable_dp_encoder")
                           if ctx.is_set("language_model_only") and ctx.is_set(d)]
    encoder_only = ctx.is_set("encoder_only")
    lmo_architectures = _language_model_only_architectures(ctx) if ctx.is_set("language_model_only") else None
    lmo_supported = LANGUAGE_MODEL_ONLY_ARCHITECTURES[0 if added_in(ctx, "0.5.22") else 1:]
    if language_model_only:
        dest = language_model_only[0]
        report.of("server.combination").refuse(
            dest, f"language_model_only cannot be combined with {dest}.",
            f"remove {ctx.var(dest)} or language_model_only", "sglang/srt/arg_groups/model_hook.py:1094")
    # handle_language_model_only's architecture check (model_hook.py:1103-1109; 0.5.22 :1079-1085, 0.5.21 :989-995,
    # 0.5.20 :923-929): one of the checkpoint's architectures must be in LANGUAGE_MODEL_ONLY_ARCHITECTURES; decided
    # for the model table's checkpoints (any other model: the preflight). The seed-1 10,000-case fuzz run's MISSED
    # fuzz-1-04220, Llama.
    elif lmo_architectures and not any(a in lmo_supported for a in lmo_architectures):
        report.of("server.combination").refuse(
            "language_model_only", f"language_model_only does not run {', '.join(lmo_architectures)} (SGLang "
            f"{ctx.schema.version} supports {', '.join(lmo_supported)}).",
            f"remove {ctx.var('language_model_only')} (SGLang runs it for those architectures only)",
            "sglang/srt/arg_groups/model_hook.py:1106 (0.5.22 :1082, 0.5.21 :992, 0.5.20 :926)")
    # handle_encoder_disaggregation, right after handle_language_model_only (pd_disaggregation_hook.py:298-313; the
    # same checks at :297-304 in 0.5.22, :238-245 in 0.5.21, :197-204 in 0.5.20).
    elif ctx.is_set("enable_prefix_mm_cache") and not encoder_only:
        report.of("server.combination").refuse(
            "enable_prefix_mm_cache", "enable_prefix_mm_cache needs encoder_only (an encoder server).",
            f"remove {ctx.var('enable_prefix_mm_cache')}, or set {ctx.var('encoder_only')}: true",
            "sglang/srt/arg_groups/pd_disaggregation_hook.py:306")
    elif encoder_only and ctx.is_set("language_only"):
        report.of("server.combination").refuse(
            "language_only", "encoder_only and language_only exclude each other.",
            f"remove {ctx.var('language_only')} or {ctx.var('encoder_only')}",
            "sglang/srt/arg_groups/pd_disaggregation_hook.py:310")
    elif encoder_only and _choice(ctx, "disaggregation_mode", "null") != "null":
        report.of("server.combination").refuse(
            "disaggregation_mode", "encoder_only cannot run as a PD prefill or decode server.",
            f"remove {ctx.var('disaggregation_mode')} or {ctx.var('encoder_only')}",
            "sglang/srt/arg_groups/pd_disaggregation_hook.py:312")
    elif (encoder_only or ctx.is_set("language_only")) and ctx.model.known and ctx.model.architecture and \
            ctx.model.architecture not in ENCODER_DISAGGREGATION_ARCHITECTURES[:None if added_in(ctx, "0.5.23") else -2]:
        dest = "encoder_only" if encoder_only else "language_only"
        report.of("server.combination").refuse(
            dest, f"{dest} (encoder disaggregation) does not run {ctx.model.architecture}.",
            f"remove {ctx.var(dest)} (encoder disaggregation serves the multimodal models SGLang lists)",
            "sglang/srt/arg_groups/pd_disaggregation_hook.py:372 (0.5.22 :361, 0.5.21 :302, 0.5.20 :261)")
    if "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS" in ctx.env:
        report.of("server.combination").refuse(
            "sglang_env.SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS",
            "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS is retired (SGLang refuses it being set at all).",
            "remove it from sglang_env (SGLANG_ENABLE_DISAGG_SAMPLING_MASK=1 and sampling_mask_max_tokens replace it)",
            f"{_VH}:680")
    backend = _choice(ctx, "attention_backend", "")
    if backend == "flex_attention" and _given(ctx, "speculative_algorithm"):
        report.of("server.speculative").refuse(
            "speculative_algorithm", "speculative decoding does not work with the Flex "
            "Attention backend.", "use another attention_backend, or turn speculative decoding off (-e spec=off)",
            "sglang/srt/arg_groups/attention_hook.py:161")
    # rl_on_policy_target turns deterministic inference on first (attention_hook.py:586-592, the same in 0.5.20-0.5.22).
    deterministic = deterministic_on(ctx)
    turned_on = "" if ctx.is_set("enable_deterministic_inference") else " (which rl_on_policy_target turns on)"
    # The platform hooks run before _deterministic_attention_backend reads the backend (pipeline.py:205-206, then
    # :240): device hpu sets torch_native whatever the host wrote, device cpu fills an unset attention_backend with
    # intel_amx (torch_native on an arm64 host), platform_hook.py:158-189 (0.5.22 :154-175, 0.5.21 :168-189, 0.5.20
    # :162-183); neither is deterministic, so SGLang refuses both at overrides.py:1119 (the seed-1 10,000-case fuzz
    # run's MISSED fuzz-1-02703, device cpu). So do the model overrides (pipeline.py:225): an unset backend is
    # DeepSeek-V3's trtllm_mla on SM100, or Qwen3.5 / Qwen3-Next's trtllm_mha there (model_override_attention_backend;
    # found beside the seed-3 run's deterministic MISSED, fuzz-3-00420).
    device = _choice(ctx, "device", "cuda")
    platform = "torch_native" if device == "hpu" else "intel_amx" if device == "cpu" and not backend else ""
    picked = "" if platform or backend or device == "npu" or not deterministic else (model_override_attention_backend(ctx) or "")
    det_backend = platform or backend or picked
    if deterministic and det_backend and det_backend not in DETERMINISTIC_ATTENTION:
        if picked:
            report.of("server.combination").refuse(
                "attention_backend", f"enable_deterministic_inference{turned_on} with attention_backend unset: SGLang "
                f"picks {picked} for {ctx.model.architecture} on this GPU first (its model override), and deterministic "
                f"inference supports {', '.join(DETERMINISTIC_ATTENTION)} only.",
                f"set {ctx.var('attention_backend')}: triton", f"{lm}:{DETERMINISTIC_LINE}")
        elif platform:
            report.of("server.combination").refuse(
                "device", f"enable_deterministic_inference{turned_on} with device {device}: SGLang sets the attention "
                f"backend {platform if device == 'hpu' else 'intel_amx (torch_native on an arm64 host)'} for that "
                f"device{' whatever attention_backend says' if device == 'hpu' else ''}, and deterministic inference "
                f"supports {', '.join(DETERMINISTIC_ATTENTION)} only.",
                f"remove {ctx.var('device')} (SGLang detects cuda on an NVIDIA host)"
                + ("" if device == "hpu" else f", or set {ctx.var('attention_backend')}: triton"), f"{lm}:{DETERMINISTIC_LINE}")
        else:
            report.of("server.combination").refuse(
                "attention_backend", f"enable_deterministic_inference{turned_on} supports the attention "
                f"backends {', '.join(DETERMINISTIC_ATTENTION)}, not {backend}.",
                f"set {ctx.var('attention_backend')}: triton or flashinfer (or leave it unset)", f"{lm}:{DETERMINISTIC_LINE}")
    # handle_deterministic_inference on an absorbed-MLA DeepSeek model (attention_hook.py:622-653; 0.5.22 :644-652,
    # 0.5.21 :556-564, 0.5.20 :559-567): a written backend outside RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND
    # (choices.py:249), or fa4 off SM100 / SM110; unset, SGLang picks triton (Blackwell) or fa3 (overrides.py:1098-1116).
    elif deterministic and backend and \
            str(ctx.model.architecture or "") in DETERMINISTIC_MLA_ARCHITECTURES:
        cc = ctx.compute_capability
        for bad, why, line in (
            (backend not in DETERMINISTIC_MLA_ATTENTION, f"supports the attention backends "
             f"{', '.join(DETERMINISTIC_MLA_ATTENTION)} only, not {backend}", "645 (0.5.22 :644, 0.5.21 :556, 0.5.20 :559)"),
            (backend == "fa4" and cc is not None and cc[0] not in (10, 11), "runs fa4 on SM100 / SM110 only",
             "649 (0.5.22 :648, 0.5.21 :560, 0.5.20 :563)"),
        ):
            if bad:
                report.of("server.combination").refuse(
                    "attention_backend", f"enable_deterministic_inference{turned_on} on {ctx.model.architecture} (absorbed MLA) {why}.",
                    f"set {ctx.var('attention_backend')}: triton (or leave it unset)", f"{_AH}:{line}")
                break


# handle_deterministic_inference's DeepSeek models (attention_hook.py:624-635) among the model table's, and
# RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND (choices.py:249, the same list in 0.5.20-0.5.22).
DETERMINISTIC_MLA_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")
DETERMINISTIC_MLA_ATTENTION = ("ascend", "fa3", "fa4", "triton")


# get_platform().is_sm100 / is_sm120 match the compute capability's major (sglang/srt/utils/common.py:289-335).
FP4_INDEXER_MAJORS = (10, 12)
# ModelConfig._validate_quantize_and_serve_config's list (sglang/srt/configs/model_config.py:1974-1980).
MODELOPT_QUANTIZATION = ("modelopt", "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed")


@rule("server.features", shared=True, ids=("server.combination",), sources=(
    "sglang/srt/arg_groups/serving_hook.py:467",
    "sglang/srt/arg_groups/validation_hook.py:319",
    "sglang/srt/configs/model_config.py:1986",
    "sglang/srt/configs/model_config.py:1992",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:239",
    "sglang/srt/arg_groups/kv_cache_hook.py:357",
))
def _platform_gates(ctx: Context, report: Report) -> None:
    """Switches SGLang refuses on this platform or in this deployment whatever else is set: the DeepSeek-V4 FP4
    indexer off SM100 / SM120 (serving_hook.py:464-470), the MindSpore model implementation off Ascend NPUs
    (validation_hook.py:318-321), quantize_and_serve (model_config.py:1968-1997: refused without a ModelOpt
    quantization, and disabled outright with one) and the prefill_complete decode allocation policy outside a PD
    disaggregated Mooncake deployment (pd_disaggregation_hook.py:199-242, new in 0.5.22). The seed-0 fuzzer's
    MISSED (issue 36)."""
    cc = ctx.compute_capability
    if ctx.is_set("enable_deepseek_v4_fp4_indexer") and cc is not None and cc[0] not in FP4_INDEXER_MAJORS:
        report.of("server.combination").refuse(
            "enable_deepseek_v4_fp4_indexer", f"enable_deepseek_v4_fp4_indexer needs an SM100 or SM120 GPU (FP4 indexer "
            f"kernels); compute capability {_cc(ctx)} has none.", f"remove {ctx.var('enable_deepseek_v4_fp4_indexer')}",
            f"{_SH}:467")
    if _choice(ctx, "model_impl", "auto") == "mindspore":
        report.of("server.combination").refuse(
            "model_impl", "model_impl mindspore runs on Ascend NPUs only.",
            f"remove {ctx.var('model_impl')} (auto), or set it to sglang or transformers", f"{_VH}:319")
    if ctx.is_set("quantize_and_serve"):
        quant = _choice(ctx, "quantization", "")
        report.of("server.combination").refuse(
            "quantize_and_serve", "quantize_and_serve " + (
                f"needs a ModelOpt quantization ({', '.join(MODELOPT_QUANTIZATION)}), not {quant or 'none'}; and with one "
                if quant not in MODELOPT_QUANTIZATION else f"(quantization {quant}): ")
            + "SGLang has it disabled (quantize and export first, then serve the exported checkpoint).",
            f"remove {ctx.var('quantize_and_serve')}",
            "sglang/srt/configs/model_config.py:" + ("1986" if quant not in MODELOPT_QUANTIZATION else "1992"))
    if _choice(ctx, "disaggregation_decode_retraction_backup", "") == "host_pool" and \
            _choice(ctx, "disaggregation_mode", "null") != "decode":
        report.of("server.combination").refuse(
            "disaggregation_decode_retraction_backup", "disaggregation_decode_retraction_backup host_pool is for a PD "
            "decode server only.", f"remove {ctx.var('disaggregation_decode_retraction_backup')}",
            "sglang/srt/arg_groups/kv_cache_hook.py:357")
    if added_in(ctx, "0.5.22") and _choice(ctx, "disaggregation_decode_allocation_policy", "early") == "prefill_complete":
        share = _num(ctx, "disaggregation_decode_host_receive_threshold")
        mode = _choice(ctx, "disaggregation_mode", "null")
        # The attention-TP test reads `cfg.dp_size if cfg.enable_dp_attention else 1` (pd_disaggregation_hook.py:208-210),
        # but handle_deprecated_dp_attention (parallel_hook.py:39-61, pipeline.py:45, before handle_pd_disaggregation
        # at :147; 0.5.22 the same) has already cleared enable_dp_attention: every tp_size but 1 is refused, attention
        # DP or not (targeted-pd-02 / -03). The HiCache tests read the raw hicache_write_policy (default write_through).
        hicache = ctx.is_set("enable_hierarchical_cache")
        unsupported = [why for bad, why in (
            (mode not in ("prefill", "decode"), "aggregated serving"),
            (transfer_backend(ctx) != "mooncake",
             "transfer backends other than Mooncake"),
            (_int(ctx, "pp_size", 1) != 1 or _int(ctx, "dcp_size", 1) != 1 or _int(ctx, "attn_cp_size", 1) != 1,
             "pipeline or attention / decode context parallelism"),
            (_int(ctx, "tp_size", 1) != 1, f"attention tensor parallelism greater than one (tp_size "
             f"{_int(ctx, 'tp_size', 1)}: SGLang counts attention DP here only through enable_dp_attention, which "
             "it has already cleared)"),
            (ctx.is_set("enable_pdmux") or _choice(ctx, "decoupled_spec_role", "null") != "null",
             "PD multiplexing or decoupled speculation"),
            (ctx.is_set("enable_pd_role_switch"), "runtime PD role switching"),
            (ctx.is_set("encoder_only") or ctx.is_set("language_only"), "encoder disaggregation"),
            (ctx.is_set("enable_hisparse"), "HiSparse"),
            (share is not None and share < 1, "decode host KV buffering (disaggregation_decode_host_receive_threshold < 1)"),
            (mode == "decode" and (ctx.is_set("disaggregation_decode_enable_radix_cache") or hicache),
             "decode radix cache or decode HiCache"),
            (mode == "prefill" and hicache and (_given(ctx, "hicache_storage_backend") or
                                                _choice(ctx, "hicache_write_policy", "write_through") != "write_back"),
             "prefill HiCache other than L2 write_back (hicache_write_policy write_back, no hicache_storage_backend)"),
            (env_true(ctx.env, "SGLANG_DISAGG_STAGING_BUFFER"), "staging buffers (SGLANG_DISAGG_STAGING_BUFFER)"),
            (env_true(ctx.env, "SGLANG_RUST_SERVER"), "the Rust bootstrap registry (SGLANG_RUST_SERVER)"),
        ) if bad]
        if unsupported:
            report.of("server.combination").refuse(
                "disaggregation_decode_allocation_policy", "disaggregation_decode_allocation_policy prefill_complete does "
                f"not support {', '.join(unsupported)}.", f"remove {ctx.var('disaggregation_decode_allocation_policy')} "
                "(early)", "sglang/srt/arg_groups/pd_disaggregation_hook.py:239 (0.5.22 :245)")


@rule("server.mamba_checkpoint", file="sglang/srt/arg_groups/mamba_hook.py", sources=(
    "sglang/srt/arg_groups/mamba_hook.py:84",
    "sglang/srt/arg_groups/mamba_hook.py:90",
    "sglang/srt/arg_groups/mamba_hook.py:96",
))
def _int8_mamba_checkpoint(ctx: Context, report: Report) -> None:
    """handle_int8_mamba_checkpoint (mamba_hook.py:75-98; 0.5.22 :83-96, 0.5.21 :82-95, 0.5.20 :84-91 without the
    LMCache check): the int8 Mamba checkpoint slots are read only by the built-in radix cache. SGLang runs it for every
    model (arg_groups/pipeline.py:252), so no config.json is needed (issue 36: the real preflight's cases showed it)."""
    if not ctx.is_set("enable_int8_mamba_checkpoint"):
        return
    for bad, dest, why, line in (
        (ctx.is_set("enable_hierarchical_cache"), "enable_hierarchical_cache", "enable_hierarchical_cache (the host "
         "offload path is not int8-aware)", "84 (0.5.22 :84, 0.5.21 :83, 0.5.20 :85)"),
        (_given(ctx, "radix_cache_backend"), "radix_cache_backend", "a radix_cache_backend other than the built-in "
         "Mamba radix cache", "90 (0.5.22 :90, 0.5.21 :89, 0.5.20 :91)"),
        (added_in(ctx, "0.5.21") and ctx.is_set("enable_lmcache"), "enable_lmcache", "enable_lmcache (LMCache is not "
         "int8-aware)", "96 (0.5.22 :96, 0.5.21 :95)"),
    ):
        if bad:
            report.refuse(dest, f"enable_int8_mamba_checkpoint does not work with {why}.",
                          f"remove {ctx.var(dest)}, or {ctx.var('enable_int8_mamba_checkpoint')}", line)
            return


@rule("server.minimum", since="0.5.21", shared=True, sources=(
    "sglang/srt/arg_groups/cuda_graph_hook.py:427",
    "sglang/srt/arg_groups/cuda_graph_hook.py:435",
))
def _prefill_graph_context(ctx: Context, report: Report) -> None:
    """_resolve_max_context_size (cuda_graph_hook.py:423-445; 0.5.22 :385-406, 0.5.21 :565-586): the prefill CUDA
    graphs' max context must be positive and, aligned up to the page size, within the model's context length
    (ModelConfig.context_len: context_length when set, else what SGLang derives from config.json, which the model
    table knows for its checkpoints; any other model: the preflight). The size is cuda_graph_config's
    prefill.max_context_size where that JSON names the key, which outranks the flag (parse_cuda_graph_config,
    cuda_graph_hook.py:89-94; 0.5.22 :90-94, 0.5.21 :100-104): Llama-3.1-8B with cuda_graph_config
    {"prefill": {"max_context_size": 140000}} is refused, 140000 > 131072."""
    size = _num(ctx, "cuda_graph_prefill_max_context")
    config = _json_arg(ctx, "cuda_graph_config")
    prefill = config.get("prefill") if isinstance(config, dict) else None
    if isinstance(prefill, dict) and "max_context_size" in prefill:
        size = prefill["max_context_size"]
        if not isinstance(size, (int, float)) or isinstance(size, bool):
            return  # null (no max context) or not a number: nothing judged here
    if size is not None and size <= 0:
        report.refuse("cuda_graph_prefill_max_context", f"cuda_graph_prefill_max_context={size} must be positive.",
                      f"set {ctx.var('cuda_graph_prefill_max_context')} > 0, or remove it",
                      "sglang/srt/arg_groups/cuda_graph_hook.py:427")
        return
    length, page = _num(ctx, "context_length") or derived_context_length(ctx), resolved_page_size(ctx)
    if size is None or not length or length <= 0 or not page or page <= 0:
        return
    aligned = int((size + page - 1) // page * page)
    if aligned > length:
        report.refuse("cuda_graph_prefill_max_context", f"cuda_graph_prefill_max_context={size} (aligned to the page "
                      f"size {page}: {aligned}) exceeds the model's context length {int(length)}.",
                      f"set {ctx.var('cuda_graph_prefill_max_context')} <= {int(length) // page * page}, or remove it",
                      "sglang/srt/arg_groups/cuda_graph_hook.py:435 (0.5.22 :397, 0.5.21 :577)")


@rule("server.minimum", since="0.5.21", shared=True, sources=(
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:65",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:70 (0.5.22 :70, 0.5.21 :59)",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:75 (0.5.22 :75, 0.5.21 :64)",
    "sglang/srt/arg_groups/kv_cache_hook.py:357",
))
def _decode_host_receive(ctx: Context, report: Report) -> None:
    """disaggregation_decode_host_receive_threshold in [0, 1] (handle_pd_disaggregation, pd_disaggregation_hook.py:64-67,
    with or without PD disaggregation; new in 0.5.21), and what the decode host receive it turns on needs
    (:68-80): the host_pool retraction backup, which handle_cache_compatibility then refuses off a PD decode server
    (kv_cache_hook.py:353-359)."""
    share = _num(ctx, "disaggregation_decode_host_receive_threshold")
    if share is not None and not 0 <= share <= 1:
        report.refuse("disaggregation_decode_host_receive_threshold",
                      f"disaggregation_decode_host_receive_threshold={share} is outside [0, 1].",
                      f"set {ctx.var('disaggregation_decode_host_receive_threshold')} in [0, 1], or remove it",
                      "sglang/srt/arg_groups/pd_disaggregation_hook.py:65 (0.5.22 :65, 0.5.21 :54)")
        return
    # The decode host receive is on below 1 (the default, 1.0, is off; 0.5.22 turned the threshold around) and, in
    # 0.5.21, above 0 (its default 0 off; pd_disaggregation_hook.py:57-69 there). It refuses HiSparse and PD role
    # switching and the cpu_tensor retraction backup, then sets disaggregation_decode_retraction_backup host_pool
    # (pd_disaggregation_hook.py:68-80), which handle_cache_compatibility refuses off a PD decode server
    # (kv_cache_hook.py:357; make conformance-all's MISSED on 0.5.21, and the seed-1 10,000-case fuzz run's MISSED
    # fuzz-1-07290 on 0.5.23, threshold 0.88 on a colocated server). A host_pool the host writes itself:
    # server.combination (launch._platform_gates).
    if not decode_host_receive_on(ctx):
        return
    on = f"disaggregation_decode_host_receive_threshold={share} turns on the decode host receive" + (
        "" if added_in(ctx, "0.5.22") else f" in SGLang {ctx.schema.version}")
    off = f"remove {ctx.var('disaggregation_decode_host_receive_threshold')} ({'1' if added_in(ctx, '0.5.22') else '0'}: off)"
    backup = _choice(ctx, "disaggregation_decode_retraction_backup", "")
    switched = [d for d in ("enable_hisparse", "enable_pd_role_switch") if ctx.is_set(d)]
    if switched:
        report.refuse(switched[0], f"{on}, which does not support HiSparse or PD role switching ({switched[0]}).",
                      f"{off}, or {ctx.var(switched[0])}", "sglang/srt/arg_groups/pd_disaggregation_hook.py:70 (0.5.22 :70, "
                      "0.5.21 :59)")
    elif backup == "cpu_tensor":
        report.refuse("disaggregation_decode_retraction_backup", f"{on}, which needs the host_pool retraction backup, "
                      "not cpu_tensor.", f"{off}, or {ctx.var('disaggregation_decode_retraction_backup')}",
                      "sglang/srt/arg_groups/pd_disaggregation_hook.py:75 (0.5.22 :75, 0.5.21 :64)")
    elif backup != "host_pool" and _choice(ctx, "disaggregation_mode", "null") != "decode":
        report.refuse("disaggregation_decode_host_receive_threshold",
                      f"{on}, whose host_pool retraction backup runs on a PD decode server only.", off,
                      "sglang/srt/arg_groups/kv_cache_hook.py:357")


_PD = "sglang/srt/arg_groups/pd_disaggregation_hook.py"


@rule("server.features", shared=True, ids=("server.combination",), sources=(
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:101",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:106",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:146",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:158",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:191",
    "sglang/srt/arg_groups/pd_disaggregation_hook.py:277",
    "sglang/srt/arg_groups/speculative_hook.py:169",
    "sglang/srt/arg_groups/kv_cache_hook.py:362",
    "sglang/srt/arg_groups/kv_cache_hook.py:371",
))
def _pd_disaggregation(ctx: Context, report: Report) -> None:
    """handle_pd_disaggregation's refusals of a PD prefill / decode server (pd_disaggregation_hook.py:98-196; 0.5.22
    :98-202, 0.5.21 :85-189, 0.5.20 :77-150): the decode radix cache with HiSparse or the fake transfer backend (:101,
    :106), and (0.5.20-0.5.22, here; 0.5.23 after the NEXTN alias, speculative_hook.py:162-172) with speculative decoding;
    the fake backend on a prefill server (:146); SGLANG_DISAGG_STAGING_BUFFER off mooncake / nixl (:155-162; mooncake_tcp
    is mooncake by then, :30-45); what enable_pd_role_switch cannot rebuild (:165-196, from 0.5.21; the view read there
    is the raw arguments, every resolution it names comes later). And handle_cache_compatibility's host_pool retraction
    backup, explicit or set by the decode host receive (:68-80), with DCP or with priority preemption
    (kv_cache_hook.py:360-373; 0.5.20 :150-163). targeted-pd-10 / -12 / -13 / -15 / -18 / -19."""
    mode = _choice(ctx, "disaggregation_mode", "null")
    if mode not in ("prefill", "decode"):
        return
    bad = report.of("server.combination")
    transfer = transfer_backend(ctx)
    # enable_return_aux_hidden_states resets the algorithm first (capture_only, pipeline.py:94).
    spec = "" if capture_only(ctx) else _choice(ctx, "speculative_algorithm", "")
    if mode == "decode" and ctx.is_set("disaggregation_decode_enable_radix_cache"):
        new = added_in(ctx, "0.5.23")
        spec_bad = bool(spec) and (
            nextn_as_eagle(spec) not in ("DSPARK", "EAGLE", "EAGLE3") if new else
            spec != "DSPARK" if added_in(ctx, "0.5.21") else True)
        for cond, dest, why, lines in (
            (ctx.is_set("enable_hisparse"), "enable_hisparse", "enable_hisparse",
             {"0.5.20": "80", "0.5.21": "88", "0.5.22": "101"}),
            (transfer == "fake", "disaggregation_transfer_backend", "disaggregation_transfer_backend fake",
             {"0.5.20": "85", "0.5.21": "93", "0.5.22": "106"}),
            (spec_bad, "speculative_algorithm", f"speculative_algorithm {spec}" + (
                " (SGLang allows only EAGLE, EAGLE3, NEXTN and DSPARK)" if new else ""),
             {"0.5.20": "90", "0.5.21": "98", "0.5.22": "111", "0.5.23": "speculative_hook.py:169"}),
        ):
            if cond:
                line = release_line(ctx, lines)
                bad.refuse(dest, f"disaggregation_decode_enable_radix_cache is incompatible with {why}.",
                           f"remove {ctx.var('disaggregation_decode_enable_radix_cache')} or {ctx.var(dest)}",
                           f"sglang/srt/arg_groups/{line}" if ".py:" in line else f"{_PD}:{line}")
                return
    if mode == "prefill" and transfer == "fake":
        bad.refuse("disaggregation_transfer_backend", "a PD prefill server cannot use the fake transfer backend.",
                   f"set {ctx.var('disaggregation_transfer_backend')} to mooncake or nixl",
                   f"{_PD}:" + release_line(ctx, {"0.5.20": "132", "0.5.21": "140", "0.5.22": "153", "0.5.23": "146"}))
        return
    # SGLANG_RUST_SERVER on a prefill server: the Rust server serves the KV bootstrap registry on the api port, so
    # _alias_bootstrap_port_to_api_port (pd_disaggregation_hook.py:150, 245-299) refuses an explicit
    # disaggregation_bootstrap_port other than its default 8998 or --port (:272-283). Every transfer backend a prefill
    # server can use here (mooncake, mooncake_tcp, nixl, mori, ascend) has a CommonKVBootstrapServer (:257-266).
    default = ctx.schema.default("disaggregation_bootstrap_port")  # the field's default, as SGLang reads it (:266-271)
    boot, port = _int(ctx, "disaggregation_bootstrap_port", default), _int(ctx, "port", 30000)
    if mode == "prefill" and env_true(ctx.env, "SGLANG_RUST_SERVER") and boot not in (default, port):
        bad.refuse("disaggregation_bootstrap_port", f"with SGLANG_RUST_SERVER the prefill server serves the PD KV "
                   f"bootstrap registry on its api port; disaggregation_bootstrap_port {boot} conflicts with port "
                   f"{port}.", f"remove {ctx.var('disaggregation_bootstrap_port')} (decode servers and the router then "
                   "target the prefill api port), or set it to the port", f"{_PD}:" + release_line(
                       ctx, {"0.5.20": "168", "0.5.21": "209", "0.5.22": "268", "0.5.23": "277"}))
        return
    if env_true(ctx.env, "SGLANG_DISAGG_STAGING_BUFFER") and transfer not in ("mooncake", "nixl"):
        bad.refuse("disaggregation_transfer_backend", f"SGLANG_DISAGG_STAGING_BUFFER needs the mooncake or nixl "
                   f"transfer backend, not {transfer}.", f"unset SGLANG_DISAGG_STAGING_BUFFER, or set "
                   f"{ctx.var('disaggregation_transfer_backend')} to mooncake or nixl",
                   f"{_PD}:" + release_line(ctx, {"0.5.20": "144", "0.5.21": "152", "0.5.22": "165", "0.5.23": "158"}))
        return
    if ctx.is_set("enable_pd_role_switch") and added_in(ctx, "0.5.21"):
        # handle_deprecated_dp_attention (0.5.22 on, pipeline.py:45) has already moved dp_size to attn_dp_size.
        attn_dp = _int(ctx, "attn_dp_size", 1)
        dp = _int(ctx, "dp_size", 1)
        if ctx.args.get("enable_dp_attention") is True and attn_dp <= 1 and added_in(ctx, "0.5.22"):
            attn_dp, dp = dp, 1
        a2a = moe_backends(ctx)[0]
        unsupported = [why for cond, why in (
            (not added_in(ctx, "0.5.22") and ctx.args.get("enable_dp_attention") is True,
             "DP attention (enable_dp_attention)"),
            (added_in(ctx, "0.5.22") and not added_in(ctx, "0.5.23") and attn_dp > 1, f"attention DP (attn_dp_size {attn_dp})"),
            (_int(ctx, "ep_size", 1) > 1, f"expert parallelism (ep_size {_int(ctx, 'ep_size', 1)})"),
            (a2a != "none", f"MoE all-to-all (moe_a2a_backend {a2a}; "
             "handle_mega_moe, pipeline.py:49, has read moe_runner_backend megamoe as it)"),
            (_int(ctx, "pp_size", 1) > 1, f"pipeline parallelism (pp_size {_int(ctx, 'pp_size', 1)})"),
            (not added_in(ctx, "0.5.23") and dp > 1, f"data parallelism (dp_size {dp})"),
            (added_in(ctx, "0.5.23") and attn_dp > 1 and ctx.is_set("enable_dp_attention_local_control_broadcast"),
             "DP attention local control broadcast (enable_dp_attention_local_control_broadcast)"),
            (_int(ctx, "dcp_size", 1) > 1, f"decode context parallelism (dcp_size {_int(ctx, 'dcp_size', 1)})"),
            (bool(spec), f"speculative decoding (speculative_algorithm {spec})"),
        ) if cond]
        if unsupported:
            bad.refuse("enable_pd_role_switch", "enable_pd_role_switch does not rebuild the role-specific state of "
                       f"{', '.join(unsupported)}.", f"remove {ctx.var('enable_pd_role_switch')}, or those options",
                       f"{_PD}:" + release_line(ctx, {"0.5.21": "184", "0.5.22": "197", "0.5.23": "191"}))
            return
    host_pool = _choice(ctx, "disaggregation_decode_retraction_backup", "") == "host_pool" or (
        decode_host_receive_on(ctx) and _choice(ctx, "disaggregation_decode_retraction_backup", "") != "cpu_tensor")
    if mode != "decode" or not host_pool:
        return
    why = "the host_pool retraction backup" + ("" if _choice(
        ctx, "disaggregation_decode_retraction_backup", "") == "host_pool" else
        " (which disaggregation_decode_host_receive_threshold < 1 turns on, pd_disaggregation_hook.py:76-80)")
    at = "sglang/srt/arg_groups/kv_cache_hook.py:"
    if _int(ctx, "dcp_size", 1) > 1:
        bad.refuse("dcp_size", f"{why} does not support dcp_size > 1.", f"remove {ctx.var('dcp_size')}",
                   at + release_line(ctx, {"0.5.20": "152", "0.5.21": "362"}))
    elif ctx.is_set("enable_priority_scheduling") and not ctx.is_set("disable_priority_preemption"):
        bad.refuse("enable_priority_scheduling", f"{why} with priority scheduling needs disable_priority_preemption.",
                   f"set {ctx.var('disable_priority_preemption')}: true", at + release_line(
                       ctx, {"0.5.20": "161", "0.5.21": "371"}))


CUDA_GRAPH_BACKENDS = ("full", "breakable", "disabled")  # sglang/srt/model_executor/cuda_graph_config.py:51-65


CUTEDSL_MLA_KV = ("fp8_e4m3", "bf16", "bfloat16", "auto")  # overrides.py:1248-1256


@rule("server.features", shared=True, ids=("server.combination", "server.json_args"), sources=(
    "sglang/srt/arg_groups/overrides.py:1425",
    "sglang/srt/arg_groups/validation_hook.py:453",
    "sglang/srt/arg_groups/cuda_graph_hook.py:417",
    "sglang/srt/arg_groups/validation_hook.py:461",
    "sglang/srt/arg_groups/validation_hook.py:463",
    "sglang/srt/arg_groups/validation_hook.py:474",
    "sglang/srt/arg_groups/validation_hook.py:112",
))
def _features_catalog(ctx: Context, report: Report) -> None:
    """validate_cuda_graph_config's per-phase backends (cuda_graph_hook.py:410-420), the DP LM head
    (overrides.py:1424-1427), decode-only CuTe DSL MLA (overrides.py:1233-1256), load publishing
    (validation_hook.py:436-474, with resolve_load_pub_range's port arithmetic: _load_pub_range_refusal) and the
    response store, which validate_response_store refuses on a PD server (validation_hook.py:109-116)."""
    if ctx.is_set("enable_response_store") and _choice(ctx, "disaggregation_mode", "null") != "null":
        report.of("server.combination").refuse(
            "enable_response_store", "enable_response_store is not supported with PD disaggregation (disaggregation_mode "
            f"{_choice(ctx, 'disaggregation_mode', 'null')}).",
            f"remove {ctx.var('enable_response_store')} (response storage stays off on PD servers)",
            f"{_VH}:" + release_line(ctx, {"0.5.20": "31", "0.5.22": "111", "0.5.23": "112"}))
    config = _json_arg(ctx, "cuda_graph_config")
    shape = _cuda_graph_config_shape(ctx, config) if _given(ctx, "cuda_graph_config") else None
    if shape is not None:
        report.of("server.json_args").refuse(
            "cuda_graph_config", f"{shape[0]} (SGLang's parser of --cuda-graph-config refuses it).",
            f"write {ctx.var('cuda_graph_config')} as {{decode: {{...}}, prefill: {{...}}}} with the keys SGLang "
            f"{ctx.version} reads", "sglang/srt/model_executor/cuda_graph_config.py:" + shape[1])
    elif isinstance(config, dict):
        for phase in ("decode", "prefill"):
            settings = config.get(phase)
            backend = settings.get("backend") if isinstance(settings, dict) else None
            if backend is not None and backend not in CUDA_GRAPH_BACKENDS:
                report.of("server.json_args").refuse(
                    "cuda_graph_config", f"cuda_graph_config {phase}.backend {backend!r} is not "
                    f"one of {', '.join(CUDA_GRAPH_BACKENDS)}.", f"set {ctx.var('cuda_graph_config')} {phase}.backend "
                    "to one of those", "sglang/srt/arg_groups/cuda_graph_hook.py:417")
                break
    # With one DP rank SGLang turns enable_dp_lm_head off first (_data_parallelism_defaults, overrides.py:1366-1370):
    # only DP replicas (dp_size > 1) without attention DP reach the assert. An elastic-EP scale joiner counts as DP.
    # Before 0.5.22 the assert tests enable_dp_attention (0.5.21 overrides.py:1364-1366).
    if ctx.is_set("enable_dp_lm_head") and not attention_dp_on(ctx) and _int(ctx, "dp_size", 1) > 1 and \
            _choice(ctx, "ep_join_mode", "") != "scale":
        report.of("server.combination").refuse("enable_dp_lm_head", "enable_dp_lm_head needs attention DP (attn_dp_size > 1).",
                                               f"set {ctx.var('attn_dp_size')} > 1, or remove {ctx.var('enable_dp_lm_head')}",
                                               "sglang/srt/arg_groups/overrides.py:1425")
    lm = "sglang/srt/arg_groups/overrides.py"
    # _cutedsl_prefill_backend_fill (overrides.py:1232-1258; 0.5.22 :1196-1221, 0.5.21 :1177-1202, 0.5.20 :1294-1319).
    # Elsewhere than SM100 the attention rules of the profiles refuse cutedsl_mla first (arch.attention, sm12x.attention;
    # SGLang's :1245). A prefill_attention_backend cutedsl_mla of the table's non-MLA models is
    # attention._cutedsl_mla_prefill's. The KV-cache dtype check reads no model: SGLang refuses kv_cache_dtype mxfp8 with
    # a cutedsl_mla decode on Llama too (the KV x speculative x attention grid's MISSED, issue 36).
    cc = ctx.compute_capability
    if cc is not None and cc[0] != 10:
        pass
    elif _choice(ctx, "prefill_attention_backend", "") == "cutedsl_mla":
        if ctx.model.mla or not ctx.model.known:
            report.of("server.combination").refuse(
                "prefill_attention_backend", "the CuTe DSL MLA backend decodes only; "
                "prefill_attention_backend cutedsl_mla is refused.", f"remove {ctx.var('prefill_attention_backend')} "
                "(SGLang prefills with trtllm_mla next to a cutedsl_mla decode)", f"{lm}:1241")
    elif "cutedsl_mla" in (_choice(ctx, "attention_backend", ""), _choice(ctx, "decode_attention_backend", "")):
        kv = _choice(ctx, "kv_cache_dtype", "auto")
        if kv not in CUTEDSL_MLA_KV:
            report.of("server.combination").refuse(
                "kv_cache_dtype", f"the CuTe DSL MLA backend runs kv_cache_dtype fp8_e4m3, bf16 "
                f"or auto, not {kv}.", f"set {ctx.var('kv_cache_dtype')}: fp8_e4m3 (or auto)", f"{lm}:1254")
    mode = str(ctx.args.get("load_publish_endpoint") or "").strip()
    if mode and mode.lower() != "off":
        events = _json_arg(ctx, "kv_events_config")
        fix = (f"set {ctx.var('kv_events_config')} to an active publisher, e.g. "
               '{"publisher": "zmq", "endpoint": "tcp://*:5557"}, or remove load_publish_endpoint')
        if not ctx.is_set("kv_events_config"):
            report.of("server.combination").refuse("load_publish_endpoint", "load_publish_endpoint needs kv_events_config (routers "
                                                   "find the load range through its kv_events block).", fix, f"{_VH}:453")
        elif not isinstance(events, dict):
            report.of("server.json_args").refuse("kv_events_config", "kv_events_config is not a JSON object.", fix, f"{_VH}:461")
        elif events.get("publisher", "null") == "null" or not events.get("endpoint", "tcp://*:5557"):
            report.of("server.combination").refuse("kv_events_config", "load_publish_endpoint needs an active kv_events_config "
                                                   "publisher (publisher null or an empty endpoint).", fix, f"{_VH}:463")
        else:
            reason = _load_pub_range_refusal(ctx, events, mode)
            if reason:
                report.of("server.combination").refuse(
                    "load_publish_endpoint", f"{reason}.",
                    f"use {ctx.var('load_publish_endpoint')}: auto, or a wildcard tcp://*:PORT clear of the KV-event ports "
                    "(one port per DP rank)",
                    f"{_VH}:" + release_line(ctx, {"0.5.20": "354", "0.5.21": "382", "0.5.22": "473", "0.5.23": "474"}))


# parse_cuda_graph_config_arg's keys per phase (ALLOWED_KEYS_PER_PHASE, model_executor/cuda_graph_config.py:75-86;
# 0.5.21 :77-89 and 0.5.20 :76-86 with tc_compiler, 0.5.20 without max_context_size and max_seq_len).
CUDA_GRAPH_CONFIG_KEYS = {
    "0.5.22": {"decode": ("backend", "max_bs", "bs"),
               "prefill": ("backend", "max_bs", "bs", "max_context_size", "full_prefill_max_req",
                           "full_prefill_prefix_chunk_tokens", "max_seq_len")},
    "0.5.21": {"decode": ("backend", "max_bs", "bs", "tc_compiler"),
               "prefill": ("backend", "max_bs", "bs", "tc_compiler", "max_context_size", "full_prefill_max_req",
                           "full_prefill_prefix_chunk_tokens", "max_seq_len")},
    "0.5.20": {"decode": ("backend", "max_bs", "bs", "tc_compiler"),
               "prefill": ("backend", "max_bs", "bs", "tc_compiler", "full_prefill_max_req",
                           "full_prefill_prefix_chunk_tokens")},
}
# Its raise lines: (the JSON object, the phase, the phase's object, the key), per release.
_CUDA_GRAPH_CONFIG_LINES = {"0.5.22": ("257", "265", "269", "279"), "0.5.21": ("250", "258", "262", "270"),
                            "0.5.20": ("240", "248", "252", "260")}


def _cuda_graph_config_shape(ctx: Context, config: object) -> tuple[str, str] | None:
    """parse_cuda_graph_config_arg, --cuda-graph-config's argparse type (model_executor/cuda_graph_config.py:246-283;
    0.5.21 :239-275, 0.5.20 :229-265): a JSON object of phases (decode, prefill), each a JSON object of that
    release's keys (CUDA_GRAPH_CONFIG_KEYS); the first refusal in SGLang's order with its line, None where it parses.
    The conformance-all run's MISSED targeted-graphs-14: prefill.max_context_size, which 0.5.20 does not know."""
    lines, keys = release_line(ctx, _CUDA_GRAPH_CONFIG_LINES), release_line(ctx, CUDA_GRAPH_CONFIG_KEYS)
    if not isinstance(config, dict):
        return (f"cuda_graph_config must be a JSON object, not {type(config).__name__}", lines[0]) \
            if config is not None else None
    for phase, settings in config.items():
        if str(phase) not in keys:
            return f"cuda_graph_config names the phase {phase!r}; the phases are decode and prefill", lines[1]
        if not isinstance(settings, dict):
            return f"cuda_graph_config {phase} must be a JSON object, not {type(settings).__name__}", lines[2]
        unknown = [k for k in settings if k not in keys[str(phase)]]
        if unknown:
            return (f"cuda_graph_config {phase} sets {unknown[0]!r}, which SGLang {ctx.version} does not know (its keys: "
                    f"{', '.join(keys[str(phase)])})", lines[3])
    return None


_BIND_WILDCARD_HOSTS = ("*", "0.0.0.0", "::")  # sglang/srt/disaggregation/kv_events.py:88


def _tcp_address(endpoint: object) -> tuple[str, int] | None:
    """NetworkAddress.parse of a tcp:// endpoint's host:port (sglang/srt/utils/network.py:599-645: a bracketed IPv6
    host, else host:port split at the last colon, a bare IPv6 host refused, a port int() in 0-65535); None where it
    raises."""
    if not isinstance(endpoint, str) or not endpoint.startswith("tcp://"):
        return None
    addr = endpoint[len("tcp://"):]

    def is_ipv6(host: str) -> bool:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True

    if addr.startswith("["):
        close = addr.find("]")
        host, rest = addr[1:close], addr[close + 1:]
        if close == -1 or not is_ipv6(host) or not rest.startswith(":") or len(rest) < 2:
            return None
        port_str = rest[1:]
    else:
        if ":" not in addr:
            return None
        host, port_str = addr.rsplit(":", 1)
        if not host or (":" in host and is_ipv6(host)):
            return None
    try:
        port = int(port_str)
    except ValueError:
        return None
    return (host, port) if 0 <= port <= 65535 else None


def _tcp_port(endpoint: object) -> int | None:
    """parse_tcp_port (sglang/srt/disaggregation/kv_events.py:91-103): a legal port of any host, else None."""
    addr = _tcp_address(endpoint)
    return addr[1] if addr is not None and addr[1] > 0 else None


def _bindable_tcp(endpoint: object) -> bool:
    """parse_bindable_tcp (kv_events.py:125-137): a wildcard host (*, 0.0.0.0, [::]) and a port 1-65535."""
    addr = _tcp_address(endpoint)
    return addr is not None and addr[0] in _BIND_WILDCARD_HOSTS and addr[1] > 0


def load_publish_ranks(ctx: Context) -> int | None:
    """The DP ranks check_load_publish_args hands resolve_load_pub_range: num_dp_ranks_of, dp_size x attn_dp_size after
    handle_deprecated_dp_attention and handle_dwdp (validation_hook.py:470, runtime_context.py:202-207; 0.5.22 the
    same, :469); before 0.5.22 the resolved dp_size (0.5.21 validation_hook.py:378, 0.5.20 :350), which counts the
    attention-DP groups under enable_dp_attention and is dwdp_size under DWDP. None (not judged) where DeepSeek's
    prefill-CP override reshapes the DP layout (resolve.deepseek_cp_attention_dp)."""
    if deepseek_cp_attention_dp(ctx):
        return None
    if dwdp_on(ctx):
        return _int(ctx, "dwdp_size", 1)
    dp = _int(ctx, "dp_size", 1)
    if not added_in(ctx, "0.5.22"):
        return dp
    # attention_dp_width reads the deprecated dp_size + enable_dp_attention as attention DP, leaving no DP replicas.
    moved = ctx.args.get("enable_dp_attention") is True and _int(ctx, "attn_dp_size", 1) <= 1
    return attention_dp_width(ctx) * (1 if moved else dp)


def _load_pub_range_refusal(ctx: Context, events: dict, mode: str) -> str | None:
    """resolve_load_pub_range's reasons (sglang/srt/disaggregation/kv_events.py:140-230; 0.5.20-0.5.22 the same), which
    check_load_publish_args raises (validation_hook.py:467-474): auto packs the load range after the KV-event range
    (base = kv port + ranks), past an overlapping replay range; an explicit address must be a wildcard tcp:// one whose
    range [base, base + ranks) overlaps neither the KV-event nor the replay range, next to a tcp:// KV endpoint; the
    range must end within 65535. Pure arithmetic on the arguments: the ranks are the resolved DP ranks
    (load_publish_ranks)."""
    ranks = load_publish_ranks(ctx)
    kv, replay = events.get("endpoint", "tcp://*:5557"), events.get("replay_endpoint")
    if ranks is None or ranks < 1 or not isinstance(kv, str) or not (replay is None or isinstance(replay, str)):
        return None
    if mode.lower() == "auto":
        if not _bindable_tcp(kv):
            return f"load_publish_endpoint auto needs a bindable wildcard-host tcp:// kv_events_config endpoint; {kv!r} is not one"
        base = _tcp_address(kv)[1] + ranks
        replay_base = _tcp_port(replay)
        if replay_base is not None and base < replay_base + ranks and replay_base < base + ranks:
            base = replay_base + ranks
    else:
        if _tcp_port(kv) is None:
            return f"load_publish_endpoint {mode!r} needs a routable tcp:// kv_events_config endpoint, not {kv!r}"
        if not _bindable_tcp(mode):
            return f"load_publish_endpoint {mode!r} is not a bindable tcp:// address (a wildcard host: *, 0.0.0.0 or [::])"
        base = _tcp_address(mode)[1]
        for port in (_tcp_port(kv), _tcp_port(replay)):
            if port is not None and base < port + ranks and port < base + ranks:
                return (f"the load-publish range [{base}, {base + ranks}) ({ranks} DP rank(s)) overlaps the kv-events range "
                        f"[{port}, {port + ranks})")
    if base + ranks - 1 > 65535:
        return f"the load-publish range from {base} ({ranks} DP rank(s)) runs past port 65535"
    return None
