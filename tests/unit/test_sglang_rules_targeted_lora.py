"""The targeted set's LoRA, HiCache (and its storage backends) and HiSparse cases
(tests/conformance/targeted-0.5.23.json): the checks that hinge on what SGLang resolves first.

* LoRA with EAGLE-family speculative decoding refuses speculative_adaptive where _maybe_disable_adaptive keeps it on
  (lora_hook.py:278, :299; adaptive_stays_on): targeted-lora-21 was MISSED.
* handle_hicache runs for a PD decode server whose retraction backup is unset or host_pool, HiCache or not
  (hicache_hook.py:63-71): buffer_only refused there (:273, :290), and the decode host receive's layer_first layout
  that Mooncake / Ascend MemCache storage rewrites (:75-94). targeted-lora-29 and -32 were MISSED. 0.5.21 / 0.5.20 refuse
  buffer_only with write_back (:238 / :212), which 0.5.22 resolves to write_through.
* CP-sharded DSA HiCache needs kernel I/O with layer_first or page_first (kv_shard_hook.py:187-191): targeted-lora-43.
* validate_hisparse's mixed-chunk and speculative checks (hisparse_hook.py:84, :119, :124): targeted-lora-47, -48.

Each verdict is probe-confirmed by the ``targeted-lora-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22 with
release_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA
from test_sglang_rules_seed0_2000 import host

LORA = {"enable_lora": True, "max_lora_rank": 16, "lora_target_modules": ["all"]}
DSA = '{"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}'
HISPARSE = {"tp_size": 8, "enable_hisparse": True, "disable_radix_cache": True, "json_model_override_args": DSA}


def refused(hostvars: dict[str, Any], rule: str, text: str) -> bool:
    return any(text in p.message for p in errors(hostvars, rule))


@pytest.mark.parametrize("version", ["0.5.20", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "expected"), [
    ({"speculative_algorithm": "NEXTN", "speculative_adaptive": True}, True),  # targeted-lora-21
    ({"speculative_algorithm": "NEXTN"}, False),
    # topk 4 makes SGLang turn adaptive off before the LoRA check (adaptive_unsupported_reason)
    ({"speculative_algorithm": "NEXTN", "speculative_adaptive": True, "speculative_num_steps": 3,
      "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}, False),
    ({"speculative_algorithm": "NGRAM", "speculative_adaptive": True}, False),  # targeted-lora-22
])
def test_lora_speculative_adaptive(version: str, args: dict[str, Any], expected: bool) -> None:
    hostvars = host({"tp_size": 8, **LORA, **args}, version, model=DEEPSEEK, cc="10.3")
    assert refused(hostvars, "server.lora", "does not support speculative_adaptive") is expected


@pytest.mark.parametrize(("args", "expected"), [
    ({"disaggregation_mode": "decode", "hicache_host_memory_mode": "buffer_only", "hicache_storage_backend": "file"},
     "does not run on a PD decode server"),  # targeted-lora-29
    ({"disaggregation_mode": "decode", "hicache_host_memory_mode": "buffer_only", "hicache_storage_backend": "file",
      "disaggregation_decode_retraction_backup": "cpu_tensor"}, None),  # targeted-lora-30: handle_hicache not entered
    ({"disaggregation_mode": "decode", "hicache_host_memory_mode": "buffer_only",
      "disaggregation_decode_retraction_backup": "host_pool"}, "needs hicache_storage_backend"),  # targeted-lora-110
    ({"disaggregation_mode": "decode", "hicache_storage_backend": "mooncake",
      "disaggregation_decode_host_receive_threshold": 0.5}, "rewrites the layer_first host layout"),  # targeted-lora-32
    ({"disaggregation_mode": "decode", "hicache_storage_backend": "file",
      "disaggregation_decode_host_receive_threshold": 0.5}, None),  # targeted-lora-54
    ({"disaggregation_mode": "decode", "hicache_mem_layout": "page_first_direct", "hicache_io_backend": "direct",
      "disaggregation_decode_host_receive_threshold": 0.5}, None),  # targeted-lora-53
    ({"hicache_host_memory_mode": "buffer_only", "hicache_storage_backend": "file"}, None),  # no HiCache, no decode
])
def test_hicache_decode_gate(args: dict[str, Any], expected: str | None) -> None:
    found = [p.message for p in errors(host(args, model=LLAMA, cc="12.0"), "server.hicache")]
    assert (found == []) if expected is None else any(expected in m for m in found)


def test_hicache_decode_host_receive_mooncake_dcp_keeps_layout() -> None:
    """Mooncake with dcp_size > 1 keeps the requested layout from 0.5.23 (hicache_hook.py:199-202)."""
    args = {"tp_size": 8, "dcp_size": 2, "disaggregation_mode": "decode", "hicache_storage_backend": "mooncake",
            "disaggregation_decode_host_receive_threshold": 0.5}
    assert not refused(host(args, model=DEEPSEEK), "server.hicache", "rewrites the layer_first host layout")
    assert refused(host(args, "0.5.22", model=DEEPSEEK), "server.hicache", "rewrites the layer_first host layout")


@pytest.mark.parametrize(("version", "expected"), [("0.5.20", True), ("0.5.21", True), ("0.5.22", False),
                                                   ("0.5.23", False)])
def test_hicache_buffer_only_write_back(version: str, expected: bool) -> None:
    args = {"enable_hierarchical_cache": True, "hicache_host_memory_mode": "buffer_only",
            "hicache_storage_backend": "file", "hicache_write_policy": "write_back"}  # targeted-lora-28
    assert refused(host(args, version, model=LLAMA), "server.hicache", "does not support hicache_write_policy") \
        is expected


@pytest.mark.parametrize(("version", "line"), [("0.5.20", 206), ("0.5.21", 232), ("0.5.22", 232), ("0.5.23", 273)])
def test_hicache_buffer_only_without_storage_cites_the_release_line(version: str, line: int) -> None:
    """Each release's raise of buffer_only without a storage backend (hicache_hook.py: 0.5.20 :206, 0.5.21 / 0.5.22 :232,
    0.5.23 :273)."""
    args = {"enable_hierarchical_cache": True, "hicache_host_memory_mode": "buffer_only"}
    found = [p for p in errors(host(args, version, model=LLAMA), "server.hicache") if "staging buffer" in p.message]
    assert [p.source for p in found] == [f"sglang/srt/arg_groups/hicache_hook.py:{line}"]


KV_SHARD = {"tp_size": 8, "disaggregation_mode": "prefill", "disaggregation_transfer_backend": "mooncake",
            "enable_prefill_cp": True, "attn_cp_size": 2, "cp_strategy": "interleave", "dsa_prefill_backend": "trtllm",
            "dsa_decode_backend": "trtllm", "kv_cache_dtype": "fp8_e4m3", "page_size": 64,
            "enable_kv_cache_sharding": True, "enable_hierarchical_cache": True, "json_model_override_args": DSA}


@pytest.mark.parametrize(("args", "expected"), [
    ({"hicache_io_backend": "direct"}, True),  # targeted-lora-43
    ({"hicache_mem_layout": "page_first_direct"}, True),
    ({"hicache_mem_layout": "layer_first"}, False),
    ({}, False),  # targeted-lora-44
])
def test_kv_shard_dsa_hicache_io(args: dict[str, Any], expected: bool) -> None:
    hostvars = host({**KV_SHARD, **args}, model=DEEPSEEK, cc="10.0")
    assert refused(hostvars, "server.kv_shard", "CP-sharded DSA HiCache") is expected


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "expected"), [
    ({"enable_mixed_chunk": True}, "enable_mixed_chunk"),  # targeted-lora-47
    ({"enable_mixed_chunk": True, "speculative_algorithm": "NGRAM"}, None),  # _handle_ngram turns it off
    ({"speculative_algorithm": "NEXTN", "speculative_adaptive": True}, "speculative_adaptive"),  # targeted-lora-48
    ({"speculative_algorithm": "NEXTN"}, None),  # targeted-lora-49
    ({"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 2,
      "speculative_num_draft_tokens": 4}, "speculative_eagle_topk 2"),
])
def test_hisparse_combos(version: str, args: dict[str, Any], expected: str | None) -> None:
    found = [p.message for p in errors(host({**HISPARSE, **args}, version, model=DEEPSEEK, cc="10.0"),
                                       "server.model_features") if "HiSparse" in p.message or "hisparse" in p.message]
    if expected is None or version < "0.5.22":  # the checks are new in 0.5.22
        assert not any(k in m for m in found for k in ("mixed_chunk", "speculative_adaptive", "linear only"))
    else:
        assert any(expected in m for m in found)
