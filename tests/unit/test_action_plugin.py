"""Unit tests of the blackwell.sglang.validate action plugin.

The plugin is driven in-process: ``ActionModule`` with minimal stand-ins for the task, connection and
play context, and ``task_vars`` holding ``hostvars`` and ``ansible_play_hosts_all`` as Ansible passes
them.  ``hostvars`` is a mapping whose per-host views template on access in real Ansible; the stand-in
raises ``AnsibleUndefinedVariable`` for a variable that would not template.  Two short
``ansible-playbook`` runs check the same through real Ansible (templating, data tagging, exit code).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.blackwell.sglang.plugins.action import validate as validate_plugin
from ansible_collections.blackwell.sglang.plugins.action.validate import HOST_VARS, ActionModule, read_host_vars
from reference import INCIDENT, SAMPLE, load_reference
from role_defaults import ROLE_DEFAULTS

REPO = Path(__file__).resolve().parents[2]


REFERENCE = load_reference()


def ref_host(args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    host = copy.deepcopy(REFERENCE)
    host["sglang_args"].update(args or {})
    host.update(hostvars)
    # What Ansible's hostvars also hold and the plugin must not read.
    host.update(ansible_host="192.0.2.10", inventory_hostname="x", some_unrelated_var="{{ undefined_thing }}")
    return host


class HostView(Mapping):
    """One host's vars; names in ``broken`` raise like a Jinja expression using an undefined variable."""

    def __init__(self, data: dict[str, Any], broken: tuple[str, ...] = ()) -> None:
        self._data, self._broken = data, broken
        self.read: list[str] = []

    @property
    def raw(self) -> Mapping[str, Any]:
        """The variables before templating, as Ansible's per-host view keeps them: reading them templates nothing."""
        return self._data

    def __getitem__(self, key: str) -> Any:
        self.read.append(key)
        if key in self._broken:
            raise AnsibleUndefinedVariable(f"'no_such_var' is undefined. 'no_such_var' is undefined\nwhile templating {key}")
        return self._data[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def run_action(hostvars: dict[str, Any], args: dict[str, Any] | None = None, play_hosts: list[str] | None = None,
               groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    task = SimpleNamespace(args=dict(args or {}), async_val=0, check_mode=False, action="blackwell.sglang.validate")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/nonexistent"))
    # A real loader and templar: the action reads the roles' defaults files with them (the one source of defaults).
    loader = DataLoader()
    loader.set_basedir(str(REPO / "playbooks"))
    action = ActionModule(task, connection, SimpleNamespace(), loader=loader, templar=Templar(loader=loader),
                          shared_loader_obj=None)
    task_vars = {
        "hostvars": {name: view if isinstance(view, HostView) else HostView(view) for name, view in hostvars.items()},
        "ansible_play_hosts_all": list(hostvars) if play_hosts is None else play_hosts,
        "groups": {"all": list(hostvars), **(groups or {})},
    }
    shown: list[str] = []
    original = validate_plugin.display.display
    validate_plugin.display.display = lambda text, **_: shown.append(text)  # type: ignore[method-assign]
    try:
        result = action.run(task_vars=task_vars)
    finally:
        validate_plugin.display.display = original  # type: ignore[method-assign]
    # A passing run's one-line summary is printed after the report (if any): kept apart from the report.
    summary = [line for line in shown if line.startswith("validate: ")]
    assert summary in ([], [f"validate: {result['msg']}"]) and (not summary or not result["invalid_hosts"])
    result["_shown"] = [line for line in shown if not line.startswith("validate: ")]
    result["_summary"] = summary
    return result


def report(result: dict[str, Any]) -> str:
    """The readable report: returned (fail_on_error false) or printed by the plugin itself, once (a failing task)."""
    if "report" in result:
        assert result["_shown"] in ([], [result["report"]])
        return result["report"]
    assert len(result["_shown"]) <= 1
    return "".join(result["_shown"])


def blocks(result: dict[str, Any]) -> list[str]:
    """The report blocks of a result: one per distinct set of problems."""
    return [b for b in report(result).split("\n\n") if b]


# --- read_host_vars -------------------------------------------------------------------------------


def test_read_host_vars_reads_only_the_validator_inputs() -> None:
    view = HostView(ref_host(sglang_api_key="k"), broken=("some_unrelated_var",))
    data = read_host_vars({"h": view}, "h")
    assert set(data) == {"sglang_version", "sglang_model_path", "sglang_args", "sglang_env", "nvidia_gpu_count",
                         "nvidia_gpu_compute_capability", "sglang_api_key"}
    assert {"hf_token", "sglang_ssl_keyfile_password", "sglang_server_user", "sglang_server_service_name"} <= set(HOST_VARS)
    assert set(view.read) <= set(HOST_VARS)  # nothing else is templated: an unrelated broken var is harmless


# --- results ------------------------------------------------------------------------------------


def test_all_hosts_valid() -> None:
    result = run_action({"gpu-01": ref_host(), "gpu-02": ref_host(), "gpu-03": ref_host()})
    assert not result.get("failed")
    assert result["invalid_hosts"] == []
    assert result["changed"] is False and result["spec"] is None  # no run override: each host's sglang_spec
    assert set(result["hosts"]) == {"gpu-01", "gpu-02", "gpu-03"}
    host = result["hosts"]["gpu-02"]
    assert host["ok"] is True and host["argv"][:2] == ["--model-path", "/opt/sglang/models/" + REFERENCE["sglang_model_path"]]
    assert result["msg"] == "3 of 3 host(s) valid, 0 warning(s), each host's own sglang_spec"
    assert host["spec"] == {"mode": "keep", "host": "keep", "override": False}


def test_one_invalid_host_among_three() -> None:
    result = run_action({"gpu-01": ref_host(), "gpu-02": ref_host(INCIDENT), "gpu-03": ref_host()})
    assert result["failed"] is True
    assert result["invalid_hosts"] == ["gpu-02"]
    assert result["msg"] == ("SGLang configuration rejected for 1 of 3 host(s): gpu-02, 0 warning(s), "
                             "each host's own sglang_spec (report above)")
    assert "report" not in result  # printed once by the plugin, not again in the failed result
    assert "gpu-01" not in report(result) and "gpu-03" not in report(result)
    (block,) = blocks(result)
    assert block.startswith("gpu-02: 1 error(s), 0 warning(s) (SGLang 0.5.23)")
    assert "[spec.triple]" in block and "spec=auto" in block
    assert result["hosts"]["gpu-02"] == {"ok": False, "errors": ["sglang_args.speculative_num_steps: spec.triple"], "warnings": []}
    assert result["hosts"]["gpu-01"]["ok"] is True


def test_one_block_per_bad_host_in_play_order() -> None:
    hostvars = {"gpu-01": ref_host({"tp_size": 16}), "gpu-02": ref_host(), "gpu-03": ref_host(INCIDENT, nvidia_gpu_count=None)}
    result = run_action(hostvars)
    assert result["failed"] is True and result["invalid_hosts"] == ["gpu-01", "gpu-03"]
    assert result["msg"].startswith("SGLang configuration rejected for 2 of 3 host(s): gpu-01, gpu-03")
    first, second = blocks(result)
    assert first.startswith("gpu-01: 1 error(s)") and "[parallel.gpus]" in first and "spec.triple" not in first
    assert second.startswith("gpu-03: 2 error(s)") and "[spec.triple]" in second and "[host.hardware]" in second


def test_hosts_argument_limits_the_set() -> None:
    hostvars = {"gpu-01": ref_host(), "gpu-02": ref_host(INCIDENT), "gpu-03": ref_host()}
    result = run_action(hostvars, args={"hosts": ["gpu-01", "gpu-03"]})
    assert not result.get("failed") and result["invalid_hosts"] == []
    assert set(result["hosts"]) == {"gpu-01", "gpu-03"}
    result = run_action(hostvars, args={"hosts": ["gpu-02"]})
    assert result["failed"] is True and set(result["hosts"]) == {"gpu-02"}


def test_default_host_set_is_the_play() -> None:
    hostvars = {"gpu-01": ref_host(), "gpu-02": ref_host(INCIDENT)}
    result = run_action(hostvars, play_hosts=["gpu-01"])
    assert not result.get("failed") and set(result["hosts"]) == {"gpu-01"}


def test_each_host_uses_its_sglang_spec_unless_the_run_overrides_it() -> None:
    hostvars = {"gpu-01": ref_host(INCIDENT, sglang_spec="auto"), "gpu-02": ref_host(INCIDENT)}
    result = run_action(hostvars, args={"fail_on_error": False})
    assert result["invalid_hosts"] == ["gpu-02"]  # keep: the incident's flags as written
    result = run_action({"gpu-01": hostvars["gpu-01"]})
    assert result["hosts"]["gpu-01"]["spec"] == {"mode": "auto", "host": "auto", "override": False}
    result = run_action(hostvars, args={"spec": "auto"})
    assert result["invalid_hosts"] == [] and result["hosts"]["gpu-02"]["spec"] == {"mode": "auto", "host": "keep", "override": True}
    result = run_action({"gpu-01": ref_host(sglang_spec="sometimes")}, args={"fail_on_error": False})
    assert result["hosts"]["gpu-01"]["errors"] == ["sglang_spec: spec.mode"]
    result = run_action({"gpu-01": ref_host(sglang_spec=False)})  # YAML's unquoted off
    checked = result["hosts"]["gpu-01"]
    assert checked["spec"]["mode"] == "off" and [w["rule"] for w in checked["warnings"]] == ["spec.mode"]


def test_spec_argument_is_applied() -> None:
    result = run_action({"gpu-01": ref_host(INCIDENT)}, args={"spec": "auto"})
    assert not result.get("failed") and result["spec"] == "auto"
    assert "--speculative-eagle-topk" not in result["hosts"]["gpu-01"]["argv"]
    assert result["msg"].endswith("spec=auto")


def test_fail_on_error_false_reports_without_failing() -> None:
    result = run_action({"gpu-01": ref_host(), "gpu-02": ref_host(INCIDENT)}, args={"fail_on_error": False})
    assert not result.get("failed")
    assert result["invalid_hosts"] == ["gpu-02"]
    assert result["msg"] == "SGLang configuration rejected for 1 of 2 host(s): gpu-02, 0 warning(s), each host's own sglang_spec"
    (block,) = blocks(result)
    assert block.startswith("gpu-02:") and result["_shown"] == []  # the caller shows the report


def test_warnings_do_not_fail_but_are_reported() -> None:
    warned = ref_host({"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2})
    result = run_action({"gpu-01": ref_host(), "gpu-02": warned})
    assert not result.get("failed") and result["invalid_hosts"] == []
    assert result["msg"].startswith("2 of 2 host(s) valid, 1 warning(s), each host's own sglang_spec")
    assert result["_summary"] == ["validate: " + result["msg"]]  # printed: the default callback hides an ok msg
    (block,) = blocks(result)
    assert block.startswith("gpu-02: 0 error(s), 1 warning(s)") and "[spec.topk1_draft]" in block
    assert [w["rule"] for w in result["hosts"]["gpu-02"]["warnings"]] == ["spec.topk1_draft"]


def test_undefined_host_variable_becomes_a_host_template_problem() -> None:
    broken = HostView(ref_host(), broken=("sglang_args",))
    result = run_action({"gpu-01": ref_host(), "gpu-02": broken})
    assert result["failed"] is True and result["invalid_hosts"] == ["gpu-02"]
    assert result["hosts"]["gpu-02"] == {"ok": False, "errors": ["host variables: host.template"], "warnings": []}
    (block,) = blocks(result)
    assert "[host.template]" in block and "'no_such_var' is undefined" in block
    assert "while templating" not in block  # first line of the error only


def test_secrets_stay_out_of_the_result() -> None:
    result = run_action({"gpu-01": ref_host(sglang_api_key="vault-secret-1")})
    assert not result.get("failed")
    assert "vault-secret-1" not in repr(result)
    assert result["hosts"]["gpu-01"]["config_keys"] == ["api-key"]
    assert result["hosts"]["gpu-01"]["args"]["api_key"] == "<secret>"


@pytest.mark.parametrize("args", [{"host": ["gpu-01"]}, {"spec": "auto", "verbose": True}])
def test_unknown_task_argument_is_refused(args: dict[str, Any]) -> None:
    with pytest.raises(AnsibleActionFail, match="Invalid options"):
        run_action({"gpu-01": ref_host()}, args=args)


def test_summary_with_a_host_listed_twice() -> None:
    result = run_action({"gpu-02": ref_host(INCIDENT)}, args={"hosts": ["gpu-02", "gpu-02"], "fail_on_error": False})
    assert result["msg"].startswith("SGLang configuration rejected for 1 of 1 host(s): gpu-02,")


def test_hosts_with_identical_problems_share_one_block() -> None:
    hostvars = {f"gpu-{i:02}": ref_host({"tp_size": 16}) for i in range(7)}
    hostvars["gpu-x"] = ref_host(INCIDENT)
    result = run_action(hostvars, args={"fail_on_error": False})
    first, second = blocks(result)
    assert first.startswith("7 hosts (gpu-00, gpu-01, gpu-02, gpu-03, gpu-04 and 2 more): 1 error(s), 0 warning(s)")
    assert first.count("[parallel.gpus]") == 1 and second.startswith("gpu-x: 1 error(s)")
    assert len(result["hosts"]) == 8 and result["hosts"]["gpu-05"]["errors"] == ["sglang_args.tp_size: parallel.gpus"]


# --- through real ansible-playbook ----------------------------------------------------------------


@pytest.fixture(scope="module")
def three_host_inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inventory")
    (root / "group_vars").mkdir()
    (root / "host_vars").mkdir()
    (root / "group_vars" / "sglang_servers.yml").write_text((SAMPLE / "group_vars" / "sglang_servers.yml").read_text())
    good = yaml.safe_load((SAMPLE / "host_vars" / "blackwell-01.yml").read_text())
    bad = copy.deepcopy(good)
    bad["sglang_args"].update(INCIDENT)
    undefined = copy.deepcopy(good)
    undefined["sglang_model_path"] = "{{ no_such_variable }}"
    for name, data in (("good", good), ("bad", bad), ("undef", undefined)):
        (root / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(data))
    hosts = {"all": {"children": {"sglang_servers": {"hosts": {name: {"ansible_host": f"192.0.2.{i}"}
                                                               for i, name in enumerate(("good", "bad", "undef"), 10)}}}}}
    (root / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (root / "only.yml").write_text(
        "- hosts: sglang_servers\n  gather_facts: false\n  tasks:\n"
        "    - blackwell.sglang.validate:\n        hosts: \"{{ only }}\"\n      run_once: true\n"
    )
    return root


def ansible_playbook(inventory: Path, playbook: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_LOCAL_TEMP": str(inventory / ".tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
    }
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory / "hosts.yml"), str(playbook), *extra]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_validate_playbook_with_three_hosts(three_host_inventory: Path) -> None:
    proc = ansible_playbook(three_host_inventory, REPO / "playbooks" / "validate.yml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "SGLang configuration rejected for 2 of 3 host(s): bad, undef" in out
    assert "bad: 1 error(s)" in out and "[spec.triple]" in out
    assert "undef: 1 error(s)" in out and "[host.template]" in out and "no_such_variable" in out
    assert "good: " not in out  # no block for the valid host


def test_unknown_host_in_hosts_argument_is_reported_by_name(three_host_inventory: Path) -> None:
    proc = ansible_playbook(three_host_inventory, three_host_inventory / "only.yml", "-e", '{"only": ["good", "nosuch"]}')
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "TemplateContext" not in out
    assert "nosuch" in out


# --- each host's variables read once (HostVarsCache) ----------------------------------------------

_COMPARE_VIEWS = """
import json, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[2]])._install()
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import HOST_VARS, HostVarsCache

loader = DataLoader()
inventory = InventoryManager(loader=loader, sources=[sys.argv[1]])
manager = VariableManager(loader=loader, inventory=inventory)
manager._extra_vars = {"sglang_version": "0.5.23"}
hostvars = HostVars(inventory, manager, loader)
counted = HostVars(inventory, manager, loader)
calls = []
original = counted.raw_get
counted.raw_get = lambda name: calls.append(name) or original(name)
cache = HostVarsCache(counted, loader)
out = {}
for host in sorted(inventory.hosts):
    names = [n for n in HOST_VARS if n in hostvars[host]]
    out[host] = {"names": names == [n for n in HOST_VARS if n in cache[host]],
                 "values": {n: [cache[host][n], hostvars[host][n]] for n in names}}
    cache[host].get("sglang_args")
out["raw_get"] = calls.count("h1")
print(json.dumps(out, default=str))
"""


def test_host_vars_cache_gives_what_hostvars_templates(tmp_path: Path) -> None:
    """Plain values are taken as they are, templated ones through Ansible's own per-host view: same values."""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("base: 4\nsglang_model_path: org/model\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "h1.yml").write_text(
        "sglang_args: {tp_size: '{{ base * 2 }}', served_model_name: plain, enable_metrics: true, x: [1, '{{ base }}']}\n"
        "sglang_env: {A: '1', B: '{{ base }}'}\nnvidia_gpu_count: '{{ base }}'\nsglang_version: '0.5.0'\n"
        "sglang_spec: !unsafe '{{ raw }}'\n")
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"h1": {}, "h2": {"sglang_env": {"C": 3.5}}}}}))
    proc = subprocess.run([sys.executable, "-c", _COMPARE_VIEWS, str(tmp_path / "hosts.yml"), str(REPO / "collections")],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})
    assert proc.returncode == 0, proc.stderr
    out = __import__("json").loads(proc.stdout)
    assert out.pop("raw_get") == 1  # the variable manager ran once for the host, however many reads
    for host, seen in out.items():
        assert seen["names"], host
        for name, (cached, templated) in seen["values"].items():
            assert cached == templated, (host, name)
    assert out["h1"]["values"]["sglang_args"][0]["tp_size"] == 8 and out["h1"]["values"]["sglang_version"][0] == "0.5.23"
    assert out["h1"]["values"]["sglang_spec"][0] == "{{ raw }}"


def test_identical_inputs_are_validated_once_and_each_host_gets_its_own_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_hostplan

    calls: list[Any] = []
    real = sglang_hostplan.validate_host
    monkeypatch.setattr(sglang_hostplan, "validate_host", lambda raw, spec=None, defaults=None: calls.append(spec)
                        or real(raw, spec=spec, defaults=defaults))
    monkeypatch.setattr(sglang_hostplan, "_VALIDATED", {})
    hostvars = {f"gpu-{i:02}": ref_host() for i in range(5)} | {"gpu-x": ref_host(INCIDENT), "gpu-y": ref_host(INCIDENT)}
    result = run_action(hostvars, args={"fail_on_error": False})
    assert len(calls) == 2  # one good configuration, one bad
    assert result["invalid_hosts"] == ["gpu-x", "gpu-y"]
    assert result["hosts"]["gpu-00"] == result["hosts"]["gpu-04"]
    first = sglang_hostplan.validate_memo(sglang_hostplan.read_host_vars({"h": ref_host()}, "h"), None, ROLE_DEFAULTS)
    first.errors.append("mine")
    first.args["tp_size"] = 99
    again = sglang_hostplan.validate_memo(sglang_hostplan.read_host_vars({"h": ref_host()}, "h"), None, ROLE_DEFAULTS)
    assert again.errors == [] and again.args["tp_size"] == 8
    auto = sglang_hostplan.validate_memo(sglang_hostplan.read_host_vars({"h": ref_host()}, "h"), "auto", ROLE_DEFAULTS)
    assert auto.spec["mode"] == "auto"


@pytest.mark.parametrize(("groups", "expected"), [
    ({"all": ["a"], "ungrouped": ["a"]}, ""),  # a plain host list: every host is a GPU host
    ({"all": ["a"], "ungrouped": [], "sglang_servers": ["a"]}, ""),
    ({"all": ["a"], "ungrouped": [], "sglang_server": ["a"]}, "is not in the inventory (did you mean sglang_server?)"),
    ({"all": ["a"], "ungrouped": [], "sglang_servers": [], "gpus": ["a"]}, "is empty"),
    ({"all": ["a"], "ungrouped": [], "gateways": ["a"]}, "is not in the inventory; the inventory's groups: gateways"),
])
def test_no_servers_problem(groups: dict[str, list[str]], expected: str) -> None:
    """Issue 33: a misnamed or empty sglang_servers group is refused (a plain host list is not)."""
    from ansible_collections.blackwell.sglang.plugins.action.validate import no_servers_problem

    found = no_servers_problem(groups)
    assert (expected in found and "allow_no_servers" in found) if expected else found == ""
