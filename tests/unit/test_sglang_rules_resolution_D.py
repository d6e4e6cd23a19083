"""KV-cache sharding on a PD prefill server (server.kv_shard): handle_kv_cache_sharding and
validate_kv_shard_attention_backend (sglang/srt/arg_groups/kv_shard_hook.py, new in 0.5.22), which the catalog mapped
``not_applicable`` as if no PD prefill server were ever validated, though server.combination lets
``enable_kv_cache_sharding`` through with ``disaggregation_mode: prefill``. The resolver differential found the MISSED: Llama on a
B200 with the flashinfer prefill backend, refused at kv_shard_hook.py:71. The hook reads the values SGLang has resolved
at pipeline.py:284 (the prefill backend, the page, the chunk after the memory default, enable_mis and the attention-DP
division), and rounds the chunk up to the page, which made numeric.chunked_prefill_size and memory.chunked_page false
alarms.

Each refusal and its neighbour is probe-confirmed by a case of tests/conformance/cases.yaml (``kvshard-...``); the
cases here that the corpus lacks (0.5.22, the GPUs' memory) were probed the same way
(release_conformance.py's probe of 0.5.22).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_fuzz10k_s3 import errors, with_memory
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA
from test_sglang_rules_seed0_2000 import host

H100, B200 = 81559, 183359
SHARDED = ["0.5.22", "0.5.23"]
# A sharded Llama prefill server SGLang accepts on Hopper (fa3): prefill CP 2, interleaved, page 64.
LLAMA_CP = {"tp_size": 2, "enable_kv_cache_sharding": True, "disaggregation_mode": "prefill", "page_size": 64,
            "enable_prefill_cp": True, "attn_cp_size": 2, "cp_strategy": "interleave"}
# DeepSeek-V3 on a B200: trtllm_mla (its override), page 64, plain TP 8.
DEEPSEEK_TP = {"tp_size": 8, "enable_kv_cache_sharding": True, "disaggregation_mode": "prefill"}
PYTHON_CORE = {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "python"}


def shard_sources(hostvars: dict[str, Any]) -> list[str]:
    """The kv_shard_hook.py lines server.kv_shard refuses ``hostvars`` at."""
    return [p.source.rpartition(":")[2] for p in errors(hostvars, "server.kv_shard")]


def rules(hostvars: dict[str, Any]) -> set[str]:
    return {p.rule for p in validate_host(hostvars).errors}


@pytest.mark.parametrize(("args", "cc", "model", "line"), [
    ({"enable_kv_cache_sharding": True, "disaggregation_mode": "prefill", "page_size": 64,
      "attention_backend": "flashinfer"}, "10.0", LLAMA, "71"),  # the resolver differential's MISSED
    (LLAMA_CP, "10.0", LLAMA, "71"),  # SGLang's default there, trtllm_mha
    ({**LLAMA_CP, "prefill_attention_backend": "flashinfer"}, "9.0", LLAMA, "71"),
    ({**LLAMA_CP, "prefill_attention_backend": "trtllm_mla"}, "10.0", LLAMA, "77"),
    ({**DEEPSEEK_TP, "enable_prefill_cp": True, "attn_cp_size": 2, "cp_strategy": "interleave"}, "10.0", DEEPSEEK, "79"),
    ({**DEEPSEEK_TP, "disable_chunked_prefix_cache": True}, "10.0", DEEPSEEK, "84"),
    ({**DEEPSEEK_TP, "attn_dp_size": 2}, "10.0", DEEPSEEK, "254"),
    ({**DEEPSEEK_TP, "tp_size": 1}, "10.0", DEEPSEEK, "260"),
    ({"tp_size": 2, "enable_kv_cache_sharding": True, "disaggregation_mode": "prefill", "page_size": 64}, "9.0", LLAMA,
     "266"),
    ({k: v for k, v in LLAMA_CP.items() if k != "page_size"}, "9.0", LLAMA, "274"),
    (DEEPSEEK_TP, "9.0", DEEPSEEK, "274"),  # fa3 on Hopper leaves page 1
    ({**LLAMA_CP, "chunked_prefill_size": -1}, "9.0", LLAMA, "282"),
    ({**LLAMA_CP, "tp_size": 4, "attn_dp_size": 2, "chunked_prefill_size": 1}, "9.0", LLAMA, "282"),  # 1 // 2 = 0
])
def test_the_resolved_backend_topology_page_and_chunk(args: dict[str, Any], cc: str, model: str, line: str) -> None:
    assert line in shard_sources(host(args, "0.5.23", model=model, cc=cc))


@pytest.mark.parametrize(("args", "cc", "model"), [
    (LLAMA_CP, "9.0", LLAMA),
    ({**LLAMA_CP, "decode_attention_backend": "flashinfer"}, "9.0", LLAMA),  # the prefill side only
    ({**LLAMA_CP, "enable_hierarchical_cache": True}, "9.0", LLAMA),  # host offload: 0.5.23 takes it
    ({**LLAMA_CP, "disaggregation_transfer_backend": "nixl"}, "9.0", LLAMA),
    ({**LLAMA_CP, "disaggregation_transfer_backend": "mooncake_tcp"}, "9.0", LLAMA),  # becomes mooncake
    ({**LLAMA_CP, "enable_deterministic_inference": True}, "9.0", LLAMA),  # fa3 keeps the radix cache: python core
    (DEEPSEEK_TP, "10.0", DEEPSEEK),
])
def test_what_sglang_accepts(args: dict[str, Any], cc: str, model: str) -> None:
    assert not rules(host(args, "0.5.23", model=model, cc=cc))


@pytest.mark.parametrize(("args", "env", "line"), [
    ({"dllm_algorithm": "LowConfidence"}, {}, "120"),
    ({"radix_cache_backend": "foo"}, {}, "126"),
    ({}, {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "rust"}, "140"),
    ({"enable_deterministic_inference": True}, {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "rust"}, "140"),
    ({"enable_unified_cache_external_linker": True}, {}, "146"),
    ({"enable_streaming_session": True}, {}, "152"),
    ({"enable_session_radix_cache": True}, {}, "157"),
    ({"enable_flexkv": True}, {}, "161"),
    ({"enable_unified_memory": True}, {}, "166"),
    ({"enable_hierarchical_cache": True, "hicache_storage_backend": "file"}, {}, "177"),
    ({"enable_lmcache": True}, {}, "195"),
    ({"enable_hisparse": True}, {}, "199"),
    ({"enable_dynamic_chunking": True, "pp_size": 2}, {}, "207"),
    ({"enable_two_batch_overlap": True}, {}, "214"),
    ({"disaggregation_transfer_backend": "mori"}, {}, "237"),
    ({}, {"SGLANG_DISAGG_STAGING_BUFFER": "1"}, "245"),
])
def test_the_refused_features(args: dict[str, Any], env: dict[str, str], line: str) -> None:
    assert line in shard_sources(host({**LLAMA_CP, **args}, "0.5.23", cc="9.0", env=env))


def test_decode_context_parallelism_on_an_mla_model() -> None:
    assert "171" in shard_sources(host({**DEEPSEEK_TP, "dcp_size": 2}, "0.5.23", model=DEEPSEEK))


@pytest.mark.parametrize(("args", "env"), [
    ({"disable_radix_cache": True}, {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "rust"}),  # the core is never used
    ({"enable_mis": True}, {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "rust"}),  # enable_mis turns the radix cache off
])
def test_the_tree_core_only_where_the_radix_cache_is_on(args: dict[str, Any], env: dict[str, str]) -> None:
    assert "140" not in shard_sources(host({**LLAMA_CP, **args}, "0.5.23", cc="9.0", env=env))


def test_an_unknown_architecture_is_the_preflights() -> None:
    """Outside the model table the backend, MLA and page are not certain (SGLang may also refuse a DSA model at :67
    or a GLM DSA one elsewhere): no refusal from them; the switches still are."""
    override = {"json_model_override_args": '{"architectures": ["SomeNewForCausalLM"]}'}
    assert shard_sources(host({"enable_kv_cache_sharding": True, "disaggregation_mode": "prefill", **override})) == []
    assert shard_sources(host({"enable_kv_cache_sharding": True, "disaggregation_mode": "prefill", "enable_lmcache": True,
                               **override})) == ["195"]


def test_not_on_a_plain_server_and_not_before_0522() -> None:
    assert shard_sources(host({**LLAMA_CP, "disaggregation_mode": None, "page_size": 1}, "0.5.23", cc="9.0")) == []
    assert "server.combination" in rules(host({**LLAMA_CP, "disaggregation_mode": None}, "0.5.23", cc="9.0"))
    assert "server.kv_shard" not in rules(host(LLAMA_CP, "0.5.21", cc="9.0"))


# --- the chunk rounded up to the page (kv_shard_hook.py:287-292): no false alarm of the divisibility rules ----------


@pytest.mark.parametrize("version", SHARDED)
@pytest.mark.parametrize(("args", "cc", "model"), [
    ({**LLAMA_CP, "chunked_prefill_size": 100}, "9.0", LLAMA),  # numeric.chunked_prefill_size before
    ({**LLAMA_CP, "chunked_prefill_size": 100, "mem_fraction_static": 0.8}, "9.0", LLAMA),
    ({**DEEPSEEK_TP, "chunked_prefill_size": 100}, "10.0", DEEPSEEK),  # memory.chunked_page before (trtllm_mla's 64)
])
def test_the_chunk_is_rounded_up_to_the_page(version: str, args: dict[str, Any], cc: str, model: str) -> None:
    env = PYTHON_CORE if version == "0.5.22" else {}
    assert not rules(host(args, version, model=model, cc=cc, env=env))


def test_the_divisibility_rules_still_hold_without_sharding() -> None:
    args = {**LLAMA_CP, "enable_kv_cache_sharding": False, "enable_prefill_cp": False, "attn_cp_size": 1,
            "chunked_prefill_size": 100}
    assert "numeric.chunked_prefill_size" in rules(host(args, "0.5.23", cc="9.0"))
    args = {"tp_size": 8, "chunked_prefill_size": 100}
    assert "memory.chunked_page" in rules(host(args, "0.5.23", model=DEEPSEEK))


@pytest.mark.parametrize("version", SHARDED)
@pytest.mark.parametrize(("args", "refused"), [
    ({"page_size": 131072, "chunked_prefill_size": 4096}, True),  # 1.5 x 126976 MiB of activations > 80 GB
    ({"page_size": 131072, "chunked_prefill_size": 4096, "mem_fraction_static": 0.8}, False),  # pinned: not corrected
    ({"page_size": 64, "chunked_prefill_size": 4097}, False),
])
def test_the_rounding_takes_the_automatic_memory(version: str, args: dict[str, Any], refused: bool) -> None:
    env = PYTHON_CORE if version == "0.5.22" else {}
    found = shard_sources(with_memory(host({**LLAMA_CP, **args}, version, cc="9.0", env=env), H100))
    assert (("312" if version == "0.5.23" else "252") in found) is refused
    assert shard_sources(host({**LLAMA_CP, **args}, version, cc="9.0", env=env)) == []  # no memory known: silent


# --- 0.5.22: the rust tree core by default, any HiCache refused, its own lines ------------------------------------


@pytest.mark.parametrize(("args", "env", "model", "cc", "line"), [
    (LLAMA_CP, {}, LLAMA, "9.0", "87"),  # the default core is rust there
    (DEEPSEEK_TP, {}, DEEPSEEK, "10.0", "87"),
    ({**LLAMA_CP, "enable_hierarchical_cache": True, "disable_radix_cache": True}, {}, LLAMA, "9.0", "124"),
    ({**LLAMA_CP, "attention_backend": "flashinfer", "disable_radix_cache": True}, {}, LLAMA, "9.0", "32"),
    ({**DEEPSEEK_TP, "tp_size": 1, "disable_radix_cache": True}, {}, DEEPSEEK, "10.0", "200"),
    ({**LLAMA_CP, "chunked_prefill_size": -1, "disable_radix_cache": True}, {}, LLAMA, "9.0", "222"),
])
def test_0522(args: dict[str, Any], env: dict[str, str], model: str, cc: str, line: str) -> None:
    assert line in shard_sources(host(args, "0.5.22", model=model, cc=cc, env=env))


@pytest.mark.parametrize(("args", "env"), [
    (LLAMA_CP, PYTHON_CORE),
    ({**LLAMA_CP, "disable_radix_cache": True}, {}),
    ({**LLAMA_CP, "decode_attention_backend": "flashinfer", "disable_radix_cache": True}, {}),
])
def test_0522_accepts(args: dict[str, Any], env: dict[str, str]) -> None:
    assert not rules(host(args, "0.5.22", cc="9.0", env=env))


GLM_DSA = '{"architectures": ["GlmMoeDsaForCausalLM"]}'
EAGLE1 = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1, "speculative_num_steps": 1,
          "speculative_num_draft_tokens": 2}


@pytest.mark.parametrize(("args", "model", "refused"), [
    ({"speculative_algorithm": "NGRAM", "speculative_ngram_max_bfs_breadth": 1}, LLAMA, True),  # not EAGLE
    ({**EAGLE1, "speculative_draft_model_path": "/srv/models/draft"}, LLAMA, True),  # Llama is not GLM DSA
    ({"speculative_algorithm": "NEXTN", "json_model_override_args": GLM_DSA}, DEEPSEEK, True),  # not EAGLE yet
    ({**EAGLE1, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 4, "json_model_override_args": GLM_DSA},
     DEEPSEEK, True),
    ({**EAGLE1, "enable_multi_layer_eagle": True, "json_model_override_args": GLM_DSA}, DEEPSEEK, True),
    ({**EAGLE1, "json_model_override_args": GLM_DSA}, DEEPSEEK, False),  # the NextN layer count: the preflight's
    ({"speculative_algorithm": "EAGLE", "json_model_override_args": GLM_DSA}, DEEPSEEK, False),  # topk unset
    ({"speculative_algorithm": "EAGLE", "enable_return_aux_hidden_states": True,
      "return_aux_hidden_state_layer_ids": 5}, LLAMA, False),  # the capture resets the algorithm first
    ({**EAGLE1}, "/srv/models/a-checkpoint", False),  # the architecture only config.json tells
])
def test_the_speculative_gate(args: dict[str, Any], model: str, refused: bool) -> None:
    """kv_shard_hook.py:106-118: GLM DSA's single-layer NextN MTP only, read before the speculative hook (pipeline.py:284
    against :306); refused where it certainly fails (probe-confirmed: kvshard-spec-ngram-on-llama,
    kvshard-spec-eagle-on-llama, kvshard-spec-nextn-before-the-speculative-hook)."""
    lines = shard_sources(host({**LLAMA_CP, **args}, "0.5.23", model=model, cc="9.0", gpus=8))
    assert ("115" in lines) is refused, lines


def test_the_speculative_gate_of_0_5_22() -> None:
    """0.5.22 refuses every speculative algorithm with sharding (kv_shard_hook.py:66-68 there, raised at :67)."""
    hostvars = host({**LLAMA_CP, **EAGLE1, "json_model_override_args": GLM_DSA}, "0.5.22", model=DEEPSEEK, cc="9.0",
                    gpus=8)
    assert "67" in shard_sources(hostvars)
