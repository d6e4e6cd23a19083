"""Rules for three MISSED classes of the fresh 10,000-case differential fuzz run (issue 36), on what the conformance
corpus cannot show: the older releases, an unknown GPU or model, and the edges of each condition.

The refusals themselves, against SGLang 0.5.23's own argument handling, are cases of tests/conformance/cases.yaml
(``fuzzed-replayssm-spec-ptx-kda-decode``, ``fuzzed-unified-memory-linear-decode-ptx-kda``,
``fuzzed-cutedsl-mla-prefill-llama`` and their accepting neighbours).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_seed0_2000 import LLAMA, QWEN3_NEXT, host, sources

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN35 = "nvidia/Qwen3.5-397B-A17B-NVFP4"
SPEC_LINE = "sglang/srt/arg_groups/attention_hook.py:460"


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize(("args", "cc", "refused"), [
    ({"linear_attn_backend": "ptx_kda"}, "10.0", True),  # mamba_ssm_dtype unset: no SM100 flashinfer default
    ({"linear_attn_backend": "nvidia_kda"}, "10.3", True),
    ({"linear_attn_backend": "ptx_kda"}, None, True),  # the GPU unknown: the default needs bfloat16 all the same
    ({"linear_attn_backend": "ptx_kda", "mamba_ssm_dtype": "bfloat16"}, "10.0", False),  # flashinfer decodes
    ({"linear_attn_backend": "ptx_kda", "mamba_ssm_dtype": "bfloat16"}, None, False),  # flashinfer on SM100: not known
    ({"linear_attn_backend": "ptx_kda", "mamba_ssm_dtype": "float32"}, "10.0", True),
    ({"linear_attn_backend": "ptx_kda", "linear_attn_decode_backend": "triton"}, "10.0", False),
    ({"linear_attn_backend": "flashkda"}, "10.0", False),  # FlashKDA decodes on triton
    ({"linear_attn_backend": "triton"}, "10.0", False),
    ({"linear_attn_backend": "helion"}, "10.0", True),  # helion keeps its own decode, which the spec ring lacks
])
def test_replayssm_spec_decode_backend_with_mamba_dtype_unset(version: str, args: dict[str, Any], cc: str | None,
                                                              refused: bool) -> None:
    hostvars = host({**args, "enable_linear_replayssm_spec": True}, version, model=DEEPSEEK, gpus=2)
    if cc is None:
        del hostvars["nvidia_gpu_compute_capability"]
    assert (SPEC_LINE in sources(hostvars, "server.linear_attn")) is refused


@pytest.mark.parametrize(("version", "prefill_line"), [
    ("0.5.20", "kv_cache_hook.py:853 (0.5.22 :865, 0.5.21 :758, 0.5.20 :440)"),
    ("0.5.23", "kv_cache_hook.py:853 (0.5.22 :865, 0.5.21 :758, 0.5.20 :440)"),
])
@pytest.mark.parametrize(("model", "args", "cc", "phase"), [
    (QWEN3_NEXT, {"linear_attn_backend": "cutedsl", "linear_attn_decode_backend": "ptx_kda"}, "8.6", "decode"),
    (QWEN3_NEXT, {"linear_attn_backend": "cutedsl"}, "8.6", "decode"),  # cutedsl / helion: MLA models only
    (LLAMA, {"linear_attn_backend": "helion"}, "8.6", "decode"),  # every launch, linear-attention model or not
    (DEEPSEEK, {"linear_attn_backend": "cutedsl"}, "8.6", None),  # MLA: cutedsl and helion too
    (DEEPSEEK, {"linear_attn_backend": "ptx_kda"}, "8.6", "decode"),
    (QWEN3_NEXT, {"linear_attn_backend": "ptx_kda", "mamba_ssm_dtype": "bfloat16"}, "10.0", "prefill"),  # flashinfer decode
    (QWEN3_NEXT, {"linear_attn_backend": "flashkda"}, "10.0", None),  # FlashKDA prefill, triton decode
    (QWEN3_NEXT, {"linear_attn_prefill_backend": "flashkda"}, "8.6", None),
    (QWEN3_NEXT, {"linear_attn_decode_backend": "flashinfer"}, "8.6", None),
    (QWEN3_NEXT, {"linear_attn_prefill_backend": "ptx_kda"}, "8.6", "prefill"),
])
def test_unified_memory_linear_attention_backends(version: str, prefill_line: str, model: str, args: dict[str, Any],
                                                  cc: str, phase: str | None) -> None:
    found = sources(host({**args, "enable_unified_memory": True}, version, model=model, cc=cc), "server.unified_memory")
    lines = {"decode": "kv_cache_hook.py:848 (0.5.22 :860, 0.5.21 :753, 0.5.20 :435)", "prefill": prefill_line}
    assert [s.split("arg_groups/")[-1] for s in found] == ([lines[phase]] if phase else [])


@pytest.mark.parametrize(("version", "refused"), [("0.5.20", True), ("0.5.22", True), ("0.5.23", False)])
def test_unified_memory_flashinfer_linear_prefill_from_0523(version: str, refused: bool) -> None:
    found = sources(host({"enable_unified_memory": True, "linear_attn_prefill_backend": "flashinfer"}, version,
                         model=QWEN3_NEXT, cc="8.6"), "server.unified_memory")
    assert bool(found) is refused


def test_unified_memory_linear_backends_of_an_unknown_model_only_outside_both_sets() -> None:
    def found(backend: str) -> list[str]:
        hostvars = host({"enable_unified_memory": True, "linear_attn_backend": backend}, model="/models/private-model",
                        cc="8.6")
        return sources(hostvars, "server.unified_memory")
    assert found("cutedsl") == []  # allowed for an MLA model: config.json decides
    assert found("helion") == []
    assert found("ptx_kda") != []  # in neither set


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize(("model", "args", "cc", "rule"), [
    (LLAMA, {"attention_backend": "trtllm_mla", "prefill_attention_backend": "cutedsl_mla"}, "10.3",
     "server.cutedsl_mla_prefill"),
    (LLAMA, {"prefill_attention_backend": "cutedsl_mla"}, None, "server.cutedsl_mla_prefill"),
    (QWEN3_NEXT, {"prefill_attention_backend": "cutedsl_mla"}, None, "server.cutedsl_mla_prefill"),
    (QWEN3_NEXT, {"prefill_attention_backend": "cutedsl_mla"}, "10.0", "sm10x.hybrid_attention"),
    (DEEPSEEK, {"prefill_attention_backend": "cutedsl_mla"}, "10.0", "server.combination"),
    (LLAMA, {"prefill_attention_backend": "cutedsl_mla"}, "9.0", "sm90.attention"),
    (LLAMA, {"decode_attention_backend": "cutedsl_mla", "prefill_attention_backend": "trtllm_mla"}, "10.3", None),
    (LLAMA, {"attention_backend": "cutedsl_mla"}, "10.0", None),
])
def test_cutedsl_mla_prefill_refused_once_whatever_the_model(version: str, model: str, args: dict[str, Any],
                                                              cc: str | None, rule: str | None) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host

    hostvars = host(args, version, model=model)
    if cc is None:
        del hostvars["nvidia_gpu_compute_capability"]
    else:
        hostvars["nvidia_gpu_compute_capability"] = cc
    refusals = [p.rule for p in validate_host(hostvars).errors
                if p.variable == "sglang_args.prefill_attention_backend"
                or "cutedsl_mla" in p.message]
    assert refusals == ([rule] if rule else [])
