#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""constraints.txt: the control-node virtualenv's packages that requirements.txt does not pin, at their installed versions.

requirements.txt pins what the project uses directly; `make venv` installs it with ``-c constraints.txt``, so the packages
those pull in (cryptography, cffi, requests, ...) are the versions the last passing `make test` ran with, on every
machine. Without them a fresh machine resolves whatever is newest that day: cryptography 51 started printing a DSA
deprecation warning naming the virtualenv's path, and CI failed on it before anyone here had installed it.

``--write`` (`make constraints`) rewrites constraints.txt from the virtualenv this runs in: the dependency closure of
requirements.txt (markers evaluated for this interpreter, extras followed), less requirements.txt's own packages.
``--check`` exits 1 and names the differences when the file and the virtualenv disagree (tests/unit/test_constraints.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "requirements.txt"
CONSTRAINTS = REPO / "constraints.txt"
HEADER = """\
# The control-node virtualenv's other packages (what requirements.txt's pins pull in), at the versions make test last
# passed with. `make venv` installs requirements.txt under these constraints, so a fresh machine gets the same tree and
# a new release of a dependency arrives as a change of this file, not as a surprise in CI (cryptography 51's DSA
# warning). Written by tools/constraints.py (`make constraints`) after a change of requirements.txt; do not edit.
"""


def canonical(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(text: str) -> dict[str, tuple[str, str]]:
    """``name==version`` lines of a requirements or constraints file: {canonical name: (name as written, version)}.

    Raises ValueError on any other requirement line (a range, a URL, an option): both files pin exact versions.
    """
    out: dict[str, tuple[str, str]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or req.url or req.marker:
            raise ValueError(f"line {number}: {raw!r} is not name==version")
        out[canonical(req.name)] = (req.name, specs[0].version)
    return out


def closure(requirements: list[Requirement]) -> dict[str, str]:
    """{canonical name: installed version} of ``requirements`` and everything they need, in this interpreter's
    environment (markers evaluated for it, with each requirement's extras). A requirement not installed is left out."""
    installed = {canonical(d.metadata["Name"]): d for d in metadata.distributions()}
    found: dict[str, str] = {}
    todo = [(req, frozenset(req.extras)) for req in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, extras = todo.pop()
        name = canonical(req.name)
        if (name, extras) in seen or name not in installed:
            continue
        seen.add((name, extras))
        dist = installed[name]
        found[name] = dist.version
        for spec in dist.requires or []:
            dep = Requirement(spec)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((dep, frozenset(dep.extras)))
    return found


def expected(requirements_text: str) -> dict[str, str]:
    """What constraints.txt should pin: the closure's packages that requirements.txt does not pin."""
    direct = pinned(requirements_text)
    reqs = [Requirement(line.split("#", 1)[0].strip()) for line in requirements_text.splitlines()
            if line.split("#", 1)[0].strip()]
    return {name: version for name, version in closure(reqs).items() if name not in direct}


def differences(requirements_text: str, constraints_text: str) -> list[str]:
    """Why constraints.txt does not describe this virtualenv (empty when it does)."""
    problems = []
    direct, written = pinned(requirements_text), pinned(constraints_text)
    problems += [f"{written[n][0]} is pinned in both files; requirements.txt's pin is the one" for n in written if n in direct]
    wanted = expected(requirements_text)
    for name, version in sorted(wanted.items()):
        if name not in written:
            problems.append(f"{name}=={version} is installed (needed by requirements.txt) but constraints.txt does not pin it")
        elif written[name][1] != version:
            problems.append(f"{name} is {version} here but constraints.txt pins {written[name][1]}")
    problems += [f"{written[n][0]} is pinned but nothing in requirements.txt needs it here" for n in written
                 if n not in wanted and n not in direct]
    return problems


def render(requirements_text: str) -> str:
    """constraints.txt's text for this virtualenv."""
    names = {canonical(d.metadata["Name"]): d.metadata["Name"] for d in metadata.distributions()}
    lines = [f"{names.get(n, n)}=={v}" for n, v in expected(requirements_text).items()]
    return HEADER + "".join(f"{line}\n" for line in sorted(lines, key=str.lower))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite constraints.txt from this virtualenv")
    mode.add_argument("--check", action="store_true", help="exit 1 when constraints.txt and this virtualenv disagree")
    args = parser.parse_args()
    requirements_text = REQUIREMENTS.read_text(encoding="utf-8")
    if args.write:
        CONSTRAINTS.write_text(render(requirements_text), encoding="utf-8")
        return 0
    problems = differences(requirements_text, CONSTRAINTS.read_text(encoding="utf-8"))
    for problem in problems:
        print(f"constraints.txt: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
