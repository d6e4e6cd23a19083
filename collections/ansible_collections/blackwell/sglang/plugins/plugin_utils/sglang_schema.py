# SPDX-License-Identifier: Apache-2.0
"""The command-line schema of a pinned SGLang release.

The schema files under ``schemas/`` are generated from the real SGLang wheel by
``tools/sglang_schema.py`` (static AST extraction, no install).  This module
loads them and answers the questions the validator and the renderer ask: which
argument a key names, what type and choices it takes, and how it is spelled on
the command line.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import secret_dests, secret_var
from packaging.version import Version

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")

# argparse actions that take no value on the command line.
SWITCH_ACTIONS = frozenset(
    {"store_true", "store_false", "store_const", "BooleanOptionalAction", "DeprecatedStoreTrueAction"}
)


@dataclass(frozen=True)
class ArgSpec:
    """One argparse argument of ``sglang.launch_server``."""

    dest: str
    option_strings: tuple[str, ...]
    action: str
    type: str | None
    nargs: Any
    choices: tuple[Any, ...] | None
    default: Any
    required: bool
    deprecated: bool
    deprecated_message: str
    help: str
    source: str

    @property
    def flag(self) -> str:
        """The canonical (first registered, full) option string."""
        return self.option_strings[0]

    @property
    def is_switch(self) -> bool:
        """True when the flag takes no value (``store_true`` and friends)."""
        return self.action in SWITCH_ACTIONS or self.nargs == 0

    @property
    def negation(self) -> str | None:
        """The ``--no-X`` spelling of a BooleanOptionalAction, which false renders to."""
        if self.action != "BooleanOptionalAction":
            return None
        return next((o for o in self.option_strings if o.startswith("--no-")), None)

    @property
    def takes_list(self) -> bool:
        """True when the flag takes several values (``nargs`` '+', '*' or N > 1)."""
        if self.nargs in ("+", "*"):
            return True
        return isinstance(self.nargs, int) and self.nargs > 1

    @property
    def literal_default(self) -> Any:
        """The default when it is a plain literal, else None (computed defaults)."""
        if isinstance(self.default, dict) and "__expr__" in self.default:
            return None
        return self.default


def normalize_key(key: str) -> str:
    """``--tp-size`` / ``tp-size`` / ``tp_size`` -> ``tp_size``."""
    return str(key).strip().lstrip("-").replace("-", "_")


class Schema:
    """All arguments of one SGLang release, indexed by dest and option string."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.version: str = data["sglang_version"]
        self.arguments: dict[str, ArgSpec] = {}
        self._by_name: dict[str, str] = {}
        for dest, raw in data["arguments"].items():
            spec = ArgSpec(
                dest=dest,
                option_strings=tuple(raw["option_strings"]),
                action=raw.get("action") or "store",
                type=raw.get("type"),
                nargs=raw.get("nargs"),
                choices=tuple(raw["choices"]) if raw.get("choices") is not None else None,
                default=raw.get("default"),
                required=bool(raw.get("required")),
                deprecated=bool(raw.get("deprecated")),
                deprecated_message=raw.get("deprecated_message") or "",
                help=raw.get("help") or "",
                source=raw.get("source") or "",
            )
            self.arguments[dest] = spec
            for option in spec.option_strings:
                self._by_name.setdefault(normalize_key(option), dest)
        for dest in self.arguments:
            self._by_name[dest] = dest

    def lookup(self, key: str) -> ArgSpec | None:
        """The argument a host-var key names (dest, or an option string with or without dashes)."""
        dest = self._by_name.get(normalize_key(key))
        return self.arguments.get(dest) if dest else None

    def suggest(self, key: str, limit: int = 3) -> list[str]:
        """Close matches for an unknown key, as dest names."""
        norm = normalize_key(key)
        names = difflib.get_close_matches(norm, list(self._by_name), n=limit * 2, cutoff=0.6)
        out: list[str] = []
        for name in names:
            dest = self._by_name[name]
            if dest not in out:
                out.append(dest)
        # A key that is a prefix of real flags (argparse would accept a unique one) is a likely typo too.
        if not out:
            out = sorted(d for d in self.arguments if d.startswith(norm))[:limit]
        return out[:limit]

    @cached_property
    def secrets(self) -> frozenset[str]:
        """Dests of the arguments that hold secrets (API keys, key passwords), derived from names and help."""
        return secret_dests((d, s.type, s.help) for d, s in self.arguments.items() if not s.is_switch)

    def default(self, dest: str) -> Any:
        """The literal default of an argument (None when computed or unknown)."""
        spec = self.arguments.get(dest)
        return spec.literal_default if spec else None


def available_versions() -> list[str]:
    """SGLang versions with a committed schema, oldest first (PEP 440 order: 0.5.9 < 0.5.23 < 0.5.24rc1 < 0.5.24)."""
    out = []
    for name in os.listdir(SCHEMA_DIR):
        if name.startswith("sglang-") and name.endswith(".json"):
            out.append(name[len("sglang-") : -len(".json")])
    return sorted(out, key=Version)


@lru_cache(maxsize=8)
def load_schema(version: str) -> Schema:
    """Load the schema of ``version``; KeyError names the versions that exist."""
    path = os.path.join(SCHEMA_DIR, f"sglang-{version}.json")
    if not os.path.exists(path):
        raise KeyError(version)
    with open(path, encoding="utf-8") as handle:
        return Schema(json.load(handle))


def secret_host_vars() -> tuple[str, ...]:
    """The host variables that carry secret arguments, over every committed release (``sglang_api_key`` ...)."""
    dests = set().union(*(load_schema(v).secrets for v in available_versions()))
    return tuple(secret_var(d) for d in sorted(dests))
