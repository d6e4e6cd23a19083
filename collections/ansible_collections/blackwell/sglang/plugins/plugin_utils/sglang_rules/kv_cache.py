# SPDX-License-Identifier: Apache-2.0
"""KV cache and memory: KV cache dtypes and their backends, chunked prefill against the page size, unified
memory and the mamba radix cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _KVH,
    MAMBA_EXTRA_BUFFER,
    _cc,
    _choice,
    _given,
    _int,
    _json_arg,
    _num,
    _spec_values,
    env_true,
    nextn_as_eagle,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    NVFP4_PREFILL_BACKEND,
    QWEN35_OVERRIDE_PAGE,
    adaptive_stays_on,
    attention_dp_on,
    cache_radix_off,
    capture_only,
    chunk_dp_width,
    decode_host_receive_on,
    deterministic_on,
    dsa_page_size,
    filled_attention_backend,
    hybrid_swa,
    kv_shard_rounds_chunk,
    linear_decode_backend_settled,
    mis_chunked_prefill_off,
    platform_fallback,
    possible_default_chunked_prefill_sizes,
    qwen35_sm100_backend,
    radix_cache_off,
    resolved_attention_backends,
    resolved_mamba_strategy,
    resolved_page_size,
    transfer_backend,
    unified_memory_target,
)

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("mamba.no_buffer", ids=("mamba.no_buffer", "mamba.trtllm_mha"), sources=(
    "sglang/srt/arg_groups/mamba_hook.py:158",
    "sglang/srt/arg_groups/mamba_hook.py:161",
))
def _mamba_no_buffer(ctx: Context, report: Report) -> None:
    """validate_mamba_no_buffer (mamba_hook.py:156-163), which handle_mamba_radix_cache runs only where the model uses the
    mamba radix cache and the radix cache is on (model_hook.py:1057-1076, overrides.py:472-473: with it off nothing is
    checked; radix_cache_off): the seed-0 fuzzer's false alarm, no_buffer with disable_radix_cache (issue 36).

    The trtllm_mha assert (mamba_hook.py:161; 0.5.22 :161, 0.5.21 :151, 0.5.20 :148) holds wherever the strategy
    resolves to no_buffer (written, or ``auto`` as resolve.resolved_mamba_strategy resolves it), and reads
    attention_backend as written:
    the split prefill / decode backends fill it in later (_attention_backend_default, attention_hook.py:121, after
    pipeline.py:225). targeted-hybrid-21: auto no_buffer (overlap scheduler off) with trtllm_mha was missed; a
    written no_buffer on a model without mamba state, or with trtllm_mha as prefill backend only, was a false alarm."""
    if radix_cache_off(ctx):
        return
    written = str(ctx.args.get("mamba_radix_cache_strategy") or "") == "no_buffer"
    # Models of the table without mamba state never reach validate_mamba_no_buffer (model_hook.py:1059-1067); an
    # unknown model is taken at its word when the strategy is written.
    mamba = ctx.model.hybrid_linear_attention or (written and not ctx.model.known)
    if mamba and _choice(ctx, "attention_backend", "") == "trtllm_mha" and (
            written or resolved_mamba_strategy(ctx) == "no_buffer"):
        ctx.error("mamba.trtllm_mha", "mamba_radix_cache_strategy",
                  "trtllm_mha does not support the mamba radix cache strategy no_buffer"
                  + ("" if written else f" (what {ctx.model.architecture} resolves auto to here: the overlap scheduler "
                     "off and page_size 1, or a linear_attn_backend other than triton)") + "; SGLang asserts it.",
                  "use mamba_radix_cache_strategy extra_buffer (with linear_attn_backend triton), or another attention "
                  "backend", "sglang/srt/arg_groups/mamba_hook.py:"
                  + release_line(ctx, {"0.5.22": "161", "0.5.21": "151", "0.5.20": "148"}))
    if not written:
        return
    if ctx.is_set("disable_overlap_schedule") or (ctx.model.known and not ctx.model.hybrid_linear_attention):
        return
    ctx.error("mamba.no_buffer", "mamba_radix_cache_strategy",
              "mamba_radix_cache_strategy no_buffer needs the overlap scheduler off; SGLang asserts otherwise.",
              "use extra_buffer (recommended), or also set disable_overlap_schedule: true",
              "sglang/srt/arg_groups/mamba_hook.py:158")


@rule("server.kv_cache", shared=True, file=_KVH, sources=(
    "sglang/srt/arg_groups/kv_cache_hook.py:394 (0.5.20 :167)",
    "sglang/srt/arg_groups/kv_cache_hook.py:445 (0.5.21, 0.5.22 :445)",
    "sglang/srt/arg_groups/kv_cache_hook.py:471 (0.5.21, 0.5.22 :471)",
    "sglang/srt/arg_groups/kv_cache_hook.py:401 (0.5.20 :174)",
    "sglang/srt/arg_groups/kv_cache_hook.py:405 (0.5.20 :178)",
    "sglang/srt/arg_groups/kv_cache_hook.py:409 (0.5.20 :182)",
    "sglang/srt/arg_groups/kv_cache_hook.py:431",
    "sglang/srt/arg_groups/kv_cache_hook.py:380-391",
    "sglang/srt/arg_groups/kv_cache_hook.py:880",
    "sglang/srt/arg_groups/kv_cache_hook.py:905",
    "sglang/srt/arg_groups/kv_cache_hook.py:911",
))
def _kv_cache(ctx: Context, report: Report) -> None:
    """handle_cache_compatibility and validate_prefill_only_disable_kv_cache_args (kv_cache_hook.py), on the flags."""
    if added_in(ctx, "0.5.21") and _choice(ctx, "radix_eviction_policy", "lru") == "tlru":
        config = _json_arg(ctx, "radix_eviction_policy_config")
        config = config if isinstance(config, dict) else {}
        threshold, estimate = config.get("threshold", 0), config.get("next_prompt_estimate", 0)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (threshold, estimate))
        if numbers and (threshold < 0 or estimate < 0 or threshold <= estimate):
            report.refuse("radix_eviction_policy_config", f"radix_eviction_policy tlru needs radix_eviction_policy_config with "
                          f"threshold > next_prompt_estimate >= 0 (got {threshold} and {estimate}).",
                          f"set {ctx.var('radix_eviction_policy_config')}: {{threshold: ..., next_prompt_estimate: ...}} with "
                          "threshold the larger, or another radix_eviction_policy", "380-391")
    # The radix cache as handle_cache_compatibility sees it (cache_radix_off): a PD decode server without
    # disaggregation_decode_enable_radix_cache has it off too (handle_pd_disaggregation runs first, pipeline.py:147
    # before :334): the seed-2 10,000-case run's MISSED, enable_lmcache on a decode server (fuzz-2-04731); so do
    # enable_mis and deterministic inference off ascend / fa3 / fa4 / triton (pipeline.py:263, :240): the seed-3 run's
    # MISSED, enable_lmcache with deterministic inference on an RTX 5090, whose unset backend becomes flashinfer
    # (fuzz-3-00420).
    radix_off = cache_radix_off(ctx)
    if ctx.is_set("enable_hierarchical_cache") and radix_off:
        hicache_line = 167 if not added_in(ctx, "0.5.21") else 394
        if ctx.is_set("disable_radix_cache"):
            report.refuse("disable_radix_cache", "enable_hierarchical_cache and disable_radix_cache are mutually exclusive.",
                          f"remove {ctx.var('disable_radix_cache')} or {ctx.var('enable_hierarchical_cache')}",
                          hicache_line)
        else:
            dest, why, fix = radix_off
            report.refuse("enable_hierarchical_cache", f"enable_hierarchical_cache needs the radix cache, which {why}.",
                          f"remove {ctx.var('enable_hierarchical_cache')}, or {fix}", hicache_line)
    if ctx.is_set("disaggregation_decode_enable_offload_kvcache"):
        # handle_cache_compatibility (kv_cache_hook.py:399-413; 0.5.20 :172-186): the decode-side KV offload needs a PD
        # decode server with a HiCache storage backend, and no host-pool retraction backup: the 10,000-case fuzz run's
        # MISSED, the flag on a colocated server (issue 36).
        old = not added_in(ctx, "0.5.21")
        mode = _choice(ctx, "disaggregation_mode", "null")
        for bad, dest, why, fix, line in (
            (mode != "decode", "disaggregation_decode_enable_offload_kvcache",
             "disaggregation_decode_enable_offload_kvcache is only supported on a PD decode server "
             f"(disaggregation_mode decode, not {mode})", f"remove {ctx.var('disaggregation_decode_enable_offload_kvcache')}",
             "174 (0.5.20)" if old else 401),
            (ctx.args.get("hicache_storage_backend") is None, "hicache_storage_backend",
             "disaggregation_decode_enable_offload_kvcache needs hicache_storage_backend",
             f"set {ctx.var('hicache_storage_backend')}, or remove "
             f"{ctx.var('disaggregation_decode_enable_offload_kvcache')}", "178 (0.5.20)" if old else 405),
            # A host_pool the host writes, or the one the decode host receive sets (decode_host_receive_on).
            (_choice(ctx, "disaggregation_decode_retraction_backup", "") == "host_pool",
             "disaggregation_decode_retraction_backup", "disaggregation_decode_enable_offload_kvcache and "
             "disaggregation_decode_retraction_backup host_pool are mutually exclusive (both build a decode host pool)",
             f"remove {ctx.var('disaggregation_decode_retraction_backup')} or "
             f"{ctx.var('disaggregation_decode_enable_offload_kvcache')}", "182 (0.5.20)" if old else 409),
            (decode_host_receive_on(ctx) and _choice(ctx, "disaggregation_decode_retraction_backup", "") != "cpu_tensor",
             "disaggregation_decode_host_receive_threshold",
             "disaggregation_decode_enable_offload_kvcache and the decode host receive (disaggregation_decode_host_"
             f"receive_threshold={ctx.args.get('disaggregation_decode_host_receive_threshold')}, which sets "
             "disaggregation_decode_retraction_backup host_pool, pd_disaggregation_hook.py:68-80) are mutually "
             "exclusive (both build a decode host pool)",
             f"remove {ctx.var('disaggregation_decode_host_receive_threshold')} or "
             f"{ctx.var('disaggregation_decode_enable_offload_kvcache')}", 409),
        ):
            if bad:
                report.refuse(dest, why + ".", fix, line)
                break
    tails = _num(ctx, "swa_prefix_tails")
    if added_in(ctx, "0.5.21") and tails is not None and tails < 0:
        report.refuse("swa_prefix_tails", f"swa_prefix_tails={tails} is negative.", f"set {ctx.var('swa_prefix_tails')} >= 0", 431)
    if ctx.is_set("enable_lmcache"):
        lmcache = added_in(ctx, "0.5.21")  # 0.5.20 has the DCP check alone (hicache_hook.py:104)
        for bad, dest, why, line in (
            (lmcache and ctx.is_set("enable_hierarchical_cache"), "enable_hierarchical_cache", "enable_hierarchical_cache",
             435),
            (lmcache and ctx.is_set("enable_unified_cache_external_linker"), "enable_unified_cache_external_linker",
             "enable_unified_cache_external_linker", 440),
            (lmcache and ctx.is_set("disable_radix_cache"), "disable_radix_cache",
             "disable_radix_cache (LMCache needs the radix cache)", 445),
            (lmcache and radix_off is not None and radix_off[0] == "disaggregation_mode", "disaggregation_mode",
             "needs the radix cache, which a PD decode server turns off (handle_pd_disaggregation sets "
             "disable_radix_cache; with disaggregation_decode_enable_radix_cache LMCache still runs on a colocated "
             "server only, :471)", 445),
            (lmcache and radix_off is not None, radix_off[0] if radix_off else "", f"needs the radix cache, which "
             f"{radix_off[1] if radix_off else ''}", 445),
            (lmcache and _given(ctx, "speculative_algorithm") and not ctx.is_set("enable_return_aux_hidden_states"),
             "speculative_algorithm", "speculative decoding", 450),
            (lmcache and attention_dp_on(ctx), "attn_dp_size", "attention DP", 454),
            (_int(ctx, "dcp_size", 1) > 1, "dcp_size", "decode context parallelism (dcp_size > 1)", 458),
            (lmcache and ctx.is_set("enable_streaming_session"), "enable_streaming_session", "streaming sessions", 463),
            (lmcache and _choice(ctx, "hicache_host_memory_mode", "cache") == "buffer_only", "hicache_host_memory_mode",
             "hicache_host_memory_mode buffer_only (a HiCache-only mode)", 467),
            # LMCacheUnifiedRadixCache schedules colocated prefill/decode only (0.5.21-0.5.23 :471).
            (lmcache and _choice(ctx, "disaggregation_mode", "null") != "null", "disaggregation_mode",
             f"PD disaggregation (disaggregation_mode {_choice(ctx, 'disaggregation_mode', 'null')}: LMCache runs "
             "colocated prefill/decode only)", 471),
        ):
            if bad:
                # A decode server's radix cache would only reach :471, so the fix is a colocated server or no LMCache;
                # where enable_mis or deterministic inference turned it off, the cache_radix_off fix keeps LMCache.
                fix = f"remove {ctx.var(dest)} or {ctx.var('enable_lmcache')}"
                if why.startswith("needs") and dest != "disaggregation_mode" and radix_off is not None:
                    fix = f"{radix_off[2]}, or remove {ctx.var('enable_lmcache')}"
                report.refuse(dest, f"enable_lmcache {why if why.startswith('needs') else 'does not work with ' + why}.",
                              fix, line)
                break
    if ctx.is_set("prefill_only_disable_kv_cache"):
        # validate_prefill_only_disable_kv_cache_args runs early in the pipeline (pipeline.py:170), before the model
        # overrides that set chunked_prefill_size -1 and disable_radix_cache for some models (model_hook.py, :225), so
        # it checks the host's values (the radix cache as a PD decode server turns it off, radix_cache_off): the
        # seed-0 CI sample's MISSED, an embedding server without chunked_prefill_size -1 (issue 36).
        kv = _choice(ctx, "kv_cache_dtype", "auto")
        chunk = _num(ctx, "chunked_prefill_size")
        for bad, dest, why, line in (
            (ctx.model.known and not ctx.is_set("is_embedding"), "is_embedding", "a generative server (it needs is_embedding)",
             880),
            (kv in ("nvfp4", "fp4_mx_block16", "mxfp8"), "kv_cache_dtype", f"kv_cache_dtype {kv}", "886-896"),
            (chunk != -1, "chunked_prefill_size", f"chunked prefill (chunked_prefill_size {chunk if chunk is not None else 'unset'}"
             "; it needs -1)", 905),
            (not radix_cache_off(ctx), "disable_radix_cache", "the radix cache on (it needs disable_radix_cache)", 911),
            (_int(ctx, "attn_cp_size", 1) > 1, "attn_cp_size", "attn_cp_size > 1", 920),
            (ctx.is_set("enable_prefill_cp"), "enable_prefill_cp", "enable_prefill_cp", 926),
            (ctx.is_set("enable_hisparse"), "enable_hisparse", "enable_hisparse", 935),
        ):
            if bad:
                report.refuse(dest, f"prefill_only_disable_kv_cache does not work with {why}.",
                              f"remove {ctx.var(dest)} or {ctx.var('prefill_only_disable_kv_cache')}", line)
                break


@rule("mamba.extra_buffer", sources=(
    "sglang/srt/arg_groups/overrides.py:453-488",
    "sglang/srt/arg_groups/mamba_hook.py:117",
    "sglang/srt/arg_groups/overrides.py:438-450",
    "sglang/srt/arg_groups/mamba_hook.py:124-127",
    "sglang/srt/arg_groups/mamba_hook.py:132-133",
    "sglang/srt/arg_groups/mamba_hook.py:134-135",
    "sglang/srt/arg_groups/model_hook.py:1063",
    "sglang/srt/arg_groups/mamba_hook.py:157",
    "sglang/srt/arg_groups/overrides.py:1919",
))
def _mamba_extra_buffer(ctx: Context, report: Report) -> None:
    """handle_mamba_radix_cache / validate_mamba_extra_buffer / validate_mamba_no_buffer (page size) for the
    architectures of the model table.

    SGLang resolves the strategy first (sglang/srt/arg_groups/overrides.py:453-488): nothing with the radix cache
    off; ``auto`` becomes extra_buffer when the overlap scheduler is on or pages are larger than 1 and the model
    supports it (its architecture with linear_attn_backend triton, :438-450), else no_buffer.
    """
    arch = ctx.model.architecture
    # Not in the architecture table, or the radix cache is off (on a PD decode server by default, radix_cache_off:
    # the seed-0 fuzzer's false alarm, page_size 7 on a Qwen3.5 decode server, issue 36): nothing is checked.
    if ctx.model.family == "unknown" or radix_cache_off(ctx):
        return
    strategy = str(ctx.get("mamba_radix_cache_strategy", "auto"))
    backend = str(ctx.get("linear_attn_backend", "triton"))
    if not ctx.model.hybrid_linear_attention:
        if strategy in MAMBA_EXTRA_BUFFER:
            ctx.error("mamba.extra_buffer", "mamba_radix_cache_strategy",
                      f"mamba_radix_cache_strategy {strategy} needs a model with mamba (linear-attention) state; "
                      f"{arch} has none. SGLang refuses it at start-up.",
                      f"remove {ctx.var('mamba_radix_cache_strategy')} (it is for hybrid models such as Qwen3.5 and "
                      "Qwen3-Next)", "sglang/srt/arg_groups/model_hook.py:1063")
        return
    page = _num(ctx, "page_size")
    override = qwen35_sm100_backend(ctx)
    if override is not None:
        # The Qwen3.5 override's page replaces the host's before the strategy resolves and the mamba checks run
        # (sglang/srt/arg_groups/model_hook.py:233-236, :737; qwen35_sm100_backend).
        page = QWEN35_OVERRIDE_PAGE[override]
    forced = "" if override is None else (f" (SGLang's {arch} override on SM100 sets it with attention backend "
                                          f"{override}, in place of the host's page_size: model_overrides/qwen3_5.py:48)")
    paging = page is not None and page > 1
    # A model of the table with mamba state and the radix cache on: the resolver settles ``auto`` (never None here).
    strategy = resolved_mamba_strategy(ctx) or strategy
    if strategy not in MAMBA_EXTRA_BUFFER:
        if paging:
            ctx.error("mamba.extra_buffer", "page_size",
                      f"page_size={page}{forced} with the mamba radix cache strategy no_buffer (what {arch} resolves to "
                      "here): SGLang's no_buffer cache supports page_size 1 only.",
                      "remove sglang_args.page_size (or set 1), or use mamba_radix_cache_strategy extra_buffer with "
                      "linear_attn_backend triton", "sglang/srt/arg_groups/mamba_hook.py:157")
        return
    if backend != "triton":
        ctx.error("mamba.extra_buffer", "mamba_radix_cache_strategy",
                  f"mamba_radix_cache_strategy {strategy} on {arch} needs linear_attn_backend triton (got {backend!r}); "
                  "SGLang refuses other linear-attention backends with it.",
                  "set sglang_args.linear_attn_backend: triton, or mamba_radix_cache_strategy: no_buffer "
                  "(with disable_overlap_schedule: true)",
                  "sglang/srt/arg_groups/mamba_hook.py:117, sglang/srt/arg_groups/overrides.py:438-450")
        return
    mode = str(ctx.get("disaggregation_mode", "null"))
    if strategy == "extra_buffer_lazy" and mode != "null":
        ctx.error("mamba.extra_buffer", "mamba_radix_cache_strategy",
                  f"mamba_radix_cache_strategy extra_buffer_lazy is not supported with disaggregation_mode {mode}.",
                  "use mamba_radix_cache_strategy: extra_buffer", "sglang/srt/arg_groups/mamba_hook.py:124-127")
    interval = _int(ctx, "mamba_track_interval", 256)
    # SGLang asserts on the value as given, speculative decoding on or off: validate_mamba_extra_buffer runs from
    # handle_model_specific_adjustments (sglang/srt/arg_groups/model_hook.py:737, pipeline.py:225), before
    # handle_speculative_decoding fills a default in (pipeline.py:306), so an unset speculative_num_draft_tokens is
    # never compared and a set one always is.
    draft = _num(ctx, "speculative_num_draft_tokens")
    if draft is not None and interval < draft:
        ctx.error("mamba.extra_buffer", "mamba_track_interval",
                  f"mamba_track_interval={interval} is below speculative_num_draft_tokens={draft}; SGLang's mamba "
                  "extra_buffer cache asserts it is at least that"
                  + ("" if ctx.args.get("speculative_algorithm") else
                     ", even with speculative decoding off (the value is compared as given)") + ".",
                  f"set sglang_args.mamba_track_interval >= {draft}"
                  + ("" if ctx.args.get("speculative_algorithm") else
                     ", or remove sglang_args.speculative_num_draft_tokens (no speculative_algorithm uses it)"),
                  "sglang/srt/arg_groups/mamba_hook.py:132-133")
    if page is not None and page > 0 and interval % page:
        ctx.error("mamba.extra_buffer", "page_size",
                  f"mamba_track_interval={interval} is not a multiple of page_size={page}{forced}; SGLang's mamba "
                  "extra_buffer cache asserts it is.",
                  f"use a page_size that divides {interval} (e.g. 1, 16, 64)" if override is None else
                  f"set sglang_args.mamba_track_interval to a multiple of {page}",
                  "sglang/srt/arg_groups/mamba_hook.py:134-135")
    # Then mamba_cache_chunk_size (mamba_hook.py:139) asserts the page and the chunk size divide one another
    # (overrides.py:1919; 0.5.22 :1866, 0.5.21 :1818, 0.5.20 :1918): the chunk is config.json's mamba_chunk_size,
    # which the table's GDN hybrids (Qwen3.5, Qwen3-Next) leave unset, so FLA's CHUNK_SIZE 64, unless
    # json_model_override_args sets one (preflight-overrides-mamba-chunk-page: 96 against page 64). targeted-hybrid-27:
    # page_size 48 or 96 with a track interval it divides was missed. A chunk that is not a positive integer: not judged.
    elif page is not None and page > 0:
        config = _json_arg(ctx, "json_model_override_args")
        chunk = config.get("mamba_chunk_size", 64) if isinstance(config, dict) else 64
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk <= 0 or not max(page, chunk) % min(page, chunk):
            return
        where = f"{arch} sets no mamba_chunk_size, so FLA's chunk" if chunk == 64 and not (
            isinstance(config, dict) and "mamba_chunk_size" in config) else "json_model_override_args' mamba_chunk_size"
        ctx.error("mamba.extra_buffer", "page_size",
                  f"page_size={page} and the mamba cache chunk size {chunk} ({where}) do not divide one another; "
                  "SGLang's mamba extra_buffer cache asserts one is a multiple of the other.",
                  f"use a page_size that divides {chunk} or is a multiple of it",
                  "sglang/srt/arg_groups/overrides.py:"
                  + release_line(ctx, {"0.5.23": "1919", "0.5.22": "1866", "0.5.21": "1818", "0.5.20": "1918"}))


@rule("memory.chunked_page", sources=(
    "sglang/srt/arg_groups/validation_hook.py:241-246",
    "sglang/srt/arg_groups/validation_hook.py:244",
))
def _chunked_page(ctx: Context, report: Report) -> None:
    """check_server_args (sglang/srt/arg_groups/validation_hook.py:241-246) on the values SGLang settles on.

    numeric.chunked_prefill_size checks the host's own pair; this covers SGLang's default chunked_prefill_size (by
    the GPU's memory, memory_hook.py:88-180: exact when the memory is known, else refused only when no default the
    architecture's GPUs can get is a multiple: possible_default_chunked_prefill_sizes) and the page size an
    attention backend forces (resolved_page_size). With attention DP the check sees the size divided by the width
    (parallel_hook.py:326-331; DWDP's too, chunk_dp_width); with enable_mis it sees -1 and skips (attention_hook.py:565-570
    before validation_hook.py:243, mis_chunked_prefill_off); with KV-cache sharding it sees the chunk rounded up to
    the page, or SGLang refuses before (kv_shard_hook.py:287-292, kv_shard_rounds_chunk).
    """
    if ctx.model.family == "unknown" or str(ctx.get("disaggregation_mode", "null")) == "decode" or \
            mis_chunked_prefill_off(ctx) or kv_shard_rounds_chunk(ctx):
        return
    page, chunk = resolved_page_size(ctx), ctx.args.get("chunked_prefill_size")
    if page is None or page <= 1 or (chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool))):
        return
    override = qwen35_sm100_backend(ctx)
    host_page = ctx.args.get("page_size") if override is None else None  # the Qwen3.5 override replaces it
    if chunk is not None and (chunk <= 0 or page == host_page):
        return  # disabled, or the host's own pair (numeric.chunked_prefill_size)
    sizes = [chunk] if chunk is not None else list(possible_default_chunked_prefill_sizes(ctx))
    width = chunk_dp_width(ctx)
    if all(size // width > 0 and (size // width) % page for size in sizes):
        forced = page != host_page
        what = (f"chunked_prefill_size={chunk}" if chunk is not None else
                f"SGLang's default chunked_prefill_size ({' / '.join(map(str, sizes))}, by the GPUs' memory)")
        if width > 1:
            what += f" per attention-DP rank (divided by {width}: {' / '.join(str(x // width) for x in sizes)})"
        why = (f" (which SGLang's {ctx.model.architecture} override on SM100 sets with attention backend {override} "
               "in place of the host's page_size: model_overrides/qwen3_5.py:25-49)"
               if override is not None and page == QWEN35_OVERRIDE_PAGE[override] else
               " (which SGLang's DSA override sets for this model, index_topk in json_model_override_args, in place of "
               "the host's page_size: model_overrides/deepseek_v2.py:162-172)" if forced and page == dsa_page_size(ctx) else
               " (which the attention backend forces)" if forced else "")
        ctx.error("memory.chunked_page", "chunked_prefill_size" if chunk is not None else "page_size",
                  f"{what} is not a multiple of the page size {page}" + why + "; SGLang refuses the pair at start-up.",
                  f"set sglang_args.chunked_prefill_size to a multiple of {page}" if chunk is not None else
                  f"use a power-of-two page_size (e.g. 16 or 64), or set sglang_args.chunked_prefill_size to a multiple "
                  f"of {page}", "sglang/srt/arg_groups/validation_hook.py:244")


# handle_page_major_kv_layout's allow-list of resolved attention backends under enable_unified_memory
# (kv_cache_hook.py:805-827; 0.5.20-0.5.22 the same two sets, the MLA one with tokenspeed_mla, a backend of its own
# until 0.5.23): MLA models, MHA models; MHA models with asymmetric K/V rows get a subset of the MHA set (0.5.23;
# earlier releases refuse those models with unified memory outright).
PAGE_MAJOR_MLA = ("triton", "fa3", "trtllm_mla", "flashinfer", "cutedsl_mla", "flashmla")
PAGE_MAJOR_MHA = ("triton", "fa3", "fa4", "flashinfer", "trtllm_mha")


def _page_major_allowed(ctx: Context) -> tuple[str, ...]:
    """The backends the page-major layout may allow here: the model's set when the table knows whether it is MLA
    (use_mla_backend, model_override_base.py:185-189), else both sets together."""
    mla = PAGE_MAJOR_MLA + (() if added_in(ctx, "0.5.23") else ("tokenspeed_mla",))
    if ctx.model.known:
        return mla if ctx.model.mla else PAGE_MAJOR_MHA
    return tuple(dict.fromkeys(mla + PAGE_MAJOR_MHA))


def _page_major_backends_outside(ctx: Context) -> list[str]:
    """The attention backends the host names (attention_backend, or the prefill / decode one; attention_backends_of,
    model_override_base.py:138-152) that the page-major allow-list certainly lacks. Only explicit ones: SGLang's
    default depends on more than the table knows. The 10,000-case fuzz run's MISSED, nsa with unified memory
    (issue 36)."""
    base = _choice(ctx, "attention_backend", "")
    base = platform_fallback(ctx, base) if base else base  # intel_xpu on device xpu is triton here, intel_amx torch_native
    used = {_choice(ctx, "prefill_attention_backend", "") or base, _choice(ctx, "decode_attention_backend", "") or base}
    allowed = _page_major_allowed(ctx)
    return sorted(b for b in used if b and b not in allowed)


# handle_page_major_kv_layout's linear-attention backends for the strided conv/SSM state (kv_cache_hook.py:841-857;
# 0.5.20-0.5.22 the same, prefill without flashinfer): decode triton / flashinfer, prefill triton / flashkda (/
# flashinfer from 0.5.23); MLA models (use_mla_backend) cutedsl and helion too.
PAGE_MAJOR_LINEAR_DECODE = ("triton", "flashinfer")
# DSPARK's spec-verify-audited attention backends under enable_unified_memory before 0.5.22 (kv_cache_hook.py:560 in
# 0.5.21, :240 in 0.5.20); 0.5.22 widened the list (_assert_spec_verify_backends).
DSPARK_VERIFY_BEFORE_0522 = frozenset({"triton", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla"})
PAGE_MAJOR_LINEAR_MLA = ("cutedsl", "helion")


def _page_major_linear_outside(ctx: Context) -> tuple[str, str, str, tuple[str, ...], str]:
    """(backend, dest, phase, allowed, line) of the first resolved linear-attention backend (decode as
    handle_linear_attn_backend settled it, which runs first; prefill linear_attn_prefill_backend or linear_attn_backend)
    the page-major allow-list certainly lacks; backend "" when none. use_mla_backend is decided for the model table's
    architectures (DeepSeek MLA, the others not); any other model is refused only outside both sets. The 10,000-case
    fuzz run's MISSED, ptx_kda decode on Qwen3-Next with unified memory (issue 36)."""
    prefill_base = ("triton", "flashkda") + (("flashinfer",) if added_in(ctx, "0.5.23") else ())
    mla = ctx.model.mla if ctx.model.architecture in ARCHITECTURES else True  # unknown: the wider (MLA) sets
    extra = PAGE_MAJOR_LINEAR_MLA if mla else ()
    decode = linear_decode_backend_settled(ctx)
    decode_dest = "linear_attn_decode_backend" if _choice(ctx, "linear_attn_decode_backend", "") else "linear_attn_backend"
    prefill = _choice(ctx, "linear_attn_prefill_backend", "") or _choice(ctx, "linear_attn_backend", "triton")
    prefill_dest = "linear_attn_prefill_backend" if _choice(ctx, "linear_attn_prefill_backend", "") else "linear_attn_backend"
    for backend, dest, phase, allowed, line in (
        (decode, decode_dest, "decode", PAGE_MAJOR_LINEAR_DECODE + extra, "848 (0.5.22 :860, 0.5.21 :753, 0.5.20 :435)"),
        (prefill, prefill_dest, "prefill", prefill_base + extra, "853 (0.5.22 :865, 0.5.21 :758, 0.5.20 :440)"),
    ):
        if backend and backend not in allowed:
            return backend, dest, phase, allowed, line
    return "", "", "", (), ""


@rule("server.unified_memory", file=_KVH, sources=(
    "sglang/srt/arg_groups/kv_cache_hook.py:822 (0.5.22 :834, 0.5.21 :726, 0.5.20 :408)",
    "sglang/srt/arg_groups/kv_cache_hook.py:783",
    "sglang/srt/arg_groups/kv_cache_hook.py:610",
    "sglang/srt/arg_groups/kv_cache_hook.py:727",
    "sglang/srt/arg_groups/kv_cache_hook.py:733 (0.5.22 :738, 0.5.21 :627, 0.5.20 :309)",
    "sglang/srt/arg_groups/kv_cache_hook.py:740",
    "sglang/srt/arg_groups/kv_cache_hook.py:754 (0.5.22 :759, 0.5.21 :648, 0.5.20 :330)",
    "sglang/srt/arg_groups/kv_cache_hook.py:625 (0.5.22 :622)",
    "sglang/srt/arg_groups/kv_cache_hook.py:634 (0.5.22 :631)",
    "sglang/srt/arg_groups/kv_cache_hook.py:519 (0.5.22 :516)",
    "sglang/srt/arg_groups/kv_cache_hook.py:848 (0.5.22 :860, 0.5.21 :753, 0.5.20 :435)",
    "sglang/srt/arg_groups/kv_cache_hook.py:853 (0.5.22 :865, 0.5.21 :758, 0.5.20 :440)",
    "sglang/srt/arg_groups/kv_cache_hook.py:537 (the PD branch :533-586; 0.5.22 :530-585, 0.5.21 :482-543, 0.5.20 :202-224)",
))
def _unified_memory(ctx: Context, report: Report) -> None:
    """handle_page_major_kv_layout and handle_unified_memory_pool (kv_cache_hook.py:528-861) on the flags."""
    unified, page_major = ctx.is_set("enable_unified_memory"), ctx.is_set("enable_page_major_kv_layout")
    if page_major and not unified:
        report.refuse("enable_page_major_kv_layout", "enable_page_major_kv_layout without enable_unified_memory is unsupported "
                      "in this release.", f"remove {ctx.var('enable_page_major_kv_layout')} (enable_unified_memory implies it)", 783)
        return
    if not unified:
        return
    mamba = _choice(ctx, "mamba_backend", "triton")
    # With the aux hidden-state capture the algorithm only names the capture convention and is reset to None before
    # this hook (capture_only): no speculative decoding, so no automatic topk (the seed-1 10,000-case fuzz run's false
    # alarm fuzz-1-04863, EAGLE3 capture on the unified pool); a topk the host writes is still asserted (:601).
    raw = "" if capture_only(ctx) else _choice(ctx, "speculative_algorithm", "").upper()
    algo = nextn_as_eagle(raw)
    topk = _num(ctx, "speculative_eagle_topk")
    if topk is None and algo in ("EAGLE", "EAGLE3") and ctx.model.known and not adaptive_stays_on(ctx) \
            and all(v is None for v in _spec_values(ctx)):
        topk = ctx.model.spec_auto[1]  # _auto_choose_speculative_params (spec.triple)
    outside = _page_major_backends_outside(ctx)
    linear_bad, linear_dest, linear_phase, linear_allowed, linear_line = _page_major_linear_outside(ctx)
    linear_model = (("MLA" if ctx.model.mla else "non-MLA") + f" model {ctx.model.architecture}"
                    if ctx.model.architecture in ARCHITECTURES else "any model")
    # handle_unified_memory_pool's PD branch (kv_cache_hook.py:533-586; 0.5.22 :530-585, 0.5.21 :482-543, 0.5.20
    # :202-224), the constraints of the whole-envelope KV transfer, which runs first: the targeted set's MISSED
    # targeted-kv-44 (SGLANG_DISABLE_LAZY_COMPACTION on a PD prefill server). The model facts only for the model table's
    # architectures (mambaish_config: hybrid linear attention; is_hybrid_swa: hybrid_swa).
    pd = _choice(ctx, "disaggregation_mode", "null") != "null"
    transfer = transfer_backend(ctx)
    known = ctx.model.architecture in ARCHITECTURES
    mambaish = known and bool(ctx.model.hybrid_linear_attention)
    swa = hybrid_swa(ctx)
    offload = pd and added_in(ctx, "0.5.21") and ctx.is_set("disaggregation_decode_enable_offload_kvcache")
    # disaggregation_decode_retraction_backup as handle_pd_disaggregation leaves it (host_pool with the decode host
    # receive on, pd_disaggregation_hook.py:68-80).
    host_pool = pd and added_in(ctx, "0.5.21") and (
        _choice(ctx, "disaggregation_decode_retraction_backup", "") == "host_pool" or decode_host_receive_on(ctx))
    old_retraction = not added_in(ctx, "0.5.22")  # 0.5.21 also refuses the decode radix cache and hybrid SWA there
    # The resolved attention backends the speculative verify and DCP asserts read (attention_backends_of over the
    # resolved view, kv_cache_hook.py:517, :621, :752): empty where a side is not certain, and then no refusal. The
    # allow-lists (kv_cache_hook.py:479-497, 0.5.22 :479-494): the MHA rails gained trtllm_mha in 0.5.23, the verify
    # set lost tokenspeed_mla (an alias of cutedsl_mla from 0.5.23), DSPARK admits fa4 from 0.5.23; under dcp_size > 1
    # flashinfer leaves the DSPARK / DFLASH set (:511-516).
    pair = resolved_attention_backends(ctx)
    backends = set() if None in pair else set(pair)
    new = added_in(ctx, "0.5.23")
    mha_rails = {"triton", "flashinfer", "fa3"} | ({"trtllm_mha"} if new else set())
    verify = {"triton", "trtllm_mla", "cutedsl_mla", "flashmla", "flashinfer", "fa3"} | (set() if new else {"tokenspeed_mla"})
    eagle_allowed = verify if ctx.model.mla else mha_rails
    draft = _choice(ctx, "speculative_draft_attention_backend", "")
    draft_set = {draft} if draft else backends  # an unset draft backend inherits the target's pair (:632-633)
    spec_allowed = {"DSPARK": verify | ({"fa4"} if new else set()), "DFLASH": mha_rails}.get(algo, set())
    dcp = _int(ctx, "dcp_size", 1) > 1
    spec_allowed -= {"flashinfer"} if dcp else set()
    dcp_allowed = {"flashinfer", "trtllm_mla", "cutedsl_mla"} | (set() if new else {"tokenspeed_mla"})
    for bad, dest, why, line in (
        (bool(outside), "attention_backend" if _given(ctx, "attention_backend") else
         "prefill_attention_backend" if _given(ctx, "prefill_attention_backend") else "decode_attention_backend",
         f"enable_unified_memory (page-major layout) reads the KV cache through per-layer views that attention backend "
         f"{' / '.join(outside)} does not address ({'MLA' if ctx.model.mla else 'MHA'} model: "
         f"{', '.join(_page_major_allowed(ctx))} only)" if ctx.model.known else
         f"enable_unified_memory (page-major layout) reads the KV cache through per-layer views that attention backend "
         f"{' / '.join(outside)} does not address (any model: {', '.join(_page_major_allowed(ctx))} only)",
         "822 (0.5.22 :834, 0.5.21 :726, 0.5.20 :408)"),
        # The strided conv/SSM state's linear-attention backends, in every launch (linear-attention model or not).
        (bool(linear_bad), linear_dest, f"enable_unified_memory (page-major layout) keeps the conv/SSM state in strided "
         f"views that the linear-attention {linear_phase} backend {linear_bad} does not read ({linear_model}: "
         f"{', '.join(linear_allowed)} only)", linear_line),
        (mamba != "triton", "mamba_backend", f"enable_unified_memory (page-major layout) needs the Triton Mamba kernels, "
         f"not mamba_backend {mamba}", 858),
        (pd and transfer != "mooncake", "disaggregation_transfer_backend",
         f"enable_unified_memory with PD disaggregation supports the mooncake transfer backend only, not {transfer}",
         release_line(ctx, {"0.5.23": "537", "0.5.22": "534", "0.5.21": "486", "0.5.20": "205"})),
        (pd and _int(ctx, "pp_size", 1) != 1, "pp_size", "enable_unified_memory with PD disaggregation does not support "
         "pipeline parallelism (the whole-envelope transfer has no per-layer entries)",
         release_line(ctx, {"0.5.23": "542", "0.5.22": "539", "0.5.21": "491", "0.5.20": "210"})),
        (pd and added_in(ctx, "0.5.21") and raw != "", "speculative_algorithm",
         f"enable_unified_memory with PD disaggregation over the mooncake transfer backend does not support speculative "
         f"decoding ({raw})", release_line(ctx, {"0.5.23": "549", "0.5.22": "546", "0.5.21": "498"})),
        (pd and env_true(ctx.env, "SGLANG_DISABLE_LAZY_COMPACTION"), "enable_unified_memory",
         "enable_unified_memory with PD disaggregation needs lazy compaction, which the environment switch "
         "SGLANG_DISABLE_LAZY_COMPACTION turns off",
         release_line(ctx, {"0.5.23": "554", "0.5.22": "551", "0.5.21": "503", "0.5.20": "215"})),
        (pd and ctx.is_set("enable_hisparse"), "enable_hisparse",
         "enable_unified_memory with PD disaggregation does not work with enable_hisparse",
         release_line(ctx, {"0.5.23": "558", "0.5.22": "555", "0.5.21": "507", "0.5.20": "219"})),
        (offload and _choice(ctx, "hicache_storage_backend", "") != "file", "hicache_storage_backend",
         "enable_unified_memory with disaggregation_decode_enable_offload_kvcache supports hicache_storage_backend "
         "file only", release_line(ctx, {"0.5.23": "565", "0.5.22": "562", "0.5.21": "514"})),
        (offload and known and ctx.model.mla, "disaggregation_decode_enable_offload_kvcache",
         f"enable_unified_memory with the decode KV offload does not support MLA models ({ctx.model.architecture}) yet",
         release_line(ctx, {"0.5.23": "570", "0.5.22": "567", "0.5.21": "519"})),
        (offload and mambaish, "disaggregation_decode_enable_offload_kvcache",
         f"enable_unified_memory with the decode KV offload does not support hybrid-Mamba models "
         f"({ctx.model.architecture})", release_line(ctx, {"0.5.23": "574", "0.5.22": "571", "0.5.21": "523"})),
        (offload and swa, "disaggregation_decode_enable_offload_kvcache",
         f"enable_unified_memory with the decode KV offload does not support hybrid-SWA models "
         f"({ctx.model.architecture}) yet", release_line(ctx, {"0.5.23": "578", "0.5.22": "575", "0.5.21": "527"})),
        (host_pool and old_retraction and ctx.is_set("disaggregation_decode_enable_radix_cache"),
         "disaggregation_decode_enable_radix_cache", "enable_unified_memory with the host-pool decode retraction "
         "does not support the decode radix cache in this release", release_line(ctx, {"0.5.21": "533"})),
        (host_pool and mambaish, "disaggregation_decode_retraction_backup",
         f"enable_unified_memory with the host-pool decode retraction does not support hybrid-Mamba models "
         f"({ctx.model.architecture})", release_line(ctx, {"0.5.23": "584", "0.5.22": "581", "0.5.21": "537"})),
        (host_pool and old_retraction and swa, "disaggregation_decode_retraction_backup",
         f"enable_unified_memory with the host-pool decode retraction does not support hybrid-SWA models "
         f"({ctx.model.architecture}) in this release", release_line(ctx, {"0.5.21": "541"})),
        (added_in(ctx, "0.5.22") and algo not in ("", "DSPARK", "EAGLE", "EAGLE3", "DFLASH"), "speculative_algorithm",
         f"enable_unified_memory supports DSPARK, DFLASH, EAGLE / NEXTN and EAGLE3 speculative decoding only, not {raw}", 588),
        # Before 0.5.22 DSPARK only, with a linear chain (kv_cache_hook.py:545-557 in 0.5.21, :225-237 in 0.5.20).
        (not added_in(ctx, "0.5.22") and algo not in ("", "DSPARK"), "speculative_algorithm",
         f"enable_unified_memory supports DSPARK speculative decoding only in this release, not {raw}",
         "545 (0.5.21; 0.5.20 :225)"),
        (not added_in(ctx, "0.5.22") and algo == "DSPARK" and _num(ctx, "speculative_eagle_topk") not in (None, 1),
         "speculative_eagle_topk", "enable_unified_memory with DSPARK supports a linear draft chain only "
         "(speculative_eagle_topk 1)", "552 (0.5.21; 0.5.20 :232)"),
        # Then its verify backends, a shorter list than 0.5.22's (kv_cache_hook.py:558-569 in 0.5.21, :238-249 in
        # 0.5.20): the resolved prefill and decode backends, both.
        (not added_in(ctx, "0.5.22") and algo == "DSPARK" and bool(backends) and not backends <= DSPARK_VERIFY_BEFORE_0522,
         "attention_backend", "enable_unified_memory with DSPARK in this release needs the spec-verify-audited attention "
         f"backends {', '.join(sorted(DSPARK_VERIFY_BEFORE_0522))} for prefill and decode, not "
         f"{' / '.join(sorted(backends - DSPARK_VERIFY_BEFORE_0522))}", release_line(ctx, {"0.5.21": "563", "0.5.20": "243"})),
        # From 0.5.22 the assert reads speculative_eagle_topk whatever the algorithm, none included (DFLASH and
        # DSPARK set it to 1 first, speculative_hook.py:355-365, :778-788): enable_unified_memory with eagle_topk 3
        # and no speculative_algorithm is refused (the fresh 2000-case run of issue 36).
        ((algo in ("EAGLE", "EAGLE3") or (algo == "" and added_in(ctx, "0.5.22"))) and topk is not None and topk != 1,
         "speculative_eagle_topk",
         f"enable_unified_memory supports a linear draft chain only (speculative_eagle_topk 1), not {topk}", 601),
        # The target must hold the draft's KV in its own sub-pools (kv_cache_hook.py:608-614, 0.5.22 :606-612).
        (added_in(ctx, "0.5.22") and algo in ("EAGLE", "EAGLE3") and unified_memory_target(ctx) is False,
         "speculative_algorithm", f"enable_unified_memory with {raw} needs a unified target model (hybrid sliding-window "
         f"or Mamba-like hybrid attention, where the draft's KV lives inside the target's sub-pools); "
         f"{ctx.model.architecture} is neither", "610 (0.5.22 :608)"),
        # The target verifies on its own pages (kv_cache_hook.py:615-630, 0.5.22 :613-627): the MLA verify set on an MLA
        # model, else the MHA rails; the fused draft reads through the MHA rails (:631-640, 0.5.22 :629-637). Qwen3.5 with
        # NEXTN and attention_backend fa4 on a B200 is refused there.
        (added_in(ctx, "0.5.22") and algo in ("EAGLE", "EAGLE3") and known and bool(backends)
         and not backends <= eagle_allowed, "attention_backend",
         f"enable_unified_memory with {raw} verifies on the target's own pages, which attention backend "
         f"{' / '.join(sorted(backends - eagle_allowed))} does not translate to the unified pool's physical ids "
         f"({'MLA' if ctx.model.mla else 'MHA'} model: {', '.join(sorted(eagle_allowed))} only)",
         release_line(ctx, {"0.5.23": "625", "0.5.22": "622"})),
        (added_in(ctx, "0.5.22") and algo in ("EAGLE", "EAGLE3") and known and bool(draft_set)
         and not draft_set <= mha_rails, "speculative_draft_attention_backend",
         f"enable_unified_memory with {raw} runs the fused draft on {' / '.join(sorted(draft_set))}, but it reads its KV "
         f"through the translated MHA rails {', '.join(sorted(mha_rails))} only",
         release_line(ctx, {"0.5.23": "634", "0.5.22": "631"})),
        # _assert_spec_verify_backends for DSPARK and DFLASH (kv_cache_hook.py:500-525, :641-652; 0.5.22 :497-520,
        # :638-645): Llama with DFLASH and attention_backend fa4 on a B200 is refused there.
        (added_in(ctx, "0.5.22") and algo in ("DSPARK", "DFLASH") and bool(backends) and not backends <= spec_allowed,
         "attention_backend", f"enable_unified_memory with {raw} needs the spec-verify-audited attention backends "
         f"{', '.join(sorted(spec_allowed))} for prefill and decode, not {' / '.join(sorted(backends - spec_allowed))}"
         + (" (flashinfer is excluded under dcp_size > 1)" if dcp else ""),
         release_line(ctx, {"0.5.23": "519", "0.5.22": "516"})),
        (ctx.is_set("enable_two_batch_overlap"), "enable_two_batch_overlap",
         "enable_unified_memory does not support enable_two_batch_overlap", 653),
        (added_in(ctx, "0.5.21") and ctx.is_set("enable_lmcache"), "enable_lmcache",
         "enable_unified_memory does not work with enable_lmcache", 658),
        # 0.5.20 refuses HiCache and LMCache in one assert (kv_cache_hook.py:256-260 there).
        (not added_in(ctx, "0.5.21") and (ctx.is_set("enable_hierarchical_cache") or ctx.is_set("enable_lmcache")),
         "enable_hierarchical_cache" if ctx.is_set("enable_hierarchical_cache") else "enable_lmcache",
         "enable_unified_memory does not work with enable_hierarchical_cache or enable_lmcache in this release",
         "256-260 (0.5.20)"),
        (added_in(ctx, "0.5.22") and ctx.is_set("enable_unified_cache_external_linker"), "enable_unified_cache_external_linker",
         "enable_unified_memory does not support enable_unified_cache_external_linker", 663),
        (added_in(ctx, "0.5.22") and algo in ("EAGLE", "EAGLE3") and ctx.is_set("enable_hierarchical_cache"), "enable_hierarchical_cache",
         "enable_unified_memory with EAGLE / EAGLE3 does not support enable_hierarchical_cache", 678),
        # _validate_unified_memory_dcp's first assert (use_mla_backend), decided for the model table's architectures.
        (_int(ctx, "dcp_size", 1) > 1 and ctx.model.architecture in ARCHITECTURES and not ctx.model.mla, "dcp_size",
         f"enable_unified_memory with dcp_size > 1 (decode context parallelism) runs MLA models only, not "
         f"{ctx.model.architecture}", "727 (0.5.22 :732, 0.5.21 :621, 0.5.20 :303)"),
        # Its second: no hybrid sliding-window model (ModelConfig.is_hybrid_swa; resolve.hybrid_swa: the table's
        # architectures, or json_model_override_args opting in). DeepSeek-V3 with {"is_hybrid_swa": true} and dcp_size 2
        # is refused there, before the PD and backend asserts below.
        (_int(ctx, "dcp_size", 1) > 1 and swa, "dcp_size",
         "enable_unified_memory with dcp_size > 1 (decode context parallelism) does not support hybrid sliding-window "
         "models (the unified SWA allocator does not widen its virtual ids under DCP)",
         "733 (0.5.22 :738, 0.5.21 :627, 0.5.20 :309)"),
        # Its third (whatever the model: the first two refuse the others): the seed-6 10,000-case run's MISSED
        # fuzz-6-06103, DeepSeek-V3 with dcp_size 8 on a PD prefill server on a B300.
        (_int(ctx, "dcp_size", 1) > 1 and _choice(ctx, "disaggregation_mode", "null") != "null", "disaggregation_mode",
         "enable_unified_memory with dcp_size > 1 (decode context parallelism) does not support PD disaggregation (the "
         "KV transfer ships whole page envelopes, which hold only this rank's shard under DCP)",
         "740 (0.5.22 :745, 0.5.21 :634, 0.5.20 :316)"),
        # Its fourth: the full-attention layers on the backends that translate the widened DCP page ids (kv_cache_hook.py:
        # 751-761; tokenspeed_mla too before 0.5.23). DeepSeek-V3 with dcp_size 8 on an RTX PRO 6000, whose default MLA
        # backend there is triton, is refused.
        (dcp and known and ctx.model.mla and bool(backends) and not backends <= dcp_allowed, "attention_backend",
         f"enable_unified_memory with dcp_size > 1 (decode context parallelism) needs attention backend "
         f"{', '.join(sorted(dcp_allowed))} for the full-attention layers, not {' / '.join(sorted(backends - dcp_allowed))}",
         release_line(ctx, {"0.5.23": "754", "0.5.22": "759", "0.5.21": "648", "0.5.20": "330"})),
    ):
        if bad:
            report.refuse(dest, why + ".", f"fix {ctx.var(dest)}, or remove {ctx.var('enable_unified_memory')}", line)
            return


def _sm100_native_nvfp4(ctx: Context, report: Report) -> None:
    """handle_kv4_compatibility on SM100 (kv_cache_hook.py:139-265): an NVFP4 cache there decodes with trtllm_mha's
    native layout (handle_nvfp4_prefill_kv_dequant_dtype sets decode_attention_backend trtllm_mha, :84-92), so
    uses_sm100_trtllm_nvfp4 holds and speculative decoding, its draft backend, PD disaggregation and the host cache tiers
    are limited. The algorithm as the hook reads it: None under the aux hidden-state capture (capture_only), which resets
    it first (validation_hook.py:748-753, pipeline.py:94): EAGLE3 with enable_return_aux_hidden_states and
    speculative_draft_attention_backend flashinfer is accepted."""
    raw = "" if capture_only(ctx) else _choice(ctx, "speculative_algorithm", "")
    algo = raw.upper() or None
    breadth = _num(ctx, "speculative_ngram_max_bfs_breadth")
    draft = _choice(ctx, "speculative_draft_attention_backend", "")
    for bad, dest, why, fix, line in (
        (algo in ("DFLASH", "DSPARK"), "speculative_algorithm", f"does not support speculative_algorithm {raw}",
         "use EAGLE / NEXTN or NGRAM (breadth 1)", 172),
        (algo is not None and algo not in ("EAGLE", "EAGLE3", "NEXTN", "NGRAM"), "speculative_algorithm",
         f"supports EAGLE, EAGLE3, NEXTN and breadth-1 NGRAM only, not {raw}", "use EAGLE / NEXTN or NGRAM (breadth 1)", 184),
        (algo == "NGRAM" and breadth != 1, "speculative_ngram_max_bfs_breadth",
         f"with NGRAM needs speculative_ngram_max_bfs_breadth 1 (trtllm_mha verifies a linear chain), not "
         f"{breadth if breadth is not None else 'its default 10'}", f"set {ctx.var('speculative_ngram_max_bfs_breadth')}: 1",
         198),
        (algo not in (None, "NGRAM") and draft not in ("", "trtllm_mha"), "speculative_draft_attention_backend",
         f"needs speculative_draft_attention_backend trtllm_mha (the draft reads the native NVFP4 layout), not {draft}",
         f"set {ctx.var('speculative_draft_attention_backend')}: trtllm_mha, or remove it", 226),
        # The check the resolver-differential's NVFP4 class found missing: a PD prefill or decode server (0.5.21-0.5.23).
        (_choice(ctx, "disaggregation_mode", "null") != "null", "disaggregation_mode",
         "does not support PD disaggregation (the KV transfer lacks the physical block-scale layout)",
         f"remove {ctx.var('disaggregation_mode')}, or use kv_cache_dtype fp8_e4m3", 252),
        (ctx.is_set("enable_hierarchical_cache") or ctx.is_set("enable_lmcache"),
         "enable_hierarchical_cache" if ctx.is_set("enable_hierarchical_cache") else "enable_lmcache",
         "does not support the hierarchical KV cache or LMCache (their host pools lack the block-scale layout)",
         "remove enable_hierarchical_cache / enable_lmcache, or use kv_cache_dtype fp8_e4m3", 260),
    ):
        if bad:
            report.refuse(dest, f"kv_cache_dtype nvfp4 on SM100 (compute capability {_cc(ctx)}: native NVFP4 with "
                          f"trtllm_mha) {why}.", fix, line)
            return


def _fp4_unified(ctx: Context, report: Report, kv: str) -> None:
    """handle_kv4_compatibility (kv_cache_hook.py:133, the same line 0.5.21-0.5.23; 0.5.20 has no such check): an FP4 KV
    cache in the unified memory pool, which allocates neither the FP4 block scales nor the prefill dequant workspace.
    The 10,000-case fuzz run's MISSED on Qwen3-Next (issue 36)."""
    report.refuse("enable_unified_memory", f"kv_cache_dtype {kv} (an FP4 KV cache) does not support enable_unified_memory "
                  "yet: the unified pool allocates no FP4 block scales or prefill dequant workspace.",
                  f"remove {ctx.var('enable_unified_memory')}, or use kv_cache_dtype fp8_e4m3 (or auto)", 133)


@rule("server.kv_cache", shared=True, file=_KVH, sources=(
    "sglang/srt/arg_groups/kv_cache_hook.py:133 (0.5.21-0.5.23)",
    "sglang/srt/arg_groups/kv_cache_hook.py:428",
    "sglang/srt/arg_groups/kv_cache_hook.py:41",
    "sglang/srt/arg_groups/kv_cache_hook.py:60",
    "sglang/srt/arg_groups/kv_cache_hook.py:172",
    "sglang/srt/arg_groups/kv_cache_hook.py:184",
    "sglang/srt/arg_groups/kv_cache_hook.py:198",
    "sglang/srt/arg_groups/kv_cache_hook.py:226",
    "sglang/srt/arg_groups/kv_cache_hook.py:252",
    "sglang/srt/arg_groups/kv_cache_hook.py:260",
    "sglang/srt/arg_groups/kv_cache_hook.py:344",
    "sglang/srt/arg_groups/kv_cache_hook.py:53",
    "sglang/srt/arg_groups/kv_cache_hook.py:71",
    "sglang/srt/arg_groups/kv_cache_hook.py:80",
))
def _kv_cache_resolved(ctx: Context, report: Report) -> None:
    """handle_nvfp4_prefill_kv_dequant_dtype, handle_kv4_compatibility, handle_prefill_only_disable_kv_cache and
    handle_cache_compatibility's SWA ratio (kv_cache_hook.py:35-92, 112-265, 335-349, 427)."""
    kv, requested = _choice(ctx, "kv_cache_dtype", "auto"), _choice(ctx, "prefill_kv_cache_dequant_dtype", "auto")
    prefill, base = _choice(ctx, "prefill_attention_backend", ""), _choice(ctx, "attention_backend", "")
    decode = _choice(ctx, "decode_attention_backend", "")
    if not added_in(ctx, "0.5.21"):  # handle_nvfp4_prefill_kv_dequant_dtype is new in 0.5.21
        pass
    elif kv != "nvfp4" and requested != "auto":
        report.refuse("prefill_kv_cache_dequant_dtype", f"prefill_kv_cache_dequant_dtype {requested} applies only with "
                      "kv_cache_dtype nvfp4.", f"remove {ctx.var('prefill_kv_cache_dequant_dtype')}", 41)
    elif kv == "nvfp4":
        cc = ctx.compute_capability
        chosen, device = "", _choice(ctx, "device", "cuda")
        if not prefill:
            # The base as the hooks before fill it (filled_attention_backend): the Qwen3.5 / Qwen3-Next SM100 override's
            # triton, deterministic inference's fill (pipeline.py:240: triton for DeepSeek-V3 on an RTX PRO 6000), device
            # cpu's intel_amx / torch_native and hpu's torch_native (pipeline.py:205-206), all refused below (:53).
            filled = filled_attention_backend(ctx) or ""
            chosen, base = (filled if filled != base else ""), filled
        explicit = prefill or base
        by_backend = {b: d for d, b in NVFP4_PREFILL_BACKEND.items()}
        if requested == "auto" and explicit and explicit not in by_backend:
            why = (f" (device {device}'s attention backend, which handle_{device}_backends sets first: platform_hook.py:158-183)"
                   if device in ("cpu", "hpu") else
                   " (what deterministic inference fills in for an unset attention_backend: overrides.py:1093-1123)"
                   if deterministic_on(ctx) else
                   f" (SGLang's {ctx.model.architecture} override picks triton on SM100 when the attention backend "
                   "is unset and trtllm_mha is not its default there or nothing asks for it: an explicit extra_buffer "
                   "mamba strategy, a disabled radix cache or speculative decoding; model_overrides/qwen3_5.py:25-49)")
            report.refuse("prefill_attention_backend" if prefill else "attention_backend",
                          f"kv_cache_dtype nvfp4 prefills through flashinfer (FP8 workspace) or trtllm_mha (native NVFP4); "
                          f"{explicit} provides neither" + (why if chosen else "") + ".",
                          "set attention_backend: trtllm_mha (native NVFP4) or flashinfer (FP8 workspace)" if chosen else
                          "remove the attention backend option (NVFP4 selects its own)", 53)
            return
        if requested == "auto":
            requested = by_backend.get(explicit) or ("" if cc is None else "nvfp4" if cc[0] == 10 else "fp8_e4m3")
        target = NVFP4_PREFILL_BACKEND.get(requested)
        if requested == "nvfp4" and cc is not None and cc[0] != 10:
            # get_platform().is_sm100 is the major 10 (SM100 / SM103): the declared compute capability decides it.
            report.refuse("prefill_kv_cache_dequant_dtype" if _given(ctx, "prefill_kv_cache_dequant_dtype")
                          and _choice(ctx, "prefill_kv_cache_dequant_dtype", "auto") != "auto"
                          else "prefill_attention_backend" if prefill else "attention_backend",
                          "kv_cache_dtype nvfp4 with native NVFP4 prefill (prefill dequant dtype nvfp4"
                          + ("" if _choice(ctx, "prefill_kv_cache_dequant_dtype", "auto") != "auto"
                             else f", which the {explicit} backend selects") + f") needs SM100 (compute capability 10.x), "
                          f"not {_cc(ctx)}.", f"set {ctx.var('prefill_kv_cache_dequant_dtype')}: fp8_e4m3 (the flashinfer "
                          "prefill workspace), or remove the backend option", 60)
        elif prefill and target and prefill != target:
            report.refuse("prefill_attention_backend", f"kv_cache_dtype nvfp4 with prefill dequant dtype {requested} needs the "
                          f"{target} prefill backend, not prefill_attention_backend {prefill}.",
                          f"remove {ctx.var('prefill_attention_backend')} and choose the dtype only", 71)
        elif decode not in ("", "trtllm_mha"):
            report.refuse("decode_attention_backend", f"kv_cache_dtype nvfp4 decodes with trtllm_mha, not {decode}.",
                          f"remove {ctx.var('decode_attention_backend')} (NVFP4 selects its decode backend)", 80)
        elif ctx.is_set("enable_unified_memory"):
            _fp4_unified(ctx, report, kv)
        elif cc is not None and cc[0] == 10:
            _sm100_native_nvfp4(ctx, report)
    elif kv == "fp4_mx_block16" and ctx.is_set("enable_unified_memory"):
        _fp4_unified(ctx, report, kv)
    if ctx.is_set("prefill_only_disable_kv_cache"):
        resolved, _ = resolved_attention_backends(ctx)
        if resolved is not None and resolved not in ("fa3", "fa4"):
            report.refuse("prefill_only_disable_kv_cache", f"prefill_only_disable_kv_cache needs the FlashAttention prefill "
                          f"backend (fa3 / fa4), not {resolved}.", f"set {ctx.var('prefill_attention_backend')}: fa4 (or fa3 "
                          "where the GPU runs it), or remove prefill_only_disable_kv_cache", 344)
    ratio = _num(ctx, "swa_full_tokens_ratio")
    if ratio is not None and ctx.model.known and not 0 < ratio <= 1.0:
        report.refuse("swa_full_tokens_ratio", f"swa_full_tokens_ratio={ratio} is outside (0, 1].",
                      f"set {ctx.var('swa_full_tokens_ratio')} in (0, 1], or remove it", 428)
