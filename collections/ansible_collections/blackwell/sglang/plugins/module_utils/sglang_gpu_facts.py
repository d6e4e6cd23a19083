# SPDX-License-Identifier: Apache-2.0
"""The host's GPU facts (``nvidia_gpu_facts``): nvidia-smi's GPUs, versions and topology, device minors, IOMMU,
NVSwitch functions, device nodes, OS and Python.

Shared by the modules ``gpu_facts`` (the facts alone) and ``gpu_health`` (the health gate, which returns them too,
so that a restart gathers them in the gate's module run). See the ``gpu_facts`` module's documentation for the
mapping.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from ansible.module_utils.basic import AnsibleModule

SCHEMA = 1
# The interpreter whose version and headers the facts report, unless the gpu_facts module is told another.
DEFAULT_PYTHON = "python3"
QUERY_FIELDS = "index,uuid,pci.bus_id,name,compute_cap,memory.total,persistence_mode"

# The host's own paths; the unit tests point these at fixture trees.
PROC_NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
PCI_DEVICES = "/sys/bus/pci/devices"
DEV = "/dev"
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")

# Printed by the interpreter given as `python`: its version, then whether Python.h is where C extensions
# (Triton's and FlashInfer's JIT builds) look for it. Written to run on any Python.
PYTHON_PROBE = (
    "import os, platform, sysconfig; print(platform.python_version()); "
    "print(os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]?")
_GPU_LABEL = re.compile(r"GPU(\d+)")
_EXTRA_COLUMNS = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")
_EXTRA_STOP = {"CPU", "NUMA", "GPU", "Affinity", "ID"}
_MISSING = re.compile(r"^\[.*\]$|^N/A$")


# The per-GPU facts the module returns, in this order.
GPU_FACT_KEYS = ("index", "uuid", "bus_id", "minor", "name", "compute_capability", "memory_mib", "persistence")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (nvidia-smi underlines the topo header) and carriage returns."""
    return _ANSI.sub("", text).replace("\r", "")


def _value(cell: str) -> str | None:
    """A CSV cell of nvidia-smi, or None for ``[N/A]``, ``N/A``, ``[Not Supported]`` and other bracketed notes."""
    cell = cell.strip()
    return None if not cell or _MISSING.match(cell) else cell


def normalize_bus_id(bus_id: str) -> str:
    """``00000000:18:00.0`` (nvidia-smi) -> ``0000:18:00.0`` (sysfs, /proc): 4-hex-digit domain, lower case."""
    bus_id = bus_id.strip().lower()
    parts = bus_id.split(":")
    if len(parts) == 3 and re.fullmatch(r"[0-9a-f]+", parts[0]):
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def parse_query_gpu(text: str) -> list[dict[str, Any]]:
    """GPUs from ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``.

    One dict per line with ``index``, ``uuid``, ``bus_id`` (normalised), ``name``, ``compute_capability`` (string as
    printed), ``memory_mib`` (int or None) and ``persistence`` (bool or None), sorted by index; lines that are not
    such a row are skipped. The name is
    the middle field, so a comma in it does not shift the others.
    """
    gpus = []
    for line in strip_ansi(text).splitlines():
        head = line.split(",", 3)
        if len(head) < 4:
            continue
        tail = head[3].rsplit(",", 3)
        if len(tail) < 4:
            continue
        index, uuid, bus_id = (c.strip() for c in head[:3])
        name, cap, memory, persistence = tail
        if not index.isdigit():
            continue
        mib = _value(memory)
        if mib is not None:
            mib = mib.removesuffix("MiB").strip()
        bus = _value(bus_id)
        gpus.append({
            "index": int(index),
            "uuid": _value(uuid),
            "bus_id": normalize_bus_id(bus) if bus else None,
            "name": _value(name),
            "compute_capability": _value(cap),
            "memory_mib": int(mib) if mib is not None and mib.isdigit() else None,
            "persistence": {"Enabled": True, "Disabled": False}.get(persistence.strip()),
        })
    return sorted(gpus, key=lambda g: g["index"])


def parse_versions(text: str) -> tuple[str | None, str | None]:
    """(driver version, CUDA version) from ``nvidia-smi --version`` or the header of plain ``nvidia-smi``."""
    text = strip_ansi(text)
    driver = re.search(r"DRIVER version\s*:\s*([0-9][\w.-]*)", text, re.IGNORECASE)
    cuda = re.search(r"CUDA Version\s*:\s*([0-9][\w.-]*)", text, re.IGNORECASE)
    return (driver.group(1) if driver else None, cuda.group(1) if cuda else None)


def parse_topo_matrix(text: str) -> dict[str, Any]:
    """The matrix of ``nvidia-smi topo -m`` (or of ``topo -p2p r``, same layout).

    The header is the first line that starts with a device label (``GPU0``, ``NIC0``, ``mlx5_0``), possibly after
    whitespace, and has no ``X`` cell; its device columns are the labels before ``CPU Affinity`` / ``NUMA Affinity`` /
    ``GPU NUMA ID``. Each following line whose first word is a device column is a row; parsing stops at ``Legend:``.
    Cells are tab separated (a ``X`` cell is `` X ``), but any whitespace works for the device cells. ANSI escapes
    (nvidia-smi underlines the header) are ignored.

    Returns ``{"columns": [labels], "rows": {label: {column: cell}}, "affinity": {label: {"CPU Affinity": ...}}}``;
    affinity values are None when empty. Never raises; text without a matrix gives empty results.
    """
    columns: list[str] = []
    extras: list[str] = []
    rows: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {}
    for line in strip_ansi(text).splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].rstrip(":") == "Legend":
            break
        if not columns:
            if "X" in words or not re.fullmatch(r"[A-Za-z][\w.-]*\d", words[0]):
                continue
            labels = []
            for word in words:
                if word in _EXTRA_STOP:
                    break
                labels.append(word)
            columns = list(dict.fromkeys(labels))
            extras = _EXTRA_COLUMNS.findall(line)
            continue
        label = words[0]
        if label not in columns:
            continue
        cells = words[1:1 + len(columns)]
        rows[label] = dict(zip(columns, cells, strict=False))
        if extras:
            affinity[label] = _affinity(line, len(columns), extras)
    return {"columns": columns, "rows": rows, "affinity": affinity}


def _affinity(line: str, ncolumns: int, extras: list[str]) -> dict[str, str | None]:
    """The CPU/NUMA affinity cells of one ``topo -m`` row, keyed by the header's names."""
    if "\t" in line:
        rest = [c.strip() for c in line.strip("\n").split("\t")[1 + ncolumns:]]
        # nvidia-smi pads "NUMA Affinity" with a second tab ("0\t\tN/A"): drop empty cells, rightmost first.
        while len(rest) > len(extras) and "" in rest:
            del rest[len(rest) - 1 - rest[::-1].index("")]
    else:
        rest = line.split()[1 + ncolumns:]
    return {name: (rest[i] or None) if i < len(rest) else None for i, name in enumerate(extras)}


def gpu_pairs(matrix: dict[str, Any]) -> dict[str, str]:
    """``{"i,j": cell}`` for the GPU pairs of a parsed matrix, i < j (nvidia-smi indexes); a cell missing from
    row i is taken from row j."""
    gpus = sorted((int(m.group(1)), label) for label in matrix["rows"] if (m := _GPU_LABEL.fullmatch(label)))
    pairs: dict[str, str] = {}
    for a, (i, row_i) in enumerate(gpus):
        for j, row_j in gpus[a + 1:]:
            cell = matrix["rows"][row_i].get(row_j) or matrix["rows"][row_j].get(row_i)
            if cell:
                pairs[f"{i},{j}"] = cell
    return pairs


def parse_p2p(text: str) -> dict[str, str]:
    """``{"i,j": status}`` (OK, NS, CNS, GNS, TNS, DR, U) from ``nvidia-smi topo -p2p r``."""
    return gpu_pairs(parse_topo_matrix(text))


def parse_information(text: str) -> dict[str, Any]:
    """``minor`` (int), ``uuid`` and ``bus`` (normalised) of ``/proc/driver/nvidia/gpus/<bus id>/information``;
    None for what the file does not say."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    minor = fields.get("Device Minor", "")
    bus = fields.get("Bus Location")
    return {
        "minor": int(minor) if minor.isdigit() else None,
        "uuid": fields.get("GPU UUID") or None,
        "bus": normalize_bus_id(bus) if bus else None,
    }


def parse_os_release(text: str) -> dict[str, str | None]:
    """``id``, ``version_id`` and ``codename`` (``ID``, ``VERSION_ID``, ``VERSION_CODENAME``) of an os-release file."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or key.startswith("#"):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        values[key.strip()] = value
    return {
        "id": values.get("ID") or None,
        "version_id": values.get("VERSION_ID") or None,
        "codename": values.get("VERSION_CODENAME") or None,
    }


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def iommu_mode(device_dir: str) -> str | None:
    """IOMMU mode of one PCI device directory (``/sys/bus/pci/devices/<bdf>``): ``off`` without ``iommu_group``,
    ``passthrough`` for group type ``identity``, else ``translated`` (``DMA``, ``DMA-FQ``, and a group whose type
    the kernel does not publish); None when the directory does not exist."""
    if not os.path.isdir(device_dir):
        return None
    if not os.path.exists(os.path.join(device_dir, "iommu_group")):
        return "off"
    kind = (_read(os.path.join(device_dir, "iommu_group", "type")) or "").strip()
    return "passthrough" if kind == "identity" else "translated"


def combined_iommu(modes: list[str | None]) -> str | None:
    """One mode for the host: translated if any GPU is translated, else passthrough if any is, else off;
    None when no GPU directory was found."""
    for mode in ("translated", "passthrough", "off"):
        if mode in modes:
            return mode
    return None


def pci_functions(root: str, vendor: str, class_prefix: str) -> list[str]:
    """Sorted PCI addresses under ``root`` (``/sys/bus/pci/devices``) whose ``vendor`` is ``vendor`` and whose
    ``class`` starts with ``class_prefix`` (``0x0680`` for NVSwitch bridges, ``0x03`` for GPUs)."""
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    found = []
    for entry in entries:
        dev_vendor = (_read(os.path.join(root, entry, "vendor")) or "").strip().lower()
        dev_class = (_read(os.path.join(root, entry, "class")) or "").strip().lower()
        if dev_vendor == vendor and dev_class.startswith(class_prefix):
            found.append(entry)
    return sorted(found)


def _natural(path: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def device_nodes(dev: str) -> dict[str, list[str]]:
    """``nvswitch_devices`` (``nvidia-nvswitch<N>``), ``infiniband_devices`` (everything under ``infiniband/``) and
    ``imex_channels`` (``nvidia-caps-imex-channels/channel<N>``) under ``dev``, each in natural order."""
    def matching(pattern: str, name: str) -> list[str]:
        return sorted((p for p in glob.glob(os.path.join(dev, pattern)) if re.fullmatch(name, os.path.basename(p))), key=_natural)

    return {
        "nvswitch_devices": matching("nvidia-nvswitch*", r"nvidia-nvswitch\d+"),
        "infiniband_devices": matching("infiniband/*", r".+"),
        "imex_channels": matching("nvidia-caps-imex-channels/channel*", r"channel\d+"),
    }


def parse_python_probe(out: str) -> tuple[str | None, bool]:
    """(version, headers) from the output of :data:`PYTHON_PROBE`."""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    version = lines[0] if lines and re.fullmatch(r"\d+\.\d+\.\d+\S*", lines[0]) else None
    return version, len(lines) > 1 and lines[1] == "True"


def _which(module: AnsibleModule, name: str) -> str | None:
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) and os.path.isfile(name) else None
    return module.get_bin_path(name)


def gpu_state(module: AnsibleModule, nvidia_smi: str | None) -> dict[str, Any]:
    """driver_loaded, driver/CUDA versions, GPUs (without minors) and topology from nvidia-smi."""
    state: dict[str, Any] = {"driver_loaded": False, "driver_version": None, "cuda_version": None, "gpus": [],
                             "topology": {"links": {}, "p2p_read": {}, "nvlink": False}}
    if not nvidia_smi:
        return state
    rc, out, _ = module.run_command([nvidia_smi, f"--query-gpu={QUERY_FIELDS}", "--format=csv,noheader,nounits"])
    if rc != 0:
        return state
    state["driver_loaded"] = True
    state["gpus"] = parse_query_gpu(out)
    rc, out, _ = module.run_command([nvidia_smi, "--version"])
    driver, cuda = parse_versions(out) if rc == 0 else (None, None)
    if driver is None or cuda is None:
        rc, out, _ = module.run_command([nvidia_smi])
        header_driver, header_cuda = parse_versions(out) if rc == 0 else (None, None)
        driver, cuda = driver or header_driver, cuda or header_cuda
    state["driver_version"], state["cuda_version"] = driver, cuda
    rc, out, _ = module.run_command([nvidia_smi, "topo", "-m"])
    links = gpu_pairs(parse_topo_matrix(out)) if rc == 0 else {}
    rc, out, _ = module.run_command([nvidia_smi, "topo", "-p2p", "r"])
    p2p = parse_p2p(out) if rc == 0 else {}
    nvlink = any(re.fullmatch(r"NV\d+", cell) for cell in links.values())
    state["topology"] = {"links": links, "p2p_read": p2p, "nvlink": nvlink}
    return state


def minor_of(bus_id: str | None, uuid: str | None, proc_gpus: str) -> int | None:
    """Device minor of a GPU from ``<proc_gpus>/<bus id>/information``, else from the information file naming its UUID."""
    if bus_id:
        text = _read(os.path.join(proc_gpus, bus_id, "information"))
        if text is not None:
            return parse_information(text)["minor"]
    if uuid:
        for path in sorted(glob.glob(os.path.join(proc_gpus, "*", "information"))):
            info = parse_information(_read(path) or "")
            if info["uuid"] == uuid:
                return info["minor"]
    return None


def python_facts(module: AnsibleModule, python: str) -> dict[str, Any] | None:
    """path, version and headers of the interpreter ``python``; None when it is not found or does not run."""
    path = _which(module, python)
    if not path:
        return None
    rc, out, _ = module.run_command([path, "-c", PYTHON_PROBE])
    version, headers = parse_python_probe(out) if rc == 0 else (None, False)
    return {"path": path, "version": version, "headers": headers} if version else None


def gather(module: AnsibleModule, python: str, nvidia_smi: str) -> dict[str, Any]:
    """The whole ``nvidia_gpu_facts`` mapping."""
    state = gpu_state(module, _which(module, nvidia_smi))
    gpus = state["gpus"]
    for gpu in gpus:
        gpu["minor"] = minor_of(gpu["bus_id"], gpu["uuid"], PROC_NVIDIA_GPUS)
    caps = {g["compute_capability"] for g in gpus if g["compute_capability"]}
    gpu_bdfs = [g["bus_id"] for g in gpus if g["bus_id"]] or pci_functions(PCI_DEVICES, "0x10de", "0x03")
    os_text = next((text for text in map(_read, OS_RELEASE) if text is not None), "")
    compiler = next((path for path in map(module.get_bin_path, ("cc", "gcc")) if path), None)
    return {
        "schema": SCHEMA,
        "driver_loaded": state["driver_loaded"],
        "driver_version": state["driver_version"],
        "cuda_version": state["cuda_version"],
        "gpus": [{key: gpu[key] for key in GPU_FACT_KEYS} for gpu in gpus],
        "gpu_count": len(gpus),
        "compute_capabilities": sorted(caps, key=_natural),
        "topology": state["topology"],
        "iommu": combined_iommu([iommu_mode(os.path.join(PCI_DEVICES, bdf)) for bdf in gpu_bdfs]),
        "nvswitch_pci": pci_functions(PCI_DEVICES, "0x10de", "0x0680"),
        **device_nodes(DEV),
        "os": parse_os_release(os_text),
        "python": python_facts(module, python),
        "compilers": {"cc": compiler},
    }
