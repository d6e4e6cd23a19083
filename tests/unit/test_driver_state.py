"""blackwell.sglang.driver_state: the read-only look of roles/nvidia_driver and roles/cuda_toolkit at a host.

The module's main() runs end to end with fake dpkg-query, nvidia-smi, modinfo, systemctl and nvcc programs on PATH
(shell scripts answering as the real ones do) and its host paths (Secure Boot's EFI variable, the driver's banner)
pointed at files of the test; the parsing helpers are checked on their own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import stat
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "driver_state", REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/driver_state.py")
driver_state: ModuleType = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(driver_state)  # type: ignore[union-attr]

DPKG = """\
hold installed nvidia-driver-cuda 580.95.05-1
hold installed libcuda1 580.95.05-1
install installed nvidia-smi 580.95.05-1
install config-files nvidia-kernel-dkms 575.57.08-1
install not-installed nvidia-fabricmanager-580 580.95.05-1
install installed python3-debian 0.1.49
install half-configured nvidia-persistenced 580.95.05-1
hold installed cuda-toolkit-13-0 13.0.2-1
install installed bash 5.2.15-2+b7
"""
MODINFO = """\
filename:       /lib/modules/6.1.0-28-amd64/updates/dkms/nvidia.ko
version:        580.95.05
license:        Dual MIT/GPL
srcversion:     9E862CAC5D7561571B51493
vermagic:       6.1.0-28-amd64 SMP preempt mod_unload modversions
"""


def program(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of fake programs (none of them yet) and the module's host paths in ``tmp_path``."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(driver_state, "SECURE_BOOT_VAR", str(tmp_path / "SecureBoot"))
    monkeypatch.setattr(driver_state, "PROC_VERSION", str(tmp_path / "version"))
    return tmp_path


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit) as exit_:
        driver_state.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_.value.code == 0, result
    assert result["changed"] is False
    return result


def test_parse_dpkg_reports_installed_matches_and_their_holds() -> None:
    installed, held = driver_state.parse_dpkg(DPKG, ["nvidia-*", "libcuda*", "python3-debian"])
    assert installed == {"nvidia-driver-cuda": "580.95.05-1", "libcuda1": "580.95.05-1", "nvidia-smi": "580.95.05-1",
                         "python3-debian": "0.1.49", "nvidia-persistenced": "580.95.05-1"}
    assert held == ["libcuda1", "nvidia-driver-cuda"]


def test_parse_dpkg_keeps_the_first_architecture_of_a_package() -> None:
    installed, held = driver_state.parse_dpkg("install installed libcuda1 1\nhold installed libcuda1 2\n", ["libcuda1"])
    assert installed == {"libcuda1": "1"} and held == []


def test_modinfo_field_is_the_line_that_starts_with_it() -> None:
    assert driver_state.modinfo_field(MODINFO, "version") == "580.95.05"
    assert driver_state.modinfo_field(MODINFO, "license") == "Dual MIT/GPL"
    assert driver_state.modinfo_field("", "license") == ""


def test_files_report_what_the_roles_compare(host: Path) -> None:
    text, binary, directory = host / "pref", host / "key.gpg", host / "d"
    text.write_text("Package: nvidia-*\n")
    text.chmod(0o644)
    binary.write_bytes(b"\x99\x01\xff\xfe")
    directory.mkdir()
    directory.chmod(0o755)
    me = pwd.getpwuid(os.getuid()).pw_name
    assert driver_state.file_state(str(text)) == {
        "exists": True, "type": "file", "owner": me, "group": driver_state.grp.getgrgid(os.getgid()).gr_name,
        "mode": "0644", "sha256": driver_state.hashlib.sha256(b"Package: nvidia-*\n").hexdigest(),
        "content": "Package: nvidia-*\n"}
    assert driver_state.file_state(str(binary))["content"] is None
    assert driver_state.file_state(str(binary))["sha256"] == driver_state.hashlib.sha256(b"\x99\x01\xff\xfe").hexdigest()
    assert driver_state.file_state(str(directory))["type"] == "directory"
    assert driver_state.file_state(str(directory))["mode"] == "0755"
    assert driver_state.file_state(str(host / "absent"))["exists"] is False


def test_a_converged_driver_host(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = host / "bin"
    program(bin_dir, "dpkg-query", f"/bin/cat <<'EOF'\n{DPKG}EOF")
    program(bin_dir, "nvidia-smi", 'for i in 0 1; do echo "580.95.05"; done')
    program(bin_dir, "modinfo", f"[ \"$1\" = nvidia ] || exit 1\n/bin/cat <<'EOF'\n{MODINFO}EOF")
    program(bin_dir, "systemctl", '[ "$2" = nvidia-persistenced.service ]')
    (host / "version").write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05\n")
    (host / "SecureBoot").write_bytes(b"\x06\x00\x00\x00\x00")
    result = run_module(capsys, packages=["nvidia-*", "libcuda*"], units=["nvidia-persistenced.service", "nvidia-fabricmanager"],
                        files=[str(host / "version")], driver=True)
    assert result["held"] == ["libcuda1", "nvidia-driver-cuda"], result
    assert set(result["packages"]) == {"nvidia-driver-cuda", "libcuda1", "nvidia-smi", "nvidia-persistenced"}
    assert result["units"] == {"nvidia-persistenced.service": {"enabled": True, "active": True},
                               "nvidia-fabricmanager": {"enabled": False, "active": False}}
    assert result["files"][str(host / "version")]["type"] == "file"
    driver = result["driver"]
    assert driver["smi_rc"] == 0 and driver["versions"] == ["580.95.05"]
    assert driver["module_license"] == "Dual MIT/GPL" and driver["module_version"] == "580.95.05"
    assert "Open Kernel Module" in driver["banner"] and driver["secure_boot"] is False
    assert result["nvcc"] == {}


def test_a_bare_host_without_driver_nor_dpkg(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(capsys, packages=["nvidia-*"], driver=True)
    assert result["packages"] == {} and result["held"] == []
    driver = result["driver"]
    assert driver["smi_rc"] == 127 and driver["versions"] == []
    assert driver["module_license"] == "" and driver["module_version"] == ""
    assert driver["banner"] is None and driver["secure_boot"] is None


def test_a_loaded_driver_of_another_version_and_secure_boot_on(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(host / "bin", "nvidia-smi", 'echo "Failed to initialize NVML: Driver/library version mismatch"; exit 18')
    (host / "SecureBoot").write_bytes(b"\x06\x00\x00\x00\x01")
    driver = run_module(capsys, driver=True)["driver"]
    assert driver["smi_rc"] == 18 and driver["versions"] == []
    assert driver["smi_output"] == ["Failed to initialize NVML: Driver/library version mismatch"]
    assert driver["secure_boot"] is True


def test_nvcc_is_looked_up_on_the_given_path_only(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cuda_bin = host / "cuda-13.0" / "bin"
    cuda_bin.mkdir(parents=True)
    program(cuda_bin, "nvcc", 'echo "Cuda compilation tools, release 13.0, V13.0.88"')
    result = run_module(capsys, nvcc_path=f"{cuda_bin}:/nonexistent")
    assert result["nvcc"]["rc"] == 0 and "release 13.0," in result["nvcc"]["stdout"]
    missing = run_module(capsys, nvcc_path="/nonexistent/bin")["nvcc"]
    assert missing["rc"] == 127 and "not found on /nonexistent/bin" in missing["stderr"]


def test_a_failing_dpkg_query_fails_the_module(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(host / "bin", "dpkg-query", 'echo "dpkg-query: error: database is locked" >&2; exit 2')
    with patch_module_args({"packages": ["nvidia-*"]}), pytest.raises(SystemExit) as exit_:
        driver_state.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_.value.code == 1 and "database is locked" in result["msg"]


def test_the_module_is_read_only(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted((p.name, stat.S_IMODE(p.stat().st_mode)) for p in host.iterdir())
    run_module(capsys, _ansible_check_mode=True, packages=["*"], files=[str(host)], units=["x.service"], driver=True,
               nvcc_path=str(host))
    assert sorted((p.name, stat.S_IMODE(p.stat().st_mode)) for p in host.iterdir()) == before
