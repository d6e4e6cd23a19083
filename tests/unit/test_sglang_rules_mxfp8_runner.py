"""The hardware profiles judge the MoE runner quantization mxfp8 makes SGLang run, not the one written.

SGLang replaces a runner MXFP8 does not run (triton, flashinfer_cutlass...) and picks for an unset one
flashinfer_trtllm (sglang/srt/arg_groups/overrides.py:1484-1512), whose TensorRT-LLM kernels are SM100-only: on
SM120/SM121 SGLang accepts the launch and the kernel fails at run time, so ``sm12x.moe`` refuses it (stricter than
SGLang: differential.STRICTER's ``sm12x.``); on SM100 the same launch is fine. ``resolve.mxfp8_moe_runner`` is the one
place the replacement is computed (``server.moe`` reads it too). Probe-confirmed: SGLang 0.5.23 accepts each of these
on 12.0 and on 10.0 (the catalog-mxfp8-* cases of tests/conformance/cases.yaml).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import lookup_model
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import mxfp8_moe_runner
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_validate import LLAMA, find, llama_host, rules

QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # a MoE model
A2A = {"moe_a2a_backend": "flashinfer", "tp_size": 2, "attn_dp_size": 2, "flashinfer_a2a_dispatch_type": "mxfp8"}


def host(cc: str, model: str = QWEN_NEXT, **args: Any) -> dict[str, Any]:
    return llama_host({"quantization": "mxfp8", **args}, sglang_model_path=model, nvidia_gpu_compute_capability=cc,
                      sglang_spec="off")


class _Ctx:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args, self.model = args, lookup_model(QWEN_NEXT)


@pytest.mark.parametrize(("args", "runner"), [
    ({}, None),
    ({"quantization": "fp8", "moe_runner_backend": "triton"}, None),
    ({"quantization": "mxfp8"}, "flashinfer_trtllm"),
    ({"quantization": "mxfp8", "moe_runner_backend": "triton"}, "flashinfer_trtllm"),
    ({"quantization": "mxfp8", "moe_runner_backend": "flashinfer_cutlass"}, "flashinfer_trtllm"),
    ({"quantization": "mxfp8", "moe_runner_backend": "cutlass"}, "cutlass"),
    ({"quantization": "mxfp8", "moe_runner_backend": "flashinfer_trtllm_routed"}, "flashinfer_trtllm_routed"),
    ({"quantization": "mxfp8", "moe_runner_backend": "triton", "moe_a2a_backend": "flashinfer_megamoe"},
     "flashinfer_megamoe"),
    ({"quantization": "mxfp8", "moe_runner_backend": "megamoe"}, "flashinfer_trtllm"),  # the alias: a2a megamoe, auto
])
def test_the_replacement(args: dict[str, Any], runner: str | None) -> None:
    """overrides.py:1484-1512: MXFP8's runners stay, any other (auto included) becomes MXFP8's default."""
    assert mxfp8_moe_runner(_Ctx(args)) == runner  # type: ignore[arg-type]


@pytest.mark.parametrize("cc", ["12.0", "12.1"])
@pytest.mark.parametrize("args", [{"moe_runner_backend": "triton"}, {"moe_runner_backend": "flashinfer_cutlass"},
                                  {**A2A, "moe_runner_backend": "triton"}])
def test_a_replaced_runner_is_refused_on_sm120(cc: str, args: dict[str, Any]) -> None:
    result = validate_host(host(cc, **args))
    problem = find(result.errors, "sm12x.moe")
    assert problem.variable == "sglang_args.moe_runner_backend" and problem.value == args["moe_runner_backend"]
    assert f"replaces moe_runner_backend {args['moe_runner_backend']!r}" in problem.message
    assert "'flashinfer_trtllm'" in problem.message and f"compute capability {cc}" in problem.message
    assert "Stricter than SGLang, which accepts the launch" in problem.message
    assert "quantization other than mxfp8" in problem.fix and "cutlass, deep_gemm" in problem.fix
    assert (problem.source or "").startswith("sglang/srt/arg_groups/overrides.py:1484-1512")
    assert rules(result) == ["sm12x.moe"]


def test_an_unset_runner_is_refused_on_sm120_for_a_moe_model_only() -> None:
    problem = find(validate_host(host("12.0")).errors, "sm12x.moe")
    assert problem.variable == "sglang_args.quantization" and "mxfp8 picks MoE runner 'flashinfer_trtllm'" in problem.message
    assert rules(validate_host(host("12.0", LLAMA))) == []  # dense: no MoE runner runs


@pytest.mark.parametrize("args", [{"moe_runner_backend": "triton"}, {"moe_runner_backend": "flashinfer_cutlass"},
                                  {**A2A, "moe_runner_backend": "triton"}, {}, {"moe_runner_backend": "cutlass"}])
def test_sm100_runs_the_replaced_runner(args: dict[str, Any]) -> None:
    assert rules(validate_host(host("10.0", **args))) == []


def test_an_mxfp8_runner_as_written_is_judged_as_before_on_sm120() -> None:
    """cutlass is an MXFP8 runner: nothing replaced, nothing refused; an explicit flashinfer_trtllm is the profile's
    refusal of the written runner (no second problem about a replacement)."""
    assert rules(validate_host(host("12.0", moe_runner_backend="cutlass"))) == []
    written = validate_host(host("12.0", moe_runner_backend="flashinfer_trtllm"))
    assert [p.variable for p in written.errors if p.rule == "sm12x.moe"] == ["sglang_args.moe_runner_backend"]
    assert "replaces" not in find(written.errors, "sm12x.moe").message
