"""Environment switches SGLang reads while it parses and resolves the launch arguments.

* SGLANG_RUST_SERVER on a PD prefill server: the Rust server serves the KV bootstrap registry on the api port, so
  _alias_bootstrap_port_to_api_port (pd_disaggregation_hook.py:150, 245-299; 0.5.22 :268, 0.5.21 :209, 0.5.20 :168)
  refuses an explicit disaggregation_bootstrap_port other than its default 8998 or --port. A decode server keeps its
  bootstrap port (it names the prefill side's).
* SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE adds token_oracle to --sampling-backend's argparse choices
  (server_args.py:357; 0.5.22 :356, 0.5.21 :289, 0.5.20 :352); the schema's choices are dumped without it.

Each verdict is probe-confirmed by the ``targeted-env-*`` cases (SGLang 0.5.23; the older releases with the release probe).
"""

from __future__ import annotations

import pytest
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host

RUST = {"SGLANG_RUST_SERVER": "1"}


def bootstrap_refusals(hostvars: dict) -> list:
    return [p for p in errors(hostvars, "server.combination") if "disaggregation_bootstrap_port" in p.message]


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "env", "refused"), [
    ({"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 9000}, RUST, True),
    ({"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 9000}, {}, False),
    ({"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 9000}, {"SGLANG_RUST_SERVER": "0"}, False),
    ({"disaggregation_mode": "prefill"}, RUST, False),  # the default 8998 is aliased to --port
    ({"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 30000}, RUST, False),  # equal to --port
    ({"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 9000, "port": 9000}, RUST, False),
    ({"disaggregation_mode": "decode", "disaggregation_bootstrap_port": 9000}, RUST, False),  # decode keeps it
])
def test_rust_server_prefill_bootstrap_port(version: str, args: dict, env: dict, refused: bool) -> None:
    hostvars = host({**args, "disaggregation_transfer_backend": "nixl"}, version, cc="12.0", gpus=1, env=env)
    found = bootstrap_refusals(hostvars)
    assert bool(found) is refused
    if refused:
        assert found[0].source.startswith("sglang/srt/arg_groups/pd_disaggregation_hook.py:")


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("env", "refused"), [
    ({"SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE": "1"}, False),
    ({"SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE": "true"}, False),
    ({"SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE": "0"}, True),
    ({}, True),
])
def test_token_oracle_sampling_backend_needs_env(version: str, env: dict, refused: bool) -> None:
    hostvars = host({"sampling_backend": "token_oracle"}, version, cc="12.0", gpus=1, env=env)
    assert bool(errors(hostvars, "schema.choices")) is refused


def test_env_choice_is_only_token_oracle() -> None:
    hostvars = host({"sampling_backend": "oracle"}, cc="12.0", gpus=1, env={"SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE": "1"})
    assert errors(hostvars, "schema.choices")
