"""What the 10,000-case differential fuzz run of seed 2 (``differential.py --cases 10000 --seed 2``) found: one MISSED
class (SGLang 0.5.23 refuses, the validator accepted) and one false alarm (STRICTER-UNEXPLAINED), on what the
conformance corpus cannot show: the older releases, the edges of each condition, the messages.

Each refusal and its neighbour is probe-confirmed by a case of tests/conformance/cases.yaml
(``fuzzed-lmcache-decode``, ``fuzzed-hicache-decode``, ``fuzzed-pplx-megamoe-runner-accepted`` and the cases beside
them).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_seed0_2000 import host

DEEPSEEK = "deepseek-ai/DeepSeek-V3"


def errors(hostvars: dict[str, Any], where: str) -> list[Any]:
    """The errors whose source cites ``where``."""
    return [p for p in validate_host(hostvars).errors if where in (p.source or "")]


# --- a PD decode server turns the radix cache off before handle_cache_compatibility (pd_disaggregation_hook.py) ------


@pytest.mark.parametrize(("version", "args", "where", "variable"), [
    # fuzz-2-04731: the decode server's default radix cache off, against LMCache (kv_cache_hook.py:445).
    ("0.5.23", {"disaggregation_mode": "decode"}, "kv_cache_hook.py:445", "disaggregation_mode"),
    ("0.5.22", {"disaggregation_mode": "decode"}, "kv_cache_hook.py:445", "disaggregation_mode"),
    ("0.5.21", {"disaggregation_mode": "decode"}, "kv_cache_hook.py:445", "disaggregation_mode"),
    ("0.5.20", {"disaggregation_mode": "decode"}, None, None),  # 0.5.20 has no LMCache checks but DCP's
    ("0.5.23", {"disaggregation_mode": "decode", "speculative_algorithm": "NGRAM"}, "kv_cache_hook.py:445",
     "disaggregation_mode"),  # :445 comes before speculative decoding's :450
    ("0.5.23", {"disaggregation_mode": "decode", "disable_radix_cache": True}, "kv_cache_hook.py:445",
     "disable_radix_cache"),  # the written flag first
    ("0.5.23", {"disable_radix_cache": True}, "kv_cache_hook.py:445", "disable_radix_cache"),
    # The decode radix cache passes :445; LMCache then refuses any PD role (kv_cache_hook.py:471, 0.5.21 on).
    ("0.5.23", {"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True},
     "kv_cache_hook.py:471", "disaggregation_mode"),
    ("0.5.21", {"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True},
     "kv_cache_hook.py:471", "disaggregation_mode"),
    ("0.5.23", {"disaggregation_mode": "prefill"}, "kv_cache_hook.py:471", "disaggregation_mode"),
    ("0.5.22", {"disaggregation_mode": "prefill"}, "kv_cache_hook.py:471", "disaggregation_mode"),
    ("0.5.20", {"disaggregation_mode": "prefill"}, None, None),
    ("0.5.23", {}, None, None),  # colocated: the radix cache stays on
    ("0.5.23", {"disaggregation_mode": "null"}, None, None),
])
def test_lmcache_on_a_pd_server(version: str, args: dict[str, Any], where: str | None, variable: str | None) -> None:
    found = [p for p in validate_host(host({"enable_lmcache": True, **args}, version, cc="9.0")).errors
             if p.rule == "server.kv_cache" and "enable_lmcache" in p.message]
    assert [(p.variable, (p.source or "").endswith(where or "")) for p in found] == (
        [(f"sglang_args.{variable}", True)] if where else [])


def test_lmcache_decode_message_names_the_default_and_the_fix() -> None:
    found = errors(host({"enable_lmcache": True, "disaggregation_mode": "decode"}, cc="9.0"), "kv_cache_hook.py:445")
    assert "needs the radix cache, which a PD decode server turns off" in found[0].message
    # The decode radix cache would only reach :471, so it is not offered as the fix.
    assert found[0].fix == "remove sglang_args.disaggregation_mode or sglang_args.enable_lmcache"
    pd = errors(host({"enable_lmcache": True, "disaggregation_mode": "prefill"}, cc="9.0"), "kv_cache_hook.py:471")
    assert "disaggregation_mode prefill" in pd[0].message and "colocated" in pd[0].message


@pytest.mark.parametrize(("version", "args", "where", "variable"), [
    ("0.5.23", {"disaggregation_mode": "decode"}, "kv_cache_hook.py:394", "enable_hierarchical_cache"),
    ("0.5.22", {"disaggregation_mode": "decode"}, "kv_cache_hook.py:394", "enable_hierarchical_cache"),
    ("0.5.20", {"disaggregation_mode": "decode"}, "kv_cache_hook.py:167", "enable_hierarchical_cache"),
    ("0.5.23", {"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True}, None, None),
    ("0.5.20", {"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True}, None, None),
    ("0.5.23", {"disaggregation_mode": "prefill"}, None, None),
    ("0.5.23", {}, None, None),
    ("0.5.23", {"disable_radix_cache": True}, "kv_cache_hook.py:394", "disable_radix_cache"),
    ("0.5.20", {"disable_radix_cache": True}, "kv_cache_hook.py:167", "disable_radix_cache"),
])
def test_hicache_on_a_decode_server(version: str, args: dict[str, Any], where: str | None,
                                    variable: str | None) -> None:
    found = [p for p in validate_host(host({"enable_hierarchical_cache": True, **args}, version, cc="9.0", gpus=1)).errors
             if p.rule == "server.kv_cache" and ("mutually exclusive" in p.message or "needs the radix cache" in p.message)]
    assert [(p.variable, (p.source or "").endswith(where or "")) for p in found] == (
        [(f"sglang_args.{variable}", True)] if where else [])


def test_hicache_decode_fix_names_the_decode_radix_cache() -> None:
    found = errors(host({"enable_hierarchical_cache": True, "disaggregation_mode": "decode"}, cc="9.0", gpus=1),
                   "kv_cache_hook.py:394")
    assert found[0].rule == "server.kv_cache"
    assert "sglang_args.disaggregation_decode_enable_radix_cache: true" in found[0].fix


# --- moe_runner_backend megamoe replaces the written moe_a2a_backend first (mega_moe_hook.py:259-276) ---------------


MOE_RULES = ("server.moe", "moe.pplx", "moe.mori", "sm90.moe", "sm10x.moe", "tbo.attention_dp")


@pytest.mark.parametrize("version", ["0.5.20", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "cc"), [
    ({"moe_a2a_backend": "pplx", "deepep_mode": "auto"}, "10.0"),  # fuzz-2-06988
    ({"moe_a2a_backend": "pplx", "deepep_mode": "normal"}, "10.0"),  # pplx's low-latency check never runs
    ({"moe_a2a_backend": "pplx", "enable_waterfill": True}, "10.0"),
    ({"moe_a2a_backend": "deepep_v2"}, "10.0"),  # deepep_v2's runner check never runs
    ({"moe_a2a_backend": "flashinfer_megamoe"}, "10.0"),  # nor flashinfer_megamoe's attention DP
    ({"moe_a2a_backend": "flashinfer_megamoe"}, "9.0"),  # nor its SM100-only kernels
    ({"moe_a2a_backend": "mori"}, "10.0"),  # nor MoRI (ROCm)
])
def test_megamoe_runner_replaces_the_written_a2a_backend(version: str, args: dict[str, Any], cc: str) -> None:
    hostvars = host({**args, "moe_runner_backend": "megamoe"}, version, model=DEEPSEEK, cc=cc, gpus=2)
    assert [(p.rule, p.source) for p in validate_host(hostvars).errors if p.rule in MOE_RULES] == []


@pytest.mark.parametrize(("args", "where"), [
    # The neighbours: with another runner the written backend stays and is checked.
    ({"moe_a2a_backend": "pplx", "deepep_mode": "auto", "moe_runner_backend": "deep_gemm"}, "moe_hook.py:591"),
    ({"moe_a2a_backend": "pplx", "deepep_mode": "normal"}, "moe_hook.py:577"),
    ({"moe_a2a_backend": "deepep_v2", "moe_runner_backend": "triton"}, "moe_hook.py:414"),
    # The alias the other way: flashinfer_a2a_dispatch_type loses its flashinfer backend.
    ({"moe_a2a_backend": "flashinfer", "flashinfer_a2a_dispatch_type": "nvfp4", "moe_runner_backend": "megamoe"},
     "moe_hook.py:311"),
    # megamoe's own overlap check sees the alias (0.5.21 on).
    ({"moe_a2a_backend": "pplx", "moe_runner_backend": "megamoe", "enable_two_batch_overlap": True},
     "mega_moe_hook.py:33"),
])
def test_the_backend_sglang_checks(args: dict[str, Any], where: str) -> None:
    found = [p for p in validate_host(host(args, model=DEEPSEEK, gpus=2)).errors if p.rule == "server.moe"]
    assert [(p.source or "").endswith(where) for p in found] == [True]


def test_megamoe_runner_overlap_in_0520_is_not_two_batch_overlaps_dp_check() -> None:
    """0.5.20 has no megamoe overlap check, and check_two_batch_overlap sees megamoe, not none (it accepts)."""
    hostvars = host({"moe_a2a_backend": "pplx", "moe_runner_backend": "megamoe", "enable_two_batch_overlap": True},
                    "0.5.20", model=DEEPSEEK, gpus=2)
    assert [p.rule for p in validate_host(hostvars).errors if p.rule in MOE_RULES] == []
    without = host({"enable_two_batch_overlap": True}, "0.5.20", model=DEEPSEEK, gpus=2)
    assert "tbo.attention_dp" in [p.rule for p in validate_host(without).errors]
