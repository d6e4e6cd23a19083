"""Rules found by the catalog-driven fuzzer (issue 36): switches SGLang gates on the model's architecture, DFLASH's
draft model and encoder disaggregation, on what the conformance corpus cannot show (no fixture is a DSA,
DeepSeek-V4, MiniMax M3 or Muse Spark model, and the corpus runs 0.5.23 only).

The refusals themselves, against SGLang 0.5.23's own argument handling, are cases of tests/conformance/cases.yaml
(``fuzzed-dflash-without-draft-model``, ``fuzzed-hisparse-on-llama``, ``catalog-encoder-only-on-llama``...).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def host(args: dict[str, Any], version: str = "0.5.23", model: str = LLAMA, **hostvars: Any) -> dict[str, Any]:
    """One SM100 GPU (no architecture profile refuses what these tests look at) serving ``model``."""
    return {"sglang_version": version, "sglang_model_path": model, "nvidia_gpu_count": 1,
            "nvidia_gpu_compute_capability": "10.0", "sglang_args": dict(args), **hostvars}


def refusals(hostvars: dict[str, Any], rule: str) -> list[str]:
    """The sources of ``rule``'s errors."""
    return [p.source or "" for p in validate_host(hostvars).errors if p.rule == rule]


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_dflash_needs_a_draft_model_in_every_release(version: str) -> None:
    assert refusals(host({"speculative_algorithm": "DFLASH"}, version), "server.speculative") == [
        "sglang/srt/arg_groups/speculative_hook.py:325"]
    drafted = host({"speculative_algorithm": "DFLASH", "speculative_draft_model_path": "org/dflash-draft"}, version)
    assert not [s for s in refusals(drafted, "server.speculative") if s.endswith(":325")]


@pytest.mark.parametrize(("architecture", "version", "refused"), [
    ("LlamaForCausalLM", "0.5.20", True),
    ("Qwen3NextForCausalLM", "0.5.23", True),
    ("DeepseekV32ForCausalLM", "0.5.23", False),  # a DSA architecture: index_topk in config.json decides (preflight)
    ("GlmMoeDsaForCausalLM", "0.5.23", False),
    ("DeepseekV4ForCausalLM", "0.5.20", False),  # DeepSeek-V4 runs HiSparse in every release
    ("MiniMaxM3SparseForCausalLM", "0.5.23", False),
    ("MiniMaxM3SparseForCausalLM", "0.5.21", False),
    ("MiniMaxM3SparseForCausalLM", "0.5.20", True),  # is_minimax_sparse is new in 0.5.21
])
def test_hisparse_by_architecture(architecture: str, version: str, refused: bool) -> None:
    hostvars = host({"enable_hisparse": True, "disable_radix_cache": True}, version, model="/models/custom",
                    sglang_model_architecture=architecture)
    sources = refusals(hostvars, "server.model_features")
    assert bool(sources) is refused
    assert all(s.startswith("sglang/srt/arg_groups/hisparse_hook.py:104") for s in sources)


def test_dsa_switches_on_the_table_deepseek_v3_but_not_on_an_undeclared_checkpoint() -> None:
    """DeepSeek-V3 / R1 of the model table carry no index_topk: not DSA models for SGLang. Another checkpoint of
    the same architecture may (DeepSeek-V3.2 variants): the preflight decides it."""
    args = {"enable_dsa_cache_layer_split": True}
    assert refusals(host(args, model="deepseek-ai/DeepSeek-R1"), "server.model_features") == [
        "sglang/srt/arg_groups/model_hook.py:188 (0.5.22 :188, 0.5.21 :179, 0.5.20 :125)"]
    custom = host(args, model="/models/my-dsa", sglang_model_architecture="DeepseekV3ForCausalLM")
    assert refusals(custom, "server.model_features") == []


def test_an_unknown_model_is_left_to_the_preflight() -> None:
    args = {"enable_hisparse": True, "enable_dsa_cache_layer_split": True, "enable_encoder_swa_bounded_replay": True,
            "language_only": True}
    unknown = host(args, model="/models/something-else")
    assert refusals(unknown, "server.model_features") == []
    assert not [s for s in refusals(unknown, "server.combination") if "pd_disaggregation_hook" in s]


@pytest.mark.parametrize(("architecture", "version", "refused"), [
    ("LlamaForCausalLM", "0.5.23", True),
    ("DeepseekV4ForCausalLM", "0.5.23", False),  # V4.1 is a DeepseekV4ForCausalLM of model_type deepseek_v41
    ("LlamaForCausalLM", "0.5.22", False),  # 0.5.21 and 0.5.22 refuse it on DeepSeek-V4 models only
])
def test_encoder_swa_bounded_replay(architecture: str, version: str, refused: bool) -> None:
    hostvars = host({"enable_encoder_swa_bounded_replay": True}, version, model="/models/custom",
                    sglang_model_architecture=architecture)
    assert bool(refusals(hostvars, "server.model_features")) is refused


@pytest.mark.parametrize(("architecture", "version", "refused"), [
    ("Qwen3_5MoeForConditionalGeneration", "0.5.20", False),
    ("LlamaForCausalLM", "0.5.23", True),
    ("MuseSparkForConditionalGeneration", "0.5.23", False),
    ("MuseSparkForConditionalGeneration", "0.5.22", True),  # listed from 0.5.23 on
])
def test_encoder_disaggregation_architectures(architecture: str, version: str, refused: bool) -> None:
    hostvars = host({"encoder_only": True}, version, model="/models/custom", sglang_model_architecture=architecture)
    sources = [s for s in refusals(hostvars, "server.combination") if "pd_disaggregation_hook" in s]
    assert bool(sources) is refused


@pytest.mark.parametrize(("args", "line"), [
    ({"enable_prefix_mm_cache": True}, 306),
    ({"encoder_only": True, "language_only": True}, 310),
    ({"encoder_only": True, "disaggregation_mode": "decode"}, 312),
])
def test_encoder_disaggregation_pairs(args: dict[str, Any], line: int) -> None:
    hostvars = host(args, model="nvidia/Qwen3.5-397B-A17B-NVFP4")
    assert refusals(hostvars, "server.combination") == [f"sglang/srt/arg_groups/pd_disaggregation_hook.py:{line}"]


def test_language_model_only_is_refused_first() -> None:
    """handle_language_model_only runs before the encoder checks (pd_disaggregation_hook.py:304)."""
    hostvars = host({"language_model_only": True, "encoder_only": True, "language_only": True},
                    model="nvidia/Qwen3.5-397B-A17B-NVFP4")
    assert refusals(hostvars, "server.combination") == ["sglang/srt/arg_groups/model_hook.py:1094"]


@pytest.mark.parametrize(("model", "version", "refused"), [
    ("/models/custom-dsa", "0.5.23", False),  # DeepseekV3ForCausalLM with maybe index_topk: DSA CP may keep it (preflight)
    # 0.5.20 / 0.5.21 derive attn_cp_size = tp_size // dp_size and ep_size = tp_size (deepseek_v2.py:156-179 in
    # 0.5.21), and their resolvers refuse the case too (make conformance-all, issue 36)
    ("deepseek-ai/DeepSeek-V3", "0.5.21", True),
    # 0.5.22's override derives the same sizes and its resolver refuses the case (make conformance-release)
    ("deepseek-ai/DeepSeek-V3", "0.5.22", True),
    ("deepseek-ai/DeepSeek-V3", "0.5.23", True),  # MLA prefill CP: ep_size = tp_size, so moe_dp_size 8 breaks :175
])
def test_deepseek_prefill_cp_sizes(model: str, version: str, refused: bool) -> None:
    """handle_context_parallelism checks the sizes the DeepSeek-family override derived (deepseek_v2.py:106-142,
    :191-212), not the host's; an explicit attn_cp_size the override replaces is never refused."""
    args = {"tp_size": 8, "attn_cp_size": 8, "moe_dp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave"}
    hostvars = host(args, version, model=model, sglang_model_architecture="DeepseekV3ForCausalLM", nvidia_gpu_count=8)
    assert bool(refusals(hostvars, "server.parallel")) is refused
    odd = host({"attn_cp_size": 5, "enable_prefill_cp": True, "cp_strategy": "interleave"}, version, model=model,
               sglang_model_architecture="DeepseekV3ForCausalLM", nvidia_gpu_count=2)
    assert refusals(odd, "server.parallel") == []
