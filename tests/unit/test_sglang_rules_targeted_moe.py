"""The targeted set's parallelism, MoE and quantization cases (tests/conformance/targeted-0.5.23.json): the one check the rules missed.

* --quantization against the checkpoint's quant_method AFTER json_model_override_args: SGLang merges the override
  into config.json (utils/hf_transformers/config.py:405-424; 0.5.20-0.5.22 config.update) before ModelConfig's
  _verify_quantization reads ``quantization_config`` (configs/model_config.py:1727-1741, refused at :2143), so an
  fp8 ``quantization_config`` override makes Llama-3.1-8B an FP8 checkpoint: ``quantization awq`` is refused there
  (targeted-moe-40), ``fp8`` and the compatible ``modelopt_fp4`` are accepted. An override naming another quant_method
  (ModelOpt, which the parse rewrites; AWQ/GPTQ, which the QUANTIZATION_METHODS overrides rewrite) is left alone.

Each verdict is probe-confirmed by the ``targeted-moe-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22
with release_conformance.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host

FP8_CONFIG = json.dumps({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}})
MODELOPT_CONFIG = json.dumps({"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}})


def checkpoint_refusals(hostvars: dict[str, Any]) -> list[Any]:
    return errors(hostvars, "quantization.checkpoint")


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("quantization", "override", "refused"), [
    ("awq", FP8_CONFIG, True),  # targeted-moe-40: the override's fp8 is what SGLang compares
    ("w8a8_fp8", FP8_CONFIG, True),
    ("fp8", FP8_CONFIG, False),  # targeted-moe-41
    ("modelopt_fp4", FP8_CONFIG, False),  # compatible with an fp8 checkpoint (model_config.py:2046)
    ("awq", None, False),  # Llama's own checkpoint is unquantized: any method goes
    ("awq", json.dumps({"rope_theta": 500000.0}), False),  # an override without quantization_config changes nothing
])
def test_override_quantization_config_llama(version: str, quantization: str, override: str | None,
                                            refused: bool) -> None:
    args: dict[str, Any] = {"tp_size": 1, "quantization": quantization}
    if override is not None:
        args["json_model_override_args"] = override
    hostvars = host(args, version, model=LLAMA, cc="12.1", gpus=1)
    found = checkpoint_refusals(hostvars)
    assert bool(found) is refused
    if refused:
        assert "as json_model_override_args sets it" in found[0].message


@pytest.mark.parametrize(("quantization", "override", "refused"), [
    ("modelopt_fp8", None, True),  # targeted-moe-37: DeepSeek-V3's own fp8
    ("modelopt_fp8", MODELOPT_CONFIG, False),  # a ModelOpt override: not certain, left to SGLang (it accepts)
    ("modelopt_fp8", json.dumps({"quantization_config": None}), False),
    ("modelopt_fp4", None, False),  # targeted-moe-36: compatible with fp8
])
def test_override_quantization_config_deepseek(quantization: str, override: str | None, refused: bool) -> None:
    args: dict[str, Any] = {"tp_size": 8, "quantization": quantization}
    if override is not None:
        args["json_model_override_args"] = override
    assert bool(checkpoint_refusals(host(args, model=DEEPSEEK, cc="12.0"))) is refused
