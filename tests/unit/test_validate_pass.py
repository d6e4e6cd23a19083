"""The validate action plugin's pass over the fleet reads what Ansible's hostvars hold, however the inventory is laid out.

The pass (``ActionModule.run``) pauses Python's cyclic garbage collector and lists the connection plugins once
instead of once per host (Ansible's fact cleaning lists them on every ``hostvars`` read). Neither may change a value:
random inventories in both layouts (one ``hosts.yml`` with the variables inline, or ``host_vars/<host>.yml`` and
``group_vars/<group>.yml`` files), overlapping keys at every level, nested groups, cached facts (some of them the
restricted keys the cleaning removes) and extra vars are read inside the pass and with Ansible as it is: the same.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from ansible_collections.blackwell.sglang.plugins.action import validate as validate_plugin
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import HostVarsCache, read_host_vars
from hypothesis import settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
KEYS = ["a", "b", "sglang_args", "sglang_env", "sglang_model_path", "nvidia_gpu_count", "sglang_version"]
SCALARS = st.one_of(st.integers(-3, 3), st.booleans(), st.sampled_from(["x", "y", "", "0.5.23", "{{ a }}", "{{ b | default(1) }}"]))
VALUES = st.one_of(SCALARS, st.dictionaries(st.sampled_from(["tp_size", "k", "NCCL"]), SCALARS, max_size=2),
                   st.lists(SCALARS, max_size=2))
VARS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4)
FACTS = st.dictionaries(st.sampled_from(["ansible_local", "ansible_ssh_extra", "ansible_python_interpreter", "a", "custom",
                                         "ansible_distribution"]), SCALARS, max_size=3)
HOSTS = ["h0", "h1", "h2", "h3"]
GROUPS = ["g0", "g1", "g2"]


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, Any]:
    hosts = HOSTS[:draw(st.integers(1, len(HOSTS)))]
    return {
        "layout": draw(st.sampled_from(["inline", "files"])),
        "hosts": {h: draw(VARS) for h in hosts},
        "groups": {g: {"members": draw(st.lists(st.sampled_from(hosts), unique=True)), "vars": draw(VARS)} for g in GROUPS},
        "nested": draw(st.booleans()),  # g1 a child of g0: its variables win over g0's
        "all": draw(VARS),
        "facts": {h: draw(FACTS) for h in hosts if draw(st.booleans())},
        "extra": draw(st.dictionaries(st.sampled_from(["a", "sglang_version"]), SCALARS, max_size=1)),
    }


def write(root: Path, spec: dict[str, Any]) -> Path:
    """The inventory ``spec`` as one hosts.yml (inline) or hosts.yml + host_vars/ + group_vars/ (files)."""
    inline = spec["layout"] == "inline"
    children: dict[str, Any] = {}
    for name, group in spec["groups"].items():
        children[name] = {"hosts": {h: None for h in group["members"]}}
        if inline and group["vars"]:
            children[name]["vars"] = group["vars"]
    if spec["nested"]:
        children["g0"]["children"] = {"g1": None}
    everything: dict[str, Any] = {"hosts": {h: (v or None) if inline else None for h, v in spec["hosts"].items()}, "children": children}
    if inline and spec["all"]:
        everything["vars"] = spec["all"]
    if not inline:
        (root / "host_vars").mkdir()
        (root / "group_vars").mkdir()
        for name, data in spec["hosts"].items():
            (root / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(data))
        for name, group in [*spec["groups"].items(), ("all", {"vars": spec["all"]})]:
            (root / "group_vars" / f"{name}.yml").write_text(yaml.safe_dump(group["vars"]))
    (root / "hosts.yml").write_text(yaml.safe_dump({"all": everything}))
    return root / "hosts.yml"


def read_everything(inventory_file: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Every host's raw variables (what hostvars is built from) and what the validator reads of them."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inventory_file)])
    manager = VariableManager(loader=loader, inventory=inventory)
    manager._extra_vars = dict(spec["extra"])  # pylint: disable=protected-access
    for host, facts in spec["facts"].items():
        manager.set_host_facts(host, dict(facts))
    hostvars = HostVars(inventory, manager, loader)
    cache = HostVarsCache(hostvars, loader)
    out: dict[str, Any] = {}
    for host in sorted(inventory.hosts):
        raw = hostvars.raw_get(host)
        out[host] = {"raw": {k: v for k, v in raw.items() if k != "vars"}, "read": _read(cache, host)}
    return out


def _read(cache: HostVarsCache, host: str) -> Any:
    try:
        return read_host_vars(cache, host)
    except Exception as error:  # noqa: BLE001 (a template error must be the same error both ways)
        return f"{type(error).__name__}: {error}"


def _pass() -> Any:
    stack = __import__("contextlib").ExitStack()
    stack.enter_context(validate_plugin._collector_paused())  # pylint: disable=protected-access
    return stack


def same_inside_the_pass(spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as root:
        inventory_file = write(Path(root), spec)
        plain = read_everything(inventory_file, spec)
        with _pass():
            inside = read_everything(inventory_file, spec)
    assert inside == plain
    assert set(plain) >= set(spec["hosts"])


# Ansible's inventory plugins load through its collection finder, which this process (the collection on sys.path)
# does not install: the property runs in a child process that does, with this profile's number of examples.
_PROPERTY = """
import sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([sys.argv[1]])
sys.path.insert(0, sys.argv[2])
from hypothesis import given, settings
import test_validate_pass as t
settings(max_examples=int(sys.argv[3]), derandomize=sys.argv[4] == "1", deadline=None, database=None,
         print_blob=True)(given(spec=t.inventories())(t.same_inside_the_pass))()
print("ok")
"""


def test_the_pass_reads_what_hostvars_holds() -> None:
    profile = settings()
    proc = subprocess.run([sys.executable, "-c", _PROPERTY, str(REPO / "collections"), str(Path(__file__).parent),
                           str(profile.max_examples), "1" if profile.derandomize else "0"],
                          capture_output=True, text=True, timeout=1200, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-4000:] + proc.stderr[-4000:]


def test_the_pass_restores_the_collector() -> None:
    with _pass():
        assert not gc.isenabled()
    assert gc.isenabled()
