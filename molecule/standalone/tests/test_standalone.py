"""What each role's README example left on the host, each run alone (molecule scenario `standalone`).

converge.yml ran nvidia_driver, cuda_toolkit, sglang_server, sglang and sglang_router, each from its
README's "Example playbook" in an ansible-playbook run of its own. These checks confirm that each run did its work,
not only that it passed; the extended tier (make molecule-extended) runs them all again and expects no change.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


# First, before any case below restarts the server. Out of make test (about 5 minutes of its budget): a second run of
# the same roles changes nothing in molecule default's idempotence step (deploy.yml), molecule monitoring's second run
# and test_fleet's second deploy.
@pytest.mark.extended  # a second run of the same roles: molecule default's idempotence step (above)
def test_a_second_run_of_every_readme_example_changes_nothing() -> None:
    """converge.yml again (each role's README example in its own ansible-playbook run): no run reports a change."""
    project = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "--inventory", os.environ["MOLECULE_INVENTORY_FILE"],
         str(project / "molecule" / "standalone" / "converge.yml")],
        # molecule's environment forces colour (ANSIBLE_FORCE_COLOR), which would wrap the recap in escape codes.
        capture_output=True, text=True, check=False, env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    recap = re.search(r"(?m)^localhost\s*:\s*ok=\d+\s+changed=(\d+)", done.stdout)
    assert recap and recap.group(1) == "0", done.stdout[-6000:]


def test_driver_installed_and_gpus_visible(host) -> None:
    assert host.file("/etc/apt/sources.list.d/cuda.sources").exists
    gpus = host.check_output("nvidia-smi --query-gpu=index --format=csv,noheader").splitlines()
    assert len(gpus) == 8


def test_cuda_toolkit_on_the_server_path(host) -> None:
    dropin = host.file("/etc/systemd/system/sglang.service.d/cuda-toolkit.conf")
    assert dropin.exists and "CUDA_HOME=/usr/local/cuda-13.0" in dropin.content_string


def test_server_account_and_service_without_roles_sglang_first(host) -> None:
    user = host.user("sglang")
    assert user.exists and user.shell == "/usr/sbin/nologin" and user.home == "/var/lib/sglang"
    assert host.service("sglang.service").is_running
    health = host.run("curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health")
    assert health.stdout == "200", health.stderr


def test_sglang_installed_and_model_staged(host) -> None:
    assert host.file("/opt/sglang/current").is_symlink
    assert host.file("/opt/sglang/current").linked_to.startswith("/opt/sglang/venvs/")
    marker = json.loads(host.file("/opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4/.sglang-model.json").content_string)
    assert marker["revision"] == "6b474d88cc6c488859bee6b954b12b3c84a9efe6"


def test_router_runs_in_front_of_the_server(host) -> None:
    assert host.service("sglang-router.service").is_running
    workers = host.check_output("curl -fsS http://127.0.0.1:30100/workers")
    assert "127.0.0.1:30000" in workers


def _bench(*names: str) -> None:
    """The named cases of molecule/shared/bench_cases.py against this scenario's host, in their file order."""
    import os
    import sys
    from pathlib import Path

    project = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
    sys.path.insert(0, str(project / "molecule" / "shared"))
    import bench_cases

    # The scenario's fixture settings, as every playbook run of it gets them (its router listens on 30100).
    bench_cases.run_all(Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent, "bsa-mol-standalone",
                        (project / "molecule" / "standalone" / "vars" / "fixtures.yml",),
                        tuple(case for case in bench_cases.CASES if case.__name__ in names))


def test_bench_candidates_restore_the_original_plan() -> None:
    """playbooks/bench.yml with spec_candidates on this host (molecule/shared/bench_cases.py): the table, the best
    candidate, the original plan back after the candidates and after a refused one."""
    _bench("case_candidates", "case_refused")


@pytest.mark.extended  # the original plan back after a candidate: the case above
def test_bench_restores_the_plan_after_a_forced_failure_and_a_plain_run_changes_nothing() -> None:
    """The original plan back after a forced failure; a plain run (no candidates) leaves the host's files as they were."""
    _bench("case_forced_failure", "case_plain_run_changes_nothing")
