"""The unified memory pool's backend allow-lists that hinge on the attention backends SGLang resolves.

* _validate_unified_memory_dcp (kv_cache_hook.py:751-761): under dcp_size > 1 the full-attention layers run only on
  flashinfer, trtllm_mla or cutedsl_mla; DeepSeek-V3's default MLA backend on an RTX PRO 6000 is triton.
* handle_unified_memory_pool's speculative verify checks (kv_cache_hook.py:500-525, :608-652): EAGLE / NEXTN verify on
  the MHA rails (triton, flashinfer, fa3, trtllm_mha) on an MHA model, the fused draft too; DFLASH on the MHA rails,
  DSPARK on the verify set plus fa4.

Each verdict is probe-confirmed by the ``targeted-kvcache-*`` cases (SGLang 0.5.23).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, QWEN35
from test_sglang_rules_seed0_2000 import host

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
NEXTN = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}
DFLASH = {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": LLAMA}


def unified(hostvars: dict[str, Any]) -> list[Any]:
    return errors(hostvars, "server.unified_memory")


@pytest.mark.parametrize(("args", "refused"), [
    ({}, True),  # targeted-kvcache-18: triton is SGLang's MLA default on SM120
    ({"attention_backend": "flashinfer"}, False),  # targeted-kvcache-19
    ({"attention_backend": "trtllm_mla"}, False),
])
def test_unified_dcp_backends(args: dict[str, Any], refused: bool) -> None:
    hv = host({"tp_size": 8, "enable_unified_memory": True, "dcp_size": 8, **args}, model=DEEPSEEK, cc="12.0")
    problems = unified(hv)
    assert bool(problems) is refused
    if refused:
        assert problems[0].source.endswith("kv_cache_hook.py:754")


@pytest.mark.parametrize(("backend", "refused"), [("fa4", True), ("trtllm_mha", False), ("flashinfer", False)])
def test_unified_dflash_backends(backend: str, refused: bool) -> None:
    hv = host({"tp_size": 1, "enable_unified_memory": True, "attention_backend": backend, **DFLASH}, cc="10.0", gpus=1)
    assert bool(unified(hv)) is refused


def test_unified_dflash_trtllm_mha_older_release_refused() -> None:
    """0.5.22's MHA rails lack trtllm_mha (kv_cache_hook.py:494 there)."""
    hv = host({"tp_size": 1, "enable_unified_memory": True, "attention_backend": "trtllm_mha", **DFLASH},
              version="0.5.22", cc="10.0", gpus=1)
    assert [p.source for p in unified(hv)][0].endswith("kv_cache_hook.py:516")


@pytest.mark.parametrize(("args", "refused"), [
    ({"attention_backend": "fa4"}, True),  # targeted-kvcache-49
    ({}, False),  # targeted-kvcache-48: the Qwen3.5 override picks trtllm_mha
    ({"speculative_draft_attention_backend": "fa4"}, True),  # the fused draft on fa4 (kv_cache_hook.py:634)
])
def test_unified_eagle_backends(args: dict[str, Any], refused: bool) -> None:
    hv = host({"tp_size": 8, "enable_unified_memory": True, **NEXTN, **args}, model=QWEN35, cc="10.0")
    assert bool(unified(hv)) is refused
