#!/usr/bin/env python3
"""Preflight of an SGLang launch: read what the unit will run, let the installed SGLang check it, start nothing.

Usage: python sglang-preflight.py --unit /etc/systemd/system/NAME.service

Reads the unit's ``ExecStart=`` as systemd will (unit-file continuation lines, then systemd's word
splitting, quoting, C escapes, ``%%`` and ``$$``; the ``.service.d/*.conf`` drop-ins beside the unit
too), checks that it runs this virtualenv's python on the role's launcher (``sglang-launch.py``, next
to this script), then checks the words after the launcher exactly as the launcher passes them to
``python -m sglang.launch_server``: the launcher's own ``--config`` reading (run from the launcher
file the unit names), then what ``launch_server`` runs before it spawns any process:
prepare_server_args(argv) -> resolve_once() -> check_server_args().

A specifier (``%n``, ``%h`` ...) or variable (``$HOME``, ``${X}``) in ``ExecStart=`` is refused with
an error instead of guessed: the role never writes one (it doubles ``%`` and ``$``), so one there
means the unit is not the role's.

The GPUs are described to torch from `nvidia-smi` (count, name, compute capability, total memory,
all of it free, as it will be once the running server is stopped), so no CUDA context is created
and the running server's GPU memory is left alone. Prints one JSON line:
{"ok", "error", "where", "argv", "resolved"}.
Exit 0 when SGLang accepts, 1 when it (or the launcher) rejects, 2 on argparse errors (like
launch_server), 3 when the unit's ExecStart= cannot be read back or does not run the launcher.
Stdlib only (it runs in the server's virtualenv, Python >= 3.10).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPORTED = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "attention_backend",
    "moe_runner_backend",
    "mem_fraction_static",
    "tp_size",
)
LAUNCHER = "sglang-launch.py"
EXIT_UNIT = 3

# --- systemd's readers (systemd.syntax(7), systemd.service(5); conf-parser.c, extract-word.c, escape.c) ---

_WHITESPACE = " \t\n\r"
_COMMENTS = "#;"
# read_line(): "\n", "\r", "\r\n" and NUL end a line.
_LINE_END = re.compile(r"\r\n|\r|\n|\x00")
_SIMPLE_ESCAPES = {"a": 0x07, "b": 0x08, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B, "\\": 0x5C, '"': 0x22,
                   "'": 0x27, "s": 0x20}
_HEX = "0123456789abcdefABCDEF"
# ExecStart= prefixes of the executable (systemd.service(5), "Table 1").
_PREFIX_NAMES = {"-": "ignore-failure", "@": "argv0", ":": "no-env-expand", "+": "privileged", "!": "no-setuid",
                 "!!": "ambient"}


class UnitError(Exception):
    """The unit's ExecStart= cannot be read back faithfully, or does not run what the preflight checks."""


@dataclass
class ExecCommand:
    """One command of ExecStart=: the file systemd executes and the argv the process receives."""

    path: str
    argv: list[str]
    prefixes: list[str] = field(default_factory=list)


def parse_unit(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of every assignment of a unit file, in order, as systemd's config_parse reads them.

    A line ending in an unescaped backslash continues on the next line (the backslash becomes a
    space); comment lines (``#`` or ``;`` first) are skipped, also inside a continuation; keys and
    values lose their surrounding whitespace.
    """
    out: list[tuple[str, str, str]] = []
    section = ""
    continuation: str | None = None
    text = text.removeprefix("\ufeff")
    for number, raw in enumerate(_LINE_END.split(text), start=1):
        stripped = raw.strip(_WHITESPACE)
        if stripped[:1] and stripped[0] in _COMMENTS:
            continue
        line = raw if continuation is None else continuation + raw
        escaped = False
        for char in line:
            escaped = (not escaped) if char == "\\" else False
        if escaped:
            continuation = line[:-1] + " "
            continue
        continuation = None
        line = line.strip(_WHITESPACE)
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise UnitError(f"line {number}: invalid section header {line!r}")
            section = line[1:-1]
            continue
        if "=" not in line:
            raise UnitError(f"line {number}: missing '=' in [{section}]: {line!r}")
        key, value = line.split("=", 1)
        out.append((section, key.strip(_WHITESPACE), value.strip(_WHITESPACE)))
    if continuation is not None:
        out_line = continuation.strip(_WHITESPACE)
        if out_line and "=" in out_line:
            key, value = out_line.split("=", 1)
            out.append((section, key.strip(_WHITESPACE), value.strip(_WHITESPACE)))
    return out


def _unescape(text: str, i: int) -> tuple[bytes, int]:
    """systemd's cunescape_one() for the escape after the backslash at ``text[i - 1]``: (bytes, next index).

    Unknown or invalid escapes (and escapes of NUL) are refused: systemd would keep them verbatim
    with a warning, and the role's quoting never writes one.
    """
    if i >= len(text):
        raise UnitError("ExecStart= ends in a backslash")
    char = text[i]
    if char in _SIMPLE_ESCAPES:
        return bytes([_SIMPLE_ESCAPES[char]]), i + 1
    if char == "x" and len(text) >= i + 3 and all(c in _HEX for c in text[i + 1:i + 3]):
        value = int(text[i + 1:i + 3], 16)
        if value:
            return bytes([value]), i + 3
    elif char in "uU":
        width = 4 if char == "u" else 8
        digits = text[i + 1:i + 1 + width]
        if len(digits) == width and all(c in _HEX for c in digits):
            value = int(digits, 16)
            if 0 < value <= 0x10FFFF and not 0xD800 <= value <= 0xDFFF:
                return chr(value).encode("utf-8"), i + 1 + width
    elif char in "01234567":
        digits = text[i:i + 3]
        if len(digits) == 3 and all(c in "01234567" for c in digits) and 0 < int(digits, 8) <= 255:
            return bytes([int(digits, 8)]), i + 3
    raise UnitError(f"ExecStart= has an escape systemd does not know or refuses: {text[i - 1:i + 3]!r}...")


def _first_word(text: str, i: int) -> tuple[bytes, int]:
    """systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) from ``text[i]`` (not whitespace).

    Returns the word as bytes (escapes may give any byte) and the index of the next word. Quotes
    group (also inside a word, like a shell: ``"/a b"/c`` is ``/a b/c``); backslash escapes work
    inside both kinds of quotes.
    """
    word = bytearray()
    quote = ""
    while i < len(text):
        char = text[i]
        if char == "\\":
            piece, i = _unescape(text, i + 1)
            word += piece
            continue
        if quote:
            if char == quote:
                quote = ""
            else:
                word += char.encode("utf-8", "surrogatepass")
        elif char in "\"'":
            quote = char
        elif char in _WHITESPACE:
            while i < len(text) and text[i] in _WHITESPACE:
                i += 1
            return bytes(word), i
        else:
            word += char.encode("utf-8", "surrogatepass")
        i += 1
    if quote:
        raise UnitError(f"ExecStart= has an unterminated {quote} quote")
    return bytes(word), i


def _specifiers(word: bytes) -> bytes:
    """systemd's specifier expansion of one word: ``%%`` is ``%``; any other specifier is refused."""
    out = bytearray()
    i = 0
    while i < len(word):
        if word[i:i + 1] == b"%":
            nxt = word[i + 1:i + 2]
            if nxt == b"%" or not nxt:  # "%%", or a stray "%" at the end (kept by systemd)
                out += b"%"
                i += 2
                continue
            raise UnitError(f"ExecStart= uses the specifier %{nxt.decode('utf-8', 'replace')} in "
                            f"{os.fsdecode(word)!r}, which the preflight does not expand (write %% for a literal %)")
        out += word[i:i + 1]
        i += 1
    return bytes(out)


def _variables(word: bytes) -> bytes:
    """systemd's environment expansion of one argv word: ``$$`` is ``$``; any other ``$`` is refused."""
    out = bytearray()
    i = 0
    while i < len(word):
        if word[i:i + 1] == b"$":
            if word[i + 1:i + 2] == b"$":
                out += b"$"
                i += 2
                continue
            raise UnitError(f"ExecStart= refers to an environment variable in {os.fsdecode(word)!r}, which the "
                            "preflight does not expand (write $$ for a literal $)")
        out += word[i:i + 1]
        i += 1
    return bytes(out)


def _prefixes(first: bytes) -> tuple[list[str], bytes]:
    """The executable prefixes of the first word (systemd's config_parse_exec loop) and the rest of it."""
    found: list[str] = []
    i = 0
    while i < len(first):
        char = chr(first[i])
        if char == "-" and "-" not in found:
            found.append("-")
        elif char == "@" and "@" not in found:
            found.append("@")
        elif char == ":" and ":" not in found:
            found.append(":")
        elif char == "+" and not {"+", "!", "!!"} & set(found):
            found.append("+")
        elif char == "!" and not {"+", "!", "!!"} & set(found):
            found.append("!")
        elif char == "!" and "!" in found and not {"+", "!!"} & set(found):
            found[found.index("!")] = "!!"
        else:
            break
        i += 1
    return found, first[i:]


def _simplify(path: str) -> str:
    """systemd's path_simplify(): duplicate slashes and "." segments dropped ("/a//./b/" is "/a/b")."""
    absolute = path.startswith("/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return ("/" if absolute else "") + "/".join(parts)


def split_exec(value: str) -> list[ExecCommand]:
    """The commands of one ExecStart= value, split and expanded as systemd does.

    An unquoted ``;`` word separates commands (``\\;`` is a literal ``;`` word). Words are decoded
    from bytes as Python decodes its own argv (``os.fsdecode``), which is what the launched python sees.
    """
    commands: list[ExecCommand] = []
    i = 0
    value = value.lstrip(_WHITESPACE)
    while i < len(value):
        raw, i = _first_word(value, i)
        prefixes, rest = _prefixes(raw)
        if "@" in prefixes:
            raise UnitError("ExecStart= uses the '@' prefix (a separate argv[0]), which the preflight does not check")
        path = _specifiers(rest)
        if not path:
            raise UnitError("ExecStart= has an empty executable path")
        words = [path]
        while i < len(value):
            if value[i] == ";" and (i + 1 == len(value) or value[i + 1] in _WHITESPACE):
                i += 1
                while i < len(value) and value[i] in _WHITESPACE:
                    i += 1
                break
            if value.startswith("\\;", i) and (i + 2 == len(value) or value[i + 2] in _WHITESPACE):
                words.append(b";")
                i += 2
                while i < len(value) and value[i] in _WHITESPACE:
                    i += 1
                continue
            word, i = _first_word(value, i)
            words.append(_specifiers(word))
        if ":" not in prefixes:
            words = [_variables(w) for w in words]
        commands.append(ExecCommand(path=_simplify(os.fsdecode(path)), argv=[os.fsdecode(w) for w in words],
                                    prefixes=[_PREFIX_NAMES[p] for p in prefixes]))
    return commands


def unit_exec_start(unit: Path) -> ExecCommand:
    """The one command the unit's ExecStart= runs, with the drop-ins beside it (``NAME.service.d/*.conf``) applied.

    An empty ``ExecStart=`` resets the list, as in systemd; more than one command is refused
    (the server's Type=exec allows one).
    """
    files = [unit]
    dropins = unit.parent / (unit.name + ".d")
    if dropins.is_dir():
        files += sorted(dropins.glob("*.conf"), key=lambda p: p.name)
    commands: list[ExecCommand] = []
    for path in files:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnitError(f"{path}: not UTF-8 ({exc})") from None
        for section, key, value in parse_unit(text):
            if section != "Service" or key != "ExecStart":
                continue
            try:
                commands = commands + split_exec(value) if value else []
            except UnitError as exc:
                raise UnitError(f"{path}: {exc}") from None
    if len(commands) != 1:
        raise UnitError(f"{unit}: ExecStart= holds {len(commands)} commands; the server's unit runs exactly one")
    return commands[0]


def launcher_argv(command: ExecCommand, python: str, launcher: Path) -> list[str]:
    """The launcher's own arguments (what it passes to ``python -m sglang.launch_server``), after checking
    that ``command`` runs ``python`` (this virtualenv's interpreter) on ``launcher``."""
    if Path(command.path).parent.resolve() != Path(python).parent.resolve() or \
            Path(command.path).resolve() != Path(python).resolve():
        raise UnitError(f"ExecStart= runs {command.path!r}, not this virtualenv's python ({python})")
    if not os.access(command.path, os.X_OK):
        raise UnitError(f"ExecStart= runs {command.path!r}, which is not executable")
    if len(command.argv) < 2 or not Path(command.argv[1]).is_file() or \
            Path(command.argv[1]).resolve() != launcher.resolve():
        named = command.argv[1] if len(command.argv) > 1 else "nothing"
        raise UnitError(f"ExecStart= runs python on {named!r}, not on the launcher {launcher}")
    return command.argv[2:]


# --- SGLang's checks -----------------------------------------------------------------------------


def gpus() -> list[dict[str, Any]]:
    """The host's GPUs as nvidia-smi reports them; [] without nvidia-smi."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        name, cap, mem = (part.strip() for part in line.split(","))
        major, minor = (int(x) for x in cap.split("."))
        found.append({"name": name, "capability": (major, minor), "total": int(float(mem)) * 1024 * 1024})
    return found


def describe_gpus_to_torch(devices: list[dict[str, Any]]) -> None:
    """Answer torch.cuda's queries from nvidia-smi instead of initialising CUDA."""
    try:
        import torch  # noqa: PLC0415 - SGLang imports it anyway; absent from a torch-less install
    except ImportError:
        return
    if not devices:
        return
    cuda = torch.cuda

    def dev(index: Any = None) -> dict[str, Any]:
        i = index if isinstance(index, int) else getattr(index, "index", None) or 0
        return devices[min(int(i), len(devices) - 1)]

    cuda.is_available = lambda: True
    cuda.device_count = lambda: len(devices)
    cuda.current_device = lambda: 0
    cuda.set_device = lambda *_a, **_k: None
    cuda.get_device_capability = lambda index=None: dev(index)["capability"]
    cuda.get_device_name = lambda index=None: dev(index)["name"]
    cuda.mem_get_info = lambda index=None: (dev(index)["total"], dev(index)["total"])
    cuda.get_device_properties = lambda index=None: SimpleNamespace(
        name=dev(index)["name"], major=dev(index)["capability"][0], minor=dev(index)["capability"][1],
        total_memory=dev(index)["total"], multi_processor_count=188, is_integrated=False,
    )


def where(exc: BaseException) -> str:
    """file:line of the innermost frame inside sglang."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "sglang" in f.filename]
    if not frames:
        return ""
    frame = frames[-1]
    path = frame.filename[frame.filename.rfind("sglang/"):]
    return f"{path}:{frame.lineno}"


def launcher_reads_config(launcher: Path, argv: list[str]) -> None:
    """Run the launcher's own ``--config`` reading (``config_secrets``) on ``argv``, as it will at start.

    The launcher reads the secret values of the ``--config`` file before it starts SGLang; a file
    it cannot open or read stops the service before SGLang runs. The launcher file the unit names is
    loaded as a module (its ``main`` is not run).
    """
    spec = importlib.util.spec_from_file_location("sglang_launch", launcher)
    if spec is None or spec.loader is None:
        raise UnitError(f"cannot load the launcher {launcher}")
    module = importlib.util.module_from_spec(spec)
    write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # nothing written beside the launcher
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = write_bytecode
    read = getattr(module, "config_secrets", None)
    if callable(read):
        read(argv)


def emit(report: dict[str, Any], code: int) -> int:
    """Print the report as the last stdout line and return the exit status."""
    print(json.dumps(report, default=str), flush=True)
    return code


def check(unit: Path, python: str = sys.executable, launcher: Path | None = None) -> int:
    """The preflight of ``unit``: its ExecStart= read back, the launcher's and SGLang's checks; the exit status."""
    launcher = launcher or Path(__file__).resolve().with_name(LAUNCHER)
    report: dict[str, Any] = {"ok": False, "error": "", "where": "", "argv": [], "resolved": {}}
    try:
        argv = launcher_argv(unit_exec_start(unit), python, launcher)
    except (UnitError, OSError) as exc:
        report["error"], report["where"] = f"the unit's ExecStart= cannot be checked: {exc}", str(unit)
        return emit(report, EXIT_UNIT)
    report["argv"] = argv
    try:
        launcher_reads_config(launcher, argv)
    except Exception as exc:  # noqa: BLE001 - whatever stops the launcher stops the service
        report["error"], report["where"] = f"the launcher fails on its --config: {type(exc).__name__}: {exc}", LAUNCHER
        traceback.print_exc()
        return emit(report, 1)

    describe_gpus_to_torch(gpus())
    from sglang.srt.server_args import prepare_server_args  # noqa: PLC0415

    try:
        server_args = prepare_server_args(argv)
        server_args.resolve_once()
        server_args.check_server_args()
    except SystemExit as exc:  # argparse already printed its message
        report["error"] = f"argparse exited with {exc.code}"
        return emit(report, 2)
    except Exception as exc:  # noqa: BLE001 - SGLang raises anything from AssertionError to TypeError
        report["error"] = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} (empty message)"
        report["where"] = where(exc)
        traceback.print_exc()
        return emit(report, 1)
    report["ok"] = True
    report["resolved"] = {k: getattr(server_args, k, None) for k in REPORTED}
    return emit(report, 0)


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Check what an SGLang unit's ExecStart= will run, start nothing.")
    parser.add_argument("--unit", required=True, type=Path, help="the unit file (installed or staged)")
    return check(parser.parse_args(args).unit)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
