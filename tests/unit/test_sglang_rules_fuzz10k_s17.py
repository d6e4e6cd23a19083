"""What the 10,000-case differential fuzz run of seed 17 (``differential.py --cases 10000 --seed 17``, the generator
with RESOLUTION_CONTEXTS) found: one false alarm, fuzz-17-03739.

ReplaySSM refuses the extra_buffer mamba strategy through mamba_extra_buffer_of (attention_hook.py:417-418; 0.5.22
:416, 0.5.21 :328, 0.5.20 :331), which is false while the radix cache is off. handle_deterministic_inference turns it
off (attention_hook.py:656-665) before handle_linear_attn_backend runs (pipeline.py:240, :253; the same order in
0.5.20-0.5.22) on every backend but ascend, fa3, fa4 and triton, the flashinfer fill of an unset backend on SM100 /
SM120 among them. server.linear_attn read the resolved strategy alone and refused Qwen3-Next with deterministic
inference. resolve.deterministic_radix_off now says what cache_radix_off already knew, and the ReplaySSM check waits
for a radix cache certainly kept.

Each verdict is probe-confirmed on 0.5.20-0.5.23 by the replayssm-deterministic-* / replayssm-rl-on-policy-* cases
in tests/conformance/cases.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import deterministic_radix_off
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_seed0_2000 import host, rules_context

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
QWEN35 = "nvidia/Qwen3.5-397B-A17B-NVFP4"
VERSIONS = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]


@pytest.mark.parametrize(("args", "cc", "off"), [
    ({}, "12.0", False),  # no deterministic inference
    ({"enable_deterministic_inference": True}, "12.0", True),  # the flashinfer fill
    ({"rl_on_policy_target": "fsdp"}, "12.0", True),
    ({"enable_deterministic_inference": True, "attention_backend": "flashinfer"}, "12.0", True),
    ({"enable_deterministic_inference": True, "attention_backend": "triton"}, "12.0", False),
    ({"enable_deterministic_inference": True}, "9.0", False),  # the fa3 fill
    ({"enable_deterministic_inference": True, "attention_backend": "trtllm_mha"}, "12.0", None),  # refused before
])
def test_deterministic_radix_off(args: dict[str, Any], cc: str, off: bool | None) -> None:
    assert deterministic_radix_off(rules_context(host(args, model=QWEN3_NEXT, cc=cc, gpus=2))) is off


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("model", "cc", "gpus", "args", "refused"), [
    (QWEN3_NEXT, "12.0", 2, {"enable_deterministic_inference": True, "linear_attn_decode_backend": "triton"}, False),
    (QWEN3_NEXT, "12.0", 2, {"enable_deterministic_inference": True, "attention_backend": "flashinfer"}, False),
    (QWEN3_NEXT, "12.0", 2, {"rl_on_policy_target": "fsdp"}, False),
    (QWEN3_NEXT, "12.0", 2, {"enable_deterministic_inference": True, "attention_backend": "triton"}, True),
    (QWEN3_NEXT, "9.0", 2, {"enable_deterministic_inference": True}, True),
    (QWEN3_NEXT, "12.0", 2, {}, True),  # the radix cache on: the seed-0 fuzzer's MISSED stays refused
    (QWEN35, "10.0", 8, {"tp_size": 8, "enable_deterministic_inference": True}, True),  # the SM100 override's triton
])
def test_replayssm_strategy_beside_deterministic_inference(version: str, model: str, cc: str, gpus: int,
                                                          args: dict[str, Any], refused: bool) -> None:
    hostvars = host({**args, "enable_linear_replayssm": True}, version, model=model, cc=cc, gpus=gpus)
    found = [p for p in errors(hostvars, "server.linear_attn") if p.variable == "sglang_args.mamba_radix_cache_strategy"]
    assert bool(found) is refused, found
