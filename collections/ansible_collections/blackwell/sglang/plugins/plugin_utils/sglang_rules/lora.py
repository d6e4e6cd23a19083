# SPDX-License-Identifier: Apache-2.0
"""LoRA serving: the adapters' arguments, LoRA with speculative decoding, and LoRA MoE runners.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    RAGGED_ENV,
    _choice,
    _given,
    _num,
    env_true,
    nextn_as_eagle,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.moe import resolved_ep_size
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    adaptive_stays_on,
    handled_a2a_backend,
    v2_lora_unsupported_mode,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("server.lora", shared=True, file="sglang/srt/arg_groups/lora_hook.py", sources=(
    "sglang/srt/arg_groups/lora_hook.py:33-180",
    "sglang/srt/arg_groups/lora_hook.py:240-301",
    "sglang/srt/arg_groups/lora_hook.py:260",
    "sglang/srt/arg_groups/lora_hook.py:299",
    "sglang/srt/arg_groups/lora_hook.py:64",
    "sglang/srt/arg_groups/lora_hook.py:147",
    "sglang/srt/arg_groups/lora_hook.py:152",
    "sglang/srt/arg_groups/lora_hook.py:158",
    "sglang/srt/arg_groups/lora_hook.py:176",
    "sglang/srt/arg_groups/lora_hook.py:30",
    "sglang/srt/arg_groups/lora_hook.py:162",
    "sglang/srt/arg_groups/argparse_actions.py:17",
))
def _lora(ctx: Context, report: Report) -> None:
    """check_lora_server_args (sglang/srt/arg_groups/lora_hook.py:33-180): lora_paths alone turns LoRA on."""
    paths = ctx.args.get("lora_paths") if isinstance(ctx.args.get("lora_paths"), list) else []
    for item in paths:  # LoRAPathAction (sglang/srt/arg_groups/argparse_actions.py:15-20), at argument parsing
        text = item.strip() if isinstance(item, str) else ""
        if text.startswith("{") and text.endswith("}"):
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
            if not (isinstance(obj, dict) and "lora_path" in obj and "lora_name" in obj):
                ctx.error("server.lora", "lora_paths", f"lora_paths entry {text!r} looks like JSON but is not an object "
                          "with lora_name and lora_path. SGLang refuses the launch.",
                          f"write the {ctx.var('lora_paths')} entry as name=path, a plain path, or "
                          '{"lora_name": ..., "lora_path": ...}', "sglang/srt/arg_groups/argparse_actions.py:17")
                return
    if not (ctx.is_set("enable_lora") or paths):
        return
    per_batch = _num(ctx, "max_loras_per_batch")
    per_batch = 8 if per_batch is None else per_batch
    loaded = _num(ctx, "max_loaded_loras")

    if ctx.is_set("enable_lora_overlap_loading") and (loaded is None or loaded > 2 * per_batch):
        report.refuse("max_loaded_loras", f"enable_lora_overlap_loading pins the adapters in CPU memory and needs max_loaded_loras "
                      f"set to at most 2 x max_loras_per_batch = {2 * per_batch} (it is {loaded}).",
                      f"set {ctx.var('max_loaded_loras')} <= {2 * per_batch}, or remove enable_lora_overlap_loading", 64)
    modules = ctx.args.get("lora_target_modules") if isinstance(ctx.args.get("lora_target_modules"), list) else []
    if "all" in modules and len(set(modules)) > 1:
        report.refuse("lora_target_modules", f"lora_target_modules {modules}: 'all' must be the only module.",
                      f"set {ctx.var('lora_target_modules')}: [all], or list the modules without 'all'", 147)
    if not paths and not (ctx.is_set("max_lora_rank") and modules):
        report.refuse("enable_lora", "enable_lora without lora_paths needs max_lora_rank and lora_target_modules to size the "
                      "adapter buffers.", f"set {ctx.var('lora_paths')}, or both max_lora_rank and lora_target_modules", 152)
        return
    if loaded is not None and loaded < per_batch:
        report.refuse("max_loaded_loras", f"max_loaded_loras={loaded} is below max_loras_per_batch={per_batch}.",
                      f"set {ctx.var('max_loaded_loras')} >= {per_batch}", 158)
    elif loaded is not None and len(paths) > loaded:
        report.refuse("max_loaded_loras", f"{len(paths)} lora_paths exceed max_loaded_loras={loaded}.",
                      f"set {ctx.var('max_loaded_loras')} >= {len(paths)}", 162)
    threshold = _num(ctx, "lora_drain_wait_threshold")
    if threshold is not None and threshold < 0:
        report.refuse("lora_drain_wait_threshold", f"lora_drain_wait_threshold={threshold} is negative.",
                      f"set {ctx.var('lora_drain_wait_threshold')} >= 0", 176)
    if ctx.args.get("enable_lora") is False:  # --lora-paths without LoRA: SGLang ignores them (lora_hook.py:45-48)
        return
    mode = v2_lora_unsupported_mode(ctx) if added_in(ctx, "0.5.23") else None  # triton_v2 is new in 0.5.23
    if _choice(ctx, "lora_backend", "csgmv") == "triton_v2" and not _choice(ctx, "moe_runner_backend", "auto").startswith(
            "lora") and mode:
        report.refuse("lora_backend", f"lora_backend triton_v2 does not support {mode} yet.",
                      f"set {ctx.var('lora_backend')}: csgmv, or remove {mode.split(' ', maxsplit=1)[0]}", 30)
    _lora_speculative(ctx, report)


def _lora_speculative(ctx: Context, report: Report) -> None:
    """check_lora_speculative_compatibility (sglang/srt/arg_groups/lora_hook.py:240-301) on the resolved algorithm.

    UNO is left to server.speculative, whose check (speculative_hook.py:583) SGLang runs first; speculative_adaptive
    only where SGLang keeps it on (adaptive_stays_on): _maybe_disable_adaptive (speculative_hook.py:1374-1389) turns it
    off for many configurations before this check, which reads the resolved value (lora_hook.py:278, :299; 0.5.20-0.5.22
    the same, :200 and :221 there; targeted-lora-21: NEXTN with speculative_adaptive on DeepSeek-V3 was MISSED)."""
    raw = _choice(ctx, "speculative_algorithm", "").upper()
    algo = nextn_as_eagle(raw)
    if algo in ("", "NGRAM", "UNO"):
        return
    if algo not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
        report.refuse("speculative_algorithm", f"LoRA works with NGRAM, EAGLE, NEXTN, EAGLE3, DFLASH or DSPARK speculative "
                      f"decoding only, not {raw}.", "use one of those, or serve without LoRA", 260)
        return
    ragged = ctx.env.get(RAGGED_ENV, "static")
    for bad, dest, why in (
        (algo == "DSPARK" and ragged != "static", f"sglang_env.{RAGGED_ENV}", f"{RAGGED_ENV}={ragged} with DSPARK"),
        (adaptive_stays_on(ctx), "speculative_adaptive", "speculative_adaptive (the draft is built from a static "
         "ServerArgs snapshot)"),
        ("experimental_sgl_trtllm" in (_choice(ctx, "moe_runner_backend", ""), _choice(ctx, "speculative_moe_runner_backend", "")),
         "moe_runner_backend", "the experimental_sgl_trtllm MoE runner"),
        (env_true(ctx.env, "SGLANG_ENABLE_OVERLAP_PLAN_STREAM"), "sglang_env.SGLANG_ENABLE_OVERLAP_PLAN_STREAM",
         "SGLANG_ENABLE_OVERLAP_PLAN_STREAM=1"),
    ):
        if bad:
            report.refuse(dest, f"LoRA with {raw} speculative decoding does not support {why}.",
                          f"remove {dest if dest.startswith('sglang_env') else ctx.var(dest)}, or serve without LoRA",
                          release_line(ctx, {"0.5.23": "299", "0.5.20": "221"}))
            return


@rule("server.lora", since="0.5.23", shared=True, file="sglang/srt/arg_groups/lora_hook.py", sources=(
    "sglang/srt/arg_groups/lora_hook.py:183-240",
))
def _lora_moe_runner(ctx: Context, report: Report) -> None:
    """check_lora_moe_runner_args (sglang/srt/arg_groups/lora_hook.py:183-240), on the explicit values."""
    draft = _choice(ctx, "speculative_moe_runner_backend", "")
    if _given(ctx, "speculative_algorithm") and draft.startswith("lora"):
        report.refuse("speculative_moe_runner_backend", f"speculative_moe_runner_backend {draft}: the draft model has no "
                      "LoRA adapters.", f"remove {ctx.var('speculative_moe_runner_backend')}", 192)
    runner = _choice(ctx, "moe_runner_backend", "auto")
    quant = _choice(ctx, "quantization", "")
    if not runner.startswith("lora") or quant == "mxfp8":
        # MXFP8 replaces a MoE runner it does not run (no LoRA runner) before this check (overrides.py:1484-1512).
        return
    for bad, dest, why, line in (
        (not (ctx.is_set("enable_lora") or ctx.args.get("lora_paths")), "enable_lora", "needs enable_lora (or lora_paths)",
         201),
        (_choice(ctx, "lora_backend", "csgmv") != "triton_v2", "lora_backend", "needs lora_backend triton_v2", 205),
        (v2_lora_unsupported_mode(ctx) is not None, "lora_backend",
         f"(triton_v2 LoRA) does not support {v2_lora_unsupported_mode(ctx)} yet", 30),
        (quant not in ("", "fp8", "modelopt_fp4"), "quantization", f"runs BF16, FP8 or ModelOpt NVFP4 MoE, not {quant}",
         211),
        (quant == "modelopt_fp4" and runner != "lora_marlin", "moe_runner_backend", "cannot run ModelOpt NVFP4 MoE "
         "(lora_marlin can)", 216),
        # check_server_args reads the backend after handle_a2a_moe (handled_a2a_backend): enable_waterfill's deepep,
        # ascend_tp's none.
        (handled_a2a_backend(ctx) != "none", "moe_a2a_backend", "needs moe_a2a_backend none", 221),
        (ctx.is_set("enable_eplb") or _choice(ctx, "init_expert_location", "trivial") != "trivial"
         or (_num(ctx, "ep_num_redundant_experts") or 0) > 0, "enable_eplb",
         "needs trivial expert placement (no EPLB, no redundant experts)", 234),
    ):
        if bad:
            report.refuse(dest, f"moe_runner_backend {runner} {why}.", f"fix {ctx.var(dest)}, or use another "
                          "moe_runner_backend", line)
            return


MARLIN_POLICY = "sglang/srt/lora/marlin_lora_temp/policy.py"


@rule("server.lora", shared=True, file=MARLIN_POLICY, sources=(
    f"{MARLIN_POLICY}:23",
    f"{MARLIN_POLICY}:34",
    f"{MARLIN_POLICY}:40",
    f"{MARLIN_POLICY}:51",
))
def _experimental_sgl_marlin(ctx: Context, report: Report) -> None:
    """validate_experimental_sgl_marlin_server_args (sglang/srt/lora/marlin_lora_temp/policy.py:16-55, run by
    validate_experimental_sgl_marlin, validation_hook.py:565-575, pipeline.py:300; 0.5.20-0.5.22 the same, 0.5.20 also
    refusing elastic_ep_rejoin), where moe_runner_backend is experimental_sgl_marlin as written (MXFP8 replaces a runner
    it does not run first, overrides.py:1484-1512): expert parallelism needs moe_a2a_backend none, LoRA (enable_lora,
    or lora_paths with enable_lora unset) needs lora_use_virtual_experts and lora_backend triton, and LoRA with expert
    parallelism trivial expert placement. The resolved ep_size and all-to-all backend (resolved_ep_size,
    handled_a2a_backend); nothing about expert parallelism where the ep_size is not certain. The seed-6 10,000-case
    run's refusals at policy.py:34, a file the catalog had not read (issue 36)."""
    if _choice(ctx, "moe_runner_backend", "auto") != "experimental_sgl_marlin" or _choice(ctx, "quantization", "") == "mxfp8":
        return
    ep = resolved_ep_size(ctx)
    lora = ctx.is_set("enable_lora") or (ctx.args.get("enable_lora") is None and bool(ctx.args.get("lora_paths")))
    placement = [dest for dest, bad in (
        ("init_expert_location", _choice(ctx, "init_expert_location", "trivial") != "trivial"),
        ("ep_num_redundant_experts", (_num(ctx, "ep_num_redundant_experts") or 0) != 0),
        ("enable_eplb", ctx.is_set("enable_eplb")),
        ("elastic_ep_backend", _given(ctx, "elastic_ep_backend")),
        ("enable_elastic_expert_backup", ctx.is_set("enable_elastic_expert_backup")),
        ("elastic_ep_rejoin", not added_in(ctx, "0.5.21") and ctx.is_set("elastic_ep_rejoin")),
    ) if bad]
    for bad, dest, why, line in (
        (ep is not None and ep > 1 and handled_a2a_backend(ctx) != "none", "moe_a2a_backend",
         f"with expert parallelism (ep_size {ep}) needs moe_a2a_backend none", 23),
        (lora and not ctx.is_set("lora_use_virtual_experts"), "lora_use_virtual_experts",
         "with LoRA needs lora_use_virtual_experts", 34),
        (lora and _choice(ctx, "lora_backend", "csgmv") != "triton", "lora_backend",
         f"with LoRA needs lora_backend triton, not {_choice(ctx, 'lora_backend', 'csgmv')}", 40),
        (lora and ep is not None and ep > 1 and bool(placement), placement[0] if placement else "enable_eplb",
         "with LoRA and expert parallelism needs trivial expert placement without redundancy, EPLB or elastic EP", 51),
    ):
        if bad:
            report.refuse(dest, f"moe_runner_backend experimental_sgl_marlin {why}.",
                          f"fix {ctx.var(dest)}, or use another moe_runner_backend", line)
            return


# Found by differential fuzzing (tests/conformance/differential.py): restates, exactly, a refusal of SGLang 0.5.23's
# argument handling that the fuzzer found us accepting.


@rule("lora.init", sources=(
    "sglang/srt/arg_groups/lora_hook.py:36",
))
def _lora_init(ctx: Context, report: Report) -> None:
    """check_lora_server_args (sglang/srt/arg_groups/lora_hook.py:36), which SGLang runs on every launch, LoRA or not
    (the rest of the function, :152 included, is server.lora's)."""
    per_batch = _num(ctx, "max_loras_per_batch")
    if per_batch is not None and per_batch <= 0:
        ctx.error("lora.init", "max_loras_per_batch", f"max_loras_per_batch={per_batch} must be positive; SGLang "
                  "asserts it on every launch, LoRA or not.", "remove sglang_args.max_loras_per_batch (default 8) or "
                  "set it >= 1", "sglang/srt/arg_groups/lora_hook.py:36")
