"""The FlashInfer CuteDSL MoE runner's checks that hinge on what SGLang resolves first.

* The quantization handle_moe_kernel_config compares (moe_hook.py:95-101): a model override fills an unset
  --quantization with the checkpoint's on a B200 for the Qwen3 MoE family and GLM-4 MoE (model_overrides/qwen3_moe.py:
  41-49, glm4_moe.py:19-32), so Qwen3.5-397B-A17B-NVFP4 runs flashinfer_cutedsl there (modelopt_fp4) and is refused on
  the RTX PRO 6000, where nothing is filled in. The rules had read "no quantization" on both: a false alarm on the
  B200, found by comparing the quantization the resolver claims as "none" with SGLang's resolved value (302 cases of
  the kept fuzz runs, seeds 0-5).
* 0.5.20 / 0.5.21's workspace budget of FlashInfer A2A with the CuteDSL runner (validate_cutedsl_a2a_token_budget,
  moe_hook.py:651 in 0.5.20, :649 in 0.5.21): SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK (1024 when unset) x
  ep_size against max_prefill_tokens (16384 by default). 0.5.22 replaced it with the per-rank budget of every runner.

Each verdict is probe-confirmed by the ``cutedsl-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; the budget
with release_conformance.py's probe on 0.5.20 and 0.5.21).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host, rules_context

ENV = "SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


def cutedsl_quant_refusals(hostvars: dict[str, Any]) -> list[Any]:
    return [p for p in errors(hostvars, "server.moe") if "flashinfer_cutedsl runs quantization" in p.message]


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("cc", "args", "refused"), [
    ("10.0", {}, False),  # cutedsl-qwen35-nvfp4-b200: the override fills in modelopt_fp4
    ("10.0", {"moe_a2a_backend": "flashinfer", "attn_dp_size": 8}, False),
    ("12.0", {}, True),  # cutedsl-qwen35-nvfp4-rtx-pro-6000: nothing is filled in on SM120, SGLang refuses it
    ("10.0", {"quantization": "fp8"}, True),  # the host's own quantization is what SGLang compares
    ("10.0", {"quantization": "modelopt_fp4"}, False),
])
def test_qwen35_nvfp4_cutedsl(version: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    if "attn_dp_size" in args and version < "0.5.22":
        args = {**{k: v for k, v in args.items() if k != "attn_dp_size"}, "dp_size": 8, "enable_dp_attention": True}
    hostvars = host({"tp_size": 8, "moe_runner_backend": "flashinfer_cutedsl", **args}, version, model=QWEN35, cc=cc,
                    env={ENV: "16384"})
    assert bool(cutedsl_quant_refusals(hostvars)) is refused


def _ctx(model: str, cc: str, args: dict[str, Any]) -> Any:
    return rules_context(host(args, model=model, cc=cc))


@pytest.mark.parametrize(("model", "cc", "args", "filled"), [
    (QWEN35, "10.0", {}, "modelopt_fp4"),
    (QWEN35, "10.3", {}, "modelopt_fp4"),
    (QWEN35, "12.0", {}, None),  # SM100 only
    (QWEN35, "10.0", {"quantization": "modelopt_fp4"}, None),  # written: nothing is filled in
    (DEEPSEEK, "10.0", {}, "fp8"),  # DeepSeek-V3's FP8 checkpoint (checkpoint_fp8_filled)
    ("nvidia/DeepSeek-V3-0324-FP4", "10.0", {}, None),  # the DeepSeek family: FP8 only is claimed
    ("meta-llama/Llama-3.1-8B-Instruct", "10.0", {}, None),  # unquantized, and no such override
])
def test_checkpoint_quantization_filled(model: str, cc: str, args: dict[str, Any], filled: str | None) -> None:
    ctx = _ctx(model, cc, args)
    assert resolve.checkpoint_quantization_filled(ctx) == filled
    assert resolve.checkpoint_fp8_filled(ctx) is (filled == "fp8")


# --- 0.5.20 / 0.5.21: validate_cutedsl_a2a_token_budget ------------------------------------------------------------

A2A = {"tp_size": 8, "ep_size": 8, "dp_size": 8, "enable_dp_attention": True, "moe_a2a_backend": "flashinfer",
       "moe_runner_backend": "flashinfer_cutedsl", "quantization": "modelopt_fp4"}


def budget_refusals(args: dict[str, Any], version: str, env: dict[str, str] | None = None) -> list[Any]:
    return [p for p in errors(host(args, version, model=DEEPSEEK, cc="10.0", env=env), "server.moe")
            if "sizes the FlashInfer A2A workspace" in p.message]


@pytest.mark.parametrize(("version", "line"), [("0.5.20", "651-669"), ("0.5.21", "649-667")])
@pytest.mark.parametrize(("args", "env", "refused"), [
    ({}, None, True),  # cutedsl-a2a-budget-default: 1024 x 8 < 16384
    ({}, {ENV: "2048"}, False),  # 2048 x 8 covers it
    ({}, {ENV: "0"}, True),  # 0 reads as unset: 1024
    ({"max_prefill_tokens": 8192}, None, False),  # cutedsl-a2a-budget-prefill-8k
    ({"max_prefill_tokens": 8193}, None, True),
    ({"disaggregation_mode": "decode"}, None, False),  # a PD decode server has no prefill to dispatch
    ({"moe_runner_backend": "flashinfer_cutlass"}, None, False),  # the CuteDSL runner's check only
])
def test_cutedsl_a2a_budget(version: str, line: str, args: dict[str, Any], env: dict[str, str] | None,
                            refused: bool) -> None:
    found = budget_refusals({**A2A, **args}, version, env)
    assert bool(found) is refused
    if refused:
        assert found[0].source == f"sglang/srt/arg_groups/moe_hook.py:{line}"
        assert found[0].variable == (f"sglang_env.{ENV}" if env else "sglang_args.moe_a2a_backend")


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_cutedsl_budget_gone_from_0_5_22(version: str) -> None:
    """0.5.22 judges every runner's per-rank budget instead (moe.py's _flashinfer_a2a_budget)."""
    assert not budget_refusals({**A2A, "attn_dp_size": 8} if version == "0.5.23" else A2A, version)
