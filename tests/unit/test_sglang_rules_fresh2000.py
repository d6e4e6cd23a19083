"""Rules for what the fresh 2000-case run of the gated generator left open (issue 36), on what the conformance corpus
cannot show: the older releases, the compute capabilities and the exact edges of each condition.

The refusals themselves, against SGLang 0.5.23's own argument handling, are cases of tests/conformance/cases.yaml
(``fuzzed-eagle-adaptive-explicit-topk``, ``fuzzed-media-url-max-file-size-negative``,
``fuzzed-unified-memory-topk-without-algorithm``, ``fuzzed-preferred-sampling-params-number``,
``fuzzed-watermark-device-xpu``, ``fuzzed-pdmux-default-chunked-prefill``,
``fuzzed-mamba-stochastic-rounding-triton-on-sm80`` and their accepting neighbours).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.serving import media_domain_problem
from test_sglang_rules_seed0_2000 import LLAMA, QWEN3_NEXT, host, sources

DEEPSEEK = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize(("args", "refused"), [
    # topk 14: SGLang turns adaptive off, then the triple's assert runs (speculative_hook.py:1159-1163)
    ({"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 14, "speculative_num_draft_tokens": 15}, True),
    ({"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}, False),
    ({"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4}, False),
    ({"speculative_algorithm": "NEXTN", "speculative_eagle_topk": 1, "tp_size": 2, "attn_dp_size": 2,
      "enable_dp_attention": True, "dp_size": 2}, True),  # attention DP turns adaptive off
    ({"speculative_algorithm": "STANDALONE", "speculative_eagle_topk": 1,
      "speculative_draft_model_path": "/draft"}, True),  # adaptive is EAGLE / EAGLE3 only
    ({"speculative_algorithm": "EAGLE"}, False),
])
def test_adaptive_keeps_the_triple_check_only_where_it_stays_on(version: str, args: dict[str, Any],
                                                                 refused: bool) -> None:
    found = sources(host({**args, "speculative_adaptive": True}, version, model=DEEPSEEK, gpus=2), "spec.triple")
    assert (found == ["sglang/srt/arg_groups/speculative_hook.py:1160"]) is refused


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize(("size", "refused"), [(-1, True), (0, False), (64, False)])
def test_media_url_size_limit(version: str, size: int, refused: bool) -> None:
    found = sources(host({"media_url_max_file_size_mb": size}, version), "server.media_url")
    assert (found == ["sglang/srt/utils/common.py:1783"]) is refused


@pytest.mark.parametrize(("domain", "refused"), [
    ("images.example.com", False), ("images.example.com.", False), ("192.0.2.7", False), ("[2001:db8::1]", False),
    ("2001:db8::1", False), ("BÜCHER.example", False),
    (".", True), ("  ", True), ("https://images.example.com", True), ("images.example.com/path", True),
    ("user@images.example.com", True), ("images.example.com:8443", True), ("images..example.com", True),
])
def test_media_domains_as_sglang_normalizes_them(domain: str, refused: bool) -> None:
    assert (media_domain_problem(domain) is not None) is refused
    found = sources(host({"allowed_media_domains": ["example.org", domain]}), "server.media_url")
    assert (found == ["sglang/srt/utils/common.py:1741-1767"]) is refused


@pytest.mark.parametrize(("version", "algorithm", "topk", "refused"), [
    ("0.5.23", None, 3, True), ("0.5.22", None, 3, True), ("0.5.21", None, 3, False),
    ("0.5.23", None, 1, False), ("0.5.23", "EAGLE3", 2, True),
])
def test_unified_memory_linear_chain_with_or_without_an_algorithm(version: str, algorithm: str | None, topk: int,
                                                                 refused: bool) -> None:
    args: dict[str, Any] = {"enable_unified_memory": True, "speculative_eagle_topk": topk}
    if algorithm:
        args.update(speculative_algorithm=algorithm, speculative_num_steps=3, speculative_num_draft_tokens=4,
                    speculative_draft_model_path="/draft")
    found = [s for s in sources(host(args, version, model=QWEN3_NEXT, gpus=4), "server.unified_memory")
             if s.endswith(":601")]
    assert bool(found) is refused


@pytest.mark.parametrize(("version", "backend", "line"), [
    ("0.5.21", "flashinfer", "563"), ("0.5.21", None, "563"), ("0.5.20", "flashinfer", "243"), ("0.5.21", "triton", None),
    ("0.5.21", "trtllm_mla", None), ("0.5.22", "flashinfer", None), ("0.5.23", None, None),
])
def test_unified_memory_dspark_verify_backends_before_0522(version: str, backend: str | None, line: str | None) -> None:
    """DSPARK under enable_unified_memory before 0.5.22: the resolved prefill and decode backends must be triton,
    trtllm_mla, cutedsl_mla or tokenspeed_mla (kv_cache_hook.py:563 in 0.5.21, :243 in 0.5.20; SGLang's default
    flashinfer on SM120 is refused). 0.5.22 widened the list. Each verdict probed with that release's own resolver."""
    args: dict[str, Any] = {"enable_unified_memory": True, "speculative_algorithm": "DSPARK",
                            "speculative_draft_model_path": "/draft"}
    if backend:
        args["attention_backend"] = backend
    found = [s for s in sources(host(args, version, cc="12.0", gpus=1), "server.unified_memory") if ":563" in s or ":243" in s]
    assert found == ([f"sglang/srt/arg_groups/kv_cache_hook.py:{line}"] if line else [])


@pytest.mark.parametrize(("value", "version", "line"), [
    ("1", "0.5.23", "618"), ("true", "0.5.23", "618"), ("2.5", "0.5.22", "597"), ('"1"', "0.5.23", "618"),
    ("1", "0.5.21", None),  # the watermark check (and its TypeError) is new in 0.5.22
    ('"greedy"', "0.5.23", "612"), ('"greedy"', "0.5.20", "563"),  # a string is decoded once more (0.5.20 :563)
    ("0", "0.5.23", None), ("null", "0.5.23", None), ("[]", "0.5.23", None),  # false: the check is skipped
    ('{"temperature": 0.6}', "0.5.23", None), ('"{\\"temperature\\": 0.6}"', "0.5.23", None),
    ('{"watermark": true}', "0.5.23", "619"), ('"watermark"', "0.5.23", None),
])
def test_preferred_sampling_params_shapes(value: str, version: str, line: str | None) -> None:
    found = sources(host({"preferred_sampling_params": value}, version), "server.json_args")
    expected = ["sglang/srt/arg_groups/serving_hook.py:" + line] if line else []
    if value == '"watermark"':  # decoded once more, "watermark" is not JSON
        expected = ["sglang/srt/arg_groups/serving_hook.py:612"]
    assert found == expected


@pytest.mark.parametrize(("device", "version", "refused"), [
    ("xpu", "0.5.23", True), ("cuda:0", "0.5.23", True), ("cuda", "0.5.23", False), (None, "0.5.23", False),
    ("xpu", "0.5.22", True),
])
def test_watermark_needs_device_cuda(device: str | None, version: str, refused: bool) -> None:
    args: dict[str, Any] = {"enable_watermark": True}
    if device:
        args["device"] = device
    found = sources(host(args, version), "server.watermark")
    assert (found == ["sglang/srt/arg_groups/validation_hook.py:43"]) is refused


@pytest.mark.parametrize(("args", "model", "line"), [
    ({"pp_size": 2, "chunked_prefill_size": -1, "disable_overlap_schedule": True}, LLAMA, "250"),
    ({}, LLAMA, "253"),
    ({"chunked_prefill_size": 4096, "disable_overlap_schedule": True}, LLAMA, "253"),
    ({"chunked_prefill_size": -1}, LLAMA, "259"),
    ({"chunked_prefill_size": -1, "disable_overlap_schedule": True, "disaggregation_mode": "prefill"}, LLAMA, "256"),
    ({"chunked_prefill_size": -1, "disable_overlap_schedule": True}, LLAMA, None),
    ({"disable_overlap_schedule": True}, "/models/custom", None),  # SGLang may set -1 itself for an unknown model
    ({"enable_mis": True, "disable_overlap_schedule": True, "attention_backend": "flashinfer"}, LLAMA, None),
    ({"chunked_prefill_size": -1, "tp_size": 2}, QWEN3_NEXT, "259"),  # extra_buffer keeps the overlap scheduler on
    ({"chunked_prefill_size": -1, "tp_size": 2, "linear_attn_backend": "flashinfer"}, QWEN3_NEXT, None),  # no_buffer
])
def test_pdmux_on_the_resolved_values(args: dict[str, Any], model: str, line: str | None) -> None:
    found = sources(host({**args, "enable_pdmux": True}, model=model, gpus=4), "server.pdmux")
    assert found == (["sglang/srt/arg_groups/validation_hook.py:" + line] if line else [])


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize(("cc", "backend", "refused"), [
    ("8.0", None, True), ("9.0", "triton", True), ("10.0", None, False), ("10.3", None, False), ("11.0", None, True),
    ("12.0", None, True), ("12.1", None, True), ("9.0", "flashinfer", False),
])
def test_stochastic_rounding_with_triton_needs_sm100(version: str, cc: str, backend: str | None, refused: bool) -> None:
    args: dict[str, Any] = {"enable_mamba_cache_stochastic_rounding": True, "mamba_ssm_dtype": "float16"}
    if backend:
        args["mamba_backend"] = backend
    found = [s for s in sources(host(args, version, model=QWEN3_NEXT, cc=cc, gpus=4), "server.combination")
             if s.startswith("sglang/srt/arg_groups/mamba_hook.py")]
    assert (found == ["sglang/srt/arg_groups/mamba_hook.py:45"]) is refused
