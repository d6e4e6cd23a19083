# SPDX-License-Identifier: Apache-2.0
"""Deprecated and renamed flags, applied first: SGLang still honours deprecated flags and aliases by translating
them, and the later rules check the translated values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import _choice, _int
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, rule
from packaging.version import Version

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@dataclass(frozen=True)
class Renamed:
    """A flag that was removed or renamed, or is deprecated, and what replaced it.

    ``deprecated`` entries are flags the pinned release still registers and honours (SGLang logs a
    deprecation warning and translates them): the validator warns and uses ``fix``; ``message`` only
    serves a later release whose schema no longer has the flag.
    """

    old: str
    new: str | None
    since: str
    fix: str
    source: str | None = None
    deprecated: bool = False

    def applies(self, version: Version) -> bool:
        """True from the release that renamed (or deprecated) it."""
        return version >= Version(self.since)

    def message(self, version: str) -> str:
        """Why the key is refused (the pinned release has no such argument)."""
        new = f" it is --{self.new.replace('_', '-')} now" if self.new else ""
        what = "was deprecated in" if self.deprecated else "was removed or renamed in"
        return f"--{self.old.replace('_', '-')} {what} SGLang {self.since} (pinned: {version}, which has no such argument);{new}."


RENAMED: dict[str, Renamed] = {
    r.old: r
    for r in (
        Renamed("mamba_scheduler_strategy", "mamba_radix_cache_strategy", "0.5.20",
                "rename the key to mamba_radix_cache_strategy (same values, e.g. extra_buffer)"),
        Renamed("cuda_graph_max_bs", "cuda_graph_max_bs_decode", "0.5.20",
                "rename the key to cuda_graph_max_bs_decode (and cuda_graph_max_bs_prefill for prefill graphs)"),
        # Deprecated, not removed: 0.5.23 still registers both and honours them.
        Renamed("enable_dp_attention", "attn_dp_size", "0.5.23",
                "write `attn_dp_size: N` instead of `dp_size: N` + `enable_dp_attention: true` (dp_size stays 1); "
                "SGLang 0.5.23 still accepts the old spelling and converts it just so",
                "sglang/srt/server_args.py:416-424, sglang/srt/arg_groups/parallel_hook.py:39-61", deprecated=True),
        Renamed("disable_cuda_graph", None, "0.5.23",
                "set cuda_graph_backend_decode: disabled and cuda_graph_backend_prefill: disabled instead "
                "(SGLang 0.5.23 still honours disable_cuda_graph by disabling both)",
                "sglang/srt/server_args.py:410-415, sglang/srt/arg_groups/cuda_graph_hook.py:55-57", deprecated=True),
    )
}


@rule("schema.deprecated", sources=(
    "sglang/srt/arg_groups/parallel_hook.py:39-61",
    "sglang/srt/arg_groups/parallel_hook.py:50-61",
))
def _deprecated(ctx: Context, report: Report) -> None:
    """Deprecated flags that SGLang still honours (the schema's ``deprecated``): a warning naming the replacement."""
    for dest in [d for d in ctx.args if getattr(ctx.schema.arguments.get(d), "deprecated", False) and ctx.is_set(d)]:
        if dest == "enable_dp_attention":
            _dp_attention(ctx)
            continue
        spec, renamed = ctx.schema.arguments[dest], RENAMED.get(dest)
        ctx.warn("schema.deprecated", dest,
                 f"{spec.flag} is deprecated in SGLang {ctx.schema.version}; it still takes effect (SGLang logs a "
                 f"deprecation warning)" + (f": {spec.deprecated_message}" if spec.deprecated_message else "."),
                 renamed.fix if renamed else (spec.deprecated_message or f"remove {ctx.var(dest)}"),
                 renamed.source if renamed else spec.source)


# SGLang 0.5.23's deprecated attention-backend aliases, which _handle_deprecated_args renames before anything reads
# them (sglang/srt/arg_groups/serving_hook.py:303-336). In 0.5.20-0.5.22 tokenspeed_mla is a backend of its own
# (server.tokenspeed_mla); compressed is dsv4 there too (0.5.22 serving_hook.py:296-310).
BACKEND_ALIASES = {"compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}


BACKEND_ALIAS_SINCE = {"compressed": "0.5.20", "tokenspeed_mla": "0.5.23"}


ALIASED_BACKEND_DESTS = ("attention_backend", "decode_attention_backend", "prefill_attention_backend",
                         "speculative_draft_attention_backend")


@rule("schema.deprecated_alias", ids=("schema.deprecated",), sources=(
    "sglang/srt/arg_groups/serving_hook.py:303-336",
))
def _backend_aliases(ctx: Context, report: Report) -> None:
    """Deprecated backend aliases, applied to the args as SGLang applies them (a warning naming the new name).

    As with enable_dp_attention, the launch command gets the modern spelling: it is what the later rules check and
    what SGLang runs. tokenspeed_mla also implied an FP8 KV cache and decode-kernel verification, which SGLang keeps
    (serving_hook.py:324-336).
    """
    tokenspeed = added_in(ctx, BACKEND_ALIAS_SINCE["tokenspeed_mla"]) and "tokenspeed_mla" in (
        _choice(ctx, "attention_backend", ""), _choice(ctx, "decode_attention_backend", ""))
    where = "sglang/srt/arg_groups/serving_hook.py:303-336"
    for dest in ALIASED_BACKEND_DESTS:
        old = _choice(ctx, dest, "")
        if old not in BACKEND_ALIASES or not added_in(ctx, BACKEND_ALIAS_SINCE[old]):
            continue
        new = BACKEND_ALIASES[old]
        if dest == "prefill_attention_backend" and new == "cutedsl_mla":
            new = "trtllm_mla"  # cutedsl_mla decodes only (serving_hook.py:321-323)
        ctx.args[dest] = new
        ctx.warn("schema.deprecated", dest, f"{dest} {old} is deprecated in SGLang {ctx.schema.version}; SGLang runs it "
                 f"as {new}, and so does the launch command.", f"set {ctx.var(dest)}: {new}", where, value=old)
    if not tokenspeed:
        return
    kv = _choice(ctx, "kv_cache_dtype", "auto")
    if kv != "fp8_e4m3":
        ctx.args["kv_cache_dtype"] = "fp8_e4m3"
        ctx.warn("schema.deprecated", "kv_cache_dtype", f"tokenspeed_mla implies an FP8 KV cache: SGLang replaces "
                 f"kv_cache_dtype {kv} by fp8_e4m3, and so does the launch command.",
                 f"set {ctx.var('kv_cache_dtype')}: fp8_e4m3 and the backend cutedsl_mla", where, value=kv)
    if ctx.args.get("speculative_algorithm") and _choice(ctx, "speculative_attention_mode", "prefill") == "prefill":
        ctx.args["speculative_attention_mode"] = "decode"


@rule("schema.deprecated_conflict", ids=("schema.deprecated_conflict", "nvidia.amd_only"), sources=(
    "sglang/srt/arg_groups/serving_hook.py:258-263",
    "sglang/srt/kernel_plugins/amd/binding.py:205-217",
))
def _deprecated_conflicts(ctx: Context, report: Report) -> None:
    """Where SGLang refuses what a deprecated flag translates to."""
    backend = ctx.args.get("image_processor_backend")
    if ctx.is_set("disable_fast_image_processor") and backend not in (None, "auto", "pil"):
        ctx.error("schema.deprecated_conflict", "disable_fast_image_processor",
                  f"--disable-fast-image-processor means image_processor_backend pil, which conflicts with {backend!r}; "
                  "SGLang refuses the pair.", "remove disable_fast_image_processor (image_processor_backend decides)",
                  "sglang/srt/arg_groups/serving_hook.py:258-263")
    for dest in ("enable_amd_monokernel", "monokernel_backend"):  # monokernel_backend: its deprecated spelling
        if ctx.is_set(dest):
            ctx.error("nvidia.amd_only", dest,
                      "the AMD monokernel is for AMD GPUs; on an NVIDIA host SGLang finds no 'amd' monokernel backend "
                      "and refuses to start.", f"remove {ctx.var(dest)}", "sglang/srt/kernel_plugins/amd/binding.py:205-217")


def _dp_attention(ctx: Context) -> None:
    """SGLang's handle_deprecated_dp_attention (sglang/srt/arg_groups/parallel_hook.py:39-61), applied to the args.

    The launch command gets the modern spelling (--attn-dp-size N, no --dp-size, no --enable-dp-attention):
    it is exactly what the later rules checked, SGLang resolves both spellings to the same layout, and the
    old flag is due to go (server_args.py:417 "remove the flag and the field after 2026-12-31"), so a later
    pin keeps working without touching the inventory.
    """
    dp, attn_dp = _int(ctx, "dp_size", 1), _int(ctx, "attn_dp_size", 1)
    ctx.args.pop("enable_dp_attention")
    if attn_dp != 1:
        ctx.warn("schema.deprecated", "enable_dp_attention",
                 f"--enable-dp-attention is deprecated in SGLang {ctx.schema.version}; next to attn_dp_size={attn_dp} it "
                 "adds nothing (SGLang drops it).", f"remove {ctx.var('enable_dp_attention')}",
                 "sglang/srt/arg_groups/parallel_hook.py:50-61", value=True)
        return
    ctx.args.pop("dp_size", None)
    if dp != 1:  # any value, as SGLang moves it (a size below 1 is then refused as attn_dp_size)
        ctx.args["attn_dp_size"] = dp
    ctx.warn("schema.deprecated", "enable_dp_attention",
             f"--enable-dp-attention is deprecated in SGLang {ctx.schema.version}; SGLang still accepts it and reads "
             f"dp_size={dp} + enable_dp_attention as attn_dp_size={dp}, dp_size=1 ({dp} attention-DP groups inside one "
             "TP group, one replica). The launch command uses that modern spelling.",
             f"write attn_dp_size: {dp} instead of dp_size: {dp} and enable_dp_attention: true (dp_size stays 1)",
             "sglang/srt/arg_groups/parallel_hook.py:39-61", value=True)
