"""The simulated host's fake nvidia-smi, per hardware profile, run outside a container.

FAKE_NVIDIA_DEV_DIR / CONF_DIR / PROC / RUN_DIR point the fixture at a temporary tree; the profiles are
the image's own (tests/fixtures/simhost/image/rootfs/etc/fake-nvidia/profiles). Also the profile
library's /proc/driver/nvidia and PCI sysfs trees, and the sglang stand-in's CUDA device mapping.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTFS = REPO / "tests/fixtures/simhost/image/rootfs"
SMI = ROOTFS / "usr/bin/nvidia-smi"
PROFILES = ROOTFS / "etc/fake-nvidia/profiles"
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
QUERY = "--query-gpu=index,uuid,pci.bus_id,name,compute_cap,memory.total"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fnp = _load("fake_nvidia_profile", ROOTFS / "usr/local/lib/fake-nvidia/fake_nvidia_profile.py")


class Host:
    """A temporary /dev, /etc/fake-nvidia, /proc and /run/fake-nvidia for one profile."""

    def __init__(self, root: Path, profile: str | None, env_profile: str | None = None) -> None:
        self.root = root
        for d in ("dev", "conf", "proc/1", "run"):
            (root / d).mkdir(parents=True, exist_ok=True)
        shutil.copytree(PROFILES, root / "conf/profiles", dirs_exist_ok=True)
        if profile is not None:
            (root / "conf/profile").write_text(profile + "\n")
        (root / "proc/1/environ").write_bytes(f"container=docker\0FAKE_NVIDIA_PROFILE={env_profile or ''}\0".encode())
        (root / "dev/nvidiactl").touch()
        self.paths = fnp.Paths(dev=str(root / "dev"), conf=str(root / "conf"), proc=str(root / "proc"), run=str(root / "run"))
        for gpu in fnp.installed_gpus(fnp.load_profile(self.paths), None):
            (root / f"dev/nvidia{gpu.minor}").touch()

    def env(self) -> dict[str, str]:
        return {**os.environ, "FAKE_NVIDIA_DEV_DIR": self.paths.dev, "FAKE_NVIDIA_CONF_DIR": self.paths.conf,
                "FAKE_NVIDIA_PROC": self.paths.proc, "FAKE_NVIDIA_RUN_DIR": self.paths.run}

    def smi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, str(SMI), *args], capture_output=True, text=True, env=self.env(), timeout=30)
        if check and proc.returncode != 0:
            raise AssertionError(f"nvidia-smi {' '.join(args)}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def rows(self, *args: str) -> list[list[str]]:
        return [line.split(", ") for line in self.smi(*args).stdout.splitlines() if line]


def matrix(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """Header names and rows of a topo matrix (ANSI codes removed, up to the legend)."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", text).split("\nLegend:")[0].strip("\n").splitlines()
    header = [h for h in lines[0].split("\t") if h.strip()]
    rows = {}
    for line in lines[1:]:
        cells = line.split("\t")
        rows[cells[0].strip()] = [c.strip() for c in cells[1:]]
    return header, rows


@pytest.mark.parametrize("profile", sorted(p.stem for p in PROFILES.glob("*.json")))
def test_every_profile_is_valid(profile: str) -> None:
    prof = fnp.load_profile(fnp.Paths(conf=str(PROFILES.parent)), profile)
    assert prof.name == profile and prof.gpus
    assert [g.bus_id for g in prof.gpus] == sorted(g.bus_id for g in prof.gpus)


def test_default_profile_is_the_old_simulated_host(tmp_path: Path) -> None:
    host = Host(tmp_path, None)
    rows = host.rows(QUERY, "--format=csv,noheader,nounits")
    assert [r[0] for r in rows] == [str(i) for i in range(8)]
    assert {(r[3], r[4], r[5]) for r in rows} == {(RTX, "12.0", "97887")}
    assert [r[2] for r in rows] == [f"00000000:{b}:00.0" for b in ("01", "21", "41", "61", "81", "A1", "C1", "E1")]
    # UUIDs are the ones the simulated host always had (uuid5 of gpu<i>.bsa-simhost.invalid).
    assert rows[0][1] == "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, "gpu0.bsa-simhost.invalid"))
    header, cells = matrix(host.smi("topo", "-m").stdout)
    assert header[:8] == [f"GPU{i}" for i in range(8)] and header[8:] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert cells["GPU0"][:8] == ["X", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    _, p2p = matrix(host.smi("topo", "-p2p", "r").stdout)
    assert set(p2p["GPU3"][:8]) == {"X", "OK"}


def test_hgx_b200_from_the_container_environment(tmp_path: Path) -> None:
    host = Host(tmp_path, None, env_profile="hgx-b200")
    rows = host.rows(QUERY, "--format=csv,noheader,nounits")
    assert len(rows) == 8 and {(r[3], r[4], r[5]) for r in rows} == {("NVIDIA B200", "10.0", "183359")}
    out = host.smi("topo", "-m").stdout
    assert out.startswith("\t\x1b[4mGPU0\tGPU1") and "\x1b[0m\n" in out  # underlined header, like current drivers
    header, cells = matrix(out)
    assert header[8:12] == ["NIC0", "NIC1", "NIC2", "NIC3"]
    for i in range(8):
        assert [c for k, c in enumerate(cells[f"GPU{i}"][:8]) if k != i] == ["NV18"] * 7
        assert cells[f"GPU{i}"][i] == "X"
    assert "NIC0" in cells and "  NIC3: mlx5_3" in out
    _, p2p = matrix(host.smi("topo", "-p2p", "n").stdout)
    assert p2p["GPU0"][1] == "OK"


def test_gb10_memory_is_not_available(tmp_path: Path) -> None:
    host = Host(tmp_path, "gb10")
    assert host.smi(QUERY, "--format=csv,noheader,nounits").stdout == \
        f"0, {fnp.load_profile(host.paths).gpus[0].uuid}, 0000000F:01:00.0, NVIDIA GB10, 12.1, [N/A]\n"
    assert host.smi("--query-gpu=memory.total,memory.used", "--format=csv").stdout.splitlines()[1] == "[N/A], [N/A]"
    assert "Not Supported" in host.smi().stdout
    header, cells = matrix(host.smi("topo", "-m").stdout)
    assert header == ["GPU0", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"] and cells["GPU0"][0] == "X"


def test_pcie_pair_without_p2p(tmp_path: Path) -> None:
    host = Host(tmp_path, "pcie2-nop2p")
    out = host.smi("topo", "-p2p", "r").stdout
    assert out.startswith(" \tGPU0\tGPU1\t\n GPU0\tX\tNS\t\n GPU1\tNS\tX\t\n\nLegend:")
    _, cells = matrix(host.smi("topo", "-m").stdout)
    assert cells["GPU0"][1] == cells["GPU1"][0] == "PHB"


def test_shuffled_minors_follow_bus_order_and_compute_apps_map_back(tmp_path: Path) -> None:
    host = Host(tmp_path, "minors-shuffled")
    prof = fnp.load_profile(host.paths)
    assert [g.minor for g in prof.gpus] == [2, 0, 3, 1]
    rows = host.rows("--query-gpu=index,pci.bus_id", "--format=csv,noheader")
    assert rows == [[str(i), f"00000000:{b}:00.0"] for i, b in enumerate(("01", "21", "41", "61"))]
    with open(tmp_path / "dev/nvidia3", "rb"):  # minor 3 is index 2 (bus 41)
        env = {**host.env(), "FAKE_NVIDIA_PROC": "/proc"}
        out = subprocess.run([sys.executable, str(SMI), "--query-compute-apps=pid,gpu_bus_id", "--format=csv,noheader"],
                             capture_output=True, text=True, env=env, check=True).stdout
    assert f"{os.getpid()}, 00000000:41:00.0" in out.splitlines()


def test_count_limit_and_missing_node(tmp_path: Path) -> None:
    host = Host(tmp_path, "minors-shuffled")
    (tmp_path / "conf/gpu_count").write_text("3\n")
    assert [r[1] for r in host.rows("--query-gpu=index,pci.bus_id", "--format=csv,noheader")] == \
        ["00000000:01:00.0", "00000000:21:00.0", "00000000:41:00.0"]
    (tmp_path / "dev/nvidia0").unlink()  # bus 21 falls off: the others are numbered again, in bus order
    assert host.rows("--query-gpu=index,pci.bus_id", "--format=csv,noheader") == \
        [["0", "00000000:01:00.0"], ["1", "00000000:41:00.0"]]


def test_profile_errors_are_loud(tmp_path: Path) -> None:
    host = Host(tmp_path, None)
    (tmp_path / "conf/profile").write_text("no-such-profile\n")
    res = host.smi("-L", check=False)
    assert res.returncode == 255 and "no-such-profile: no profile file" in res.stderr
    with pytest.raises(fnp.ProfileError, match="unknown key"):
        fnp.parse_profile("x", {"gpus": [{"bus_id": "0000:01:00.0", "minor": 0, "name": "n", "compute_cap": "1.0"}], "gpu": 1})
    with pytest.raises(fnp.ProfileError, match="share a minor"):
        fnp.parse_profile("x", {"gpus": [{"bus_id": f"0000:0{i}:00.0", "minor": 0, "name": "n", "compute_cap": "1"}
                                         for i in (1, 2)]})
    with pytest.raises(fnp.ProfileError, match="not like"):
        fnp.parse_profile("x", {"gpus": [{"bus_id": "00000000:01:00.0", "minor": 0, "name": "n", "compute_cap": "1"}]})


def test_topo_usage_errors(tmp_path: Path) -> None:
    host = Host(tmp_path, None)
    assert host.smi("topo", check=False).returncode == 2
    res = host.smi("topo", "-p2p", check=False)
    assert res.returncode == 2 and 'Option "-p2p" is missing its value.' in res.stderr
    (tmp_path / "dev/nvidiactl").unlink()
    assert host.smi("topo", "-m", check=False).returncode == 9


def test_proc_and_pci_trees(tmp_path: Path) -> None:
    prof = fnp.load_profile(fnp.Paths(conf=str(PROFILES.parent)), "hgx-b200")
    gpus = fnp.installed_gpus(prof, 6)
    fnp.write_proc_tree(str(tmp_path / "proc"), gpus, "580.95.05")
    fnp.write_pci_tree(str(tmp_path / "pci"), prof, gpus)
    info = (tmp_path / "proc/nvidia/gpus/0000:1b:00.0/information").read_text()
    assert re.search(r"^Device Minor: \t 0$", info, re.M) and re.search(r"^Bus Location: \t 0000:1b:00.0$", info, re.M)
    assert f"GPU UUID: \t {gpus[0].uuid}\n" in info and "Model: \t\t NVIDIA B200\n" in info
    assert len(list((tmp_path / "proc/nvidia/gpus").iterdir())) == 6
    pci = tmp_path / "pci"
    switches = sorted(d.name for d in pci.iterdir()
                      if (d / "vendor").read_text().strip() == "0x10de" and (d / "class").read_text().startswith("0x0680"))
    assert switches == ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
    assert (pci / "0000:1b:00.0/iommu_group/type").read_text() == "identity\n"
    assert not (pci / "0000:df:00.0").exists()  # beyond the 6 installed GPUs
    plain = fnp.load_profile(fnp.Paths(conf=str(PROFILES.parent)), "rtxpro6000-8")
    fnp.write_pci_tree(str(tmp_path / "pci2"), plain, plain.gpus)
    assert not (tmp_path / "pci2/0000:01:00.0/iommu_group").exists()


# --- the sglang stand-in's view of the GPUs ---------------------------------------------------------


@pytest.fixture()
def standin_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, list]:
    prof = fnp.load_profile(fnp.Paths(conf=str(PROFILES.parent)), "minors-shuffled")
    fnp.write_proc_tree(str(tmp_path / "driver"), prof.gpus, "580.95.05")
    (tmp_path / "dev").mkdir()
    for g in prof.gpus:
        (tmp_path / f"dev/nvidia{g.minor}").touch()
    monkeypatch.setenv("SGLANG_STANDIN_DEV_DIR", str(tmp_path / "dev"))
    monkeypatch.setenv("SGLANG_STANDIN_NVIDIA_PROC", str(tmp_path / "driver/nvidia"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    module = _load("standin_proc_under_test", REPO / "tests/fixtures/sglang_standin/src/sglang/_standin/proc.py")
    return module, prof.gpus


def test_standin_maps_cuda_devices_to_minors(standin_proc: tuple[ModuleType, list], monkeypatch: pytest.MonkeyPatch) -> None:
    proc, gpus = standin_proc
    dev = os.environ["SGLANG_STANDIN_DEV_DIR"]
    assert [proc.gpu_node(k) for k in range(4)] == [f"{dev}/nvidia{m}" for m in (2, 0, 3, 1)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{gpus[3].uuid},1")
    assert [proc.gpu_node(0), proc.gpu_node(1)] == [f"{dev}/nvidia1", f"{dev}/nvidia0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus[2].uuid[:12])  # a unique UUID prefix, as CUDA accepts
    assert proc.gpu_node(0) == f"{dev}/nvidia3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-00000000-0000-0000-0000-000000000000,3")
    assert proc.gpu_node(0) == f"{dev}/nvidia3"
    with pytest.raises(OSError, match="invalid device ordinal 1"):
        proc.gpu_node(1)  # the list ends at the UUID that is not on this host
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert proc.visible_gpus() == []


def test_standin_devices_report(standin_proc: tuple[ModuleType, list]) -> None:
    proc, _ = standin_proc
    dev = os.environ["SGLANG_STANDIN_DEV_DIR"]
    os.chmod(f"{dev}/nvidia3", 0)
    report = json.loads(proc.devices_report({"sglang::scheduler": f"{dev}/nvidia2"}))
    assert report["opened"] == {"sglang::scheduler": f"{dev}/nvidia2"}
    expected = {f"{dev}/nvidia{m}": "ok" for m in range(4)}
    if os.geteuid() != 0:  # root opens a mode-0 file anyway
        expected[f"{dev}/nvidia3"] = "EACCES"
    assert report["openable"] == expected
