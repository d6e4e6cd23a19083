"""Two SGLang instances on one simulated 8-GPU host (molecule scenario `default`, its last module).

The converge and test_restart left the one-instance shorthand (sglang.service, tp 8). The cases, in file order, give the
host two instances through ``sglang_instances`` (chat: tp 4 on GPUs 0-3, port 30001; code: tp 4 on GPUs
4-7, port 30002, another model), then change, restart, kill the leftovers of and roll back ``chat`` while
a client keeps sending requests to ``code``: ``code`` must lose no request and keep its PIDs throughout.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import simrun
import yaml
from simrun import failures, final_failure, task_result

FAST = {"sglang_server_ready_timeout": 60, "sglang_server_ready_poll_interval": 1, "sglang_server_ready_progress_every": 5}
CHAT_FAULTS = "/etc/sglang-standin/chat.env"
# The restart chain of a one-host instance stops, releases its GPUs and starts in this one task.
RELEASE = "Stop the server, release the GPUs it left behind, start it and wait for its health"


def instances(chat_args: dict[str, Any] | None = None, chat_env: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {"name": "chat", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0, 1, 2, 3], "port": 30001,
         "args": {"tp_size": 4, "attention_backend": "triton", "served_model_name": "chat", **(chat_args or {})},
         "env": {"SGLANG_STANDIN_FAULTS": CHAT_FAULTS, **(chat_env or {})}},
        {"name": "code", "model": "nvidia/Qwen3.5-397B-A17B-NVFP4", "gpus": [4, 5, 6, 7], "port": 30002,
         "args": {"tp_size": 4, "quantization": "modelopt_fp4", "moe_runner_backend": "flashinfer_cutlass",
                  "attention_backend": "triton", "mamba_radix_cache_strategy": "extra_buffer",
                  "speculative_algorithm": "NEXTN", "served_model_name": "code"}},
    ]


@pytest.fixture(scope="module")
def two(inventory: Path) -> Path:
    """The scenario's inventory with this host's own variables: common args, no shorthand model."""
    host = simrun.scenario_host()
    (inventory / "host_vars").mkdir(exist_ok=True)
    (inventory / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump({
        "sglang_args": {"enable_metrics": True, "mem_fraction_static": 0.85},
        "sglang_env": {"NCCL_IB_DISABLE": "1"},
    }))
    return inventory


def deploy(inventory: Path, tmp_path: Path, **extra: Any) -> Any:
    extra.setdefault("sglang_instances", instances())
    return simrun.play(inventory, tmp_path, "deploy.yml", skip_tags="driver,cuda", **{**FAST, **extra})


def main_pid(host, unit: str) -> int:
    return int(host.check_output(f"systemctl show -p MainPID --value {unit}"))


def tree(host, unit: str) -> set[int]:
    """Every PID in the unit's cgroup."""
    path = host.check_output(f"systemctl show -p ControlGroup --value {unit}")
    out = host.run(f"cat /sys/fs/cgroup{path}/cgroup.procs 2>/dev/null || cat /sys/fs/cgroup/systemd{path}/cgroup.procs").stdout
    return {int(p) for p in out.split()}


def holders(host, gpus: list[int]) -> set[int]:
    out = host.run("fuser " + " ".join(f"/dev/nvidia{g}" for g in gpus) + " 2>/dev/null").stdout
    return {int(p.rstrip("cemfr")) for p in out.split() if p.rstrip("cemfr").isdigit()}


def healthy(host, port: int) -> bool:
    return host.run(f"curl -fsS -o /dev/null http://127.0.0.1:{port}/health").rc == 0


@pytest.fixture
def traffic_to_code(host) -> Iterator[dict[str, int]]:
    """Chat completions to `code` every 50 ms during the case; the counts come back at the end."""
    script = ("ok=0; bad=0; while [ ! -e /tmp/stop-traffic ]; do "
              "if curl -fsS -m 5 -o /dev/null -H 'Content-Type: application/json' "
              "-d '{\"model\":\"code\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' "
              "http://127.0.0.1:30002/v1/chat/completions; then ok=$((ok+1)); else bad=$((bad+1)); fi; "
              "echo \"$ok $bad\" > /tmp/traffic.count; sleep 0.05; done")
    host.run("rm -f /tmp/stop-traffic /tmp/traffic.count")
    host.run(f"nohup sh -c '{script.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}' >/dev/null 2>&1 &")
    time.sleep(1)
    counts: dict[str, int] = {}
    yield counts
    host.run("touch /tmp/stop-traffic")
    time.sleep(0.5)
    ok, bad = (int(x) for x in host.check_output("cat /tmp/traffic.count").split())
    counts.update(ok=ok, bad=bad)
    assert ok > 0 and bad == 0, f"requests to code during the case: {ok} ok, {bad} failed"


def assert_instances_own_their_gpus(host) -> None:
    chat, code = tree(host, "sglang-chat.service"), tree(host, "sglang-code.service")
    persistenced = main_pid(host, "nvidia-persistenced")
    assert holders(host, [0, 1, 2, 3]) - {persistenced} <= chat and holders(host, [0, 1, 2, 3]) & chat
    assert holders(host, [4, 5, 6, 7]) - {persistenced} <= code and holders(host, [4, 5, 6, 7]) & code
    assert healthy(host, 30001) and healthy(host, 30002)


def test_the_shorthand_host_becomes_two_instances(host, two: Path, tmp_path: Path) -> None:
    assert host.service("sglang").is_running  # the converge's one instance
    host.run(f"touch {CHAT_FAULTS}")
    runner = deploy(two, tmp_path)
    assert runner.rc == 0, final_failure(runner)
    # The old unit held all eight GPUs: it is stopped and removed before the instances start.
    assert not host.file("/etc/systemd/system/sglang.service").exists
    assert host.run("systemctl is-active sglang.service").stdout.strip() != "active"
    uuids = dict(line.split(", ") for line in host.check_output("nvidia-smi --query-gpu=index,uuid --format=csv,noheader").splitlines())
    for unit, gpus, model in (("sglang-chat", "0,1,2,3", "chat"), ("sglang-code", "4,5,6,7", "code")):
        assert host.service(unit).is_running and host.service(unit).is_enabled
        env = host.file(f"/etc/sglang/{unit}.env").content_string
        pinned = ",".join(uuids[g] for g in gpus.split(","))  # by UUID, from the host's GPU facts
        assert f'CUDA_VISIBLE_DEVICES="{pinned}"' in env and 'CUDA_DEVICE_ORDER="PCI_BUS_ID"' in env
        unit_text = host.file(f"/etc/systemd/system/{unit}.service").content_string
        assert [f"/dev/nvidia{g}" for g in gpus.split(",")] == [
            line.split("=", 1)[1].split()[0] for line in unit_text.splitlines()
            if line.startswith("DeviceAllow=/dev/nvidia") and line.split("=", 1)[1].split()[0][11:].isdigit()]
        assert host.file(f"/etc/sglang/last-good-{unit.split('-')[1]}/unit").exists
        port = 30001 if model == "chat" else 30002
        models = json.loads(host.check_output(f"curl -fsS http://127.0.0.1:{port}/v1/models"))
        assert [m["id"] for m in models["data"]] == [model]
    assert_instances_own_their_gpus(host)
    # The plans the role installed are the ones the validate task reported (digests compared by the role).
    validated = task_result(runner, simrun.VALIDATE_TASK)["hosts"][simrun.scenario_host()]["instances"]
    assert [(i["name"], i["service"], i["gpus"]) for i in validated] == [
        ("chat", "sglang-chat", [0, 1, 2, 3]), ("code", "sglang-code", [4, 5, 6, 7])]


def test_a_second_deploy_changes_nothing(host, two: Path, tmp_path: Path) -> None:
    pids = main_pid(host, "sglang-chat"), main_pid(host, "sglang-code")
    runner = deploy(two, tmp_path)
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}
    assert (main_pid(host, "sglang-chat"), main_pid(host, "sglang-code")) == pids


def test_changing_one_instance_restarts_only_it(host, two: Path, tmp_path: Path, traffic_to_code: dict[str, int]) -> None:
    chat, code = main_pid(host, "sglang-chat"), tree(host, "sglang-code.service")
    runner = deploy(two, tmp_path, sglang_instances=instances(chat_args={"mem_fraction_static": 0.8}))
    assert runner.rc == 0, final_failure(runner)
    assert main_pid(host, "sglang-chat") != chat
    assert tree(host, "sglang-code.service") == code  # not one PID of the other instance changed
    assert json.loads(host.check_output("curl -fsS http://127.0.0.1:30001/server_info"))["mem_fraction_static"] == 0.8
    assert_instances_own_their_gpus(host)


@pytest.mark.extended  # one instance changed, the other untouched: the case above
def test_leftovers_of_one_instance_are_killed_and_the_other_is_untouched(host, two: Path, tmp_path: Path,
                                                                         traffic_to_code: dict[str, int]) -> None:
    # Schedulers left behind outside any unit (a server launched by hand), as the service user: one on
    # chat's GPU 0, one on code's GPU 5. Restarting chat kills the first and must not touch the second.
    for unit, gpu in (("stray-chat", 0), ("stray-code", 5)):
        host.run(f"systemd-run --unit={unit} -p User=sglang /bin/bash -c 'exec -a sglang::scheduler_TP0 sleep 600 < /dev/nvidia{gpu}'")
    time.sleep(1)
    stray_chat, stray_code = (main_pid(host, unit) for unit in ("stray-chat", "stray-code"))
    code = tree(host, "sglang-code.service")
    try:
        runner = deploy(two, tmp_path, sglang_instances=instances(chat_args={"mem_fraction_static": 0.75}))
        assert runner.rc == 0, final_failure(runner)
        released = task_result(runner, RELEASE)
        assert [h["pid"] for h in released["killed"]] == [stray_chat]
        assert {h["pid"]: h["kind"] for h in released["holders"]}[stray_code] == "sibling"
        assert host.run(f"test -d /proc/{stray_chat}").rc != 0
        assert host.run(f"test -d /proc/{stray_code}").rc == 0
        assert tree(host, "sglang-code.service") == code
    finally:
        host.run("systemctl stop stray-code stray-chat; systemctl reset-failed stray-code stray-chat")
    assert_instances_own_their_gpus(host)


@pytest.mark.extended  # the rollback: test_restart; one instance alone: the cases around it
def test_a_failed_change_of_one_instance_rolls_back_only_it(host, two: Path, tmp_path: Path,
                                                            traffic_to_code: dict[str, int]) -> None:
    chat_unit = host.file("/etc/systemd/system/sglang-chat.service").content_string
    code = tree(host, "sglang-code.service")
    host.run("printf 'EXIT_AT_START=1\\nLOAD_SECONDS=0\\n' > /etc/sglang-standin/chat-crash.env")
    runner = deploy(two, tmp_path, sglang_instances=instances(chat_args={"mem_fraction_static": 0.65},
                                                              chat_env={"SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/chat-crash.env"}))
    assert runner.rc != 0
    message = final_failure(runner)
    assert "sglang-chat" in message and "Rolled back to the last known good configuration" in message, message
    assert not [f for f in failures(runner) if "sglang-code" in json.dumps(f.get("res", {}))]
    assert host.file("/etc/systemd/system/sglang-chat.service").content_string == chat_unit
    assert tree(host, "sglang-code.service") == code
    assert_instances_own_their_gpus(host)


def test_restart_yml_restarts_only_the_named_instance(host, two: Path, tmp_path: Path,
                                                      traffic_to_code: dict[str, int]) -> None:
    host.run(f"rm -f {CHAT_FAULTS}; touch {CHAT_FAULTS}")
    chat, code = main_pid(host, "sglang-chat"), tree(host, "sglang-code.service")
    runner = simrun.play(two, tmp_path, "restart.yml", skip_tags="driver,cuda", rollout_instances="nope",
                         **{**FAST, "sglang_instances": instances(chat_args={"mem_fraction_static": 0.65})})
    assert runner.rc != 0 and "which no host of sglang_servers runs" in final_failure(runner)
    assert main_pid(host, "sglang-chat") == chat
    runner = simrun.play(two, tmp_path, "restart.yml", skip_tags="driver,cuda", rollout_instances="chat",
                         **{**FAST, "sglang_instances": instances(chat_args={"mem_fraction_static": 0.65})})
    assert runner.rc == 0, final_failure(runner)
    assert main_pid(host, "sglang-chat") != chat
    assert tree(host, "sglang-code.service") == code
    assert_instances_own_their_gpus(host)
