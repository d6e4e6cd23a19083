"""The attention backends as each SGLang check reads them, found by comparing the resolver with SGLang's resolved values
(tests/conformance/resolution.py): an NVFP4 KV cache's pair (handle_nvfp4_prefill_kv_dequant_dtype, kv_cache_hook.py:35-92,
pipeline.py:241: decode trtllm_mha, prefill flashinfer or native trtllm_mha), the base device cpu / hpu set first
(platform_hook.py:158-183, pipeline.py:205-206), deterministic inference's fill (overrides.py:1093-1123, pipeline.py:240)
and a shared prefill/decode pair, which replaces the base (overrides.py:1127-1131). The checks after them: enable_mis
(attention_hook.py:573), SM100's native NVFP4 limits (kv_cache_hook.py:139-265, PD disaggregation :252), the NVFP4
prefill choice (:53), the KV4 lists (:313), UNO (speculative_hook.py:453, :606-611), prefill_only_disable_kv_cache
(kv_cache_hook.py:344), the paged tree draft (speculative_hook.py:1278), NGRAM's paged tree (:1361) and the page size
(validation_hook.py:244).

Every verdict here is probe-confirmed on SGLang 0.5.23 and, where the release has the options, 0.5.20-0.5.22; the
corpus cases are the ``resolve-a-...`` block of tests/conformance/cases.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from test_sglang_rules_fuzz10k_s3 import errors, with_memory
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT
from test_sglang_rules_resolution_B import context
from test_sglang_rules_seed0_2000 import host

RTX_PRO_6000, B200, B300, A100, H200 = 97887, 183359, 275040, 81920, 143771
NVFP4_RELEASES = ["0.5.21", "0.5.22", "0.5.23"]
ALL = ["0.5.20", *NVFP4_RELEASES]


def on(args: dict[str, Any], cc: str = "12.0", mib: int = RTX_PRO_6000, version: str = "0.5.23", model: str = LLAMA,
       gpus: int = 1) -> dict[str, Any]:
    """``gpus`` GPUs of compute capability ``cc`` and ``mib`` MiB serving ``model``."""
    return with_memory(host(args, version, model=model, cc=cc, gpus=gpus), mib)


# --- the resolver: what each check reads -----------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "cc", "model", "pair", "base"), [
    ({"kv_cache_dtype": "nvfp4"}, "12.0", LLAMA, ("flashinfer", "trtllm_mha"), "flashinfer"),  # fuzz-4-00909
    ({"kv_cache_dtype": "nvfp4"}, "10.0", LLAMA, ("trtllm_mha", "trtllm_mha"), "trtllm_mha"),  # native: the pair is the base
    ({"kv_cache_dtype": "nvfp4", "attention_backend": "flashinfer"}, "10.0", LLAMA, ("flashinfer", "trtllm_mha"),
     "flashinfer"),
    ({"kv_cache_dtype": "nvfp4", "enable_deterministic_inference": True}, "10.0", LLAMA, ("flashinfer", "trtllm_mha"),
     "flashinfer"),  # the fill selects the FP8 workspace
    ({"kv_cache_dtype": "nvfp4", "prefill_kv_cache_dequant_dtype": "fp8_e4m3"}, "10.0", LLAMA,
     ("flashinfer", "trtllm_mha"), "trtllm_mha"),  # the base: SGLang's default
    ({"kv_cache_dtype": "nvfp4"}, "12.0", QWEN3_NEXT, ("flashinfer", "trtllm_mha"), "flashinfer"),
    ({"device": "cpu"}, "12.0", LLAMA, ("torch_native", "torch_native"), "torch_native"),  # fuzz-4-01128
    ({"device": "cpu", "attention_backend": "triton"}, "12.0", LLAMA, ("triton", "triton"), "triton"),
    ({"device": "hpu", "attention_backend": "flashinfer"}, "12.0", LLAMA, ("torch_native", "torch_native"), "torch_native"),
    ({"enable_deterministic_inference": True}, "8.0", LLAMA, ("fa3", "fa3"), "fa3"),  # fuzz-0-09193 (seed 0)
    ({"enable_deterministic_inference": True}, "10.3", LLAMA, ("flashinfer", "flashinfer"), "flashinfer"),  # fuzz-2-05138
    ({"enable_deterministic_inference": True}, "12.0", DEEPSEEK, ("triton", "triton"), "triton"),
    ({"attention_backend": "triton", "prefill_attention_backend": "llada2_cfg_flashinfer",
      "decode_attention_backend": "llada2_cfg_flashinfer"}, "12.0", LLAMA,
     ("llada2_cfg_flashinfer", "llada2_cfg_flashinfer"), "llada2_cfg_flashinfer"),  # fuzz-1-05769
    ({"attention_backend": "triton", "decode_attention_backend": "flashinfer"}, "12.0", LLAMA, ("triton", "flashinfer"),
     "triton"),
    ({}, "10.0", LLAMA, ("trtllm_mha", "trtllm_mha"), "trtllm_mha"),
    ({}, "10.0", QWEN3_NEXT, ("triton", "triton"), "triton"),  # the SM100 override's triton
])
def test_resolved_backends(args: dict[str, Any], cc: str, model: str, pair: tuple[str, str], base: str) -> None:
    ctx = context(on(args, cc, model=model, gpus=8))
    assert resolve.resolved_attention_backends(ctx) == pair
    assert resolve.resolved_base_attention_backend(ctx) == base


def test_nvfp4_is_new_in_0_5_21() -> None:
    ctx = context(on({"kv_cache_dtype": "nvfp4"}, version="0.5.20"))
    assert resolve.resolved_attention_backends(ctx) == ("flashinfer", "flashinfer")


@pytest.mark.parametrize(("args", "filled"), [
    ({}, ""),
    ({"device": "npu"}, None),  # the NPU hook fills in its own defaults
    ({"device": "cpu"}, resolve.CPU_ATTENTION_BACKEND),
    ({"enable_deterministic_inference": True}, "flashinfer"),
    ({"attention_backend": "fa4"}, "fa4"),
])
def test_filled_attention_backend(args: dict[str, Any], filled: str | None) -> None:
    assert resolve.filled_attention_backend(context(on(args))) == filled


@pytest.mark.parametrize(("args", "cc", "page"), [
    ({"enable_deterministic_inference": True, "page_size": 8192}, "10.3", 8192),  # fuzz-2-05138: flashinfer keeps it
    ({"page_size": 8192}, "10.3", 64),  # trtllm_mha, SGLang's default there
    ({"enable_deterministic_inference": True, "attention_backend": "trtllm_mha", "page_size": 100}, "10.3", 64),
    ({"device": "cpu", "page_size": 100}, "10.3", 100),
    ({"kv_cache_dtype": "nvfp4", "page_size": 100}, "12.0", 64),
])
def test_resolved_page_size(args: dict[str, Any], cc: str, page: int) -> None:
    assert resolve.resolved_page_size(context(on(args, cc))) == page


# --- A1: an NVFP4 KV cache decodes with trtllm_mha (kv_cache_hook.py:77-89) ------------------------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "cc", "refused_from"), [
    ({}, "12.0", "0.5.21"),  # fuzz-4-00909's class: decode trtllm_mha (0.5.20 refuses the cache itself: kv4.attention)
    ({"attention_backend": "flashinfer"}, "12.0", "0.5.21"),
    ({}, "10.0", "0.5.20"),  # SGLang's default there, trtllm_mha
    ({"prefill_kv_cache_dequant_dtype": "fp8_e4m3"}, "10.0", "0.5.20"),  # decode trtllm_mha (0.5.20: the default)
])
def test_mis_with_an_nvfp4_cache(version: str, args: dict[str, Any], cc: str, refused_from: str) -> None:
    found = errors(on({"kv_cache_dtype": "nvfp4", "enable_mis": True, **args}, cc, version=version),
                   "server.multi_item_scoring")
    assert bool(found) is (version >= refused_from)
    if found and cc == "12.0":
        assert "kv_cache_dtype nvfp4 decodes with trtllm_mha" in found[0].message


@pytest.mark.parametrize("version", NVFP4_RELEASES)
@pytest.mark.parametrize(("args", "cc", "refused"), [
    ({"disaggregation_mode": "prefill"}, "10.0", True),
    ({"disaggregation_mode": "decode", "prefill_kv_cache_dequant_dtype": "fp8_e4m3"}, "10.3", True),  # mixed: still native
    ({"disaggregation_mode": "prefill"}, "12.0", False),  # not native off SM100
    ({}, "10.0", False),
])
def test_native_nvfp4_refuses_pd_disaggregation(version: str, args: dict[str, Any], cc: str, refused: bool) -> None:
    mib = RTX_PRO_6000 if cc == "12.0" else B200
    found = [p for p in errors(on({"kv_cache_dtype": "nvfp4", **args}, cc, mib, version), "server.kv_cache")
             if p.source.endswith("kv_cache_hook.py:252")]
    assert bool(found) is refused
    if found:
        assert found[0].variable == "sglang_args.disaggregation_mode"


@pytest.mark.parametrize(("capture", "refused"), [(True, False), (False, True)])
def test_native_nvfp4_draft_backend_under_the_capture(capture: bool, refused: bool) -> None:
    args = {"kv_cache_dtype": "nvfp4", "speculative_algorithm": "EAGLE3", "speculative_draft_attention_backend": "flashinfer"}
    if capture:
        args["enable_return_aux_hidden_states"] = True  # resets the algorithm first (validation_hook.py:748-753)
    found = [p for p in errors(on(args, "10.0", B200), "server.kv_cache") if p.source.endswith("kv_cache_hook.py:226")]
    assert bool(found) is refused


@pytest.mark.parametrize("version", NVFP4_RELEASES)
@pytest.mark.parametrize(("args", "cc", "model", "refused"), [
    ({"enable_deterministic_inference": True, "tp_size": 8}, "12.0", DEEPSEEK, True),  # the fill: triton
    ({"device": "cpu"}, "12.0", LLAMA, True),  # intel_amx / torch_native
    ({"device": "hpu"}, "12.0", LLAMA, True),
    ({"enable_deterministic_inference": True}, "10.0", LLAMA, False),  # flashinfer: the FP8 workspace
    ({"enable_deterministic_inference": True}, "12.0", LLAMA, False),
    ({"tp_size": 8}, "12.0", DEEPSEEK, False),
])
def test_nvfp4_prefill_choice_on_the_filled_base(version: str, args: dict[str, Any], cc: str, model: str,
                                                 refused: bool) -> None:
    found = [p for p in errors(on({"kv_cache_dtype": "nvfp4", **args}, cc, version=version, model=model, gpus=8),
                               "server.kv_cache") if p.source.endswith("kv_cache_hook.py:53")]
    assert bool(found) is refused


def test_the_filled_base_names_itself() -> None:
    found = errors(on({"kv_cache_dtype": "nvfp4", "enable_deterministic_inference": True, "tp_size": 8}, model=DEEPSEEK,
                      gpus=8), "server.kv_cache")
    assert "triton provides neither (what deterministic inference fills in" in found[0].message
    found = errors(on({"kv_cache_dtype": "nvfp4", "device": "cpu"}), "server.kv_cache")
    assert "(device cpu's attention backend" in found[0].message


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "cc", "refused"), [
    ({"enable_deterministic_inference": True}, "10.0", True),  # flashinfer, not the trtllm_mha default
    ({}, "10.0", False),
    ({"device": "cpu"}, "12.0", False),  # torch_native (a host without AMX), not flashinfer
    ({}, "12.0", True),
])
def test_fp4_mx_on_the_filled_base(version: str, args: dict[str, Any], cc: str, refused: bool) -> None:
    mib = RTX_PRO_6000 if cc == "12.0" else B200
    found = errors(on({"kv_cache_dtype": "fp4_mx_block16", **args}, cc, mib, version), "kv4.attention")
    assert bool(found) is refused


# --- A2: device cpu on a GPU host ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "cc", "rule", "refused"), [
    ({"enable_mis": True}, "12.0", "server.multi_item_scoring", True),  # a MISSED: flashinfer assumed
    ({"enable_mis": True, "attention_backend": "flashinfer"}, "12.0", "server.multi_item_scoring", False),
    ({"speculative_algorithm": "NGRAM", "page_size": 16}, "12.0", "server.speculative", True),
    ({"speculative_algorithm": "NGRAM", "page_size": 16, "attention_backend": "flashinfer"}, "12.0",
     "server.speculative", False),
    ({"speculative_algorithm": "EAGLE", "page_size": 16,
      "speculative_draft_model_path": "tests/conformance/models/Llama-3.1-8B-Instruct"}, "12.0", "server.speculative", True),
    ({"prefill_only_disable_kv_cache": True, "is_embedding": True, "chunked_prefill_size": -1,
      "disable_radix_cache": True}, "9.0", "server.kv_cache", True),
    ({"speculative_algorithm": "UNO", "speculative_num_draft_tokens": 4,
      "uno_lora_path": "tests/conformance/models/Llama-3.1-8B-Instruct"}, "9.0", "server.speculative", True),
])
def test_device_cpu_backend(version: str, args: dict[str, Any], cc: str, rule: str, refused: bool) -> None:
    mib = H200 if cc == "9.0" else RTX_PRO_6000
    assert bool(errors(on({"device": "cpu", **args}, cc, mib, version), rule)) is refused


def test_uno_on_cuda_only() -> None:
    found = errors(on({"device": "cpu", "speculative_algorithm": "UNO", "speculative_num_draft_tokens": 4,
                       "uno_lora_path": "x"}, "9.0", H200), "server.speculative")
    assert [p.source for p in found] == ["sglang/srt/arg_groups/speculative_hook.py:453"]


def test_device_hpu_overrides_the_written_backend() -> None:
    found = errors(on({"device": "hpu", "enable_mis": True, "attention_backend": "flashinfer"}), "server.multi_item_scoring")
    assert "not torch_native (device hpu's attention backend" in found[0].message


# --- A3 / A5: deterministic inference's fill ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "cc", "rule", "refused"), [
    ({"speculative_algorithm": "NGRAM", "page_size": 16}, "8.0", "server.speculative", True),  # fa3
    ({"prefill_only_disable_kv_cache": True, "is_embedding": True, "chunked_prefill_size": -1,
      "disable_radix_cache": True}, "8.0", "server.kv_cache", False),  # fa3 is an FA prefill backend
    ({"page_size": 100}, "10.3", "memory.chunked_page", True),  # flashinfer keeps page 100 against 8192
    ({"page_size": 8192}, "10.3", "memory.chunked_page", False),  # fuzz-2-05138
    ({"speculative_algorithm": "NGRAM", "page_size": 16}, "10.3", "server.speculative", False),  # flashinfer
])
def test_deterministic_fill(version: str, args: dict[str, Any], cc: str, rule: str, refused: bool) -> None:
    mib = A100 if cc == "8.0" else B300
    assert bool(errors(on({"enable_deterministic_inference": True, **args}, cc, mib, version), rule)) is refused


# --- A4: a shared prefill/decode backend replaces the written base (overrides.py:1127-1131) ----------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("base", "pair", "refused"), [
    ("flashinfer", "triton", True),
    ("triton", "flashinfer", False),  # a false alarm before
    ("flashinfer", "flashinfer", False),
])
def test_ngram_paged_tree_on_the_shared_pair(version: str, base: str, pair: str, refused: bool) -> None:
    args = {"attention_backend": base, "prefill_attention_backend": pair, "decode_attention_backend": pair,
            "speculative_algorithm": "NGRAM", "page_size": 16}
    assert bool(errors(on(args, version=version), "server.speculative")) is refused


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_llada2_pair_refuses_the_paged_tree(version: str) -> None:
    args = {"attention_backend": "triton", "prefill_attention_backend": "llada2_cfg_flashinfer",
            "decode_attention_backend": "llada2_cfg_flashinfer", "speculative_algorithm": "EAGLE", "page_size": 16,
            "speculative_draft_model_path": "tests/conformance/models/Llama-3.1-8B-Instruct"}
    found = errors(on(args, version=version), "server.speculative")
    assert "not llada2_cfg_flashinfer" in found[0].message


# --- fa3 with kv_cache_dtype fp8_e5m2 falls back to triton (overrides.py:1263-1269, attention_hook.py:239) -------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "rule", "refused"), [
    ({"prefill_only_disable_kv_cache": True, "is_embedding": True, "chunked_prefill_size": -1,
      "disable_radix_cache": True}, "server.kv_cache", True),
    ({"prefill_attention_backend": "fa3", "prefill_only_disable_kv_cache": True, "is_embedding": True,
      "chunked_prefill_size": -1, "disable_radix_cache": True}, "server.kv_cache", False),  # the base only
    ({"speculative_algorithm": "UNO", "speculative_num_draft_tokens": 4, "uno_lora_path": "x"}, "server.speculative", True),
])
def test_fa3_fp8_e5m2_fallback(version: str, args: dict[str, Any], rule: str, refused: bool) -> None:
    assert bool(errors(on({"kv_cache_dtype": "fp8_e5m2", **args}, "9.0", H200, version), rule)) is refused


def test_fa3_fp8_e5m2_resolves_triton() -> None:
    ctx = context(on({"kv_cache_dtype": "fp8_e5m2"}, "9.0", H200))
    assert resolve.resolved_attention_backends(ctx) == ("triton", "triton")
    assert resolve.resolved_base_attention_backend(ctx) == "triton"
    ctx = context(on({"kv_cache_dtype": "fp8_e4m3"}, "9.0", H200))
    assert resolve.resolved_attention_backends(ctx) == ("fa3", "fa3")
