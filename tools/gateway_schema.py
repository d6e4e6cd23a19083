#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Extract the command-line schema of a gateway's ``launch`` parser from its wheel: one command per release.

    python3 tools/gateway_schema.py --gateway smg --version 1.13.0
    python3 tools/gateway_schema.py --gateway sglang-router --version 0.3.2
    python3 tools/gateway_schema.py --gateway smg --version 1.13.0 --wheel path/to/smg-1.13.0-...whl

The gateways (Shepherd Model Gateway ``smg``, and the legacy ``sglang-router``) are Rust binaries in Python
wheels whose ``launch`` subcommand is an argparse parser written in Python: ``<package>/launch_router.py``'s
``parse_router_args`` builds ``argparse.ArgumentParser(...)`` and fills it with
``RouterArgs.add_cli_args(parser, use_router_prefix=False)`` (``<package>/router_args.py``).  This tool runs
that very code: the wheel (downloaded with pip from the installer's default index unless ``--wheel`` is
given; ``--no-deps``, nothing installed) is unpacked into a temporary directory, and a child Python imports
``<package>.router_args`` from it (its native module supplies the parser's dynamic choices, e.g. the reasoning
parsers) and records every ``add_argument`` call with its source line.  ``parse_router_args`` itself is checked
statically (``ast``) to build the parser exactly so (no ``allow_abbrev``, ``prefix_chars`` or other keyword
that would change how argparse reads the words), so the schema is the parser the gateway's unit runs.

The schema (``plugin_utils/schemas/gateway-<gateway>-<version>.json``) holds, per argparse action: its option
strings, dest, action class, nargs, type (``int``, ``float``, ``str``, ``str.lower`` or a helper's name, with
the helper's source), choices, default, const, required, metavar, group, mutually exclusive group and
``source`` (``path-in-wheel:line`` of the ``add_argument`` call): what ``plugin_utils/sglang_gateway_args.py``
checks ``sglang_router_extra_args`` against.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA_DIR = REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas"
DEFAULT_WHEEL_DIR = REPO / ".cache" / "gateway-wheels"
FORMAT = 1
GENERATOR = "tools/gateway_schema.py"
# gateway name -> (distribution, import package, console command of its launch parser)
GATEWAYS = {
    "smg": ("smg", "smg", "smg launch"),
    "sglang-router": ("sglang-router", "sglang_router", "sglang-router launch"),
}
# argparse.ArgumentParser keywords that change how the words are read: none may be set by parse_router_args.
PARSING_KEYWORDS = {"allow_abbrev", "prefix_chars", "fromfile_prefix_chars", "argument_default", "conflict_handler",
                    "add_help", "exit_on_error", "parents"}

# Options whose choices the native module lists (get_available_*_parsers): sorted even when two runs agree.
NATIVE_CHOICES = {"reasoning_parser", "tool_call_parser"}

# Runs in the child Python, with the unpacked wheel first on sys.path: the real add_cli_args on a real parser.
_CHILD = r'''
import argparse, inspect, json, sys
wheel_dir, package = sys.argv[1], sys.argv[2]
sys.path.insert(0, wheel_dir)
lines = {}
original = argparse._ActionsContainer.add_argument
def add_argument(self, *args, **kwargs):
    action = original(self, *args, **kwargs)
    frame = sys._getframe(1)
    lines[id(action)] = (frame.f_code.co_filename, frame.f_lineno)
    return action
argparse._ActionsContainer.add_argument = add_argument
import importlib
module = importlib.import_module(package + ".router_args")
parser = argparse.ArgumentParser()
module.RouterArgs.add_cli_args(parser, use_router_prefix=False)
groups = {}
for group in parser._action_groups:
    for action in group._group_actions:
        groups[id(action)] = group.title
mutex = {}
for index, group in enumerate(parser._mutually_exclusive_groups):
    for action in group._group_actions:
        mutex[id(action)] = index
def type_name(kind):
    if kind is None:
        return None
    if kind in (int, float, str):
        return kind.__name__
    qual = getattr(kind, "__qualname__", repr(kind))
    mod = getattr(kind, "__module__", None) or ""
    if mod == "builtins" or qual == "str.lower":
        return qual
    return qual
def type_source(kind):
    try:
        path = inspect.getsourcefile(kind)
        line = inspect.getsourcelines(kind)[1]
    except (TypeError, OSError):
        return None
    return path, line
def jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)
out = []
for action in parser._actions:
    file, line = lines.get(id(action), (None, None))
    ts = type_source(action.type) if action.type not in (None, int, float, str) else None
    out.append({
        "option_strings": list(action.option_strings),
        "dest": action.dest,
        "action": type(action).__name__,
        "nargs": action.nargs,
        "type": type_name(action.type),
        "type_source": ts,
        "choices": None if action.choices is None else [jsonable(c) for c in action.choices],
        "default": jsonable(action.default),
        "const": jsonable(action.const),
        "required": action.required,
        "metavar": jsonable(action.metavar),
        "help": action.help,
        "group": groups.get(id(action)),
        "mutex": mutex.get(id(action)),
        "file": file,
        "line": line,
    })
json.dump(out, sys.stdout)
'''


def download(gateway: str, version: str, wheel_dir: Path) -> Path:
    """The gateway's wheel for Linux x86_64 from pip's default index (no dependencies), cached in ``wheel_dir``."""
    dist = GATEWAYS[gateway][0]
    stem = dist.replace("-", "_")
    found = sorted(wheel_dir.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    wheel_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
                    "--python-version", "3.11", "--implementation", "cp", "-d", str(wheel_dir),
                    f"{dist}=={version}"], check=True)
    found = sorted(wheel_dir.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip saved no {dist} {version} wheel in {wheel_dir}")
    return found[0]


def parser_source(source: str, package: str) -> dict:
    """Where ``parse_router_args`` builds its parser, checked to be argparse's defaults for reading the words."""
    tree = ast.parse(source)
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "parse_router_args"), None)
    if func is None:
        raise SystemExit(f"{package}/launch_router.py has no parse_router_args: the launch parser moved")
    made = [n for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "ArgumentParser"]
    filled = [n for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr == "add_cli_args"]
    if len(made) != 1 or len(filled) != 1:
        raise SystemExit(f"{package}/launch_router.py: parse_router_args does not build one parser with add_cli_args")
    odd = sorted(k.arg for k in made[0].keywords if k.arg in PARSING_KEYWORDS)
    if odd:
        raise SystemExit(f"{package}/launch_router.py: parse_router_args sets {odd}: teach the schema about them")
    prefix = [k for k in filled[0].keywords if k.arg == "use_router_prefix"]
    if not prefix or not isinstance(prefix[0].value, ast.Constant) or prefix[0].value.value is not False:
        raise SystemExit(f"{package}/launch_router.py: add_cli_args is not called with use_router_prefix=False")
    return {"source": f"{package}/launch_router.py:{made[0].lineno}", "allow_abbrev": True, "prefix_chars": "-",
            "add_cli_args": f"{package}/launch_router.py:{filled[0].lineno}"}


def extract(gateway: str, version: str, wheel: Path) -> dict:
    """The schema of ``gateway`` ``version``'s launch parser, from ``wheel``."""
    dist, package, command = GATEWAYS[gateway]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix="gateway-schema-") as tmp, zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = archive.read(metadata).decode()
        declared = next((line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Version:")), "")
        if declared != version:
            raise SystemExit(f"{wheel.name} is {dist} {declared}, not {version}")
        archive.extractall(tmp, [n for n in names if n.startswith(package + "/")])
        source = parser_source(archive.read(f"{package}/launch_router.py").decode(), package)
        runs = [json.loads(subprocess.run([sys.executable, "-I", "-c", _CHILD, tmp, package], check=True,
                                          capture_output=True, text=True).stdout) for _ in range(2)]
        actions = runs[0]
        prefix = str(Path(tmp).resolve()) + "/"
    # Choices the native module lists from a hash map come in another order in each process: sorted, so that the
    # schema of a release is one file (the order of a choice list means nothing to argparse).
    for action, again in zip(actions, runs[1], strict=True):
        if action["choices"] is not None and (action["choices"] != again["choices"] or action["dest"] in NATIVE_CHOICES):
            action["choices"] = sorted(action["choices"], key=str)
    types: dict[str, str] = {}
    for action in actions:
        file, line = action.pop("file"), action.pop("line")
        action["source"] = f"{file[len(prefix):]}:{line}" if file and file.startswith(prefix) else None
        where = action.pop("type_source")
        if where and action["type"] not in types and where[0].startswith(prefix):
            types[action["type"]] = f"{where[0][len(prefix):]}:{where[1]}"
    return {
        "format": FORMAT,
        "generator": GENERATOR,
        "gateway": gateway,
        "distribution": dist,
        "version": version,
        "command": command,
        "wheel": wheel.name,
        "wheel_sha256": digest,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "parser": source,
        "types": dict(sorted(types.items())),
        "options": sum(len(a["option_strings"]) > 0 for a in actions),
        "arguments": actions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", choices=sorted(GATEWAYS), required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--wheel", type=Path, help="the gateway's wheel (default: download it into .cache/gateway-wheels)")
    parser.add_argument("--wheel-dir", type=Path, default=DEFAULT_WHEEL_DIR)
    parser.add_argument("--out", type=Path, help="default: plugin_utils/schemas/gateway-<gateway>-<version>.json")
    args = parser.parse_args(argv)
    wheel = args.wheel or download(args.gateway, args.version, args.wheel_dir)
    schema = extract(args.gateway, args.version, wheel)
    out = args.out or SCHEMA_DIR / f"gateway-{args.gateway}-{args.version}.json"
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(schema, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    partial.replace(out)  # whole or not at all, for a validator reading it meanwhile
    print(f"{out}: {schema['options']} options of `{schema['command']}` {args.version} ({wheel.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
