#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Extract the complete ``sglang.launch_server`` CLI schema from an sglang wheel, statically.

The wheel is opened as a zip archive; nothing is installed and nothing from
sglang (or torch) is imported.  The argparse parser that
``python -m sglang.launch_server`` builds is reconstructed from the source
with :mod:`ast`:

* ``ServerArgs`` (``sglang/srt/server_args.py``) is assembled from namespace
  classes (``_INPUT_NAMESPACES`` passed to ``collect_input_fields``) whose
  fields are annotated ``A[T, "help"]`` or ``A[T, Arg(...)]``; the field order
  is ``POSITIONAL_FIELD_ORDER`` first, then the remaining fields in namespace
  declaration order, exactly as ``collect_input_fields`` does.
* ``ServerArgs.add_cli_args`` is interpreted statement by statement: the call
  to ``add_cli_args_from_dataclass`` is replayed with the same decisions as
  ``sglang/srt/arg_groups/arg_utils.py`` (option strings, dest, Literal
  choices, list nargs, bool store_true, Optional unwrapping, required), and
  every manual ``parser.add_argument(...)`` is recorded, including calls made
  by helper functions that receive the parser.
* ``choices=`` and defaults are evaluated by a small constant evaluator that
  follows imports across the wheel (lists, tuples, sets, dict keys, ``+``,
  ``list()``/``sorted()``, comprehensions, enum members, class attributes and
  simple helper functions).  Choices that depend on the runtime (environment
  variables, plugin registries, conditionally mutated lists) are marked
  ``"choices_dynamic": true`` with the statically resolved part.

Each argument record mirrors the attributes of the ``argparse.Action`` the
real parser would hold (``nargs`` is therefore ``0`` for flags that take no
value, ``const`` is ``true`` for ``store_true``), plus ``deprecated``,
``choices_dynamic`` and ``source`` (``path-in-wheel:line``).

Usage::

    python3 tools/sglang_schema.py --version 0.5.23 --out schema.json
    python3 tools/sglang_schema.py --version 0.5.23 --download-only
"""

from __future__ import annotations

import argparse
import ast
import builtins
import dataclasses
import functools
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

FORMAT = 1
GENERATOR = "tools/sglang_schema.py"
DEFAULT_WHEEL_DIR = ".cache/sglang-wheels"
SERVER_ARGS_MODULE = "sglang.srt.server_args"
SERVER_ARGS_CLASS = "ServerArgs"
ARG_UTILS_MODULE = "sglang.srt.arg_groups.arg_utils"
DATACLASS_REGISTRAR = "add_cli_args_from_dataclass"
DECLARED_DEFAULT_HELPER = "_declared_default"

# Attributes of argparse.Action that a custom action's __init__ may default.
ACTION_ATTRS = ("nargs", "const", "default", "type", "choices", "required", "help", "metavar")
STRING_ACTIONS = {"store", "store_const", "store_true", "store_false", "append", "append_const", "count", "extend"}
ENUM_BASES = {"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag"}
STDLIB_CONSTANTS = {
    "argparse.SUPPRESS": "==SUPPRESS==",
    "argparse.OPTIONAL": "?",
    "argparse.ZERO_OR_MORE": "*",
    "argparse.ONE_OR_MORE": "+",
    "argparse.REMAINDER": "...",
}
BUILTIN_TYPES = {"builtins.str": "str", "builtins.int": "int", "builtins.float": "float", "builtins.bool": "bool"}

# Hand-written one-liners for helpers whose docstrings are missing or say too little.
KNOWN_TYPE_SUMMARIES = {
    "json.loads": "any JSON document (stdlib json.loads); the value is the decoded JSON object/list/scalar",
    "json_list_type": "any JSON document parsed with orjson.loads (despite the name not restricted to lists); "
    "invalid JSON raises ArgumentTypeError",
    "human_readable_int": "an integer, optionally with SI suffix k/M/G/T (decimals allowed, e.g. 25.6k) "
    "or IEC suffix Ki/Mi/Gi/Ti (integers only); case-sensitive",
    "nullable_str": "any string; '' or 'None' become None",
    "parse_cuda_graph_config_arg": "a JSON object mapping phase ('decode'/'prefill') to a settings object "
    "whose keys are checked against ALLOWED_KEYS_PER_PHASE",
    "parse_cuda_graph_backend_arg": "any string except the retired 'tc_piecewise' "
    "(choices are then checked by argparse)",
}
KNOWN_ACTION_SUMMARIES = {
    "BooleanOptionalAction": "stdlib argparse: --X stores True, --no-X stores False; takes no value (nargs=0)",
    "LoRAPathAction": "takes zero or more values (nargs='*'); each is a path, NAME=PATH, or a JSON object "
    "with lora_name/lora_path; stores the list",
    "DeprecatedStoreTrueAction": "deprecated boolean flag: takes no value (nargs=0), warns and stores True",
    "DeprecatedStoreConstAction": "deprecated flag: warns and stores its const_value into dest; "
    "nargs=0 unless registered with nargs=None (then takes one value from choices)",
    "DeprecatedAction": "retired flag: nargs=0 by default; errors with error_message, otherwise only warns",
    "DeprecatedAliasStoreAction": "deprecated renamed valued flag: warns and stores the value into the new dest",
}


class Unresolved(Exception):
    """Raised when an expression cannot be evaluated statically."""


# ---------------------------------------------------------------------------
# Wheel handling
# ---------------------------------------------------------------------------


def find_wheel(version: str, wheel_dir: Path) -> Path | None:
    """Return the first (sorted) ``sglang-<version>-*.whl`` in ``wheel_dir``, if any."""
    matches = sorted(wheel_dir.glob(f"sglang-{version}-*.whl"))
    return matches[0] if matches else None


def download_wheel(version: str, wheel_dir: Path) -> Path:
    """Download the sglang wheel of ``version`` (no dependencies) into ``wheel_dir``."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        f"sglang=={version}",
        "-d",
        str(wheel_dir),
    ]
    subprocess.run(cmd, check=True)
    wheel = find_wheel(version, wheel_dir)
    if wheel is None:
        raise SystemExit(f"pip download did not produce sglang-{version}-*.whl in {wheel_dir}")
    return wheel


def obtain_wheel(version: str, wheel: Path | None, wheel_dir: Path) -> Path:
    """Return the explicit wheel, a cached one, or a freshly downloaded one."""
    if wheel is not None:
        return wheel
    return find_wheel(version, wheel_dir) or download_wheel(version, wheel_dir)


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------
# Source model: modules, references
# ---------------------------------------------------------------------------


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclasses.dataclass(eq=False)
class Module:
    """One parsed Python module of the wheel."""

    name: str
    path: str
    source: str
    tree: ast.Module
    is_package: bool = False

    def segment(self, node: ast.AST) -> str:
        """Source text of ``node``: what ``ast.get_source_segment`` returns, from lines split once per module (that
        function splits the whole source again on every call, minutes over a release's large modules)."""
        lineno, end_lineno = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if lineno is None or end_lineno is None or col is None or end_col is None:
            return ast.unparse(node)
        lines = self._lines
        if end_lineno == lineno:
            text = lines[lineno - 1].encode()[col:end_col].decode()
        else:
            first = lines[lineno - 1].encode()[col:].decode()
            last = lines[end_lineno - 1].encode()[:end_col].decode()
            text = "".join([first, *lines[lineno:end_lineno - 1], last])
        return text or ast.unparse(node)

    @functools.cached_property
    def _lines(self) -> list[str]:
        """The source's lines with their ends, split where the parser splits them (at \\r\\n, \\r and \\n only)."""
        return _LINE.findall(self.source)


@dataclasses.dataclass(frozen=True, eq=False)
class ModuleRef:
    module: Module


@dataclasses.dataclass(frozen=True, eq=False)
class ClassRef:
    module: Module
    node: ast.ClassDef


@dataclasses.dataclass(frozen=True, eq=False)
class FuncRef:
    module: Module
    node: ast.FunctionDef


@dataclasses.dataclass(frozen=True)
class Symbol:
    """A name from outside the wheel (stdlib, third party), by qualified name."""

    qualname: str


@dataclasses.dataclass(frozen=True)
class EnumMember:
    cls: str
    name: str
    value: Any


@dataclasses.dataclass(frozen=True, eq=False)
class ArgCall:
    """A call ``Arg(...)`` (arg_utils CLI metadata), keywords kept as AST."""

    module: Module
    keywords: dict[str, ast.expr]


class SourceTree:
    """Lazy view of the ``.py`` files of a wheel (or any mapping path -> text)."""

    def __init__(self, files: dict[str, str]) -> None:
        self._files = files
        self._modules: dict[str, Module | None] = {}

    @classmethod
    def from_wheel(cls, wheel: Path) -> SourceTree:
        """Read every ``.py`` file of the wheel into memory."""
        with zipfile.ZipFile(wheel) as archive:
            files = {name: archive.read(name).decode("utf-8") for name in archive.namelist() if name.endswith(".py")}
        return cls(files)

    def module(self, name: str) -> Module | None:
        """Parsed module ``name`` (``a.b.c``), or None when it is not in the tree."""
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def _load(self, name: str) -> Module | None:
        base = name.replace(".", "/")
        for path, is_package in ((base + ".py", False), (base + "/__init__.py", True)):
            if path in self._files:
                text = self._files[path]
                return Module(name, path, text, ast.parse(text, filename=path), is_package)
        return None


# ---------------------------------------------------------------------------
# Static evaluator
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Scope:
    """Local names (function body, comprehension) layered over a module."""

    module: Module
    local: dict[str, Any] = dataclasses.field(default_factory=dict)
    lazy: dict[str, tuple[ast.expr, Scope]] = dataclasses.field(default_factory=dict)
    dynamic_names: set[str] = dataclasses.field(default_factory=set)
    parent: Scope | None = None
    class_node: ast.ClassDef | None = None

    def child(self, **local: Any) -> Scope:
        return Scope(self.module, dict(local), parent=self)


class Evaluator:
    """Evaluate constant-ish expressions across the wheel's modules."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self.dynamic = False
        self.hooks: dict[str, Callable[[list[Any]], Any]] = {}
        self._cache: dict[tuple[str, str], Any] = {}
        self._active: set[tuple[str, str]] = set()

    # -- names ------------------------------------------------------------

    def module_name(self, module: Module, node: ast.ImportFrom) -> str:
        """Absolute module name of a (possibly relative) ``from`` import."""
        if not node.level:
            return node.module or ""
        parts = module.name.split(".")
        keep = len(parts) - node.level + (1 if module.is_package else 0)
        base = ".".join(parts[:keep])
        return f"{base}.{node.module}" if node.module else base

    def import_target(self, module_name: str, attr: str | None) -> Any:
        """Resolve ``from module_name import attr`` (or ``import module_name``)."""
        target = self.tree.module(module_name)
        if target is None:
            return Symbol(f"{module_name}.{attr}" if attr else module_name)
        if attr is None:
            return ModuleRef(target)
        submodule = self.tree.module(f"{module_name}.{attr}")
        binding = find_binding(target, attr)
        if binding is None and submodule is not None:
            return ModuleRef(submodule)
        return self.module_attr(target, attr)

    def module_attr(self, module: Module, name: str) -> Any:
        """Value of a module-level name, following imports and assignments."""
        key = (module.name, name)
        if key in self._cache:
            return self._cache[key]
        if key in self._active:
            raise Unresolved(f"cyclic definition of {module.name}.{name}")
        self._active.add(key)
        try:
            value = self._bind(module, name, find_binding(module, name))
        finally:
            self._active.discard(key)
        self._cache[key] = value
        return value

    def _bind(self, module: Module, name: str, binding: ast.stmt | None) -> Any:
        if binding is None:
            if hasattr(builtins, name):
                return Symbol(f"builtins.{name}")
            raise Unresolved(f"{module.name}.{name} is not defined")
        if isinstance(binding, ast.ClassDef):
            return ClassRef(module, binding)
        if isinstance(binding, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return FuncRef(module, binding)  # type: ignore[arg-type]
        if isinstance(binding, ast.ImportFrom):
            alias = next(a for a in binding.names if (a.asname or a.name) == name)
            return self.import_target(self.module_name(module, binding), alias.name)
        if isinstance(binding, ast.Import):
            alias = next(a for a in binding.names if (a.asname or a.name.split(".")[0]) == name)
            return self.import_target(alias.name if alias.asname else alias.name.split(".")[0], None)
        value_node = binding.value if isinstance(binding, (ast.Assign, ast.AnnAssign)) else None
        if value_node is None:
            raise Unresolved(f"{module.name}.{name} has no value")
        value = self.eval(value_node, Scope(module))
        return apply_module_mutations(self, module, name, binding, value)

    def lookup(self, name: str, scope: Scope) -> Any:
        """Resolve ``name`` through local scopes, then the module."""
        current: Scope | None = scope
        while current is not None:
            if name in current.dynamic_names:
                self.dynamic = True
            if name in current.local:
                return current.local[name]
            if name in current.lazy:
                node, owner = current.lazy.pop(name)
                saved, self.dynamic = self.dynamic, False
                current.local[name] = self.eval(node, owner)
                if self.dynamic:
                    current.dynamic_names.add(name)
                self.dynamic = saved or self.dynamic
                return current.local[name]
            if current.class_node is not None:
                binding = find_class_binding(current.class_node, name)
                if binding is not None:
                    return self.eval(binding, current.parent or Scope(current.module))
            current = current.parent
        return self.module_attr(scope.module, name)

    # -- expressions ------------------------------------------------------

    def eval(self, node: ast.expr, scope: Scope) -> Any:
        """Evaluate ``node``; raise :class:`Unresolved` when it is not static."""
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            raise Unresolved(f"unsupported expression {ast.unparse(node)}")
        return method(node, scope)

    def _eval_Constant(self, node: ast.Constant, scope: Scope) -> Any:
        return node.value

    def _eval_Name(self, node: ast.Name, scope: Scope) -> Any:
        return self.lookup(node.id, scope)

    def _eval_List(self, node: ast.List, scope: Scope) -> list:
        return [item for elt in node.elts for item in self._element(elt, scope)]

    def _eval_Tuple(self, node: ast.Tuple, scope: Scope) -> tuple:
        return tuple(item for elt in node.elts for item in self._element(elt, scope))

    def _eval_Set(self, node: ast.Set, scope: Scope) -> set:
        return {item for elt in node.elts for item in self._element(elt, scope)}

    def _element(self, elt: ast.expr, scope: Scope) -> list:
        if isinstance(elt, ast.Starred):
            return list(iterate(self.eval(elt.value, scope)))
        return [self.eval(elt, scope)]

    def _eval_Dict(self, node: ast.Dict, scope: Scope) -> dict:
        out: dict = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(self.eval(value, scope))
            else:
                out[self.eval(key, scope)] = self.eval(value, scope)
        return out

    def _eval_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> str:
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            assert isinstance(value, ast.FormattedValue)
            obj = self.eval(value.value, scope)
            converters: dict[int, Callable[[Any], str]] = {ord("r"): repr, ord("s"): str, ord("a"): ascii}
            if value.conversion in converters:
                obj = converters[value.conversion](obj)
            spec = self.eval(value.format_spec, scope) if value.format_spec else ""
            parts.append(format(obj, spec))
        return "".join(parts)

    def _eval_UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
        operand = self.eval(node.operand, scope)
        ops = {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v, ast.Not: lambda v: not v, ast.Invert: lambda v: ~v}
        return ops[type(node.op)](operand)

    def _eval_BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
        left, right = self.eval(node.left, scope), self.eval(node.right, scope)
        ops: dict[type, Callable[[Any, Any], Any]] = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.Div: lambda a, b: a / b,
            ast.FloorDiv: lambda a, b: a // b,
            ast.Mod: lambda a, b: a % b,
            ast.Pow: lambda a, b: a**b,
            ast.LShift: lambda a, b: a << b,
            ast.RShift: lambda a, b: a >> b,
            ast.BitOr: lambda a, b: a | b,
            ast.BitAnd: lambda a, b: a & b,
        }
        if type(node.op) not in ops or not all(is_plain(v) for v in (left, right)):
            raise Unresolved(ast.unparse(node))
        try:
            return ops[type(node.op)](left, right)
        except TypeError as exc:
            raise Unresolved(ast.unparse(node)) from exc

    def _eval_Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        return self.attribute(self.eval(node.value, scope), node.attr)

    def attribute(self, base: Any, attr: str) -> Any:
        """``base.attr`` for modules, classes, enum members, symbols and plain values."""
        if isinstance(base, (FuncRef, ClassRef)) and attr == "__doc__":
            return ast.get_docstring(base.node, clean=False)
        if isinstance(base, ModuleRef):
            return self.import_target(base.module.name, attr)
        if isinstance(base, Symbol):
            qualname = f"{base.qualname}.{attr}"
            return STDLIB_CONSTANTS.get(qualname, Symbol(qualname))
        if isinstance(base, ClassRef):
            return self.class_attr(base, attr)
        if isinstance(base, EnumMember) and attr in ("name", "value"):
            return getattr(base, attr)
        if is_plain(base) and hasattr(base, attr):
            return BoundMethod(base, attr)
        if isinstance(base, dict) and attr == "keys" and all(is_plain(k) for k in base):
            return BoundMethod(base, attr)  # a registry of classes by name (0.5.20's DetectorMap): its names are static
        raise Unresolved(f"attribute {attr} of {base!r}")

    def class_attr(self, cls: ClassRef, attr: str) -> Any:
        """A class-body attribute; enum members become :class:`EnumMember`."""
        if self.is_enum(cls):
            for member in self.enum_members(cls):
                if member.name == attr:
                    return member
        binding = find_class_binding(cls.node, attr)
        if binding is None:
            for base in self.class_bases(cls):
                try:
                    return self.class_attr(base, attr)
                except Unresolved:
                    continue
            raise Unresolved(f"{cls.node.name}.{attr}")
        return self.eval(binding, Scope(cls.module, class_node=cls.node, parent=Scope(cls.module)))

    def class_bases(self, cls: ClassRef) -> list[ClassRef]:
        """Base classes that are defined in the wheel."""
        bases = []
        for base in cls.node.bases:
            try:
                value = self.eval(base, Scope(cls.module))
            except Unresolved:
                continue
            if isinstance(value, ClassRef):
                bases.append(value)
        return bases

    def is_enum(self, cls: ClassRef) -> bool:
        """Whether ``cls`` derives from a stdlib enum class."""
        for base in cls.node.bases:
            try:
                value = self.eval(base, Scope(cls.module))
            except Unresolved:
                continue
            if isinstance(value, Symbol) and value.qualname in ENUM_BASES:
                return True
            if isinstance(value, ClassRef) and self.is_enum(value):
                return True
        return False

    def enum_members(self, cls: ClassRef) -> list[EnumMember]:
        """Canonical enum members in definition order (aliases dropped)."""
        members: list[EnumMember] = []
        seen: list[Any] = []
        scope = Scope(cls.module, class_node=cls.node, parent=Scope(cls.module))
        for stmt in cls.node.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            name = stmt.targets[0].id
            if name.startswith("_"):
                continue
            value = self.eval(stmt.value, scope)
            if value in seen:
                continue
            seen.append(value)
            members.append(EnumMember(cls.node.name, name, value))
        return members

    def _eval_Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
        base, index = self.eval(node.value, scope), self.eval(node.slice, scope)
        if not is_plain(base):
            raise Unresolved(ast.unparse(node))
        return base[index]

    def _eval_ListComp(self, node: ast.ListComp, scope: Scope) -> list:
        return list(self._comprehension(node.elt, node.generators, scope))

    def _eval_SetComp(self, node: ast.SetComp, scope: Scope) -> set:
        return set(self._comprehension(node.elt, node.generators, scope))

    def _eval_GeneratorExp(self, node: ast.GeneratorExp, scope: Scope) -> list:
        return list(self._comprehension(node.elt, node.generators, scope))

    def _comprehension(self, elt: ast.expr, generators: list[ast.comprehension], scope: Scope) -> Iterator[Any]:
        if not generators:
            yield self.eval(elt, scope)
            return
        first, rest = generators[0], generators[1:]
        if not isinstance(first.target, ast.Name):
            raise Unresolved("comprehension target must be a name")
        for item in iterate(self.eval(first.iter, scope), self):
            inner = scope.child(**{first.target.id: item})
            if all(self.eval(cond, inner) for cond in first.ifs):
                yield from self._comprehension(elt, rest, inner)

    def _eval_Call(self, node: ast.Call, scope: Scope) -> Any:
        func = self.eval(node.func, scope)
        if isinstance(func, ClassRef) and func.node.name == "Arg":
            keywords = dict(zip(arg_field_order(self), node.args, strict=False))
            keywords.update({kw.arg: kw.value for kw in node.keywords if kw.arg})
            return ArgCall(scope.module, keywords)
        if node.keywords:
            raise Unresolved(f"keyword call {ast.unparse(node)}")
        args = [item for arg in node.args for item in self._element(arg, scope)]
        return self.call(func, args, node)

    def call(self, func: Any, args: list[Any], node: ast.Call) -> Any:
        """Apply a supported callable to evaluated arguments."""
        if isinstance(func, BoundMethod):
            return func.invoke(args)
        if isinstance(func, Symbol):
            return call_builtin(func.qualname, args, self)
        if isinstance(func, FuncRef):
            hook = self.hooks.get(func.node.name)
            if hook is not None:
                return hook(args)
            return self.call_function(func, args)
        raise Unresolved(f"call {ast.unparse(node)}")

    def call_function(self, func: FuncRef, args: list[Any]) -> Any:
        """Evaluate a helper function: bind params and imports, return its last top-level return."""
        params = [a.arg for a in func.node.args.args]
        scope = Scope(func.module, dict(zip(params, args, strict=False)))
        bind_function_imports(self, func.node, scope)
        returns = [n for n in ast.walk(func.node) if isinstance(n, ast.Return)]
        final = func.node.body[-1] if func.node.body else None
        if not isinstance(final, ast.Return) or final.value is None:
            raise Unresolved(f"{func.node.name} does not end in a return")
        if len(returns) > 1 or any(isinstance(s, (ast.If, ast.Try, ast.For, ast.While)) for s in func.node.body):
            self.dynamic = True
        for stmt in func.node.body[:-1]:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                scope.lazy[stmt.targets[0].id] = (stmt.value, scope)
        return self.eval(final.value, scope)


@dataclasses.dataclass(frozen=True)
class BoundMethod:
    """A method of a plain value (``str.lower``, ``dict.keys``...)."""

    obj: Any
    name: str

    def invoke(self, args: list[Any]) -> Any:
        if self.name not in SAFE_METHODS:
            raise Unresolved(f"method {self.name}")
        result = getattr(self.obj, self.name)(*args)
        return list(result) if self.name in ("keys", "values", "items") else result


SAFE_METHODS = {
    "lower",
    "upper",
    "strip",
    "replace",
    "split",
    "join",
    "keys",
    "values",
    "items",
    "copy",
    "get",
    "format",
}


ITERABLE_BUILTINS = ("builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset", "builtins.sorted")


def call_builtin(qualname: str, args: list[Any], evaluator: Evaluator) -> Any:
    """Evaluate a call to a stdlib builtin that only reshapes static data."""
    builtins_: dict[str, Callable[..., Any]] = {
        "builtins.list": list,
        "builtins.tuple": tuple,
        "builtins.set": set,
        "builtins.frozenset": frozenset,
        "builtins.sorted": sorted,
        "builtins.dict": dict,
        "builtins.str": str,
        "builtins.int": int,
        "builtins.float": float,
        "builtins.len": len,
        "builtins.bool": bool,
    }
    if qualname not in builtins_:
        raise Unresolved(f"call to {qualname}")
    if qualname in ITERABLE_BUILTINS and args:
        return builtins_[qualname](iterate(args[0], evaluator))
    return builtins_[qualname](*args)


def iterate(value: Any, evaluator: Evaluator | None = None) -> Iterable[Any]:
    """Iterate a plain value, or the members of an enum class."""
    if isinstance(value, ClassRef) and evaluator is not None and evaluator.is_enum(value):
        return evaluator.enum_members(value)
    if is_plain(value) and isinstance(value, (list, tuple, set, frozenset, dict, str)):
        return value
    raise Unresolved(f"cannot iterate {value!r}")


def is_plain(value: Any) -> bool:
    """Whether ``value`` is ordinary Python data (not a reference into source)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(is_plain(k) and is_plain(v) for k, v in value.items())
    return value is None or isinstance(value, (str, int, float, bool, bytes, EnumMember))


def find_binding(module: Module, name: str) -> ast.stmt | None:
    """Last module-level statement binding ``name`` (top level, and inside top-level if/try)."""
    found = None
    for stmt in flat_statements(module.tree.body):
        if binds(stmt, name):
            found = stmt
    return found


def flat_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, descending into ``if``/``try`` blocks (first branches only)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from flat_statements(stmt.body)
        elif isinstance(stmt, ast.Try):
            yield from flat_statements(stmt.body)
        else:
            yield stmt


def binds(stmt: ast.stmt, name: str) -> bool:
    """Whether ``stmt`` binds ``name`` at its own level."""
    if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return stmt.name == name
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name and stmt.value is not None
    if isinstance(stmt, ast.ImportFrom):
        return any((a.asname or a.name) == name for a in stmt.names)
    if isinstance(stmt, ast.Import):
        return any((a.asname or a.name.split(".")[0]) == name for a in stmt.names)
    return False


def find_class_binding(node: ast.ClassDef, name: str) -> ast.expr | None:
    """Value expression of a class-body assignment ``name = ...``."""
    found = None
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            found = stmt.value
    return found


def apply_module_mutations(evaluator: Evaluator, module: Module, name: str, binding: ast.stmt, value: Any) -> Any:
    """Apply later top-level ``NAME.append/extend/add/update(...)`` and ``NAME += ...`` to ``value``."""
    if not isinstance(value, (list, set, dict)):
        return value
    statements = list(flat_statements(module.tree.body))
    guards = env_guarded(module.tree.body)
    for stmt in statements[statements.index(binding) + 1 :]:
        mutation = mutation_of(stmt, name)
        if mutation is not None:
            if stmt in guards:  # only when an environment variable says so (0.5.18's token_oracle sampler)
                evaluator.dynamic = True
                continue
            method, arg = mutation
            apply_mutation(value, method, evaluator.eval(arg, Scope(module)))
    return value


ENV_READS = ("envs.", "os.environ", "os.getenv", "environ.get", "getenv(")


def env_guarded(body: list[ast.stmt]) -> set[ast.stmt]:
    """Top-level statements (as :func:`flat_statements` yields them) inside an ``if`` on an environment variable:
    the parser has them only when the variable is set, so their additions are dynamic, not part of the schema."""
    out: set[ast.stmt] = set()
    for stmt in body:
        if isinstance(stmt, ast.If):
            inner = set(flat_statements(stmt.body))
            out |= inner if any(r in ast.unparse(stmt.test) for r in ENV_READS) else env_guarded(stmt.body)
        elif isinstance(stmt, ast.Try):
            out |= env_guarded(stmt.body)
    return out


def mutation_of(stmt: ast.stmt, name: str) -> tuple[str, ast.expr] | None:
    """``(method, argument)`` when ``stmt`` mutates the container bound to ``name``."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
        return "extend", stmt.value
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == name
        and func.attr in ("append", "extend", "add", "update", "insert")
        and stmt.value.args
    ):
        return func.attr, stmt.value.args[-1]
    return None


def apply_mutation(container: Any, method: str, arg: Any) -> None:
    """Apply one container mutation."""
    if method == "extend" and isinstance(container, set):
        container.update(arg)
    elif method == "insert":
        container.append(arg)
    else:
        getattr(container, method)(arg)


def bind_function_imports(evaluator: Evaluator, func: ast.FunctionDef, scope: Scope) -> None:
    """Bind the function-local ``from X import Y`` statements into ``scope``."""
    for node in ast.walk(func):
        if isinstance(node, ast.ImportFrom):
            module_name = evaluator.module_name(scope.module, node)
            for alias in node.names:
                try:
                    scope.local[alias.asname or alias.name] = evaluator.import_target(module_name, alias.name)
                except Unresolved:
                    continue


# ---------------------------------------------------------------------------
# Typing model (what get_type_hints + arg_utils helpers would see)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TypeExpr:
    """Normalised annotation: kind in {'name', 'union', 'literal', 'list', 'annotated', 'other'}."""

    kind: str
    name: str = ""
    args: tuple = ()
    meta: tuple = ()


NONE_TYPE = TypeExpr("name", "None")


def parse_type(node: ast.expr, scope: Scope, evaluator: Evaluator) -> TypeExpr:
    """Interpret an annotation expression as a :class:`TypeExpr`."""
    if isinstance(node, ast.Constant) and node.value is None:
        return NONE_TYPE
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return parse_type(ast.parse(node.value, mode="eval").body, scope, evaluator)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return make_union([parse_type(node.left, scope, evaluator), parse_type(node.right, scope, evaluator)])
    if isinstance(node, ast.Subscript):
        return parse_subscript(node, scope, evaluator)
    return type_of_symbol(safe_eval(evaluator, node, scope))


def safe_eval(evaluator: Evaluator, node: ast.expr, scope: Scope) -> Any:
    """Evaluate, returning None when unresolved."""
    try:
        return evaluator.eval(node, scope)
    except Unresolved:
        return None


def type_of_symbol(value: Any) -> TypeExpr:
    """TypeExpr for a bare type reference."""
    if isinstance(value, Symbol):
        if value.qualname in BUILTIN_TYPES:
            return TypeExpr("name", BUILTIN_TYPES[value.qualname])
        if value.qualname == "typing.List":
            return TypeExpr("list", args=(TypeExpr("name", "str"),), name="bare")
        return TypeExpr("other", value.qualname)
    if isinstance(value, ClassRef):
        return TypeExpr("other", value.node.name)
    return TypeExpr("other", repr(value))


def parse_subscript(node: ast.Subscript, scope: Scope, evaluator: Evaluator) -> TypeExpr:
    """Interpret ``Origin[...]`` annotations."""
    origin = safe_eval(evaluator, node.value, scope)
    qual = origin.qualname if isinstance(origin, Symbol) else ""
    elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if qual in ("typing.Annotated", "typing_extensions.Annotated"):
        return TypeExpr("annotated", args=(parse_type(elts[0], scope, evaluator),), meta=tuple(elts[1:]))
    if qual == "typing.Optional":
        return make_union([parse_type(elts[0], scope, evaluator), NONE_TYPE])
    if qual == "typing.Union":
        return make_union([parse_type(e, scope, evaluator) for e in elts])
    if qual in ("typing.Literal", "typing_extensions.Literal"):
        return TypeExpr("literal", args=tuple(evaluator.eval(e, scope) for e in elts))
    if qual in ("typing.List", "builtins.list"):
        return TypeExpr("list", args=(parse_type(elts[0], scope, evaluator),))
    return TypeExpr("other", qual or ast.unparse(node))


def make_union(members: list[TypeExpr]) -> TypeExpr:
    """Flatten and de-duplicate union members like ``typing.Union`` does."""
    flat: list[TypeExpr] = []
    for member in members:
        for item in member.args if member.kind == "union" else (member,):
            if item not in flat:
                flat.append(item)
    return flat[0] if len(flat) == 1 else TypeExpr("union", args=tuple(flat))


def unwrap_optional(tp: TypeExpr) -> TypeExpr:
    """arg_utils._unwrap_optional: ``Union[X, None]`` -> X (only with exactly one non-None member)."""
    if tp.kind == "union":
        non_none = [a for a in tp.args if a != NONE_TYPE]
        if len(non_none) == 1:
            return non_none[0]
    return tp


def infer_type_name(tp: TypeExpr | str) -> str:
    """arg_utils._infer_type_func: str/int/float map to themselves, anything else to str."""
    name = tp if isinstance(tp, str) else (tp.name if tp.kind == "name" else "")
    return name if name in ("str", "int", "float") else "str"


def literal_value_type(value: Any) -> str:
    """Python type name of a Literal value, as ``type(v)`` would give."""
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), "other")


# ---------------------------------------------------------------------------
# Fields and Arg metadata
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Value:
    """An argparse keyword value: evaluated, or kept as source text."""

    value: Any = None
    source: str = ""
    resolved: bool = True
    dynamic: bool = False


MISSING = Value(resolved=False, source="<missing>")


@dataclasses.dataclass
class Field:
    """One ServerArgs field as msgspec/dataclasses would see it."""

    name: str
    module: Module
    node: ast.AnnAssign
    default: Value

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING

    @property
    def source(self) -> str:
        return f"{self.module.path}:{self.node.lineno}"


@dataclasses.dataclass
class ArgMeta:
    """arg_utils.Arg, with values evaluated (choices/const/default kept as :class:`Value`)."""

    help: str = ""
    choices: Value | None = None
    aliases: list[str] = dataclasses.field(default_factory=list)
    cli_name: str | None = None
    type_parser: Value | None = None
    nargs: Any = None
    required: bool | None = None
    action: Value | None = None
    action_kwargs: dict[str, Value] = dataclasses.field(default_factory=dict)
    const: Value | None = None
    no_cli: bool = False


def evaluate_value(evaluator: Evaluator, node: ast.expr, scope: Scope) -> Value:
    """Evaluate ``node`` into a :class:`Value`, recording dynamic/unresolved state."""
    saved, evaluator.dynamic = evaluator.dynamic, False
    try:
        value = evaluator.eval(node, scope)
        return Value(value, scope.module.segment(node), True, evaluator.dynamic)
    except Unresolved:
        return Value(None, scope.module.segment(node), False, True)
    finally:
        evaluator.dynamic = saved


def field_default(evaluator: Evaluator, module: Module, node: ast.AnnAssign) -> Value:
    """Default of a field: literal, ``msgspec.field(default=/default_factory=)``, or MISSING."""
    if node.value is None:
        return MISSING
    scope = Scope(module)
    value = node.value
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("msgspec.field", "field", "dataclasses.field"):
        keywords = {kw.arg: kw.value for kw in value.keywords}
        if "default" in keywords:
            return evaluate_value(evaluator, keywords["default"], scope)
        if "default_factory" in keywords:
            return factory_default(evaluator, keywords["default_factory"], scope)
        return MISSING
    return evaluate_value(evaluator, value, scope)


def factory_default(evaluator: Evaluator, node: ast.expr, scope: Scope) -> Value:
    """Value produced by a ``default_factory`` (``list``, ``dict``, a lambda...)."""
    if isinstance(node, ast.Lambda):
        return evaluate_value(evaluator, node.body, scope)
    result = evaluate_value(evaluator, node, scope)
    if result.resolved and isinstance(result.value, Symbol):
        try:
            return Value(call_builtin(result.value.qualname, [], evaluator), scope.module.segment(node) + "()")
        except Unresolved:
            pass
    return Value(None, scope.module.segment(node) + "()", False)


def struct_fields(evaluator: Evaluator, cls: ClassRef) -> list[Field]:
    """Fields of a msgspec Struct / dataclass: bases first, redefinitions keep their slot."""
    fields: dict[str, Field] = {}
    for base in evaluator.class_bases(cls):
        for item in struct_fields(evaluator, base):
            fields[item.name] = item
    for stmt in cls.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and not is_classvar(stmt):
            fields[stmt.target.id] = Field(stmt.target.id, cls.module, stmt, field_default(evaluator, cls.module, stmt))
    return list(fields.values())


def is_classvar(stmt: ast.AnnAssign) -> bool:
    """Whether the annotation is ``ClassVar[...]`` (not a field)."""
    text = ast.unparse(stmt.annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "'ClassVar", '"ClassVar'))


def arg_meta_of(evaluator: Evaluator, field: Field) -> tuple[TypeExpr, ArgMeta | None]:
    """arg_utils._unwrap_annotated over a field annotation."""
    scope = Scope(field.module)
    tp = parse_type(field.node.annotation, scope, evaluator)
    if tp.kind != "annotated":
        return tp, None
    for meta_node in tp.meta:
        meta = safe_eval(evaluator, meta_node, scope)
        if isinstance(meta, ArgCall):
            return tp.args[0], build_arg_meta(evaluator, meta)
        if isinstance(meta, str):
            return tp.args[0], ArgMeta(help=meta)
    return tp.args[0], None


def arg_field_order(evaluator: Evaluator) -> list[str]:
    """Declared field order of ``arg_utils.Arg`` (for positional ``Arg(...)`` calls)."""
    module = evaluator.tree.module(ARG_UTILS_MODULE)
    binding = find_binding(module, "Arg") if module else None
    if not isinstance(binding, ast.ClassDef):
        return ["help"]
    return [s.target.id for s in binding.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def build_arg_meta(evaluator: Evaluator, call: ArgCall) -> ArgMeta:
    """Evaluate the keywords of an ``Arg(...)`` call."""
    scope = Scope(call.module)
    kw = call.keywords
    meta = ArgMeta()

    def plain(name: str, default: Any) -> Any:
        if name not in kw:
            return default
        value = evaluate_value(evaluator, kw[name], scope)
        if not value.resolved:
            raise Unresolved(f"Arg({name}={value.source}) in {call.module.path}")
        return value.value

    meta.help = plain("help", "")
    meta.aliases = list(plain("aliases", None) or [])
    meta.cli_name = plain("cli_name", None)
    meta.nargs = plain("nargs", None)
    meta.required = plain("required", None)
    meta.no_cli = bool(plain("no_cli", False))
    for name in ("choices", "type_parser", "action", "const"):
        if name in kw:
            setattr(meta, name, evaluate_value(evaluator, kw[name], scope))
    if "action_kwargs" in kw and isinstance(kw["action_kwargs"], ast.Dict):
        for key, value in zip(kw["action_kwargs"].keys, kw["action_kwargs"].values, strict=True):
            if key is None:
                raise Unresolved(f"Arg(action_kwargs=**...) in {call.module.path}")
            meta.action_kwargs[evaluator.eval(key, scope)] = evaluate_value(evaluator, value, scope)
    return meta


# ---------------------------------------------------------------------------
# add_cli_args_from_dataclass, replayed
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class AddArgument:
    """One ``parser.add_argument(*names, **kwargs)`` registration."""

    names: list[str]
    kwargs: dict[str, Value]
    source: str


def field_to_cli_name(name: str) -> str:
    """arg_utils._field_to_cli_name."""
    return "--" + name.replace("_", "-")


def dataclass_registration(evaluator: Evaluator, field: Field) -> AddArgument | None:
    """The add_argument call ``add_cli_args_from_dataclass`` makes for ``field`` (None if skipped)."""
    raw_type, meta = arg_meta_of(evaluator, field)
    if meta is None or meta.no_cli:
        return None
    cli_name = meta.cli_name or field_to_cli_name(field.name)
    names = [cli_name] + meta.aliases
    kwargs: dict[str, Value] = {"help": Value(meta.help)}
    if field.name != cli_name.lstrip("-").replace("-", "_"):
        kwargs["dest"] = Value(field.name)
    if meta.action is not None:
        return AddArgument(names, action_branch(meta, field, kwargs), field.source)
    inner = unwrap_optional(raw_type)
    if inner.kind == "literal":
        kwargs.update(literal_branch(meta, inner, field))
    elif inner.kind == "list" and meta.type_parser is None:
        kwargs.update(list_branch(meta, inner, field))
    elif inner == TypeExpr("name", "bool"):
        kwargs["action"] = Value("store_true")
        if field.has_default:
            kwargs["default"] = field.default
    else:
        kwargs.update(scalar_branch(meta, inner, field, names))
    return AddArgument(names, kwargs, field.source)


def action_branch(meta: ArgMeta, field: Field, kwargs: dict[str, Value]) -> dict[str, Value]:
    """Custom ``action=``: action, help, dest, default, then ``action_kwargs``."""
    assert meta.action is not None
    kwargs["action"] = meta.action
    if field.has_default:
        kwargs["default"] = field.default
    kwargs.update(meta.action_kwargs)
    return kwargs


def type_value(name: str) -> Value:
    """A ``type=`` keyword naming a builtin."""
    return Value(Symbol(f"builtins.{name}"), name)


def literal_branch(meta: ArgMeta, inner: TypeExpr, field: Field) -> dict[str, Value]:
    """Literal[...] -> choices (Arg choices win), type from the first literal value."""
    values = list(inner.args)
    kwargs: dict[str, Value] = {
        "type": meta.type_parser or type_value(infer_type_name(literal_value_type(values[0]) if values else "str")),
        "choices": meta.choices if meta.choices is not None and truthy(meta.choices) else Value(values),
    }
    if field.has_default:
        kwargs["default"] = field.default
    if meta.const is not None and meta.const.value is not None:
        kwargs["const"] = meta.const
    return kwargs


def list_branch(meta: ArgMeta, inner: TypeExpr, field: Field) -> dict[str, Value]:
    """List[X] -> nargs ('+' unless Arg nargs), element type."""
    kwargs: dict[str, Value] = {
        "type": type_value(infer_type_name(inner.args[0])),
        "nargs": Value(meta.nargs or "+"),
    }
    if meta.choices is not None and truthy(meta.choices):
        kwargs["choices"] = meta.choices
    if field.has_default:
        kwargs["default"] = field.default
    if meta.const is not None and meta.const.value is not None:
        kwargs["const"] = meta.const
    return kwargs


def scalar_branch(meta: ArgMeta, inner: TypeExpr, field: Field, names: list[str]) -> dict[str, Value]:
    """Scalar -> type (type_parser or inferred), choices, nargs, default, const, required."""
    kwargs: dict[str, Value] = {"type": meta.type_parser or type_value(infer_type_name(inner))}
    if meta.choices is not None and truthy(meta.choices):
        kwargs["choices"] = meta.choices
    if meta.nargs:
        kwargs["nargs"] = Value(meta.nargs)
    if field.has_default:
        kwargs["default"] = field.default
    if meta.const is not None and meta.const.value is not None:
        kwargs["const"] = meta.const
    required = meta.required is True or (meta.required is None and not field.has_default)
    if required and any(name.startswith("-") for name in names):
        kwargs["required"] = Value(True)
    return kwargs


def truthy(value: Value) -> bool:
    """``bool(value)`` for a resolved value; unresolved values count as present."""
    return bool(value.value) if value.resolved else True


# ---------------------------------------------------------------------------
# ServerArgs composition and add_cli_args interpretation
# ---------------------------------------------------------------------------


def server_args_fields(evaluator: Evaluator, server_args: Module, cls: ast.ClassDef) -> list[Field]:
    """ServerArgs fields in ``collect_input_fields`` order, then the class's own annotations."""
    namespaces = namespace_classes(evaluator, server_args)
    collected: dict[str, Field] = {}
    for namespace in namespaces:
        for item in struct_fields(evaluator, namespace):
            if item.name in collected:
                raise SystemExit(f"{item.name} declared by two namespaces")
            collected[item.name] = item
    order = positional_order(evaluator)
    ordered = [n for n in order if n in collected] + [n for n in collected if n not in set(order)]
    fields = {name: collected[name] for name in ordered}
    for item in struct_fields(evaluator, ClassRef(server_args, cls)):
        fields[item.name] = item
    return list(fields.values())


def namespace_classes(evaluator: Evaluator, server_args: Module) -> list[ClassRef]:
    """Classes passed to ``collect_input_fields(...)`` in server_args.py; none before 0.5.20."""
    for node in ast.walk(server_args.tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("collect_input_fields") and node.args:
            classes = evaluator.eval(node.args[0], Scope(server_args))
            return [c for c in classes if isinstance(c, ClassRef)]
    return []  # up to 0.5.19 ServerArgs declares its fields itself (server_args_fields reads them)


def positional_order(evaluator: Evaluator) -> list[str]:
    """``POSITIONAL_FIELD_ORDER`` as seen by ``sglang.srt.arg_groups.fields``."""
    module = evaluator.tree.module("sglang.srt.arg_groups.fields")
    if module is None or find_binding(module, "POSITIONAL_FIELD_ORDER") is None:
        return []
    return list(evaluator.module_attr(module, "POSITIONAL_FIELD_ORDER"))


def find_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    """A method of a class definition."""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt
    raise SystemExit(f"{cls.name}.{name} not found")


class CliInterpreter:
    """Walk ``add_cli_args`` and collect every registration, in order."""

    def __init__(self, evaluator: Evaluator, fields: list[Field], server_args_cls: str) -> None:
        self.evaluator = evaluator
        self.fields = fields
        self.server_args_cls = server_args_cls
        self.registrations: list[AddArgument] = []
        defaults = {f.name: f.default for f in fields}
        self.evaluator.hooks[DECLARED_DEFAULT_HELPER] = lambda args: declared_default(defaults, args)

    def run(self, module: Module, func: ast.FunctionDef, parser_param: str) -> list[AddArgument]:
        """Interpret ``func`` whose parameter ``parser_param`` is the parser."""
        scope = Scope(module)
        bind_function_imports(self.evaluator, func, scope)
        self.walk(func.body, scope, parser_param, conditional=False)
        return self.registrations

    def walk(self, body: list[ast.stmt], scope: Scope, parser: str, conditional: bool) -> None:
        """Interpret a statement list."""
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.assign(stmt.targets[0].id, stmt.value, scope, conditional)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self.call(stmt.value, scope, parser, conditional)
            elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                for block in nested_blocks(stmt):
                    self.walk(block, scope, parser, conditional=True)

    def assign(self, name: str, value: ast.expr, scope: Scope, conditional: bool) -> None:
        """Local assignment; evaluated lazily, dynamic when under a condition."""
        scope.local.pop(name, None)
        scope.lazy[name] = (value, scope)
        if conditional:
            scope.dynamic_names.add(name)

    def call(self, call: ast.Call, scope: Scope, parser: str, conditional: bool) -> None:
        """Dispatch a call statement."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == parser and func.attr == "add_argument":
                self.registrations.append(manual_registration(self.evaluator, call, scope))
                return
            if func.value.id in scope.local or func.value.id in scope.lazy:
                self.mutate_local(func.value.id, func.attr, call, scope, conditional)
                return
        callee = safe_eval(self.evaluator, func, scope)
        parser_positions = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == parser]
        if isinstance(callee, FuncRef) and callee.node.name == DATACLASS_REGISTRAR:
            self.dataclass_call(call, scope)
        elif isinstance(callee, FuncRef) and parser_positions:
            params = [a.arg for a in callee.node.args.args]
            self.run(callee.module, callee.node, params[parser_positions[0]])

    def mutate_local(self, name: str, method: str, call: ast.Call, scope: Scope, conditional: bool) -> None:
        """``local.add(...)``-style mutation: applied when unconditional, else marks it dynamic."""
        if method not in ("append", "extend", "add", "update", "insert"):
            return
        if conditional:
            scope.dynamic_names.add(name)
            return
        try:
            container = self.evaluator.lookup(name, scope)
            apply_mutation(container, method, self.evaluator.eval(call.args[-1], scope))
        except Unresolved:
            scope.dynamic_names.add(name)

    def dataclass_call(self, call: ast.Call, scope: Scope) -> None:
        """Replay ``add_cli_args_from_dataclass(parser, cls, fields=...)``."""
        keywords = {kw.arg: kw.value for kw in call.keywords}
        only = set(self.evaluator.eval(keywords["fields"], scope)) if "fields" in keywords else None
        for field in self.fields:
            if only is not None and field.name not in only:
                continue
            registration = dataclass_registration(self.evaluator, field)
            if registration is not None:
                self.registrations.append(registration)


def nested_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """Statement lists nested in a compound statement."""
    blocks = [getattr(stmt, attr) for attr in ("body", "orelse", "finalbody") if getattr(stmt, attr, None)]
    blocks += [handler.body for handler in getattr(stmt, "handlers", [])]
    return blocks


def declared_default(defaults: dict[str, Value], args: list[Any]) -> Any:
    """Hook for server_args._declared_default(name): the field's default."""
    if len(args) != 1 or args[0] not in defaults or not defaults[args[0]].resolved:
        raise Unresolved("_declared_default")
    return defaults[args[0]].value


def manual_registration(evaluator: Evaluator, call: ast.Call, scope: Scope) -> AddArgument:
    """A literal ``parser.add_argument(...)`` call."""
    names = [evaluator.eval(arg, scope) for arg in call.args]
    kwargs = {kw.arg: evaluate_value(evaluator, kw.value, scope) for kw in call.keywords if kw.arg}
    return AddArgument(names, kwargs, f"{scope.module.path}:{call.lineno}")


# ---------------------------------------------------------------------------
# argparse emulation: registrations -> Action attributes
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class ActionInfo:
    """What an action class contributes: its name, attribute defaults, kind."""

    name: str
    defaults: dict[str, Any]
    kind: str  # 'string', 'boolean_optional', 'custom'
    ref: ClassRef | None = None


STRING_ACTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "store": {},
    "append": {},
    "extend": {},
    "store_const": {"nargs": 0},
    "append_const": {"nargs": 0},
    "store_true": {"nargs": 0, "const": True, "default": False},
    "store_false": {"nargs": 0, "const": False, "default": True},
    "count": {"nargs": 0},
}


def action_info(evaluator: Evaluator, value: Value | None) -> ActionInfo:
    """Classify the ``action=`` keyword."""
    if value is None:
        return ActionInfo("store", {}, "string")
    action = value.value
    if isinstance(action, str):
        return ActionInfo(action, dict(STRING_ACTION_DEFAULTS.get(action, {})), "string")
    if isinstance(action, Symbol) and action.qualname == "argparse.BooleanOptionalAction":
        return ActionInfo("BooleanOptionalAction", {"nargs": 0}, "boolean_optional")
    if isinstance(action, ClassRef):
        return ActionInfo(action.node.name, custom_action_defaults(evaluator, action), "custom", action)
    raise SystemExit(f"unsupported action {value.source}")


def custom_action_defaults(evaluator: Evaluator, cls: ClassRef) -> dict[str, Any]:
    """Defaults of Action attributes declared by a custom action's ``__init__``."""
    init = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None:
        return {}
    with_defaults = init.args.args[len(init.args.args) - len(init.args.defaults) :]
    defaults = {a.arg: d for a, d in zip(with_defaults, init.args.defaults, strict=True)}
    kwonly = zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True)
    defaults.update({a.arg: d for a, d in kwonly if d is not None})
    return {name: evaluator.eval(node, Scope(cls.module)) for name, node in defaults.items() if name in ACTION_ATTRS}


def derive_dest(names: list[str]) -> str:
    """argparse's dest for optional arguments: first long option, else first option."""
    long_names = [n for n in names if n.startswith("--")]
    chosen = long_names[0] if long_names else names[0]
    return chosen.lstrip("-").replace("-", "_")


def expand_option_strings(names: list[str], info: ActionInfo) -> list[str]:
    """BooleanOptionalAction adds ``--no-X`` after each ``--X``."""
    if info.kind != "boolean_optional":
        return list(names)
    out: list[str] = []
    for name in names:
        out.append(name)
        if name.startswith("--"):
            out.append("--no-" + name[2:])
    return out


def json_value(value: Any, source: str) -> Any:
    """JSON-able form of a static value; non-literal values become ``{"__expr__": source}``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"__expr__": source}
    if isinstance(value, EnumMember):
        return json_value(value.value, source)
    if isinstance(value, (list, tuple)):
        return [json_value(v, source) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_value(v, source) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: json_value(v, source) for k, v in value.items()}
    return {"__expr__": source}


def kw_json(kwargs: dict[str, Value], name: str, fallback: Any) -> Any:
    """JSON of keyword ``name`` (or ``fallback`` when absent)."""
    if name not in kwargs:
        return fallback
    value = kwargs[name]
    if not value.resolved:
        return {"__expr__": value.source}
    return json_value(value.value, value.source)


def type_name(value: Value | None) -> str | None:
    """Name recorded for ``type=``: builtin name, function name, or dotted stdlib name."""
    if value is None or value.value is None:
        return None
    target = value.value
    if isinstance(target, Symbol):
        return BUILTIN_TYPES.get(target.qualname, target.qualname)
    if isinstance(target, (FuncRef, ClassRef)):
        return target.node.name
    return value.source


def is_deprecated_action(info: ActionInfo) -> bool:
    """Custom actions that only warn or fail because a flag is retired."""
    return info.kind == "custom" and info.name.startswith("Deprecated")


def deprecation(info: ActionInfo, kwargs: dict[str, Value], help_text: str) -> str | None:
    """Deprecation message, or None when the flag is not deprecated."""
    if is_deprecated_action(info):
        parts = [help_text] if help_text else []
        for key in ("error_message", "new_flag"):
            if key in kwargs and kwargs[key].resolved and str(kwargs[key].value) not in help_text:
                parts.append(f"{key}: {kwargs[key].value}")
        return " ".join(parts) or "deprecated"
    if help_text.lstrip("( ").lower().startswith("deprecated"):
        return help_text
    return None


def argument_record(evaluator: Evaluator, reg: AddArgument) -> dict[str, Any]:
    """The JSON record of one registration (attributes of the resulting argparse.Action)."""
    info = action_info(evaluator, reg.kwargs.get("action"))
    kw = reg.kwargs
    defaults = info.defaults
    help_text = kw_json(kw, "help", defaults.get("help")) or ""
    if not isinstance(help_text, str):  # an f-string over runtime values (0.5.20's parser choices): its source
        help_text = " ".join(str(help_text.get("__expr__", "")).split()) if isinstance(help_text, dict) else str(help_text)
    choices_value = kw.get("choices")
    record: dict[str, Any] = {
        "dest": kw_json(kw, "dest", None) or derive_dest(reg.names),
        "option_strings": expand_option_strings(reg.names, info),
        "action": info.name,
        "type": type_name(kw.get("type")) if "type" in kw else json_value(defaults.get("type"), ""),
        "nargs": kw_json(kw, "nargs", defaults.get("nargs")),
        "choices": kw_json(kw, "choices", defaults.get("choices")),
        "choices_dynamic": bool(choices_value and choices_value.dynamic),
        "default": kw_json(kw, "default", defaults.get("default")),
        "required": bool(kw_json(kw, "required", defaults.get("required", False))),
        "const": kw_json(kw, "const", defaults.get("const")),
        "help": help_text,
        "source": reg.source,
    }
    message = deprecation(info, kw, help_text)
    record["deprecated"] = message is not None
    if message is not None:
        record["deprecated_message"] = message
    return record


# ---------------------------------------------------------------------------
# Custom types and actions
# ---------------------------------------------------------------------------


def first_doc_line(node: ast.AST) -> str:
    """First line of a docstring, or ''."""
    doc = ast.get_docstring(node) if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else None
    return doc.strip().splitlines()[0] if doc else ""


def custom_types(registrations: list[AddArgument]) -> dict[str, dict[str, str]]:
    """``type=`` callables other than str/int/float/bool."""
    out: dict[str, dict[str, str]] = {}
    for reg in registrations:
        value = reg.kwargs.get("type")
        name = type_name(value)
        if value is None or name is None or name in BUILTIN_TYPES.values():
            continue
        target = value.value
        if isinstance(target, (FuncRef, ClassRef)):
            source = f"{target.module.path}:{target.node.lineno}"
            summary = KNOWN_TYPE_SUMMARIES.get(name) or first_doc_line(target.node) or "(undocumented)"
        else:
            source = f"stdlib {name}" if isinstance(target, Symbol) else value.source
            summary = KNOWN_TYPE_SUMMARIES.get(name, "(outside the wheel)")
        out[name] = {"source": source, "summary": summary}
    return out


def custom_actions(evaluator: Evaluator, registrations: list[AddArgument]) -> dict[str, dict[str, str]]:
    """``action=`` classes (custom ones and argparse.BooleanOptionalAction)."""
    out: dict[str, dict[str, str]] = {}
    for reg in registrations:
        info = action_info(evaluator, reg.kwargs.get("action"))
        if info.kind == "string":
            continue
        if info.ref is not None:
            source = f"{info.ref.module.path}:{info.ref.node.lineno}"
            doc = first_doc_line(info.ref.node)
        else:
            source, doc = "stdlib argparse.BooleanOptionalAction", ""
        summary = KNOWN_ACTION_SUMMARIES.get(info.name) or f"{doc} (nargs={info.defaults.get('nargs')})"
        out[info.name] = {"source": source, "summary": summary}
    return out


# ---------------------------------------------------------------------------
# Top level
# ---------------------------------------------------------------------------


def collect_registrations(tree: SourceTree) -> tuple[Evaluator, list[AddArgument]]:
    """Every add_argument registration of ``ServerArgs.add_cli_args``, in order."""
    evaluator = Evaluator(tree)
    module = tree.module(SERVER_ARGS_MODULE)
    if module is None:
        raise SystemExit(f"{SERVER_ARGS_MODULE} not found in the wheel")
    cls = next((s for s in module.tree.body if isinstance(s, ast.ClassDef) and s.name == SERVER_ARGS_CLASS), None)
    if cls is None:
        raise SystemExit(f"class {SERVER_ARGS_CLASS} not found in {module.path}")
    fields = server_args_fields(evaluator, module, cls)
    method = find_method(cls, "add_cli_args")
    parser_param = method.args.args[0].arg
    interpreter = CliInterpreter(evaluator, fields, SERVER_ARGS_CLASS)
    return evaluator, interpreter.run(module, method, parser_param)


def records_for_class(tree: SourceTree, module_name: str, class_name: str) -> dict[str, dict[str, Any]]:
    """Argument records ``add_cli_args_from_dataclass`` would register for one class (for tests/debugging)."""
    evaluator = Evaluator(tree)
    module = tree.module(module_name)
    if module is None:
        raise SystemExit(f"module {module_name} not found")
    cls = evaluator.module_attr(module, class_name)
    records = {}
    for field in struct_fields(evaluator, cls):
        registration = dataclass_registration(evaluator, field)
        if registration is not None:
            record = argument_record(evaluator, registration)
            records[record["dest"]] = record
    return records


def unique_key(record: dict[str, Any], taken: dict[str, Any]) -> str:
    """Key by dest; a second action on the same dest is keyed by its first long option."""
    if record["dest"] not in taken:
        return record["dest"]
    key = derive_dest(record["option_strings"])
    if key in taken:
        raise SystemExit(f"cannot key duplicate dest {record['dest']} ({record['option_strings']})")
    return key


def build_schema(tree: SourceTree, version: str, wheel_name: str, wheel_sha: str) -> dict[str, Any]:
    """The complete schema document."""
    evaluator, registrations = collect_registrations(tree)
    arguments: dict[str, Any] = {}
    for reg in registrations:
        record = argument_record(evaluator, reg)
        arguments[unique_key(record, arguments)] = record
    return {
        "format": FORMAT,
        "sglang_version": version,
        "wheel": {"filename": wheel_name, "sha256": wheel_sha},
        "generator": GENERATOR,
        "arguments": arguments,
        "custom_types": custom_types(registrations),
        "custom_actions": custom_actions(evaluator, registrations),
    }


def render(schema: dict[str, Any]) -> str:
    """Deterministic JSON text."""
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def schema_for_wheel(wheel: Path, version: str) -> str:
    """Rendered schema of one wheel file."""
    tree = SourceTree.from_wheel(wheel)
    return render(build_schema(tree, version, wheel.name, sha256_of(wheel)))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of this tool."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="sglang version, e.g. 0.5.23")
    parser.add_argument("--out", type=Path, help="where to write the JSON schema")
    parser.add_argument("--wheel", type=Path, help="use this wheel file instead of the cache")
    parser.add_argument("--wheel-dir", type=Path, default=Path(DEFAULT_WHEEL_DIR), help="wheel cache directory")
    parser.add_argument("--download-only", action="store_true", help="only make sure the wheel is in --wheel-dir")
    args = parser.parse_args(argv)
    if not args.download_only and args.out is None:
        parser.error("--out is required unless --download-only is given")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    wheel = obtain_wheel(args.version, args.wheel, args.wheel_dir)
    if args.download_only:
        print(wheel)
        return 0
    text = schema_for_wheel(wheel, args.version)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    count = len(json.loads(text)["arguments"])
    print(f"wrote {args.out}: {count} arguments from {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
