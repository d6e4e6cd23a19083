"""What handle_dwdp forces, as the checks after it read it.

handle_dwdp (sglang/srt/arg_groups/parallel_hook.py:433-515, run by pipeline.py:189; 0.5.20-0.5.22 the same place)
sets, once its own asserts pass (dwdp_size == tp_size, ...: server.parallel), attn_dp_size = dwdp_size and dp_size 1
(0.5.20 / 0.5.21: dp_size = dwdp_size with enable_dp_attention), enable_dp_lm_head, moe_dense_tp_size 1,
ep_size = dwdp_size, moe_dp_size 1, moe_a2a_backend none and disable_cuda_graph. Every check the rules below mirror
runs after it (handle_data_parallelism, handle_context_parallelism, handle_hicache, the MoE hooks, check_server_args),
so they read the forced values (resolve.dwdp_on, attention_dp_width, attention_dp_on, handled_a2a_backend): the
MISSED were attn_cp_size 2, enable_lmcache, triton_v2 LoRA, the FP8 cutlass runner's ep_size and a static expert
dispatch without an all-to-all backend; the false alarms moe_dense_tp_size, dp_size (multi-node, with attn_dp_size,
with enable_dp_lm_head, the GPU count), attn_dp_size not dividing tp_size, the all-to-all backends DWDP replaces, the
MoE runners' ep_size and all-to-all checks, and a capture-only speculative algorithm.

Each verdict is probe-confirmed by the ``dwdp_resolved-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23, and
0.5.20-0.5.22 with release_conformance.py's probe).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host, rules_context

T4 = {"tp_size": 4, "dwdp_size": 4}
T8 = {"tp_size": 8, "dwdp_size": 8}


def rules(hostvars: dict[str, Any]) -> list[str]:
    return sorted({p.rule for p in validate_host(hostvars).errors})


def _ctx(args: dict[str, Any], version: str = "0.5.23", model: str = DEEPSEEK, cc: str = "12.0") -> Any:
    return rules_context(host(args, version, model=model, cc=cc))


@pytest.mark.parametrize("version", ALL)
def test_resolver_reads_the_forced_values(version: str) -> None:
    ctx = _ctx({**T4, "dp_size": 2, "moe_a2a_backend": "pplx"}, version)
    assert resolve.dwdp_on(ctx)
    assert resolve.attention_dp_width(ctx) == 4 and resolve.attention_dp_on(ctx)
    assert resolve.handled_a2a_backend(ctx) == "none"
    assert resolve.gpu_ids(ctx) == [0, 1, 2, 3]  # one TP group: dp_size is 1 under DWDP
    # enable_waterfill's deepep comes after (handle_a2a_moe, pipeline.py:295)
    assert resolve.handled_a2a_backend(_ctx({**T4, "enable_waterfill": True}, version)) == "deepep"
    off = _ctx({"tp_size": 4, "dp_size": 2, "moe_a2a_backend": "pplx"}, version)
    assert not resolve.dwdp_on(off) and resolve.attention_dp_width(off) == 1
    assert resolve.handled_a2a_backend(off) == "pplx" and len(resolve.gpu_ids(off)) == 8


# SGLang refuses these (the MISSED): the rule that now says so.
@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("model", "cc", "args", "rule", "since"), [
    (DEEPSEEK, "12.0", {**T4, "attn_cp_size": 2}, "server.parallel", "0.5.20"),  # parallel_hook.py:162
    (QWEN3_NEXT, "9.0", {**T4, "enable_lmcache": True}, "server.kv_cache", "0.5.21"),  # kv_cache_hook.py:454
    (LLAMA, "9.0", {**T4, "enable_lora": True, "max_lora_rank": 8, "lora_target_modules": ["q_proj"],
                    "lora_backend": "triton_v2"}, "server.lora", "0.5.23"),  # lora_hook.py:30
    (DEEPSEEK, "10.0", {**T8, "moe_runner_backend": "cutlass"}, "server.moe", "0.5.20"),  # moe_hook.py:161
    (DEEPSEEK, "9.0", {**T8, "moe_a2a_backend": "deepep", "ep_dispatch_algorithm": "static"}, "server.moe",
     "0.5.20"),  # parallel_hook.py:783
    (DEEPSEEK, "12.0", {**T4, "enable_tp_lm_head_all_to_all": True}, "server.parallel", "0.5.20"),  # overrides.py:1432
])
def test_dwdp_refusals(version: str, model: str, cc: str, args: dict[str, Any], rule: str, since: str) -> None:
    if version < since:
        pytest.skip("the option or the check is newer")
    assert rule in rules(host(args, version, model=model, cc=cc))


@pytest.mark.parametrize("version", ALL)
def test_dwdp_refusals_without_dwdp_stay_accepted(version: str) -> None:
    # the same sizes without DWDP: SGLang accepts attn_cp_size 2 on tp_size 4, and cutlass with ep_size 1
    assert "server.parallel" not in rules(host({"tp_size": 4, "attn_cp_size": 2}, version, model=DEEPSEEK, cc="12.0"))
    assert "server.moe" not in rules(host({"tp_size": 8, "moe_runner_backend": "cutlass"}, version, model=DEEPSEEK,
                                          cc="10.0"))


@pytest.mark.parametrize("version", ALL)
def test_tp_lm_head_source_per_release(version: str) -> None:
    line = {"0.5.23": "1432", "0.5.22": "1395", "0.5.21": "1372", "0.5.20": "1491"}[version]
    found = [p.source for p in validate_host(host({**T4, "enable_tp_lm_head_all_to_all": True}, version, model=DEEPSEEK,
                                                  cc="12.0")).errors if p.rule == "server.parallel"]
    assert found == [f"sglang/srt/arg_groups/overrides.py:{line}"]


# SGLang accepts these (the false alarms): no error at all.
@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("model", "cc", "args", "since"), [
    (DEEPSEEK, "12.0", {**T4, "moe_dense_tp_size": 2}, "0.5.20"),
    (DEEPSEEK, "12.0", {**T4, "dp_size": 2, "nnodes": 2, "dist_init_addr": "10.0.0.1:5000"}, "0.5.20"),
    (DEEPSEEK, "12.0", {**T4, "dp_size": 2, "enable_dp_lm_head": True}, "0.5.20"),
    (DEEPSEEK, "12.0", {**T4, "dp_size": 3}, "0.5.20"),  # 8 GPUs: one TP group of 4
    (DEEPSEEK, "12.0", {**T4, "attn_dp_size": 3}, "0.5.22"),
    (DEEPSEEK, "12.0", {**T4, "dp_size": 2, "attn_dp_size": 2}, "0.5.22"),
    (DEEPSEEK, "12.0", {**T4, "moe_a2a_backend": "pplx"}, "0.5.20"),
    (DEEPSEEK, "12.0", {**T4, "moe_a2a_backend": "mori"}, "0.5.20"),
    (QWEN3_NEXT, "9.0", {**T4, "moe_a2a_backend": "flashinfer"}, "0.5.20"),
    (QWEN35, "10.0", {**T8, "moe_a2a_backend": "flashinfer_megamoe", "moe_runner_backend": "flashinfer_megamoe"},
     "0.5.20"),
    (DEEPSEEK, "10.0", {**T8, "moe_a2a_backend": "deepep_v2"}, "0.5.20"),
    (QWEN35, "10.0", {**T8, "moe_runner_backend": "flashinfer_cutlass", "ep_size": 2}, "0.5.20"),
    (QWEN35, "10.0", {**T8, "moe_runner_backend": "flashinfer_cutedsl", "moe_a2a_backend": "mooncake"}, "0.5.20"),
    (DEEPSEEK, "12.0", {**T4, "enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3"}, "0.5.23"),
])
def test_dwdp_accepts(version: str, model: str, cc: str, args: dict[str, Any], since: str) -> None:
    if version < since:
        pytest.skip("the option is newer")
    assert rules(host(args, version, model=model, cc=cc)) == []
