"""What the 10,000-case differential fuzz run of seed 6 (``differential.py --cases 10000 --seed 6``) found, and the
checks found beside it:

* MISSED fuzz-6-05813: an FP4 KV cache with FA4 prefill on an MHA model decodes with triton / torch_native /
  flex_attention only (kv_cache_hook.py:284-295); an unset decode side is the base SGLang resolves first, flashinfer
  on the reference host. The rule read only a written decode or base backend.
* MISSED fuzz-6-06103: enable_unified_memory with dcp_size > 1 on a PD server (_validate_unified_memory_dcp,
  kv_cache_hook.py:740), an entry mapped not_applicable although the validator accepts disaggregation_mode.
* STRICTER-UNEXPLAINED fuzz-6-03732: device xpu's intel_xpu is triton on a host without Intel XMX
  (overrides.py:1311-1319), which the unified-memory allow-list then passes.
* The run's refusals at lora/marlin_lora_temp/policy.py, a file the catalog had not read:
  validate_experimental_sgl_marlin_server_args (policy.py:16-55), now catalogued and rule ``server.lora``.

Probe-confirmed by the ``fuzzed-6-*`` and ``marlin-*`` cases of tests/conformance/cases.yaml (0.5.23; 0.5.20-0.5.22
with release_conformance.py's probe).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("model", "cc", "args", "refused"), [
    (LLAMA, "12.0", {}, True),  # fuzzed-6-kv4-fa4-decode-default-refused: flashinfer decodes
    (QWEN3_NEXT, "8.9", {}, True),  # fuzz-6-05813
    (LLAMA, "12.0", {"decode_attention_backend": "triton"}, False),
    (LLAMA, "12.0", {"attention_backend": "triton"}, False),  # the base decodes
    (LLAMA, "12.0", {"decode_attention_backend": "flashinfer"}, True),  # written: refused as before
])
def test_kv4_fa4_prefill_decode_default(version: str, model: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    found = errors(host({"kv_cache_dtype": "fp4_mx_block16", "prefill_attention_backend": "fa4", **args}, version,
                        model=model, cc=cc), "kv4.attention")
    assert bool(found) is refused, found
    if refused:
        assert "decode_attention_backend triton / torch_native / flex_attention only" in found[0].message
        assert ("SGLang's default here" in found[0].message) is ("decode_attention_backend" not in args)


@pytest.mark.parametrize(("version", "line"), [("0.5.20", "316"), ("0.5.21", "634"), ("0.5.22", "745"),
                                               ("0.5.23", "740")])
@pytest.mark.parametrize(("mode", "dcp", "refused"), [
    ("prefill", 8, True),  # fuzz-6-06103
    ("decode", 2, True),
    ("null", 8, False),
    ("prefill", 1, False),  # no decode context parallelism: the DCP checks do not run
])
def test_unified_memory_dcp_with_pd(version: str, line: str, mode: str, dcp: int, refused: bool) -> None:
    found = [p for p in errors(host({"dcp_size": dcp, "disaggregation_mode": mode, "enable_unified_memory": True},
                                    version, model=DEEPSEEK, cc="10.3", gpus=4), "server.unified_memory")
             if "PD disaggregation" in p.message]
    assert bool(found) is refused, found
    if refused:
        assert found[0].source.startswith("sglang/srt/arg_groups/kv_cache_hook.py:740")
        assert f":{line}" in found[0].source


@pytest.mark.parametrize(("args", "outside"), [
    ({"attention_backend": "intel_xpu", "device": "xpu"}, None),  # fuzz-6-03732: triton there
    ({"attention_backend": "intel_xpu"}, "intel_xpu"),  # on CUDA intel_xpu stays, outside the allow-list
    ({"attention_backend": "intel_amx", "device": "cpu"}, "torch_native"),  # without AMX; outside the list too
])
def test_unified_memory_platform_fallback(args: dict[str, Any], outside: str | None) -> None:
    found = [p for p in errors(host({"enable_unified_memory": True, **args}, model=QWEN35, cc="8.6", gpus=4),
                               "server.unified_memory") if "per-layer views" in p.message]
    assert [outside in p.message for p in found] == ([] if outside is None else [True]), found


MARLIN = {"tp_size": 8, "moe_runner_backend": "experimental_sgl_marlin"}
LORA = {"enable_lora": True, "max_lora_rank": 16, "lora_target_modules": ["all"], "lora_backend": "triton",
        "lora_use_virtual_experts": True}


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "line"), [
    ({**LORA, "lora_use_virtual_experts": False}, 34),  # marlin-lora-needs-virtual-experts-refused
    ({"lora_paths": ["a=/srv/lora/a"], "lora_backend": "triton"}, 34),  # lora_paths turn LoRA on
    ({"lora_paths": ["a=/srv/lora/a"], "lora_backend": "triton", "enable_lora": False}, None),  # ... unless turned off
    ({**LORA, "lora_backend": "csgmv"}, 40),
    ({k: v for k, v in LORA.items() if k != "lora_backend"}, 40),  # the default csgmv
    (LORA, None),  # marlin-lora-accepted
    ({"ep_size": 8, "moe_a2a_backend": "deepep"}, 23),  # marlin-ep-deepep-refused
    ({"ep_size": 8}, None),  # marlin-ep-none-accepted
    ({"ep_size": 8, "ep_num_redundant_experts": 8}, None),  # placement is checked with LoRA only
    ({**LORA, "ep_size": 8, "ep_num_redundant_experts": 8}, 51),  # marlin-ep-lora-redundant-experts-refused
    ({**LORA, "ep_size": 8, "enable_eplb": True}, 51),
    ({**LORA, "ep_num_redundant_experts": 8}, None),  # no expert parallelism
    ({**LORA, "lora_use_virtual_experts": False, "quantization": "mxfp8"}, None),  # MXFP8 replaces the runner first
])
def test_experimental_sgl_marlin(version: str, args: dict[str, Any], line: int | None) -> None:
    found = [p for p in errors(host({**MARLIN, **args}, version, model=QWEN3_NEXT), "server.lora")
             if "experimental_sgl_marlin" in p.message]
    assert bool(found) is (line is not None), found
    if line is not None:
        assert found[0].source == f"sglang/srt/lora/marlin_lora_temp/policy.py:{line}"
