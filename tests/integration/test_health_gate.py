"""The GPU health gate for real: playbooks/health.yml against one simulated GPU host (tests/fixtures/simhost, the
default profile: 8x RTX PRO 6000 on PCIe Gen5 x16), through the docker connection.

The cases (molecule/shared/health_cases.py, shared with molecule): an idle host passes (its links idle at Gen1,
which is not flagged); a link at x8 in /etc/fake-nvidia/faults.json fails naming GPU 0 and pcie_width; an Xid 13
in the kernel log only warns; an Xid 79 fails naming it until gpu_health_xid_since acknowledges it.

Needs Docker (skipped without a reachable engine; tests/fixtures/simhost/ensure-docker.sh sets one up) and the
simulated host image (built here when missing, cached by content hash). On a 2-core machine, run it apart from
the molecule scenarios. The container is removed at the end.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SIMHOST = REPO / "tests/fixtures/simhost"
sys.path.insert(0, str(REPO / "molecule" / "shared"))

from health_cases import CASES, DockerTarget, Target  # noqa: E402


def docker_available() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True,
                                                                 check=False).returncode == 0


pytestmark = pytest.mark.skipif(not docker_available(), reason="no Docker engine (tests/fixtures/simhost/ensure-docker.sh)")


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    subprocess.run([str(SIMHOST / "build-image.sh")], check=True, timeout=900)
    name = f"bsa-healthtest-{uuid.uuid4().hex[:8]}"
    subprocess.run([str(SIMHOST / "simhost.sh"), "up", name], check=True, timeout=240)
    try:
        yield DockerTarget(name, REPO)
    finally:
        subprocess.run([str(SIMHOST / "simhost.sh"), "down", name], check=False, timeout=120)


@pytest.mark.parametrize("case", CASES, ids=[c.__name__.removeprefix("case_") for c in CASES])
def test_health_gate(target: Target, case: Callable[[Target], None]) -> None:
    case(target)
