"""The cross-field and hardware rules the validator applies.

Each rule is a function of a validation context (see ``sglang_validate.Context``)
that records problems.  Rules carry the SGLang versions they apply to, so a later
release can change them without touching the others.  Where a rule restates a
check of SGLang itself, its ``source`` names the file and line in that release.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_contract import is_loopback
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES
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

SPEC_TRIPLE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
EAGLE_FAMILY = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}
# sglang/srt/speculative/spec_info.py SpeculativeAlgorithm members + reserved alias NEXTN (0.5.23).
SPEC_ALGORITHMS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP"}

ATTENTION_DESTS = (
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "speculative_draft_attention_backend",
)
MOE_RUNNER_DESTS = ("moe_runner_backend", "speculative_moe_runner_backend")

RuleFn = Callable[["Context"], None]


@dataclass(frozen=True)
class Rule:
    """A rule and the SGLang versions it applies to (inclusive lower bound, exclusive upper)."""

    rule_id: str
    fn: RuleFn
    since: Version = Version("0.5.20")
    until: Version | None = None

    def applies(self, version: Version) -> bool:
        """True when this rule holds for ``version``."""
        return version >= self.since and (self.until is None or version < self.until)


RULES: list[Rule] = []


def rule(rule_id: str, since: str = "0.5.20", until: str | None = None) -> Callable[[RuleFn], RuleFn]:
    """Register a rule function for the SGLang releases ``since`` <= version < ``until`` (PEP 440: 0.5.24rc1 < 0.5.24)."""

    def wrap(fn: RuleFn) -> RuleFn:
        RULES.append(Rule(rule_id, fn, Version(since), Version(until) if until else None))
        return fn

    return wrap


def run_rules(ctx: Context) -> None:
    """Apply every rule that holds for the context's SGLang version."""
    for item in RULES:
        if item.applies(ctx.version):
            item.fn(ctx)


def added_in(ctx: Context, version: str) -> bool:
    """A check's own lower bound inside a rule (a table entry SGLang added after the rule's ``since=``): True when
    the context's SGLang release has it, ``version`` <= release, compared as Rule.applies compares."""
    return ctx.version >= Version(version)


def _int(ctx: Context, dest: str, default: int) -> int:
    value = ctx.get(dest, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def attention_dp_width(ctx: Context) -> int:
    """The attention-DP width SGLang divides chunked_prefill_size by (parallel_hook.py:314-331): attn_dp_size, or
    the deprecated dp_size + enable_dp_attention of releases that still have it (0.5.23 moves it to attn_dp_size
    first, and so does schema.deprecated_dp_attention here); 1 without attention DP."""
    width = _int(ctx, "attn_dp_size", 1)
    if width <= 1 and ctx.args.get("enable_dp_attention") is True:
        width = _int(ctx, "dp_size", 1)
    return max(width, 1)


def attention_dp_on(ctx: Context) -> bool:
    """Attention DP as the release's checks test it: attn_dp_enabled_of, attn_dp_size > 1 (0.5.22 on); before 0.5.22,
    which has no attn_dp_size, enable_dp_attention itself (e.g. 0.5.21 kv_cache_hook.py:454, moe_hook.py:272)."""
    return attention_dp_width(ctx) > 1 if added_in(ctx, "0.5.22") else ctx.args.get("enable_dp_attention") is True


def _spec_values(ctx: Context) -> tuple[Any, Any, Any]:
    return tuple(ctx.args.get(d) for d in SPEC_TRIPLE)  # type: ignore[return-value]


# SGLang's EnvBool.parse (sglang/srt/environ.py:143-150): the value, lower-cased but not stripped, is true for
# these; "false", "0", "no", "n" and anything else ("on", " 1") read as the default, False for every switch the
# rules read (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN environ.py:320, SGLANG_IS_IN_CI :385,
# SGLANG_ENABLE_PP_SPEC :1557; an invalid value only warns, environ.py:80-86).
ENV_TRUE = ("true", "1", "yes", "y")


def env_true(env: Mapping[str, str], name: str) -> bool:
    """True when SGLang reads the environment switch ``name`` as on (exactly its EnvBool truthiness)."""
    value = env.get(name)
    return isinstance(value, str) and value.lower() in ENV_TRUE


# --- deprecated flags SGLang still honours (first: later rules check the translated values) ----------


@rule("schema.deprecated")
def _deprecated(ctx: Context) -> None:
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


@rule("schema.deprecated_alias")
def _backend_aliases(ctx: Context) -> None:
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


@rule("server.tokenspeed_mla", until="0.5.23")
def _tokenspeed_mla(ctx: Context) -> None:
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


@rule("schema.deprecated_conflict")
def _deprecated_conflicts(ctx: Context) -> None:
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


@rule("serving.ssl")
def _ssl(ctx: Context) -> None:
    """TLS arguments that only work together (the files themselves are checked on the host by the preflight)."""
    where = "sglang/srt/arg_groups/serving_hook.py:47-87 (handle_ssl_validation)"
    cert, key = ctx.is_set("ssl_certfile"), ctx.is_set("ssl_keyfile")
    if cert != key:
        have, lacks = ("ssl_certfile", "ssl_keyfile") if cert else ("ssl_keyfile", "ssl_certfile")
        ctx.error("serving.ssl", have, f"--{have.replace('_', '-')} requires --{lacks.replace('_', '-')}; SGLang "
                  "refuses one without the other.", f"set sglang_args.{lacks} (a PEM file on the host) or remove "
                  f"{ctx.var(have)}", where)
    elif not cert:
        for dest, var in (("ssl_ca_certs", ctx.var("ssl_ca_certs")), ("ssl_keyfile_password", "sglang_ssl_keyfile_password")):
            if ctx.is_set(dest):
                named = var if dest == "ssl_keyfile_password" else dest
                ctx.error("serving.ssl", named, f"{var} has no effect without ssl_certfile and ssl_keyfile; SGLang "
                          "refuses it.", f"set sglang_args.ssl_certfile and ssl_keyfile, or remove {var}", where)
    if ctx.is_set("enable_ssl_refresh") and not (cert and key):
        ctx.error("serving.ssl", "enable_ssl_refresh", "--enable-ssl-refresh reloads a certificate the server does not "
                  "have; SGLang refuses it without ssl_certfile and ssl_keyfile.",
                  f"set sglang_args.ssl_certfile and ssl_keyfile, or remove {ctx.var('enable_ssl_refresh')}", where)


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


# --- speculative decoding ----------------------------------------------------------------------


@rule("spec.algorithm")
def _spec_algorithm(ctx: Context) -> None:
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


@rule("spec.triple")
def _spec_triple(ctx: Context) -> None:
    algo = str(ctx.args.get("speculative_algorithm") or "").upper()
    if algo not in EAGLE_FAMILY or ctx.is_set("speculative_adaptive"):
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


def _attention_backends(ctx: Context) -> list[tuple[str, str]]:
    return [(d, str(ctx.args[d])) for d in ATTENTION_DESTS if ctx.args.get(d) is not None and d in ctx.schema.arguments]


def nvfp4_kv_decodes_with_trtllm_mha(ctx: Context) -> bool:
    """handle_nvfp4_prefill_kv_dequant_dtype (kv_cache_hook.py:77-89, new in 0.5.21): an NVFP4 KV cache decodes with
    trtllm_mha (server.kv_cache refuses another decode backend)."""
    return ctx.args.get("kv_cache_dtype") == "nvfp4" and added_in(ctx, "0.5.21")


def auto_spec_triple(ctx: Context, algo: str) -> tuple[int, int, int]:
    """_auto_choose_speculative_params (speculative_hook.py:1430-1461): (num_steps, eagle_topk, num_draft_tokens)
    SGLang picks when none of the three is set."""
    return (3, 1, 4) if algo == "STANDALONE" else ctx.model.spec_auto


def effective_eagle_topk(ctx: Context, algo: str) -> int | float | None:
    """speculative_eagle_topk as an EAGLE-family algorithm runs it: the host's value, else, with none of the triple
    set, SGLang's choice (auto_spec_triple) or 1 with speculative_adaptive; None where the model is not known."""
    topk = _num(ctx, "speculative_eagle_topk")
    if topk is None and all(v is None for v in _spec_values(ctx)):
        topk = 1 if ctx.is_set("speculative_adaptive") else auto_spec_triple(ctx, algo)[1] if (
            algo == "STANDALONE" or ctx.model.known) else None
    return topk


@rule("spec.backend")
def _spec_backend(ctx: Context) -> None:
    """speculative_hook.py:1175-1179: trtllm_mha among the attention backends (explicit, or the decode backend of an
    NVFP4 KV cache from 0.5.21: kv_cache_hook.py:77-89) runs an EAGLE-family draft with eagle_topk 1 only, the
    host's topk or the one SGLang chooses for the model."""
    algo = str(ctx.args.get("speculative_algorithm") or "").upper()
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


PP_SPEC_ENV = "SGLANG_ENABLE_PP_SPEC"


@rule("spec.pipeline")
def _spec_pipeline(ctx: Context) -> None:
    """SGLang's check_pipeline_parallel_compat for speculative decoding (sglang/srt/arg_groups/validation_hook.py:119-162)."""
    algo, pp = str(ctx.args.get("speculative_algorithm") or "").upper(), _int(ctx, "pp_size", 1)
    if not algo or pp <= 1:
        return
    mode, pp_spec = str(ctx.get("disaggregation_mode", "null")), env_true(ctx.env, PP_SPEC_ENV)
    where = "sglang/srt/arg_groups/validation_hook.py"
    off = "use tp_size instead of pp_size, or turn speculative decoding off (-e spec=off)"
    if not added_in(ctx, "0.5.21"):  # 0.5.20 refuses PP + speculative decoding on CUDA outright (validation_hook.py:80-84)
        ctx.error("spec.pipeline", "pp_size", f"pipeline parallelism (pp_size={pp}) with speculative decoding ({algo}): "
                  f"SGLang {ctx.schema.version} does not support the pair on CUDA.", off, f"{where}:80-84 (0.5.20)")
        return
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


@rule("mamba.no_buffer")
def _mamba_no_buffer(ctx: Context) -> None:
    if str(ctx.args.get("mamba_radix_cache_strategy") or "") != "no_buffer":
        return
    if any(b == "trtllm_mha" for d, b in _attention_backends(ctx) if d != "speculative_draft_attention_backend"):
        ctx.error("mamba.trtllm_mha", "mamba_radix_cache_strategy",
                  "trtllm_mha does not support mamba_radix_cache_strategy no_buffer.",
                  "use mamba_radix_cache_strategy extra_buffer, or the triton backend",
                  "sglang/srt/arg_groups/mamba_hook.py:161")
    if ctx.is_set("disable_overlap_schedule") or (ctx.model.known and not ctx.model.hybrid_linear_attention):
        return
    ctx.error("mamba.no_buffer", "mamba_radix_cache_strategy",
              "mamba_radix_cache_strategy no_buffer needs the overlap scheduler off; SGLang asserts otherwise.",
              "use extra_buffer (recommended), or also set disable_overlap_schedule: true",
              "sglang/srt/arg_groups/mamba_hook.py:158")


# --- hardware profiles: what each compute capability runs -------------------------------------------
#
# One profile per GPU architecture SGLang 0.5.23 tells apart (get_platform().is_sm90 / is_sm100 / is_sm110 /
# is_sm120 / is_blackwell: sglang/srt/utils/common.py:289-335 match on the MAJOR only, so 10.3 is "sm100" and
# 12.1 is "sm120").  Each entry says what that architecture refuses and where SGLang refuses it; an entry
# without a source is stricter than SGLang (it fails only at run time) and its reason says so.


@dataclass(frozen=True)
class Refusal:
    """Why an architecture cannot run a backend or format; ``source`` is SGLang's own check, if any."""

    why: str
    source: str | None = None


@dataclass(frozen=True)
class ArchProfile:
    """The hardware rules of one compute-capability family; ``family`` prefixes the rule ids."""

    family: str
    gpus: str
    attention: Mapping[str, Refusal]  # text attention backends (attention, prefill, decode, draft)
    mla_attention: Mapping[str, Refusal]  # refused only for MLA models (DeepSeek)
    hybrid_attention: tuple[str, ...] | None  # full-attention backends hybrid GDN models may use; None: any
    mm_attention: Mapping[str, Refusal]  # the vision encoder's mm_attention_backend
    moe_runners: Mapping[str, Refusal]
    kv_cache: Mapping[str, Refusal]
    trtllm_mha_fp8_kv: bool = False  # TRTLLM FMHAv2 prefill (SM120) has no fp8_e4m3 KV cache
    trtllm_mha_cp: bool = False  # trtllm_mha prefill with attn_cp_size > 1 needs SM100's context kernel
    nvfp4_moe_explicit: bool = False  # NVFP4 MoE checkpoints need quantization modelopt_fp4 (or flashinfer_cutlass)
    sm100: bool = False  # datacenter Blackwell SM100/SM103 (get_platform().is_sm100)
    # FlashInfer's linear-attention (GDN) decode/verify kernels on SM100+ (major >= 10) keep a bf16 state.
    linear_flashinfer_bf16: bool = False


_REG = "sglang/srt/layers/attention/attention_registry.py"
_NON_NVIDIA = {
    "aiter": Refusal("aiter is AMD ROCm only"),
    "wave": Refusal("wave is AMD ROCm only"),
    "ascend": Refusal("ascend is Huawei Ascend NPU only"),
    "intel_amx": Refusal("intel_amx is a CPU backend"),
    "intel_xpu": Refusal("intel_xpu is an Intel GPU backend"),
}
_FA3 = Refusal("FlashAttention 3 runs on SM80 (non-MLA models) and SM90 only; SGLang asserts it when it builds the "
               "backend, after loading the weights", f"{_REG}:241-246")
_FA3_MLA = Refusal("FlashAttention 3 on SM80/SM86/SM89 serves non-MLA models only; SGLang asserts it when it builds "
                   "the backend, after loading the weights", f"{_REG}:241-246")
_HPC_OPS = Refusal("the hpc_ops kernels ship for SM90 (Hopper) only; SGLang refuses other GPUs when it builds the backend",
                   "sglang/srt/layers/attention/hpc_ops_backend.py:138-143")
_TRTLLM_MHA = Refusal("the TRTLLM MHA backend runs on SM90, SM100 and SM120 only",
                      "sglang/srt/arg_groups/attention_hook.py:200-225")
_TRTLLM_MLA = Refusal("the TRTLLM MLA backend runs on Blackwell only", "sglang/srt/arg_groups/overrides.py:1210-1213")
_TRTLLM_MLA_SM12X = Refusal("TensorRT-LLM MLA kernels are SM100-only (stricter than SGLang, which lets SM12x through "
                            "at start-up: the kernels then fail at run time)")
_CUTEDSL_MLA = Refusal("the CuTe-DSL MLA kernels target datacenter Blackwell (SM100) only",
                       "sglang/srt/arg_groups/overrides.py:1244-1247")
_FLASHMLA = Refusal("FlashMLA supports SM90/SM100 only (stricter than SGLang, which fails at run time)")
_MM_FA3 = Refusal("the vision encoder's FlashAttention 3 does not run on Blackwell",
                  "sglang/srt/layers/attention/vision.py:1330-1331")
_MM_NON_NVIDIA = {
    "aiter_attn": Refusal("aiter_attn is AMD ROCm only"),
    "ascend_attn": Refusal("ascend_attn is Huawei Ascend NPU only"),
    "amx_attn": Refusal("amx_attn is a CPU backend"),
    "xpu_attn": Refusal("xpu_attn is an Intel GPU backend"),
}
_TRTLLM_MOE = Refusal("uses TensorRT-LLM (trtllm-gen) MoE kernels built for datacenter Blackwell (SM100) only "
                      "(SGLang says so where it picks a runner, sglang/srt/arg_groups/overrides.py:1513-1522, but "
                      "lets an explicit choice through: stricter, it fails at run time)")
_MOE_SM100 = dict.fromkeys(("flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm"), _TRTLLM_MOE)
_MOE_NON_NVIDIA = {"aiter": Refusal("aiter is AMD ROCm only"), "intel_xpu": Refusal("intel_xpu is an Intel GPU backend")}
_KV = "sglang/srt/arg_groups/kv_cache_hook.py"
_KV_MXFP8 = Refusal("an MXFP8 KV cache needs Blackwell (SM100+) block-scaled operands", f"{_KV}:105-109")
_KV_NVFP4 = Refusal("an NVFP4 KV cache needs Blackwell SM100 or SM120", f"{_KV}:126-131")
# The hybrid GDN models' full-attention backends (sglang/srt/layers/attention/attention_registry.py:462-476).
HYBRID_SM12X_ATTENTION = ("triton", "trtllm_mha", "flashinfer")
HYBRID_SM100_ATTENTION = ("triton", "trtllm_mha", "fa4", "flashinfer")  # HYBRID_GDN_SM100_BACKENDS, :44

_SM8X = dict(
    attention={**_NON_NVIDIA, "hpc_ops": _HPC_OPS, "trtllm_mha": _TRTLLM_MHA, "trtllm_mla": _TRTLLM_MLA,
               "cutedsl_mla": _CUTEDSL_MLA, "flashmla": _FLASHMLA},
    mla_attention={"fa3": _FA3_MLA}, hybrid_attention=None, mm_attention=_MM_NON_NVIDIA,
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100}, kv_cache={"mxfp8": _KV_MXFP8, "nvfp4": _KV_NVFP4},
)
_SM8X_AMPERE = ArchProfile("sm8x", "Ampere (A100, A10, RTX 30)", **_SM8X)
_SM8X_ADA = ArchProfile("sm8x", "Ada (L40S, L4, RTX 40)", **_SM8X)
_SM90 = ArchProfile(
    "sm90", "Hopper (H100, H200, GH200)",
    attention={**_NON_NVIDIA, "trtllm_mla": _TRTLLM_MLA, "cutedsl_mla": _CUTEDSL_MLA},
    mla_attention={}, hybrid_attention=None, mm_attention=_MM_NON_NVIDIA,
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100}, kv_cache={"mxfp8": _KV_MXFP8, "nvfp4": _KV_NVFP4},
    trtllm_mha_cp=True,
)
_SM10X = ArchProfile(
    "sm10x", "datacenter Blackwell (B200, GB200, B300, GB300)",
    attention={**_NON_NVIDIA, "fa3": _FA3, "hpc_ops": _HPC_OPS},
    mla_attention={}, hybrid_attention=HYBRID_SM100_ATTENTION, mm_attention={**_MM_NON_NVIDIA, "fa3": _MM_FA3},
    moe_runners=_MOE_NON_NVIDIA, kv_cache={}, sm100=True, linear_flashinfer_bf16=True,
)
_SM110 = ArchProfile(
    "sm110", "Jetson Thor",
    attention={**_NON_NVIDIA, "fa3": _FA3, "hpc_ops": _HPC_OPS, "trtllm_mha": _TRTLLM_MHA, "cutedsl_mla": _CUTEDSL_MLA},
    mla_attention={}, hybrid_attention=HYBRID_SM100_ATTENTION, mm_attention={**_MM_NON_NVIDIA, "fa3": _MM_FA3},
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100}, kv_cache={"nvfp4": _KV_NVFP4}, nvfp4_moe_explicit=True,
    linear_flashinfer_bf16=True,
)
_SM12X = ArchProfile(
    "sm12x", "workstation Blackwell (RTX PRO 6000, RTX 50, GB10)",
    attention={**_NON_NVIDIA, "fa3": _FA3, "hpc_ops": _HPC_OPS, "cutedsl_mla": _CUTEDSL_MLA, "trtllm_mla": _TRTLLM_MLA_SM12X,
               "flashmla": _FLASHMLA},
    mla_attention={}, hybrid_attention=HYBRID_SM12X_ATTENTION, mm_attention={**_MM_NON_NVIDIA, "fa3": _MM_FA3},
    moe_runners={**_MOE_NON_NVIDIA, **_MOE_SM100,
                 "flashinfer_cutedsl": Refusal("starts, but produced garbage output on SM120 in the deployment that "
                                               "started this project (stricter than SGLang)")},
    kv_cache={}, trtllm_mha_fp8_kv=True, trtllm_mha_cp=True, nvfp4_moe_explicit=True, linear_flashinfer_bf16=True,
)
# Compute capability -> profile (nvidia-smi --query-gpu=compute_cap).
PROFILES: dict[tuple[int, int], ArchProfile] = {
    (8, 0): _SM8X_AMPERE, (8, 6): _SM8X_AMPERE, (8, 7): _SM8X_AMPERE, (8, 9): _SM8X_ADA,
    (9, 0): _SM90,
    (10, 0): _SM10X, (10, 3): _SM10X,
    (11, 0): _SM110,
    (12, 0): _SM12X, (12, 1): _SM12X,
}
# Quantization methods and the least capability (major * 10 + minor) SGLang loads them on: the loader refuses
# less (sglang/srt/model_loader/loader.py:254-265, after the model's config is read, before the weights).
_Q = "sglang/srt/layers/quantization"
QUANT_MIN_CAPABILITY: dict[str, tuple[int, str]] = {
    "modelopt": (89, f"{_Q}/modelopt_quant.py:462-463"),
    "modelopt_fp8": (89, f"{_Q}/modelopt_quant.py:462-463"),
    "w8a8_fp8": (89, f"{_Q}/w8a8_fp8.py:66-67"),
    "w4afp8": (90, f"{_Q}/w4afp8.py:70-71"),
    "petit_nvfp4": (90, f"{_Q}/petit.py:62-64"),
    "mxfp8": (100, f"{_Q}/fp8.py:329-339"),
    "nvfp4_online": (100, f"{_Q}/nvfp4_online.py:135-136"),
}
# --quantization nvfp4_online is for SM100/SM103 only (is_sm100: major 10).
NVFP4_ONLINE_SOURCE = "sglang/srt/arg_groups/overrides.py:1457-1461"
MIN_PROFILED = (8, 0)


def arch_profile(ctx: Context) -> ArchProfile | None:
    """The profile of the declared compute capability; None when it is not declared or has none."""
    return PROFILES.get(ctx.compute_capability) if ctx.compute_capability else None


def _cc(ctx: Context) -> str:
    return ".".join(map(str, ctx.compute_capability or ()))


@rule("arch.profile")
def _arch_known(ctx: Context) -> None:
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


def _trtllm_in(ctx: Context, dests: tuple[str, ...]) -> bool:
    return any(b == "trtllm_mha" for d, b in _attention_backends(ctx) if d in dests)


@rule("arch.attention")
def _arch_attention(ctx: Context) -> None:
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
    mm = ctx.args.get("mm_attention_backend")
    if mm is not None and str(mm) in profile.mm_attention and "mm_attention_backend" in ctx.schema.arguments:
        refusal = profile.mm_attention[str(mm)]
        ctx.error(f"{fam}.mm_attention", "mm_attention_backend",
                  f"mm_attention_backend {mm!r} (the vision encoder) does not work on compute capability {cc}: {refusal.why}.",
                  "use triton_attn or sdpa, or leave it unset (SGLang picks per GPU)", refusal.source)
    non_draft = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
    if profile.trtllm_mha_fp8_kv and _trtllm_in(ctx, non_draft) and str(ctx.args.get("kv_cache_dtype") or "") == "fp8_e4m3":
        ctx.error(f"{fam}.trtllm_mha_kv", "kv_cache_dtype",
                  f"trtllm_mha with kv_cache_dtype fp8_e4m3 is not supported on compute capability {cc} "
                  "(TRTLLM FMHAv2 prefill on SM120).",
                  "use kv_cache_dtype auto (or bf16), or the triton / flashinfer backend",
                  "sglang/srt/arg_groups/attention_hook.py:218")
    if profile.trtllm_mha_cp and _trtllm_in(ctx, ("attention_backend", "prefill_attention_backend")) \
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


@rule("arch.moe")
def _arch_moe(ctx: Context) -> None:
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
    if not profile.sm100 and ctx.args.get("moe_a2a_backend") == "flashinfer_megamoe":
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


# --- parallelism against the declared hardware -----------------------------------------------------


# More GPUs than any host has (nvidia_gpu_count is refused above this): the sizes are typos, and a list of
# that many GPU ids would only exhaust the controller's memory.
MAX_GPUS_PER_HOST = 1024


def _per_node(ctx: Context) -> int:
    tp, pp, dp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), _int(ctx, "dp_size", 1)
    return max(tp * pp // max(_int(ctx, "nnodes", 1), 1) * dp, 1)


def gpu_ids(ctx: Context) -> list[int]:
    """The GPU indices this node's ranks use: tp*pp/nnodes*dp of them, from base_gpu_id every gpu_id_step.

    At most MAX_GPUS_PER_HOST of them (rule ``parallel.gpus`` refuses more).
    """
    base, step = _int(ctx, "base_gpu_id", 0), _int(ctx, "gpu_id_step", 1)
    return [base + k * step for k in range(min(_per_node(ctx), MAX_GPUS_PER_HOST))]


@rule("parallel")
def _parallel(ctx: Context) -> None:
    tp, pp, dp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), _int(ctx, "dp_size", 1)
    attn_dp, nnodes, rank = _int(ctx, "attn_dp_size", 1), _int(ctx, "nnodes", 1), _int(ctx, "node_rank", 0)
    base, step = _int(ctx, "base_gpu_id", 0), _int(ctx, "gpu_id_step", 1)
    for dest, value in (("tp_size", tp), ("pp_size", pp), ("dp_size", dp), ("attn_dp_size", attn_dp), ("nnodes", nnodes)):
        if value < 1:
            ctx.error("parallel.size", dest, f"{dest} must be at least 1, got {value}.", f"set {ctx.var(dest)} >= 1")
            return
    if (tp * pp) % nnodes:
        ctx.error("parallel.nnodes", "nnodes",
                  f"tp_size * pp_size = {tp * pp} is not divisible by nnodes = {nnodes}.",
                  "make tp_size * pp_size a multiple of nnodes", "sglang/srt/arg_groups/validation_hook.py:179")
        return
    if dp > 1 and nnodes > 1:
        ctx.error("parallel.dp_multinode", "dp_size",
                  f"dp_size={dp} with nnodes={nnodes}: multi-node data-parallel replicas are not supported.",
                  "use attn_dp_size across nodes, or one SGLang instance per node with a router in front",
                  "sglang/srt/arg_groups/validation_hook.py:199")
    if dp > 1 and attn_dp > 1:
        ctx.error("parallel.dp_attn_dp", "attn_dp_size",
                  f"dp_size={dp} together with attn_dp_size={attn_dp}: choose data-parallel replicas or attention DP, not both.",
                  "set dp_size: 1 (attention DP inside one TP group) or attn_dp_size: 1",
                  "sglang/srt/arg_groups/parallel_hook.py:288")
    if tp % attn_dp:
        ctx.error("parallel.tp_attn_dp", "attn_dp_size", f"tp_size={tp} is not divisible by attn_dp_size={attn_dp}.",
                  "pick attn_dp_size dividing tp_size (e.g. 2, 4 or 8 for tp 8)",
                  "sglang/srt/arg_groups/parallel_hook.py:326")
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


# --- the host's gathered GPU facts: memory and the links between the instance's GPUs ------------------


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


@rule("hardware.fit")
def _fit(ctx: Context) -> None:
    """The checkpoint's weights, split over tp_size x pp_size GPUs, must fit each GPU's memory share.

    SGLang loads the weights first and only then finds out (an out-of-memory error after minutes); the
    table's weight_bytes is a lower bound and, without mem_fraction_static, the share is the whole GPU, so
    this never refuses what fits.
    """
    weights, (mib, source) = ctx.model.weight_bytes, gpu_memory_mib(ctx)
    tp, pp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1)
    if not weights or mib is None or tp < 1 or pp < 1:
        return
    frac = ctx.args.get("mem_fraction_static")
    frac = frac if isinstance(frac, (int, float)) and not isinstance(frac, bool) and 0 < frac < 1 else None
    usable = mib * 2**20 * (frac or 1.0)
    per_gpu = weights / (tp * pp)
    if per_gpu <= usable:
        return
    gib = 2**30
    need = -(-weights // int(usable))  # GPUs' worth of memory the weights need at this share
    shares = f"mem_fraction_static={frac} of {mib} MiB" if frac else f"all of its {mib} MiB"
    ctx.error("hardware.fit", "tp_size",
              f"{ctx.model.path}: at least {weights / gib:.0f} GiB of weights over tp_size={tp} x pp_size={pp} is "
              f"{per_gpu / gib:.1f} GiB per GPU, more than {usable / gib:.1f} GiB ({shares}; memory from {source}). "
              "SGLang would run out of memory loading them, minutes into the start.",
              f"spread the weights over at least {need} GPUs (tp_size x pp_size >= {need}), serve a quantized checkpoint "
              "(FP8 halves and NVFP4 quarters bf16 weights)" + (", or raise mem_fraction_static" if frac else ""),
              value=tp)


def nccl_flag(env: Mapping[str, str], name: str) -> bool:
    """True when NCCL reads ``name`` as on: it parses the value as an integer (strtol), so "1" is on and "true" is 0."""
    value = env.get(name, "").strip()
    return bool(re.fullmatch(r"[+-]?\d+", value)) and int(value) != 0


def _tp_groups(ctx: Context) -> list[list[int]]:
    """The instance's GPUs on this node, grouped by the TP group whose all-reduce they share (tp fastest)."""
    ids = instance_gpus(ctx)
    tp, pp, nnodes = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), max(_int(ctx, "nnodes", 1), 1)
    size = min(tp, max(tp * pp // nnodes, 1))
    return [ids[k:k + size] for k in range(0, len(ids), size)] if size > 1 else []


@rule("host.p2p")
def _p2p(ctx: Context) -> None:
    """PCIe peer-to-peer between the GPUs of a TP group, from the facts (nvidia-smi topo -m / -p2p r, the IOMMU)."""
    if ctx.facts is None or _int(ctx, "tp_size", 1) < 2:
        return
    topology = ctx.facts.get("topology") if isinstance(ctx.facts.get("topology"), Mapping) else {}
    links = topology.get("links") if isinstance(topology.get("links"), Mapping) else {}
    p2p = topology.get("p2p_read") if isinstance(topology.get("p2p_read"), Mapping) else {}
    pcie, no_p2p = [], []
    for group in _tp_groups(ctx):
        for a, b in combinations(sorted(set(group)), 2):
            key = f"{a},{b}"
            link = links.get(key)
            if link is None or str(link).startswith("NV"):
                continue  # NVLink, or not in the facts
            pcie.append(f"GPU{a}-GPU{b} {link}")
            if key in p2p and str(p2p[key]) != "OK":
                no_p2p.append(f"GPU{a}-GPU{b} {p2p[key]}")
    if pcie and ctx.facts.get("iommu") == "translated" and not nccl_flag(ctx.env, "NCCL_P2P_DISABLE"):
        ctx.error("host.iommu", "sglang_env.NCCL_P2P_DISABLE",
                  f"the GPUs of a TP group talk over PCIe ({', '.join(pcie[:4])}{' ...' if len(pcie) > 4 else ''}) and the "
                  "host's IOMMU translates DMA (nvidia_gpu_facts.iommu: translated). NCCL's PCIe peer-to-peer then hangs at "
                  "the first all-reduce, and the server sits there until the whole ready timeout runs out. Stricter than "
                  "SGLang, which does not look at the IOMMU.",
                  "set sglang_env.NCCL_P2P_DISABLE: \"1\" (NCCL goes through host memory), or put the IOMMU in "
                  "passthrough (iommu=pt on the kernel command line) and gather the facts again",
                  value=ctx.env.get("NCCL_P2P_DISABLE"))
    if no_p2p and not ctx.is_set("disable_custom_all_reduce"):
        ctx.warn("host.p2p", "disable_custom_all_reduce",
                 f"nvidia-smi topo -p2p r reports no peer-to-peer reads between GPUs of a TP group ({', '.join(no_p2p[:4])}"
                 f"{' ...' if len(no_p2p) > 4 else ''}). SGLang's custom all-reduce needs P2P: it tests it at start and "
                 "falls back to NCCL with a warning (on more than two PCIe-only GPUs it is off anyway).",
                 "set sglang_args.disable_custom_all_reduce: true to say so and skip the test",
                 "sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py:487-507")


# --- numeric sanity SGLang does not check at argument time -----------------------------------------


@rule("numeric")
def _numeric(ctx: Context) -> None:
    mem = ctx.args.get("mem_fraction_static")
    if mem is not None and not 0 < mem < 1:
        ctx.error("numeric.mem_fraction_static", "mem_fraction_static",
                  f"mem_fraction_static={mem} must be strictly between 0 and 1 (share of each GPU's memory for weights + KV cache).",
                  "use e.g. 0.85 on a dedicated GPU; lower it if other processes share the GPUs")
    for dest in ("max_running_requests", "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill"):
        value = ctx.args.get(dest)
        if isinstance(value, int) and value < 1:
            why = (" (SGLang's argument checks let it through; its workers assert it after loading the weights, "
                   "sglang/srt/managers/tp_worker.py:420)" if dest == "max_running_requests" else "")
            ctx.error(f"numeric.{dest}", dest, f"{dest}={value} must be at least 1{why}.",
                      f"set {ctx.var(dest)} >= 1, or remove it (auto)")
    page_size = ctx.args.get("page_size")
    if isinstance(page_size, int) and page_size < 1:
        ctx.error("numeric.page_size", "page_size", f"page_size={page_size} must be at least 1 (SGLang divides by it).",
                  "remove page_size (auto) or set 1, 16, 64 ...", "sglang/srt/arg_groups/validation_hook.py:244")
    chunk, page = ctx.args.get("chunked_prefill_size"), ctx.get("page_size", 1)
    # check_server_args sees the size per attention-DP rank (parallel_hook.py:326-331).
    width = attention_dp_width(ctx)
    rank = chunk // width if isinstance(chunk, int) and not isinstance(chunk, bool) else 0
    # Qwen3.5 / Qwen3-Next on SM100 without an attention backend: SGLang's model override replaces the host's page
    # size (1 or 64, qwen35_sm100_backend), which memory.chunked_page checks instead. A disaggregation decode server
    # does no prefill: SGLang skips the check there (validation_hook.py:241-243, the same in 0.5.20-0.5.22).
    # Likewise an attention backend that forces its page (PAGE_FORCING_BACKENDS: e.g. trtllm_mha, SGLang's default for
    # Llama on SM100, turns page 17 into 64): SGLang checks the chunk against that page, and so does memory.chunked_page.
    decode = str(ctx.get("disaggregation_mode", "null")) == "decode"
    if (rank > 0 and isinstance(page, int) and page > 1 and rank % page and qwen35_sm100_backend(ctx) is None
            and not decode and (ctx.model.family == "unknown" or resolved_page_size(ctx) in (None, page))):
        ctx.error("numeric.chunked_prefill_size", "chunked_prefill_size",
                  f"chunked_prefill_size={chunk} is not a multiple of page_size={page}." if width == 1 else
                  f"chunked_prefill_size={chunk} per attention-DP rank ({chunk} // {width} = {rank}) is not a multiple "
                  f"of page_size={page}.",
                  f"use a multiple of {page}, e.g. {chunk - chunk % page or page}" if width == 1 else
                  f"use a multiple of {page * width} (page_size x the attention-DP width), e.g. {page * width * max(rank // page, 1)}",
                  "sglang/srt/arg_groups/validation_hook.py:244")
    _context_length(ctx)
    name = ctx.args.get("served_model_name")
    if name is not None and ":" in str(name):
        ctx.error("numeric.served_model_name", "served_model_name",
                  "served_model_name must not contain ':' (SGLang reserves it for the model:adapter LoRA syntax).",
                  f"use e.g. {str(name).replace(':', '-')!r}", "sglang/srt/arg_groups/validation_hook.py:215")
    grpc, port = ctx.args.get("grpc_port") if _given(ctx, "grpc_port") else None, ctx.get("port", 30000)
    if grpc is not None and grpc == port and not ctx.is_set("smg_grpc_mode") and not ctx.is_set("grpc_mode"):
        ctx.error("numeric.grpc_port", "grpc_port", f"grpc_port {grpc} equals the HTTP port {port}.",
                  "give the gRPC listener its own port", "sglang/srt/arg_groups/validation_hook.py:360")


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


def _context_length(ctx: Context) -> None:
    ctxlen, table = ctx.args.get("context_length"), ctx.model.max_context
    limit = derived_context_length(ctx)
    if not isinstance(ctxlen, int) or not limit or ctxlen <= limit:
        pinned = {"original_max_position_embeddings": None}  # what would keep an override's factor out
        if isinstance(ctxlen, int) and ctx.model.rope_scaling is None and ctxlen > (derived_context_length(ctx, pinned) or ctxlen):
            ctx.warn("numeric.context_length", "context_length",
                     f"context_length={ctxlen} fits only through the rope_scaling factor in json_model_override_args "
                     f"(derived maximum {limit}, {table} as shipped); the validator does not know this checkpoint's config.json, which "
                     "SGLang merges the override into: if its rope_scaling names original_max_position_embeddings or "
                     "rope_type llama3, SGLang keeps the factor out, and the factor multiplies max_position_embeddings.",
                     "check config.json: SGLang allows factor x max_position_embeddings (or max_position_embeddings alone "
                     "with original_max_position_embeddings / rope_type llama3 in rope_scaling)", CONTEXT_SOURCE)
        return
    # SGLang lifts the check when either switch is on (model_config.py:1302-1304, sglang/utils.py:424).
    if env_true(ctx.env, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") or env_true(ctx.env, "SGLANG_IS_IN_CI"):
        return
    raised = f" ({table} as shipped, {limit} after json_model_override_args)" if limit != table else ""
    override = ctx.args.get("json_model_override_args")
    nested = ctx.model.text_config and override is not None and '"text_config"' not in str(override)
    ctx.error("numeric.context_length", "context_length",
              f"context_length={ctxlen} exceeds the model's maximum of {limit} tokens{raised}; SGLang refuses it at start-up.",
              f"use at most {limit}, or set sglang_env.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: \"1\" if you know "
              "the model extrapolates (RoPE scaling)"
              + ("; this model's overrides take effect only under \"text_config\" in json_model_override_args" if nested else ""),
              CONTEXT_SOURCE)


# --- the model -------------------------------------------------------------------------------------


@rule("model")
def _model(ctx: Context) -> None:
    if ctx.model.known or ctx.model.max_context or not ctx.args.get("model_path"):
        return
    ctx.warn("model.unknown", "sglang_model_path",
             f"{ctx.model.path or ctx.args.get('model_path')} is not in the validator's model table, so the model-specific "
             "checks were skipped: hybrid-attention backends, NVFP4 MoE kernels, the context length limit and the "
             "speculative values SGLang would choose for it.",
             "declare the model's facts: sglang_model_architecture (config.json architectures[0]), "
             "sglang_model_quantization (nvfp4, fp8 or none) and sglang_model_max_context (its max_position_embeddings)",
             value=ctx.model.path)


# --- safe defaults ----------------------------------------------------------------------------------

@rule("security")
def _security(ctx: Context) -> None:
    listen = str(ctx.get("host", "127.0.0.1"))
    # Parsed, not prefixed (sglang_contract.is_loopback): localhost.attacker.example is any resolver's to point elsewhere.
    if is_loopback(listen) or ctx.is_set("api_key") or ctx.allow_unauthenticated:
        return
    ctx.error("security.unauthenticated", "sglang_listen_host",
              f"the server would listen on {listen} without an API key: anyone who reaches the port can use the model "
              "(and the admin endpoints).",
              "set sglang_api_key (from Ansible Vault), or sglang_allow_unauthenticated: true if a firewall or the "
              "router is the only way in")


# --- SGLang's own launch checks on the arguments alone (tests/catalog/mapping-*.yml maps each to its rule) ---
#
# Each condition below is SGLang 0.5.23's own, on the values its resolution pipeline leaves them at; where a hook
# may change a value first (detokenizer workers under skip_tokenizer_init, the capture convention of aux hidden
# states), the rule reads the same.  SGLang refuses all of them before or just after the weights load.

_VH = "sglang/srt/arg_groups/validation_hook.py"
_SH = "sglang/srt/arg_groups/serving_hook.py"


def _num(ctx: Context, dest: str) -> int | float | None:
    value = ctx.args.get(dest)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _choice(ctx: Context, dest: str, default: str) -> str:
    """A string argument as SGLang sees it: false (YAML off) and null leave the flag out, so its default holds."""
    value = ctx.args.get(dest)
    return default if value is None or value is False else str(value)


def _given(ctx: Context, dest: str) -> bool:
    """True when the launch passes the argument (false, YAML off, leaves it out; unlike is_set, 0 counts)."""
    value = ctx.args.get(dest)
    return value is not None and value is not False


def _below(ctx: Context, rule_id: str, dest: str, least: int | float, where: str, strict: bool = False) -> bool:
    """An explicit value under SGLang's minimum (``strict``: the minimum itself is refused too)."""
    value = _num(ctx, dest)
    if value is None or (value > least if strict else value >= least):
        return False
    bound = f"greater than {least}" if strict else f"at least {least}"
    ctx.error(rule_id, dest, f"{dest}={value}: SGLang {ctx.schema.version} requires it to be {bound} and refuses the "
              "launch otherwise.", f"set {ctx.var(dest)} to a value {bound}, or remove it (SGLang's default)", where)
    return True


@rule("server.minimum")
def _minimums(ctx: Context) -> None:
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


def _a2a_may_change(ctx: Context) -> bool:
    """DeepSeek's context-parallel overrides set moe_a2a_backend deepep themselves
    (sglang/srt/arg_groups/model_overrides/deepseek_v2.py:117, 201): with CP on an MLA or unknown model,
    the backend SGLang checks is not the one written."""
    cp = _int(ctx, "attn_cp_size", 1) > 1 or ctx.is_set("enable_prefill_cp")
    return cp and (not ctx.model.known or ctx.model.mla)


@rule("server.combination")
def _combinations(ctx: Context) -> None:
    """Pairs of arguments SGLang refuses together (or one without the other)."""
    def refuse(dest: str, message: str, fix: str, where: str) -> None:
        ctx.error("server.combination", dest, message + " SGLang refuses the launch.", fix, where)

    if ctx.is_set("disable_cuda_graph_padding") and ctx.is_set("enable_torch_compile"):
        refuse("disable_cuda_graph_padding", "disable_cuda_graph_padding and enable_torch_compile: without padding every "
               "batch size gets its own torch.compile cycle.",
               f"remove {ctx.var('disable_cuda_graph_padding')} or {ctx.var('enable_torch_compile')}", f"{_VH}:188")
    if ctx.is_set("enable_priority_scheduling") and _choice(ctx, "schedule_policy", "fcfs") not in ("fcfs", "lof"):
        refuse("schedule_policy", f"enable_priority_scheduling needs schedule_policy fcfs or lof, not "
               f"{_choice(ctx, 'schedule_policy', 'fcfs')!r}.", f"set {ctx.var('schedule_policy')}: fcfs (or lof)", f"{_VH}:282")
    if ctx.args.get("retraction_policy") == "priority" and not ctx.is_set("enable_priority_scheduling"):
        refuse("retraction_policy", "retraction_policy priority needs enable_priority_scheduling.",
               f"set {ctx.var('enable_priority_scheduling')}: true, or retraction_policy: length", f"{_VH}:304")
    if ctx.is_set("export_metrics_to_file") and not ctx.is_set("export_metrics_to_file_dir"):
        refuse("export_metrics_to_file", "export_metrics_to_file needs export_metrics_to_file_dir.",
               f"set {ctx.var('export_metrics_to_file_dir')} (a directory on the host), or remove "
               f"{ctx.var('export_metrics_to_file')}", f"{_VH}:341")
    if ctx.is_set("enable_quant_communications"):
        tp1 = _int(ctx, "tp_size", 1) == 1
        refuse("enable_quant_communications", "enable_quant_communications (INT8 TP communications) "
               + ("is only used with tp_size > 1, and " if tp1 else "") + "is supported on Ascend NPUs only.",
               f"remove {ctx.var('enable_quant_communications')}", f"{_VH}:{350 if tp1 else 353}")
    if (_num(ctx, "kv_canary_sweep_interval") or 0) > 0 and _choice(ctx, "kv_canary", "none") == "none":
        refuse("kv_canary_sweep_interval", "kv_canary_sweep_interval > 0 needs kv_canary log or raise.",
               f"set {ctx.var('kv_canary')}: log, or remove {ctx.var('kv_canary_sweep_interval')}", f"{_VH}:375")
    if added_in(ctx, "0.5.21") and ctx.args.get("sampling_backend") == "intel_xpu" and _choice(ctx, "device", "cuda") != "xpu":
        refuse("sampling_backend", "sampling_backend intel_xpu is for Intel GPUs (device xpu).",
               f"use flashinfer or pytorch, or remove {ctx.var('sampling_backend')}", f"{_VH}:484")
    if _int(ctx, "pp_size", 1) > 1 and _given(ctx, "min_free_slots_delay"):
        refuse("min_free_slots_delay", f"min_free_slots_delay does not work with pipeline parallelism "
               f"(pp_size={_int(ctx, 'pp_size', 1)}).", f"remove {ctx.var('min_free_slots_delay')}", f"{_VH}:165")
    if ctx.is_set("enable_tokenizer_batch_encode") and ctx.is_set("enable_dynamic_batch_tokenizer"):
        refuse("enable_dynamic_batch_tokenizer", "enable_tokenizer_batch_encode and enable_dynamic_batch_tokenizer are "
               "two tokenizer batching approaches; choose one.",
               f"remove {ctx.var('enable_tokenizer_batch_encode')} or {ctx.var('enable_dynamic_batch_tokenizer')}",
               f"{_SH}:757")
    if ctx.is_set("enable_mamba_cache_stochastic_rounding") and ctx.args.get("mamba_ssm_dtype") not in (None, "float16"):
        refuse("mamba_ssm_dtype", f"enable_mamba_cache_stochastic_rounding needs mamba_ssm_dtype float16, not "
               f"{ctx.args.get('mamba_ssm_dtype')!r}.", f"set {ctx.var('mamba_ssm_dtype')}: float16, or remove "
               f"{ctx.var('enable_mamba_cache_stochastic_rounding')}", "sglang/srt/arg_groups/mamba_hook.py:32")
    ple = ctx.args.get("ple_offload_embedding")
    if ple is True and ((_num(ctx, "cpu_offload_gb") or 0) > 0 or (_num(ctx, "offload_group_size") or 0) > 0):
        refuse("ple_offload_embedding", "ple_offload_embedding with cpu_offload_gb or offload_group_size: generic layer "
               "offload would stage the pinned embedding back to the GPU.",
               f"remove {ctx.var('cpu_offload_gb')} / offload_group_size, or ple_offload_embedding",
               "sglang/srt/arg_groups/memory_hook.py:34")
    if ctx.args.get("ple_offload_backend") == "file" and ple is False:  # false renders --no-ple-offload-embedding
        refuse("ple_offload_backend", "ple_offload_backend file with ple_offload_embedding false "
               "(--no-ple-offload-embedding): the file-backed table is the offloaded table.",
               f"set {ctx.var('ple_offload_embedding')}: true (or leave it unset), or ple_offload_backend: pinned",
               "sglang/srt/arg_groups/memory_hook.py:41")
    if added_in(ctx, "0.5.22") and ctx.is_set("enable_kv_cache_sharding") and \
            _choice(ctx, "disaggregation_mode", "null") != "prefill":
        refuse("enable_kv_cache_sharding", "enable_kv_cache_sharding works on PD prefill workers only (a rank's pool "
               "holds just its stripe of each page, which local decode cannot use).",
               f"remove {ctx.var('enable_kv_cache_sharding')}", "sglang/srt/arg_groups/kv_shard_hook.py:99-104")
    if ctx.args.get("load_format") == "ipc_cache":
        refuse("load_format", "load_format ipc_cache is internal to SGLang's weight cache.",
               "use weight_cache_mode client or daemon instead", "sglang/srt/arg_groups/model_path_hook.py:271")
    if _choice(ctx, "weight_cache_mode", "off") != "off" and _given(ctx, "speculative_algorithm"):
        refuse("weight_cache_mode", "weight_cache_mode with speculative decoding: the weight cache daemon does not "
               "export the draft model's weights.", f"set {ctx.var('weight_cache_mode')}: off, or turn speculative "
               "decoding off (-e spec=off)", "sglang/srt/arg_groups/model_path_hook.py:282")


@rule("server.buckets")
def _buckets(ctx: Context) -> None:
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


WATERMARK_SPEC = ("EAGLE", "NEXTN", "EAGLE3", "NGRAM")  # NEXTN resolves to EAGLE before the check


@rule("server.watermark", since="0.5.22")
def _watermark(ctx: Context) -> None:
    """check_watermark_server_args (sglang/srt/arg_groups/validation_hook.py:35-106), on the flags (not the config's fields)."""
    if not ctx.is_set("enable_watermark"):
        if _given(ctx, "watermark_config"):
            ctx.error("server.watermark", "watermark_config", "watermark_config without enable_watermark; SGLang refuses it.",
                      f"set {ctx.var('enable_watermark')}: true, or remove {ctx.var('watermark_config')}", f"{_VH}:37")
        return
    _watermark_config(ctx)
    aux = ctx.is_set("enable_return_aux_hidden_states")  # it resets speculative_algorithm to None first
    algo = None if aux or not _given(ctx, "speculative_algorithm") else str(ctx.args["speculative_algorithm"]).upper()
    for bad, dest, why, line in (
        (ctx.is_set("enable_custom_logit_processor"), "enable_custom_logit_processor", "enable_custom_logit_processor", 75),
        (_given(ctx, "dllm_algorithm"), "dllm_algorithm", "a diffusion LLM (dllm_algorithm)", 87),
        (algo is not None and algo not in WATERMARK_SPEC, "speculative_algorithm",
         f"speculative_algorithm {algo} (only NGRAM, EAGLE/NEXTN and EAGLE3)", 91),
        (algo is not None and _int(ctx, "pp_size", 1) > 1, "pp_size", "pipeline-parallel speculative decoding", 96),
        (ctx.is_set("speculative_use_rejection_sampling"), "speculative_use_rejection_sampling",
         "speculative_use_rejection_sampling", 101),
        (env_true(ctx.env, "SGLANG_RUST_SERVER"), "sglang_env.SGLANG_RUST_SERVER", "SGLANG_RUST_SERVER", 106),
    ):
        if bad:
            ctx.error("server.watermark", dest, f"enable_watermark is not supported with {why}; SGLang refuses the launch.",
                      f"remove {dest if dest.startswith('sglang_env') else ctx.var(dest)} or "
                      f"{ctx.var('enable_watermark')}", f"{_VH}:{line}")
            return


def _watermark_config(ctx: Context) -> None:
    """The resolved fields of an inline --watermark-config (a file path is read on the host: the preflight)."""
    raw = ctx.args.get("watermark_config")
    if not isinstance(raw, str) or not raw.lstrip().startswith("{"):
        return
    config = _json_arg(ctx, "watermark_config")
    if not isinstance(config, dict):
        return
    # Defaults of the resolved fields: sglang/srt/arg_groups/fields/exec_.py:84-112.
    key, key_b = config.get("key"), config.get("key_b")
    window, mixing = config.get("context_window", 4), config.get("mixing_probability", 0.5)
    highest = config.get("max_probability", 1.0)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (mixing, highest))
    for bad, why, line in (
        (isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 64,
         f"context_window must be an integer from 1 to 64 (got {window!r})", 55),
        (key_b is not None and key is None, "key_b needs key", 57),
        (numbers and not 0 < mixing < 1, f"mixing_probability must be strictly between 0 and 1 (got {mixing})", 59),
        (numbers and key_b is None and mixing != 0.5, "mixing_probability other than 0.5 needs key_b", 63),
        (numbers and not 0 < highest <= 1, f"max_probability must be in (0, 1] (got {highest})", 65),
        ((config.get("default_enabled") is True or config.get("enforce_all") is True) and key is None,
         "default_enabled and enforce_all need key", 71),
    ):
        if bad:
            ctx.error("server.watermark", "watermark_config", f"watermark_config: {why}; SGLang refuses the launch.",
                      f"fix {ctx.var('watermark_config')}", f"{_VH}:{line}")
            return


AUX_CAPTURE = ("EAGLE3", "DFLASH", "DSPARK")


@rule("server.aux_hidden_states", since="0.5.23")
def _aux_hidden_states(ctx: Context) -> None:
    """handle_aux_hidden_state_capture (sglang/srt/arg_groups/validation_hook.py:697-750)."""
    ids = ctx.args.get("return_aux_hidden_state_layer_ids") if _given(ctx, "return_aux_hidden_state_layer_ids") else None

    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.aux_hidden_states", dest, message + " SGLang refuses the launch.", fix, f"{_VH}:{line}")

    if not ctx.is_set("enable_return_aux_hidden_states"):
        if ids is not None:
            refuse("return_aux_hidden_state_layer_ids", "return_aux_hidden_state_layer_ids without "
                   "enable_return_aux_hidden_states.", f"set {ctx.var('enable_return_aux_hidden_states')}: true, or "
                   f"remove {ctx.var('return_aux_hidden_state_layer_ids')}", 707)
        return
    method = str(ctx.args.get("speculative_algorithm") or "").upper()
    if method not in AUX_CAPTURE:
        refuse("speculative_algorithm", "enable_return_aux_hidden_states needs speculative_algorithm EAGLE3, DFLASH or "
               f"DSPARK to name the capture convention, got {ctx.args.get('speculative_algorithm')!r}.",
               f"set {ctx.var('speculative_algorithm')}: EAGLE3 (or DFLASH / DSPARK)", 714)
        return
    if _int(ctx, "pp_size", 1) != 1:
        refuse("pp_size", "enable_return_aux_hidden_states needs pp_size 1 (the capture hooks see only the last "
               "pipeline rank).", "use tp_size instead of pp_size", 725)
        return
    if method != "EAGLE3" and not ids:
        refuse("return_aux_hidden_state_layer_ids", f"enable_return_aux_hidden_states with {method} needs "
               "return_aux_hidden_state_layer_ids.", f"set {ctx.var('return_aux_hidden_state_layer_ids')} "
               "(the target model's layer ids)", 731)
        return
    if isinstance(ids, list) and any(isinstance(i, int) and i < 0 for i in ids):
        refuse("return_aux_hidden_state_layer_ids", f"return_aux_hidden_state_layer_ids {ids} has negative layer ids.",
               "use layer ids >= 0", 739)
    elif isinstance(ids, list) and len(set(ids)) != len(ids):
        refuse("return_aux_hidden_state_layer_ids", f"return_aux_hidden_state_layer_ids {ids} repeats a layer.",
               "name each layer once", 744)


@rule("server.http")
def _http(ctx: Context) -> None:
    """handle_ssl_validation's HTTP server checks (sglang/srt/arg_groups/serving_hook.py:88-120)."""
    http2 = ctx.is_set("enable_http2")
    if added_in(ctx, "0.5.23") and ctx.is_set("enable_http_worker_reuseport") and (
            _int(ctx, "tokenizer_worker_num", 1) == 1 or http2):
        ctx.error("server.http", "enable_http_worker_reuseport", "enable_http_worker_reuseport needs tokenizer_worker_num "
                  "> 1 and has no effect with enable_http2; SGLang refuses it.",
                  f"set {ctx.var('tokenizer_worker_num')} > 1 (without enable_http2), or remove "
                  f"{ctx.var('enable_http_worker_reuseport')}", f"{_SH}:91")
    if not http2:
        return
    streams, window = _num(ctx, "http2_max_concurrent_streams"), _num(ctx, "http2_initial_connection_window_size")
    if streams is not None and not 0 < streams < 2**32:
        ctx.error("server.http", "http2_max_concurrent_streams", f"http2_max_concurrent_streams={streams} is outside "
                  "1..4294967295; SGLang refuses it.", f"set {ctx.var('http2_max_concurrent_streams')} in that range "
                  "(default 200)", f"{_SH}:98")
    if window is not None and not 1024 <= window < 2**31:
        ctx.error("server.http", "http2_initial_connection_window_size", f"http2_initial_connection_window_size={window} "
                  "is outside 1024..2147483647; SGLang refuses it.",
                  f"set {ctx.var('http2_initial_connection_window_size')} in that range (default 1048576)", f"{_SH}:102")
    if ctx.is_set("enable_ssl_refresh"):
        ctx.error("server.http", "enable_ssl_refresh", "enable_ssl_refresh with enable_http2: the HTTP/2 server "
                  "(Granian) cannot reload certificates; SGLang refuses the pair.",
                  f"remove {ctx.var('enable_ssl_refresh')} or {ctx.var('enable_http2')}", f"{_SH}:116")


@rule("server.grpc")
def _grpc(ctx: Context) -> None:
    """handle_deprecated_args' gRPC and sidecar checks (sglang/srt/arg_groups/serving_hook.py:356-433)."""
    legacy = ctx.is_set("smg_grpc_mode") or ctx.is_set("grpc_mode")
    port = ctx.args.get("grpc_port") if _given(ctx, "grpc_port") else None
    if port is None and ctx.env.get("SGLANG_GRPC_PORT"):
        port = ctx.env["SGLANG_GRPC_PORT"]
    if port is None and legacy:
        port = _int(ctx, "port", 30000) + 10000

    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.grpc", dest, message + " SGLang refuses the launch.", fix, f"{_SH}:{line}")

    sidecar = ctx.args.get("sidecar") if _given(ctx, "sidecar") else None
    if _given(ctx, "sidecar_args") and sidecar is None:
        refuse("sidecar_args", "sidecar_args without sidecar.", f"set {ctx.var('sidecar')}, or remove "
               f"{ctx.var('sidecar_args')}", 397)
    if sidecar is not None:
        if not str(sidecar).strip():
            refuse("sidecar", "sidecar is empty.", f"set {ctx.var('sidecar')} to the sidecar's command, or remove it", 404)
        elif legacy:
            refuse("sidecar", "sidecar needs SGLang's native gRPC server, not smg_grpc_mode / grpc_mode.",
                   "remove smg_grpc_mode / grpc_mode (and set grpc_port)", 406)
        elif port is None:
            refuse("sidecar", "sidecar needs grpc_port (or SGLANG_GRPC_PORT).", f"set {ctx.var('grpc_port')}", 411)
    if port is None or legacy:
        return
    if ctx.is_set("use_ray"):
        refuse("use_ray", "grpc_port (native gRPC) with use_ray: the Ray launch path does not start the gRPC server.",
               f"remove {ctx.var('grpc_port')} or {ctx.var('use_ray')}", 414)
    elif _int(ctx, "tokenizer_worker_num", 1) > 1:
        refuse("tokenizer_worker_num", "native gRPC (grpc_port) does not support tokenizer_worker_num > 1.",
               f"set {ctx.var('tokenizer_worker_num')}: 1, or remove {ctx.var('grpc_port')}", 424)
    elif ctx.is_set("api_key") or ctx.is_set("admin_api_key"):
        refuse("grpc_port", "grpc_port (native gRPC) with an API key: the gRPC listener bypasses the HTTP auth.",
               f"remove {ctx.var('grpc_port')}, or serve without sglang_api_key / sglang_admin_api_key", 429)


@rule("server.lora")
def _lora(ctx: Context) -> None:
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
    where = "sglang/srt/arg_groups/lora_hook.py"
    per_batch = _num(ctx, "max_loras_per_batch")
    per_batch = 8 if per_batch is None else per_batch
    loaded = _num(ctx, "max_loaded_loras")

    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.lora", dest, message + " SGLang refuses the launch.", fix, f"{where}:{line}")

    if ctx.is_set("enable_lora_overlap_loading") and (loaded is None or loaded > 2 * per_batch):
        refuse("max_loaded_loras", f"enable_lora_overlap_loading pins the adapters in CPU memory and needs max_loaded_loras "
               f"set to at most 2 x max_loras_per_batch = {2 * per_batch} (it is {loaded}).",
               f"set {ctx.var('max_loaded_loras')} <= {2 * per_batch}, or remove enable_lora_overlap_loading", 64)
    modules = ctx.args.get("lora_target_modules") if isinstance(ctx.args.get("lora_target_modules"), list) else []
    if "all" in modules and len(set(modules)) > 1:
        refuse("lora_target_modules", f"lora_target_modules {modules}: 'all' must be the only module.",
               f"set {ctx.var('lora_target_modules')}: [all], or list the modules without 'all'", 147)
    if not paths and not (ctx.is_set("max_lora_rank") and modules):
        refuse("enable_lora", "enable_lora without lora_paths needs max_lora_rank and lora_target_modules to size the "
               "adapter buffers.", f"set {ctx.var('lora_paths')}, or both max_lora_rank and lora_target_modules", 152)
        return
    if loaded is not None and loaded < per_batch:
        refuse("max_loaded_loras", f"max_loaded_loras={loaded} is below max_loras_per_batch={per_batch}.",
               f"set {ctx.var('max_loaded_loras')} >= {per_batch}", 158)
    elif loaded is not None and len(paths) > loaded:
        refuse("max_loaded_loras", f"{len(paths)} lora_paths exceed max_loaded_loras={loaded}.",
               f"set {ctx.var('max_loaded_loras')} >= {len(paths)}", 162)
    threshold = _num(ctx, "lora_drain_wait_threshold")
    if threshold is not None and threshold < 0:
        refuse("lora_drain_wait_threshold", f"lora_drain_wait_threshold={threshold} is negative.",
               f"set {ctx.var('lora_drain_wait_threshold')} >= 0", 176)
    if ctx.args.get("enable_lora") is False:  # --lora-paths without LoRA: SGLang ignores them (lora_hook.py:45-48)
        return
    mode = v2_lora_unsupported_mode(ctx) if added_in(ctx, "0.5.23") else None  # triton_v2 is new in 0.5.23
    if _choice(ctx, "lora_backend", "csgmv") == "triton_v2" and not _choice(ctx, "moe_runner_backend", "auto").startswith(
            "lora") and mode:
        refuse("lora_backend", f"lora_backend triton_v2 does not support {mode} yet.",
               f"set {ctx.var('lora_backend')}: csgmv, or remove {mode.split(' ', maxsplit=1)[0]}", 30)
    _lora_speculative(ctx, refuse)


def v2_lora_unsupported_mode(ctx: Context) -> str | None:
    """_check_v2_lora_modes (sglang/srt/arg_groups/lora_hook.py:20-30): what the triton_v2 LoRA paths do not run."""
    for bad, mode in (
        (_int(ctx, "attn_dp_size", 1) > 1, "attn_dp_size > 1 (DP attention)"),
        (ctx.is_set("enable_pdmux"), "enable_pdmux (PD-multiplexing)"),
        (ctx.is_set("enable_two_batch_overlap"), "enable_two_batch_overlap"),
        (env_true(ctx.env, "SGLANG_EXPERIMENTAL_LORA_OPTI"), "sglang_env.SGLANG_EXPERIMENTAL_LORA_OPTI"),
    ):
        if bad:
            return mode
    return None


def _lora_speculative(ctx: Context, refuse: Callable[[str, str, str, int], None]) -> None:
    """check_lora_speculative_compatibility (sglang/srt/arg_groups/lora_hook.py:240-301) on the resolved algorithm.

    UNO is left to server.speculative, whose check (speculative_hook.py:583) SGLang runs first; speculative_adaptive
    is not read, since SGLang turns it off for many configurations before this check (_maybe_disable_adaptive)."""
    raw = _choice(ctx, "speculative_algorithm", "").upper()
    algo = {"NEXTN": "EAGLE"}.get(raw, raw)
    if algo in ("", "NGRAM", "UNO"):
        return
    if algo not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
        refuse("speculative_algorithm", f"LoRA works with NGRAM, EAGLE, NEXTN, EAGLE3, DFLASH or DSPARK speculative "
               f"decoding only, not {raw}.", "use one of those, or serve without LoRA", 260)
        return
    ragged = ctx.env.get(RAGGED_ENV, "static")
    for bad, dest, why in (
        (algo == "DSPARK" and ragged != "static", f"sglang_env.{RAGGED_ENV}", f"{RAGGED_ENV}={ragged} with DSPARK"),
        ("experimental_sgl_trtllm" in (_choice(ctx, "moe_runner_backend", ""), _choice(ctx, "speculative_moe_runner_backend", "")),
         "moe_runner_backend", "the experimental_sgl_trtllm MoE runner"),
        (env_true(ctx.env, "SGLANG_ENABLE_OVERLAP_PLAN_STREAM"), "sglang_env.SGLANG_ENABLE_OVERLAP_PLAN_STREAM",
         "SGLANG_ENABLE_OVERLAP_PLAN_STREAM=1"),
    ):
        if bad:
            refuse(dest, f"LoRA with {raw} speculative decoding does not support {why}.",
                   f"remove {dest if dest.startswith('sglang_env') else ctx.var(dest)}, or serve without LoRA", 299)
            return


_KVH = "sglang/srt/arg_groups/kv_cache_hook.py"


def _json_arg(ctx: Context, dest: str) -> Any:
    """The decoded value of a JSON argument (the validator keeps JSON text); None when unset or not JSON."""
    raw = ctx.args.get(dest)
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


@rule("server.kv_cache")
def _kv_cache(ctx: Context) -> None:
    """handle_cache_compatibility and validate_prefill_only_disable_kv_cache_args (kv_cache_hook.py), on the flags."""
    def refuse(dest: str, message: str, fix: str, line: int | str) -> None:
        ctx.error("server.kv_cache", dest, message + " SGLang refuses the launch.", fix, f"{_KVH}:{line}")

    if added_in(ctx, "0.5.21") and _choice(ctx, "radix_eviction_policy", "lru") == "tlru":
        config = _json_arg(ctx, "radix_eviction_policy_config")
        config = config if isinstance(config, dict) else {}
        threshold, estimate = config.get("threshold", 0), config.get("next_prompt_estimate", 0)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (threshold, estimate))
        if numbers and (threshold < 0 or estimate < 0 or threshold <= estimate):
            refuse("radix_eviction_policy_config", f"radix_eviction_policy tlru needs radix_eviction_policy_config with "
                   f"threshold > next_prompt_estimate >= 0 (got {threshold} and {estimate}).",
                   f"set {ctx.var('radix_eviction_policy_config')}: {{threshold: ..., next_prompt_estimate: ...}} with "
                   "threshold the larger, or another radix_eviction_policy", "380-391")
    radix_off = ctx.is_set("disable_radix_cache")
    if ctx.is_set("enable_hierarchical_cache") and radix_off:
        refuse("disable_radix_cache", "enable_hierarchical_cache and disable_radix_cache are mutually exclusive.",
               f"remove {ctx.var('disable_radix_cache')} or {ctx.var('enable_hierarchical_cache')}", 394)
    tails = _num(ctx, "swa_prefix_tails")
    if added_in(ctx, "0.5.21") and tails is not None and tails < 0:
        refuse("swa_prefix_tails", f"swa_prefix_tails={tails} is negative.", f"set {ctx.var('swa_prefix_tails')} >= 0", 431)
    if ctx.is_set("enable_lmcache"):
        lmcache = added_in(ctx, "0.5.21")  # 0.5.20 has the DCP check alone (hicache_hook.py:104)
        for bad, dest, why, line in (
            (lmcache and ctx.is_set("enable_hierarchical_cache"), "enable_hierarchical_cache", "enable_hierarchical_cache",
             435),
            (lmcache and ctx.is_set("enable_unified_cache_external_linker"), "enable_unified_cache_external_linker",
             "enable_unified_cache_external_linker", 440),
            (lmcache and radix_off, "disable_radix_cache", "disable_radix_cache (LMCache needs the radix cache)", 445),
            (lmcache and _given(ctx, "speculative_algorithm") and not ctx.is_set("enable_return_aux_hidden_states"),
             "speculative_algorithm", "speculative decoding", 450),
            (lmcache and attention_dp_on(ctx), "attn_dp_size", "attention DP", 454),
            (_int(ctx, "dcp_size", 1) > 1, "dcp_size", "decode context parallelism (dcp_size > 1)", 458),
            (lmcache and ctx.is_set("enable_streaming_session"), "enable_streaming_session", "streaming sessions", 463),
            (lmcache and _choice(ctx, "hicache_host_memory_mode", "cache") == "buffer_only", "hicache_host_memory_mode",
             "hicache_host_memory_mode buffer_only (a HiCache-only mode)", 467),
        ):
            if bad:
                refuse(dest, f"enable_lmcache does not work with {why}.", f"remove {ctx.var(dest)} or "
                       f"{ctx.var('enable_lmcache')}", line)
                break
    if ctx.is_set("prefill_only_disable_kv_cache"):
        kv = _choice(ctx, "kv_cache_dtype", "auto")
        for bad, dest, why, line in (
            (kv in ("nvfp4", "fp4_mx_block16", "mxfp8"), "kv_cache_dtype", f"kv_cache_dtype {kv}", "886-896"),
            (_int(ctx, "attn_cp_size", 1) > 1, "attn_cp_size", "attn_cp_size > 1", 920),
            (ctx.is_set("enable_prefill_cp"), "enable_prefill_cp", "enable_prefill_cp", 926),
            (ctx.is_set("enable_hisparse"), "enable_hisparse", "enable_hisparse", 935),
        ):
            if bad:
                refuse(dest, f"prefill_only_disable_kv_cache does not work with {why}.",
                       f"remove {ctx.var(dest)} or {ctx.var('prefill_only_disable_kv_cache')}", line)
                break


@rule("server.json_args")
def _json_args(ctx: Context) -> None:
    """JSON arguments whose decoded shape SGLang checks (serving_hook.py)."""
    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.json_args", dest, message + " SGLang refuses the launch.", fix, f"{_SH}:{line}")

    kwargs = _json_arg(ctx, "default_chat_template_kwargs")
    if _given(ctx, "default_chat_template_kwargs") and kwargs is not None and not isinstance(kwargs, dict):
        refuse("default_chat_template_kwargs", "default_chat_template_kwargs must be a JSON object (a mapping).",
               f"write {ctx.var('default_chat_template_kwargs')} as a mapping, e.g. {{enable_thinking: false}}", 501)
    config = _json_arg(ctx, "mm_process_config")
    if _given(ctx, "mm_process_config") and config is not None:
        bad = [k for k in ("image", "video", "audio") if isinstance(config, dict) and k in config
               and not isinstance(config[k], dict)]
        if not isinstance(config, dict) or bad:
            refuse("mm_process_config", "mm_process_config must be a mapping" + (f", and {bad} mappings too" if bad else "")
                   + ".", f"write {ctx.var('mm_process_config')} as a mapping of modality to settings", 148 if not bad else 156)
    limits = _json_arg(ctx, "limit_mm_data_per_request")
    if isinstance(limits, dict) and limits and set(limits) - {"image", "video", "audio"}:
        refuse("limit_mm_data_per_request", f"limit_mm_data_per_request names {sorted(set(limits) - {'image', 'video', 'audio'})}; "
               "the modalities are image, video and audio.", f"keep only those keys in {ctx.var('limit_mm_data_per_request')}",
               603)
    preferred = _json_arg(ctx, "preferred_sampling_params")
    if added_in(ctx, "0.5.22") and isinstance(preferred, (dict, list)) and "watermark" in preferred:
        refuse("preferred_sampling_params", "preferred_sampling_params may not set watermark.",
               f"remove watermark from {ctx.var('preferred_sampling_params')} (enable_watermark is the server's switch)", 619)
    sidecar_args = _json_arg(ctx, "sidecar_args")
    if _given(ctx, "sidecar_args") and _given(ctx, "sidecar") and sidecar_args is not None and not (
            isinstance(sidecar_args, list) and all(isinstance(a, str) for a in sidecar_args)):
        refuse("sidecar_args", "sidecar_args must be a JSON array of strings.",
               f"write {ctx.var('sidecar_args')} as a list of strings", 401)


_SPH = "sglang/srt/arg_groups/speculative_hook.py"
DP_SPEC_ENV = "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"


@rule("server.speculative")
def _speculative_launch(ctx: Context) -> None:
    """The argument checks of speculative_hook.py beyond the EAGLE triple (rules spec.*)."""
    raw = ctx.args.get("speculative_algorithm") if _given(ctx, "speculative_algorithm") else None
    algo = None if raw is None else {"NEXTN": "EAGLE"}.get(str(raw).upper(), str(raw).upper())  # NEXTN aliases EAGLE

    def refuse(dest: str, message: str, fix: str, line: int | str) -> None:
        ctx.error("server.speculative", dest, message + " SGLang refuses the launch.", fix, f"{_SPH}:{line}")

    if added_in(ctx, "0.5.22") and ctx.is_set("speculative_use_block_verification") and algo not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
        refuse("speculative_use_block_verification", "speculative_use_block_verification works with EAGLE / EAGLE3 / "
               f"NEXTN / DFLASH / DSPARK only, not {raw}.", f"remove {ctx.var('speculative_use_block_verification')}", 177)
    window, sink = _num(ctx, "speculative_draft_window_size"), _num(ctx, "speculative_draft_sink_size")
    if window is not None and window <= 0:
        refuse("speculative_draft_window_size", f"speculative_draft_window_size={window} must be positive.",
               f"set {ctx.var('speculative_draft_window_size')} > 0, or remove it", 205)
    if not added_in(ctx, "0.5.21"):
        pass
    elif sink is not None and sink < 0:
        refuse("speculative_draft_sink_size", f"speculative_draft_sink_size={sink} must be non-negative.",
               f"set {ctx.var('speculative_draft_sink_size')} >= 0, or remove it", 224)
    elif sink is not None and window is None:
        refuse("speculative_draft_sink_size", "speculative_draft_sink_size needs speculative_draft_window_size.",
               f"set {ctx.var('speculative_draft_window_size')}, or remove {ctx.var('speculative_draft_sink_size')}", 228)
    # 0.5.21 takes EAGLE and EAGLE3 only (speculative_hook.py:222-229 there); 0.5.20 has no such check.
    coordinated = ("EAGLE", "EAGLE3", "DSPARK") if added_in(ctx, "0.5.22") else ("EAGLE", "EAGLE3")
    if added_in(ctx, "0.5.21") and env_true(ctx.env, DP_SPEC_ENV) and (
            algo not in coordinated or ctx.is_set("enable_multi_layer_eagle")):
        refuse(f"sglang_env.{DP_SPEC_ENV}", f"{DP_SPEC_ENV} (DP spec/prefill coordination) needs single-layer "
               f"{' / '.join(coordinated)} speculative decoding (speculative_algorithm is {raw}).",
               f"remove sglang_env.{DP_SPEC_ENV}, or use one of those algorithms",
               257 if added_in(ctx, "0.5.22") else "222-229 (0.5.21)")
    if algo is None:
        return
    attn_dp, attn_cp = attention_dp_width(ctx), _int(ctx, "attn_cp_size", 1)
    rejection = ctx.is_set("speculative_use_rejection_sampling")
    if rejection and algo == "STANDALONE":
        refuse("speculative_use_rejection_sampling", "speculative_use_rejection_sampling works with EAGLE / EAGLE3 / NEXTN "
               "only, not STANDALONE.", f"remove {ctx.var('speculative_use_rejection_sampling')}", 1216)
    elif rejection and algo in EAGLE_FAMILY and _num(ctx, "speculative_eagle_topk") not in (None, 1):
        refuse("speculative_eagle_topk", "speculative_use_rejection_sampling needs speculative_eagle_topk 1.",
               f"set {ctx.var('speculative_eagle_topk')}: 1, or remove speculative_use_rejection_sampling", 1222)
    elif rejection and algo in EAGLE_FAMILY and any(
            _num(ctx, d) not in (None, 1.0) for d in ("speculative_accept_threshold_single", "speculative_accept_threshold_acc")):
        refuse("speculative_use_rejection_sampling", "speculative_use_rejection_sampling ignores the accept thresholds; "
               "SGLang refuses them together.", "remove speculative_accept_threshold_single / _acc (or the rejection "
               "sampling)", 1235)
    if algo == "DFLASH" and not added_in(ctx, "0.5.23") and attention_dp_on(ctx):
        refuse("attn_dp_size", "DFLASH does not support attention DP on CUDA in this release.", "serve DFLASH without "
               "attention DP (or use SGLang 0.5.23)", "296-300 (0.5.22; 0.5.21 :273-277, 0.5.20 :210-214)")
    elif algo in ("DFLASH", "DSPARK") and attn_dp > 1:
        line = {"DFLASH": (308, 310, 314), "DSPARK": (676, 698, None)}[algo]
        if not ctx.is_set("enable_dp_lm_head"):
            refuse("enable_dp_lm_head", f"{algo} with attention DP (attn_dp_size={attn_dp}) needs enable_dp_lm_head.",
                   f"set {ctx.var('enable_dp_lm_head')}: true", line[0])
        elif attn_cp != 1:
            refuse("attn_cp_size", f"{algo} with attention DP does not support context parallelism (attn_cp_size={attn_cp}).",
                   f"set {ctx.var('attn_cp_size')}: 1", line[1])
        elif algo == "DFLASH" and env_true(ctx.env, DP_SPEC_ENV):
            refuse(f"sglang_env.{DP_SPEC_ENV}", f"DFLASH with attention DP needs {DP_SPEC_ENV} off.",
                   f"remove sglang_env.{DP_SPEC_ENV}", 314)
    for dest, line in (("speculative_dflash_block_size", 370), ("speculative_dspark_block_size", 809)):
        size = _num(ctx, dest)
        if algo == dest.split("_")[1].upper() and size is not None and size <= 0:
            refuse(dest, f"{dest}={size} must be positive.", f"set {ctx.var(dest)} > 0, or remove it", line)
    block, draft = _num(ctx, "speculative_dflash_block_size"), _num(ctx, "speculative_num_draft_tokens")
    if algo == "DFLASH" and block is not None and block > 0 and draft is not None and draft != block:
        refuse("speculative_num_draft_tokens", f"DFLASH: speculative_num_draft_tokens={draft} and "
               f"speculative_dflash_block_size={block} must match.", "set only one of them, or both to the same value", 377)
    if algo == "UNO":
        _uno(ctx, refuse)


def _fa3_everywhere(ctx: Context) -> bool:
    """fa3 chosen for prefill and decode: then the profile's attention rule refuses it, for the reason it fails."""
    base = _choice(ctx, "attention_backend", "")
    return all(_choice(ctx, d, base) == "fa3" for d in ("prefill_attention_backend", "decode_attention_backend"))


def _uno(ctx: Context, refuse: Callable[[str, str, str, int | str], None]) -> None:
    """_handle_uno's argument checks (speculative_hook.py:453-612)."""
    profile = arch_profile(ctx)
    for bad, dest, why, line in (
        (not _given(ctx, "uno_lora_path"), "uno_lora_path", "UNO needs uno_lora_path", 460),
        (ctx.is_set("enable_deterministic_inference"), "enable_deterministic_inference",
         "UNO does not support enable_deterministic_inference", 462),
        (ctx.is_set("enable_strict_thinking"), "enable_strict_thinking", "UNO does not support enable_strict_thinking", 467),
        ((_num(ctx, "speculative_num_draft_tokens") or 0) < 1, "speculative_num_draft_tokens",
         "UNO needs speculative_num_draft_tokens (a positive verify width)", 474),
        ((_num(ctx, "speculative_eagle_topk") or 1) < 1, "speculative_eagle_topk", "UNO needs speculative_eagle_topk >= 1",
         489),
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
    ):
        if bad:
            refuse(dest, why + ".", "fix that, or use another speculative algorithm (NEXTN, EAGLE3...)", line)
            return
    _uno_tree(ctx, refuse)


def _uno_tree(ctx: Context, refuse: Callable[[str, str, str, int | str], None]) -> None:
    """_handle_uno's tree mode, speculative_eagle_topk K > 1 (speculative_hook.py:494-559)."""
    k, q, steps = _num(ctx, "speculative_eagle_topk"), _num(ctx, "speculative_num_draft_tokens"), _num(ctx, "speculative_num_steps")
    if k is None or k <= 1 or q is None:
        return
    fix = "fix the tree shape (speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens), or set eagle_topk: 1"
    if steps is None or steps < 1:
        refuse("speculative_num_steps", "UNO tree mode (eagle_topk > 1) needs speculative_num_steps >= 1.", fix,
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
            refuse("speculative_eagle_topk", f"UNO tree mode (eagle_topk {k}): {why}.", fix, line)
            return


_PH = "sglang/srt/arg_groups/parallel_hook.py"


@rule("server.parallel")
def _parallel_launch(ctx: Context) -> None:
    """Context parallelism, decode context parallelism and DWDP (parallel_hook.py), on the explicit sizes."""
    def refuse(dest: str, message: str, fix: str, line: int | str) -> None:
        ctx.error("server.parallel", dest, message + " SGLang refuses the launch.", fix, f"{_PH}:{line}")

    tp, pp, attn_dp = _int(ctx, "tp_size", 1), _int(ctx, "pp_size", 1), _int(ctx, "attn_dp_size", 1)
    cp, moe_dp, dcp, dwdp = (_int(ctx, d, 1) for d in ("attn_cp_size", "moe_dp_size", "dcp_size", "dwdp_size"))
    if ctx.is_set("enable_prefill_cp") and not _given(ctx, "cp_strategy"):
        refuse("cp_strategy", "enable_prefill_cp needs cp_strategy.", f"set {ctx.var('cp_strategy')} (e.g. interleave)", 152)
    # DeepSeek-V4's hook derives attn_cp_size itself (deepseek_v4_hook.py:220), so only known other models are checked.
    if not added_in(ctx, "0.5.22"):  # tp_size % (dp_size * attn_cp_size) (0.5.21 parallel_hook.py:108-113)
        attn_dp = _int(ctx, "dp_size", 1)
    if cp > 1 and tp >= 1 and attn_dp >= 1 and ctx.model.known and "DeepseekV4" not in str(ctx.model.architecture or ""):
        if tp % cp or tp % (attn_dp * cp):
            refuse("attn_cp_size", f"tp_size={tp} must be divisible by attn_dp_size x attn_cp_size = {attn_dp} x {cp}"
                   + ("." if added_in(ctx, "0.5.22") else " (dp_size x attn_cp_size in this release)."),
                   f"set {ctx.var('attn_cp_size')} so that attn_dp_size x attn_cp_size divides tp_size", "159-164")
    if moe_dp > 1 and dwdp <= 1 and tp >= 1:  # DWDP resets moe_dp_size to 1 (parallel_hook.py:493)
        if tp % moe_dp:
            refuse("moe_dp_size", f"tp_size={tp} is not divisible by moe_dp_size={moe_dp}.",
                   f"set {ctx.var('moe_dp_size')} to a divisor of tp_size", 172)
        elif pp != 1:
            refuse("moe_dp_size", f"moe_dp_size={moe_dp} (context parallelism) does not work with pp_size={pp}.",
                   "set pp_size: 1 (use tp_size), or moe_dp_size: 1", 178)
    if dcp < 1:
        refuse("dcp_size", f"dcp_size={dcp} must be at least 1.", f"set {ctx.var('dcp_size')} >= 1, or remove it", 244)
        return
    comm = _choice(ctx, "dcp_comm_backend", "")
    if added_in(ctx, "0.5.22") and dcp > 1 and ctx.is_set("enable_prefill_cp"):
        refuse("dcp_size", "dcp_size > 1 does not work with enable_prefill_cp.",
               f"remove {ctx.var('enable_prefill_cp')} or set dcp_size: 1", 250)
    if comm in ("a2a", "fi_a2a") and dcp <= 1:
        refuse("dcp_comm_backend", f"dcp_comm_backend {comm} needs dcp_size > 1.",
               f"set {ctx.var('dcp_size')} > 1, or remove {ctx.var('dcp_comm_backend')}", 252)
    elif ctx.is_set("dcp_replicate_q_proj") and dcp <= 1:
        refuse("dcp_replicate_q_proj", "dcp_replicate_q_proj needs dcp_size > 1.",
               f"set {ctx.var('dcp_size')} > 1, or remove {ctx.var('dcp_replicate_q_proj')}", 267)
    elif ctx.is_set("dcp_replicate_q_proj") and comm not in ("", "a2a", "fi_a2a"):
        refuse("dcp_replicate_q_proj", f"dcp_replicate_q_proj applies to the a2a / fi_a2a DCP backends, not {comm}.",
               f"set {ctx.var('dcp_comm_backend')}: a2a (or leave it unset), or remove dcp_replicate_q_proj", 269)
    if dwdp > 1:
        for bad, dest, why, line in (
            (dwdp != tp, "dwdp_size", f"dwdp_size={dwdp} must equal tp_size={tp}", 441),
            (ctx.is_set("enable_eplb"), "enable_eplb", "DWDP does not work with enable_eplb", 448),
            (_given(ctx, "speculative_algorithm"), "speculative_algorithm", "DWDP does not support speculative decoding", 451),
            (pp != 1, "pp_size", "DWDP needs pp_size 1", 454),
            (ctx.is_set("enable_two_batch_overlap"), "enable_two_batch_overlap", "DWDP does not support two-batch overlap",
             455),
        ):
            if bad:
                refuse(dest, why + ".", f"fix {ctx.var(dest)}, or set dwdp_size: 1", line)
                break


_HCH = "sglang/srt/arg_groups/hicache_hook.py"


@rule("server.hicache")
def _hicache(ctx: Context) -> None:
    """handle_hicache and its helpers (hicache_hook.py), on the flags."""
    def refuse(dest: str, message: str, fix: str, line: int | str) -> None:
        ctx.error("server.hicache", dest, message + " SGLang refuses the launch.", fix, f"{_HCH}:{line}")

    fraction = _num(ctx, "hicache_host_memory_fraction")
    if added_in(ctx, "0.5.21") and fraction is not None and not 0 < fraction <= 1:
        refuse("hicache_host_memory_fraction", f"hicache_host_memory_fraction={fraction} is outside (0, 1].",
               f"set {ctx.var('hicache_host_memory_fraction')} in (0, 1], or remove it (0.8)", 117)
    config = _json_arg(ctx, "unified_cache_external_linker_config")
    if added_in(ctx, "0.5.23") and _given(ctx, "unified_cache_external_linker_config") and config is not None and \
            not isinstance(config, dict):
        refuse("unified_cache_external_linker_config", "unified_cache_external_linker_config must be a JSON object.",
               f"write {ctx.var('unified_cache_external_linker_config')} as a mapping", 28)
        return
    linker = ctx.is_set("enable_unified_cache_external_linker")
    if added_in(ctx, "0.5.21") and ctx.is_set("enable_linker_mla_dedup") and not (
            linker and _choice(ctx, "unified_cache_external_linker_backend", "mooncake") == "mooncake"):
        refuse("enable_linker_mla_dedup", "enable_linker_mla_dedup needs the Mooncake external linker "
               "(enable_unified_cache_external_linker, backend mooncake).",
               f"set {ctx.var('enable_unified_cache_external_linker')}: true, or remove enable_linker_mla_dedup", 43)
        return
    if linker:
        for bad, dest, why, line in (
            (added_in(ctx, "0.5.23") and (ctx.is_set("disable_radix_cache") or _given(ctx, "radix_cache_backend")),
             "disable_radix_cache", "needs the default radix cache (no disable_radix_cache, no radix_cache_backend)", 46),
            (ctx.is_set("enable_hierarchical_cache"), "enable_hierarchical_cache", "and enable_hierarchical_cache are "
             "mutually exclusive", 51),
            (_given(ctx, "hicache_storage_backend"), "hicache_storage_backend", "does not use hicache_storage_backend", 56),
        ):
            if bad:
                refuse(dest, f"enable_unified_cache_external_linker {why}.", f"remove {ctx.var(dest)}", line)
                return
        return
    if not ctx.is_set("enable_hierarchical_cache"):
        return
    storage = _given(ctx, "hicache_storage_backend")
    buffer_only = _choice(ctx, "hicache_host_memory_mode", "cache") == "buffer_only"
    if buffer_only and not storage:
        refuse("hicache_host_memory_mode", "hicache_host_memory_mode buffer_only needs hicache_storage_backend (host "
               "memory is only a staging buffer).", f"set {ctx.var('hicache_storage_backend')}, or "
               "hicache_host_memory_mode: cache", 273)
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
        ):
            if bad:
                refuse(dest, f"HiCache with decode context parallelism (dcp_size > 1) does not support {why}.",
                       f"remove {ctx.var(dest)}, or set dcp_size: 1", line)
                return


@rule("server.layernorm_sp")
def _layernorm_sp(ctx: Context) -> None:
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
    for bad, dest, why, line in (
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


_MOEH = "sglang/srt/arg_groups/moe_hook.py"
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


@rule("server.moe")
def _moe_launch(ctx: Context) -> None:
    """handle_a2a_moe and check_mega_moe_compat (moe_hook.py, mega_moe_hook.py), on the explicit backends."""
    def refuse(dest: str, message: str, fix: str, where: str) -> None:
        ctx.error("server.moe", dest, message + " SGLang refuses the launch.", fix, where)

    a2a = _choice(ctx, "moe_a2a_backend", "none")
    runner = _choice(ctx, "moe_runner_backend", "auto")
    overlap = ctx.is_set("enable_two_batch_overlap") or ctx.is_set("enable_single_batch_overlap")
    dispatch = _choice(ctx, "flashinfer_a2a_dispatch_type", "auto")
    if a2a != "flashinfer" and dispatch != "auto":
        refuse("flashinfer_a2a_dispatch_type", "flashinfer_a2a_dispatch_type needs moe_a2a_backend flashinfer.",
               f"set {ctx.var('moe_a2a_backend')}: flashinfer, or remove flashinfer_a2a_dispatch_type", f"{_MOEH}:311")
        return
    if _a2a_may_change(ctx):
        return
    tp, attn_dp = _int(ctx, "tp_size", 1), attention_dp_width(ctx)
    if a2a == "flashinfer" and dispatch != "auto" and "SGLANG_MOE_NVFP4_DISPATCH" in ctx.env:
        refuse("sglang_env.SGLANG_MOE_NVFP4_DISPATCH", "SGLANG_MOE_NVFP4_DISPATCH cannot be set together with "
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
                refuse("sglang_env.SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE", f"FlashInfer MegaMoE: {why}.",
                       "fix the sglang_env values", f"{_MOEH}:{line}")
                return
    if a2a == "megamoe" and overlap and added_in(ctx, "0.5.21"):  # 0.5.20 has no such check
        refuse("moe_a2a_backend", "moe_a2a_backend megamoe has no two-batch / single-batch overlap.",
               "remove enable_two_batch_overlap / enable_single_batch_overlap", "sglang/srt/arg_groups/mega_moe_hook.py:33")
    elif a2a == "flashinfer_megamoe" and not (attention_dp_on(ctx) and attn_dp == tp):
        refuse("attn_dp_size", f"moe_a2a_backend flashinfer_megamoe needs attn_dp_size equal to tp_size ({tp}).",
               f"set {ctx.var('attn_dp_size')}: {tp}", f"{_MOEH}:325")
    elif a2a == "flashinfer_megamoe" and runner not in ("auto", "flashinfer_megamoe"):
        refuse("moe_runner_backend", "moe_a2a_backend flashinfer_megamoe needs moe_runner_backend flashinfer_megamoe.",
               f"set {ctx.var('moe_runner_backend')}: flashinfer_megamoe (or leave it auto)", f"{_MOEH}:332")
    elif a2a == "deepep" and runner == "flashinfer_cutedsl" and _choice(ctx, "deepep_mode", "auto") == "normal":
        refuse("deepep_mode", "flashinfer_cutedsl FP4 MoE has no DeepEP normal (prefill) dispatch.",
               f"set {ctx.var('deepep_mode')}: low_latency or auto", f"{_MOEH}:377")
    elif a2a == "deepep_v2" and ctx.model.architecture in ARCHITECTURES and \
            ctx.model.architecture not in deepep_v2_architectures(ctx):
        # Stricter in one way: a model package may register more architectures before SGLang validates the
        # arguments (register_deepep_v2_model); this table holds SGLang's own models, which none registers.
        refuse("moe_a2a_backend", f"moe_a2a_backend deepep_v2 is not validated for {ctx.model.architecture}: SGLang "
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
                refuse(dest, f"moe_a2a_backend deepep_v2 {why}.", f"fix {ctx.var(dest)} (deepep_v2_mode: hybrid across "
                       "nodes), or use another moe_a2a_backend", f"{_MOEH}:{line}")
                break
    elif a2a == "pplx":
        for bad, dest, why, line in (
            (_choice(ctx, "deepep_mode", "auto") == "normal", "deepep_mode", "supports low-latency mode only", 577),
            (attn_dp < 2, "attn_dp_size", "needs attention DP with at least 2 groups", 591),
            (runner not in ("auto", "deep_gemm"), "moe_runner_backend", f"runs deep_gemm only, not {runner}", 599),
        ):
            if bad:
                refuse(dest, f"moe_a2a_backend pplx {why}.", f"fix {ctx.var(dest)}, or use another moe_a2a_backend",
                       f"{_MOEH}:{line}")
                break


DETERMINISTIC_ATTENTION = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")  # choices.py:113-120


@rule("server.features")
def _features(ctx: Context) -> None:
    """Further flag pairs SGLang refuses: LM-head layouts, multimodal transport, language-model-only, LoRA MoE
    runners, deterministic inference, Flex Attention, the prefill CUDA-graph context and a retired variable."""
    def refuse(rule_id: str, dest: str, message: str, fix: str, where: str) -> None:
        ctx.error(rule_id, dest, message + " SGLang refuses the launch.", fix, where)

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
                refuse("server.combination", dest, f"enable_tp_lm_head_all_to_all {why}.",
                       f"fix {ctx.var(dest)}, or remove enable_tp_lm_head_all_to_all", f"{lm}:{line}")
                break
    transport = _choice(ctx, "mm_feature_transport", "")
    if not ctx.is_set("encoder_only"):  # encoder-only servers fall back to cpu (serving_hook.py:882-889)
        if transport == "cuda_vmm" and _int(ctx, "pp_size", 1) != 1:
            refuse("server.combination", "mm_feature_transport", "mm_feature_transport cuda_vmm does not support pipeline "
                   "parallelism.", f"set {ctx.var('mm_feature_transport')}: cpu, or pp_size: 1", f"{_SH}:895")
        elif transport == "cuda_ipc" and _int(ctx, "nnodes", 1) != 1:
            refuse("server.combination", "mm_feature_transport", "mm_feature_transport cuda_ipc works on a single node "
                   "only.", f"set {ctx.var('mm_feature_transport')}: cpu (or cuda_vmm)", f"{_SH}:915")
    if ctx.is_set("language_model_only"):
        for dest in ("encoder_only", "language_only", "enable_prefix_mm_cache", "enable_broadcast_mm_inputs_process",
                     "mm_enable_dp_encoder"):
            if ctx.is_set(dest):
                refuse("server.combination", dest, f"language_model_only cannot be combined with {dest}.",
                       f"remove {ctx.var(dest)} or language_model_only", "sglang/srt/arg_groups/model_hook.py:1094")
                break
    if "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS" in ctx.env:
        refuse("server.combination", "sglang_env.SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS",
               "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS is retired (SGLang refuses it being set at all).",
               "remove it from sglang_env (SGLANG_ENABLE_DISAGG_SAMPLING_MASK=1 and sampling_mask_max_tokens replace it)",
               f"{_VH}:680")
    backend = _choice(ctx, "attention_backend", "")
    if backend == "flex_attention" and _given(ctx, "speculative_algorithm"):
        refuse("server.speculative", "speculative_algorithm", "speculative decoding does not work with the Flex "
               "Attention backend.", "use another attention_backend, or turn speculative decoding off (-e spec=off)",
               "sglang/srt/arg_groups/attention_hook.py:161")
    if ctx.is_set("enable_deterministic_inference") and backend and backend not in DETERMINISTIC_ATTENTION:
        refuse("server.combination", "attention_backend", f"enable_deterministic_inference supports the attention "
               f"backends {', '.join(DETERMINISTIC_ATTENTION)}, not {backend}.",
               f"set {ctx.var('attention_backend')}: triton or flashinfer (or leave it unset)", f"{lm}:1119")
    size = _num(ctx, "cuda_graph_prefill_max_context")
    if added_in(ctx, "0.5.21") and size is not None and size <= 0:
        refuse("server.minimum", "cuda_graph_prefill_max_context", f"cuda_graph_prefill_max_context={size} must be "
               "positive.", f"set {ctx.var('cuda_graph_prefill_max_context')} > 0, or remove it",
               "sglang/srt/arg_groups/cuda_graph_hook.py:427")
    if added_in(ctx, "0.5.23"):
        _lora_moe_runner(ctx, refuse)


def _lora_moe_runner(ctx: Context, refuse: Callable[[str, str, str, str, str], None]) -> None:
    """check_lora_moe_runner_args (sglang/srt/arg_groups/lora_hook.py:183-240), on the explicit values."""
    where = "sglang/srt/arg_groups/lora_hook.py"
    draft = _choice(ctx, "speculative_moe_runner_backend", "")
    if _given(ctx, "speculative_algorithm") and draft.startswith("lora"):
        refuse("server.lora", "speculative_moe_runner_backend", f"speculative_moe_runner_backend {draft}: the draft "
               "model has no LoRA adapters.", f"remove {ctx.var('speculative_moe_runner_backend')}", f"{where}:192")
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
        (_choice(ctx, "moe_a2a_backend", "none") != "none", "moe_a2a_backend", "needs moe_a2a_backend none", 221),
        (ctx.is_set("enable_eplb") or _choice(ctx, "init_expert_location", "trivial") != "trivial"
         or (_num(ctx, "ep_num_redundant_experts") or 0) > 0, "enable_eplb",
         "needs trivial expert placement (no EPLB, no redundant experts)", 234),
    ):
        if bad:
            refuse("server.lora", dest, f"moe_runner_backend {runner} {why}.", f"fix {ctx.var(dest)}, or use another "
                   "moe_runner_backend", f"{where}:{line}")
            return


# --- Checks found by differential fuzzing (tests/conformance/differential.py) ----------------------------
# Each restates, exactly, a refusal of SGLang 0.5.23's argument handling that the fuzzer found us accepting.


@rule("lora.init")
def _lora_init(ctx: Context) -> None:
    """check_lora_server_args (sglang/srt/arg_groups/lora_hook.py:36), which SGLang runs on every launch, LoRA or not
    (the rest of the function, :152 included, is server.lora's)."""
    per_batch = _num(ctx, "max_loras_per_batch")
    if per_batch is not None and per_batch <= 0:
        ctx.error("lora.init", "max_loras_per_batch", f"max_loras_per_batch={per_batch} must be positive; SGLang "
                  "asserts it on every launch, LoRA or not.", "remove sglang_args.max_loras_per_batch (default 8) or "
                  "set it >= 1", "sglang/srt/arg_groups/lora_hook.py:36")


# _verify_quantization (sglang/srt/configs/model_config.py:2042-2054): --quantization values SGLang keeps next to a
# checkpoint of another quant_method (the value's checkpoint methods).
COMPATIBLE_QUANTIZATION = {
    "modelopt_fp8": ("modelopt",),
    "modelopt_fp4": ("modelopt", "fp8"),
    "modelopt_mixed": ("modelopt",),
    "nvfp4_online": ("fp8", "modelopt_fp8"),
    "minimax_m3_nvfp4": ("mxfp8",),
    "petit_nvfp4": ("modelopt",),
    "w8a8_int8": ("compressed-tensors", "compressed_tensors"),
    "w8a8_fp8": ("compressed-tensors", "compressed_tensors"),
    "auto-round-int8": ("compressed-tensors", "compressed_tensors"),
}
# Choices of --quantization that SGLang registers only off CUDA (sglang/srt/layers/quantization/__init__.py:63-146):
# on an NVIDIA GPU _verify_quantization calls them unknown (model_config.py:2150-2154).
NOT_ON_CUDA_QUANTIZATION = ("gptq", "mlx_q4", "mlx_q8")
QUANT_SOURCE = "sglang/srt/configs/model_config.py:2086-2154 (_verify_quantization)"


@rule("quantization.checkpoint")
def _checkpoint_quantization(ctx: Context) -> None:
    """--quantization against the checkpoint's own quant_method, as SGLang's ModelConfig settles them.

    Only for checkpoints whose quant_method is known for certain (ModelFacts.quant_method: the model table, or
    sglang_model_quantization spelled modelopt_fp4 / modelopt_fp8 / none).  ``unquant`` becomes None before
    (sglang/srt/arg_groups/serving_hook.py:695-701) and ``quark_mxfp4`` requantizes any checkpoint
    (REQUANTIZATION_METHODS, model_config.py:545, :2135).  On a ModelOpt checkpoint the first override in
    QUANTIZATION_METHODS' order, ModelOptFp8Config's (sglang/srt/layers/quantization/base_config.py:223-253),
    replaces every other value by the checkpoint's method, except nvfp4_online (then only the compatibility list
    decides); on other checkpoints no override of the table's formats applies (the AWQ/GPTQ/MoE-WNA16 ones need
    those checkpoints).
    """
    quant, method = ctx.args.get("quantization"), ctx.model.quant_method
    if quant is None or method is None:
        return
    value = str(quant).lower()
    if value in ("unquant", "quark_mxfp4"):
        return
    resolved = method if method in ("modelopt_fp4", "modelopt_fp8") and value != "nvfp4_online" else value
    if resolved == "humming" and method != "mxfp4":
        return  # HummingConfig claims any checkpoint but MXFP4 (sglang/srt/layers/quantization/humming.py:503-508)
    if method and resolved != method and method not in COMPATIBLE_QUANTIZATION.get(resolved, ()):
        fits = sorted({method, "quark_mxfp4", *(k for k, v in COMPATIBLE_QUANTIZATION.items() if method in v)})
        ctx.error("quantization.checkpoint", "quantization",
                  f"quantization {quant!r} does not match the checkpoint's own quantization ({method}, "
                  f"{ctx.model.path or 'the model'}); SGLang refuses the pair when it reads the model's config.",
                  f"remove sglang_args.quantization (SGLang reads it from the checkpoint) or use one of {', '.join(fits)}",
                  QUANT_SOURCE)
    elif resolved in NOT_ON_CUDA_QUANTIZATION:
        ctx.error("quantization.checkpoint", "quantization",
                  f"quantization {quant!r} is not available on NVIDIA GPUs in SGLang {ctx.schema.version} (it is "
                  "registered for other platforms only); SGLang calls it an unknown quantization method.",
                  "use gptq_marlin for a GPTQ checkpoint, or remove sglang_args.quantization", QUANT_SOURCE)


@rule("tbo.attention_dp")
def _two_batch_overlap(ctx: Context) -> None:
    """check_two_batch_overlap (sglang/srt/arg_groups/validation_hook.py:756-771)."""
    if not ctx.is_set("enable_two_batch_overlap") or _int(ctx, "attn_dp_size", 1) > 1 or _a2a_may_change(ctx):
        return
    a2a = str(ctx.get("moe_a2a_backend", "none"))
    if ctx.is_set("enable_waterfill") and a2a not in ("deepep", "megamoe"):
        a2a = "deepep"  # sglang/srt/arg_groups/overrides.py:1596-1605
    if a2a not in ("none", "ascend_tp"):  # ascend_tp resolves to none (sglang/srt/arg_groups/moe_hook.py:463-469)
        return
    ctx.error("tbo.attention_dp", "enable_two_batch_overlap",
              "two-batch overlap without an expert-parallel all-to-all backend (moe_a2a_backend none) needs attention "
              "data parallelism; SGLang refuses it at start-up.",
              "set sglang_args.attn_dp_size > 1, or a moe_a2a_backend (e.g. deepep), or remove "
              f"{ctx.var('enable_two_batch_overlap')}",
              "sglang/srt/arg_groups/validation_hook.py:768")


MAMBA_EXTRA_BUFFER = ("extra_buffer", "extra_buffer_lazy")


@rule("mamba.extra_buffer")
def _mamba_extra_buffer(ctx: Context) -> None:
    """handle_mamba_radix_cache / validate_mamba_extra_buffer / validate_mamba_no_buffer (page size) for the
    architectures of the model table.

    SGLang resolves the strategy first (sglang/srt/arg_groups/overrides.py:453-488): nothing with the radix cache
    off; ``auto`` becomes extra_buffer when the overlap scheduler is on or pages are larger than 1 and the model
    supports it (its architecture with linear_attn_backend triton, :438-450), else no_buffer.
    """
    arch = ctx.model.architecture
    if ctx.model.family == "unknown" or ctx.is_set("disable_radix_cache"):  # not in the architecture table
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
    if strategy == "auto":
        strategy = ("extra_buffer" if (not ctx.is_set("disable_overlap_schedule") or paging) and backend == "triton"
                    else "no_buffer")
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


# _handle_gpu_memory_settings (sglang/srt/arg_groups/memory_hook.py:88-180): the default chunked_prefill_size by
# the GPU's memory in MiB (upper bound exclusive, size).
CHUNKED_PREFILL_DEFAULTS = ((20 * 1024, 2048), (35 * 1024, 4096), (60 * 1024, 4096), (90 * 1024, 8192),
                            (160 * 1024, 8192), (None, 16384))
MORI_ENV = "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


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


@rule("moe.mori")
def _mori(ctx: Context) -> None:
    """MoRI all-to-all: an AMD ROCm library, and its dispatch buffer against chunked prefill."""
    if ctx.args.get("moe_a2a_backend") != "mori":
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
    if not isinstance(chunk, int) or chunk <= 0 or str(ctx.get("disaggregation_mode", "null")) == "decode":
        return
    try:
        limit = int(ctx.env.get(MORI_ENV, 4096))
    except (TypeError, ValueError):
        return
    if chunk > limit:
        ctx.error("moe.mori", "moe_a2a_backend",
                  f"MoRI dispatches up to chunked_prefill_size={chunk} tokens per rank, more than {MORI_ENV}={limit}; "
                  "SGLang refuses it at start-up.",
                  f"set sglang_args.chunked_prefill_size <= {limit}, or raise sglang_env.{MORI_ENV}",
                  "sglang/srt/arg_groups/moe_hook.py:564-572")


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
    where DeepSeek V3 gets trtllm_mla (sglang/srt/arg_groups/model_overrides/deepseek_v2.py:179-185).
    """
    cc = ctx.compute_capability
    if cc is None or ctx.model.family in ("unknown", "gpt-oss", "deepseek-v3.2"):
        return None
    if ctx.model.mla:
        return {9: "fa3", 10: "trtllm_mla" if ctx.model.family == "deepseek-v3" else None}.get(cc[0], "triton")
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
    speculative hooks leave attention_backend alone)."""
    algo = _choice(ctx, "speculative_algorithm", "").upper()
    return no_spec_or_topk_one(ctx) and (not algo or ctx.args.get("speculative_eagle_topk") is not None
                                         or algo == "DFLASH")


# _mla_kv_cache_dtype_checks (sglang/srt/arg_groups/overrides.py:1203-1218): TRTLLM MLA runs fp8_e4m3, bf16 or auto
# KV caches; these dtypes are certainly none of them (the check compares the spelling: bfloat16 is refused, bf16 not).
TRTLLM_MLA_BAD_KV = ("fp8_e5m2", "mxfp8", "bfloat16", *KV4_DTYPES)


@rule("kv4.attention")
def _kv4_attention(ctx: Context) -> None:
    """An FP4 KV cache against the attention backends SGLang resolves (kv_cache_hook.py:112-316), and the KV cache
    dtypes of TRTLLM MLA."""
    kv = ctx.args.get("kv_cache_dtype")
    if kv not in (*KV4_DTYPES, *TRTLLM_MLA_BAD_KV) or ctx.model.family == "unknown":
        return
    backend = ctx.args.get("attention_backend")
    prefill, decode = ctx.args.get("prefill_attention_backend"), ctx.args.get("decode_attention_backend")
    if prefill is not None and prefill == decode:
        backend = prefill  # sglang/srt/arg_groups/overrides.py:1127-1131
    # 0.5.20 also resolves the unset prefill/shared backend next to an explicit decode one and checks it (below).
    if backend is None and prefill is None and (decode is None or not added_in(ctx, "0.5.21")):
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
    fa4, mla = (prefill or backend) == "fa4", bool(ctx.model.mla)
    if fa4:
        checked, dest = decode or backend, "decode_attention_backend"
    else:
        if (prefill or backend) != (decode or backend):
            return  # SGLang only warns about the mixed pair (kv_cache_hook.py:262-274)
        checked, dest = backend, "attention_backend"
    # From 0.5.21 an nvfp4 cache may get backends chosen for it (handle_nvfp4_prefill_kv_dequant_dtype): only explicit
    # ones are checked; 0.5.20 checks the resolved backend of every FP4 cache alike (kv_cache_hook.py:40-110 there).
    if checked is None or (kv == "nvfp4" and added_in(ctx, "0.5.21") and not ctx.args.get(dest)
                           and not ctx.args.get("attention_backend")):
        return
    allowed = KV4_BACKENDS[(fa4, mla)]
    if checked in allowed:
        return
    chosen = "" if ctx.args.get(dest) or prefill is not None else " (SGLang's default here: the key is unset)"
    ctx.error("kv4.attention", "kv_cache_dtype",
              f"kv_cache_dtype {kv} ({'MLA' if mla else 'MHA'} model{', FA4 prefill' if fa4 else ''}) runs with "
              f"{dest} {' / '.join(allowed)} only; it would be {checked!r}{chosen}. SGLang refuses it at start-up.",
              f"set sglang_args.{dest}: {allowed[0]}, or use kv_cache_dtype auto or fp8_e4m3",
              "sglang/srt/arg_groups/kv_cache_hook.py:277-316")


@rule("parallel.moe_dense_tp")
def _moe_dense_tp(ctx: Context) -> None:
    """check_server_args (sglang/srt/arg_groups/validation_hook.py:207-211)."""
    dense, tp = ctx.args.get("moe_dense_tp_size"), _int(ctx, "tp_size", 1)
    if dense is None or isinstance(dense, bool) or dense in (1, tp):
        return
    ctx.error("parallel.moe_dense_tp", "moe_dense_tp_size",
              f"moe_dense_tp_size={dense} must be 1 or tp_size ({tp}); SGLang refuses other values.",
              f"set sglang_args.moe_dense_tp_size: 1 (or {tp}), or remove it", "sglang/srt/arg_groups/validation_hook.py:207")


PPLX_ENV = "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


@rule("moe.pplx")
def _pplx(ctx: Context) -> None:
    """handle_a2a_moe for pplx (sglang/srt/arg_groups/moe_hook.py:575-594)."""
    if ctx.args.get("moe_a2a_backend") != "pplx":
        return
    if str(ctx.get("deepep_mode", "auto")) == "normal":
        ctx.error("moe.pplx", "deepep_mode", "moe_a2a_backend pplx runs in low-latency mode only; deepep_mode is normal.",
                  "set sglang_args.deepep_mode: low_latency (or auto)", "sglang/srt/arg_groups/moe_hook.py:577")
    elif _int(ctx, "attn_dp_size", 1) < 2:
        ctx.error("moe.pplx", "moe_a2a_backend",
                  "moe_a2a_backend pplx needs attention data parallelism with at least 2 groups (attn_dp_size >= 2); "
                  "SGLang refuses it without.", "set sglang_args.attn_dp_size >= 2, or use moe_a2a_backend deepep / none",
                  "sglang/srt/arg_groups/moe_hook.py:591")
        return
    # required_pplx_dispatch_tokens_per_rank (moe_hook.py:840-846) against the buffer (moe_hook.py:611-619): chunked
    # prefill (SGLang's default: at least 2048) or the decode CUDA-graph batch, whichever is larger.
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is None:
        chunk = default_chunked_prefill_size(gpu_memory_mib(ctx)[0]) or min(s for _, s in CHUNKED_PREFILL_DEFAULTS)
    if not isinstance(chunk, int) or chunk <= 0 or str(ctx.get("disaggregation_mode", "null")) == "decode":
        return
    graph = _num(ctx, "cuda_graph_max_bs_decode")
    need = chunk if graph is None else max(chunk, graph)
    try:
        limit = int(ctx.env.get(PPLX_ENV, 128))
    except (TypeError, ValueError):
        return
    if need > limit:
        ctx.error("moe.pplx", "moe_a2a_backend",
                  f"pplx dispatches up to {need} tokens per rank (chunked_prefill_size / cuda_graph_max_bs_decode), more "
                  f"than {PPLX_ENV}={limit}; SGLang refuses it at start-up.",
                  f"set sglang_args.chunked_prefill_size <= {limit}, or raise sglang_env.{PPLX_ENV}",
                  "sglang/srt/arg_groups/moe_hook.py:611-619")


DEEPEP_V2_ENV = "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
# Where each release raises the prefill-budget error (moe_hook.py), newest first.
DEEPEP_V2_BUDGET_LINES = (("0.5.23", "688-695"), ("0.5.22", "612-619"), ("0.5.21", "567-574"), (None, "560-567"))


@rule("moe.deepep_v2")
def _deepep_v2_budget(ctx: Context) -> None:
    """validate_deepep_v2_dispatch_token_budget's prefill half (sglang/srt/arg_groups/moe_hook.py:679-697; 0.5.20
    moe_hook.py:549-567: DEEPEP_V2_BUDGET_LINES): the tokens one rank dispatches in a prefill chunk against the DeepEP v2 buffer
    (SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK, 128 by default, environ.py:1441). The per-rank figure is
    required_deepep_v2_prefill_tokens_per_rank (moe_hook.py:641-653): the prefill buffer ceiling
    (max_prefill_buffer_tokens, overrides.py:1865-1884: chunked_prefill_size, or max_prefill_tokens when chunked
    prefill is off) after attention DP divides the chunk (parallel_hook.py:326-331), split from 0.5.22 on over the
    tp_size // attn_dp_size ranks a chunk is scattered across. The figure used here is a lower bound (SGLang's
    smallest default chunk for the architecture's GPUs; PP dynamic chunking only grows it), so the rule never refuses
    what SGLang accepts. SGLang's own models register no prefill sizing of their own (moe_model_registry.py:20-28), so
    the rule keeps to them. The decode CUDA-graph half reads the batch size SGLang resolves from the GPU's memory:
    the on-host preflight checks it."""
    if moe_backends(ctx)[0] != "deepep_v2" or _a2a_may_change(ctx) or \
            ctx.model.architecture not in deepep_v2_architectures(ctx) or \
            str(ctx.get("disaggregation_mode", "null")) == "decode" or ctx.is_set("enable_mis"):
        return
    try:
        capacity = int(ctx.env.get(DEEPEP_V2_ENV, 128))
    except (TypeError, ValueError):
        return
    chunk = ctx.args.get("chunked_prefill_size")
    if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool)):
        return
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
        what = f"max_prefill_tokens={ceiling} (chunked prefill is off)"
    if not isinstance(ceiling, int) or isinstance(ceiling, bool) or ceiling <= 0:
        return
    scatter = max(1, _int(ctx, "tp_size", 1) // width) if added_in(ctx, "0.5.22") else 1
    required = -(-ceiling // scatter)
    if required > capacity:
        spread = f", scattered over {scatter} ranks," if scatter > 1 else ""
        ctx.error("moe.deepep_v2", "moe_a2a_backend",
                  f"DeepEP v2 dispatches {required} prefill tokens per rank ({what}{spread}), more than "
                  f"{DEEPEP_V2_ENV}={capacity}; SGLang refuses it at start-up.",
                  f"set sglang_env.{DEEPEP_V2_ENV} >= {required}, or lower sglang_args.chunked_prefill_size",
                  "sglang/srt/arg_groups/moe_hook.py:" + next(lines for version, lines in DEEPEP_V2_BUDGET_LINES
                                                              if version is None or added_in(ctx, version)))


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
PAGE_NEUTRAL_BACKENDS = ("triton", "flashinfer", "fa3", "torch_native", "flex_attention", "dsv4", "minicpm_flashattn",
                         "minicpm_flashinfer", "qsa", "dsa", "nsa")
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
    if (ctx.model.architecture not in QWEN35_OVERRIDE_ARCHS or cc is None or cc[0] != 10
            or _choice(ctx, "attention_backend", "")):
        return None
    wanted = (_choice(ctx, "mamba_radix_cache_strategy", "auto") in MAMBA_EXTRA_BUFFER
              or ctx.is_set("disable_radix_cache") or bool(_choice(ctx, "speculative_algorithm", "")))
    return "trtllm_mha" if sm100_default_is_trtllm_mha(ctx) and wanted else "triton"


def resolved_page_size(ctx: Context) -> int | None:
    """The page size SGLang settles on, where certain: the host's (1 when unset) unless a backend forces one.

    None when an attention backend is neither page-neutral nor one of PAGE_FORCING_BACKENDS, or when SGLang's default
    backend is needed (no attention_backend, and prefill and decode not one backend) and not certain
    (default_attention_backend).
    """
    page = ctx.args.get("page_size")
    if page is not None and (not isinstance(page, int) or isinstance(page, bool)):
        return None
    if ctx.model.family == "deepseek-v3.2":
        return None  # DSA sets 64 x the index pool's width whatever the backend (model_overrides/deepseek_v2.py:161-173)
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
    elif resolved["attention_backend"] is None:
        # The base backend is SGLang's default (overrides.py:1133-1138): a side not set falls back to it, and the page
        # handling reads it even when both sides are set.
        resolved["attention_backend"] = default_attention_backend(ctx)
        if resolved["attention_backend"] is None:
            return None
    used = {b for b in resolved.values() if b is not None}
    if any(b not in PAGE_NEUTRAL_BACKENDS and b not in PAGE_FORCING_BACKENDS for b in used) or (
            not ctx.model.known and used & {"dsa", "nsa"}):
        return None
    for backend, (dests, kept) in PAGE_FORCING_BACKENDS.items():
        if any(resolved[d] == backend for d in dests) and page not in kept:
            page = 64
    return page if page is not None else 1


@rule("memory.chunked_page")
def _chunked_page(ctx: Context) -> None:
    """check_server_args (sglang/srt/arg_groups/validation_hook.py:241-246) on the values SGLang settles on.

    numeric.chunked_prefill_size checks the host's own pair; this covers SGLang's default chunked_prefill_size (by
    the GPU's memory, memory_hook.py:88-180: exact when the memory is known, else refused only when no default the
    architecture's GPUs can get is a multiple: possible_default_chunked_prefill_sizes) and the page size an
    attention backend forces (resolved_page_size). With attention DP the check sees the size divided by the width
    (parallel_hook.py:326-331).
    """
    if ctx.model.family == "unknown" or str(ctx.get("disaggregation_mode", "null")) == "decode":
        return
    page, chunk = resolved_page_size(ctx), ctx.args.get("chunked_prefill_size")
    if page is None or page <= 1 or (chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool))):
        return
    override = qwen35_sm100_backend(ctx)
    host_page = ctx.args.get("page_size") if override is None else None  # the Qwen3.5 override replaces it
    if chunk is not None and (chunk <= 0 or page == host_page):
        return  # disabled, or the host's own pair (numeric.chunked_prefill_size)
    sizes = [chunk] if chunk is not None else list(possible_default_chunked_prefill_sizes(ctx))
    width = attention_dp_width(ctx)
    if all(size // width > 0 and (size // width) % page for size in sizes):
        forced = page != host_page
        what = (f"chunked_prefill_size={chunk}" if chunk is not None else
                f"SGLang's default chunked_prefill_size ({' / '.join(map(str, sizes))}, by the GPUs' memory)")
        if width > 1:
            what += f" per attention-DP rank (divided by {width}: {' / '.join(str(x // width) for x in sizes)})"
        why = (f" (which SGLang's {ctx.model.architecture} override on SM100 sets with attention backend {override} "
               "in place of the host's page_size: model_overrides/qwen3_5.py:25-49)"
               if override is not None and page == QWEN35_OVERRIDE_PAGE[override] else
               " (which the attention backend forces)" if forced else "")
        ctx.error("memory.chunked_page", "chunked_prefill_size" if chunk is not None else "page_size",
                  f"{what} is not a multiple of the page size {page}" + why + "; SGLang refuses the pair at start-up.",
                  f"set sglang_args.chunked_prefill_size to a multiple of {page}" if chunk is not None else
                  f"use a power-of-two page_size (e.g. 16 or 64), or set sglang_args.chunked_prefill_size to a multiple "
                  f"of {page}", "sglang/srt/arg_groups/validation_hook.py:244")


@rule("moe.megamoe")
def _megamoe(ctx: Context) -> None:
    """check_mega_moe_compat (sglang/srt/arg_groups/mega_moe_hook.py:27-48), after handle_moe_runner_backend_alias
    (mega_moe_hook.py:259-276): moe_runner_backend megamoe is moe_a2a_backend megamoe."""
    if moe_backends(ctx)[0] != "megamoe":
        return
    via = "moe_a2a_backend" if ctx.args.get("moe_a2a_backend") == "megamoe" else "moe_runner_backend"
    overlap = [d for d in ("enable_two_batch_overlap", "enable_single_batch_overlap") if ctx.is_set(d)]
    if overlap and added_in(ctx, "0.5.21"):  # mega_moe_hook.py:31-37 is new in 0.5.21
        ctx.error("moe.megamoe", overlap[0],
                  "moe_a2a_backend megamoe has no two-batch / single-batch overlap decomposition; SGLang refuses "
                  f"{' and '.join(overlap)} with it.", f"remove {' and '.join(ctx.var(d) for d in overlap)}",
                  "sglang/srt/arg_groups/mega_moe_hook.py:33")
    cc = ctx.compute_capability
    if cc is None or cc[0] in (9, 10):  # is_sm90 / is_sm100 match the major only
        return
    fix = f"remove {ctx.var(via)}, or use moe_a2a_backend deepep (or none)"
    if added_in(ctx, "0.5.21"):  # check_mega_moe_compat is new in 0.5.21
        ctx.error("moe.megamoe", via,
                  f"{via} megamoe needs an SM90 (Hopper) or SM100-class GPU; compute capability {_cc(ctx)} has "
                  "none of its DeepGEMM kernels. SGLang refuses it at start-up.", fix,
                  "sglang/srt/arg_groups/mega_moe_hook.py:43")
        return
    # Stricter than 0.5.20, whose mega_moe_hook.py only maps the alias: its mega-MoE path builds the experts'
    # weights for DeepGEMM's SM90 / SM100 kernels (UTCCP-transposed scales, layers/moe/mega_moe.py:353-400) and
    # fails in the first forward on any other GPU; 0.5.21 made that the start-up check above.
    profile = arch_profile(ctx)
    ctx.error(f"{profile.family}.moe" if profile else "arch.moe", via,
              f"{via} megamoe runs DeepGEMM's mega-MoE kernels, which exist for SM90 (Hopper) and SM100-class GPUs "
              f"only; on compute capability {_cc(ctx)} SGLang {ctx.version} starts and then fails in the first "
              "forward pass (SGLang 0.5.21 and later refuse it at start-up).", fix,
              "sglang/srt/layers/moe/mega_moe.py:353-400")


# --- Checks of the launch-check catalog (tests/catalog/mapping-0.5.23.yml) --------------------------------------
# Each restates a raise or assert of SGLang 0.5.23's argument handling, on the values its resolution leaves them at;
# where a value depends on the model or the GPU in a way the validator does not know, the rule stays silent (the
# on-host preflight runs SGLang's own check).

_AH = "sglang/srt/arg_groups/attention_hook.py"
RAGGED_ENV = "SGLANG_RAGGED_VERIFY_MODE"  # sglang/srt/environ.py:1572, EnvStr("static")


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
    return "triton" if base == "flashkda" else base


def resolved_attention_backends(ctx: Context) -> tuple[str | None, str | None]:
    """(prefill, decode) attention backends as attention_backends_of reads them (model_override_base.py:138-152),
    None where SGLang's default applies and is not certain (default_attention_backend)."""
    base = _choice(ctx, "attention_backend", "")
    prefill, decode = _choice(ctx, "prefill_attention_backend", "") or base, _choice(ctx, "decode_attention_backend", "") or base
    if not (prefill and decode):
        default = default_attention_backend(ctx)
        prefill, decode = prefill or default, decode or default
    return prefill or None, decode or None


@rule("server.linear_attn")
def _linear_attn(ctx: Context) -> None:
    """handle_linear_attn_backend's FlashKDA and ReplaySSM checks (attention_hook.py:317-505), which SGLang runs on
    every launch, linear-attention model or not."""
    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.linear_attn", dest, message + " SGLang refuses the launch.", fix, f"{_AH}:{line}")

    if _choice(ctx, "linear_attn_decode_backend", "") == "flashkda":
        refuse("linear_attn_decode_backend", "linear_attn_decode_backend flashkda: FlashKDA is a prefill-only kernel.",
               f"set {ctx.var('linear_attn_prefill_backend')}: flashkda instead (decode stays on triton)", 319)
        return
    decode = linear_decode_backend(ctx)
    replay, spec = ctx.is_set("enable_linear_replayssm"), ctx.is_set("enable_linear_replayssm_spec")
    if replay:
        length = _num(ctx, "linear_replayssm_cache_len")
        if decode is not None and decode not in ("triton", "helion"):
            refuse("linear_attn_decode_backend", f"enable_linear_replayssm needs the triton (or, for KDA, helion) "
                   f"linear-attention decode backend, not {decode}.", f"set {ctx.var('linear_attn_decode_backend')}: "
                   "triton, or remove enable_linear_replayssm", 411)
        elif length is not None and length < 1:
            refuse("linear_replayssm_cache_len", f"linear_replayssm_cache_len={length} must be at least 1.",
                   f"set {ctx.var('linear_replayssm_cache_len')} >= 1, or remove it (default 16)", 435)
    if not spec:
        return
    topk = _num(ctx, "speculative_eagle_topk")
    ragged = ctx.env.get(RAGGED_ENV, "static")
    algo = _choice(ctx, "speculative_algorithm", "").upper()
    verify = _choice(ctx, "linear_attn_verify_backend", "")
    if topk is not None and topk != 1:
        refuse("speculative_eagle_topk", f"enable_linear_replayssm_spec needs a linear draft chain (speculative_eagle_topk "
               f"1), not speculative_eagle_topk={topk}.", f"set {ctx.var('speculative_eagle_topk')}: 1, or remove "
               "enable_linear_replayssm_spec", 452)
    elif decode is not None and decode not in ("triton", "flashinfer"):
        refuse("linear_attn_decode_backend", f"enable_linear_replayssm_spec needs the triton or flashinfer linear-attention "
               f"decode backend, not {decode}.", f"set {ctx.var('linear_attn_decode_backend')}: triton", 460)
    elif ragged != "static" and (algo not in ("DSPARK", "DFLASH") or verify not in ("triton", "nv_cutedsl")):
        refuse(f"sglang_env.{RAGGED_ENV}", f"enable_linear_replayssm_spec with {RAGGED_ENV}={ragged} needs DSPARK or "
               "DFLASH and linear_attn_verify_backend triton or nv_cutedsl.",
               f"remove sglang_env.{RAGGED_ENV} (static), or use those", 484)
    elif replay:
        refuse("enable_linear_replayssm_spec", "enable_linear_replayssm_spec and enable_linear_replayssm are mutually "
               "exclusive (they drive the same ring with different cursors).",
               f"remove {ctx.var('enable_linear_replayssm')} or {ctx.var('enable_linear_replayssm_spec')}", 500)


@rule("server.multi_item_scoring")
def _multi_item_scoring(ctx: Context) -> None:
    """handle_multi_item_scoring (attention_hook.py:536-577): enable_mis needs flashinfer for prefill and decode."""
    if not ctx.is_set("enable_mis"):
        return
    prefill, decode = resolved_attention_backends(ctx)
    bad = [b for b in (prefill, decode) if b is not None and b != "flashinfer"]
    if bad:
        ctx.error("server.multi_item_scoring", "enable_mis", f"enable_mis (multi-item scoring) needs the flashinfer "
                  f"attention backend for prefill and decode (custom attention masks), not {bad[0]}. SGLang refuses "
                  "the launch.", f"set {ctx.var('attention_backend')}: flashinfer (and no other prefill / decode "
                  "backend), or remove enable_mis", f"{_AH}:573")


@rule("server.unified_memory")
def _unified_memory(ctx: Context) -> None:
    """handle_page_major_kv_layout and handle_unified_memory_pool (kv_cache_hook.py:528-861) on the flags."""
    def refuse(dest: str, message: str, fix: str, line: int | str) -> None:
        ctx.error("server.unified_memory", dest, message + " SGLang refuses the launch.", fix, f"{_KVH}:{line}")

    unified, page_major = ctx.is_set("enable_unified_memory"), ctx.is_set("enable_page_major_kv_layout")
    if page_major and not unified:
        refuse("enable_page_major_kv_layout", "enable_page_major_kv_layout without enable_unified_memory is unsupported "
               "in this release.", f"remove {ctx.var('enable_page_major_kv_layout')} (enable_unified_memory implies it)", 783)
        return
    if not unified:
        return
    mamba = _choice(ctx, "mamba_backend", "triton")
    raw = _choice(ctx, "speculative_algorithm", "").upper()
    algo = {"NEXTN": "EAGLE"}.get(raw, raw)
    topk = _num(ctx, "speculative_eagle_topk")
    if topk is None and algo in ("EAGLE", "EAGLE3") and ctx.model.known and not ctx.is_set("speculative_adaptive") \
            and all(v is None for v in _spec_values(ctx)):
        topk = ctx.model.spec_auto[1]  # _auto_choose_speculative_params (spec.triple)
    for bad, dest, why, line in (
        (mamba != "triton", "mamba_backend", f"enable_unified_memory (page-major layout) needs the Triton Mamba kernels, "
         f"not mamba_backend {mamba}", 858),
        (added_in(ctx, "0.5.22") and algo not in ("", "DSPARK", "EAGLE", "EAGLE3", "DFLASH"), "speculative_algorithm",
         f"enable_unified_memory supports DSPARK, DFLASH, EAGLE / NEXTN and EAGLE3 speculative decoding only, not {raw}", 588),
        # Before 0.5.22 DSPARK only, with a linear chain (kv_cache_hook.py:545-557 in 0.5.21, :225-237 in 0.5.20).
        (not added_in(ctx, "0.5.22") and algo not in ("", "DSPARK"), "speculative_algorithm",
         f"enable_unified_memory supports DSPARK speculative decoding only in this release, not {raw}",
         "545 (0.5.21; 0.5.20 :225)"),
        (not added_in(ctx, "0.5.22") and algo == "DSPARK" and _num(ctx, "speculative_eagle_topk") not in (None, 1),
         "speculative_eagle_topk", "enable_unified_memory with DSPARK supports a linear draft chain only "
         "(speculative_eagle_topk 1)", "552 (0.5.21; 0.5.20 :232)"),
        (algo in ("EAGLE", "EAGLE3") and topk is not None and topk != 1, "speculative_eagle_topk",
         f"enable_unified_memory supports a linear draft chain only (speculative_eagle_topk 1), not {topk}", 601),
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
    ):
        if bad:
            refuse(dest, why + ".", f"fix {ctx.var(dest)}, or remove {ctx.var('enable_unified_memory')}", line)
            return


NVFP4_PREFILL_BACKEND = {"fp8_e4m3": "flashinfer", "nvfp4": "trtllm_mha"}  # kv_cache_hook.py:23-26


def qwen35_sm100_picks_triton(ctx: Context) -> bool:
    """_qwen3_5_hybrid_overrides (sglang/srt/arg_groups/model_overrides/qwen3_5.py:25-49) sets attention_backend
    triton: Qwen3.5 / Qwen3-Next on SM100/SM103 with attention_backend unset, and trtllm_mha either not SGLang's
    default there or not asked for (qwen35_sm100_backend)."""
    return qwen35_sm100_backend(ctx) == "triton"


@rule("server.kv_cache")
def _kv_cache_resolved(ctx: Context) -> None:
    """handle_nvfp4_prefill_kv_dequant_dtype, handle_prefill_only_disable_kv_cache and handle_cache_compatibility's
    SWA ratio (kv_cache_hook.py:35-92, 335-349, 427)."""
    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.kv_cache", dest, message + " SGLang refuses the launch.", fix, f"{_KVH}:{line}")

    kv, requested = _choice(ctx, "kv_cache_dtype", "auto"), _choice(ctx, "prefill_kv_cache_dequant_dtype", "auto")
    prefill, base = _choice(ctx, "prefill_attention_backend", ""), _choice(ctx, "attention_backend", "")
    decode = _choice(ctx, "decode_attention_backend", "")
    if not added_in(ctx, "0.5.21"):  # handle_nvfp4_prefill_kv_dequant_dtype is new in 0.5.21
        pass
    elif kv != "nvfp4" and requested != "auto":
        refuse("prefill_kv_cache_dequant_dtype", f"prefill_kv_cache_dequant_dtype {requested} applies only with "
               "kv_cache_dtype nvfp4.", f"remove {ctx.var('prefill_kv_cache_dequant_dtype')}", 41)
    elif kv == "nvfp4":
        cc = ctx.compute_capability
        chosen = ""
        if not prefill and not base and qwen35_sm100_picks_triton(ctx):
            chosen = base = "triton"
        explicit = prefill or base
        by_backend = {b: d for d, b in NVFP4_PREFILL_BACKEND.items()}
        if requested == "auto" and explicit and explicit not in by_backend:
            refuse("prefill_attention_backend" if prefill else "attention_backend",
                   f"kv_cache_dtype nvfp4 prefills through flashinfer (FP8 workspace) or trtllm_mha (native NVFP4); "
                   f"{explicit} provides neither"
                   + (f" (SGLang's {ctx.model.architecture} override picks triton on SM100 when the attention backend "
                      "is unset and trtllm_mha is not its default there or nothing asks for it: an explicit extra_buffer "
                      "mamba strategy, a disabled radix cache or speculative decoding; model_overrides/qwen3_5.py:25-49)"
                      if chosen else "") + ".",
                   "set attention_backend: trtllm_mha (native NVFP4) or flashinfer (FP8 workspace)" if chosen else
                   "remove the attention backend option (NVFP4 selects its own)", 53)
            return
        if requested == "auto":
            requested = by_backend.get(explicit) or ("" if cc is None else "nvfp4" if cc[0] == 10 else "fp8_e4m3")
        target = NVFP4_PREFILL_BACKEND.get(requested)
        if prefill and target and prefill != target:
            refuse("prefill_attention_backend", f"kv_cache_dtype nvfp4 with prefill dequant dtype {requested} needs the "
                   f"{target} prefill backend, not prefill_attention_backend {prefill}.",
                   f"remove {ctx.var('prefill_attention_backend')} and choose the dtype only", 71)
        elif decode not in ("", "trtllm_mha"):
            refuse("decode_attention_backend", f"kv_cache_dtype nvfp4 decodes with trtllm_mha, not {decode}.",
                   f"remove {ctx.var('decode_attention_backend')} (NVFP4 selects its decode backend)", 80)
    if ctx.is_set("prefill_only_disable_kv_cache"):
        resolved, _ = resolved_attention_backends(ctx)
        if resolved is not None and resolved not in ("fa3", "fa4"):
            refuse("prefill_only_disable_kv_cache", f"prefill_only_disable_kv_cache needs the FlashAttention prefill "
                   f"backend (fa3 / fa4), not {resolved}.", f"set {ctx.var('prefill_attention_backend')}: fa4 (or fa3 "
                   "where the GPU runs it), or remove prefill_only_disable_kv_cache", 344)
    ratio = _num(ctx, "swa_full_tokens_ratio")
    if ratio is not None and ctx.model.known and not 0 < ratio <= 1.0:
        refuse("swa_full_tokens_ratio", f"swa_full_tokens_ratio={ratio} is outside (0, 1].",
               f"set {ctx.var('swa_full_tokens_ratio')} in (0, 1], or remove it", 428)


def moe_backends(ctx: Context) -> tuple[str, str]:
    """(moe_a2a_backend, moe_runner_backend) after handle_moe_runner_backend_alias
    (sglang/srt/arg_groups/mega_moe_hook.py:259-276): moe_runner_backend megamoe means moe_a2a_backend megamoe."""
    a2a, runner = _choice(ctx, "moe_a2a_backend", "none"), _choice(ctx, "moe_runner_backend", "auto")
    return ("megamoe", "auto") if runner == "megamoe" else (a2a, runner)


FLASHINFER_A2A_RUNNERS = ("flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "flashinfer_trtllm_routed",
                          "deep_gemm")  # moe_hook.py:531-537
NVFP4_ONLINE_RUNNERS = ("flashinfer_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutedsl")  # overrides.py:1466-1470


UNCERTAIN = "?"
CUTLASS_MOE_QUANT = ("modelopt_fp4", "modelopt_fp8", "modelopt_mixed", None)  # moe_hook.py:80-87
CUTEDSL_MOE_QUANT = ("modelopt_fp4", "modelopt_mixed", "nvfp4_online")  # moe_hook.py:95-100
# _deepseek_moe_quant_resolution (overrides.py:745-809) fills an unset quantization in from the checkpoint on SM100.
DEEPSEEK_FAMILY_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
                         "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                         "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
                         "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")


def moe_kernel_quantization(ctx: Context) -> str | None:
    """The quantization handle_moe_kernel_config compares (view.quantization, moe_hook.py:78-100): the host's
    --quantization (unquant: none, serving_hook.py:692-699), else none, except where SGLang fills it in first (the
    DeepSeek family on SM100 from the checkpoint, a GGUF file) or the model is not known: UNCERTAIN. MXFP8 and
    nvfp4_online are UNCERTAIN too: their runner constraints come first (overrides.py:1449-1512: MXFP8 replaces a runner
    it does not run, nvfp4_online refuses one; server.moe and the hardware profiles report those)."""
    quant = ctx.args.get("quantization")
    if quant is not None and quant is not False:
        quant = str(quant)
        # mxfp8 and nvfp4_online: their runner constraints act first (overrides.py:1452-1512, which raise or replace).
        return UNCERTAIN if quant in ("mxfp8", "nvfp4_online") else None if quant == "unquant" else quant
    cc = ctx.compute_capability
    if not ctx.model.known or cc is None or str(ctx.model.path or "").endswith(".gguf") or (
            cc[0] == 10 and ctx.model.architecture in DEEPSEEK_FAMILY_ARCHS):
        return UNCERTAIN
    return None


@rule("server.moe")
def _moe_kernels(ctx: Context) -> None:
    """handle_moe_kernel_config, handle_a2a_moe's FlashInfer A2A checks, the nvfp4_online runner constraint,
    handle_eplb_and_dispatch and the DeepEP v2 draft check (moe_hook.py, overrides.py, parallel_hook.py), on the
    explicit values (nothing where DeepSeek's context-parallel overrides may change the a2a backend first)."""
    def refuse(dest: str, message: str, fix: str, where: str) -> None:
        ctx.error("server.moe", dest, message + " SGLang refuses the launch.", fix, where)

    a2a, runner = moe_backends(ctx)
    tp, ep, attn_dp = _int(ctx, "tp_size", 1), _int(ctx, "ep_size", 1), attention_dp_width(ctx)
    quant = _choice(ctx, "quantization", "")
    w4a16 = env_true(ctx.env, "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16")
    cc = ctx.compute_capability
    if quant == "nvfp4_online" and (cc is None or cc[0] == 10) and runner not in ("auto", *NVFP4_ONLINE_RUNNERS) and not (
            added_in(ctx, "0.5.23") and runner == "flashinfer_megamoe" and a2a == "flashinfer_megamoe" and w4a16):
        refuse("moe_runner_backend", f"quantization nvfp4_online runs the MoE with flashinfer_trtllm, "
               f"flashinfer_trtllm_routed or flashinfer_cutedsl only, not moe_runner_backend {runner}.",
               f"set {ctx.var('moe_runner_backend')}: auto (or one of those)", "sglang/srt/arg_groups/overrides.py:1471")
    if _a2a_may_change(ctx):
        return
    kernel_quant = moe_kernel_quantization(ctx)
    for bad, dest, why, line in (
        (runner == "flashinfer_cutlass" and kernel_quant not in (UNCERTAIN, *CUTLASS_MOE_QUANT), "quantization",
         f"moe_runner_backend flashinfer_cutlass runs quantization modelopt_fp4, modelopt_fp8, modelopt_mixed or none "
         f"(bf16), not {kernel_quant}", 81),
        (runner == "flashinfer_cutedsl" and kernel_quant not in (UNCERTAIN, *CUTEDSL_MOE_QUANT)
         and ctx.model.quant_method is not None and "mixed" not in ctx.model.quant_method, "quantization",
         f"moe_runner_backend flashinfer_cutedsl runs quantization modelopt_fp4, modelopt_mixed or nvfp4_online (or a "
         f"hybrid NVFP4 checkpoint), not {kernel_quant or 'none'}", 98),
        (runner in ("flashinfer_cutlass", "flashinfer_cutedsl") and ep not in (1, tp), "ep_size",
         f"moe_runner_backend {runner} needs ep_size 1 or ep_size == tp_size ({tp}), not {ep}", 89 if runner ==
         "flashinfer_cutlass" else 102),
        (runner == "flashinfer_cutedsl" and a2a not in ("none", "deepep", "flashinfer"), "moe_a2a_backend",
         f"moe_runner_backend flashinfer_cutedsl works with moe_a2a_backend none, deepep or flashinfer, not {a2a}", 106),
        (runner == "flashinfer_cutedsl" and a2a == "deepep" and (
            quant == "nvfp4_online" or env_true(ctx.env, "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION")),
         "moe_a2a_backend", "flashinfer_cutedsl with per-token NVFP4 activation needs moe_a2a_backend none or flashinfer, "
         "not deepep", 118),
        (runner == "cutlass" and quant in ("fp8", "mxfp8") and ep != 1, "ep_size",
         f"the FP8 / MXFP8 cutlass MoE runs with ep_size 1 only (ep_size={ep})", 161),
    ):
        if bad:
            refuse(dest, why + ".", f"fix {ctx.var(dest)}, or use another moe_runner_backend", f"{_MOEH}:{line}")
            break
    dispatch = ctx.args.get("flashinfer_a2a_dispatch_type")
    if a2a == "flashinfer":
        model_quant = quant or ctx.model.quant_method
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
            (dispatch == "mxfp8" and model_quant is not None and model_quant != "mxfp8", "flashinfer_a2a_dispatch_type",
             f"flashinfer_a2a_dispatch_type mxfp8 needs quantization mxfp8 (the model's is {model_quant or 'none'})", 193),
            (dispatch == "mxfp8" and runner not in ("auto", "flashinfer_trtllm", "flashinfer_trtllm_routed"),
             "moe_runner_backend", f"flashinfer_a2a_dispatch_type mxfp8 needs moe_runner_backend flashinfer_trtllm_routed, "
             f"not {runner}", 197),
            (runner not in ("auto", *FLASHINFER_A2A_RUNNERS), "moe_runner_backend",
             f"moe_a2a_backend flashinfer works with moe_runner_backend {', '.join(FLASHINFER_A2A_RUNNERS)} only, not "
             f"{runner}", 531),
        ):
            if bad:
                refuse(dest, why + ".", f"fix {dest if dest.startswith('sglang_env') else ctx.var(dest)}, or use another "
                       "moe_a2a_backend", f"{_MOEH}:{line}")
                break
        chunk = _num(ctx, "chunked_prefill_size")
        if added_in(ctx, "0.5.22") and _choice(ctx, "disaggregation_mode", "null") != "decode" and (
                (chunk is not None and chunk <= 0) or ctx.is_set("enable_mis")):
            mis = " (enable_mis turns it off)" if ctx.is_set("enable_mis") else ""
            refuse("chunked_prefill_size", "moe_a2a_backend flashinfer needs chunked prefill (a fixed-size dispatch "
                   "workspace); chunked_prefill_size is off" + mis + ".",
                   f"set {ctx.var('chunked_prefill_size')} > 0 (or remove it)", f"{_MOEH}:756")
    algorithm = ctx.args.get("speculative_algorithm") if _given(ctx, "speculative_algorithm") else None
    draft = _choice(ctx, "speculative_moe_a2a_backend", "")
    if not draft and algorithm is not None and str(algorithm).upper() != "NGRAM":
        draft = a2a
    if draft == "deepep_v2":
        refuse("speculative_moe_a2a_backend", "DeepEP v2 is not validated as the speculative draft's MoE a2a backend "
               "(the draft inherits moe_a2a_backend when speculative_moe_a2a_backend is unset).",
               f"set {ctx.var('speculative_moe_a2a_backend')} to another backend (e.g. none)", f"{_MOEH}:635")
    # Unknown models may set an a2a backend themselves (MiniMax-M3: megamoe, model_overrides/minimax_m3.py:112).
    if a2a == "none" and ctx.model.known and _choice(ctx, "ep_dispatch_algorithm", "") in ("static", "lp"):
        refuse("ep_dispatch_algorithm", f"ep_dispatch_algorithm {ctx.args.get('ep_dispatch_algorithm')} picks a different "
               "replica per rank, which needs an a2a backend; with moe_a2a_backend none all ranks must agree.",
               f"set {ctx.var('ep_dispatch_algorithm')}: dynamic (or leave it unset)", f"{_PH}:783")


SHARED_EXPERTS_A2A = ("deepep", "megamoe", "mooncake", "ascend_fuseep", "mori")  # parallel_hook.py:227-233


@rule("server.parallel")
def _parallel_moe_dp(ctx: Context) -> None:
    """handle_context_parallelism's MoE-DP sizes and handle_shared_experts_tp (parallel_hook.py:170-192, 203-237), on
    the explicit sizes of known models other than DeepSeek-V4 (which derives attn_cp_size itself)."""
    def refuse(dest: str, message: str, fix: str, line: int) -> None:
        ctx.error("server.parallel", dest, message + " SGLang refuses the launch.", fix, f"{_PH}:{line}")

    if not ctx.model.known or "DeepseekV4" in str(ctx.model.architecture or "") or _a2a_may_change(ctx):
        return
    tp, ep, attn_dp = _int(ctx, "tp_size", 1), _int(ctx, "ep_size", 1), attention_dp_width(ctx)
    cp, moe_dp, dwdp = _int(ctx, "attn_cp_size", 1), _int(ctx, "moe_dp_size", 1), _int(ctx, "dwdp_size", 1)
    if moe_dp > 1 and dwdp <= 1 and tp >= 1 and tp % moe_dp == 0:  # DWDP resets moe_dp_size to 1 (parallel_hook.py:493)
        if ep * moe_dp > tp:
            refuse("ep_size", f"ep_size x moe_dp_size = {ep} x {moe_dp} exceeds tp_size={tp}.",
                   f"lower {ctx.var('ep_size')} or moe_dp_size", 175)
        elif ep > 1 and ep * moe_dp != tp:
            refuse("ep_size", f"ep_size x moe_dp_size = {ep} x {moe_dp} must equal tp_size={tp} when ep_size > 1.",
                   f"set {ctx.var('ep_size')}: {tp // moe_dp}, or 1", 181)
    if moe_dp > 1 and dwdp <= 1 and cp != moe_dp:
        refuse("moe_dp_size", f"attn_cp_size={cp} differs from moe_dp_size={moe_dp}, which only moe_dp_size 1 allows.",
               f"set {ctx.var('moe_dp_size')}: {cp} (= attn_cp_size), or 1", 190)
    size = _num(ctx, "shared_experts_tp_size")
    if not added_in(ctx, "0.5.21") or size is None or attn_dp < 1 or cp < 1:
        return
    attn_tp = tp // attn_dp // cp
    if size < 1 or attn_tp % size:
        refuse("shared_experts_tp_size", f"shared_experts_tp_size={size} must be a positive divisor of the attention TP "
               f"size ({attn_tp} = tp_size / attn_dp_size / attn_cp_size).",
               f"set {ctx.var('shared_experts_tp_size')} to a divisor of {attn_tp}, or remove it", 216)
    elif moe_backends(ctx)[0] not in SHARED_EXPERTS_A2A:
        refuse("shared_experts_tp_size", "shared_experts_tp_size needs an expert-parallel all-to-all backend (deepep, "
               "megamoe, mooncake or mori); it is also Kimi-K3 only.",
               f"set {ctx.var('moe_a2a_backend')}: deepep, or remove {ctx.var('shared_experts_tp_size')}", 234)


@rule("server.grpc")
def _grpc_threads(ctx: Context) -> None:
    """handle_deprecated_args' SGLANG_GRPC_WORKER_THREADS check (serving_hook.py:381-390), when gRPC is on."""
    legacy = ctx.is_set("smg_grpc_mode") or ctx.is_set("grpc_mode")
    if not (_given(ctx, "grpc_port") or ctx.env.get("SGLANG_GRPC_PORT") or legacy):
        return
    raw = ctx.env.get("SGLANG_GRPC_WORKER_THREADS")
    try:
        threads = int(raw) if raw is not None else None
    except ValueError:
        return  # EnvInt refuses it itself, elsewhere
    if threads is not None and threads < 1:
        ctx.error("server.grpc", "sglang_env.SGLANG_GRPC_WORKER_THREADS", f"SGLANG_GRPC_WORKER_THREADS={raw} must be at "
                  "least 1 with the gRPC server on. SGLang refuses the launch.",
                  "set sglang_env.SGLANG_GRPC_WORKER_THREADS >= 1, or remove it (default 4)", f"{_SH}:388")


PAGE_TREE_SPEC_BACKENDS = ("flashinfer", "fa3", "triton")  # speculative_hook.py:1271


def resolved_base_attention_backend(ctx: Context) -> str | None:
    """view.attention_backend where certain: the explicit one, the shared prefill/decode one
    (overrides.py:1127-1131), or SGLang's default when no backend is set (default_attention_backend)."""
    base = _choice(ctx, "attention_backend", "")
    prefill, decode = _choice(ctx, "prefill_attention_backend", ""), _choice(ctx, "decode_attention_backend", "")
    if base:
        return base
    if prefill and prefill == decode:
        return prefill
    return default_attention_backend(ctx) if not (prefill or decode) else None


@rule("server.speculative")
def _speculative_shapes(ctx: Context) -> None:
    """The draft-shape checks of speculative_hook.py: DFLASH's window (:427-434), UNO's tree mode (:494-559), DSpark
    with attention DP and its draft width (:674-710, :824-850), tree drafts on paged KV (:1271-1282, :1355-1366) and
    NGRAM's external corpus (:1331-1349)."""
    def refuse(dest: str, message: str, fix: str, line: int | str) -> None:
        ctx.error("server.speculative", dest, message + " SGLang refuses the launch.", fix, f"{_SPH}:{line}")

    raw = ctx.args.get("speculative_algorithm") if _given(ctx, "speculative_algorithm") else None
    algo = None if raw is None else {"NEXTN": "EAGLE"}.get(str(raw).upper(), str(raw).upper())
    if algo is None:
        return
    draft, window = _num(ctx, "speculative_num_draft_tokens"), _num(ctx, "speculative_draft_window_size")
    if algo == "DFLASH" and window is not None and window > 0:
        width = draft if draft is not None else _num(ctx, "speculative_dflash_block_size")
        if width is not None and width > 0 and window < width:
            refuse("speculative_draft_window_size", f"speculative_draft_window_size={window} is below the DFLASH block "
                   f"size (speculative_num_draft_tokens {width}).", f"set {ctx.var('speculative_draft_window_size')} >= "
                   f"{width}", 430)
    if algo == "DSPARK":
        _dspark_shapes(ctx, refuse, draft)
    if algo == "NGRAM":
        _ngram_shapes(ctx, refuse, draft)
    if algo not in EAGLE_FAMILY:
        return
    topk = effective_eagle_topk(ctx, algo)
    page, backend = resolved_page_size(ctx), resolved_base_attention_backend(ctx)
    if topk is not None and topk > 1 and page is not None and page > 1 and backend is not None \
            and backend not in PAGE_TREE_SPEC_BACKENDS and backend != "trtllm_mha":  # trtllm_mha: spec.backend (:1178)
        refuse("speculative_eagle_topk", f"speculative_eagle_topk={topk} (a tree draft) with page_size {page} runs on the "
               f"{', '.join(PAGE_TREE_SPEC_BACKENDS)} attention backends only, not {backend}.",
               f"set {ctx.var('speculative_eagle_topk')}: 1, page_size: 1, or attention_backend: flashinfer", 1278)


def _dspark_shapes(ctx: Context, refuse: Callable[[str, str, str, int | str], None], draft: int | float | None) -> None:
    a2a, attn_dp = moe_backends(ctx)[0], attention_dp_width(ctx)
    if attn_dp > 1 and ctx.is_set("enable_dp_lm_head") and _int(ctx, "attn_cp_size", 1) == 1 and not _a2a_may_change(ctx):
        ragged = ctx.env.get(RAGGED_ENV, "static")
        spec_a2a = _choice(ctx, "speculative_moe_a2a_backend", "")
        # 0.5.20 has no mori (speculative_hook.py:531); before 0.5.22 only an a2a MoE needs the static ragged mode
        # (0.5.21 speculative_hook.py:600-610).
        coordinated = env_true(ctx.env, DP_SPEC_ENV) and added_in(ctx, "0.5.22")
        if a2a not in (("none", "megamoe", "mori") if added_in(ctx, "0.5.21") else ("none", "megamoe")):
            refuse("moe_a2a_backend", f"DSPARK with attention DP supports moe_a2a_backend none, megamoe or mori, not {a2a}.",
                   f"set {ctx.var('moe_a2a_backend')}: none", 678)
        elif (a2a != "none" or coordinated) and ragged != "static":
            refuse(f"sglang_env.{RAGGED_ENV}", f"DSPARK with an a2a MoE or {DP_SPEC_ENV} needs {RAGGED_ENV}=static, not "
                   f"{ragged}.", f"remove sglang_env.{RAGGED_ENV}", 693)
        elif spec_a2a and spec_a2a != a2a:
            refuse("speculative_moe_a2a_backend", f"DSPARK with attention DP ignores speculative_moe_a2a_backend; it must "
                   f"match moe_a2a_backend {a2a} (it is {spec_a2a}).", f"remove {ctx.var('speculative_moe_a2a_backend')}",
                   707)
    block = _num(ctx, "speculative_dspark_block_size")
    if block is not None and block > 0 and draft is not None and draft != block + 1:
        refuse("speculative_num_draft_tokens", f"DSPARK: speculative_num_draft_tokens={draft} must be "
               f"speculative_dspark_block_size + 1 = {block + 1}.", "set only speculative_dspark_block_size (gamma)", 830)
    elif draft is not None and draft < 2:
        refuse("speculative_num_draft_tokens", f"DSPARK needs speculative_num_draft_tokens >= 2 (gamma + 1), not {draft}.",
               f"set speculative_dspark_block_size (gamma) instead of {ctx.var('speculative_num_draft_tokens')}", 847)


def _ngram_shapes(ctx: Context, refuse: Callable[[str, str, str, int | str], None], draft: int | float | None) -> None:
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
                refuse(dest, f"{dest} {why}.", f"fix {ctx.var(dest)}, or remove "
                       f"{ctx.var('speculative_ngram_external_corpus_path')}", line)
                return
    breadth = _num(ctx, "speculative_ngram_max_bfs_breadth")
    breadth = 10 if breadth is None else breadth  # NGRAM's eagle_topk (speculative_hook.py:1309-1313)
    page, backend = resolved_page_size(ctx), resolved_base_attention_backend(ctx)
    if breadth > 1 and page is not None and page > 1 and backend is not None and backend != "flashinfer":
        refuse("page_size", f"NGRAM with speculative_ngram_max_bfs_breadth {breadth} (> 1) and page_size {page} is "
               f"unstable on the {backend} attention backend; SGLang allows it on flashinfer only.",
               f"set {ctx.var('page_size')}: 1, speculative_ngram_max_bfs_breadth: 1, or attention_backend: flashinfer",
               1361)


CUDA_GRAPH_BACKENDS = ("full", "breakable", "disabled")  # sglang/srt/model_executor/cuda_graph_config.py:51-65
CUTEDSL_MLA_KV = ("fp8_e4m3", "bf16", "bfloat16", "auto")  # overrides.py:1248-1256


@rule("server.features")
def _features_catalog(ctx: Context) -> None:
    """validate_cuda_graph_config's per-phase backends (cuda_graph_hook.py:410-420), the DP LM head
    (overrides.py:1424-1427), decode-only CuTe DSL MLA (overrides.py:1233-1256) and load publishing
    (validation_hook.py:436-466)."""
    def refuse(rule_id: str, dest: str, message: str, fix: str, where: str) -> None:
        ctx.error(rule_id, dest, message + " SGLang refuses the launch.", fix, where)

    config = _json_arg(ctx, "cuda_graph_config")
    if isinstance(config, dict):
        for phase in ("decode", "prefill"):
            settings = config.get(phase)
            backend = settings.get("backend") if isinstance(settings, dict) else None
            if backend is not None and backend not in CUDA_GRAPH_BACKENDS:
                refuse("server.json_args", "cuda_graph_config", f"cuda_graph_config {phase}.backend {backend!r} is not "
                       f"one of {', '.join(CUDA_GRAPH_BACKENDS)}.", f"set {ctx.var('cuda_graph_config')} {phase}.backend "
                       "to one of those", "sglang/srt/arg_groups/cuda_graph_hook.py:417")
                break
    # With one DP rank SGLang turns enable_dp_lm_head off first (_data_parallelism_defaults, overrides.py:1366-1370):
    # only DP replicas (dp_size > 1) without attention DP reach the assert. An elastic-EP scale joiner counts as DP.
    # Before 0.5.22 the assert tests enable_dp_attention (0.5.21 overrides.py:1364-1366).
    if ctx.is_set("enable_dp_lm_head") and not attention_dp_on(ctx) and _int(ctx, "dp_size", 1) > 1 and \
            _choice(ctx, "ep_join_mode", "") != "scale":
        refuse("server.combination", "enable_dp_lm_head", "enable_dp_lm_head needs attention DP (attn_dp_size > 1).",
               f"set {ctx.var('attn_dp_size')} > 1, or remove {ctx.var('enable_dp_lm_head')}",
               "sglang/srt/arg_groups/overrides.py:1425")
    lm = "sglang/srt/arg_groups/overrides.py"
    # Elsewhere than SM100, and for the table's non-MLA models, the attention rules of the profiles refuse
    # cutedsl_mla first (arch.attention, sm10x.hybrid_attention).
    cc = ctx.compute_capability
    cutedsl_reaches = (cc is None or cc[0] == 10) and (ctx.model.mla or not ctx.model.known)
    if not cutedsl_reaches:
        pass
    elif _choice(ctx, "prefill_attention_backend", "") == "cutedsl_mla":
        refuse("server.combination", "prefill_attention_backend", "the CuTe DSL MLA backend decodes only; "
               "prefill_attention_backend cutedsl_mla is refused.", f"remove {ctx.var('prefill_attention_backend')} "
               "(SGLang prefills with trtllm_mla next to a cutedsl_mla decode)", f"{lm}:1241")
    elif "cutedsl_mla" in (_choice(ctx, "attention_backend", ""), _choice(ctx, "decode_attention_backend", "")):
        kv = _choice(ctx, "kv_cache_dtype", "auto")
        if kv not in CUTEDSL_MLA_KV:
            refuse("server.combination", "kv_cache_dtype", f"the CuTe DSL MLA backend runs kv_cache_dtype fp8_e4m3, bf16 "
                   f"or auto, not {kv}.", f"set {ctx.var('kv_cache_dtype')}: fp8_e4m3 (or auto)", f"{lm}:1254")
    mode = str(ctx.args.get("load_publish_endpoint") or "").strip()
    if mode and mode.lower() != "off":
        events = _json_arg(ctx, "kv_events_config")
        fix = (f"set {ctx.var('kv_events_config')} to an active publisher, e.g. "
               '{"publisher": "zmq", "endpoint": "tcp://*:5557"}, or remove load_publish_endpoint')
        if not ctx.is_set("kv_events_config"):
            refuse("server.combination", "load_publish_endpoint", "load_publish_endpoint needs kv_events_config (routers "
                   "find the load range through its kv_events block).", fix, f"{_VH}:453")
        elif not isinstance(events, dict):
            refuse("server.json_args", "kv_events_config", "kv_events_config is not a JSON object.", fix, f"{_VH}:461")
        elif events.get("publisher", "null") == "null" or not events.get("endpoint", "tcp://*:5557"):
            refuse("server.combination", "kv_events_config", "load_publish_endpoint needs an active kv_events_config "
                   "publisher (publisher null or an empty endpoint).", fix, f"{_VH}:463")


ADAPTIVE_DEFAULT_STEPS = (0, 1, 3, 5, 7)  # sglang/srt/speculative/adaptive_spec_params.py:28-53, every bs slot's union


@rule("server.speculative")
def _adaptive_steps(ctx: Context) -> None:
    """_init_adaptive_speculative_params (speculative_hook.py:1392-1421) with SGLang's default adaptive config, where
    _maybe_disable_adaptive (adaptive_spec_params.py:56-100) keeps speculative_adaptive on."""
    raw = _choice(ctx, "speculative_algorithm", "").upper()
    steps = _num(ctx, "speculative_num_steps")
    if not ctx.is_set("speculative_adaptive") or {"NEXTN": "EAGLE"}.get(raw, raw) not in ("EAGLE", "EAGLE3") \
            or steps is None or _given(ctx, "speculative_adaptive_config"):
        return
    if _num(ctx, "speculative_eagle_topk") not in (None, 1) or attention_dp_on(ctx) or _choice(
            ctx, "ep_join_mode", "") == "scale" or any(
            ctx.is_set(d) for d in ("enable_multi_layer_eagle", "enable_two_batch_overlap", "enable_pdmux")):
        return  # SGLang turns speculative_adaptive off (a warning)
    if steps not in ADAPTIVE_DEFAULT_STEPS:
        ctx.error("server.speculative", "speculative_num_steps", f"speculative_num_steps={steps} with speculative_adaptive "
                  f"is not one of the adaptive config's candidate steps {list(ADAPTIVE_DEFAULT_STEPS)}. SGLang refuses "
                  "the launch.", f"set {ctx.var('speculative_num_steps')} to one of them, or remove it (SGLang picks 3)",
                  f"{_SPH}:1417")
