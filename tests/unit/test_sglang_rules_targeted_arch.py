"""DeepSeek-V3 made a DSA model by json_model_override_args' index_topk (the targeted set's architecture cases,
tests/conformance/targeted-0.5.23.json).

is_deepseek_dsa reads hf_config.index_topk after SGLang merges json_model_override_args into config.json
(sglang/srt/configs/model_config.py:191-212), so the model table's DeepSeek-V3, whose config.json has none, becomes a
DSA model. The rules had kept it an MLA model: false alarms on the DSA switches (enable_hisparse, the DSA cache layer
split: targeted-arch-02, -12, -50) and MISSED DSA refusals (targeted-arch-03, -04, -05, -13, -14, -17, -40, -41, -51, -61).

Each verdict is probe-confirmed by the ``targeted-arch-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK
from test_sglang_rules_seed0_2000 import host

DSA = {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}


def dsa(**extra: Any) -> str:
    return json.dumps({**DSA, **extra})


def sources(args: dict[str, Any], cc: str = "12.0", version: str = "0.5.23") -> list[str]:
    return [p.source or "" for p in errors(host(args, version=version, model=DEEPSEEK, cc=cc), "server.model_features")]


@pytest.mark.parametrize(("cc", "args"), [
    ("12.0", {"enable_dsa_cache_layer_split": True, "disaggregation_mode": "prefill", "enable_prefill_cp": True,
              "cp_strategy": "interleave"}),  # targeted-arch-02
    ("12.0", {"enable_hisparse": True, "disable_radix_cache": True}),  # targeted-arch-12
    ("9.0", {"enable_hisparse": True, "disable_radix_cache": True, "dsa_decode_backend": "flashmla_sparse"}),  # -50
    ("10.0", {"dcp_size": 2}),  # targeted-arch-15
    ("9.0", {"enable_prefill_cp": True, "cp_strategy": "interleave", "disaggregation_mode": "prefill"}),  # targeted-arch-18
    ("12.0", {"learnable_sink": None}),  # targeted-arch-52 (learnable_sink: bfloat16 by default)
])
def test_dsa_override_accepted(cc: str, args: dict[str, Any]) -> None:
    args = dict(args)
    extra = {"learnable_sink": True} if "learnable_sink" in args else {}
    args.pop("learnable_sink", None)
    assert sources({"tp_size": 8, "json_model_override_args": dsa(**extra), **args}, cc) == []


@pytest.mark.parametrize(("cc", "args", "extra", "where"), [
    ("12.0", {"kv_cache_dtype": "fp8_e5m2"}, {}, "overrides.py:541"),  # targeted-arch-05
    ("12.0", {"kv_cache_dtype": "fp8_e4m3"}, {"learnable_sink": True}, "overrides.py:528"),  # targeted-arch-51
    ("10.0", {"dcp_size": 2, "enable_hierarchical_cache": True}, {}, "deepseek_v2.py:22"),  # targeted-arch-14
    ("10.0", {"dcp_size": 2, "disaggregation_mode": "prefill"}, {}, "deepseek_v2.py:24"),  # targeted-arch-61
    ("10.0", {"dcp_size": 2}, {"index_kpool": 2}, "deepseek_v2.py:164"),  # targeted-arch-41
    ("10.0", {"enable_two_batch_overlap": True, "moe_a2a_backend": "deepep"}, {"index_topk_freq": 2},
     "model_hook.py:67"),  # targeted-arch-40
    ("9.0", {"enable_prefill_cp": True, "cp_strategy": "interleave", "disaggregation_mode": "decode"}, {},
     "model_hook.py:362"),  # targeted-arch-17
    ("12.0", {"enable_dsa_cache_layer_split": True, "disaggregation_mode": "prefill", "enable_prefill_cp": True,
              "cp_strategy": "zigzag"}, {}, "model_hook.py:384"),  # targeted-arch-03
    ("10.0", {"enable_dsa_cache_layer_split": True, "disaggregation_mode": "prefill", "enable_prefill_cp": True,
              "cp_strategy": "interleave", "disaggregation_transfer_backend": "nixl"}, {}, "model_hook.py:395"),  # -04
    ("12.0", {"enable_hisparse": True}, {}, "hisparse_hook.py:109"),  # targeted-arch-13
])
def test_dsa_override_refused(cc: str, args: dict[str, Any], extra: dict[str, Any], where: str) -> None:
    found = sources({"tp_size": 8, "json_model_override_args": dsa(**extra), **args}, cc)
    assert found and found[0].endswith(where), found


def test_without_index_topk_the_table_deepseek_v3_stays_mla() -> None:
    """The same switches without the override: DeepSeek-V3 is no DSA model (targeted-arch-01, -06, -11, -62)."""
    assert sources({"tp_size": 8, "enable_hisparse": True, "disable_radix_cache": True})[0].startswith(
        "sglang/srt/arg_groups/hisparse_hook.py:104")
    assert sources({"tp_size": 8, "kv_cache_dtype": "fp8_e5m2"}) == []
    assert sources({"tp_size": 8, "dcp_size": 2, "disaggregation_mode": "prefill"}, "10.0") == []


@pytest.mark.parametrize(("version", "where"), [
    ("0.5.22", "model_hook.py:356"), ("0.5.21", "model_hook.py:324"), ("0.5.20", "model_hook.py:264")])
def test_prefill_cp_on_decode_cites_each_release(version: str, where: str) -> None:
    found = sources({"tp_size": 8, "json_model_override_args": dsa(), "enable_prefill_cp": True,
                     "cp_strategy": "interleave", "disaggregation_mode": "decode"}, "9.0", version)
    assert found and found[0].endswith(where), found


def test_dcp_checks_are_new_in_0_5_22() -> None:
    assert not [s for s in sources({"tp_size": 8, "json_model_override_args": dsa(), "dcp_size": 2,
                                    "disaggregation_mode": "prefill"}, "10.0", "0.5.21") if "deepseek_v2.py" in s]
