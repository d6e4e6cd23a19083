# SPDX-License-Identifier: Apache-2.0
"""Parallelism: the sizes against the declared hardware and the multi-node layout, and SGLang's parallel_hook checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _PH,
    _choice,
    _given,
    _int,
    _num,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import (
    Report,
    added_in,
    release_line,
    rule,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    MAX_GPUS_PER_HOST,
    _a2a_may_change,
    _per_node,
    attention_dp_on,
    attention_dp_width,
    capture_only,
    certain_architecture,
    deepseek_cp_attention_dp,
    dsa_prefill_cp_a2a_certain,
    dwdp_on,
    gpu_ids,
    handled_a2a_backend,
    prefill_cp_sets_moe_dense_tp,
    table_deepseek_v3,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


# The architectures SGLang's DeepSeek-family override serves (sglang/srt/arg_groups/model_overrides/deepseek_v2.py:37-50,
# the same registration in 0.5.20-0.5.22).
DEEPSEEK_CP_ARCHITECTURES = (
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
)


def cp_sizes(ctx: Context) -> tuple[int, int, int] | None:
    """(attn_cp_size, attn_dp_size, ep_size) as handle_context_parallelism checks them; None where SGLang derives them
    from what only the checkpoint's config.json tells (cp_derived, but for the MLA prefill CP of the model table's
    DeepSeek-V3 / R1 on 0.5.22 and 0.5.23: attn_dp_size x dp_size attention-DP groups, attn_cp_size = tp_size // that,
    ep_size = tp_size, deepseek_v2.py:191-212, model_override_base.py:229-247; 0.5.22's override derives the same,
    and its resolver refuses catalog-deepseek-mla-prefill-cp-moe-dp as 0.5.23's does, make conformance-release)."""
    tp, cp, attn_dp, ep = (_int(ctx, d, 1) for d in ("tp_size", "attn_cp_size", "attn_dp_size", "ep_size"))
    dp = _int(ctx, "dp_size", 1)
    if dwdp_on(ctx):
        # handle_dwdp's attn_dp_size = ep_size = dwdp_size and dp_size 1 (parallel_hook.py:466-489, pipeline.py:189),
        # before the model overrides (:225) and handle_context_parallelism (:278) read them (0.5.20 / 0.5.21: dp_size =
        # dwdp_size, which their assert divides by). The DWDP probes' MISSED: attn_cp_size 2 with dwdp_size = tp_size 4.
        attn_dp, dp, ep = _int(ctx, "dwdp_size", 1), 1, _int(ctx, "dwdp_size", 1)
    if not cp_derived(ctx):
        return cp, attn_dp, ep
    if not (added_in(ctx, "0.5.22") and table_deepseek_v3(ctx)) or dp < 1 or attn_dp < 1:
        return None
    width = attn_dp * dp
    return max(tp // width, 1), width, tp


def cp_derived(ctx: Context) -> bool:
    """enable_prefill_cp on a DeepSeek-family model: SGLang's override sets attn_cp_size (tp_size // attn_dp_size for
    MLA prefill CP, and for DSA CP unless interleave keeps an explicit one), attn_dp_size, dp_size and for MLA the
    ep_size and all-to-all backend itself (deepseek_v2.py:106-142, :191-212) before handle_context_parallelism checks
    them, so the host's sizes are not what it checks: the seed-0 fuzzer's false alarm, attn_cp_size 5 on DeepSeek-V3
    with prefill CP."""
    return ctx.is_set("enable_prefill_cp") and str(ctx.model.architecture or "") in DEEPSEEK_CP_ARCHITECTURES


@rule("parallel",
      ids=("parallel.nnodes", "parallel.dp_multinode", "parallel.dp_attn_dp", "parallel.tp_attn_dp", "parallel.gpu_ids",
           "parallel.gpus", "parallel.size", "parallel.dist_init_addr", "parallel.node_rank",),
      sources=("sglang/srt/arg_groups/validation_hook.py:179",
               "sglang/srt/arg_groups/validation_hook.py:199",
               "sglang/srt/arg_groups/parallel_hook.py:288",
               "sglang/srt/arg_groups/parallel_hook.py:326",
               "sglang/srt/arg_groups/validation_hook.py:204"))
def _parallel(ctx: Context, report: Report) -> None:
    tp, pp, dp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), _int(ctx, "dp_size", 1)
    attn_dp, nnodes, rank = _int(ctx, "attn_dp_size", 1), _int(ctx, "nnodes", 1), _int(ctx, "node_rank", 0)
    base, step = _int(ctx, "base_gpu_id", 0), _int(ctx, "gpu_id_step", 1)
    if dwdp_on(ctx):
        # handle_dwdp sets dp_size 1 and attn_dp_size = dwdp_size (parallel_hook.py:466-471, pipeline.py:189) before
        # every check below reads them (check_server_args' multi-node DP, validation_hook.py:198; handle_data_parallelism's
        # parallel_hook.py:288 and :326; 0.5.20 / 0.5.21: dp_size = dwdp_size with enable_dp_attention, which their
        # asserts exempt), and one TP group runs (resolve._per_node); dwdp_size == tp_size is its own assert
        # (server.parallel). The DWDP probes' false alarms: dp_size 2 with nnodes 2, dp_size 2 with attn_dp_size 2,
        # attn_dp_size 0 / 3 / 8, dp_size 3 on 8 GPUs, each with dwdp_size = tp_size 4.
        dp = attn_dp = 1
    for dest, value in (("tp_size", tp), ("pp_size", pp), ("dp_size", dp), ("attn_dp_size", attn_dp), ("nnodes", nnodes)):
        if value < 1:
            ctx.error("parallel.size", dest, f"{dest} must be at least 1, got {value}.", f"set {ctx.var(dest)} >= 1")
            return
    if (tp * pp) % nnodes:
        ctx.error("parallel.nnodes", "nnodes",
                  f"tp_size * pp_size = {tp * pp} is not divisible by nnodes = {nnodes}.",
                  "make tp_size * pp_size a multiple of nnodes", "sglang/srt/arg_groups/validation_hook.py:179")
        return
    if dp > 1 and nnodes > 1 and not deepseek_cp_attention_dp(ctx):  # dp_size: attention DP there (resolve.py)
        ctx.error("parallel.dp_multinode", "dp_size",
                  f"dp_size={dp} with nnodes={nnodes}: multi-node data-parallel replicas are not supported.",
                  "use attn_dp_size across nodes, or one SGLang instance per node with a router in front",
                  "sglang/srt/arg_groups/validation_hook.py:199")
    if dp > 1 and attn_dp > 1:
        ctx.error("parallel.dp_attn_dp", "attn_dp_size",
                  f"dp_size={dp} together with attn_dp_size={attn_dp}: choose data-parallel replicas or attention DP, not both.",
                  "set dp_size: 1 (attention DP inside one TP group) or attn_dp_size: 1",
                  "sglang/srt/arg_groups/parallel_hook.py:288")
    # The attention-DP width: attn_dp_size, or before 0.5.22 dp_size with enable_dp_attention (0.5.23 and the schema
    # move that spelling to attn_dp_size first), asserted to divide tp_size (parallel_hook.py:326; 0.5.22 :314, 0.5.21
    # :261 and 0.5.20 :193 on dp_size). make conformance-all's MISSED on 0.5.20: tp_size 8, dp_size 3 and
    # enable_dp_attention, which parallel.gpus had refused by counting 24 GPUs.
    width = attention_dp_width(ctx)
    if tp % width and not dwdp_on(ctx):
        dest = "attn_dp_size" if attn_dp > 1 else "dp_size"
        line = release_line(ctx, {"0.5.23": "326", "0.5.22": "314", "0.5.21": "261", "0.5.20": "193"})
        ctx.error("parallel.tp_attn_dp", dest, f"tp_size={tp} is not divisible by the attention-DP width {dest}={width}.",
                  f"pick {dest} dividing tp_size (e.g. 2, 4 or 8 for tp 8)", f"sglang/srt/arg_groups/parallel_hook.py:{line}")
    if nnodes > 1:
        if not ctx.is_set("dist_init_addr"):
            ctx.error("parallel.dist_init_addr", "sglang_args.dist_init_addr",
                      f"nnodes={nnodes} needs dist_init_addr (host:port of node rank 0) on every node.",
                      "set sglang_args.dist_init_addr: \"<rank-0 address>:<port>\"")
        if not 0 <= rank < nnodes:
            ctx.error("parallel.node_rank", "node_rank", f"node_rank={rank} is outside 0..{nnodes - 1}.",
                      f"set node_rank to this host's position (0 to {nnodes - 1})")
    elif rank != 0:
        ctx.error("parallel.node_rank", "node_rank", f"node_rank={rank} with a single node (nnodes=1).",
                  "remove node_rank, or set nnodes")
    if base < 0 or step < 1:
        ctx.error("parallel.gpu_ids", "base_gpu_id" if base < 0 else "gpu_id_step",
                  "base_gpu_id must be >= 0 and gpu_id_step >= 1.", "fix the value",
                  "sglang/srt/arg_groups/validation_hook.py:204")
        return
    if _per_node(ctx) > MAX_GPUS_PER_HOST:
        ctx.error("parallel.gpus", "tp_size",
                  f"tp_size={tp} x pp_size={pp} / nnodes={nnodes} x dp_size={dp} asks for {_per_node(ctx)} GPUs on one node, "
                  f"more than any host has (at most {MAX_GPUS_PER_HOST}).", "set the parallel sizes to the host's GPUs")
        return
    ids = gpu_ids(ctx)
    if ctx.gpu_count is not None and ids[-1] >= ctx.gpu_count:
        _gpus_overflow(ctx, {"tp_size": tp, "pp_size": pp, "dp_size": dp}, nnodes, ids)


def _gpus_overflow(ctx: Context, sizes: dict[str, int], nnodes: int, ids: list[int]) -> None:
    """parallel.gpus: name what pushes the ranks past the host's GPUs, and values that fit (never the current ones)."""
    count, per_node, base, step = ctx.gpu_count or 1, len(ids), ids[0], _int(ctx, "gpu_id_step", 1)
    fixes: dict[str, int] = {}
    if per_node <= count:  # enough GPUs: base_gpu_id / gpu_id_step place the last rank past them
        if step > 1 and per_node > 1 and (count - 1 - base) // (per_node - 1) >= 1:
            fixes["gpu_id_step"] = (count - 1 - base) // (per_node - 1)
        if base > 0 and count - 1 - (per_node - 1) * step >= 0:
            fixes["base_gpu_id"] = count - 1 - (per_node - 1) * step
        culprits = [d for d, on in (("base_gpu_id", base > 0), ("gpu_id_step", step > 1)) if on]
        fix = " or ".join(f"{d}: {v}" for d, v in fixes.items()) or "base_gpu_id: 0 and gpu_id_step: 1"
    else:  # the sizes: the factor (in rank order tp, pp, dp) whose product first exceeds the GPUs, and the largest that fits
        product, room = 1, count * nnodes
        for dest, value in sizes.items():
            if product * value > room:
                fixes[dest] = value = max(room // product, 1)
            product *= value
        culprits = list(fixes)
        fix = ", ".join(f"{d}: {v}" for d, v in fixes.items())
    layout = "tp {tp_size} x pp {pp_size}".format(**sizes) + (f" / nnodes {nnodes}" if nnodes > 1 else "") \
        + (f" x dp {sizes['dp_size']}" if sizes["dp_size"] > 1 else "")
    where = f"GPU ids {base}..{ids[-1]}" + (f" (step {step})" if step != 1 else "")
    named = " and ".join(f"{d}={_int(ctx, d, 0)}" for d in culprits)
    ctx.error("parallel.gpus", culprits[0],
              f"{layout} needs {per_node} GPU(s) on this node ({where}), but the host has nvidia_gpu_count={count}: "
              f"{named} {'pushes' if len(culprits) == 1 else 'push'} it past them.",
              f"set {fix} to fit {count} GPU(s), or correct nvidia_gpu_count / base_gpu_id / gpu_id_step if they are wrong")


@rule("server.parallel", shared=True, file=_PH, sources=(
    "sglang/srt/arg_groups/parallel_hook.py:152",
    "sglang/srt/arg_groups/parallel_hook.py:128",
    "sglang/srt/arg_groups/parallel_hook.py:244",
    "sglang/srt/arg_groups/parallel_hook.py:250",
    "sglang/srt/arg_groups/parallel_hook.py:252",
    "sglang/srt/arg_groups/parallel_hook.py:159-164",
    "sglang/srt/arg_groups/parallel_hook.py:172",
    "sglang/srt/arg_groups/parallel_hook.py:267",
    "sglang/srt/arg_groups/parallel_hook.py:178",
    "sglang/srt/arg_groups/parallel_hook.py:269",
    "sglang/srt/arg_groups/parallel_hook.py:444",
    "sglang/srt/arg_groups/overrides.py:1432",
))
def _parallel_launch(ctx: Context, report: Report) -> None:
    """Context parallelism, decode context parallelism and DWDP (parallel_hook.py), on the explicit sizes."""
    tp, pp, attn_dp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), _int(ctx, "attn_dp_size", 1)
    cp, moe_dp, dcp, dwdp = (_int(ctx, d, 1) for d in ("attn_cp_size", "moe_dp_size", "dcp_size", "dwdp_size"))
    sizes = cp_sizes(ctx)
    if sizes is not None:
        cp, attn_dp = sizes[0], sizes[1]
    if ctx.is_set("enable_prefill_cp") and not _given(ctx, "cp_strategy"):
        report.refuse("cp_strategy", "enable_prefill_cp needs cp_strategy.", f"set {ctx.var('cp_strategy')} (e.g. interleave)", 152)
    elif ctx.is_set("enable_prefill_cp") and _choice(ctx, "cp_strategy", "") == "zigzag" and \
            certain_architecture(ctx) == "DeepseekV32ForCausalLM":
        # handle_context_parallelism's DeepSeek-V3.2 gate, on hf_config.architectures[0] (parallel_hook.py:123-131;
        # 0.5.22 :122, 0.5.21 :78, 0.5.20 :50): only where the architecture is certain (certain_architecture).
        report.refuse("cp_strategy", "DeepSeek-V3.2 (DeepseekV32ForCausalLM) prefill context parallelism has no "
                      "cp_strategy zigzag.", f"set {ctx.var('cp_strategy')}: interleave",
                      release_line(ctx, {"0.5.23": "128", "0.5.22": "122", "0.5.21": "78", "0.5.20": "50"}))
    # DeepSeek-V4's hook derives attn_cp_size itself (deepseek_v4_hook.py:220), and so does the DeepSeek family's
    # prefill CP (cp_derived), so only known other models are checked.
    if not added_in(ctx, "0.5.22") and not dwdp_on(ctx):  # tp_size % (dp_size * attn_cp_size) (0.5.21 parallel_hook.py:108-113)
        attn_dp = _int(ctx, "dp_size", 1)
    if cp > 1 and tp >= 1 and attn_dp >= 1 and ctx.model.known and "DeepseekV4" not in str(ctx.model.architecture or "") \
            and sizes is not None:
        if tp % cp or tp % (attn_dp * cp):
            report.refuse("attn_cp_size", f"tp_size={tp} must be divisible by attn_dp_size x attn_cp_size = {attn_dp} x {cp}"
                          + ("." if added_in(ctx, "0.5.22") else " (dp_size x attn_cp_size in this release)."),
                          f"set {ctx.var('attn_cp_size')} so that attn_dp_size x attn_cp_size divides tp_size", "159-164")
    if moe_dp > 1 and dwdp <= 1 and tp >= 1:  # DWDP resets moe_dp_size to 1 (parallel_hook.py:493)
        if tp % moe_dp:
            report.refuse("moe_dp_size", f"tp_size={tp} is not divisible by moe_dp_size={moe_dp}.",
                          f"set {ctx.var('moe_dp_size')} to a divisor of tp_size", 172)
        elif pp != 1:
            report.refuse("moe_dp_size", f"moe_dp_size={moe_dp} (context parallelism) does not work with pp_size={pp}.",
                          "set pp_size: 1 (use tp_size), or moe_dp_size: 1", 178)
    if dcp < 1:
        report.refuse("dcp_size", f"dcp_size={dcp} must be at least 1.", f"set {ctx.var('dcp_size')} >= 1, or remove it", 244)
        return
    comm = _choice(ctx, "dcp_comm_backend", "")
    if added_in(ctx, "0.5.22") and dcp > 1 and ctx.is_set("enable_prefill_cp"):
        report.refuse("dcp_size", "dcp_size > 1 does not work with enable_prefill_cp.",
                      f"remove {ctx.var('enable_prefill_cp')} or set dcp_size: 1", 250)
    if comm in ("a2a", "fi_a2a") and dcp <= 1:
        report.refuse("dcp_comm_backend", f"dcp_comm_backend {comm} needs dcp_size > 1.",
                      f"set {ctx.var('dcp_size')} > 1, or remove {ctx.var('dcp_comm_backend')}", 252)
    elif ctx.is_set("dcp_replicate_q_proj") and dcp <= 1:
        report.refuse("dcp_replicate_q_proj", "dcp_replicate_q_proj needs dcp_size > 1.",
                      f"set {ctx.var('dcp_size')} > 1, or remove {ctx.var('dcp_replicate_q_proj')}", 267)
    elif ctx.is_set("dcp_replicate_q_proj") and comm not in ("", "a2a", "fi_a2a"):
        report.refuse("dcp_replicate_q_proj", f"dcp_replicate_q_proj applies to the a2a / fi_a2a DCP backends, not {comm}.",
                      f"set {ctx.var('dcp_comm_backend')}: a2a (or leave it unset), or remove dcp_replicate_q_proj", 269)
    if dwdp > 1:
        for bad, dest, why, line in (
            (dwdp != tp, "dwdp_size", f"dwdp_size={dwdp} must equal tp_size={tp}", 441),
            (_choice(ctx, "disaggregation_mode", "null") not in ("null", "prefill"), "disaggregation_mode",
             "DWDP runs without PD disaggregation or on a prefill server, not on a decode server", 444),
            (ctx.is_set("enable_eplb"), "enable_eplb", "DWDP does not work with enable_eplb", 448),
            # enable_return_aux_hidden_states resets the algorithm to None first (resolve.capture_only, pipeline.py:94):
            # the DWDP probes' false alarm, EAGLE3 as the capture convention with dwdp_size = tp_size 4.
            (_given(ctx, "speculative_algorithm") and not capture_only(ctx), "speculative_algorithm",
             "DWDP does not support speculative decoding", 451),
            (pp != 1, "pp_size", "DWDP needs pp_size 1", 454),
            (ctx.is_set("enable_two_batch_overlap"), "enable_two_batch_overlap", "DWDP does not support two-batch overlap",
             455),
        ):
            if bad:
                report.refuse(dest, why + ".", f"fix {ctx.var(dest)}, or set dwdp_size: 1", line)
                break
        else:
            if ctx.args.get("enable_tp_lm_head_all_to_all") is True:
                # handle_dwdp's enable_dp_lm_head (parallel_hook.py:475-479), which _tp_lm_head_all_to_all_default then
                # refuses next to enable_tp_lm_head_all_to_all (overrides.py:1432, run by handle_data_parallelism,
                # pipeline.py:274); launch._features' check reads the host's enable_dp_lm_head.
                report.error("enable_tp_lm_head_all_to_all", "enable_tp_lm_head_all_to_all with DWDP: handle_dwdp turns "
                             "enable_dp_lm_head on, and the TP-sharded LM head all-to-all is incompatible with it. SGLang "
                             "refuses the launch.", f"remove {ctx.var('enable_tp_lm_head_all_to_all')}, or set dwdp_size: 1",
                             "sglang/srt/arg_groups/overrides.py:" + release_line(
                                 ctx, {"0.5.23": "1432", "0.5.22": "1395", "0.5.21": "1372", "0.5.20": "1491"}))


@rule("server.parallel", shared=True, file=_PH, sources=(
    "sglang/srt/arg_groups/parallel_hook.py:531",
    "sglang/srt/arg_groups/parallel_hook.py:538",
    "sglang/srt/arg_groups/parallel_hook.py:547",
    "sglang/srt/arg_groups/parallel_hook.py:551",
    "sglang/srt/arg_groups/parallel_hook.py:555",
    "sglang/srt/arg_groups/parallel_hook.py:561",
    "sglang/srt/arg_groups/parallel_hook.py:565",
    "sglang/srt/arg_groups/parallel_hook.py:567",
    "sglang/srt/arg_groups/parallel_hook.py:570",
    "sglang/srt/arg_groups/parallel_hook.py:578",
    "sglang/srt/arg_groups/parallel_hook.py:621",
    "sglang/srt/arg_groups/parallel_hook.py:624",
    "sglang/srt/arg_groups/parallel_hook.py:627",
    "sglang/srt/arg_groups/parallel_hook.py:630",
    "sglang/srt/arg_groups/parallel_hook.py:666",
    "sglang/srt/arg_groups/parallel_hook.py:677",
))
def _elastic_ep_args(ctx: Context, report: Report) -> None:
    """handle_elastic_ep's argument checks that hold with or without an elastic-EP backend (parallel_hook.py:546-570;
    :399-422 in 0.5.20, :452-475 in 0.5.21, :524-547 in 0.5.22): the join mode and max_ep_size need a backend (any value
    of elastic_ep_backend counts, even none, which SGLang compares with None), a scale joiner is node rank 1 at a positive
    rank offset, and a rank offset is for scale joiners. The project does not deploy elastic EP; these refuse the
    arguments set without it (the seed-0 fuzzer's MISSED with max_ep_size alone, issue 36)."""
    backend, mode = _given(ctx, "elastic_ep_backend"), _choice(ctx, "ep_join_mode", "")
    offset, most = _int(ctx, "ep_join_rank_offset", 0), _num(ctx, "max_ep_size")
    # First under an elastic-EP backend (parallel_hook.py:523-538; 0.5.22 :500-515, 0.5.21 :428-443, 0.5.20 :375-390):
    # with enable_eplb the EPLB algorithm must be auto (resolved to elasticity_aware) or elasticity_aware(_hierarchical),
    # and pp_size must be 1, whether or not the deployment scales up.
    algorithm = _choice(ctx, "eplb_algorithm", "auto")
    for bad, dest, why, lines in (
        (backend and ctx.is_set("enable_eplb")
         and algorithm not in ("auto", "elasticity_aware", "elasticity_aware_hierarchical"), "eplb_algorithm",
         f"elastic EP with enable_eplb needs eplb_algorithm auto, elasticity_aware or elasticity_aware_hierarchical, "
         f"not {algorithm}", {"0.5.23": "531", "0.5.22": "508", "0.5.21": "436", "0.5.20": "383"}),
        (backend and _int(ctx, "pp_size", 1) != 1, "pp_size", "elastic EP needs pp_size 1",
         {"0.5.23": "538", "0.5.22": "515", "0.5.21": "443", "0.5.20": "390"}),
    ):
        if bad:
            report.refuse(dest, why + ".", f"fix {ctx.var(dest)}, or remove {ctx.var('elastic_ep_backend')} (the project "
                          "does not deploy elastic expert parallelism)", release_line(ctx, lines))
            return
    for bad, dest, why, line in (
        (bool(mode) and not backend, "ep_join_mode", "elastic_ep_join_mode needs elastic_ep_backend", 547),
        (mode == "scale" and _int(ctx, "node_rank", 0) != 1, "node_rank", "an elastic-EP scale joiner runs as node_rank 1",
         551),
        (mode == "scale" and offset <= 0, "ep_join_rank_offset", "an elastic-EP scale joiner needs elastic_ep_join_rank_"
         "offset > 0 (the current EP size)", 555),
        (offset != 0 and mode != "scale", "ep_join_rank_offset", "elastic_ep_join_rank_offset is for elastic_ep_join_mode "
         "scale only", 561),
        (offset < 0, "ep_join_rank_offset", "elastic_ep_join_rank_offset must be >= 0", 565),
        (most is not None and not backend, "max_ep_size", "max_ep_size needs elastic_ep_backend", 567),
        (most is not None and most <= 0, "max_ep_size", "max_ep_size must be positive", 570),
    ):
        if bad:
            report.refuse(dest, why + ".", f"remove {ctx.var(dest)} (the project does not deploy elastic expert parallelism)",
                          line)
            return
    _elastic_ep_scale_up(ctx, report, backend=backend, mode=mode, most=most)


def _elastic_ep_scale_up(ctx: Context, report: Report, *, backend: bool, mode: str, most: float | None) -> None:
    """handle_elastic_ep's runtime scale-up checks (parallel_hook.py:572-680; :424-494 in 0.5.20, :477-547 in 0.5.21,
    :549-619 in 0.5.22): an elastic-EP backend with max_ep_size above tp_size is a scale-up deployment, which SGLang
    allows with the mooncake backend only, one tokenizer worker, no Ray, no elastic expert backup, a positive scale
    timeout, and (on the primary) elastic_ep_initial_size equal to tp_size; elastic_ep_initial_size is for scale-up
    deployments only. Each is an assert on the arguments themselves; the topology checks that need the resolved
    attention-CP size (:594-619) and the CUDA-graph ones (:692-721) are left to SGLang. The seed-0 fuzzer's MISSED:
    elastic_ep_backend nixl with max_ep_size 20 on 8 GPUs (issue 36)."""
    tp = _int(ctx, "tp_size", 1)
    active = backend and most is not None and most > tp
    initial = _num(ctx, "elastic_ep_initial_size")
    if initial is not None and not active:
        report.refuse("elastic_ep_initial_size", "elastic_ep_initial_size is for an elastic-EP scale-up deployment "
                      f"(elastic_ep_backend with max_ep_size above tp_size={tp}) only.",
                      f"remove {ctx.var('elastic_ep_initial_size')}", 578)
        return
    if not active:
        return
    timeout = _num(ctx, "elastic_ep_scale_timeout")
    for bad, dest, why, line in (
        (timeout is not None and timeout <= 0, "elastic_ep_scale_timeout", "elastic_ep_scale_timeout must be above zero",
         621),
        (_int(ctx, "tokenizer_worker_num", 1) != 1, "tokenizer_worker_num", "elastic-EP runtime scale-up needs "
         "tokenizer_worker_num 1", 624),
        (ctx.is_set("use_ray"), "use_ray", "elastic-EP runtime scale-up does not support use_ray", 627),
        (ctx.is_set("enable_elastic_expert_backup"), "enable_elastic_expert_backup", "elastic-EP runtime scale-up does "
         "not support enable_elastic_expert_backup", 630),
        (mode != "scale" and initial is not None and initial != tp, "elastic_ep_initial_size", f"the primary's "
         f"elastic_ep_initial_size must equal its tp_size ({tp})", 666),
        (_choice(ctx, "elastic_ep_backend", "") != "mooncake", "elastic_ep_backend", "elastic-EP runtime scale-up "
         f"(max_ep_size {most} above tp_size {tp}) needs elastic_ep_backend mooncake, not "
         f"{ctx.args.get('elastic_ep_backend')}", 677),
    ):
        if bad:
            report.refuse(dest, why + ".", f"remove {ctx.var('max_ep_size')} and {ctx.var('elastic_ep_backend')} (the "
                          "project does not deploy elastic expert parallelism)", line)
            return


@rule("parallel.elastic_ep", stricter=(
    "an elastic-EP runtime scale-up with the mooncake backend (max_ep_size above tp_size): the project installs no "
    "Mooncake transfer engine and does not deploy elastic expert parallelism; SGLang's further checks of a scale-up "
    "(parallel_hook.py:594-747: the attention topology, attention DP with a DP LM head, the CUDA-graph backends) read "
    "the resolved attention-CP size and CUDA-graph config, and a configuration that passes them needs the engine at "
    "run time"))
def _elastic_ep_deploy(ctx: Context, report: Report) -> None:
    """Refuses what _elastic_ep_scale_up leaves: a mooncake scale-up deployment (stricter: see the rule's reason)."""
    most = _num(ctx, "max_ep_size")
    if _choice(ctx, "elastic_ep_backend", "") == "mooncake" and most is not None and most > _int(ctx, "tp_size", 1):
        report.error("elastic_ep_backend", f"an elastic-EP runtime scale-up (elastic_ep_backend mooncake, max_ep_size {most} "
                     f"above tp_size {_int(ctx, 'tp_size', 1)}) is not deployed by this project: it installs no Mooncake "
                     "transfer engine, and SGLang's own scale-up checks need attention DP, a DP LM head and the prefill CUDA "
                     "graph off (parallel_hook.py:594-747).",
                     f"remove {ctx.var('max_ep_size')} and {ctx.var('elastic_ep_backend')}")


MUSE_SPARK = "MuseSparkForConditionalGeneration"  # MUSE_SP_ARCHITECTURES, sglang/srt/layers/layernorm_sp.py:53


@rule("server.layernorm_sp", sources=(
    "sglang/srt/arg_groups/layernorm_sp_hook.py",
))
def _layernorm_sp(ctx: Context, report: Report) -> None:
    """handle_layernorm_sp / validate_layernorm_sp (layernorm_sp_hook.py:15-190), the checks that need no model."""
    where = "sglang/srt/arg_groups/layernorm_sp_hook.py"
    if not ctx.is_set("enable_layernorm_sp"):
        if added_in(ctx, "0.5.23") and ctx.is_set("enable_megamoe_for_layernorm_sp"):
            ctx.error("server.layernorm_sp", "enable_megamoe_for_layernorm_sp", "enable_megamoe_for_layernorm_sp needs "
                      "enable_layernorm_sp; SGLang refuses it alone.", f"set {ctx.var('enable_layernorm_sp')}: true, or "
                      "remove enable_megamoe_for_layernorm_sp", f"{where}:25")
        return
    algo = str(ctx.args.get("speculative_algorithm") or "").upper() if _given(ctx, "speculative_algorithm") else ""
    arch = ctx.model.architecture if ctx.model.known else None
    certain = certain_architecture(ctx)
    for bad, dest, why, line in (
        # 0.5.23's validate_layernorm_sp checks the architecture first (layernorm_sp_hook.py:128-134): the MegaMoE
        # variant is Muse Spark's, SP itself Muse Spark's and Qwen3ForCausalLM's (SP_SUPPORTED_ARCHITECTURES,
        # sglang/srt/layers/layernorm_sp.py:53-54). Refused where the architecture is certain (certain_architecture),
        # the preflight's for other checkpoints. The seed-5 10,000-case run's MISSED fuzz-5-02701: Llama with tp_size 7.
        (added_in(ctx, "0.5.23") and certain is not None and certain != MUSE_SPARK and
         ctx.is_set("enable_megamoe_for_layernorm_sp"), "enable_megamoe_for_layernorm_sp",
         f"with enable_megamoe_for_layernorm_sp runs Muse Spark only, not {certain}", 128),
        (added_in(ctx, "0.5.23") and certain is not None and certain not in (MUSE_SPARK, "Qwen3ForCausalLM"),
         "enable_layernorm_sp", f"runs Muse Spark and Qwen3ForCausalLM only, not {certain}", "130-134"),
        # Before 0.5.23 SP_SUPPORTED_ARCHITECTURES is Qwen3ForCausalLM alone (sglang/srt/layers/layernorm_sp.py:53),
        # checked first (layernorm_sp_hook.py:45-49 in 0.5.22, :42-46 in 0.5.20 and 0.5.21); 0.5.23 adds Muse Spark,
        # whose branch reads the checkpoint's config.json (the on-host preflight).
        (not added_in(ctx, "0.5.23") and arch is not None and arch != "Qwen3ForCausalLM", "enable_layernorm_sp",
         f"runs Qwen3ForCausalLM only in this release, not {arch}", "45-49 (0.5.22; 0.5.20, 0.5.21 :42-46)"),
        (_int(ctx, "tp_size", 1) <= 1, "tp_size", "needs tp_size > 1 (a sequence to shard)", 136),
        (attention_dp_on(ctx), "attn_dp_size", "does not work with attention DP", 173),
        (added_in(ctx, "0.5.23") and algo not in ("", "DFLASH"), "speculative_algorithm",
         "supports speculative decoding only with Muse Spark DFLASH", 181),
        # Before 0.5.23 no speculative decoding at all (layernorm_sp_hook.py:61-62 in 0.5.22, :58-59 in 0.5.20 and 0.5.21).
        (algo and not added_in(ctx, "0.5.23"), "speculative_algorithm", "does not support speculative decoding",
         "61-62 (0.5.22; 0.5.20, 0.5.21 :58-59)"),
        (added_in(ctx, "0.5.22") and _int(ctx, "pp_size", 1) > 1, "pp_size", "does not work with pipeline parallelism",
         187),
    ):
        if bad:
            ctx.error("server.layernorm_sp", dest, f"enable_layernorm_sp {why}; SGLang refuses the launch.",
                      f"fix {ctx.var(dest)}, or remove {ctx.var('enable_layernorm_sp')}", f"{where}:{line}")
            return


@rule("tbo.attention_dp", sources=(
    "sglang/srt/arg_groups/validation_hook.py:756-771",
    "sglang/srt/arg_groups/validation_hook.py:768",
))
def _two_batch_overlap(ctx: Context, report: Report) -> None:
    """check_two_batch_overlap (sglang/srt/arg_groups/validation_hook.py:756-771)."""
    if not ctx.is_set("enable_two_batch_overlap") or _int(ctx, "attn_dp_size", 1) > 1:
        return
    if _a2a_may_change(ctx) and not (dsa_prefill_cp_a2a_certain(ctx) and _int(ctx, "dp_size", 1) <= 1
                                     and not ctx.is_set("enable_dp_attention")):
        # A DSA-by-override model's prefill CP is certain (deepep for zigzag, else the host's backend:
        # dsa_prefill_cp_a2a_certain), and its override sets attn_dp_size = attn_dp_size x dp_size
        # (context_parallel_attn_dp_size, model_override_base.py:229-247; deepseek_v2.py:110-114), which dp_size <= 1
        # keeps at 1: dsa-override-resolved-cp-interleave-tbo, refused at :768, was MISSED. 0.5.20 / 0.5.21 refuse it
        # too (validation_hook.py:493 / :533, probed), though their override declares enable_dp_attention
        # (deepseek_v2.py:94 / :87); a written enable_dp_attention is left to them.
        return
    # As check_server_args reads it, after handle_a2a_moe (handled_a2a_backend: megamoe from the runner, waterfill's
    # deepep, ascend_tp's none).
    if handled_a2a_backend(ctx) != "none":
        return
    ctx.error("tbo.attention_dp", "enable_two_batch_overlap",
              "two-batch overlap without an expert-parallel all-to-all backend (moe_a2a_backend none) needs attention "
              "data parallelism; SGLang refuses it at start-up.",
              "set sglang_args.attn_dp_size > 1, or a moe_a2a_backend (e.g. deepep), or remove "
              f"{ctx.var('enable_two_batch_overlap')}",
              "sglang/srt/arg_groups/validation_hook.py:768")


@rule("parallel.moe_dense_tp", sources=(
    "sglang/srt/arg_groups/validation_hook.py:207-211",
    "sglang/srt/arg_groups/validation_hook.py:207",
))
def _moe_dense_tp(ctx: Context, report: Report) -> None:
    """check_server_args (sglang/srt/arg_groups/validation_hook.py:207-211). handle_dwdp sets moe_dense_tp_size 1 before
    it (parallel_hook.py:480-484, pipeline.py:189; dwdp_on): the DWDP probes' false alarm, moe_dense_tp_size 2 with
    dwdp_size = tp_size 4. So does DeepSeek's prefill CP override (resolve.prefill_cp_sets_moe_dense_tp)."""
    dense, tp = ctx.args.get("moe_dense_tp_size"), _int(ctx, "tp_size", 1)
    if dense is None or isinstance(dense, bool) or dense in (1, tp) or dwdp_on(ctx) or prefill_cp_sets_moe_dense_tp(ctx):
        return
    ctx.error("parallel.moe_dense_tp", "moe_dense_tp_size",
              f"moe_dense_tp_size={dense} must be 1 or tp_size ({tp}); SGLang refuses other values.",
              f"set sglang_args.moe_dense_tp_size: 1 (or {tp}), or remove it", "sglang/srt/arg_groups/validation_hook.py:207")


SHARED_EXPERTS_A2A = ("deepep", "megamoe", "mooncake", "ascend_fuseep", "mori")  # parallel_hook.py:227-233
SHARED_EXPERTS_ARCHITECTURE = "KimiK3ForConditionalGeneration"  # parallel_hook.py:225 (0.5.22 :219, 0.5.21 :177)


def _moe_dp_sizes_known(ctx: Context) -> bool:
    """The explicit sizes are what SGLang checks: a known model other than DeepSeek-V4 (which derives attn_cp_size
    itself), with no all-to-all backend SGLang may still change, and no DeepSeek-family prefill CP (cp_derived)."""
    return ctx.model.known and "DeepseekV4" not in str(ctx.model.architecture or "") and not _a2a_may_change(ctx) \
        and not cp_derived(ctx)


@rule("server.parallel", shared=True, file=_PH, sources=(
    "sglang/srt/arg_groups/parallel_hook.py:170-192",
    "sglang/srt/arg_groups/parallel_hook.py:175",
    "sglang/srt/arg_groups/parallel_hook.py:181",
    "sglang/srt/arg_groups/parallel_hook.py:190",
))
def _parallel_moe_dp(ctx: Context, report: Report) -> None:
    """handle_context_parallelism's MoE-DP sizes (parallel_hook.py:170-192), on the explicit sizes of known models
    other than DeepSeek-V4 (which derives attn_cp_size itself)."""
    moe_dp, dwdp = _int(ctx, "moe_dp_size", 1), _int(ctx, "dwdp_size", 1)
    given_cp = _int(ctx, "attn_cp_size", 1)
    # moe_dp_size below 1 never equals the attn_cp_size SGLang checks (1 or more wherever SGLang derives it; the host's
    # otherwise), whatever the model: the seed-0 fuzzer's MISSED with moe_dp_size -1 (issue 36).
    if moe_dp < 1 and dwdp <= 1 and (moe_dp != given_cp or cp_derived(ctx)
                                     or "DeepseekV4" in str(ctx.model.architecture or "")):
        report.refuse("moe_dp_size", f"moe_dp_size={moe_dp} differs from attn_cp_size, which only moe_dp_size 1 allows.",
                      f"set {ctx.var('moe_dp_size')}: 1, or remove it", 190)
        return
    sizes = cp_sizes(ctx)
    if sizes is None and not added_in(ctx, "0.5.22") and cp_derived(ctx) and table_deepseek_v3(ctx) and \
            _int(ctx, "dp_size", 1) >= 1:
        # 0.5.20 / 0.5.21's MLA prefill CP: attn_cp_size = tp_size // dp_size, ep_size = tp_size (model_overrides/
        # deepseek_v2.py:163-186 in 0.5.20, :156-179 in 0.5.21); make conformance-all's MISSED on
        # catalog-deepseek-mla-prefill-cp-moe-dp there (parallel_hook.py:96 in 0.5.20, :124 in 0.5.21).
        tp = _int(ctx, "tp_size", 1)
        sizes = (max(tp // _int(ctx, "dp_size", 1), 1), _int(ctx, "dp_size", 1), tp)
    if not (ctx.model.known and "DeepseekV4" not in str(ctx.model.architecture or "") and sizes is not None) or \
            (_a2a_may_change(ctx) and not cp_derived(ctx)):  # MLA prefill CP sets the all-to-all backend itself
        return
    tp, cp, ep = _int(ctx, "tp_size", 1), sizes[0], sizes[2]
    if moe_dp > 1 and dwdp <= 1 and tp >= 1 and tp % moe_dp == 0:  # DWDP resets moe_dp_size to 1 (parallel_hook.py:493)
        if ep * moe_dp > tp:
            report.refuse("ep_size", f"ep_size x moe_dp_size = {ep} x {moe_dp} exceeds tp_size={tp}.",
                          f"lower {ctx.var('ep_size')} or moe_dp_size", 175)
        elif ep > 1 and ep * moe_dp != tp:
            report.refuse("ep_size", f"ep_size x moe_dp_size = {ep} x {moe_dp} must equal tp_size={tp} when ep_size > 1.",
                          f"set {ctx.var('ep_size')}: {tp // moe_dp}, or 1", 181)
    if moe_dp > 1 and dwdp <= 1 and cp != moe_dp:
        report.refuse("moe_dp_size", f"attn_cp_size={cp} differs from moe_dp_size={moe_dp}, which only moe_dp_size 1 allows.",
                      f"set {ctx.var('moe_dp_size')}: {cp} (= attn_cp_size), or 1", 190)


@rule("server.parallel", since="0.5.21", shared=True, file=_PH, sources=(
    "sglang/srt/arg_groups/parallel_hook.py:203-237",
    "sglang/srt/arg_groups/parallel_hook.py:216",
    "sglang/srt/arg_groups/parallel_hook.py:226 (0.5.22 :220, 0.5.21 :178)",
    "sglang/srt/arg_groups/parallel_hook.py:234",
    "sglang/srt/runtime_context.py:76",
))
def _shared_experts_tp(ctx: Context, report: Report) -> None:
    """handle_shared_experts_tp (parallel_hook.py:203-237, new in 0.5.21). The attention TP size it divides
    (derive_attn_tp_size, runtime_context.py:73-76: tp_size // attn_dp_size // attn_cp_size) reads the host's sizes
    wherever no override derives them (a known model but DeepSeek-V4, no DeepSeek-family prefill CP: cp_derived), also
    where DeepSeek's CP override may still change the all-to-all backend (_a2a_may_change, which only the backend check
    waits for): the seed-4 10,000-case run's MISSED fuzz-4-04568, attn_cp_size 5 = tp_size on DeepSeek-V3 (attention TP
    size 1, shared_experts_tp_size 5). Past the divisor, only Kimi-K3 passes (:226, 0.5.22 :220, 0.5.21 :178), whatever
    the sizes and the backend: refused wherever the architecture is certain (certain_architecture: the model
    table's, or json_model_override_args' architectures), the preflight's elsewhere; DeepSeek-V3 with attn_cp_size 5,
    tp_size 5 and shared_experts_tp_size 1 (a divisor), which the seed-4 run's re-judge left alone."""
    size = _num(ctx, "shared_experts_tp_size")
    if size is None:
        return
    if ctx.model.known and "DeepseekV4" not in str(ctx.model.architecture or "") and not cp_derived(ctx):
        tp, attn_dp, cp = _int(ctx, "tp_size", 1), attention_dp_width(ctx), _int(ctx, "attn_cp_size", 1)
        if cp == 0:
            # derive_attn_tp_size divides by attn_cp_size before anything checks it (runtime_context.py:76, 0.5.22 the
            # same; 0.5.21 derive_attention_widths, :78): SGLang fails with a ZeroDivisionError (the catalog's implicit
            # entry).
            report.error("attn_cp_size", "attn_cp_size=0 with shared_experts_tp_size: the attention TP size divides by "
                         "it (a ZeroDivisionError). SGLang refuses the launch.",
                         f"set {ctx.var('attn_cp_size')} >= 1 (or remove it)",
                         "sglang/srt/runtime_context.py:76" if added_in(ctx, "0.5.22") else "sglang/srt/runtime_context.py:78")
            return
        attn_tp = tp // attn_dp // cp if attn_dp >= 1 and cp >= 1 else None
        if attn_tp is not None and (size < 1 or attn_tp % size):
            report.refuse("shared_experts_tp_size", f"shared_experts_tp_size={size} must be a positive divisor of the "
                          f"attention TP size ({attn_tp} = tp_size / attn_dp_size / attn_cp_size).",
                          f"set {ctx.var('shared_experts_tp_size')} to a divisor of {attn_tp}, or remove it", 216)
            return
    arch = certain_architecture(ctx)
    if arch is not None and arch != SHARED_EXPERTS_ARCHITECTURE:
        report.refuse("shared_experts_tp_size", f"shared_experts_tp_size is only supported for Kimi-K3 "
                      f"({SHARED_EXPERTS_ARCHITECTURE}); the model is {arch}.",
                      f"remove {ctx.var('shared_experts_tp_size')}",
                      release_line(ctx, {"0.5.23": "226", "0.5.22": "220", "0.5.21": "178"}))
        return
    if ctx.model.known and "DeepseekV4" not in str(ctx.model.architecture or "") and not cp_derived(ctx) and \
            attention_dp_width(ctx) >= 1 and _int(ctx, "attn_cp_size", 1) >= 1 and not _a2a_may_change(ctx) and \
            handled_a2a_backend(ctx) not in SHARED_EXPERTS_A2A:  # after handle_a2a_moe: enable_waterfill's deepep counts
        report.refuse("shared_experts_tp_size", "shared_experts_tp_size needs an expert-parallel all-to-all backend "
                      "(deepep, megamoe, mooncake or mori).",
                      f"set {ctx.var('moe_a2a_backend')}: deepep, or remove {ctx.var('shared_experts_tp_size')}", 234)
