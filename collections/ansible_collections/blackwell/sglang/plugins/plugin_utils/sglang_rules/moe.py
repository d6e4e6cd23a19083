# SPDX-License-Identifier: Apache-2.0
"""Mixture of experts: the runners and all-to-all backends per architecture and SGLang's MoE launch checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _MOEH,
    _PH,
    MOE_RUNNER_DESTS,
    _cc,
    _choice,
    _given,
    _int,
    _json_arg,
    _num,
    _override_architectures,
    env_true,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.profiles import (
    NVFP4_ONLINE_SOURCE,
    QUANT_MIN_CAPABILITY,
    ArchProfile,
    arch_profile,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import (
    Report,
    added_in,
    release_line,
    rule,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    CUTEDSL_MOE_QUANT,
    CUTLASS_MOE_QUANT,
    FLASHINFER_A2A_RUNNERS,
    MXFP8_RUNNERS,
    NVFP4_ONLINE_RUNNERS,
    QWEN3_MOE_FAMILY_ARCHS,
    TRTLLM_MOE_QUANT,
    UNCERTAIN,
    _a2a_may_change,
    attention_dp_on,
    attention_dp_width,
    certain_architecture,
    checkpoint_fp8_filled,
    chunk_dp_width,
    cuda_graphs_unsettled,
    deepep_v2_architectures,
    deepep_v2_decode_graph_requests,
    default_chunked_prefill_size,
    dsa_prefill_cp_deepep,
    dwdp_on,
    gpu_memory_mib,
    handled_a2a_backend,
    kv_shard_rounds_chunk,
    mis_chunked_prefill_off,
    mla_prefill_cp_deepep,
    modelopt_fp4_moe_runner,
    moe_backends,
    moe_kernel_quantization,
    mxfp8_moe_runner,
    override_a2a_backend,
    possible_default_chunked_prefill_sizes,
    resolved_moe_runner,
    speculative_decode_tokens,
    trtllm_routed_quant,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("arch.moe", ids=("{family}.quantization", "{family}.moe", "{family}.nvfp4"), sources=(
    "sglang/srt/model_loader/loader.py:254-265",
    "sglang/srt/arg_groups/moe_hook.py:335-339",
    "sglang/srt/arg_groups/overrides.py:1513-1522",
    "sglang/srt/arg_groups/overrides.py:1484-1512",
))
def _arch_moe(ctx: Context, report: Report) -> None:
    profile = arch_profile(ctx)
    if profile is None:
        return
    cc, fam = _cc(ctx), profile.family
    for dest in MOE_RUNNER_DESTS:
        runner = ctx.args.get(dest)
        refusal = profile.moe_runners.get(str(runner)) if runner is not None else None
        if refusal:
            ctx.error(f"{fam}.moe", dest, f"MoE runner {runner!r} does not work on compute capability {cc}: {refusal.why}.",
                      ("use flashinfer_cutlass (NVFP4 on SM120), triton, or leave it unset (auto)" if fam == "sm12x"
                       else "use triton, flashinfer_cutlass, or leave it unset (auto)"), refusal.source)
    _arch_mxfp8_runner(ctx, profile)
    # moe_backends: moe_runner_backend megamoe replaces the written backend with megamoe (fuzz-2-06988's class); the
    # check is handle_a2a_moe's, after enable_waterfill makes it deepep (handled_a2a_backend).
    if not profile.sm100 and handled_a2a_backend(ctx) == "flashinfer_megamoe":
        ctx.error(f"{fam}.moe", "moe_a2a_backend",
                  f"moe_a2a_backend 'flashinfer_megamoe' needs an SM100-family GPU; compute capability {cc} has none of its "
                  "kernels.", "use moe_a2a_backend none (or deepep)", "sglang/srt/arg_groups/moe_hook.py:335-339")
    _arch_quantization(ctx, profile)
    # MoE models only: the SM100-only kernels are MoE runners; a dense NVFP4 checkpoint picks none, and a model
    # of unknown architecture (moe None) is not accused.
    quant = ctx.args.get("quantization")
    if (profile.nvfp4_moe_explicit and ctx.model.moe and ctx.model.quantization == "nvfp4" and quant != "modelopt_fp4"
            and ctx.args.get("moe_runner_backend") != "flashinfer_cutlass"):
        ctx.error(f"{fam}.nvfp4", "quantization",
                  f"{ctx.args.get('model_path')} is an NVFP4 mixture-of-experts checkpoint; on compute capability {cc} "
                  "SGLang then picks SM100-only MoE kernels at run time unless told otherwise (it picks flashinfer_cutlass "
                  "on SM110/SM120 only for quantization modelopt_fp4).",
                  "set sglang_args.quantization: modelopt_fp4 (or moe_runner_backend: flashinfer_cutlass)",
                  "sglang/srt/arg_groups/overrides.py:1513-1522")


def _arch_mxfp8_runner(ctx: Context, profile: ArchProfile) -> None:
    """The runner quantization mxfp8 makes SGLang run (resolve.mxfp8_moe_runner, overrides.py:1484-1512), against
    the profile, where it is not the one written: SGLang replaces triton or flashinfer_cutlass, and picks for auto,
    flashinfer_trtllm, whose kernels are SM100-only. Stricter than SGLang, which accepts it on SM120 and fails at run
    time (differential.STRICTER: the profile's ids). An unset runner is refused for MoE models only (a dense model
    runs no MoE runner), an explicit one unless the model is known dense."""
    written, runner = _choice(ctx, "moe_runner_backend", "auto"), mxfp8_moe_runner(ctx)
    refusal = profile.moe_runners.get(runner) if runner is not None and runner != written else None
    if refusal is None or not (ctx.model.moe if written == "auto" else ctx.model.moe is not False):
        return
    cc, fam = _cc(ctx), profile.family
    others = ", ".join(r for r in MXFP8_RUNNERS if r not in profile.moe_runners and r != "flashinfer_megamoe")
    picks = "picks" if written == "auto" else f"replaces moe_runner_backend {written!r} (a runner MXFP8 does not run) with"
    dest = "quantization" if written == "auto" else "moe_runner_backend"
    ctx.error(f"{fam}.moe", dest, f"quantization mxfp8 {picks} MoE runner {runner!r}, which does not work on compute "
              f"capability {cc}: {refusal.why}. Stricter than SGLang, which accepts the launch: the kernel fails at run "
              "time.", f"use a quantization other than mxfp8 on compute capability {cc}, or set "
              f"{ctx.var('moe_runner_backend')} to an MXFP8 runner not refused here ({others})",
              "sglang/srt/arg_groups/overrides.py:1484-1512 (the replacement; stricter: the kernel fails at run time)")


def _arch_quantization(ctx: Context, profile: ArchProfile) -> None:
    quant = ctx.args.get("quantization")
    if quant is None:
        return
    cc, fam, major, minor = _cc(ctx), profile.family, *(ctx.compute_capability or (0, 0))
    if quant == "nvfp4_online" and not profile.sm100:
        ctx.error(f"{fam}.quantization", "quantization",
                  f"quantization 'nvfp4_online' is SM100-only (B200/GB200/B300/GB300); it fails on compute capability {cc}.",
                  "use a pre-quantized NVFP4 checkpoint with quantization modelopt_fp4", NVFP4_ONLINE_SOURCE)
        return
    least = QUANT_MIN_CAPABILITY.get(str(quant))
    if least and major * 10 + minor < least[0]:
        ctx.error(f"{fam}.quantization", "quantization",
                  f"quantization {quant!r} needs compute capability {least[0] // 10}.{least[0] % 10} or newer; this host has "
                  f"{cc}. SGLang refuses it after reading the model's config.",
                  "use a checkpoint format the GPU runs (bf16, fp8 or an AWQ/GPTQ checkpoint), or newer GPUs",
                  f"sglang/srt/model_loader/loader.py:254-265, {least[1]}")


@rule("server.moe", shared=True, sources=(
    "sglang/srt/arg_groups/moe_hook.py:311",
    "sglang/srt/arg_groups/moe_hook.py:172",
    "sglang/srt/arg_groups/mega_moe_hook.py:33",
    "sglang/srt/arg_groups/moe_hook.py:322",
    "sglang/srt/arg_groups/moe_hook.py:325",
    "sglang/srt/arg_groups/moe_hook.py:332",
    "sglang/srt/arg_groups/moe_hook.py:377",
    "sglang/srt/arg_groups/moe_hook.py:723-731",
))
def _moe_launch(ctx: Context, report: Report) -> None:
    """handle_a2a_moe and check_mega_moe_compat (moe_hook.py, mega_moe_hook.py), on the explicit backends as
    handle_moe_runner_backend_alias leaves them (moe_backends; mega_moe_hook.py:259-276, 0.5.20 :21-38, 0.5.21-0.5.22
    :199-216, run first, pipeline.py:49): moe_runner_backend megamoe replaces whatever moe_a2a_backend the host wrote
    with megamoe, so pplx's, deepep_v2's and flashinfer_megamoe's checks never see it (the seed-2 10,000-case run's
    false alarm, fuzz-2-06988), and flashinfer_a2a_dispatch_type then lacks its flashinfer backend (:311). Likewise
    enable_waterfill, which makes every backend but deepep and megamoe deepep before these checks (handled_a2a_backend:
    flashinfer_a2a_dispatch_type refused with moe_a2a_backend flashinfer, flashinfer_cutedsl's DeepEP normal dispatch
    refused with none; pplx's, deepep_v2's, flashinfer_megamoe's and flashinfer's checks skipped)."""
    runner = moe_backends(ctx)[1]
    a2a = handled_a2a_backend(ctx)
    overlap = ctx.is_set("enable_two_batch_overlap") or ctx.is_set("enable_single_batch_overlap")
    dispatch = _choice(ctx, "flashinfer_a2a_dispatch_type", "auto")
    if a2a != "flashinfer" and dispatch != "auto":
        report.refuse("flashinfer_a2a_dispatch_type", "flashinfer_a2a_dispatch_type needs moe_a2a_backend flashinfer.",
                      f"set {ctx.var('moe_a2a_backend')}: flashinfer, or remove flashinfer_a2a_dispatch_type", f"{_MOEH}:311")
        return
    if _a2a_may_change(ctx):
        return
    tp, attn_dp = _int(ctx, "tp_size", 1), attention_dp_width(ctx)
    if a2a == "flashinfer" and dispatch != "auto" and "SGLANG_MOE_NVFP4_DISPATCH" in ctx.env:
        report.refuse("sglang_env.SGLANG_MOE_NVFP4_DISPATCH", "SGLANG_MOE_NVFP4_DISPATCH cannot be set together with "
                      "flashinfer_a2a_dispatch_type.", "remove one of them (flashinfer_a2a_dispatch_type: nvfp4 says the same)",
                      f"{_MOEH}:172")
    if a2a == "flashinfer_megamoe":
        combine = ctx.env.get("SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE", "bf16").strip().lower()
        for bad, why, line in (
            (added_in(ctx, "0.5.23") and env_true(ctx.env, "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16") and combine != "bf16",
             "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16 needs SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE bf16", 217),
            (combine not in ("bf16", "mxfp8", "nvfp4"),
             f"SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE {combine!r} is not bf16, mxfp8 or nvfp4", 222),
            (combine != "bf16" and env_true(ctx.env, "SGLANG_FLASHINFER_MEGAMOE_IN_KERNEL_FC2_REDUCE"),
             f"SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE {combine} does not work with "
             "SGLANG_FLASHINFER_MEGAMOE_IN_KERNEL_FC2_REDUCE", 230),
        ):
            if bad:
                report.refuse("sglang_env.SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE", f"FlashInfer MegaMoE: {why}.",
                              "fix the sglang_env values", f"{_MOEH}:{line}")
                return
        # NVFP4 W4A16 runs on a bfloat16 model only (moe_hook.py:318-324, new in 0.5.23): an explicit --dtype SGLang
        # maps to another torch dtype (_NOT_BFLOAT16) is refused; auto is left alone (the checkpoint's dtype decides).
        if added_in(ctx, "0.5.23") and env_true(ctx.env, "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16") and \
                _choice(ctx, "dtype", "auto") in ("half", "float16", "float", "float32"):
            report.refuse("dtype", f"FlashInfer MegaMoE NVFP4 W4A16 (SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16) needs a "
                          f"bfloat16 model, not dtype {_choice(ctx, 'dtype', 'auto')!r}.",
                          f"set {ctx.var('dtype')}: bfloat16 (or auto for a bfloat16 checkpoint)", f"{_MOEH}:322")
            return
    if a2a == "megamoe" and overlap and added_in(ctx, "0.5.21"):  # 0.5.20 has no such check
        report.refuse("moe_a2a_backend", "moe_a2a_backend megamoe has no two-batch / single-batch overlap.",
                      "remove enable_two_batch_overlap / enable_single_batch_overlap", "sglang/srt/arg_groups/mega_moe_hook.py:33")
    elif a2a == "flashinfer_megamoe" and not (attention_dp_on(ctx) and attn_dp == tp):
        report.refuse("attn_dp_size", f"moe_a2a_backend flashinfer_megamoe needs attn_dp_size equal to tp_size ({tp}).",
                      f"set {ctx.var('attn_dp_size')}: {tp}", f"{_MOEH}:325")
    elif a2a == "flashinfer_megamoe" and runner not in ("auto", "flashinfer_megamoe"):
        report.refuse("moe_runner_backend", "moe_a2a_backend flashinfer_megamoe needs moe_runner_backend flashinfer_megamoe.",
                      f"set {ctx.var('moe_runner_backend')}: flashinfer_megamoe (or leave it auto)", f"{_MOEH}:332")
    elif a2a == "deepep" and runner == "flashinfer_cutedsl" and _choice(ctx, "deepep_mode", "auto") == "normal":
        report.refuse("deepep_mode", "flashinfer_cutedsl FP4 MoE has no DeepEP normal (prefill) dispatch.",
                      f"set {ctx.var('deepep_mode')}: low_latency or auto", f"{_MOEH}:377")
    elif a2a == "deepep_v2" and ctx.model.architecture in ARCHITECTURES and \
            ctx.model.architecture not in deepep_v2_architectures(ctx):
        # Stricter in one way: a model package may register more architectures before SGLang validates the
        # arguments (register_deepep_v2_model); this table holds SGLang's own models, which none registers.
        report.refuse("moe_a2a_backend", f"moe_a2a_backend deepep_v2 is not validated for {ctx.model.architecture}: SGLang "
                      f"runs it for {', '.join(deepep_v2_architectures(ctx))} only.",
                      f"use {ctx.var('moe_a2a_backend')}: deepep (or none)", f"{_MOEH}:723-731")
    elif a2a == "deepep_v2":
        for bad, dest, why, line in (
            (runner not in ("auto", "deep_gemm"), "moe_runner_backend", f"supports moe_runner_backend deep_gemm only, "
             f"not {runner}", 414),
            (overlap, "enable_two_batch_overlap", "has no two-batch / single-batch overlap hooks", 421),
            (ctx.is_set("enforce_shared_experts_fusion"), "enforce_shared_experts_fusion",
             "has not validated fused shared experts", 427),
            (added_in(ctx, "0.5.22") and _choice(ctx, "deepep_v2_mode", "direct") == "direct" and _int(ctx, "nnodes", 1) > 1,
             "deepep_v2_mode",
             "deepep_v2_mode direct is NVLink-only and cannot span nodes", 433),
        ):
            if bad:
                report.refuse(dest, f"moe_a2a_backend deepep_v2 {why}.", f"fix {ctx.var(dest)} (deepep_v2_mode: hybrid across "
                              "nodes), or use another moe_a2a_backend", f"{_MOEH}:{line}")
                break
    elif a2a == "pplx":
        for bad, dest, why, line in (
            (_choice(ctx, "deepep_mode", "auto") == "normal", "deepep_mode", "supports low-latency mode only", 577),
            (attn_dp < 2, "attn_dp_size", "needs attention DP with at least 2 groups", 591),
            (runner not in ("auto", "deep_gemm"), "moe_runner_backend", f"runs deep_gemm only, not {runner}", 599),
        ):
            if bad:
                report.refuse(dest, f"moe_a2a_backend pplx {why}.", f"fix {ctx.var(dest)}, or use another moe_a2a_backend",
                              f"{_MOEH}:{line}")
                break


MORI_ENV = "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


@rule("moe.mori", ids=("{family}.moe", "moe.mori"), sources=(
    "sglang/srt/arg_groups/moe_hook.py:564-572",
))
def _mori(ctx: Context, report: Report) -> None:
    """MoRI all-to-all: an AMD ROCm library, and its dispatch buffer against chunked prefill; not where
    moe_runner_backend megamoe replaces it (moe_backends), nor enable_waterfill (deepep: handled_a2a_backend)."""
    if handled_a2a_backend(ctx) != "mori":
        return
    profile = arch_profile(ctx)
    if profile is not None:
        ctx.error(f"{profile.family}.moe", "moe_a2a_backend",
                  f"moe_a2a_backend 'mori' is AMD's MoRI all-to-all library (ROCm only); it does not run on compute "
                  f"capability {_cc(ctx)} (stricter than SGLang, whose argument checks only size its buffer).",
                  "use moe_a2a_backend deepep (or none)")
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is None:
        chunk = default_chunked_prefill_size(gpu_memory_mib(ctx)[0])
    # enable_mis turns chunked prefill off first (mis_chunked_prefill_off), and the check skips a chunk off.
    if not isinstance(chunk, int) or str(ctx.get("disaggregation_mode", "null")) == "decode" or \
            mis_chunked_prefill_off(ctx):
        return
    # required_mori_dispatch_tokens_per_rank (moe_hook.py:834-837) reads chunked_prefill_size after
    # handle_data_parallelism has divided it by the attention-DP width (parallel_hook.py:326-331, pipeline.py:274 before
    # :295; 0.5.20-0.5.22 the same order, the width as attention_dp_width reads it): the seed-4 10,000-case run's false
    # alarm fuzz-4-01951, attn_dp_size 13 on an H200 (SGLang's default 8192 // 13 = 630 tokens per rank).
    width = attention_dp_width(ctx) if attention_dp_on(ctx) else 1
    per_rank = chunk // width
    if per_rank <= 0:
        return
    try:
        limit = int(ctx.env.get(MORI_ENV, 4096))
    except (TypeError, ValueError):
        return
    if per_rank > limit:
        what = f"chunked_prefill_size={chunk}" if width == 1 else (
            f"chunked_prefill_size {chunk} // attention-DP width {width} = {per_rank}")
        ctx.error("moe.mori", "moe_a2a_backend",
                  f"MoRI dispatches up to {what} tokens per rank, more than {MORI_ENV}={limit}; "
                  "SGLang refuses it at start-up.",
                  f"set sglang_args.chunked_prefill_size <= {limit * width}, or raise sglang_env.{MORI_ENV}",
                  "sglang/srt/arg_groups/moe_hook.py:564-572")


PPLX_ENV = "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


@rule("moe.pplx", sources=(
    "sglang/srt/arg_groups/moe_hook.py:575-594",
    "sglang/srt/arg_groups/moe_hook.py:577",
    "sglang/srt/arg_groups/moe_hook.py:611-619",
    "sglang/srt/arg_groups/moe_hook.py:591",
))
def _pplx(ctx: Context, report: Report) -> None:
    """handle_a2a_moe for pplx (sglang/srt/arg_groups/moe_hook.py:575-594), which moe_runner_backend megamoe turns
    into megamoe before it runs (moe_backends, mega_moe_hook.py:259-276: fuzz-2-06988, a false alarm), and
    enable_waterfill into deepep (handled_a2a_backend)."""
    if handled_a2a_backend(ctx) != "pplx":
        return
    if str(ctx.get("deepep_mode", "auto")) == "normal":
        ctx.error("moe.pplx", "deepep_mode", "moe_a2a_backend pplx runs in low-latency mode only; deepep_mode is normal.",
                  "set sglang_args.deepep_mode: low_latency (or auto)", "sglang/srt/arg_groups/moe_hook.py:577")
    elif not attention_dp_on(ctx) or attention_dp_width(ctx) < 2:
        # 0.5.20 / 0.5.21 ask for enable_dp_attention with dp_size >= 2 (moe_hook.py:497 there), which
        # attention_dp_on / attention_dp_width read (a false alarm of the old attn_dp_size test on those releases).
        ctx.error("moe.pplx", "moe_a2a_backend",
                  "moe_a2a_backend pplx needs attention data parallelism with at least 2 groups (attn_dp_size >= 2); "
                  "SGLang refuses it without.", "set sglang_args.attn_dp_size >= 2, or use moe_a2a_backend deepep / none",
                  "sglang/srt/arg_groups/moe_hook.py:591")
        return
    # required_pplx_dispatch_tokens_per_rank (moe_hook.py:840-846) against the buffer (moe_hook.py:611-619): chunked
    # prefill (SGLang's default by the GPUs' memory, the least the architecture's GPUs get where it is not known) or
    # the decode CUDA-graph batch, whichever is larger. The chunk is per attention-DP rank, which pplx always has:
    # handle_data_parallelism divides it first (parallel_hook.py:326-331, pipeline.py:274 before :295; 0.5.20-0.5.22
    # the same order); enable_mis turns it off before either (mis_chunked_prefill_off), and the check skips a chunk off.
    # The resolver-differential's false alarms: chunked_prefill_size 256 over attn_dp_size 2 (128 per rank), and
    # enable_mis.
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is None:
        chunk = min(possible_default_chunked_prefill_sizes(ctx))
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk <= 0 or mis_chunked_prefill_off(ctx) or \
            str(ctx.get("disaggregation_mode", "null")) == "decode":
        return
    width = attention_dp_width(ctx) if attention_dp_on(ctx) else 1
    per_rank = chunk // width
    if per_rank <= 0:
        return
    graph = _num(ctx, "cuda_graph_max_bs_decode")
    need = per_rank if graph is None else max(per_rank, graph)
    try:
        limit = int(ctx.env.get(PPLX_ENV, 128))
    except (TypeError, ValueError):
        return
    if need > limit:
        what = "chunked_prefill_size" if width == 1 else f"chunked_prefill_size // attention-DP width {width}"
        ctx.error("moe.pplx", "moe_a2a_backend",
                  f"pplx dispatches up to {need} tokens per rank ({what} / cuda_graph_max_bs_decode), more "
                  f"than {PPLX_ENV}={limit}; SGLang refuses it at start-up.",
                  f"set sglang_args.chunked_prefill_size <= {limit * width}, or raise sglang_env.{PPLX_ENV}",
                  "sglang/srt/arg_groups/moe_hook.py:611-619")


DEEPEP_V2_ENV = "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


# Where each release raises the prefill-budget error (moe_hook.py), newest first.
DEEPEP_V2_BUDGET_LINES = (("0.5.23", "688-695"), ("0.5.22", "612-619"), ("0.5.21", "567-574"), (None, "560-567"))
# ... and the decode CUDA-graph one.
DEEPEP_V2_DECODE_LINES = (("0.5.23", "700-706"), ("0.5.22", "624-630"), ("0.5.21", "594-600"), (None, "587-593"))


@rule("moe.deepep_v2", sources=(
    "sglang/srt/arg_groups/moe_hook.py:679-697",
    "sglang/srt/arg_groups/moe_hook.py:700-706",
))
def _deepep_v2_budget(ctx: Context, report: Report) -> None:
    """validate_deepep_v2_dispatch_token_budget (sglang/srt/arg_groups/moe_hook.py:679-706; 0.5.20 moe_hook.py:549-593:
    DEEPEP_V2_BUDGET_LINES, DEEPEP_V2_DECODE_LINES): the tokens one rank dispatches in a prefill chunk, then those of
    its largest decode CUDA graph, against the DeepEP v2 buffer (SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK, 128
    by default, environ.py:1441; 0.5.20-0.5.22 the same default).

    The prefill half (not on a PD decode server): the per-rank figure is required_deepep_v2_prefill_tokens_per_rank
    (moe_hook.py:641-653): the prefill buffer ceiling (max_prefill_buffer_tokens, overrides.py:1865-1884:
    chunked_prefill_size, or max_prefill_tokens when chunked prefill is off) after attention DP divides the chunk
    (parallel_hook.py:326-331), split from 0.5.22 on over the tp_size // attn_dp_size ranks a chunk is scattered across.
    The figure used here is a lower bound (SGLang's smallest default chunk for the architecture's GPUs; PP dynamic
    chunking only grows it), so the rule never refuses what SGLang accepts. SGLang's own models register no prefill
    sizing of their own (moe_model_registry.py:20-28), so the rule keeps to them.

    The decode half (not on a PD prefill server): _decode_graph_dispatch_tokens_per_rank (moe_hook.py:656-676; 0.5.22
    :580-600, inline in 0.5.20 :569-585 and 0.5.21 :576-592): the decode CUDA graph's max_bs, capped by max_running_requests //
    attn_dp_size where that is set, times one token per request without speculative decoding
    (deepep_v2_decode_graph_requests). The seed-3 10,000-case run's MISSED fuzz-3-09233: DeepSeek-V3 with
    chunked_prefill_size 4 on an RTX PRO 6000, whose default decode graph of 256 requests passes the prefill half and
    exceeds the 128 tokens. The graph's max_bs is SGLang's default by GPU memory where the host sets none
    (memory_hook.py:88-188), known where the host's facts give the memory or every GPU of the capability has the same
    default (B200 / B300: 512); where neither, the smallest default of the capability's GPUs (8 for SM120's 16 GB cards),
    which refuses nothing at the default capacity. Times the draft tokens where EAGLE-family speculative decoding
    settles them (speculative_decode_tokens, SGLang's auto triple included; its max_running_requests default caps the
    graph, deepep_v2_decode_graph_requests). Not judged (the on-host preflight checks them): other speculative
    decoding, and whatever may turn the decode graph off or resize it
    (cuda_graph_config, device other than cuda, tensor dumps, diffusion LLMs, torch_native / flex_attention)."""
    if handled_a2a_backend(ctx) != "deepep_v2" or _a2a_may_change(ctx) or \
            ctx.model.architecture not in deepep_v2_architectures(ctx):
        return
    try:
        capacity = int(ctx.env.get(DEEPEP_V2_ENV, 128))
    except (TypeError, ValueError):
        return
    mode = _choice(ctx, "disaggregation_mode", "null")
    if mode != "decode" and _deepep_v2_prefill_budget(ctx, capacity):
        return
    # enable_mis turns the decode CUDA graph off (attention_hook.py:539-546): no decode half.
    # EAGLE-family speculative decoding with its tokens per request settled (speculative_decode_tokens) verifies
    # that many tokens per graph request (max_speculative_num_draft_tokens, moe_hook.py:671-675): DeepSeek-V3 NEXTN
    # over attention DP 8 with 4096 running requests, 512 requests x 4 tokens > 1024.
    requests = deepep_v2_decode_graph_requests(ctx, speculative=True) \
        if mode != "prefill" and not mis_chunked_prefill_off(ctx) else None
    tokens = speculative_decode_tokens(ctx) or 1
    if requests is None or requests[0] * tokens <= capacity:
        return
    each = "one token each" if tokens == 1 else f"{tokens} tokens each (speculative_num_steps + 1)"
    ctx.error("moe.deepep_v2", "moe_a2a_backend",
              f"DeepEP v2 captures a decode CUDA graph of {requests[0]} requests per rank ({requests[1]}), {each}, "
              f"more than {DEEPEP_V2_ENV}={capacity}; SGLang refuses it at start-up.",
              f"set sglang_env.{DEEPEP_V2_ENV} >= {requests[0] * tokens}, or sglang_args.cuda_graph_max_bs_decode "
              f"<= {capacity // tokens} (or max_running_requests)",
              "sglang/srt/arg_groups/moe_hook.py:" + next(lines for version, lines in DEEPEP_V2_DECODE_LINES
                                                          if version is None or added_in(ctx, version)))


def _deepep_v2_prefill_budget(ctx: Context, capacity: int) -> bool:
    """The prefill half of _deepep_v2_budget: True where it refuses."""
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool)):
        return True  # not a number: SGLang's parser refuses it first; no decode figure either
    # enable_mis sets the chunk -1 first (mis_chunked_prefill_off), so the ceiling is max_prefill_tokens: the
    # resolver-differential's MISSED, DeepSeek-V3 with enable_mis over tp_size 8 (16384 / 8 = 2048 tokens per rank).
    mis = mis_chunked_prefill_off(ctx)
    if mis:
        chunk = -1
    width = attention_dp_width(ctx)
    per_dp = (min(possible_default_chunked_prefill_sizes(ctx)) if chunk is None else chunk) // width
    if per_dp > 0:
        ceiling, what = per_dp, (f"chunked_prefill_size={chunk}" if chunk is not None else
                                 f"SGLang's default chunked_prefill_size (at least {per_dp * width} on these GPUs)")
        if width > 1:
            what += f" per attention-DP rank (divided by {width})"
    else:
        ceiling = _num(ctx, "max_prefill_tokens")
        if ceiling is None:
            ceiling = ctx.schema.default("max_prefill_tokens")  # the release's default (16384 in 0.5.23)
        what = f"max_prefill_tokens={ceiling} (chunked prefill is off{': enable_mis turns it off' if mis else ''})"
    if not isinstance(ceiling, int) or isinstance(ceiling, bool) or ceiling <= 0:
        return False
    scatter = max(1, _int(ctx, "tp_size", 1) // width) if added_in(ctx, "0.5.22") else 1
    required = -(-ceiling // scatter)
    if required <= capacity:
        return False
    spread = f", scattered over {scatter} ranks," if scatter > 1 else ""
    ctx.error("moe.deepep_v2", "moe_a2a_backend",
              f"DeepEP v2 dispatches {required} prefill tokens per rank ({what}{spread}), more than "
              f"{DEEPEP_V2_ENV}={capacity}; SGLang refuses it at start-up.",
              f"set sglang_env.{DEEPEP_V2_ENV} >= {required}, or lower sglang_args.chunked_prefill_size",
              "sglang/srt/arg_groups/moe_hook.py:" + next(lines for version, lines in DEEPEP_V2_BUDGET_LINES
                                                          if version is None or added_in(ctx, version)))
    return True


@rule("moe.megamoe", since="0.5.21", shared=True, sources=(
    "sglang/srt/arg_groups/mega_moe_hook.py:27-48",
    "sglang/srt/arg_groups/mega_moe_hook.py:33",
    "sglang/srt/arg_groups/mega_moe_hook.py:43",
    "sglang/srt/arg_groups/mega_moe_hook.py:174",
    "sglang/srt/arg_groups/mega_moe_hook.py:192",
    "sglang/srt/arg_groups/mega_moe_hook.py:226",
    "sglang/srt/arg_groups/mega_moe_hook.py:241",
))
def _megamoe(ctx: Context, report: Report) -> None:
    """check_mega_moe_compat (sglang/srt/arg_groups/mega_moe_hook.py:27-48, new in 0.5.21), after
    handle_moe_runner_backend_alias (mega_moe_hook.py:259-276): moe_runner_backend megamoe is moe_a2a_backend megamoe;
    then the MegaMoE prefill token budget where the model table knows the model needs it (_megamoe_token_budget)."""
    if moe_backends(ctx)[0] != "megamoe":
        return
    via = "moe_a2a_backend" if ctx.args.get("moe_a2a_backend") == "megamoe" else "moe_runner_backend"
    overlap = [d for d in ("enable_two_batch_overlap", "enable_single_batch_overlap") if ctx.is_set(d)]
    if overlap:
        report.error(overlap[0], "moe_a2a_backend megamoe has no two-batch / single-batch overlap decomposition; SGLang "
                     f"refuses {' and '.join(overlap)} with it.", f"remove {' and '.join(ctx.var(d) for d in overlap)}",
                     "sglang/srt/arg_groups/mega_moe_hook.py:33")
    cc = ctx.compute_capability
    if cc is None or cc[0] in (9, 10):  # is_sm90 / is_sm100 match the major only
        _megamoe_token_budget(ctx, report)
        return
    report.error(via, f"{via} megamoe needs an SM90 (Hopper) or SM100-class GPU; compute capability {_cc(ctx)} has "
                 "none of its DeepGEMM kernels. SGLang refuses it at start-up.",
                 f"remove {ctx.var(via)}, or use moe_a2a_backend deepep (or none)", "sglang/srt/arg_groups/mega_moe_hook.py:43")


# MEGA_MOE_NO_FALLBACK_ARCHS (sglang/srt/arg_groups/mega_moe_hook.py:51-63; 0.5.21 / 0.5.22 the same): MoE blocks with
# no fused-MoE fallback under megamoe, which need the MegaMoE token budget whatever the quantization.
MEGA_MOE_NO_FALLBACK_ARCHS = ("DeepseekV4ForCausalLM", "InternS2PreviewForConditionalGeneration", "MellumForCausalLM",
                              "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM",
                              "Qwen3VLMoeForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                              "Qwen3_5MoeForConditionalGeneration")
MEGA_MOE_TOKENS_ENV = "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK"  # EnvInt(8192), sglang/srt/environ.py:1470


# Where each release raises validate_mega_moe_token_budget's decode / verify bound (mega_moe_hook.py; release_line).
MEGA_MOE_DECODE_LINES = {"0.5.23": "174", "0.5.22": "114", "0.5.21": "114"}


def _megamoe_decode_budget(ctx: Context, report: Report, arch: str) -> bool:
    """validate_mega_moe_token_budget's decode / verify bound (mega_moe_hook.py:376-388, before the prefill checks;
    :109-120 in 0.5.21 and 0.5.22): the largest decode CUDA graph's batch on one rank (mega_moe_decode_tokens_per_rank,
    mega_moe_hook.py:299-311: the decode graph max_bs, by GPU memory and tp_size when unset, memory_hook.py:88-188;
    0.5.23 caps it by max_running_requests per attention-DP rank aligned to the attention-TP width) times the draft
    tokens per request must fit SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK, whatever the prefill side (a PD
    decode worker, PP dynamic chunking and prefill CP included; not a PD prefill worker). Judged on the lower bound
    deepep_v2_decode_graph_requests gives (its per-rank cap, max_running_requests // attn_dp_size, is at most 0.5.23's
    aligned one; 0.5.21 / 0.5.22 have none), times speculative_decode_tokens: targeted-memory-28, Qwen3-Next at tp 8 on H100s
    (default decode graph 512) with the switch at 256, and targeted-memory-30, Qwen3.5 with NEXTN, 512 running requests x 4
    tokens over 1024. Returns whether it refused."""
    if _choice(ctx, "disaggregation_mode", "null") == "prefill" or ctx.is_set("encoder_only") or "DeepseekV4" in arch:
        return False
    raw = ctx.env.get(MEGA_MOE_TOKENS_ENV)
    try:
        capacity = 8192 if raw is None or str(raw).strip() == "" else int(str(raw).strip())
    except ValueError:
        return False
    tokens = speculative_decode_tokens(ctx)
    # 0.5.23 caps the graph per attention-DP rank by max_running_requests (mega_moe_hook.py:97-102); 0.5.21 / 0.5.22
    # read the graph's max_bs as the memory defaults left it.
    requests = deepep_v2_decode_graph_requests(ctx, speculative=True, per_rank_cap=added_in(ctx, "0.5.23")) \
        if tokens is not None else None
    if requests is None or requests[0] * tokens <= capacity:
        return False
    need = requests[0] * tokens
    each = "one token each" if tokens == 1 else f"{tokens} tokens each (speculative_num_steps + 1)"
    report.refuse(f"sglang_env.{MEGA_MOE_TOKENS_ENV}" if raw is not None else "moe_a2a_backend",
                  f"{arch} with moe_a2a_backend megamoe needs {MEGA_MOE_TOKENS_ENV} ({capacity}) to cover the largest "
                  f"decode / verify forward on one rank: a decode CUDA graph of {requests[0]} requests ({requests[1]}), "
                  f"{each}, is {need} tokens.",
                  f"set sglang_env.{MEGA_MOE_TOKENS_ENV} >= {need}, or lower {ctx.var('max_running_requests')} / "
                  f"{ctx.var('cuda_graph_max_bs_decode')}",
                  "sglang/srt/arg_groups/mega_moe_hook.py:" + release_line(ctx, MEGA_MOE_DECODE_LINES))
    return True


def _megamoe_token_budget(ctx: Context, report: Report) -> None:
    """validate_mega_moe_token_budget_for_model / validate_mega_moe_token_budget (sglang/srt/arg_groups/
    mega_moe_hook.py:78-91, :161-256; :77-90, :101-196 in 0.5.21 and 0.5.22), which the catalog left to the preflight
    because config.json's architecture decides whether it runs: the model table knows the architecture of its
    checkpoints (mega_moe_needs_token_budget, mega_moe_hook.py:66-75: MEGA_MOE_NO_FALLBACK_ARCHS, or quantization
    modelopt_fp4 / minimax_m3_nvfp4). Each rank's prefill token budget, the chunked prefill size (SGLang's default by
    GPU memory when unset, memory_hook.py:88-180; divided by attn_dp_size under attention DP, parallel_hook.py:326-332,
    and again per rank here) aligned to the attention-TP width, must fit SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK
    (8192 by default), and chunked prefill must be on (mega_moe_hook.py:192, :226, :241; :132, :166, :181 in 0.5.21 and
    0.5.22): the g10k fuzzer's MISSED, Qwen3-Next / Qwen3.5 with megamoe on a B300, whose default chunk is 16384
    (issue 36). Not judged: a PD decode worker, pipeline parallelism with dynamic chunking, prefill context parallelism,
    an encoder-only server and models the table does not know. The decode-forward bound (mega_moe_hook.py:174) goes
    first: _megamoe_decode_budget."""
    arch = str(ctx.model.architecture or "")
    quant = _choice(ctx, "quantization", "")
    if not ctx.model.known or not (arch in MEGA_MOE_NO_FALLBACK_ARCHS or quant == "modelopt_fp4" or (
            quant == "minimax_m3_nvfp4" and added_in(ctx, "0.5.23"))):
        return
    if _megamoe_decode_budget(ctx, report, arch):
        return
    if _choice(ctx, "disaggregation_mode", "null") == "decode" or ctx.is_set("encoder_only") or (
            _int(ctx, "pp_size", 1) > 1 and ctx.is_set("enable_dynamic_chunking")):
        return
    if ctx.is_set("enable_prefill_cp") or _int(ctx, "attn_cp_size", 1) != 1 or "DeepseekV4" in arch:
        return
    raw = ctx.env.get(MEGA_MOE_TOKENS_ENV)
    try:
        capacity = 8192 if raw is None or str(raw).strip() == "" else int(str(raw).strip())
    except ValueError:
        return
    lines = ("192", "226", "241") if added_in(ctx, "0.5.23") else ("132", "166", "181")
    where = "sglang/srt/arg_groups/mega_moe_hook.py:"
    if mis_chunked_prefill_off(ctx):
        # handle_multi_item_scoring sets chunked_prefill_size -1 (attention_hook.py:565-570, pipeline.py:263) before
        # this check (pipeline.py:324; the same order in 0.5.21 / 0.5.22): the resolver-differential's MISSED, enable_mis
        # with moe_runner_backend megamoe on Qwen3-Next and a written chunked_prefill_size 8192.
        report.refuse("enable_mis", f"{arch} with moe_a2a_backend megamoe needs chunked prefill: MegaMoE's per-rank token "
                      "buffer needs a strict prefill bound, and enable_mis turns chunked prefill off "
                      "(chunked_prefill_size -1).", f"remove {ctx.var('enable_mis')}, or use another MoE backend",
                      where + lines[0])
        return
    given = ctx.args.get("chunked_prefill_size")
    if given is not None:
        try:
            chunks = (int(given),)
        except (TypeError, ValueError):
            return
    else:
        chunks = possible_default_chunked_prefill_sizes(ctx)
    tp, dp = _int(ctx, "tp_size", 1), attention_dp_width(ctx)
    dp_on = attention_dp_on(ctx) and dp > 1
    base = min(chunks)
    if dp_on:
        chunks = tuple(c // dp for c in chunks)
    if given is not None and chunks[0] <= 0:
        report.refuse("chunked_prefill_size", f"{arch} with moe_a2a_backend megamoe needs chunked prefill "
                      f"(chunked_prefill_size={given}): MegaMoE's per-rank token buffer needs a strict prefill bound.",
                      f"set {ctx.var('chunked_prefill_size')} to a positive value (at most {capacity} per rank)",
                      where + lines[0])
        return
    align = max(tp // dp, 1) if dp_on else max(tp, 1)
    required = []
    for chunk in chunks:
        local = chunk // dp if dp_on else chunk
        required.append(0 if local <= 0 else -(-local // align) * align)
    if given is not None and required[0] == 0:
        report.refuse("chunked_prefill_size", f"{arch} with moe_a2a_backend megamoe needs a positive per-rank chunked "
                      f"prefill size; chunked_prefill_size={given} over attn_dp_size={dp} leaves none.",
                      f"raise {ctx.var('chunked_prefill_size')} to at least {dp * dp}", where + lines[1])
        return
    least = min(required)
    if least <= capacity:
        return
    what = f"chunked_prefill_size={given}" if given is not None else \
        f"SGLang's default chunked_prefill_size for this GPU ({base})"
    report.refuse("chunked_prefill_size", f"{arch} with moe_a2a_backend megamoe needs {MEGA_MOE_TOKENS_ENV} "
                  f"({capacity}) to cover each rank's prefill token budget: {what} gives {least} tokens per rank"
                  f"{f' over attn_dp_size={dp}' if dp_on else ''}{f', aligned to tp_size={tp}' if align > 1 else ''}.",
                  f"set sglang_env.{MEGA_MOE_TOKENS_ENV} >= {least}, or lower {ctx.var('chunked_prefill_size')} "
                  f"until each rank's budget fits", where + lines[2])


@rule("moe.megamoe", until="0.5.21", shared=True, ids=("{family}.moe", "arch.moe"),
      stricter=("0.5.20's mega_moe_hook.py only maps the alias: its mega-MoE path builds the experts' weights for "
                "DeepGEMM's SM90 / SM100 kernels and fails in the first forward pass on any other GPU"))
def _megamoe_gpu(ctx: Context, report: Report) -> None:
    """Stricter than 0.5.20, whose mega_moe_hook.py only maps the alias: its mega-MoE path builds the experts'
    weights for DeepGEMM's SM90 / SM100 kernels (UTCCP-transposed scales, layers/moe/mega_moe.py:353-400) and
    fails in the first forward on any other GPU; 0.5.21 made that a start-up check (rule _megamoe)."""
    cc = ctx.compute_capability
    if moe_backends(ctx)[0] != "megamoe" or cc is None or cc[0] in (9, 10):  # is_sm90 / is_sm100 match the major only
        return
    via = "moe_a2a_backend" if ctx.args.get("moe_a2a_backend") == "megamoe" else "moe_runner_backend"
    profile = arch_profile(ctx)
    ctx.error(f"{profile.family}.moe" if profile else "arch.moe", via,
              f"{via} megamoe runs DeepGEMM's mega-MoE kernels, which exist for SM90 (Hopper) and SM100-class GPUs "
              f"only; on compute capability {_cc(ctx)} SGLang {ctx.version} starts and then fails in the first "
              "forward pass (SGLang 0.5.21 and later refuse it at start-up).",
              f"remove {ctx.var(via)}, or use moe_a2a_backend deepep (or none)", "sglang/srt/layers/moe/mega_moe.py:353-400")


# _a2a_ep_size (sglang/srt/arg_groups/overrides.py:1578-1590, :1609-1620): these all-to-all backends span the TP group,
# so SGLang sets ep_size to tp_size.
A2A_EP_SPANNING = ("megamoe", "deepep", "deepep_v2", "mooncake", "nixl", "ascend_fuseep", "flashinfer",
                   "flashinfer_megamoe", "mori", "pplx")


def resolved_ep_size(ctx: Context) -> int | None:
    """The ep_size SGLang resolves to (resolved_view(server_args).ep_size), or None where a model's override may set it
    from what only its checkpoint tells (DeepSeek's CP overrides, deepseek_v2.py:118, :202; DeepSeek-V4's hook;
    MiniMax-M3's megamoe, minimax_m3.py:112) or the model is not in the table: DWDP sets it to dwdp_size
    (parallel_hook.py:486-489), an EP-spanning all-to-all backend to tp_size (overrides.py:1609-1620; the backend as
    handled_a2a_backend gives it, waterfill's deepep first, :1596-1606), else it is the host's. DeepSeek's MLA prefill
    CP and a DSA-by-override model's zigzag prefill CP set deepep and ep_size = tp_size themselves, whatever was written
    (deepseek_v2.py:202, :118; 0.5.22 :203 / :118, 0.5.21 :165 / :92, 0.5.20 :172 / :99; mla_prefill_cp_deepep,
    dsa_prefill_cp_deepep): the seed-9 10,000-case run's MISSED fuzz-9-08070, enable_eplb with ep_size 16 under MLA
    prefill CP at tp_size 1 (parallel_hook.py:791)."""
    arch = str(ctx.model.architecture or "")
    if not ctx.model.known or "DeepseekV4" in arch or "MiniMaxM3" in arch:
        return None
    tp, dwdp = _int(ctx, "tp_size", 1), _int(ctx, "dwdp_size", 1)
    if mla_prefill_cp_deepep(ctx) or dsa_prefill_cp_deepep(ctx):
        return None if dwdp > 1 else tp  # with DWDP too, which of the two writes last is not modelled
    if _a2a_may_change(ctx):
        return None
    if dwdp > 1:
        return dwdp
    return tp if handled_a2a_backend(ctx) in A2A_EP_SPANNING else _int(ctx, "ep_size", 1)


@rule("server.moe", shared=True, sources=(
    "sglang/srt/arg_groups/parallel_hook.py:791",
))
def _eplb(ctx: Context, report: Report) -> None:
    """EPLB (enable_eplb) outside an elastic-EP scale-up needs expert parallelism: handle_eplb_and_dispatch asserts the
    resolved ep_size > 1 (parallel_hook.py:790-791; :729-730 in 0.5.22, :657-658 in 0.5.21, :583-584 in 0.5.20)."""
    if not ctx.is_set("enable_eplb") or _choice(ctx, "ep_join_mode", "") == "scale":
        return
    ep = resolved_ep_size(ctx)
    if ep is not None and ep <= 1:
        cp = mla_prefill_cp_deepep(ctx) or dsa_prefill_cp_deepep(ctx)
        report.refuse("enable_eplb", f"enable_eplb balances experts across expert-parallel ranks, and ep_size resolves to {ep} "
                      "here (" + ("DeepSeek's prefill context parallelism sets it to tp_size" if cp else
                                  "no EP-spanning all-to-all backend sets it to tp_size") + ").",
                      f"set {ctx.var('ep_size')} > 1 (or an all-to-all backend such as deepep with tp_size > 1), or remove "
                      f"{ctx.var('enable_eplb')}", "sglang/srt/arg_groups/parallel_hook.py:791")


# The model table's architectures whose model overrides put no MoE runner in for an unset one under moe_a2a_backend
# flashinfer: qwen3_moe.py:80-86 and overrides.py:810-823 (DeepSeek) pick flashinfer_trtllm only with moe_a2a_backend
# none, qwen3_moe.py:72-73's marlin (W4A16 NVFP4 MoE layers) is outside FLASHINFER_A2A_RUNNERS too, deepseek_v2.py:90-91
# is HYV4's, Llama, Grok and dense Qwen3 have none. GptOss's (gpt_oss.py:64-117) may pick deep_gemm: not judged.
_A2A_AUTO_STAYS = tuple(a for a in ARCHITECTURES if a != "GptOssForCausalLM")


def _flashinfer_a2a_auto_runner(ctx: Context) -> str | None:
    """An unset moe_runner_backend as handle_a2a_moe's FlashInfer A2A assert reads it (resolved_view, moe_hook.py:531;
    0.5.22 :455, 0.5.21 :448, 0.5.20 :450): _moe_runner_backend_quant_constraints puts flashinfer_trtllm in under
    quantization mxfp8 or nvfp4_online and flashinfer_cutlass under modelopt_fp4 on SM120 / SM110
    (overrides.py:1462-1518, resolve.modelopt_fp4_moe_runner); the checkpoint's quantization SGLang fills in does not
    count (only on SM100, overrides.py:768-808 and qwen3_moe.py:44-51, where modelopt_fp4 maps to nothing). Else, for the
    table's architectures (_A2A_AUTO_STAYS), it stays auto and the assert refuses it: the resolver-differential's
    MISSED, Qwen3-Next-80B-A3B with moe_a2a_backend flashinfer and no runner on a B200 and an RTX PRO 6000 (probed for
    every quantization choice). None where not certain (another architecture, the GPU not known under modelopt_fp4)."""
    quant = _choice(ctx, "quantization", "")
    if quant in ("mxfp8", "nvfp4_online"):
        return "flashinfer_trtllm"
    if quant == "modelopt_fp4" and ctx.compute_capability is None:
        return None
    fp4 = modelopt_fp4_moe_runner(ctx)
    if fp4 is not None:
        return fp4
    return "auto" if ctx.model.architecture in _A2A_AUTO_STAYS else None


# Where each release raises handle_flashinfer_a2a_dispatch_type's quantization errors (moe_hook.py; release_line).
A2A_DISPATCH_MXFP8_LINES = {"0.5.23": "193", "0.5.22": "165", "0.5.21": "160", "0.5.20": "156"}
A2A_DISPATCH_NVFP4_LINES = {"0.5.23": "202", "0.5.22": "174", "0.5.21": "169", "0.5.20": "165"}


def _a2a_dispatch_quantization(ctx: Context) -> str | None:
    """cfg.quantization as handle_flashinfer_a2a_dispatch_type compares it (moe_hook.py:184-202; 0.5.20 :142-167):
    the host's --quantization (unquant: none, serving_hook.py:699-705), else none, except what a model override fills
    in from the checkpoint first (moe_kernel_quantization: Qwen3.5-397B-A17B-NVFP4's modelopt_fp4 and DeepSeek-V3's fp8
    on SM100 only), UNCERTAIN where that is not certain. Not the checkpoint's own format: targeted-lowp-52, Qwen3.5-NVFP4
    with flashinfer_a2a_dispatch_type nvfp4 and no quantization on an RTX PRO 6000 (12.0), is refused (moe_hook.py:202),
    the same on a B200 accepted (the SM100 fill)."""
    quant = ctx.args.get("quantization")
    if quant is not None and quant is not False:
        return None if str(quant) == "unquant" else str(quant)
    return moe_kernel_quantization(ctx)


FLASHINFER_A2A_ENV = "SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
# Where each release raises validate_flashinfer_a2a_token_budget's workspace error (moe_hook.py; release_line).
FLASHINFER_A2A_BUDGET_LINES = {"0.5.23": "766-774", "0.5.22": "690-698"}
# Architectures whose default breakable prefill CUDA graph no model-dependent cascade turns off
# (disable_breakable_cudagraph_if_incompatible, cuda_graph_hook.py:170-255: not KDA, not DeepSeek-V4, multimodal only
# where multimodal_breakable_cuda_graph_supported_model_archs lists it, configs/model_config.py:2501-2513; not the
# DeepSeek-V3 trtllm_mla default, cuda_graph_hook.py:279-312).
_PREFILL_GRAPH_KEPT_ARCHS = ("Qwen3_5MoeForConditionalGeneration", "Qwen3NextForCausalLM", "Qwen3MoeForCausalLM")
# What else may turn the prefill CUDA graph off before the budget reads it: KV-cache sharding (kv_shard_hook.py:327-334),
# TBO / decode CP / attention CP (cuda_graph_hook.py:203-221), elastic EP, unified memory's FULL fallback
# (kv_cache_hook.py:701-715), LayerNorm SP, and the graph flags written in other forms; besides what turns every graph
# off (resolve.cuda_graphs_unsettled: tensor dumps, diffusion LLMs, the device, torch_native / flex_attention).
_PREFILL_GRAPH_UNSETTLED = ("enable_kv_cache_sharding", "enable_two_batch_overlap", "enable_prefill_cp", "ep_join_mode",
                            "enable_unified_memory", "enable_layernorm_sp", "enable_mis")


def _prefill_graph_max_bs(ctx: Context) -> tuple[int, str] | None:
    """(max_bs, how) of a prefill CUDA graph SGLang certainly captures with an explicit max_bs, which neither the
    memory defaults (memory_hook.py:233-263) nor attention DP's re-clamp to the per-rank chunk (parallel_hook.py:337-360,
    skipped for a locked max_bs) resize: cuda_graph_config's prefill.max_bs, else cuda_graph_max_bs_prefill
    (parse_cuda_graph_config, cuda_graph_hook.py:72-94). Kept where the prefill backend is written breakable / full
    (locked: the auto-disable cascades skip it, cuda_graph_hook.py:143, 287, 569), or left at the CUDA default
    breakable with pp_size 1 (PP turns the default off, cuda_graph_hook.py:150-162) on an architecture of
    _PREFILL_GRAPH_KEPT_ARCHS. None otherwise: the graph may be off, or its max_bs SGLang's own."""
    config = _json_arg(ctx, "cuda_graph_config")
    phase = config.get("prefill") if isinstance(config, dict) else None
    phase = phase if isinstance(phase, dict) else {}
    size = phase["max_bs"] if "max_bs" in phase else ctx.args.get("cuda_graph_max_bs_prefill")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return None
    if any(_given(ctx, d) for d in _PREFILL_GRAPH_UNSETTLED) or cuda_graphs_unsettled(ctx) or \
            _int(ctx, "dcp_size", 1) > 1 or _int(ctx, "attn_cp_size", 1) > 1:
        return None
    backend = phase["backend"] if "backend" in phase else ctx.args.get("cuda_graph_backend_prefill")
    if backend is None:
        if ctx.is_set("disable_cuda_graph") or ctx.is_set("disable_prefill_cuda_graph") or \
                _int(ctx, "pp_size", 1) > 1 or ctx.model.architecture not in _PREFILL_GRAPH_KEPT_ARCHS:
            return None
    elif backend not in ("breakable", "full"):
        return None
    how = "cuda_graph_config prefill.max_bs" if "max_bs" in phase else "cuda_graph_max_bs_prefill"
    return size, f"{how}={size}"


def _flashinfer_a2a_budget(ctx: Context, report: Report) -> None:
    """validate_flashinfer_a2a_token_budget's workspace check (moe_hook.py:749-774, pipeline.py:318; 0.5.22 :673-698;
    0.5.20 / 0.5.21 check a CuteDSL-only budget instead, validate_cutedsl_a2a_token_budget, not judged here). Required:
    the per-rank prefill buffer (max_prefill_buffer_tokens, overrides.py:1865-1884: chunked_prefill_size after attention
    DP divides it, chunk_dp_width; not on a PD decode server), a prefill CUDA graph's max_bs, and the largest decode
    CUDA graph's requests times tokens per request (_decode_graph_dispatch_tokens_per_rank, moe_hook.py:656-676; not on
    a PD prefill server). Capacity (flashinfer_a2a_max_dispatch_tokens_per_rank, overrides.py:1887-1895):
    SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK when set, else max(prefill buffer, 4096), which only the decode
    graph can exceed. Judged on lower bounds of what is required (the least default chunk of the GPUs, the decode graph
    as deepep_v2_decode_graph_requests sizes it, times the draft tokens where EAGLE-family speculative decoding settles
    them (speculative_decode_tokens): nothing under other speculative decoding or whatever may turn the graph off or
    resize it; a prefill graph only with an explicit max_bs SGLang certainly keeps, _prefill_graph_max_bs; with the
    switch set, PP dynamic chunking's grown buffer) and, with the switch unset, an upper bound of the prefill buffer
    (the largest default chunk; nothing under KV-cache sharding's rounding or PP dynamic chunking)."""
    raw = ctx.env.get(FLASHINFER_A2A_ENV)
    if isinstance(raw, bool) or mis_chunked_prefill_off(ctx):
        return
    try:
        capacity = None if raw is None else int(raw)
    except (TypeError, ValueError):
        return
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool)):
        return
    sizes = (chunk,) if chunk is not None else possible_default_chunked_prefill_sizes(ctx)
    width = chunk_dp_width(ctx)
    low, high = min(sizes) // width, max(sizes) // width
    if low <= 0:
        return
    mode = _choice(ctx, "disaggregation_mode", "null")
    # Under EAGLE-family speculative decoding with its draft tokens settled, each graph request verifies
    # speculative_num_draft_tokens tokens (max_speculative_num_draft_tokens, moe_hook.py:672-676): targeted-memory-38, Qwen3.5
    # with 2048 running requests over attention DP 4 and 9 draft tokens on an RTX PRO 6000 (512 x 9 > 4096).
    requests = deepep_v2_decode_graph_requests(ctx, speculative=True) if mode != "prefill" else None
    tokens = speculative_decode_tokens(ctx) or 1
    graph = requests[0] * tokens if requests is not None else 0
    prefill = low if mode != "decode" else 0
    dynamic = _int(ctx, "pp_size", 1) > 1 and ctx.is_set("enable_dynamic_chunking")
    grown = None
    if prefill and dynamic:
        # PP dynamic chunking grows the ceiling to max(chunk, max_prefill_tokens, 1.25 x chunk) (overrides.py:1877-1879;
        # 0.5.22 :1825-1826): Qwen3.5 at attention DP 4 and pp_size 2 with the switch at 4096 needs 16384.
        most = _num(ctx, "max_prefill_tokens")
        most = ctx.schema.default("max_prefill_tokens") if most is None else most
        grown = max(low, -(-low * 5 // 4), most if isinstance(most, int) and not isinstance(most, bool) else 0)
        prefill = grown
    # An explicit prefill CUDA graph max_bs SGLang keeps counts as it stands (moe_hook.py:743-744; 0.5.22 :666-668):
    # Qwen3.5 over attention DP 4 on an RTX PRO 6000 with cuda_graph_max_bs_prefill 6144 needs 6144 > 4096.
    captured = _prefill_graph_max_bs(ctx) if mode != "decode" else None
    pgraph = captured[0] if captured is not None else 0
    if capacity is None:
        if kv_shard_rounds_chunk(ctx) or dynamic:
            return
        need, limit = max(graph, pgraph), max(high, 4096)
        why = f"{FLASHINFER_A2A_ENV} is unset, so the workspace holds max(per-rank prefill chunk, 4096) = {limit} tokens"
    else:
        need, limit = max(prefill, graph, pgraph), capacity
        why = f"{FLASHINFER_A2A_ENV}={capacity}"
    if need <= limit:
        return
    each = "one token each" if tokens == 1 else f"{tokens} tokens each (speculative_num_steps + 1)"
    what = (f"a decode CUDA graph of {requests[0]} requests per rank ({requests[1]}), {each}" if requests is not None
            and graph == need else f"a prefill CUDA graph of {pgraph} tokens ({captured[1]})" if captured is not None
            and pgraph == need else f"a prefill buffer of {prefill} tokens per rank (PP dynamic chunking: the largest "
            f"of the per-rank chunk {low}, 1.25 times it and max_prefill_tokens)" if grown is not None and
            prefill == need else f"a prefill chunk of {prefill} tokens per rank (chunked_prefill_size"
            f"{'' if chunk is not None else ' by default'}{f' over attention-DP width {width}' if width > 1 else ''})")
    report.refuse(f"sglang_env.{FLASHINFER_A2A_ENV}" if capacity is not None else "moe_a2a_backend",
                  f"FlashInfer MoE A2A dispatches up to {need} tokens per rank ({what}), more than its workspace: "
                  f"{why}.", f"set sglang_env.{FLASHINFER_A2A_ENV} >= {need} (or unset it), or lower "
                  f"{ctx.var('chunked_prefill_size')} / {ctx.var('cuda_graph_max_bs_decode')}",
                  "sglang/srt/arg_groups/moe_hook.py:" + release_line(ctx, FLASHINFER_A2A_BUDGET_LINES))


# Where 0.5.20 / 0.5.21 raise validate_cutedsl_a2a_token_budget's error (moe_hook.py; release_line).
CUTEDSL_A2A_BUDGET_LINES = {"0.5.21": "649-667", "0.5.20": "651-669"}


def _cutedsl_a2a_budget(ctx: Context, report: Report) -> None:
    """0.5.20 / 0.5.21's FlashInfer A2A budget, for the CuteDSL runner only (validate_cutedsl_a2a_token_budget,
    moe_hook.py:630-669 in 0.5.20, :628-667 in 0.5.21; 0.5.22 replaced it with _flashinfer_a2a_budget's check): with
    moe_a2a_backend flashinfer, moe_runner_backend flashinfer_cutedsl, max_prefill_tokens > 0 and no PD decode role,
    SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK (1024 when unset or 0) times the resolved ep_size must cover the
    largest CuteDSL forward (cutedsl_moe_max_num_tokens, overrides.py:1853-1872 in 0.5.20): at least max_prefill_tokens
    (16384 by default), which is what is judged here (the piecewise prefill graph and the decode graph only add to it).
    With the switch unset, 8 GPUs of expert parallelism cover 8,192 tokens: every such launch on one 8-GPU host was
    refused unless the switch is set (probed on DeepSeek-V3 NVFP4-style arguments, attention DP 8, a B200)."""
    if _choice(ctx, "disaggregation_mode", "null") == "decode":
        return
    prefill = ctx.args.get("max_prefill_tokens") if _given(ctx, "max_prefill_tokens") else 16384
    ep = resolved_ep_size(ctx)
    raw = ctx.env.get(FLASHINFER_A2A_ENV)
    if not isinstance(prefill, int) or isinstance(prefill, bool) or prefill <= 0 or ep is None or isinstance(raw, bool):
        return
    try:
        per_rank = (int(raw) if raw is not None else 0) or 1024
    except (TypeError, ValueError):
        return
    if per_rank * ep >= prefill:
        return
    need, default = -(-prefill // ep), "" if _given(ctx, "max_prefill_tokens") else ", the default"
    report.refuse(f"sglang_env.{FLASHINFER_A2A_ENV}" if raw is not None else "moe_a2a_backend",
                  f"SGLang {ctx.version} sizes the FlashInfer A2A workspace of moe_runner_backend flashinfer_cutedsl at "
                  f"{FLASHINFER_A2A_ENV} ({per_rank}{'' if raw is not None else ', unset'}) x ep_size ({ep}) = "
                  f"{per_rank * ep} tokens, less than max_prefill_tokens ({prefill}{default}).",
                  f"set sglang_env.{FLASHINFER_A2A_ENV} >= {need}, or lower {ctx.var('max_prefill_tokens')} to <= {per_rank * ep}",
                  "sglang/srt/arg_groups/moe_hook.py:" + release_line(ctx, CUTEDSL_A2A_BUDGET_LINES))


def _qwen3_w4a16_moe_refused(ctx: Context, a2a: str, w4a16: bool) -> bool:
    """_qwen3_moe_family_overrides' W4A16 gate (model_overrides/qwen3_moe.py:51-70; 0.5.20 :54-73): on SM100 (is_sm100,
    by the major) the Qwen3 MoE family with quantization modelopt_mixed (the host's, or filled in from a ModelOpt
    MIXED_PRECISION quantization_config, qwen3_moe.py:44-50 after model_config.py:1727-1741) whose ``*.experts`` layers
    are W4A16_NVFP4 (_mixed_precision_moe_quant_algos, :17-26) refuses a runner other than auto / marlin, except
    flashinfer_cutedsl with moe_a2a_backend none / flashinfer and SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16 on. Only the
    quantization_config json_model_override_args merges in tells the experts' formats (the model table's checkpoints
    have none). SGLang 0.5.23 probed: Qwen3.5 with such an override and flashinfer_trtllm on a B200 refused, on an RTX
    PRO 6000 accepted; flashinfer_cutedsl refused without the switch or under deepep, accepted with it."""
    cc = ctx.compute_capability
    if cc is None or cc[0] != 10 or certain_architecture(ctx) not in QWEN3_MOE_FAMILY_ARCHS:
        return False
    override = _json_arg(ctx, "json_model_override_args")
    given = override.get("quantization_config") if isinstance(override, dict) else None
    layers = given.get("quantized_layers") if isinstance(given, dict) else None
    if not isinstance(layers, dict) or "W4A16_NVFP4" not in {
            str(info.get("quant_algo", "")).upper() for name, info in layers.items()
            if ".experts" in str(name) and isinstance(info, dict)}:
        return False
    quant = _choice(ctx, "quantization", "")
    if not quant:
        mixed = given.get("quant_method") == "modelopt" and str(given.get("quant_algo", "")).upper() == "MIXED_PRECISION"
        quant = "modelopt_mixed" if mixed else ""
    if quant != "modelopt_mixed":
        return False
    runner = _choice(ctx, "moe_runner_backend", "auto")
    cutedsl = runner == "flashinfer_cutedsl" and a2a in ("none", "flashinfer") and w4a16
    return runner not in ("auto", "marlin") and not cutedsl


@rule("server.moe", shared=True, sources=(
    "sglang/srt/arg_groups/moe_hook.py:766",
    "sglang/srt/arg_groups/overrides.py:1471",
    "sglang/srt/arg_groups/overrides.py:1484-1512",
    "sglang/srt/arg_groups/moe_hook.py:635",
    "sglang/srt/arg_groups/parallel_hook.py:783",
    "sglang/srt/arg_groups/moe_hook.py:756",
    "sglang/srt/arg_groups/moe_hook.py:124",
    "sglang/srt/arg_groups/moe_hook.py:138",
    "sglang/srt/arg_groups/moe_hook.py:202",
))
def _moe_kernels(ctx: Context, report: Report) -> None:
    """handle_moe_kernel_config (among its asserts the TRT-LLM runners' quantizations, moe_hook.py:123-147, :87-111 in
    0.5.20, :91-115 in 0.5.21, :96-120 in 0.5.22: the seed-0 fuzzer's MISSED, flashinfer_trtllm_routed with quantization
    gguf, issue 36), handle_a2a_moe's FlashInfer A2A checks, the nvfp4_online runner constraint,
    handle_eplb_and_dispatch and the DeepEP v2 draft check (moe_hook.py, overrides.py, parallel_hook.py), on the
    explicit values. Where DeepSeek's context-parallel overrides may change the a2a backend and ep_size first
    (_a2a_may_change), only the runner / quantization pairs (moe_hook.py:81, :98, :124, :138)."""
    runner, a2a = moe_backends(ctx)[1], override_a2a_backend(ctx)
    tp, ep, attn_dp = _int(ctx, "tp_size", 1), _int(ctx, "ep_size", 1), attention_dp_width(ctx)
    if dwdp_on(ctx):
        # handle_dwdp sets ep_size = dwdp_size and moe_a2a_backend none (override_a2a_backend; parallel_hook.py:485-499,
        # pipeline.py:189) before handle_moe_kernel_config (:294) reads them. The DWDP probes: cutlass on DeepSeek-V3's
        # FP8 with dwdp_size = tp_size 8 on a B200 refused (moe_hook.py:161, a MISSED); flashinfer_cutlass /
        # flashinfer_cutedsl with ep_size 2, flashinfer_cutedsl with moe_a2a_backend mooncake accepted (false alarms).
        ep = _int(ctx, "dwdp_size", 1)
    quant = _choice(ctx, "quantization", "")
    w4a16 = env_true(ctx.env, "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16")
    cc = ctx.compute_capability
    # The runner as handle_moe_kernel_config and handle_a2a_moe read it (resolve.resolved_moe_runner; as written
    # where it is not certain). MXFP8 replaces a runner it does not run with its default (resolve.mxfp8_moe_runner):
    # triton there is flashinfer_trtllm. An unset runner under modelopt_fp4 on SM120 / SM110 is flashinfer_cutlass
    # (resolve.modelopt_fp4_moe_runner) before handle_moe_kernel_config's ep_size assert reads it (moe_hook.py:89, :56
    # in 0.5.20, :60 in 0.5.21, :65 in 0.5.22): the g10k fuzzer's MISSED, ep_size 6 on an RTX 5090 (issue 36). The SM100
    # model overrides' flashinfer_trtllm for Qwen3-Next, Qwen3.5 and DeepSeek-V3 (pipeline.py:225) passes every check
    # below (they pick it only under the quantizations it runs, with no A2A backend): verdict-neutral, read for
    # fidelity (the resolver differential's 411 cases, fuzz-5-00257).
    runner = resolved_moe_runner(ctx) or runner
    if quant == "nvfp4_online" and (cc is None or cc[0] == 10) and runner not in ("auto", *NVFP4_ONLINE_RUNNERS) and not (
            added_in(ctx, "0.5.23") and runner == "flashinfer_megamoe" and a2a == "flashinfer_megamoe" and w4a16):
        report.refuse("moe_runner_backend", f"quantization nvfp4_online runs the MoE with flashinfer_trtllm, "
                      f"flashinfer_trtllm_routed or flashinfer_cutedsl only, not moe_runner_backend {runner}.",
                      f"set {ctx.var('moe_runner_backend')}: auto (or one of those)", "sglang/srt/arg_groups/overrides.py:1471")
    if _qwen3_w4a16_moe_refused(ctx, a2a, w4a16):
        report.refuse("moe_runner_backend", f"the quantization_config in json_model_override_args gives the experts "
                      f"W4A16_NVFP4 under modelopt_mixed, which on compute capability {cc[0]}.{cc[1]} runs the MoE with "
                      f"marlin, or flashinfer_cutedsl with moe_a2a_backend none / flashinfer and "
                      f"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1, not moe_runner_backend "
                      f"{_choice(ctx, 'moe_runner_backend', 'auto')} (moe_a2a_backend {a2a}).",
                      f"set {ctx.var('moe_runner_backend')}: marlin (or leave it auto)",
                      "sglang/srt/arg_groups/model_overrides/qwen3_moe.py:"
                      + release_line(ctx, {"0.5.20": "70", "0.5.21": "67", "0.5.22": "67", "0.5.23": "67"}))
    # DeepSeek's context-parallel overrides may write moe_a2a_backend deepep and ep_size = tp_size first
    # (_a2a_may_change): the checks that read those two wait for them. The runner / quantization pairs do not (the
    # overrides write neither; the checkpoint's fill, overrides.py:787-809, reads no backend): the seed-19 10,000-case
    # run's MISSED fuzz-19-03611, flashinfer_cutlass on DeepSeek-V3's FP8 with prefill CP on a B200 (moe_hook.py:81).
    settled = not _a2a_may_change(ctx)
    kernel_quant = moe_kernel_quantization(ctx)
    for bad, dest, why, line in (
        (runner == "flashinfer_cutlass" and kernel_quant not in (UNCERTAIN, *CUTLASS_MOE_QUANT), "quantization",
         f"moe_runner_backend flashinfer_cutlass runs quantization modelopt_fp4, modelopt_fp8, modelopt_mixed or none "
         f"(bf16), not {kernel_quant}", 81),
        (runner == "flashinfer_cutedsl" and kernel_quant not in (UNCERTAIN, *CUTEDSL_MOE_QUANT)
         and ctx.model.quant_method is not None and "mixed" not in ctx.model.quant_method, "quantization",
         f"moe_runner_backend flashinfer_cutedsl runs quantization modelopt_fp4, modelopt_mixed or nvfp4_online (or a "
         f"hybrid NVFP4 checkpoint), not {kernel_quant or 'none'}", 98),
        (settled and runner in ("flashinfer_cutlass", "flashinfer_cutedsl") and ep not in (1, tp), "ep_size",
         f"moe_runner_backend {runner} needs ep_size 1 or ep_size == tp_size ({tp}), not {ep}", 89 if runner ==
         "flashinfer_cutlass" else 102),
        (settled and runner == "flashinfer_cutedsl" and a2a not in ("none", "deepep", "flashinfer"), "moe_a2a_backend",
         f"moe_runner_backend flashinfer_cutedsl works with moe_a2a_backend none, deepep or flashinfer, not {a2a}", 106),
        (settled and runner == "flashinfer_cutedsl" and a2a == "deepep" and (
            quant == "nvfp4_online" or env_true(ctx.env, "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION")),
         "moe_a2a_backend", "flashinfer_cutedsl with per-token NVFP4 activation needs moe_a2a_backend none or flashinfer, "
         "not deepep", 118),
        (runner in ("flashinfer_trtllm", "experimental_sgl_trtllm") and kernel_quant not in (UNCERTAIN, *TRTLLM_MOE_QUANT),
         "quantization", f"moe_runner_backend {runner} runs quantization {', '.join(q or 'none' for q in TRTLLM_MOE_QUANT)} "
         f"(none: bf16), not {kernel_quant}", 124),
        (runner == "flashinfer_trtllm_routed" and kernel_quant not in (UNCERTAIN, *trtllm_routed_quant(ctx)), "quantization",
         f"moe_runner_backend flashinfer_trtllm_routed runs quantization "
         f"{', '.join(q or 'none' for q in trtllm_routed_quant(ctx))} (none: bf16), not {kernel_quant}", 138),
        # The host's quantization, or the checkpoint's fp8 a model override fills in first (checkpoint_fp8_filled;
        # moe_hook.py:155-163, 0.5.20 :118-126, 0.5.21 :122-130, 0.5.22 :127-135): the seed-3 10,000-case run's MISSED
        # fuzz-3-00403, DeepSeek-V3 with cutlass and ep_size 2048 on a B200.
        (settled and runner == "cutlass" and (quant or ("fp8" if checkpoint_fp8_filled(ctx) else "")) in ("fp8", "mxfp8")
         and ep != 1,
         "ep_size", f"the FP8 / MXFP8 cutlass MoE runs with ep_size 1 only (ep_size={ep}"
         f"{'' if quant else '; the checkpoint is FP8, which SGLang fills in as quantization fp8 on this GPU'})", 161),
    ):
        if bad:
            report.refuse(dest, why + ".", f"fix {ctx.var(dest)}, or use another moe_runner_backend", f"{_MOEH}:{line}")
            break
    if not settled:
        return
    dispatch = ctx.args.get("flashinfer_a2a_dispatch_type")
    # handle_moe_kernel_config's checks above read the backend before handle_a2a_moe; those below after it, where
    # enable_waterfill has made it deepep and ascend_tp none (handled_a2a_backend): waterfill with flashinfer skips the
    # FlashInfer A2A checks, with none it passes ep_dispatch_algorithm static; ascend_tp then refuses static.
    a2a = handled_a2a_backend(ctx)
    if a2a == "flashinfer":
        dispatch_quant = _a2a_dispatch_quantization(ctx)
        # An NVFP4 dispatch also runs with a hybrid FP8+NVFP4 checkpoint's nvfp4_moe_meta (model_config.py:775-788:
        # quant_algo MIXED_PRECISION with moe_quant_algo NVFP4), which the model table does not record: a model not
        # known, or a mixed one, is not accused.
        nvfp4_meta_possible = not ctx.model.known or "mixed" in str(ctx.model.quant_method or "")
        for bad, dest, why, line in (
            # the layernorm-SP topology is accepted from 0.5.23 (0.5.22 moe_hook.py:405-411)
            (not (attention_dp_on(ctx) and attn_dp == tp) and not (added_in(ctx, "0.5.23") and ctx.is_set("enable_layernorm_sp")),
             "attn_dp_size",
             f"moe_a2a_backend flashinfer needs attn_dp_size equal to tp_size ({tp}), not {attn_dp}", 475),
            (w4a16 and runner == "flashinfer_cutedsl" and env_true(ctx.env, "SGLANG_MOE_NVFP4_DISPATCH"),
             "sglang_env.SGLANG_MOE_NVFP4_DISPATCH", "CuTe DSL NVFP4 W4A16 (SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16) needs "
             "BF16 dispatch, so SGLANG_MOE_NVFP4_DISPATCH must be unset", 494),
            (w4a16 and runner == "flashinfer_cutedsl" and dispatch in ("auto", "nvfp4"), "flashinfer_a2a_dispatch_type",
             f"CuTe DSL NVFP4 W4A16 needs flashinfer_a2a_dispatch_type bf16, not {dispatch}", 527),
            (dispatch == "mxfp8" and dispatch_quant not in (UNCERTAIN, "mxfp8"), "flashinfer_a2a_dispatch_type",
             f"flashinfer_a2a_dispatch_type mxfp8 needs quantization mxfp8 (SGLang reads {dispatch_quant or 'none'})",
             release_line(ctx, A2A_DISPATCH_MXFP8_LINES)),
            (dispatch == "nvfp4" and dispatch_quant not in (UNCERTAIN, "modelopt_fp4") and not nvfp4_meta_possible,
             "flashinfer_a2a_dispatch_type", "flashinfer_a2a_dispatch_type nvfp4 needs quantization modelopt_fp4 (SGLang "
             f"reads {dispatch_quant or 'none'}: the checkpoint's NVFP4 counts only where SGLang fills it in, on SM100)",
             release_line(ctx, A2A_DISPATCH_NVFP4_LINES)),
            (dispatch == "mxfp8" and runner not in ("auto", "flashinfer_trtllm", "flashinfer_trtllm_routed"),
             "moe_runner_backend", f"flashinfer_a2a_dispatch_type mxfp8 needs moe_runner_backend flashinfer_trtllm_routed, "
             f"not {runner}", 197),
            (runner != "auto" and runner not in FLASHINFER_A2A_RUNNERS, "moe_runner_backend",
             f"moe_a2a_backend flashinfer works with moe_runner_backend {', '.join(FLASHINFER_A2A_RUNNERS)} only, not "
             f"{runner}", 531),
            (runner == "auto" and _flashinfer_a2a_auto_runner(ctx) == "auto", "moe_runner_backend",
             f"moe_a2a_backend flashinfer works with moe_runner_backend {', '.join(FLASHINFER_A2A_RUNNERS)} only, and "
             f"an unset moe_runner_backend stays auto here (SGLang picks none of them for it first)", 531),
        ):
            if bad:
                report.refuse(dest, why + ".", f"fix {dest if dest.startswith('sglang_env') else ctx.var(dest)}, or use another "
                              "moe_a2a_backend", f"{_MOEH}:{line}")
                break
        chunk = _num(ctx, "chunked_prefill_size")
        if added_in(ctx, "0.5.22") and _choice(ctx, "disaggregation_mode", "null") != "decode" and (
                (chunk is not None and chunk <= 0) or ctx.is_set("enable_mis")):
            mis = " (enable_mis turns it off)" if ctx.is_set("enable_mis") else ""
            report.refuse("chunked_prefill_size", "moe_a2a_backend flashinfer needs chunked prefill (a fixed-size dispatch "
                          "workspace); chunked_prefill_size is off" + mis + ".",
                          f"set {ctx.var('chunked_prefill_size')} > 0 (or remove it)", f"{_MOEH}:756")
        elif added_in(ctx, "0.5.22"):
            _flashinfer_a2a_budget(ctx, report)
        elif runner == "flashinfer_cutedsl":
            _cutedsl_a2a_budget(ctx, report)
    algorithm = ctx.args.get("speculative_algorithm") if _given(ctx, "speculative_algorithm") else None
    draft = _choice(ctx, "speculative_moe_a2a_backend", "")
    if not draft and algorithm is not None and str(algorithm).upper() != "NGRAM":
        draft = a2a
    if draft == "deepep_v2":
        report.refuse("speculative_moe_a2a_backend", "DeepEP v2 is not validated as the speculative draft's MoE a2a backend "
                      "(the draft inherits moe_a2a_backend when speculative_moe_a2a_backend is unset).",
                      f"set {ctx.var('speculative_moe_a2a_backend')} to another backend (e.g. none)", f"{_MOEH}:635")
    # Unknown models may set an a2a backend themselves (MiniMax-M3: megamoe, model_overrides/minimax_m3.py:112).
    if a2a == "none" and ctx.model.known and _choice(ctx, "ep_dispatch_algorithm", "") in ("static", "lp"):
        report.refuse("ep_dispatch_algorithm", f"ep_dispatch_algorithm {ctx.args.get('ep_dispatch_algorithm')} picks a different "
                      "replica per rank, which needs an a2a backend; with moe_a2a_backend none all ranks must agree.",
                      f"set {ctx.var('ep_dispatch_algorithm')}: dynamic (or leave it unset)", f"{_PH}:783")


# validate_flashinfer_megamoe_model's architectures (moe_hook.py:237-262): 0.5.20's (moe_hook.py:198-213), GLM-5 DSA
# from 0.5.21, Beam and Kimi-K3 from 0.5.23.
FLASHINFER_MEGAMOE_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                                    "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM", "NemotronHForCausalLM",
                                    "NemotronHPuzzleForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")


@rule("server.moe", shared=True, file="sglang/srt/arg_groups/moe_hook.py", sources=(
    "sglang/srt/arg_groups/moe_hook.py:258",
    "sglang/srt/arg_groups/moe_hook.py:275",
))
def _flashinfer_megamoe_model(ctx: Context, report: Report) -> None:
    """handle_a2a_moe's validate_flashinfer_megamoe_model (moe_hook.py:237-281, called at :321; 0.5.22 :207-236, 0.5.21
    :202-231, 0.5.20 :198-226) for moe_a2a_backend flashinfer_megamoe as the handler sees it (handled_a2a_backend; not
    where DeepSeek's CP overrides may change it, _a2a_may_change): any architecture outside its list, where the
    architectures are certain (the model table's, or json_model_override_args' list: SGLang checks every entry); then
    the checkpoint's quantization, where it is certain and no --quantization replaces it: an unquantized or a table FP8
    checkpoint (ModelFacts.quant_method "" or "fp8": no MXFP4 routed experts, no hybrid NVFP4 MoE), not DeepSeek-V4
    (whose FP4 experts SGLang detects from the files)."""
    if handled_a2a_backend(ctx) != "flashinfer_megamoe" or _a2a_may_change(ctx):
        return
    arch = certain_architecture(ctx)
    if arch is None:
        return
    names = [str(n) for n in (_override_architectures(ctx) or [arch])]
    allowed = FLASHINFER_MEGAMOE_ARCHITECTURES + (("GlmMoeDsaForCausalLM",) if added_in(ctx, "0.5.21") else ()) + \
        (("BeamForCausalLM", "KimiK3ForConditionalGeneration", "KimiK3LinearForCausalLM") if added_in(ctx, "0.5.23")
         else ())
    if not any(n in allowed for n in names):
        report.refuse("moe_a2a_backend", f"moe_a2a_backend flashinfer_megamoe is validated for {', '.join(sorted(allowed))} "
                      f"only, not {', '.join(names)}.", f"remove {ctx.var('moe_a2a_backend')} (or use another backend)",
                      release_line(ctx, {"0.5.23": "258", "0.5.22": "222", "0.5.21": "217", "0.5.20": "212"}))
        return
    method = ctx.model.quant_method
    if method not in ("", "fp8") or arch.startswith("DeepseekV4"):
        return
    # The quantization SGLang resolved (the host's, else the checkpoint's): MXFP8 or ModelOpt NVFP4, or (0.5.23)
    # nvfp4_online with SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16 on; the checkpoint brings no FP4 experts of its own.
    # DeepSeek-V3 with quantization nvfp4_online and the switch off was accepted (probe-confirmed refusal at :275).
    quant = _choice(ctx, "quantization", "") if _given(ctx, "quantization") else method
    w4a16 = added_in(ctx, "0.5.23") and env_true(ctx.env, "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16")
    if quant in ("mxfp8", "modelopt_fp4") or (quant == "nvfp4_online" and w4a16):
        return
    report.refuse("quantization" if _given(ctx, "quantization") else "moe_a2a_backend",
                  "moe_a2a_backend flashinfer_megamoe needs an MXFP8 or ModelOpt NVFP4 MoE checkpoint"
                  + (" (or nvfp4_online with SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1)" if added_in(ctx, "0.5.23") else "")
                  + f"; the launch gives {quant or 'an unquantized checkpoint'}"
                  + ("" if _given(ctx, "quantization") else f" ({ctx.model.path or 'the model'})") + ".",
                  f"remove {ctx.var('moe_a2a_backend')} (or serve an NVFP4 / MXFP8 checkpoint)",
                  release_line(ctx, {"0.5.23": "275", "0.5.22": "235", "0.5.21": "230", "0.5.20": "225"}))
