"""One simulated host per Blackwell host profile (molecule scenario `profiles`).

deploy.yml converged all four at once from inventory/host_vars: an HGX B200 (10.0, NVSwitch), a GB10 (12.1,
memory [N/A]), a 2-GPU PCIe box without P2P behind a translating IOMMU, and a 4-GPU host whose device minors
are not the nvidia-smi indices, with two instances. The expectations below come from the host itself
(nvidia-smi and /proc/driver/nvidia, which the profile file drives), never from the role's own files.

The simulated device nodes all share /dev/null's device number, so a device cgroup cannot tell them apart:
what the unit may open is read from systemd (the DeviceAllow= it programs into the unit's cgroup) and what
the server opened from the stand-in inside that cgroup, which resolves CUDA_VISIBLE_DEVICES as CUDA does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import simrun
import yaml
from simrun import final_failure

HERE = Path(__file__).resolve().parents[1]
# unit -> (port, nvidia-smi indices of its GPUs), per host
UNITS: dict[str, dict[str, tuple[int, list[int]]]] = {
    "bsa-mol-b200": {"sglang": (30000, list(range(8)))},
    "bsa-mol-gb10": {"sglang": (30000, [0])},
    "bsa-mol-pcie2": {"sglang": (30000, [0, 1])},
    "bsa-mol-shuffled": {"sglang-left": (30001, [0, 1]), "sglang-right": (30002, [2, 3])},
}
FAST = {"sglang_server_ready_timeout": 60, "sglang_server_ready_poll_interval": 1}


def name(host) -> str:
    return host.check_output("hostname")


def gpus(host) -> dict[int, tuple[str, int]]:
    """nvidia-smi index -> (UUID, device minor from the driver's information file)."""
    out: dict[int, tuple[str, int]] = {}
    for line in host.check_output("nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader").splitlines():
        index, uuid, bus = (f.strip() for f in line.split(","))
        domain, rest = bus.split(":", 1)
        info = host.file(f"/proc/driver/nvidia/gpus/{domain[-4:].lower()}:{rest.lower()}/information").content_string
        minor = re.search(r"^Device Minor:\s*(\d+)", info, re.MULTILINE)
        assert minor, info
        out[int(index)] = (uuid, int(minor.group(1)))
    return out


def units(host) -> dict[str, tuple[int, list[int]]]:
    return UNITS[name(host)]


def test_every_instance_serves(host) -> None:
    for unit, (port, _) in units(host).items():
        assert host.service(f"{unit}.service").is_running, unit
        code = host.run(f"curl -fsS -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/health").stdout
        assert code == "200", unit


def test_the_unit_allows_exactly_its_gpus_by_device_minor_and_names_them_by_uuid(host) -> None:
    table = gpus(host)
    for unit, (_, indices) in units(host).items():
        allowed = host.check_output(f"systemctl show -p DeviceAllow --value {unit}.service")
        nodes = sorted(int(m) for m in re.findall(r"/dev/nvidia(\d+) ", allowed + " "))
        assert nodes == sorted(table[i][1] for i in indices), (unit, allowed)
        env = host.file(f"/etc/sglang/{unit}.env").content_string
        uuids = ",".join(table[i][0] for i in indices)
        assert f'CUDA_VISIBLE_DEVICES="{uuids}"' in env, env


def test_the_server_opened_exactly_its_gpus_from_inside_its_cgroup(host) -> None:
    table = gpus(host)
    for unit, (port, indices) in units(host).items():
        report = json.loads(host.check_output(f"curl -fsS http://127.0.0.1:{port}/standin/devices"))
        assert report["cuda_visible_devices"] == ",".join(table[i][0] for i in indices)
        assert sorted(report["opened"].values()) == sorted(f"/dev/nvidia{table[i][1]}" for i in indices), report
        pids = host.check_output(f"systemctl show -p ControlGroup --value {unit}.service")
        assert pids and str(report["pid"]) in host.run(
            f"cat /sys/fs/cgroup{pids}/cgroup.procs /sys/fs/cgroup/systemd{pids}/cgroup.procs 2>/dev/null").stdout


def test_fabric_manager_only_where_an_nvswitch_is_on_the_bus(host) -> None:
    installed = host.run("dpkg-query -W -f '${Package} ${Status}\\n' 'nvidia-fabricmanager-*' nvlsm 2>/dev/null").stdout
    if name(host) == "bsa-mol-b200":
        assert host.service("nvidia-fabricmanager.service").is_running
        # fabric manager pinned and held (its want is "hold"); nvlsm for the NVLink 5 fabric (10.x, branch 580)
        assert "nvidia-fabricmanager-580 hold ok installed" in installed and "nvlsm install ok installed" in installed
    else:
        assert "ok installed" not in installed, installed


def test_the_host_has_the_toolchain_triton_compiles_with(host) -> None:
    assert host.run("gcc --version").rc == 0
    assert host.file(host.check_output("python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"include\"])'")
                     + "/Python.h").exists


# --- refused before anything changes: a run against one host, its running server untouched ---------------


@pytest.fixture
def one(tmp_path: Path, host) -> tuple[Path, str]:
    """An inventory with this host only: inventory/sim's group variables and the scenario's host_vars."""
    me = name(host)
    inventory = tmp_path / "inventory"
    shutil.copytree(simrun.REPO / "inventory" / "sim" / "group_vars", inventory / "group_vars")
    (inventory / "host_vars").mkdir()
    shutil.copy(HERE / "inventory" / "host_vars" / f"{me}.yml", inventory / "host_vars" / f"{me}.yml")
    (inventory / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": {"hosts": {me: {}}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    return inventory, me


def host_vars(inventory: Path, me: str) -> dict[str, Any]:
    return yaml.safe_load((inventory / "host_vars" / f"{me}.yml").read_text())


def pids(host) -> dict[str, str]:
    return {u: host.check_output(f"systemctl show -p MainPID --value {u}.service") for u in units(host)}


def test_nccl_p2p_behind_a_translating_iommu_is_refused_from_the_hosts_facts(host, one, tmp_path: Path) -> None:
    inventory, me = one
    if me != "bsa-mol-pcie2":
        pytest.skip("the PCIe box without P2P")
    before = pids(host)
    runner = simrun.play(inventory, tmp_path, "deploy.yml", sglang_env={}, **FAST)
    assert runner.rc != 0
    message = final_failure(runner)
    assert "sglang_env.NCCL_P2P_DISABLE" in message and "host.iommu" in message, message
    assert pids(host) == before


def test_a_declared_gpu_count_the_host_does_not_have_is_refused_naming_both(host, one, tmp_path: Path) -> None:
    inventory, me = one
    if me != "bsa-mol-shuffled":
        pytest.skip("the host with two instances")
    before = pids(host)
    # Without the driver role (whose verification would stop it first): the server role's own facts check.
    runner = simrun.play(inventory, tmp_path, "deploy.yml", skip_tags="driver,cuda", nvidia_gpu_count=8, **FAST)
    assert runner.rc != 0
    message = final_failure(runner)
    assert "nvidia_gpu_count=8 (inventory) but nvidia-smi on the host lists 4 GPU(s)" in message, message
    assert pids(host) == before
    runner = simrun.play(inventory, tmp_path, "deploy.yml", nvidia_gpu_count=8, **FAST)  # the whole deploy
    message = final_failure(runner)
    assert "nvidia-smi shows 4 GPU(s) (index 0, 1, 2, 3) but nvidia_gpu_count is 8" in message, message
    assert pids(host) == before


def test_a_model_directory_the_sandbox_hides_fails_the_preflight_not_the_start(host, one, tmp_path: Path) -> None:
    inventory, me = one
    if me != "bsa-mol-gb10":
        pytest.skip("the GB10 host")
    hidden = "/tmp/spark-model"  # PrivateTmp=yes: the service has a /tmp of its own
    host.run(f"mkdir -p {hidden} && cp /opt/sglang/models/{host_vars(inventory, me)['sglang_model_path']}/config.json {hidden}/")
    before = pids(host)
    record = host.file("/etc/sglang/sglang.spec.json").content_string
    try:
        runner = simrun.play(inventory, tmp_path, "deploy.yml", sglang_model_path=hidden, **FAST)
        assert runner.rc != 0
        failed = [e for e in simrun.failures(runner)]
        assert any("preflight" in str(e.get("task", "")).lower() for e in failed), [e.get("task") for e in failed]
        assert hidden in final_failure(runner) or any(hidden in json.dumps(e["res"]) for e in failed)
        assert pids(host) == before
        # The last known good files are back, the spec record of the running unit with them (not the refused plan's).
        assert host.file("/etc/sglang/sglang.spec.json").content_string == record
        assert host.run("curl -fsS -o /dev/null http://127.0.0.1:30000/health").rc == 0
    finally:
        host.run(f"rm -rf {hidden}")


# Out of make test (about 3 minutes of its budget): a second deploy.yml of the same roles changes nothing in molecule
# default's idempotence step and test_fleet's second deploy. What only B200 installs (roles/nvidia_driver/tasks/
# fabricmanager.yml) runs a second time only here. pytest runs this case after the host-parametrized ones (it groups
# those by host), so after the refusals above too: a refused deploy leaves the host as it was, last known good files and
# spec record put back, so nothing is left for this run to change either.
@pytest.mark.extended  # a second deploy.yml of the same roles: molecule default's idempotence step (above)
def test_a_second_deploy_on_every_profile_changes_nothing(tmp_path: Path) -> None:
    """deploy.yml again on the scenario's four hosts, as the converge ran it: changed=0 on every host."""
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    runner = simrun.play(inventory, tmp_path, "deploy.yml", diff=True, rollout_serial="100%")
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}, simrun.changes(runner)
