"""blackwell.sglang.gpu_health: the parsers and checks on real-format samples, hypothesis properties (N/A never fails,
the current PCIe generation is never compared, the parsers never raise and round-trip), and the module end to end
against the simulated host's nvidia-smi in every hardware profile, with faults.json, a journal and a dcgmi.

The samples under tests/fixtures/nvidia_outputs/ follow real outputs (see its README).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests/fixtures/nvidia_outputs"
ROOTFS = REPO / "tests/fixtures/simhost/image/rootfs"
SMI = ROOTFS / "usr/bin/nvidia-smi"
PROFILES = sorted((ROOTFS / "etc/fake-nvidia/profiles").glob("*.json"))

_spec = importlib.util.spec_from_file_location(
    "gpu_health", REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/gpu_health.py")
gh: ModuleType = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["gpu_health"] = gh
_spec.loader.exec_module(gh)  # type: ignore[union-attr]

FATAL: list[int] = yaml.safe_load((REPO / "roles/gpu_health/defaults/main.yml").read_text())["gpu_health_fatal_xids"]
FIELDS = [*gh.IDENTITY, *(f for check in gh.CHECK_FIELDS.values() for f in check)]
ALL_CHECKS = set(gh.REQUIRED_FIELDS)
CAT = shutil.which("cat")


def sample(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def gpus_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": int(r["index"]), "uuid": r["uuid"], "bus_id": r["pci.bus_id"]} for r in rows]


def findings(text: str, require_persistence: bool = True) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(index, check) of the problems and warnings of every GPU of a query sample."""
    rows = gh.parse_query(text, FIELDS)
    problems, warnings = [], []
    for row, gpu in zip(rows, gpus_of(rows), strict=True):
        p, w = gh.gpu_findings(row, gpu, require_persistence, ALL_CHECKS)
        problems += [(f.gpu["index"], f.check) for f in p]
        warnings += [(f.gpu["index"], f.check) for f in w]
    return problems, warnings


# --- the fatal set ---------------------------------------------------------------------------------------

def test_fatal_xids_are_hardware_faults_not_application_faults() -> None:
    assert {48, 64, 74, 79, 95, 119, 120, 154} <= set(FATAL)
    assert not {13, 31, 43, 45, 68, 63, 92, 94} & set(FATAL), "application and informational Xids only warn"
    assert FATAL == sorted(set(FATAL))


# --- nvidia-smi --query-gpu ------------------------------------------------------------------------------

def test_h200_capture_is_healthy() -> None:
    (row,) = gh.parse_query(sample("health_h200_query_gpu.csv"), FIELDS)
    assert row["pci.bus_id"] == "0000:83:00.0" and row["retired_pages.pending"] == "[N/A]"
    assert findings(sample("health_h200_query_gpu.csv")) == ([], [])


def test_l40s_persistence_off_is_a_problem_or_a_warning() -> None:
    assert findings(sample("health_l40s_query_gpu.csv")) == ([(0, "persistence")], [])
    assert findings(sample("health_l40s_query_gpu.csv"), require_persistence=False) == ([], [(0, "persistence")])


def test_degraded_host() -> None:
    problems, warnings = findings(sample("health_degraded_query_gpu.csv"))
    assert problems == [(0, "pcie_width"), (1, "pcie_gen"), (2, "ecc"), (2, "remapped_rows"),
                        (3, "remapped_rows"), (3, "clocks"), (3, "persistence"), (3, "recovery_action")]
    assert warnings == [(4, "pcie_gen")], "a Gen5 GPU behind a Gen4 root port is a platform limit, not a fault"
    assert gh.unreachable_gpus(sample("health_degraded_query_gpu.csv")) == [("0000:a1:00.0", "Unknown Error")]


def test_degraded_details_name_what_was_seen() -> None:
    rows = gh.parse_query(sample("health_degraded_query_gpu.csv"), FIELDS)
    gpus = gpus_of(rows)
    details = {}
    for row, gpu in zip(rows, gpus, strict=True):
        for f in gh.gpu_findings(row, gpu, True, ALL_CHECKS)[0]:
            details[(gpu["index"], f.check)] = f.as_dict()
    assert details[(0, "pcie_width")]["detail"] == "PCIe link is x8, the link's maximum is x16"
    assert details[(0, "pcie_width")]["message"].startswith("GPU 0 (0000:01:00.0) pcie_width: PCIe link is x8")
    assert "Gen4" in details[(1, "pcie_gen")]["detail"] and "Gen5" in details[(1, "pcie_gen")]["detail"]
    assert "2 uncorrectable" in details[(2, "ecc")]["detail"]
    assert "failure" in details[(3, "remapped_rows")]["detail"], "a failed remap outweighs a pending one"
    assert "HW slowdown" in details[(3, "clocks")]["detail"] and "thermal" in details[(3, "clocks")]["detail"]
    assert details[(3, "recovery_action")]["fix"].startswith("reset the GPU")


def test_idle_link_at_gen1_is_not_flagged() -> None:
    """The current generation drops at idle by design (the reference host idles at Gen1 on a Gen5 x16 link)."""
    row = dict(zip(FIELDS, sample("health_h200_query_gpu.csv").strip().split(", "), strict=True))
    row["pcie.link.gen.gpucurrent"] = "1"
    assert gh.gpu_findings(row, {"index": 0}, True, ALL_CHECKS) == ([], [])


def test_odd_lines_are_skipped() -> None:
    text = ", ".join(FIELDS) + "\n\nNo devices were found\n" + sample("health_h200_query_gpu.csv").replace("0, GPU", "x, GPU")
    assert gh.parse_query(text, FIELDS) == []


@pytest.mark.parametrize(("cell", "expected"), [
    ("[N/A]", None), ("N/A", None), ("[Not Supported]", None), ("[Unknown Error]", None), ("", None), (" 16 ", "16"),
])
def test_missing_values(cell: str, expected: str | None) -> None:
    assert gh.value(cell) == expected


def test_numbers_and_flags() -> None:
    assert [gh.as_int(v) for v in ("16", "08", "0x10", "[N/A]", "x16", "1.5")] == [16, 8, 16, None, None, None]
    assert [gh.is_yes(v) for v in ("Yes", "1", "Active", "Enabled", "No", "Not Active", "[N/A]", None)] == [
        True, True, True, True, False, False, False, False]


MISSING = st.sampled_from(["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[GPU requires reset]", ""])


@given(st.lists(MISSING, min_size=len(FIELDS) - 3, max_size=len(FIELDS) - 3), st.booleans())
def test_unavailable_values_never_fail(cells: list[str], persistence: bool) -> None:
    row = dict(zip(FIELDS, ["0", "GPU-x", "0000:01:00.0", *cells], strict=True))
    assert gh.gpu_findings(row, {"index": 0}, persistence, ALL_CHECKS) == ([], [])


@given(st.integers(1, 6), st.integers(1, 6))
def test_current_generation_is_never_compared(current: int, gen: int) -> None:
    row = dict(zip(FIELDS, sample("health_h200_query_gpu.csv").strip().split(", "), strict=True))
    row.update({"pcie.link.gen.gpucurrent": str(current), "pcie.link.gen.max": str(gen), "pcie.link.gen.gpumax": str(gen)})
    assert gh.gpu_findings(row, {"index": 0}, True, ALL_CHECKS) == ([], [])


CELL = st.text(st.characters(blacklist_characters=",\r\n", blacklist_categories=("Cs", "Zl", "Zp")), max_size=12)


@given(st.lists(st.tuples(st.integers(0, 63), st.lists(CELL, min_size=len(FIELDS) - 1, max_size=len(FIELDS) - 1)),
                max_size=4, unique_by=lambda row: row[0]))
def test_query_round_trip(rows: list[tuple[int, list[str]]]) -> None:
    text = "".join(", ".join([str(index), *cells]) + "\n" for index, cells in rows)
    parsed = gh.parse_query(text, FIELDS)
    assert [int(r["index"]) for r in parsed] == sorted(index for index, _ in rows)
    for row in parsed:
        cells = dict(rows)[int(row["index"])]
        expected = dict(zip(FIELDS[1:], (c.strip() for c in cells), strict=True))
        bus = expected.pop("pci.bus_id")
        assert row["pci.bus_id"] == (gh.normalize_bus_id(bus) if gh.value(bus) else None)
        assert {k: v for k, v in row.items() if k not in ("index", "pci.bus_id")} == expected


@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    gh.parse_query(text, FIELDS)
    gh.unreachable_gpus(text)
    gh.parse_xids(text)
    gh.parse_dcgm_diag(text)


# --- Xid reports ----------------------------------------------------------------------------------------

GPUS = [{"index": i, "uuid": f"GPU-{i}", "bus_id": bus} for i, bus in
        enumerate(["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"])]


def test_xid_reports_of_the_journal() -> None:
    events = gh.parse_xids(sample("kernel_xid_journal.txt"))
    assert [(e.bus, e.xid) for e in events] == [
        ("0000:01:00", 62), ("0000:01:00", 154), ("0000:01:00", 45), ("0000:21:00", 13), ("0000:21:00", 13),
        ("0000:41:00", 63), ("0000:c6:00", 79), ("0000:61:00", 154)]
    assert events[1].message == "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    assert gh.recovery_target(events[1].message) == "GPU Reset Required"
    assert gh.recovery_target(events[-1].message) == "None"


def test_xids_are_classified_per_gpu() -> None:
    problems, warnings = gh.xid_findings(gh.parse_xids(sample("kernel_xid_journal.txt")), GPUS, set(FATAL))
    assert [(f.gpu["index"], f.gpu["bus_id"], f.detail.split(" this boot")[0]) for f in problems] == [
        (0, "0000:01:00.0", "Xid 62 x1"), (0, "0000:01:00.0", "Xid 154 x1"), (None, "0000:c6:00", "Xid 79 x1")]
    assert [(f.gpu["index"], f.detail.split(" this boot")[0]) for f in warnings] == [
        (0, "Xid 45 x1"), (1, "Xid 13 x2"), (2, "Xid 63 x1"), (3, "Xid 154 x1")]
    fallen = problems[2].as_dict()
    assert "fell off the PCIe bus" in fallen["fix"] and "gpu_health_xid_since" in fallen["fix"]
    assert fallen["message"].startswith("PCI 0000:c6:00 xid: Xid 79 x1 this boot (PCI 0000:c6:00, a GPU nvidia-smi")
    assert "Out Of Range Address" not in warnings[1].detail, "the last report is shown"


@given(st.integers(0, 0xFFFF), st.integers(0, 255), st.integers(0, 31), st.integers(1, 999),
       st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=40), st.booleans())
def test_xid_line_round_trip(domain: int, bus: int, device: int, xid: int, message: str, upper: bool) -> None:
    address = f"{domain:04x}:{bus:02x}:{device:02x}"
    line = f"kernel: NVRM: Xid (PCI:{address.upper() if upper else address}): {xid}, {message}"
    (event,) = gh.parse_xids(line)
    assert (event.bus, event.xid, event.message) == (address, xid, message.strip())


# --- dcgmi diag -------------------------------------------------------------------------------------------

def dcgm(name: str) -> tuple[list[tuple[int | None, str]], list[tuple[int | None, str]]]:
    parsed = gh.parse_dcgm_diag(sample(name))
    assert parsed is not None and parsed[1] is None
    problems, warnings = gh.dcgm_findings(parsed[0], GPUS, 1)
    return [(f.gpu and f.gpu["index"], f.detail) for f in problems], [(f.gpu and f.gpu["index"], f.detail) for f in warnings]


def test_dcgm_pass() -> None:
    assert dcgm("dcgmi_diag_r1_pass.json") == ([], [])


def test_dcgm4_failure_and_configuration_warning() -> None:
    problems, warnings = dcgm("dcgmi_diag_r1_fail.json")
    assert problems == [(1, "dcgmi diag -r 1: software fail: GPU 1 had memory errors and row remappings are pending")]
    assert [(i, d.split(":")[1].strip()) for i, d in warnings] == [(0, "software fail")], "CONFIG severity only warns"


def test_dcgm3_layout() -> None:
    problems, warnings = dcgm("dcgmi_diag_r1_dcgm3.json")
    assert [i for i, _ in problems] == [2, 3] and warnings == []
    assert "pending retired page" in problems[0][1]


def test_dcgm_runtime_error_and_garbage() -> None:
    assert gh.parse_dcgm_diag('{"DCGM GPU Diagnostic": {"runtime_error": "Couldn\'t load the CUDA library"}}') == (
        [], "Couldn't load the CUDA library")
    assert gh.parse_dcgm_diag("Error: unable to establish a connection to the specified host: localhost") is None


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["DCGM Diagnostic", "test_categories", "tests", "results", "status", "name",
                                         "gpu_ids", "entity_id", "warnings", "error_severity", "warning", "x"]),
                        inner, max_size=4), max_leaves=20)


@given(JSON)
def test_dcgm_walk_never_raises(data: Any) -> None:
    results, _ = gh.walk_dcgm(data)
    gh.dcgm_findings(results, GPUS, 1)


# --- the module end to end -------------------------------------------------------------------------------

def executable(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class SimHost:
    """The simulated host's nvidia-smi on a temporary /dev, /etc/fake-nvidia and /proc; a journalctl that prints
    journal.txt and logs its arguments; optionally a dcgmi."""

    def __init__(self, root: Path, profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.conf, self.dev, self.proc, self.bin = root / "conf", root / "dev", root / "proc", root / "bin"
        for d in (self.conf / "profiles", self.dev, self.proc / "1", self.bin, root / "run"):
            d.mkdir(parents=True, exist_ok=True)
        for p in PROFILES:
            (self.conf / "profiles" / p.name).write_text(p.read_text())
        (self.conf / "profile").write_text(profile + "\n")
        (self.conf / "persistence_mode").write_text("Enabled\n")
        (self.dev / "nvidiactl").touch()
        data = json.loads((self.conf / "profiles" / f"{profile}.json").read_text())
        for gpu in data["gpus"]:
            (self.dev / f"nvidia{gpu['minor']}").touch()
        self.journal = root / "journal.txt"
        self.journal.write_text("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05\n")
        self.calls = root / "calls.log"
        for key, value in {"FAKE_NVIDIA_DEV_DIR": self.dev, "FAKE_NVIDIA_CONF_DIR": self.conf,
                           "FAKE_NVIDIA_PROC": self.proc, "FAKE_NVIDIA_RUN_DIR": root / "run"}.items():
            monkeypatch.setenv(key, str(value))
        monkeypatch.setenv("PATH", str(self.bin))
        self.smi = executable(self.bin / "nvidia-smi", f'#!/bin/sh\necho "nvidia-smi $*" >> "{self.calls}"\n'
                                                       f'exec {sys.executable} "{SMI}" "$@"\n')
        self.journalctl = executable(self.bin / "journalctl", f'#!/bin/sh\necho "journalctl $*" >> "{self.calls}"\n'
                                                              f'exec {CAT} "{self.journal}"\n')

    def faults(self, faults: dict[str, Any]) -> None:
        (self.conf / "faults.json").write_text(json.dumps({"gpus": faults}))

    def dcgmi(self, output: str, rc: int) -> Path:
        (self.root / "dcgmi.out").write_text(output)
        return executable(self.bin / "dcgmi", f'#!/bin/sh\necho "dcgmi $*" >> "{self.calls}"\n'
                                              f'{CAT} "{self.root / "dcgmi.out"}"\nexit {rc}\n')

    def run(self, capsys: pytest.CaptureFixture[str], expect_rc: int = 0, **args: Any) -> dict[str, Any]:
        args = {"fatal_xids": FATAL, "clock_resample_seconds": 0, "nvidia_smi": str(self.smi),
                "journalctl": str(self.journalctl), "dcgmi": str(self.bin / "dcgmi"), **args}
        with patch_module_args(args), pytest.raises(SystemExit) as exit_:
            gh.main()
        result = json.loads(capsys.readouterr().out)
        assert exit_.value.code == expect_rc, result
        assert result.get("changed") is False or expect_rc != 0
        return result

    def bus_of(self, index: int) -> str:
        data = json.loads((self.conf / "profiles" / f"{(self.conf / 'profile').read_text().strip()}.json").read_text())
        return sorted(g["bus_id"] for g in data["gpus"])[index]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimHost:
    return SimHost(tmp_path, "rtxpro6000-8", monkeypatch)


@pytest.mark.parametrize("profile", PROFILES, ids=[p.stem for p in PROFILES])
def test_every_simulated_profile_is_healthy_at_idle(profile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """No false alarm: idle links (Gen1 on the PCIe profiles), GB10's legacy C2C PCIe values, ECC [N/A]."""
    sim = SimHost(tmp_path, profile.stem, monkeypatch)
    result = sim.run(capsys)
    assert (result["healthy"], result["problems"], result["gpu_warnings"]) == (True, [], [])
    count = len(json.loads(profile.read_text())["gpus"])
    assert [g["index"] for g in result["gpus"]] == list(range(count))
    assert result["query_fields"] == FIELDS
    assert {"xid", "ecc", "remapped_rows", "clocks", "persistence", "recovery_action", "retired_pages"} <= set(result["checked"])
    skipped = {s["check"]: s["reason"] for s in result["not_checked"]}
    assert skipped["dcgm_diag"] == "dcgmi (DCGM) is not installed"
    if profile.stem == "gb10":
        assert "NVLink-C2C" in skipped["pcie_gen"] and "NVLink-C2C" in skipped["pcie_width"]
    else:
        assert {"pcie_gen", "pcie_width"} <= set(result["checked"])


def test_reference_host_idles_at_gen1(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    result = host.run(capsys)
    query = [c for c in host.calls.read_text().splitlines() if c.startswith("nvidia-smi --query-gpu=index,uuid")]
    assert len(query) == 1 and result["healthy"]
    out = subprocess.run([str(host.smi), "--query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True).stdout
    assert set(out.splitlines()) == {"1, 5, 16"}


def test_degraded_link_fails_naming_gpu_0(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.faults({"0": {"pcie.link.width.current": "8"}})
    result = host.run(capsys)
    assert result["healthy"] is False
    (problem,) = result["problems"]
    assert (problem["index"], problem["bus_id"], problem["check"]) == (0, "0000:01:00.0", "pcie_width")
    assert problem["detail"] == "PCIe link is x8, the link's maximum is x16"
    assert problem["uuid"] == result["gpus"][0]["uuid"]


def test_link_trained_below_the_gpu_generation_fails(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.faults({"3": {"pcie.link.gen.max": "3"}})
    (problem,) = host.run(capsys)["problems"]
    assert (problem["index"], problem["check"]) == (3, "pcie_gen")
    assert problem["detail"].startswith("PCIe link trains at most Gen3 (pcie.link.gen.max), the GPU supports Gen5")


def test_clock_slowdown_counts_only_when_it_persists(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.faults({"*": {"clocks_event_reasons.hw_thermal_slowdown": "Active"}})
    result = host.run(capsys)
    assert [(p["index"], p["check"]) for p in result["problems"]] == [(i, "clocks") for i in range(8)]
    queries = [c for c in host.calls.read_text().splitlines() if c.startswith("nvidia-smi --query-gpu")]
    assert len(queries) == 2 and queries[1].startswith("nvidia-smi --query-gpu=index,clocks_event_reasons.hw_slowdown")


def test_ecc_remap_and_recovery_faults(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.faults({"1": {"ecc.errors.uncorrected.volatile.total": 3}, "2": {"remapped_rows.pending": "Yes"},
                 "5": {"gpu_recovery_action": "Node Reboot Required", "persistence_mode": "Disabled"}})
    result = host.run(capsys)
    assert [(p["index"], p["check"]) for p in result["problems"]] == [
        (1, "ecc"), (2, "remapped_rows"), (5, "persistence"), (5, "recovery_action")]
    result = host.run(capsys, require_persistence=False, ignore=["ecc"])
    assert [(p["index"], p["check"]) for p in result["problems"]] == [(2, "remapped_rows"), (5, "recovery_action")]
    assert [(w["index"], w["check"]) for w in result["gpu_warnings"]] == [(5, "persistence")]
    assert {"check": "ecc", "reason": "in gpu_health_ignore"} in result["not_checked"] and "ecc" not in result["checked"]


def test_xid_79_fails_and_xid_13_only_warns(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    bus = host.bus_of(2).rsplit(".", 1)[0]
    host.journal.write_text(f"NVRM: Xid (PCI:{bus}): 13, pid=77, name=python3, Graphics Exception: ESR 0x0\n")
    result = host.run(capsys)
    assert result["healthy"] is True and result["problems"] == []
    assert [(w["index"], w["check"]) for w in result["gpu_warnings"]] == [(2, "xid")]
    with host.journal.open("a") as fh:
        fh.write(f"NVRM: Xid (PCI:{bus}): 79, pid=1, name=nvc:[driver], GPU has fallen off the bus.\n")
    result = host.run(capsys)
    (problem,) = result["problems"]
    assert (problem["index"], problem["check"]) == (2, "xid") and problem["detail"].startswith("Xid 79 x1 this boot")
    assert "journalctl --boot=0 SYSLOG_IDENTIFIER=kernel --output=cat --no-pager --quiet" in host.calls.read_text()


def test_xid_since_is_passed_to_journalctl_and_checked(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.run(capsys, xid_since="2026-11-30 08:15")
    assert host.calls.read_text().splitlines()[-1].endswith("--quiet --since=2026-11-30 08:15")
    failed = host.run(capsys, expect_rc=1, xid_since="yesterday; rm -rf /")
    assert "gpu_health_xid_since" in failed["msg"]


def test_unreadable_journal_falls_back_to_dmesg_or_warns(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    executable(host.journalctl, "#!/bin/sh\necho 'No journal files were found.' >&2\nexit 1\n")
    result = host.run(capsys)
    assert result["healthy"] and {"check": "xid", "reason": "the kernel log could not be read"} in result["not_checked"]
    assert "journalctl exited 1: No journal files were found." in result["gpu_warnings"][0]["detail"]
    executable(host.bin / "dmesg", "#!/bin/sh\necho '[ 12.5] NVRM: Xid (PCI:0000:01:00): 48, pid=9, DBE'\n")
    (problem,) = host.run(capsys)["problems"]
    assert (problem["index"], problem["check"]) == (0, "xid")


def test_dcgm_diag_when_dcgmi_is_installed(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.dcgmi(sample("dcgmi_diag_r1_fail.json"), 226)
    result = host.run(capsys)
    assert [(p["index"], p["check"]) for p in result["problems"]] == [(1, "dcgm_diag")]
    assert [(w["index"], w["check"]) for w in result["gpu_warnings"]] == [(0, "dcgm_diag")]
    assert "dcgmi diag -r 1 -j" in host.calls.read_text() and "dcgm_diag" in result["checked"]
    host.run(capsys, dcgm_diag_level=3)
    assert host.calls.read_text().splitlines()[-1] == "dcgmi diag -r 3 -j"
    result = host.run(capsys, dcgm_diag_level=0)
    assert {"check": "dcgm_diag", "reason": "gpu_health_dcgm_diag_level is 0"} in result["not_checked"]
    host.dcgmi("Error: unable to establish a connection to the specified host: localhost\n"
               "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n", 235)
    result = host.run(capsys)
    assert result["healthy"] and "did not run (exit 235)" in result["gpu_warnings"][0]["detail"]


def test_no_driver_no_nvidia_smi(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    (host.dev / "nvidiactl").unlink()
    (problem,) = host.run(capsys)["problems"]
    assert problem["check"] == "nvidia_smi" and problem["detail"].startswith("nvidia-smi exited 9: NVIDIA-SMI has failed")
    (problem,) = host.run(capsys, nvidia_smi=str(host.root / "absent"))["problems"]
    assert problem["check"] == "nvidia_smi" and problem["index"] is None


def test_older_driver_without_a_field(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    executable(host.smi, f'#!/bin/sh\ncase "$*" in *gpu_recovery_action*) echo \'Field "gpu_recovery_action" is not a '
                         f'valid field to query.\'; exit 2;; *c2c.mode*) echo \'Field "c2c.mode" is not a valid field '
                         f'to query.\'; exit 2;; esac\nexec {sys.executable} "{SMI}" "$@"\n')
    result = host.run(capsys)
    assert result["healthy"] and "gpu_recovery_action" not in result["query_fields"]
    assert [w["detail"] for w in result["gpu_warnings"]] == [
        "nvidia-smi does not know the field gpu_recovery_action (an older driver): the checks that need it are skipped"]
    assert {"check": "recovery_action", "reason": "nvidia-smi does not report gpu_recovery_action"} in result["not_checked"]


def test_check_mode_runs_the_same_checks(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    host.faults({"0": {"pcie.link.width.current": "4"}})
    result = host.run(capsys, _ansible_check_mode=True)
    assert [(p["index"], p["check"]) for p in result["problems"]] == [(0, "pcie_width")]


def test_refused_arguments(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    assert "pcie" in host.run(capsys, expect_rc=1, ignore=["pcie"])["msg"]
    assert "gpu_health_fatal_xids" in host.run(capsys, expect_rc=1, fatal_xids=[79, 0])["msg"]
    assert "dcgm_diag_level" in host.run(capsys, expect_rc=1, dcgm_diag_level=7)["msg"]


# --- the fake nvidia-smi's fields and faults (what the gate and the fake DCGM exporter read) -----------------

EXPORTER_FIELDS = ["temperature.gpu", "utilization.gpu", "memory.used", "memory.total", "power.draw", "clocks.sm",
                   "clocks.mem", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
                   "pcie.link.width.max", "ecc.errors.uncorrected.volatile.total", "ecc.errors.corrected.volatile.total",
                   "clocks_event_reasons.active", "temperature.memory", "remapped_rows.uncorrectable",
                   "retired_pages.pending", "driver_version", "memory.free", "memory.reserved", "utilization.memory"]


def smi_rows(sim: SimHost, fields: list[str], *extra: str) -> list[list[str]]:
    proc = subprocess.run([str(sim.smi), f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", *extra],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line.split(", ") for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("profile", PROFILES, ids=[p.stem for p in PROFILES])
def test_exporter_fields_in_every_profile(profile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimHost(tmp_path, profile.stem, monkeypatch)
    rows = smi_rows(sim, EXPORTER_FIELDS)
    assert rows and all(len(r) == len(EXPORTER_FIELDS) for r in rows)
    sim.faults({"0": {f: "7" for f in EXPORTER_FIELDS}})
    assert smi_rows(sim, EXPORTER_FIELDS)[0] == ["7"] * len(EXPORTER_FIELDS)


def test_faults_follow_into_derived_fields_and_aliases(host: SimHost) -> None:
    fields = ["index", "pcie.link.gen.current", "pcie.link.gen.gpucurrent", "clocks_event_reasons.active",
              "clocks_throttle_reasons.hw_slowdown", "clocks.current.sm", "clocks.sm"]
    assert smi_rows(host, fields, "-i", "0") == [["0", "1", "1", "0x0000000000000001", "Not Active", "180", "180"]]
    host.faults({"*": {"clocks_throttle_reasons.hw_slowdown": "Active", "clocks.sm": "999"},
                 "0": {"pcie.link.gen.current": "2", "DCGM_FI_DEV_XID_ERRORS": "79"}})
    assert smi_rows(host, fields, "-i", "0,1") == [["0", "2", "2", "0x0000000000000009", "Active", "999", "999"],
                                                   ["1", "1", "1", "0x0000000000000009", "Active", "999", "999"]]


def test_a_busy_gpu_runs_its_link_at_the_maximum(host: SimHost) -> None:
    fd = host.proc / "4242" / "fd"
    fd.mkdir(parents=True)
    os.symlink(host.dev / "nvidia1", fd / "3")
    (host.proc / "4242" / "comm").write_text("python3\n")
    rows = smi_rows(host, ["index", "pcie.link.gen.current", "clocks_event_reasons.gpu_idle", "clocks.sm"], "-i", "0,1")
    assert rows == [["0", "1", "Active", "180"], ["1", "5", "Not Active", "3090"]]
    host.faults({"1": {"pcie.link.gen.max": "4"}})
    assert smi_rows(host, ["pcie.link.gen.current"], "-i", "1") == [["4"]]


@pytest.mark.parametrize("faults", [
    '{"gpus": {"0": {"pcie.link.widht.current": "8"}}}', '{"gpu": {}}', '{"gpus": {"zero": {}}}',
    '{"gpus": {"0": {"persistence_mode": true}}}', "not json"])
def test_bad_faults_file_is_refused(host: SimHost, faults: str) -> None:
    (host.conf / "faults.json").write_text(faults)
    proc = subprocess.run([str(host.smi), "--query-gpu=index", "--format=csv"], capture_output=True, text=True, check=False)
    assert proc.returncode == 255 and proc.stderr.startswith("fake nvidia-smi: faults.json: ")


def test_summary_shows_the_ecc_column(host: SimHost) -> None:
    host.faults({"0": {"ecc.errors.uncorrected.volatile.total": "2"}})
    out = subprocess.run([str(host.smi), "-i", "0,1"], capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if "00000000:" in line]
    assert rows[0].rstrip().endswith("2 |") and rows[1].rstrip().endswith("0 |")


def test_role_documents_every_variable() -> None:
    role = REPO / "roles/gpu_health"
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text())
    specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
    assert set(defaults) == set(specs["main"]["options"])
    assert specs["main"]["options"]["gpu_health_ignore"]["choices"] == list(gh.CHECKS)
    assert specs["main"]["options"]["gpu_health_dcgm_diag_level"]["choices"] == [0, 1, 2, 3, 4]
    tasks = (role / "tasks/main.yml").read_text()
    for option in ("fatal_xids", "xid_since", "require_persistence", "dcgm_diag_level", "ignore"):
        assert f"{option}: \"{{{{ gpu_health_{option} }}}}\"" in tasks


def test_gather_facts_returns_what_gpu_facts_gathers(host: SimHost, capsys: pytest.CaptureFixture[str]) -> None:
    """gather_facts: the gate's module run also returns nvidia_gpu_facts, the same mapping blackwell.sglang.gpu_facts
    gathers on the same host (roles/gpu_health passes it so that a restart gathers them once); off, it returns none."""
    assert "ansible_facts" not in host.run(capsys)
    facts = host.run(capsys, gather_facts=True)["ansible_facts"]["nvidia_gpu_facts"]
    spec = importlib.util.spec_from_file_location(
        "gpu_facts", REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/gpu_facts.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    with patch_module_args({"nvidia_smi": str(host.smi)}), pytest.raises(SystemExit):
        module.main()
    assert facts == json.loads(capsys.readouterr().out)["ansible_facts"]["nvidia_gpu_facts"]
    assert facts["driver_loaded"] is True and facts["gpu_count"] == 8
