#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Build the blackwell.sglang collection tarball from the repository.

The repository keeps the roles, playbooks and server templates at its top level, where the project's
own ``ansible.cfg`` finds them, and the plugins in ``collections/ansible_collections/blackwell/sglang``.
The tarball holds both: this tool stages a copy of the collection directory with the top-level
``roles/`` and ``playbooks/`` copied in, symbolic links followed (``roles/sglang_server/templates``,
a link to ``templates/``, becomes a directory with those files), caches and ``galaxy.yml``'s
``build_ignore`` left out, the repository's ``LICENSE`` added when the collection carries no licence file of its
own, the repository's ``docs/`` pages copied into ``docs/`` and its sample inventory (``inventory/sample``) into
``examples/inventory/``, and runs ``ansible-galaxy collection build`` on the staged copy. The roles carry the hashed
locks of SGLang's virtualenv (``roles/sglang/files/locks``).

The files are copied unchanged: the short role names the playbooks and roles use (``sglang_server``)
resolve inside the installed collection because ansible-core searches a collection playbook's and a
collection role's own collection first (checked by tests/integration/test_collection_dist.py).

    python tools/build_collection.py [--out build/dist] [--stage DIR]

Prints the path of the tarball. The repository is left as it is.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
# Top-level directories copied into the collection, under the same name.
TOP_LEVEL = ("roles", "playbooks")
# Top-level directories copied into the collection under another name: the documentation pages, whatever docs/ holds
# at build time, and the sample inventory as the tarball's example inventory (copied, never kept twice in git).
RENAMED = {"docs": "docs", "inventory/sample": "examples/inventory"}
# The repository's licence (galaxy.yml's ``license``), copied in unless the collection has one of these.
LICENSE_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING")
# Never part of the artefact, wherever they are.
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                                "*.retry", ".cache")


def stage(dest: Path, repo: Path = REPO, collection: Path = COLLECTION) -> Path:
    """Copy the collection, the top-level roles, playbooks, docs, sample inventory and the licence into ``dest``
    (emptied first)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(collection, dest, ignore=IGNORE)
    for name in TOP_LEVEL:
        if (dest / name).exists():
            raise SystemExit(f"{collection / name} exists: the collection's {name}/ comes from {repo / name}")
        shutil.copytree(repo / name, dest / name, ignore=IGNORE, symlinks=False)
    for source, target in RENAMED.items():
        if (dest / target).exists():
            raise SystemExit(f"{collection / target} exists: the collection's {target}/ comes from {repo / source}")
        shutil.copytree(repo / source, dest / target, ignore=IGNORE, symlinks=False)
    if not any((dest / name).is_file() for name in LICENSE_NAMES):
        shutil.copyfile(repo / "LICENSE", dest / "LICENSE")
    return dest


def build(stage_dir: Path, out: Path) -> Path:
    """``ansible-galaxy collection build`` of the staged collection into ``out``; returns the tarball."""
    out.mkdir(parents=True, exist_ok=True)
    ansible_galaxy = Path(sys.executable).parent / "ansible-galaxy"
    cmd = [str(ansible_galaxy) if ansible_galaxy.exists() else "ansible-galaxy", "collection", "build", "--force",
           "--output-path", str(out), str(stage_dir)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    meta = yaml.safe_load((stage_dir / "galaxy.yml").read_text(encoding="utf-8"))
    tarball = out / f"{meta['namespace']}-{meta['name']}-{meta['version']}.tar.gz"
    if not tarball.is_file():
        raise SystemExit(f"ansible-galaxy did not write {tarball}")
    return tarball


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "dist", help="directory of the tarball")
    parser.add_argument("--stage", type=Path, default=REPO / "build" / "collection" / "ansible_collections" / "blackwell"
                        / "sglang", help="staging directory (replaced)")
    args = parser.parse_args(argv)
    print(build(stage(args.stage.resolve()), args.out.resolve()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
