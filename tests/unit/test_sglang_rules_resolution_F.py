"""Architecture gates decided before launch: SGLang switches that it allows only for some architectures
(hf_config.architectures), refused where the architecture is certain (resolve.certain_architecture: the model
table's, a host's sglang_model_architecture, or json_model_override_args' architectures) and left to the on-host
preflight elsewhere.

Each refusal and its neighbour is probe-confirmed by the ``archgate-*`` cases of tests/conformance/cases.yaml (SGLang
0.5.23; 0.5.20-0.5.22 with release_conformance.py's probe).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host

DEEPSEEK_FP4 = "nvidia/DeepSeek-V3-0324-FP4"
UNKNOWN = "/models/some-checkpoint"


def arch(name: str) -> str:
    """json_model_override_args naming ``name`` as the architecture."""
    return json.dumps({"architectures": [name]})


MEGAMOE = {"moe_a2a_backend": "flashinfer_megamoe", "tp_size": 8, "enable_dp_attention": True, "dp_size": 8}


# --- validate_flashinfer_megamoe_model (moe_hook.py:237-281) ------------------------------------------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("model", "args", "where"), [
    (QWEN35, {}, "moe_hook.py:2"),  # archgate-megamoe-qwen35-refused: not a validated architecture
    (QWEN3_NEXT, {}, "moe_hook.py:2"),
    (LLAMA, {}, "moe_hook.py:2"),
    (DEEPSEEK, {}, "moe_hook.py:2"),  # archgate-megamoe-deepseek-fp8-refused: the FP8 checkpoint
    (DEEPSEEK, {"json_model_override_args": arch("Qwen3MoeForCausalLM")}, "moe_hook.py:2"),  # validated, still FP8
    (DEEPSEEK_FP4, {}, None),  # ModelOpt NVFP4
    (DEEPSEEK, {"quantization": "modelopt_fp4"}, None),  # --quantization given: the preflight's
    (QWEN35, {"moe_runner_backend": "megamoe"}, None),  # the backend becomes megamoe
    (QWEN35, {"enable_waterfill": True}, None),  # the backend becomes deepep
    (UNKNOWN, {}, None),  # the architecture is not certain
    (DEEPSEEK, {"enable_prefill_cp": True, "cp_strategy": "interleave", "attn_cp_size": 2}, None),  # CP may change it
])
def test_flashinfer_megamoe_model(version: str, model: str, args: dict[str, Any], where: str | None) -> None:
    found = [p for p in errors(host({**MEGAMOE, **args}, version, model=model), "server.moe")
             if "flashinfer_megamoe" in p.message and ("validated" in p.message or "checkpoint" in p.message)]
    assert bool(found) is (where is not None)
    if where:
        assert where in found[0].source


@pytest.mark.parametrize(("version", "args", "env", "refused"), [
    ("0.5.23", {"quantization": "nvfp4_online"}, {}, True),  # megamoe-nvfp4-online-without-w4a16
    ("0.5.23", {"quantization": "nvfp4_online"}, {"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}, False),
    ("0.5.22", {"quantization": "nvfp4_online"}, {"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}, True),  # 0.5.23's switch
    ("0.5.23", {"quantization": "fp8"}, {}, True),
    ("0.5.23", {"quantization": "unquant"}, {}, True),
    ("0.5.23", {"quantization": "mxfp8"}, {}, False),  # quantization.checkpoint's, not this rule's
    ("0.5.23", {"quantization": "modelopt_fp4"}, {}, False),
])
def test_flashinfer_megamoe_reads_the_written_quantization(version: str, args: dict[str, Any], env: dict[str, str],
                                                            refused: bool) -> None:
    """The quantization check (moe_hook.py:264-281) reads the resolved quantization: the host's as well as the
    checkpoint's (DeepSeek-V3 with quantization nvfp4_online and the W4A16 switch off was accepted)."""
    found = [p for p in errors(host({**MEGAMOE, **args}, version, model=DEEPSEEK, env=env), "server.moe")
             if "flashinfer_megamoe" in p.message and "checkpoint" in p.message]
    assert bool(found) is refused, found


def test_flashinfer_megamoe_lines_per_release() -> None:
    lines = {v: errors(host(MEGAMOE, v, model=QWEN35), "server.moe")[0].source for v in ALL}
    assert lines == {"0.5.20": "sglang/srt/arg_groups/moe_hook.py:212", "0.5.21": "sglang/srt/arg_groups/moe_hook.py:217",
                     "0.5.22": "sglang/srt/arg_groups/moe_hook.py:222", "0.5.23": "sglang/srt/arg_groups/moe_hook.py:258"}


@pytest.mark.parametrize(("version", "refused"), [("0.5.20", True), ("0.5.21", False), ("0.5.23", False)])
def test_flashinfer_megamoe_glm5_dsa_from_0_5_21(version: str, refused: bool) -> None:
    hv = host({**MEGAMOE, "json_model_override_args": arch("GlmMoeDsaForCausalLM")}, version, model=DEEPSEEK_FP4)
    assert bool([p for p in errors(hv, "server.moe") if "validated" in p.message]) is refused


# --- handle_model_specific_adjustments' attention backends per architecture (model_hook.py:515-720) --------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("name", "args", "cc", "refused"), [
    ("GptOssForCausalLM", {"attention_backend": "flashinfer"}, "9.0", True),  # archgate-gptoss-flashinfer-refused
    ("GptOssForCausalLM", {"prefill_attention_backend": "triton"}, "10.0", True),  # the decode backend stays None
    ("GptOssForCausalLM", {"attention_backend": "trtllm_mha"}, "10.0", False),
    ("GptOssForCausalLM", {"attention_backend": "flashinfer", "prefill_attention_backend": "triton",
                           "decode_attention_backend": "triton"}, "10.0", False),
    ("GptOssForCausalLM", {}, "10.0", False),  # the override's default
    ("Llama4ForConditionalGeneration", {"attention_backend": "flashinfer"}, "10.0", True),
    ("Llama4ForCausalLM", {"attention_backend": "flashinfer"}, "10.0", True),
    ("Llama4ForConditionalGeneration", {"prefill_attention_backend": "flashinfer"}, "10.0", False),  # base filled
    ("Llama4ForConditionalGeneration", {"attention_backend": "triton"}, "10.0", False),
    ("Olmo2ForCausalLM", {"attention_backend": "flashinfer"}, "10.0", True),
    ("Olmo2ForCausalLM", {"attention_backend": "triton"}, "10.0", False),
    ("Lfm2ForCausalLM", {"attention_backend": "triton"}, "10.0", True),
    ("Lfm2MoeForCausalLM", {"attention_backend": "triton"}, "10.0", True),
    ("Lfm2ForCausalLM", {"attention_backend": "flashinfer"}, "10.0", False),
    ("LlamaForCausalLM", {"attention_backend": "flashinfer"}, "10.0", False),
])
def test_architecture_attention_backends(version: str, name: str, args: dict[str, Any], cc: str, refused: bool) -> None:
    hv = host({"json_model_override_args": arch(name), **args}, version, model=LLAMA, cc=cc)
    found = [p for p in errors(hv, "server.model_features") if "needs" in p.message and name in p.message]
    assert bool(found) is refused


def test_architecture_gate_from_the_declared_architecture() -> None:
    hv = {**host({"attention_backend": "flashinfer"}, model=UNKNOWN, cc="9.0"),
          "sglang_model_architecture": "GptOssForCausalLM"}
    assert errors(hv, "server.model_features")
    unknown = host({"attention_backend": "flashinfer"}, model=UNKNOWN, cc="9.0")
    assert not [p for p in errors(unknown, "server.model_features") if "GptOss" in p.message]


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"moe_runner_backend": "triton_kernel", "tp_size": 2, "ep_size": 2}, True),  # archgate-gptoss-triton-kernel-ep
    ({"moe_runner_backend": "triton_kernel", "tp_size": 2}, False),
    ({"tp_size": 2, "ep_size": 2}, False),
])
def test_gpt_oss_triton_kernel_ep(version: str, args: dict[str, Any], refused: bool) -> None:
    hv = host({"json_model_override_args": arch("GptOssForCausalLM"), **args}, version, model=LLAMA)
    assert bool([p for p in errors(hv, "server.model_features") if "triton_kernel" in p.message]) is refused


# --- handle_context_parallelism's DeepSeek-V3.2 zigzag gate (parallel_hook.py:123-131) ----------------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "model", "refused"), [
    ({"json_model_override_args": arch("DeepseekV32ForCausalLM"), "enable_prefill_cp": True}, DEEPSEEK, True),
    ({"json_model_override_args": arch("DeepseekV32ForCausalLM")}, DEEPSEEK, False),  # no prefill CP
    ({"enable_prefill_cp": True}, DEEPSEEK, False),  # DeepSeek-V3
    ({"enable_prefill_cp": True}, UNKNOWN, False),  # not certain
])
def test_deepseek_v32_zigzag(version: str, args: dict[str, Any], model: str, refused: bool) -> None:
    hv = host({"cp_strategy": "zigzag", "tp_size": 8, "attn_cp_size": 8, **args}, version, model=model)
    assert bool([p for p in errors(hv, "server.parallel") if "zigzag" in p.message]) is refused
