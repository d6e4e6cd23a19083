"""The sanity ignore file's ``import-3.11`` lines match the plugins that need them.

ansible-test's import test loads every controller-side plugin in a bare
virtualenv that lacks ``packaging`` (ansible-core requires it, the test's venv
does not install it). A plugin that imports ``packaging`` at module level, or
imports a collection module that does, fails there unless the ignore file names
it; a line for a plugin that no longer needs one fails too ("ignored but no
error"). CI once failed on a new rule module that imported the registry: this
test finds that in the unit tier, in a second, instead of after the sanity lane.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "collections" / "ansible_collections" / "blackwell" / "sglang"
PLUGINS = COLLECTION / "plugins"
IGNORES = COLLECTION / "tests" / "sanity" / "ignore-2.19.txt"
PREFIX = "ansible_collections.blackwell.sglang."
# Module-side code is imported under other rules (and must not use packaging).
MODULE_SIDE = ("modules", "module_utils")


def _module_name(path: Path) -> str:
    rel = path.relative_to(COLLECTION).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return PREFIX + ".".join(parts)


def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in PLUGINS.rglob("*.py")}


def _top_level_imports(path: Path, name: str) -> set[str]:
    """Modules imported when ``path`` is imported (not those inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.add(base)
                # ``from pkg import sub`` imports the submodule when it is one.
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return found


def _needs_packaging() -> set[str]:
    files = _files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges: set[str] = set()
        for imported in _top_level_imports(path, name):
            if imported == "packaging" or imported.startswith("packaging."):
                edges.add("packaging")
                continue
            # Importing a.b.c runs a/__init__, a/b/__init__ and c.
            parts = imported.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in files and prefix != name:
                    edges.add(prefix)
        graph[name] = edges
    # The package __init__ files above a module run first as well.
    for name in files:
        parts = name.split(".")
        for i in range(len(PREFIX.split(".")), len(parts)):
            parent = ".".join(parts[:i])
            if parent in files:
                graph[name].add(parent)

    needs: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, edges in graph.items():
            if name not in needs and ("packaging" in edges or edges & needs):
                needs.add(name)
                changed = True
    return {
        str(files[name].relative_to(COLLECTION))
        for name in needs
        if files[name].relative_to(PLUGINS).parts[0] not in MODULE_SIDE
    }


def _ignored() -> set[str]:
    lines = IGNORES.read_text(encoding="utf-8").splitlines()
    return {
        line.split()[0]
        for line in lines
        if line.strip() and not line.startswith("#") and line.split()[1] == "import-3.11"
    }


def test_every_plugin_that_imports_packaging_is_ignored_for_the_import_test() -> None:
    missing = _needs_packaging() - _ignored()
    assert not missing, (
        f"add 'import-3.11' lines to {IGNORES.relative_to(ROOT)} for {sorted(missing)}: "
        "they import packaging (directly or through a collection module) at module level"
    )


def test_no_import_ignore_is_left_for_a_plugin_that_no_longer_needs_it() -> None:
    stale = _ignored() - _needs_packaging()
    assert not stale, f"ansible-test fails on unneeded ignores; remove the import-3.11 lines for {sorted(stale)}"


def test_the_walk_sees_the_rule_modules_through_the_registry() -> None:
    # The case that failed CI: stack.py imports nothing from packaging itself.
    assert "plugins/plugin_utils/sglang_rules/stack.py" in _needs_packaging()
