"""The architecture every rule reads is the one SGLang keys its checks on: config.json's ``architectures[0]`` after
json_model_override_args is merged into it (sglang/srt/utils/hf_transformers/config.py:405-415,
arg_groups/model_hook.py:167). ``sglang_rules.base.model_after_overrides`` computes it once and ``run_rules``
publishes it as ``ctx.model``; these tests show an override of ``architectures`` turning the verdicts of two
different rules (server.combination's encoder disaggregation, server.moe's DeepEP v2 table) the way SGLang 0.5.23
turns them (probe-confirmed: the catalog-override-arch-* cases of tests/conformance/cases.yaml).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import lookup_model
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import model_after_overrides
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_validate import LLAMA, SCHEMA, find, llama_host, ref_host, rules

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
BUDGET = {"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "65536"}  # past moe_hook.py:688's buffer check


def override(architecture: str) -> str:
    return json.dumps({"architectures": [architecture]})


def deepep_v2(model: str, **args: Any) -> dict[str, Any]:
    return llama_host({"moe_a2a_backend": "deepep_v2", "tp_size": 8, "ep_size": 8, **args}, sglang_model_path=model,
                      sglang_env=BUDGET, nvidia_gpu_compute_capability="10.0", sglang_spec="off")


class _Ctx:
    """The two things model_after_overrides reads of a validation context."""

    def __init__(self, model: str, args: dict[str, Any]) -> None:
        self.model = lookup_model(model)
        self.args = args


# --- server.combination: encoder disaggregation serves the architectures SGLang lists --------------------------


def test_encoder_only_follows_an_architecture_override_to_a_refusal() -> None:
    """pd_disaggregation_hook.py:372: the Qwen3.5 checkpoint served as LlamaForCausalLM is not an encoder
    disaggregation model (SGLang: ValueError 'Model type LlamaForCausalLM is not supported'); before, the rule read
    the checkpoint's Qwen3.5 architecture and let it through (MISSED)."""
    assert "server.combination" not in rules(validate_host(ref_host({"encoder_only": True})))
    result = validate_host(ref_host({"encoder_only": True, "json_model_override_args": override("LlamaForCausalLM")}))
    problem = find(result.errors, "server.combination")
    assert problem.variable == "sglang_args.encoder_only"
    assert "LlamaForCausalLM" in problem.message and "pd_disaggregation_hook.py:372" in (problem.source or "")


def test_language_only_follows_an_architecture_override_to_an_acceptance() -> None:
    """The Llama checkpoint served as Qwen3_5MoeForConditionalGeneration: SGLang accepts language_only; before,
    the rule read LlamaForCausalLM and refused (STRICTER-UNEXPLAINED)."""
    assert find(validate_host(llama_host({"language_only": True})).errors, "server.combination").variable == \
        "sglang_args.language_only"
    result = validate_host(llama_host({"language_only": True,
                                       "json_model_override_args": override("Qwen3_5MoeForConditionalGeneration")}))
    assert "server.combination" not in rules(result)


# --- server.moe: DeepEP v2 runs the architectures of moe_model_registry.py ----------------------------------------


def test_deepep_v2_follows_an_architecture_override_to_a_refusal() -> None:
    """moe_hook.py:723-731: DeepSeek-V3 served as Qwen3NextForCausalLM is not a DeepEP v2 model; before, the rule
    read DeepseekV3ForCausalLM, which is (MISSED)."""
    assert rules(validate_host(deepep_v2(DEEPSEEK))) == []
    result = validate_host(deepep_v2(DEEPSEEK, json_model_override_args=override("Qwen3NextForCausalLM")))
    problem = find(result.errors, "server.moe")
    assert problem.variable == "sglang_args.moe_a2a_backend" and "Qwen3NextForCausalLM" in problem.message


def test_deepep_v2_follows_an_architecture_override_to_an_acceptance() -> None:
    """Qwen3-Next served as Qwen3MoeForCausalLM, a DeepEP v2 model: SGLang accepts; before, refused."""
    assert "server.moe" in rules(validate_host(deepep_v2(QWEN_NEXT)))
    assert rules(validate_host(deepep_v2(QWEN_NEXT, json_model_override_args=override("Qwen3MoeForCausalLM")))) == []


# --- the one published value --------------------------------------------------------------------------------------


def test_the_facts_of_the_architecture_follow_it_and_the_checkpoints_stay() -> None:
    before = lookup_model(DEEPSEEK)
    after = model_after_overrides(_Ctx(DEEPSEEK, {"json_model_override_args": override("LlamaForCausalLM")}))
    assert (after.architecture, after.family, after.mla, after.moe, after.spec_auto) == \
        ("LlamaForCausalLM", "llama", False, False, (5, 4, 8))
    assert (after.quantization, after.quant_method, after.max_context, after.rope_scaling, after.weight_bytes,
            after.text_config, after.known, after.path) == \
        (before.quantization, before.quant_method, before.max_context, before.rope_scaling, before.weight_bytes,
         before.text_config, before.known, before.path)
    outside = model_after_overrides(_Ctx(DEEPSEEK, {"json_model_override_args": override("KimiK3ForConditionalGeneration")}))
    assert (outside.architecture, outside.family, outside.mla, outside.moe) == \
        ("KimiK3ForConditionalGeneration", "unknown", False, None)  # not in the table: nothing assumed


@pytest.mark.parametrize("value", [
    None, "", "not json", "[]", "{}", '{"architectures": []}', '{"architectures": "LlamaForCausalLM"}',
    '{"architectures": [7]}', '{"text_config": {"architectures": ["LlamaForCausalLM"]}}',
    '{"architectures": ["DeepseekV3ForCausalLM"]}',
])
def test_no_architecture_override_leaves_the_declared_model(value: str | None) -> None:
    ctx = _Ctx(DEEPSEEK, {} if value is None else {"json_model_override_args": value})
    assert model_after_overrides(ctx) is ctx.model  # type: ignore[arg-type]


def test_the_result_reports_the_declared_model_and_the_rules_see_the_override() -> None:
    """result.model stays what the host declared (the facts' source); every rule reads the overridden one, the
    ple_offload_backend check of Qwen4-Exp (memory_hook.py:41) included."""
    host = llama_host({"ple_offload_backend": "file", "dtype": "float16",
                       "json_model_override_args": override("Qwen4ExpForConditionalGeneration")})
    result = validate_host(host)
    assert result.model is not None and result.model.architecture == "LlamaForCausalLM"
    assert find(result.errors, "server.combination").variable == "sglang_args.ple_offload_backend"
    assert SCHEMA.version == "0.5.23" and LLAMA.endswith("Llama-3.1-8B-Instruct")
