"""The MoE runner FlashInfer A2A's assert reads, and the FlashInfer A2A dispatch budget, found by comparing the resolver
with SGLang's resolved values (tests/conformance/resolution.py).

handle_a2a_moe asserts that resolved_view(server_args).moe_runner_backend is one of flashinfer_cutlass,
flashinfer_cutedsl, flashinfer_trtllm, flashinfer_trtllm_routed, deep_gemm (moe_hook.py:531; 0.5.22 :455, 0.5.21 :448,
0.5.20 :450). An unset runner is still auto there unless _moe_runner_backend_quant_constraints put one in first
(overrides.py:1449-1525): flashinfer_trtllm under quantization mxfp8 or nvfp4_online, flashinfer_cutlass under
modelopt_fp4 on SM120 (and SM110 from 0.5.22). The model overrides of the table's architectures pick a runner only
under moe_a2a_backend none (qwen3_moe.py:80-86, overrides.py:810-823).

validate_flashinfer_a2a_token_budget (moe_hook.py:749-774; 0.5.22 :673-698) compares the per-rank prefill chunk and
the decode CUDA graph with SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK, or max(chunk, 4096) when it is unset
(overrides.py:1887-1895). 0.5.20 / 0.5.21 have a CuteDSL-only budget instead (not judged).

Every verdict here is probe-confirmed on SGLang 0.5.23 and, where the release has the options, 0.5.20-0.5.22; the
corpus cases are the ``resolve-e-...`` block of tests/conformance/cases.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_fuzz10k_s3 import errors, with_memory
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL, attention_dp
from test_sglang_rules_seed0_2000 import host

B200 = 183359
ENV = "SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


def runner_refusals(args: dict[str, Any], version: str, model: str, cc: str) -> list[Any]:
    """server.moe's refusals at the FlashInfer A2A runner assert, for moe_a2a_backend flashinfer over 4 attention-DP
    ranks of tp_size 4."""
    hostvars = host({"tp_size": 4, "moe_a2a_backend": "flashinfer", **attention_dp(version, 4), **args}, version,
                    model=model, cc=cc, gpus=16)
    return [p for p in errors(hostvars, "server.moe") if p.source.endswith("moe_hook.py:531")]


# --- the runner the FlashInfer A2A assert reads (moe_hook.py:531) ---------------------------------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "cc", "model", "refused"), [
    ({}, "10.0", QWEN3_NEXT, True),  # the resolver-differential's MISSED
    ({}, "12.0", QWEN3_NEXT, True),
    ({}, "9.0", QWEN3_NEXT, True),
    ({}, "10.0", DEEPSEEK, True),  # DeepSeek's SM100 flashinfer_trtllm needs moe_a2a_backend none
    ({}, "10.0", LLAMA, True),
    ({}, "12.0", QWEN35, True),  # the checkpoint's modelopt_fp4 is not filled in off SM100
    ({"quantization": "fp8"}, "12.0", DEEPSEEK, True),
    ({"quantization": "modelopt_fp4"}, "10.0", QWEN3_NEXT, True),  # maps to nothing on SM100
    ({"quantization": "modelopt_fp4"}, "12.0", QWEN3_NEXT, False),  # flashinfer_cutlass
    ({"quantization": "modelopt_fp4"}, "12.1", DEEPSEEK, False),
    ({"quantization": "mxfp8"}, "10.0", QWEN3_NEXT, False),  # flashinfer_trtllm
    ({"quantization": "nvfp4_online"}, "10.0", QWEN3_NEXT, False),  # flashinfer_trtllm
    ({"moe_runner_backend": "flashinfer_cutlass"}, "10.0", QWEN3_NEXT, False),
    ({"moe_runner_backend": "triton"}, "10.0", QWEN3_NEXT, True),
])
def test_flashinfer_a2a_reads_the_resolved_runner(version: str, args: dict[str, Any], cc: str, model: str,
                                                  refused: bool) -> None:
    assert bool(runner_refusals(args, version, model, cc)) is refused


@pytest.mark.parametrize(("version", "refused"), [("0.5.20", True), ("0.5.21", True), ("0.5.22", False),
                                                  ("0.5.23", False)])
def test_modelopt_fp4_on_sm110_maps_from_0_5_22(version: str, refused: bool) -> None:
    """flashinfer_cutlass for an unset runner under modelopt_fp4 on SM110 from 0.5.22 (overrides.py:1513-1518)."""
    assert bool(runner_refusals({"quantization": "modelopt_fp4"}, version, QWEN3_NEXT, "11.0")) is refused


def test_unset_runner_message_says_auto() -> None:
    (found,) = runner_refusals({}, "0.5.23", QWEN3_NEXT, "10.0")
    assert found.variable.endswith("moe_runner_backend") and "stays auto" in found.message


@pytest.mark.parametrize("args", [
    {"json_model_override_args": '{"architectures": ["GptOssForCausalLM"]}'},  # its override may pick deep_gemm
    {"quantization": "modelopt_fp4"},  # the GPU not known: flashinfer_cutlass on SM120 / SM110
])
def test_unset_runner_not_judged_where_uncertain(args: dict[str, Any]) -> None:
    hostvars = host({"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer", **args}, model=QWEN3_NEXT,
                    gpus=4)
    if "quantization" in args:
        hostvars.pop("nvidia_gpu_compute_capability")
    assert not [p for p in errors(hostvars, "server.moe") if p.source.endswith("moe_hook.py:531")]


def test_unknown_model_not_judged() -> None:
    hostvars = host({"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer"}, model="/models/mystery", gpus=4)
    assert not [p for p in errors(hostvars, "server.moe") if p.source.endswith("moe_hook.py:531")]


# --- the FlashInfer A2A dispatch budget (moe_hook.py:766-774) -------------------------------------------------------


def budget_refusals(args: dict[str, Any], version: str, env: dict[str, str] | None = None) -> list[Any]:
    """server.moe's budget refusals for Qwen3-Next on 4 B200s with flashinfer_cutlass under FlashInfer A2A."""
    hostvars = with_memory(host({"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer",
                                 "moe_runner_backend": "flashinfer_cutlass", **args}, version, model=QWEN3_NEXT,
                                gpus=4, env=env), B200)
    return [p for p in errors(hostvars, "server.moe") if "workspace" in p.message]


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "env", "refused"), [
    ({}, "64", True),  # 16384 // 4 = 4096 per rank
    ({}, "4095", True),
    ({}, "4096", False),
    ({"chunked_prefill_size": 1024}, "256", True),  # the default decode graph of 512
    ({"chunked_prefill_size": 1024, "disaggregation_mode": "decode"}, "256", True),
    ({"chunked_prefill_size": 1024, "cuda_graph_max_bs_decode": 1024}, "512", True),
    ({"chunked_prefill_size": 1024, "disable_cuda_graph": True}, "256", False),
    ({}, "abc", False),  # not a number: SGLang reads the default
    ({"chunked_prefill_size": 1024, "cuda_graph_max_bs_decode": 8192}, None, True),  # unset: max(256, 4096)
    ({"chunked_prefill_size": 1024, "cuda_graph_max_bs_decode": 4096}, None, False),
])
def test_flashinfer_a2a_dispatch_budget(version: str, args: dict[str, Any], env: str | None, refused: bool) -> None:
    found = budget_refusals(args, version, None if env is None else {ENV: env})
    assert bool(found) is refused
    if found:
        assert found[0].source.endswith("moe_hook.py:" + ("766-774" if version == "0.5.23" else "690-698"))


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21"])
def test_flashinfer_a2a_dispatch_budget_not_before_0_5_22(version: str) -> None:
    hostvars = host({"tp_size": 4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_cutlass",
                     **attention_dp(version, 4)}, version, model=QWEN3_NEXT, gpus=16, env={ENV: "64"})
    assert not [p for p in errors(hostvars, "server.moe") if "workspace" in p.message]


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_attention_dp_groups_need_no_extra_gpus(version: str) -> None:
    """dp_size with enable_dp_attention counts attention-DP groups inside the one TP group (the DP controller launches
    the TP group's ranks once: data_parallel_controller.py:206-214 in 0.5.21): tp_size 4, dp_size 4 fit 4 GPUs;
    without enable_dp_attention they are 4 replicas, 16 GPUs."""
    grouped = host({"tp_size": 4, "dp_size": 4, "enable_dp_attention": True}, version, model=DEEPSEEK, cc="10.0", gpus=4)
    assert validate_host(grouped).gpu_ids == [0, 1, 2, 3]
    assert not errors(grouped, "parallel.gpus")
    assert errors(host({"tp_size": 4, "dp_size": 4}, version, model=DEEPSEEK, cc="10.0", gpus=4), "parallel.gpus")


@pytest.mark.parametrize(("version", "line"), [("0.5.20", "193"), ("0.5.21", "261"), ("0.5.22", "314"), ("0.5.23", "326")])
def test_attention_dp_groups_divide_tp(version: str, line: str) -> None:
    """...but the attention-DP width must divide tp_size (parallel_hook.py:326; :314, :261, :193 before): tp_size 8
    with dp_size 3 and enable_dp_attention, which parallel.gpus had refused by counting 24 GPUs (the corpus case
    par-deprecated-enable-dp-attention-then-checked on 0.5.20)."""
    found = errors(host({"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}, version, model=DEEPSEEK, cc="12.0",
                        gpus=8), "parallel.tp_attn_dp")
    assert [p.source for p in found] == [f"sglang/srt/arg_groups/parallel_hook.py:{line}"]
