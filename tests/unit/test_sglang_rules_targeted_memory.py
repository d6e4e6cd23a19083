"""The targeted set's cases on memory defaults, the platform, the model path and loading, and expert packing
(tests/conformance/targeted-0.5.23.json): the checks that hinge on what SGLang resolves first.

* MegaMoE's decode / verify bound (mega_moe_hook.py:376-388): the decode CUDA graph's max_bs, by GPU memory and
  tp_size when unset (memory_hook.py:88-188), capped by max_running_requests (speculative decoding's default 48,
  speculative_hook.py:1086-1091), times the verify tokens (speculative_num_steps + 1 with topk 1,
  speculative_hook.py:1255-1266). targeted-memory-28 and -30 were MISSED.
* FlashInfer A2A's workspace (moe_hook.py:749-774) with the same speculative decode graph: targeted-memory-38, -40.
* weight caching with speculative decoding (model_path_hook.py:469) is not refused where the aux-hidden-state capture
  resets the algorithm first (validation_hook.py:697-753): targeted-memory-11 was a false alarm.
* SGLANG_USE_MLX on an NVIDIA host (platform_hook.py:30, hardware_backend/mlx/runtime.py:35): targeted-memory-19.
* load_format expert_pack on a model of the table (expert_pack_hook.py:192) and dllm_algorithm on a non-diffusion
  architecture (dllm/config.py:72): targeted-memory-44, -45.

Each verdict is probe-confirmed by the ``targeted-memory-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22 with
release_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from test_sglang_rules_fuzz10k_s3 import errors, with_memory
from test_sglang_rules_fuzz10k_s4 import LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_seed0_2000 import host, rules_context

MEGA = "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK"
NEXTN = {"speculative_algorithm": "NEXTN", "speculative_eagle_topk": 1}


def megamoe_decode(hostvars: dict[str, Any]) -> list[Any]:
    return [p for p in errors(hostvars, "moe.megamoe") if "decode / verify forward" in p.message]


@pytest.mark.parametrize(("extra", "refused"), [
    ({"max_running_requests": 512, "speculative_num_steps": 3}, True),  # targeted-memory-30: 512 x 4 > 1024
    ({"max_running_requests": 256, "speculative_num_steps": 3}, False),  # targeted-memory-29: 256 x 4 = 1024
    ({"speculative_num_steps": 3}, False),  # targeted-memory-16: the speculative default of 48 x 4
    ({"max_running_requests": 512, "speculative_num_steps": 3, "speculative_eagle_topk": 2}, False),  # not settled
    ({"max_running_requests": 512, "speculative_num_steps": 3, "speculative_adaptive": True}, False),
])
def test_megamoe_speculative_decode_bound(extra: dict[str, Any], refused: bool) -> None:
    args = {"tp_size": 4, "moe_a2a_backend": "megamoe", "quantization": "modelopt_fp4", "chunked_prefill_size": 1024,
            **NEXTN, **extra}
    assert bool(megamoe_decode(host(args, model=QWEN35, cc="10.0", env={MEGA: "1024"}))) is refused


@pytest.mark.parametrize(("cc", "mib", "extra", "refused"), [
    ("10.3", None, {}, True),  # targeted-memory-54: every SM103 GPU's default decode graph is 512
    ("10.3", None, {"max_running_requests": 256}, False),  # targeted-memory-55
    ("9.0", None, {}, False),  # targeted-memory-28 without the memory: the least Hopper default is below 256
    ("9.0", 81559, {}, True),  # targeted-memory-28 with it: H100 80 GB, tp 8: 512
    ("9.0", 81559, {"max_running_requests": 128}, False),  # targeted-memory-27
    ("9.0", 81559, {"disaggregation_mode": "prefill"}, False),  # a PD prefill worker runs no decode graph
])
def test_megamoe_decode_bound_by_gpu(cc: str, mib: int | None, extra: dict[str, Any], refused: bool) -> None:
    hostvars = host({"tp_size": 8, "moe_a2a_backend": "megamoe", "chunked_prefill_size": 256, **extra},
                    model=QWEN3_NEXT, cc=cc, env={MEGA: "256"})
    if mib is not None:
        hostvars = with_memory(hostvars, mib)
    assert bool(megamoe_decode(hostvars)) is refused


@pytest.mark.parametrize(("cc", "mib", "steps", "extra", "refused"), [
    ("10.0", None, 8, {"max_running_requests": 2048}, True),  # targeted-memory-53: 512 x 9 > 4096
    ("10.0", None, 7, {"max_running_requests": 2048}, False),  # targeted-memory-52: 512 x 8 = 4096
    ("10.0", None, 31, {}, False),  # targeted-memory-56: 48 // 4 = 12 requests per rank
    ("12.0", 97887, 8, {"max_running_requests": 2048}, True),  # targeted-memory-38, RTX PRO 6000 with its memory
    ("12.0", None, 8, {"max_running_requests": 2048}, False),  # without it: the least SM120 default graph
])
def test_flashinfer_a2a_speculative_decode_graph(cc: str, mib: int | None, steps: int, extra: dict[str, Any],
                                                 refused: bool) -> None:
    args = {"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_cutlass",
            "quantization": "modelopt_fp4", "chunked_prefill_size": 2048, **NEXTN, "speculative_num_steps": steps, **extra}
    hostvars = host(args, model=QWEN35, cc=cc)
    if mib is not None:
        hostvars = with_memory(hostvars, mib)
    budget = [p for p in errors(hostvars, "server.moe") if "FlashInfer MoE A2A dispatches" in p.message]
    assert bool(budget) is refused


@pytest.mark.parametrize(("args", "tokens"), [
    ({}, 1),
    ({"speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 1, "speculative_num_steps": 5,
      "speculative_num_draft_tokens": 3}, 6),  # topk 1: steps + 1 whatever draft tokens say
    ({"speculative_algorithm": "EAGLE", "speculative_num_steps": 5}, None),  # topk not written: not settled
    ({"speculative_algorithm": "NGRAM"}, None),
    ({"speculative_algorithm": "EAGLE3", "enable_return_aux_hidden_states": True}, 1),  # capture only
])
def test_speculative_decode_tokens(args: dict[str, Any], tokens: int | None) -> None:
    assert resolve.speculative_decode_tokens(rules_context(host({"tp_size": 1, **args}, model=LLAMA, cc="12.0"))) == tokens


@pytest.mark.parametrize(("args", "refused"), [
    ({"weight_cache_mode": "client", "enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3"},
     False),  # targeted-memory-11
    ({"weight_cache_mode": "client", "speculative_algorithm": "NGRAM"}, True),  # targeted-memory-14
])
def test_weight_cache_with_capture_only(args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host({"tp_size": 1, **args}, model=LLAMA, cc="12.0"), "server.combination")
             if "weight_cache_mode" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("value", "refused"), [("1", True), ("true", True), ("0", False)])
def test_use_mlx_on_nvidia(version: str, value: str, refused: bool) -> None:
    found = [p for p in errors(host({"tp_size": 1}, version, cc="12.0", env={"SGLANG_USE_MLX": value}),
                               "server.combination") if "SGLANG_USE_MLX" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize(("version", "args", "refused"), [
    ("0.5.23", {"tp_size": 1, "load_format": "expert_pack"}, True),  # targeted-memory-44: Llama is no DeepSeek-V4 / Kimi-K3
    ("0.5.20", {"tp_size": 1, "load_format": "expert_pack"}, True),
    ("0.5.23", {"tp_size": 1}, False),
])
def test_expert_pack_on_the_table_models(version: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host(args, version, cc="12.0"), "server.combination") if "expert_pack" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize(("version", "line"), [("0.5.23", "72"), ("0.5.21", "66"), ("0.5.20", "51")])
def test_dllm_on_a_non_diffusion_model(version: str, line: str) -> None:
    found = [p for p in errors(host({"tp_size": 1, "dllm_algorithm": "LowConfidence"}, version, cc="12.0"),
                               "server.combination") if "dllm_algorithm" in p.message]
    assert [p.source for p in found] == [f"sglang/srt/dllm/config.py:{line}"]
