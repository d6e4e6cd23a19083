#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: check a GPU host's NVIDIA GPUs before it serves (Xid, ECC, row remapping, PCIe link, clocks,
persistence, recovery action, DCGM diagnostics); read-only."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_health
version_added: 0.1.0
short_description: Check the health of the host's NVIDIA GPUs before they serve
description:
  - >-
    Runs C(nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits) (the fields are listed under RETURN, in
    C(query_fields)), reads the kernel's Xid reports of this boot from the journal
    (C(journalctl --boot=0 SYSLOG_IDENTIFIER=kernel --output=cat), C(dmesg) when there is no C(journalctl)) and, when
    C(dcgmi) is installed and O(dcgm_diag_level) is not 0, runs C(dcgmi diag -r <level> -j).
  - >-
    Per GPU, the checks (their names are those of O(ignore) and of C(check) in the results) are -
    C(xid) (Xid events of this boot: those in O(fatal_xids) are problems, the others - application faults such as 13,
    31, 43, 45 - are warnings; Xid 154 "recovery action changed to None" is a warning),
    C(ecc) (uncorrectable volatile ECC errors), C(retired_pages) (pages pending retirement),
    C(remapped_rows) (a row remapping pending or failed), C(pcie_width) (link width below the link's maximum),
    C(pcie_gen) (the link's maximum generation below the GPU's own maximum; the current generation drops when the GPU
    idles, by design, and is never compared), C(clocks) (clocks slowed down by hardware, thermal or power-brake
    reasons, in two samples O(clock_resample_seconds) apart; idle, application-clock, power-cap and sync-boost
    reasons are normal), C(persistence) (persistence mode off; a warning unless O(require_persistence)),
    C(recovery_action) (the driver asks for a GPU reset, a reboot or a drain) and C(dcgm_diag).
  - >-
    C([N/A]), C([Not Supported]) and other bracketed values never fail a check. A GPU on NVLink-C2C (C(c2c.mode)
    Enabled, as GB10 and Grace superchips) reports legacy PCIe values; its PCIe checks are skipped. A field the
    installed nvidia-smi does not know (an older driver) is left out and its check skipped, with a warning.
  - >-
    A GPU reset does not remove earlier Xid reports from the kernel log: after repairing a GPU, set O(xid_since) to the
    time of the repair (or reboot).
  - >-
    Read-only; never reports a change; runs the same in check mode.
options:
  nvidia_smi:
    description: nvidia-smi to run (an absolute path, or a name looked up on PATH).
    type: str
    default: nvidia-smi
  journalctl:
    description: journalctl to run (an absolute path, or a name looked up on PATH).
    type: str
    default: journalctl
  dcgmi:
    description: dcgmi to run (an absolute path, or a name looked up on PATH); the DCGM diagnostic is skipped without it.
    type: str
    default: dcgmi
  fatal_xids:
    description:
      - Xid codes that fail the host; every other Xid is a warning. roles/gpu_health passes C(gpu_health_fatal_xids),
        NVIDIA's Xid catalog entries whose immediate action is a GPU reset, a reboot or a hardware workflow.
    type: list
    elements: int
    required: true
  xid_since:
    description:
      - Only Xid reports logged at or after this local time count (C(YYYY-MM-DD), C(YYYY-MM-DD HH:MM) or
        C(YYYY-MM-DD HH:MM:SS)); empty, every report of this boot.
    type: str
    default: ""
  require_persistence:
    description: Persistence mode off is a problem (true) or a warning (false).
    type: bool
    default: true
  dcgm_diag_level:
    description: C(dcgmi diag -r) level; 0 skips the DCGM diagnostic. Levels 2 to 4 load the GPUs for minutes to hours.
    type: int
    choices: [0, 1, 2, 3, 4]
    default: 1
  ignore:
    description: Checks not run on this host (names as in C(check)).
    type: list
    elements: str
    choices: [xid, ecc, retired_pages, remapped_rows, pcie_width, pcie_gen, clocks, persistence, recovery_action,
              dcgm_diag]
    default: []
  clock_resample_seconds:
    description: Seconds between the two samples of the clock slowdown reasons (a reason must be active in both).
    type: float
    default: 1.0
  gather_facts:
    description:
      - >-
        Also return the host's GPU facts, C(nvidia_gpu_facts), exactly as M(blackwell.sglang.gpu_facts) gathers them
        (the same code, module_utils/sglang_gpu_facts.py, with its default C(python) and this C(nvidia_smi)), so that
        a play that runs the gate need not spend a second module run on them.
    type: bool
    default: false
  report_host:
    description:
      - The inventory host name; set, the result is also published as facts (RV(ansible_facts)), so that the role needs
        no task of its own to record it.
    type: str
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the GPUs
  blackwell.sglang.gpu_health:
    fatal_xids: [48, 64, 74, 79, 95, 119, 120, 154]
    dcgm_diag_level: 1
    ignore: [pcie_gen]
  register: health

- name: Stop when a GPU is not healthy
  ansible.builtin.fail:
    msg: "{{ health.problems | map(attribute='detail') | join('; ') }}"
  when: not health.healthy
"""

RETURN = r"""
healthy:
  description: No problem was found (warnings do not count).
  returned: always
  type: bool
problems:
  description:
    - >-
      One item per problem - C(index) (nvidia-smi index, or null for the host or a GPU nvidia-smi no longer lists),
      C(uuid), C(bus_id) (C(0000:18:00.0); for a GPU known only from the kernel log, the C(0000:18:00) it names),
      C(check), C(detail) (what was seen), C(fix) (what to do) and C(message) (all of it in one line:
      C(GPU 0 (0000:01:00.0\) pcie_width: PCIe link is x8, ...; fix: ...)).
  returned: always
  type: list
  elements: dict
gpu_warnings:
  description:
    - Findings that do not fail the host, in the same form as C(problems). (Not C(warnings), which Ansible reserves
      for a module's own warnings; roles/gpu_health records them as C(gpu_health_report.warnings).)
  returned: always
  type: list
  elements: dict
checked:
  description: The checks that ran (on at least one GPU, or on the host).
  returned: always
  type: list
  elements: str
not_checked:
  description:
    - "Checks that did not run: C(check) and C(reason) (ignored, dcgmi not installed, NVLink-C2C GPU...). (Not
      C(skipped), which Ansible reads as the task's own state.)"
  returned: always
  type: list
  elements: dict
gpus:
  description: The GPUs checked - C(index), C(uuid), C(bus_id).
  returned: always
  type: list
  elements: dict
query_fields:
  description: The nvidia-smi fields queried (less those the installed nvidia-smi does not know).
  returned: always
  type: list
  elements: str
ansible_facts:
  description:
    - C(nvidia_gpu_facts), as M(blackwell.sglang.gpu_facts) returns it, when O(gather_facts) is true.
    - With O(report_host), C(gpu_health_report) (C(healthy), C(problems), C(warnings), C(checked), C(not_checked) and
      C(message), the failure message naming the host) and C(nvidia_gpu_facts_fresh) (true), roles/gpu_health's
      published facts.
  returned: when gather_facts is true or report_host is set
  type: dict
"""

import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_gpu_facts import DEFAULT_PYTHON, gather

CHECKS = ("xid", "ecc", "retired_pages", "remapped_rows", "pcie_width", "pcie_gen", "clocks", "persistence",
          "recovery_action", "dcgm_diag")

# The query's fields: identity, then one group per check. nvidia-smi prints them in this order.
IDENTITY = ("index", "uuid", "pci.bus_id")
CHECK_FIELDS: dict[str, tuple[str, ...]] = {
    "persistence": ("persistence_mode",),
    "pcie_gen": ("pcie.link.gen.gpucurrent", "pcie.link.gen.max", "pcie.link.gen.gpumax", "pcie.link.gen.hostmax"),
    "pcie_width": ("pcie.link.width.current", "pcie.link.width.max"),
    "ecc": ("ecc.mode.current", "ecc.errors.uncorrected.volatile.total"),
    "retired_pages": ("retired_pages.pending",),
    "remapped_rows": ("remapped_rows.pending", "remapped_rows.failure"),
    "clocks": ("clocks_event_reasons.hw_slowdown", "clocks_event_reasons.hw_thermal_slowdown",
               "clocks_event_reasons.hw_power_brake_slowdown", "clocks_event_reasons.sw_thermal_slowdown"),
    "recovery_action": ("gpu_recovery_action",),
    "c2c": ("c2c.mode",),
}
# The fields a check cannot do without (the others only add detail).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "persistence": ("persistence_mode",),
    "pcie_gen": ("pcie.link.gen.max", "pcie.link.gen.gpumax"),
    "pcie_width": ("pcie.link.width.current", "pcie.link.width.max"),
    "ecc": ("ecc.errors.uncorrected.volatile.total",),
    "retired_pages": ("retired_pages.pending",),
    "remapped_rows": ("remapped_rows.pending", "remapped_rows.failure"),
    "clocks": CHECK_FIELDS["clocks"],
    "recovery_action": ("gpu_recovery_action",),
}
CLOCK_REASONS = {
    "clocks_event_reasons.hw_slowdown": "HW slowdown (the GPU halves its clocks: over temperature or power brake)",
    "clocks_event_reasons.hw_thermal_slowdown": "HW thermal slowdown (temperature too high)",
    "clocks_event_reasons.hw_power_brake_slowdown": "HW power brake slowdown (external power brake, e.g. the power supply)",
    "clocks_event_reasons.sw_thermal_slowdown": "SW thermal slowdown (above the maximum operating temperature)",
}

_MISSING = re.compile(r"^\[.*\]$|^N/A$", re.IGNORECASE)
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
_NO_HANDLE = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
                        r"\s*:?\s*(.*)")
_XID = re.compile(r"NVRM:\s*Xid\s*\((?:PCI:)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\)\s*:?"
                  r"\s*(?P<xid>\d+)\s*,?\s*(?P<rest>.*)")
_RECOVERY_TO = re.compile(r"\bto\s+0x[0-9A-Fa-f]+\s*\(([^)]*)\)")
SINCE = re.compile(r"\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}(?::\d{2})?)?")

XID_FIXES = {
    48: "reset the GPU (nvidia-smi -r -i <index>, with nothing running on it) or reboot; replace it if Xid 48 recurs",
    62: "reset the GPU or reboot; update the driver if it recurs",
    64: "the GPU could not remap a failing memory row: drain it and replace it (RMA)",
    74: "check the NVLink/NVSwitch fabric (nvidia-smi nvlink -s, nvidia-fabricmanager), reset the GPU; replace it if it recurs",
    79: "the GPU fell off the PCIe bus: power-cycle the host; check seating, riser, power cables and the slot; "
        "replace the GPU if it recurs",
    95: "reset the GPU or reboot (uncontained memory error); replace it if it recurs",
    119: "reset the GPU or reboot (GSP firmware timeout); update the driver if it recurs",
    120: "reset the GPU or reboot (GSP firmware error); update the driver if it recurs",
    154: "do the recovery action the driver names (nvidia-smi -q | grep -i 'recovery action'): reset the GPU or reboot",
}
RECOVERY_FIXES = {
    "reset": "reset the GPU (nvidia-smi -r -i <index>, with nothing running on it) or reboot",
    "reboot": "reboot the host",
    "drain p2p": "stop peer-to-peer traffic to the GPU (drain it), then reset it",
    "drain and reset": "drain the GPU, then reset it",
}
AFTER_REPAIR = "; then re-run playbooks/health.yml with gpu_health_xid_since set to the time of the repair (or reboot)"


@dataclass
class Finding:
    """One problem or warning."""

    gpu: dict[str, Any] | None
    check: str
    detail: str
    fix: str

    def where(self) -> str:
        gpu = self.gpu or {}
        if gpu.get("index") is not None:
            return f"GPU {gpu['index']} ({gpu.get('bus_id') or 'bus id unknown'})"
        return f"PCI {gpu['bus_id']}" if gpu.get("bus_id") else "host"

    def as_dict(self) -> dict[str, Any]:
        gpu = self.gpu or {}
        return {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "bus_id": gpu.get("bus_id"), "check": self.check,
                "detail": self.detail, "fix": self.fix,
                "message": f"{self.where()} {self.check}: {self.detail}; fix: {self.fix}"}


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid (PCI:<bus>): <xid>, <message>`` report of the kernel."""

    bus: str   # 0000:18:00 (domain:bus:device as the driver prints it, 4-digit domain, lower case)
    xid: int
    message: str


def value(cell: str | None) -> str | None:
    """A cell of nvidia-smi's CSV, or None for empty, ``N/A`` and bracketed notes (``[N/A]``, ``[Not Supported]``,
    ``[Unknown Error]``...)."""
    if cell is None:
        return None
    cell = cell.strip()
    return None if not cell or _MISSING.match(cell) else cell


def as_int(cell: str | None) -> int | None:
    """An integer cell (``16``, ``0x10``), or None."""
    text = value(cell)
    if text is None:
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def is_yes(cell: str | None) -> bool:
    """``Yes`` / ``1`` / ``True`` / ``Active`` / ``Enabled`` (any case) -> True; anything else (``[N/A]`` too) -> False."""
    return (value(cell) or "").lower() in ("yes", "1", "true", "active", "enabled")


def normalize_bus_id(bus_id: str) -> str:
    """``00000000:18:00.0`` (nvidia-smi) -> ``0000:18:00.0``; ``0000:18:00`` (Xid reports) -> ``0000:18:00``."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 3 and re.fullmatch(r"[0-9a-f]+", parts[0]):
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def parse_query(text: str, fields: list[str] | tuple[str, ...]) -> list[dict[str, str | None]]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``, each a dict field -> raw cell (None for
    a missing cell), ``bus_id`` normalised; lines with another number of cells (headers, notes) or without a numeric
    index are skipped; sorted by index."""
    rows = []
    for line in text.replace("\r", "").split("\n"):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        row: dict[str, str | None] = dict(zip(fields, cells, strict=True))
        if not (row.get("index") or "").isdigit():
            continue
        bus = value(row.get("pci.bus_id"))
        row["pci.bus_id"] = normalize_bus_id(bus) if bus else None
        rows.append(row)
    return sorted(rows, key=lambda r: int(r["index"] or 0))


def unreachable_gpus(text: str) -> list[tuple[str, str]]:
    """(bus id, error) of every ``Unable to determine the device handle for GPU<bus>: <error>`` line of nvidia-smi
    (a GPU the driver lists but cannot talk to)."""
    return [(normalize_bus_id(m.group(1)), m.group(2).strip()) for m in map(_NO_HANDLE.search, text.split("\n")) if m]


def parse_xids(text: str) -> list[XidEvent]:
    """Xid reports in kernel log text (``journalctl -o cat``, ``dmesg``, syslog lines), in order."""
    events = []
    for line in text.replace("\r", "").split("\n"):
        match = _XID.search(line)
        if match:
            events.append(XidEvent(normalize_bus_id(match.group("bus")), int(match.group("xid")),
                                   match.group("rest").strip()))
    return events


def gpu_for_bus(bus: str, gpus: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The GPU whose bus id (``0000:18:00.0``) is at the Xid report's ``0000:18:00`` (function 0 first)."""
    found = [g for g in gpus if g["bus_id"] and g["bus_id"].rsplit(".", 1)[0] == bus]
    return sorted(found, key=lambda g: g["bus_id"])[0] if found else None


def recovery_target(message: str) -> str | None:
    """The action an Xid 154 report changed to (``GPU Reset Required``, ``None``...), or None when it does not say."""
    match = _RECOVERY_TO.search(message)
    return match.group(1).strip() if match else None


def xid_findings(events: list[XidEvent], gpus: list[dict[str, Any]], fatal: set[int]) -> tuple[list[Finding], list[Finding]]:
    """(problems, warnings) from Xid reports: one finding per GPU and Xid, with its count and last message."""
    grouped: dict[tuple[str, int], list[XidEvent]] = {}
    for event in events:
        grouped.setdefault((event.bus, event.xid), []).append(event)
    problems, warnings = [], []
    for (bus, xid), group in grouped.items():
        gpu = gpu_for_bus(bus, gpus) or {"index": None, "uuid": None, "bus_id": bus}
        last = group[-1].message
        where = f" (PCI {bus}, a GPU nvidia-smi does not list)" if gpu["index"] is None else ""
        detail = f"Xid {xid} x{len(group)} this boot{where}: {last}" if last else f"Xid {xid} x{len(group)} this boot{where}"
        is_fatal = xid in fatal
        if xid == 154 and all((recovery_target(e.message) or "").lower() == "none" for e in group):
            is_fatal = False
        if is_fatal:
            fix = XID_FIXES.get(xid, f"look up Xid {xid} in NVIDIA's Xid catalog; reset the GPU or reboot") + AFTER_REPAIR
            problems.append(Finding(gpu, "xid", detail, fix))
        else:
            warnings.append(Finding(gpu, "xid", detail, "an application fault or an informational event; the GPU keeps "
                                                        "serving (add the Xid to gpu_health_fatal_xids to fail on it)"))
    return problems, warnings


def gpu_findings(row: dict[str, str | None], gpu: dict[str, Any], require_persistence: bool,
                 run: set[str]) -> tuple[list[Finding], list[Finding]]:
    """(problems, warnings) of one GPU's query row for the checks in ``run``. [N/A] values never produce a finding."""
    problems: list[Finding] = []
    warnings: list[Finding] = []
    if "ecc" in run:
        count = as_int(row.get("ecc.errors.uncorrected.volatile.total"))
        if count:
            problems.append(Finding(gpu, "ecc", f"{count} uncorrectable ECC error(s) since the driver loaded "
                                                "(ecc.errors.uncorrected.volatile.total)",
                                    "drain the GPU, reset it (nvidia-smi -r -i <index>) or reboot; replace it if the "
                                    "errors come back"))
    if "retired_pages" in run and is_yes(row.get("retired_pages.pending")):
        problems.append(Finding(gpu, "retired_pages", "memory pages are pending retirement (retired_pages.pending: Yes)",
                                "reset the GPU or reboot to retire the pages"))
    if "remapped_rows" in run:
        if is_yes(row.get("remapped_rows.failure")):
            problems.append(Finding(gpu, "remapped_rows", "a memory row could not be remapped (remapped_rows.failure: Yes)",
                                    "drain the GPU and replace it (RMA)"))
        elif is_yes(row.get("remapped_rows.pending")):
            problems.append(Finding(gpu, "remapped_rows", "a memory row remapping is pending (remapped_rows.pending: Yes)",
                                    "reset the GPU (nvidia-smi -r -i <index>) or reboot to apply the remapping"))
    if "pcie_width" in run:
        current, maximum = as_int(row.get("pcie.link.width.current")), as_int(row.get("pcie.link.width.max"))
        if current is not None and maximum is not None and current < maximum:
            problems.append(Finding(gpu, "pcie_width", f"PCIe link is x{current}, the link's maximum is x{maximum}",
                                    "reseat the GPU, check its riser/cable and slot, look for AER errors "
                                    "(journalctl -k | grep -i aer)"))
    if "pcie_gen" in run:
        link_max, gpu_max = as_int(row.get("pcie.link.gen.max")), as_int(row.get("pcie.link.gen.gpumax"))
        host_max, current = as_int(row.get("pcie.link.gen.hostmax")), as_int(row.get("pcie.link.gen.gpucurrent"))
        if link_max is not None and gpu_max is not None and link_max < gpu_max:
            now = f"; now Gen{current}" if current is not None else ""
            if host_max is not None and host_max <= link_max:
                warnings.append(Finding(gpu, "pcie_gen", f"PCIe link is at most Gen{link_max}: the root port supports "
                                                         f"Gen{host_max}, the GPU Gen{gpu_max}{now}",
                                        "a platform limit, not a fault: a slot of the GPU's generation would be faster"))
            else:
                host = f", root port Gen{host_max}" if host_max is not None else ""
                problems.append(Finding(gpu, "pcie_gen", f"PCIe link trains at most Gen{link_max} (pcie.link.gen.max), "
                                                         f"the GPU supports Gen{gpu_max}{host}{now}",
                                        "check the slot's PCIe speed in the firmware setup, reseat the GPU, check its "
                                        "riser/retimer; add pcie_gen to gpu_health_ignore if the slot is of an older "
                                        "generation"))
    if "clocks" in run:
        active = [text for field, text in CLOCK_REASONS.items() if is_yes(row.get(field))]
        if active:
            problems.append(Finding(gpu, "clocks", "clocks slowed down: " + "; ".join(active),
                                    "check cooling (fans, airflow, inlet temperature: nvidia-smi -q -d TEMPERATURE), "
                                    "power supplies and cables; the event counters: nvidia-smi -q -d PERFORMANCE"))
    if "persistence" in run and (value(row.get("persistence_mode")) or "").lower() == "disabled":
        finding = Finding(gpu, "persistence", "persistence mode is off",
                          "enable nvidia-persistenced (systemctl enable --now nvidia-persistenced; roles/nvidia_driver)")
        (problems if require_persistence else warnings).append(finding)
    if "recovery_action" in run:
        action = value(row.get("gpu_recovery_action"))
        if action and action.lower() != "none":
            problems.append(Finding(gpu, "recovery_action", f"the driver asks for a recovery action: {action}",
                                    RECOVERY_FIXES.get(action.lower(), f"do what the driver asks ({action})")))
    return problems, warnings


def walk_dcgm(data: Any) -> tuple[list[dict[str, Any]], str | None]:
    """(results, runtime error) of ``dcgmi diag -j``: ``{test, status, gpus, messages, severities}`` per result, in the
    DCGM 4 ("DCGM Diagnostic") and DCGM 2/3 ("DCGM GPU Diagnostic": gpu_ids "0,1" or "gpu0,gpu1", gpu_id) layouts,
    with or without test categories."""
    if not isinstance(data, dict):
        return [], None
    root = data.get("DCGM Diagnostic") or data.get("DCGM GPU Diagnostic") or data
    if not isinstance(root, dict):
        return [], None
    error = root.get("runtime_error") or data.get("runtime_error")
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        categories = [{"tests": root.get("tests")}]
    results = []
    for category in categories:
        tests = category.get("tests") if isinstance(category, dict) else None
        for test in tests if isinstance(tests, list) else []:
            if not isinstance(test, dict):
                continue
            items = test.get("results")
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict):
                    results.append(_dcgm_result(str(test.get("name", "?")), item))
    return results, str(error) if error else None


def _gpu_ids(item: dict[str, Any]) -> list[int]:
    if isinstance(item.get("entity_id"), int) and str(item.get("entity_group", "GPU")).upper() == "GPU":
        return [item["entity_id"]]
    ids = []
    for key in ("gpu_ids", "gpu_id"):
        raw = item.get(key)
        for token in raw if isinstance(raw, list) else str(raw if raw is not None else "").split(","):
            token = str(token).strip().lower().removeprefix("gpu")
            if token.isdigit() and int(token) not in ids:
                ids.append(int(token))
    return ids


def _dcgm_result(test: str, item: dict[str, Any]) -> dict[str, Any]:
    messages, severities = [], []
    for key in ("warnings", "errors", "warning", "error", "info"):
        entries = item.get(key)
        for entry in entries if isinstance(entries, list) else [entries] if entries else []:
            if isinstance(entry, dict):
                text = entry.get("warning") or entry.get("error") or entry.get("message") or ""
                if isinstance(entry.get("error_severity"), int):
                    severities.append(entry["error_severity"])
            else:
                text = entry
            if key != "info" and str(text).strip():
                messages.append(str(text).strip())
    return {"test": test, "status": str(item.get("status", "")).strip().lower(), "gpus": _gpu_ids(item),
            "messages": messages, "severities": severities}


def parse_dcgm_diag(text: str) -> tuple[list[dict[str, Any]], str | None] | None:
    """(results, runtime error) of ``dcgmi diag -r N -j`` output, or None when it holds no JSON document."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        data = json.loads(text[start:end + 1])
    except ValueError:
        return None
    return walk_dcgm(data)


# DCGM error severities (dcgm_errors.h): 1 MONITOR and 5 CONFIG (e.g. persistence mode off) do not condemn the GPU.
DCGM_SOFT_SEVERITIES = {1, 5}


def dcgm_findings(results: list[dict[str, Any]], gpus: list[dict[str, Any]], level: int) -> tuple[list[Finding], list[Finding]]:
    """(problems, warnings) from DCGM results, one per GPU a result names: Fail is a problem unless every message is
    of a soft severity (MONITOR, CONFIG); Warn is a warning; Pass and Skip are nothing."""
    by_index = {g["index"]: g for g in gpus}
    problems, warnings = [], []
    for result in results:
        if result["status"] not in ("fail", "failed", "warn", "warning"):
            continue
        detail = f"dcgmi diag -r {level}: {result['test']} {result['status']}"
        if result["messages"]:
            detail += ": " + "; ".join(result["messages"])
        soft = bool(result["severities"]) and set(result["severities"]) <= DCGM_SOFT_SEVERITIES
        targets: list[dict[str, Any] | None] = [by_index.get(i, {"index": i, "uuid": None, "bus_id": None})
                                                for i in result["gpus"]] or [None]
        for gpu in targets:
            if result["status"].startswith("fail") and not soft:
                problems.append(Finding(gpu, "dcgm_diag", detail, f"read dcgmi diag -r {level} for the whole report; "
                                                                  "drain the GPU and follow DCGM's guidance for the test"))
            else:
                warnings.append(Finding(gpu, "dcgm_diag", detail, "a configuration or monitoring finding of DCGM"))
    return problems, warnings


class Gate:
    """One run of the checks on this host."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        params = module.params
        self.ignore = set(params["ignore"])
        self.fatal = set(params["fatal_xids"])
        self.problems: list[Finding] = []
        self.warnings: list[Finding] = []
        self.checked: list[str] = []
        self.skipped: list[dict[str, str]] = [{"check": c, "reason": "in gpu_health_ignore"} for c in CHECKS
                                              if c in self.ignore]
        self.gpus: list[dict[str, Any]] = []
        self.fields: list[str] = []

    def which(self, name: str) -> str | None:
        if os.path.isabs(name):
            return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        return self.module.get_bin_path(name)

    def ran(self, check: str) -> None:
        if check not in self.checked:
            self.checked.append(check)

    def skip(self, check: str, reason: str) -> None:
        if check not in self.ignore and not any(s["check"] == check and s["reason"] == reason for s in self.skipped):
            self.skipped.append({"check": check, "reason": reason})

    def query(self, smi: str, fields: list[str]) -> tuple[int, str, list[str]]:
        """Run the query; fields the installed nvidia-smi does not know are dropped (and warned about) and the query
        re-run. Returns (rc, output, fields used)."""
        fields = list(fields)
        while True:
            rc, out, err = self.module.run_command([smi, f"--query-gpu={','.join(fields)}",
                                                   "--format=csv,noheader,nounits"])
            unknown = _INVALID_FIELD.search(out + "\n" + err)
            if rc == 0 or not unknown or unknown.group(1) not in fields or unknown.group(1) in IDENTITY:
                return rc, out + ("\n" + err if rc != 0 else ""), fields
            fields.remove(unknown.group(1))
            if not any(unknown.group(1) in needed for needed in REQUIRED_FIELDS.values()):
                continue
            self.warnings.append(Finding(None, "nvidia_smi", f"nvidia-smi does not know the field {unknown.group(1)} "
                                                             "(an older driver): the checks that need it are skipped",
                                         "update the NVIDIA driver"))

    def gpu_checks(self, smi: str) -> None:
        wanted = [c for c in CHECK_FIELDS if c == "c2c" or c not in self.ignore]
        fields = list(IDENTITY) + [f for c in wanted for f in CHECK_FIELDS[c]]
        rc, out, self.fields = self.query(smi, fields)
        rows = parse_query(out, self.fields)
        for bus, error in unreachable_gpus(out):
            self.problems.append(Finding({"index": None, "uuid": None, "bus_id": bus}, "nvidia_smi",
                                         f"nvidia-smi cannot reach the GPU at {bus}: {error}",
                                         "power-cycle the host; check the kernel log for Xid 79 and the GPU's seating"))
        if rc != 0 and not rows:
            head = " ".join(out.split())[:300]
            self.problems.append(Finding(None, "nvidia_smi", f"nvidia-smi exited {rc}: {head}",
                                         "load the NVIDIA driver (roles/nvidia_driver; dmesg | grep NVRM)"))
            return
        if not rows:
            self.problems.append(Finding(None, "nvidia_smi", "nvidia-smi lists no GPU",
                                         "check that the GPUs are seated and powered (lspci -d 10de:) and the driver "
                                         "loaded (dmesg | grep NVRM)"))
            return
        self.gpus = [{"index": int(r["index"] or 0), "uuid": value(r.get("uuid")), "bus_id": r.get("pci.bus_id")}
                     for r in rows]
        checks = [c for c in REQUIRED_FIELDS if c not in self.ignore]
        run = {c for c in checks if all(f in self.fields for f in REQUIRED_FIELDS[c])}
        for check in checks:
            if check not in run:
                missing = [f for f in REQUIRED_FIELDS[check] if f not in self.fields]
                self.skip(check, "nvidia-smi does not report " + ", ".join(missing))
        if "clocks" in run:
            rows = self.resample_clocks(smi, rows)
        for row, gpu in zip(rows, self.gpus, strict=True):
            gpu_run = set(run)
            if is_yes(row.get("c2c.mode")):
                for check in ("pcie_gen", "pcie_width"):
                    if check in gpu_run:
                        gpu_run.discard(check)
                        self.skip(check, f"GPU {gpu['index']} is attached over NVLink-C2C (its PCIe values are legacy)")
            problems, warnings = gpu_findings(row, gpu, self.module.params["require_persistence"], gpu_run)
            self.problems += problems
            self.warnings += warnings
            for check in sorted(gpu_run, key=CHECKS.index):
                self.ran(check)

    def resample_clocks(self, smi: str, rows: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
        """A slowdown reason counts only when a second sample, clock_resample_seconds later, still shows it (the driver
        may assert HW slowdown for a moment during a clock or power-state change)."""
        reasons = list(CLOCK_REASONS)
        if not any(is_yes(row.get(f)) for row in rows for f in reasons):
            return rows
        time.sleep(max(0.0, self.module.params["clock_resample_seconds"]))
        fields = ["index", *reasons]
        rc, out, _ = self.module.run_command([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
        again = {r["index"]: r for r in parse_query(out, fields)} if rc == 0 else {}
        merged = []
        for row in rows:
            second = again.get(row["index"], {})
            merged.append({**row, **{f: row.get(f) if is_yes(second.get(f)) else "Not Active" for f in reasons}})
        return merged

    def kernel_log(self) -> str | None:
        """This boot's kernel messages (journal, else dmesg), or None with a warning when neither can be read."""
        since = self.module.params["xid_since"]
        journalctl = self.which(self.module.params["journalctl"])
        if journalctl:
            argv = [journalctl, "--boot=0", "SYSLOG_IDENTIFIER=kernel", "--output=cat", "--no-pager", "--quiet"]
            if since:
                argv.append(f"--since={since}")
            rc, out, err = self.module.run_command(argv)
            if rc == 0:
                return out
            reason = f"journalctl exited {rc}: {' '.join(err.split())[:200]}"
        else:
            reason = "journalctl is not installed"
        dmesg = self.which("dmesg")
        if dmesg and not since:
            rc, out, err = self.module.run_command([dmesg])
            if rc == 0:
                return out
            reason += f"; dmesg exited {rc}: {' '.join(err.split())[:200]}"
        self.warnings.append(Finding(None, "xid", f"the kernel log could not be read ({reason}): Xid events not checked",
                                     "run the gate as root (become: true) on a host with systemd-journald"))
        return None

    def xid_check(self) -> None:
        if "xid" in self.ignore:
            return
        text = self.kernel_log()
        if text is None:
            self.skip("xid", "the kernel log could not be read")
            return
        self.ran("xid")
        problems, warnings = xid_findings(parse_xids(text), self.gpus, self.fatal)
        self.problems += problems
        self.warnings += warnings

    def dcgm_check(self) -> None:
        level = self.module.params["dcgm_diag_level"]
        if "dcgm_diag" in self.ignore:
            return
        if level == 0:
            self.skip("dcgm_diag", "gpu_health_dcgm_diag_level is 0")
            return
        dcgmi = self.which(self.module.params["dcgmi"])
        if not dcgmi:
            self.skip("dcgm_diag", "dcgmi (DCGM) is not installed")
            return
        rc, out, err = self.module.run_command([dcgmi, "diag", "-r", str(level), "-j"])
        results, error = parse_dcgm_diag(out) or ([], None)
        if error or (rc != 0 and not results):
            head = error or " ".join((out + " " + err).split())[:300]
            self.warnings.append(Finding(None, "dcgm_diag", f"dcgmi diag -r {level} did not run (exit {rc}): {head}",
                                         "start DCGM's host engine (systemctl enable --now nvidia-dcgm) or set "
                                         "gpu_health_dcgm_diag_level to 0"))
            self.skip("dcgm_diag", "dcgmi diag did not run")
            return
        self.ran("dcgm_diag")
        problems, warnings = dcgm_findings(results, self.gpus, level)
        self.problems += problems
        self.warnings += warnings

    def run(self) -> dict[str, Any]:
        since = self.module.params["xid_since"]
        if since and not SINCE.fullmatch(since):
            self.module.fail_json(msg=f"xid_since (gpu_health_xid_since) must be YYYY-MM-DD[ HH:MM[:SS]], not {since!r}")
        bad = [x for x in self.fatal if x <= 0]
        if bad:
            self.module.fail_json(msg=f"fatal_xids (gpu_health_fatal_xids) must be positive Xid codes, not {bad}")
        smi = self.which(self.module.params["nvidia_smi"])
        if smi:
            self.gpu_checks(smi)
        else:
            self.problems.append(Finding(None, "nvidia_smi", f"{self.module.params['nvidia_smi']} is not installed",
                                         "install the NVIDIA driver (roles/nvidia_driver)"))
        self.xid_check()
        self.dcgm_check()
        return {
            "changed": False,
            "healthy": not self.problems,
            "problems": [f.as_dict() for f in self.problems],
            "gpu_warnings": [f.as_dict() for f in self.warnings],
            "checked": self.checked,
            "not_checked": self.skipped,
            "gpus": self.gpus,
            "query_fields": self.fields,
        }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "journalctl": {"type": "str", "default": "journalctl"},
            "dcgmi": {"type": "str", "default": "dcgmi"},
            "fatal_xids": {"type": "list", "elements": "int", "required": True},
            "xid_since": {"type": "str", "default": ""},
            "require_persistence": {"type": "bool", "default": True},
            "dcgm_diag_level": {"type": "int", "default": 1, "choices": [0, 1, 2, 3, 4]},
            "ignore": {"type": "list", "elements": "str", "default": [], "choices": list(CHECKS)},
            "clock_resample_seconds": {"type": "float", "default": 1.0},
            "gather_facts": {"type": "bool", "default": False},
            "report_host": {"type": "str"},
        },
        supports_check_mode=True,
    )
    result = Gate(module).run()
    facts: dict[str, Any] = {}
    if module.params["gather_facts"]:
        facts["nvidia_gpu_facts"] = gather(module, DEFAULT_PYTHON, module.params["nvidia_smi"])
    if module.params["report_host"] is not None:
        facts.update(report(result, module.params["report_host"]))
    if facts:
        result["ansible_facts"] = facts
    module.exit_json(**result)


def report(result: dict[str, Any], host: str) -> dict[str, Any]:
    """The facts roles/gpu_health publishes: gpu_health_report, and that the run's GPU facts are fresh."""
    problems = result["problems"]
    return {
        "nvidia_gpu_facts_fresh": True,
        "gpu_health_report": {
            "healthy": result["healthy"], "problems": problems, "warnings": result["gpu_warnings"],
            "checked": result["checked"], "not_checked": result["not_checked"],
            "message": f"{host} failed the GPU health gate ({len(problems)} problem(s)): "
                       + " | ".join(str(p.get("message", "")) for p in problems),
        },
    }


if __name__ == "__main__":
    main()
