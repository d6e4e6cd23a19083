"""The seed-9 10,000-case run's finding: ep_size under DeepSeek's prefill context parallelism.

DeepSeek-V3's MLA prefill CP (and a DSA-by-override model's zigzag prefill CP) set moe_a2a_backend deepep and
ep_size = tp_size whatever was written (model_overrides/deepseek_v2.py:202, :118; 0.5.22 :203 / :118, 0.5.21 :165 /
:92, 0.5.20 :172 / :99). moe.resolved_ep_size claimed no value under CP, so EPLB's assert of the resolved ep_size > 1
(parallel_hook.py:791) was not made: fuzz-9-08070, enable_eplb with ep_size 16 at tp_size 1, was MISSED.

Each verdict is probe-confirmed by fuzzed-eplb-mla-prefill-cp-tp1 and eplb-mla-prefill-cp-tp8-accepted of
tests/conformance/cases.yaml (SGLang 0.5.23; the older releases with release_conformance.py).
"""

from __future__ import annotations

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import moe
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK
from test_sglang_rules_seed0_2000 import host

CP = {"enable_prefill_cp": True, "cp_strategy": "zigzag"}


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "refused"), [
    ({**CP, "enable_eplb": True, "ep_size": 8}, True),  # tp_size 1: the override's ep_size 1
    ({**CP, "enable_eplb": True, "ep_size": 16, "tp_size": 1}, True),  # fuzz-9-08070's shape
    ({**CP, "enable_eplb": True, "tp_size": 8}, False),  # ep_size 8 from the override
    ({**CP, "enable_eplb": True, "tp_size": 8, "ep_size": 1}, False),  # the written ep_size is replaced
])
def test_eplb_reads_the_ep_size_of_deepseek_prefill_cp(version: str, args: dict, refused: bool) -> None:
    problems = errors(host(args, version=version, model=DEEPSEEK, cc="12.0"), "server.moe")
    assert bool([p for p in problems if p.variable.endswith("enable_eplb")]) is refused, problems
    if refused:
        assert "prefill context parallelism" in problems[0].message


def test_resolved_ep_size_under_cp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The override's ep_size (tp_size 4), not the host's 2, is what the rules read."""
    seen: list[int | None] = []
    original = moe.resolved_ep_size
    monkeypatch.setattr(moe, "resolved_ep_size", lambda ctx: seen.append(original(ctx)) or seen[-1])
    validate_host(host({**CP, "enable_eplb": True, "tp_size": 4, "ep_size": 2}, model=DEEPSEEK, cc="12.0"))
    assert seen and set(seen) == {4}
