"""What the 10,000-case differential fuzz run of seed 19 (``differential.py --cases 10000 --seed 19``) found.

A MISSED (fuzz-19-03611): ``moe_runner_backend: flashinfer_cutlass`` on DeepSeek-V3's FP8 checkpoint with
``enable_prefill_cp`` on a B200. DeepSeek's prefill context-parallel overrides write moe_a2a_backend deepep and
ep_size = tp_size (deepseek_v2.py:106-118, :191-202), never the MoE runner or the quantization, and the checkpoint's
fp8 is filled in without reading the backend (overrides.py:787-809). So handle_moe_kernel_config's runner /
quantization asserts (moe_hook.py:81, :98, :124, :138) read what was written. The rules had returned before all of
handle_moe_kernel_config's checks where the override may change the backend (resolve._a2a_may_change); now only the
checks that read the backend or ep_size wait for it.

Each verdict is probe-confirmed on 0.5.20-0.5.23 by the fuzzed-19-prefill-cp-* and prefill-cp-flashinfer-* cases in
tests/conformance/cases.yaml.

With it, what a grid of KV-cache dtype x speculative algorithm x attention backend x profile x model found (5,760
configurations, probed): the CuteDSL MLA backend's KV-cache dtype check reads no model (below).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_seed0_2000 import host

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
VERSIONS = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]
# handle_moe_kernel_config's asserts, as the rule cites them (0.5.23's lines; 0.5.22 :54 / :71, 0.5.21 :49 / :66, 0.5.20
# :45 / :62): the Cutlass runner's quantization, the CuteDSL runner's.
CUTLASS, CUTEDSL = "81", "98"
CP = {"tp_size": 8, "enable_prefill_cp": True}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("cc", "args", "line"), [
    ("10.0", {"moe_runner_backend": "flashinfer_cutlass", "cp_strategy": "zigzag"}, CUTLASS),  # fuzz-19-03611
    ("10.0", {"moe_runner_backend": "flashinfer_cutlass", "cp_strategy": "interleave"}, CUTLASS),
    ("10.0", {"moe_runner_backend": "flashinfer_cutedsl", "cp_strategy": "zigzag"}, CUTEDSL),
    ("10.0", {"moe_runner_backend": "flashinfer_cutedsl", "cp_strategy": "interleave"}, CUTEDSL),
    ("12.0", {"moe_runner_backend": "flashinfer_cutlass", "quantization": "fp8", "cp_strategy": "zigzag"}, CUTLASS),
    ("10.0", {"moe_runner_backend": "flashinfer_trtllm", "cp_strategy": "zigzag"}, None),  # trtllm runs fp8
    ("10.0", {"moe_runner_backend": "flashinfer_cutlass", "quantization": "unquant", "cp_strategy": "zigzag"}, None),
    ("12.0", {"moe_runner_backend": "flashinfer_cutlass", "cp_strategy": "zigzag"}, None),  # no fill on SM120
])
def test_runner_quantization_under_prefill_cp(version: str, cc: str, args: dict[str, Any],
                                              line: str | None) -> None:
    found = errors(host({**CP, **args}, version, model=DEEPSEEK, cc=cc, gpus=8), "server.moe")
    assert [p.source for p in found] == ([f"sglang/srt/arg_groups/moe_hook.py:{line}"] if line else [])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("args", "refused"), [
    # Under MLA prefill CP the override sets ep_size = tp_size before moe_hook.py:89 reads it: ep_size 2 is accepted.
    ({**CP, "cp_strategy": "zigzag"}, False),
    # Without the override the written ep_size is read: refused.
    ({"tp_size": 8}, True),
])
def test_ep_size_still_waits_for_the_override(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({**args, "ep_size": 2, "moe_runner_backend": "flashinfer_cutlass", "quantization": "unquant"},
                    version, model=DEEPSEEK, cc="10.0", gpus=8)
    assert any(p.variable == "sglang_args.ep_size" for p in errors(hostvars, "server.moe")) is refused


# --- a grid of KV-cache dtype x speculative algorithm x attention backend x profile x model (5,760 probed) -----------
# _cutedsl_prefill_backend_fill (overrides.py:1232-1258) refuses a KV-cache dtype the CuteDSL MLA backend does not run
# whatever the model; the rule had judged only MLA and unknown models. SGLang's argument handling accepts cutedsl_mla on
# Llama with fp8_e4m3, bf16 or auto (cases grid-cutedsl-mla-kv-mxfp8-llama-b200 and its neighbours).
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
CUTEDSL_KV = "sglang/srt/arg_groups/overrides.py:1254"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("cc", "args", "refused"), [
    ("10.0", {"attention_backend": "cutedsl_mla", "kv_cache_dtype": "mxfp8"}, True),
    ("10.0", {"attention_backend": "cutedsl_mla", "kv_cache_dtype": "fp8_e5m2"}, True),
    ("10.3", {"decode_attention_backend": "cutedsl_mla", "kv_cache_dtype": "fp8_e5m2"}, True),
    ("10.0", {"attention_backend": "cutedsl_mla", "kv_cache_dtype": "fp8_e4m3"}, False),
    ("10.0", {"attention_backend": "cutedsl_mla", "kv_cache_dtype": "bf16"}, False),
    ("10.0", {"attention_backend": "cutedsl_mla"}, False),
    # SGLang asserts the decode-only backend first (attention._cutedsl_mla_prefill refuses it on Llama).
    ("10.0", {"prefill_attention_backend": "cutedsl_mla", "kv_cache_dtype": "mxfp8"}, False),
])
def test_cutedsl_mla_kv_reads_no_model(version: str, cc: str, args: dict[str, Any], refused: bool) -> None:
    found = errors(host({"tp_size": 8, **args}, version, model=LLAMA, cc=cc, gpus=8), "server.combination")
    assert [p.source for p in found if p.source == CUTEDSL_KV] == ([CUTEDSL_KV] if refused else [])
