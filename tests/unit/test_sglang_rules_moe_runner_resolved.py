"""The MoE runner as SGLang's checks read it after the model overrides (resolve.resolved_moe_runner).

On SM100 (B200 / B300) the Qwen3 MoE family's and the DeepSeek family's model overrides put flashinfer_trtllm in for
an unset moe_runner_backend when no A2A backend is set and the quantization is one the TRT-LLM runner runs
(model_overrides/qwen3_moe.py:38-90; _deepseek_moe_quant_resolution, overrides.py:763-842), in
handle_model_specific_adjustments (pipeline.py:225), before handle_moe_kernel_config (:294), handle_a2a_moe (:295),
layernorm SP (:315) and check_server_args' LoRA checks read it. The resolver differential showed our resolver's "auto"
against SGLang's flashinfer_trtllm in 411 cases (fuzz-5-00257, fuzz-5-00313, fuzz-5-00455). No check refuses
differently for it (the TRT-LLM runner's quantization assert, moe_hook.py:123-135, takes every quantization the
overrides pick it under; the A2A blocks see none; the LoRA checks test a lora_* prefix or experimental_sgl_trtllm;
layernorm SP's runner check is Muse Spark's): the resolver now gives the runner the checks see, and the resolution gate
claims it (tests/conformance/resolution.py _moe_runner).

Each value is probe-confirmed by the ``moe-runner-resolved-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; the
verdicts on 0.5.20-0.5.22 too).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host, rules_context

LORA = {"enable_lora": True, "max_lora_rank": 16, "lora_target_modules": ["q_proj"]}


def _ctx(model: str, cc: str, args: dict[str, Any], version: str = "0.5.23") -> Any:
    return rules_context(host(args, version, model=model, cc=cc))


@pytest.mark.parametrize(("model", "cc", "args", "runner"), [
    (QWEN3_NEXT, "10.3", {"tp_size": 2}, "flashinfer_trtllm"),  # fuzz-5-00257
    (DEEPSEEK, "10.0", {"tp_size": 2}, "flashinfer_trtllm"),  # fuzz-5-00313: the checkpoint's fp8
    (QWEN35, "10.3", {"tp_size": 8, "ep_size": 16}, "flashinfer_trtllm"),  # fuzz-5-00455: modelopt_fp4
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "quantization": "fp8"}, "flashinfer_trtllm"),
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "quantization": "unquant"}, "flashinfer_trtllm"),  # none: bf16
    (QWEN3_NEXT, "10.3", {"tp_size": 2, "quantization": "w8a8_fp8"}, "auto"),  # not a TRT-LLM quantization
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "quantization": "nvfp4_online"}, "flashinfer_trtllm"),  # overrides.py:1462
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "enable_waterfill": True}, "flashinfer_trtllm"),  # deepep comes after
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "dwdp_size": 2, "moe_a2a_backend": "flashinfer"}, "flashinfer_trtllm"),
    (QWEN35, "10.0", {"tp_size": 8, "moe_a2a_backend": "deepep"}, "auto"),  # an A2A backend: no override
    (DEEPSEEK, "10.3", {"tp_size": 8, "moe_a2a_backend": "ascend_tp"}, "auto"),  # reset to none only afterwards
    (DEEPSEEK, "10.0", {"tp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave"}, "auto"),  # MLA CP deepep
    (QWEN3_NEXT, "10.3", {"tp_size": 2, "moe_runner_backend": "megamoe"}, "auto"),  # megamoe is the A2A backend
    (QWEN35, "10.0", {"tp_size": 8, "json_model_override_args": '{"architectures": ["Qwen3_5MoeForCausalLM"]}'},
     "auto"),  # an architecture no override serves
    (QWEN35, "12.0", {"tp_size": 8, "quantization": "modelopt_fp4"}, "flashinfer_cutlass"),  # SM120's replacement
    (QWEN35, "12.0", {"tp_size": 8}, "auto"),  # SM100 only
    (LLAMA, "10.0", {}, "auto"),
    (QWEN3_NEXT, "10.0", {"tp_size": 2, **LORA, "moe_runner_backend": "lora_triton"}, "lora_triton"),  # as written
    (QWEN35, "10.0", {"tp_size": 8, "quantization": "modelopt_mixed"}, None),  # marlin for W4A16 layers: not known
    (DEEPSEEK, "10.0", {"tp_size": 8, "quantization": "compressed-tensors"}, None),  # Kimi K2.5 int4: the checkpoint's
    (DEEPSEEK, None, {"tp_size": 8}, None),  # the GPU not known
])
def test_resolved_moe_runner(model: str, cc: str | None, args: dict[str, Any], runner: str | None) -> None:
    assert resolve.resolved_moe_runner(_ctx(model, cc, args)) == runner  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ALL)
def test_override_the_same_in_every_release(version: str) -> None:
    """The overrides' conditions are the same in 0.5.20-0.5.22 (qwen3_moe.py:76-89 there; overrides.py:817 in 0.5.20)."""
    assert resolve.resolved_moe_runner(_ctx(QWEN3_NEXT, "10.0", {"tp_size": 2}, version)) == "flashinfer_trtllm"
    assert resolve.resolved_moe_runner(_ctx(DEEPSEEK, "10.3", {"tp_size": 8}, version)) == "flashinfer_trtllm"


# --- the checks reading the runner after the overrides: the same verdict for flashinfer_trtllm as for auto ---------

@pytest.mark.parametrize(("model", "cc", "args", "rule"), [
    # LoRA's triton_v2 modes (lora_hook.py:51, :20-30): the runner is no lora_* one either way
    (QWEN3_NEXT, "10.0", {"tp_size": 2, **LORA, "lora_backend": "triton_v2"}, None),
    (QWEN3_NEXT, "10.0", {"tp_size": 2, **LORA, "lora_backend": "triton_v2", "enable_two_batch_overlap": True},
     "server.lora"),
    (QWEN35, "10.3", {"tp_size": 8, **LORA, "speculative_algorithm": "NEXTN"}, None),  # lora_hook.py:285
    (QWEN35, "10.0", {"tp_size": 8, "speculative_algorithm": "NEXTN"}, None),  # the draft inherits flashinfer_trtllm
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "ep_size": 2, "enable_eplb": True}, None),
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "enable_waterfill": True}, None),  # deepep checks flashinfer_cutedsl only
    (DEEPSEEK, "10.0", {"tp_size": 8, "quantization": "fp8", "ep_size": 8}, None),  # moe_hook.py:123-135 takes fp8
    (QWEN3_NEXT, "10.0", {"tp_size": 2, "enable_layernorm_sp": True}, "server.layernorm_sp"),  # the architecture
])
def test_checks_after_the_override(model: str, cc: str, args: dict[str, Any], rule: str | None) -> None:
    problems = errors(host(args, model=model, cc=cc), "server.moe") + \
        (errors(host(args, model=model, cc=cc), rule) if rule else [])
    assert [p.rule for p in problems] == ([rule] if rule else [])
