# SPDX-License-Identifier: Apache-2.0
"""Multi-node SGLang instances declared by inventory groups, and rollout units built from them.

One SGLang instance may span several hosts (``--nnodes``, ``--node-rank``, ``--dist-init-addr``).
Operators do not type those: a host sets ``sglang_multinode_group`` to the name of an inventory
group, and the group's hosts, in inventory order, are node ranks 0, 1, ...; ``dist_init_addr`` is
the first host's address (``sglang_multinode_addr``, else its ``ansible_host``, else its inventory
name) and ``sglang_multinode_port`` (default 20000) as the first host sets it.

A rollout treats such an instance as one unit: :func:`rollout_units` groups the hosts and
:func:`rollout_plan` turns a canary count and Ansible's ``serial`` forms into host lists and batch
sizes that never split an instance. Pure Python, no Ansible import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PORT = 20000
GROUP_VAR = "sglang_multinode_group"
PORT_VAR = "sglang_multinode_port"
ADDR_VAR = "sglang_multinode_addr"

# get(host, variable) -> the host's value, or None when the host does not define it.
Getter = Callable[[str, str], Any]


def hostvars_getter(hostvars: Any) -> Getter:
    """A :data:`Getter` over Ansible's ``hostvars`` (or a plain mapping of mappings): undefined -> None."""

    def get(host: str, name: str) -> Any:
        if host not in hostvars:
            return None
        host_vars = hostvars[host]
        return host_vars[name] if name in host_vars else None

    return get


class LayoutError(ValueError):
    """A multi-node declaration that cannot be turned into node ranks."""

    def __init__(self, variable: str, value: Any, message: str, fix: str) -> None:
        super().__init__(message)
        self.variable, self.value, self.message, self.fix = variable, value, message, fix


@dataclass(frozen=True)
class Layout:
    """Where one host sits in its multi-node instance."""

    group: str
    members: tuple[str, ...]
    node_rank: int
    addr: str
    port: int

    @property
    def nnodes(self) -> int:
        """Number of hosts (nodes) of the instance."""
        return len(self.members)

    @property
    def dist_init_addr(self) -> str:
        """``host:port`` of node rank 0 (IPv6 addresses in brackets)."""
        host = f"[{self.addr}]" if ":" in self.addr and not self.addr.startswith("[") else self.addr
        return f"{host}:{self.port}"

    def as_dict(self) -> dict[str, Any]:
        """What the validator and the roles read (plain types only)."""
        return {
            "group": self.group,
            "members": list(self.members),
            "nnodes": self.nnodes,
            "node_rank": self.node_rank,
            "dist_init_addr": self.dist_init_addr,
        }


def _port(value: Any, host: str) -> int:
    if value in (None, ""):
        return DEFAULT_PORT
    text = str(value).strip()
    if not re.fullmatch(r"\d+", text) or not 1 <= int(text) <= 65535:
        raise LayoutError(PORT_VAR, value, f"{PORT_VAR} on {host} must be a TCP port (1-65535), got {value!r}.",
                          f"set {PORT_VAR} to a free port on the rank-0 host, e.g. {DEFAULT_PORT}")
    return int(text)


def host_layout(host: str, get: Getter, groups: Mapping[str, Sequence[str]]) -> Layout | None:
    """The layout of ``host``, or None when it is a single-node server; LayoutError when misdeclared."""
    group = get(host, GROUP_VAR)
    if group in (None, ""):
        return None
    group = str(group)
    if group not in groups:
        raise LayoutError(GROUP_VAR, group, f"{GROUP_VAR} names the group {group!r}, which the inventory does not have.",
                          "create the group with the instance's hosts in node-rank order, or fix the name")
    members = tuple(dict.fromkeys(str(h) for h in groups[group]))
    if host not in members:
        raise LayoutError(GROUP_VAR, group, f"{host} sets {GROUP_VAR}={group!r} but is not a host of that group.",
                          f"add {host} to the group {group}, or remove {GROUP_VAR} from it")
    if len(members) < 2:
        raise LayoutError(GROUP_VAR, group, f"the multi-node group {group!r} has {len(members)} host; an instance across "
                          "nodes needs at least 2.", f"add the other nodes to {group}, or remove {GROUP_VAR}")
    for other in members:
        theirs = get(other, GROUP_VAR)
        if str(theirs or "") != group:
            raise LayoutError(GROUP_VAR, group, f"{other}, a host of {group!r}, has {GROUP_VAR}={theirs!r}: the hosts of one "
                              "instance must all name its group.", f"set {GROUP_VAR}: {group} in group_vars/{group}.yml")
    first = members[0]
    addr = get(first, ADDR_VAR) or get(first, "ansible_host") or first
    return Layout(group=group, members=members, node_rank=members.index(host), addr=str(addr).strip(),
                  port=_port(get(first, PORT_VAR), first))


def rollout_units(hosts: Sequence[str], get: Getter, groups: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Split ``hosts`` (in order) into rollout units: a multi-node instance is one unit, in node-rank order.

    A unit holds only the instance's hosts that are in ``hosts``; the validator refuses a run that
    leaves some of them out. Misdeclared groups count as single hosts here (the validator reports them).
    """
    units: list[list[str]] = []
    placed: set[str] = set()
    for host in dict.fromkeys(hosts):
        if host in placed:
            continue
        try:
            layout = host_layout(host, get, groups)
        except LayoutError:
            layout = None
        unit = [h for h in layout.members if h in hosts and h not in placed] if layout else [host]
        placed.update(unit)
        units.append(unit)
    return units


def _count(value: Any, total: int) -> int:
    """One item of Ansible's ``serial``: an int or a percentage of ``total``, at least 1."""
    text = str(value).strip()
    try:
        number = int(float(text[:-1]) * total / 100) if text.endswith("%") else int(text)
    except ValueError:
        raise ValueError(f"rollout_serial item {value!r} is neither a number nor a percentage") from None
    return max(number, 1)


def rollout_plan(hosts: Sequence[str], get: Getter, groups: Mapping[str, Sequence[str]],
                 canary: Any = 1, serial: Any = 1) -> dict[str, Any]:
    """Canary hosts, the other hosts and the batch sizes (in hosts) for ``serial``, counted in units.

    ``canary`` is a number of units; ``serial`` an int, a percentage or a list of them (the last
    repeats), as Ansible's play keyword, applied to the units after the canary.
    """
    units = rollout_units(hosts, get, groups)
    n_canary = int(canary)
    if n_canary < 1:
        raise ValueError("rollout_canary must be at least 1")
    first, rest = units[:n_canary], units[n_canary:]
    items = list(serial) if isinstance(serial, (list, tuple)) else [serial]
    if not items:
        items = [len(rest) or 1]
    sizes = [_count(item, len(rest)) for item in items]
    batches: list[int] = []
    index = 0
    while index < len(rest):
        take = sizes[min(len(batches), len(sizes) - 1)]
        batch = rest[index:index + take]
        batches.append(sum(len(u) for u in batch))
        index += take
    return {
        "canary": [h for u in first for h in u],
        "rest": [h for u in rest for h in u],
        "batches": batches,
    }
