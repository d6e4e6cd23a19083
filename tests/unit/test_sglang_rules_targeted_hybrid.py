"""The hybrid-Mamba radix cache checks that hinge on the strategy SGLang resolves first (the targeted set's hybrid cases,
tests/conformance/targeted-0.5.23.json).

* validate_mamba_no_buffer's trtllm_mha assert (mamba_hook.py:161; 0.5.21 :151, 0.5.20 :148) holds wherever the
  strategy resolves to no_buffer, ``auto`` included (the overlap scheduler off with page 1, or a linear_attn_backend
  without extra_buffer support, overrides.py:438-486), and reads attention_backend as written: the rule had checked a
  written no_buffer only (MISSED) and every attention dest on any model (false alarms on a prefill-only trtllm_mha and
  on a model without mamba state).
* mamba_cache_chunk_size (overrides.py:1919; 0.5.22 :1866, 0.5.21 :1818, 0.5.20 :1918) asserts the page and the chunk
  size (FLA's 64 for the table's GDN hybrids) divide one another under extra_buffer: page 48 or 96 was MISSED.

Each verdict is probe-confirmed by the ``targeted-hybrid-*`` cases of tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22 with
release_conformance.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import LLAMA, QWEN3_NEXT, QWEN35
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("model", "cc", "args", "refused"), [
    # targeted-hybrid-21-auto-no-buffer-trtllm-rtx: overlap off, page 1 -> auto no_buffer
    (QWEN35, "12.0", {"quantization": "modelopt_fp4", "attention_backend": "trtllm_mha",
                      "disable_overlap_schedule": True}, True),
    # -auto-no-buffer-cutedsl-trtllm-rtx: no extra_buffer support with cutedsl -> no_buffer
    (QWEN3_NEXT, "12.0", {"attention_backend": "trtllm_mha", "linear_attn_backend": "cutedsl"}, True),
    # -auto-extra-buffer-trtllm-rtx: overlap on -> extra_buffer
    (QWEN35, "12.0", {"quantization": "modelopt_fp4", "attention_backend": "trtllm_mha",
                      "mamba_track_interval": 96}, False),
    # a written no_buffer with overlap off is refused with trtllm_mha
    (QWEN3_NEXT, "12.0", {"attention_backend": "trtllm_mha", "mamba_radix_cache_strategy": "no_buffer",
                          "disable_overlap_schedule": True}, True),
    # -no-buffer-prefill-trtllm-rtx: attention_backend is what SGLang reads
    (QWEN3_NEXT, "12.0", {"mamba_radix_cache_strategy": "no_buffer", "disable_overlap_schedule": True,
                          "prefill_attention_backend": "trtllm_mha", "decode_attention_backend": "flashinfer"}, False),
    # -no-buffer-trtllm-llama-b200: no mamba state, nothing validated
    (LLAMA, "10.0", {"attention_backend": "trtllm_mha", "mamba_radix_cache_strategy": "no_buffer",
                     "disable_overlap_schedule": True}, False),
    # the radix cache off: nothing validated
    (QWEN3_NEXT, "12.0", {"attention_backend": "trtllm_mha", "disable_radix_cache": True,
                          "disable_overlap_schedule": True}, False),
])
def test_no_buffer_trtllm_mha(version: str, model: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    tp = 1 if model == LLAMA else 4
    found = errors(host({"tp_size": tp, **args}, version, model=model, cc=cc), "mamba.trtllm_mha")
    assert bool(found) is refused
    if refused:
        line = {"0.5.20": "148", "0.5.21": "151"}.get(version, "161")
        assert found[0].source == f"sglang/srt/arg_groups/mamba_hook.py:{line}"


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"page_size": 48, "mamba_track_interval": 96, "chunked_prefill_size": 4800}, True),  # targeted-hybrid-27-page48-chunk-rtx
    ({"page_size": 96, "mamba_track_interval": 192, "chunked_prefill_size": 9600, "disable_overlap_schedule": True,
      "mamba_radix_cache_strategy": "extra_buffer_lazy"}, True),  # -page96-lazy-chunk-rtx
    ({"page_size": 128, "mamba_track_interval": 256}, False),  # -page128-chunk-rtx
    ({"page_size": 32, "mamba_track_interval": 96}, False),  # 32 divides 64
    ({"page_size": 48, "mamba_track_interval": 96, "chunked_prefill_size": 4800, "disable_radix_cache": True},
     False),  # -page48-radix-off-rtx
])
def test_mamba_chunk_page_divisibility(version: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host({"tp_size": 4, **args}, version, model=QWEN3_NEXT, cc="12.0"), "mamba.extra_buffer")
             if "mamba cache chunk size" in p.message]
    assert bool(found) is refused
    if refused:
        line = {"0.5.20": "1918", "0.5.21": "1818", "0.5.22": "1866"}.get(version, "1919")
        assert found[0].source == f"sglang/srt/arg_groups/overrides.py:{line}"
