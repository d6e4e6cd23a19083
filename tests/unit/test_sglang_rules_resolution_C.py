"""What the resolver-differential (``tests/conformance/resolution.py``: our resolver's values against those SGLang 0.5.23
resolved on the fuzz cases both accept) found in four classes, on what the conformance corpus cannot show: the older
releases, the edges of each condition, the neighbours that stay as they were.

- enable_waterfill makes moe_a2a_backend deepep (overrides.py:1596-1606) and ascend_tp becomes none
  (moe_hook.py:462-469), both inside handle_a2a_moe, before every check from there on reads it
  (resolve.handled_a2a_backend; fuzz-1-08858 and fuzz-4-04145 in the differential).
- EAGLE3 with enable_return_aux_hidden_states runs no speculative algorithm (capture_only): no automatic topk
  (fuzz-3-03937), and the attention defaults SGLang asks without one (SM100's trtllm_mha, the Qwen3.5 override's).
- A PD decode server's radix cache is off before the Mamba strategy resolves and before the Qwen3.5 SM100 override
  reads it (radix_cache_off; fuzz-3-01445); ``auto`` then stays, and so does the overlap scheduler.

Each refusal and its neighbour is probe-confirmed by a case of tests/conformance/cases.yaml (``resolve-c-...``); the
cases here that the corpus lacks were probed the same way (SGLang 0.5.20-0.5.23).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, KIMI_K3, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL, context
from test_sglang_rules_seed0_2000 import host

ATTN_DP = ["0.5.22", "0.5.23"]  # attn_dp_size is new in 0.5.22
LORA = {"enable_lora": True, "max_lora_rank": 16, "lora_target_modules": ["all"], "lora_backend": "triton_v2",
        "moe_runner_backend": "lora_triton", "tp_size": 2}
DSPARK = {"speculative_algorithm": "DSPARK", "speculative_draft_model_path": "meta-llama/Llama-3.1-8B-Instruct",
          "tp_size": 2, "attn_dp_size": 2, "enable_dp_lm_head": True}


def rules(hostvars: dict[str, Any]) -> set[str]:
    """The rules that refuse ``hostvars``."""
    return {p.rule for p in validate_host(hostvars).errors}


def sources(hostvars: dict[str, Any], rule: str) -> list[str]:
    return [p.source or "" for p in errors(hostvars, rule)]


# --- enable_waterfill: deepep before handle_a2a_moe's checks and every later one (fuzz-1-08858's class) -------------


@pytest.mark.parametrize("version", ATTN_DP)
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_waterfill": True}, True),  # flashinfer_a2a_dispatch_type without flashinfer: moe_hook.py:311
    ({}, False),  # flashinfer: the dispatch type is its own (the runner auto: see the report, not this class)
])
def test_waterfill_takes_the_dispatch_types_backend(version: str, args: dict[str, Any], refused: bool) -> None:
    hv = host({"moe_a2a_backend": "flashinfer", "flashinfer_a2a_dispatch_type": "bf16", "tp_size": 4, "attn_dp_size": 4,
               **args}, version, model=QWEN3_NEXT, gpus=4)
    found = [s for s in sources(hv, "server.moe") if s.endswith(("moe_hook.py:311", "moe_hook.py:270"))]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_waterfill": True, "deepep_mode": "normal"}, True),  # moe_hook.py:377 (0.5.22 :313)
    ({"enable_waterfill": True, "deepep_mode": "low_latency"}, False),
    ({"enable_waterfill": True}, False),  # auto: SGLang makes it low_latency
    ({"deepep_mode": "normal"}, False),  # none: no DeepEP dispatch
    ({"moe_a2a_backend": "deepep", "deepep_mode": "normal"}, True),
])
def test_waterfill_runs_cutedsl_on_deepep(version: str, args: dict[str, Any], refused: bool) -> None:
    hv = host({"moe_runner_backend": "flashinfer_cutedsl", "quantization": "modelopt_fp4", "tp_size": 8, **args}, version,
              model=QWEN35, cc="10.0")
    assert bool([p for p in errors(hv, "server.moe") if "DeepEP normal" in p.message]) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("a2a", "refused"), [
    ("none", True), ("ascend_tp", True),  # ascend_tp is none when handle_eplb_and_dispatch reads it: a MISSED
    ("deepep", False), ("waterfill", False),  # waterfill's deepep: a false alarm
])
@pytest.mark.parametrize("algorithm", ["static", "lp"])
def test_ep_dispatch_algorithm_reads_the_handled_backend(version: str, a2a: str, refused: bool, algorithm: str) -> None:
    args = {"ep_dispatch_algorithm": algorithm, "tp_size": 2}
    args.update({"enable_waterfill": True} if a2a == "waterfill" else {"moe_a2a_backend": a2a})
    found = [s for s in sources(host(args, version, model=QWEN3_NEXT, gpus=2), "server.moe") if s.endswith(":783")]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ["0.5.23"])  # the LoRA MoE runners are new in 0.5.23
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_waterfill": True}, True),  # lora_hook.py:221: deepep
    ({"moe_a2a_backend": "ascend_tp"}, False),  # none by then
    ({"moe_a2a_backend": "ascend_tp", "enable_waterfill": True}, True),  # waterfill first: deepep
    ({}, False),
    ({"moe_a2a_backend": "deepep"}, True),
])
def test_lora_moe_runner_reads_the_handled_backend(version: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host({**LORA, **args}, version, model=QWEN3_NEXT, gpus=2), "server.lora")
             if "moe_a2a_backend none" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ATTN_DP)
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_waterfill": True}, True),  # speculative_hook.py:678: deepep
    ({"enable_waterfill": True, "moe_a2a_backend": "mori"}, True),  # mori becomes deepep too
    ({"moe_a2a_backend": "ascend_tp"}, False),  # none
    ({"moe_a2a_backend": "ascend_tp", "speculative_moe_a2a_backend": "none"}, False),  # matches none (:705)
    ({"moe_a2a_backend": "megamoe", "enable_waterfill": True}, False),  # megamoe stays
    ({}, False),
])
def test_dspark_reads_the_handled_backend(version: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host({**DSPARK, **args}, version, model=LLAMA, gpus=2), "server.speculative")
             if "DSPARK" in p.message and "a2a" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "rule"), [
    ({"moe_a2a_backend": "pplx"}, "moe.pplx"),  # pplx's checks skipped: deepep
    ({"moe_a2a_backend": "deepep_v2", "speculative_algorithm": "EAGLE",
      "speculative_draft_model_path": "meta-llama/Llama-3.1-8B-Instruct"}, "server.moe"),  # nor the draft's deepep_v2
])
def test_waterfill_skips_the_other_backends_checks(version: str, args: dict[str, Any], rule: str) -> None:
    hv = host({"tp_size": 2, **args}, version, model=QWEN3_NEXT if "pplx" in str(args) else LLAMA, gpus=2)
    assert errors(hv, rule)
    assert not errors({**hv, "sglang_args": {**hv["sglang_args"], "enable_waterfill": True}}, rule)


@pytest.mark.parametrize("version", ALL)
def test_waterfill_skips_deepep_v2s_model_check(version: str) -> None:
    hv = host({"moe_a2a_backend": "deepep_v2", "tp_size": 2}, version, model=LLAMA, gpus=2)
    assert [p for p in errors(hv, "server.moe") if "deepep_v2" in p.message]
    assert not errors({**hv, "sglang_args": {**hv["sglang_args"], "enable_waterfill": True}}, "server.moe")


@pytest.mark.parametrize("version", ATTN_DP)
def test_waterfill_skips_flashinfers_checks(version: str) -> None:
    hv = host({"moe_a2a_backend": "flashinfer", "tp_size": 4}, version, model=QWEN3_NEXT, gpus=4)
    assert [p for p in errors(hv, "server.moe") if "attn_dp_size equal to tp_size" in p.message]
    assert not errors({**hv, "sglang_args": {**hv["sglang_args"], "enable_waterfill": True}}, "server.moe")


@pytest.mark.parametrize(("a2a", "cc", "rule"), [("flashinfer_megamoe", "8.0", "sm8x.moe"), ("mori", "12.0", "sm12x.moe")])
def test_waterfill_runs_neither_flashinfer_megamoe_nor_mori(a2a: str, cc: str, rule: str) -> None:
    args = {"moe_a2a_backend": a2a, "tp_size": 2, "attn_dp_size": 2}
    assert rule in rules(host(args, model=QWEN3_NEXT, cc=cc, gpus=2))
    assert rule not in rules(host({**args, "enable_waterfill": True}, model=QWEN3_NEXT, cc=cc, gpus=2))


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_waterfill": True}, False),  # handle_shared_experts_tp runs after handle_a2a_moe: deepep
    ({}, True),  # parallel_hook.py:234
    ({"moe_a2a_backend": "ascend_tp"}, True),  # none
])
def test_shared_experts_tp_reads_the_handled_backend(version: str, args: dict[str, Any], refused: bool) -> None:
    hv = host({"shared_experts_tp_size": 2, "tp_size": 4, "json_model_override_args": KIMI_K3, **args}, version,
              model=DEEPSEEK, gpus=4)
    assert bool([p for p in errors(hv, "server.parallel") if "all-to-all" in p.message]) is refused


def test_the_fuzz_cases_are_accepted() -> None:
    # fuzz-1-08858 / fuzz-2-06716 (waterfill on Llama, A100) and fuzz-4-04145 (ascend_tp on an RTX PRO 6000)
    assert not validate_host(host({"enable_waterfill": True, "min_free_slots_delay": 128}, cc="8.0")).errors
    assert not validate_host(host({"moe_a2a_backend": "ascend_tp", "moe_runner_backend": "flashinfer_cutlass"}, cc="12.0",
                                  gpus=4)).errors


# --- the aux hidden-state capture: no speculative algorithm, so none of its defaults (fuzz-3-03937's class) ---------


def test_no_automatic_topk_under_the_capture() -> None:
    ctx = context(host({"speculative_algorithm": "EAGLE3", "enable_return_aux_hidden_states": True,
                        "return_aux_hidden_state_layer_ids": 5}, cc="8.9", gpus=2))
    assert resolve.effective_eagle_topk(ctx, "EAGLE3") is None
    ctx = context(host({"speculative_algorithm": "EAGLE3"}, cc="8.9", gpus=2))
    assert resolve.effective_eagle_topk(ctx, "EAGLE3") == 4  # Llama's automatic triple


@pytest.mark.parametrize(("args", "model", "refused"), [
    ({"page_size": 17, "chunked_prefill_size": 34}, LLAMA, True),  # SGLang's SM100 default trtllm_mha: page 64
    ({"page_size": 16, "chunked_prefill_size": 48}, LLAMA, False),  # trtllm_mha keeps 16
    ({"disable_radix_cache": True, "chunked_prefill_size": 100, "tp_size": 2}, QWEN3_NEXT, True),  # the override's 64
    ({"chunked_prefill_size": 100, "tp_size": 2}, QWEN3_NEXT, False),  # radix on, no algorithm: triton, page 1
])
def test_the_capture_leaves_sm100s_default_backend(args: dict[str, Any], model: str, refused: bool) -> None:
    capture = {"speculative_algorithm": "EAGLE3", "enable_return_aux_hidden_states": True}
    found = errors(host({**capture, **args}, "0.5.23", model=model, gpus=2), "memory.chunked_page")
    assert bool(found) is refused


# --- a PD decode server's radix cache is off before the Mamba strategy and the Qwen3.5 override (fuzz-3-01445) ------


def test_decode_server_reads_the_radix_cache_off() -> None:
    ctx = context(host({"disaggregation_mode": "decode", "moe_runner_backend": "marlin", "quantization": "quark_mxfp4"},
                       model=QWEN35, cc="10.3"))
    assert resolve.resolved_mamba_strategy(ctx) is None  # SGLang leaves auto
    assert resolve.qwen35_sm100_backend(ctx) == "trtllm_mha"
    assert resolve.resolved_page_size(ctx) == 64


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"disable_radix_cache": True}, True),  # the pass leaves auto, the overlap scheduler on: validation_hook.py:259
    ({"mamba_radix_cache_strategy": "extra_buffer_lazy"}, True),
    ({}, True),  # auto: extra_buffer
    ({"disable_overlap_schedule": True}, False),
    ({"disable_radix_cache": True, "disable_overlap_schedule": True}, False),
])
def test_pdmux_with_the_overlap_scheduler_kept(version: str, args: dict[str, Any], refused: bool) -> None:
    hv = host({"enable_pdmux": True, "chunked_prefill_size": -1, "tp_size": 2, **args}, version, model=QWEN3_NEXT, cc="12.0",
              gpus=2)
    assert bool([p for p in errors(hv, "server.pdmux") if "overlap" in p.message]) is refused


@pytest.mark.parametrize(("device", "refused"), [("cuda", True), ("cpu", False), ("hpu", False)])
def test_the_sm100_override_needs_no_platform_backend(device: str, refused: bool) -> None:
    # device cpu / hpu fill attention_backend before the Qwen3-Next override (platform_hook.py:158-183): no page 64
    hv = host({"device": device, "disable_radix_cache": True, "chunked_prefill_size": 100, "tp_size": 2},
              model=QWEN3_NEXT, gpus=2)
    assert bool(errors(hv, "memory.chunked_page")) is refused
