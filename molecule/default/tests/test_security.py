"""Hardening of the deployed service: systemd sandbox exposure and a canary secret that must stay secret."""

from __future__ import annotations

import re
from pathlib import Path

from simrun import final_failure, play

CANARY = "canary-4f1d9e7b2c"
HF_CANARY = "hf_canary_8a6c3e1f"
SECRET_FILES = {"/etc/sglang/sglang.yaml", "/etc/sglang/sglang.env",
                "/etc/sglang/last-good/config", "/etc/sglang/last-good/env",
                # the sglang role's token for model downloads, owned by the service user
                "/opt/sglang/models/.huggingface/token"}
# (owner, group, mode) a file holding a secret may have: root only, or readable by the service.
SECRET_MODES = {("root", "root", 0o600), ("root", "sglang", 0o640), ("sglang", "sglang", 0o600)}
# The driver and CUDA roles (the provision scenario's) never read either secret: deploy.yml skips them here, as the
# restart cases do, so the -vvv output is that of every role that handles a secret.
SKIP = "driver,cuda"


def test_systemd_exposure_is_at_most_2_5(host) -> None:
    out = host.check_output("systemd-analyze security sglang.service")
    exposure = float(re.search(r"Overall exposure level for sglang.service: ([0-9.]+)", out).group(1))
    print(f"systemd-analyze security sglang.service: {exposure}")
    assert exposure <= 2.5


def test_service_runs_unprivileged_with_a_closed_device_list(host) -> None:
    props = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show -p User -p NoNewPrivileges -p DevicePolicy -p CapabilityBoundingSet -p UMask sglang").splitlines())
    assert props["User"] == "sglang" and props["NoNewPrivileges"] == "yes"
    assert props["DevicePolicy"] == "closed" and props["CapabilityBoundingSet"] == "" and props["UMask"] == "0077"
    allowed = host.check_output("systemctl show -p DeviceAllow --value sglang")
    for node in ["/dev/nvidiactl", "/dev/nvidia-uvm"] + [f"/dev/nvidia{i}" for i in range(8)]:
        assert f"{node} rw" in allowed


def test_canary_secret_appears_only_in_the_secret_files(host, inventory: Path, tmp_path: Path) -> None:
    secrets = {"sglang_api_key": CANARY, "hf_token": HF_CANARY}
    plan = tmp_path / "plan"
    outputs = []
    try:
        for playbook, extra in (("deploy.yml", {}), ("restart.yml", {}), ("validate.yml", {"render_dir": str(plan)})):
            runner = play(inventory, tmp_path, playbook, verbosity=3, skip_tags=SKIP, **secrets, **extra)
            assert runner.rc == 0, runner.stdout.read()[-3000:]
            outputs.append(runner.stdout.read())
        for output in outputs:
            assert CANARY not in output and HF_CANARY not in output
        for path in plan.rglob("*"):
            if path.is_file():
                assert CANARY not in path.read_text() and HF_CANARY not in path.read_text(), path
        # The server requires the key now, and got it from the --config file.
        assert host.run("curl -fsS http://127.0.0.1:30000/v1/models").rc != 0
        assert host.run(f"curl -fsS -H 'Authorization: Bearer {CANARY}' http://127.0.0.1:30000/v1/models").rc == 0
        for secret in (CANARY, HF_CANARY):
            assert secret not in host.check_output("ps -eww -o args")
            assert secret not in host.check_output("systemctl show sglang")
            assert secret not in host.check_output("journalctl --no-pager -o cat")
            found = set(host.run(f"grep -rlF {secret} /etc /opt /usr/local /var/lib /var/cache /tmp /run").stdout.split())
            assert found and found <= SECRET_FILES, found
        for path in SECRET_FILES:
            secret_file = host.file(path)
            assert (secret_file.user, secret_file.group, secret_file.mode) in SECRET_MODES, path
    finally:
        restored = play(inventory, tmp_path, "deploy.yml", skip_tags=SKIP)
        assert restored.rc == 0, final_failure(restored)
