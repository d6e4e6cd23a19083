"""Names of the hashed locks of SGLang's virtualenv (``uv pip compile --universal --generate-hashes``).

One lock per SGLang release and torch variant: ``sglang-<version>-<variant>.txt``, where the variant is
``torch-<version>`` for a ``torch==<version>`` requirement, ``no-torch`` for none, and the requirement's
characters otherwise. roles/sglang picks its lock by this name (filter ``blackwell.sglang.sglang_lock_name``)
and ``tools/sglang_lock.py`` (``make lock``) writes it under the same name.
"""

from __future__ import annotations

import re

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
