"""MoE all-to-all checks that hinge on a switch or a default SGLang resolves.

* handle_a2a_moe (moe_hook.py:318-324, new in 0.5.23): FlashInfer MegaMoE with SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16
  on runs a bfloat16 model only; an explicit --dtype float16 is refused.
* _decode_graph_dispatch_tokens_per_rank (moe_hook.py:656-676): the DeepEP v2 and FlashInfer A2A decode-graph budgets
  count speculative_num_draft_tokens per request, which SGLang's auto choice settles where none of the speculative
  triple is written (speculative_hook.py:1159-1174, 1430-1461: (3, 1, 4) for DeepSeek-V3 and Qwen3-Next NEXTN).

Each verdict is probe-confirmed by the ``targeted-experts-*`` cases (SGLang 0.5.23).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, QWEN3_NEXT
from test_sglang_rules_seed0_2000 import host

W4A16 = {"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}
MEGAMOE = {"tp_size": 8, "attn_dp_size": 8, "moe_a2a_backend": "flashinfer_megamoe"}
DEEPEP_V2 = {"tp_size": 8, "attn_dp_size": 8, "moe_a2a_backend": "deepep_v2", "speculative_algorithm": "NEXTN",
             "speculative_moe_a2a_backend": "none", "chunked_prefill_size": 8192, "cuda_graph_max_bs_decode": 512}
DEEPEP_V2_ENV = {"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "1024"}


@pytest.mark.parametrize(("args", "env", "refused"), [
    ({"quantization": "nvfp4_online", "dtype": "float16"}, W4A16, True),  # targeted-experts-19
    ({"quantization": "nvfp4_online", "dtype": "bfloat16"}, W4A16, False),  # targeted-experts-19b
    ({"quantization": "nvfp4_online"}, W4A16, False),  # auto: the checkpoint's bfloat16
    ({"quantization": "modelopt_fp4", "dtype": "float16"}, {}, False),  # targeted-experts-19c: no W4A16 switch
])
def test_flashinfer_megamoe_w4a16_dtype(args: dict[str, Any], env: dict[str, str], refused: bool) -> None:
    hv = host({**MEGAMOE, **args}, model=DEEPSEEK, cc="10.0", env=env)
    found = [p for p in errors(hv, "server.moe") if (p.source or "").endswith("moe_hook.py:322")]
    assert bool(found) is refused


def test_flashinfer_megamoe_w4a16_dtype_older_release_silent() -> None:
    """0.5.22 has no W4A16 dtype check (nor nvfp4_online for MegaMoE: moe_hook.py:235 there refuses it)."""
    hv = host({**MEGAMOE, "quantization": "nvfp4_online", "dtype": "float16"}, version="0.5.22", model=DEEPSEEK,
              cc="10.0", env=W4A16)
    assert not [p for p in errors(hv, "server.moe") if (p.source or "").endswith("moe_hook.py:322")]


@pytest.mark.parametrize(("args", "refused"), [
    ({"max_running_requests": 4096}, True),  # targeted-experts-48: 512 x 4 auto draft tokens > 1024
    ({"max_running_requests": 2048}, False),  # targeted-experts-48b: 256 x 4 = 1024
    ({"max_running_requests": 4096, "speculative_num_steps": 1, "speculative_eagle_topk": 1,
      "speculative_num_draft_tokens": 2}, False),  # 512 x 2 = 1024
    ({"max_running_requests": 4096, "speculative_eagle_topk": 4}, False),  # triple partly written: not settled
])
def test_deepep_v2_decode_graph_speculative_tokens(args: dict[str, Any], refused: bool) -> None:
    hv = host({**DEEPEP_V2, **args}, model=DEEPSEEK, cc="12.0", env=DEEPEP_V2_ENV)
    found = [p for p in errors(hv, "moe.deepep_v2") if "decode CUDA graph" in p.message]
    assert bool(found) is refused


@pytest.mark.parametrize(("running", "refused"), [(4096, True), (1024, False)])
def test_flashinfer_a2a_budget_auto_speculative_tokens(running: int, refused: bool) -> None:
    """targeted-experts-48d: Qwen3-Next NEXTN's auto (3, 1, 4) over attention DP 4."""
    hv = host({"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer", "quantization": "mxfp8",
               "moe_runner_backend": "deep_gemm", "speculative_algorithm": "NEXTN", "max_running_requests": running,
               "cuda_graph_max_bs_decode": 512, "chunked_prefill_size": 4096}, model=QWEN3_NEXT, cc="12.0",
              env={"SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "1024"})
    found = [p for p in errors(hv, "server.moe") if "workspace" in p.message]
    assert bool(found) is refused
