"""blackwell.sglang.gpu_facts (module_utils/sglang_gpu_facts.py): parsing of nvidia-smi and driver outputs, sysfs/dev
scans, and the module end to end.

The samples under tests/fixtures/nvidia_outputs/ follow real outputs (see its README). The end-to-end tests run
the module's main() with a fake nvidia-smi on PATH and the module's host paths pointed at fixture trees.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import stat
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_gpu_facts as gpu_facts
from hypothesis import example, given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests/fixtures/nvidia_outputs"
SIMHOST_SMI = REPO / "tests/fixtures/simhost/image/rootfs/usr/bin/nvidia-smi"

_spec = importlib.util.spec_from_file_location(
    "gpu_facts", REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/gpu_facts.py")
gpu_facts_module: ModuleType = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(gpu_facts_module)  # type: ignore[union-attr]

B200_BUS = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
            "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]


def sample(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def all_pairs(n: int, value: str) -> dict[str, str]:
    return {f"{i},{j}": value for i in range(n) for j in range(i + 1, n)}


# --- nvidia-smi --query-gpu -----------------------------------------------------------------------------

def test_query_gpu_b200() -> None:
    gpus = gpu_facts.parse_query_gpu(sample("b200_hgx_query_gpu.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert [g["bus_id"] for g in gpus] == B200_BUS
    assert {(g["name"], g["compute_capability"], g["memory_mib"]) for g in gpus} == {("NVIDIA B200", "10.0", 183359)}
    assert all(re.fullmatch(r"GPU-[0-9a-f-]{36}", g["uuid"]) for g in gpus)


def test_query_gpu_gb10_unified_memory_is_null() -> None:
    (gpu,) = gpu_facts.parse_query_gpu(sample("gb10_query_gpu.csv"))
    assert gpu["memory_mib"] is None
    assert (gpu["bus_id"], gpu["name"], gpu["compute_capability"]) == ("000f:01:00.0", "NVIDIA GB10", "12.1")


def test_query_gpu_reference_host() -> None:
    gpus = gpu_facts.parse_query_gpu(sample("rtxpro6000_pcie_query_gpu.csv"))
    assert len(gpus) == 8 and gpus[7]["bus_id"] == "0000:e1:00.0"
    assert {(g["name"], g["compute_capability"], g["memory_mib"]) for g in gpus} == {
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887)}


def test_query_gpu_odd_lines() -> None:
    text = ("index, uuid, pci.bus_id, name, compute_cap, memory.total [MiB], persistence_mode\n"  # a header: skipped
            "1, GPU-b, 00000001:8A:00.0, Odd, Name, With Commas, 9.0, [Not Supported], Disabled\n"
            "\n"
            "0, [N/A], 00000000:18:00.0, NVIDIA H100 80GB HBM3, 9.0, 81559 MiB, [N/A]\n"
            "Unable to determine the device handle for GPU0000:19:00.0: Unknown Error\n")
    assert gpu_facts.parse_query_gpu(text) == [
        {"index": 0, "uuid": None, "bus_id": "0000:18:00.0", "name": "NVIDIA H100 80GB HBM3",
         "compute_capability": "9.0", "memory_mib": 81559, "persistence": None},
        {"index": 1, "uuid": "GPU-b", "bus_id": "0001:8a:00.0", "name": "Odd, Name, With Commas",
         "compute_capability": "9.0", "memory_mib": None, "persistence": False},
    ]


@pytest.mark.parametrize(("raw", "bus"), [
    ("00000000:18:00.0", "0000:18:00.0"), ("0000000F:01:00.0", "000f:01:00.0"), ("0000:AB:00.1", "0000:ab:00.1"),
    ("18:00.0", "18:00.0"),
])
def test_bus_id_normalised(raw: str, bus: str) -> None:
    assert gpu_facts.normalize_bus_id(raw) == bus


def test_versions() -> None:
    assert gpu_facts.parse_versions(sample("version.txt")) == ("580.95.05", "13.0")
    header = "| NVIDIA-SMI 570.86.15    Driver Version: 570.86.15      CUDA Version: 12.8     |\n"
    assert gpu_facts.parse_versions(header) == ("570.86.15", "12.8")
    assert gpu_facts.parse_versions(sample("no_driver.txt")) == (None, None)


# --- nvidia-smi topo -m / topo -p2p r -----------------------------------------------------------------------

def test_topo_b200_nvswitch_with_nics() -> None:
    matrix = gpu_facts.parse_topo_matrix(sample("b200_hgx_topo_m.txt"))
    assert matrix["columns"] == [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(10)]
    assert gpu_facts.gpu_pairs(matrix) == all_pairs(8, "NV18")
    assert matrix["rows"]["GPU3"]["NIC3"] == "PIX" and matrix["rows"]["NIC4"]["GPU4"] == "PIX"
    assert matrix["rows"]["NIC9"]["NIC9"] == "X" and matrix["rows"]["GPU0"]["NIC4"] == "SYS"
    assert matrix["affinity"]["GPU0"] == {"CPU Affinity": "0-55,112-167", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}
    assert matrix["affinity"]["GPU7"]["CPU Affinity"] == "56-111,168-223"
    assert matrix["affinity"]["NIC0"] == {"CPU Affinity": None, "NUMA Affinity": None, "GPU NUMA ID": None}


def test_topo_reference_host_pcie() -> None:
    links = gpu_facts.gpu_pairs(gpu_facts.parse_topo_matrix(sample("rtxpro6000_pcie_topo_m.txt")))
    assert len(links) == 28
    assert {k: links[k] for k in ("0,1", "2,3", "4,5", "6,7", "0,2", "1,3", "4,7", "0,4", "3,7")} == {
        "0,1": "PIX", "2,3": "PHB", "4,5": "PXB", "6,7": "PIX", "0,2": "NODE", "1,3": "NODE", "4,7": "NODE",
        "0,4": "SYS", "3,7": "SYS"}
    assert set(links.values()) == {"PIX", "PXB", "PHB", "NODE", "SYS"}


def test_topo_two_gpus_and_one_gpu() -> None:
    assert gpu_facts.gpu_pairs(gpu_facts.parse_topo_matrix(sample("two_gpu_phb_topo_m.txt"))) == {"0,1": "PHB"}
    single = gpu_facts.parse_topo_matrix(sample("gb10_topo_m.txt"))
    assert single["columns"] == ["GPU0"] and single["rows"] == {"GPU0": {"GPU0": "X"}}
    assert single["affinity"]["GPU0"] == {"CPU Affinity": "0-19", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}
    assert gpu_facts.gpu_pairs(single) == {}


def test_topo_pasted_with_spaces() -> None:
    """Copied from a terminal the tabs become spaces (as in most issue threads); the device cells still parse."""
    text = sample("b200_hgx_topo_m.txt").replace("\x1b[4m", "").replace("\x1b[0m", "").expandtabs(8)
    matrix = gpu_facts.parse_topo_matrix(text)
    assert gpu_facts.gpu_pairs(matrix) == all_pairs(8, "NV18")
    assert matrix["affinity"]["GPU5"] == {"CPU Affinity": "56-111,168-223", "NUMA Affinity": "1", "GPU NUMA ID": "N/A"}


def test_topo_stops_at_the_legend_and_fills_short_rows() -> None:
    both = sample("rtxpro6000_pcie_topo_m.txt") + sample("rtxpro6000_pcie_topo_p2p_r.txt")
    assert gpu_facts.gpu_pairs(gpu_facts.parse_topo_matrix(both))["0,1"] == "PIX"  # not the OK of the p2p matrix
    short = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \nGPU1\tPIX\t X \tSYS\nGPU2\tSYS\tSYS\t X \n"
    assert gpu_facts.gpu_pairs(gpu_facts.parse_topo_matrix(short)) == {"0,1": "PIX", "0,2": "SYS", "1,2": "SYS"}
    headless = "".join(sample("two_gpu_phb_topo_m.txt").splitlines(keepends=True)[1:])
    assert gpu_facts.parse_topo_matrix(headless) == {"columns": [], "rows": {}, "affinity": {}}


def test_p2p() -> None:
    assert gpu_facts.parse_p2p(sample("b200_hgx_topo_p2p_r.txt")) == all_pairs(8, "OK")
    assert gpu_facts.parse_p2p(sample("two_gpu_phb_topo_p2p_r.txt")) == {"0,1": "GNS"}
    pro = gpu_facts.parse_p2p(sample("rtxpro6000_pcie_topo_p2p_r.txt"))
    assert (pro["0,1"], pro["2,3"], pro["4,7"], pro["0,4"], pro["3,7"]) == ("OK", "OK", "OK", "CNS", "CNS")
    assert gpu_facts.parse_p2p(sample("no_driver.txt")) == {}


TOPO_WORDS = ["GPU0", "GPU1", "GPU12", "NIC0", "mlx5_0", "X", " X ", "NV18", "SYS", "PIX", "OK", "CPU Affinity",
              "NUMA Affinity", "GPU NUMA ID", "N/A", "Legend:", "0-23", "\x1b[4m", "\x1b[0m", "\x1b", ":", "9"]


@given(st.text() | st.lists(st.sampled_from(TOPO_WORDS) | st.sampled_from(["\t", "\t\t", " ", "\n", "\r\n"]),
                            max_size=80).map("".join))
@example("\tGPU0\tGPU1\nGPU0\nGPU1\t X \n")
@example("GPU0 GPU0\nGPU0 X\n")
def test_topo_never_raises(text: str) -> None:
    matrix = gpu_facts.parse_topo_matrix(text)
    pairs = gpu_facts.gpu_pairs(matrix)
    assert all(re.fullmatch(r"\d+,\d+", key) and int(key.split(",")[0]) < int(key.split(",")[1]) for key in pairs)
    assert set(matrix["rows"]) <= set(matrix["columns"])
    gpu_facts.parse_p2p(text)


LINKS = ["PIX", "PXB", "PHB", "NODE", "SYS", "NV2", "NV12", "NV18"]


@st.composite
def topology(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str], list[str], bool]:
    """A symmetric GPU/NIC matrix: (GPU links, GPU-NIC links, labels, ANSI header)."""
    ngpu, nnic = draw(st.integers(1, 8)), draw(st.integers(0, 4))
    labels = [f"GPU{i}" for i in range(ngpu)] + [f"NIC{i}" for i in range(nnic)]
    cells = {(a, b): draw(st.sampled_from(LINKS if a.startswith("GPU") and b.startswith("GPU") else LINKS[:5]))
             for i, a in enumerate(labels) for b in labels[i + 1:]}
    links = {f"{a[3:]},{b[3:]}": v for (a, b), v in cells.items() if a.startswith("GPU") and b.startswith("GPU")}
    flat = {f"{a}|{b}": v for (a, b), v in cells.items()} | {f"{b}|{a}": v for (a, b), v in cells.items()}
    return links, flat, labels, draw(st.booleans())


def render_topo(flat: dict[str, str], labels: list[str], ansi: bool) -> str:
    """What nvidia-smi topo -m prints for this matrix."""
    head = "\t".join(labels) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    lines = ["\t" + ("\x1b[4m" + head + "\x1b[0m" if ansi else head)]
    for a in labels:
        row = [a] + [" X " if a == b else flat[f"{a}|{b}"] for b in labels]
        lines.append("\t".join(row + (["0-15", "0", "", "N/A"] if a.startswith("GPU") else [])))
    return "\n".join(lines) + "\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"


@given(topology())
def test_topo_round_trip(case: tuple[dict[str, str], dict[str, str], list[str], bool]) -> None:
    links, flat, labels, ansi = case
    matrix = gpu_facts.parse_topo_matrix(render_topo(flat, labels, ansi))
    assert matrix["columns"] == labels
    assert gpu_facts.gpu_pairs(matrix) == links
    nics = [label for label in labels if label.startswith("NIC")]
    assert all(matrix["rows"][n][g] == flat[f"{n}|{g}"] for n in nics for g in labels if g != n)


# --- /proc, sysfs, /dev, os-release, python ---------------------------------------------------------------

def test_information() -> None:
    info = gpu_facts.parse_information(sample("b200_hgx_information_gpu0.txt"))
    uuid = gpu_facts.parse_query_gpu(sample("b200_hgx_query_gpu.csv"))[0]["uuid"]
    assert info == {"minor": 0, "uuid": uuid, "bus": "0000:1b:00.0"}
    assert gpu_facts.parse_information("Model: \t\t NVIDIA B200\nDevice Minor: \t ?\n") == {
        "minor": None, "uuid": None, "bus": None}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def pci_device(root: Path, bdf: str, vendor: str, klass: str, group_type: str | None = None) -> None:
    """A /sys/bus/pci/devices/<bdf> directory; group_type '' gives an iommu_group without a type file."""
    write(root / bdf / "vendor", vendor + "\n")
    write(root / bdf / "class", klass + "\n")
    if group_type is not None:
        (root / bdf / "iommu_group").mkdir()
        if group_type:
            write(root / bdf / "iommu_group" / "type", group_type + "\n")


@pytest.mark.parametrize(("group_type", "mode"), [
    (None, "off"), ("identity", "passthrough"), ("DMA", "translated"), ("DMA-FQ", "translated"), ("", "translated"),
])
def test_iommu_mode(tmp_path: Path, group_type: str | None, mode: str) -> None:
    pci_device(tmp_path, "0000:18:00.0", "0x10de", "0x030200", group_type)
    assert gpu_facts.iommu_mode(str(tmp_path / "0000:18:00.0")) == mode
    assert gpu_facts.iommu_mode(str(tmp_path / "0000:19:00.0")) is None


def test_combined_iommu() -> None:
    assert gpu_facts.combined_iommu(["off", "translated", "passthrough"]) == "translated"
    assert gpu_facts.combined_iommu(["passthrough", None, "off"]) == "passthrough"
    assert gpu_facts.combined_iommu(["off"]) == "off"
    assert gpu_facts.combined_iommu([None]) is None and gpu_facts.combined_iommu([]) is None


def test_pci_scan(tmp_path: Path) -> None:
    pci_device(tmp_path, "0000:07:00.0", "0x10de", "0x068000")  # NVSwitch bridge
    pci_device(tmp_path, "0000:05:00.0", "0x10de", "0x068001")
    pci_device(tmp_path, "0000:18:00.0", "0x10de", "0x030200")  # 3D controller (GPU)
    pci_device(tmp_path, "0000:18:00.1", "0x10de", "0x040300")  # its audio function
    pci_device(tmp_path, "0000:65:00.0", "0x10de", "0x030000")  # a GPU that is a VGA controller
    pci_device(tmp_path, "0000:0c:00.0", "0x15b3", "0x068000")  # another vendor's bridge of the same class
    write(tmp_path / "0000:00:00.0" / "vendor", "0x10de\n")  # no class file
    assert gpu_facts.pci_functions(str(tmp_path), "0x10de", "0x0680") == ["0000:05:00.0", "0000:07:00.0"]
    assert gpu_facts.pci_functions(str(tmp_path), "0x10de", "0x03") == ["0000:18:00.0", "0000:65:00.0"]
    assert gpu_facts.pci_functions(str(tmp_path / "absent"), "0x10de", "0x0680") == []


def test_device_nodes(tmp_path: Path) -> None:
    for name in ("nvidia-nvswitch10", "nvidia-nvswitch2", "nvidia-nvswitch0", "nvidia-nvswitchctl", "nvidia0",
                 "infiniband/uverbs10", "infiniband/uverbs2", "infiniband/rdma_cm", "nvidia-caps-imex-channels/channel1",
                 "nvidia-caps-imex-channels/channel0"):
        write(tmp_path / name, "")
    assert gpu_facts.device_nodes(str(tmp_path)) == {
        "nvswitch_devices": [str(tmp_path / f"nvidia-nvswitch{i}") for i in (0, 2, 10)],
        "infiniband_devices": [str(tmp_path / "infiniband" / n) for n in ("rdma_cm", "uverbs2", "uverbs10")],
        "imex_channels": [str(tmp_path / "nvidia-caps-imex-channels" / f"channel{i}") for i in (0, 1)],
    }
    assert gpu_facts.device_nodes(str(tmp_path / "absent")) == {
        "nvswitch_devices": [], "infiniband_devices": [], "imex_channels": []}


def test_os_release() -> None:
    debian = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\nID=debian\n'
    assert gpu_facts.parse_os_release(debian) == {"id": "debian", "version_id": "12", "codename": "bookworm"}
    ubuntu = "# comment=x\nID=ubuntu\nVERSION_ID='24.04'\nVERSION_CODENAME=noble\n"
    assert gpu_facts.parse_os_release(ubuntu) == {"id": "ubuntu", "version_id": "24.04", "codename": "noble"}
    assert gpu_facts.parse_os_release("ID=arch\n") == {"id": "arch", "version_id": None, "codename": None}


def test_python_probe_output() -> None:
    assert gpu_facts.parse_python_probe("3.11.2\nTrue\n") == ("3.11.2", True)
    assert gpu_facts.parse_python_probe("3.13.0rc1\nFalse\n") == ("3.13.0rc1", False)
    assert gpu_facts.parse_python_probe("Traceback (most recent call last):\n") == (None, False)


# --- the module end to end -------------------------------------------------------------------------------

def executable(path: Path, text: str) -> Path:
    write(path, text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_smi(bindir: Path, outputs: dict[str, str], log: Path, rc_other: int = 2) -> Path:
    """An nvidia-smi that prints the sample for its exact argument line and logs each call."""
    cases = "".join(f'  "{args}") cat "{FIX / name}" ;;\n' for args, name in outputs.items())
    return executable(bindir / "nvidia-smi", f'#!/bin/sh\nPATH=/usr/bin:/bin\necho "$*" >> "{log}"\ncase "$*" in\n{cases}'
                      f'  *) cat "{FIX / "no_driver.txt"}"; exit {rc_other} ;;\nesac\n')


QUERY = "--query-gpu=index,uuid,pci.bus_id,name,compute_cap,memory.total,persistence_mode --format=csv,noheader,nounits"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake B200 HGX host: sysfs, /proc/driver/nvidia, /dev, os-release; PATH holds only tmp_path/bin."""
    pci = tmp_path / "sys"
    for bdf in B200_BUS:
        pci_device(pci, bdf, "0x10de", "0x030200", "identity")
    for bdf in ("0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"):
        pci_device(pci, bdf, "0x10de", "0x068000")
    pci_device(pci, "0000:0c:00.0", "0x15b3", "0x020700")
    proc = tmp_path / "proc"
    write(proc / B200_BUS[0] / "information", sample("b200_hgx_information_gpu0.txt"))
    for i, bdf in enumerate(B200_BUS[1:7], start=1):
        write(proc / bdf / "information", f"Model: \t\t NVIDIA B200\nBus Location: \t {bdf}\nDevice Minor: \t {i}\n")
    dev = tmp_path / "dev"
    for name in ("nvidia-nvswitch0", "nvidia-nvswitch1", "nvidia-nvswitchctl", "infiniband/uverbs0",
                 "infiniband/uverbs1", "nvidia-caps-imex-channels/channel0"):
        write(dev / name, "")
    write(tmp_path / "os-release", 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n')
    monkeypatch.setattr(gpu_facts, "PCI_DEVICES", str(pci))
    monkeypatch.setattr(gpu_facts, "PROC_NVIDIA_GPUS", str(proc))
    monkeypatch.setattr(gpu_facts, "DEV", str(dev))
    monkeypatch.setattr(gpu_facts, "OS_RELEASE", (str(tmp_path / "absent"), str(tmp_path / "os-release")))
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


def run_module(capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit) as exit_:
        gpu_facts_module.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_.value.code == 0, result
    assert result["changed"] is False
    return result["ansible_facts"]["nvidia_gpu_facts"]


def this_python() -> dict[str, Any]:
    include = sysconfig.get_paths()["include"]
    return {"path": sys.executable, "version": platform.python_version(),
            "headers": os.path.isfile(os.path.join(include, "Python.h"))}


def test_module_b200_host(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = host / "calls.log"
    fake_smi(host / "bin", {QUERY: "b200_hgx_query_gpu.csv", "--version": "version.txt",
                            "topo -m": "b200_hgx_topo_m.txt", "topo -p2p r": "b200_hgx_topo_p2p_r.txt"}, log)
    cc = executable(host / "bin" / "gcc", "#!/bin/sh\n")
    facts = run_module(capsys, python=sys.executable)
    uuids = [g["uuid"] for g in gpu_facts.parse_query_gpu(sample("b200_hgx_query_gpu.csv"))]
    assert facts == {
        "schema": 1,
        "driver_loaded": True,
        "driver_version": "580.95.05",
        "cuda_version": "13.0",
        "gpus": [{"index": i, "uuid": uuids[i], "bus_id": B200_BUS[i], "minor": i if i < 7 else None,
                  "name": "NVIDIA B200", "compute_capability": "10.0", "memory_mib": 183359, "persistence": True}
                 for i in range(8)],
        "gpu_count": 8,
        "compute_capabilities": ["10.0"],
        "topology": {"links": all_pairs(8, "NV18"), "p2p_read": all_pairs(8, "OK"), "nvlink": True},
        "iommu": "passthrough",
        "nvswitch_pci": ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"],
        "nvswitch_devices": [str(host / "dev" / "nvidia-nvswitch0"), str(host / "dev" / "nvidia-nvswitch1")],
        "infiniband_devices": [str(host / "dev" / "infiniband" / f"uverbs{i}") for i in (0, 1)],
        "imex_channels": [str(host / "dev" / "nvidia-caps-imex-channels" / "channel0")],
        "os": {"id": "debian", "version_id": "12", "codename": "bookworm"},
        "python": this_python(),
        "compilers": {"cc": str(cc)},
    }
    assert log.read_text().splitlines() == [QUERY, "--version", "topo -m", "topo -p2p r"]


def test_module_without_driver_still_scans_pci(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """nvidia-smi exits 9: no GPUs and no topology, but the NVSwitch functions and the IOMMU mode come from sysfs."""
    log = host / "calls.log"
    fake_smi(host / "bin", {}, log, rc_other=9)
    pci_device(host / "sys", "0000:65:00.0", "0x10de", "0x030000", "DMA-FQ")  # a VGA-class GPU behind a translating IOMMU
    python3 = executable(host / "bin" / "python3", "#!/bin/sh\nprintf '3.12.3\\nFalse\\n'\n")
    cc = executable(host / "bin" / "cc", "#!/bin/sh\n")
    executable(host / "bin" / "gcc", "#!/bin/sh\n")
    facts = run_module(capsys)
    assert (facts["driver_loaded"], facts["driver_version"], facts["cuda_version"]) == (False, None, None)
    assert (facts["gpus"], facts["gpu_count"], facts["compute_capabilities"]) == ([], 0, [])
    assert facts["topology"] == {"links": {}, "p2p_read": {}, "nvlink": False}
    assert facts["nvswitch_pci"] == ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
    assert facts["iommu"] == "translated"
    assert facts["python"] == {"path": str(python3), "version": "3.12.3", "headers": False}
    assert facts["compilers"] == {"cc": str(cc)}
    assert log.read_text().splitlines() == [QUERY]


def test_module_without_nvidia_smi_python_or_compiler(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bdf in B200_BUS:
        (host / "sys" / bdf / "iommu_group" / "type").unlink()
        (host / "sys" / bdf / "iommu_group").rmdir()
    facts = run_module(capsys, python=str(host / "venv" / "bin" / "python3"), nvidia_smi="nvidia-smi")
    assert facts["driver_loaded"] is False and facts["gpus"] == []
    assert facts["iommu"] == "off"
    assert facts["python"] is None and facts["compilers"] == {"cc": None}
    assert set(facts) == {"schema", "driver_loaded", "driver_version", "cuda_version", "gpus", "gpu_count",
                          "compute_capabilities", "topology", "iommu", "nvswitch_pci", "nvswitch_devices",
                          "infiniband_devices", "imex_channels", "os", "python", "compilers"}


def test_module_gb10_in_check_mode(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GB10: memory [N/A] is null; nvidia-smi without --version falls back to the summary header."""
    log = host / "calls.log"
    write(host / "summary.txt", "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0   |\n")
    smi = fake_smi(host / "bin", {QUERY: "gb10_query_gpu.csv", "topo -m": "gb10_topo_m.txt"}, log)
    smi.write_text(smi.read_text().replace("case", f'[ -z "$*" ] && exec cat "{host / "summary.txt"}"\ncase', 1))
    facts = run_module(capsys, _ansible_check_mode=True, nvidia_smi=str(smi))
    assert facts["gpus"] == [{"index": 0, "uuid": facts["gpus"][0]["uuid"], "bus_id": "000f:01:00.0", "minor": None,
                              "name": "NVIDIA GB10", "compute_capability": "12.1", "memory_mib": None,
                              "persistence": True}]
    assert (facts["driver_version"], facts["cuda_version"], facts["compute_capabilities"]) == ("580.95.05", "13.0", ["12.1"])
    assert facts["topology"] == {"links": {}, "p2p_read": {}, "nvlink": False}
    assert log.read_text().splitlines() == [QUERY, "--version", "", "topo -m", "topo -p2p r"]


PROFILES = sorted((REPO / "tests/fixtures/simhost/image/rootfs/etc/fake-nvidia/profiles").glob("*.json"))


@pytest.mark.parametrize("profile", PROFILES, ids=[p.stem for p in PROFILES])
def test_module_reads_the_simulated_hosts_nvidia_smi(profile: Path, host: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated host's nvidia-smi, in each of its hardware profiles, and this module agree."""
    data = json.loads(profile.read_text(encoding="utf-8"))
    gpus = sorted(({**data.get("gpu_defaults", {}), **g} for g in data["gpus"]), key=lambda g: g["bus_id"])
    conf, dev, proc = host / "conf", host / "dev", host / "proc"
    write(conf / "profile", profile.stem + "\n")
    write(dev / "nvidiactl", "")
    for gpu in gpus:
        write(dev / f"nvidia{gpu['minor']}", "")
        write(proc / gpu["bus_id"] / "information", f"Bus Location: \t {gpu['bus_id']}\nDevice Minor: \t {gpu['minor']}\n")
    for key, value in {"FAKE_NVIDIA_DEV_DIR": dev, "FAKE_NVIDIA_CONF_DIR": conf, "FAKE_NVIDIA_PROC": host / "no-proc",
                       "FAKE_NVIDIA_RUN_DIR": host / "run"}.items():
        monkeypatch.setenv(key, str(value))
    (host / "no-proc").mkdir()
    for entry in profile.parent.iterdir():
        write(conf / "profiles" / entry.name, entry.read_text(encoding="utf-8"))
    facts = run_module(capsys, nvidia_smi=str(SIMHOST_SMI), python=sys.executable)
    assert facts["driver_loaded"] is True
    assert [(g["index"], g["bus_id"], g["minor"], g["name"], g["compute_capability"], g["memory_mib"]) for g in facts["gpus"]] == [
        (i, g["bus_id"], g["minor"], g["name"], g["compute_cap"], g["memory_mib"]) for i, g in enumerate(gpus)]
    assert (facts["driver_version"], facts["cuda_version"]) == ("580.95.05", "13.0")
    links, p2p = data["links"], data["p2p_read"]
    topology = facts["topology"]
    assert set(topology["links"]) == set(topology["p2p_read"]) == set(all_pairs(len(gpus), ""))
    assert topology["nvlink"] is bool(re.fullmatch(r"NV\d+", links["default"]))
    if links["default"] != "numa" and not links.get("pairs"):
        assert set(topology["links"].values()) <= {links["default"]}
    if not p2p.get("pairs"):
        assert set(topology["p2p_read"].values()) <= {p2p["default"]}
