"""What the 10,000-case differential fuzz run of seed 1 (``differential.py --cases 10000 --seed 1``) found: five MISSED
classes (SGLang 0.5.23 refuses, the validator accepted) and one false alarm (STRICTER-UNEXPLAINED), on what the
conformance corpus cannot show: the older releases, the edges of each condition, the messages.

Each refusal and its neighbour is probe-confirmed by a case of tests/conformance/cases.yaml
(``fuzzed-deterministic-device-cpu``, ``fuzzed-dspark-device-cpu``, ``fuzzed-language-model-only-llama``,
``fuzzed-decode-host-receive-threshold-colocated``, ``fuzzed-fa4-page-chunked-prefill-one``,
``fuzzed-unified-memory-eagle3-capture-accepted`` and the cases after them).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_seed0_2000 import LLAMA, QWEN3_NEXT, host, sources

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN35 = "nvidia/Qwen3.5-397B-A17B-NVFP4"
DRAFT = {"speculative_draft_model_path": LLAMA}


def errors(hostvars: dict[str, Any], where: str) -> list[Any]:
    """The errors whose source cites ``where``."""
    return [p for p in validate_host(hostvars).errors if where in (p.source or "")]


# --- deterministic inference and the platform's attention backend (platform_hook.py:158-184, overrides.py:1119) ----


@pytest.mark.parametrize("version", ["0.5.20", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "variable"), [
    ({"device": "cpu", "enable_deterministic_inference": True}, "sglang_args.device"),  # intel_amx filled in
    ({"device": "cpu", "enable_deterministic_inference": True, "prefill_attention_backend": "triton",
      "decode_attention_backend": "triton"}, "sglang_args.device"),  # attention_backend itself still unset
    ({"device": "hpu", "enable_deterministic_inference": True, "attention_backend": "triton"}, "sglang_args.device"),
    ({"device": "cpu", "rl_on_policy_target": "fsdp"}, "sglang_args.device"),  # rl_on_policy_target turns it on
    ({"rl_on_policy_target": "fsdp", "attention_backend": "flex_attention"}, "sglang_args.attention_backend"),
    ({"device": "cpu", "enable_deterministic_inference": True, "attention_backend": "triton"}, None),  # kept
    ({"device": "cuda", "enable_deterministic_inference": True}, None),  # SGLang picks a deterministic backend
    ({"enable_deterministic_inference": True}, None),
    ({"device": "cpu"}, None),
    ({"device": "xpu", "enable_deterministic_inference": True}, None),  # the XPU hook sets no attention backend
])
def test_deterministic_inference_and_the_devices_backend(version: str, args: dict[str, Any],
                                                         variable: str | None) -> None:
    found = errors(host(args, version, cc="8.9", gpus=1), "overrides.py:1119")
    assert [p.variable for p in found] == ([variable] if variable else [])
    if found:
        assert found[0].rule == "server.combination"


def test_deterministic_device_messages_name_the_backend_sglang_sets() -> None:
    cpu = errors(host({"device": "cpu", "enable_deterministic_inference": True}, cc="8.9", gpus=1), "overrides.py:1119")
    assert "intel_amx" in cpu[0].message and "set sglang_args.attention_backend: triton" in cpu[0].fix
    hpu = errors(host({"device": "hpu", "enable_deterministic_inference": True, "attention_backend": "fa3"}, cc="8.9",
                      gpus=1), "overrides.py:1119")
    assert "torch_native" in hpu[0].message and "whatever attention_backend says" in hpu[0].message
    assert "attention_backend" not in hpu[0].fix  # no backend the host writes survives device hpu
    rl = errors(host({"rl_on_policy_target": "fsdp", "attention_backend": "flex_attention"}, cc="8.9", gpus=1),
                "overrides.py:1119")
    assert "(which rl_on_policy_target turns on)" in rl[0].message


def test_rl_on_policy_target_reaches_the_absorbed_mla_check() -> None:
    found = errors(host({"rl_on_policy_target": "fsdp", "attention_backend": "flashinfer"}, model=DEEPSEEK),
                   "attention_hook.py:645")
    assert [p.rule for p in found] == ["server.combination"]
    assert "rl_on_policy_target" in found[0].message


# --- DSpark's devices (speculative_hook.py:669-672; xpu from 0.5.23) ------------------------------------------------


@pytest.mark.parametrize(("device", "version", "refused"), [
    ("cpu", "0.5.23", True), ("cpu", "0.5.20", True), ("mps", "0.5.23", True), ("hpu", "0.5.23", True),
    ("xpu", "0.5.23", False), ("xpu", "0.5.22", True), ("xpu", "0.5.20", True),
    ("cuda", "0.5.23", False), ("cuda:1", "0.5.23", False), ("npu", "0.5.22", False), (None, "0.5.23", False),
])
def test_dspark_device(device: str | None, version: str, refused: bool) -> None:
    args = {"speculative_algorithm": "DSPARK", **DRAFT, **({"device": device} if device else {})}
    found = [p for p in validate_host(host(args, version, gpus=1)).errors
             if p.variable == "sglang_args.device" and "DSPARK" in p.message]
    assert bool(found) is refused
    if refused:
        line = "speculative_hook.py:670" if version == "0.5.23" else {"0.5.22": ":609", "0.5.20": ":523"}[version]
        assert line in (found[0].source or "")
        assert found[0].rule == "server.speculative"


def test_dspark_device_message_names_the_releases_devices() -> None:
    def message(version: str) -> str:
        hostvars = host({"speculative_algorithm": "DSPARK", **DRAFT, "device": "cpu"}, version, gpus=1)
        found = [p for p in validate_host(hostvars).errors if p.variable == "sglang_args.device"]
        return found[0].message
    assert "CUDA, NPU or XPU devices" in message("0.5.23")
    assert "CUDA or NPU devices" in message("0.5.22")


# --- --language-model-only's architectures (model_hook.py:1103-1109) -----------------------------------------------


@pytest.mark.parametrize(("model", "args", "version", "refused"), [
    (LLAMA, {}, "0.5.23", True),
    (LLAMA, {}, "0.5.20", True),
    (QWEN35, {}, "0.5.23", True),
    (DEEPSEEK, {}, "0.5.23", True),
    # json_model_override_args' list is what SGLang reads: any one supported architecture in it is enough.
    (LLAMA, {"json_model_override_args": '{"architectures": ["LlamaForCausalLM", "Cosmos3ForConditionalGeneration"]}'},
     "0.5.23", False),
    (LLAMA, {"json_model_override_args": '{"architectures": ["MuseGlimmerForConditionalGeneration"]}'}, "0.5.20", False),
    (LLAMA, {"json_model_override_args": '{"architectures": ["DeepseekV4ForCausalLM"]}'}, "0.5.22", False),
    (LLAMA, {"json_model_override_args": '{"architectures": ["DeepseekV4ForCausalLM"]}'}, "0.5.21", True),  # new in 0.5.22
    (LLAMA, {"json_model_override_args": '{"architectures": ["MistralForCausalLM"]}'}, "0.5.23", True),
    ("/models/private-model", {}, "0.5.23", False),  # config.json decides: the preflight
])
def test_language_model_only_architectures(model: str, args: dict[str, Any], version: str, refused: bool) -> None:
    found = errors(host({"language_model_only": True, **args}, version, model=model, cc="9.0"), "model_hook.py:1106")
    assert bool(found) is refused
    if refused:
        assert found[0].rule == "server.combination" and found[0].variable == "sglang_args.language_model_only"


def test_language_model_only_combination_is_reported_before_the_architecture() -> None:
    found = validate_host(host({"language_model_only": True, "language_only": True}, cc="9.0")).errors
    lmo = [p.source for p in found if "model_hook.py" in (p.source or "")]
    assert lmo == ["sglang/srt/arg_groups/model_hook.py:1094"]


# --- the decode host receive turns host_pool retraction on (pd_disaggregation_hook.py:68-80) ------------------------


@pytest.mark.parametrize(("version", "args", "where"), [
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.88}, "kv_cache_hook.py:357"),
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.0}, "kv_cache_hook.py:357"),
    ("0.5.22", {"disaggregation_decode_host_receive_threshold": 0.5}, "kv_cache_hook.py:357"),
    ("0.5.21", {"disaggregation_decode_host_receive_threshold": 0.5}, "kv_cache_hook.py:357"),  # above 0 in 0.5.21
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 1.0}, None),  # the default: off
    ("0.5.21", {"disaggregation_decode_host_receive_threshold": 0.0}, None),  # 0.5.21's default: off
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.88, "disaggregation_mode": "decode"}, None),
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.5, "disaggregation_mode": "decode",
                "disaggregation_decode_retraction_backup": "cpu_tensor"}, "pd_disaggregation_hook.py:75"),
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.5,
                "disaggregation_decode_retraction_backup": "cpu_tensor"}, "pd_disaggregation_hook.py:75"),  # first
    ("0.5.21", {"disaggregation_decode_host_receive_threshold": 0.5, "disaggregation_mode": "decode",
                "disaggregation_decode_retraction_backup": "cpu_tensor"}, "pd_disaggregation_hook.py:75 (0.5.22 :75, 0.5.21 :64)"),
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.5, "disaggregation_mode": "decode",
                "enable_pd_role_switch": True}, "pd_disaggregation_hook.py:70"),
    ("0.5.23", {"disaggregation_decode_host_receive_threshold": 0.5, "disaggregation_mode": "decode",
                "disaggregation_decode_retraction_backup": "none"}, None),  # host_pool replaces it, on decode
])
def test_decode_host_receive(version: str, args: dict[str, Any], where: str | None) -> None:
    found = [p for p in validate_host(host(args, version, gpus=1)).errors if p.rule == "server.minimum"]
    assert [where in (p.source or "") for p in found] == ([True] if where else [])


def test_written_host_pool_off_decode_stays_the_combination_rules() -> None:
    found = validate_host(host({"disaggregation_decode_host_receive_threshold": 0.5,
                                "disaggregation_decode_retraction_backup": "host_pool"}, gpus=1)).errors
    assert [(p.rule, p.variable) for p in found] == [
        ("server.combination", "sglang_args.disaggregation_decode_retraction_backup")]


@pytest.mark.parametrize(("version", "share", "refused"), [
    ("0.5.23", 0.5, True), ("0.5.23", 1.0, False), ("0.5.21", 1.0, True), ("0.5.21", 0.0, False)])
def test_decode_offload_kvcache_with_the_host_receive(version: str, share: float, refused: bool) -> None:
    args = {"disaggregation_decode_host_receive_threshold": share, "disaggregation_mode": "decode",
            "disaggregation_decode_enable_offload_kvcache": True, "hicache_storage_backend": "file"}
    found = [p for p in validate_host(host(args, version, gpus=1)).errors if p.rule == "server.kv_cache"]
    assert [p.variable for p in found] == (["sglang_args.disaggregation_decode_host_receive_threshold"] if refused else [])
    if refused:
        assert "kv_cache_hook.py:409" in (found[0].source or "")


# --- fa4 sets page 128 on SM100 for a non-MLA model (overrides.py:1273-1297) ----------------------------------------


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize(("model", "cc", "args", "refused"), [
    (QWEN35, "10.3", {"attention_backend": "fa4", "chunked_prefill_size": 1}, True),
    (QWEN35, "10.3", {"attention_backend": "fa4", "chunked_prefill_size": 256}, False),
    (LLAMA, "10.0", {"attention_backend": "fa4", "chunked_prefill_size": 64}, True),
    (LLAMA, "10.0", {"prefill_attention_backend": "fa4", "chunked_prefill_size": 64}, True),
    (LLAMA, "10.0", {"decode_attention_backend": "fa4", "chunked_prefill_size": 64}, True),  # over trtllm_mha's 64
    (LLAMA, "10.0", {"attention_backend": "fa4", "page_size": 16, "chunked_prefill_size": 64}, True),  # replaced
    (QWEN3_NEXT, "10.0", {"attention_backend": "fa4", "chunked_prefill_size": 64}, True),
    (LLAMA, "10.0", {"attention_backend": "fa4", "chunked_prefill_size": 64, "speculative_algorithm": "EAGLE", **DRAFT,
                     "speculative_eagle_topk": 1, "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}, True),
    (LLAMA, "10.0", {"attention_backend": "fa4", "chunked_prefill_size": 64, "speculative_algorithm": "EAGLE", **DRAFT,
                     "speculative_eagle_topk": 2, "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}, False),
    (DEEPSEEK, "10.0", {"attention_backend": "fa4", "chunked_prefill_size": 1}, False),  # MLA: the page stays
    (LLAMA, "9.0", {"attention_backend": "fa4", "chunked_prefill_size": 1}, False),  # not SM100
    (LLAMA, "12.1", {"attention_backend": "fa4", "chunked_prefill_size": 1}, False),
])
def test_fa4_page_against_chunked_prefill(version: str, model: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in validate_host(host(args, version, model=model, cc=cc, gpus=4)).errors
             if "validation_hook.py:244" in (p.source or "")]
    assert bool(found) is refused
    if refused:
        assert "page size 128" in found[0].message or "page_size=128" in found[0].message


def test_fa4_page_is_not_claimed_without_the_gpu() -> None:
    hostvars = host({"attention_backend": "fa4", "chunked_prefill_size": 1}, model=LLAMA)
    del hostvars["nvidia_gpu_compute_capability"]
    assert not [p for p in validate_host(hostvars).errors if "validation_hook.py:244" in (p.source or "")]


def test_fa4_page_turns_llamas_automatic_tree_away() -> None:
    """fa4 sets page 128 before the speculative hook picks Llama's automatic topk 4 (speculative_hook.py:1278)."""
    found = sources(host({"attention_backend": "fa4", "speculative_algorithm": "EAGLE", **DRAFT}, gpus=1),
                    "server.speculative")
    assert any(s.endswith("speculative_hook.py:1278") for s in found)
    assert not sources(host({"attention_backend": "fa4", "speculative_algorithm": "EAGLE", **DRAFT}, cc="9.0", gpus=1),
                       "server.speculative")


# --- the aux hidden-state capture resets the algorithm before the unified pool's checks (kv_cache_hook.py:601) ------


@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3"}, False),  # fuzz-1-04863
    ({"enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 4}, True),
    ({"enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 1}, False),
    ({"speculative_algorithm": "EAGLE3", **DRAFT}, True),  # no capture: Llama's automatic topk 4
])
def test_unified_memory_with_the_aux_capture(args: dict[str, Any], refused: bool) -> None:
    found = [s for s in sources(host({"enable_unified_memory": True, **args}, cc="12.0", gpus=1), "server.unified_memory")
             if s.endswith("kv_cache_hook.py:601")]
    assert bool(found) is refused
