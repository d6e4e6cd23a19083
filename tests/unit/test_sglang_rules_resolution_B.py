"""chunked_prefill_size as each SGLang check reads it, found by comparing the resolver with SGLang's resolved values
(tests/conformance/resolution.py): handle_data_parallelism divides it by the attention-DP width (parallel_hook.py:326-331), DWDP's
width included (handle_dwdp sets attn_dp_size = dwdp_size first, parallel_hook.py:466-471), and enable_mis turns it
off (-1) before that (attention_hook.py:565-570). The checks after both: check_server_args' page divisibility
(validation_hook.py:244: numeric.chunked_prefill_size, memory.chunked_page), the pplx and MoRI budgets
(moe_hook.py:611-619, :564-572), MegaMoE's need for chunked prefill (mega_moe_hook.py:192) and DeepEP v2's prefill
budget, which falls back to max_prefill_tokens (moe_hook.py:641-653, :688-695).

Every verdict here is probe-confirmed on SGLang 0.5.23 and, where the release has the option, 0.5.20-0.5.22; the
corpus cases are the ``resolve-b-...`` block of tests/conformance/cases.yaml.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_validate as sv
from test_sglang_rules_fuzz10k_s3 import errors, with_memory
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_seed0_2000 import host

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
import resolution  # noqa: E402

RTX_PRO_6000, B200, A100, H100, GB10 = 97887, 183359, 81920, 81559, 122570
ALL = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]


def attention_dp(version: str, width: int) -> dict[str, Any]:
    """attention DP of ``width`` as the release spells it (attn_dp_size from 0.5.22)."""
    if version in ("0.5.20", "0.5.21"):
        return {"dp_size": width, "enable_dp_attention": True}
    return {"attn_dp_size": width}


def context(hostvars: dict[str, Any]) -> Any:
    """The rules' context for ``hostvars``."""
    seen: dict[str, Any] = {}
    real = sv.run_rules

    def grab(ctx: Any) -> None:
        seen["ctx"] = ctx
        real(ctx)

    with mock.patch.object(sv, "run_rules", grab):
        sv.validate_host(hostvars, spec="keep")
    return seen["ctx"]


# --- enable_mis: check_server_args sees chunked prefill off (attention_hook.py:565-570 before validation_hook.py:244) --


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_mis": True, "chunked_prefill_size": 100, "page_size": 64}, False),  # a false alarm before
    ({"chunked_prefill_size": 100, "page_size": 64}, True),
    ({"enable_mis": True, "chunked_prefill_size": 128, "page_size": 64}, False),
])
def test_mis_chunk_against_the_page(version: str, args: dict[str, Any], refused: bool) -> None:
    found = errors(with_memory(host(args, version, model=LLAMA, cc="12.0", gpus=1), RTX_PRO_6000),
                   "numeric.chunked_prefill_size")
    assert bool(found) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("mis", "refused"), [(True, False), (False, True)])
def test_mis_default_chunk_per_rank_against_the_page(version: str, mis: bool, refused: bool) -> None:
    """SGLang's default 8192 over attention DP 6 is 1365 per rank, not a multiple of 16, unless enable_mis."""
    args = {"tp_size": 6, "page_size": 16, **attention_dp(version, 6), **({"enable_mis": True} if mis else {})}
    found = errors(with_memory(host(args, version, model=LLAMA, cc="12.0", gpus=8), RTX_PRO_6000), "memory.chunked_page")
    assert bool(found) is refused


def test_mis_on_sm100_with_flashinfer() -> None:
    args = {"enable_mis": True, "attention_backend": "flashinfer", "chunked_prefill_size": 100, "page_size": 16}
    assert not sv.validate_host(with_memory(host(args, model=LLAMA, cc="10.0", gpus=1), B200)).errors


# --- DWDP: the chunk per rank is chunked_prefill_size // dwdp_size (parallel_hook.py:466-471, :326-331) --------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("chunk", "page", "refused"), [
    (512, 128, True),  # 64 per rank: a MISSED before
    (513, 64, False),  # 64 per rank: a false alarm before
    (1024, 128, False),
])
def test_dwdp_chunk_per_rank_against_the_page(version: str, chunk: int, page: int, refused: bool) -> None:
    args = {"dwdp_size": 8, "tp_size": 8, "chunked_prefill_size": chunk, "page_size": page}
    found = errors(with_memory(host(args, version, model=QWEN3_NEXT, cc="8.0", gpus=8), A100),
                   "numeric.chunked_prefill_size")
    assert bool(found) is refused
    if refused:
        assert f"{chunk} // 8 = {chunk // 8}" in found[0].message


# --- pplx: the per-rank chunk after attention DP, none with enable_mis (moe_hook.py:611-619) --------------------------


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"chunked_prefill_size": 256}, False),  # 128 per rank: a false alarm before
    ({"chunked_prefill_size": 258}, True),  # 129
    ({"enable_mis": True, "attention_backend": "flashinfer"}, False),  # chunked prefill off: a false alarm before
    ({}, True),  # SGLang's default over 2 is far above 128
])
def test_pplx_budget_per_rank(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"moe_a2a_backend": "pplx", "tp_size": 2, "ep_size": 2, **attention_dp(version, 2), **args}, version,
                    model=DEEPSEEK, cc="9.0", gpus=4)
    found = [p for p in errors(hostvars, "moe.pplx") if "tokens per rank" in p.message]
    assert bool(found) is refused
    assert not [p for p in errors(hostvars, "moe.pplx") if "needs attention data parallelism" in p.message]


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21"])
def test_pplx_without_attention_dp_on_old_releases(version: str) -> None:
    """moe_hook.py:497 there: enable_dp_attention with dp_size >= 2."""
    found = errors(host({"moe_a2a_backend": "pplx", "tp_size": 2, "ep_size": 2, "dp_size": 2}, version, model=DEEPSEEK,
                        cc="9.0", gpus=4), "moe.pplx")
    assert [p for p in found if "needs attention data parallelism" in p.message]


# --- MegaMoE needs chunked prefill, which enable_mis turns off (mega_moe_hook.py:192; :132 in 0.5.21 / 0.5.22) --------


@pytest.mark.parametrize(("version", "line"), [("0.5.21", "132"), ("0.5.22", "132"), ("0.5.23", "192")])
@pytest.mark.parametrize("mis", [True, False])
def test_megamoe_with_mis(version: str, line: str, mis: bool) -> None:
    args = {"moe_runner_backend": "megamoe", "chunked_prefill_size": 8192, "attention_backend": "flashinfer",
            **({"enable_mis": True} if mis else {})}
    found = errors(with_memory(host(args, version, model=QWEN3_NEXT, cc="10.0", gpus=8), B200), "moe.megamoe")
    assert [p.source for p in found] == ([f"sglang/srt/arg_groups/mega_moe_hook.py:{line}"] if mis else [])
    assert not sv.validate_host(with_memory(host(args, "0.5.20", model=QWEN3_NEXT, cc="10.0", gpus=8), B200)).errors


# --- DeepEP v2 with enable_mis: the prefill ceiling is max_prefill_tokens (moe_hook.py:641-653) ------------------------


@pytest.mark.parametrize(("version", "capacity", "extra", "refused"), [
    ("0.5.23", "256", {}, True),  # 16384 / 8 = 2048 per rank: a MISSED before
    ("0.5.23", "2048", {}, False),
    ("0.5.23", "256", {"max_prefill_tokens": 2048}, False),  # 256 per rank
    ("0.5.22", "256", {}, True),
    ("0.5.21", "2048", {}, True),  # no scatter before 0.5.22: 16384
    ("0.5.20", "256", {"max_prefill_tokens": 2048}, True),
])
def test_deepep_v2_with_mis(version: str, capacity: str, extra: dict[str, Any], refused: bool) -> None:
    args = {"tp_size": 8, "moe_a2a_backend": "deepep_v2", "enable_mis": True, "attention_backend": "flashinfer", **extra}
    hostvars = with_memory(host(args, version, model=DEEPSEEK, cc="10.0", gpus=8,
                                env={"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": capacity}), B200)
    found = errors(hostvars, "moe.deepep_v2")
    assert bool(found) is refused
    if refused:
        assert "enable_mis turns it off" in found[0].message


# --- the value SGLang leaves (resolution.final_chunked_prefill_size), the resolver-differential's cases --------------


@pytest.mark.parametrize(("args", "model", "cc", "mib", "final"), [
    ({"attn_dp_size": 2, "tp_size": 2}, QWEN3_NEXT, "10.0", B200, 8192),  # fuzz-0-06586
    ({"dp_size": 7, "enable_dp_attention": True, "tp_size": 7}, QWEN3_NEXT, "12.0", RTX_PRO_6000, 1170),  # fuzz-0-00435
    ({"attn_cp_size": 2, "attn_dp_size": 2, "tp_size": 4}, LLAMA, "9.0", H100, 4096),  # fuzz-0-08728
    ({"dwdp_size": 8, "enable_dp_lm_head": True, "tp_size": 8}, QWEN35, "8.0", A100, 1024),  # fuzz-4-07854
    ({"enable_mis": True}, LLAMA, "12.1", GB10, -1),  # fuzz-3-00832
    ({"enable_mis": True, "chunked_prefill_size": 4096}, LLAMA, "12.0", RTX_PRO_6000, -1),
    ({"chunked_prefill_size": 1000, "attn_dp_size": 3, "tp_size": 3}, LLAMA, "12.0", RTX_PRO_6000, 333),  # written too
    ({}, LLAMA, "12.0", RTX_PRO_6000, 8192),
])
def test_final_chunked_prefill_size(args: dict[str, Any], model: str, cc: str, mib: int, final: int) -> None:
    ctx = context(with_memory(host(args, model=model, cc=cc, gpus=8), mib))
    assert resolution.final_chunked_prefill_size(ctx) == final
