"""CUDA-graph sizes that later checks read, as SGLang resolves them.

* validate_flashinfer_a2a_token_budget (moe_hook.py:749-774) counts a prefill CUDA graph's max_bs
  (moe_hook.py:743-744): an explicit cuda_graph_max_bs_prefill is locked, so attention DP's re-clamp to the per-rank
  chunk (parallel_hook.py:337-360) leaves it, and it exceeds the workspace; PP turns the default breakable prefill
  graph off (cuda_graph_hook.py:150-162) unless the backend is written. PP dynamic chunking grows the prefill buffer
  to max(chunk, max_prefill_tokens, 1.25 x chunk) (overrides.py:1877-1879) against a written workspace size.
* cuda_graph_config's prefill.max_context_size outranks cuda_graph_prefill_max_context (cuda_graph_hook.py:89-94)
  before _resolve_max_context_size compares it with the context length (cuda_graph_hook.py:435).

Each verdict is probe-confirmed by the ``targeted-graphs-*`` cases (SGLang 0.5.23; 0.5.22 with the release probe).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import LLAMA, QWEN35
from test_sglang_rules_seed0_2000 import host

ENV = "SGLANG_FLASHINFER_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
FI = {"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer", "quantization": "modelopt_fp4"}


def a2a_refusals(args: dict[str, Any], version: str = "0.5.23", env: dict[str, str] | None = None,
                 gpus: int = 4) -> list[Any]:
    return [p for p in errors(host(args, version, model=QWEN35, cc="12.0", gpus=gpus, env=env), "server.moe")
            if "FlashInfer MoE A2A dispatches" in p.message]


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "env", "refused"), [
    ({"cuda_graph_max_bs_prefill": 6144}, None, True),  # targeted-graphs-01: 6144 > max(8192 / 4, 4096)
    ({"cuda_graph_max_bs_prefill": 4096}, None, False),  # targeted-graphs-02
    ({"cuda_graph_bs_prefill": [512, 1024, 2048, 8192]}, None, False),  # targeted-graphs-03: max_bs re-clamped to 2048
    ({"cuda_graph_max_bs_prefill": 6144, "disable_prefill_cuda_graph": True}, None, False),  # targeted-graphs-04
    ({"cuda_graph_max_bs_prefill": 6144, "pp_size": 2}, None, False),  # targeted-graphs-05: PP turns the default off
    ({"cuda_graph_max_bs_prefill": 6144, "pp_size": 2, "cuda_graph_backend_prefill": "breakable"}, None, True),
    ({"cuda_graph_max_bs_prefill": 6144}, {ENV: "6144"}, False),  # targeted-graphs-07
    ({"cuda_graph_config": json.dumps({"prefill": {"max_bs": 6144}})}, None, True),
    ({"cuda_graph_config": json.dumps({"prefill": {"max_bs": 6144, "backend": "disabled"}})}, None, False),
    ({"cuda_graph_max_bs_prefill": 6144, "disaggregation_mode": "decode"}, None, False),  # no prefill on a decode server
])
def test_flashinfer_a2a_prefill_graph(version: str, args: dict[str, Any], env: dict[str, str] | None,
                                      refused: bool) -> None:
    found = a2a_refusals({**FI, **args}, version, env, gpus=8 if args.get("pp_size") else 4)
    assert bool(found) is refused
    if refused:
        assert "a prefill CUDA graph of 6144 tokens" in found[0].message


@pytest.mark.parametrize(("args", "refused"), [
    ({"pp_size": 2, "enable_dynamic_chunking": True}, True),  # targeted-graphs-33: max_prefill_tokens 16384 > 4096
    ({"pp_size": 2}, False),  # targeted-graphs-34: static chunks, 2048 per rank
    ({"pp_size": 2, "enable_dynamic_chunking": True, "max_prefill_tokens": 2048}, False),  # targeted-graphs-35: 2560
    ({"pp_size": 2, "enable_dynamic_chunking": True, "chunked_prefill_size": 14000, "max_prefill_tokens": 2048},
     True),  # 14000 / 4 x 1.25 = 4375 > 4096
])
def test_flashinfer_a2a_dynamic_chunking(args: dict[str, Any], refused: bool) -> None:
    assert bool(a2a_refusals({**FI, **args}, env={ENV: "4096"}, gpus=8)) is refused


@pytest.mark.parametrize(("args", "refused"), [
    ({"cuda_graph_config": json.dumps({"prefill": {"max_context_size": 140000}})}, True),  # targeted-graphs-14
    ({"cuda_graph_config": json.dumps({"prefill": {"max_context_size": 131072}})}, False),
    ({"cuda_graph_prefill_max_context": 140000, "cuda_graph_config": json.dumps({"prefill": {"max_context_size": 1024}})},
     False),  # the JSON outranks the flag
    ({"cuda_graph_prefill_max_context": 140000, "disable_cuda_graph": True}, True),  # targeted-graphs-15: checked anyway
    ({"cuda_graph_config": json.dumps({"prefill": {"max_context_size": 0}})}, True),  # must be positive
])
def test_prefill_graph_max_context_json(args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host(args, model=LLAMA, cc="12.0", gpus=1), "server.minimum")
             if "cuda_graph_prefill_max_context" in p.message]
    assert bool(found) is refused
