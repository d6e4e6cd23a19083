"""What the 10,000-case differential fuzz run of seed 10 (``differential.py --cases 10000 --seed 10``) found:

* MISSED fuzz-10-04821 / -05730: preferred_sampling_params "[1, 2]" with skip_tokenizer_init. SGLang builds
  SamplingParams(**preferred) to check the defaults, a TypeError on anything but a mapping (serving_hook.py:627;
  0.5.22 :606, 0.5.20/0.5.21 :570). The rule judged only a mapping's keys.
* STRICTER-UNEXPLAINED fuzz-10-06339 / -02118: sampling_backend intel_xpu off device xpu under deterministic inference
  (enable_deterministic_inference, or rl_on_policy_target), which rewrites it to pytorch first
  (_deterministic_sampling_backend, overrides.py:1029-1036) before validate_device_sampling_backend
  (validation_hook.py:484).

Beside the run, ``make conformance-all`` found --cuda-graph-config's own parser unmodelled (0.5.20's MISSED
targeted-graphs-14: prefill.max_context_size, a key 0.5.20 does not know): the phases, their objects and each
release's keys (parse_cuda_graph_config_arg, model_executor/cuda_graph_config.py:246-283).

Probe-confirmed by the ``fuzzed-preferred-sampling-*``, ``fuzzed-intel-xpu-*`` and ``cuda-graph-config-*`` cases of
tests/conformance/cases.yaml (0.5.23; 0.5.20-0.5.22 with the release probe).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_seed0_2000 import host


@pytest.mark.parametrize(("version", "line"), [("0.5.20", "570"), ("0.5.21", "570"), ("0.5.22", "606"),
                                               ("0.5.23", "627")])
@pytest.mark.parametrize(("value", "skip", "refused"), [
    ("[1, 2]", True, True),  # fuzz-10-04821
    ('["temperature"]', True, True),
    ("[1, 2]", False, False),  # no SamplingParams without skip_tokenizer_init
    ('{"temperature": 0.5}', True, False),
    ("[]", True, False),  # a false value is skipped (serving_hook.py:610)
])
def test_preferred_sampling_not_a_mapping(version: str, line: str, value: str, skip: bool, refused: bool) -> None:
    args: dict[str, Any] = {"preferred_sampling_params": value, **({"skip_tokenizer_init": True} if skip else {})}
    found = [p for p in errors(host(args, version), "server.json_args") if "not a JSON object" in p.message]
    assert bool(found) is refused, found
    if refused:
        assert found[0].source == f"sglang/srt/arg_groups/serving_hook.py:{line}"


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "refused"), [
    ({}, True),
    ({"enable_deterministic_inference": True}, False),  # fuzz-10-06339
    ({"rl_on_policy_target": "fsdp"}, False),  # fuzz-10-02118
    ({"device": "xpu"}, False),
])
def test_intel_xpu_sampling_under_deterministic(version: str, args: dict[str, Any], refused: bool) -> None:
    found = [p for p in errors(host({"sampling_backend": "intel_xpu", **args}, version, cc="12.0"), "server.combination")
             if "sampling_backend intel_xpu" in p.message]
    assert bool(found) is refused, found
    if refused:
        line = {"0.5.21": "392", "0.5.22": "483", "0.5.23": "484"}[version]
        assert found[0].source == f"sglang/srt/arg_groups/validation_hook.py:{line}"


@pytest.mark.parametrize(("version", "lines"), [("0.5.20", ("240", "248", "252", "260")),
                                                ("0.5.21", ("250", "258", "262", "270")),
                                                ("0.5.22", ("257", "265", "269", "279")),
                                                ("0.5.23", ("257", "265", "269", "279"))])
@pytest.mark.parametrize(("config", "which"), [
    ("[1, 2]", 0),
    ('{"verify": {"max_bs": 16}}', 1),
    ('{"prefill": 3}', 2),
    ('{"prefill": {"bogus": 1}}', 3),
    ('{"decode": {"max_bs": 64}}', None),
    ("{}", None),
])
def test_cuda_graph_config_parser(version: str, lines: tuple[str, ...], config: str, which: int | None) -> None:
    """parse_cuda_graph_config_arg, --cuda-graph-config's argparse type: a JSON object of the phases decode and
    prefill, each a JSON object of that release's keys (model_executor/cuda_graph_config.py)."""
    found = [p for p in errors(host({"cuda_graph_config": config}, version, cc="12.0"), "server.json_args")
             if p.source.startswith("sglang/srt/model_executor/cuda_graph_config.py")]
    assert [p.source.rsplit(":", 1)[1] for p in found] == ([] if which is None else [lines[which]])


@pytest.mark.parametrize(("version", "config", "refused"), [
    ("0.5.20", '{"prefill": {"max_context_size": 4096}}', True),  # targeted-graphs-14 on 0.5.20
    ("0.5.21", '{"prefill": {"max_context_size": 4096}}', False),
    ("0.5.20", '{"prefill": {"max_seq_len": 4096}}', True),
    ("0.5.21", '{"decode": {"tc_compiler": "inductor"}}', False),
    ("0.5.22", '{"decode": {"tc_compiler": "inductor"}}', True),
    ("0.5.23", '{"prefill": {"full_prefill_max_req": 8}}', False),
])
def test_cuda_graph_config_keys_by_release(version: str, config: str, refused: bool) -> None:
    found = [p for p in errors(host({"cuda_graph_config": config}, version, cc="12.0"), "server.json_args")
             if "does not know" in p.message]
    assert bool(found) is refused, found
