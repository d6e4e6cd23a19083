"""What the 10,000-case differential fuzz run of seed 3 (``differential.py --cases 10000 --seed 3``) found: three MISSED
classes (SGLang 0.5.23 refuses, the validator accepted), on what the conformance corpus cannot show: the older
releases, the GPUs' memory, the edges of each condition, the messages.

Each refusal and its neighbour is probe-confirmed by a case of tests/conformance/cases.yaml
(``fuzzed-cutlass-moe-fp8-checkpoint-ep-size``, ``fuzzed-lmcache-deterministic-flashinfer``,
``fuzzed-deepep-v2-decode-graph`` and the cases beside them); the cases here that the corpus lacks were probed the same
way (SGLang 0.5.20-0.5.23).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_seed0_2000 import host

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
QWEN35 = "nvidia/Qwen3.5-397B-A17B-NVFP4"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
RTX_PRO_6000, RTX_5090, B200 = 97887, 32607, 183359


def errors(hostvars: dict[str, Any], rule: str) -> list[Any]:
    """The errors of ``rule``."""
    return [p for p in validate_host(hostvars).errors if p.rule == rule]


def with_memory(hostvars: dict[str, Any], mib: int) -> dict[str, Any]:
    """The host's GPUs' memory, as its facts or nvidia_gpu_memory_mib tell it (the fuzzer tells it too)."""
    return {**hostvars, "nvidia_gpu_memory_mib": mib}


# --- the checkpoint's fp8 that a model override fills in before handle_moe_kernel_config (fuzz-3-00403) ------------


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "cc", "model", "where"), [
    ({"ep_size": 2048, "moe_runner_backend": "cutlass"}, "10.0", DEEPSEEK, "moe_hook.py:161"),  # fuzz-3-00403
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass"}, "10.0", DEEPSEEK, "moe_hook.py:161"),
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass"}, "10.3", DEEPSEEK, "moe_hook.py:161"),  # by the major
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass"}, "12.0", DEEPSEEK, None),  # no fill off SM100
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass", "quantization": "unquant"}, "10.0", DEEPSEEK, None),
    ({"tp_size": 4, "moe_runner_backend": "cutlass"}, "10.0", DEEPSEEK, None),  # ep_size 1
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass"}, "12.0", DEEPSEEK, None),
    # The Qwen3 MoE family fills it in too (model_overrides/qwen3_moe.py:29-49): the table's FP8 export.
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass"}, "10.0", "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8",
     "moe_hook.py:161"),
    ({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass"}, "10.0", QWEN3_NEXT, None),  # bf16
    ({"tp_size": 4, "moe_runner_backend": "flashinfer_cutlass"}, "10.0", DEEPSEEK, "moe_hook.py:81"),
    ({"tp_size": 4, "moe_runner_backend": "flashinfer_cutlass"}, "12.0", DEEPSEEK, None),
    ({"tp_size": 4, "moe_runner_backend": "flashinfer_cutedsl"}, "10.0", DEEPSEEK, "moe_hook.py:98"),
])
def test_the_checkpoint_fp8_on_sm100(version: str, args: dict[str, Any], cc: str, model: str, where: str | None) -> None:
    found = [(p.source or "") for p in errors(host(args, version, model=model, cc=cc, gpus=4), "server.moe")]
    assert [s.endswith(where or "") for s in found] == ([True] if where else [])


def test_the_fp8_fill_names_itself_in_the_message() -> None:
    filled = errors(host({"ep_size": 2048, "moe_runner_backend": "cutlass"}, model=DEEPSEEK, gpus=4), "server.moe")
    assert filled[0].variable == "sglang_args.ep_size"
    assert "the checkpoint is FP8, which SGLang fills in as quantization fp8" in filled[0].message
    written = errors(host({"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass", "quantization": "fp8"},
                          model=DEEPSEEK, cc="12.0", gpus=4), "server.moe")
    assert "fills in" not in written[0].message


def test_ep_size_beyond_tp_size_is_left_to_sglangs_rank_layout() -> None:
    """ep_size 2048 with tp_size 1 passes SGLang's argument handling (parallel_hook.py:175-182 checks ep_size against
    tp_size only with moe_dp_size > 1); it fails when the ranks are laid out (runtime_context.py:303-310, tp_size ==
    moe_ep_size * moe_dp_size * moe_tp_size), so no parallel rule refuses it: the runner's :161 does here."""
    hostvars = host({"ep_size": 2048, "moe_runner_backend": "triton"}, model=DEEPSEEK, gpus=4)
    assert [p.rule for p in validate_host(hostvars).errors if p.rule.startswith(("parallel.", "server."))] == []


# --- what turns the radix cache off before HiCache, LMCache and the linker read it (fuzz-3-00420) -------------------


@pytest.mark.parametrize(("args", "cc", "model", "refused"), [
    ({}, "12.0", QWEN3_NEXT, True),  # fuzz-3-00420: flashinfer filled in on SM120
    ({"attention_backend": "triton"}, "12.0", QWEN3_NEXT, False),
    ({"attention_backend": "fa4"}, "12.0", LLAMA, False),
    ({}, "10.0", LLAMA, True),  # SM100: flashinfer too
    ({}, "12.1", LLAMA, True),
    ({}, "9.0", LLAMA, False),  # fa3
    ({}, "11.0", LLAMA, False),  # is_sm100 / is_sm120 by the major: Thor gets fa3
    ({}, "8.0", LLAMA, False),
    ({"attention_backend": "flashinfer"}, "9.0", LLAMA, True),
    ({}, "10.0", QWEN3_NEXT, False),  # its SM100 override picks triton first (qwen3_5.py:17-49)
    ({}, "12.0", DEEPSEEK, False),  # the DeepSeek models get triton
    ({"prefill_attention_backend": "triton", "decode_attention_backend": "triton"}, "12.0", LLAMA, True),  # not read
    ({"device": "xpu"}, "12.0", LLAMA, True),  # the xpu hook leaves the backend alone
    ({"device": "npu"}, "12.0", LLAMA, False),  # the NPU hook fills its own in: not decided here
])
def test_lmcache_with_deterministic_inference(args: dict[str, Any], cc: str, model: str, refused: bool) -> None:
    hostvars = host({"enable_deterministic_inference": True, "enable_lmcache": True, **args}, model=model, cc=cc, gpus=4)
    found = [p for p in errors(hostvars, "server.kv_cache") if (p.source or "").endswith("kv_cache_hook.py:445")]
    assert bool(found) is refused


def test_the_fuzz_case_with_its_gpu() -> None:
    """fuzz-3-00420 as the fuzzer gave it: four RTX 5090s, told the memory."""
    hostvars = with_memory(host({"enable_deterministic_inference": True, "enable_lmcache": True}, model=QWEN3_NEXT,
                                cc="12.0", gpus=4), RTX_5090)
    found = errors(hostvars, "server.kv_cache")
    assert [p.variable for p in found] == ["sglang_args.enable_deterministic_inference"]
    assert "deterministic inference turns off on attention backend flashinfer, which SGLang picks" in found[0].message
    assert found[0].fix.startswith("set sglang_args.attention_backend: triton")


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "variable"), [
    ({"enable_deterministic_inference": True}, "enable_deterministic_inference"),
    ({"rl_on_policy_target": "fsdp"}, "rl_on_policy_target"),
    ({"enable_mis": True}, "enable_mis"),
    ({"disaggregation_mode": "decode"}, "disaggregation_mode"),  # the seed-2 fix, unchanged
    ({"disable_radix_cache": True}, "disable_radix_cache"),
])
def test_what_turns_the_radix_cache_off_before_lmcache(version: str, args: dict[str, Any], variable: str) -> None:
    found = [p for p in errors(host({"enable_lmcache": True, **args}, version, cc="12.0", gpus=1), "server.kv_cache")
             if (p.source or "").endswith("kv_cache_hook.py:445")]
    assert [p.variable for p in found] == [f"sglang_args.{variable}"]


def test_lmcache_in_0520_has_no_radix_check() -> None:
    hostvars = host({"enable_lmcache": True, "enable_deterministic_inference": True}, "0.5.20", cc="12.0", gpus=1)
    assert errors(hostvars, "server.kv_cache") == []


@pytest.mark.parametrize(("version", "where"), [("0.5.23", "kv_cache_hook.py:394"), ("0.5.21", "kv_cache_hook.py:394"),
                                                ("0.5.20", "kv_cache_hook.py:167")])
@pytest.mark.parametrize("args", [{"enable_deterministic_inference": True}, {"enable_mis": True}])
def test_hicache_with_the_radix_cache_off(version: str, where: str, args: dict[str, Any]) -> None:
    found = errors(host({"enable_hierarchical_cache": True, **args}, version, cc="12.0", gpus=1), "server.kv_cache")
    assert [(p.variable, (p.source or "").endswith(where)) for p in found] == [
        ("sglang_args.enable_hierarchical_cache", True)]
    triton = host({"enable_hierarchical_cache": True, "enable_deterministic_inference": True,
                   "attention_backend": "triton"}, version, cc="12.0", gpus=1)
    assert errors(triton, "server.kv_cache") == []


@pytest.mark.parametrize(("version", "args", "refused"), [
    ("0.5.23", {"enable_deterministic_inference": True}, True),
    ("0.5.23", {"enable_mis": True, "attention_backend": "flashinfer"}, True),
    ("0.5.23", {"disaggregation_mode": "decode"}, True),
    ("0.5.23", {"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True}, False),
    ("0.5.23", {"enable_deterministic_inference": True, "attention_backend": "triton"}, False),
    ("0.5.22", {"enable_deterministic_inference": True}, False),  # the linker's radix check is new in 0.5.23
    ("0.5.22", {"disaggregation_mode": "decode"}, False),
])
def test_the_linker_with_the_radix_cache_off(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"enable_unified_cache_external_linker": True, **args}, version, cc="12.0", gpus=1)
    found = [p for p in errors(hostvars, "server.hicache") if (p.source or "").endswith("hicache_hook.py:46")]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ["0.5.20", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "model", "cc", "picked"), [
    ({}, DEEPSEEK, "10.0", "trtllm_mla"),  # DeepSeek-V3's SM100 override (deepseek_v2.py:178-185)
    ({"prefill_attention_backend": "triton"}, DEEPSEEK, "10.0", None),  # the override needs all three unset
    ({}, DEEPSEEK, "12.0", None),
    ({"disable_radix_cache": True}, QWEN35, "10.0", "trtllm_mha"),  # Qwen3.5's SM100 override (qwen3_5.py:17-49)
    ({}, QWEN35, "10.0", None),  # triton with the radix cache on
    ({"disable_radix_cache": True}, QWEN35, "12.0", None),
])
def test_deterministic_inference_on_a_model_overrides_backend(version: str, args: dict[str, Any], model: str, cc: str,
                                                               picked: str | None) -> None:
    found = [p for p in errors(host({"enable_deterministic_inference": True, **args}, version, model=model, cc=cc, gpus=4),
                               "server.combination") if "overrides.py:" in (p.source or "")]
    assert [p.message.split("picks ")[1].split(" ")[0] for p in found] == ([picked] if picked else [])


# --- DeepEP v2's decode CUDA graph against its dispatch buffer (fuzz-3-09233) ----------------------------------------


V2 = {"moe_a2a_backend": "deepep_v2"}


def decode_graph(hostvars: dict[str, Any]) -> list[Any]:
    return [p for p in errors(hostvars, "moe.deepep_v2") if "decode CUDA graph" in p.message]


def test_the_fuzz_case() -> None:
    """fuzz-3-09233: DeepSeek-V3 on four RTX PRO 6000, chunked_prefill_size 4 (the prefill half passes), the decode
    graph SGLang sizes for 96 GB and tp_size 1 (256 requests) against the default 128 tokens."""
    args = {**V2, "chunked_prefill_size": 4, "disaggregation_mode": "null", "eplb_rebalance_layers_per_chunk": 16384}
    hostvars = with_memory(host(args, model=DEEPSEEK, cc="12.0", gpus=4,
                                env={"SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "0"}), RTX_PRO_6000)
    found = decode_graph(hostvars)
    assert [(p.source, p.variable) for p in found] == [("sglang/srt/arg_groups/moe_hook.py:700-706",
                                                        "sglang_args.moe_a2a_backend")]
    assert "256 requests per rank" in found[0].message
    assert "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK >= 256" in found[0].fix


@pytest.mark.parametrize(("args", "mib", "env", "requests"), [
    ({"chunked_prefill_size": 4}, RTX_PRO_6000, None, 256),
    ({"chunked_prefill_size": 4, "tp_size": 4}, RTX_PRO_6000, None, 512),
    ({"chunked_prefill_size": 4}, RTX_5090, None, None),  # 48 for tp_size < 4 on 32 GB
    ({"chunked_prefill_size": 4, "tp_size": 4}, RTX_5090, None, 160),
    ({"chunked_prefill_size": 4}, RTX_PRO_6000, {"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "256"}, None),
    ({"chunked_prefill_size": 4, "cuda_graph_max_bs_decode": 128}, RTX_PRO_6000, None, None),
    ({"chunked_prefill_size": 4, "cuda_graph_bs_decode": [1, 2, 4, 200]}, RTX_PRO_6000, None, 200),
    ({"chunked_prefill_size": 4, "max_running_requests": 128}, RTX_PRO_6000, None, None),
    ({"chunked_prefill_size": 4, "max_running_requests": 129}, RTX_PRO_6000, None, 129),
    ({"disaggregation_mode": "decode", "tp_size": 4}, RTX_PRO_6000, None, 512),  # the decode half alone
    ({"disaggregation_mode": "decode", "tp_size": 4, "max_running_requests": 64}, RTX_PRO_6000, None, None),
    ({"disaggregation_mode": "decode", "tp_size": 4, "attn_dp_size": 4, "max_running_requests": 512}, RTX_PRO_6000,
     None, None),  # 128 per attention-DP rank
    ({"disaggregation_mode": "decode", "tp_size": 4, "cuda_graph_max_bs_decode": 128, "max_running_requests": 1024},
     RTX_PRO_6000, None, None),
    ({"disaggregation_mode": "decode", "tp_size": 4, "cuda_graph_backend_decode": "breakable"}, RTX_PRO_6000, None, 512),
    ({"disaggregation_mode": "decode", "tp_size": 4, "deepep_mode": "normal"}, RTX_PRO_6000, None, 512),
    ({"disaggregation_mode": "decode", "tp_size": 4, "disable_cuda_graph": True}, RTX_PRO_6000, None, None),
    ({"disaggregation_mode": "decode", "tp_size": 4, "disable_decode_cuda_graph": True}, RTX_PRO_6000, None, None),
    ({"disaggregation_mode": "decode", "tp_size": 4, "attention_backend": "torch_native"}, RTX_PRO_6000, None, None),
    ({"disaggregation_mode": "prefill", "chunked_prefill_size": 4}, RTX_PRO_6000, None, None),
])
def test_the_decode_graph_by_the_gpus_memory(args: dict[str, Any], mib: int, env: dict[str, str] | None,
                                             requests: int | None) -> None:
    found = decode_graph(with_memory(host({**V2, **args}, model=DEEPSEEK, cc="12.0", gpus=4, env=env), mib))
    assert [int(p.message.split(" requests per rank")[0].rsplit(" ", 1)[1]) for p in found] == (
        [requests] if requests else [])


@pytest.mark.parametrize(("cc", "refused"), [("10.0", True), ("10.3", True), ("12.0", False), ("9.0", False),
                                             ("12.1", True)])
def test_without_the_memory_the_least_default_of_the_capabilitys_gpus(cc: str, refused: bool) -> None:
    """B200 / B300 all default to 512, GB10 to 256 (121.7 GiB of unified memory); SM120 and Hopper have GPUs that
    default to 8 or 32, so the rule refuses nothing there without the host's memory."""
    hostvars = host({**V2, "disaggregation_mode": "decode"}, model=DEEPSEEK, cc=cc, gpus=1)
    assert bool(decode_graph(hostvars)) is refused


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_the_decode_half_in_every_release(version: str) -> None:
    found = decode_graph(host({**V2, "disaggregation_mode": "decode", "tp_size": 4}, version, model=DEEPSEEK, gpus=4))
    lines = {"0.5.20": "587-593", "0.5.21": "594-600", "0.5.22": "624-630", "0.5.23": "700-706"}
    assert [p.source for p in found] == [f"sglang/srt/arg_groups/moe_hook.py:{lines[version]}"]


def test_the_prefill_half_first() -> None:
    """With SGLang's default chunk the prefill half refuses first, once (moe_hook.py:688-695)."""
    found = errors(host(V2, model=DEEPSEEK, gpus=4), "moe.deepep_v2")
    assert [p.source for p in found] == ["sglang/srt/arg_groups/moe_hook.py:688-695"]


def test_speculative_decoding_counts_its_auto_draft_tokens() -> None:
    """EAGLE's tokens per request, SGLang's auto choice (3, 1, 4) for DeepSeek-V3 (speculative_hook.py:1430-1461),
    and its max_running_requests 48 (speculative_hook.py:1090): SGLang refuses 48 x 4 = 192 tokens on a decode server
    (probe-confirmed, moe_hook.py:700)."""
    hostvars = host({**V2, "disaggregation_mode": "decode", "tp_size": 4, "speculative_algorithm": "EAGLE",
                     "speculative_moe_a2a_backend": "none"}, model=DEEPSEEK, gpus=4)
    assert [p.source for p in decode_graph(hostvars)] == ["sglang/srt/arg_groups/moe_hook.py:700-706"]
