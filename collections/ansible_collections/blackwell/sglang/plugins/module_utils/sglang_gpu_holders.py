# SPDX-License-Identifier: Apache-2.0
"""The processes holding NVIDIA device files, sorted into kinds, and the release of one service's GPUs.

Shared by the modules ``gpu_holders`` (query or release) and ``server_restart`` (stop, release, start in one
module run). See the ``gpu_holders`` module's documentation for the kinds and the release.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import time
from typing import Any

# The options of a release, as the modules' argument_spec (server_restart names the unit ``unit``).
HOLDER_OPTIONS: dict[str, dict[str, Any]] = {
    "devices": {"type": "list", "elements": "str", "default": ["/dev/nvidia*"]},
    "owner_user": {"type": "str"},
    "title_prefixes": {"type": "list", "elements": "str", "default": ["sglang::"]},
    "sibling_units": {"type": "list", "elements": "str", "default": []},
    "owner_devices": {"type": "list", "elements": "str", "default": []},
    "foreign_fails": {"type": "bool", "default": True},
    "allow": {
        "type": "list",
        "elements": "str",
        "default": ["nvidia-persistenced", "nv-hostengine", "dcgm-exporter", "nvidia-fabricmanager"],
    },
    "kill_foreign": {"type": "bool", "default": False},
    "term_timeout": {"type": "float", "default": 10},
    "wait_timeout": {"type": "float", "default": 60},
    "port": {"type": "int"},
    "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
}


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def scan(devices: set[str], proc: str = "/proc") -> dict[int, list[str]]:
    """pid -> sorted device paths it holds open."""
    found: dict[int, set[str]] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        fd_dir = os.path.join(proc, entry, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in devices:
                found.setdefault(int(entry), set()).add(target)
    return {pid: sorted(paths) for pid, paths in found.items()}


def describe(pid: int, paths: list[str], proc: str = "/proc") -> dict[str, Any]:
    """What a holder is: name, user, command line, cgroup."""
    base = os.path.join(proc, str(pid))
    cmdline = _read(os.path.join(base, "cmdline")).replace("\0", " ").strip()
    try:
        uid = os.stat(base).st_uid
        user = pwd.getpwuid(uid).pw_name
    except (OSError, KeyError):
        user = ""
    try:
        exe = os.path.basename(os.readlink(os.path.join(base, "exe")))
    except OSError:
        exe = ""
    return {
        "pid": pid,
        "name": _read(os.path.join(base, "comm")).strip(),
        "exe": exe,
        "user": user,
        "cmdline": cmdline,
        "cgroup": _read(os.path.join(base, "cgroup")).strip(),
        "devices": paths,
    }


def in_unit(holder: dict[str, Any], unit: str | None) -> bool:
    """True when the holder runs in the cgroup of systemd ``unit`` (or below it)."""
    return bool(unit) and any(line.endswith("/" + unit) or f"/{unit}/" in line for line in holder["cgroup"].splitlines())


def classify(holder: dict[str, Any], params: dict[str, Any]) -> str:
    """allowed / ours / sibling / foreign / other (see the gpu_holders module's documentation)."""
    allow = [a[:15] for a in params["allow"]]
    if holder["name"][:15] in allow or holder["exe"] in params["allow"]:
        return "allowed"
    if in_unit(holder, params.get("owner_unit")):
        return "ours"
    if any(in_unit(holder, unit) for unit in params.get("sibling_units") or []):
        return "sibling"
    devices = set(params.get("owner_devices") or [])
    holds_ours = not devices or bool(devices & set(holder["devices"]))
    first = holder["cmdline"].split(" ", 1)[0]
    service = (params.get("owner_user") and holder["user"] == params["owner_user"]) or any(
        first.startswith(p) or holder["name"].startswith(p[:15]) for p in params["title_prefixes"])
    if service:
        return "ours" if holds_ours else "sibling"
    return "foreign" if holds_ours else "other"


def listening(port: int, proc: str = "/proc") -> bool:
    """True when something listens on TCP ``port`` (IPv4 or IPv6)."""
    for table in ("net/tcp", "net/tcp6"):
        for line in _read(os.path.join(proc, table)).splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def compute_app_pids(module: Any, nvidia_smi: str) -> set[int] | None:
    """PIDs nvidia-smi reports as compute apps; None when nvidia-smi is absent or fails."""
    path = shutil.which(nvidia_smi) or (nvidia_smi if os.path.isabs(nvidia_smi) and os.access(nvidia_smi, os.X_OK) else None)
    if not path:
        return None
    rc, out, _ = module.run_command([path, "--query-compute-apps=pid", "--format=csv,noheader,nounits"])
    if rc != 0:
        return None
    return {int(line.strip()) for line in out.splitlines() if line.strip().isdigit()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _read(f"/proc/{pid}/stat")
    return not (stat and stat.rsplit(")", 1)[-1].split()[0] == "Z")


def terminate(pids: list[int], term_timeout: float) -> None:
    """SIGTERM, wait, SIGKILL what is left."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + term_timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def holders_of(params: dict[str, Any]) -> tuple[set[str], list[dict[str, Any]]]:
    """(the device paths of ``params["devices"]``, every process holding one, described and classified)."""
    devices = {os.path.realpath(p) for pattern in params["devices"] for p in glob.glob(pattern)}
    devices |= {p for pattern in params["devices"] for p in glob.glob(pattern)}
    holders = [describe(pid, paths) for pid, paths in sorted(scan(devices).items())]
    for holder in holders:
        holder["kind"] = classify(holder, params)
    return devices, holders


def release(module: Any, params: dict[str, Any], state: str, result: dict[str, Any]) -> dict[str, Any]:
    """Find the holders and, with ``state`` released, terminate the service's (and, with kill_foreign, the foreign
    ones) and wait until the devices, the port and nvidia-smi are clear.

    Adds holders, killed and foreign to ``result`` (changed when something was killed) and returns it; fails the
    module (``module.fail_json`` with ``result``) on a foreign holder in the way or a release that times out.
    """
    devices, holders = holders_of(params)
    ours = [h for h in holders if h["kind"] == "ours"]
    foreign = [h for h in holders if h["kind"] == "foreign"]
    result.update({"holders": holders, "killed": [], "foreign": foreign})
    if foreign and not params["kill_foreign"] and params["foreign_fails"]:
        names = "; ".join(f"{h['name']} (pid {h['pid']}, user {h['user'] or '?'}) holds {', '.join(h['devices'])}" for h in foreign)
        module.fail_json(
            msg=f"foreign process(es) hold NVIDIA devices: {names}. Stop them, or set "
            "sglang_server_kill_foreign_gpu_holders: true to let the restart terminate them.",
            **result,
        )
    if state == "query":
        return result
    targets = ours + (foreign if params["kill_foreign"] else [])
    if targets:
        result["changed"] = True
        result["killed"] = targets
        if module.check_mode:
            return result
        terminate([h["pid"] for h in targets], params["term_timeout"])
    pids = {h["pid"] for h in targets}
    deadline = time.monotonic() + params["wait_timeout"]
    while True:
        # With nothing terminated, no process can be left holding a device or listed by nvidia-smi: only the port
        # is waited for (no /proc scan, no nvidia-smi run).
        left = [pid for pid in scan(devices) if pid in pids] if pids else []
        port_busy = params["port"] is not None and listening(params["port"])
        apps = compute_app_pids(module, params["nvidia_smi"]) if pids else None
        smi_left = sorted((apps or set()) & pids)
        if not left and not port_busy and not smi_left:
            return result
        if time.monotonic() > deadline:
            what = []
            if left:
                what.append(f"processes {left} still hold devices")
            if port_busy:
                what.append(f"port {params['port']} is still listening")
            if smi_left:
                what.append(f"nvidia-smi still lists compute apps {smi_left}")
            module.fail_json(msg=f"GPUs not released after {params['wait_timeout']}s: " + "; ".join(what), **result)
        time.sleep(0.25)
