"""The roles' defaults files are the one source of every default of the plan, contract and gateway inputs (issue 31,
build item 1): the validate and check_inputs actions and the filters read them and pass them in; the collection's
Python keeps no copy of one.

A copy is found by the collection's Python string constants (AST) against the scalar defaults of the roles whose
defaults those checks read (sglang_deployment.DEFAULTS_ROLES):

- a distinctive default (a path, ``/opt/sglang/models``; a release, ``0.5.23``) anywhere in the plugins' code is a
  copy, docstrings aside (they explain, they decide nothing);
- a plain word (``sglang``, ``main``, ``sglang_servers``) is a copy where the code falls back on it for the variable
  whose default it is (``x.get("sglang_model_revision") or "main"``, ``x.get(VAR, "sglang_servers")``), maps that
  variable to it (``{"sglang_router_host": "127.0.0.1"}``), or where a name says it holds a default
  (``DEFAULT_SERVICE = "sglang"``).

Outside the check: plugin_utils/schemas (SGLang's own argument schemas) and plugin_utils/sglang_rules (whose release
numbers are SGLang's version ranges, not a role's default).
"""

from __future__ import annotations

import ast
import ipaddress
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_deployment as deployment
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway as gateway
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_hostplan as hostplan
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_validate as validate
from role_defaults import ROLE_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang" / "plugins"
SOURCES = sorted(p for d in ("plugin_utils", "action", "filter") for p in (PLUGINS / d).glob("*.py"))
VERSION = re.compile(r"[0-9]+(\.[0-9]+)+")

# Constants equal to a role default that are not a copy of it, each with its reason: (file, value) -> why.
ALLOWED: dict[tuple[str, str], str] = {
    ("monitoring.py", "/ready"): "SGLang's readiness route, which Prometheus probes (job sglang-ready); equal to the "
                                 "default of sglang_server_ready_path, not a copy of it",
}


def role_defaults() -> dict[str, Any]:
    """variable -> its default, for every scalar default of the roles the checks read (deployment.DEFAULTS_ROLES)."""
    out: dict[str, Any] = {}
    for role in deployment.DEFAULTS_ROLES:
        data = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8")) or {}
        out.update({k: v for k, v in data.items() if isinstance(v, (str, int, float, bool))})
    return out


DEFAULTS = role_defaults()
def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


# Paths and releases: a constant equal to one is a copy wherever it is (an address such as 127.0.0.1 is a word).
DISTINCTIVE = {v: k for k, v in DEFAULTS.items()
               if isinstance(v, str) and (v.startswith("/") or (VERSION.fullmatch(v) and not _is_address(v)))}
# Other text defaults (names, words): a copy where the code falls back on it for its own variable.
WORDS = {k: v for k, v in DEFAULTS.items() if isinstance(v, str) and v and v not in DISTINCTIVE and "{{" not in v}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _names(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a text constant (``SERVICE_VAR = "sglang_server_service_name"``)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _text(node: ast.AST | None, names: dict[str, str]) -> str | None:
    """What a key expression names: a text constant, or a module-level name bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):  # contract.MODELS_DIR_VAR: another module's constant, by its name
        return KNOWN_NAMES.get(node.attr)
    return None


KNOWN_NAMES = {n: v for m in (contract, deployment, gateway, hostplan, validate)
               for n, v in vars(m).items() if n.isupper() and isinstance(v, str)}


def _looked_up(node: ast.AST, names: dict[str, str]) -> str | None:
    """The variable ``node`` reads: ``x.get(VAR)``, ``x.get(VAR, ...)``, ``x[VAR]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return _text(node.args[0], names)
    if isinstance(node, ast.Subscript):
        return _text(node.slice, names)
    return None


def copies(source: Path) -> Iterator[tuple[int, str, str]]:
    """(line, value, variable) for each constant of ``source`` that copies a role default."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    docs, names = _docstrings(tree), _names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in DISTINCTIVE \
                and id(node) not in docs:
            yield node.lineno, node.value, DISTINCTIVE[node.value]
        # x.get(VAR) or "default"
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            for before, after in zip(node.values, node.values[1:], strict=False):
                var = _looked_up(before, names)
                if var in WORDS and isinstance(after, ast.Constant) and after.value == WORDS[var]:
                    yield after.lineno, str(after.value), var
        # x.get(VAR, "default")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and len(node.args) == 2:
            var = _text(node.args[0], names)
            if var in WORDS and isinstance(node.args[1], ast.Constant) and node.args[1].value == WORDS[var]:
                yield node.lineno, str(node.args[1].value), var
        # {"sglang_router_host": "127.0.0.1", ...}: a table of defaults
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                var = _text(key, names)
                if var in WORDS and isinstance(value, ast.Constant) and value.value == WORDS[var]:
                    yield value.lineno, str(value.value), var
        # DEFAULT_X = "default"
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and "DEFAULT" in t.id.upper() for t in targets) and \
                    node.value.value in WORDS.values():
                yield node.lineno, str(node.value.value), next(k for k, v in WORDS.items() if v == node.value.value)


def test_the_check_reads_the_defaults_of_the_plan_contract_and_gateway_inputs() -> None:
    # What the check compares against: the roles' own values of what the planner, the contract and the gateway read.
    for name in (*hostplan.PLANNER_DEFAULTS, *deployment.DEFAULTS_READ):
        assert name in DEFAULTS or "{{" in str(ROLE_DEFAULTS.get(name, "{{")), name
    assert {"/opt/sglang/models", "0.5.23", "/var/lib/sglang", "/etc/sglang-router", "0.3.2"} <= set(DISTINCTIVE)
    assert {"sglang_server_service_name", "sglang_model_revision", "sglang_router_worker_group"} <= set(WORDS)
    assert len(SOURCES) > 15 and not [p for p in SOURCES if "sglang_rules" in p.parts or "schemas" in p.parts]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_python_copy_of_a_role_default(source: Path) -> None:
    found = [f"{source.name}:{line}: {value!r} is the default of {var} (roles/*/defaults/main.yml): pass it in from "
             "the roles' defaults files instead" for line, value, var in copies(source)
             if (source.name, value) not in ALLOWED]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("code", [
    'DEFAULT_SERVICE = "sglang"\n',
    'DEFAULT_MODELS_DIR = "/opt/sglang/models"\n',
    'def f(h):\n    return str(h.get("sglang_version") or "0.5.23")\n',
    'def f(raw):\n    return raw.get(SERVICE_VAR) or "sglang"\nSERVICE_VAR = "sglang_server_service_name"\n',
    'def f(v):\n    return v.get("sglang_router_worker_group", "sglang_servers")\n',
    'def f(v):\n    return v.get("sglang_model_revision") or "main"\n',
    'ROOTS = ("/var/lib/sglang", "/var/cache/sglang")\n',
    'TABLE = {"sglang_router_host": "127.0.0.1", "sglang_router_service_name": "sglang-router"}\n',
])
def test_the_check_finds_a_copy(tmp_path: Path, code: str) -> None:
    source = tmp_path / "copy.py"
    source.write_text(code, encoding="utf-8")
    assert list(copies(source))


@pytest.mark.parametrize("code", [
    '"""A docstring may name /opt/sglang/models and 0.5.23."""\n',
    'def f(v):\n    return v.get("server_group") or "other"\n',
    'UNIT_NAMESPACE = "sglang"\n',
])
def test_the_check_leaves_what_is_no_copy(tmp_path: Path, code: str) -> None:
    source = tmp_path / "plain.py"
    source.write_text(code, encoding="utf-8")
    assert not list(copies(source))


def test_the_consumers_require_the_defaults_rather_than_keep_their_own() -> None:
    with pytest.raises(TypeError, match="sglang_models_dir"):
        contract.context_of({}, {})
    with pytest.raises(TypeError, match="sglang_version"):
        validate.validate_host({"sglang_model_path": "Qwen/Qwen3-8B"})
    with pytest.raises(TypeError, match="sglang_server_service_name"):
        hostplan.plan_host("h", {"h": {}}, {"all": ["h"]}, role_defaults={})
    with pytest.raises(TypeError, match="sglang_router_host"):
        gateway.gateway_problems({"sglang_router_port": 30001}, {})
    with pytest.raises(TypeError, match="sglang_router_worker_group"):
        deployment.gateway_problems("gw", {}, {}.__getitem__, {}, {}, {})
    assert contract.context_of({}, ROLE_DEFAULTS).service_roots[-1] == DEFAULTS["sglang_models_dir"]
