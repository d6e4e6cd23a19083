"""Several SGLang instances per host: sglang_instances, their plans, the checks across them, GPU ownership."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.filter.sglang import instance_plans, server_instances, staged_models
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import plan_host
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import RESERVED_SERVICE_NAMES
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from reference import host_with
from rendering import exec_start, parse_unit, render
from role_defaults import ROLE_DEFAULTS
from test_action_plugin import report, run_action

HOST = "blackwell-01"
REPO = Path(__file__).resolve().parents[2]


def two(**extra: Any) -> dict[str, Any]:
    """The reference host (8 GPUs, 12.0) running two tp-4 instances of different models."""
    host = host_with({"enable_metrics": True}, **extra)
    host["sglang_args"] = {"enable_metrics": True, "mem_fraction_static": 0.85}
    host["sglang_instances"] = [
        {"name": "chat", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0, 1, 2, 3], "port": 30001,
         "args": {"tp_size": 4, "attention_backend": "triton"}},
        {"name": "code", "model": "nvidia/Qwen3.5-397B-A17B-NVFP4", "gpus": [4, 5, 6, 7], "port": 30002,
         "args": {"tp_size": 4, "quantization": "modelopt_fp4", "moe_runner_backend": "flashinfer_cutlass",
                  "attention_backend": "triton", "mamba_radix_cache_strategy": "extra_buffer"}},
    ]
    return host


def plan(hostvars: dict[str, Any]) -> Any:
    return plan_host(HOST, {HOST: hostvars}, {"all": [HOST]}, role_defaults=ROLE_DEFAULTS)


def errors(hostvars: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.variable, p.rule) for p in plan(hostvars).result().errors]


def test_two_instances_have_their_own_units_gpus_ports_and_models() -> None:
    result = plan(two())
    assert result.ok, result.result().errors
    chat, code = result.instances
    assert (chat.name, chat.service, chat.gpus) == ("chat", "sglang-chat", [0, 1, 2, 3])
    assert (code.name, code.service, code.gpus) == ("code", "sglang-code", [4, 5, 6, 7])
    assert chat.binding["cuda_visible_devices"] == "0,1,2,3" and code.binding["cuda_visible_devices"] == "4,5,6,7"
    assert code.binding["devices"] == ["/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7"]
    assert "CUDA_VISIBLE_DEVICES" not in chat.result.env  # the binding, not the validated plan, pins the GPUs
    assert chat.result.endpoint["port"] == 30001 and code.result.endpoint["port"] == 30002
    # The host's sglang_args are the common base; the instance's args win key by key.
    assert chat.result.args["mem_fraction_static"] == 0.85 and chat.result.args["tp_size"] == 4
    assert chat.result.args["model_path"] == "/opt/sglang/models/Qwen/Qwen3-Next-80B-A3B-Instruct"
    assert code.result.args["model_path"] == "/opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4"


def test_the_shorthand_is_one_instance_named_after_the_service() -> None:
    [one] = plan(host_with()).instances
    assert (one.name, one.service, one.index) == ("sglang", "sglang", None)
    assert one.gpus == list(range(8)) and one.binding["cuda_visible_devices"] == "0,1,2,3,4,5,6,7"
    [one] = plan(host_with({"tp_size": 4}, sglang_server_service_name="sglang-llm", sglang_gpus=[4, 5, 6, 7])).instances
    assert one.result.ok, one.result.errors
    assert one.service == "sglang-llm" and one.gpus == [4, 5, 6, 7] and one.binding["cuda_visible_devices"] == "4,5,6,7"


@pytest.mark.parametrize(("change", "expected"), [
    (lambda i: i[1].update(gpus=[3, 4, 5, 6]), ("sglang_instances[1].gpus", "instances.gpus")),
    (lambda i: i[1].update(port=30001), ("sglang_instances[1].port", "instances.port")),
    (lambda i: i[1].update(gpus=[6, 7, 8, 9]), ("sglang_instances[1].gpus", "instances.gpus")),
    (lambda i: i[1].update(gpus=[4, 4, 5, 6]), ("sglang_instances[1].gpus", "instances.gpus")),
    (lambda i: i[1].update(name="chat"), ("sglang_instances[1].name", "instances.name")),
    (lambda i: i[1].update(name="Code_1"), ("sglang_instances[1].name", "instances.name")),
    (lambda i: i[1].update(colour="blue"), ("sglang_instances[1].colour", "instances.key")),
    (lambda i: i[0]["args"].update(port=31000), ("sglang_instances[0].port", "instances.port")),
    (lambda i: i[0]["args"].update(tp_size=8), ("sglang_instances[0].args.tp_size", "parallel.gpus")),
    (lambda i: i[0].update(env={"CUDA_VISIBLE_DEVICES": "0"}), ("sglang_instances[0].env.CUDA_VISIBLE_DEVICES", "host.env")),
    (lambda i: i[0].update(model="../x"), ("sglang_instances[0].model", "input.model_path")),
])
def test_problems_name_the_instance_variable(change: Any, expected: tuple[str, str]) -> None:
    host = two()
    change(host["sglang_instances"])
    assert expected in errors(host), errors(host)


def test_an_instance_without_gpus_uses_base_gpu_id_and_overlaps_are_found() -> None:
    host = two()
    del host["sglang_instances"][1]["gpus"]
    host["sglang_instances"][1]["args"]["base_gpu_id"] = 4
    assert plan(host).ok and plan(host).instances[1].gpus == [4, 5, 6, 7]
    host["sglang_instances"][1]["args"]["base_gpu_id"] = 2
    assert ("sglang_instances[1].gpus", "instances.gpus") in errors(host)


def test_instances_and_a_multinode_group_or_shorthand_only_variables_do_not_mix() -> None:
    pair = {HOST: two(sglang_multinode_group="pair"), "blackwell-02": two(sglang_multinode_group="pair")}
    paired = plan_host(HOST, pair, {"all": list(pair), "pair": list(pair)}, role_defaults=ROLE_DEFAULTS)
    assert ("sglang_instances", "instances.multinode") in [(p.variable, p.rule) for p in paired.result().errors]
    assert ("sglang_gpus", "instances.shorthand") in errors(two(sglang_gpus=[0]))
    assert ("sglang_instances", "instances.list") in errors(host_with(sglang_instances=[]))
    assert ("sglang_instances[0]", "instances.entry") in errors(host_with(sglang_instances=["chat"]))


def test_cuda_visible_devices_is_the_role_s_in_the_shorthand_too() -> None:
    host = host_with(sglang_env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert ("sglang_env.CUDA_VISIBLE_DEVICES", "host.env") in errors(host)


def test_the_validate_task_reports_every_instance_and_names_it() -> None:
    result = run_action({HOST: two()})
    assert result["invalid_hosts"] == []
    assert [(i["name"], i["service"], i["gpus"]) for i in result["hosts"][HOST]["instances"]] == [
        ("chat", "sglang-chat", [0, 1, 2, 3]), ("code", "sglang-code", [4, 5, 6, 7])]
    bad = two()
    bad["sglang_instances"][0]["args"]["tp_size"] = 8
    text = report(run_action({HOST: bad}))
    assert "sglang_instances[0].args.tp_size" in text and "instance chat:" in text


def test_the_role_and_the_validate_task_have_the_same_plans_and_secrets_stay_out_of_the_report() -> None:
    host = two()
    host["sglang_instances"][1]["api_key"] = "s3cret-code-key"
    validated = run_action({HOST: host})["hosts"][HOST]["instances"]
    planned = instance_plans(HOST, {HOST: host}, {"all": [HOST]})
    assert [p["digest"] for p in planned] == [v["digest"] for v in validated]
    assert planned[1]["config"] == {"api-key": "s3cret-code-key"} and planned[0]["config"] == {}
    assert "s3cret" not in repr(validated)
    endpoints = server_instances(HOST, {HOST: {**host, "ansible_host": "10.0.0.7"}}, {"all": [HOST]})
    assert [(e["name"], e["url"], e["local_url"]) for e in endpoints] == [
        ("chat", "http://10.0.0.7:30001", "http://127.0.0.1:30001"), ("code", "http://10.0.0.7:30002", "http://127.0.0.1:30002")]


def test_each_instance_renders_its_own_unit_and_environment() -> None:
    rendered = render(two(), instance="code")
    argv = exec_start(rendered.unit)
    assert argv[argv.index("--port") + 1] == "30002" and argv[argv.index("--tp-size") + 1] == "4"
    allowed = [v.split()[0] for s, k, v in parse_unit(rendered.unit) if k == "DeviceAllow"]
    assert [d for d in allowed if d[11:].isdigit()] == ["/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7"]
    assert ("Service", "SyslogIdentifier", "sglang-code") in parse_unit(rendered.unit)
    assert 'CUDA_VISIBLE_DEVICES="4,5,6,7"' in rendered.env
    assert rendered.context["__sglang_server_last_good_dir"].strip() == "/etc/sglang/last-good-code"
    assert render(host_with()).context["__sglang_server_last_good_dir"].strip() == "/etc/sglang/last-good"


def test_staged_models_are_the_plans_model_directories() -> None:
    host = two()
    host["sglang_instances"].append({"name": "again", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0],
                                     "args": {"tp_size": 1}, "port": 30003})
    stages = staged_models(HOST, {HOST: host}, {"sglang_model_revision": "abc"})
    paths = {i.result.args["model_path"] for i in plan(two()).instances}
    assert [s["repo"] for s in stages] == ["Qwen/Qwen3-Next-80B-A3B-Instruct", "nvidia/Qwen3.5-397B-A17B-NVFP4"]
    assert {s["dir"] for s in stages} == paths and {s["revision"] for s in stages} == {"abc"}
    local = copy.deepcopy(host)
    local["sglang_instances"][0]["model"] = "/srv/models/chat"
    assert [s["repo"] for s in staged_models(HOST, {HOST: local})] == ["nvidia/Qwen3.5-397B-A17B-NVFP4", "Qwen/Qwen3-Next-80B-A3B-Instruct"]
    assert staged_models(HOST, {HOST: host}, {"sglang_model_download": False}) == []


# --- gpu_holders: which process belongs to which instance -----------------------------------------------

_spec = importlib.util.spec_from_file_location(
    "gpu_holders", REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/gpu_holders.py")
gpu_holders = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(gpu_holders)  # type: ignore[union-attr]

PARAMS = {"allow": ["nvidia-persistenced"], "owner_unit": "sglang-chat.service", "sibling_units": ["sglang-code.service"],
          "owner_devices": ["/dev/nvidia0", "/dev/nvidia1"], "owner_user": "sglang", "title_prefixes": ["sglang::"]}


def holder(devices: list[str], user: str = "sglang", cgroup: str = "0::/system.slice/stray.service",
           name: str = "python3", cmdline: str = "python3 -m x") -> dict[str, Any]:
    return {"pid": 1, "name": name, "exe": name, "user": user, "cmdline": cmdline, "cgroup": cgroup, "devices": devices}


@pytest.mark.parametrize(("who", "kind"), [
    (holder(["/dev/nvidia5"], cgroup="0::/system.slice/sglang-chat.service"), "ours"),  # its cgroup decides
    (holder(["/dev/nvidia0"], cgroup="0::/system.slice/sglang-code.service"), "sibling"),  # never touched
    (holder(["/dev/nvidia0", "/dev/nvidiactl"]), "ours"),  # a leftover of the service user on our GPU
    (holder(["/dev/nvidia5"]), "sibling"),  # the service user on another instance's GPU
    (holder(["/dev/nvidia1"], user="nobody", name="sglang::schedul", cmdline="sglang::scheduler_TP0"), "ours"),
    (holder(["/dev/nvidia1"], user="alice"), "foreign"),  # in our way: fails the host
    (holder(["/dev/nvidia6"], user="alice"), "other"),  # not in our way: listed only
    (holder(["/dev/nvidia0"], user="root", name="nvidia-persistenced"), "allowed"),
])
def test_gpu_holders_sorts_processes_by_instance(who: dict[str, Any], kind: str) -> None:
    assert gpu_holders.classify(who, PARAMS) == kind


def test_gpu_holders_without_instance_devices_keeps_the_one_instance_rules() -> None:
    params = {**PARAMS, "owner_devices": [], "sibling_units": []}
    assert gpu_holders.classify(holder(["/dev/nvidia5"]), params) == "ours"
    assert gpu_holders.classify(holder(["/dev/nvidiactl"], user="alice"), params) == "foreign"


@pytest.mark.parametrize(("hostvars", "found", "current"), [
    (host_with(), ["/etc/sglang/last-good/venv"], ["sglang"]),
    (host_with(), [], []),
    (two(), ["/etc/sglang/last-good-code/venv"], ["code"]),
    (two(), ["/etc/sglang/last-good/venv", "/etc/sglang/last-good-chat/venv"], ["chat"]),
])
def test_instances_that_started_from_the_current_virtualenv(hostvars: dict[str, Any], found: list[str],
                                                            current: list[str]) -> None:
    """install.yml's server_state: the last-good*/venv records naming the current virtualenv -> instance names."""
    from rendering import _VARS, _evaluate, jinja_env, role_context

    context = role_context(hostvars)
    context["__sglang_server_state"] = {"venv_records": found}
    env = jinja_env()
    env.filters["basename"] = lambda p: p.rsplit("/", 1)[-1]
    env.filters["dirname"] = lambda p: p.rsplit("/", 1)[0]
    env.filters["regex_replace"] = lambda text, pattern, repl: __import__("re").sub(pattern, repl, text)
    assert _evaluate(env, _VARS["__sglang_server_venv_current"], context) == current


def facts(minors: list[int], **extra: Any) -> dict[str, Any]:
    """Gathered facts (plugins/modules/gpu_facts.py) of an RTX PRO 6000 host whose GPU k has device minor minors[k]."""
    gpus = [{"index": k, "uuid": f"GPU-{k:08d}-aaaa", "bus_id": f"0000:{0x18 + k:02x}:00.0", "minor": m,
             "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_capability": "12.0", "memory_mib": 97887}
            for k, m in enumerate(minors)]
    pairs = {f"{a},{b}": "NODE" for a in range(len(minors)) for b in range(a + 1, len(minors))}
    return {"schema": 1, "driver_loaded": True, "driver_version": "580.95.05", "cuda_version": "13.0", "gpus": gpus,
            "gpu_count": len(gpus), "compute_capabilities": ["12.0"],
            "topology": {"links": pairs, "p2p_read": {k: "OK" for k in pairs}, "nvlink": False}, "iommu": "off",
            "nvswitch_pci": [], "nvswitch_devices": [], "infiniband_devices": ["/dev/infiniband/uverbs0"],
            "imex_channels": [], "os": {"id": "debian", "version_id": "12", "codename": "bookworm"},
            "python": {"path": "/usr/bin/python3", "version": "3.11.2", "headers": True}, "compilers": {"cc": "/usr/bin/gcc"},
            **extra}


SHUFFLED = [2, 0, 3, 1, 6, 4, 7, 5]


def test_with_facts_gpus_are_pinned_by_uuid_and_allowed_by_device_minor() -> None:
    host = two(nvidia_gpu_facts=facts(SHUFFLED))
    result = plan(host)
    assert result.ok, result.result().errors
    chat, code = result.instances
    assert code.binding == {"cuda_visible_devices": "GPU-00000004-aaaa,GPU-00000005-aaaa,GPU-00000006-aaaa,GPU-00000007-aaaa",
                            "devices": ["/dev/nvidia6", "/dev/nvidia4", "/dev/nvidia7", "/dev/nvidia5"],
                            "extra_devices": [], "source": "facts"}
    # Facts do not change what was validated: the digests are those of a run that never gathered them.
    assert [i.public()["digest"] for i in result.instances] == [i.public()["digest"] for i in plan(two()).instances]
    rendered = render(host, instance="code")
    allowed = [v.split()[0] for s, k, v in parse_unit(rendered.unit) if k == "DeviceAllow"]
    assert [d for d in allowed if d[11:].isdigit()] == ["/dev/nvidia6", "/dev/nvidia4", "/dev/nvidia7", "/dev/nvidia5"]
    assert 'CUDA_VISIBLE_DEVICES="GPU-00000004-aaaa,GPU-00000005-aaaa,GPU-00000006-aaaa,GPU-00000007-aaaa"' in rendered.env
    assert rendered.context["__sglang_server_gpu_devices"] == ["/dev/nvidia6", "/dev/nvidia4", "/dev/nvidia7", "/dev/nvidia5"]


def test_a_gpu_the_gathered_facts_lack_is_refused() -> None:
    host = two()
    host["nvidia_gpu_facts"] = facts(SHUFFLED[:6], gpu_count=6)
    host["nvidia_gpu_count"] = 6
    host["sglang_instances"][1]["gpus"] = [4, 5]
    host["sglang_instances"][1]["args"]["tp_size"] = 2
    host["sglang_instances"][1]["args"]["mem_fraction_static"] = None  # 0.85 of a GPU is less than half the 397B (hardware.fit)
    assert plan(host).ok
    host["nvidia_gpu_count"] = 8  # declared 8: the instance may list GPU 6, which the host does not have
    host["sglang_instances"][1]["gpus"] = [6, 7]
    found = [(p.variable, p.rule) for p in plan(host).result().errors]
    assert ("sglang_instances[1].gpus", "host.facts") in found
    assert ("nvidia_gpu_count", "host.facts") in found  # the host's count, though each instance sees only its GPUs


def test_a_multinode_instance_may_open_the_infiniband_and_imex_nodes_a_single_node_one_may_not() -> None:
    one = plan(host_with(nvidia_gpu_facts=facts(list(range(8))))).instances[0]
    assert one.binding["extra_devices"] == [] and one.binding["devices"] == [f"/dev/nvidia{k}" for k in range(8)]
    node = {**host_with({"tp_size": 16}, nvidia_gpu_facts=facts(list(range(8)), imex_channels=["/dev/nvidia-caps-imex-channels/channel0"])),
            "sglang_multinode_group": "pair"}
    hostvars = {"p1": {**node, "ansible_host": "10.0.0.5"}, "p2": dict(node)}
    groups = {"all": ["p1", "p2"], "pair": ["p1", "p2"]}
    [second] = plan_host("p2", hostvars, groups, role_defaults=ROLE_DEFAULTS).instances
    assert second.result.ok, second.result.errors
    assert second.binding["extra_devices"] == ["/dev/infiniband/uverbs0", "/dev/nvidia-caps-imex-channels/channel0"]
    [full] = instance_plans("p2", hostvars, groups)
    assert full["binding"]["extra_devices"] == second.binding["extra_devices"] and "binding" not in second.public()


@pytest.mark.parametrize("hostvars", [host_with(), two()])
def test_server_state_looks_at_names_units_and_health_urls_only(hostvars: dict[str, Any]) -> None:
    """install.yml's server_state arguments: per instance its name, unit and health URL, nothing of the plan's secrets."""
    import ast

    from rendering import role_context

    context = role_context(hostvars)
    plans = context["__sglang_server_plans"]
    looked = context["__sglang_server_state_instances"]
    looked = ast.literal_eval(looked) if isinstance(looked, str) else looked  # Ansible gives the list itself
    assert looked == [{"name": p["name"], "unit": f"{p['service']}.service",
                       "url": f"{p['endpoint']['local_url']}{context['sglang_server_ready_path']}",
                       "ca_path": p["endpoint"].get("ca_file") or ""} for p in plans]


# An instance's unit is <service>-<name>: the pair must not land on a service the server may not take.
_RESERVED_SPLITS = sorted({(unit[:i], unit[i + 1:]) for unit in RESERVED_SERVICE_NAMES
                           for i, c in enumerate(unit) if c == "-"})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.sampled_from(_RESERVED_SPLITS),
                 st.tuples(st.sampled_from(["sglang", "llm", "nvidia", "nvidia-dcgm"]),
                           st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?", fullmatch=True))))
@example(("sglang", "router"))
@example(("sglang", "model-peer"))
@example(("nvidia", "persistenced"))
def test_an_instance_never_takes_a_reserved_unit_name(pair: tuple[str, str]) -> None:
    service, name = pair
    host = two(sglang_server_service_name=service)
    host["sglang_instances"][1]["name"] = name
    unit = f"{service}-{name}"
    found = errors(host)
    if unit in RESERVED_SERVICE_NAMES:
        assert ("sglang_instances[1].name", "instances.name") in found, found
        assert unit not in [i.service for i in plan(host).instances]
    elif service in RESERVED_SERVICE_NAMES or not service.startswith("sglang"):
        # prometheus-node-exporter's split, or a name outside the project's namespace: the service name is refused itself
        assert ("sglang_server_service_name", "input.role_var") in found, found
    elif name != "chat":
        assert not found, found
        assert [i.service for i in plan(host).instances] == [f"{service}-chat", unit]
