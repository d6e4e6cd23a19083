"""KV cache and linear-attention checks behind five MISSED classes of the 10,000-case differential fuzz run
(seed 0, issue 36): an FP4 KV cache in the unified memory pool (kv_cache_hook.py:133), the decode-side KV offload
off a PD decode server (kv_cache_hook.py:401-409), the page-major layout's allow-list of attention backends
(kv_cache_hook.py:822), ReplaySSM where SGLang's SM100 linear-attention decode default may apply
(attention_hook.py:411), and SGLang's default chunked_prefill_size against a large page (validation_hook.py:244),
which the validator decides from the GPUs' memory.

Each refusal and accepted neighbour of the first four is probe-confirmed against SGLang 0.5.23 by a case of
tests/conformance/cases.yaml (fuzzed-fp4-kv-unified-memory, fuzzed-decode-offload-kvcache-*,
fuzzed-unified-memory-*, fuzzed-replayssm-*).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_validate import LLAMA, find, llama_host, rules

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def qwen_next(args: dict[str, Any], **hostvars: Any) -> dict[str, Any]:
    hostvars.setdefault("sglang_model_path", QWEN_NEXT)
    return llama_host({"attention_backend": None, "speculative_algorithm": None, **args}, **hostvars)


# --- an FP4 KV cache in the unified memory pool (kv_cache_hook.py:133) ----------------------------------------------


@pytest.mark.parametrize(("model", "kv", "cc"), [(QWEN_NEXT, "nvfp4", "12.0"), (LLAMA, "nvfp4", "10.3"),
                                                 (QWEN_NEXT, "fp4_mx_block16", "12.0")])
def test_fp4_kv_cache_with_unified_memory_is_refused(model: str, kv: str, cc: str) -> None:
    """(On SM100 Qwen3-Next's override picks triton first, which SGLang refuses for NVFP4 at :53.)"""
    result = validate_host(qwen_next({"enable_unified_memory": True, "kv_cache_dtype": kv},
                                     nvidia_gpu_compute_capability=cc, sglang_model_path=model))
    problem = find(result.errors, "server.kv_cache")
    assert problem.variable == "sglang_args.enable_unified_memory"
    assert "kv_cache_hook.py:133" in (problem.source or "")


@pytest.mark.parametrize("args", [{"enable_unified_memory": True, "kv_cache_dtype": "fp8_e4m3"},
                                  {"kv_cache_dtype": "nvfp4"}])
def test_fp4_kv_cache_neighbours_are_accepted(args: dict[str, Any]) -> None:
    assert "server.kv_cache" not in rules(validate_host(qwen_next(args)))


def test_fp4_kv_cache_with_unified_memory_is_not_checked_in_0_5_20() -> None:
    """handle_kv4_compatibility has no unified-memory check before 0.5.21."""
    host = qwen_next({"enable_unified_memory": True, "kv_cache_dtype": "nvfp4"}, sglang_version="0.5.20")
    assert not any("enable_unified_memory yet" in p.message for p in validate_host(host).errors)


# --- the decode-side KV offload (kv_cache_hook.py:399-413) ----------------------------------------------------------


@pytest.mark.parametrize(("args", "variable", "line"), [
    ({}, "disaggregation_decode_enable_offload_kvcache", "kv_cache_hook.py:401"),
    ({"disaggregation_mode": "prefill"}, "disaggregation_decode_enable_offload_kvcache", "kv_cache_hook.py:401"),
    ({"disaggregation_mode": "decode"}, "hicache_storage_backend", "kv_cache_hook.py:405"),
    ({"disaggregation_mode": "decode", "hicache_storage_backend": "file",
      "disaggregation_decode_retraction_backup": "host_pool"}, "disaggregation_decode_retraction_backup",
     "kv_cache_hook.py:409"),
])
def test_decode_offload_kvcache_is_refused(args: dict[str, Any], variable: str, line: str) -> None:
    host = llama_host({"disaggregation_decode_enable_offload_kvcache": True, **args}, sglang_model_path=DEEPSEEK)
    problem = find(validate_host(host).errors, "server.kv_cache")
    assert problem.variable == f"sglang_args.{variable}"
    assert line in (problem.source or "")


def test_decode_offload_kvcache_0_5_20_cites_its_line() -> None:
    host = llama_host({"disaggregation_decode_enable_offload_kvcache": True}, sglang_version="0.5.20")
    assert "kv_cache_hook.py:174" in (find(validate_host(host).errors, "server.kv_cache").source or "")


@pytest.mark.parametrize("args", [
    {"disaggregation_decode_enable_offload_kvcache": False},
    {"disaggregation_decode_enable_offload_kvcache": True, "disaggregation_mode": "decode",
     "hicache_storage_backend": "file"},
])
def test_decode_offload_kvcache_neighbours_are_accepted(args: dict[str, Any]) -> None:
    assert "server.kv_cache" not in rules(validate_host(llama_host(args)))


# --- the page-major layout's attention backends (kv_cache_hook.py:822) ----------------------------------------------


@pytest.mark.parametrize(("model", "args"), [
    (None, {"attention_backend": "nsa", "device": "xpu"}),
    (None, {"attention_backend": "flex_attention"}),
    (None, {"attention_backend": "triton", "decode_attention_backend": "trtllm_mla"}),
    (DEEPSEEK, {"attention_backend": "fa4"}),
    (DEEPSEEK, {"attention_backend": "trtllm_mha"}),
    ("/models/my-own-model", {"attention_backend": "flex_attention"}),
])
def test_unified_memory_with_a_backend_off_the_page_major_list_is_refused(model: str | None,
                                                                         args: dict[str, Any]) -> None:
    host = llama_host({"enable_unified_memory": True, **args}, **({"sglang_model_path": model} if model else {}))
    problem = find(validate_host(host).errors, "server.unified_memory")
    assert "kv_cache_hook.py:822" in (problem.source or "")


@pytest.mark.parametrize(("model", "args"), [
    (None, {"attention_backend": "triton"}),
    (None, {"attention_backend": "flashinfer"}),
    (None, {"attention_backend": "fa3", "decode_attention_backend": "flashinfer"}),
    (DEEPSEEK, {"attention_backend": "flashmla"}),
    (DEEPSEEK, {"attention_backend": "trtllm_mla"}),
    ("/models/my-own-model", {"attention_backend": "trtllm_mla"}),  # an MLA model may run it: the preflight's
    (None, {"attention_backend": "flex_attention", "enable_unified_memory": False}),
])
def test_unified_memory_page_major_neighbours_are_accepted(model: str | None, args: dict[str, Any]) -> None:
    host = llama_host({"enable_unified_memory": True, **args}, **({"sglang_model_path": model} if model else {}))
    assert not any("per-layer views" in p.message for p in validate_host(host).errors)


def test_unified_memory_tokenspeed_mla_before_0_5_23_is_on_the_list() -> None:
    host = llama_host({"enable_unified_memory": True, "attention_backend": "tokenspeed_mla",
                       "kv_cache_dtype": "fp8_e4m3"}, sglang_model_path=DEEPSEEK, sglang_version="0.5.22")
    assert not any("per-layer views" in p.message for p in validate_host(host).errors)


# --- ReplaySSM's decode backend where SGLang's SM100 default may apply (attention_hook.py:411) ------------------


@pytest.mark.parametrize("prefill", ["flashkda", "ptx_kda"])
def test_replayssm_with_a_base_backend_neither_triton_nor_helion_is_refused_on_sm100(prefill: str) -> None:
    host = qwen_next({"enable_linear_replayssm": True, "linear_attn_backend": "ptx_kda",
                      "linear_attn_prefill_backend": prefill}, nvidia_gpu_compute_capability="10.3")
    problem = find(validate_host(host).errors, "server.linear_attn")
    assert problem.variable == "sglang_args.linear_attn_backend"
    assert "attention_hook.py:411" in (problem.source or "")


@pytest.mark.parametrize("base", ["triton", "flashkda", "helion"])
def test_replayssm_base_backends_that_can_decode_are_left_to_sglangs_default(base: str) -> None:
    """mamba_ssm_dtype unset on SM100: flashinfer (refused) only where the model resolves bfloat16, which the table
    does not know; the base backend (flashkda decodes on triton) passes."""
    host = qwen_next({"enable_linear_replayssm": True, "linear_attn_backend": base,
                      "mamba_radix_cache_strategy": "no_buffer", "disable_overlap_schedule": True},
                     nvidia_gpu_compute_capability="10.3")
    assert not any("enable_linear_replayssm needs the triton" in p.message for p in validate_host(host).errors)


# --- SGLang's default chunked_prefill_size against the page (validation_hook.py:244) ----------------------------


def deepseek_5090(**hostvars: Any) -> dict[str, Any]:
    return llama_host({"page_size": 8192, "attention_backend": None,
                       "speculative_draft_model_path": "tests/conformance/models/DeepSeek-V3"},
                      sglang_model_path=DEEPSEEK, sglang_spec="keep", **hostvars)


def test_default_chunk_by_the_gpus_memory_against_a_page_of_8192_is_refused() -> None:
    """fuzz-0-05034: an RTX 5090 (32607 MiB) gets chunked_prefill_size 4096 (memory_hook.py:146-157), which a page of
    8192 does not divide. The differential harness gives SGLang the GPU's memory but not the validator
    (conformance_support.host_vars), hence the MISSED there; with nvidia_gpu_memory_mib the rule refuses it."""
    problem = find(validate_host(deepseek_5090(nvidia_gpu_memory_mib=32607)).errors, "memory.chunked_page")
    assert "4096" in problem.message and "validation_hook.py:244" in (problem.source or "")


@pytest.mark.parametrize("memory", [None, 97887])
def test_default_chunk_that_may_be_8192_is_accepted(memory: int | None) -> None:
    """An RTX PRO 6000 (97887 MiB) gets 8192; without the memory, SM120 GPUs may get 8192 too."""
    host = deepseek_5090(**({"nvidia_gpu_memory_mib": memory} if memory else {}))
    assert "memory.chunked_page" not in rules(validate_host(host))
