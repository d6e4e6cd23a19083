"""The collection uses ansible-core through its public interfaces only (issue 31, "render once").

Any ansible-core minor release may move or change what it does not publish: ``ansible._internal`` (and any other module
path with a ``_`` component), and the private attributes of its objects. The checks read the collection's Python
sources (AST): an import of a private module fails, and so does an attribute ``x._name`` read on anything but the
collection's own objects (``self``/``cls``, or a name the collection itself defines or assigns).

ActionBase's documented interface (``self._task``, ``self._loader``, ``self._templar`` ...) is the plugin API every
action plugin uses; reads through ``self`` are the plugin's own attributes either way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
SOURCES = sorted(p for p in COLLECTION.rglob("*.py") if "tests" not in p.relative_to(COLLECTION).parts)

# What is left, each with its reason; an entry that no longer matches fails too (the list only shrinks).
ALLOWED: dict[tuple[str, str], str] = {
    ("server_files.py", "_diff"): "AnsibleModule._diff: how a module learns of --diff (ansible-core's own modules read it)",
}


def _private_modules(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "ansible" and any(p.startswith("_") for p in parts[1:]):
                found.append(name)
    return found


def _own_names(trees: list[ast.AST]) -> set[str]:
    """Private names the collection defines: methods, functions, classes, names, and attributes it assigns to its own
    objects (``self._x = ...``; an assignment to another object's ``_x`` is a write to that object's private)."""
    own: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                own.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
    return {n for n in own if n.startswith("_")}


def _foreign_private_reads(tree: ast.AST, own: set[str]) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        # getattr(obj, "_name", ...) reads it as well
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            name = node.args[1].value
            owner = node.args[0]
            if name.startswith("_") and not name.startswith("__") and name not in own and \
                    not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                out.append((node.lineno, name))
            continue
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if node.attr in own:
            continue
        out.append((node.lineno, node.attr))
    return out


TREES = {path: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for path in SOURCES}
OWN = _own_names(list(TREES.values()))


def test_the_collection_has_python_sources() -> None:
    assert len(SOURCES) > 30


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(COLLECTION)))
def test_no_private_ansible_module_is_imported(path: Path) -> None:
    assert _private_modules(TREES[path]) == []


def test_no_private_attribute_of_an_ansible_object_is_read() -> None:
    found = {(path.name, attr): line for path, tree in TREES.items() for line, attr in _foreign_private_reads(tree, OWN)}
    unexpected = {key: line for key, line in found.items() if key not in ALLOWED}
    assert unexpected == {}
    assert set(ALLOWED) <= set(found), f"no longer read, remove from ALLOWED: {sorted(set(ALLOWED) - set(found))}"


def test_the_checks_catch_what_they_look_for() -> None:
    tree = ast.parse("from ansible._internal._templating import x\nimport ansible.utils._junit\n"
                     "def f(hostvars):\n    return hostvars._variable_manager, self._task, getattr(hostvars, '_inventory')\n")
    assert _private_modules(tree) == ["ansible._internal._templating", "ansible.utils._junit"]
    assert sorted(_foreign_private_reads(tree, set())) == [(4, "_inventory"), (4, "_variable_manager")]
    assert _foreign_private_reads(tree, {"_variable_manager", "_inventory"}) == []
