"""One launch plan per instance: the unit, the preflight, the router and the rollout gate read the same one.

The validate task computes each host's plans (``plugin_utils.sglang_hostplan.plan_host``) and reports them
with a digest; the server role installs ``blackwell.sglang.instance_plans`` (the same function, digests
compared); the router and the rollout read ``blackwell.sglang.server_instances`` (the same function again);
the preflight reads the installed unit's ExecStart=. Here every consumer is evaluated from the repository's
own files for the three ways an inventory can spell the port, and for a host with two instances, and must
agree (the router and rollout.yml once read ``sglang_args.port`` only, and drained or joined port 30000
while the server listened elsewhere).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from reference import host_with
from rendering import _evaluate, jinja_env, render
from test_action_plugin import run_action
from test_preflight_unit import preflight

REPO = Path(__file__).resolve().parents[2]
HOST = "blackwell-01"
ROUTER_VARS = yaml.safe_load((REPO / "roles" / "sglang_router" / "vars" / "main.yml").read_text(encoding="utf-8"))
ROUTER_ENV = (REPO / "roles" / "sglang_router" / "templates" / "sglang-router.env.j2").read_text(encoding="utf-8")
ROLLOUT_VARS = yaml.safe_load((REPO / "roles" / "sglang_rollout" / "vars" / "main.yml").read_text(encoding="utf-8"))


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


def preflight_argv(unit_text: str) -> list[str]:
    """What the preflight checks: the words after python and the launcher in the unit's ExecStart=."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sglang.service"
        path.write_text(unit_text, encoding="utf-8")
        command = preflight.unit_exec_start(path)
    assert command.argv[:2] == ["/opt/sglang/current/bin/python", "/usr/local/libexec/sglang/sglang-launch.py"]
    return command.argv[2:]


def consumers(hostvars: dict[str, Any], instance: str | None = None, spec: str | None = None) -> dict[str, Any]:
    """Every consumer's view of one instance of HOST: the server's files, and the router and rollout reading the
    plan the run published (playbooks/validate.yml's sglang_server_plan, planned with the run's spec)."""
    rendered = render(hostvars, spec=spec, instance=instance)
    published = run_action({HOST: hostvars}, args={"spec": spec} if spec else None)["hosts"][HOST]
    seen_by_roles = {**hostvars, "sglang_server_plan": published}
    router = evaluate(["__sglang_router_instances", "__sglang_router_instance", "__sglang_router_self_url",
                       "__sglang_router_local_url"], ROUTER_VARS, seen_by_roles)
    if instance is not None:
        router = evaluate(["__sglang_router_instances", "__sglang_router_instance", "__sglang_router_self_url",
                           "__sglang_router_local_url"], ROUTER_VARS, seen_by_roles,
                          sglang_router_instance=next(i for i in router["__sglang_router_instances"] if i["name"] == instance))
    rollout = evaluate(["__sglang_rollout_instances", "__sglang_rollout_names", "__sglang_rollout_instance"], ROLLOUT_VARS,
                       seen_by_roles, __sglang_rollout_name=rendered.plan["name"])
    return {"rendered": rendered, "router": router, "rollout": rollout["__sglang_rollout_instance"],
            "validated": next(i for i in published["instances"] if i["name"] == rendered.plan["name"])}


@pytest.mark.parametrize(("key", "value"), [("port", 31000), ("--port", 31000), ("port", "31000")])
def test_every_consumer_reads_the_same_port(key: str, value: Any) -> None:
    seen = consumers(host_with({key: value}, ansible_host="10.0.0.7"))
    plan = seen["rendered"].plan
    argv = preflight_argv(seen["rendered"].unit)
    assert argv == plan["argv"]  # what the preflight checks is what the unit runs, and the plan's argv
    assert argv[argv.index("--port") + 1] == "31000"
    assert seen["rendered"].context["__sglang_server_url"] == "http://127.0.0.1:31000"  # health wait, report, release
    assert seen["router"]["__sglang_router_self_url"].strip() == "http://10.0.0.7:31000"  # drain and join
    assert seen["router"]["__sglang_router_local_url"] == "http://127.0.0.1:31000"  # the drain's /metrics wait
    assert seen["rollout"]["local_url"] == "http://127.0.0.1:31000"  # the rollout's health gate and soak
    assert seen["validated"]["digest"] == plan["digest"]  # the validate task's plan is the installed one
    assert seen["validated"]["endpoint"] == plan["endpoint"] == {k: v for k, v in seen["rollout"].items()
                                                                 if k not in ("name", "service", "url", "served_model")}
    inventory = {HOST: host_with({key: value}, ansible_host="10.0.0.7")}
    env = jinja_env().from_string(ROUTER_ENV).render(groups={"sglang_servers": [HOST]}, hostvars=inventory, ansible_managed="",
                                                     sglang_router_worker_group="sglang_servers")
    assert "http://10.0.0.7:31000" in env  # the router's initial worker list


def test_each_instance_of_a_two_instance_host_is_seen_alike() -> None:
    host = host_with({}, ansible_host="10.0.0.7")
    host["sglang_instances"] = [
        {"name": "chat", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0, 1, 2, 3], "port": 30001,
         "args": {"tp_size": 4, "quantization": None, "moe_runner_backend": None, "mamba_radix_cache_strategy": None,
                  "speculative_algorithm": None}},
        {"name": "code", "gpus": [4, 5, 6, 7], "args": {"tp_size": 4, "--port": "30002"}},
    ]
    for name, port in (("chat", 30001), ("code", 30002)):
        seen = consumers(host, instance=name)
        plan = seen["rendered"].plan
        assert plan["name"] == name and preflight_argv(seen["rendered"].unit) == plan["argv"]
        assert seen["router"]["__sglang_router_self_url"].strip() == f"http://10.0.0.7:{port}"
        assert seen["rollout"]["local_url"] == seen["router"]["__sglang_router_local_url"] == f"http://127.0.0.1:{port}"
        assert seen["validated"]["digest"] == plan["digest"]


def test_a_listen_address_and_tls_reach_every_consumer() -> None:
    hostvars = host_with({"port": 8443, "ssl_certfile": "/etc/sglang/tls/cert.pem", "ssl_keyfile": "/etc/sglang/tls/key.pem"},
                         sglang_listen_host="::", sglang_api_key="k" * 16, ansible_host="gpu-7.example")
    seen = consumers(hostvars)
    assert seen["rendered"].context["__sglang_server_url"] == "https://[::1]:8443"
    assert seen["router"]["__sglang_router_self_url"].strip() == "https://gpu-7.example:8443"
    assert seen["router"]["__sglang_router_local_url"] == seen["rollout"]["local_url"] == "https://[::1]:8443"


def test_the_run_spec_mode_reaches_every_consumer() -> None:
    # The incident's flags are valid only with spec=auto; every consumer computes under the run's mode.
    seen = consumers(host_with({"speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}), spec="auto")
    assert seen["rollout"]["local_url"] == "http://127.0.0.1:30000"
    assert seen["validated"]["digest"] == seen["rendered"].plan["digest"]
    assert "--speculative-num-draft-tokens" not in preflight_argv(seen["rendered"].unit)


# --- the published plan: planned once by the validate task, read by every consumer ------------------------------


def published_for(hostvars: dict[str, Any], spec: str | None = None) -> dict[str, Any]:
    """The sglang_server_plan fact playbooks/validate.yml sets for HOST: the validate action's entry for it."""
    return run_action({HOST: hostvars}, args={"spec": spec} if spec else None)["hosts"][HOST]


def test_the_published_plan_has_everything_its_readers_need_and_no_secret() -> None:
    hostvars = host_with({"port": 31000}, sglang_api_key="k-secret-" + "x" * 8, hf_token="hf-secret-" + "y" * 8)
    plan = published_for(hostvars)
    assert {"instances", "layout", "models", "spec_override"} <= set(plan)
    assert plan["layout"] is None and plan["spec_override"] is None
    assert [m["repo"] for m in plan["models"]] == [hostvars["sglang_model_path"]]
    assert "k-secret" not in str(plan) and "hf-secret" not in str(plan)
    secret = run_action({HOST: hostvars}, args={"secret_plans": True})
    assert secret["secret_plans"][HOST][0]["config"]["api-key"].startswith("k-secret")
    assert "secret_plans" not in run_action({HOST: hostvars})


def test_consumers_read_the_published_plan_instead_of_planning_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.blackwell.sglang.plugins.filter import sglang as filters

    hostvars = host_with({"port": 31000}, ansible_host="10.0.0.7")
    published = published_for(hostvars)
    planned: list[str] = []
    real = filters.plan_host
    monkeypatch.setattr(filters, "plan_host", lambda host, *a, **k: planned.append(host) or real(host, *a, **k))
    view = {HOST: {**hostvars, "sglang_server_plan": published}}
    groups = {"all": [HOST], "sglang_servers": [HOST]}
    [inst] = filters.server_instances(HOST, view, groups)
    assert (inst["url"], inst["local_url"], inst["name"]) == ("http://10.0.0.7:31000", "http://127.0.0.1:31000", "sglang")
    assert filters.multinode_layout(HOST, view, groups) is None
    assert filters.staged_models(HOST, view) == published["models"]
    assert planned == []
    # The names and endpoints do not depend on the spec mode: read whatever mode it was planned with.
    assert filters.server_instances(HOST, view, groups, "auto") == [inst] and planned == []
    # A plan of another mode than the run's (a bench candidate) is not the published one: planned here.
    assert filters.published_plan(HOST, view, "auto") is None
    # Not published (a host outside --limit, a role run on its own): planned here, the same result.
    assert filters.server_instances(HOST, {HOST: hostvars}, groups) == [inst]


@pytest.mark.parametrize("where", ["inventory", "extra vars"])
def test_nobody_but_the_run_sets_the_published_plan(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.blackwell.sglang.plugins.action import validate as validate_plugin

    hostvars = host_with({})
    forged = {"instances": [], "layout": None, "models": [], "spec_override": None}
    if where == "inventory":
        result = run_action({HOST: {**hostvars, "sglang_server_plan": forged}}, args={"fail_on_error": False})
        assert result["invalid_hosts"] == [HOST] and "sglang_server_plan: input.internal" in result["hosts"][HOST]["errors"]
    else:
        monkeypatch.setattr(validate_plugin, "load_extra_vars", lambda _loader: {"sglang_server_plan": forged})
        with pytest.raises(Exception, match="sglang_server_plan is internal to the roles and playbooks .a fact the run publishes"):
            run_action({HOST: hostvars})
