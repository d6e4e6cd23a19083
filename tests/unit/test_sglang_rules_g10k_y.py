"""Rules for two MISSED classes of the fresh 10,000-case differential fuzz run (issue 36), on what the conformance
corpus cannot show: the older releases, the GPU's memory, and the edges of each condition.

The refusals themselves, against SGLang 0.5.23's own argument handling, are cases of tests/conformance/cases.yaml
(``catalog-mega-moe-default-chunk-over-token-budget``, ``catalog-mega-moe-hook-decode-token-budget``,
``catalog-mega-moe-hook-no-chunked-prefill``, ``catalog-sm120-modelopt-fp4-auto-cutlass-ep-size`` and their accepting
neighbours).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_seed0_2000 import LLAMA, QWEN3_NEXT, host, sources

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN35 = "nvidia/Qwen3.5-397B-A17B-NVFP4"
MEGA = "sglang/srt/arg_groups/mega_moe_hook.py:"
ENV = "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK"


def mega_host(args: dict[str, Any], version: str = "0.5.23", model: str = QWEN3_NEXT, cc: str = "10.3",
              gpus: int = 1, mib: int | None = 275040, env: dict[str, str] | None = None) -> dict[str, Any]:
    hostvars = host({"moe_a2a_backend": "megamoe", **args}, version, model=model, cc=cc, gpus=gpus, env=env)
    if mib is not None:
        hostvars["nvidia_gpu_memory_mib"] = mib
    return hostvars


@pytest.mark.parametrize(("version", "line"), [("0.5.21", "181"), ("0.5.22", "181"), ("0.5.23", "241")])
@pytest.mark.parametrize("model", [QWEN3_NEXT, QWEN35])
def test_megamoe_default_chunk_over_budget(version: str, line: str, model: str) -> None:
    """The g10k fuzzer's fuzz-0-01453 / fuzz-0-00413: a B300's default chunk (16384) over the default 8192."""
    assert sources(mega_host({}, version, model=model), "moe.megamoe") == [MEGA + line]


@pytest.mark.parametrize(("args", "kwargs", "refused"), [
    ({}, {"env": {ENV: "16384"}}, False),  # the budget raised
    ({"chunked_prefill_size": 8192}, {}, False),
    ({"chunked_prefill_size": 8192, "tp_size": 3}, {"gpus": 4}, True),  # aligned to tp_size: 8193
    ({}, {"cc": "9.0", "mib": 81559}, False),  # H100: default 8192
    ({}, {"cc": "10.0", "mib": None}, True),  # B200 memory not in the facts: every SM100 GPU defaults to 16384
    ({}, {"cc": "9.0", "mib": None}, False),  # Hopper without the memory: 2048-8192
    ({"tp_size": 2, "attn_dp_size": 2}, {"gpus": 2}, False),  # 16384 // 2 // 2 per rank
    ({"tp_size": 2, "attn_dp_size": 2, "chunked_prefill_size": 40000}, {"gpus": 2}, True),
    ({"disaggregation_mode": "decode"}, {}, False),  # a decode worker skips the prefill budget
    ({"tp_size": 2, "attn_cp_size": 2}, {"gpus": 2}, False),  # prefill CP: not judged
    ({}, {"model": DEEPSEEK, "cc": "10.0", "gpus": 8}, False),  # DeepSeek-V3 FP8 has a fused-MoE fallback
    ({"quantization": "modelopt_fp4"}, {"model": DEEPSEEK, "cc": "10.0", "gpus": 8}, True),  # NVFP4 experts
    ({}, {"model": LLAMA}, False),
])
def test_megamoe_token_budget_edges(args: dict[str, Any], kwargs: dict[str, Any], refused: bool) -> None:
    assert (MEGA + "241" in sources(mega_host(args, **kwargs), "moe.megamoe")) is refused


def test_megamoe_token_budget_before_0_5_21_not_judged() -> None:
    assert not [s for s in sources(mega_host({}, "0.5.20"), "moe.megamoe") if s.startswith(MEGA)]


@pytest.mark.parametrize(("args", "line"), [
    ({"chunked_prefill_size": -1, "disaggregation_mode": "prefill"}, "192"),
    ({"chunked_prefill_size": 3, "tp_size": 2, "attn_dp_size": 2}, "226"),
])
def test_megamoe_chunked_prefill_needed(args: dict[str, Any], line: str) -> None:
    assert sources(mega_host(args, gpus=2), "moe.megamoe") == [MEGA + line]


@pytest.mark.parametrize(("version", "cc", "refused"), [
    ("0.5.23", "12.0", True), ("0.5.20", "12.0", True), ("0.5.23", "12.1", True),
    ("0.5.23", "11.0", True), ("0.5.22", "11.0", True), ("0.5.21", "11.0", False),  # SM110 from 0.5.22
    ("0.5.23", "10.0", False),  # SM100 keeps auto (flashinfer_trtllm)
])
def test_modelopt_fp4_auto_runner_is_cutlass_on_sm120(version: str, cc: str, refused: bool) -> None:
    """The g10k fuzzer's fuzz-0-06747: ep_size 6 with modelopt_fp4 on an RTX 5090."""
    found = sources(host({"quantization": "modelopt_fp4", "ep_size": 6}, version, cc=cc, gpus=4), "server.moe")
    assert any(s.startswith("sglang/srt/arg_groups/moe_hook.py:") for s in found) is refused


@pytest.mark.parametrize("args", [
    {"quantization": "modelopt_fp4", "ep_size": 4, "tp_size": 4},  # ep_size == tp_size
    {"quantization": "modelopt_fp4", "ep_size": 1},
    {"quantization": "modelopt_fp4", "ep_size": 6, "moe_runner_backend": "triton"},  # an explicit runner stays
    {"quantization": "fp8", "ep_size": 6},
])
def test_modelopt_fp4_auto_runner_neighbours(args: dict[str, Any]) -> None:
    found = sources(host(args, cc="12.0", gpus=4), "server.moe")
    assert not any(s.startswith("sglang/srt/arg_groups/moe_hook.py:") for s in found)
