# SPDX-License-Identifier: Apache-2.0
"""Hierarchical KV cache (HiCache) and its storage backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import _HCH, _choice, _given, _int, _json_arg, _num
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import cache_radix_off, decode_host_receive_on

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("server.hicache", since="0.5.21", shared=True, file=_HCH, sources=(
    "sglang/srt/arg_groups/hicache_hook.py:117",
))
def _hicache_host_memory(ctx: Context, report: Report) -> None:
    """hicache_host_memory_fraction in (0, 1] (hicache_hook.py:117, new in 0.5.21)."""
    fraction = _num(ctx, "hicache_host_memory_fraction")
    if fraction is not None and not 0 < fraction <= 1:
        report.refuse("hicache_host_memory_fraction", f"hicache_host_memory_fraction={fraction} is outside (0, 1].",
                      f"set {ctx.var('hicache_host_memory_fraction')} in (0, 1], or remove it (0.8)", 117)


LINKER_FIELDS = ("linker", "linker_module_path", "linker_extra_config")  # UnifiedCacheLinkerConfig (linker_config.py:13-17)


def _linker_config_problem(config: object, given: bool) -> tuple[str, int] | None:
    """UnifiedCacheLinkerConfig.from_dict (sglang/srt/mem_cache/unified_cache/linker_config.py:20-34, new in 0.5.23),
    which handle_hicache runs for the dynamic linker backend (hicache_hook.py:31-38): (why, line) or None. A config
    that is given but not JSON is left to the type check (None here)."""
    if not isinstance(config, dict):
        return None if given else ("unified_cache_external_linker_config is unset and must be a JSON object", 23)
    unknown = sorted(set(config) - set(LINKER_FIELDS))
    if unknown:
        return f"unified_cache_external_linker_config has unknown fields {unknown}", 26
    for name in LINKER_FIELDS[:2]:
        entry = config.get(name)
        if not isinstance(entry, str) or not entry.strip():
            return f"unified_cache_external_linker_config's {name} must be a non-empty string", 30
    if not isinstance(config.get("linker_extra_config", {}), dict):
        return "unified_cache_external_linker_config's linker_extra_config must be a JSON object", 34
    return None


@rule("server.hicache", shared=True, file=_HCH, sources=(
    "sglang/srt/arg_groups/hicache_hook.py:28",
    "sglang/srt/arg_groups/hicache_hook.py:43",
    "sglang/srt/arg_groups/hicache_hook.py:273",
    "sglang/srt/arg_groups/hicache_hook.py:290",
    "sglang/srt/arg_groups/hicache_hook.py:91",
    "sglang/srt/arg_groups/hicache_hook.py:158",
    "sglang/srt/mem_cache/unified_cache/linker_config.py:23",
    "sglang/srt/mem_cache/unified_cache/linker_config.py:26",
    "sglang/srt/mem_cache/unified_cache/linker_config.py:30",
    "sglang/srt/mem_cache/unified_cache/linker_config.py:34",
))
def _hicache(ctx: Context, report: Report) -> None:
    """handle_hicache and its helpers (hicache_hook.py), on the flags."""
    config = _json_arg(ctx, "unified_cache_external_linker_config")
    if added_in(ctx, "0.5.23") and _given(ctx, "unified_cache_external_linker_config") and config is not None and \
            not isinstance(config, dict):
        report.refuse("unified_cache_external_linker_config", "unified_cache_external_linker_config must be a JSON object.",
                      f"write {ctx.var('unified_cache_external_linker_config')} as a mapping", 28)
        return
    linker = ctx.is_set("enable_unified_cache_external_linker")
    if added_in(ctx, "0.5.23") and _choice(ctx, "unified_cache_external_linker_backend", "mooncake") == "dynamic" and \
            (linker or _given(ctx, "unified_cache_external_linker_config")):
        problem = _linker_config_problem(config, _given(ctx, "unified_cache_external_linker_config"))
        if problem is not None:
            ctx.error("server.hicache", "unified_cache_external_linker_config", f"unified_cache_external_linker_backend "
                      f"dynamic: {problem[0]}; SGLang refuses the launch.", f"set {ctx.var('unified_cache_external_linker_config')} "
                      'to {"linker": "<name>", "linker_module_path": "<module>"} (linker_extra_config optional)',
                      f"sglang/srt/mem_cache/unified_cache/linker_config.py:{problem[1]}")
            return
    if added_in(ctx, "0.5.21") and ctx.is_set("enable_linker_mla_dedup") and not (
            linker and _choice(ctx, "unified_cache_external_linker_backend", "mooncake") == "mooncake"):
        report.refuse("enable_linker_mla_dedup", "enable_linker_mla_dedup needs the Mooncake external linker "
                      "(enable_unified_cache_external_linker, backend mooncake).",
                      f"set {ctx.var('enable_unified_cache_external_linker')}: true, or remove enable_linker_mla_dedup", 43)
        return
    if linker:
        # The radix cache as handle_hicache sees it (cache_radix_off, pipeline.py:272): a PD decode server, enable_mis
        # and deterministic inference off ascend / fa3 / fa4 / triton have turned it off first (pipeline.py:147, :263,
        # :240), as for LMCache (the seed-3 10,000-case run's MISSED class, fuzz-3-00420).
        off = cache_radix_off(ctx)
        for bad, dest, why, line in (
            (added_in(ctx, "0.5.23") and (ctx.is_set("disable_radix_cache") or _given(ctx, "radix_cache_backend")),
             "disable_radix_cache", "needs the default radix cache (no disable_radix_cache, no radix_cache_backend)", 46),
            (added_in(ctx, "0.5.23") and off is not None, off[0] if off else "",
             f"needs the radix cache, which {off[1] if off else ''}", 46),
            (ctx.is_set("enable_hierarchical_cache"), "enable_hierarchical_cache", "and enable_hierarchical_cache are "
             "mutually exclusive", 51),
            (_given(ctx, "hicache_storage_backend"), "hicache_storage_backend", "does not use hicache_storage_backend", 56),
        ):
            if bad:
                report.refuse(dest, f"enable_unified_cache_external_linker {why}.", f"remove {ctx.var(dest)}", line)
                return
        return
    hicache = ctx.is_set("enable_hierarchical_cache")
    decode = _choice(ctx, "disaggregation_mode", "null") == "decode"
    # handle_hicache's gate (hicache_hook.py:63-71; 0.5.21 / 0.5.22 :45-53, 0.5.20 :40-48): HiCache, the decode KV
    # offload, or a PD decode server whose retraction backup is unset or host_pool (the decode host receive makes it
    # host_pool, pd_disaggregation_hook.py:68-80, and refuses cpu_tensor there). targeted-lora-29 (a decode server's
    # buffer_only) and targeted-lora-32 (the decode host receive's layout), without enable_hierarchical_cache, were MISSED.
    if not (hicache or ctx.is_set("disaggregation_decode_enable_offload_kvcache") or (
            decode and _choice(ctx, "disaggregation_decode_retraction_backup", "") in ("", "host_pool"))):
        return
    storage = _given(ctx, "hicache_storage_backend")
    buffer_only = _choice(ctx, "hicache_host_memory_mode", "cache") == "buffer_only"
    if buffer_only and not storage:
        report.refuse("hicache_host_memory_mode", "hicache_host_memory_mode buffer_only needs hicache_storage_backend (host "
                      "memory is only a staging buffer).", f"set {ctx.var('hicache_storage_backend')}, or "
                      "hicache_host_memory_mode: cache", release_line(ctx, {"0.5.23": 273, "0.5.21": 232, "0.5.20": 206}))
        return
    if buffer_only and not added_in(ctx, "0.5.22") and \
            _choice(ctx, "hicache_write_policy", "write_through") == "write_back":
        # 0.5.22 resolves write_back to write_through instead (hicache_hook.py:278-288).
        report.refuse("hicache_write_policy", "hicache_host_memory_mode buffer_only does not support hicache_write_policy "
                      "write_back.", f"set {ctx.var('hicache_write_policy')}: write_through",
                      release_line(ctx, {"0.5.21": "238", "0.5.20": "212"}))
        return
    if buffer_only and decode:
        report.refuse("hicache_host_memory_mode", "hicache_host_memory_mode buffer_only does not run on a PD decode server "
                      "(its prefetch and offload paths bypass the buffer-mode pipeline).",
                      f"set {ctx.var('hicache_host_memory_mode')}: cache",
                      release_line(ctx, {"0.5.23": "290", "0.5.22": "249", "0.5.21": "244", "0.5.20": "218"}))
        return
    store, io = _choice(ctx, "hicache_storage_backend", ""), _choice(ctx, "hicache_io_backend", "kernel")
    if decode_host_receive_on(ctx) and store in ("mooncake", "npu_memcache") and io in ("direct", "kernel") and not (
            added_in(ctx, "0.5.23") and store == "mooncake" and _int(ctx, "dcp_size", 1) > 1):
        # The decode host receive forces layer_first (hicache_hook.py:75-79), which resolve_storage_layout_compatibility
        # then rewrites for Mooncake / Ascend MemCache to page_first (kernel I/O) or page_first_direct (direct I/O)
        # (:197-225; Mooncake with dcp_size > 1 keeps it from 0.5.23, :199-202), and the two no longer match (:87-94).
        report.refuse("hicache_storage_backend", f"hicache_storage_backend {store} rewrites the layer_first host layout "
                      "the decode host receive (disaggregation_decode_host_receive_threshold < 1) shares with KV transfer.",
                      f"use another {ctx.var('hicache_storage_backend')}, or remove "
                      f"{ctx.var('disaggregation_decode_host_receive_threshold')}",
                      release_line(ctx, {"0.5.23": "91", "0.5.21": "72"}))
        return
    if not hicache:
        return
    if _int(ctx, "dcp_size", 1) > 1:
        algo = str(ctx.args.get("speculative_algorithm") or "").upper() if _given(ctx, "speculative_algorithm") else ""
        for bad, dest, why, line in (
            (storage and buffer_only, "hicache_host_memory_mode", "buffer_only host memory with a storage backend", 138),
            # Before 0.5.23 any storage backend (L3) with DCP (hicache_hook.py:115-116 in 0.5.21 and 0.5.22, :89-90 in 0.5.20).
            (storage and not added_in(ctx, "0.5.23"), "hicache_storage_backend", "a storage backend (L3)",
             "115-116 (0.5.21, 0.5.22; 0.5.20 :89-90)"),
            (algo not in ("", "DSPARK"), "speculative_algorithm", f"speculative decoding other than DSPARK ({algo})", 142),
            (ctx.is_set("enable_lmcache"), "enable_lmcache", "enable_lmcache", 148),
            (ctx.is_set("enable_hisparse"), "enable_hisparse", "enable_hisparse", 153),
            # use_mla_backend reads the model's attention architecture (model_override_base.py:185-189): a known model's
            # (the same check in 0.5.20-0.5.22); the corpus case catalog-hicache-dcp-mha (issue 36).
            (ctx.model.known and not ctx.model.mla, "dcp_size", f"a model without MLA attention ({ctx.model.architecture}: "
             "the MHA host pool has no DCP index translation)", 158),
        ):
            if bad:
                report.refuse(dest, f"HiCache with decode context parallelism (dcp_size > 1) does not support {why}.",
                              f"remove {ctx.var(dest)}, or set dcp_size: 1", line)
                return
