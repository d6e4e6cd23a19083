"""The README's walk from inventory/sample to a host of one's own, its own commands, on a new simulated host.

Issue 33: a newcomer's walk from `inventory/sample` to a second simulated host follows only the README's steps. The
commands come from README.md itself, section "From the sample to your hosts" (its shell setup `. .venv/bin/activate`,
step 1's `cp -r`, step 5's ```sh block), as molecule/standalone takes the role READMEs' example playbooks from
the READMEs: a README edit that breaks the walk fails this test. They run in a temporary directory that holds the
repository (links to its parts; `inventory/` a real directory with a copy of the sample, so nothing is written into
the checkout) against a new simulated host (tests/fixtures/simhost, 8 fake RTX PRO 6000), removed at the end, also
on failure.

The copied inventory gets exactly what steps 2 to 4 tell a user to do (the host listed under sglang_servers with
its connection variables, host_vars/blackwell-01.yml renamed after it, the package sources), plus the differences
a simulated host cannot avoid, each as an inventory value with its reason (see `_edit_inventory`). Before step 5,
molecule/provision/fixtures.yml serves inside the container what the Internet serves a real host (NVIDIA's apt
repository, the package index as a wheelhouse, the Hugging Face Hub), as `make demo` does.

Every launch setting of the sample is kept (context_length included): the stand-in SGLang runs them all. About 5 to 9
minutes on the 2-core development machine under load, 4 of them deploy.yml's provisioning.
Needs Docker (skipped without a reachable engine; tests/fixtures/simhost/ensure-docker.sh sets one up).
Environment: BSA_WALK_HOST names the container (default bsa-walk-01).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SIMHOST = REPO / "tests/fixtures/simhost"
HOST = os.environ.get("BSA_WALK_HOST", "bsa-walk-01")
SECTION = "## From the sample to your hosts"
# What the repository holds that the walk may not see: the checkout's own inventories, caches and plans.
NOT_LINKED = {"inventory", "ansible.cfg", ".git", ".cache", ".pytest_cache", "plan", "render"}


def docker_available() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True,
                                                                 check=False).returncode == 0


pytestmark = pytest.mark.skipif(not docker_available(), reason="no Docker engine (tests/fixtures/simhost/ensure-docker.sh)")


def walk() -> tuple[str, str, str, list[str]]:
    """(the shell's setup, step 1's copy command, the inventory it makes, step 5's commands), read from the README."""
    text = README.read_text()
    parts = text.split("\n" + SECTION + "\n")
    assert len(parts) == 2, f"README.md: expected one section '{SECTION}'"
    section = re.split(r"^## ", parts[1], maxsplit=1, flags=re.MULTILINE)[0]
    setup = re.search(r"^(?!\d+\. ).*`(\. \.venv/bin/activate)`", section, re.MULTILINE)
    assert setup, "README.md: the walk no longer says how to get the project's Ansible (`. .venv/bin/activate`)"
    copy = re.search(r"^1\. .*?`(cp -r inventory/sample (inventory/[\w.-]+))`", section, re.MULTILINE)
    assert copy, "README.md: step 1 no longer copies inventory/sample with `cp -r inventory/sample inventory/NAME`"
    step5 = re.search(r"^5\. .*?^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert step5, "README.md: step 5 has no ```sh block"
    commands = [line for line in step5.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return setup.group(1), copy.group(1), copy.group(2), commands


def _edit_inventory(inventory: Path) -> None:
    """Steps 2 to 4 of the README on the copied sample, for the simulated host."""
    # Step 2: the host under sglang_servers with Ansible's connection variables. The one difference a simulated
    # host cannot avoid: it is a container, reached through the docker connection instead of SSH (ansible_host is
    # then the container's name; root needs no sudo password).
    (inventory / "hosts.yml").write_text(f"""\
---
all:
  children:
    sglang_servers:
      hosts:
        {HOST}:
          ansible_host: {HOST}
          ansible_user: root
          # Simulated host: a local container, not an SSH server.
          ansible_connection: community.docker.docker
""")
    # Step 3: host_vars/blackwell-01.yml renamed after the host. The sample's hardware (8 GPUs of compute
    # capability 12.0) is the simulated host's (simhost.sh --gpus 8, profile rtxpro6000-8), and its launch is kept.
    (inventory / "host_vars/blackwell-01.yml").rename(inventory / f"host_vars/{HOST}.yml")
    # Step 4: the package sources (the variables of the README's "Package sources"), here the local fixtures that
    # molecule/provision/fixtures.yml serves inside the container, as inventory/sim has them.
    with (inventory / "group_vars/all.yml").open("a") as f:
        f.write(f"""
# --- The simulated host's package sources (test_readme_walk.py) ---
# The signed stand-in for NVIDIA's CUDA apt repository, with its own key.
nvidia_driver_repo_base_url: http://127.0.0.1:8080/cuda/repos
nvidia_driver_repo_key_url: "{{{{ nvidia_driver_repo_url }}}}fixture-archive-key.pub"
# No package index: the wheelhouse of the stand-in SGLang (pure Python), uv and huggingface_hub, and its locks.
sglang_pip_no_index: true
sglang_pip_find_links:
  - /srv/wheelhouse
sglang_locks_dir: {REPO}/build/locks
# The stand-in Hugging Face Hub.
sglang_model_hf_endpoint: http://127.0.0.1:8081

# --- What a simulated host cannot do ---
# The wheelhouse has no torch (the stand-in SGLang needs none; a real torch needs a real GPU).
sglang_torch_requirement: ""
# A container cannot reboot (a real host may need to after the driver install).
nvidia_driver_reboot: never
""")


def _run(setup: str, cmd: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`cmd` in a shell set up as the README says (its virtualenv activated)."""
    start = time.monotonic()
    proc = subprocess.run(["bash", "-c", f"{setup}\n{cmd}"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    print(f"$ {cmd}  # rc {proc.returncode}, {time.monotonic() - start:.0f}s")
    return proc


def _tail(proc: subprocess.CompletedProcess, lines: int = 80) -> str:
    return "\n".join((proc.stdout + "\n" + proc.stderr).splitlines()[-lines:])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A directory that holds the repository with a new simulated host up; removes the host at the end."""
    subprocess.run([str(SIMHOST / "build-image.sh")], check=True, timeout=900)
    if not all((REPO / "build" / d).is_dir() for d in ("aptrepo", "wheelhouse", "locks")):
        subprocess.run([str(SIMHOST / "build-provision-fixtures.sh")], check=True, timeout=1800)
    root = tmp_path_factory.mktemp("walk")
    for entry in REPO.iterdir():
        if entry.name not in NOT_LINKED:
            (root / entry.name).symlink_to(entry)
    # A copy, not a link: Ansible resolves the configuration's relative paths (the fact cache) from its directory.
    shutil.copy(REPO / "ansible.cfg", root / "ansible.cfg")
    (root / "inventory").mkdir()
    shutil.copytree(REPO / "inventory/sample", root / "inventory/sample")
    # The newcomer's shell: no virtualenv active (the README's own setup activates the project's) and no Ansible
    # settings of the environment this test runs in. TMPDIR: fixtures.yml's archive, apart from other runs'.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).resolve() != (REPO / ".venv/bin").resolve())
    env.update(ANSIBLE_NOCOLOR="1", TMPDIR=str(root))
    try:
        subprocess.run([str(SIMHOST / "simhost.sh"), "up", HOST, "--gpus", "8"], check=True, timeout=300)
        yield root, env
    finally:
        subprocess.run([str(SIMHOST / "simhost.sh"), "down", HOST], check=False, timeout=120)


def test_the_readme_walk_deploys_a_new_simulated_host(site: tuple[Path, dict[str, str]]) -> None:
    root, env = site
    setup, copy, inventory, commands = walk()
    assert [re.sub(r"\s+#.*", "", c).split()[1:] for c in commands] == [
        ["-i", inventory, "playbooks/validate.yml"],
        ["-i", inventory, "playbooks/validate.yml", "-e", "render_dir=plan"],
        ["-i", inventory, "playbooks/deploy.yml"],
        ["-i", inventory, "playbooks/restart.yml", "-e", "spec=auto"],
    ], "README.md step 5 changed: update this test's assertions with it"
    validate, render, deploy, restart = commands

    proc = _run(setup, copy, root, env, 60)
    assert proc.returncode == 0, _tail(proc)
    _edit_inventory(root / inventory)

    # Not a README step: what the Internet serves a real host, served inside the container (as `make demo` does).
    proc = _run(setup, f"ansible-playbook -i {inventory} molecule/provision/fixtures.yml", root, env, 600)
    assert proc.returncode == 0, _tail(proc)

    proc = _run(setup, validate, root, env, 300)
    assert proc.returncode == 0, _tail(proc)
    # Readable: Ansible's own lines, the host valid in the recap, no traceback, nothing printed JSON-escaped.
    output = proc.stdout + proc.stderr
    assert re.search(rf"^{re.escape(HOST)}\s+: ok=[1-9]\d*\s.*\bfailed=0\b", proc.stdout, re.MULTILINE), _tail(proc)
    assert "Traceback" not in output and "\\n" not in output and "rejected" not in output, _tail(proc)

    proc = _run(setup, render, root, env, 300)
    assert proc.returncode == 0, _tail(proc)
    plan = root / "plan" / HOST
    assert list(plan.glob("*.service")), f"no unit in {plan}: {sorted(p.name for p in plan.glob('*'))}"

    proc = _run(setup, deploy, root, env, 3000)
    assert proc.returncode == 0, _tail(proc)

    proc = _run(setup, restart, root, env, 1200)
    assert proc.returncode == 0, _tail(proc)

    health = subprocess.run(["docker", "exec", HOST, "curl", "-fsS", "http://127.0.0.1:30000/health"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert health.returncode == 0, health.stderr
