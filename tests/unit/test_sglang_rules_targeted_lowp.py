"""FlashInfer A2A's dispatch types against the quantization SGLang reads, not the checkpoint's format.

handle_flashinfer_a2a_dispatch_type (moe_hook.py:184-202; 0.5.20 :142-167) compares cfg.quantization: the host's
--quantization (unquant: none), else what a model override fills in first, which is the checkpoint's only on SM100 (the
Qwen3 MoE family, qwen3_moe.py:39-49; DeepSeek-V3's fp8, overrides.py:786-800). flashinfer_a2a_dispatch_type nvfp4 also
runs with a hybrid FP8+NVFP4 checkpoint's nvfp4_moe_meta (model_config.py:775-788), which the model table does not
record, so a model not known (or a mixed one) is not accused.

* targeted-lowp-52 (tests/conformance/targeted-0.5.23.json): Qwen3.5-397B-A17B-NVFP4 with dispatch nvfp4 and no --quantization on an RTX PRO
  6000 is refused by SGLang (moe_hook.py:202); the rules had no check for it (the catalog entry was left to the
  preflight). On a B200 the same launch is accepted (the SM100 fill).
* The mxfp8 dispatch's quantization check read the model table's quant_method and stayed silent for an unquantized
  checkpoint with no --quantization, which SGLang refuses (moe_hook.py:193).

Each verdict is probe-confirmed by the targeted-lowp-* cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22 with
release_conformance.py, attention DP as enable_dp_attention + dp_size before 0.5.22).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import LLAMA, host

LINES = {"nvfp4": {"0.5.23": "202", "0.5.22": "174", "0.5.21": "169", "0.5.20": "165"},
         "mxfp8": {"0.5.23": "193", "0.5.22": "165", "0.5.21": "160", "0.5.20": "156"}}


def dispatch_refusals(model: str, cc: str, version: str, gpus: int, **args: Any) -> list[Any]:
    attn_dp: dict[str, Any] = ({"attn_dp_size": gpus} if version >= "0.5.22"
                               else {"enable_dp_attention": True, "dp_size": gpus})
    hostvars = host({"tp_size": gpus, "moe_a2a_backend": "flashinfer", **attn_dp, **args}, version, model=model, cc=cc,
                    gpus=gpus)
    return [p for p in errors(hostvars, "server.moe") if p.variable == "sglang_args.flashinfer_a2a_dispatch_type"]


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("model", "cc", "args", "refused"), [
    (QWEN35, "12.0", {"moe_runner_backend": "flashinfer_cutlass"}, True),  # targeted-lowp-52: nothing is filled in on SM120
    (QWEN35, "12.1", {"moe_runner_backend": "flashinfer_cutlass"}, True),
    (QWEN35, "10.0", {"moe_runner_backend": "flashinfer_cutlass"}, False),  # the SM100 fill: modelopt_fp4
    (QWEN35, "10.3", {"moe_runner_backend": "flashinfer_trtllm"}, False),
    (QWEN35, "12.0", {"moe_runner_backend": "flashinfer_cutlass", "quantization": "modelopt_fp4"}, False),
    (QWEN35, "10.0", {"moe_runner_backend": "flashinfer_cutlass", "quantization": "unquant"}, True),  # no fill
    (DEEPSEEK, "10.0", {"moe_runner_backend": "flashinfer_trtllm"}, True),  # the fill is fp8
    (QWEN3_NEXT, "12.0", {"moe_runner_backend": "flashinfer_cutlass"}, True),
    (LLAMA, "12.0", {"moe_runner_backend": "flashinfer_cutlass"}, True),
    ("example/unknown-moe", "12.0", {"moe_runner_backend": "flashinfer_cutlass"}, False),  # may carry nvfp4_moe_meta
])
def test_nvfp4_dispatch_reads_the_resolved_quantization(version: str, model: str, cc: str, args: dict[str, Any],
                                                       refused: bool) -> None:
    found = dispatch_refusals(model, cc, version, 8, flashinfer_a2a_dispatch_type="nvfp4", **args)
    assert bool(found) is refused, [p.message for p in found]
    if refused:
        assert found[0].source == f"sglang/srt/arg_groups/moe_hook.py:{LINES['nvfp4'][version]}"
        assert "needs quantization modelopt_fp4" in found[0].message


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("cc", "args", "refused"), [
    ("10.0", {}, True),  # Qwen3-Next's bf16 checkpoint, no --quantization: SGLang reads none
    ("10.0", {"quantization": "mxfp8"}, False),
    ("10.0", {"quantization": "fp8"}, True),
])
def test_mxfp8_dispatch_reads_the_resolved_quantization(version: str, cc: str, args: dict[str, Any],
                                                       refused: bool) -> None:
    found = dispatch_refusals(QWEN3_NEXT, cc, version, 4, flashinfer_a2a_dispatch_type="mxfp8",
                              moe_runner_backend="flashinfer_trtllm_routed", **args)
    assert bool(found) is refused, [p.message for p in found]
    if refused:
        assert found[0].source == f"sglang/srt/arg_groups/moe_hook.py:{LINES['mxfp8'][version]}"
