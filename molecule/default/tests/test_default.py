"""Verify the default scenario: deploy.yml on one simulated Blackwell host."""

from __future__ import annotations

import json

SERVICE = "sglang"
UNIT = f"/etc/systemd/system/{SERVICE}.service"


def test_service_is_enabled_and_running(host) -> None:
    service = host.service(SERVICE)
    assert service.is_enabled
    assert service.is_running
    assert host.check_output(f"systemctl show -p User --value {SERVICE}") == "sglang"


def test_unit_renders_one_full_flag_per_line(host) -> None:
    unit = host.file(UNIT).content_string
    assert ("ExecStart=/opt/sglang/current/bin/python /usr/local/libexec/sglang/sglang-launch.py \\\n"
            "    --model-path /opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4 \\\n") in unit
    lines = unit.splitlines()
    for flag in ("    --tp-size 8", "    --speculative-algorithm NEXTN", "    --mamba-radix-cache-strategy extra_buffer"):
        assert flag in lines or f"{flag} \\" in lines, flag
    assert "KillMode=mixed" in unit
    assert "After=network-online.target nvidia-persistenced.service" in unit
    assert "--speculative-num-steps" not in unit


def test_unit_passes_systemd_analyze_verify(host) -> None:
    result = host.run(f"systemd-analyze verify {UNIT}")
    assert result.rc == 0, result.stderr


def test_environment_file_is_root_only(host) -> None:
    env = host.file(f"/etc/sglang/{SERVICE}.env")
    assert (env.user, env.group, env.mode) == ("root", "root", 0o600)
    assert 'NCCL_IB_DISABLE="1"' in env.content_string


def test_health_and_models_answer(host) -> None:
    assert host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health") == "200"
    models = json.loads(host.check_output("curl -fsS http://127.0.0.1:30000/v1/models"))
    assert [m["id"] for m in models["data"]] == ["qwen3.5-397b"]


def test_server_resolved_nextn_auto_choice(host) -> None:
    info = json.loads(host.check_output("curl -fsS http://127.0.0.1:30000/server_info"))
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (3, 1, 4)
    assert info["tp_size"] == 8


def _holders(host) -> set[int]:
    out = host.run("fuser /dev/nvidia[0-9]* 2>/dev/null").stdout
    return {int(p.rstrip("cemfr")) for p in out.split() if p.rstrip("cemfr").isdigit()}


def test_each_gpu_is_held_by_one_scheduler_and_nvidia_smi_agrees(host) -> None:
    pids = host.check_output("pgrep -f '^sglang::scheduler_TP'").split()
    assert len(pids) == 8
    apps = host.check_output("nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader")
    app_pids = {int(line.split(",")[0]) for line in apps.splitlines() if line.strip()}
    assert app_pids == {int(p) for p in pids}
    persistenced = int(host.check_output("systemctl show -p MainPID --value nvidia-persistenced"))
    assert _holders(host) == app_pids | {persistenced}


def test_nvidia_persistenced_still_runs(host) -> None:
    assert host.service("nvidia-persistenced").is_running


def test_current_venv_layout(host) -> None:
    current = host.file("/opt/sglang/current")
    assert current.is_symlink
    assert current.linked_to.startswith("/opt/sglang/venvs/0.5.23-")
    version = host.check_output("/opt/sglang/current/bin/python -c 'import importlib.metadata as m; print(m.version(\"sglang\"))'")
    assert version == "0.5.23"
