"""The SM120 TRTLLM MHA prefill checks of handle_attention_backend_compatibility, found by the targeted set
(tests/conformance/targeted-0.5.23.json).

* attention_hook.py:207-221 (0.5.20-0.5.21 :138-152, 0.5.22 :206-220) refuses the trtllm_mha PREFILL backend on SM120
  with a fp8_e4m3 KV cache OR with SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR > 0 (an EnvFloat, environ.py:1265).
  sm12x.trtllm_mha_kv missed the switch (targeted-spec-47), and refused any explicit trtllm_mha, a decode-only one too
  (targeted-spec-61, -65: SGLang reads attention_backends_of's prefill side, model_override_base.py:138-152).
* attention_hook.py:228-237 (trtllm_mha prefill with attn_cp_size > 1 off SM100) reads the same resolved prefill side:
  attention_backend trtllm_mha under prefill_attention_backend flashinfer passes (targeted-spec-68).

Each verdict is probe-confirmed by the ``targeted-spec-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22
with release_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host

SKIP = "SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR"


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("cc", "args", "env", "refused"), [
    ("12.0", {"attention_backend": "trtllm_mha"}, {SKIP: "0.5"}, True),  # targeted-spec-47
    ("12.1", {"attention_backend": "trtllm_mha"}, {SKIP: "2"}, True),  # GB10 is SM12x too
    ("12.0", {"attention_backend": "trtllm_mha"}, {SKIP: "0"}, False),  # targeted-spec-62: compared > 0
    ("12.0", {"attention_backend": "trtllm_mha"}, {SKIP: "-1"}, False),
    ("12.0", {"attention_backend": "trtllm_mha"}, {}, False),
    ("10.0", {"attention_backend": "trtllm_mha"}, {SKIP: "0.5"}, False),  # SM100 runs trtllm-gen prefill
    ("12.0", {"prefill_attention_backend": "trtllm_mha", "decode_attention_backend": "flashinfer"}, {SKIP: "1.5"},
     True),  # targeted-spec-66
    ("12.0", {"attention_backend": "trtllm_mha", "prefill_attention_backend": "flashinfer"}, {SKIP: "0.5"}, False),
    ("12.0", {"attention_backend": "trtllm_mha", "kv_cache_dtype": "fp8_e4m3"}, {}, True),  # sm120-trtllm-mha-fp8-kv
    ("12.1", {"prefill_attention_backend": "flashinfer", "decode_attention_backend": "trtllm_mha",
              "kv_cache_dtype": "fp8_e4m3"}, {}, False),  # targeted-spec-61
    ("12.0", {"decode_attention_backend": "trtllm_mha", "kv_cache_dtype": "fp8_e4m3"}, {}, False),  # targeted-spec-65
])
def test_trtllm_mha_prefill_sm120(version: str, cc: str, args: dict[str, Any], env: dict[str, str],
                                  refused: bool) -> None:
    found = errors(host({"tp_size": 1, **args}, version, cc=cc, gpus=1, env=env), "sm12x.trtllm_mha_kv")
    assert bool(found) is refused
    if refused:
        line = {"0.5.20": "149", "0.5.21": "149", "0.5.22": "217", "0.5.23": "218"}[version]
        assert all((p.source or "").endswith(f"attention_hook.py:{line}") for p in found)


@pytest.mark.parametrize(("args", "refused"), [
    ({"attention_backend": "trtllm_mha", "attn_cp_size": 2}, True),  # targeted-spec-69
    ({"attention_backend": "trtllm_mha", "prefill_attention_backend": "flashinfer", "attn_cp_size": 2}, False),
    ({"prefill_attention_backend": "trtllm_mha", "decode_attention_backend": "flashinfer", "attn_cp_size": 2}, True),
    ({"attention_backend": "trtllm_mha"}, False),
])
def test_trtllm_mha_cp_reads_resolved_prefill(args: dict[str, Any], refused: bool) -> None:
    found = errors(host({"tp_size": 2, **args}, cc="12.0", gpus=2), "sm12x.trtllm_mha_cp")
    assert bool(found) is refused
