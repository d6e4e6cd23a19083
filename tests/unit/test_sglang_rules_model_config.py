"""Checks SGLang makes on what the model's config.json holds, decided where the model table knows that config:
the DFLASH block size read from the draft's config (speculative_hook.py:389-430), the unified target that
enable_unified_memory needs for EAGLE (kv_cache_hook.py:608-614), and ModelConfig's MLA branch reading kv_lora_rank
after json_model_override_args renames the architecture (configs/model_config.py:1366-1398).

Each refusal and each accepted neighbour here is probe-confirmed against SGLang 0.5.23 by a case of
tests/conformance/cases.yaml (catalog-dflash-window-*, catalog-unified-memory-*-target / -eagle-llama,
override-arch-mla-*); the first two were the MISSED of issue 36's fuzz runs (seed 0's 2000 fresh cases, seed 7).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_validate import LLAMA, find, llama_host, ref_host, rules

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
GPT_OSS_HOST = {"sglang_model_path": "/models/gpt-oss-120b", "sglang_model_architecture": "GptOssForCausalLM"}


def dflash(**args: Any) -> dict[str, Any]:
    return llama_host({"speculative_algorithm": "DFLASH", "speculative_draft_model_path": LLAMA, **args},
                      sglang_spec="keep")


# --- DFLASH: the block size SGLang reads from the draft's config.json ------------------------------------------


def test_dflash_window_below_the_inferred_block_is_refused() -> None:
    """No num_draft_tokens, no dflash_block_size: SGLang reads the draft's config.json, which for a model-table
    checkpoint names no block size, and takes 16 (speculative_hook.py:414-424); a window of 8 then fails at :430."""
    problem = find(validate_host(dflash(speculative_draft_window_size=8)).errors, "server.speculative")
    assert problem.variable == "sglang_args.speculative_draft_window_size"
    assert "16" in problem.message and "config.json" in problem.message
    assert "speculative_hook.py:430" in (problem.source or "")


@pytest.mark.parametrize("window", [16, 32])
def test_dflash_window_of_the_inferred_block_is_accepted(window: int) -> None:
    assert "server.speculative" not in rules(validate_host(dflash(speculative_draft_window_size=window)))


@pytest.mark.parametrize("override", [{"block_size": 4}, {"dflash_config": {"block_size": 4}}, {"text_config": {}}])
def test_dflash_override_naming_the_block_leaves_it_to_the_preflight(override: dict[str, Any]) -> None:
    """json_model_override_args is merged into the draft's config too (speculative_hook.py:389-404): a block size
    it names (probe: block_size 4 resolves num_draft_tokens 4) is not the table's to decide."""
    result = validate_host(dflash(speculative_draft_window_size=8, json_model_override_args=json.dumps(override)))
    assert "server.speculative" not in rules(result)


def test_dflash_unknown_draft_is_the_preflights() -> None:
    """A draft outside the model table (a real DFLASH draft names its block size): only its config.json tells."""
    result = validate_host(dflash(speculative_draft_window_size=8, speculative_draft_model_path="/models/my-dflash-b8"))
    assert "server.speculative" not in rules(result)


def test_dflash_explicit_block_still_wins() -> None:
    result = validate_host(dflash(speculative_draft_window_size=8, speculative_num_draft_tokens=8))
    assert "server.speculative" not in rules(result)


# --- enable_unified_memory with EAGLE: a unified target ---------------------------------------------------------


@pytest.mark.parametrize(("model", "algorithm"), [(DEEPSEEK, "NEXTN"), (LLAMA, "EAGLE"), (LLAMA, "EAGLE3")])
def test_unified_memory_eagle_on_a_dense_target_is_refused(model: str, algorithm: str) -> None:
    host = llama_host({"enable_unified_memory": True, "speculative_algorithm": algorithm,
                       "speculative_draft_model_path": LLAMA, "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                       "speculative_num_draft_tokens": 4}, sglang_model_path=model, sglang_spec="keep")
    problem = find(validate_host(host).errors, "server.unified_memory")
    assert problem.variable == "sglang_args.speculative_algorithm"
    assert "unified target" in problem.message and "kv_cache_hook.py:610" in (problem.source or "")


def test_unified_memory_nextn_on_a_hybrid_target_is_accepted() -> None:
    host = llama_host({"enable_unified_memory": True, "speculative_algorithm": "NEXTN"}, sglang_model_path=QWEN_NEXT,
                      sglang_spec="keep")
    assert "server.unified_memory" not in rules(validate_host(host))


def test_unified_memory_eagle_on_sliding_window_target_follows_disable_hybrid_swa_memory() -> None:
    """GPT-OSS is hybrid SWA (model_config.py:88-96, :2651-2697) unless disable_hybrid_swa_memory turns the split off
    (:1213-1217)."""
    args = {"enable_unified_memory": True, "speculative_algorithm": "EAGLE3", "speculative_draft_model_path": LLAMA,
            "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    assert "server.unified_memory" not in rules(validate_host(llama_host(args, sglang_spec="keep", **GPT_OSS_HOST)))
    off = validate_host(llama_host({**args, "disable_hybrid_swa_memory": True}, sglang_spec="keep", **GPT_OSS_HOST))
    assert find(off.errors, "server.unified_memory").variable == "sglang_args.speculative_algorithm"


@pytest.mark.parametrize("hostvars", [{"sglang_model_path": "/models/unknown"},
                                      {"sglang_model_path": "/models/x", "sglang_model_architecture": "MyForCausalLM"}])
def test_unified_memory_eagle_on_an_untabled_model_is_the_preflights(hostvars: dict[str, Any]) -> None:
    host = llama_host({"enable_unified_memory": True, "speculative_algorithm": "EAGLE",
                       "speculative_draft_model_path": LLAMA, "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                       "speculative_num_draft_tokens": 4}, sglang_spec="keep", **hostvars)
    assert "server.unified_memory" not in rules(validate_host(host))


def test_unified_memory_target_is_0522_on() -> None:
    """0.5.21 refuses EAGLE with the unified pool at the algorithm (server.unified_memory, kv_cache_hook.py:545)."""
    host = llama_host({"enable_unified_memory": True, "speculative_algorithm": "NEXTN"}, sglang_model_path=DEEPSEEK,
                      sglang_spec="keep", sglang_version="0.5.21")
    problem = find(validate_host(host).errors, "server.unified_memory")
    assert "DSPARK speculative decoding only" in problem.message


# --- json_model_override_args renaming the architecture to an MLA one --------------------------------------------


def arch_override(*names: str, **extra: Any) -> str:
    return json.dumps({"architectures": list(names), **extra})


@pytest.mark.parametrize(("model", "names"), [
    (LLAMA, ("GlmMoeDsaForCausalLM",)),
    (LLAMA, ("DeepseekV3ForCausalLM",)),
    (LLAMA, ("LlamaForCausalLM", "DeepseekV3ForCausalLM")),  # ModelConfig tests every name (`in architectures`)
    (QWEN_NEXT, ("DeepseekV3ForCausalLM",)),
])
def test_override_to_mla_without_kv_lora_rank_is_refused(model: str, names: tuple[str, ...]) -> None:
    host = llama_host({"json_model_override_args": arch_override(*names)}, sglang_model_path=model)
    problem = find(validate_host(host).errors, "model.override_architecture")
    assert problem.variable == "sglang_args.json_model_override_args"
    assert "kv_lora_rank" in problem.message and "model_config.py:1398" in (problem.source or "")


@pytest.mark.parametrize(("model", "override"), [
    (LLAMA, arch_override("DeepseekV3ForCausalLM", kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                          v_head_dim=128)),
    (LLAMA, arch_override("Qwen3ForCausalLM")),
    (DEEPSEEK, arch_override("GlmMoeDsaForCausalLM")),  # an MLA checkpoint has kv_lora_rank
    ("/models/unknown", arch_override("DeepseekV3ForCausalLM")),  # its config.json decides: the preflight's
    (LLAMA, "not json"),
])
def test_override_architecture_neighbours_are_accepted(model: str, override: str) -> None:
    host = llama_host({"json_model_override_args": override}, sglang_model_path=model)
    assert "model.override_architecture" not in rules(validate_host(host))


def test_gigachat_joins_the_mla_list_in_0521() -> None:
    args = {"json_model_override_args": arch_override("GigaChat35ForCausalLM")}
    assert "model.override_architecture" in rules(validate_host(llama_host(args)))
    assert "model.override_architecture" not in rules(validate_host(llama_host(args, sglang_version="0.5.20")))


def test_reference_host_is_untouched() -> None:
    assert "model.override_architecture" not in rules(validate_host(ref_host()))
