#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Release the blackwell.sglang collection: ``make release VERSION=X.Y.Z`` (and ``make changelog``).

``release.py X.Y.Z`` sets galaxy.yml's ``version`` to X.Y.Z, then releases the changelog fragments
(``changelogs/fragments/``) as X.Y.Z with antsibull-changelog: ``changelogs/changelog.yaml`` gets the release,
``CHANGELOG.rst`` is regenerated and the released fragments are removed. antsibull-changelog runs on a staged copy
of what ``make dist`` ships (tools/build_collection.py), so the roles it finds are the collection's; every module,
plugin, role and playbook that no earlier release lists is added to the release as new (antsibull-changelog itself
goes by ``version_added`` and cannot list playbooks).

``release.py --changelog`` (``make changelog``) releases galaxy.yml's own version instead.

Either refuses, changing nothing, when

- the version is released already (``changelogs/changelog.yaml``): fragments are never folded into a released
  version; the message names the fragments and the next version (minor with new features, patch with fixes only);
- the version is not above every released one, or is not X.Y.Z;
- there is no fragment to release.

``--check`` only checks. Prints what it did.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_collection  # noqa: E402

_VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
# Fragment sections that call for a new minor version (a new major one from 1.0.0 on, for breaking changes).
_FEATURES = ("major_changes", "minor_changes", "breaking_changes", "deprecated_features", "removed_features")


class Refused(Exception):
    """The release cannot be made; the message says why and what to do."""


def parse(version: str) -> tuple[int, int, int]:
    match = _VERSION.match(version)
    if not match:
        raise Refused(f"version {version!r} is not X.Y.Z (e.g. 0.2.0)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def galaxy_version(collection: Path) -> str:
    return str(yaml.safe_load((collection / "galaxy.yml").read_text(encoding="utf-8"))["version"])


def released(collection: Path) -> list[str]:
    path = collection / "changelogs" / "changelog.yaml"
    if not path.is_file():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return sorted((data.get("releases") or {}), key=parse)


def fragments(collection: Path) -> list[Path]:
    directory = collection / "changelogs" / "fragments"
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in (".yml", ".yaml"))


def next_version(last: str, notes: list[Path]) -> str:
    """The version the fragments call for after ``last``: minor for features, patch for fixes only."""
    major, minor, patch = parse(last)
    sections: set[str] = set()
    for note in notes:
        sections.update((yaml.safe_load(note.read_text(encoding="utf-8")) or {}).keys())
    if "breaking_changes" in sections and major >= 1:
        return f"{major + 1}.0.0"
    if sections & set(_FEATURES):
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def check(collection: Path, version: str) -> list[Path]:
    """The fragments a release of ``version`` folds in; ``Refused`` when it must not be made."""
    target = parse(version)
    notes = fragments(collection)
    done = released(collection)
    names = ", ".join(p.name for p in notes)
    if version in done:
        if notes:
            raise Refused(
                f"{version} is released already (changelogs/changelog.yaml); its changelog is not re-opened. "
                f"The {len(notes)} unreleased fragment(s) ({names}) belong to the next release: "
                f"make release VERSION={next_version(done[-1], notes)} (galaxy.yml says {galaxy_version(collection)})")
        raise Refused(f"{version} is released already and there is no changelog fragment to release")
    newer = [v for v in done if parse(v) >= target]
    if newer:
        raise Refused(f"{version} is not above the released {', '.join(newer)}: "
                      f"make release VERSION={next_version(done[-1], notes)}")
    if not notes:
        raise Refused(f"no changelog fragment in {collection / 'changelogs' / 'fragments'}: nothing to release as {version}")
    return notes


def set_galaxy_version(collection: Path, version: str) -> None:
    """Rewrite galaxy.yml's ``version:`` line only (its comments and layout stay)."""
    path = collection / "galaxy.yml"
    text, count = re.subn(r"(?m)^version:[ \t]*\S+[ \t]*$", f"version: {version}", path.read_text(encoding="utf-8"))
    if count != 1:
        raise Refused(f"{path}: no single top-level 'version:' line to set")
    path.write_text(text, encoding="utf-8")


def playbook_description(path: Path) -> str:
    """The first sentence of a playbook's header comment (``# Restart the servers ...:`` -> ``Restart the servers ...``)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        if not line.startswith("#") or line.startswith("#  "):
            break
        lines.append(line[1:].strip())
    text = " ".join(lines)
    sentence = re.split(r"(?<=[.:])\s", text, maxsplit=1)[0].rstrip(".:").strip()
    return (sentence or path.stem) + "."


def add_new_content(stage: Path, version: str) -> list[str]:
    """Add to ``version``'s release every module, plugin, role and playbook of the staged collection that no release
    lists yet, and return them (``type name``).

    antsibull-changelog adds only what documents ``version_added: <this version>``, and cannot list playbooks: what
    is new is what no earlier release names. The descriptions are ansible-doc's (antsibull-changelog's plugin cache of
    this run), a playbook's the first sentence of its header comment.
    """
    from antsibull_changelog.changes import load_changes
    from antsibull_changelog.config import ChangelogConfig, CollectionDetails, PathsConfig
    from antsibull_changelog.plugins import PluginDescription

    paths = PathsConfig.force_collection(str(stage))
    config = ChangelogConfig.load(paths, CollectionDetails(paths))
    changes = load_changes(config)
    cache = yaml.safe_load((stage / "changelogs" / ".plugin-cache.yaml").read_text(encoding="utf-8")) or {}
    period = config.add_plugin_period
    found = PluginDescription.from_dict(cache.get("plugins") or {}, add_plugin_period=period)
    found += PluginDescription.from_dict(cache.get("objects") or {}, category="object", add_plugin_period=period)
    playbooks = {p.stem: {"description": playbook_description(p), "name": p.stem, "namespace": None,
                          "version_added": None} for p in sorted((stage / "playbooks").glob("*.yml"))}
    found += PluginDescription.from_dict({"playbook": playbooks}, category="object", add_plugin_period=period)
    added = [f"{item.type} {item.name}" for item in found
             if (changes.add_plugin(item, version) if item.category == "plugin" else changes.add_object(item, version))]
    if added:
        changes.save()
    return added


def antsibull(stage: Path, *args: str) -> None:
    """antsibull-changelog in the staged collection, with that copy as the only collection (no ANSIBLE_* of the
    caller: the Makefile's ANSIBLE_CONFIG names the repository's collections)."""
    exe = Path(sys.executable).parent / "antsibull-changelog"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(stage.parents[2]), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    subprocess.run([str(exe) if exe.exists() else "antsibull-changelog", *args], cwd=stage, env=env, check=True)


def release(version: str, collection: Path = COLLECTION, repo: Path = REPO, date: str | None = None) -> list[str]:
    """Set galaxy.yml's version and release the fragments as ``version``; returns the released fragments' names."""
    notes = check(collection, version)
    old = (collection / "galaxy.yml").read_text(encoding="utf-8")
    set_galaxy_version(collection, version)
    try:
        with tempfile.TemporaryDirectory(prefix="bsa-release-") as tmp:
            stage = build_collection.stage(Path(tmp) / "ansible_collections" / collection.parent.name / collection.name,
                                           repo=repo, collection=collection)
            # The staged copy holds the fragments (build_ignore applies to the tarball only).
            antsibull(stage, "lint")
            antsibull(stage, "release", "--version", version, *(["--date", date] if date else []))
            if add_new_content(stage, version):
                antsibull(stage, "generate")
            for name in ("changelogs/changelog.yaml", "CHANGELOG.rst"):
                shutil.copyfile(stage / name, collection / name)
    except BaseException:
        (collection / "galaxy.yml").write_text(old, encoding="utf-8")
        raise
    data = yaml.safe_load((collection / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))
    folded = set(data["releases"][version].get("fragments") or [])
    for note in notes:
        if note.name in folded:
            note.unlink()
    (collection / "changelogs" / ".plugin-cache.yaml").unlink(missing_ok=True)
    return sorted(folded)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new version, X.Y.Z")
    parser.add_argument("--changelog", action="store_true", help="release galaxy.yml's own version (make changelog)")
    parser.add_argument("--check", action="store_true", help="only check that the release can be made")
    parser.add_argument("--date", help="release date, YYYY-MM-DD (default: today)")
    parser.add_argument("--collection", type=Path, default=COLLECTION, help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if bool(args.version) == args.changelog:
        parser.error("give the new version (make release VERSION=X.Y.Z) or --changelog, one of them")
    collection = args.collection.resolve()
    version = args.version or galaxy_version(collection)
    try:
        if args.check:
            notes = check(collection, version)
            print(f"{version}: can be released ({len(notes)} fragment(s))")
            return 0
        folded = release(version, collection, args.repo.resolve(), args.date)
    except Refused as exc:
        print(f"release refused: {exc}", file=sys.stderr)
        return 2
    print(f"released {version}: galaxy.yml version {version}, {len(folded)} fragment(s) in changelogs/changelog.yaml "
          f"and CHANGELOG.rst")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
