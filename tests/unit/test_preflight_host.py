"""The preflight checks the host as the service finds it before SGLang is asked (exit 4).

Python: SGLang 0.5.23's wheel says ``Requires-Python: >=3.11`` (its METADATA, read from the conformance
venv where it is installed). Toolchain: Triton builds its launchers with $CC / gcc / clang against the
interpreter's Python.h (triton/runtime/build.py ``_build``); here the real compiler and headers of this
machine are used where present, and a broken header shows the compile check is real. GPUs: nvidia-smi's
rows, GB10's ``[N/A]`` memory (unified memory: the host's MemTotal), CUDA_VISIBLE_DEVICES by index or
UUID; device nodes the sandbox refuses; an absolute --model-path the service cannot read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_preflight_unit import FILES, PYTHON, REPO, preflight, render_unit

B200 = "0, GPU-6f0e1a2b-0000-4000-8000-000000000000, 00000000:18:00.0, NVIDIA B200, 10.0, 183359"
GB10 = "0, GPU-aa11bb22-0000-4000-8000-000000000000, 0000000F:01:00.0, NVIDIA GB10, 12.1, [N/A]"
MIB = 1024 * 1024


# --- Python ----------------------------------------------------------------------------------------


def test_min_python_is_the_wheels_requires_python() -> None:
    metadata = sorted(REPO.glob(".venv-conformance/lib/python3*/site-packages/sglang-0.5.23.dist-info/METADATA"))
    if not metadata:
        pytest.skip("the conformance venv (tests/conformance/setup-venv.sh) is not built")
    lines = metadata[0].read_text(encoding="utf-8").splitlines()
    assert "Requires-Python: >=3.11" in lines and preflight.MIN_PYTHON == (3, 11)


@pytest.mark.parametrize("version", [(3, 10, 12), (3, 9, 2), (2, 7, 18)])
def test_an_old_python_is_refused_naming_sglang_python_and_the_fix(version: tuple[int, int, int]) -> None:
    message = preflight.python_problem(version, "/opt/sglang/current/bin/python")
    assert message is not None
    assert f"Python {'.'.join(map(str, version))}" in message and ">= 3.11" in message
    assert "sglang_python" in message and "deadsnakes" in message and "python3.11" in message


@pytest.mark.parametrize("version", [(3, 11, 0), (3, 12, 3), (3, 13, 1)])
def test_a_supported_python_passes(version: tuple[int, int, int]) -> None:
    assert preflight.python_problem(version, "/x") is None


def test_the_script_stops_on_an_old_python_before_reading_the_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nExecStart=%h/not-read\n", encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr(sys, "version_info", (3, 10, 12, "final", 0))  # Ubuntu 22.04's python3
        code = preflight.check(unit)
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert code == preflight.EXIT_HOST and report["where"] == "host"
    assert "Python 3.10.12" in report["error"] and "sglang_python" in report["error"]


# --- compiler and headers --------------------------------------------------------------------------


def _which(found: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda name, path=None: found.get(name)


def test_no_compiler_names_build_essential(tmp_path: Path) -> None:
    message = preflight.toolchain_problem({"PATH": "/usr/bin"}, _which({}), str(tmp_path))
    assert message is not None and "build-essential" in message and "no C compiler" in message and "/usr/bin" in message


def test_a_cc_that_is_not_there_is_named(tmp_path: Path) -> None:
    message = preflight.toolchain_problem({"PATH": "/usr/bin", "CC": "clang-19"}, _which({"gcc": "/usr/bin/gcc"}),
                                          str(tmp_path))
    assert message is not None and "CC='clang-19'" in message and "sglang_env" in message


def test_triton_prefers_gcc_then_clang() -> None:
    assert preflight.find_cc({}, _which({"gcc": "/g", "clang": "/c"})) == "/g"
    assert preflight.find_cc({}, _which({"clang": "/c"})) == "/c"
    assert preflight.find_cc({"CC": "cc"}, _which({"cc": "/usr/bin/cc", "gcc": "/g"})) == "/usr/bin/cc"


def test_missing_headers_name_the_dev_package(tmp_path: Path) -> None:
    message = preflight.toolchain_problem({}, _which({"gcc": "/usr/bin/gcc"}), str(tmp_path), lambda cc, inc: None)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert message is not None and "Python.h is missing" in message and f"python{version}-dev" in message


needs_cc = pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("clang") is None, reason="no C compiler")


@needs_cc
def test_this_machines_compiler_and_headers_pass() -> None:
    include = preflight.triton_include_dir()
    if not (Path(include) / "Python.h").is_file():
        pytest.skip(f"no Python.h in {include}")
    assert preflight.toolchain_problem(dict(os.environ), shutil.which, include) is None


@needs_cc
def test_a_header_that_does_not_compile_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "Python.h").write_text("#error this Python.h is broken\n", encoding="utf-8")
    message = preflight.toolchain_problem(dict(os.environ), shutil.which, str(tmp_path))
    assert message is not None and "cannot compile" in message and "broken" in message and "build-essential" in message


# --- GPUs --------------------------------------------------------------------------------------------


def test_a_discrete_gpu() -> None:
    [gpu] = preflight.parse_gpus(B200 + "\n", host_memory=128 * 1024 * MIB)
    assert gpu["total"] == 183359 * MIB and gpu["capability"] == (10, 0) and not gpu["unified"]
    assert (gpu["index"], gpu["bus_id"], gpu["name"]) == (0, "00000000:18:00.0", "NVIDIA B200")


def test_gb10_unified_memory_is_the_hosts_memtotal() -> None:
    [gpu] = preflight.parse_gpus(GB10 + "\n", host_memory=128 * 1024 * MIB)
    assert gpu["unified"] and gpu["total"] == 128 * 1024 * MIB and gpu["capability"] == (12, 1)
    [gpu] = preflight.parse_gpus(GB10.replace("[N/A]", "[Not Supported]"), host_memory=7 * MIB)
    assert gpu["unified"] and gpu["total"] == 7 * MIB


def test_memtotal_is_read_from_proc() -> None:
    total = preflight.meminfo_total()
    assert total is not None and total > 64 * MIB


def test_error_lines_are_not_gpus() -> None:
    text = "\n".join([B200, "Unable to determine the device handle for GPU0000:19:00.0: Insufficient Permissions",
                      "", "No devices were found"])
    assert [g["index"] for g in preflight.parse_gpus(text, None)] == [0]


@given(st.text(max_size=200))
def test_any_text_parses_without_crashing(text: str) -> None:
    for gpu in preflight.parse_gpus(text, 1):
        assert isinstance(gpu["index"], int) and isinstance(gpu["total"], int)


def test_cuda_visible_devices_selects_and_orders() -> None:
    gpus = [{"index": i, "uuid": f"GPU-{i}aaa-{i}", "bus_id": f"0000:{i:02x}:00.0"} for i in range(4)]
    assert preflight.visible(gpus, None) == gpus
    assert [g["index"] for g in preflight.visible(gpus, "2,0")] == [2, 0]
    assert [g["index"] for g in preflight.visible(gpus, "GPU-3aaa-3,GPU-1")] == [3, 1]
    assert [g["index"] for g in preflight.visible(gpus, "1,9,2")] == [1]  # CUDA stops at the first unknown entry
    assert preflight.visible(gpus, "") == []


def test_a_blocked_gpu_node_is_reported_and_a_missing_one_is_not() -> None:
    opened: list[str] = []

    def opener(path: str, flags: int) -> int:
        opened.append(path)
        if path == "/dev/nvidia5":
            raise PermissionError(1, "Operation not permitted")
        if path == "/dev/nvidia-uvm":
            raise FileNotFoundError(2, "No such file or directory")
        return os.open("/dev/null", os.O_RDONLY)

    devices = [{"index": 0, "bus_id": "00000000:18:00.0"}, {"index": 1, "bus_id": "00000000:19:00.0"}]
    minors = {"00000000:18:00.0": 4, "00000000:19:00.0": 5}
    blocked = preflight.blocked_devices(devices, minor=lambda bus: minors[bus], opener=opener)
    assert blocked == ["/dev/nvidia5 (Operation not permitted)"]
    assert opened == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia4", "/dev/nvidia5"]
    # without /proc/driver/nvidia the node follows the index
    assert preflight.blocked_devices(devices[:1], minor=lambda bus: None, opener=opener) == []
    assert opened[-1] == "/dev/nvidia0"


def test_model_path() -> None:
    assert preflight.model_path_problem("nvidia/Qwen3.5-397B-A17B-NVFP4") is None
    assert preflight.model_path_problem(str(FILES)) is None
    message = preflight.model_path_problem("/root/models/missing")
    assert message is not None and "does not exist" in message and "ProtectHome" in message
    assert "sglang_server_model_path" in message


def test_a_model_path_behind_a_closed_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    def closed(path: str, *args: object, **kwargs: object) -> os.stat_result:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(preflight.os, "stat", closed)
    message = preflight.model_path_problem("/root/models/m")
    assert message is not None and "cannot be reached (Permission denied)" in message


# --- the script end to end: GB10, a hidden model -------------------------------------------------------

STANDIN = '''
class ServerArgs:
    def __init__(self, argv):
        self.model_path = argv[argv.index("--model-path") + 1]
        self.tp_size = 1

    def resolve_once(self):
        pass

    def check_server_args(self):
        pass


def prepare_server_args(argv):
    return ServerArgs(argv)
'''

FAKE_SMI = '''#!/bin/sh
echo "{line}"
'''


@pytest.fixture()
def gb10_env(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(FAKE_SMI.format(line=GB10), encoding="utf-8")
    (bindir / "nvidia-smi").chmod(0o755)
    package = tmp_path / "site" / "sglang" / "srt"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "server_args.py").write_text(STANDIN)
    return {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"),
            "PYTHONDONTWRITEBYTECODE": "1"}


def _run(unit: Path, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    proc = subprocess.run([PYTHON, str(FILES / "sglang-preflight.py"), "--unit", str(unit), "--skip-toolchain"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    return proc.returncode, json.loads(proc.stdout.splitlines()[-1])


def test_the_script_runs_on_gb10(tmp_path: Path, gb10_env: dict[str, str]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(render_unit(["--model-path", str(FILES)]), encoding="utf-8")
    code, report = _run(unit, gb10_env)
    assert (code, report["error"]) == (0, "")


def test_a_model_directory_the_service_cannot_see_fails_the_preflight(tmp_path: Path, gb10_env: dict[str, str]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(render_unit(["--model-path", str(tmp_path / "hidden")]), encoding="utf-8")
    code, report = _run(unit, gb10_env)
    assert code == preflight.EXIT_HOST and report["where"] == "model" and "does not exist" in str(report["error"])


def test_tls_files_are_loaded_as_uvicorn_would_before_anything_stops(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from standin_inproc import make_pki

    pki = make_pki(tmp_path / "pki", password="right-password")
    args = SimpleNamespace(ssl_certfile=str(pki.cert), ssl_keyfile=str(pki.key), ssl_ca_certs=str(pki.ca),
                           ssl_keyfile_password="right-password")
    assert preflight.tls_problem(args) is None
    assert preflight.tls_problem(SimpleNamespace(ssl_certfile=None)) is None  # no TLS, nothing to check
    wrong = preflight.tls_problem(SimpleNamespace(**{**vars(args), "ssl_keyfile_password": "wrong"}))
    assert wrong and "sglang_ssl_keyfile_password" in wrong and "right-password" not in wrong
    other = make_pki(tmp_path / "other")  # a key that belongs to another certificate
    mismatch = preflight.tls_problem(SimpleNamespace(**{**vars(args), "ssl_keyfile": str(other.key),
                                                        "ssl_keyfile_password": None}))
    assert mismatch and "belongs to the certificate" in mismatch
    missing = preflight.tls_problem(SimpleNamespace(**{**vars(args), "ssl_keyfile": str(tmp_path / "nope.key")}))
    assert missing and "--ssl-keyfile" in missing and "cannot be read by the service" in missing
