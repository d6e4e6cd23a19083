"""The targeted set's KV-cache cases (tests/conformance/targeted-0.5.23.json): their one MISSED.

handle_unified_memory_pool's PD branch (kv_cache_hook.py:533-586; 0.5.22 :530-585, 0.5.21 :482-543, 0.5.20
:202-224), the whole-envelope KV transfer's constraints, was not modelled: enable_unified_memory on a PD server with
SGLANG_DISABLE_LAZY_COMPACTION (targeted-kv-44), a transfer backend other than mooncake, pipeline parallelism, speculative
decoding over mooncake, HiSparse, the decode KV offload (storage file only; not MLA, hybrid-Mamba or hybrid-SWA
models) and the host-pool decode retraction (not hybrid-Mamba models; 0.5.21 also not the decode radix cache or
hybrid SWA), which the decode host receive turns on (pd_disaggregation_hook.py:68-80).

Each verdict is probe-confirmed by the ``targeted-kv-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; the older
releases with release_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import LLAMA, host

RULE = "server.unified_memory"
LAZY = "SGLANG_DISABLE_LAZY_COMPACTION"


def unified_refusals(args: dict[str, Any], version: str, model: str = LLAMA, cc: str = "12.1", gpus: int = 1,
                     env: dict[str, str] | None = None) -> list[Any]:
    return errors(host({"enable_unified_memory": True, **args}, version, model=model, cc=cc, gpus=gpus, env=env), RULE)


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "env", "line"), [
    ({"disaggregation_mode": "prefill"}, {LAZY: "1"}, {"0.5.23": 554, "0.5.22": 551, "0.5.21": 503, "0.5.20": 215}),
    ({"disaggregation_mode": "decode"}, {LAZY: "true"}, {"0.5.23": 554, "0.5.22": 551, "0.5.21": 503, "0.5.20": 215}),
    ({"disaggregation_mode": "prefill"}, {LAZY: "0"}, None),  # off: targeted-kv-43's accepted twin
    ({}, {LAZY: "1"}, None),  # no PD disaggregation: the switch is not read
    ({"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "nixl"}, {},
     {"0.5.23": 537, "0.5.22": 534, "0.5.21": 486, "0.5.20": 205}),
    ({"disaggregation_mode": "prefill", "pp_size": 2}, {}, {"0.5.23": 542, "0.5.22": 539, "0.5.21": 491, "0.5.20": 210}),
    ({"disaggregation_mode": "prefill", "enable_hisparse": True}, {},
     {"0.5.23": 558, "0.5.22": 555, "0.5.21": 507, "0.5.20": 219}),
])
def test_unified_memory_pd_transfer(version: str, args: dict[str, Any], env: dict[str, str],
                                    line: dict[str, int] | None) -> None:
    found = unified_refusals(args, version, gpus=2, env=env)
    assert bool(found) is (line is not None)
    if line is not None:
        assert found[0].source == f"sglang/srt/arg_groups/kv_cache_hook.py:{line[version]}"


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("model", "args", "refused"), [
    (LLAMA, {"disaggregation_decode_enable_offload_kvcache": True, "hicache_storage_backend": "mooncake"}, True),
    (LLAMA, {"disaggregation_decode_enable_offload_kvcache": True, "hicache_storage_backend": "file"}, False),
    (QWEN3_NEXT, {"disaggregation_decode_enable_offload_kvcache": True, "hicache_storage_backend": "file"}, True),
    (DEEPSEEK, {"disaggregation_decode_enable_offload_kvcache": True, "hicache_storage_backend": "file"}, True),
    (QWEN3_NEXT, {"disaggregation_decode_retraction_backup": "host_pool"}, True),
    (LLAMA, {"disaggregation_decode_retraction_backup": "host_pool"}, False),
    # the decode host receive resolves the backup to host_pool (pd_disaggregation_hook.py:68-80)
    (QWEN3_NEXT, {"disaggregation_decode_host_receive_threshold": 0.5}, True),
    (LLAMA, {"disaggregation_decode_host_receive_threshold": 0.5}, False),
])
def test_unified_memory_pd_decode(version: str, model: str, args: dict[str, Any], refused: bool) -> None:
    gpus = 8 if model == DEEPSEEK else 1
    found = unified_refusals({"disaggregation_mode": "decode", "tp_size": gpus, **args}, version, model=model,
                             cc="12.0" if model != DEEPSEEK else "10.0", gpus=gpus)
    assert bool(found) is refused


@pytest.mark.parametrize(("version", "refused"), [("0.5.20", False), ("0.5.21", True), ("0.5.23", True)])
def test_unified_memory_pd_offload_storage_by_release(version: str, refused: bool) -> None:
    """0.5.20 has no decode-offload checks in the PD branch (kv_cache_hook.py:202-224 there)."""
    found = unified_refusals({"disaggregation_mode": "decode", "disaggregation_decode_enable_offload_kvcache": True,
                              "hicache_storage_backend": "mooncake"}, version, cc="12.0")
    assert bool(found) is refused


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
def test_unified_memory_pd_speculative_over_mooncake(version: str) -> None:
    """Qwen3.5 (a Mamba-like hybrid, a unified target) with EAGLE on a PD prefill server over mooncake: refused by the
    PD branch (kv_cache_hook.py:549), not by the unified-target check."""
    found = unified_refusals({"disaggregation_mode": "prefill", "tp_size": 8, "speculative_algorithm": "EAGLE"},
                             version, model=QWEN35, cc="10.0", gpus=8)
    assert found and "speculative decoding" in found[0].message


OFFLOAD = {"disaggregation_mode": "decode", "disaggregation_decode_enable_offload_kvcache": True,
           "hicache_storage_backend": "file"}


@pytest.mark.parametrize(("args", "model", "refused"), [
    # is_hybrid_swa_model's HF-config opt-in (model_config.py:2693-2696): unreached-unified-pd-offload-hybrid-swa-refused
    ({**OFFLOAD, "json_model_override_args": '{"is_hybrid_swa": true}'}, LLAMA, True),
    ({**OFFLOAD, "json_model_override_args": '{"is_hybrid_swa": false}'}, LLAMA, False),
    ({**OFFLOAD, "json_model_override_args": '{"is_hybrid_swa": true}', "disable_hybrid_swa_memory": True}, LLAMA, False),
    # a vision-language checkpoint's language settings live under text_config
    ({**OFFLOAD, "json_model_override_args": '{"text_config": {"is_hybrid_swa": true}}'}, LLAMA, False),
    ({"disaggregation_mode": "decode", "hicache_storage_backend": "file",
      "json_model_override_args": '{"is_hybrid_swa": true}'}, LLAMA, False),  # no offload: its accepted twin
])
def test_unified_memory_pd_offload_hybrid_swa_opt_in(args: dict[str, Any], model: str, refused: bool) -> None:
    problems = [p for p in unified_refusals(args, "0.5.23", model=model) if "hybrid-SWA" in p.message]
    assert bool(problems) is refused, problems
