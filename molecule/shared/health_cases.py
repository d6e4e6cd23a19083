"""The GPU health gate (roles/gpu_health, playbooks/health.yml) on a simulated GPU host: shared cases.

A case takes a :class:`Target` - a running simulated host (tests/fixtures/simhost: a systemd container with the
fake nvidia-smi, reached with the docker connection) - injects a fault the way a real host would show it
(/etc/fake-nvidia/faults.json for nvidia-smi's values, ``logger -t kernel`` for a kernel Xid report, which
journald files under SYSLOG_IDENTIFIER=kernel as it does the kernel's own messages), runs playbooks/health.yml
and checks the verdict. Each case leaves the host as it found it (faults.json removed; Xid reports stay in the
journal, so the Xid cases come last and acknowledge theirs with gpu_health_xid_since).

Used by tests/integration/test_health_gate.py (one container of its own) and meant for a molecule verify test on
a scenario's container of the default hardware profile (rtxpro6000-8), e.g.::

    # molecule/<scenario>/tests/test_health_gate.py
    import pytest
    from health_cases import CASES, DockerTarget
    from simrun import REPO, scenario_host

    @pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
    def test_health_gate(case):
        case(DockerTarget(scenario_host(), REPO))
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class HealthRun:
    """What one run of playbooks/health.yml showed."""

    rc: int
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)   # host -> gpu_health_report
    failures: dict[str, str] = field(default_factory=dict)             # host -> message of its failed task
    summary: list[str] = field(default_factory=list)                   # the summary's lines
    warnings: dict[str, list[str]] = field(default_factory=dict)       # host -> printed warnings
    output: str = ""


def parse_json_run(stdout: str, rc: int) -> HealthRun:
    """A :class:`HealthRun` from ansible-playbook's ``json`` stdout callback output."""
    run = HealthRun(rc=rc, output=stdout)
    doc = json.loads(stdout[stdout.index("{"):])
    for play in doc.get("plays", []):
        for task in play.get("tasks", []):
            name = task["task"]["name"].rsplit(" : ", 1)[-1]   # "gpu_health : Summarise ..." -> "Summarise ..."
            for host, res in task.get("hosts", {}).items():
                report = (res.get("ansible_facts") or {}).get("gpu_health_report")
                if report is not None:
                    run.reports[host] = report
                if res.get("failed"):
                    run.failures[host] = str(res.get("msg", ""))
                elif name == "Summarise the GPU health gate of every host" and not res.get("skipped"):
                    run.summary = list(res.get("msg", []))
                elif name == "Print the warnings of the GPU health gate" and not res.get("skipped"):
                    run.warnings[host] = list(res.get("msg", []))
    return run


class Target:
    """A simulated GPU host the cases run against."""

    name: str

    def sh(self, script: str) -> str:
        """Run a shell script as root in the host; its stdout."""
        raise NotImplementedError

    def health(self, **extravars: Any) -> HealthRun:
        """Run playbooks/health.yml against the host."""
        raise NotImplementedError


class DockerTarget(Target):
    """A simulated host in a local container: commands through ``docker exec``, the playbook through the
    community.docker.docker connection with the project's ansible.cfg."""

    def __init__(self, name: str, repo: Path) -> None:
        self.name = name
        self.repo = repo
        self.inventory = Path(tempfile.mkdtemp(prefix="health-inventory-"))
        (self.inventory / "hosts.yml").write_text(json.dumps({"all": {
            "children": {"sglang_servers": {"hosts": {name: {}}}},
            "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
        }}))

    def sh(self, script: str) -> str:
        proc = subprocess.run(["docker", "exec", self.name, "bash", "-c", script], capture_output=True, text=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"`{script}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def health(self, **extravars: Any) -> HealthRun:
        playbook = str(Path(sys.executable).parent / "ansible-playbook")
        argv = [playbook, "-i", str(self.inventory / "hosts.yml"), str(self.repo / "playbooks" / "health.yml")]
        if extravars:
            argv += ["-e", json.dumps(extravars)]
        env = {**os.environ, "ANSIBLE_CONFIG": str(self.repo / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json",
               "ANSIBLE_FORCE_COLOR": "0", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env, cwd=self.repo)
        try:
            return parse_json_run(proc.stdout, proc.returncode)
        except (ValueError, KeyError) as exc:
            raise AssertionError(f"health.yml output not understood ({exc}), rc {proc.returncode}:\n"
                                 f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}") from None


def gpu_bus(target: Target, index: int) -> str:
    """The bus id (0000:21:00.0) nvidia-smi gives GPU ``index`` of the host."""
    out = target.sh(f"nvidia-smi -i {index} --query-gpu=pci.bus_id --format=csv,noheader")
    domain, rest = out.strip().lower().split(":", 1)
    return f"{domain[-4:]}:{rest}"


def log_kernel(target: Target, message: str) -> None:
    """A kernel log line as the real kernel's are filed (SYSLOG_IDENTIFIER=kernel), waiting until journald has it."""
    target.sh(f"logger -t kernel {json.dumps(message)} && for i in $(seq 50); do journalctl --boot=0 "
              f"SYSLOG_IDENTIFIER=kernel --output=cat --no-pager --quiet | grep -qF {json.dumps(message)} && exit 0; "
              "sleep 0.1; done; exit 1")


def clear_faults(target: Target) -> None:
    target.sh("rm -f /etc/fake-nvidia/faults.json")


def now(target: Target) -> str:
    """The host's local time, as gpu_health_xid_since takes it."""
    return target.sh("date '+%Y-%m-%d %H:%M:%S'").strip()


# --- the cases ------------------------------------------------------------------------------------------------

def case_healthy_idle_host_passes(target: Target) -> None:
    """A healthy host passes, with its idle GPUs' links at Gen1 on Gen5 x16 (the default hardware profile,
    rtxpro6000-8): a generation that drops at idle is no problem. GPUs a process holds run at Gen5."""
    clear_faults(target)
    busy = set(target.sh("nvidia-smi --query-compute-apps=gpu_bus_id --format=csv,noheader").split())
    links = [line.split(", ") for line in target.sh(
        "nvidia-smi --query-gpu=pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
        "pcie.link.width.max --format=csv,noheader,nounits").splitlines()]
    assert all(rest[1:] == ["5", "16", "16"] for _, *rest in links), links
    assert all(cur == ("5" if bus in busy else "1") for bus, cur, *_ in links), links
    run = target.health()
    assert run.rc == 0, run.output[-3000:]
    report = run.reports[target.name]
    assert (report["healthy"], report["problems"]) == (True, []), report
    assert {"xid", "ecc", "remapped_rows", "pcie_width", "pcie_gen", "clocks", "persistence",
            "recovery_action"} <= set(report["checked"]), report["checked"]
    assert run.summary[0] == "1 of 1 host(s) passed the GPU health gate", run.summary
    assert target.name not in run.failures


def case_degraded_link_fails_naming_gpu_0(target: Target) -> None:
    """GPU 0's link trained at x8 of x16: the host fails, naming the host, GPU 0, the check and the fix."""
    target.sh("""echo '{"gpus": {"0": {"pcie.link.width.current": "8"}}}' > /etc/fake-nvidia/faults.json""")
    try:
        run = target.health()
    finally:
        clear_faults(target)
    assert run.rc != 0
    message = run.failures[target.name]
    bus = gpu_bus(target, 0)
    assert message.startswith(f"{target.name} failed the GPU health gate (1 problem(s)):"), message
    assert f"GPU 0 ({bus}) pcie_width: PCIe link is x8, the link's maximum is x16; fix: reseat the GPU" in message
    assert [p["check"] for p in run.reports[target.name]["problems"]] == ["pcie_width"]
    assert run.summary == ["0 of 1 host(s) passed the GPU health gate", message], run.summary


def case_application_xid_only_warns(target: Target) -> None:
    """An application fault (Xid 13) on GPU 1 is printed as a warning; the host passes."""
    bus = gpu_bus(target, 1).rsplit(".", 1)[0]
    log_kernel(target, f"NVRM: Xid (PCI:{bus}): 13, pid=4242, name=python3, Graphics SM Warp Exception on "
                       "(GPC 0, TPC 1, SM 0): Out Of Range Address")
    run = target.health()
    assert run.rc == 0, run.output[-3000:]
    assert run.reports[target.name]["problems"] == []
    (warning,) = run.warnings[target.name]
    assert warning.startswith(f"GPU 1 ({gpu_bus(target, 1)}) xid: Xid 13 x1 this boot: pid=4242"), warning


def case_fatal_xid_fails_until_acknowledged(target: Target) -> None:
    """Xid 79 on GPU 1 fails the host naming the Xid; set gpu_health_xid_since after it (the repair) to pass."""
    bus = gpu_bus(target, 1).rsplit(".", 1)[0]
    log_kernel(target, f"NVRM: Xid (PCI:{bus}): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.")
    run = target.health()
    assert run.rc != 0
    message = run.failures[target.name]
    assert f"GPU 1 ({gpu_bus(target, 1)}) xid: Xid 79 x1 this boot: pid=1101234, name=nvc:[driver], GPU has fallen " \
           "off the bus.; fix: the GPU fell off the PCIe bus: power-cycle the host" in message, message
    time.sleep(1.1)
    repaired = now(target)
    time.sleep(1.1)
    run = target.health(gpu_health_xid_since=repaired)
    assert run.rc == 0 and run.reports[target.name]["healthy"], run.output[-3000:]


CASES: list[Callable[[Target], None]] = [
    case_healthy_idle_host_passes,
    case_degraded_link_fails_naming_gpu_0,
    case_application_xid_only_warns,
    case_fatal_xid_fails_until_acknowledged,
]
