# SPDX-License-Identifier: Apache-2.0
"""Attention backends: the architecture profile's attention checks, tokenspeed_mla, FP4 KV caches and linear attention.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _AH,
    MAMBA_EXTRA_BUFFER,
    RAGGED_ENV,
    _attention_backends,
    _cc,
    _choice,
    _int,
    _num,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.profiles import (
    _REG,
    MIN_PROFILED,
    PROFILES,
    ArchProfile,
    arch_profile,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    KV4_BACKENDS,
    KV4_DTYPES,
    NVFP4_PREFILL_BACKEND,
    default_attention_backend,
    deterministic_radix_off,
    exaone_attention_backend,
    filled_attention_backend,
    linear_base_decode_backend,
    linear_decode_backend,
    linear_decode_backend_settled,
    resolved_attention_backends,
    resolved_mamba_strategy,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("server.tokenspeed_mla", until="0.5.23", sources=(
    "sglang/srt/arg_groups/overrides.py:1168-1180",
))
def _tokenspeed_mla(ctx: Context, report: Report) -> None:
    """tokenspeed_mla while it is a backend of its own (0.5.20-0.5.22; an alias of cutedsl_mla from 0.5.23):
    _mla_kv_cache_dtype_checks (sglang/srt/arg_groups/overrides.py:1168-1180 in 0.5.22, :1149-1161 in 0.5.21,
    :1263-1275 in 0.5.20) wants a Blackwell GPU and an FP8 E4M3 KV cache. kv_cache_dtype auto is refused only for
    checkpoints without KV scales (unquantized or FP8 block), where SGLang keeps the model's 16-bit dtype."""
    if "tokenspeed_mla" not in (_choice(ctx, "attention_backend", ""), _choice(ctx, "decode_attention_backend", "")):
        return
    where = "sglang/srt/arg_groups/overrides.py:1168-1180"
    cc, kv = ctx.compute_capability, _choice(ctx, "kv_cache_dtype", "auto")
    if cc is not None and cc[0] not in (10, 11, 12):
        ctx.error("server.tokenspeed_mla", "attention_backend", f"the tokenspeed_mla backend runs on Blackwell GPUs "
                  f"(SM100/SM12x) only, not compute capability {_cc(ctx)}. SGLang refuses the launch.",
                  "use another attention backend (e.g. flashinfer or triton)", where)
    elif kv != "fp8_e4m3" and (kv != "auto" or ctx.model.quant_method in ("", "fp8")):
        ctx.error("server.tokenspeed_mla", "kv_cache_dtype", f"the tokenspeed_mla backend needs kv_cache_dtype fp8_e4m3 "
                  f"in SGLang {ctx.schema.version}, not {kv}. SGLang refuses the launch.",
                  f"set {ctx.var('kv_cache_dtype')}: fp8_e4m3", where)


@rule("arch.profile",
      ids=("arch.unknown", "arch.unsupported"),
      stricter=("SGLang has no list of the GPUs it supports: on a compute capability without a profile (or older than Ampere) "
                "its kernels fail at run time, so the validator says what it did not check"))
def _arch_known(ctx: Context, report: Report) -> None:
    """A compute capability without a profile is said so, never passed in silence."""
    if ctx.compute_capability is None or ctx.compute_capability in PROFILES:
        return
    known = ", ".join(".".join(map(str, cc)) for cc in PROFILES)
    if ctx.compute_capability < MIN_PROFILED:
        ctx.error("arch.unsupported", "nvidia_gpu_compute_capability",
                  f"compute capability {_cc(ctx)} is older than Ampere (8.0): its GPUs have no bfloat16, which the "
                  "checkpoints this project serves are made of, and most of SGLang's kernels (FlashInfer, FP8 and FP4 "
                  f"MoE) are not built for it. Profiled: {known}.",
                  "serve from Ampere (8.0) or newer GPUs; if the value is a typo, set what nvidia-smi "
                  "--query-gpu=compute_cap prints", value=_cc(ctx))
        return
    ctx.warn("arch.unknown", "nvidia_gpu_compute_capability",
             f"the validator has no hardware profile for compute capability {_cc(ctx)} (profiled: {known}); the "
             "attention, MoE, quantization and KV cache rules for the GPU were NOT checked.",
             "check the value against nvidia-smi --query-gpu=compute_cap; if it is right, try the configuration on one "
             "host first (or add a profile to sglang_rules.PROFILES from SGLang's own checks)", value=_cc(ctx))


def _skip_softmax_factor(ctx: Context) -> bool:
    """Whether SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR is on as attention_hook.py:212-215 reads it: an
    EnvFloat (environ.py:1265, unset None) compared ``> 0``. A value that is no float is not judged here."""
    raw = ctx.env.get("SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR")
    try:
        return raw is not None and float(raw) > 0
    except (TypeError, ValueError):
        return False


@rule("arch.attention",
      ids=("{family}.mm_attention", "{family}.trtllm_mha_kv", "{family}.trtllm_mha_cp", "{family}.linear_attention",
           "{family}.kv_cache", "{family}.attention", "{family}.hybrid_attention",),
      sources=("sglang/srt/arg_groups/attention_hook.py:218",
               "sglang/srt/arg_groups/model_overrides/exaone.py:26-27",
               "sglang/srt/arg_groups/attention_hook.py:226-236",
               "sglang/srt/layers/attention/attention_registry.py:462-476"))
def _arch_attention(ctx: Context, report: Report) -> None:
    profile = arch_profile(ctx)
    if profile is None:
        return
    cc, fam = _cc(ctx), profile.family
    hybrid_fix = " (trtllm_mha for hybrid models)" if ctx.model.hybrid_linear_attention else ""
    for dest, backend in _attention_backends(ctx):
        refusal = profile.attention.get(backend) or (profile.mla_attention.get(backend) if ctx.model.mla else None)
        if refusal:
            ctx.error(f"{fam}.attention", dest,
                      f"{dest} {backend!r} does not work on compute capability {cc} ({profile.gpus}): {refusal.why}.",
                      "use triton or flashinfer" + hybrid_fix, refusal.source)
        elif (profile.hybrid_attention and ctx.model.hybrid_linear_attention and dest != "speculative_draft_attention_backend"
              and backend not in profile.hybrid_attention):
            ctx.error(f"{fam}.hybrid_attention", dest,
                      f"{ctx.model.architecture} mixes linear and full attention; on compute capability {cc} its full-attention "
                      f"layers run only on {', '.join(profile.hybrid_attention)}, not {backend!r} (SGLang asserts it when "
                      "it builds the attention backend, after loading the weights).",
                      "use triton (safest), flashinfer or trtllm_mha", f"{_REG}:462-476")
    # Stricter: EXAONE 4 with a sliding window and no attention_backend gets fa3 from its model override on every GPU
    # from SM80 on but SM100 (exaone_attention_backend), RTX PRO 6000, GB10 and Thor included, where FlashAttention 3 fails
    # when SGLang builds the backend; refused as a written fa3 is, where a side runs it.
    filled = exaone_attention_backend(ctx)
    refusal = profile.attention.get(filled) if filled else None
    if refusal and filled in resolved_attention_backends(ctx):
        ctx.error(f"{fam}.attention", "attention_backend",
                  f"attention_backend is unset, so SGLang's override for {ctx.model.architecture} with a "
                  f"sliding_window_pattern fills {filled!r} (model_overrides/exaone.py:26-27), which does not work on "
                  f"compute capability {cc} ({profile.gpus}): {refusal.why}.",
                  f"set {ctx.var('attention_backend')}: triton", refusal.source)
    mm = ctx.args.get("mm_attention_backend")
    if mm is not None and str(mm) in profile.mm_attention and "mm_attention_backend" in ctx.schema.arguments:
        refusal = profile.mm_attention[str(mm)]
        ctx.error(f"{fam}.mm_attention", "mm_attention_backend",
                  f"mm_attention_backend {mm!r} (the vision encoder) does not work on compute capability {cc}: {refusal.why}.",
                  "use triton_attn or sdpa, or leave it unset (SGLang picks per GPU)", refusal.source)
    # handle_attention_backend_compatibility (attention_hook.py:207-221; 0.5.20-0.5.21 :138-152, 0.5.22 :206-220)
    # reads the PREFILL side only (attention_backends_of: prefill_attention_backend over attention_backend), so a
    # decode-only trtllm_mha passes (targeted-spec-61), and refuses fp8_e4m3 KV or the skip-softmax switch
    # SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR > 0 (an EnvFloat, environ.py:1265; targeted-spec-47).
    skip_softmax = _skip_softmax_factor(ctx)
    fp8_kv = str(ctx.args.get("kv_cache_dtype") or "") == "fp8_e4m3"
    if profile.trtllm_mha_fp8_kv and resolved_attention_backends(ctx)[0] == "trtllm_mha" and (fp8_kv or skip_softmax):
        where = "sglang/srt/arg_groups/attention_hook.py:" + release_line(
            ctx, {"0.5.20": "149", "0.5.22": "217", "0.5.23": "218"})
        if fp8_kv:
            ctx.error(f"{fam}.trtllm_mha_kv", "kv_cache_dtype",
                      f"trtllm_mha with kv_cache_dtype fp8_e4m3 is not supported on compute capability {cc} "
                      "(TRTLLM FMHAv2 prefill on SM120).",
                      "use kv_cache_dtype auto (or bf16), or the triton / flashinfer backend", where)
        else:
            ctx.error(f"{fam}.trtllm_mha_kv", "attention_backend",
                      f"the trtllm_mha prefill backend with SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR="
                      f"{ctx.env.get('SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR')} (skip-softmax) is not "
                      f"supported on compute capability {cc} (TRTLLM FMHAv2 prefill on SM120); SGLang refuses the launch.",
                      "unset SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR (or set it to 0), or use "
                      "prefill_attention_backend flashinfer / triton", where)
    # attention_hook.py:228-237 reads the resolved prefill side too: attention_backend trtllm_mha under an explicit
    # prefill_attention_backend flashinfer passes (targeted-spec-68).
    if profile.trtllm_mha_cp and resolved_attention_backends(ctx)[0] == "trtllm_mha" \
            and _int(ctx, "attn_cp_size", 1) > 1:
        ctx.error(f"{fam}.trtllm_mha_cp", "attn_cp_size",
                  f"prefill context parallelism (attn_cp_size={_int(ctx, 'attn_cp_size', 1)}) with the TRTLLM MHA prefill "
                  f"backend needs SM100; compute capability {cc} has the fmha_v2 prefill path, which lacks it.",
                  "set attn_cp_size: 1, or another prefill_attention_backend", "sglang/srt/arg_groups/attention_hook.py:226-236")
    if profile.linear_flashinfer_bf16:
        _linear_flashinfer(ctx, profile)
    kv = str(ctx.args.get("kv_cache_dtype") or "")
    if kv in profile.kv_cache:
        refusal = profile.kv_cache[kv]
        ctx.error(f"{fam}.kv_cache", "kv_cache_dtype",
                  f"kv_cache_dtype {kv!r} does not work on compute capability {cc}: {refusal.why}.",
                  "use kv_cache_dtype auto, bf16 or fp8_e4m3", refusal.source)


def _linear_flashinfer(ctx: Context, profile: ArchProfile) -> None:
    """FlashInfer GDN decode / verify on SM100+ needs mamba_ssm_dtype bfloat16 (unset is refused too)."""
    if ctx.args.get("mamba_ssm_dtype") == "bfloat16":
        return
    decode_dest = "linear_attn_decode_backend" if ctx.args.get("linear_attn_decode_backend") else "linear_attn_backend"
    decode = ctx.args.get(decode_dest)
    verify = ctx.args.get("linear_attn_verify_backend")
    for dest, backend, line in ((decode_dest, decode, "333-344"), ("linear_attn_verify_backend", verify, "366-375")):
        if backend == "flashinfer":
            ctx.error(f"{profile.family}.linear_attention", dest,
                      f"{dest} flashinfer on compute capability {_cc(ctx)} (SM100 and newer) keeps the linear-attention "
                      f"state in bfloat16 and needs mamba_ssm_dtype bfloat16; it is "
                      f"{ctx.args.get('mamba_ssm_dtype') or 'unset'}.",
                      f"set {ctx.var('mamba_ssm_dtype')}: bfloat16, or use the triton linear-attention backend",
                      f"sglang/srt/arg_groups/attention_hook.py:{line}")
            return


# _mla_kv_cache_dtype_checks (sglang/srt/arg_groups/overrides.py:1203-1218): TRTLLM MLA runs fp8_e4m3, bf16 or auto
# KV caches; these dtypes are certainly none of them (the check compares the spelling: bfloat16 is refused, bf16 not).
TRTLLM_MLA_BAD_KV = ("fp8_e5m2", "mxfp8", "bfloat16", *KV4_DTYPES)


def _nvfp4_native_prefill(ctx: Context) -> bool:
    """From 0.5.21 handle_nvfp4_prefill_kv_dequant_dtype (kv_cache_hook.py:34-99) sets both backends of an nvfp4 cache
    before handle_kv4_compatibility checks them: prefill flashinfer (an FP8 E4M3 workspace) or trtllm_mha (native
    NVFP4), decode trtllm_mha, by the prefill dequant dtype (explicit, else the explicit prefill / shared backend's, else
    native on SM100). The FP8 recipe's pair differs, which SGLang lets through with a warning (kv_cache_hook.py:262-274):
    only native NVFP4 prefill reaches the backend lists. The seed-0 fuzzer's false alarm: flashmla with
    prefill_kv_cache_dequant_dtype fp8_e4m3 (issue 36). An explicit backend that selects no dtype, and native NVFP4 off
    SM100, are refused by server.kv_cache_resolved."""
    requested = _choice(ctx, "prefill_kv_cache_dequant_dtype", "auto")
    if requested == "auto":
        # The base as the hooks before fill it (filled_attention_backend): deterministic inference's flashinfer for Llama
        # on a B200 selects the FP8 workspace, not native NVFP4.
        explicit = _choice(ctx, "prefill_attention_backend", "") or filled_attention_backend(ctx) or ""
        cc = ctx.compute_capability
        by_backend = {b: d for d, b in NVFP4_PREFILL_BACKEND.items()}
        requested = by_backend.get(explicit, "") if explicit else "" if cc is None else "nvfp4" if cc[0] == 10 else "fp8_e4m3"
    return requested == "nvfp4"


@rule("kv4.attention", sources=(
    "sglang/srt/arg_groups/kv_cache_hook.py:277-316",
    "sglang/srt/arg_groups/overrides.py:1214-1217",
))
def _kv4_attention(ctx: Context, report: Report) -> None:
    """An FP4 KV cache against the attention backends SGLang resolves (kv_cache_hook.py:112-316), and the KV cache
    dtypes of TRTLLM MLA."""
    kv = ctx.args.get("kv_cache_dtype")
    if kv not in (*KV4_DTYPES, *TRTLLM_MLA_BAD_KV) or ctx.model.family == "unknown":
        return
    backend = ctx.args.get("attention_backend")
    prefill, decode = ctx.args.get("prefill_attention_backend"), ctx.args.get("decode_attention_backend")
    if prefill is not None and prefill == decode:
        backend = prefill  # sglang/srt/arg_groups/overrides.py:1127-1131
    filled = backend is None
    if filled:
        # The shared backend is filled whatever one side says (_attention_backend_default, overrides.py:1127-1140), and
        # the unset side reads it (attention_backends_of, model_override_base.py:138-152): decode flashinfer alone for
        # Llama on an RTX PRO 6000 is the pair flashinfer / flashinfer, refused with fp4_mx_block16 at :313 on every
        # release (0.5.20 :103; a grid of prefill x decode backends found it, issue 36). The base as the hooks before
        # fill it (filled_attention_backend: deterministic inference's flashinfer for Llama on a B200, refused with
        # fp4_mx_block16 at :313; device cpu's torch_native), else SGLang's default.
        backend = filled_attention_backend(ctx)
        if backend == "":
            backend = default_attention_backend(ctx)
    if "trtllm_mla" in (backend, decode) and kv in TRTLLM_MLA_BAD_KV:
        ctx.error("kv4.attention", "kv_cache_dtype",
                  f"the TRTLLM MLA attention backend runs kv_cache_dtype fp8_e4m3, bf16 or auto only, not {kv}"
                  + ("" if ctx.args.get("attention_backend") or decode else " (trtllm_mla is SGLang's choice for this "
                     "model on this GPU: the attention backend is unset)") + "; SGLang refuses it at start-up.",
                  ("write kv_cache_dtype bf16 (the spelling TRTLLM MLA takes), or use another attention backend"
                   if kv == "bfloat16" else
                   "use kv_cache_dtype fp8_e4m3 (or auto), or another attention backend (e.g. flashinfer)"),
                  "sglang/srt/arg_groups/overrides.py:1214-1217")
        return
    if kv not in KV4_DTYPES:
        return
    fa4, mla, defaulted = (prefill or backend) == "fa4", bool(ctx.model.mla), False
    if kv == "nvfp4" and added_in(ctx, "0.5.21"):
        # Both backends are trtllm_mha by then (native NVFP4 prefill), and a pair of equal backends replaces the shared
        # attention backend, the host's too (_attention_backend_default, overrides.py:1126-1131), so trtllm_mha is what
        # is checked; 0.5.20 checks the resolved backend of every FP4 cache alike (kv_cache_hook.py:40-110 there).
        if not _nvfp4_native_prefill(ctx):
            return
        fa4, checked, dest = False, "trtllm_mha", "attention_backend"
    elif fa4:
        # An unset decode side is the base as SGLang resolves it by then (resolved_attention_backends; pipeline.py:242
        # runs before handle_kv4_compatibility, :254): the seed-6 10,000-case run's MISSED fuzz-6-05813, prefill fa4 with
        # fp4_mx_block16 on Qwen3-Next on an L4, whose decode is flashinfer (kv_cache_hook.py:292).
        checked = decode or (None if filled and prefill is not None else backend) or resolved_attention_backends(ctx)[1]
        dest, defaulted = "decode_attention_backend", not decode and filled
    else:
        if (prefill or backend) != (decode or backend):
            return  # SGLang only warns about the mixed pair (kv_cache_hook.py:262-274)
        checked, dest = backend, "attention_backend"
    if checked is None:
        return
    allowed = KV4_BACKENDS[(fa4, mla)]
    if checked in allowed:
        return
    native = kv == "nvfp4" and added_in(ctx, "0.5.21")
    sides = [f"{side}_attention_backend" for side, value in (("prefill", prefill), ("decode", decode)) if value is not None]
    chosen = (" (native NVFP4 prefill sets trtllm_mha for both phases, and it replaces the shared backend)" if native else
              "" if not defaulted and (ctx.args.get(dest) or not filled) else
              f" (SGLang's default for the unset attention_backend, and the {sides[0]} you set is the same, so both "
              "phases run it)" if filled and len(sides) == 1 and not fa4 else
              " (SGLang's default here: the key is unset)")
    ctx.error("kv4.attention", "kv_cache_dtype",
              f"kv_cache_dtype {kv} ({'MLA' if mla else 'MHA'} model{', FA4 prefill' if fa4 else ''}) runs with "
              f"{dest} {' / '.join(allowed)} only; it would be {checked!r}{chosen}. SGLang refuses it at start-up.",
              "set sglang_args.prefill_kv_cache_dequant_dtype: fp8_e4m3 (the FP8 prefill workspace), or use kv_cache_dtype "
              "fp8_e4m3" if native else
              f"set sglang_args.{dest}: {allowed[0]}, or use kv_cache_dtype auto or fp8_e4m3",
              "sglang/srt/arg_groups/kv_cache_hook.py:277-316")


@rule("server.linear_attn", file=_AH, sources=(
    "sglang/srt/arg_groups/attention_hook.py:319",
    "sglang/srt/arg_groups/attention_hook.py:452",
    "sglang/srt/arg_groups/attention_hook.py:411",
    "sglang/srt/arg_groups/attention_hook.py:460",
    "sglang/srt/arg_groups/attention_hook.py:435",
    "sglang/srt/arg_groups/attention_hook.py:484",
    "sglang/srt/arg_groups/attention_hook.py:500",
    "sglang/srt/arg_groups/attention_hook.py:418",
    "sglang/srt/arg_groups/attention_hook.py:429",
    "sglang/srt/arg_groups/attention_hook.py:494",
))
def _linear_attn(ctx: Context, report: Report) -> None:
    """handle_linear_attn_backend's FlashKDA and ReplaySSM checks (attention_hook.py:317-505), which SGLang runs on
    every launch, linear-attention model or not."""
    if _choice(ctx, "linear_attn_decode_backend", "") == "flashkda":
        report.refuse("linear_attn_decode_backend", "linear_attn_decode_backend flashkda: FlashKDA is a prefill-only kernel.",
                      f"set {ctx.var('linear_attn_prefill_backend')}: flashkda instead (decode stays on triton)", 319)
        return
    decode = linear_decode_backend(ctx)
    replay, spec = ctx.is_set("enable_linear_replayssm"), ctx.is_set("enable_linear_replayssm_spec")
    if replay:
        length = _num(ctx, "linear_replayssm_cache_len")
        # Where SGLang's SM100 default may apply (decode None: mamba_ssm_dtype unset, or the GPU unknown), the decode
        # backend is flashinfer (refused here) or the base one as SGLang falls back to it (flashkda decodes on
        # triton): refused when that is neither triton nor helion. The 10,000-case fuzz run's MISSED, ptx_kda on a
        # B300 (issue 36).
        fallback = linear_base_decode_backend(ctx)
        if decode is not None and decode not in ("triton", "helion"):
            report.refuse("linear_attn_decode_backend", f"enable_linear_replayssm needs the triton (or, for KDA, helion) "
                          f"linear-attention decode backend, not {decode}.", f"set {ctx.var('linear_attn_decode_backend')}: "
                          "triton, or remove enable_linear_replayssm", 411)
        elif decode is None and fallback not in ("triton", "helion"):
            report.refuse("linear_attn_backend", f"enable_linear_replayssm needs the triton (or, for KDA, helion) "
                          f"linear-attention decode backend; here it is {fallback} (linear_attn_backend), or flashinfer "
                          "where SGLang's SM100 default applies (mamba_ssm_dtype bfloat16).",
                          f"set {ctx.var('linear_attn_decode_backend')}: triton, or remove enable_linear_replayssm", 411)
        elif resolved_mamba_strategy(ctx) in MAMBA_EXTRA_BUFFER and deterministic_radix_off(ctx) is False:
            # The resolved strategy (mamba_extra_buffer_of(resolved_view)): auto resolves to extra_buffer on the hybrid
            # models with the overlap scheduler on; the seed-0 fuzzer's MISSED on Qwen3-Next (issue 36). It reads the
            # radix cache too, which deterministic inference turned off by now on most backends (pipeline.py:240, before
            # :253; deterministic_radix_off, silent where that is not certain): the seed-17 10,000-case run's false
            # alarm fuzz-17-03739, Qwen3-Next with deterministic inference, whose unset backend becomes flashinfer.
            report.refuse("mamba_radix_cache_strategy", f"enable_linear_replayssm needs mamba_radix_cache_strategy no_buffer; "
                          f"{ctx.model.architecture} resolves it to {resolved_mamba_strategy(ctx)} here.",
                          f"set {ctx.var('mamba_radix_cache_strategy')}: no_buffer (with disable_overlap_schedule: true "
                          "if it is auto), or remove enable_linear_replayssm", 418)
        elif _choice(ctx, "disaggregation_mode", "null") != "null":
            report.refuse("disaggregation_mode", "enable_linear_replayssm is not supported with PD disaggregation yet.",
                          f"remove {ctx.var('enable_linear_replayssm')}", 429)
        elif length is not None and length < 1:
            report.refuse("linear_replayssm_cache_len", f"linear_replayssm_cache_len={length} must be at least 1.",
                          f"set {ctx.var('linear_replayssm_cache_len')} >= 1, or remove it (default 16)", 435)
    if not spec:
        return
    topk = _num(ctx, "speculative_eagle_topk")
    ragged = ctx.env.get(RAGGED_ENV, "static")
    algo = _choice(ctx, "speculative_algorithm", "").upper()
    verify = _choice(ctx, "linear_attn_verify_backend", "")
    settled = linear_decode_backend_settled(ctx)
    if topk is not None and topk != 1:
        report.refuse("speculative_eagle_topk", f"enable_linear_replayssm_spec needs a linear draft chain (speculative_eagle_topk "
                      f"1), not speculative_eagle_topk={topk}.", f"set {ctx.var('speculative_eagle_topk')}: 1, or remove "
                      "enable_linear_replayssm_spec", 452)
    elif decode is not None and decode not in ("triton", "flashinfer"):
        report.refuse("linear_attn_decode_backend", f"enable_linear_replayssm_spec needs the triton or flashinfer linear-attention "
                      f"decode backend, not {decode}.", f"set {ctx.var('linear_attn_decode_backend')}: triton", 460)
    elif decode is None and settled is not None and settled not in ("triton", "flashinfer"):
        # decode unset, mamba_ssm_dtype unset: SGLang's SM100 flashinfer default does not apply, the base backend decodes
        # (linear_decode_backend_settled). The 10,000-case fuzz run's MISSED, ptx_kda / nvidia_kda on SM100 (issue 36);
        # the check is in every release (0.5.22 :459, 0.5.21 :371, 0.5.20 :374).
        report.refuse("linear_attn_backend", f"enable_linear_replayssm_spec needs the triton or flashinfer linear-attention "
                      f"decode backend; here it is {settled} (linear_attn_backend, with linear_attn_decode_backend unset: "
                      "SGLang's SM100 flashinfer default needs mamba_ssm_dtype bfloat16, which is unset).",
                      f"set {ctx.var('linear_attn_decode_backend')}: triton, or remove enable_linear_replayssm_spec", 460)
    elif ragged != "static" and (algo not in ("DSPARK", "DFLASH") or verify not in ("triton", "nv_cutedsl")):
        report.refuse(f"sglang_env.{RAGGED_ENV}", f"enable_linear_replayssm_spec with {RAGGED_ENV}={ragged} needs DSPARK or "
                      "DFLASH and linear_attn_verify_backend triton or nv_cutedsl.",
                      f"remove sglang_env.{RAGGED_ENV} (static), or use those", 484)
    elif _choice(ctx, "disaggregation_mode", "null") == "prefill":
        report.refuse("disaggregation_mode", "enable_linear_replayssm_spec on a PD prefill server: the ring is spec-verify "
                      "scratch, which a prefill server never runs.", f"remove {ctx.var('enable_linear_replayssm_spec')}", 494)
    elif replay:
        report.refuse("enable_linear_replayssm_spec", "enable_linear_replayssm_spec and enable_linear_replayssm are mutually "
                      "exclusive (they drive the same ring with different cursors).",
                      f"remove {ctx.var('enable_linear_replayssm')} or {ctx.var('enable_linear_replayssm_spec')}", 500)


@rule("server.cutedsl_mla_prefill", file="sglang/srt/arg_groups/overrides.py", sources=(
    "sglang/srt/arg_groups/overrides.py:1241 (0.5.22 :1205, 0.5.21 :1186, 0.5.20 :1303)",
))
def _cutedsl_mla_prefill(ctx: Context, report: Report) -> None:
    """_cutedsl_prefill_backend_fill's decode-only assert (overrides.py:1233-1243) on a non-MLA model the table knows:
    SGLang asserts prefill_attention_backend is not cutedsl_mla whatever the model. server.combination (launch.py)
    refuses it for MLA and unknown models on SM100 and the hardware profiles elsewhere; a known hybrid model on a known
    SM100 GPU is refused by sm10x.hybrid_attention first. The 10,000-case fuzz run's MISSED, Llama with prefill
    cutedsl_mla on a B300 (issue 36)."""
    cc = ctx.compute_capability
    if _choice(ctx, "prefill_attention_backend", "") != "cutedsl_mla" or not ctx.model.known or ctx.model.mla:
        return
    if cc is not None and (cc[0] != 10 or ctx.model.hybrid_linear_attention):
        return
    report.refuse("prefill_attention_backend", "the CuTe DSL MLA backend decodes only; prefill_attention_backend cutedsl_mla "
                  "is refused whatever the model.", f"remove {ctx.var('prefill_attention_backend')}, or set it to another "
                  "backend (e.g. the one attention_backend names)", 1241)
