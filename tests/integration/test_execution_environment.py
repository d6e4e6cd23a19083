"""The execution environment for AWX / Ansible Automation Platform: `ansible-builder create` on the real file.

``execution-environment.yml`` (top level) is copied beside a freshly built collection tarball, laid out as
``make ee`` lays it out (``build/ee/blackwell-sglang.tar.gz``), and ``ansible-builder create`` writes the build
context. The context must carry that tarball, install ansible-core and ansible-runner at requirements.txt's pins,
and ask for every collection galaxy.yml depends on with the same range; ansible-builder's introspection of the
installed tarball must find the Python packages and programs the collection declares for the control node.
Building the image needs a base image from a registry (none is reachable in CI), so it is not built here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
BIN = Path(sys.executable).parent


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
