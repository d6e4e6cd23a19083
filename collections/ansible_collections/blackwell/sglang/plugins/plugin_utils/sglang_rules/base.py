# SPDX-License-Identifier: Apache-2.0
"""Argument accessors and constants every rule module shares: typed reads of the context's args (as SGLang
reads them), SGLang's environment-switch truthiness, and the SGLang files the rules cite by line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ARCHITECTURES, ArchFacts, ModelFacts

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


SPEC_TRIPLE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
EAGLE_FAMILY = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}
# sglang/srt/speculative/spec_info.py SpeculativeAlgorithm members + reserved alias NEXTN (0.5.23).
SPEC_ALGORITHMS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP"}


def nextn_as_eagle(algo: str) -> str:
    """The speculative algorithm as SGLang runs it: NEXTN is EAGLE's alias (spec_info.py's from_string)."""
    return "EAGLE" if algo == "NEXTN" else algo


ATTENTION_DESTS = (
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "speculative_draft_attention_backend",
)
MOE_RUNNER_DESTS = ("moe_runner_backend", "speculative_moe_runner_backend")

# The SGLang files the rules cite by line (Rule.file, report.refuse).
_VH = "sglang/srt/arg_groups/validation_hook.py"
_SH = "sglang/srt/arg_groups/serving_hook.py"
_KVH = "sglang/srt/arg_groups/kv_cache_hook.py"
_SPH = "sglang/srt/arg_groups/speculative_hook.py"
_PH = "sglang/srt/arg_groups/parallel_hook.py"
_HCH = "sglang/srt/arg_groups/hicache_hook.py"
_MOEH = "sglang/srt/arg_groups/moe_hook.py"
_AH = "sglang/srt/arg_groups/attention_hook.py"

# Environment switches SGLang reads, and argument values more than one area tests.
PP_SPEC_ENV = "SGLANG_ENABLE_PP_SPEC"
DP_SPEC_ENV = "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"
RAGGED_ENV = "SGLANG_RAGGED_VERIFY_MODE"  # sglang/srt/environ.py:1572, EnvStr("static")
MAMBA_EXTRA_BUFFER = ("extra_buffer", "extra_buffer_lazy")


def _int(ctx: Context, dest: str, default: int) -> int:
    value = ctx.get(dest, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


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


def _attention_backends(ctx: Context) -> list[tuple[str, str]]:
    return [(d, str(ctx.args[d])) for d in ATTENTION_DESTS if ctx.args.get(d) is not None and d in ctx.schema.arguments]


def _cc(ctx: Context) -> str:
    return ".".join(map(str, ctx.compute_capability or ()))


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


def _json_arg(ctx: Context, dest: str) -> Any:
    """The decoded value of a JSON argument (the validator keeps JSON text); None when unset or not JSON."""
    raw = ctx.args.get(dest)
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _override_architectures(ctx: Context) -> list[Any] | None:
    """The ``architectures`` list json_model_override_args merges into the checkpoint's config; None when it names
    none."""
    override = _json_arg(ctx, "json_model_override_args")
    names = override.get("architectures") if isinstance(override, dict) else None
    return names if isinstance(names, list) and names else None


# The facts that follow from the architecture alone, for one SGLang does not know from the model table (the
# defaults of ModelFacts: moe None, not in the table).
_UNTABLED = ArchFacts("unknown")


def model_after_overrides(ctx: Context) -> ModelFacts:
    """The model as SGLang sees it: the declared facts with ``architectures[0]`` taken from json_model_override_args
    when it names one. SGLang merges the override into the checkpoint's config (utils/hf_transformers/config.py:
    405-415, called from configs/model_config.py:612-627) before every check keyed on the architecture reads
    ``hf_config.architectures[0]`` (arg_groups/model_hook.py:167, the model overrides, the DeepEP v2 and CP tables),
    so an override of ``architectures`` changes the model those checks see. The facts that follow from the
    architecture (family, MLA, hybrid linear attention, MoE, the speculative defaults) follow it; the checkpoint's
    own (quantization, context, text_config layout, weights) and ``known`` stay as declared. run_rules publishes the
    result as ``ctx.model`` once, before any rule reads it: no rule computes the architecture again."""
    names = _override_architectures(ctx)
    if names is None or not isinstance(names[0], str) or names[0] == ctx.model.architecture:
        return ctx.model
    tabled = ARCHITECTURES.get(names[0])
    facts = tabled or _UNTABLED
    return replace(ctx.model, architecture=names[0], family=facts.family, mla=facts.mla,
                   hybrid_linear_attention=facts.hybrid_linear_attention, spec_auto=facts.spec_auto,
                   moe=None if tabled is None else facts.moe, checkpoint_architecture=ctx.model.architecture)
