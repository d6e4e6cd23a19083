"""attn_cp_size alone leaves the written all-to-all backend: the checks of the backend run on it.

DeepSeek's context-parallel overrides set moe_a2a_backend deepep themselves, and only under enable_prefill_cp
(sglang/srt/arg_groups/model_overrides/deepseek_v2.py:106 for DSA zigzag, :191 for MLA; 0.5.22 :106 / :192, 0.5.21
:84 / :156, 0.5.20 :91 / :163). Nothing else in SGLang sets the backend but enable_waterfill. resolve._a2a_may_change
had treated any attn_cp_size > 1 on an MLA (or unknown) model like enable_prefill_cp, so every rule that waits for the
override skipped the backend's checks there: 12 of SGLang's checks (moe_hook.py:81, :98, :124, :161, :414, :421, :427,
:433, :475, :689, :700; validation_hook.py:768) went MISSED on DeepSeek-V3 with attn_cp_size 2.

Found by probing attn_cp_size 2 variants of the corpus's DeepSeek-V3 MoE cases with SGLang 0.5.20-0.5.23 (108 inputs
per release): 18 to 21 MISSED per release before, none after. The attn-cp-* cases in tests/conformance/cases.yaml hold
SGLang 0.5.23's verdicts; the rows here are the ones the probes confirmed on every release.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import _a2a_may_change
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_seed0_2000 import host, rules_context

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
UNKNOWN = "example/unknown-model"
VERSIONS = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]


@pytest.mark.parametrize(("model", "args", "may_change"), [
    (DEEPSEEK, {"attn_cp_size": 2, "tp_size": 8}, False),  # the override does not run
    (DEEPSEEK, {"enable_prefill_cp": True, "cp_strategy": "interleave", "tp_size": 8}, True),
    (DEEPSEEK, {"enable_prefill_cp": True, "attn_cp_size": 2, "tp_size": 8}, True),
    (UNKNOWN, {"attn_cp_size": 2, "tp_size": 8}, False),
    (UNKNOWN, {"enable_prefill_cp": True, "tp_size": 8}, True),  # its architecture may be one of the family's
    (LLAMA, {"enable_prefill_cp": True, "tp_size": 8}, False),  # not MLA: no override of the backend
    (DEEPSEEK, {"tp_size": 8}, False),
])
def test_only_prefill_cp_may_change_the_backend(model: str, args: dict[str, Any], may_change: bool) -> None:
    assert _a2a_may_change(rules_context(host(args, model=model, cc="12.0", gpus=8))) is may_change


def rules(version: str, args: dict[str, Any], cc: str = "12.0", env: dict[str, str] | None = None) -> set[str]:
    return {p.rule for p in validate_host(host(args, version, model=DEEPSEEK, cc=cc, gpus=8, env=env)).errors}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("args", "refused_by"), [
    # validation_hook.py:768 (0.5.22 :703, 0.5.21 :533, 0.5.20 :493): TBO without an EP backend needs attention DP.
    ({"enable_two_batch_overlap": True, "attn_cp_size": 2, "tp_size": 8}, "tbo.attention_dp"),
    # moe_hook.py:475 (0.5.22 :408, 0.5.21 :400, 0.5.20 :402): the FlashInfer backend needs attention DP of tp_size.
    ({"attn_cp_size": 2, "tp_size": 8, "moe_a2a_backend": "flashinfer", "flashinfer_a2a_dispatch_type": "nvfp4"},
     "server.moe"),
    # moe_hook.py:591 (0.5.22 :515, 0.5.21 :497, 0.5.20 :499): pplx needs attention DP.
    ({"enable_two_batch_overlap": True, "attn_cp_size": 2, "tp_size": 8, "moe_a2a_backend": "pplx"}, "server.moe"),
])
def test_the_written_backend_is_checked_beside_attn_cp_size(version: str, args: dict[str, Any],
                                                             refused_by: str) -> None:
    assert refused_by in rules(version, args)


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "cc", "env", "refused"), [
    # deepep_v2's runner (moe_hook.py:414; attn-cp-deepep-v2-triton-runner)
    ({"moe_a2a_backend": "deepep_v2", "tp_size": 8, "ep_size": 8, "moe_runner_backend": "triton", "attn_cp_size": 2},
     "10.0", {"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "65536"}, True),
    # its TBO hooks (moe_hook.py:421; attn-cp-deepep-v2-tbo)
    ({"moe_a2a_backend": "deepep_v2", "tp_size": 8, "ep_size": 8, "moe_runner_backend": "deep_gemm",
      "enable_two_batch_overlap": True, "attn_cp_size": 2}, "10.0",
     {"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "65536"}, True),
    # TBO with deepep: an EP backend (validation_hook.py:768; attn-cp-tbo-deepep-accepted)
    ({"enable_two_batch_overlap": True, "attn_cp_size": 2, "tp_size": 8, "moe_a2a_backend": "deepep"}, "12.0", None,
     False),
])
def test_deepep_v2_beside_attn_cp_size(version: str, args: dict[str, Any], cc: str, env: dict[str, str] | None,
                                       refused: bool) -> None:
    found = rules(version, args, cc, env)
    assert bool(found) is refused, found
