"""What the 10,000-case differential fuzz run of seed 13 (``differential.py --cases 10000 --seed 13``) and the session
around it found, on what the conformance corpus cannot show: the older releases and every rule of a class.

* A false alarm (3 cases: fuzz-13-04614, -05090, -08666): ``disaggregation_transfer_backend: mooncake_tcp`` is Mooncake
  with the TCP transport forced, which handle_pd_disaggregation rewrites to mooncake before any other hook reads the
  backend (pd_disaggregation_hook.py:30-36). The unified pool's PD check (kv_cache_hook.py:537) compared the written
  value with "mooncake" and refused it. The class: every rule reads the backend through resolve.transfer_backend.
* A MISSED on 0.5.20 / 0.5.21 (probed): DSA interleave prefill CP takes no dp_size there (deepseek_v2.py:105 / :98);
  test_sglang_rules_dsa_override_resolved.py has those rows.

Each verdict is probe-confirmed by ``unified-memory-pd-prefill-mooncake-tcp``, ``-decode-mooncake-tcp-gb10`` and
``targeted-kv-unified-pd-nixl-refused`` in tests/conformance/cases.yaml (SGLang 0.5.23; 0.5.20-0.5.22 with
release_conformance.py's probe).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import transfer_backend
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_seed0_2000 import host, rules_context

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
VERSIONS = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]


@pytest.mark.parametrize(("written", "read"), [
    (None, "mooncake"), ("mooncake", "mooncake"), ("mooncake_tcp", "mooncake"), ("nixl", "nixl"), ("fake", "fake"),
])
def test_transfer_backend(written: str | None, read: str) -> None:
    args = {} if written is None else {"disaggregation_transfer_backend": written}
    assert transfer_backend(rules_context(host(args))) == read


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("model", "gpus", "args", "refused"), [
    (DEEPSEEK, 1, {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "mooncake_tcp"}, False),
    (DEEPSEEK, 8, {"tp_size": 8, "disaggregation_mode": "prefill", "disaggregation_transfer_backend": "mooncake_tcp",
                   "return_output_ids": True}, False),  # fuzz-13-08666
    (LLAMA, 1, {"disaggregation_mode": "decode", "disaggregation_transfer_backend": "mooncake_tcp"}, False),
    (LLAMA, 1, {"disaggregation_mode": "prefill"}, False),  # mooncake by default
    (LLAMA, 1, {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "nixl"}, True),
    (LLAMA, 1, {"disaggregation_mode": "decode", "disaggregation_transfer_backend": "mori"}, True),
])
def test_unified_memory_pd_transfer_backend(version: str, model: str, gpus: int, args: dict[str, Any],
                                            refused: bool) -> None:
    hostvars = host({**args, "enable_unified_memory": True}, version, model=model, cc="12.0", gpus=gpus)
    found = [p for p in errors(hostvars, "server.unified_memory") if "transfer backend" in p.message]
    assert bool(found) is refused, found
