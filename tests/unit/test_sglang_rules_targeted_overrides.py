"""The Qwen3 MoE and DeepSeek model overrides' quantization as json_model_override_args changes it.

* The quantization the SM100 overrides fill in for an unset --quantization (model_overrides/qwen3_moe.py:44-50,
  overrides.py:785-807) is the quant_method of the quantization_config json_model_override_args merges in, not the
  checkpoint's: Qwen3-Next with an fp8 quantization_config on a B200 is fp8 there (flashinfer_cutlass refused,
  moe_hook.py:81), DeepSeek-V3 with quant_method w8a8_fp8 is w8a8_fp8 (flashinfer_trtllm refused, moe_hook.py:124).
  Nothing is filled in on SM120.
* _qwen3_moe_family_overrides' W4A16 gate (qwen3_moe.py:51-70): modelopt_mixed with W4A16_NVFP4 experts on SM100
  takes marlin, or flashinfer_cutedsl with moe_a2a_backend none / flashinfer and SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16.

Each verdict is probe-confirmed by the ``targeted-overrides-*`` cases (SGLang 0.5.23).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host, rules_context

FP8 = json.dumps({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                          "weight_block_size": [128, 128]}})
W8A8 = json.dumps({"quantization_config": {"quant_method": "w8a8_fp8"}})
MIXED = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
         "producer": {"name": "modelopt", "version": "0.41.0"},
         "quantized_layers": {"model.language_model.layers.0.mlp.experts": {"quant_algo": "W4A16_NVFP4", "group_size": 16},
                              "model.language_model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4", "group_size": 16}}}
W4A16 = json.dumps({"quantization_config": MIXED})
W4A16_ENV = {"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}


def moe_refused(args: dict[str, Any], model: str, cc: str, version: str = "0.5.23",
                env: dict[str, str] | None = None) -> bool:
    return bool(errors(host(args, version, model=model, cc=cc, env=env), "server.moe"))


@pytest.mark.parametrize(("model", "cc", "args", "filled"), [
    (QWEN3_NEXT, "10.0", {"json_model_override_args": FP8}, "fp8"),  # targeted-overrides-25
    (QWEN3_NEXT, "12.0", {"json_model_override_args": FP8}, None),  # targeted-overrides-26: SM100 only
    (DEEPSEEK, "10.0", {"json_model_override_args": W8A8}, "w8a8_fp8"),  # targeted-overrides-29
    (DEEPSEEK, "12.0", {"json_model_override_args": W8A8}, None),  # targeted-overrides-30
    (QWEN35, "10.0", {"json_model_override_args": W4A16}, resolve.UNCERTAIN),  # ModelOpt: rewritten by quant_algo
    (DEEPSEEK, "10.0", {"json_model_override_args": json.dumps({"quantization_config": None})}, resolve.UNCERTAIN),
    (QWEN3_NEXT, "10.0", {"json_model_override_args": FP8, "quantization": "fp8"}, None),  # written: not filled
])
def test_filled_from_override(model: str, cc: str, args: dict[str, Any], filled: str | None) -> None:
    ctx = rules_context(host({"tp_size": 8, **args}, model=model, cc=cc))
    assert resolve.checkpoint_quantization_filled(ctx) == filled


@pytest.mark.parametrize(("model", "cc", "args", "refused"), [
    (QWEN3_NEXT, "10.0", {"tp_size": 4, "json_model_override_args": FP8, "moe_runner_backend": "flashinfer_cutlass"},
     True),  # targeted-overrides-25
    (QWEN3_NEXT, "12.0", {"tp_size": 4, "json_model_override_args": FP8, "moe_runner_backend": "flashinfer_cutlass"},
     False),  # targeted-overrides-26
    (DEEPSEEK, "10.0", {"tp_size": 8, "json_model_override_args": W8A8, "moe_runner_backend": "flashinfer_trtllm"},
     True),  # targeted-overrides-29
])
def test_override_quantization_moe_runner(model: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    assert moe_refused(args, model, cc) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("cc", "args", "env", "refused"), [
    ("10.0", {"quantization": "modelopt_mixed", "moe_runner_backend": "flashinfer_trtllm"}, None, True),  # targeted-overrides-04
    ("10.0", {"quantization": "modelopt_mixed", "moe_runner_backend": "marlin"}, None, False),  # targeted-overrides-05
    ("10.0", {"quantization": "modelopt_mixed"}, None, False),  # targeted-overrides-06: auto is marlin
    ("10.0", {"quantization": "modelopt_mixed", "moe_runner_backend": "flashinfer_cutedsl"}, None, True),  # targeted-overrides-07
    ("10.0", {"quantization": "modelopt_mixed", "moe_runner_backend": "flashinfer_cutedsl"}, W4A16_ENV, False),
    ("12.0", {"quantization": "modelopt_mixed", "moe_runner_backend": "flashinfer_trtllm"}, None, False),  # targeted-overrides-09
    ("10.0", {"moe_runner_backend": "flashinfer_trtllm"}, None, True),  # targeted-overrides-34: filled modelopt_mixed
    ("10.0", {"quantization": "modelopt_mixed", "moe_runner_backend": "flashinfer_cutedsl", "attn_dp_size": 4,
              "moe_a2a_backend": "deepep"}, W4A16_ENV, True),  # targeted-overrides-35
])
def test_qwen3_w4a16_gate(version: str, cc: str, args: dict[str, Any], env: dict[str, str] | None,
                          refused: bool) -> None:
    if "attn_dp_size" in args and version < "0.5.22":
        args = {**{k: v for k, v in args.items() if k != "attn_dp_size"}, "dp_size": 4, "enable_dp_attention": True}
    hostvars = host({"tp_size": 4, "json_model_override_args": W4A16, **args}, version, model=QWEN35, cc=cc, env=env)
    gate = [p for p in errors(hostvars, "server.moe") if "W4A16_NVFP4 under modelopt_mixed" in p.message]
    assert bool(gate) is refused
