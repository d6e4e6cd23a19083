"""check_server_args' checks that read the resolved DP layout or a second argument, and were not modelled.

* check_load_publish_args hands resolve_load_pub_range the resolved DP ranks (validation_hook.py:467-474,
  kv_events.py:140-230): an explicit load-publish address must be a wildcard tcp:// one whose range [base, base + ranks)
  overlaps neither the KV-event nor the replay range; auto packs after them; the range must end within port 65535.
  The ranks are num_dp_ranks_of (dp_size x attn_dp_size, after handle_deprecated_dp_attention moves the deprecated
  dp_size + enable_dp_attention to attn_dp_size); before 0.5.22 the resolved dp_size. The rules had left it to the
  host: DeepSeek-V3 with attn_dp_size 4 and an explicit tcp://*:5560 next to KV events on 5557 was accepted.
* validate_response_store (validation_hook.py:109-116; 0.5.20 / 0.5.21 :30-31): enable_response_store on a PD
  prefill or decode server is refused.

Each verdict is probe-confirmed by the ``targeted-validation-*`` cases (SGLang 0.5.23; 0.5.20-0.5.22 with the release probe).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import launch
from test_sglang_rules_fuzz10k_s3 import errors
from test_sglang_rules_fuzz10k_s4 import DEEPSEEK, LLAMA
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import host

KV = json.dumps({"publisher": "zmq", "endpoint": "tcp://*:5557"})


def _kv(endpoint: str, replay: str | None = None) -> str:
    config = {"publisher": "zmq", "endpoint": endpoint}
    if replay is not None:
        config["replay_endpoint"] = replay
    return json.dumps(config)


def load_pub_refusals(hostvars: dict[str, Any]) -> list[Any]:
    return [p for p in errors(hostvars, "server.combination") if p.variable.endswith("load_publish_endpoint")]


def _attention_dp(args: dict[str, Any], version: str) -> dict[str, Any]:
    """attn_dp_size N as the release spells it (dp_size N + enable_dp_attention before 0.5.22)."""
    if "attn_dp_size" in args and version < "0.5.22":
        args = {**{k: v for k, v in args.items() if k != "attn_dp_size"}, "dp_size": args["attn_dp_size"],
                "enable_dp_attention": True}
    return args


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("args", "refused"), [
    ({"attn_dp_size": 2, "load_publish_endpoint": "tcp://*:5560"}, False),  # targeted-validation-01: [5560, 5562) clear
    ({"attn_dp_size": 4, "load_publish_endpoint": "tcp://*:5560"}, True),  # targeted-validation-02: kv range [5557, 5561)
    ({"dp_size": 4, "enable_dp_attention": True, "load_publish_endpoint": "tcp://*:5559"}, True),  # targeted-validation-03
    ({"load_publish_endpoint": "tcp://*:5559"}, False),  # one rank: [5557, 5558)
    ({"load_publish_endpoint": "auto"}, False),  # targeted-validation-04: packed after the KV range
    ({"load_publish_endpoint": "tcp://10.0.0.5:6000"}, True),  # targeted-validation-09: a concrete host is not bindable
    ({"load_publish_endpoint": "tcp://[::]:6000"}, False),
    ({"load_publish_endpoint": "tcp://0.0.0.0:5557"}, True),  # the KV port itself
    ({"load_publish_endpoint": "tcp://*:0"}, True),
    ({"load_publish_endpoint": "*:6000"}, True),  # no tcp://
    ({"load_publish_endpoint": " OFF "}, False),
])
def test_load_publish_range(version: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"tp_size": 8, "kv_events_config": KV, **_attention_dp(args, version)}, version, model=DEEPSEEK,
                    cc="12.0")
    assert bool(load_pub_refusals(hostvars)) is refused


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("kv", "args", "refused"), [
    (_kv("tcp://*:65533"), {"load_publish_endpoint": "auto"}, False),  # targeted-validation-08: base 65534, one rank
    (_kv("tcp://*:65533"), {"attn_dp_size": 2, "load_publish_endpoint": "auto"}, True),  # targeted-validation-07: 65535 + 1
    (_kv("tcp://*:5557", "tcp://*:5558"), {"attn_dp_size": 2, "load_publish_endpoint": "auto"}, False),  # targeted-validation-43
    (_kv("tcp://*:5557", "tcp://*:5560"), {"attn_dp_size": 2, "load_publish_endpoint": "tcp://*:5561"}, True),  # N-44
    (_kv("tcp://localhost:5557"), {"load_publish_endpoint": "auto"}, True),  # auto packs after a wildcard host only
    (_kv("ipc://kv-events"), {"load_publish_endpoint": "tcp://*:6000"}, True),  # explicit needs a tcp:// KV endpoint
    (_kv("tcp://127.0.0.1:5557"), {"load_publish_endpoint": "tcp://*:6000"}, False),  # any host for the KV endpoint
])
def test_load_publish_auto_and_replay(version: str, kv: str, args: dict[str, Any], refused: bool) -> None:
    hostvars = host({"tp_size": 2, "kv_events_config": kv, **_attention_dp(args, version)}, version, model=LLAMA,
                    cc="10.0", gpus=2)
    assert bool(load_pub_refusals(hostvars)) is refused


@pytest.mark.parametrize("version", ALL)
def test_load_publish_dp_replicas(version: str) -> None:
    """DP replicas count as ranks too (num_dp_ranks_of = dp_size x attn_dp_size)."""
    for port, refused in (("5558", True), ("5559", False)):
        hostvars = host({"dp_size": 2, "kv_events_config": KV, "load_publish_endpoint": f"tcp://*:{port}"}, version,
                        model=LLAMA, cc="12.0", gpus=2)
        assert bool(load_pub_refusals(hostvars)) is refused


@pytest.mark.parametrize(("endpoint", "address"), [
    ("tcp://*:5557", ("*", 5557)),
    ("tcp://[::]:6000", ("::", 6000)),
    ("tcp://::1:6000", None),  # a bare IPv6 host is ambiguous
    ("tcp://*:70000", None),
    ("tcp://:6000", None),
    ("ipc://kv-events", None),
])
def test_tcp_address(endpoint: str, address: tuple[str, int] | None) -> None:
    assert launch._tcp_address(endpoint) == address


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(("mode", "refused"), [("decode", True), ("prefill", True), ("null", False)])
def test_response_store_pd(version: str, mode: str, refused: bool) -> None:
    """targeted-validation-17: enable_response_store on a PD decode server (validate_response_store)."""
    hostvars = host({"tp_size": 4, "enable_response_store": True, "disaggregation_mode": mode}, version,
                    model=LLAMA, cc="10.0", gpus=4)
    found = [p for p in errors(hostvars, "server.combination") if p.variable.endswith("enable_response_store")]
    assert bool(found) is refused
