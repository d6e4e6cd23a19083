# SPDX-License-Identifier: Apache-2.0
"""The gateways' own ``launch`` parsers, as data: extra arguments read the way the pinned gateway reads them.

``schemas/gateway-<gateway>-<version>.json`` is extracted from the gateway's wheel by
``tools/gateway_schema.py`` (one command per release; the real ``RouterArgs.add_cli_args`` on the parser
``parse_router_args`` builds).  :func:`parse` reads a list of words as that argparse parser does on Python
3.11 (exact option strings, ``--opt=value``, unique prefixes since ``allow_abbrev`` is left on, negative
numbers as values, greedy ``nargs``), converts every value with the option's type (``int``, ``float``,
``str.lower`` and the gateway's own helpers) and checks its choices, so a word the gateway would refuse at
start is refused here first, with the option's ``add_argument`` call cited (``smg/router_args.py:NNN``).

Pure Python, no Ansible import.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
# The gateways the role installs: name -> the distribution on the package index.
GATEWAYS = ("smg", "sglang-router")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_RELEASE = re.compile(r"[0-9]+(?:\.[0-9]+){1,3}")


class ValueRefused(ValueError):
    """A value the option's type or choices refuse (the message says why, never repeating the value)."""


def _int(text: str) -> int:
    return int(text)


def _non_negative_int(text: str) -> int:
    number = int(text)
    if number < 0:
        raise ValueRefused("a non-negative integer")
    return number


def _int_csv(text: str) -> list[int]:
    return [int(item) for item in text.split(",") if item]


def _text(text: str) -> str:
    return text


# How each type the schemas name converts a word (what the gateway's parser calls): the builtins, and the
# gateways' own helpers, which the tests compare with their source in the schema (their ``types``).
TYPES: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (_text, "text"),
    "int": (_int, "an integer (Python int())"),
    "float": (float, "a number (Python float())"),
    "str.lower": (str.lower, "text, compared in lower case"),
    "_non_negative_int": (_non_negative_int, "a non-negative integer"),
    "_parse_int_csv": (_int_csv, "comma-separated integers"),
}
# Lambdas have no name of their own: the ones the role knows, by option (dest), all splitting text.
TEXT_LAMBDAS = {"mm_allowed_media_domains": "comma-separated host names"}


@dataclass(frozen=True)
class Parsed:
    """One option an argument list sets: where its word is, the action (a schema record) and its values."""

    index: int
    word: str
    action: dict
    values: tuple[str, ...]


@dataclass
class Reading:
    """What :func:`parse` made of a word list: the options, and the refusals as ``(index, message)``."""

    options: list[Parsed] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True)
class GatewaySchema:
    """A gateway release's launch parser (a schema file's content)."""

    data: dict = field(hash=False, compare=False)
    name: str = ""

    @property
    def command(self) -> str:
        return str(self.data["command"])

    @property
    def version(self) -> str:
        return str(self.data["version"])

    @property
    def actions(self) -> list[dict]:
        return list(self.data["arguments"])

    def by_dest(self, dest: str) -> dict | None:
        return next((a for a in self.data["arguments"] if a["dest"] == dest), None)

    def option_strings(self) -> dict[str, dict]:
        return {o: a for a in self.data["arguments"] for o in a["option_strings"]}

    def cite(self, action: dict | None = None) -> str:
        """``smg launch 1.13.0's parser (smg/router_args.py:516)``: where the gateway declares it."""
        where = (action or {}).get("source") or self.data["parser"]["source"]
        return f"`{self.command}` {self.version}'s parser ({where}; schemas/{self.name})"


def schema_name(gateway: str, version: str) -> str:
    return f"gateway-{gateway}-{version}.json"


@lru_cache(maxsize=16)
def load(gateway: str, version: str) -> GatewaySchema | None:
    """The committed schema of ``gateway`` ``version``, or None (no such gateway, release or file)."""
    if gateway not in GATEWAYS or not isinstance(version, str) or not _RELEASE.fullmatch(version):
        return None
    name = schema_name(gateway, version)
    path = os.path.join(SCHEMA_DIR, name)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return GatewaySchema(json.load(handle), name)


def releases(gateway: str) -> list[str]:
    """The releases of ``gateway`` with a committed schema."""
    prefix = f"gateway-{gateway}-"
    out = []
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if name.startswith(prefix) and name.endswith(".json") and _RELEASE.fullmatch(name[len(prefix):-5]):
            out.append(name[len(prefix):-5])
    return out


def convert(schema: GatewaySchema, action: dict, word: str) -> str | None:
    """Why the gateway's parser refuses ``word`` as a value of ``action`` (its type, then its choices), or None."""
    kind = action.get("type")
    if kind is None:
        value: Any = word
    else:
        known = TYPES.get(kind)
        if known is None and kind.endswith("<lambda>") and action["dest"] in TEXT_LAMBDAS:
            known = (_text, TEXT_LAMBDAS[action["dest"]])
        if known is None:
            return (f"the role does not know how {schema.cite(action)} converts its value (type {kind}): "
                    "leave the option out, or teach plugin_utils/sglang_gateway_args.py its type")
        try:
            value = known[0](word)
        except (ValueError, ArithmeticError) as why:
            detail = str(why) if isinstance(why, ValueRefused) else known[1]
            return f"its value is not {detail}, which {schema.cite(action)} requires"
    choices = action.get("choices")
    if choices is not None and value not in choices:
        return f"its value is none of {', '.join(map(str, choices))}: {schema.cite(action)}"
    return None


def _word_kind(word: str, known: dict[str, dict]) -> str:
    """'O' for a word argparse takes for an option, 'A' for one it takes for a value, '-' for '--'."""
    if word == "--":
        return "-"
    return "O" if _optional(word, known) is not None else "A"


def _optional(word: str, known: dict[str, dict]) -> tuple[dict | None, str, str | None] | None:
    """argparse 3.11's ``_parse_optional``: (action or None, option string, explicit value) or None for a value.

    An ambiguous prefix is returned as (None, "ambiguous: a, b", None)."""
    if not word or word[0] != "-":
        return None
    if word in known:
        return known[word], word, None
    if len(word) == 1:
        return None
    if "=" in word:
        name, explicit = word.split("=", 1)
        if name in known:
            return known[name], name, explicit
    matches = _prefix_matches(word, known)
    if len(matches) > 1:
        return None, "ambiguous: " + ", ".join(m[1] for m in matches), None
    if len(matches) == 1:
        return matches[0]
    if _NEGATIVE_NUMBER.match(word):
        return None
    if " " in word:
        return None
    return None, word, None


def _prefix_matches(word: str, known: dict[str, dict]) -> list[tuple[dict, str, str | None]]:
    """argparse 3.11's ``_get_option_tuples`` (allow_abbrev on): long options by prefix, ``--opt=value`` split;
    a single-dash word by its first two characters (``-hX``: ``-h`` with ``X``) or as a prefix."""
    if word.startswith("--"):
        name, explicit = word.split("=", 1) if "=" in word else (word, None)
        return [(a, o, explicit) for o, a in known.items() if o.startswith(name)]
    out = []
    for option, action in known.items():
        if option == word[:2]:
            out.append((action, option, word[2:]))
        elif option.startswith(word):
            out.append((action, option, None))
    return out


def _arity(nargs: Any) -> tuple[int, int | None]:
    """(least, most) words an action takes after its option (most None: as many as there are)."""
    if nargs is None:
        return 1, 1
    if nargs == "?":
        return 0, 1
    if nargs == "*":
        return 0, None
    if nargs == "+":
        return 1, None
    if isinstance(nargs, int):
        return nargs, nargs
    return 0, None


def parse(schema: GatewaySchema, words: Sequence[str]) -> Reading:
    """Read ``words`` (text) as the gateway's launch parser does; every refusal names the word's index.

    Refused: an option the parser does not know (or an ambiguous prefix), a value missing or too many, an
    explicit ``=value`` on a switch, a word no option takes (the parser has no positional argument), a value its
    type or choices refuse, and two options of one mutually exclusive group."""
    known = schema.option_strings()
    kinds = [_word_kind(w, known) for w in words]
    out = Reading()
    seen_mutex: dict[int, Parsed] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if kinds[i] == "-":
            out.problems.append((i, "'--' ends the options: the words after it would be read as values no option takes"))
            i += 1
            continue
        if kinds[i] == "A":
            out.problems.append((i, f"no option of {schema.cite()} takes this word (it has no positional argument): "
                                    "an option's value is given right after it"))
            i += 1
            continue
        action, name, explicit = _optional(word, known)  # type: ignore[misc]
        if action is None:
            if name.startswith("ambiguous: "):
                out.problems.append((i, f"{word.split('=', 1)[0]!r} is an ambiguous abbreviation in {schema.cite()}: "
                                        f"it could be {name[len('ambiguous: '):]}"))
            else:
                close = difflib.get_close_matches(name.split("=", 1)[0], list(known), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                out.problems.append((i, f"{word.split('=', 1)[0]!r} is no option of {schema.cite()}{hint}"))
            i += 1
            while i < len(words) and kinds[i] == "A":  # its values: unrecognized with it, not reported again
                i += 1
            continue
        least, most = _arity(action.get("nargs"))
        if explicit is not None:
            if most == 0 or least > 1:
                why = "takes no value ('=...')" if most == 0 else f"takes {least} values, not one '=' value"
                out.problems.append((i, f"{name} {why} in {schema.cite(action)}"))
                out.options.append(Parsed(i, name, action, ()))
                i += 1
                continue
            values: tuple[str, ...] = (explicit,)
            nxt = i + 1
        else:
            follow = 0
            while i + 1 + follow < len(words) and kinds[i + 1 + follow] == "A" and (most is None or follow < most):
                follow += 1
            if follow < least:
                count = "one value" if least == 1 else f"{least} values"
                out.problems.append((i, f"{name} expects {count} after it ({schema.cite(action)})"))
                out.options.append(Parsed(i, name, action, ()))
                i += 1 + follow
                continue
            values = tuple(words[i + 1:i + 1 + follow])
            nxt = i + 1 + follow
        for offset, value in enumerate(values):
            why = convert(schema, action, value)
            if why:
                out.problems.append((i if explicit is not None else i + 1 + offset, f"{name}: {why}"))
        parsed = Parsed(i, name, action, values)
        group = action.get("mutex")
        if group is not None:
            other = seen_mutex.get(group)
            if other is not None and other.action is not action:
                out.problems.append((i, f"{name} is not allowed with {other.word} ({schema.cite(action)}: "
                                        "a mutually exclusive group)"))
            seen_mutex.setdefault(group, parsed)
        out.options.append(parsed)
        i = nxt
    return out
