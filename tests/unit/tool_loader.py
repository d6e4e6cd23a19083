"""Import a script of tools/ as a module under a private name (plugin_utils has modules of the same names)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py, imported as ``_<name>_tool``."""
    spec = importlib.util.spec_from_file_location(f"_{name}_tool", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
