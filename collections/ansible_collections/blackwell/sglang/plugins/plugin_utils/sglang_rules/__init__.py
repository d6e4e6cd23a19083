# SPDX-License-Identifier: Apache-2.0
"""The cross-field and hardware rules the validator applies, one module per area.

Each rule is a function of a validation context (see ``sglang_validate.Context``) and of a :class:`Report` bound
to it, registered with its data (``registry.rule``): its id and the problem ids it reports, the SGLang checks it
mirrors (file:line) or why it is stricter than SGLang, and the SGLang releases it holds for.  SGLang's own default
resolution (what SGLang picks where the host sets nothing) lives in :mod:`.resolve`; the hardware profiles per
compute capability in :mod:`.profiles`.  docs/contributing-rules.md says how to add a rule.

Modules: schema (deprecated flags and aliases), speculative, parallel, attention (and the architecture checks),
moe, kv_cache (KV cache, memory, mamba), hardware (memory fit, P2P), serving (TLS, HTTP, gRPC, security), lora,
hicache, model (numbers, context length, checkpoint quantization), launch (further launch checks of SGLang), stack
(the driver against the release's CUDA stack, the stop switch).
"""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import (  # noqa: F401  (registers the rules)
    attention,
    hardware,
    hicache,
    kv_cache,
    launch,
    lora,
    model,
    moe,
    parallel,
    schema,
    serving,
    speculative,
    stack,
    warmup,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import env_true
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.hardware import nccl_flag
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.profiles import PROFILES, QUANT_MIN_CAPABILITY
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import (
    RULES,
    VALIDATOR_IDS,
    Report,
    Rule,
    added_in,
    rule,
    run_rules,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import MAX_GPUS_PER_HOST, gpu_ids
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.schema import RENAMED, Renamed

__all__ = ["MAX_GPUS_PER_HOST", "ORDER", "PROFILES", "QUANT_MIN_CAPABILITY", "RENAMED", "RULES", "Renamed", "Report", "Rule",
           "VALIDATOR_IDS", "added_in", "env_true", "gpu_ids", "nccl_flag", "problem_ids", "rule", "run_rules"]

# The order the rules run in, module.function: the problems come out in it.  The deprecated flags and aliases go
# first (they rewrite the args to what SGLang runs, which the later rules read); the rest follows SGLang's own
# resolution order where one rule's refusal makes a later one moot.  A new rule goes where its problems belong.
ORDER: tuple[str, ...] = (
    "schema._deprecated",
    "schema._backend_aliases",
    "attention._tokenspeed_mla",
    "schema._deprecated_conflicts",
    "serving._ssl",
    "serving._media_url",
    "speculative._spec_algorithm",
    "speculative._spec_triple",
    "speculative._spec_backend",
    "speculative._spec_pipeline_refused",
    "speculative._spec_pipeline",
    "kv_cache._mamba_no_buffer",
    "attention._arch_known",
    "attention._arch_attention",
    "attention._cutedsl_mla_prefill",
    "moe._arch_moe",
    "parallel._parallel",
    "hardware._fit",
    "hardware._p2p",
    "stack._driver_floor",
    "model._numeric",
    "model._model",
    "model._override_architecture",
    "serving._security",
    "launch._minimums",
    "launch._combinations",
    "launch._kv_cache_sharding",
    "launch._buckets",
    "serving._watermark",
    "speculative._aux_hidden_states",
    "serving._http_reuseport",
    "serving._http",
    "serving._nvidia_megakernel",
    "serving._grpc",
    "lora._lora",
    "kv_cache._kv_cache",
    "serving._json_args",
    "speculative._speculative_launch",
    "parallel._parallel_launch",
    "parallel._elastic_ep_args",
    "parallel._elastic_ep_deploy",
    "hicache._hicache_host_memory",
    "hicache._hicache",
    "parallel._layernorm_sp",
    "moe._moe_launch",
    "moe._flashinfer_megamoe_model",
    "launch._features",
    "launch._pdmux",
    "launch._int8_mamba_checkpoint",
    "launch._prefill_graph_context",
    "launch._decode_host_receive",
    "launch._platform_gates",
    "launch._pd_disaggregation",
    "lora._lora_moe_runner",
    "lora._experimental_sgl_marlin",
    "lora._lora_init",
    "model._checkpoint_quantization",
    "model._model_features",
    "model._dsa_by_override",
    "model._hisparse_combos",
    "model._encoder_replay",
    "model._cp_decode_attn_tp",
    "model._arch_attention_backends",
    "parallel._two_batch_overlap",
    "kv_cache._mamba_extra_buffer",
    "moe._mori",
    "attention._kv4_attention",
    "parallel._moe_dense_tp",
    "moe._pplx",
    "moe._deepep_v2_budget",
    "kv_cache._chunked_page",
    "moe._megamoe",
    "moe._megamoe_gpu",
    "attention._linear_attn",
    "serving._multi_item_scoring",
    "kv_cache._unified_memory",
    "kv_cache._kv_cache_resolved",
    "moe._moe_kernels",
    "moe._eplb",
    "parallel._parallel_moe_dp",
    "parallel._shared_experts_tp",
    "serving._grpc_threads",
    "stack._force_shutdown",
    "speculative._speculative_shapes",
    "launch._features_catalog",
    "speculative._adaptive_steps",
    "warmup._skip_warmup",
)

_POSITION = {name: i for i, name in enumerate(ORDER)}
RULES.sort(key=lambda item: _POSITION[item.name])


def problem_ids() -> set[str]:
    """Every problem id the validator can report: each rule's declared ids (``{family}`` expanded over the hardware
    profiles) and the validator's own (VALIDATOR_IDS)."""
    families = sorted({p.family for p in PROFILES.values()})
    ids = set(VALIDATOR_IDS)
    for item in RULES:
        ids.add(item.rule_id)
        for pid in item.problem_ids:
            ids.update(pid.replace("{family}", fam) for fam in families)
    return ids
