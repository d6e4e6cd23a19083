"""Elastic expert parallelism's first checks and the deprecated CUDA IPC transport switch.

* handle_elastic_ep, under any elastic-EP backend (parallel_hook.py:523-538; 0.5.22 :500-515, 0.5.21 :428-443,
  0.5.20 :375-390): with enable_eplb the EPLB algorithm must be auto (resolved to elasticity_aware) or
  elasticity_aware(_hierarchical), and pp_size must be 1, with or without a scale-up. The rules had checked the join
  mode, max_ep_size and the scale-up only.
* handle_multimodal_feature_transport (serving_hook.py:809-917, the same in 0.5.20-0.5.22): with mm_feature_transport
  unset, SGLANG_USE_CUDA_IPC_TRANSPORT=1 picks cuda_ipc for any model, and cuda_ipc works on one node only.

Each verdict is probe-confirmed by the ``targeted-parallel-*`` cases of the conformance corpus (SGLang 0.5.23).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host

ELASTIC = {"tp_size": 8, "ep_size": 8, "elastic_ep_backend": "mooncake"}


def elastic_refusals(args: dict[str, Any], version: str = "0.5.23") -> list[Any]:
    return errors(host(args, version, model=DEEPSEEK, cc="12.0"), "server.parallel")


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"enable_eplb": True}, False),  # targeted-parallel-23: auto resolves to elasticity_aware
    ({"enable_eplb": True, "eplb_algorithm": "elasticity_aware_hierarchical"}, False),
    ({"enable_eplb": True, "eplb_algorithm": "deepseek"}, True),  # targeted-parallel-24
    ({"eplb_algorithm": "deepseek"}, False),  # without enable_eplb the algorithm is not checked
    ({"tp_size": 4, "ep_size": 4, "pp_size": 2}, True),  # targeted-parallel-25
])
def test_elastic_ep_eplb_and_pp(version: str, args: dict[str, Any], refused: bool) -> None:
    assert bool(elastic_refusals({**ELASTIC, **args}, version)) is refused


def test_elastic_ep_cites_release_line() -> None:
    pp = {**ELASTIC, "tp_size": 4, "ep_size": 4, "pp_size": 2}
    assert elastic_refusals(pp)[0].source.endswith("parallel_hook.py:538")
    assert elastic_refusals(pp, "0.5.20")[0].source.endswith("parallel_hook.py:390")


def test_pp_without_elastic_backend_is_not_elastic() -> None:
    assert not elastic_refusals({"tp_size": 4, "pp_size": 2, "enable_eplb": True, "ep_size": 4,
                                 "eplb_algorithm": "deepseek"})


def transport_refusals(args: dict[str, Any], env: dict[str, str]) -> list[Any]:
    return [p for p in errors(host(args, model=LLAMA, cc="12.0", gpus=4, env=env), "server.combination")
            if "cuda_ipc" in p.message]


TWO_NODES = {"tp_size": 8, "nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:5000"}


@pytest.mark.parametrize(("args", "env", "refused"), [
    (TWO_NODES, {"SGLANG_USE_CUDA_IPC_TRANSPORT": "1"}, True),  # targeted-parallel-11
    (TWO_NODES, {"SGLANG_USE_CUDA_IPC_TRANSPORT": "true"}, True),
    (TWO_NODES, {"SGLANG_USE_CUDA_IPC_TRANSPORT": "0"}, False),  # the switch off picks cpu
    (TWO_NODES, {}, False),
    ({**TWO_NODES, "mm_feature_transport": "cpu"}, {"SGLANG_USE_CUDA_IPC_TRANSPORT": "1"}, False),  # the argument wins
    ({**TWO_NODES, "encoder_only": True}, {"SGLANG_USE_CUDA_IPC_TRANSPORT": "1"}, False),  # encoder-only: cpu
    ({"tp_size": 8}, {"SGLANG_USE_CUDA_IPC_TRANSPORT": "1"}, False),  # targeted-parallel-12: one node
])
def test_legacy_cuda_ipc_switch(args: dict[str, Any], env: dict[str, str], refused: bool) -> None:
    assert bool(transport_refusals(args, env)) is refused
