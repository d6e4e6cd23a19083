#!/usr/bin/python
"""Ansible module: find the processes holding NVIDIA device files and release the ones of a service."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_holders
version_added: 0.1.0
short_description: List the processes holding NVIDIA devices, and release those of one service
description:
  - Scans C(/proc/*/fd) for processes holding the NVIDIA device files and sorts them into kinds.
    C(allowed) are on the O(allow) list (nvidia-persistenced, DCGM) and are never touched. C(ours) belong to
    the service, that is, they run in its systemd unit's cgroup, or they run as its user (or have a process title
    starting with one of O(title_prefixes)) outside every O(sibling_units) cgroup and hold one of
    O(owner_devices). C(sibling) belong to another instance on the same host (its unit's cgroup, or the
    service user holding none of O(owner_devices)) and are never touched. Everything else is C(foreign)
    when it holds one of O(owner_devices) (or O(owner_devices) is not given), else C(other) (listed only).
  - With O(state=released) the service's holders get SIGTERM, then SIGKILL after O(term_timeout); then the
    module waits until none is left, the port is free and C(nvidia-smi --query-compute-apps) no longer lists
    them (the driver frees GPU memory asynchronously after a kill).
  - A foreign holder fails the task, naming its PID, user and devices, unless O(kill_foreign) is true.
    This replaces C(fuser -k /dev/nvidia*), which also kills nvidia-persistenced, DCGM and other users' jobs.
options:
  devices:
    description: Device files (globs) to consider.
    type: list
    elements: str
    default: ["/dev/nvidia*"]
  owner_user:
    description: User the service runs as; its processes are the service's.
    type: str
  owner_unit:
    description: systemd unit of the service (e.g. C(sglang.service)); processes in its cgroup are the service's.
    type: str
  sibling_units:
    description: systemd units of the other SGLang instances of the host; processes in their cgroups are never touched.
    type: list
    elements: str
    default: []
  owner_devices:
    description:
      - The GPU device files of this instance (e.g. C(/dev/nvidia4)). When given, a process outside the unit's cgroup is
        the instance's (or a foreign holder in its way) only when it holds one of them.
    type: list
    elements: str
    default: []
  foreign_fails:
    description: Fail when a foreign holder is found (and O(kill_foreign) is false).
    type: bool
    default: true
  title_prefixes:
    description: Process titles (first word of the command line) that mark the service's processes.
    type: list
    elements: str
    default: ["sglang::"]
  allow:
    description: Process names never touched (compared with the kernel's 15-character name and the executable's name).
    type: list
    elements: str
    default: [nvidia-persistenced, nv-hostengine, dcgm-exporter, nvidia-fabricmanager]
  state:
    description: C(query) only reports; C(released) terminates the service's holders and waits until they are gone.
    type: str
    choices: [query, released]
    default: query
  kill_foreign:
    description: Also terminate foreign holders instead of failing.
    type: bool
    default: false
  term_timeout:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 10
  wait_timeout:
    description: Seconds to wait, after the kills, for the devices, the port and nvidia-smi to be clear.
    type: float
    default: 60
  port:
    description: TCP port that must not be listening any more (the server's HTTP port).
    type: int
  nvidia_smi:
    description: Path of nvidia-smi for the compute-apps check; skipped when not installed.
    type: str
    default: nvidia-smi
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Release the GPUs held by what is left of sglang.service
  blackwell.sglang.gpu_holders:
    owner_unit: sglang.service
    owner_user: sglang
    state: released
    port: 30000
"""

RETURN = r"""
holders:
  description: Every holder found before any kill, with pid, name, user, cmdline, devices and kind (ours, allowed, foreign).
  type: list
  returned: always
killed:
  description: The holders that were terminated (empty in check mode or with state=query).
  type: list
  returned: always
foreign:
  description: Foreign holders.
  type: list
  returned: always
"""

import glob
import os
import pwd
import shutil
import signal
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule


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
    """allowed / ours / sibling / foreign / other (see DOCUMENTATION)."""
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


def compute_app_pids(module: AnsibleModule, nvidia_smi: str) -> set[int] | None:
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "devices": {"type": "list", "elements": "str", "default": ["/dev/nvidia*"]},
            "owner_user": {"type": "str"},
            "owner_unit": {"type": "str"},
            "title_prefixes": {"type": "list", "elements": "str", "default": ["sglang::"]},
            "sibling_units": {"type": "list", "elements": "str", "default": []},
            "owner_devices": {"type": "list", "elements": "str", "default": []},
            "foreign_fails": {"type": "bool", "default": True},
            "allow": {
                "type": "list",
                "elements": "str",
                "default": ["nvidia-persistenced", "nv-hostengine", "dcgm-exporter", "nvidia-fabricmanager"],
            },
            "state": {"type": "str", "choices": ["query", "released"], "default": "query"},
            "kill_foreign": {"type": "bool", "default": False},
            "term_timeout": {"type": "float", "default": 10},
            "wait_timeout": {"type": "float", "default": 60},
            "port": {"type": "int"},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        supports_check_mode=True,
    )
    params = module.params
    devices = {os.path.realpath(p) for pattern in params["devices"] for p in glob.glob(pattern)}
    devices |= {p for pattern in params["devices"] for p in glob.glob(pattern)}
    holders = [describe(pid, paths) for pid, paths in sorted(scan(devices).items())]
    for holder in holders:
        holder["kind"] = classify(holder, params)
    ours = [h for h in holders if h["kind"] == "ours"]
    foreign = [h for h in holders if h["kind"] == "foreign"]
    result: dict[str, Any] = {"changed": False, "holders": holders, "killed": [], "foreign": foreign}
    if foreign and not params["kill_foreign"] and params["foreign_fails"]:
        names = "; ".join(f"{h['name']} (pid {h['pid']}, user {h['user'] or '?'}) holds {', '.join(h['devices'])}" for h in foreign)
        module.fail_json(
            msg=f"foreign process(es) hold NVIDIA devices: {names}. Stop them, or set "
            "sglang_server_kill_foreign_gpu_holders: true to let the restart terminate them.",
            **result,
        )
    if params["state"] == "query":
        module.exit_json(**result)
    targets = ours + (foreign if params["kill_foreign"] else [])
    if targets:
        result["changed"] = True
        result["killed"] = targets
        if module.check_mode:
            module.exit_json(**result)
        terminate([h["pid"] for h in targets], params["term_timeout"])
    pids = {h["pid"] for h in targets}
    deadline = time.monotonic() + params["wait_timeout"]
    while True:
        left = [pid for pid in scan(devices) if pid in pids]
        port_busy = params["port"] is not None and listening(params["port"])
        apps = compute_app_pids(module, params["nvidia_smi"])
        smi_left = sorted((apps or set()) & pids)
        if not left and not port_busy and not smi_left:
            break
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
    module.exit_json(**result)


if __name__ == "__main__":
    main()
