"""ansible-doc documents every module, action plugin and filter of blackwell.sglang; its README lists them.

The plugins are found by listing the collection's files (and asking each filter file for its filters), so a
new plugin without documentation fails here.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "collections"
COLLECTION = COLLECTIONS / "ansible_collections" / "blackwell" / "sglang"
PLUGINS = COLLECTION / "plugins"
FQCN = "blackwell.sglang"


def plugin_files(kind: str) -> list[str]:
    """Names of the Python plugin files of one plugin directory (``modules``, ``action``, ``filter``)."""
    return sorted(p.stem for p in (PLUGINS / kind).glob("*.py") if p.stem != "__init__")


def modules() -> list[str]:
    """Every module a task can name: module files and action plugins (documented by a same-named module file)."""
    return sorted({*plugin_files("modules"), *plugin_files("action")})


def filters() -> list[str]:
    """Every filter of every filter file, from its ``FilterModule().filters()``."""
    names: set[str] = set()
    for stem in plugin_files("filter"):
        module = importlib.import_module(f"ansible_collections.blackwell.sglang.plugins.filter.{stem}")
        names.update(module.FilterModule().filters())
    return sorted(names)


def ansible_doc(plugin_type: str, names: list[str], cwd: Path) -> dict[str, Any]:
    """``ansible-doc --json`` of the named plugins, with the repository's collections only and no ansible.cfg."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(COLLECTIONS)
    cmd = [str(Path(sys.executable).parent / "ansible-doc"), "-t", plugin_type, "--json", *(f"{FQCN}.{n}" for n in names)]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_plugins_are_found() -> None:
    assert {"validate", "wait_ready", "gpu_health", "server_probe"} <= set(modules())
    assert {"systemd_quote", "instance_plans", "scrape_configs"} <= set(filters())


def test_every_action_plugin_has_a_docs_module() -> None:
    missing = sorted(set(plugin_files("action")) - set(plugin_files("modules")))
    assert not missing, f"action plugins without plugins/modules/<name>.py documentation: {missing}"


def text(value: Any) -> str:
    """A documentation field (a string or a list of paragraphs) as one string; anything else (YAML that parsed
    a paragraph as a mapping) fails."""
    paragraphs = value if isinstance(value, list) else [value or ""]
    assert all(isinstance(p, str) for p in paragraphs), f"not text: {value!r}"
    return " ".join(paragraphs)


def documented(kind: str, names: list[str], tmp_path: Path) -> dict[str, Any]:
    """ansible-doc's JSON for ``names``: every one documented, with a short description, a description and
    EXAMPLES."""
    docs = ansible_doc(kind, names, tmp_path)
    assert sorted(k.removeprefix(f"{FQCN}.") for k in docs) == names
    for name, doc in docs.items():
        assert text(doc["doc"].get("short_description")).strip(), f"{name}: no short_description"
        assert text(doc["doc"].get("description")).strip(), f"{name}: no description"
        assert (doc.get("examples") or "").strip(), f"{name}: no EXAMPLES"
    return docs


ATTRIBUTES = ("check_mode", "diff_mode", "platform")
SUPPORT = ("full", "partial", "none", "N/A")


def test_ansible_doc_documents_every_module(tmp_path: Path) -> None:
    for name, doc in documented("module", modules(), tmp_path).items():
        assert doc["doc"].get("author"), f"{name}: no author"
        assert doc.get("return"), f"{name}: no RETURN"
        # check_mode, diff_mode and platform, described once by the blackwell.sglang.attributes fragment.
        assert f"{FQCN}.attributes" in (PLUGINS / "modules" / f"{name.removeprefix(FQCN + '.')}.py").read_text(), name
        attributes = doc["doc"].get("attributes") or {}
        for attribute in ATTRIBUTES:
            entry = attributes.get(attribute) or {}
            assert text(entry.get("description")).strip(), f"{name}: attribute {attribute} has no description"
            assert entry.get("support") in SUPPORT, f"{name}: attribute {attribute}: support {entry.get('support')!r}"
        assert attributes["platform"].get("platforms"), f"{name}: attribute platform names no platforms"


def test_ansible_doc_documents_every_filter(tmp_path: Path) -> None:
    for name, doc in documented("filter", filters(), tmp_path).items():
        assert "_input" in doc["doc"].get("options", {}), f"{name}: the filtered value (_input) is not documented"
        assert doc.get("return", {}).get("_value"), f"{name}: no RETURN _value"


def shipped() -> list[str]:
    """Every name the collection ships: modules, filters, and the roles and playbooks `make dist` adds."""
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if p.is_dir())
    playbooks = sorted(p.stem for p in (REPO / "playbooks").glob("*.yml"))
    return [*modules(), *filters(), *roles, *playbooks]


@pytest.mark.parametrize("name", shipped())
def test_collection_readme_lists_it(name: str) -> None:
    assert f"`{FQCN}.{name}`" in (COLLECTION / "README.md").read_text(encoding="utf-8")
