"""What grids over the arguments of SGLang's FP4 KV-cache hooks found (issue 36, stop 59).

A grid of kv_cache_dtype (nvfp4, fp4_mx_block16) x prefill_kv_cache_dequant_dtype x prefill_attention_backend x
decode_attention_backend x profile x model (3,456 configurations, with speculative and feature grids: 6,720 probed on
0.5.23) found 12 MISSED, all one check. handle_kv4_compatibility compares the resolved pair of backends
(attention_backends_of, model_override_base.py:138-152: an unset side reads the shared attention_backend), and the
shared backend is filled with SGLang's default whatever one side says (_attention_backend_default,
overrides.py:1127-1140). So ``decode_attention_backend: flashinfer`` alone on an RTX PRO 6000 is the pair flashinfer /
flashinfer for Llama, and an FP4 cache refuses it (kv_cache_hook.py:313; an MLA model's triton at :302). The rule had
filled the default only where neither side was set (and, on 0.5.20, next to an explicit decode side).

Each verdict is probe-confirmed on 0.5.20-0.5.23 by the grid-kv4-* cases in tests/conformance/cases.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_seed0_2000 import host

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
VERSIONS = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]
FP4 = {"kv_cache_dtype": "fp4_mx_block16"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("model", "cc", "gpus", "args", "refused"), [
    # One side equal to SGLang's default there: the pair is that backend, outside the FP4 cache's list.
    (LLAMA, "12.0", 8, {"decode_attention_backend": "flashinfer"}, True),  # gA-01765
    (LLAMA, "12.0", 8, {"prefill_attention_backend": "flashinfer"}, True),  # gA-01829
    (LLAMA, "12.1", 1, {"prefill_attention_backend": "flashinfer"}, True),  # gA-01833
    (QWEN3_NEXT, "12.0", 8, {"decode_attention_backend": "flashinfer"}, True),  # gA-01766
    (DEEPSEEK, "12.0", 8, {"decode_attention_backend": "triton"}, True),  # gA-01780
    (DEEPSEEK, "12.0", 8, {"prefill_attention_backend": "triton"}, True),  # gA-02116
    # One side other than the default: a mixed pair, which SGLang only warns about (kv_cache_hook.py:262-274).
    (LLAMA, "12.0", 8, {"decode_attention_backend": "triton"}, False),
    (LLAMA, "12.0", 8, {"prefill_attention_backend": "triton"}, False),
    (DEEPSEEK, "12.0", 8, {"decode_attention_backend": "flashinfer"}, False),
    (DEEPSEEK, "12.1", 1, {"prefill_attention_backend": "flashinfer"}, False),
    (LLAMA, "10.0", 8, {"decode_attention_backend": "flashinfer"}, False),  # the default is trtllm_mha on a B200
    (LLAMA, "10.0", 8, {"prefill_attention_backend": "flashinfer"}, False),
    # Equal to the default and in the list: accepted.
    (LLAMA, "10.0", 8, {"decode_attention_backend": "trtllm_mha"}, False),
    # The way out the message names: a shared backend from the list next to the explicit side.
    (LLAMA, "12.0", 8, {"decode_attention_backend": "flashinfer", "attention_backend": "triton"}, False),
])
def test_one_side_pairs_with_the_filled_default(version: str, model: str, cc: str, gpus: int, args: dict[str, Any],
                                                refused: bool) -> None:
    found = errors(host({"tp_size": gpus, **FP4, **args}, version, model=model, cc=cc, gpus=gpus), "kv4.attention")
    assert bool(found) is refused
    if refused:
        side = next(iter(args)).removesuffix("_attention_backend")
        assert f"the {side}_attention_backend you set is the same" in found[0].message
        assert found[0].variable == "sglang_args.kv_cache_dtype"


@pytest.mark.parametrize("version", VERSIONS)
def test_fa4_prefill_still_reads_the_resolved_decode(version: str) -> None:
    """FA4 prefill alone: the decode side is SGLang's default, flashinfer on an RTX PRO 6000, refused (:292)."""
    found = errors(host({"tp_size": 8, **FP4, "prefill_attention_backend": "fa4"}, version, cc="12.0"), "kv4.attention")
    assert len(found) == 1 and "it would be 'flashinfer' (SGLang's default here: the key is unset)" in found[0].message


@pytest.mark.parametrize("version", VERSIONS)
def test_trtllm_mla_decode_with_an_fp4_cache(version: str) -> None:
    """The TRTLLM MLA KV-cache check reads the explicit decode side (overrides.py:1214-1217); prefill trtllm_mla next to
    the default decode side is accepted: SGLang's default for DeepSeek with an FP4 cache on a B200 is not trtllm_mla."""
    decode = errors(host({"tp_size": 8, **FP4, "decode_attention_backend": "trtllm_mla"}, version, model=DEEPSEEK),
                    "kv4.attention")
    prefill = errors(host({"tp_size": 8, **FP4, "prefill_attention_backend": "trtllm_mla"}, version, model=DEEPSEEK),
                     "kv4.attention")
    assert len(decode) == 1 and "TRTLLM MLA" in decode[0].message
    assert prefill == []
