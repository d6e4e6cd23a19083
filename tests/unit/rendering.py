"""Render the role's unit, environment file and ``--config`` YAML without Ansible, and parse them back.

Rendering: the role's ``defaults/main.yml`` and ``vars/main.yml`` expressions are evaluated with plain
Jinja2 (``compile_expression`` for whole-value ``{{ expr }}``), the collection's filters are registered
under their ``blackwell.sglang.`` names and the few Ansible globals the role uses (``query('vars')``,
``combine``, ``zip``, ``to_json``, ``to_nice_yaml``) are provided, as Ansible would resolve them.

Parsing: reference implementations of systemd's own rules, written from systemd's sources (v252):
``conf-parser.c`` (unit files: sections, assignments, continuation lines, comments), ``extract_first_word``
with ``EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE`` plus specifier and ``$`` expansion (``ExecStart=``), and
``env-file.c`` (``EnvironmentFile=``).  The tests compare what systemd would read with what the plan says.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml
from ansible.plugins.filter.core import to_bool, to_nice_yaml
from ansible_collections.blackwell.sglang.plugins.filter.sglang import FilterModule, instance_plans
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import SETTINGS, server_files

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_server"
HOST = "blackwell-01"
_EXPR = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.DOTALL)
# The role's defaults after those of its dependency roles/sglang_common (Ansible loads them in that order).
_DEFAULTS = {**yaml.safe_load((REPO / "roles" / "sglang_common" / "defaults" / "main.yml").read_text(encoding="utf-8")),
             **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))}
_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))


def _combine(*dicts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in dicts:
        out.update(item)
    return out


def jinja_env() -> jinja2.Environment:
    """Ansible's template module renders with trim_blocks=True; StrictUndefined catches a missing variable."""
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    for name, fn in FilterModule().filters().items():
        env.filters[f"blackwell.sglang.{name}"] = fn
        env.filters[name] = fn  # the server's templates (sglang_files) use the bare names
    env.filters["to_json"] = json.dumps
    env.filters["to_nice_yaml"] = to_nice_yaml
    env.filters["bool"] = to_bool
    env.filters["combine"] = _combine
    env.filters["zip"] = lambda *lists: list(zip(*lists, strict=False))
    return env


# Compiled expressions and templates of each environment, by source text, kept on the environment (they go with
# it): compiling is most of a render's time (thousands of property examples render the same role variables), and a
# compiled one depends only on its text and on the environment's filters and tests, which Jinja binds when it
# compiles: a caller adds its own filters and tests before it evaluates anything with the environment (the
# undefined type is read when it runs).
_CACHE_ATTR = "_bsa_compiled"


def _compiled(env: jinja2.Environment, expression: bool, source: str) -> Any:
    cache: dict[tuple[bool, str], Any] | None = getattr(env, _CACHE_ATTR, None)
    if cache is None:
        cache = {}
        setattr(env, _CACHE_ATTR, cache)
    key = (expression, source)
    if key not in cache:
        cache[key] = env.compile_expression(source, undefined_to_none=False) if expression else env.from_string(source)
    return cache[key]


def _role_env() -> jinja2.Environment:
    """One environment for every role_context (nothing changes it), so its compiled variables are reused."""
    global _ROLE_ENV
    if _ROLE_ENV is None:
        _ROLE_ENV = jinja_env()
    return _ROLE_ENV


_ROLE_ENV: jinja2.Environment | None = None


def _evaluate(env: jinja2.Environment, value: Any, context: dict[str, Any]) -> Any:
    """Evaluate a role variable as Ansible would for a whole-value ``{{ expr }}``: the native result."""
    if isinstance(value, dict):
        return {k: _evaluate(env, v, context) for k, v in value.items()}
    if isinstance(value, str):
        match = _EXPR.match(value)
        if match and "{{" not in match.group(1) and "}}" not in match.group(1):
            return _compiled(env, True, match.group(1))(**context)
        if "{{" in value:
            return _compiled(env, False, value).render(**context)
    return value


@dataclass
class Rendered:
    """The three files of one host and the role variables they were rendered from."""

    unit: str
    env: str
    config: str
    context: dict[str, Any]

    @property
    def plan(self) -> dict[str, Any]:
        return self.context["__sglang_server_plan"]


def role_context(hostvars: dict[str, Any], spec: str | None = None, instance: str | None = None) -> dict[str, Any]:
    """The role's variables for ``hostvars`` (defaults, host vars, then vars/main.yml), evaluated.

    ``instance``: the name of the instance (sglang_server_instance) for a host with sglang_instances.
    """
    env = _role_env()
    context: dict[str, Any] = {"ansible_managed": "Ansible managed", "inventory_hostname": HOST,
                               "hostvars": {HOST: hostvars}, "groups": {"all": [HOST]}}

    def query(name: str, *terms: str, default: Any = None) -> list[Any]:
        assert name == "ansible.builtin.vars", name
        return [context.get(term, default) for term in terms]

    context["query"] = query
    context.update(hostvars)
    for name, value in _DEFAULTS.items():
        if name not in hostvars:
            context[name] = _evaluate(env, value, context)
    if spec is not None:
        context["spec"] = spec
    if instance is not None:
        context["sglang_server_instance"] = instance
    # vars/main.yml refers to names defined further down (Ansible evaluates lazily): three passes.
    # __sglang_server_plans is the fact tasks/plans.yml sets: the validate action's secret_plans of the host, planned
    # with the role's own variables (__sglang_server_role_vars); the same function as instance_plans.
    for _ in range(3):
        if "__sglang_server_role_vars" in context and "__sglang_server_plans" not in context:
            context["__sglang_server_plans"] = instance_plans(HOST, context["hostvars"], context["groups"], spec,
                                                              context["__sglang_server_role_vars"])
        for name, value in _VARS.items():
            try:
                context[name] = _evaluate(env, value, context)
            except jinja2.UndefinedError:
                continue
            except jinja2.TemplateError as exc:
                if "No filter named" in str(exc) or "No test named" in str(exc):
                    continue  # an Ansible-only filter the files do not need
                raise
    return context


def render(hostvars: dict[str, Any], spec: str | None = None, mask_secrets: bool = False,
           instance: str | None = None) -> Rendered:
    """Render the unit, environment file and --config YAML as the role installs them: the instance's plan and the
    role's settings from its variables, through the collection's one rendering function (sglang_files.server_files)."""
    context = role_context(hostvars, spec, instance)
    settings = {name: context[name] for name in SETTINGS}
    out = server_files(context["__sglang_server_plan"], settings, str(REPO / "templates"), mask_secrets=mask_secrets)
    context["argv"] = out["argv"]  # what sglang.launch_server gets: the plan's argv and --config
    return Rendered(out["unit"], out["env"], out["config"] if out["config"] is not None else _empty_config(out), context)


def _empty_config(out: dict[str, Any]) -> str:
    """The --config file's text for a plan without secret arguments (the role installs none then): its comments."""
    return server_files_config_header(out["service"])


@functools.lru_cache(maxsize=1)
def _templates_env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "templates")), trim_blocks=True,
                              keep_trailing_newline=True)


def server_files_config_header(service: str) -> str:
    env = _templates_env()
    return env.get_template("sglang-config.yaml.j2").render(ansible_managed="Ansible managed", service=service,
                                                            plan={"config": {}}, mask_secrets=False, secret_marker="")


# --- systemd's readers ------------------------------------------------------------------------------

_LINE_END = re.compile(r"\r\n|\r|\n|\x00")  # systemd's read_line(): "\n", "\r", "\r\n" and NUL end a line
_WHITESPACE = " \t\n\r"
_COMMENTS = "#;"


def parse_unit(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) for every assignment of a unit file, in order, as systemd's config_parse reads them.

    A line ending in an unescaped backslash continues on the next line (the backslash becomes a space);
    comment lines inside a continuation are skipped; leading and trailing whitespace is dropped.
    """
    out: list[tuple[str, str, str]] = []
    section = ""
    continuation: str | None = None
    for raw in _LINE_END.split(text):
        line = raw.strip(_WHITESPACE)
        if continuation is not None and line[:1] in _COMMENTS and line:
            continue
        escaped = False
        for char in raw:
            escaped = (not escaped) if char == "\\" else False
        if escaped:
            piece = raw.rstrip(_WHITESPACE)[:-1] + " "
            continuation = (continuation or "") + piece
            continue
        if continuation is not None:
            line = (continuation + raw).strip(_WHITESPACE)
            continuation = None
        if not line or line[0] in _COMMENTS:
            continue
        if line.startswith("["):
            assert line.endswith("]"), f"bad section line {line!r}"
            section = line[1:-1]
            continue
        assert "=" in line, f"line without '=' in [{section}]: {line!r}"
        key, value = line.split("=", 1)
        out.append((section, key.strip(_WHITESPACE), value.strip(_WHITESPACE)))
    assert continuation is None, "unit ends inside a continuation line"
    return out


_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"', "'": "'",
              "s": " "}


def _unescape_specifiers(word: str) -> str:
    assert not re.search(r"%[^%]|%$", word.replace("%%", "")), f"unescaped specifier in {word!r}"
    return word.replace("%%", "%")


def systemd_split(line: str) -> list[str]:
    """Split an ExecStart= command line the way systemd (>= 240) does.

    Words are separated by unquoted whitespace; double and single quotes group (also inside a word,
    like a shell: ``"/a b"/c`` is ``/a b/c``); C escapes (``\\n``, ``\\"``, ``\\\\``...) are
    unescaped; then specifiers and variables are expanded, of which ``%%`` and ``$$`` are the literal
    ``%`` and ``$`` (any other ``%x`` or ``$X`` fails the test).  An unquoted ``;`` word would end the
    command (systemd's separator): the test fails on it.
    """
    words: list[str] = []
    word: str | None = None
    quote: str | None = None
    i = 0
    while i < len(line):
        char = line[i]
        if quote is None and char in _WHITESPACE:
            if word is not None:
                words.append(word)
                word = None
        elif char == "\\":
            i += 1
            assert i < len(line), "trailing backslash"
            assert line[i] in _C_ESCAPES, f"escape \\{line[i]} not produced by the quoting"
            word = (word or "") + _C_ESCAPES[line[i]]
        elif quote is None and char in "\"'":
            quote, word = char, word or ""
        elif char == quote:
            quote = None
        else:
            if quote is None and char == ";" and word is None and (i + 1 == len(line) or line[i + 1] in _WHITESPACE):
                raise AssertionError("unquoted ';' would end the command line")
            word = (word or "") + char
        i += 1
    assert quote is None, f"unterminated quote in {line!r}"
    if word is not None:
        words.append(word)
    out = []
    for item in words:
        item = _unescape_specifiers(item)
        assert "$" not in item.replace("$$", ""), f"unescaped variable in {item!r}"
        out.append(item.replace("$$", "$"))
    return out


_SHELL_NEED_ESCAPE = '"\\`$'


def parse_env_file(text: str) -> dict[str, str]:
    """The assignments of an EnvironmentFile=, as systemd's parse_env_file_internal() reads them."""
    out: dict[str, str] = {}
    state, key, value = "PRE_KEY", "", ""

    def push() -> None:
        out[key.rstrip(_WHITESPACE)] = value

    for char in text:
        newline = char in "\n\r"
        if state == "PRE_KEY":
            if char in _COMMENTS:
                state = "COMMENT"
            elif char not in _WHITESPACE:
                state, key, value = "KEY", char, ""
        elif state == "KEY":
            if newline:
                state = "PRE_KEY"
            elif char == "=":
                state = "PRE_VALUE"
            else:
                key += char
        elif state == "PRE_VALUE":
            if newline:
                push()
                state = "PRE_KEY"
            elif char == "'":
                state = "SINGLE"
            elif char == '"':
                state = "DOUBLE"
            elif char == "\\":
                state = "VALUE_ESCAPE"
            elif char not in _WHITESPACE:
                state, value = "VALUE", value + char
        elif state == "VALUE":
            if newline:
                value = value.rstrip(_WHITESPACE)
                push()
                state = "PRE_KEY"
            elif char == "\\":
                state = "VALUE_ESCAPE"
            else:
                value += char
        elif state == "VALUE_ESCAPE":
            state = "VALUE"
            if not newline:
                value += char
        elif state == "SINGLE":
            if char == "'":
                state = "PRE_VALUE"
            else:
                value += char
        elif state == "DOUBLE":
            if char == '"':
                state = "PRE_VALUE"
            elif char == "\\":
                state = "DOUBLE_ESCAPE"
            else:
                value += char
        elif state == "DOUBLE_ESCAPE":
            state = "DOUBLE"
            if char in _SHELL_NEED_ESCAPE:
                value += char
            elif char != "\n":
                value += "\\" + char
        elif state == "COMMENT":
            if char == "\\":
                state = "COMMENT_ESCAPE"
            elif newline:
                state = "PRE_KEY"
        elif state == "COMMENT_ESCAPE":
            state = "COMMENT"
    assert state in ("PRE_KEY", "COMMENT", "PRE_VALUE", "VALUE"), f"environment file ends in state {state}"
    if state in ("PRE_VALUE", "VALUE"):
        push()
    return out


def exec_start(unit: str) -> list[str]:
    """The words of the unit's ExecStart= (after systemd's splitting and expansion)."""
    [value] = [v for s, k, v in parse_unit(unit) if s == "Service" and k == "ExecStart"]
    return systemd_split(value)


def exec_start_lines(unit: str) -> list[str]:
    """The ExecStart= logical line split into its physical lines (continuations kept)."""
    lines = unit.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ExecStart="))
    out = []
    for line in lines[start:]:
        out.append(line)
        if not line.endswith("\\"):
            break
    return out
