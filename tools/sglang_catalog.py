#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Catalog every ``raise`` and ``assert`` of SGLang's launch-time argument handling, statically.

The wheel is opened as a zip archive (nothing installed, nothing imported) and these files are read
with :mod:`ast`; each is what ``python -m sglang.launch_server`` runs on the launch's arguments before
the first request:

* ``sglang/srt/server_args.py``: ``prepare_server_args`` (argparse, ``--config``), ``ServerArgs.resolve_once``
  and ``check_server_args``, the entry points the validator mirrors and the on-host preflight runs.
* ``sglang/srt/arg_groups/**``: the resolution pipeline itself (``pipeline.run_resolution_pipeline`` calls the
  ``*_hook.py`` handlers in order, ``overrides.py`` its post-process passes, ``validation_hook.check_server_args``
  the final checks), the per-architecture overrides ``model_hook`` applies (``model_overrides/``), and the
  argparse actions and field declarations of the CLI (``argparse_actions.py``, ``fields/``).  The whole
  package, so a check a later release moves between hooks stays in the catalog.
* ``sglang/srt/speculative/spec_info.py``: ``SpeculativeAlgorithm.from_string`` and the per-algorithm
  ``handle_server_args`` dispatch ``speculative_hook.handle_speculative_decoding`` calls.
* ``sglang/srt/configs/model_config.py`` and ``model_config_parser_registry.py``: ``ModelConfig``, which
  ``model_config_of`` builds during resolution (context length, quantization, architecture checks) and the
  scheduler builds again before it loads the weights.
* ``sglang/srt/utils/server_args_config_parser.py``: the ``--config`` YAML merge of ``prepare_server_args``.
* ``sglang/srt/kernel_plugins/nvidia/binding.py`` and ``amd/binding.py``, functions ``handle_nvidia_megakernel``
  (with its ``_refuse``) and ``handle_amd_monokernel`` only: hooks of the pipeline that live outside
  ``arg_groups`` (the rest of those files binds kernels at graph capture).
* ``sglang/srt/model_loader/loader.py``, function ``_get_quantization_config`` only: the compute-capability
  check of the quantization method when model loading starts (before any weight is read).
* ``sglang/srt/speculative/ragged_verify.py``, function ``read_ragged_verify_mode`` only (every in-tree
  speculative algorithm's ``handle_server_args`` reads ``SGLANG_RAGGED_VERIFY_MODE`` through it, spec_info.py:253),
  and ``sglang/srt/mem_cache/unified_cache/linker_config.py``, class ``UnifiedCacheLinkerConfig`` only (its
  ``from_dict``, which ``hicache_hook.handle_hicache`` runs for the dynamic linker backend): raise sites of the
  argument handling outside ``arg_groups``, found where the differential fuzzer saw SGLang refuse (issue 36).
* ``sglang/srt/runtime_context.py``, function ``derive_attn_tp_size`` only: the attention-TP width the hooks
  derive (parallel_hook.py:210 and others), where a zero size fails without a raise of its own (an ``implicit`` site).

Not catalogued (each would bring hundreds of checks about the weights, kernels or transports rather than
the launch's arguments): the rest of model loading (weight loaders of each model class, kernels built at
the first forward), the helpers the hooks call in ``utils/``, ``disaggregation/`` transfer engines and the
config classes of individual models under ``configs/``.

Each entry: ``id`` (``path-in-wheel:function:ordinal``, the ordinal counting the function's raises and asserts
in source order from 1, so it survives line shifts elsewhere in the file), ``file``, ``line`` and ``end_line``
(the statement's first and last line: a traceback of a multi-line raise may name any of them), ``function``
(``Class.method``, ``outer.inner``, or ``<module>``), ``kind`` (``raise`` / ``assert`` / ``implicit``),
``exception`` (the raised expression's callee, ``AssertionError`` for asserts, ``<re-raise>`` for a bare
``raise``), ``conditions`` (the enclosing ``if`` tests from the outside in, ``not (...)`` for ``else`` branches,
and ``except T`` for handlers; an assert's own test comes last), ``message`` (source text of the message
expression, ``""`` when there is none) and ``reads`` (what the conditions read, the data the differential
fuzzer's generator is driven by: ``arg:<name>`` for an attribute read (``cfg.tp_size``, ``view.page_size``: the
fuzzer keeps the names that are CLI arguments), ``env:<NAME>`` for an ``SGLANG_*`` / ``SGL_*`` environment
switch; a local name a condition tests brings the reads of its assignments in the function).

``implicit`` entries are failures without a ``raise`` or ``assert`` of their own (a TypeError comparing None, a
KeyError): they are listed in ``implicit-<version>.yml`` beside the catalog (file, line, exception, why; the
differential fuzzer reports the sites SGLang refused at that the catalog lacks), and the tool records the
statement at that line with its function, conditions and reads, the id ending in ``implicit-<ordinal>``.

Usage::

    python3 tools/sglang_catalog.py --version 0.5.23 --out catalog.json [--mapping mapping.yml] [--implicit implicit.yml]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FORMAT = 2
GENERATOR = "tools/sglang_catalog.py"
DEFAULT_WHEEL_DIR = ".cache/sglang-wheels"
# (path prefix in the wheel, functions to keep or None for the whole file); a prefix ending in "/" is a package.
SCOPE: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("sglang/srt/server_args.py", None),
    ("sglang/srt/arg_groups/", None),
    ("sglang/srt/speculative/spec_info.py", None),
    ("sglang/srt/configs/model_config.py", None),
    ("sglang/srt/configs/model_config_parser_registry.py", None),
    ("sglang/srt/utils/server_args_config_parser.py", None),
    ("sglang/srt/kernel_plugins/nvidia/binding.py", frozenset({"handle_nvidia_megakernel", "_refuse"})),
    ("sglang/srt/kernel_plugins/amd/binding.py", frozenset({"handle_amd_monokernel"})),
    ("sglang/srt/model_loader/loader.py", frozenset({"_get_quantization_config"})),
    ("sglang/srt/speculative/ragged_verify.py", frozenset({"read_ragged_verify_mode"})),
    ("sglang/srt/mem_cache/unified_cache/linker_config.py", frozenset({"UnifiedCacheLinkerConfig"})),
    ("sglang/srt/runtime_context.py", frozenset({"derive_attn_tp_size"})),
    ("sglang/srt/utils/common.py", frozenset({"configure_media_url_security", "_normalize_media_domain"})),
    # validate_experimental_sgl_marlin (arg_groups/validation_hook.py:565-575) calls it during argument handling.
    ("sglang/srt/lora/marlin_lora_temp/policy.py", frozenset({"validate_experimental_sgl_marlin_server_args"})),
    # With skip_tokenizer_init, _handle_other_validations builds SamplingParams from preferred_sampling_params and
    # normalizes them without a tokenizer (arg_groups/serving_hook.py:623-629), which raises here.
    ("sglang/srt/sampling/sampling_params.py", frozenset({"raise_if_tokenizer_required"})),
)


@dataclass(frozen=True)
class Entry:
    """One raise or assert of SGLang's argument handling."""

    id: str
    file: str
    line: int
    end_line: int
    function: str
    kind: str
    exception: str
    conditions: list[str]
    message: str
    reads: list[str]


def in_scope(path: str) -> frozenset[str] | None | bool:
    """The function filter for ``path`` (None: every function), or False when the file is not catalogued."""
    if not path.endswith(".py"):
        return False
    for prefix, functions in SCOPE:
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return functions
    return False


def _text(node: ast.AST | None) -> str:
    return "" if node is None else ast.unparse(node)


def _raised(node: ast.Raise) -> tuple[str, str]:
    """(exception type, message) of a raise statement."""
    exc = node.exc
    if exc is None:
        return "<re-raise>", ""
    if isinstance(exc, ast.Call):
        parts = [_text(a) for a in exc.args] + [f"{k.arg}={_text(k.value)}" if k.arg else f"**{_text(k.value)}"
                                               for k in exc.keywords]
        return _text(exc.func), ", ".join(parts)
    return _text(exc), ""


_ENV_PREFIXES = ("SGLANG_", "SGL_")


def _names_read(nodes: list[ast.AST]) -> tuple[set[str], set[str]]:
    """(reads, plain local names) of expressions: ``arg:<attr>`` for ``x.attr`` / ``f(x).attr`` reads, ``env:<NAME>``
    for SGLANG_* / SGL_* switches (an attribute such as ``envs.SGLANG_X`` or a string constant)."""
    reads: set[str] = set()
    names: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute):
                if node.attr.startswith(_ENV_PREFIXES):
                    reads.add(f"env:{node.attr}")
                elif isinstance(node.value, (ast.Name, ast.Call)) and node.attr.isidentifier() \
                        and node.attr.islower() and not node.attr.startswith("_"):
                    reads.add(f"arg:{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(_ENV_PREFIXES) \
                    and node.value.replace("_", "").isalnum() and node.value.isupper():
                reads.add(f"env:{node.value}")
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                names.add(node.id)
    return reads, names


def _assignments(function: ast.AST) -> dict[str, list[ast.AST]]:
    """Local name -> the values assigned to it in ``function`` (its own body, nested definitions included)."""
    out: dict[str, list[ast.AST]] = {}
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out.setdefault(name.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):
            for name in ast.walk(node.target):
                if isinstance(name, ast.Name):
                    out.setdefault(name.id, []).append(node.iter)
    return out


class _Walker:
    """Collects the raises and asserts of one module with their function and enclosing conditions (and the
    statements of ``implicit``: line -> exception, the failures without a raise of their own)."""

    def __init__(self, path: str, functions: frozenset[str] | None, implicit: dict[int, str] | None = None) -> None:
        self.path, self.functions = path, functions
        self.implicit = dict(implicit or {})
        self.entries: list[Entry] = []
        self.ordinals: dict[str, int] = {}
        self.tests: list[ast.AST] = []  # the condition expressions of the statement being visited
        self.function: list[ast.AST] = []  # the enclosing function definitions, innermost last

    def visit_body(self, body: list[ast.stmt], scope: str, conditions: list[str], tests: list[ast.AST] | None = None) -> None:
        saved = self.tests
        if tests is not None:
            self.tests = tests
        for stmt in body:
            self.visit(stmt, scope, conditions)
        self.tests = saved

    def visit(self, node: ast.stmt, scope: str, conditions: list[str]) -> None:
        self.implicit_site(node, scope, conditions)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = node.name if scope == "<module>" else f"{scope}.{node.name}"
            saved, self.tests = self.tests, []
            is_function = not isinstance(node, ast.ClassDef)
            if is_function:
                self.function.append(node)
            self.visit_body(node.body, inner, [])  # a definition's checks run when it is called, not here
            if is_function:
                self.function.pop()
            self.tests = saved
            return
        if isinstance(node, ast.If):
            test = _text(node.test)
            self.visit_body(node.body, scope, [*conditions, test], [*self.tests, node.test])
            self.visit_body(node.orelse, scope, [*conditions, f"not ({test})"], [*self.tests, node.test])
            return
        if isinstance(node, (ast.Raise, ast.Assert)):
            self.record(node, scope, conditions)
            return
        if isinstance(node, ast.Try) or (hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)):
            self.visit_body(node.body, scope, conditions)
            for handler in node.handlers:
                caught = f"except {_text(handler.type)}" if handler.type is not None else "except"
                self.visit_body(handler.body, scope, [*conditions, caught])
            self.visit_body(node.orelse, scope, conditions)
            self.visit_body(node.finalbody, scope, conditions)
            return
        if isinstance(node, ast.Match):
            for case in node.cases:
                self.visit_body(case.body, scope, [*conditions, f"match {_text(node.subject)}: case {_text(case.pattern)}"])
            return
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):  # for / while / with
                self.visit_body(block, scope, conditions)

    def reads(self, tests: list[ast.AST]) -> list[str]:
        """What ``tests`` read, following local names one assignment deep within the enclosing function."""
        reads, names = _names_read(tests)
        if self.function:
            assigned = _assignments(self.function[-1])
            values = [v for name in sorted(names) for v in assigned.get(name, [])]
            reads |= _names_read(values)[0]
        return sorted(reads)

    def implicit_site(self, node: ast.stmt, scope: str, conditions: list[str]) -> None:
        """An ``implicit`` entry where a listed line falls in this statement's own part (a compound statement's
        header: an ``if`` / ``while`` test, a ``for`` iterable, a ``with`` item; a simple statement whole)."""
        if not self.implicit:
            return
        if isinstance(node, (ast.If, ast.While)):
            own = [node.test]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            own = [node.iter]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            own = [item.context_expr for item in node.items]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try, ast.Match)) \
                or (hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)):
            own = []
        else:
            own = [node]
        if not own:
            return
        first, last = min(n.lineno for n in own), max(n.end_lineno or n.lineno for n in own)
        for line in sorted(self.implicit):
            if first <= line <= last:
                exception = self.implicit.pop(line)
                top = scope.split(".")[0]
                if self.functions is not None and top not in self.functions:
                    continue
                ordinal = self.ordinals[scope + "#implicit"] = self.ordinals.get(scope + "#implicit", 0) + 1
                tests = [*self.tests, *own]
                self.entries.append(Entry(f"{self.path}:{scope}:implicit-{ordinal}", self.path, first, last, scope,
                                          "implicit", exception, [*conditions, f"at: {_text(own[0])[:200]}"], "",
                                          self.reads(tests)))

    def record(self, node: ast.Raise | ast.Assert, scope: str, conditions: list[str]) -> None:
        top = scope.split(".")[0]
        if self.functions is not None and top not in self.functions:
            return
        ordinal = self.ordinals[scope] = self.ordinals.get(scope, 0) + 1
        tests = list(self.tests)
        if isinstance(node, ast.Assert):
            kind, exception, message, conds = "assert", "AssertionError", _text(node.msg), [*conditions, _text(node.test)]
            tests.append(node.test)
        else:
            kind, (exception, message), conds = "raise", _raised(node), list(conditions)
        self.entries.append(Entry(f"{self.path}:{scope}:{ordinal}", self.path, node.lineno, node.end_lineno or node.lineno,
                                  scope, kind, exception, conds, message, self.reads(tests)))


def module_entries(path: str, source: str, functions: frozenset[str] | None = None,
                   implicit: dict[int, str] | None = None) -> list[Entry]:
    """The catalog entries of one module's source (``functions``: the top-level names to keep, None for all;
    ``implicit``: line -> exception of the implicit failure sites to record)."""
    walker = _Walker(path, functions, implicit)
    walker.visit_body(ast.parse(source, filename=path).body, "<module>", [])
    if walker.implicit:
        raise ValueError(f"{path}: implicit failure sites on lines no statement of a catalogued function holds: "
                         f"{sorted(walker.implicit)}")
    return walker.entries


def wheel_sources(wheel: Path) -> Iterator[tuple[str, str, frozenset[str] | None]]:
    """(path, source, function filter) of every catalogued module of the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            functions = in_scope(name)
            if functions is not False:
                yield name, archive.read(name).decode("utf-8"), functions  # type: ignore[misc]


def implicit_sites(path: Path | None) -> dict[str, dict[int, str]]:
    """file -> line -> exception of the implicit failure sites listed in ``path`` (YAML: ``sites``, each with
    ``file``, ``line``, ``exception`` and ``why``); none when there is no such file."""
    if path is None or not path.exists():
        return {}
    import yaml  # noqa: PLC0415

    out: dict[str, dict[int, str]] = {}
    for site in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sites", []):
        out.setdefault(site["file"], {})[int(site["line"])] = site["exception"]
    return out


def catalog(wheel: Path, version: str, implicit: Path | None = None) -> dict[str, Any]:
    """The catalog of ``wheel`` as a JSON-ready mapping, entries sorted by file and line (with the implicit
    failure sites ``implicit`` lists)."""
    entries: list[Entry] = []
    files: list[str] = []
    sites = implicit_sites(implicit)
    for path, source, functions in wheel_sources(wheel):
        files.append(path)
        entries.extend(module_entries(path, source, functions, sites.pop(path, None)))
    if sites:
        raise ValueError(f"implicit failure sites in files the catalog does not read: {sorted(sites)}")
    entries.sort(key=lambda e: (e.file, e.line, e.id))
    ids = [e.id for e in entries]
    if len(ids) != len(set(ids)):  # cannot happen: ordinals are per function
        raise ValueError("duplicate catalog ids")
    return {"format": FORMAT, "generator": GENERATOR, "sglang_version": version, "wheel": wheel.name,
            "files": files, "entries": [asdict(e) for e in entries]}


def dumps(data: dict[str, Any]) -> str:
    """The committed text: stable key order, one entry field per line."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def mapping_ids(path: Path) -> set[str]:
    """The entry ids a mapping file (YAML, keyed by id) names."""
    import yaml  # noqa: PLC0415 - only for the optional diff

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return set(data.get("entries", {}))


def report_diff(ids: set[str], mapped: set[str]) -> list[str]:
    """Lines naming the entries without a mapping (new) and the mapped ids the catalog lacks (removed)."""
    lines = [f"new (not mapped): {i}" for i in sorted(ids - mapped)]
    lines += [f"removed (mapped, no longer in the wheel): {i}" for i in sorted(mapped - ids)]
    return lines


def find_wheel(version: str, wheel_dir: Path) -> Path | None:
    """The first (sorted) ``sglang-<version>-*.whl`` in ``wheel_dir``, if any."""
    matches = sorted(wheel_dir.glob(f"sglang-{version}-*.whl"))
    return matches[0] if matches else None


def main(argv: list[str] | None = None) -> int:
    """Write the catalog; with --mapping, print what it lacks or names in excess (exit 1 when anything)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="sglang version, e.g. 0.5.23")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON catalog")
    parser.add_argument("--wheel", type=Path, help="use this wheel instead of the one in --wheel-dir")
    parser.add_argument("--wheel-dir", type=Path, default=Path(DEFAULT_WHEEL_DIR), help="wheel cache directory")
    parser.add_argument("--mapping", type=Path, help="the mapping YAML to compare the catalog's ids with")
    parser.add_argument("--implicit", type=Path,
                        help="the implicit failure sites to record (default: implicit-VERSION.yml beside --out)")
    args = parser.parse_args(argv)
    wheel = args.wheel or find_wheel(args.version, args.wheel_dir)
    if wheel is None:
        parser.error(f"no sglang-{args.version}-*.whl in {args.wheel_dir} (make wheel SGLANG_VERSION={args.version})")
    implicit = args.implicit or args.out.parent / f"implicit-{args.version}.yml"
    data = catalog(wheel, args.version, implicit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(data), encoding="utf-8")
    print(f"wrote {args.out}: {len(data['entries'])} entries from {len(data['files'])} files of {wheel.name}")
    if args.mapping is None:
        return 0
    mapped = mapping_ids(args.mapping) if args.mapping.exists() else set()
    lines = report_diff({e["id"] for e in data["entries"]}, mapped)
    print("\n".join(lines) if lines else f"every entry is mapped in {args.mapping}, and only those")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
