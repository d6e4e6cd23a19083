"""DSA by json_model_override_args' index_topk: what SGLang resolves for it by GPU (the targeted set's last MISSED on it).

The model table's DeepSeek-V3 made a DSA model by the override (resolve.dsa_override; also renamed to GLM-5 or
LongCat-Flash, resolve.DSA_OVERRIDE_ARCHITECTURES) runs the KV cache dtype _dsa_kv_cache_dtype_default picks by GPU
(fp8_e4m3 on SM100 and newer, bfloat16 below: resolve.dsa_kv_cache_dtype) and the DSA backends
_dsa_split_backend_resolution picks from it (resolve.dsa_backends); model._dsa_resolved_checks refuses what SGLang
then refuses: HiSparse's backends by KV dtype (targeted-arch-49, hisparse_hook.py:55), TileLang FP8 on both backends
(targeted-arch-53, overrides.py:572), the DSA interleave CP's explicit attn_cp_size (targeted-arch-57,
parallel_hook.py:159), and before 0.5.22 its dp_size (deepseek_v2.py:105 in 0.5.20, :98 in 0.5.21).

Each verdict is probe-confirmed by the ``dsa-override-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22
by release_conformance.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    dsa_backends,
    dsa_kv_cache_dtype,
)
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK
from test_sglang_rules_seed0_2000 import host, rules_context

DSA = {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}
HISPARSE = {"enable_hisparse": True, "disable_radix_cache": True}
INTERLEAVE = {"enable_prefill_cp": True, "cp_strategy": "interleave"}


def dsa(**extra: Any) -> str:
    return json.dumps({**DSA, **extra})


def launch(args: dict[str, Any], cc: str, version: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return host({"tp_size": 8, "json_model_override_args": dsa(**(extra or {})), **args}, version=version,
                model=DEEPSEEK, cc=cc)


def sources(args: dict[str, Any], cc: str = "12.0", version: str = "0.5.23",
            extra: dict[str, Any] | None = None) -> list[str]:
    return [p.source or "" for p in errors(launch(args, cc, version, extra), "server.model_features")]


@pytest.mark.parametrize(("cc", "args", "kv", "backends"), [
    ("12.0", {}, "fp8_e4m3", ("trtllm", "trtllm")),
    ("10.0", {}, "fp8_e4m3", ("trtllm", "trtllm")),
    ("9.0", {}, "bfloat16", ("flashmla_sparse", "fa3")),
    ("9.0", {"kv_cache_dtype": "fp8_e4m3"}, "fp8_e4m3", ("flashmla_kv", "flashmla_kv")),
    ("12.0", {"kv_cache_dtype": "bf16"}, "bfloat16", ("flashmla_sparse", "trtllm")),
    ("12.0", HISPARSE, "fp8_e4m3", ("flashmla_kv", "flashmla_kv")),
    ("9.0", HISPARSE, "bfloat16", ("flashmla_sparse", "flashmla_sparse")),
    ("12.0", {"dsa_prefill_backend": "tilelang"}, "fp8_e4m3", ("tilelang", "trtllm")),
    ("10.0", {"dcp_size": 2, "kv_cache_dtype": "bfloat16"}, "bfloat16", ("trtllm", "trtllm")),
    ("12.0", {"kv_cache_dtype": "fp8_e5m2"}, None, None),  # DSA refuses it (overrides.py:541)
])
def test_dsa_resolution(cc: str, args: dict[str, Any], kv: str | None, backends: tuple[str, str] | None) -> None:
    ctx = rules_context(launch(args, cc, "0.5.23"))
    assert dsa_kv_cache_dtype(ctx) == kv
    assert dsa_backends(ctx) == backends


def test_dsa_resolution_needs_the_override() -> None:
    ctx = rules_context(host({"tp_size": 8}, model=DEEPSEEK, cc="12.0"))
    assert dsa_kv_cache_dtype(ctx) is None and dsa_backends(ctx) is None


def test_learnable_sink_resolution() -> None:
    ctx = rules_context(launch({}, "10.0", "0.5.23", {"learnable_sink": True}))
    assert dsa_kv_cache_dtype(ctx) == "bfloat16"
    assert dsa_backends(ctx) == ("flashmla_sparse", "flashmla_sparse")


def test_glm_sm12_fp8_resolution() -> None:
    args = {"tp_size": 8, "json_model_override_args": json.dumps({"architectures": ["GlmMoeDsaForCausalLM"], **DSA})}
    ctx = rules_context(host(args, model=DEEPSEEK, cc="12.0"))
    assert dsa_backends(ctx) == ("flashinfer_sparse_mla", "flashinfer_sparse_mla")


@pytest.mark.parametrize(("cc", "args", "extra"), [
    ("12.0", {**HISPARSE, "kv_cache_dtype": "bfloat16", "dsa_decode_backend": "flashmla_sparse"}, {}),
    ("12.0", {**HISPARSE, "dsa_decode_backend": "flashmla_kv"}, {}),
    ("12.1", {**HISPARSE, "dsa_decode_backend": "flashinfer_sparse_mla"}, {}),
    ("12.0", {"dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}, {}),
    ("9.0", {"dsa_prefill_backend": "tilelang"}, {}),  # bfloat16 below SM100: no TileLang FP8 layout
    ("12.0", {"kv_cache_dtype": "bf16", "dsa_prefill_backend": "tilelang"}, {}),
    ("12.0", {**INTERLEAVE, "attn_cp_size": 4}, {}),
    ("10.0", {**INTERLEAVE, "attn_cp_size": 2, "attn_dp_size": 4}, {}),
    ("10.0", {"dsa_decode_backend": "flashmla_sparse"}, {"learnable_sink": True}),
    ("12.0", {"dsa_prefill_backend": "tilelang"}, {"architectures": ["GlmMoeDsaForCausalLM"]}),  # GLM SM120 FP8 arm
    ("12.0", {"dsa_decode_backend": "triton"}, {"architectures": ["GlmMoeDsaForCausalLM"]}),
    ("12.0", {"kv_cache_dtype": "fp8_e5m2"}, {"architectures": ["DeepseekV2ForCausalLM"]}),  # not DSA
])
def test_accepted(cc: str, args: dict[str, Any], extra: dict[str, Any]) -> None:
    assert sources(args, cc, extra=extra) == []


@pytest.mark.parametrize(("cc", "args", "extra", "where"), [
    ("10.0", {**HISPARSE, "dsa_decode_backend": "flashmla_sparse"}, {}, "hisparse_hook.py:55"),  # targeted-arch-49
    ("12.0", {**HISPARSE, "dsa_decode_backend": "flashmla_sparse"}, {}, "hisparse_hook.py:55"),
    ("9.0", {**HISPARSE, "dsa_prefill_backend": "flashmla_kv"}, {}, "hisparse_hook.py:55"),
    ("10.0", {**HISPARSE, "dsa_prefill_backend": "trtllm"}, {}, "hisparse_hook.py:55"),
    ("10.0", {"dsa_prefill_backend": "tilelang"}, {}, "overrides.py:572"),  # targeted-arch-53
    ("9.0", {"kv_cache_dtype": "fp8_e4m3", "dsa_decode_backend": "tilelang"}, {}, "overrides.py:572"),
    ("10.0", {"dcp_size": 2, "dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}, {},
     "overrides.py:577"),
    ("8.6", {"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}, {},
     "overrides.py:583"),
    ("12.0", {**HISPARSE, "dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}, {},
     "overrides.py:692"),
    ("12.0", {"dsa_decode_backend": "triton"}, {}, "overrides.py:563"),
    ("10.0", {"dsa_decode_backend": "trtllm"}, {"learnable_sink": True}, "overrides.py:650"),
    ("9.0", {**INTERLEAVE, "attn_cp_size": 3}, {}, "parallel_hook.py:159-164"),  # targeted-arch-57
    ("10.0", {**INTERLEAVE, "attn_cp_size": 4, "attn_dp_size": 4}, {}, "parallel_hook.py:159-164"),
    ("12.0", {**INTERLEAVE, "tp_size": 16, "nnodes": 2, "dist_init_addr": "10.0.0.1:5000"}, {}, "deepseek_v2.py:123"),
    ("10.0", {"dsa_decode_backend": "triton"}, {"architectures": ["GlmMoeDsaForCausalLM"]}, "overrides.py:563"),
    ("12.0", {"dsa_prefill_backend": "tilelang"}, {"architectures": ["LongcatFlashForCausalLM"]}, "overrides.py:572"),
    ("12.0", {"kv_cache_dtype": "fp8_e5m2"}, {"architectures": ["GlmMoeDsaForCausalLM"]}, "overrides.py:541"),
    ("9.0", {**INTERLEAVE, "attn_cp_size": 3}, {"architectures": ["LongcatFlashForCausalLM"]},
     "parallel_hook.py:159-164"),
])
def test_refused(cc: str, args: dict[str, Any], extra: dict[str, Any], where: str) -> None:
    assert any(s.endswith(where) for s in sources(args, cc, extra=extra)), sources(args, cc, extra=extra)


@pytest.mark.parametrize(("version", "cc", "args", "where"), [
    # 0.5.20 / 0.5.21 refuse tilelang with an fp8_e4m3 KV cache on CUDA outright (0.5.21 overrides.py:544, 0.5.20 :641).
    ("0.5.21", "12.0", {"dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}, "overrides.py:544"),
    ("0.5.20", "10.0", {"dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}, "overrides.py:641"),
    ("0.5.22", "10.0", {"dsa_prefill_backend": "tilelang"}, "overrides.py:548"),
    ("0.5.22", "9.0", {**INTERLEAVE, "attn_cp_size": 3}, "parallel_hook.py:153-158"),
    ("0.5.21", "12.0", {**INTERLEAVE, "tp_size": 16, "nnodes": 2, "dist_init_addr": "10.0.0.1:5000"},
     "deepseek_v2.py:101"),
    ("0.5.20", "12.0", {**HISPARSE, "dsa_decode_backend": "flashmla_sparse"}, "hisparse_hook.py:55"),
    # 0.5.20 / 0.5.21's interleave DSA CP takes no dp_size (deepseek_v2.py:105 / :98):
    # dsa-override-cp-interleave-dp2-tp4 and -dp2-dp-attention, probed on both releases.
    ("0.5.20", "12.0", {**INTERLEAVE, "tp_size": 4, "dp_size": 2}, "deepseek_v2.py:105"),
    ("0.5.21", "12.0", {**INTERLEAVE, "tp_size": 4, "dp_size": 2}, "deepseek_v2.py:98"),
    ("0.5.21", "10.0", {**INTERLEAVE, "dp_size": 2, "enable_dp_attention": True}, "deepseek_v2.py:98"),
])
def test_refused_older_releases(version: str, cc: str, args: dict[str, Any], where: str) -> None:
    assert any(s.endswith(where) for s in sources(args, cc, version)), sources(args, cc, version)


@pytest.mark.parametrize(("version", "cc", "args"), [
    # Before 0.5.22 DSA CP always derives attn_cp_size = tp_size // dp_size (0.5.21 deepseek_v2.py:107).
    ("0.5.21", "9.0", {**INTERLEAVE, "attn_cp_size": 3}),
    ("0.5.20", "9.0", {**INTERLEAVE, "attn_cp_size": 3}),
    ("0.5.22", "12.0", {"dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}),
    # dp_size under DSA CP: zigzag takes it on every release; interleave from 0.5.22 (attention-DP groups).
    ("0.5.20", "12.0", {"enable_prefill_cp": True, "cp_strategy": "zigzag", "dp_size": 2, "enable_dp_attention": True}),
    ("0.5.22", "12.0", {**INTERLEAVE, "tp_size": 4, "dp_size": 2}),
    ("0.5.23", "12.0", {**INTERLEAVE, "dp_size": 2, "enable_dp_attention": True}),
])
def test_accepted_older_releases(version: str, cc: str, args: dict[str, Any]) -> None:
    assert sources(args, cc, version) == []
