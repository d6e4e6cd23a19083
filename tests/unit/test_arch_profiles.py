"""Hardware rules per compute capability (sglang_rules.PROFILES), the strict compute-capability parsing, the
"will the weights fit" check and the cross-checks against the host's gathered GPU facts (nvidia_gpu_facts)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import PROFILES, QUANT_MIN_CAPABILITY, nccl_flag
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import (
    Result,
    format_report,
    parse_compute_capability,
    validate_host,
)
from hypothesis import given
from hypothesis import strategies as st

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"  # 141e9 bytes of bf16 weights in the table
DEEPSEEK = "deepseek-ai/DeepSeek-V3"  # MLA
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # hybrid linear attention, MoE, bf16
QWEN_NEXT_NVFP4 = "nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4"


def host(cc: Any = "12.0", model: str = LLAMA, args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    """A minimal host: 8 GPUs of compute capability ``cc`` serving ``model`` on loopback."""
    return {"sglang_version": "0.5.23", "sglang_model_path": model, "sglang_args": dict(args or {}),
            "nvidia_gpu_count": 8, "nvidia_gpu_compute_capability": cc, **hostvars}


def errors(result: Result) -> list[str]:
    return [p.rule for p in result.errors]


def the(result: Result, rule: str, level: str = "error") -> Any:
    found = result.errors if level == "error" else result.warnings
    assert [p.rule for p in found] == [rule], format_report("host", result)
    return found[0]


# --- per profile: refused and accepted configurations ---------------------------------------------------------

REFUSED = [
    ("8.6", LLAMA, {"attention_backend": "trtllm_mha"}, "sm8x.attention", "attention_backend", "attention_hook.py:200"),
    ("8.0", DEEPSEEK, {"attention_backend": "fa3"}, "sm8x.attention", "attention_backend", "attention_registry.py:241"),
    ("8.9", LLAMA, {"kv_cache_dtype": "mxfp8"}, "sm8x.kv_cache", "kv_cache_dtype", "kv_cache_hook.py:105"),
    ("8.6", LLAMA, {"quantization": "modelopt_fp8"}, "sm8x.quantization", "quantization", "loader.py:254"),
    ("8.9", LLAMA, {"quantization": "w4afp8"}, "sm8x.quantization", "quantization", "w4afp8.py:70"),
    ("8.0", LLAMA, {"decode_attention_backend": "flashmla"}, "sm8x.attention", "decode_attention_backend", None),
    ("9.0", DEEPSEEK, {"attention_backend": "trtllm_mla"}, "sm90.attention", "attention_backend", "overrides.py:1210"),
    ("9.0", DEEPSEEK, {"attention_backend": "cutedsl_mla"}, "sm90.attention", "attention_backend", "overrides.py:1244"),
    ("9.0", LLAMA, {"quantization": "mxfp8"}, "sm90.quantization", "quantization", "fp8.py:329"),
    ("9.0", LLAMA, {"quantization": "nvfp4_online"}, "sm90.quantization", "quantization", "overrides.py:1457"),
    ("9.0", LLAMA, {"moe_runner_backend": "flashinfer_trtllm"}, "sm90.moe", "moe_runner_backend", None),
    ("9.0", LLAMA, {"kv_cache_dtype": "nvfp4"}, "sm90.kv_cache", "kv_cache_dtype", "kv_cache_hook.py:126"),
    ("9.0", LLAMA, {"mm_attention_backend": "aiter_attn"}, "sm90.mm_attention", "mm_attention_backend", None),
    ("10.0", LLAMA, {"attention_backend": "fa3"}, "sm10x.attention", "attention_backend", "attention_registry.py:241"),
    ("10.3", LLAMA, {"attention_backend": "hpc_ops"}, "sm10x.attention", "attention_backend", "hpc_ops_backend.py:138"),
    ("10.0", QWEN_NEXT, {"attention_backend": "flex_attention"}, "sm10x.hybrid_attention", "attention_backend",
     "attention_registry.py:462"),
    ("10.3", LLAMA, {"mm_attention_backend": "fa3"}, "sm10x.mm_attention", "mm_attention_backend", "vision.py:1330"),
    ("10.0", QWEN_NEXT, {"linear_attn_backend": "flashinfer"}, "sm10x.linear_attention", "linear_attn_backend",
     "attention_hook.py:333"),
    ("10.0", QWEN_NEXT, {"linear_attn_verify_backend": "flashinfer", "mamba_ssm_dtype": "float32"}, "sm10x.linear_attention",
     "linear_attn_verify_backend", "attention_hook.py:366"),
    ("11.0", LLAMA, {"attention_backend": "trtllm_mha"}, "sm110.attention", "attention_backend", "attention_hook.py:200"),
    ("11.0", LLAMA, {"quantization": "nvfp4_online"}, "sm110.quantization", "quantization", "overrides.py:1457"),
    ("11.0", LLAMA, {"kv_cache_dtype": "nvfp4"}, "sm110.kv_cache", "kv_cache_dtype", "kv_cache_hook.py:126"),
    ("11.0", QWEN_NEXT_NVFP4, {}, "sm110.nvfp4", "quantization", "overrides.py:1513"),
    ("12.0", LLAMA, {"mm_attention_backend": "fa3"}, "sm12x.mm_attention", "mm_attention_backend", "vision.py:1330"),
    ("12.1", QWEN_NEXT_NVFP4, {"moe_runner_backend": "flashinfer_cutedsl", "quantization": "modelopt_fp4"}, "sm12x.moe",
     "moe_runner_backend", None),
    ("12.1", QWEN_NEXT, {"linear_attn_decode_backend": "flashinfer"}, "sm12x.linear_attention", "linear_attn_decode_backend",
     "attention_hook.py:333"),
    ("12.0", LLAMA, {"attention_backend": "trtllm_mha", "kv_cache_dtype": "fp8_e4m3"}, "sm12x.trtllm_mha_kv", "kv_cache_dtype",
     "attention_hook.py:218"),
]


@pytest.mark.parametrize(("cc", "model", "args", "rule", "dest", "source"), REFUSED,
                         ids=[f"{c[0]}-{c[3]}-{next(iter(c[2].values()), 'none')}" for c in REFUSED])
def test_refused(cc: str, model: str, args: dict[str, Any], rule: str, dest: str, source: str | None) -> None:
    problem = the(validate_host(host(cc, model, args)), rule)
    assert problem.variable == f"sglang_args.{dest}"
    assert cc in problem.message and problem.fix
    if source:
        assert source in (problem.source or ""), problem.source
    else:  # stricter than SGLang: the message says so or names the platform the backend is for
        assert problem.source is None


ACCEPTED = [
    ("8.0", LLAMA, {"attention_backend": "fa3"}),  # FA3 serves non-MLA models on SM80
    ("8.9", LLAMA, {"quantization": "modelopt_fp8"}),
    ("8.6", QWEN_NEXT, {"attention_backend": "flex_attention"}),  # no hybrid backend list off Blackwell
    ("9.0", LLAMA, {"attention_backend": "fa3"}),
    ("9.0", LLAMA, {"attention_backend": "hpc_ops"}),
    ("9.0", LLAMA, {"attention_backend": "trtllm_mha", "kv_cache_dtype": "fp8_e4m3"}),
    ("9.0", DEEPSEEK, {"attention_backend": "flashmla"}),
    ("9.0", QWEN_NEXT, {"linear_attn_backend": "flashinfer"}),  # float32 state on SM90
    ("10.0", DEEPSEEK, {"attention_backend": "cutedsl_mla"}),
    ("10.3", DEEPSEEK, {"decode_attention_backend": "trtllm_mla"}),
    ("10.3", LLAMA, {"moe_runner_backend": "flashinfer_trtllm", "quantization": "mxfp8"}),
    # flashinfer_megamoe needs attn_dp_size == tp_size and one of its architectures (server.moe): Qwen3.5's NVFP4 checkpoint
    # as Qwen3MoeForCausalLM (probe-confirmed accepted on a B200; Llama is refused at moe_hook.py:258).
    ("10.0", "nvidia/Qwen3.5-397B-A17B-NVFP4", {
        "kv_cache_dtype": "nvfp4", "moe_a2a_backend": "flashinfer_megamoe", "tp_size": 8, "attn_dp_size": 8,
        "json_model_override_args": '{"architectures": ["Qwen3MoeForCausalLM"]}'}),
    ("10.0", QWEN_NEXT, {"attention_backend": "fa4"}),
    ("10.0", QWEN_NEXT, {"linear_attn_backend": "flashinfer", "mamba_ssm_dtype": "bfloat16"}),
    ("10.0", QWEN_NEXT_NVFP4, {}),  # SM100 has the trtllm-gen MoE kernels SGLang picks
    ("11.0", LLAMA, {"kv_cache_dtype": "mxfp8"}),
    ("11.0", QWEN_NEXT_NVFP4, {"quantization": "modelopt_fp4"}),
    ("12.1", LLAMA, {"kv_cache_dtype": "nvfp4", "mm_attention_backend": "triton_attn"}),
    ("12.0", QWEN_NEXT, {"attention_backend": "trtllm_mha", "decode_attention_backend": "flashinfer"}),
]


@pytest.mark.parametrize(("cc", "model", "args"), ACCEPTED, ids=[f"{c[0]}-{'-'.join(map(str, c[2].values())) or 'none'}"
                                                                 for c in ACCEPTED])
def test_accepted(cc: str, model: str, args: dict[str, Any]) -> None:
    result = validate_host(host(cc, model, args))
    assert result.ok and not result.warnings, format_report("host", result)


def test_every_profile_has_a_family_and_the_documented_capabilities() -> None:
    assert {(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)} <= set(PROFILES)
    assert {p.family for p in PROFILES.values()} == {"sm8x", "sm90", "sm10x", "sm110", "sm12x"}
    for refusal in (r for p in PROFILES.values() for table in (p.attention, p.moe_runners, p.kv_cache, p.mm_attention)
                    for r in table.values()):
        assert refusal.why and (refusal.source is None or re.match(r"sglang/srt/\S+\.py:\d", refusal.source))
    for least, source in QUANT_MIN_CAPABILITY.values():
        assert 80 <= least <= 100 and "layers/quantization/" in source


def test_pre_ampere_is_refused() -> None:
    problem = the(validate_host(host("7.5")), "arch.unsupported")
    assert problem.variable == "nvidia_gpu_compute_capability" and "7.5" in problem.message


@pytest.mark.parametrize("cc", ["12.2", "9.5", "10.1", "13.0"])
def test_capability_without_a_profile_warns_never_passes_in_silence(cc: str) -> None:
    result = validate_host(host(cc, args={"attention_backend": "fa3"}))
    problem = the(result, "arch.unknown", "warning")
    assert result.ok and problem.variable == "nvidia_gpu_compute_capability" and "NOT checked" in problem.message


# --- strict compute capability parsing ----------------------------------------------------------------------

STRICT = re.compile(r"[1-9][0-9]?\.[0-9]")


@pytest.mark.parametrize("text", ["12.0", "12.1", "10.3", "8.6", "9.0"])
def test_parse_accepts(text: str) -> None:
    assert ".".join(map(str, parse_compute_capability(text))) == text


@pytest.mark.parametrize("text", ["12.10", "12", "12.0.0", " 12.0", "12.0 ", "012.0", "12,0", "sm120", "", "１２.０", "+9.0"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_compute_capability(text)


@given(st.text(alphabet="0123456789.-+ ,e\n", max_size=7) | st.text(max_size=6))
def test_parse_accepts_exactly_major_dot_one_digit(text: str) -> None:
    try:
        parsed = parse_compute_capability(text)
    except ValueError:
        assert not STRICT.fullmatch(text)
    else:
        assert STRICT.fullmatch(text) and f"{parsed[0]}.{parsed[1]}" == text


@given(st.floats() | st.integers() | st.booleans() | st.none() | st.lists(st.text(max_size=3), max_size=2))
def test_non_strings_are_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_compute_capability(value)


@pytest.mark.parametrize("value", [12.0, 12.1, 12, 10.3, True])
def test_yaml_numbers_are_refused_with_quote_it(value: Any) -> None:
    problem = the(validate_host(host(value)), "host.hardware")
    assert problem.variable == "nvidia_gpu_compute_capability" and "nvidia_gpu_compute_capability" in problem.message
    assert "quote it" in problem.fix


# --- will the weights fit -----------------------------------------------------------------------------------

H100_MIB = 81559  # 85.5e9 bytes


def test_weights_larger_than_a_gpu_are_refused_naming_the_numbers() -> None:
    problem = the(validate_host(host("9.0", LLAMA70, nvidia_gpu_memory_mib=H100_MIB)), "hardware.fit")
    assert problem.variable == "sglang_args.tp_size" and problem.value == 1
    assert "131 GiB" in problem.message and "tp_size=1" in problem.message and str(H100_MIB) in problem.message
    assert "nvidia_gpu_memory_mib" in problem.message
    assert "at least 2 GPUs" in problem.fix and "quantized" in problem.fix


def test_weights_split_over_tp_times_pp_fit() -> None:
    assert validate_host(host("9.0", LLAMA70, {"tp_size": 2}, nvidia_gpu_memory_mib=H100_MIB)).ok
    assert validate_host(host("9.0", LLAMA70, {"pp_size": 2}, nvidia_gpu_memory_mib=H100_MIB)).ok


def test_mem_fraction_static_is_the_share_when_set() -> None:
    result = validate_host(host("9.0", LLAMA70, {"tp_size": 2, "mem_fraction_static": 0.8}, nvidia_gpu_memory_mib=H100_MIB))
    problem = the(result, "hardware.fit")
    assert "mem_fraction_static=0.8" in problem.message and "mem_fraction_static" in problem.fix
    assert validate_host(host("9.0", LLAMA70, {"tp_size": 4, "mem_fraction_static": 0.8}, nvidia_gpu_memory_mib=H100_MIB)).ok


@pytest.mark.parametrize("hostvars", [
    {},  # no memory known
    {"sglang_model_path": "/srv/models/private", "sglang_model_architecture": "LlamaForCausalLM"},  # size unknown
    {"sglang_model_quantization": "fp8"},  # not the table's format: size unknown
], ids=["no-memory", "unknown-model", "other-format"])
def test_fit_is_skipped_without_both_numbers(hostvars: dict[str, Any]) -> None:
    memory = {} if not hostvars else {"nvidia_gpu_memory_mib": 16384}
    assert "hardware.fit" not in errors(validate_host(host("9.0", LLAMA70, **memory, **hostvars)))


@pytest.mark.parametrize("value", ["lots", 0, -1, 1.5, True, "80GB"])
def test_gpu_memory_must_be_whole_mib(value: Any) -> None:
    problem = the(validate_host(host("9.0", LLAMA, nvidia_gpu_memory_mib=value)), "host.hardware")
    assert problem.variable == "nvidia_gpu_memory_mib"


# --- the host's gathered facts (the contract's shape) -------------------------------------------------------


def facts(n: int = 8, cc: str = "12.0", memory: int | None = 97887, link: str = "NODE", p2p: str = "OK",
          iommu: str = "off", **extra: Any) -> dict[str, Any]:
    """nvidia_gpu_facts of schema 1, exactly as blackwell.sglang.gpu_facts returns them."""
    gpus = [{"index": k, "uuid": f"GPU-{k:08x}-6f0e", "bus_id": f"0000:{0x18 + k:02x}:00.0", "minor": k,
             "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_capability": cc, "memory_mib": memory}
            for k in range(n)]
    pairs = [f"{a},{b}" for a in range(n) for b in range(a + 1, n)]
    return {"schema": 1, "driver_loaded": True, "driver_version": "580.95.05", "cuda_version": "13.0", "gpus": gpus,
            "gpu_count": n, "compute_capabilities": [cc],
            "topology": {"links": dict.fromkeys(pairs, link), "p2p_read": dict.fromkeys(pairs, p2p),
                         "nvlink": link.startswith("NV")},
            "iommu": iommu, "nvswitch_pci": [], "nvswitch_devices": [], "infiniband_devices": [], "imex_channels": [],
            "os": {"id": "debian", "version_id": "12", "codename": "bookworm"},
            "python": {"path": "/usr/bin/python3", "version": "3.11.2", "headers": True}, "compilers": {"cc": "/usr/bin/gcc"},
            **extra}


def test_no_facts_means_the_declarations_alone() -> None:
    for args in ({"tp_size": 2}, {"attention_backend": "fa3"}):
        with_none = validate_host(host("12.0", LLAMA, args, nvidia_gpu_facts=None))
        without = validate_host(host("12.0", LLAMA, args))
        assert [p.as_dict() for p in with_none.errors + with_none.warnings] == [p.as_dict() for p in without.errors + without.warnings]


def test_matching_facts_pass() -> None:
    assert validate_host(host("12.0", LLAMA, {"tp_size": 8}, nvidia_gpu_facts=facts())).ok


def test_gpu_count_differs_from_the_facts() -> None:
    problem = the(validate_host(host("12.0", LLAMA, nvidia_gpu_facts=facts(n=6))), "host.facts")
    assert problem.variable == "nvidia_gpu_count" and "nvidia_gpu_count=8 (inventory)" in problem.message
    assert "lists 6 GPU(s)" in problem.message and "nvidia_gpu_facts.gpu_count" in problem.message


def test_compute_capability_differs_from_the_facts() -> None:
    problem = the(validate_host(host("12.0", LLAMA, nvidia_gpu_facts=facts(cc="10.0"))), "host.facts")
    assert problem.variable == "nvidia_gpu_compute_capability"
    assert "'12.0' (inventory)" in problem.message and "'10.0'" in problem.message and '"10.0"' in problem.fix


def test_a_host_mixing_capabilities_is_refused() -> None:
    mixed = facts(n=2)
    mixed["gpus"][1]["compute_capability"] = "8.9"
    mixed["compute_capabilities"] = ["12.0", "8.9"]
    problem = the(validate_host(host("12.0", LLAMA, nvidia_gpu_count=2, nvidia_gpu_facts=mixed)), "host.facts")
    assert "12.0" in problem.message and "8.9" in problem.message


def test_facts_without_a_driver_compare_nothing() -> None:
    none = facts(n=0) | {"driver_loaded": False, "driver_version": None, "cuda_version": None, "compute_capabilities": []}
    result = validate_host(host("12.0", LLAMA, nvidia_gpu_facts=none))
    assert result.ok and not result.warnings


@pytest.mark.parametrize("bad", ["text", {"schema": 2, "gpus": []}, {"schema": 1, "driver_loaded": True, "gpus": "0"}])
def test_malformed_facts_warn(bad: Any) -> None:
    result = validate_host(host("12.0", LLAMA, nvidia_gpu_facts=bad))
    assert result.ok and the(result, "host.facts", "warning").variable == "nvidia_gpu_facts"


def test_facts_memory_feeds_the_fit_check() -> None:
    problem = the(validate_host(host("9.0", LLAMA70, nvidia_gpu_count=8, nvidia_gpu_facts=facts(cc="9.0", memory=H100_MIB))),
                  "hardware.fit")
    assert "nvidia_gpu_facts" in problem.message
    smaller = facts(cc="9.0", memory=H100_MIB)
    smaller["gpus"][1]["memory_mib"] = 40960  # the smallest of the instance's GPUs counts
    assert "hardware.fit" in errors(validate_host(host("9.0", LLAMA70, {"tp_size": 2}, nvidia_gpu_facts=smaller)))
    assert validate_host(host("9.0", LLAMA70, {"tp_size": 2}, nvidia_gpu_facts=facts(cc="9.0", memory=H100_MIB))).ok


def test_unknown_memory_in_the_facts_skips_the_fit_check() -> None:  # GB10 prints [N/A]
    assert validate_host(host("12.1", LLAMA70, nvidia_gpu_count=1, nvidia_gpu_facts=facts(n=1, cc="12.1", memory=None))).ok


def test_declared_memory_wins_over_the_facts() -> None:
    result = validate_host(host("9.0", LLAMA70, nvidia_gpu_memory_mib=200000, nvidia_gpu_facts=facts(cc="9.0", memory=H100_MIB)))
    assert result.ok, format_report("host", result)


# --- PCIe peer-to-peer --------------------------------------------------------------------------------------


def test_pcie_without_p2p_warns_unless_custom_all_reduce_is_off() -> None:
    problem = the(validate_host(host("12.0", LLAMA, {"tp_size": 2}, nvidia_gpu_facts=facts(p2p="NS"))), "host.p2p", "warning")
    assert problem.variable == "sglang_args.disable_custom_all_reduce" and "GPU0-GPU1 NS" in problem.message
    assert "custom_all_reduce_utils.py" in problem.source
    quiet = validate_host(host("12.0", LLAMA, {"tp_size": 2, "disable_custom_all_reduce": True}, nvidia_gpu_facts=facts(p2p="NS")))
    assert quiet.ok and not quiet.warnings


def test_iommu_translation_over_pcie_needs_nccl_p2p_disable() -> None:
    problem = the(validate_host(host("12.0", LLAMA, {"tp_size": 4}, nvidia_gpu_facts=facts(iommu="translated"))), "host.iommu")
    assert problem.variable == "sglang_env.NCCL_P2P_DISABLE" and "ready timeout" in problem.message
    assert 'NCCL_P2P_DISABLE: "1"' in problem.fix and "Stricter than SGLang" in problem.message
    fixed = host("12.0", LLAMA, {"tp_size": 4}, nvidia_gpu_facts=facts(iommu="translated"), sglang_env={"NCCL_P2P_DISABLE": "1"})
    assert validate_host(fixed).ok
    wrong = host("12.0", LLAMA, {"tp_size": 4}, nvidia_gpu_facts=facts(iommu="translated"), sglang_env={"NCCL_P2P_DISABLE": "true"})
    assert errors(validate_host(wrong)) == ["host.iommu"]  # NCCL reads "true" as 0


@pytest.mark.parametrize("iommu", ["off", "passthrough"])
def test_iommu_off_or_passthrough_is_fine(iommu: str) -> None:
    assert validate_host(host("12.0", LLAMA, {"tp_size": 4}, nvidia_gpu_facts=facts(iommu=iommu))).ok


def test_nvlink_pairs_need_neither() -> None:
    result = validate_host(host("10.0", LLAMA, {"tp_size": 8}, nvidia_gpu_facts=facts(cc="10.0", link="NV18", p2p="NS",
                                                                                          iommu="translated")))
    assert result.ok and not result.warnings


def test_one_gpu_per_tp_group_needs_no_p2p() -> None:
    assert validate_host(host("12.0", LLAMA, {"dp_size": 4}, nvidia_gpu_facts=facts(p2p="NS", iommu="translated"))).ok


def test_only_pairs_inside_a_tp_group_count() -> None:
    nvidia = facts()
    for key in nvidia["topology"]["p2p_read"]:  # GPUs 0-1 and 2-3 have P2P, nothing across
        nvidia["topology"]["p2p_read"][key] = "OK" if key in ("0,1", "2,3") else "CNS"
    result = validate_host(host("12.0", LLAMA, {"tp_size": 2, "dp_size": 2}, nvidia_gpu_facts=copy.deepcopy(nvidia)))
    assert result.ok and not result.warnings, format_report("host", result)
    assert the(validate_host(host("12.0", LLAMA, {"tp_size": 4}, nvidia_gpu_facts=nvidia)), "host.p2p", "warning")


@pytest.mark.parametrize(("value", "on"), [("1", True), ("2", True), ("0", False), ("true", False), ("", False), (" 1", True)])
def test_nccl_flag_reads_like_nccl(value: str, on: bool) -> None:
    assert nccl_flag({"NCCL_P2P_DISABLE": value}, "NCCL_P2P_DISABLE") is on
