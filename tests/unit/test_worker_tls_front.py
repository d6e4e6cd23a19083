"""The verifying TLS front of the GPU hosts (roles/sglang_worker_tls, the gateway's mTLS to its workers) in the
launch plan (plugin_utils/sglang_validate.py _read_front, sglang_hostplan.instance_ports): SGLang moves to loopback on
the backend port, the public endpoint stays the instance's address and port, and the refusals name the variable."""
from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import instance_ports, plan_host
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import (
    FRONT_CA_VAR,
    FRONT_CERT_VAR,
    FRONT_KEY_VAR,
    FRONT_OFFSET_VAR,
    Result,
    format_report,
    validate_host,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import host_with, load_reference
from role_defaults import ROLE_DEFAULTS

HOST = "blackwell-01"
REFERENCE = load_reference()
# roles/sglang_worker_tls's default (tests/unit/test_role_defaults_one_source.py keeps the defaults files the source).
DEFAULTS = {FRONT_OFFSET_VAR: 1000}
FRONT = {FRONT_CA_VAR: "/etc/ssl/sglang/clients-ca.pem", FRONT_CERT_VAR: "/etc/ssl/sglang/front.pem",
         FRONT_KEY_VAR: "/etc/ssl/sglang/front.key"}


def host(args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    out = copy.deepcopy(REFERENCE)
    out["sglang_args"].update(args or {})
    out.update({"sglang_listen_host": "0.0.0.0", "sglang_api_key": "k3y-value",
                "sglang_tls_ca_file": "/etc/ssl/sglang/ca.pem", **FRONT, **hostvars})
    return {k: v for k, v in out.items() if v is not None}


def flag(result: Result, name: str) -> str:
    return result.argv[result.argv.index(name) + 1]


def errors_of(result: Result) -> list[tuple[str, str]]:
    return [(p.rule, p.variable) for p in result.errors]


def test_behind_the_front_sglang_listens_on_loopback_on_the_backend_port() -> None:
    result = validate_host(host({"port": 30001}), defaults=DEFAULTS)
    assert result.ok, format_report("host", result)
    assert (flag(result, "--host"), flag(result, "--port")) == ("127.0.0.1", "31001")
    endpoint = result.endpoint
    # Others reach the front: the instance's own address and port, HTTPS verified against the CA.
    assert (endpoint["scheme"], endpoint["listen_host"], endpoint["port"]) == ("https", "0.0.0.0", 30001)
    assert endpoint["ca_file"] == "/etc/ssl/sglang/ca.pem"
    # The host's own checks reach SGLang itself, plain HTTP on loopback.
    assert endpoint["local_url"] == "http://127.0.0.1:31001"
    assert endpoint["front"] == {"listen_host": "0.0.0.0", "port": 30001, "backend_port": 31001, **{
        "client_ca_file": FRONT[FRONT_CA_VAR], "cert_file": FRONT[FRONT_CERT_VAR], "key_file": FRONT[FRONT_KEY_VAR]}}
    ports = dict((what, port) for port, what in instance_ports(result))
    assert ports["port"] == 30001 and 31001 in ports.values()


def test_without_the_client_ca_nothing_changes() -> None:
    result = validate_host(host(**{FRONT_CA_VAR: ""}), defaults=DEFAULTS)
    assert result.ok, format_report("host", result)
    assert (flag(result, "--host"), result.endpoint["port"]) == ("0.0.0.0", 30000)
    assert "front" not in result.endpoint and result.endpoint["local_url"] == "http://127.0.0.1:30000"


def test_the_offset_of_the_host_wins_and_is_read_as_a_number() -> None:
    result = validate_host(host(**{FRONT_OFFSET_VAR: "7"}), defaults=DEFAULTS)
    assert result.ok and flag(result, "--port") == "30007"


@pytest.mark.parametrize("missing", [FRONT_CERT_VAR, FRONT_KEY_VAR])
def test_the_front_without_its_certificate_or_key_is_refused(missing: str) -> None:
    result = validate_host(host(**{missing: None}), defaults=DEFAULTS)
    assert errors_of(result) == [("input.front", missing)]


def test_sglang_tls_arguments_are_refused_behind_the_front() -> None:
    result = validate_host(host({"ssl_certfile": "/etc/ssl/sglang/server.pem", "ssl_keyfile": "/etc/ssl/sglang/server.key"}),
                           defaults=DEFAULTS)
    assert errors_of(result) == [("input.front", "sglang_args.ssl_certfile"), ("input.front", "sglang_args.ssl_keyfile")]


@pytest.mark.parametrize("offset", [0, -5, 40000, True, "ten", "1e3", 1.5])
def test_an_offset_that_gives_no_port_is_refused_naming_it(offset: Any) -> None:
    result = validate_host(host(**{FRONT_OFFSET_VAR: offset}), defaults=DEFAULTS)
    assert errors_of(result) == [("input.front", FRONT_OFFSET_VAR)]


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=40), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=2)))
def test_untrusted_front_paths_round_trip_or_are_refused_naming_the_variable(value: Any) -> None:
    result = validate_host(host(**{FRONT_CERT_VAR: value}), defaults=DEFAULTS)
    if result.ok:
        assert result.endpoint["front"]["cert_file"] == value
    else:
        assert errors_of(result) == [("input.front", FRONT_CERT_VAR)]


def two_instances(second_port: int, **front: Any) -> dict[str, Any]:
    """The reference host (8 GPUs) with two tp-4 instances, 30001 and ``second_port``, behind the front."""
    out = host_with({"enable_metrics": True}, sglang_listen_host="0.0.0.0", sglang_api_key="k3y-value",
                    sglang_tls_ca_file="/etc/ssl/sglang/ca.pem", **{**FRONT, **front})
    out["sglang_args"] = {"enable_metrics": True, "mem_fraction_static": 0.85}
    out["sglang_instances"] = [
        {"name": "chat", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0, 1, 2, 3], "port": 30001,
         "args": {"tp_size": 4, "attention_backend": "triton"}},
        {"name": "code", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [4, 5, 6, 7], "port": second_port,
         "args": {"tp_size": 4, "attention_backend": "triton"}},
    ]
    return out


def plan_errors(hostvars: dict[str, Any]) -> list[tuple[str, str]]:
    plan = plan_host(HOST, {HOST: hostvars}, {"all": [HOST]}, role_defaults=ROLE_DEFAULTS)
    return [(p.variable, p.rule) for p in plan.result().errors]


def test_two_instances_behind_the_front_each_get_their_backend_port() -> None:
    plan = plan_host(HOST, {HOST: two_instances(30002)}, {"all": [HOST]}, role_defaults=ROLE_DEFAULTS)
    assert plan.ok, plan.result().errors
    assert [i.result.endpoint["front"]["backend_port"] for i in plan.instances] == [31001, 31002]
    assert [i.result.endpoint["port"] for i in plan.instances] == [30001, 30002]


@pytest.mark.parametrize(("second_port", "offset"), [(31001, 1000), (30002, 1)])
def test_a_backend_port_another_instance_opens_is_refused_naming_the_offset(second_port: int, offset: int) -> None:
    # 30001 + 1000 is the second instance's own port; 30001 + 1 is the second instance's port, 30002.
    found = plan_errors(two_instances(second_port, **{FRONT_OFFSET_VAR: offset}))
    assert found == [(FRONT_OFFSET_VAR, "instances.port")], found
