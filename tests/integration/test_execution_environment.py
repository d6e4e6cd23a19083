"""The execution environment for AWX / Ansible Automation Platform: `ansible-builder create` on the real file, and
the image built from it and run by ansible-runner.

``execution-environment.yml`` (top level) is copied beside a freshly built collection tarball, laid out as
``make ee`` lays it out (``build/ee/blackwell-sglang.tar.gz``), and ``ansible-builder create`` writes the build
context. The context must carry that tarball, install ansible-core and ansible-runner at requirements.txt's pins,
and ask for every collection galaxy.yml depends on with the same range; ansible-builder's introspection of the
installed tarball must find the Python packages and programs the collection declares for the control node.

The image (marked ``ee_image``; ``make ee-image`` builds it first, cached by content hash): no registry, Galaxy or
package index is reachable here, so tests/fixtures/ee/build_image.py derives a local variant of the same file (a
debootstrapped Debian base, a wheelhouse downloaded beforehand, the same tarball and pins) and runs
``ansible-builder build``. ansible-runner then runs a small project through the image (``--process-isolation
--process-isolation-executable docker --container-image``): its playbook imports ``blackwell.sglang.validate`` by
its fully qualified name, against a one-host inventory with a local connection, once valid and once with the
incident's speculative flags. Skipped without a Docker engine, except under CI=true, where that fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
BIN = Path(sys.executable).parent
SAMPLE = REPO / "inventory" / "sample"
BUILD_IMAGE = REPO / "tests" / "fixtures" / "ee" / "build_image.py"
INCIDENT = {"speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1, "speculative_num_steps": None}
# Where ansible-galaxy installs the collections in the image (the galaxy stage of ansible-builder's Containerfile).
EE_COLLECTIONS = "/usr/share/ansible/collections/ansible_collections"


def pins() -> dict[str, str]:
    """requirements.txt's ``name==version`` lines."""
    found = {}
    for line in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", line.strip())
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out as `make ee` leaves the repository: the EE file and build/ee/blackwell-sglang.tar.gz."""
    tmp = tmp_path_factory.mktemp("ee")
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "build_collection.py"), "--out", str(tmp / "dist"),
                           "--stage", str(tmp / "stage" / "ansible_collections" / "blackwell" / "sglang")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (tmp / "build" / "ee").mkdir(parents=True)
    shutil.copy(proc.stdout.strip(), tmp / "build" / "ee" / "blackwell-sglang.tar.gz")
    shutil.copy(REPO / "execution-environment.yml", tmp / "execution-environment.yml")
    return tmp


@pytest.fixture(scope="module")
def context(layout: Path) -> Path:
    proc = subprocess.run([str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context"],
                          cwd=layout, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return layout / "context"


def test_the_context_carries_the_collection_tarball(context: Path) -> None:
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text(encoding="utf-8"))
    with tarfile.open(context / "_build" / "collection" / "blackwell-sglang.tar.gz") as tar:
        info = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]  # type: ignore[arg-type]
    assert (info["namespace"], info["name"], info["version"]) == ("blackwell", "sglang", galaxy["version"])
    # The galaxy stage copies _build/ to /build: the requirement names the tarball where it lands.
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text(encoding="utf-8"))
    assert {"name": "/build/collection/blackwell-sglang.tar.gz", "type": "file"} in requirements["collections"]
    assert "COPY _build /build" in (context / "Dockerfile").read_text(encoding="utf-8")


def test_ansible_core_and_runner_are_pinned_as_in_requirements_txt(context: Path) -> None:
    dockerfile = (context / "Dockerfile").read_text(encoding="utf-8")
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"', dockerfile, re.MULTILINE)
    assert refs, dockerfile
    wanted = pins()
    assert sorted(refs.group(1).split()) == sorted(f"{name}=={wanted[name]}" for name in ("ansible-core", "ansible-runner"))


def test_every_collection_dependency_is_requested_with_its_range(context: Path) -> None:
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text(encoding="utf-8"))
    requested = {c["name"]: c.get("version", "*")
                 for c in yaml.safe_load((context / "_build" / "requirements.yml").read_text(encoding="utf-8"))["collections"]}
    for name, version in (galaxy.get("dependencies") or {}).items():
        assert requested.get(name) == version, f"{name}: galaxy.yml {version}, execution-environment.yml {requested.get(name)}"
    # community.general's modules are used by the roles whether or not galaxy.yml declares it yet.
    assert "community.general" in requested
    used = subprocess.run(["grep", "-rlq", "community.general.", str(REPO / "roles")], check=False).returncode == 0
    assert used


def test_introspection_finds_what_the_collection_needs_on_the_control_node(layout: Path, tmp_path: Path) -> None:
    collections = tmp_path / "collections"
    # Outside the repository and without its configuration: its collections/ would count as installed already.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps",
                           str(layout / "build" / "ee" / "blackwell-sglang.tar.gz"), "-p", str(collections)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (collections / "ansible_collections" / "blackwell" / "sglang" / "meta" / "execution-environment.yml").is_file()
    proc = subprocess.run([str(BIN / "ansible-builder"), "introspect", "--sanitize", str(collections)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = yaml.safe_load(proc.stdout.split("\n", 1)[1])
    python = [line.split("#")[0].strip() for line in found["python"]]
    system = [line.split("#")[0].strip() for line in found["system"]]
    assert python == ["packaging>=21.0"]
    assert "openssh-client [platform:dpkg]" in system
    # packaging is what plugin_utils imports beyond ansible-core and the standard library.
    imports = subprocess.run(["grep", "-rhoE", r"^(from|import) packaging", str(COLLECTION / "plugins")],
                             capture_output=True, text=True, check=False).stdout
    assert imports


def test_the_offline_variant_keeps_the_tarball_the_pins_and_the_steps() -> None:
    """build_image.py's local variant changes only what a machine without registry, Galaxy or index needs."""
    spec = importlib.util.spec_from_file_location("ee_build_image", BUILD_IMAGE)
    assert spec and spec.loader
    build_image = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_image)
    production = yaml.safe_load((REPO / "execution-environment.yml").read_text(encoding="utf-8"))
    before = json.dumps(production, sort_keys=True)
    local = build_image.derive(production, "bsa-ee-base:0123456789abcdef")
    assert json.dumps(production, sort_keys=True) == before  # derived from a copy
    assert local["version"] == production["version"]
    assert local["images"]["base_image"]["name"] == "bsa-ee-base:0123456789abcdef"
    for key in ("ansible_core", "ansible_runner"):
        assert local["dependencies"][key] == production["dependencies"][key]
    tarball = [c for c in production["dependencies"]["galaxy"]["collections"] if c.get("type") == "file"]
    assert tarball and local["dependencies"]["galaxy"]["collections"] == tarball
    files = production["additional_build_files"]
    assert local["additional_build_files"][:len(files)] == files
    assert {k: v for k, v in local["options"].items() if k != "skip_pip_install"} == production["options"]
    # The production steps stay, apart from the mirror refresh (the base already has every system package).
    for section, steps in production["additional_build_steps"].items():
        kept = [s for s in steps if "apt-get update" not in s]
        assert all(s in local["additional_build_steps"][section] for s in kept), section


# --- the image, built and run ---------------------------------------------------------------------------------------


def docker_available() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True,
                                                                 check=False).returncode == 0


@pytest.fixture(scope="module")
def ee_image(layout: Path) -> str:
    """The EE image of this tarball and execution-environment.yml (built unless `make ee-image` built it already)."""
    if not docker_available():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Docker engine: the execution environment image cannot be built "
                        "(tests/fixtures/simhost/ensure-docker.sh starts one)")
        pytest.skip("no Docker engine (tests/fixtures/simhost/ensure-docker.sh): the execution environment image "
                    "is not built")
    proc = subprocess.run([sys.executable, str(BUILD_IMAGE), "--tarball",
                           str(layout / "build" / "ee" / "blackwell-sglang.tar.gz"), "--print-tag"],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return proc.stdout.strip()


def in_image(image: str, *command: str) -> str:
    proc = subprocess.run(["docker", "run", "--rm", "--name", f"bsa-ee-check-{uuid.uuid4().hex[:8]}", image,
                           *command], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def run_in_ee(image: str, where: Path, change: dict[str, object] | None = None,
              *cmdline: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``ansible-runner run`` of a one-playbook project through the image; returns the run and its artifacts."""
    data = where / "runner"
    (data / "project").mkdir(parents=True)
    (data / "project" / "site.yml").write_text(yaml.safe_dump([{
        "name": "Validate with the execution environment's collection",
        "ansible.builtin.import_playbook": "blackwell.sglang.validate",
    }], sort_keys=False))
    inventory = data / "inventory"
    shutil.copytree(SAMPLE, inventory)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    # The validator runs on the control node: the EE's container. Connection local, with the EE's Python.
    hosts["all"]["children"]["sglang_servers"]["hosts"]["blackwell-01"] = {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    if change:
        host_vars = inventory / "host_vars" / "blackwell-01.yml"
        data_vars = yaml.safe_load(host_vars.read_text())
        data_vars["sglang_args"] = {**data_vars["sglang_args"], **change}
        host_vars.write_text(yaml.safe_dump(data_vars))
    ident = f"bsa-ee-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    args = [str(BIN / "ansible-runner"), "run", str(data), "-p", "site.yml", "-i", ident,
            "--process-isolation", "--process-isolation-executable", "docker", "--container-image", image,
            # The container's name (ansible-runner names it ansible_runner_<ident>; docker takes the last --name).
            f"--container-option=--name={ident}"]
    if cmdline:
        args += ["--cmdline", " ".join(cmdline)]
    proc = subprocess.run(args, cwd=where, env=env, capture_output=True, text=True, timeout=300)
    return proc, data / "artifacts" / ident


@pytest.mark.ee_image
def test_the_image_holds_the_pins_and_both_collections(ee_image: str) -> None:
    wanted = pins()
    assert f"ansible [core {wanted['ansible-core']}]" in in_image(ee_image, "ansible", "--version")
    assert in_image(ee_image, "ansible-runner", "--version").strip() == wanted["ansible-runner"]
    listed = in_image(ee_image, "ansible-galaxy", "collection", "list", "--format", "json")
    found = {name: info["version"] for path in json.loads(listed).values() for name, info in path.items()}
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text(encoding="utf-8"))
    assert found.get("blackwell.sglang") == galaxy["version"]
    assert "community.general" in found
    # The collection's introspected needs: packaging for plugin_utils, ssh for the default connection.
    in_image(ee_image, "python3", "-c", "import packaging.version")
    in_image(ee_image, "ssh", "-V")
    # The build's offline pip configuration and wheelhouse are gone: a user's pip in the EE uses its own settings.
    in_image(ee_image, "sh", "-c", "test ! -e /etc/pip.conf && test ! -e /opt/ee-wheels")


@pytest.mark.ee_image
def test_runner_runs_the_validate_playbook_through_the_ee(ee_image: str, tmp_path: Path) -> None:
    proc, artifacts = run_in_ee(ee_image, tmp_path, None, "-e", "render_dir=plan", "-v")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert (artifacts / "rc").read_text().strip() == "0"
    command = json.loads((artifacts / "command").read_text())["command"]
    assert command[:2] == ["docker", "run"] and ee_image in command, command
    # The image's installed collection ran (-v prints the validate task's result), not the repository's.
    assert f'"templates": "{EE_COLLECTIONS}/blackwell/sglang/roles/sglang_server/templates"' in out, out
    assert str(REPO) not in out
    # The plan was rendered in the container's /runner/project, the project directory mounted from here.
    unit = (tmp_path / "runner" / "project" / "plan" / "blackwell-01" / "sglang.service").read_text()
    assert "--tp-size 8" in unit and "--speculative-algorithm NEXTN" in unit


@pytest.mark.ee_image
def test_runner_through_the_ee_rejects_the_incident(ee_image: str, tmp_path: Path) -> None:
    proc, artifacts = run_in_ee(ee_image, tmp_path, INCIDENT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert (artifacts / "rc").read_text().strip() == "2"
    assert "sglang_args.speculative_num_steps" in out
    assert "rejected for 1 of 1 host(s): blackwell-01" in out
