#!/usr/bin/env python3
"""Preflight of an SGLang launch: read what the unit will run, let the installed SGLang check it, start nothing.

Usage: python sglang-preflight.py --unit /etc/systemd/system/NAME.service
       python sglang-preflight.py --unit /etc/systemd/system/NAME.service --sandbox --timeout 300   (as root)

With ``--sandbox`` the script runs itself again through ``systemd-run --wait --pipe`` inside the
unit's own sandbox: the credential, environment and sandboxing directives of the unit's
``[Service]`` section (and its drop-ins) become the transient service's properties
(:func:`sandbox_properties`), so a model directory the sandbox hides or a GPU node it blocks
fails here, not at the start. Its output comes back on this process's stdout / stderr.

Before SGLang is asked, the host is checked as the service will find it (exit 4): the
virtualenv's Python is one SGLang 0.5.23 installs on, the C compiler and Python headers Triton
compiles its launchers with are there, the GPU device nodes the service opens are not blocked,
and an absolute ``--model-path`` is a directory the service can read.

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
launch_server), 3 when the unit's ExecStart= cannot be read back or does not run the launcher (or
its sandbox cannot be given to systemd-run), 4 when the host cannot run the server (Python,
compiler, headers, devices, model directory), 5 when the sandboxed run ended without a report
(time limit, killed, or systemd could not start it).
Stdlib only, Python >= 3.9: it runs in the server's virtualenv, whose Python may be the one it has
to refuse (Ubuntu 22.04's 3.10).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import ssl
import stat
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
EXIT_HOST = 4
EXIT_NO_REPORT = 5
# SGLang 0.5.23's wheel: sglang-0.5.23.dist-info/METADATA:213 "Requires-Python: >=3.11".
MIN_PYTHON = (3, 11)

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


# The system unit search path, highest priority first (systemd.unit(5), "Unit File Load Path").
SYSTEM_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
                    "/lib/systemd/system")


def unit_files(unit: Path, search: tuple[str, ...] | None = None) -> list[Path]:
    """The unit file and the drop-ins systemd applies to it, in the order it applies them.

    Drop-in directories (systemd.unit(5)): ``NAME.service.d``, then those of each dash-truncated prefix
    (``sglang-a.service`` also reads ``sglang-.service.d``), then ``service.d``; looked up in the unit's
    own directory and, for a unit on the system search path, in every directory of it. Of drop-ins with
    the same file name the first found wins (the more specific directory name, then the higher-priority
    directory); all are applied in file-name order.
    """
    directories = [str(unit.parent)]
    if search is None:
        search = SYSTEM_UNIT_DIRS if str(unit.parent) in SYSTEM_UNIT_DIRS else ()
    directories += [d for d in search if d not in directories]
    stem, _, suffix = unit.name.rpartition(".")
    names = [unit.name]
    parts = stem.split("-")
    for i in range(len(parts) - 1, 0, -1):
        names.append("-".join(parts[:i]) + "-." + suffix)
    names.append(suffix)
    chosen: dict[str, Path] = {}
    for name in names:
        for directory in directories:
            folder = Path(directory) / (name + ".d")
            if folder.is_dir():
                for conf in folder.glob("*.conf"):
                    chosen.setdefault(conf.name, conf)
    return [unit] + [chosen[name] for name in sorted(chosen)]


def service_settings(unit: Path) -> list[tuple[Path, str, str]]:
    """(file, key, value) of every [Service] assignment of the unit and its drop-ins, in the order systemd applies them."""
    out: list[tuple[Path, str, str]] = []
    for path in unit_files(unit):
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnitError(f"{path}: not UTF-8 ({exc})") from None
        out += [(path, key, value) for section, key, value in parse_unit(text) if section == "Service"]
    return out


def unit_exec_start(unit: Path) -> ExecCommand:
    """The one command the unit's ExecStart= runs, with the drop-ins beside it (``NAME.service.d/*.conf``) applied.

    An empty ``ExecStart=`` resets the list, as in systemd; more than one command is refused
    (the server's Type=exec allows one).
    """
    commands: list[ExecCommand] = []
    for path, key, value in service_settings(unit):
        if key != "ExecStart":
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


# --- the unit's sandbox, given to systemd-run ---------------------------------------------------------

# [Service] directives taken over onto the preflight's transient service (systemd-run -p NAME=VALUE):
# everything that decides who the process is, what it sees and what it may do. All of them are
# transient properties in systemd >= 249 (bus-unit-util.c bus_append_execute_property /
# bus_append_cgroup_property; the template's set was run on systemd 252 with systemd-run).
SANDBOX_PROPERTIES = frozenset((
    # credentials and environment
    "User", "Group", "SupplementaryGroups", "DynamicUser", "WorkingDirectory", "RootDirectory", "Environment",
    "EnvironmentFile", "UnsetEnvironment", "PassEnvironment", "UMask", "SecureBits",
    # resource limits and scheduling of the process
    "LimitCPU", "LimitFSIZE", "LimitDATA", "LimitSTACK", "LimitCORE", "LimitRSS", "LimitNOFILE", "LimitAS", "LimitNPROC",
    "LimitMEMLOCK", "LimitLOCKS", "LimitSIGPENDING", "LimitMSGQUEUE", "LimitNICE", "LimitRTPRIO", "LimitRTTIME",
    "Nice", "CPUAffinity", "NUMAPolicy", "NUMAMask", "OOMScoreAdjust", "IOSchedulingClass", "IOSchedulingPriority",
    "CPUSchedulingPolicy", "CPUSchedulingPriority", "MemoryMax", "MemoryHigh", "TasksMax", "CPUQuota",
    # privileges
    "NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities",
    # file system view
    "ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "ExecPaths", "NoExecPaths",
    "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths", "PrivateTmp", "PrivateDevices", "PrivateMounts",
    "PrivateNetwork", "PrivateIPC", "PrivateUsers", "ProtectProc", "ProcSubset", "StateDirectory", "CacheDirectory",
    "RuntimeDirectory", "LogsDirectory", "ConfigurationDirectory",
    # devices (cgroup)
    "DevicePolicy", "DeviceAllow",
    # kernel, namespaces, system calls, network
    "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock",
    "ProtectHostname", "RestrictNamespaces", "RestrictSUIDSGID", "RestrictRealtime", "RestrictAddressFamilies",
    "LockPersonality", "MemoryDenyWriteExecute", "SystemCallArchitectures", "SystemCallFilter", "SystemCallErrorNumber",
    "KeyringMode", "RemoveIPC", "IPAddressAllow", "IPAddressDeny",
))
# [Service] directives not given to the preflight, and why. None of them changes what the process sees.
SANDBOX_LEFT_OUT = {
    "Type": "the server's Type=exec is given as --service-type=exec",
    "ExecStart": "the preflight runs instead of the server (it reads this very ExecStart=)",
    "KillMode": "how the long-running server is stopped; the preflight ends by itself",
    "KillSignal": "how the long-running server is stopped; the preflight ends by itself",
    "TimeoutStartSec": "the server's start budget; the preflight has RuntimeMaxSec=sglang_server_preflight_timeout",
    "TimeoutStopSec": "the server's drain budget; the preflight has RuntimeMaxSec=sglang_server_preflight_timeout",
    "Restart": "a failed preflight is reported, never restarted",
    "RestartSec": "a failed preflight is reported, never restarted",
    "StandardOutput": "--pipe connects the preflight's output to Ansible instead of the journal",
    "StandardError": "--pipe connects the preflight's output to Ansible instead of the journal",
    "SyslogIdentifier": "--pipe connects the preflight's output to Ansible instead of the journal",
}
# List-valued directives whose empty assignment resets the list (passed on as such: systemd-run -p X= resets too).
_DEVICE_ALLOW = "DeviceAllow"


def _literal(value: str, key: str) -> str:
    """A [Service] value as the literal text a transient property carries: ``%%`` becomes ``%``.

    A unit file expands specifiers in these values, systemd-run does not (a transient property is
    literal), so any other specifier is refused, as are backslashes: the two readers unescape them
    differently (unit files per directive, systemd-run per property type). The role writes neither.
    """
    if "\\" in value:
        raise UnitError(f"{key}={value!r} holds a backslash, which systemd-run would read differently")
    try:
        return os.fsdecode(_specifiers(os.fsencode(value)))
    except UnitError:
        raise UnitError(f"{key}={value!r} uses a specifier, which a transient property would keep literally") from None


def _device_allow(value: str) -> str:
    """``DeviceAllow=`` for systemd-run: the unit file unquotes the node's path, systemd-run splits at the first space."""
    if not value:
        return value
    word, i = _first_word(value, 0)
    path = os.fsdecode(word)
    if " " in path or not path:
        raise UnitError(f"DeviceAllow={value!r}: systemd-run cannot carry a device path with a space")
    rest = value[i:].strip(_WHITESPACE)
    if any(c in rest for c in "\"'"):
        raise UnitError(f"DeviceAllow={value!r}: quoted access flags")
    return f"{_literal(path, 'DeviceAllow')} {rest}".rstrip()


def sandbox_properties(unit: Path) -> list[str]:
    """``NAME=VALUE`` for each sandboxing assignment of the unit's [Service] (drop-ins applied, in order).

    Directives are either taken over (:data:`SANDBOX_PROPERTIES`) or left out with a reason
    (:data:`SANDBOX_LEFT_OUT`); any other directive is refused, so a new directive in the template
    (or in a drop-in) is classified here before the preflight runs without it. Empty assignments
    are kept: they reset a list as ``-p NAME=`` does.
    """
    out: list[str] = []
    for path, key, value in service_settings(unit):
        if key in SANDBOX_LEFT_OUT:
            continue
        if key not in SANDBOX_PROPERTIES:
            raise UnitError(f"{path}: [Service] {key}= is not classified for the preflight's sandbox "
                            "(add it to SANDBOX_PROPERTIES or SANDBOX_LEFT_OUT in sglang-preflight.py)")
        try:
            literal = _device_allow(value) if key == _DEVICE_ALLOW else _literal(value, key)
        except UnitError as exc:
            raise UnitError(f"{path}: {exc}") from None
        out.append(f"{key}={literal}")
    return out


def systemd_run_argv(unit: Path, script: Path, timeout: int, check_toolchain: bool = True) -> list[str]:
    """The command that runs this preflight on ``unit`` inside the unit's sandbox, with a time limit.

    The interpreter is the unit's own ExecStart= executable (the virtualenv's python; the sandboxed
    run checks it is this script's); output and exit status come back through ``--wait --pipe``.
    """
    command = unit_exec_start(unit)
    name = unit.name[:-len(".service")] if unit.name.endswith(".service") else unit.name
    argv = ["systemd-run", "--wait", "--pipe", "--collect", "--quiet", "--service-type=exec",
            f"--unit={name}-preflight", f"--description=SGLang preflight of {unit.name}"]
    argv += [f"--property={prop}" for prop in sandbox_properties(unit)]
    argv += [f"--property=RuntimeMaxSec={int(timeout)}", command.path, str(script), "--unit", str(unit)]
    return argv + ([] if check_toolchain else ["--skip-toolchain"])


def run_sandboxed(unit: Path, timeout: int, check_toolchain: bool = True) -> int:
    """Run the preflight in the unit's sandbox; pass its output on and add a report when it left none."""
    report: dict[str, Any] = {"ok": False, "error": "", "where": str(unit), "argv": [], "resolved": {}}
    try:
        argv = systemd_run_argv(unit, Path(__file__).resolve(), timeout, check_toolchain)
    except (UnitError, OSError) as exc:
        report["error"] = f"the unit's sandbox cannot be given to the preflight: {exc}"
        return emit(report, EXIT_UNIT)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60, check=False)
    except subprocess.TimeoutExpired as exc:
        sys.stderr.write(exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""))
        report["error"] = f"the preflight did not end within sglang_server_preflight_timeout ({timeout}s) + 60s"
        return emit(report, EXIT_NO_REPORT)
    sys.stderr.write(proc.stderr)
    sys.stdout.write(proc.stdout)
    sys.stdout.flush()
    if any(line.startswith("{") for line in proc.stdout.splitlines()):
        return proc.returncode
    report["error"] = (f"the sandboxed preflight ended (systemd-run exit {proc.returncode}) without a report: it ran past "
                       f"sglang_server_preflight_timeout ({timeout}s), was killed, or systemd could not start it in the "
                       "unit's sandbox (see its output)")
    return emit(report, EXIT_NO_REPORT)


# --- SGLang's checks -----------------------------------------------------------------------------


GPU_QUERY = "index,uuid,pci.bus_id,name,compute_cap,memory.total"
_NOT_A_NUMBER = ("[N/A]", "[Not Supported]", "N/A")


def meminfo_total() -> int | None:
    """MemTotal of /proc/meminfo in bytes (the memory of a unified-memory GPU such as GB10), or None."""
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii")
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s+(\d+)\s+kB$", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def parse_gpus(csv: str, host_memory: int | None) -> list[dict[str, Any]]:
    """The GPUs of ``nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits``.

    A GPU without dedicated memory reports ``memory.total`` as ``[N/A]`` (GB10: unified memory):
    it is described with the host's memory (``host_memory``, MemTotal), which is what CUDA reports
    for it, and marked ``unified``. Lines that are not GPU rows (nvidia-smi's error lines for a GPU
    it cannot open) are skipped.
    """
    found = []
    for line in csv.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 6 or not parts[0].isdigit() or not re.fullmatch(r"\d+\.\d+", parts[4]):
            continue
        index, uuid, bus_id, name, cap, mem = parts
        unified = mem in _NOT_A_NUMBER
        if unified:
            total = host_memory or 0
        else:
            try:
                total = int(float(mem)) * 1024 * 1024
            except ValueError:
                continue
        major, minor = (int(x) for x in cap.split("."))
        found.append({"index": int(index), "uuid": uuid, "bus_id": bus_id, "name": name, "capability": (major, minor),
                      "total": total, "unified": unified})
    return found


def visible(devices: list[dict[str, Any]], cuda_visible_devices: str | None) -> list[dict[str, Any]]:
    """The GPUs CUDA shows the service, in its order: CUDA_VISIBLE_DEVICES as indices or UUIDs (the role
    writes CUDA_DEVICE_ORDER=PCI_BUS_ID, so indices are nvidia-smi's); CUDA stops at the first entry it
    cannot match. Unset: all of them."""
    if cuda_visible_devices is None:
        return list(devices)
    chosen: list[dict[str, Any]] = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        match = [d for d in devices if (entry.isdigit() and d["index"] == int(entry))
                 or (entry.startswith("GPU-") and d["uuid"].startswith(entry))]
        if len(match) != 1 or match[0] in chosen:
            break
        chosen.append(match[0])
    return chosen


def gpus() -> list[dict[str, Any]]:
    """The GPUs CUDA will show the service, as nvidia-smi reports them; [] without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return visible(parse_gpus(out, meminfo_total()), os.environ.get("CUDA_VISIBLE_DEVICES"))


# --- the host as the service finds it ------------------------------------------------------------


def python_problem(version: tuple[int, ...], executable: str) -> str | None:
    """Why this interpreter cannot run SGLang 0.5.23 (its wheel requires Python >= 3.11), or None."""
    if tuple(version[:2]) >= MIN_PYTHON:
        return None
    have = ".".join(str(v) for v in version[:3])
    want = ".".join(str(v) for v in MIN_PYTHON)
    return (f"the server's virtualenv runs Python {have} ({executable}), but SGLang 0.5.23 requires Python >= {want} "
            f"(its wheel's Requires-Python). Install python{want} or newer on the host (Ubuntu 22.04 ships 3.10: "
            f"the deadsnakes PPA's python{want} and python{want}-venv, python{want}-dev) and set sglang_python to it "
            "(e.g. /usr/bin/python3.11), then run the sglang role again to rebuild the virtualenv")


def triton_include_dir() -> str:
    """The directory Triton passes as -I for Python.h: triton/runtime/build.py ``_build`` takes
    ``sysconfig.get_paths(scheme)["include"]`` of the default scheme, Debian's posix_local read as posix_prefix."""
    import sysconfig  # noqa: PLC0415 - only here

    scheme = sysconfig.get_default_scheme() if hasattr(sysconfig, "get_default_scheme") else "posix_prefix"
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def find_cc(environ: dict[str, str], which: Any) -> str | None:
    """The C compiler Triton's ``_build`` (triton/runtime/build.py) uses: $CC, else gcc, else clang on PATH."""
    if environ.get("CC"):
        return which(environ["CC"], path=environ.get("PATH"))
    path = environ.get("PATH")
    return which("gcc", path=path) or which("clang", path=path)


def compile_problem(cc: str, include_dir: str) -> str | None:
    """Compile a translation unit that includes Python.h (syntax only, nothing written); the failure, or None."""
    try:
        proc = subprocess.run([cc, "-fsyntax-only", f"-I{include_dir}", "-x", "c", "-"], input="#include <Python.h>\n",
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if "error" in line.lower()]
    return ((errors or lines or [f"exit {proc.returncode}"])[0]).strip()[:300]


def toolchain_problem(environ: dict[str, str], which: Any, include_dir: str, compile_check: Any = compile_problem) -> str | None:
    """Why Triton could not build its launchers at run time in this environment, or None.

    Triton compiles a small C module per kernel signature with the C compiler against Python.h
    (triton/runtime/build.py ``_build``); without either the server dies on its first kernel.
    """
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    cc = find_cc(environ, which)
    if cc is None:
        named = f"CC={environ['CC']!r} is not found on the service's PATH" if environ.get("CC") else \
            "no C compiler (gcc or clang) is on the service's PATH"
        return (f"{named} ({environ.get('PATH', '')}); Triton compiles its launchers at run time. Install "
                "build-essential (Debian/Ubuntu; gcc and the C library headers), or set CC in sglang_env")
    header = Path(include_dir) / "Python.h"
    if not header.is_file():
        return (f"{header} is missing: Triton compiles against the Python headers of the server's interpreter. "
                f"Install python{version}-dev (Debian/Ubuntu; python3-dev for the system python)")
    failure = compile_check(cc, include_dir)
    if failure:
        return (f"{cc} cannot compile against {header} ({failure}): install build-essential and python{version}-dev "
                "(Debian/Ubuntu)")
    return None


def device_minor(bus_id: str) -> int | None:
    """``Device Minor:`` of /proc/driver/nvidia/gpus/<bus id>/information (the node is /dev/nvidia<minor>)."""
    domain, _, rest = bus_id.lower().partition(":")
    try:
        text = Path(f"/proc/driver/nvidia/gpus/{domain[-4:]}:{rest}/information").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^Device Minor:\s*(\d+)\s*$", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def blocked_devices(devices: list[dict[str, Any]], minor: Any = device_minor, opener: Any = os.open) -> list[str]:
    """The NVIDIA device nodes the service opens that this process may not open (DeviceAllow=, permissions).

    Opening a node (and closing it) creates no CUDA context. A node that does not exist yet is not
    reported (nvidia-modprobe creates /dev/nvidia-uvm on first use); only a refused open is.
    """
    nodes = ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    for device in devices:
        found = minor(device["bus_id"])
        nodes.append(f"/dev/nvidia{device['index'] if found is None else found}")
    blocked = []
    for node in nodes:
        try:
            os.close(opener(node, os.O_RDWR | os.O_CLOEXEC))
        except PermissionError as exc:
            blocked.append(f"{node} ({exc.strerror})")
        except OSError:
            continue
    return blocked


def model_path_problem(model_path: Any) -> str | None:
    """Why the service cannot read an absolute --model-path (hidden by the sandbox, missing), or None.

    A Hugging Face id (not an absolute path) is left to SGLang.
    """
    if not isinstance(model_path, str) or not model_path.startswith("/"):
        return None
    try:
        is_dir = stat.S_ISDIR(os.stat(model_path).st_mode)
    except FileNotFoundError:
        why = "does not exist"
    except OSError as exc:  # a directory above it the sandbox (or its mode) closes: EACCES
        why = f"cannot be reached ({exc.strerror})"
    else:
        if is_dir and os.access(model_path, os.R_OK | os.X_OK):
            return None
        why = "is not a readable directory"
    return (f"--model-path {model_path} {why} for the service (its sandbox hides /home, /root and /run/user: "
            "ProtectHome=yes). Stage the model outside those (sglang_model_dir / sglang_server_model_path) "
            "and make it readable by the service user")


def tls_problem(server_args: Any) -> str | None:
    """Why the server could not serve TLS with its files as the service sees them, or None.

    SGLang checks only that the files exist (serving_hook.py:47-87); uvicorn loads the certificate and key,
    with ssl_keyfile_password, when the HTTP server starts: after the weights are loaded. An unreadable key,
    a wrong password or a key that does not belong to the certificate fails there, minutes in. This
    loads them the way uvicorn does (ssl.SSLContext.load_cert_chain), as the service, in its sandbox.
    """
    certfile = getattr(server_args, "ssl_certfile", None)
    keyfile = getattr(server_args, "ssl_keyfile", None)
    if not certfile:
        return None
    files = [("--ssl-certfile", certfile), ("--ssl-keyfile", keyfile), ("--ssl-ca-certs", getattr(server_args, "ssl_ca_certs", None))]
    for flag, path in files:
        if not path:
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            return (f"{flag} {path} cannot be read by the service ({exc.strerror}): make it readable by the service's "
                    "group (e.g. root:sglang, mode 0640) and outside /home, /root and /run/user")
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile, getattr(server_args, "ssl_keyfile_password", None))
    except (ssl.SSLError, OSError, ValueError) as exc:
        return (f"the server could not load its TLS certificate and key ({certfile}, {keyfile}): {exc}. Check that the "
                "key belongs to the certificate and that sglang_ssl_keyfile_password is its password")
    return None


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
        total_memory=dev(index)["total"], multi_processor_count=188, is_integrated=dev(index)["unified"],
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


def resolved(server_args: Any) -> dict[str, Any]:
    """What SGLang resolved for the :data:`REPORTED` fields.

    SGLang 0.5.23 keeps the resolution's results apart from the fields the command line set (a speculative triple or
    a MoE backend it chose reads back as None or ``auto`` from the fields): ``resolution_result`` reads them
    (sglang/srt/arg_groups/overrides.py:178-191). A release without it has them in the fields.
    """
    try:
        from sglang.srt.arg_groups.overrides import resolution_result  # noqa: PLC0415
    except ImportError:
        return {k: getattr(server_args, k, None) for k in REPORTED}
    return {k: resolution_result(server_args, k) for k in REPORTED}


def emit(report: dict[str, Any], code: int) -> int:
    """Print the report as the last stdout line and return the exit status."""
    print(json.dumps(report, default=str), flush=True)
    return code


def host_problem(check_toolchain: bool) -> str | None:
    """What keeps this host from running the server before SGLang is even asked: its Python, its compiler."""
    problem = python_problem(tuple(sys.version_info), sys.executable)
    if problem is None and check_toolchain:
        problem = toolchain_problem(dict(os.environ), shutil.which, triton_include_dir())
    return problem


def check(unit: Path, python: str = sys.executable, launcher: Path | None = None, check_toolchain: bool = True) -> int:
    """The preflight of ``unit``: the host, its ExecStart= read back, the launcher's and SGLang's checks; the exit status."""
    launcher = launcher or Path(__file__).resolve().with_name(LAUNCHER)
    report: dict[str, Any] = {"ok": False, "error": "", "where": "", "argv": [], "resolved": {}}
    problem = host_problem(check_toolchain)
    if problem:
        report["error"], report["where"] = problem, "host"
        return emit(report, EXIT_HOST)
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

    devices = gpus()
    blocked = blocked_devices(devices)
    if blocked:
        report["error"], report["where"] = (
            f"the service may not open {', '.join(blocked)}: its unit's DeviceAllow= (rendered from the plan's GPU "
            "binding and the host's facts) does not list them, or their permissions refuse the service user. "
            "Gather the facts again (the GPUs' device minors) and redeploy", "devices")
        return emit(report, EXIT_HOST)
    describe_gpus_to_torch(devices)
    from sglang.srt.server_args import prepare_server_args  # noqa: PLC0415

    try:
        server_args = prepare_server_args(argv)
        problem = model_path_problem(getattr(server_args, "model_path", None))
        if problem:
            report["error"], report["where"] = problem, "model"
            return emit(report, EXIT_HOST)
        server_args.resolve_once()
        server_args.check_server_args()
        problem = tls_problem(server_args)
        if problem:
            report["error"], report["where"] = problem, "tls"
            return emit(report, EXIT_HOST)
    except SystemExit as exc:  # argparse already printed its message
        report["error"] = f"argparse exited with {exc.code}"
        return emit(report, 2)
    except Exception as exc:  # noqa: BLE001 - SGLang raises anything from AssertionError to TypeError
        report["error"] = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} (empty message)"
        report["where"] = where(exc)
        traceback.print_exc()
        return emit(report, 1)
    report["ok"] = True
    report["resolved"] = resolved(server_args)
    return emit(report, 0)


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Check what an SGLang unit's ExecStart= will run, start nothing.")
    parser.add_argument("--unit", required=True, type=Path, help="the unit file (installed or staged)")
    parser.add_argument("--sandbox", action="store_true",
                        help="run the check through systemd-run inside the unit's own sandbox (as root)")
    parser.add_argument("--timeout", type=int, default=300, help="with --sandbox: the check's time limit in seconds")
    parser.add_argument("--skip-toolchain", action="store_true", help="do not check the C compiler and Python headers")
    options = parser.parse_args(args)
    if options.sandbox:
        return run_sandboxed(options.unit, options.timeout, not options.skip_toolchain)
    return check(options.unit, check_toolchain=not options.skip_toolchain)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
