# SPDX-License-Identifier: Apache-2.0
"""Names of the hashed locks of SGLang's virtualenv (``uv pip compile --universal --generate-hashes``).

One lock per SGLang release and torch variant: ``sglang-<version>-<variant>.txt``, where the variant is
``torch-<version>`` for a ``torch==<version>`` requirement, ``no-torch`` for none, and the requirement's
characters otherwise. roles/sglang picks its lock by this name (filter ``blackwell.sglang.sglang_lock_name``)
and ``tools/sglang_lock.py`` (``make lock``) writes it under the same name. The validate action refuses a host whose
release has no such lock while ``sglang_lock`` is true (:func:`lock_refusal`), before any host changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

_PINNED_TORCH = re.compile(r"^torch\s*==\s*([A-Za-z0-9.+!-]+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9.+]+")


def lock_variant(torch_requirement: str) -> str:
    """``torch-2.14.1`` for ``torch==2.14.1``, ``no-torch`` for ``""``, a file-name-safe spelling otherwise."""
    requirement = str(torch_requirement or "").strip()
    if not requirement:
        return "no-torch"
    pinned = _PINNED_TORCH.match(requirement)
    if pinned:
        return "torch-" + pinned.group(1)
    return _UNSAFE.sub("-", requirement).strip("-") or "no-torch"


def lock_name(version: str, torch_requirement: str) -> str:
    """The lock's file name: ``sglang-0.5.23-torch-2.14.1.txt``."""
    return f"sglang-{str(version).strip()}-{lock_variant(torch_requirement)}.txt"


# The role variables that choose the lock (roles/sglang/defaults/main.yml), in the order their defaults use each other.
LOCK_VARS = ("sglang_lock", "sglang_torch_requirement", "sglang_locks_dir", "sglang_lock_file")


def pins(text: str, version: str) -> bool:
    """Whether a lock's ``text`` pins ``sglang==<version>`` (what roles/sglang/tasks/lock.yml asserts)."""
    return re.search(rf"(?m)^sglang=={re.escape(str(version))}( |;|$)", text) is not None


def lock_state(path: str, version: str) -> str:
    """"" when ``path`` (on the control node; a relative path from the current directory, as the role's ``is file``
    test reads it) is a lock of SGLang ``version``, else why it is not."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return "no such file on the control node"
    except IsADirectoryError:
        return "a directory, not a lock file"
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable ({exc.__class__.__name__}: {exc})"
    return "" if pins(text, version) else f"it does not pin sglang=={version}"


def locked_releases(locks_dir: str, torch_requirement: str, releases: Iterable[str]) -> list[str]:
    """The releases among ``releases`` whose lock for ``torch_requirement`` is in ``locks_dir`` (named as roles/sglang
    looks for it, and pinning that release), in the order given."""
    return [v for v in releases if not lock_state(os.path.join(str(locks_dir), lock_name(v, torch_requirement)), v)]


class LockRefusal(NamedTuple):
    """Why the validator refuses a host's locked install: the parts of a validation problem."""

    rule: str
    variable: str
    value: Any
    message: str
    fix: str


def lock_refusal(version: str, torch_requirement: str, locks_dir: str, lock_file: str, lock_file_set: bool,
                 releases: Iterable[str]) -> LockRefusal | None:
    """None when ``lock_file`` is a lock of SGLang ``version``; else the refusal of a host with ``sglang_lock`` true.

    ``lock_file_set``: the host sets sglang_lock_file itself (the refusal names it), else it is the lock of
    ``version`` and ``torch_requirement`` in ``locks_dir`` (the refusal names sglang_version). ``releases``: those
    the validator accepts; the refusal lists which of them have a lock in ``locks_dir`` for ``torch_requirement``.
    The fixes are for any user: of the project's repository or of the installed collection.
    """
    version, torch_requirement = str(version), str(torch_requirement or "")
    why = lock_state(str(lock_file), version)
    if not why:
        return None
    available = locked_releases(locks_dir, torch_requirement, releases)
    torch = f"sglang_torch_requirement {torch_requirement!r}" if torch_requirement else "no torch requirement"
    rule = "lock.mismatch" if why.startswith("it does not pin") else "lock.missing"
    where = f"sglang_lock_file {lock_file}" if lock_file_set else f"{os.path.basename(str(lock_file))} in sglang_locks_dir"
    message = (f"sglang_lock is true, so roles/sglang installs SGLang {version} only from its hashed lock; {where}: {why}. "
               f"Releases with a lock for {torch} in sglang_locks_dir {locks_dir}: "
               f"{', '.join(available) if available else 'none'}.")
    fixes = [f"set sglang_lock: false to install SGLang {version} unlocked (sglang and torch pinned, the rest resolved "
             "at install time)",
             f"compile its lock in the project's repository with tools/sglang_lock.py --version {version} --torch "
             f"{torch_requirement!r} --out-dir DIR (a directory of your own) and point sglang_locks_dir at DIR (or "
             "sglang_lock_file at the file)"]
    if available and not lock_file_set:
        fixes.append(f"pin a release locked there: sglang_version: \"{available[-1]}\"")
    return LockRefusal(rule, "sglang_lock_file" if lock_file_set else "sglang_version",
                       str(lock_file) if lock_file_set else version, message, "; or ".join(fixes))
