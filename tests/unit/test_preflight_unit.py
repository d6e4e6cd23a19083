"""The preflight checks what the unit will run: ``sglang-preflight.py --unit`` reads ExecStart= as systemd does.

The role's unit template (``roles/sglang_server/templates/sglang.service.j2``) is rendered with the
``systemd_quote`` / ``systemd_exec_lines`` filters for arbitrary argv words, and the preflight's reader
(``unit_exec_start``) must give back exactly those words, after the venv's python and the launcher.
Two oracles read the same unit: the project's reference reader (``rendering.exec_start``) and, where
it can run, systemd itself: ``systemd --test --user`` loads the unit and dumps each ExecStart= command
line (words unquoted, specifiers expanded, ``$`` not yet: systemd expands variables at exec time), run
as an unprivileged user as test mode requires.  Hand-written ExecStart= values cover systemd syntax
the role never writes (single quotes, ``\\x41``, prefixes, ``;``), and the refusals: specifiers,
variables, unknown escapes, ``@``, more than one command.  The whole script runs end to end against a
stand-in ``sglang`` package that records the argv it was given, on units of this template and on the
role's own rendering of the reference host (``rendering.render``), whose plan argv SGLang must receive.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.sglang import systemd_exec_lines, systemd_quote
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import text_problem
from hypothesis import example, given
from hypothesis import strategies as st
from reference import host_with
from rendering import exec_start, jinja_env, render

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_server"
FILES = ROLE / "files"
TEMPLATE = (ROLE / "templates" / "sglang.service.j2").read_text(encoding="utf-8")
UNIT_NAME = "preflight-oracle.service"


def _load_preflight() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sglang_preflight", FILES / "sglang-preflight.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the role
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = write_bytecode
    return module


preflight = _load_preflight()
# The interpreter of these tests stands for the server's virtualenv; the launcher is the role's own.
VENV = str(Path(sys.executable).parent.parent)
PYTHON = f"{VENV}/bin/python"
LAUNCHER = str(FILES / "sglang-launch.py")

# Words the filters accept: any text without what text_problem refuses, with extra weight on what
# systemd's reader interprets (quotes, backslash, %, $, ;, #, whitespace, a leading dash or '@').
SPECIAL = " \"'\\$%;#=[]`-/.:@{}!*~é中\u00a0\u3000\U0001f600"
WORD = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from([*SPECIAL, "a", "0", "n", "x", "h"]), max_size=16),
    st.sampled_from(["--", "-", "", " ", "%h", "%%", "%", "$HOME", "${X}", "$$", "$", "a\\", "\\", "\\n", "\\x41", ";", "\\;",
                     "#x", ";x", "'", '"', "\\\"", "-@:+!", "@x", "--model-path", "/models/a b"]),
).filter(lambda word: text_problem(word) is None)
# At least one word: the plan always has --model-path (with none, the template's ExecStart= line would end
# in a continuation backslash and swallow the next setting, as systemd would read it too).
ARGV = st.lists(WORD, min_size=1, max_size=8)


def render_unit(argv: list[str], venv: str = VENV, libexec: str = str(FILES)) -> str:
    """The role's unit template with ``argv`` as the launcher's arguments (through systemd_exec_lines).

    Only the ExecStart= inputs are given; whatever else the template refers to renders empty, so the
    test follows the template's ExecStart= line, not the rest of the role's variables.
    """
    env = jinja_env()
    env.undefined = jinja2.ChainableUndefined
    context: dict[str, Any] = {
        "ansible_managed": "Ansible managed",
        "sglang_server_venv": venv,
        "sglang_server_libexec_dir": libexec,
        "python": f"{venv}/bin/python",
        "launcher": f"{libexec}/sglang-launch.py",
        "exec_lines": systemd_exec_lines(argv),
        "plan": {"version": "0.5.23", "gpu_ids": [0], "gpus": [0],
                 "binding": {"devices": ["/dev/nvidia0"], "extra_devices": []}},
        "devices": ["/dev/nvidia0"],
        "service": "sglang",
    }
    return env.from_string(TEMPLATE).render(**context)


def read_back(unit: str, tmp: Path) -> list[str]:
    """The argv of the unit's one ExecStart= command, as the preflight reads it from a file."""
    path = tmp / "sglang.service"
    path.write_text(unit, encoding="utf-8")
    command = preflight.unit_exec_start(path)
    assert command.path == command.argv[0]
    return command.argv


# --- systemd itself as the oracle ------------------------------------------------------------------

_SYSTEMD = next((p for p in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd") if os.access(p, os.X_OK)), None)
_NOBODY = 65534


def _systemd_usable() -> bool:
    if _SYSTEMD is None:
        return False
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


def systemd_exec_start(unit: str) -> list[list[str]]:
    """Each ExecStart= command of ``unit`` as systemd loads it (``systemd --test --user`` dump), ``$$`` as ``$``.

    The dump quotes each word like a shell (``shell_maybe_quote``, read by :func:`_shell_words`); the
    variables are expanded at exec time, not in the dump, so ``$$`` is replaced here as systemd will
    (the role never writes another ``$``). Test mode refuses root: as root it runs as nobody.
    """
    assert _SYSTEMD is not None
    directory = Path(tempfile.mkdtemp(prefix="preflight-oracle-"))
    try:
        directory.chmod(0o755)
        (directory / UNIT_NAME).write_text(unit, encoding="utf-8")
        (directory / UNIT_NAME).chmod(0o644)
        runtime = directory / "run"
        runtime.mkdir(mode=0o700)
        command = [_SYSTEMD, "--test", "--user", f"--unit={UNIT_NAME}", "--no-pager"]
        if os.geteuid() == 0:
            os.chown(runtime, _NOBODY, _NOBODY)
            command = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups", *command]
        # The unit's directory first; the trailing ':' keeps the default user units (basic.target ...).
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SYSTEMD_UNIT_PATH": f"{directory}:",
               "XDG_RUNTIME_DIR": str(runtime), "HOME": str(directory), "LANG": "C.UTF-8"}
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
    finally:
        shutil.rmtree(directory)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _dumped_exec_start(proc.stdout)


def _shell_words(line: str) -> list[str]:
    """The words of a command line quoted by systemd's quote_command_line() (``shell_maybe_quote`` per word).

    A word is bare (nothing a shell interprets, no ASCII whitespace) or in double quotes with
    ``"``, ``\\``, `` ` `` and ``$`` backslash-escaped and tab / newline written ``\\t`` / ``\\n``.
    """
    words: list[str] = []
    i = 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        if line[i] != '"':
            end = line.find(" ", i)
            end = len(line) if end < 0 else end
            words.append(line[i:end])
            i = end
            continue
        word, i = "", i + 1
        while line[i] != '"':
            if line[i] == "\\":
                i += 1
                word += {"n": "\n", "t": "\t"}.get(line[i], line[i])
            else:
                word += line[i]
            i += 1
        words.append(word)
        i += 1
    return words


def _dumped_exec_start(dump: str) -> list[list[str]]:
    """The ``Command Line:`` entries under ``-> ExecStart:`` of the oracle unit in a ``systemd --test`` dump."""
    lines = iter(dump.splitlines())
    for line in lines:
        if line.strip() == f"-> Unit {UNIT_NAME}:":
            break
    else:
        raise AssertionError("the unit is not in systemd's dump")
    commands: list[list[str]] = []
    in_exec_start = False
    for line in lines:
        text = line.strip()
        if text.startswith("-> Unit "):
            break
        if text.startswith("-> "):
            in_exec_start = text == "-> ExecStart:"
        elif in_exec_start and text.startswith("Command Line: "):
            words = _shell_words(line.split("Command Line: ", 1)[1])
            assert all("$" not in w.replace("$$", "") for w in words), words
            commands.append([w.replace("$$", "$") for w in words])
        else:
            in_exec_start = False
    return commands


needs_systemd = pytest.mark.skipif(not _systemd_usable(), reason="systemd (test mode) is not available")


@pytest.fixture()
def tmp_unit_dir() -> Iterator[Path]:
    """A scratch directory for unit files (hypothesis runs many examples per test: not tmp_path)."""
    directory = Path(tempfile.mkdtemp(prefix="preflight-unit-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


# --- properties ------------------------------------------------------------------------------------


@given(ARGV)
@example(["--"])
@example(["--", "--"])
@example([""])
@example(["a b", "'", '"', "\\", "$", "%", "--x", "%%h", "$$X", "${X}", "\\;", ";", "#"])
def test_rendered_words_read_back_exactly(tmp_unit_dir: Path, argv: list[str]) -> None:
    unit = render_unit(argv)
    words = read_back(unit, tmp_unit_dir)
    assert words == [PYTHON, LAUNCHER, *argv]
    assert words == exec_start(unit)  # the project's reference reader agrees


@needs_systemd
@given(ARGV)
@example(["--"])
@example([""])
@example(["a b", "'", '"', "\\", "$", "%", "--x", "%%h", "$$X", "${X}", "\\;", ";", "#", "é中\u00a0", "`x`", "!"])
def test_systemd_reads_the_same_words(tmp_unit_dir: Path, argv: list[str]) -> None:
    unit = render_unit(argv)
    assert systemd_exec_start(unit) == [read_back(unit, tmp_unit_dir)]


@given(ARGV)
def test_preflight_passes_the_launcher_exactly_its_arguments(tmp_unit_dir: Path, argv: list[str]) -> None:
    path = tmp_unit_dir / "sglang.service"
    path.write_text(render_unit(argv), encoding="utf-8")
    assert preflight.launcher_argv(preflight.unit_exec_start(path), PYTHON, Path(LAUNCHER)) == argv


# --- cases -----------------------------------------------------------------------------------------

CASES = [
    ['"double quoted"', "'single quoted'", "it's", 'say "hi"'],
    ["back\\slash", "\\", "\\\\", "trailing\\", "\\n", "\\x41", '\\"'],
    ["$", "$$", "$HOME", "${HOME}", "cost$5", "a$"],
    ["%", "%%", "%h", "%n", "100%", "%%%"],
    ["a b", " ", "  lead", "trail  ", "\u00a0", "\u3000"],
    ["--"],
    ["--model-path", "--", "--tp-size", "8"],
    ["--served-model-name", ""],
    [";", "\\;", "a;", "#", ";x", "#x"],
]


@pytest.mark.parametrize("argv", CASES, ids=lambda argv: repr(argv)[:40])
def test_cases_read_back(tmp_unit_dir: Path, argv: list[str]) -> None:
    unit = render_unit(argv)
    assert read_back(unit, tmp_unit_dir) == [PYTHON, LAUNCHER, *argv]
    if _systemd_usable():
        assert systemd_exec_start(unit) == [[PYTHON, LAUNCHER, *argv]]


def test_the_filters_refuse_what_the_preflight_could_not_read_back() -> None:
    for word in ("a\nb", "tab\there", "nul\x00", "cr\r"):
        with pytest.raises(AnsibleFilterError):
            systemd_quote(word)


# ExecStart= values the role never writes, read as systemd does (checked against systemd where it runs).
SYNTAX = [
    ("/bin/echo 'single \"quoted\"' \"double 'quoted'\"", ["/bin/echo", 'single "quoted"', "double 'quoted'"]),
    ('/bin/echo "/a b"/c x"y z"', ["/bin/echo", "/a b/c", "xy z"]),
    ("/bin/echo \\x41\\101\\u00e9\\U0001F600\\s\\t", ["/bin/echo", "AAé\U0001f600 \t"]),
    ("/bin/echo 'in single \\'quotes\\''", ["/bin/echo", "in single 'quotes'"]),
    ("/bin/echo \\; x", ["/bin/echo", ";", "x"]),
    ("/bin/echo %% 100% a%%b", ["/bin/echo", "%", "100%", "a%b"]),
    ("/bin/echo $$ a$$b", ["/bin/echo", "$", "a$b"]),
    ("/bin/echo \"\" ''", ["/bin/echo", "", ""]),
    ("-/bin/echo x", ["/bin/echo", "x"]),
    ("+/bin/echo x", ["/bin/echo", "x"]),
    ("!!/bin/echo x", ["/bin/echo", "x"]),
    ("\"-/bin/echo\" x", ["/bin/echo", "x"]),
]


@pytest.mark.parametrize(("value", "words"), SYNTAX, ids=[v for v, _ in SYNTAX])
def test_systemd_syntax(tmp_unit_dir: Path, value: str, words: list[str]) -> None:
    unit = f"[Service]\nExecStart={value}\n"
    assert read_back(unit, tmp_unit_dir) == words
    if _systemd_usable():
        assert systemd_exec_start(unit) == [words]


def test_no_env_expand_prefix_keeps_dollars(tmp_unit_dir: Path) -> None:
    path = tmp_unit_dir / "x.service"
    path.write_text("[Service]\nExecStart=:/bin/echo $$ $HOME ${X}\n", encoding="utf-8")
    command = preflight.unit_exec_start(path)
    assert command.argv == ["/bin/echo", "$$", "$HOME", "${X}"]
    assert command.prefixes == ["no-env-expand"]


def test_continuations_comments_and_resets(tmp_unit_dir: Path) -> None:
    unit = ("[Unit]\nDescription=x\n[Service]\nExecStart=/bin/false\nExecStart=\n"
            "ExecStart=/bin/echo a \\\n# a comment inside\n; another\n    b\\\\ \\\n  c\n[Install]\nExecStart=/not/this\n")
    assert read_back(unit, tmp_unit_dir) == ["/bin/echo", "a", "b\\", "c"]
    if _systemd_usable():
        assert systemd_exec_start(unit) == [["/bin/echo", "a", "b\\", "c"]]


def test_a_drop_in_beside_the_unit_replaces_exec_start(tmp_unit_dir: Path) -> None:
    path = tmp_unit_dir / "sglang.service"
    path.write_text(render_unit(["--model-path", "/m"]), encoding="utf-8")
    (tmp_unit_dir / "sglang.service.d").mkdir()
    (tmp_unit_dir / "sglang.service.d" / "override.conf").write_text(
        f"[Service]\nExecStart=\nExecStart={PYTHON} {LAUNCHER} --model-path /other\n", encoding="utf-8")
    assert preflight.unit_exec_start(path).argv == [PYTHON, LAUNCHER, "--model-path", "/other"]


REFUSED = [
    ("/bin/echo %h", "specifier %h"),
    ("/bin/echo a%nb", "specifier %n"),
    ("%h/bin/python x", "specifier %h"),
    ("/bin/echo $HOME", "environment variable"),
    ("/bin/echo ${X}", "environment variable"),
    ("/bin/echo a$", "environment variable"),
    ("/bin/echo \\q", "escape"),
    ("/bin/echo \\x00", "escape"),
    ("/bin/echo a\\ b", "escape"),
    ("/bin/echo \"open", "unterminated"),
    ("@/bin/echo argv0 x", "'@' prefix"),
    ("/bin/echo a ; /bin/echo b", "2 commands"),
    ("\"\" x", "empty executable"),
]


@pytest.mark.parametrize(("value", "why"), REFUSED, ids=[v for v, _ in REFUSED])
def test_what_the_preflight_cannot_expand_is_refused(tmp_unit_dir: Path, value: str, why: str) -> None:
    path = tmp_unit_dir / "x.service"
    path.write_text(f"[Service]\nExecStart={value}\n", encoding="utf-8")
    with pytest.raises(preflight.UnitError, match=why.replace("(", r"\(")):
        preflight.unit_exec_start(path)


def test_two_exec_start_commands_are_refused(tmp_unit_dir: Path) -> None:
    path = tmp_unit_dir / "x.service"
    path.write_text("[Service]\nExecStart=/bin/true\nExecStart=/bin/false\n", encoding="utf-8")
    with pytest.raises(preflight.UnitError, match="2 commands"):
        preflight.unit_exec_start(path)
    path.write_text("[Service]\nType=exec\n", encoding="utf-8")
    with pytest.raises(preflight.UnitError, match="0 commands"):
        preflight.unit_exec_start(path)


@pytest.mark.parametrize(("venv", "libexec", "why"), [
    ("/usr", str(FILES), "not this virtualenv's python"),
    (VENV, "/usr/libexec", "not on the launcher"),
])
def test_the_unit_must_run_this_venvs_python_on_the_launcher(tmp_unit_dir: Path, venv: str, libexec: str, why: str) -> None:
    path = tmp_unit_dir / "sglang.service"
    path.write_text(render_unit(["--model-path", "/m"], venv=venv, libexec=libexec), encoding="utf-8")
    with pytest.raises(preflight.UnitError, match=why):
        preflight.launcher_argv(preflight.unit_exec_start(path), PYTHON, Path(LAUNCHER))


def test_python_options_before_the_launcher_are_refused(tmp_unit_dir: Path) -> None:
    path = tmp_unit_dir / "x.service"
    path.write_text(f"[Service]\nExecStart={PYTHON} -u {LAUNCHER} --model-path /m\n", encoding="utf-8")
    with pytest.raises(preflight.UnitError, match="not on the launcher"):
        preflight.launcher_argv(preflight.unit_exec_start(path), PYTHON, Path(LAUNCHER))


# --- the script end to end -------------------------------------------------------------------------

STANDIN = '''
import json, os

class ServerArgs:
    def __init__(self, argv):
        self.argv = argv
        self.tp_size = 8

    def resolve_once(self):
        pass

    def check_server_args(self):
        assert "--reject" not in self.argv, "rejected by the stand-in"


def prepare_server_args(argv):
    with open(os.environ["PREFLIGHT_TEST_RECORD"], "w", encoding="utf-8") as handle:
        json.dump(argv, handle)
    if "--unknown" in argv:
        raise SystemExit(2)
    return ServerArgs(argv)
'''


@pytest.fixture()
def standin(tmp_path: Path) -> dict[str, str]:
    """A stand-in ``sglang`` package that records the argv prepare_server_args() got."""
    package = tmp_path / "site" / "sglang" / "srt"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "server_args.py").write_text(STANDIN)
    return {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "PREFLIGHT_TEST_RECORD": str(tmp_path / "argv.json"),
            "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}


def run_preflight(unit: str, tmp_path: Path, env: dict[str, str]) -> tuple[int, dict[str, Any], list[str] | None]:
    """Run the script on ``unit``: exit status, its JSON report, the argv SGLang's entry point got (or None)."""
    path = tmp_path / "sglang.service"
    path.write_text(unit, encoding="utf-8")
    proc = subprocess.run([PYTHON, str(FILES / "sglang-preflight.py"), "--unit", str(path)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    record = Path(env["PREFLIGHT_TEST_RECORD"])
    received = json.loads(record.read_text(encoding="utf-8")) if record.exists() else None
    return proc.returncode, json.loads(proc.stdout.splitlines()[-1]), received


def test_the_script_checks_exactly_the_units_words(tmp_path: Path, standin: dict[str, str]) -> None:
    config = tmp_path / "sglang.yaml"
    config.write_text('api-key: "secret-key-123"\n', encoding="utf-8")
    argv = ["--model-path", "/models/a b", "--served-model-name", 'it\'s "q" $5 100% \\', "--", "--config", str(config)]
    code, report, received = run_preflight(render_unit(argv), tmp_path, standin)
    assert (code, report["ok"], report["error"]) == (0, True, "")
    assert received == argv and report["argv"] == argv
    assert report["resolved"]["tp_size"] == 8


def test_the_roles_own_unit_runs_the_plans_argv(tmp_path: Path, standin: dict[str, str]) -> None:
    """The whole role: host variables -> plan -> unit (rendering.render) -> preflight -> what SGLang gets."""
    rendered = render(host_with({"served_model_name": "a b 'c' \"d\" $HOME ${X} 100% %h \\ -- é中"},
                                sglang_server_venv=VENV, sglang_server_libexec_dir=str(FILES)))
    argv = rendered.context["argv"]
    assert "a b 'c' \"d\" $HOME ${X} 100% %h \\ -- é中" in argv
    code, report, received = run_preflight(rendered.unit, tmp_path, standin)
    assert (code, report["error"]) == (0, "")
    assert received == argv


def test_the_script_reports_sglangs_rejection(tmp_path: Path, standin: dict[str, str]) -> None:
    code, report, received = run_preflight(render_unit(["--model-path", "/m", "--reject"]), tmp_path, standin)
    assert (code, report["ok"]) == (1, False)
    assert "rejected by the stand-in" in report["error"] and received == ["--model-path", "/m", "--reject"]
    code, report, _ = run_preflight(render_unit(["--unknown"]), tmp_path, standin)
    assert (code, report["error"]) == (2, "argparse exited with 2")


def test_the_script_runs_the_launchers_config_reading(tmp_path: Path, standin: dict[str, str]) -> None:
    argv = ["--model-path", "/m", "--config", str(tmp_path / "missing.yaml")]
    code, report, received = run_preflight(render_unit(argv), tmp_path, standin)
    assert (code, report["where"]) == (1, "sglang-launch.py")
    assert "launcher fails on its --config" in report["error"] and "missing.yaml" in report["error"]
    assert received is None  # SGLang was never asked


def test_the_script_refuses_a_unit_it_cannot_read_back(tmp_path: Path, standin: dict[str, str]) -> None:
    unit = render_unit(["--model-path", "/m"]).replace("--model-path", "--model-path %h", 1)
    code, report, received = run_preflight(unit, tmp_path, standin)
    assert code == 3 and "specifier %h" in report["error"] and report["where"].endswith("sglang.service")
    assert received is None
    code, report, _ = run_preflight(render_unit(["--model-path", "/m"], venv="/usr"), tmp_path, standin)
    assert code == 3 and "not this virtualenv's python" in report["error"]


def test_the_rendered_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    path = tmp_path / "sglang.service"
    path.write_text(render_unit(["--model-path", "/models/a b", "--x", "$HOME %h \\ \"'", "--"]), encoding="utf-8")
    proc = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert "ExecStart" not in proc.stderr and "quot" not in proc.stderr, proc.stderr
