"""The preflight runs in the service's own sandbox: systemd-run gets the rendered unit's [Service] properties.

``sandbox_properties`` reads the unit the role renders (``rendering.render``: defaults, vars, the real
template) and must carry every directive that restricts the process, in the unit's order, and leave
out only the listed lifecycle directives. ``systemd_run_argv`` is checked against ``systemd-run --help``
where systemd-run is installed. ``run_sandboxed`` is run end to end with a stand-in ``systemd-run`` on
PATH that runs the command it is given (and one that dies without a word, as a time limit does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from reference import host_with
from rendering import parse_unit, render
from test_preflight_unit import FILES, LAUNCHER, PYTHON, REPO, VENV, preflight, render_unit

SCRIPT = FILES / "sglang-preflight.py"
# What the service's sandbox must carry into the preflight (issue 14): credentials, view, devices, filters.
RESTRICTING = ("User", "Group", "WorkingDirectory", "EnvironmentFile", "DevicePolicy", "DeviceAllow", "ProtectSystem",
               "ReadWritePaths", "ProtectHome", "PrivateTmp", "NoNewPrivileges", "ProtectKernelTunables",
               "ProtectKernelModules", "ProtectKernelLogs", "RestrictAddressFamilies", "SystemCallFilter",
               "CapabilityBoundingSet", "AmbientCapabilities", "ProtectProc", "UMask", "LimitMEMLOCK")


@pytest.fixture()
def role_unit(tmp_path: Path) -> tuple[Path, str]:
    rendered = render(host_with({}, sglang_server_venv=VENV, sglang_server_libexec_dir=str(FILES)))
    path = tmp_path / "sglang.service"
    path.write_text(rendered.unit, encoding="utf-8")
    return path, rendered.unit


def test_the_roles_unit_gives_its_whole_sandbox_in_order(role_unit: tuple[Path, str]) -> None:
    path, text = role_unit
    service = [(k, v) for section, k, v in parse_unit(text) if section == "Service"]
    expected = [f"{k}={v}" for k, v in service if k not in preflight.SANDBOX_LEFT_OUT]
    assert preflight.sandbox_properties(path) == expected
    names = {k for k, _ in service}
    assert set(RESTRICTING) <= names, "the template dropped a directive the preflight relies on"
    assert names - {p.split("=", 1)[0] for p in expected} <= set(preflight.SANDBOX_LEFT_OUT)
    allowed = [p for p in expected if p.startswith("DeviceAllow=")]
    assert "DeviceAllow=/dev/nvidiactl rw" in allowed and len(allowed) == 3 + 8  # control nodes + 8 GPUs
    assert [p for p in expected if p.startswith("SystemCallFilter=")] == ["SystemCallFilter=@system-service",
                                                                          "SystemCallFilter=~@privileged"]


def test_the_tables_are_disjoint_and_every_omission_says_why() -> None:
    assert not preflight.SANDBOX_PROPERTIES & set(preflight.SANDBOX_LEFT_OUT)
    assert all(len(why) > 20 for why in preflight.SANDBOX_LEFT_OUT.values())
    assert "ExecStart" in preflight.SANDBOX_LEFT_OUT and "Type" in preflight.SANDBOX_LEFT_OUT


def test_the_systemd_run_command(role_unit: tuple[Path, str]) -> None:
    path, _ = role_unit
    argv = preflight.systemd_run_argv(path, SCRIPT, 300)
    assert argv[:6] == ["systemd-run", "--wait", "--pipe", "--collect", "--quiet", "--service-type=exec"]
    assert "--unit=sglang-preflight" in argv and "--property=RuntimeMaxSec=300" in argv
    assert "--property=User=sglang" in argv and "--property=ProtectHome=yes" in argv
    assert "--property=EnvironmentFile=/etc/sglang/sglang.env" in argv
    # the unit's own interpreter runs this script on the unit
    assert argv[-4:] == [PYTHON, str(SCRIPT), "--unit", str(path)]
    assert preflight.systemd_run_argv(path, SCRIPT, 300, check_toolchain=False)[-1] == "--skip-toolchain"


@pytest.mark.skipif(shutil.which("systemd-run") is None, reason="systemd-run is not installed")
def test_every_option_is_one_systemd_run_knows(role_unit: tuple[Path, str]) -> None:
    path, _ = role_unit
    helptext = subprocess.run(["systemd-run", "--help"], capture_output=True, text=True, check=True, timeout=30).stdout
    argv = preflight.systemd_run_argv(path, SCRIPT, 300)
    options = {word.split("=", 1)[0] for word in argv[1:argv.index(PYTHON)]}
    for option in options:
        assert f"{option}" in helptext, option
    assert "-p --property=NAME=VALUE" in helptext


@pytest.mark.parametrize(("line", "prop"), [
    ("ReadWritePaths=/var/lib/100%%", "ReadWritePaths=/var/lib/100%"),
    ('DeviceAllow="/dev/nvidia0" rw', "DeviceAllow=/dev/nvidia0 rw"),
    ("DeviceAllow=/dev/nvidia-caps-imex-channels/channel0 rw", "DeviceAllow=/dev/nvidia-caps-imex-channels/channel0 rw"),
    ("DeviceAllow=", "DeviceAllow="),
    ("SystemCallFilter=", "SystemCallFilter="),
    ("Environment=A=1 B=2", "Environment=A=1 B=2"),
])
def test_values_become_literal_transient_properties(tmp_path: Path, line: str, prop: str) -> None:
    path = tmp_path / "x.service"
    path.write_text(f"[Unit]\nDescription=x\n[Service]\nType=exec\n{line}\n", encoding="utf-8")
    assert preflight.sandbox_properties(path) == [prop]


@pytest.mark.parametrize(("line", "why"), [
    ("CPUWeight=10", "not classified"),
    ("ExecStartPre=/bin/true", "not classified"),
    ("ReadWritePaths=%h/x", "specifier"),
    ("ReadWritePaths=/a\\x20b", "backslash"),
    ('DeviceAllow="/dev/a b" rw', "space"),
])
def test_what_cannot_be_given_faithfully_is_refused(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "x.service"
    path.write_text(f"[Service]\n{line}\n", encoding="utf-8")
    with pytest.raises(preflight.UnitError, match=why):
        preflight.sandbox_properties(path)


def test_drop_ins_add_to_the_sandbox_in_order(role_unit: tuple[Path, str]) -> None:
    path, _ = role_unit
    (path.parent / "sglang.service.d").mkdir()
    (path.parent / "sglang.service.d" / "50-more.conf").write_text(
        "[Service]\nInaccessiblePaths=/srv/secret\nDeviceAllow=\n", encoding="utf-8")
    props = preflight.sandbox_properties(path)
    assert props[-2:] == ["InaccessiblePaths=/srv/secret", "DeviceAllow="]


SIMHOST_DROPIN = REPO / "tests/fixtures/simhost/image/rootfs/etc/systemd/system/sglang-.service.d/zz-fake-nvidia-procfs.conf"


def test_prefix_and_type_drop_ins_apply_as_systemd_applies_them(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-big.service"
    unit.write_text(render_unit(["--model-path", "/m"]), encoding="utf-8")
    for folder, name, line in (("sglang-.service.d", "zz-procfs.conf", "BindReadOnlyPaths=-/run/x/proc-driver:/proc/driver"),
                               ("service.d", "10-all.conf", "LimitCORE=0"),
                               ("sglang-big.service.d", "zz-procfs.conf", "ReadOnlyPaths=/srv/won"),
                               ("other-.service.d", "00-not-ours.conf", "LimitNICE=1")):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_text(f"[Service]\n{line}\n", encoding="utf-8")
    assert [p.name for p in preflight.unit_files(unit)] == ["sglang-big.service", "10-all.conf", "zz-procfs.conf"]
    assert preflight.sandbox_properties(unit)[-2:] == ["LimitCORE=0", "ReadOnlyPaths=/srv/won"]
    assert preflight.unit_exec_start(unit).argv[-2:] == ["--model-path", "/m"]


def test_the_simulated_hosts_drop_in_is_given_to_the_preflight(tmp_path: Path) -> None:
    if not SIMHOST_DROPIN.is_file():
        pytest.skip("the simulated host has no such drop-in")
    unit = tmp_path / "sglang-a.service"
    unit.write_text(render_unit(["--model-path", "/m"]), encoding="utf-8")
    (tmp_path / "sglang-.service.d").mkdir()
    shutil.copy(SIMHOST_DROPIN, tmp_path / "sglang-.service.d")
    assert [p for p in preflight.sandbox_properties(unit) if p.startswith("BindReadOnlyPaths=")]


# --- run_sandboxed end to end, with a stand-in systemd-run -----------------------------------------

STANDIN_SYSTEMD_RUN = '''#!{python}
"""Stand-in systemd-run: records its argv, runs the command after the options (or dies silently)."""
import json, os, subprocess, sys
with open(os.environ["SYSTEMD_RUN_RECORD"], "w") as fh:
    json.dump(sys.argv[1:], fh)
if os.environ.get("SYSTEMD_RUN_SILENT"):
    sys.exit(1)
args = sys.argv[1:]
while args and args[0].startswith("--"):
    args.pop(0)
sys.exit(subprocess.run(args).returncode)
'''


@pytest.fixture()
def fake_systemd_run(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "systemd-run"
    tool.write_text(STANDIN_SYSTEMD_RUN.format(python=sys.executable), encoding="utf-8")
    tool.chmod(0o755)
    site = tmp_path / "site" / "sglang" / "srt"
    site.mkdir(parents=True)
    (site.parent / "__init__.py").write_text("")
    (site / "__init__.py").write_text("")
    (site / "server_args.py").write_text(
        "class A:\n    tp_size = 8\n    def resolve_once(self): pass\n    def check_server_args(self): pass\n"
        "def prepare_server_args(argv):\n    return A()\n")
    return {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "SYSTEMD_RUN_RECORD": str(tmp_path / "argv.json"),
            "PYTHONPATH": str(tmp_path / "site"), "PYTHONDONTWRITEBYTECODE": "1"}


def _sandboxed(unit: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(SCRIPT), "--sandbox", "--timeout", "42", "--unit", str(unit)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def test_the_sandboxed_run_passes_the_report_and_status_through(tmp_path: Path, fake_systemd_run: dict[str, str]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(render_unit(["--model-path", "/m"]), encoding="utf-8")
    proc = _sandboxed(unit, fake_systemd_run)
    report = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 0 and report["ok"], proc.stdout + proc.stderr
    recorded = json.loads(Path(fake_systemd_run["SYSTEMD_RUN_RECORD"]).read_text(encoding="utf-8"))
    assert "--property=RuntimeMaxSec=42" in recorded and "--property=DevicePolicy=closed" in recorded
    assert recorded[-4:] == [PYTHON, str(SCRIPT), "--unit", str(unit)]
    assert LAUNCHER in unit.read_text(encoding="utf-8")


def test_a_run_that_leaves_no_report_names_the_time_limit(tmp_path: Path, fake_systemd_run: dict[str, str]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(render_unit(["--model-path", "/m"]), encoding="utf-8")
    proc = _sandboxed(unit, {**fake_systemd_run, "SYSTEMD_RUN_SILENT": "1"})
    report = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == preflight.EXIT_NO_REPORT == 5
    assert "sglang_server_preflight_timeout (42s)" in report["error"]


def test_an_unclassified_directive_stops_before_systemd_run(tmp_path: Path, fake_systemd_run: dict[str, str]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(render_unit(["--model-path", "/m"]).replace("[Install]", "CPUWeight=5\n[Install]"), encoding="utf-8")
    proc = _sandboxed(unit, fake_systemd_run)
    assert proc.returncode == 3 and "CPUWeight= is not classified" in json.loads(proc.stdout.splitlines()[-1])["error"]
    assert not Path(fake_systemd_run["SYSTEMD_RUN_RECORD"]).exists()
