"""handle_model_specific_adjustments' per-architecture attention backends for Gemma 4 and EXAONE 4, not modelled.

* Gemma 4 (model_hook.py:636-660; 0.5.22 :650, 0.5.21 :615, 0.5.20 :555): the prefill and the decode backend
  (attention_backends_of) must be trtllm_mha, triton, fa4 (from 0.5.22), ascend, intel_xpu, intel_amx or aiter.
  _gemma4_overrides fills an unset attention_backend with triton (trtllm_mha on SM100) even where a split backend is
  written (model_overrides/gemma4.py:35-44), so only the written backends decide.
* EXAONE 4 (model_hook.py:668-681; 0.5.22 :673, 0.5.21 :634, 0.5.20 :574): with hf_config.sliding_window_pattern not
  None the resolved attention_backend alone must be fa3, triton or trtllm_mha; _exaone_overrides fills an unset one
  with one of those (model_overrides/exaone.py:18-29). ExaoneMoeForCausalLM joined the branch in 0.5.22. The pattern is
  certain only where json_model_override_args sets it.

The rules had left both to SGLang: Llama-3.1-8B renamed Gemma4ForCausalLM (or Exaone4ForCausalLM with a
sliding_window_pattern) by json_model_override_args, with attention_backend flashinfer, was accepted. Each verdict is
probe-confirmed by the ``targeted-attention-*`` cases (SGLang 0.5.23; 0.5.20-0.5.22 with the release probe).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host


def _arch(name: str, **config: Any) -> str:
    return json.dumps({"architectures": [name], **config})


def backend_refusals(hostvars: dict[str, Any]) -> list[Any]:
    return [p for p in errors(hostvars, "server.model_features") if "needs" in p.message]


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("arch", "args", "refused"), [
    ("Gemma4ForCausalLM", {"attention_backend": "flashinfer"}, True),  # targeted-attention-51
    ("Gemma4ForCausalLM", {"decode_attention_backend": "flashinfer"}, True),  # targeted-attention-52: prefill is the filled triton
    ("Gemma4ForConditionalGeneration", {"prefill_attention_backend": "flashinfer",
                                        "decode_attention_backend": "flashinfer"}, True),
    ("Gemma4ForCausalLM", {}, False),  # targeted-attention-54: the override fills triton
    ("Gemma4ForCausalLM", {"attention_backend": "triton", "decode_attention_backend": "trtllm_mha"}, False),
    ("Gemma4UnifiedForConditionalGeneration", {"attention_backend": "fa3"}, True),
])
def test_gemma4_attention_backends(version: str, arch: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"tp_size": 1, "json_model_override_args": _arch(arch), **args}, version, cc="12.0")
    assert bool(backend_refusals(hostvars)) is refused


@pytest.mark.parametrize(("version", "refused"), [("0.5.20", True), ("0.5.21", True), ("0.5.22", False),
                                                  ("0.5.23", False)])
def test_gemma4_fa4_from_0522(version: str, refused: bool) -> None:
    """targeted-attention-53: a decode fa4 joined the Gemma 4 list in 0.5.22 (0.5.21's model_hook.py:615 refuses it)."""
    hostvars = host({"tp_size": 1, "json_model_override_args": _arch("Gemma4ForCausalLM"),
                     "decode_attention_backend": "fa4"}, version, cc="12.0")
    assert bool(backend_refusals(hostvars)) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("override", "args", "refused"), [
    (_arch("Exaone4ForCausalLM", sliding_window_pattern=4), {"attention_backend": "flashinfer"}, True),  # targeted-attention-55
    (_arch("Exaone4ForCausalLM", sliding_window_pattern=None), {"attention_backend": "flashinfer"}, False),  # targeted-attention-56
    (_arch("Exaone4ForCausalLM"), {"attention_backend": "flashinfer"}, False),  # the checkpoint's pattern: not certain
    # targeted-attention-58: the assert reads attention_backend, which the override fills with trtllm_mha from 0.5.22;
    # before, nothing fills it and None is refused (0.5.21 exaone.py:14-20; conformance-all on 0.5.20 / 0.5.21)
    (_arch("Exaone4ForCausalLM", sliding_window_pattern="LLLG"),
     {"prefill_attention_backend": "flashinfer", "decode_attention_backend": "triton"}, "before 0.5.22"),
    (_arch("Exaone4ForCausalLM", sliding_window_pattern="LLLG"), {}, "before 0.5.22"),
    (_arch("ExaoneMoEForCausalLM", sliding_window_pattern=4), {"attention_backend": "fa4"}, True),
    (_arch("Exaone4ForCausalLM", sliding_window_pattern=4), {"attention_backend": "triton"}, False),
])
def test_exaone_sliding_window_backends(version: str, override: str, args: dict[str, Any], refused: bool | str) -> None:
    hostvars = host({"tp_size": 1, "json_model_override_args": override, **args}, version, cc="10.0")
    expected = version in ("0.5.20", "0.5.21") if refused == "before 0.5.22" else refused
    assert bool(backend_refusals(hostvars)) is expected


@pytest.mark.parametrize(("version", "refused"), [("0.5.21", False), ("0.5.22", True), ("0.5.23", True)])
def test_exaone_moe_spelling_from_0522(version: str, refused: bool) -> None:
    """targeted-attention-57: ExaoneMoeForCausalLM (the lower-case spelling) joined the branch in 0.5.22."""
    hostvars = host({"tp_size": 1, "attention_backend": "fa4",
                     "json_model_override_args": _arch("ExaoneMoeForCausalLM", sliding_window_pattern=4)},
                    version, cc="10.0")
    assert bool(backend_refusals(hostvars)) is refused
