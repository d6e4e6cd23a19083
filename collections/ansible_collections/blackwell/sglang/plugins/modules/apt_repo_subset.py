#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: copy the part of a flat apt repository that some pinned packages need (offline bundles)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: apt_repo_subset
version_added: 0.2.0
short_description: Copy what pinned packages need from a flat apt repository, with its signed index
description:
  - Downloads the index of the flat apt repository O(repo_url) (C(InRelease), C(Release), C(Release.gpg),
    C(Packages), C(Packages.gz), unchanged, so its signature still holds) and its signing key O(key_url) into O(dest),
    then the C(.deb) files of O(packages) at their versions and of everything they depend on that the repository
    itself provides (C(Depends) and C(Pre-Depends), versions checked), each verified against the index's SHA256.
  - >-
    O(dest) is then a repository apt can use as it is (C(file:) URI, the same C(Signed-By) key) on a host with no
    network, the offline bundle of C(playbooks/bundle.yml). Dependencies the repository does not provide (the
    distribution's own packages) are returned in RV(external), not fetched.
  - Files already in O(dest) with the right hash are not downloaded again; the result is changed only when a file
    was written.
requirements:
  - python3-debian (the distribution's package; roles/nvidia_driver installs it for deb822_repository)
options:
  repo_url:
    description: The flat repository, ending with C(/) (http, https or file URL).
    type: str
    required: true
  key_url:
    description: The repository's signing key, stored in O(dest) under its own file name; unset, none.
    type: str
  packages:
    description: >-
      Packages to include, C(name) (the highest version) or C(name=version) where the version may be a glob
      (C(575.57.08-*), as the roles pin them).
    type: list
    elements: str
    required: true
  pins:
    description: >-
      apt preferences to honour, C(package-glob=version-glob) (e.g. C(nvidia-*=575.57.08-*), as roles/nvidia_driver
      pins the driver's packages): a dependency whose name matches takes a version matching the pin when the
      repository has one, as apt with that preference would, instead of the highest.
    type: list
    elements: str
    default: []
  dest:
    description: Directory written as the repository's copy (created).
    type: path
    required: true
  timeout:
    description: Seconds for each download to answer.
    type: float
    default: 60
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Reports which files would be copied and copies none.
  diff_mode:
    support: none
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Copy the driver and CUDA packages of the pinned versions for an offline site
  blackwell.sglang.apt_repo_subset:
    repo_url: "{{ nvidia_driver_repo_url }}"
    key_url: "{{ nvidia_driver_repo_key_url }}"
    packages: [nvidia-driver-cuda=575.57.08-*, nvidia-kernel-open-dkms=575.57.08-*, cuda-toolkit-12-9=12.9.1-*]
    dest: /srv/sglang-bundle/apt/debian12/x86_64
"""

RETURN = r"""
packages:
  description: The packages copied, with their versions and file names, sorted by name.
  returned: always
  type: list
  elements: dict
  sample: [{name: nvidia-smi, version: 575.57.08-1, filename: nvidia-smi_575.57.08-1_amd64.deb}]
external:
  description: Dependencies the repository does not provide (from the distribution), as written in the index.
  returned: always
  type: list
  elements: str
  sample: ["dkms", "libc6 (>= 2.34)"]
"""

import fnmatch
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.urls import open_url

try:
    from debian.deb822 import Packages, PkgRelation
    from debian.debian_support import Version
except ImportError:  # pragma: no cover - reported by the module
    Packages = PkgRelation = Version = None  # type: ignore[assignment,misc]

INDEX_FILES = ("InRelease", "Release", "Release.gpg", "Packages", "Packages.gz")
_OPS: dict[str, Callable[[int], bool]] = {
    "<<": lambda c: c < 0, "<=": lambda c: c <= 0, "=": lambda c: c == 0, ">=": lambda c: c >= 0, ">>": lambda c: c > 0,
}


class SubsetError(Exception):
    """A requested package or one of its repository dependencies cannot be satisfied."""


def parse_index(text: str) -> dict[str, list[dict[str, str]]]:
    """The index's stanzas by package name, highest version first."""
    by_name: dict[str, list[dict[str, str]]] = {}
    for stanza in Packages.iter_paragraphs(text.splitlines(keepends=True), use_apt_pkg=False):
        by_name.setdefault(stanza["Package"], []).append(dict(stanza))
    for stanzas in by_name.values():
        stanzas.sort(key=lambda s: Version(s["Version"]), reverse=True)
    return by_name


def _satisfies(version: str, constraint: tuple[str, str] | None) -> bool:
    if not constraint:
        return True
    op, wanted = constraint
    a, b = Version(version), Version(wanted)
    return _OPS[op]((a > b) - (a < b))


def resolve(index: dict[str, list[dict[str, str]]], wanted: Iterable[str],
            pins: Iterable[str] = ()) -> tuple[list[dict[str, str]], list[str]]:
    """The stanzas of ``wanted`` (``name`` or ``name=version-glob``) and of their dependencies in the index.

    Each dependency group takes its first alternative the index provides at a matching version, at the highest
    such version, or at the highest matching one of ``pins`` (``name-glob=version-glob``) whose name glob matches;
    a group with none in the index is external (the distribution's). A package needed at two versions that cannot
    both be met is an error.
    """
    pin_globs = [tuple(str(pin).split("=", 1)) for pin in pins]

    def pick(name: str, accepts: Callable[[str], bool]) -> dict[str, str] | None:
        candidates = [s for s in index[name] if accepts(s["Version"])]
        for name_glob, version_glob in pin_globs:
            if fnmatch.fnmatchcase(name, name_glob):
                pinned = [s for s in candidates if fnmatch.fnmatchcase(s["Version"], version_glob)]
                return pinned[0] if pinned else (candidates[0] if candidates else None)
        return candidates[0] if candidates else None

    chosen: dict[str, dict[str, str]] = {}
    external: set[str] = set()
    queue: list[tuple[str, Callable[[str], bool], str]] = []
    for item in wanted:
        name, glob = (str(item).split("=", 1) + [""])[:2]
        if name not in index:
            raise SubsetError(f"{name}: not in the repository")
        queue.append((name, (lambda v, g=glob: fnmatch.fnmatchcase(v, g)) if glob else (lambda v: True), str(item)))
    while queue:
        name, accepts, why = queue.pop(0)
        if name in chosen:
            if not accepts(chosen[name]["Version"]):
                raise SubsetError(f"{name}: {why} conflicts with {name} {chosen[name]['Version']}, needed elsewhere")
            continue
        stanza = pick(name, accepts)
        if stanza is None:
            raise SubsetError(f"{name}: no version in the repository matches {why}")
        chosen[name] = stanza
        fields = [stanza[field] for field in ("Pre-Depends", "Depends") if stanza.get(field, "").strip()]
        relations = PkgRelation.parse_relations(", ".join(fields)) if fields else []
        for group in relations:
            for alternative in group:
                alt_name = alternative["name"]
                constraint = alternative.get("version")
                if any(_satisfies(s["Version"], constraint) for s in index.get(alt_name, [])):
                    queue.append((alt_name, lambda v, c=constraint: _satisfies(v, c),
                                  f"{alt_name} {' '.join(constraint) if constraint else ''} (for {name})".replace("  ", " ")))
                    break
            else:
                external.add(PkgRelation.str([group]))
    return sorted(chosen.values(), key=lambda s: s["Package"]), sorted(external)


def _fetch(url: str, timeout: float) -> bytes:
    with open_url(url, timeout=timeout, follow_redirects="safe") as response:
        return response.read()


def _write(path: str, data: bytes) -> bool:
    """Write ``data`` atomically unless ``path`` already holds it; True when written."""
    if os.path.isfile(path):
        with open(path, "rb") as existing:
            if hashlib.sha256(existing.read()).digest() == hashlib.sha256(data).digest():
                return False
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".apt_repo_subset.")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    repo = params["repo_url"] if params["repo_url"].endswith("/") else params["repo_url"] + "/"
    dest, timeout = params["dest"], params["timeout"]
    index_files: dict[str, bytes] = {}
    for name in INDEX_FILES:
        try:
            index_files[name] = _fetch(repo + name, timeout)
        except Exception as exc:  # noqa: BLE001 - only Packages is required; the others may be absent
            if name == "Packages":
                raise SubsetError(f"cannot read the repository's index {repo}Packages: {exc}") from exc
    stanzas, external = resolve(parse_index(index_files["Packages"].decode("utf-8")), params["packages"],
                                params["pins"])
    files = dict(index_files)
    if params.get("key_url"):
        files[os.path.basename(params["key_url"].rstrip("/"))] = _fetch(params["key_url"], timeout)
    changed = False
    for name, data in files.items():
        target = os.path.join(dest, name)
        if check_mode:
            changed |= not os.path.isfile(target) or _sha256_file(target) != hashlib.sha256(data).hexdigest()
        else:
            changed |= _write(target, data)
    copied = []
    for stanza in stanzas:
        relative = os.path.normpath(stanza["Filename"])
        if relative.startswith("..") or os.path.isabs(relative):
            raise SubsetError(f"{stanza['Package']}: the index names a file outside the repository: {stanza['Filename']}")
        target = os.path.join(dest, relative)
        copied.append({"name": stanza["Package"], "version": stanza["Version"], "filename": relative})
        if os.path.isfile(target) and _sha256_file(target) == stanza["SHA256"]:
            continue
        changed = True
        if check_mode:
            continue
        data = _fetch(repo + stanza["Filename"].removeprefix("./"), timeout)
        if hashlib.sha256(data).hexdigest() != stanza["SHA256"]:
            raise SubsetError(f"{stanza['Package']} {stanza['Version']}: the download does not match the index's SHA256")
        _write(target, data)
    return {"changed": changed, "packages": copied, "external": external}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "repo_url": {"type": "str", "required": True},
            "key_url": {"type": "str", "no_log": False},
            "packages": {"type": "list", "elements": "str", "required": True},
            "pins": {"type": "list", "elements": "str", "default": []},
            "dest": {"type": "path", "required": True},
            "timeout": {"type": "float", "default": 60},
        },
        supports_check_mode=True,
    )
    if Packages is None:
        module.fail_json(msg=missing_required_lib("python3-debian"))
    try:
        module.exit_json(**run(module.params, module.check_mode))
    except SubsetError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
