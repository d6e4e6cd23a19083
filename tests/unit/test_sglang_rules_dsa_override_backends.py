"""DSA by json_model_override_args' index_topk: the attention backend, page size and all-to-all backend SGLang resolves.

The model table's DeepSeek-V3 made a DSA model by the override (resolve.dsa_override) is no longer the MLA model the
resolver's other values assumed (the targeted set's 40 resolution differences, targeted-arch-02 / -08 / -10 / -12 /
-15 / -18 / -24 / -50):

* attention backend dsa when none of the three backends is written (model_overrides/deepseek_v2.py:99-104:
  resolve.dsa_attention_backend), not triton / fa3 / trtllm_mla;
* page size 64 x index_kpool whatever the host wrote (:161-173, 64 in 0.5.20 / 0.5.21: resolve.dsa_page_size), which
  trtllm_mla's page handling still turns into 64;
* DSA prefill context parallelism sets moe_a2a_backend deepep for cp_strategy zigzag only (:105-120:
  resolve.dsa_prefill_cp_deepep), not the MLA CP's deepep whatever the strategy.

The rules reading them then give SGLang's verdicts: memory.chunked_page (validation_hook.py:244), server.speculative's
paged tree (speculative_hook.py:1278) and NGRAM (:1361), server.combination's deterministic inference
(overrides.py:1119), tbo.attention_dp (validation_hook.py:768). Each verdict is probe-confirmed by the
``dsa-override-resolved-*`` cases of build/s51/cases-H.yaml (SGLang 0.5.23; 0.5.20-0.5.22 by probe_release_adhoc.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host, rules_context

DSA = {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}
EAGLE_TREE = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 2, "speculative_num_steps": 3,
              "speculative_num_draft_tokens": 6}


def launch(args: dict[str, Any], cc: str = "12.0", version: str = "0.5.23", **extra: Any) -> dict[str, Any]:
    gpus = 1 if cc == "12.1" else 8
    return host({"tp_size": gpus, "json_model_override_args": json.dumps({**DSA, **extra}), **args}, version=version,
                model=DEEPSEEK, cc=cc, gpus=gpus)


def ctx_of(args: dict[str, Any], cc: str = "12.0", version: str = "0.5.23", **extra: Any) -> Any:
    return rules_context(launch(args, cc, version, **extra))


@pytest.mark.parametrize("cc", ["12.0", "12.1", "10.0", "9.0"])
def test_dsa_backend_and_page(cc: str) -> None:
    ctx = ctx_of({}, cc)
    assert resolve.resolved_base_attention_backend(ctx) == "dsa"
    assert resolve.resolved_attention_backends(ctx) == ("dsa", "dsa")
    assert resolve.resolved_page_size(ctx) == 64
    assert resolve.default_attention_backend(ctx) == "dsa"


@pytest.mark.parametrize(("cc", "args", "base", "page"), [
    ("12.0", {"page_size": 16}, "dsa", 64),  # the override's page replaces the host's
    ("12.0", {"page_size": 1}, "dsa", 64),
    ("10.0", {"prefill_attention_backend": "flashinfer"}, "flashinfer", 64),  # written: get_default_attn_backend's MLA
    ("9.0", {"prefill_attention_backend": "fa3"}, "fa3", 64),
    ("10.0", {"attention_backend": "trtllm_mla", "page_size": 16}, "trtllm_mla", 64),
])
def test_written_backends(cc: str, args: dict[str, Any], base: str, page: int) -> None:
    ctx = ctx_of(args, cc)
    assert resolve.resolved_base_attention_backend(ctx) == base
    assert resolve.resolved_page_size(ctx) == page


@pytest.mark.parametrize(("version", "args", "page"), [
    ("0.5.23", {}, 128),
    ("0.5.22", {}, 128),
    ("0.5.21", {}, 64),  # 0.5.20 / 0.5.21 set 64 whatever index_kpool
    ("0.5.20", {}, 64),
    ("0.5.23", {"attention_backend": "trtllm_mla"}, 64),  # trtllm_mla keeps 32 / 64 only
])
def test_index_kpool_page(version: str, args: dict[str, Any], page: int) -> None:
    assert resolve.resolved_page_size(ctx_of(args, "10.0", version, index_kpool=2)) == page


def test_mla_deepseek_unchanged() -> None:
    ctx = rules_context(host({"tp_size": 8}, model=DEEPSEEK, cc="10.0"))
    assert resolve.resolved_base_attention_backend(ctx) == "trtllm_mla"
    assert resolve.dsa_page_size(ctx) is None
    cp = rules_context(host({"tp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave"}, model=DEEPSEEK,
                            cc="9.0"))
    assert resolve.mla_prefill_cp_deepep(cp) and resolve.override_a2a_backend(cp) == "deepep"


@pytest.mark.parametrize(("strategy", "written", "a2a"), [
    ("zigzag", None, "deepep"),
    ("interleave", None, "none"),
    ("interleave", "deepep", "deepep"),
])
def test_dsa_prefill_cp_a2a(strategy: str, written: str | None, a2a: str) -> None:
    args = {"enable_prefill_cp": True, "cp_strategy": strategy, **({"moe_a2a_backend": written} if written else {})}
    ctx = ctx_of(args, "9.0")
    assert not resolve.mla_prefill_cp_deepep(ctx)
    assert resolve.dsa_prefill_cp_a2a_certain(ctx)
    assert resolve.handled_a2a_backend(ctx) == a2a


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("cc", "chunk", "extra", "refused"), [
    ("12.0", 1000, {}, True),  # dsa-override-resolved-chunk1000-rtx
    ("9.0", 1000, {}, True),  # dsa-override-resolved-chunk1000-h200
    ("12.0", 4096, {}, False),
    ("12.1", 4160, {"index_kpool": 2}, "0.5.22"),  # dsa-override-resolved-kpool2-chunk4160-gb10: 128 from 0.5.22
])
def test_chunked_page(version: str, cc: str, chunk: int, extra: dict[str, Any], refused: bool | str) -> None:
    found = errors(launch({"chunked_prefill_size": chunk}, cc, version, **extra), "memory.chunked_page")
    want = refused if isinstance(refused, bool) else version >= refused
    assert bool(found) is want
    if found:
        assert "DSA override" in found[0].message


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("cc", "args", "refused"), [
    ("9.0", EAGLE_TREE, True),  # dsa-override-resolved-eagle-tree-h200
    ("12.0", {**EAGLE_TREE, "page_size": 1}, True),  # dsa-override-resolved-eagle-tree-page1-rtx
    ("12.0", {"speculative_algorithm": "NEXTN"}, False),  # dsa-override-resolved-nextn-chain-rtx
    ("12.0", {"speculative_algorithm": "NGRAM"}, True),  # dsa-override-resolved-ngram-rtx
    ("12.0", {**EAGLE_TREE, "attention_backend": "triton"}, False),  # no dsa: triton runs the paged tree
])
def test_speculative_on_dsa(version: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    found = errors(launch(args, cc, version), "server.speculative")
    assert bool(found) is refused
    if found:
        assert "dsa" in found[0].message and "trtllm_mla" not in found[0].message


def test_dcp_tree_names_dsa_not_trtllm_mla() -> None:
    # targeted-arch-60 / dsa-override-resolved-dcp-tree-b200: SGLang refuses DSA DCP with topk 2 first
    # (deepseek_v2.py:26); the paged tree is refused on dsa, SGLang's base backend, not on trtllm_mla.
    hostvars = launch({"dcp_size": 2, **EAGLE_TREE}, "10.0")
    assert any("speculative-eagle-topk 1" in p.message or "top-k other than 1" in p.message
               for p in errors(hostvars, "server.model_features"))
    spec = errors(hostvars, "server.speculative")
    assert spec and all("trtllm_mla" not in p.message for p in spec) and "not dsa" in spec[0].message


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_deterministic_inference": True}, True),  # dsa-override-resolved-deterministic-rtx
    ({"enable_deterministic_inference": True, "attention_backend": "triton"}, False),
])
def test_deterministic_on_dsa(version: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(launch(args, "12.0", version), "server.combination") if "eterministic" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"cp_strategy": "interleave"}, True),  # dsa-override-resolved-cp-interleave-tbo-rtx
    ({"cp_strategy": "zigzag"}, False),  # dsa-override-resolved-cp-zigzag-tbo-rtx: deepep
    ({"cp_strategy": "interleave", "moe_a2a_backend": "deepep"}, False),
    ({"cp_strategy": "interleave", "dp_size": 8}, False),  # attention DP from the deprecated dp_size: not claimed
])
def test_tbo_under_dsa_prefill_cp(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = launch({"enable_prefill_cp": True, "enable_two_batch_overlap": True, **args}, "12.0", version)
    assert bool(errors(hostvars, "tbo.attention_dp")) is refused


KV_SHARD = {"enable_kv_cache_sharding": True, "disaggregation_mode": "prefill"}
INTERLEAVE = {"enable_prefill_cp": True, "cp_strategy": "interleave"}


@pytest.mark.parametrize(("cc", "args", "line"), [
    ("12.0", {}, 42),  # dsa-override-resolved-kvshard-no-cp-rtx
    ("12.0", INTERLEAVE, None),  # dsa-override-resolved-kvshard-interleave-rtx
    ("10.0", INTERLEAVE, None),
    ("9.0", INTERLEAVE, 51),  # dsa-override-resolved-kvshard-interleave-h200: bfloat16, flashmla_sparse / fa3
    ("12.0", {**INTERLEAVE, "dsa_decode_backend": "flashmla_kv"}, 51),
    ("12.0", {**INTERLEAVE, "disaggregation_transfer_backend": "nixl"}, 61),
    ("10.0", {"attention_backend": "trtllm_mla"}, 67),  # a DSA model needs the dsa prefill backend
])
def test_dsa_kv_sharding(cc: str, args: dict[str, Any], line: int | None) -> None:
    found = [p.source for p in errors(launch({**KV_SHARD, **args}, cc), "server.kv_shard")]
    assert found == ([f"sglang/srt/arg_groups/kv_shard_hook.py:{line}"] if line else [])
