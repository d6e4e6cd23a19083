"""The collection tarball of `make dist`, installed into an empty directory and run from outside the repository.

Nothing of the repository is on Ansible's paths while the playbooks run: the working directory is a temporary
one, the only collections path is the install directory, the configuration file is an empty temporary one
and no roles path is set. The playbooks and roles are named by their fully qualified names.

``blackwell.sglang.validate -e render_dir=DIR`` renders the unit, environment file and ``--config`` YAML on the
control node only, with the installed collection's sglang_server templates and its roles' defaults (found beside
its plugins), without touching any host or this machine beyond the temporary directory.
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
SAMPLE = REPO / "inventory" / "sample"
BIN = Path(sys.executable).parent


def repository_paths(output: str) -> bool:
    """Whether ``output`` names the repository. The control node's own virtualenv is set aside: here it lives in the
    checkout, and Python warnings of its packages (cryptography's on ansible-core's ssh agent) print their paths."""
    return str(REPO) in output.replace(str(BIN.parent), "<venv>")
INCIDENT = {"speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tarball built by tools/build_collection.py (what `make dist` runs) into a temporary directory."""
    tmp = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "build_collection.py"), "--out", str(tmp / "dist"),
                           "--stage", str(tmp / "stage" / "ansible_collections" / "blackwell" / "sglang")],
                          capture_output=True, text=True, timeout=300, env=outside_env(tmp))
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def outside_env(workdir: Path, collections: Path | None = None) -> dict[str, str]:
    """The environment without any ANSIBLE_* setting of the caller (the Makefile exports ANSIBLE_CONFIG)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    config = workdir / "ansible.cfg"
    config.write_text("[defaults]\nretry_files_enabled = false\n")
    env.update(ANSIBLE_CONFIG=str(config), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_LOCAL_TEMP=str(workdir / ".ansible-tmp"), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    if collections is not None:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    return env


@pytest.fixture(scope="module")
def outside(tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A directory outside the repository with the tarball installed into its empty ``collections/``."""
    work = tmp_path_factory.mktemp("outside")
    assert REPO not in work.parents
    collections = work / "collections"
    collections.mkdir()
    env = outside_env(work, collections)
    # --no-deps: no Galaxy server is asked for community.general (galaxy.yml's dependency); these playbooks and
    # roles run without it, and sites install it with ansible or from their own Galaxy server.
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", str(tarball),
                           "-p", str(collections)], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (collections / "ansible_collections" / "blackwell" / "sglang" / "MANIFEST.json").is_file(), proc.stdout
    return work, env


def test_tarball_holds_plugins_roles_playbooks_and_templates(tarball: Path) -> None:
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
        manifest = json.load(tar.extractfile("MANIFEST.json"))  # type: ignore[arg-type]
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    assert manifest["collection_info"]["version"] == galaxy["version"]
    assert manifest["collection_info"]["namespace"] == "blackwell" and manifest["collection_info"]["name"] == "sglang"
    assert manifest["collection_info"]["license"] == galaxy["license"] == ["Apache-2.0"]
    assert manifest["collection_info"]["dependencies"] == galaxy["dependencies"]
    with tarfile.open(tarball) as tar:
        assert tar.extractfile("LICENSE").read() == (REPO / "LICENSE").read_bytes()  # type: ignore[union-attr]
    expected = [f"roles/{r.name}/meta/main.yml" for r in (REPO / "roles").iterdir() if r.is_dir()]
    expected += [f"playbooks/{p.relative_to(REPO / 'playbooks')}" for p in (REPO / "playbooks").rglob("*.yml")]
    expected += [f"roles/sglang_server/templates/{t.name}" for t in (REPO / "templates").iterdir()]
    expected += [f"plugins/{p.relative_to(COLLECTION / 'plugins')}" for p in (COLLECTION / "plugins").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts]
    expected += ["CHANGELOG.rst", "changelogs/changelog.yaml", "README.md", "meta/runtime.yml", "LICENSE"]
    assert sorted(set(expected) - set(members)) == []
    for name in expected:
        assert members[name].isfile(), f"{name} is not a regular file in the tarball"
    # The documentation pages, the example inventory and the locks (issue 33): copied in at build time.
    expected += [f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")]
    expected += [f"examples/inventory/{p.relative_to(SAMPLE)}" for p in SAMPLE.rglob("*") if p.is_file()]
    expected += [f"roles/sglang/files/locks/{p.name}" for p in (REPO / "roles" / "sglang" / "files" / "locks").iterdir()]
    unwanted = [n for n in members if "__pycache__" in n or n.endswith(".pyc") or n.startswith(("changelogs/fragments",
                                                                                                  "tests/output"))]
    assert unwanted == []


def test_installed_collection_carries_docs_example_inventory_and_locks(outside: tuple[Path, dict[str, str]]) -> None:
    """Installed into an empty directory, the collection holds the documentation, the example inventory and the
    locks, byte for byte the repository's; its README's links lead to files of the collection."""
    installed = outside[0] / "collections" / "ansible_collections" / "blackwell" / "sglang"
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert pages and sorted(p.name for p in (installed / "docs").glob("*.md")) == pages
    for page in pages:
        assert (installed / "docs" / page).read_bytes() == (REPO / "docs" / page).read_bytes()
    for path in SAMPLE.rglob("*"):
        if path.is_file():
            assert (installed / "examples" / "inventory" / path.relative_to(SAMPLE)).read_bytes() == path.read_bytes()
    locks = sorted((REPO / "roles" / "sglang" / "files" / "locks").glob("sglang-*.txt"))
    assert locks
    for lock in locks:
        assert (installed / "roles" / "sglang" / "files" / "locks" / lock.name).read_bytes() == lock.read_bytes()
    readme = (installed / "README.md").read_text(encoding="utf-8")
    links = [m for m in re.findall(r"\]\(([^()\s]+)\)", readme) if "://" not in m and not m.startswith("#")]
    assert "docs/" in links and "examples/inventory/" in links
    dead = [link for link in links if not (installed / link.split("#")[0]).exists()]
    assert dead == [], f"README links to files the collection does not have: {dead}"
    # The sections docs/ links to as ../README.md#...: in the tarball, that README is this one.
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"(?m)^#+ (.*)$", readme)}
    assert {"host-variables", "package-sources", "upgrading-sglang"} <= headings


def test_validate_accepts_the_installed_example_inventory(outside: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The example inventory, copied out of the installed collection as its README says, validates."""
    installed = outside[0] / "collections" / "ansible_collections" / "blackwell" / "sglang"
    shutil.copytree(installed / "examples" / "inventory", tmp_path / "mysite")
    proc = playbook(outside, tmp_path, "-i", "mysite", "blackwell.sglang.validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def make_inventory(where: Path, change: dict[str, object] | None = None) -> Path:
    """A one-host copy of the sample inventory, the host's ``sglang_args`` updated by ``change``."""
    inv = where / "inventory"
    shutil.copytree(SAMPLE, inv)
    if change:
        host_vars = inv / "host_vars" / "blackwell-01.yml"
        data = yaml.safe_load(host_vars.read_text())
        data["sglang_args"] = {**data["sglang_args"], **change}
        host_vars.write_text(yaml.safe_dump(data))
    return inv


def playbook(outside: tuple[Path, dict[str, str]], where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ansible-playbook run in ``where``, outside the repository, with the installed collection only."""
    _, env = outside
    return subprocess.run([str(BIN / "ansible-playbook"), *args], cwd=where, env=env, capture_output=True, text=True,
                          timeout=300)


def test_validate_playbook_by_fqcn_accepts_the_sample_host(outside: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    inv = make_inventory(tmp_path)
    proc = playbook(outside, tmp_path, "-i", str(inv), "blackwell.sglang.validate", "-e", "render_dir=plan", "-v")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The installed collection ran, not the repository's (nor a copy on another path): its role's files rendered the plan.
    installed = outside[0] / "collections" / "ansible_collections" / "blackwell" / "sglang"
    assert f'"templates": "{installed}/roles/sglang_server/templates"' in proc.stdout, proc.stdout  # -v: the task's result
    assert not repository_paths(proc.stdout + proc.stderr)
    unit = (tmp_path / "plan" / "blackwell-01" / "sglang.service").read_text()
    assert "--tp-size 8" in unit and "--speculative-algorithm NEXTN" in unit


def test_validate_playbook_by_fqcn_rejects_the_incident(outside: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    inv = make_inventory(tmp_path, {**INCIDENT, "speculative_num_steps": None})
    proc = playbook(outside, tmp_path, "-i", str(inv), "blackwell.sglang.validate")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # The report goes to stderr as plain lines (readable with no ansible.cfg); the stop's message to stdout.
    assert any(line.startswith("blackwell-01: 1 error(s)") for line in proc.stderr.splitlines()), proc.stderr[-3000:]
    assert "sglang_args.speculative_num_steps" in proc.stderr
    assert "rejected for 1 of 1 host(s): blackwell-01" in proc.stdout


def test_validate_by_fqcn_renders_the_plan_with_the_collections_role(outside: tuple[Path, dict[str, str]],
                                                                      tmp_path: Path) -> None:
    """render_dir from the installed collection alone: the sglang_server role's templates and the roles' defaults
    are found beside the collection's plugins (no roles path, no repository)."""
    inv = make_inventory(tmp_path)
    proc = playbook(outside, tmp_path, "-i", str(inv), "blackwell.sglang.validate", "-e", f"render_dir={tmp_path / 'rendered'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rendered = tmp_path / "rendered" / "blackwell-01"
    assert sorted(p.name for p in rendered.iterdir()) == ["sglang.env", "sglang.service"]  # no secret argument
    assert "ExecStart=" in (rendered / "sglang.service").read_text()


def test_validate_by_fqcn_refuses_a_release_without_a_lock_naming_the_collections_locks(
        outside: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """roles/sglang installs from a hashed lock by default: a release the collection ships no lock of is refused at
    validate time, listing the locks of the installed collection's own role (its sglang_locks_dir's role_path), with
    fixes that need no repository checkout but for compiling a lock."""
    inv = make_inventory(tmp_path)
    host_vars = inv / "host_vars" / "blackwell-01.yml"
    host_vars.write_text(yaml.safe_dump({**yaml.safe_load(host_vars.read_text()), "sglang_version": "0.5.20"}))
    proc = playbook(outside, tmp_path, "-i", str(inv), "blackwell.sglang.validate")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    installed = outside[0] / "collections" / "ansible_collections" / "blackwell" / "sglang"
    shipped = sorted(p.name.split("-")[1] for p in (REPO / "roles" / "sglang" / "files" / "locks").glob("sglang-*.txt"))
    assert "sglang_version = '0.5.20'  [lock.missing]" in proc.stderr, proc.stderr[-3000:]
    assert f"sglang_locks_dir {installed}/roles/sglang/files/locks: {', '.join(shipped)}." in proc.stderr, proc.stderr[-3000:]
    assert "set sglang_lock: false" in proc.stderr and not repository_paths(proc.stdout + proc.stderr)
