"""What the 10,000-case differential fuzz run of seed 18 (``differential.py --cases 10000 --seed 18``) found.

* A MISSED (fuzz-18-02824): NGRAM with ``speculative_ngram_max_bfs_breadth: 0`` and no speculative_num_steps.
  _handle_ngram makes the breadth speculative_eagle_topk and derives the steps as
  ``speculative_num_draft_tokens // speculative_eagle_topk``: a ZeroDivisionError (speculative_hook.py:1328; 0.5.22
  :1238, 0.5.21 :1216, 0.5.20 :1042), an implicit catalog entry now (implicit-0.5.23.yml).
* A false alarm (fuzz-18-05333): ``moe_dense_tp_size: 0`` on DeepSeek-V3 with prefill CP. DeepSeek's override sets it
  to 1 before check_server_args reads it (validation_hook.py:207): the MLA branch always (deepseek_v2.py:200), the DSA
  branch for zigzag from 0.5.22, for any strategy before (resolve.prefill_cp_sets_moe_dense_tp).

Each verdict is probe-confirmed on 0.5.20-0.5.23 by the fuzzed-ngram-bfs-breadth-zero* and prefill-cp-moe-dense-tp-*
cases in tests/conformance/cases.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_seed0_2000 import host

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
VERSIONS = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]
DSA = '{"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}'
LINES = {"0.5.20": "1042", "0.5.21": "1216", "0.5.22": "1238", "0.5.23": "1328"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("model", "gpus", "args", "refused"), [
    (QWEN3_NEXT, 4, {"enable_multi_layer_eagle": True, "speculative_ngram_max_bfs_breadth": 0}, True),  # fuzz-18-02824
    (LLAMA, 1, {"speculative_ngram_max_bfs_breadth": 0}, True),
    (LLAMA, 1, {"speculative_ngram_max_bfs_breadth": 0, "speculative_num_draft_tokens": 8}, True),
    (LLAMA, 1, {"speculative_ngram_max_bfs_breadth": 0, "speculative_num_steps": 2}, False),
    (LLAMA, 1, {"speculative_ngram_max_bfs_breadth": 1}, False),
    (LLAMA, 1, {}, False),  # the default breadth, 10
])
def test_ngram_breadth_zero(version: str, model: str, gpus: int, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"speculative_algorithm": "NGRAM", **args}, version, model=model, cc="12.0", gpus=gpus)
    found = [p for p in errors(hostvars, "server.speculative") if p.variable == "sglang_args.speculative_ngram_max_bfs_breadth"]
    assert [p.source for p in found] == ([f"sglang/srt/arg_groups/speculative_hook.py:{LINES[version]}"] if refused else [])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("model", "args", "refused"), [
    (DEEPSEEK, {"enable_prefill_cp": True, "cp_strategy": "zigzag"}, {}),  # fuzz-18-05333 (on a B300)
    (DEEPSEEK, {"enable_prefill_cp": True, "cp_strategy": "interleave"}, {}),  # the MLA branch: any strategy
    (DEEPSEEK, {"enable_prefill_cp": True, "cp_strategy": "zigzag", "json_model_override_args": DSA}, {}),
    (DEEPSEEK, {"enable_prefill_cp": True, "cp_strategy": "interleave", "json_model_override_args": DSA},
     {"0.5.22", "0.5.23"}),  # the DSA branch sets it for zigzag only from 0.5.22
    (DEEPSEEK, {}, set(VERSIONS)),
    (LLAMA, {"enable_prefill_cp": True, "cp_strategy": "interleave"}, set(VERSIONS)),  # no override
])
def test_moe_dense_tp_under_deepseek_prefill_cp(version: str, model: str, args: dict[str, Any],
                                                refused: set[str]) -> None:
    hostvars = host({"tp_size": 8, "moe_dense_tp_size": 0, **args}, version, model=model, cc="12.0", gpus=8)
    assert bool(errors(hostvars, "parallel.moe_dense_tp")) is (version in refused)
