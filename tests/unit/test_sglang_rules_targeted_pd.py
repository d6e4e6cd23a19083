"""The targeted set's PD disaggregation, data-parallel attention and context parallelism cases
(tests/conformance/targeted-0.5.23.json).

* prefill_complete (_validate_prefill_complete, pd_disaggregation_hook.py:199-242, new in 0.5.22): its attention-TP
  test reads ``dp_size if enable_dp_attention else 1`` after handle_deprecated_dp_attention cleared the flag
  (parallel_hook.py:39-61, pipeline.py:45 before :147), so every tp_size but 1 is refused; and attn_cp_size, HiSparse,
  the decode radix cache / HiCache and a prefill HiCache other than L2 write_back (launch._platform_gates).
* handle_pd_disaggregation's own refusals (launch._pd_disaggregation): the decode radix cache with the fake backend or
  (0.5.23 after the NEXTN alias, speculative_hook.py:164-172) speculative decoding, the fake backend on a prefill
  server, SGLANG_DISAGG_STAGING_BUFFER off mooncake / nixl, enable_pd_role_switch's unsupported features (release by
  release), and the host_pool retraction backup with DCP or priority preemption (kv_cache_hook.py:360-373).
* DeepSeek's prefill CP override reads dp_size as attention DP (resolve.deepseek_cp_attention_dp): no replicas for
  parallel.gpus or parallel.dp_multinode.

Each verdict is probe-confirmed by the ``targeted-pd-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; the
older releases with release_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA
from test_sglang_rules_seed0_2000 import host

STAGING = "SGLANG_DISAGG_STAGING_BUFFER"


def combination(hostvars: dict[str, Any], text: str = "") -> list[Any]:
    return [p for p in errors(hostvars, "server.combination") if text in p.message]


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "refused"), [
    ({"tp_size": 8, "attn_dp_size": 8, "disaggregation_mode": "decode"}, True),  # targeted-pd-02
    ({"tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "disaggregation_mode": "prefill"}, True),  # -03
    ({"disaggregation_mode": "decode", "disaggregation_transfer_backend": "mooncake_tcp"}, False),  # -01
    ({"disaggregation_mode": "prefill", "enable_hierarchical_cache": True, "hicache_ratio": 2.0}, True),  # -04
    ({"disaggregation_mode": "prefill", "enable_hierarchical_cache": True, "hicache_ratio": 2.0,
      "hicache_write_policy": "write_back"}, False),  # -05
    ({"disaggregation_mode": "prefill", "enable_hierarchical_cache": True, "hicache_ratio": 2.0,
      "hicache_write_policy": "write_back", "hicache_storage_backend": "file"}, True),
    ({"tp_size": 2, "attn_cp_size": 2, "disaggregation_mode": "prefill"}, True),  # -51
    ({"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True}, True),  # -52
])
def test_prefill_complete(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({**args, "disaggregation_decode_allocation_policy": "prefill_complete"}, version, cc="12.0",
                    model=DEEPSEEK if args.get("tp_size", 1) == 8 else LLAMA)
    assert bool(combination(hostvars, "prefill_complete")) is refused


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "env", "refused"), [
    ({"disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True,
      "disaggregation_transfer_backend": "fake"}, {}, True),  # targeted-pd-12
    ({"disaggregation_mode": "decode", "disaggregation_transfer_backend": "fake"}, {}, False),
    ({"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "fake"}, {}, True),  # -13
    ({"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "mori"}, {STAGING: "1"}, True),  # -15
    ({"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "mooncake_tcp"}, {STAGING: "1"}, False),
    ({"disaggregation_mode": "decode", "disaggregation_transfer_backend": "nixl"}, {STAGING: "1"}, False),
    ({"disaggregation_transfer_backend": "mori"}, {STAGING: "1"}, False),  # not a PD server: not read
    ({"disaggregation_mode": "decode", "disaggregation_decode_retraction_backup": "host_pool",
      "enable_priority_scheduling": True}, {}, True),  # -53
    ({"disaggregation_mode": "decode", "disaggregation_decode_retraction_backup": "host_pool",
      "enable_priority_scheduling": True, "disable_priority_preemption": True}, {}, False),  # -54
    ({"tp_size": 8, "disaggregation_mode": "decode", "disaggregation_decode_retraction_backup": "host_pool",
      "dcp_size": 2}, {}, True),
])
def test_pd_server_refusals(version: str, args: dict[str, Any], env: dict[str, str], refused: bool) -> None:
    assert bool(combination(host(args, version, cc="12.0", env=env))) is refused


@pytest.mark.parametrize(("version", "share", "refused"), [
    ("0.5.23", 0.5, True),  # targeted-pd-10: the threshold's host_pool with dcp_size 2
    ("0.5.22", 0.5, True),
    ("0.5.23", 1.0, False),  # off
    ("0.5.21", 0.5, True),  # 0.5.21: on above 0
    ("0.5.21", 0, False),
])
def test_host_receive_host_pool_dcp(version: str, share: float, refused: bool) -> None:
    args = {"tp_size": 8, "dcp_size": 2, "disaggregation_mode": "decode",
            "disaggregation_decode_host_receive_threshold": share}
    assert bool(combination(host(args, version, model=DEEPSEEK), "dcp_size > 1")) is refused


@pytest.mark.parametrize(("version", "spec", "refused"), [
    ("0.5.23", "NGRAM", True),  # targeted-pd-55 (speculative_hook.py:169)
    ("0.5.23", "NEXTN", False),  # -56: NEXTN is EAGLE there
    ("0.5.23", "EAGLE3", False),
    ("0.5.22", "NEXTN", True),  # 0.5.21 / 0.5.22: DSPARK only (pd_disaggregation_hook.py:111 in 0.5.22)
    ("0.5.21", "EAGLE", True),
    ("0.5.20", "NEXTN", True),  # 0.5.20: none at all (:90)
])
def test_decode_radix_speculative(version: str, spec: str, refused: bool) -> None:
    args = {"tp_size": 8, "disaggregation_mode": "decode", "disaggregation_decode_enable_radix_cache": True,
            "speculative_algorithm": spec}
    assert bool(combination(host(args, version, model=DEEPSEEK), "disaggregation_decode_enable_radix_cache")) is refused


@pytest.mark.parametrize(("version", "args", "refused"), [
    ("0.5.23", {"attn_dp_size": 8}, False),  # targeted-pd-17: attention DP alone is fine in 0.5.23
    ("0.5.23", {"attn_dp_size": 8, "enable_dp_attention_local_control_broadcast": True}, True),  # -18
    ("0.5.23", {"attn_dp_size": 8, "moe_a2a_backend": "deepep"}, True),  # -19
    ("0.5.23", {"tp_size": 4, "dp_size": 2}, False),  # -57: replicas no longer refused
    ("0.5.23", {"dp_size": 8, "enable_dp_attention": True}, False),
    ("0.5.23", {"ep_size": 8}, True),
    ("0.5.23", {"dcp_size": 2}, True),
    ("0.5.23", {"speculative_algorithm": "NEXTN"}, True),
    ("0.5.23", {"tp_size": 4, "pp_size": 2}, True),
    ("0.5.22", {"attn_dp_size": 8}, True),  # 0.5.22 :176
    ("0.5.22", {"dp_size": 8, "enable_dp_attention": True}, True),
    ("0.5.22", {"tp_size": 4, "dp_size": 2}, True),  # :186
    ("0.5.21", {"dp_size": 8, "enable_dp_attention": True}, True),  # :163
    ("0.5.21", {}, False),
])
def test_pd_role_switch(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"tp_size": 8, **args, "disaggregation_mode": "decode", "enable_pd_role_switch": True}, version,
                    model=DEEPSEEK, cc="12.0")
    assert bool(combination(hostvars, "enable_pd_role_switch")) is refused


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "gpus", "refused"), [
    ({"tp_size": 8, "dp_size": 2}, 8, False),  # targeted-pd-39: attention DP under MLA CP, 8 GPUs
    ({"tp_size": 16, "dp_size": 2, "nnodes": 2, "node_rank": 0, "dist_init_addr": "10.0.0.1:5000"}, 8, False),  # -58
])
def test_deepseek_cp_dp_size_is_attention_dp(version: str, args: dict[str, Any], gpus: int, refused: bool) -> None:
    hostvars = host({**args, "enable_prefill_cp": True, "cp_strategy": "interleave"}, version, model=DEEPSEEK,
                    gpus=gpus)
    assert bool(errors(hostvars, "parallel.gpus") + errors(hostvars, "parallel.dp_multinode")) is refused


def test_dp_replicas_without_cp_still_count() -> None:
    hostvars = host({"tp_size": 8, "dp_size": 2}, model=DEEPSEEK, gpus=8)
    assert errors(hostvars, "parallel.gpus")
