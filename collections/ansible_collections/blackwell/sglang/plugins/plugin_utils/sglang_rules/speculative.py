# SPDX-License-Identifier: Apache-2.0
"""Speculative decoding: the EAGLE triple, the algorithms, their backends, pipeline parallelism and the argument
checks of speculative_hook.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import lookup_model
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _SPH,
    _VH,
    DP_SPEC_ENV,
    EAGLE_FAMILY,
    PP_SPEC_ENV,
    RAGGED_ENV,
    SPEC_ALGORITHMS,
    SPEC_TRIPLE,
    _attention_backends,
    _cc,
    _choice,
    _given,
    _int,
    _num,
    _spec_values,
    env_true,
    nextn_as_eagle,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.profiles import arch_profile
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    PAGE_TREE_SPEC_BACKENDS,
    _a2a_may_change,
    _fa3_everywhere,
    adaptive_stays_on,
    attention_dp_on,
    attention_dp_width,
    auto_spec_triple,
    capture_only,
    dflash_draft_block_size,
    effective_eagle_topk,
    handled_a2a_backend,
    nvfp4_kv_decodes_with_trtllm_mha,
    resolved_attention_backends,
    resolved_base_attention_backend,
    resolved_page_size,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context

RAGGED_MODES = ("static", "cap-accept", "compact")  # RaggedVerifyMode (sglang/srt/speculative/ragged_verify.py:13-16)


@rule("spec.algorithm", sources=(
    "sglang/srt/speculative/spec_info.py:65",
))
def _spec_algorithm(ctx: Context, report: Report) -> None:
    algo = ctx.args.get("speculative_algorithm")
    if algo is None:
        stray = [d for d in ctx.args if d.startswith("speculative_") and ctx.is_set(d)]
        if stray:
            ctx.warn("spec.algorithm", stray[0],
                     f"{', '.join(stray)} set without speculative_algorithm: SGLang ignores them, speculative decoding stays off.",
                     "set sglang_args.speculative_algorithm (e.g. NEXTN), or remove these keys")
        return
    if str(algo).upper() not in SPEC_ALGORITHMS:
        ctx.error("spec.algorithm", "speculative_algorithm",
                  f"{algo!r} is not a speculative algorithm of SGLang {ctx.schema.version} "
                  "(SpeculativeAlgorithm.from_string raises 'Unknown speculative algorithm name').",
                  "use one of " + ", ".join(sorted(SPEC_ALGORITHMS - {"FROZEN_KV_MTP"}))
                  + " (NEXTN for the multi-token-prediction heads built into Qwen3.5 / Qwen3-Next / DeepSeek)",
                  "sglang/srt/speculative/spec_info.py:65")


@rule("spec.triple", ids=("spec.triple", "spec.steps_without_topk", "spec.values", "spec.topk1_draft"), sources=(
    "sglang/srt/arg_groups/speculative_hook.py:1160",
    "sglang/srt/arg_groups/speculative_hook.py:1274",
    "sglang/srt/speculative/eagle_worker_v2.py:887",
    "sglang/srt/speculative/eagle_utils.py:110",
    "sglang/srt/arg_groups/speculative_hook.py:1255",
))
def _spec_triple(ctx: Context, report: Report) -> None:
    algo = str(ctx.args.get("speculative_algorithm") or "").upper()
    # speculative_adaptive skips these checks only where SGLang keeps it on: EAGLE with eagle_topk 14 and adaptive
    # on turns adaptive off first and then dies at the assert (speculative_hook.py:1159-1163; the fresh 2000-case
    # run of issue 36, on DeepSeek-V3).
    if algo not in EAGLE_FAMILY or adaptive_stays_on(ctx) or capture_only(ctx):
        return
    steps, topk, draft = _spec_values(ctx)
    auto = auto_spec_triple(ctx, algo)
    model = ctx.model.architecture or "this model"
    if steps is None and (topk is not None or draft is not None):
        given = [ctx.var(d) for d, v in zip(SPEC_TRIPLE, (steps, topk, draft), strict=True) if v is not None]
        ctx.error(
            "spec.triple", "sglang_args.speculative_num_steps",
            f"{' and '.join(given)} set without speculative_num_steps. SGLang {ctx.schema.version} requires either all of "
            "num_steps / eagle_topk / num_draft_tokens or none of them, and dies at start-up with an EMPTY "
            "AssertionError otherwise.",
            f"either set speculative_num_steps (with eagle_topk; e.g. steps {auto[0]}, topk {auto[1]}, draft tokens "
            f"{auto[2]}), or remove {' and '.join(given)} / run with -e spec=auto so SGLang chooses: for {model} it "
            f"picks num_steps={auto[0]}, eagle_topk={auto[1]}, num_draft_tokens={auto[2]}",
            "sglang/srt/arg_groups/speculative_hook.py:1160",
        )
        return
    if steps is not None and topk is None:
        ctx.error(
            "spec.steps_without_topk", "speculative_eagle_topk",
            f"speculative_num_steps={steps} without speculative_eagle_topk: SGLang {ctx.schema.version} compares "
            "eagle_topk > 1 and crashes with a TypeError ('>' not supported between NoneType and int).",
            f"set speculative_eagle_topk too (1 for a chain: draft tokens = steps + 1 = {steps + 1}), "
            "or remove num_steps and let SGLang choose (-e spec=auto)",
            "sglang/srt/arg_groups/speculative_hook.py:1274",
        )
        return
    # SGLang's argument handling takes any integer here; the EAGLE worker does not (STRICTER in
    # tests/conformance/differential.py). num_steps 0 is valid (drafting off, eagle_worker_v2.py:1469-1472), and with
    # eagle_topk 1 SGLang rewrites num_draft_tokens to num_steps + 1 (speculative_hook.py:1255-1266).
    for dest, value, least in (("speculative_num_steps", steps, 0), ("speculative_eagle_topk", topk, 1),
                               ("speculative_num_draft_tokens", draft, 1)):
        if value is None or value >= least or (dest == "speculative_num_draft_tokens" and topk == 1) or (
                dest == "speculative_eagle_topk" and steps == 0):
            continue
        ctx.error("spec.values", dest, f"{dest} must be at least {least}, got {value}: SGLang {ctx.schema.version} lets "
                  "it through, and the EAGLE draft then fails at start-up (no draft candidates to pick).",
                  f"set {ctx.var(dest)} >= {least} (SGLang's auto choice for {model}: {auto})",
                  "sglang/srt/speculative/eagle_worker_v2.py:887, sglang/srt/speculative/eagle_utils.py:110")
    if topk == 1 and steps is not None and steps >= 1 and draft is not None and draft != steps + 1:
        ctx.warn(
            "spec.topk1_draft", "speculative_num_draft_tokens",
            f"with speculative_eagle_topk 1 SGLang silently rewrites speculative_num_draft_tokens={draft} to "
            f"num_steps + 1 = {steps + 1}.",
            f"set speculative_num_draft_tokens: {steps + 1} so the config says what runs",
            "sglang/srt/arg_groups/speculative_hook.py:1255",
        )


@rule("spec.backend", ids=("spec.backend", "spec.attn_dp"), sources=(
    "sglang/srt/arg_groups/speculative_hook.py:1178",
))
def _spec_backend(ctx: Context, report: Report) -> None:
    """speculative_hook.py:1175-1179: trtllm_mha among the attention backends (explicit, or the decode backend of an
    NVFP4 KV cache from 0.5.21: kv_cache_hook.py:77-89) runs an EAGLE-family draft with eagle_topk 1 only, the
    host's topk or the one SGLang chooses for the model."""
    algo = "" if capture_only(ctx) else str(ctx.args.get("speculative_algorithm") or "").upper()
    topk = effective_eagle_topk(ctx, algo) if algo in EAGLE_FAMILY else None
    where: list[tuple[str, str]] = []
    if topk is not None and topk > 1:
        where = [(dest, f"{dest} trtllm_mha") for dest, backend in _attention_backends(ctx)
                 if backend == "trtllm_mha" and dest != "speculative_draft_attention_backend"]
        if not where and nvfp4_kv_decodes_with_trtllm_mha(ctx):
            where = [("kv_cache_dtype", "kv_cache_dtype nvfp4 decodes with trtllm_mha (kv_cache_hook.py:77-89), which")]
    chosen = "" if ctx.args.get("speculative_eagle_topk") is not None else \
        f" (SGLang's choice for {ctx.model.architecture}: speculative_eagle_topk is unset)"
    for dest, what in where:
        ctx.error("spec.backend", dest,
                  f"{what} supports speculative decoding with eagle_topk 1 only; eagle_topk is {topk}{chosen}.",
                  "set speculative_eagle_topk: 1 (with speculative_num_steps and speculative_num_draft_tokens), or "
                  "use the triton or flashinfer attention backend", "sglang/srt/arg_groups/speculative_hook.py:1178")
    attn_dp = _int(ctx, "attn_dp_size", 1)
    if attn_dp > 1 and algo in ("NGRAM", "STANDALONE"):
        line = "1369" if algo == "NGRAM" else "1082"
        ctx.error("spec.attn_dp", "speculative_algorithm",
                  f"{algo} speculative decoding does not support attention data parallelism (attn_dp_size={attn_dp}).",
                  "set attn_dp_size: 1, or use EAGLE/NEXTN", f"sglang/srt/arg_groups/speculative_hook.py:{line}")


PP_SPEC_OFF = "use tp_size instead of pp_size, or turn speculative decoding off (-e spec=off)"


@rule("spec.pipeline", until="0.5.21", shared=True, sources=(
    "sglang/srt/arg_groups/validation_hook.py:80-84 (0.5.20)",
))
def _spec_pipeline_refused(ctx: Context, report: Report) -> None:
    """0.5.20 refuses pipeline parallelism with speculative decoding on CUDA outright (validation_hook.py:80-84)."""
    algo, pp = str(ctx.args.get("speculative_algorithm") or "").upper(), _int(ctx, "pp_size", 1)
    if algo and pp > 1:
        report.error("pp_size", f"pipeline parallelism (pp_size={pp}) with speculative decoding ({algo}): "
                     f"SGLang {ctx.schema.version} does not support the pair on CUDA.", PP_SPEC_OFF,
                     "sglang/srt/arg_groups/validation_hook.py:80-84 (0.5.20)")


@rule("spec.pipeline", since="0.5.21", shared=True, sources=(
    "sglang/srt/arg_groups/validation_hook.py:119-162",
))
def _spec_pipeline(ctx: Context, report: Report) -> None:
    """SGLang's check_pipeline_parallel_compat for speculative decoding (sglang/srt/arg_groups/validation_hook.py:119-162)."""
    algo, pp = str(ctx.args.get("speculative_algorithm") or "").upper(), _int(ctx, "pp_size", 1)
    if not algo or pp <= 1 or capture_only(ctx):
        return
    mode, pp_spec = str(ctx.get("disaggregation_mode", "null")), env_true(ctx.env, PP_SPEC_ENV)
    where = "sglang/srt/arg_groups/validation_hook.py"
    off = PP_SPEC_OFF
    if algo == "DSPARK":
        if mode != "prefill" or pp_spec:
            ctx.error("spec.pipeline", "pp_size",
                      f"pipeline parallel DSPARK (pp_size={pp}) runs only on PD prefill nodes and not with {PP_SPEC_ENV}.",
                      off, f"{where}:124-130")
        return
    if algo not in ("EAGLE", "NEXTN") or ctx.is_set("enable_multi_layer_eagle"):  # NEXTN is an alias of EAGLE
        ctx.error("spec.pipeline", "speculative_algorithm",
                  f"pipeline parallelism (pp_size={pp}) supports only EAGLE/NEXTN (non-multi-layer) speculative decoding, "
                  f"not {algo}" + (" with enable_multi_layer_eagle" if ctx.is_set("enable_multi_layer_eagle") else "") + ".",
                  "use NEXTN/EAGLE, or tp_size instead of pp_size", f"{where}:132-135")
        return
    if pp_spec:
        for bad, dest, why, line in (
            (mode != "null", "disaggregation_mode", f"disaggregation_mode {mode}", "145"),
            (ctx.is_set("speculative_adaptive"), "speculative_adaptive", "speculative_adaptive", "150"),
            (_int(ctx, "attn_dp_size", 1) > 1, "attn_dp_size", f"attention DP (attn_dp_size={_int(ctx, 'attn_dp_size', 1)})", "156"),
        ):
            if bad:
                ctx.error("spec.pipeline", dest, f"{PP_SPEC_ENV} (PP + speculative decoding, pp_size={pp}) is not "
                          f"compatible with {why}.", f"remove {ctx.var(dest)}, or use tp_size instead of pp_size",
                          f"{where}:{line}")
    elif mode != "prefill":
        ctx.error("spec.pipeline", "pp_size",
                  f"pipeline parallelism (pp_size={pp}) with {algo} speculative decoding: without {PP_SPEC_ENV}=1 in the "
                  f"server environment SGLang {ctx.schema.version} supports PP + MTP only on prefill nodes of a "
                  "disaggregated deployment.",
                  f"set sglang_env.{PP_SPEC_ENV}: \"1\" (PP + MTP on this node), use tp_size instead of pp_size, or "
                  "turn speculative decoding off (-e spec=off)",
                  f"{where}:161")


AUX_CAPTURE = ("EAGLE3", "DFLASH", "DSPARK")


@rule("server.aux_hidden_states", since="0.5.23", file=_VH, sources=(
    "sglang/srt/arg_groups/validation_hook.py:697-750",
    "sglang/srt/arg_groups/validation_hook.py:714",
    "sglang/srt/arg_groups/validation_hook.py:720",
    "sglang/srt/arg_groups/validation_hook.py:725",
    "sglang/srt/arg_groups/validation_hook.py:731",
    "sglang/srt/arg_groups/validation_hook.py:739",
    "sglang/srt/arg_groups/validation_hook.py:707",
    "sglang/srt/arg_groups/validation_hook.py:744",
))
def _aux_hidden_states(ctx: Context, report: Report) -> None:
    """handle_aux_hidden_state_capture (sglang/srt/arg_groups/validation_hook.py:697-750)."""
    ids = ctx.args.get("return_aux_hidden_state_layer_ids") if _given(ctx, "return_aux_hidden_state_layer_ids") else None

    if not ctx.is_set("enable_return_aux_hidden_states"):
        if ids is not None:
            report.refuse("return_aux_hidden_state_layer_ids", "return_aux_hidden_state_layer_ids without "
                          "enable_return_aux_hidden_states.", f"set {ctx.var('enable_return_aux_hidden_states')}: true, or "
                          f"remove {ctx.var('return_aux_hidden_state_layer_ids')}", 707)
        return
    method = str(ctx.args.get("speculative_algorithm") or "").upper()
    if method not in AUX_CAPTURE:
        report.refuse("speculative_algorithm", "enable_return_aux_hidden_states needs speculative_algorithm EAGLE3, DFLASH or "
                      f"DSPARK to name the capture convention, got {ctx.args.get('speculative_algorithm')!r}.",
                      f"set {ctx.var('speculative_algorithm')}: EAGLE3 (or DFLASH / DSPARK)", 714)
        return
    if _given(ctx, "speculative_draft_model_path"):  # the 10,000-case fuzz run's MISSED (issue 36)
        report.refuse("speculative_draft_model_path", "enable_return_aux_hidden_states captures the target's hidden states "
                      "without a draft model (speculative_algorithm only names the capture convention).",
                      f"remove {ctx.var('speculative_draft_model_path')}", 720)
        return
    if _int(ctx, "pp_size", 1) != 1:
        report.refuse("pp_size", "enable_return_aux_hidden_states needs pp_size 1 (the capture hooks see only the last "
                      "pipeline rank).", "use tp_size instead of pp_size", 725)
        return
    if method != "EAGLE3" and not ids:
        report.refuse("return_aux_hidden_state_layer_ids", f"enable_return_aux_hidden_states with {method} needs "
                      "return_aux_hidden_state_layer_ids.", f"set {ctx.var('return_aux_hidden_state_layer_ids')} "
                      "(the target model's layer ids)", 731)
        return
    if isinstance(ids, list) and any(isinstance(i, int) and i < 0 for i in ids):
        report.refuse("return_aux_hidden_state_layer_ids", f"return_aux_hidden_state_layer_ids {ids} has negative layer ids.",
                      "use layer ids >= 0", 739)
    elif isinstance(ids, list) and len(set(ids)) != len(ids):
        report.refuse("return_aux_hidden_state_layer_ids", f"return_aux_hidden_state_layer_ids {ids} repeats a layer.",
                      "name each layer once", 744)


@rule("server.speculative", shared=True, file=_SPH, sources=(
    "sglang/srt/arg_groups/speculative_hook.py:177",
    "sglang/srt/arg_groups/speculative_hook.py:205",
    "sglang/srt/arg_groups/speculative_hook.py:1216",
    "sglang/srt/arg_groups/speculative_hook.py:296-300 (0.5.22; 0.5.21 :273-277, 0.5.20 :210-214)",
    "sglang/srt/arg_groups/speculative_hook.py:377",
    "sglang/srt/arg_groups/speculative_hook.py:224",
    "sglang/srt/arg_groups/speculative_hook.py:1222",
    "sglang/srt/arg_groups/speculative_hook.py:228",
    "sglang/srt/arg_groups/speculative_hook.py:1235",
    "sglang/srt/arg_groups/speculative_hook.py:314",
    "sglang/srt/arg_groups/speculative_hook.py:325",
    "sglang/srt/arg_groups/speculative_hook.py:752",
    "sglang/srt/arg_groups/speculative_hook.py:670 (0.5.22 :609, 0.5.21 :587, 0.5.20 :523)",
    "sglang/srt/speculative/ragged_verify.py:24",
))
def _speculative_launch(ctx: Context, report: Report) -> None:
    """The argument checks of speculative_hook.py beyond the EAGLE triple (rules spec.*)."""
    raw = ctx.args.get("speculative_algorithm") if _given(ctx, "speculative_algorithm") else None
    if capture_only(ctx):  # DFLASH without a draft, a ragged-verify mode nobody reads: no refusal there
        raw = None
    algo = None if raw is None else nextn_as_eagle(str(raw).upper())

    if added_in(ctx, "0.5.22") and ctx.is_set("speculative_use_block_verification") and algo not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
        report.refuse("speculative_use_block_verification", "speculative_use_block_verification works with EAGLE / EAGLE3 / "
                      f"NEXTN / DFLASH / DSPARK only, not {raw}.", f"remove {ctx.var('speculative_use_block_verification')}", 177)
    window, sink = _num(ctx, "speculative_draft_window_size"), _num(ctx, "speculative_draft_sink_size")
    if window is not None and window <= 0:
        report.refuse("speculative_draft_window_size", f"speculative_draft_window_size={window} must be positive.",
                      f"set {ctx.var('speculative_draft_window_size')} > 0, or remove it", 205)
    if not added_in(ctx, "0.5.21"):
        pass
    elif sink is not None and sink < 0:
        report.refuse("speculative_draft_sink_size", f"speculative_draft_sink_size={sink} must be non-negative.",
                      f"set {ctx.var('speculative_draft_sink_size')} >= 0, or remove it", 224)
    elif sink is not None and window is None:
        report.refuse("speculative_draft_sink_size", "speculative_draft_sink_size needs speculative_draft_window_size.",
                      f"set {ctx.var('speculative_draft_window_size')}, or remove {ctx.var('speculative_draft_sink_size')}", 228)
    # 0.5.21 takes EAGLE and EAGLE3 only (speculative_hook.py:222-229 there); 0.5.20 has no such check.
    coordinated = ("EAGLE", "EAGLE3", "DSPARK") if added_in(ctx, "0.5.22") else ("EAGLE", "EAGLE3")
    if added_in(ctx, "0.5.21") and env_true(ctx.env, DP_SPEC_ENV) and (
            algo not in coordinated or ctx.is_set("enable_multi_layer_eagle")):
        report.refuse(f"sglang_env.{DP_SPEC_ENV}", f"{DP_SPEC_ENV} (DP spec/prefill coordination) needs single-layer "
                      f"{' / '.join(coordinated)} speculative decoding (speculative_algorithm is {raw}).",
                      f"remove sglang_env.{DP_SPEC_ENV}, or use one of those algorithms",
                      257 if added_in(ctx, "0.5.22") else "222-229 (0.5.21)")
    if algo is None:
        return
    # Every in-tree algorithm's handler reads SGLANG_RAGGED_VERIFY_MODE first, so that a typo fails at start-up
    # (spec_info.py:251-253 -> ragged_verify.py:19-27, the value exactly, no case folding); the seed-0 fuzzer's
    # uncatalogued site (issue 36).
    ragged = ctx.env.get(RAGGED_ENV)
    if algo in SPEC_ALGORITHMS and ragged is not None and ragged not in RAGGED_MODES:
        report.error(f"sglang_env.{RAGGED_ENV}", f"{RAGGED_ENV}={ragged!r} is not one of {', '.join(RAGGED_MODES)}; SGLang "
                     "refuses the launch.", f"set sglang_env.{RAGGED_ENV} to one of those, or remove it (static)",
                     "sglang/srt/speculative/ragged_verify.py:24 (from sglang/srt/speculative/spec_info.py:253)")
    attn_dp, attn_cp = attention_dp_width(ctx), _int(ctx, "attn_cp_size", 1)
    # Block verification turns rejection sampling on for EAGLE / EAGLE3 / NEXTN (speculative_hook.py:185-194, 0.5.22
    # :161-180): the fresh 10,000-case run's MISSED, EAGLE with block verification and Llama's automatic topk 4.
    rejection = ctx.is_set("speculative_use_rejection_sampling") or (
        added_in(ctx, "0.5.22") and ctx.is_set("speculative_use_block_verification") and algo in ("EAGLE", "EAGLE3"))
    by_block = rejection and not ctx.is_set("speculative_use_rejection_sampling")
    if rejection and algo == "STANDALONE":
        report.refuse("speculative_use_rejection_sampling", "speculative_use_rejection_sampling works with EAGLE / EAGLE3 / NEXTN "
                      "only, not STANDALONE.", f"remove {ctx.var('speculative_use_rejection_sampling')}", 1216)
    elif rejection and algo in EAGLE_FAMILY and effective_eagle_topk(ctx, algo) not in (None, 1):
        # SGLang's own choice counts (auto_spec_triple: topk 4 for Llama, speculative_hook.py:1159-1173 runs first):
        # the seed-0 CI sample's MISSED, EAGLE with rejection sampling and the triple unset on Llama (issue 36).
        chosen = "" if _num(ctx, "speculative_eagle_topk") is not None else (
            f" (SGLang picks {effective_eagle_topk(ctx, algo)} for this model with the triple unset)")
        report.refuse("speculative_eagle_topk", "speculative_use_rejection_sampling"
                      + (" (which speculative_use_block_verification turns on)" if by_block else "")
                      + f" needs speculative_eagle_topk 1{chosen}.",
                      f"set {ctx.var('speculative_eagle_topk')}: 1, or remove "
                      + ctx.var("speculative_use_block_verification" if by_block else "speculative_use_rejection_sampling"),
                      1222)
    elif rejection and algo in EAGLE_FAMILY and any(
            _num(ctx, d) not in (None, 1.0) for d in ("speculative_accept_threshold_single", "speculative_accept_threshold_acc")):
        report.refuse("speculative_use_rejection_sampling", "speculative_use_rejection_sampling ignores the accept thresholds; "
                      "SGLang refuses them together.", "remove speculative_accept_threshold_single / _acc (or the rejection "
                      "sampling)", 1235)
    # _handle_dflash's first check (speculative_hook.py:291-301; 0.5.22 :284-293, 0.5.21 :260-271, 0.5.20 :202-207):
    # DFLASH on cuda, npu or xpu only (the 10,000-case fuzz run's MISSED with device cpu, issue 36).
    device = _choice(ctx, "device", "cuda")
    if algo == "DFLASH" and not (device.startswith("cuda") or device in ("npu", "xpu")):
        report.refuse("device", f"DFLASH speculative decoding runs on CUDA, NPU or XPU devices, not device {device!r}.",
                      f"remove {ctx.var('device')} (SGLang detects cuda on an NVIDIA host), or use another speculative "
                      "algorithm", "298 (0.5.22 :291, 0.5.21 :268, 0.5.20 :205)")
    # _handle_dspark's first check (speculative_hook.py:669-672; 0.5.22 :608-611, 0.5.21 :586-589, 0.5.20 :522-525):
    # DSPARK on a device whose name starts with cuda, npu or xpu (xpu from 0.5.23 only); the seed-1 10,000-case fuzz
    # run's MISSED fuzz-1-04046, device cpu.
    dspark_devices = ("cuda", "npu", "xpu") if added_in(ctx, "0.5.23") else ("cuda", "npu")
    if algo == "DSPARK" and not device.startswith(dspark_devices):
        names = [d.upper() for d in dspark_devices]
        report.refuse("device", f"DSPARK speculative decoding runs on {', '.join(names[:-1])} or {names[-1]} devices only, "
                      f"not device {device!r}.",
                      f"remove {ctx.var('device')} (SGLang detects cuda on an NVIDIA host), or use another speculative "
                      "algorithm", "670 (0.5.22 :609, 0.5.21 :587, 0.5.20 :523)")
    if algo == "DFLASH" and not added_in(ctx, "0.5.23") and attention_dp_on(ctx):
        report.refuse("attn_dp_size", "DFLASH does not support attention DP on CUDA in this release.", "serve DFLASH without "
                      "attention DP (or use SGLang 0.5.23)", "296-300 (0.5.22; 0.5.21 :273-277, 0.5.20 :210-214)")
    elif algo in ("DFLASH", "DSPARK") and attn_dp > 1:
        line = {"DFLASH": (308, 310, 314), "DSPARK": (676, 698, None)}[algo]
        if not ctx.is_set("enable_dp_lm_head"):
            report.refuse("enable_dp_lm_head", f"{algo} with attention DP (attn_dp_size={attn_dp}) needs enable_dp_lm_head.",
                          f"set {ctx.var('enable_dp_lm_head')}: true", line[0])
        elif attn_cp != 1:
            report.refuse("attn_cp_size", f"{algo} with attention DP does not support context parallelism (attn_cp_size={attn_cp}).",
                          f"set {ctx.var('attn_cp_size')}: 1", line[1])
        elif algo == "DFLASH" and env_true(ctx.env, DP_SPEC_ENV):
            report.refuse(f"sglang_env.{DP_SPEC_ENV}", f"DFLASH with attention DP needs {DP_SPEC_ENV} off.",
                          f"remove sglang_env.{DP_SPEC_ENV}", 314)
    # _handle_dflash: DFLASH drafts with a separate draft model, which nothing fills in for it (only DSPARK's and the
    # EAGLE family's handlers may take the target's own path); the same check in every release (0.5.22 :308,
    # 0.5.21 :286, 0.5.20 :222).
    if algo == "DFLASH" and not _given(ctx, "speculative_draft_model_path"):
        report.refuse("speculative_draft_model_path", "DFLASH speculative decoding needs speculative_draft_model_path "
                      "(its draft model).", f"set {ctx.var('speculative_draft_model_path')} to the DFLASH draft "
                      "checkpoint, or use another speculative algorithm", 325)
    # _handle_dspark (speculative_hook.py:720-755, 0.5.23): without a draft path DSpark takes a draft bundled in the
    # target's config.json (its dspark_* keys, speculative/dspark_components/dspark_config.py:162-174) or shipped as
    # its dspark/ subfolder; the model table's checkpoints (sglang_models.CHECKPOINTS) have neither. Any other
    # model: its config decides, which only the preflight reads.
    if algo == "DSPARK" and added_in(ctx, "0.5.23") and not _given(ctx, "speculative_draft_model_path") and \
            lookup_model(ctx.model.path).known:
        report.refuse("speculative_draft_model_path", f"DSPARK needs speculative_draft_model_path: {ctx.model.path} "
                      "bundles no DSpark draft (no dspark_* keys in its config.json, no dspark/ subfolder).",
                      f"set {ctx.var('speculative_draft_model_path')} to the DSpark draft checkpoint, or use another "
                      "speculative algorithm", 752)
    for dest, line in (("speculative_dflash_block_size", 370), ("speculative_dspark_block_size", 809)):
        size = _num(ctx, dest)
        if algo == dest.split("_")[1].upper() and size is not None and size <= 0:
            report.refuse(dest, f"{dest}={size} must be positive.", f"set {ctx.var(dest)} > 0, or remove it", line)
    block, draft = _num(ctx, "speculative_dflash_block_size"), _num(ctx, "speculative_num_draft_tokens")
    if algo == "DFLASH" and block is not None and block > 0 and draft is not None and draft != block:
        report.refuse("speculative_num_draft_tokens", f"DFLASH: speculative_num_draft_tokens={draft} and "
                      f"speculative_dflash_block_size={block} must match.", "set only one of them, or both to the same value", 377)
    if algo == "UNO":
        _uno(ctx, report)


def _uno(ctx: Context, report: Report) -> None:
    """_handle_uno's argument checks (speculative_hook.py:453-612)."""
    profile = arch_profile(ctx)
    for bad, dest, why, line in (
        (not _choice(ctx, "device", "cuda").startswith("cuda"), "device", "UNO runs on CUDA devices only", 453),
        (_given(ctx, "speculative_draft_model_path"), "speculative_draft_model_path", "UNO reuses the target model and "
         "takes no speculative_draft_model_path", 455),
        (not _given(ctx, "uno_lora_path"), "uno_lora_path", "UNO needs uno_lora_path", 460),
        (ctx.is_set("enable_deterministic_inference"), "enable_deterministic_inference",
         "UNO does not support enable_deterministic_inference", 462),
        (ctx.is_set("enable_strict_thinking"), "enable_strict_thinking", "UNO does not support enable_strict_thinking", 467),
        ((_num(ctx, "speculative_num_draft_tokens") or 0) < 1, "speculative_num_draft_tokens",
         "UNO needs speculative_num_draft_tokens (a positive verify width)", 474),
        # 0 is below 1 too (it is not None: speculative_hook.py:485-487); the corpus case catalog-uno-topk-zero.
        (_num(ctx, "speculative_eagle_topk") is not None and _num(ctx, "speculative_eagle_topk") < 1,
         "speculative_eagle_topk", "UNO needs speculative_eagle_topk >= 1", 489),
        ((_int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1)) != (1, 1), "tp_size", "UNO runs with tp_size 1 and pp_size 1 only",
         579),
        (attention_dp_on(ctx) or _int(ctx, "attn_cp_size", 1) != 1, "attn_dp_size",
         "UNO does not support attention DP or context parallelism", 581),
        (ctx.is_set("enable_lora") or bool(ctx.args.get("lora_paths")), "enable_lora", "UNO does not support LoRA serving",
         583),
        (ctx.is_set("speculative_use_rejection_sampling"), "speculative_use_rejection_sampling",
         "UNO does its own verification, without speculative_use_rejection_sampling", 592),
        (profile is not None and "fa3" in profile.attention and not _fa3_everywhere(ctx), "speculative_algorithm",
         f"UNO needs FlashAttention 3 for prefill and decode, which compute capability {_cc(ctx)} does not run", "606-611"),
        # The backends as SGLang resolves them (written, or its default for the model and GPU): the fuzz run's MISSED
        # on 8.0 / 8.7, where the profile allows fa3 for MLA models only and SGLang picks flashinfer (issue 36).
        (None not in (backends := resolved_attention_backends(ctx)) and backends != ("fa3", "fa3"), "attention_backend",
         f"UNO needs FlashAttention 3 for prefill and decode, not prefill {backends[0]} / decode {backends[1]}"
         + ("" if any(ctx.args.get(d) for d in ("attention_backend", "prefill_attention_backend", "decode_attention_backend"))
            else " (SGLang's default for this model and GPU)"), "606-611"),
    ):
        if bad:
            report.refuse(dest, why + ".", "fix that, or use another speculative algorithm (NEXTN, EAGLE3...)", line)
            return
    _uno_tree(ctx, report)


def _uno_tree(ctx: Context, report: Report) -> None:
    """_handle_uno's tree mode, speculative_eagle_topk K > 1 (speculative_hook.py:494-559)."""
    k, q, steps = _num(ctx, "speculative_eagle_topk"), _num(ctx, "speculative_num_draft_tokens"), _num(ctx, "speculative_num_steps")
    if k is None or k <= 1 or q is None:
        return
    fix = "fix the tree shape (speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens), or set eagle_topk: 1"
    if steps is None or steps < 1:
        report.refuse("speculative_num_steps", "UNO tree mode (eagle_topk > 1) needs speculative_num_steps >= 1.", fix,
                      496 if steps is None else 502)
        return
    steps, k, q = int(steps), int(k), int(q)
    capacity, nodes = 1, 1
    for _ in range(steps):
        nodes *= k
        capacity += nodes
        if capacity >= q:
            break
    for bad, why, line in (
        (q < steps + 1, f"verify width Q={q} below the draft width F=speculative_num_steps + 1={steps + 1}", 509),
        (q > 128, f"verify width Q={q} above 128", 513),
        (q * k > 2048, f"Q x K = {q} x {k} above 2048", 519),
        (q > capacity, f"Q={q} above the tree's capacity {capacity} for F={steps + 1}, K={k}", 532),
        (q - 1 > k * max(steps - 1, 0) + 1, f"Q - 1 = {q - 1} above K x (F - 2) + 1 = {k * max(steps - 1, 0) + 1}", 540),
        (ctx.is_set("enable_two_batch_overlap"), "two-batch overlap", 551),
        (any(_num(ctx, d) not in (None, 1.0) for d in ("speculative_accept_threshold_single", "speculative_accept_threshold_acc")),
         "accept thresholds other than 1.0", 556),
    ):
        if bad:
            report.refuse("speculative_eagle_topk", f"UNO tree mode (eagle_topk {k}): {why}.", fix, line)
            return


@rule("server.speculative", shared=True, file=_SPH, sources=(
    "sglang/srt/arg_groups/speculative_hook.py:830",
    "sglang/srt/arg_groups/speculative_hook.py:678",
    "sglang/srt/arg_groups/speculative_hook.py:847",
    "sglang/srt/arg_groups/speculative_hook.py:693",
    "sglang/srt/arg_groups/speculative_hook.py:707",
    "sglang/srt/arg_groups/speculative_hook.py:1361",
    "sglang/srt/arg_groups/speculative_hook.py:1278",
    "sglang/srt/arg_groups/speculative_hook.py:430",
    "sglang/srt/arg_groups/speculative_hook.py:1328 (0.5.22 :1238, 0.5.21 :1216, 0.5.20 :1042)",
))
def _speculative_shapes(ctx: Context, report: Report) -> None:
    """The draft-shape checks of speculative_hook.py: DFLASH's window (:427-434), UNO's tree mode (:494-559), DSpark
    with attention DP and its draft width (:674-710, :824-850), tree drafts on paged KV (:1271-1282, :1355-1366) and
    NGRAM's external corpus (:1331-1349)."""
    raw = ctx.args.get("speculative_algorithm") if _given(ctx, "speculative_algorithm") and not capture_only(ctx) else None
    algo = None if raw is None else nextn_as_eagle(str(raw).upper())
    if algo is None:
        return
    draft, window = _num(ctx, "speculative_num_draft_tokens"), _num(ctx, "speculative_draft_window_size")
    if algo == "DFLASH" and window is not None and window > 0:
        width = draft if draft is not None else _num(ctx, "speculative_dflash_block_size")
        inferred = width is None
        if inferred:
            width = dflash_draft_block_size(ctx)  # what SGLang reads from the draft's config.json (:389-424)
        if width is not None and width > 0 and window < width:
            source = ", which SGLang takes from the draft model's config.json: it names no block size" if inferred else ""
            other = f", or set {ctx.var('speculative_num_draft_tokens')} to the draft's block size" if inferred else ""
            report.refuse("speculative_draft_window_size", f"speculative_draft_window_size={window} is below the DFLASH block "
                          f"size (speculative_num_draft_tokens {width}{source}).",
                          f"set {ctx.var('speculative_draft_window_size')} >= {width}{other}", 430)
    if algo == "DSPARK":
        _dspark_shapes(ctx, report, draft)
    if algo == "NGRAM":
        _ngram_shapes(ctx, report, draft)
    if algo not in EAGLE_FAMILY:
        return
    topk = effective_eagle_topk(ctx, algo)
    page, backend = resolved_page_size(ctx), resolved_base_attention_backend(ctx)
    if topk is not None and topk > 1 and page is not None and page > 1 and backend is not None \
            and backend not in PAGE_TREE_SPEC_BACKENDS and backend != "trtllm_mha":  # trtllm_mha: spec.backend (:1178)
        report.refuse("speculative_eagle_topk", f"speculative_eagle_topk={topk} (a tree draft) with page_size {page} runs on the "
                      f"{', '.join(PAGE_TREE_SPEC_BACKENDS)} attention backends only, not {backend}.",
                      f"set {ctx.var('speculative_eagle_topk')}: 1, page_size: 1, or attention_backend: flashinfer", 1278)


def _dspark_shapes(ctx: Context, report: Report, draft: int | float | None) -> None:
    # _handle_dspark runs after handle_a2a_moe (pipeline.py:295, :306): enable_waterfill's deepep, ascend_tp's none.
    a2a, attn_dp = handled_a2a_backend(ctx), attention_dp_width(ctx)
    if attn_dp > 1 and ctx.is_set("enable_dp_lm_head") and _int(ctx, "attn_cp_size", 1) == 1 and not _a2a_may_change(ctx):
        ragged = ctx.env.get(RAGGED_ENV, "static")
        spec_a2a = _choice(ctx, "speculative_moe_a2a_backend", "")
        # 0.5.20 has no mori (speculative_hook.py:531); before 0.5.22 only an a2a MoE needs the static ragged mode
        # (0.5.21 speculative_hook.py:600-610).
        coordinated = env_true(ctx.env, DP_SPEC_ENV) and added_in(ctx, "0.5.22")
        if a2a not in (("none", "megamoe", "mori") if added_in(ctx, "0.5.21") else ("none", "megamoe")):
            report.refuse("moe_a2a_backend", f"DSPARK with attention DP supports moe_a2a_backend none, megamoe or mori, not {a2a}.",
                          f"set {ctx.var('moe_a2a_backend')}: none", 678)
        elif (a2a != "none" or coordinated) and ragged != "static":
            report.refuse(f"sglang_env.{RAGGED_ENV}", f"DSPARK with an a2a MoE or {DP_SPEC_ENV} needs {RAGGED_ENV}=static, not "
                          f"{ragged}.", f"remove sglang_env.{RAGGED_ENV}", 693)
        elif spec_a2a and spec_a2a != a2a:
            report.refuse("speculative_moe_a2a_backend", f"DSPARK with attention DP ignores speculative_moe_a2a_backend; it must "
                          f"match moe_a2a_backend {a2a} (it is {spec_a2a}).", f"remove {ctx.var('speculative_moe_a2a_backend')}",
                          707)
    block = _num(ctx, "speculative_dspark_block_size")
    if block is not None and block > 0 and draft is not None and draft != block + 1:
        report.refuse("speculative_num_draft_tokens", f"DSPARK: speculative_num_draft_tokens={draft} must be "
                      f"speculative_dspark_block_size + 1 = {block + 1}.", "set only speculative_dspark_block_size (gamma)", 830)
    elif draft is not None and draft < 2:
        report.refuse("speculative_num_draft_tokens", f"DSPARK needs speculative_num_draft_tokens >= 2 (gamma + 1), not {draft}.",
                      f"set speculative_dspark_block_size (gamma) instead of {ctx.var('speculative_num_draft_tokens')}", 847)


def _ngram_shapes(ctx: Context, report: Report, draft: int | float | None) -> None:
    if _given(ctx, "speculative_ngram_external_corpus_path"):
        budget = _num(ctx, "speculative_ngram_external_sam_budget")
        budget = 0 if budget is None else budget
        tokens = _num(ctx, "speculative_ngram_external_corpus_max_tokens")
        width = 12 if draft is None else draft  # speculative_hook.py:1314-1318
        for bad, dest, why, line in (
            (budget <= 0, "speculative_ngram_external_sam_budget", "must be positive with an external corpus", 1333),
            (tokens is not None and tokens <= 0, "speculative_ngram_external_corpus_max_tokens",
             "must be positive with an external corpus", 1338),
            (budget > width - 1, "speculative_ngram_external_sam_budget",
             f"must be at most speculative_num_draft_tokens - 1 = {width - 1}", 1346),
        ):
            if bad:
                report.refuse(dest, f"{dest} {why}.", f"fix {ctx.var(dest)}, or remove "
                              f"{ctx.var('speculative_ngram_external_corpus_path')}", line)
                return
    breadth = _num(ctx, "speculative_ngram_max_bfs_breadth")
    if breadth == 0 and _num(ctx, "speculative_num_steps") is None:
        # _handle_ngram makes the breadth NGRAM's eagle_topk, then derives an unset speculative_num_steps as
        # speculative_num_draft_tokens // speculative_eagle_topk (speculative_hook.py:1309-1330): a ZeroDivisionError
        # (an implicit catalog entry). The seed-18 10,000-case run's MISSED fuzz-18-02824.
        report.refuse("speculative_ngram_max_bfs_breadth", "speculative_ngram_max_bfs_breadth 0 with NGRAM: SGLang derives "
                      "speculative_num_steps as speculative_num_draft_tokens // the breadth and fails dividing by zero.",
                      f"set {ctx.var('speculative_ngram_max_bfs_breadth')} >= 1 (default 10), or set "
                      f"{ctx.var('speculative_num_steps')}",
                      release_line(ctx, {"0.5.20": "1042", "0.5.21": "1216", "0.5.22": "1238", "0.5.23": "1328"}))
        return
    breadth = 10 if breadth is None else breadth  # NGRAM's eagle_topk (speculative_hook.py:1309-1313)
    page, backend = resolved_page_size(ctx), resolved_base_attention_backend(ctx)
    if breadth > 1 and page is not None and page > 1 and backend is not None and backend != "flashinfer":
        report.refuse("page_size", f"NGRAM with speculative_ngram_max_bfs_breadth {breadth} (> 1) and page_size {page} is "
                      f"unstable on the {backend} attention backend; SGLang allows it on flashinfer only.",
                      f"set {ctx.var('page_size')}: 1, speculative_ngram_max_bfs_breadth: 1, or attention_backend: flashinfer",
                      1361)


ADAPTIVE_DEFAULT_STEPS = (0, 1, 3, 5, 7)  # sglang/srt/speculative/adaptive_spec_params.py:28-53, every bs slot's union


@rule("server.speculative", shared=True, sources=(
    "sglang/srt/arg_groups/speculative_hook.py:1417",
))
def _adaptive_steps(ctx: Context, report: Report) -> None:
    """_init_adaptive_speculative_params (speculative_hook.py:1392-1421) with SGLang's default adaptive config, where
    _maybe_disable_adaptive (adaptive_spec_params.py:56-100) keeps speculative_adaptive on."""
    steps = _num(ctx, "speculative_num_steps")
    if not adaptive_stays_on(ctx) or capture_only(ctx) or steps is None or _given(ctx, "speculative_adaptive_config"):
        return  # off, or SGLang turns speculative_adaptive off (a warning)
    if steps not in ADAPTIVE_DEFAULT_STEPS:
        ctx.error("server.speculative", "speculative_num_steps", f"speculative_num_steps={steps} with speculative_adaptive "
                  f"is not one of the adaptive config's candidate steps {list(ADAPTIVE_DEFAULT_STEPS)}. SGLang refuses "
                  "the launch.", f"set {ctx.var('speculative_num_steps')} to one of them, or remove it (SGLang picks 3)",
                  f"{_SPH}:1417")
