"""One launch plan per host: the unit, the server role, the router and the rollout gate read the same one.

The validate task computes each host's plan (``plugin_utils.sglang_hostplan.host_plan``); the roles and
playbooks read its endpoint through ``blackwell.sglang.server_endpoint``, which calls the same function.
Here every consumer is evaluated from the repository's own files for the three ways an inventory can
spell the port, and must agree on it (the router and rollout.yml used to read ``sglang_args.port`` only,
and drained or joined port 30000 while the server listened elsewhere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from reference import host_with
from rendering import _evaluate, exec_start, jinja_env, render
from test_action_plugin import run_action

REPO = Path(__file__).resolve().parents[2]
HOST = "blackwell-01"
ROUTER_VARS = yaml.safe_load((REPO / "roles" / "sglang_router" / "vars" / "main.yml").read_text(encoding="utf-8"))
ROUTER_ENV = (REPO / "roles" / "sglang_router" / "templates" / "sglang-router.env.j2").read_text(encoding="utf-8")
[_CANARY_PLAY] = [p for p in yaml.safe_load((REPO / "playbooks" / "rollout.yml").read_text(encoding="utf-8"))
                  if p.get("name") == "Roll out to the canary"]
ROLLOUT_VARS = _CANARY_PLAY["vars"]


def host_with_port(key: str, value: Any, **extra: Any) -> dict[str, Any]:
    return host_with({key: value}, **extra)


def evaluate(names: list[str], variables: dict[str, Any], hostvars: dict[str, Any], **context: Any) -> dict[str, Any]:
    """Evaluate role or play variables the way Ansible would for HOST (lazily, in dependency order)."""
    env = jinja_env()
    ctx: dict[str, Any] = {"inventory_hostname": HOST, "hostvars": {HOST: hostvars}, "groups": {"all": [HOST], "sglang_servers": [HOST]},
                           **hostvars, **context}
    for _ in range(3):
        for name in names:
            try:
                ctx[name] = _evaluate(env, variables[name], ctx)
            except Exception:  # noqa: BLE001 - depends on a name evaluated in a later pass
                continue
    return ctx


@pytest.mark.parametrize(("key", "value"), [("port", 31000), ("--port", 31000), ("port", "31000")])
def test_every_consumer_reads_the_same_port(key: str, value: Any) -> None:
    hostvars = host_with_port(key, value, ansible_host="10.0.0.7")
    rendered = render(hostvars)
    argv = exec_start(rendered.unit)
    assert argv[argv.index("--port") + 1] == "31000"  # what the unit runs
    assert rendered.context["__sglang_server_url"] == "http://127.0.0.1:31000"  # health wait, report, GPU release
    assert rendered.context["__sglang_server_port"] == 31000

    router = evaluate(["__sglang_router_endpoint", "__sglang_router_self_url", "__sglang_router_local_url"], ROUTER_VARS, hostvars)
    assert router["__sglang_router_self_url"] == "http://10.0.0.7:31000"  # drain and join
    assert router["__sglang_router_local_url"] == "http://127.0.0.1:31000"  # the drain's /metrics wait
    env = jinja_env().from_string(ROUTER_ENV).render(groups={"sglang_servers": [HOST]}, hostvars={HOST: hostvars}, ansible_managed="",
                                                     sglang_router_worker_group="sglang_servers")
    assert "SGLANG_ROUTER_WORKER_URLS=http://10.0.0.7:31000 " in env  # the router's initial worker list

    rollout = evaluate(["__rollout_endpoint", "__rollout_url", "__rollout_node_rank"], ROLLOUT_VARS, hostvars)
    assert rollout["__rollout_url"] == "http://127.0.0.1:31000"  # the rollout's health gate and soak

    result = run_action({HOST: hostvars})
    assert result["hosts"][HOST]["endpoint"]["port"] == 31000  # the validate task's plan
    assert result["hosts"][HOST]["endpoint"] == {k: v for k, v in router["__sglang_router_endpoint"].items() if k != "url"}


def test_a_listen_address_and_tls_reach_every_consumer() -> None:
    hostvars = host_with_port("port", 8443, sglang_listen_host="::", sglang_api_key="k" * 16,
                              ansible_host="gpu-7.example")
    hostvars["sglang_args"].update({"ssl_certfile": "/etc/sglang/tls/cert.pem", "ssl_keyfile": "/etc/sglang/tls/key.pem"})
    rendered = render(hostvars)
    assert rendered.context["__sglang_server_url"] == "https://[::1]:8443"
    router = evaluate(["__sglang_router_endpoint", "__sglang_router_self_url", "__sglang_router_local_url"], ROUTER_VARS, hostvars)
    assert router["__sglang_router_self_url"] == "https://gpu-7.example:8443"
    assert router["__sglang_router_local_url"] == "https://[::1]:8443"


def test_the_run_spec_mode_reaches_the_endpoint() -> None:
    # The incident's flags are valid only with spec=auto; the rollout's endpoint is computed under the run's mode.
    hostvars = host_with({"speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1})
    rollout = evaluate(["__rollout_endpoint", "__rollout_url"], ROLLOUT_VARS, hostvars, spec="auto")
    assert rollout["__rollout_url"] == "http://127.0.0.1:30000"
