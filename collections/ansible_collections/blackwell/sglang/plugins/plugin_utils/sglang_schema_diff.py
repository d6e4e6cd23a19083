# SPDX-License-Identifier: Apache-2.0
"""What changed in SGLang's command line between releases, derived from the committed schemas.

Consecutive schemas (``schemas/sglang-<version>.json``) are compared argument by argument (by dest): arguments
removed and added, option strings dropped, choices removed or added, literal defaults changed. A diff cannot know
that a removed argument lives on under another name: :data:`RENAMES` says so, each pair with the release that
renamed it, and nothing else is typed by hand. :func:`upgrade_problems` walks a host's ``sglang_args`` from the
release it runs to the one it is validated against, release by release.

Pure data and stdlib only (``packaging`` for the version order): ``tools/sglang_schema_diff.py`` loads this file
without Ansible.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")


@dataclass(frozen=True)
class Rename:
    """A dest the schemas show removed in ``since`` whose meaning moved to ``new`` (added in, or kept by, it)."""

    old: str
    new: str
    since: str
    note: str = ""


# What a diff cannot know: "renamed to", for an argument removed while another takes over its meaning. Each pair
# is checked against the schemas (tests/unit/test_schema_diff.py): ``old`` is in the release before ``since`` and
# not in ``since``; ``new`` is in ``since``. The renames of 0.5.18 ... 0.5.23 need none: every one of them kept the
# old name as a deprecated alias registered with the new dest for a release or more (``--mamba-scheduler-strategy``
# -> dest ``mamba_radix_cache_strategy`` up to 0.5.19), which the diff reads; the arguments removed outright
# (``enable_prefill_context_parallel``, ``cuda_graph_tc_compiler``, ...) have no successor in the release's source.
RENAMES: dict[str, Rename] = {}


@dataclass
class ArgChange:
    """How one argument (by dest) changed from one release to the next."""

    dest: str
    removed: bool = False
    added: bool = False
    renamed_to: str | None = None
    alias_const: Any = None  # the value a removed store-const alias set on renamed_to
    options_removed: list[str] = field(default_factory=list)
    choices_removed: list[Any] = field(default_factory=list)
    choices_added: list[Any] = field(default_factory=list)
    default: tuple[Any, Any] | None = None  # (old, new) literal defaults


@dataclass
class SchemaDiff:
    """Every change between two consecutive releases."""

    old_version: str
    new_version: str
    changes: dict[str, ArgChange] = field(default_factory=dict)

    def of(self, kind: str) -> list[ArgChange]:
        """``removed``, ``added``, ``renamed``, ``options``, ``choices`` or ``default`` changes, by dest."""
        test = {
            "removed": lambda c: c.removed and not c.renamed_to,
            "renamed": lambda c: c.renamed_to is not None,
            "added": lambda c: c.added,
            "options": lambda c: bool(c.options_removed),
            "choices": lambda c: bool(c.choices_removed or c.choices_added),
            "default": lambda c: c.default is not None,
        }[kind]
        return [c for c in self.changes.values() if test(c)]

    def summary(self) -> str:
        """The review text ``make schema`` prints."""
        lines = [f"SGLang {self.old_version} -> {self.new_version}:"]
        for kind, label in (("renamed", "renamed (a deprecated alias dropped, or RENAMES)"), ("removed", "removed"), ("added", "added"),
                            ("options", "option strings dropped"), ("choices", "choices changed"),
                            ("default", "defaults changed")):
            items = self.of(kind)
            lines.append(f"  {label}: {len(items)}")
            for c in items:
                lines.append("    " + _describe(c))
        return "\n".join(lines)


def _describe(c: ArgChange) -> str:
    if c.renamed_to:
        return f"{c.dest} -> {c.renamed_to}" + (f": {c.alias_const}" if c.alias_const is not None else "")
    if c.removed or c.added:
        return c.dest
    parts = []
    if c.options_removed:
        parts.append("dropped " + ", ".join(c.options_removed))
    if c.choices_removed:
        parts.append("choices removed " + ", ".join(map(str, c.choices_removed)))
    if c.choices_added:
        parts.append("choices added " + ", ".join(map(str, c.choices_added)))
    if c.default is not None:
        parts.append(f"default {c.default[0]!r} -> {c.default[1]!r}")
    return f"{c.dest}: " + "; ".join(parts)


def _literal(value: Any) -> Any:
    """A literal default, or a marker for a computed one (``{"__expr__": ...}``), which is not compared."""
    return None if isinstance(value, dict) and "__expr__" in value else value


def _choices(raw: dict[str, Any]) -> list[Any] | None:
    choices = raw.get("choices")
    return list(choices) if isinstance(choices, list) else None


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _const_alias(raw: dict[str, Any]) -> Any:
    """The value a store-const alias stores into its dest, else None: ``DeprecatedStoreConstAction`` keeps it in
    ``const_value``, which its help spells out ("Deprecated alias for --cuda-graph-backend-prefill=disabled.")."""
    if raw.get("action") != "DeprecatedStoreConstAction":
        return None
    match = re.search(r"--[\w-]+=([^\s,;]+?)\.?(?:\s|$)", raw.get("deprecated_message") or raw.get("help") or "")
    return match.group(1) if match else None


def diff_schemas(old: dict[str, Any], new: dict[str, Any], renames: dict[str, Rename] | None = None) -> SchemaDiff:
    """The changes from schema ``old`` to schema ``new`` (raw schema documents), by argument name.

    An argument's name is its schema key: the dest, or for a second registration of one dest (a deprecated alias
    such as ``--mamba-scheduler-strategy``, whose dest is ``mamba_radix_cache_strategy``) the alias's own name.
    A removed alias whose dest is still an argument is a rename the diff derives (``renamed_to`` = that dest);
    :data:`RENAMES` names the others. Choices are compared as sets; defaults only when both are literals.
    """
    renames = RENAMES if renames is None else renames
    out = SchemaDiff(old["sglang_version"], new["sglang_version"])
    before, after = old["arguments"], new["arguments"]
    for name, raw in before.items():
        if name not in after:
            change = out.changes[name] = ArgChange(name, removed=True)
            rename = renames.get(name)
            if rename and rename.since == out.new_version and rename.new in after:
                change.renamed_to = rename.new
            elif raw.get("dest", name) != name and raw.get("dest") in after:
                change.renamed_to = raw["dest"]
                change.alias_const = _const_alias(raw)
            continue
        now = after[name]
        change = ArgChange(name)
        change.options_removed = [o for o in raw["option_strings"] if o not in now["option_strings"]]
        was, became = _choices(raw), _choices(now)
        if was is not None and became is not None:
            keys_now = {_key(v) for v in became}
            keys_was = {_key(v) for v in was}
            change.choices_removed = [v for v in was if _key(v) not in keys_now]
            change.choices_added = [v for v in became if _key(v) not in keys_was]
        computed = any(isinstance(r.get("default"), dict) and "__expr__" in r["default"] for r in (raw, now))
        if not computed and _key(raw.get("default")) != _key(now.get("default")):
            change.default = (raw.get("default"), now.get("default"))
        if change.options_removed or change.choices_removed or change.choices_added or change.default is not None:
            out.changes[name] = change
    for name in after:
        if name not in before:
            out.changes[name] = ArgChange(name, added=True)
    return out


# --- committed schemas ------------------------------------------------------------------------------------


def _version_key(version: str) -> Any:
    try:
        from packaging.version import Version

        return Version(version)
    except ImportError:  # pragma: no cover (the tool on a bare python3): plain releases only
        return tuple(int(p) for p in version.split("."))


def committed_versions(schema_dir: str = SCHEMA_DIR) -> list[str]:
    """Releases with a committed schema, oldest first."""
    names = [n[len("sglang-"):-len(".json")] for n in os.listdir(schema_dir) if n.startswith("sglang-") and n.endswith(".json")]
    return sorted(names, key=_version_key)


_RAW: dict[tuple[str, str], dict[str, Any]] = {}


def raw_schema(version: str, schema_dir: str = SCHEMA_DIR) -> dict[str, Any]:
    """The schema document of ``version`` (KeyError when none is committed)."""
    key = (schema_dir, version)
    if key not in _RAW:
        path = os.path.join(schema_dir, f"sglang-{version}.json")
        if not os.path.exists(path):
            raise KeyError(version)
        with open(path, encoding="utf-8") as handle:
            _RAW[key] = json.load(handle)
    return _RAW[key]


def steps(old: str, new: str, schema_dir: str = SCHEMA_DIR) -> list[SchemaDiff]:
    """The diffs of every consecutive pair of committed releases from ``old`` up to ``new`` (both committed)."""
    versions = committed_versions(schema_dir)
    if old not in versions or new not in versions:
        raise KeyError(old if old not in versions else new)
    lo, hi = versions.index(old), versions.index(new)
    if lo > hi:
        raise ValueError(f"{old} is newer than {new}: only upgrades are diffed")
    return [diff_schemas(raw_schema(a, schema_dir), raw_schema(b, schema_dir))
            for a, b in zip(versions[lo:hi], versions[lo + 1:hi + 1], strict=True)]


# --- the upgrade check ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpgradeFinding:
    """One argument of a host that the upgrade from ``old`` to ``new`` affects."""

    level: str  # "error" or "warning"
    kind: str  # "renamed", "removed", "choice", "default"
    key: str  # the key as the host writes it
    dest: str  # its dest in the old release
    since: str  # the release that changed it
    message: str
    fix: str


def _normalize(key: str) -> str:
    return str(key).strip().lstrip("-").replace("-", "_")


def _name_of(schema: dict[str, Any], key: str) -> str | None:
    """The argument (schema key) a host key names: an option string with or without dashes, or the name itself."""
    norm = _normalize(key)
    for name, raw in schema["arguments"].items():
        if any(_normalize(o) == norm for o in raw["option_strings"]):
            return name
    return norm if norm in schema["arguments"] else None


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def upgrade_findings(args: dict[str, Any], old: str, new: str, schema_dir: str = SCHEMA_DIR) -> list[UpgradeFinding]:
    """What upgrading a host whose ``sglang_args`` are ``args`` from SGLang ``old`` to ``new`` breaks or changes.

    Per key (unknown to ``old``: skipped, the validator reports it anyway): renamed (error, with the new name),
    removed (error), its value no longer among the choices (error), its default changed (warning: the host sets
    the argument, so its value is kept, but the release's default moved). A rename is followed: later steps are
    checked under the new dest.
    """
    out: list[UpgradeFinding] = []
    diffs = steps(old, new, schema_dir)
    start = raw_schema(old, schema_dir)
    for key, value in args.items():
        dest = _name_of(start, key)
        if dest is None:
            continue
        current = dest
        for diff in diffs:
            change = diff.changes.get(current)
            if change is None:
                continue
            where = f"SGLang {diff.new_version}"
            if change.renamed_to:
                rename = RENAMES.get(current)
                note = f" ({rename.note})" if rename and rename.note else ""
                fix = (f"replace sglang_args.{key} with {change.renamed_to}: {change.alias_const}"
                       if change.alias_const is not None else f"rename sglang_args.{key} to {change.renamed_to}{note}")
                out.append(UpgradeFinding(
                    "error", "renamed", str(key), dest, diff.new_version,
                    f"{_flag(current)} was renamed to {_flag(change.renamed_to)}: {where} no longer accepts the old "
                    f"name (upgrading {old} -> {new}).", fix))
                if change.alias_const is not None:
                    break  # the alias set a constant, not the host's value: nothing further to follow
                current = change.renamed_to
                continue
            if change.removed:
                out.append(UpgradeFinding(
                    "error", "removed", str(key), dest, diff.new_version,
                    f"{_flag(current)} was removed in {where} (upgrading {old} -> {new}); {new} refuses it.",
                    f"remove sglang_args.{key} (check the release notes of {diff.new_version} for a replacement)"))
                break
            if change.choices_removed and value is not None and not isinstance(value, (list, dict)) and any(
                    _key(value) == _key(c) or str(value) == str(c) for c in change.choices_removed):
                allowed = ", ".join(map(str, _choices(raw_schema(diff.new_version, schema_dir)["arguments"].get(current) or
                                                      {"choices": None}) or []))
                out.append(UpgradeFinding(
                    "error", "choice", str(key), dest, diff.new_version,
                    f"{value!r} is no longer a choice of {_flag(current)} from {where} (upgrading {old} -> {new}).",
                    f"set sglang_args.{key} to one of: {allowed}"))
            if change.default is not None:
                was, now = change.default
                out.append(UpgradeFinding(
                    "warning", "default", str(key), dest, diff.new_version,
                    f"the default of {_flag(current)} changed from {was!r} to {now!r} in {where} (upgrading {old} -> "
                    f"{new}); this host sets it ({value!r}), so its value is kept.",
                    f"keep sglang_args.{key} if {value!r} is still what you want, or drop it to take the new default {now!r}"))
    return out
