"""playbooks/validate.yml driven through ansible-runner: per-host events and stats, no SSH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "inventory" / "sample"
INCIDENT = {"speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}


def make_inventory(tmp_path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    """A copy of the sample inventory whose hosts get the sample host's vars plus per-host changes."""
    inv = tmp_path / "inventory"
    shutil.copytree(SAMPLE / "group_vars", inv / "group_vars")
    base = yaml.safe_load((SAMPLE / "host_vars" / "blackwell-01.yml").read_text())
    (inv / "host_vars").mkdir()
    for name, change in hosts.items():
        data = {**base, **{k: v for k, v in change.items() if k != "sglang_args"}}
        data["sglang_args"] = {**base["sglang_args"], **change.get("sglang_args", {})}
        (inv / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(data))
    (inv / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": {h: {} for h in hosts}}}}})
    )
    return inv


def run(tmp_path: Path, inventory: Path, **extravars: Any) -> ansible_runner.Runner:
    """Run validate.yml with the project's ansible.cfg; nothing on stdout."""
    private = tmp_path / "runner"
    private.mkdir(exist_ok=True)
    return ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(REPO / "playbooks" / "validate.yml"),
        inventory=str(inventory),
        extravars=extravars or None,
        envvars={
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            # The venv's ansible-playbook, also when the venv is not activated.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
        quiet=True,
    )


def task_results(runner: ansible_runner.Runner, task: str) -> list[dict[str, Any]]:
    """event_data of the runner_on_ok / runner_on_failed events of one task."""
    return [
        {**e["event_data"], "runner_event": e["event"]}
        for e in runner.events
        if e.get("event") in ("runner_on_ok", "runner_on_failed") and e["event_data"].get("task") == task
    ]


VALIDATE = "Validate every host's SGLang arguments against the pinned release"
STOP = "Stop when any host is invalid"


def test_sample_inventory_is_valid(tmp_path: Path) -> None:
    runner = run(tmp_path, SAMPLE)
    assert runner.rc == 0, runner.stdout.read()
    [event] = task_results(runner, VALIDATE)
    assert event["runner_event"] == "runner_on_ok"
    res = event["res"]
    assert res["invalid_hosts"] == []
    host = res["hosts"]["blackwell-01"]
    assert host["ok"] is True
    argv = host["argv"]
    assert argv[:2] == ["--model-path", "/opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4"]  # the staged copy
    assert argv[argv.index("--tp-size") + 1] == "8"
    assert "--speculative-num-steps" not in argv
    assert runner.stats["failures"] == {}


def test_incident_flags_are_rejected_naming_the_keys(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path, {"blackwell-01": {"sglang_args": INCIDENT}})
    runner = run(tmp_path, inv)
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    assert event["runner_event"] == "runner_on_ok"  # the machine-readable result; the stop is a task of its own
    res = event["res"]
    assert res["invalid_hosts"] == ["blackwell-01"]
    assert res["hosts"]["blackwell-01"]["errors"] == ["sglang_args.speculative_num_steps: spec.triple"]
    for words in ("speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_num_steps", "spec=auto",
                  "num_steps=3, eagle_topk=1, num_draft_tokens=4", "speculative_hook.py:1160"):
        assert words in res["report"]
    [stop] = task_results(runner, STOP)
    assert stop["runner_event"] == "runner_on_failed" and "rejected for 1 of 1 host(s): blackwell-01" in stop["res"]["msg"]
    assert "blackwell-01" in runner.stats["failures"]
    # The report is printed once: not again in the failure.
    assert runner.stdout.read().count("speculative_hook.py:1160") == 1


def test_spec_auto_accepts_the_incident_flags(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path, {"blackwell-01": {"sglang_args": INCIDENT}})
    runner = run(tmp_path, inv, spec="auto")
    assert runner.rc == 0, runner.stdout.read()
    [event] = task_results(runner, VALIDATE)
    argv = event["res"]["hosts"]["blackwell-01"]["argv"]
    assert not any(a.startswith(("--speculative-eagle-topk", "--speculative-num-draft-tokens")) for a in argv)
    assert "--speculative-algorithm" in argv


def test_every_host_is_reported_at_once(tmp_path: Path) -> None:
    inv = make_inventory(
        tmp_path,
        {
            "gpu-a": {},
            "gpu-b": {"sglang_args": {"tp_size": 16}},
            "gpu-c": {"sglang_args": {"attention_backend": "fa3", "mamba_scheduler_strategy": "extra_buffer"}},
            "gpu-d": {"nvidia_gpu_count": 4, "sglang_args": {"tp_size": 4}},
        },
    )
    runner = run(tmp_path, inv)
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    res = event["res"]
    assert sorted(res["invalid_hosts"]) == ["gpu-b", "gpu-c"]
    assert res["hosts"]["gpu-a"]["ok"] and res["hosts"]["gpu-d"]["ok"]
    assert res["hosts"]["gpu-b"]["errors"] == ["sglang_args.tp_size: parallel.gpus"]
    assert sorted(res["hosts"]["gpu-c"]["errors"]) == [
        "sglang_args.attention_backend: sm12x.attention",
        "sglang_args.mamba_scheduler_strategy: schema.renamed",
    ]
    # One readable block per bad host, none for the good ones.
    assert res["report"].count("error(s)") == 2
    assert "gpu-a:" not in res["report"]
    # The run stops before any other play: no host got further than validation.
    assert not [e for e in runner.events if e.get("event") == "runner_on_ok"
                and e["event_data"].get("task") not in (VALIDATE, "Report the problems found")]


def test_identical_problems_of_many_hosts_are_printed_once(tmp_path: Path) -> None:
    bad = {f"gpu-{i:03}": {"sglang_args": {"tp_size": 16}} for i in range(40)}
    inv = make_inventory(tmp_path, {**bad, "gpu-odd": {"sglang_args": {"attention_backend": "fa3"}}, "gpu-ok": {}})
    runner = run(tmp_path, inv)
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    res = event["res"]
    assert len(res["invalid_hosts"]) == 41 and res["hosts"]["gpu-007"]["errors"] == ["sglang_args.tp_size: parallel.gpus"]
    assert res["report"].startswith("40 hosts (gpu-000, gpu-001, gpu-002, gpu-003, gpu-004 and 35 more): 1 error(s)")
    assert "\ngpu-odd: 1 error(s)" in res["report"]
    out = runner.stdout.read()
    assert out.count("[parallel.gpus]") == 1 and out.count("[sm12x.attention]") == 1
    assert len(out.splitlines()) < 60, out


def test_render_dir_writes_a_plan_with_secrets_masked(tmp_path: Path) -> None:
    canary = "canary-secret-7f3a9"
    inv = make_inventory(tmp_path, {"gpu-a": {"sglang_api_key": canary, "hf_token": canary + "-hf",
                                              "sglang_env": {"WANDB_API_KEY": canary + "-env", "NCCL_IB_DISABLE": "1"}},
                                    "gpu-b": {}})
    plan = tmp_path / "plan"
    runner = run(tmp_path, inv, render_dir=str(plan))
    assert runner.rc == 0, runner.stdout.read()
    # Only its owner reads the plan.
    assert [p for p in plan.rglob("*") if p.stat().st_mode & 0o777 != (0o700 if p.is_dir() else 0o600)] == []
    assert plan.stat().st_mode & 0o777 == 0o700
    env = (plan / "gpu-a" / "sglang.env").read_text()
    assert 'NCCL_IB_DISABLE="1"' in env and "WANDB_API_KEY=\"<secret" in env and 'SGLANG_REDACT_ENV="HF_TOKEN,WANDB_API_KEY"' in env
    unit = (plan / "gpu-a" / "sglang.service").read_text()
    assert "--config /etc/sglang/sglang.yaml" in unit
    assert "--tp-size 8" in unit
    config = yaml.safe_load((plan / "gpu-a" / "sglang.yaml").read_text())
    assert set(config) == {"api-key"}
    assert "<secret" in config["api-key"]
    assert "--config" not in (plan / "gpu-b" / "sglang.service").read_text()
    for path in plan.rglob("*"):
        if path.is_file():
            assert canary not in path.read_text(), path
    assert canary not in runner.stdout.read()


def test_the_validate_task_renders_what_the_role_installs(tmp_path: Path) -> None:
    """The files the role would install (the one rendering function, sglang_files.server_files, with each host's
    plan and its own values of the role's settings over the role defaults, one of them a template): one-instance
    hosts (twins among them), secrets, several instances, a multi-node pair. A --config file only where the plan
    has secret arguments (as the role installs it)."""
    canary = "canary-secret-5d1c"
    base = yaml.safe_load((SAMPLE / "host_vars" / "blackwell-01.yml").read_text())
    instances = [
        {"name": "chat", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpus": [0, 1, 2, 3], "port": 30001,
         "args": {"tp_size": 4, "attention_backend": "triton", "speculative_algorithm": None, "quantization": None,
                  "moe_runner_backend": None, "mamba_radix_cache_strategy": None, "context_length": None,
                  "served_model_name": "chat"}},
        {"name": "code", "model": base["sglang_model_path"], "gpus": [4, 5, 6, 7], "port": 30002, "api_key": canary + "-code",
         "args": {"tp_size": 4, "served_model_name": "code"}},
    ]
    inv = make_inventory(tmp_path, {
        "gpu-a": {"sglang_api_key": canary, "hf_token": canary + "-hf",
                  "sglang_env": {"WANDB_API_KEY": canary + "-env", "NCCL_IB_DISABLE": "1"}},
        "gpu-b": {}, "gpu-c": {},
        "gpu-i": {"sglang_instances": instances, "hf_token": canary + "-hf2"},
        "gpu-u": {"sglang_server_user": "llm", "sglang_server_group": "llm", "sglang_server_service_name": "sglang-llm",
                  "base_etc": "/etc", "sglang_server_config_dir": "{{ base_etc }}/llm", "sglang_server_drain_timeout": 300},
        "gpu-m1": {"sglang_args": {"tp_size": 16}, "ansible_host": "10.1.2.3"}, "gpu-m2": {"sglang_args": {"tp_size": 16}},
    })
    (inv / "group_vars" / "pair.yml").write_text(yaml.safe_dump({"sglang_multinode_group": "pair", "sglang_multinode_port": 29500}))
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {
        "hosts": {h: {} for h in ("gpu-a", "gpu-b", "gpu-c", "gpu-i", "gpu-u")},
        "children": {"pair": {"hosts": {"gpu-m1": {}, "gpu-m2": {}}}}}}}}))
    ours = tmp_path / "ours"
    runner = run(tmp_path, inv, render_dir=str(ours))
    assert runner.rc == 0, runner.stdout.read()
    [event] = task_results(runner, VALIDATE)
    assert event["res"]["rendered"]["hosts"] == 7
    out = runner.stdout.read()

    def tree(root: Path) -> dict[str, tuple[int, bytes]]:  # the validate task also marks its render_dir as its own
        return {str(p.relative_to(root)): (p.stat().st_mode & 0o777, p.read_bytes() if p.is_file() else b"")
                for p in sorted(root.rglob("*")) if p.name != ".blackwell-sglang-plan"}

    mine = tree(ours)
    assert event["res"]["rendered"]["files"] == sum(1 for p in (ours).rglob("*.*") if p.is_file() and p.parent != ours)
    assert ours.stat().st_mode & 0o777 == 0o700
    assert all(mode == (0o700 if not data else 0o600) for mode, data in mine.values())
    # A --config file where the plan has secret arguments only (gpu-a: the API key; gpu-b: none).
    assert "gpu-a/sglang.yaml" in mine and "gpu-b/sglang.yaml" not in mine
    # gpu-u's own values win over the role defaults, its templated config dir resolved; the others keep the defaults.
    unit_u = (ours / "gpu-u" / "sglang-llm.service").read_text()
    assert "Group=llm" in unit_u and "TimeoutStopSec=300" in unit_u
    unit_b = (ours / "gpu-b" / "sglang.service").read_text()
    assert "User=sglang" in unit_b and "EnvironmentFile=/etc/sglang/sglang.env" in unit_b and "TimeoutStopSec=120" in unit_b
    assert {"gpu-i/sglang-chat.service", "gpu-i/sglang-code.yaml", "gpu-u/sglang-llm.env", "gpu-m2/sglang.service"} <= set(mine)
    assert "User=llm" in (ours / "gpu-u" / "sglang-llm.service").read_text()
    assert "EnvironmentFile=/etc/llm/sglang-llm.env" in (ours / "gpu-u" / "sglang-llm.service").read_text()
    assert "<secret" in (ours / "gpu-i" / "sglang-code.yaml").read_text()
    for _, (_, data) in mine.items():
        assert canary.encode() not in data
    assert canary not in out


@pytest.mark.parametrize("spec", ["bogus"])
def test_unknown_spec_mode_is_rejected(tmp_path: Path, spec: str) -> None:
    runner = run(tmp_path, SAMPLE, spec=spec)
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    assert "spec: spec.mode" in event["res"]["hosts"]["blackwell-01"]["errors"]


def pair_inventory(tmp_path: Path, **pair_vars: Any) -> Path:
    """gpu-a alone, and gpu-m1 + gpu-m2 as one multi-node instance (group pair, tp 16 over two 8-GPU hosts)."""
    inv = make_inventory(tmp_path, {"gpu-a": {}, "gpu-m1": {"sglang_args": {"tp_size": 16}, "ansible_host": "10.1.2.3"},
                                    "gpu-m2": {"sglang_args": {"tp_size": 16}}})
    (inv / "group_vars" / "pair.yml").write_text(yaml.safe_dump({"sglang_multinode_group": "pair", **pair_vars}))
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {
        "hosts": {"gpu-a": {}}, "children": {"pair": {"hosts": {"gpu-m1": {}, "gpu-m2": {}}}}}}}}))
    return inv


def test_a_multinode_group_renders_ranks_and_one_rendezvous(tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    runner = run(tmp_path, pair_inventory(tmp_path, sglang_multinode_port=29500), render_dir=str(plan))
    assert runner.rc == 0, runner.stdout.read()
    for rank, host in enumerate(("gpu-m1", "gpu-m2")):
        unit = (plan / host / "sglang.service").read_text()
        assert "--nnodes 2" in unit and f"--node-rank {rank}" in unit
        assert "--dist-init-addr 10.1.2.3:29500" in unit and "--tp-size 16" in unit
        assert "DeviceAllow=/dev/nvidia7 rw" in unit  # tp 16 over two nodes: GPUs 0-7 on each
    assert "--nnodes" not in (plan / "gpu-a" / "sglang.service").read_text()


def test_a_limit_to_part_of_a_multinode_group_is_refused(tmp_path: Path) -> None:
    inv = pair_inventory(tmp_path)
    private = tmp_path / "runner-limit"
    private.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(REPO), playbook=str(REPO / "playbooks" / "validate.yml"),
        inventory=str(inv), limit="gpu-a,gpu-m2", quiet=True,
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                 "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert runner.rc == 2
    [event] = task_results(runner, VALIDATE)
    assert event["res"]["invalid_hosts"] == ["gpu-m2"]
    assert "[multinode.partial]" in event["res"]["report"] and "--limit pair" in event["res"]["report"]


def test_a_relative_render_dir_is_taken_from_where_the_command_runs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(SAMPLE),
                           str(REPO / "playbooks" / "validate.yml"), "-e", "render_dir=plan"],
                          cwd=work, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (work / "plan" / "blackwell-01" / "sglang.service").is_file()
    assert not (REPO / "playbooks" / "plan").exists()


def test_a_misnamed_server_group_fails_naming_the_nearest_group(tmp_path: Path) -> None:
    """Issue 33: a misnamed group used to pass (every host planned with the defaults, every later play "no hosts
    matched"). It fails, naming the group, the nearest name and the switch; -e allow_no_servers=true lets it run."""
    inv = make_inventory(tmp_path, {"gpu-a": {}})
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_server": {"hosts": {"gpu-a": {}}}}}}))
    runner = run(tmp_path, inv)
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    msg = event["res"]["msg"]
    assert event["runner_event"] == "runner_on_failed"
    assert "sglang_servers is not in the inventory (did you mean sglang_server?)" in msg and "allow_no_servers" in msg, msg
    assert runner.stats["failures"] == {"gpu-a": 1}
    allowed = run(tmp_path, inv, allow_no_servers=True)
    assert allowed.rc == 0, allowed.stdout.read()


def test_an_empty_server_group_fails(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path, {"gpu-a": {}})
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {
        "sglang_servers": {"hosts": {}}, "gpus": {"hosts": {"gpu-a": {}}}}}}))
    runner = run(tmp_path, inv)
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    assert "sglang_servers is empty" in event["res"]["msg"], event["res"]["msg"]


def test_the_report_reads_as_lines_without_the_projects_ansible_cfg(tmp_path: Path) -> None:
    """Issue 33: outside the repository (no ansible.cfg: the default callback, JSON results) the report printed as one
    JSON-escaped string. The validate task prints it as plain lines on any callback."""
    inv = make_inventory(tmp_path, {"blackwell-01": {"sglang_args": INCIDENT}})
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), ANSIBLE_ROLES_PATH=str(REPO / "roles"),
               ANSIBLE_NOCOLOR="1", PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "validate.yml")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr  # the report goes to stderr: a json callback's stdout stays JSON
    assert proc.returncode != 0, out[-3000:]
    lines = out.splitlines()
    assert any(line.startswith("blackwell-01: 1 error(s)") for line in lines), out[-3000:]
    assert any("speculative_hook.py:1160" in line and "\\n" not in line for line in lines), out[-3000:]
    assert out.count("speculative_hook.py:1160") == 1, out[-3000:]


def test_a_json_callbacks_stdout_stays_json(tmp_path: Path) -> None:
    """The report printed as lines goes to stderr: with ANSIBLE_STDOUT_CALLBACK=json, stdout is one JSON document."""
    inv = make_inventory(tmp_path, {"blackwell-01": {"sglang_args": INCIDENT}})
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "validate.yml")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode != 0
    doc = json.loads(proc.stdout)
    assert doc["stats"]["blackwell-01"]["failures"] == 1
    assert "speculative_hook.py:1160" in proc.stderr
