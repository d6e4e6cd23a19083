"""roles/nvidia_driver stops before any package change when no apt source offers the pinned driver version.

One bare simulated host (tests/fixtures/simhost/bare: fake GPUs, no NVIDIA software, no network), its distribution's
apt sources dropped, the signed stand-in for NVIDIA's CUDA repository (tests/fixtures/aptrepo: 575.57.08 and
580.95.05) served inside it on 127.0.0.1:8080 as molecule/provision serves it. The role runs alone, through the
docker connection, and the cases run in file order on the same host:

1. the defaults on a host whose own sources carry no driver (the issue: nvidia_driver_repo_base_url "" and
   580.95.05): the host fails naming nvidia_driver_repo_base_url and the version, and no package changes;
2. the stand-in repository, a driver 575.57.08 installed and held, and nvidia_driver_version 580.99.99, which the
   repository lacks: the host fails naming the version, what the repository offers instead and where from; the
   installed driver and its holds stay as they were;
3. check mode (the holds taken off: check mode cannot release them for apt's simulation of the install) with
   580.95.05, which the repository has: the check passes; with 580.99.99 it fails as the real run does.

The check passing on a real version change (575.57.08 -> 580.95.05), and from an offline bundle, is
molecule/provision's (converge, then its version-change and offline-bundle tests).
Needs Docker (skipped without a reachable engine; tests/fixtures/simhost/ensure-docker.sh sets one up); builds the
bare image and the stand-in repository when missing (both cached). The container is removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ansible_runner
import pytest

REPO = Path(__file__).resolve().parents[2]
SIMHOST = REPO / "tests/fixtures/simhost"
APTREPO = REPO / "build/aptrepo"
FIXTURE_REPO = "http://127.0.0.1:8080/cuda/repos"
OLD = "575.57.08"
# The 575 driver as apt would install it from the stand-in repository (nvidia-driver-cuda's dependencies at its
# version), plus the headers its DKMS package builds against.
OLD_DRIVER_DEBS = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced", "libcuda1",
                   "libnvidia-ml1", "libnvidia-gpucomp"]
CHECK = "Stop when no apt source offers the pinned driver version"
# The tasks that change packages or holds, all after the check.
CHANGES = ("Release the holds on the installed driver packages", "Install the packages for the running kernel",
           "Install the pinned driver packages", "Remove the old branch and the proprietary flavour",
           "Hold the pinned driver packages")
PLAYBOOK = """\
- name: The driver alone
  hosts: sglang_servers
  become: true
  roles:
    - role: nvidia_driver
"""
BASE_VARS: dict[str, Any] = {
    "nvidia_gpu_count": 8,
    "nvidia_gpu_compute_capability": "12.0",
    "nvidia_driver_reboot": "never",
}
FIXTURE_VARS: dict[str, Any] = {
    **BASE_VARS,
    "nvidia_driver_repo_base_url": FIXTURE_REPO,
    "nvidia_driver_repo_key_url": "{{ nvidia_driver_repo_url }}fixture-archive-key.pub",
}


def docker_available() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True,
                                                                 check=False).returncode == 0


pytestmark = pytest.mark.skipif(not docker_available(), reason="no Docker engine (tests/fixtures/simhost/ensure-docker.sh)")


class Host:
    def __init__(self, name: str, inventory: Path) -> None:
        self.name = name
        self.inventory = inventory

    def sh(self, script: str, timeout: float = 180) -> str:
        proc = subprocess.run(["docker", "exec", self.name, "bash", "-c", script], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"`{script}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def state(self) -> tuple[str, str]:
        """Every package with its status and version, and the held ones: what the failed runs must not touch."""
        return (self.sh(r"dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n'"),
                self.sh("apt-mark showhold"))


class Run:
    def __init__(self, runner: ansible_runner.Runner) -> None:
        self.rc = runner.rc
        self.events = list(runner.events)
        self.stdout = runner.stdout.read()

    def results(self, task: str) -> list[dict[str, Any]]:
        return [{**e["event_data"], "event": e["event"]} for e in self.events
                if e["event"].startswith("runner_on_") and e["event"] != "runner_on_start"
                and e["event_data"].get("task") == task]

    def failures(self) -> list[str]:
        return [f"{e['event_data'].get('task')}: {e['event_data'].get('res', {}).get('msg', '')}"
                for e in self.events if e["event"] == "runner_on_failed" and not e["event_data"].get("ignore_errors")]

    def ran(self, task: str) -> bool:
        return any(r["event"] in ("runner_on_ok", "runner_on_failed") for r in self.results(task))


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    subprocess.run([str(SIMHOST / "build-bare-image.sh")], check=True, timeout=900)
    subprocess.run([str(REPO / "tests/fixtures/aptrepo/build-aptrepo.sh")], check=True, timeout=600)
    name = f"bsa-drvsrc-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SIMHOST_IMAGE": "bsa-simhost-bare:latest"}
    subprocess.run([str(SIMHOST / "simhost.sh"), "up", name, "--", "--network", "none"], check=True, timeout=240, env=env)
    try:
        inventory = tmp_path_factory.mktemp("inventory")
        (inventory / "hosts.yml").write_text(json.dumps({"all": {
            "children": {"sglang_servers": {"hosts": {name: {}}}},
            "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
        }}))
        h = Host(name, inventory)
        subprocess.run(["docker", "exec", name, "mkdir", "-p", "/srv/fixtures"], check=True)
        subprocess.run(["docker", "cp", str(APTREPO), f"{name}:/srv/fixtures/aptrepo"], check=True, timeout=120)
        # As molecule/provision/fixtures.yml: the stand-in repository on 127.0.0.1:8080, no distribution sources.
        h.sh("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list"
             " && systemd-run --unit bsa-fixture-aptrepo /usr/bin/python3 -m http.server 8080 --bind 127.0.0.1"
             " --directory /srv/fixtures/aptrepo >/dev/null"
             " && for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8080))'"
             " 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
        yield h
    finally:
        subprocess.run([str(SIMHOST / "simhost.sh"), "down", name], check=False, timeout=120)


def play(host: Host, tmp_path: Path, check: bool = False, **extravars: Any) -> Run:
    private = tmp_path / f"runner-{time.monotonic_ns()}"
    private.mkdir()
    (private / "driver.yml").write_text(PLAYBOOK)
    runner = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(private / "driver.yml"),
        inventory=str(host.inventory / "hosts.yml"),
        extravars=extravars,
        cmdline="--check" if check else None,
        envvars={
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_GATHERING": "explicit",
            "ANSIBLE_FORCE_COLOR": "0",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
        quiet=True,
        timeout=600,
    )
    return Run(runner)


def only_failure(run: Run) -> str:
    """The one failure of a run, which must be the source check's; printed, as a user would read it."""
    failures = run.failures()
    assert run.rc != 0 and len(failures) == 1, (run.rc, failures, run.stdout[-4000:])
    assert failures[0].startswith(f"{CHECK}: "), failures
    print(failures[0])
    return failures[0].removeprefix(f"{CHECK}: ")


def test_the_defaults_on_a_host_without_a_driver_source_fail_naming_the_variable(host: Host, tmp_path: Path) -> None:
    before = host.state()
    run = play(host, tmp_path, **BASE_VARS)
    message = only_failure(run)
    for words in (f"{host.name}: no apt source of this host offers NVIDIA driver 580.95.05",
                  "nvidia-driver-cuda no version at all; nvidia-kernel-open-dkms no version at all",
                  'nvidia_driver_repo_base_url is "" (the default), so no repository was added',
                  "Fix: set nvidia_driver_repo_base_url",
                  "the compute/cuda/repos directory of NVIDIA's download server",
                  "<base>/debian12/x86_64/",
                  "or set nvidia_driver_version to a version the sources offer",
                  "No driver package was installed, removed or released from its hold."):
        assert words in message, (words, message)
    assert not [t for t in CHANGES if run.ran(t)]
    assert host.state() == before
    assert "linux-headers" not in before[0] and "nvidia" not in before[0]


def test_a_repository_without_the_version_changes_no_package_nor_hold(host: Host, tmp_path: Path) -> None:
    # A host on the older driver, held as the role holds it.
    debs = " ".join(f"/srv/fixtures/aptrepo/cuda/repos/debian12/x86_64/{p}_{OLD}-1_amd64.deb" for p in OLD_DRIVER_DEBS)
    host.sh(f"DEBIAN_FRONTEND=noninteractive dpkg -i /srv/fixtures/aptrepo/cuda/repos/debian12/x86_64/linux-headers-*.deb"
            f" {debs} >/dev/null && apt-mark hold {' '.join(OLD_DRIVER_DEBS)} >/dev/null")
    before = host.state()
    assert f"nvidia-driver-cuda {OLD}-1" in before[0] and "nvidia-kernel-open-dkms" in before[1]

    run = play(host, tmp_path, **FIXTURE_VARS, nvidia_driver_version="580.99.99")
    message = only_failure(run)
    for words in (f"{host.name}: no apt source of this host offers NVIDIA driver 580.99.99 (nvidia_driver_version)"
                  " for nvidia-driver-cuda, nvidia-kernel-open-dkms, so it cannot be installed.",
                  f"nvidia-driver-cuda 580.95.05-1, {OLD}-1; nvidia-kernel-open-dkms 580.95.05-1, {OLD}-1",
                  f"(from {FIXTURE_REPO}/debian12/x86_64)",
                  f"The driver's repository is {FIXTURE_REPO}/debian12/x86_64/ (nvidia_driver_repo_base_url: {FIXTURE_REPO})",
                  "Fix: set nvidia_driver_repo_base_url",
                  "No driver package was installed, removed or released from its hold."):
        assert words in message, (words, message)
    # The repository was configured (before the check), nothing after it ran.
    assert "URIs: http://127.0.0.1:8080/cuda/repos/debian12/x86_64/" in host.sh("cat /etc/apt/sources.list.d/cuda.sources")
    assert not [t for t in CHANGES if run.ran(t)]
    assert host.state() == before


def test_check_mode_passes_a_version_the_repository_offers(host: Host, tmp_path: Path) -> None:
    # Unheld: check mode does not release the holds, so apt's simulation of the install would refuse held packages.
    host.sh(f"apt-mark unhold {' '.join(OLD_DRIVER_DEBS)} >/dev/null")
    before = host.state()
    run = play(host, tmp_path, check=True, **FIXTURE_VARS, nvidia_driver_version="580.95.05")
    assert run.rc == 0, (run.failures(), run.stdout[-4000:])
    [asked] = run.results("Ask apt which versions its sources offer of the driver packages")
    assert asked["event"] == "runner_on_ok" and "nvidia-driver-cuda | 580.95.05-1" in asked["res"]["stdout"]
    assert [r["event"] for r in run.results(CHECK)] == ["runner_on_skipped"]
    assert host.state() == before

    # And check mode reports a missing version as the real run does.
    run = play(host, tmp_path, check=True, **FIXTURE_VARS, nvidia_driver_version="580.99.99")
    assert "no apt source of this host offers NVIDIA driver 580.99.99" in only_failure(run)
    assert host.state() == before
