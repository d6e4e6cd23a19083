"""Checks the validator now decides itself, found while confirming the `preflight`-mapped catalog entries against
the real preflight (issue 36) and by `make conformance-all` on the older releases: each is decidable from the flags
or the model table, so it is a rule, with its release range. Every refusal and neighbour is probe-confirmed by a
case of tests/conformance/cases.yaml (catalog-int8-mamba-checkpoint-*, catalog-cuda-graph-prefill-max-context-*,
catalog-deepseek-mla-prefill-cp-moe-dp, decode-host-receive-threshold-one-accepted)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_validate import find, llama_host, rules

QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"


# --- handle_int8_mamba_checkpoint runs for every model (mamba_hook.py:75-98) -------------------------------------


@pytest.mark.parametrize(("extra", "dest", "version"), [
    ({"enable_hierarchical_cache": True}, "enable_hierarchical_cache", "0.5.20"),
    ({"radix_cache_backend": "lmcache"}, "radix_cache_backend", "0.5.23"),
    ({"enable_lmcache": True}, "enable_lmcache", "0.5.21"),
])
def test_int8_mamba_checkpoint_refusals(extra: dict[str, Any], dest: str, version: str) -> None:
    host = llama_host({"tp_size": 8, "enable_int8_mamba_checkpoint": True, **extra}, sglang_model_path=QWEN_NEXT,
                      sglang_version=version)
    problem = find(validate_host(host).errors, "server.mamba_checkpoint")
    assert problem.variable == f"sglang_args.{dest}" and "mamba_hook.py" in (problem.source or "")


def test_int8_mamba_checkpoint_lmcache_is_0521_on_and_alone_accepted() -> None:
    old = llama_host({"tp_size": 8, "enable_int8_mamba_checkpoint": True, "enable_lmcache": True},
                     sglang_model_path=QWEN_NEXT, sglang_version="0.5.20")
    assert "server.mamba_checkpoint" not in rules(validate_host(old))
    alone = llama_host({"tp_size": 8, "enable_int8_mamba_checkpoint": True}, sglang_model_path=QWEN_NEXT)
    assert "server.mamba_checkpoint" not in rules(validate_host(alone))


# --- the prefill CUDA graphs' max context within the model's (cuda_graph_hook.py:423-445) ---------------------------


@pytest.mark.parametrize(("args", "refused"), [
    ({"cuda_graph_prefill_max_context": 200000}, True),  # Llama 3.1: 131072
    ({"cuda_graph_prefill_max_context": 131072}, False),
    ({"cuda_graph_prefill_max_context": 131000, "page_size": 64}, False),  # aligned up: 131008
    ({"cuda_graph_prefill_max_context": 131100, "page_size": 64}, True),  # aligned up: 131136
    ({"cuda_graph_prefill_max_context": 9000, "context_length": 8192}, True),  # context_length is the model's then
])
def test_prefill_graph_context_against_the_model(args: dict[str, Any], refused: bool) -> None:
    found = [p for p in validate_host(llama_host(args)).errors if p.variable == "sglang_args.cuda_graph_prefill_max_context"]
    assert bool(found) is refused
    if refused:
        assert "cuda_graph_hook.py:435" in (found[0].source or "")


def test_prefill_graph_context_of_an_unknown_model_is_the_preflights() -> None:
    host = llama_host({"cuda_graph_prefill_max_context": 10**7}, sglang_model_path="/models/unknown")
    assert "sglang_args.cuda_graph_prefill_max_context" not in [p.variable for p in validate_host(host).errors]


# --- releases' own edges (make conformance-all) ---------------------------------------------------------------------


@pytest.mark.parametrize(("version", "refused"), [("0.5.21", True), ("0.5.22", False), ("0.5.23", False)])
def test_decode_host_receive_threshold_turns_host_pool_on_in_0521_only(version: str, refused: bool) -> None:
    host = llama_host({"disaggregation_decode_host_receive_threshold": 1.0}, sglang_model_path=QWEN_NEXT,
                      sglang_version=version)
    found = [p for p in validate_host(host).errors if p.variable == "sglang_args.disaggregation_decode_host_receive_threshold"]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_mla_prefill_cp_with_moe_dp_is_refused_in_every_release(version: str) -> None:
    """MLA prefill CP sets ep_size to tp_size in every release (deepseek_v2.py), so moe_dp_size > 1 breaks
    ep_size x moe_dp_size <= tp_size; before this, 0.5.20 and 0.5.21 let it through."""
    host = llama_host({"tp_size": 8, "attn_cp_size": 8, "moe_dp_size": 8, "enable_prefill_cp": True,
                       "cp_strategy": "interleave"}, sglang_model_path=DEEPSEEK, sglang_version=version)
    assert find(validate_host(host).errors, "server.parallel").variable == "sglang_args.ep_size"
