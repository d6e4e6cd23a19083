"""What the 10,000-case differential fuzz run of seed 5 (``differential.py --cases 10000 --seed 5``) found that the
resolver-differential's fixes (test_sglang_rules_resolution_B/C.py) do not cover: SGLang 0.5.23's LayerNorm-SP
architecture gate (layernorm_sp_hook.py:128-134), which the validator left to the preflight although the model
table knows the architecture (MISSED fuzz-5-02701: Llama-3.1-8B with enable_layernorm_sp and tp_size 7).

Probe-confirmed by ``fuzzed-layernorm-sp-on-llama``, ``catalog-layernorm-sp-megamoe-not-muse`` and
``layernorm-sp-qwen3-override-accepted`` of tests/conformance/cases.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA, QWEN3_NEXT
from test_sglang_rules_seed0_2000 import host

QWEN3 = '{"architectures": ["Qwen3ForCausalLM"]}'
MUSE = '{"architectures": ["MuseSparkForConditionalGeneration"]}'


@pytest.mark.parametrize(("model", "args", "refused"), [
    (LLAMA, {"tp_size": 7}, True),  # fuzz-5-02701
    (LLAMA, {"tp_size": 2}, True),
    (DEEPSEEK, {"tp_size": 8}, True),
    (QWEN3_NEXT, {"tp_size": 2}, True),  # Qwen3-Next is not Qwen3ForCausalLM
    (LLAMA, {"tp_size": 2, "json_model_override_args": QWEN3}, False),
    (LLAMA, {"tp_size": 2, "json_model_override_args": MUSE}, False),
    (LLAMA, {"tp_size": 2, "json_model_override_args": QWEN3, "enable_megamoe_for_layernorm_sp": True}, True),  # :128
    (LLAMA, {"tp_size": 2, "json_model_override_args": MUSE, "enable_megamoe_for_layernorm_sp": True}, False),
    ("/srv/models/unknown-checkpoint", {"tp_size": 2}, False),  # the preflight's: only config.json tells
])
def test_layernorm_sp_architecture_gate(model: str, args: dict[str, Any], refused: bool) -> None:
    found = errors(host({"enable_layernorm_sp": True, **args}, "0.5.23", model=model, cc="12.0", gpus=8),
                   "server.layernorm_sp")
    assert bool(found) is refused, found
    if refused:
        assert any("layernorm_sp_hook.py:1" in (p.source or "") for p in found), found


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22"])
def test_older_releases_keep_their_own_gate(version: str) -> None:
    """Before 0.5.23 SP runs Qwen3ForCausalLM only (layernorm_sp_hook.py:45-49 in 0.5.22, :42-46 in 0.5.20 and
    0.5.21), and the MegaMoE variant does not exist."""
    assert errors(host({"enable_layernorm_sp": True, "tp_size": 2}, version, model=LLAMA, cc="12.0", gpus=8),
                  "server.layernorm_sp")
    assert not errors(host({"enable_layernorm_sp": True, "tp_size": 2, "json_model_override_args": QWEN3}, version,
                           model=LLAMA, cc="12.0", gpus=8), "server.layernorm_sp")
