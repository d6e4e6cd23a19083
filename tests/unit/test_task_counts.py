"""bench/callback_plugins/task_counts.py's classification, on synthetic tasks and results (no container, no playbook),
and bench/hooks/sitecustomize.py's counting of the planners, in a subprocess that imports the collection the way
Ansible does."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


task_counts = _load(BENCH / "callback_plugins" / "task_counts.py", "bench_task_counts_callback")


@dataclass
class Role:
    name: str

    def get_name(self) -> str:
        return self.name


@dataclass
class Task:
    """What the callback reads of a Task: its name, action, delegate_to, connection and role."""

    action: str
    name: str = "a task"
    delegate_to: str | None = None
    connection: str | None = None
    role: str | None = None

    def get_name(self) -> str:
        return self.name

    @property
    def _role(self) -> Role | None:
        return Role(self.role) if self.role else None


@dataclass
class Host:
    name: str

    def get_name(self) -> str:
        return self.name


@dataclass
class Result:
    """A CallbackTaskResult's public face (ansible-core 2.19): host, task, result."""

    host: Host
    task: Task
    result: dict[str, Any]


@pytest.mark.parametrize(("action", "delegate_to", "connection", "delegated_vars", "why"), [
    ("ansible.builtin.set_fact", None, None, None, "action"),
    ("set_fact", None, None, None, "action"),
    ("ansible.legacy.debug", None, None, None, "action"),
    ("ansible.builtin.assert", None, None, None, "action"),
    ("ansible.builtin.fail", None, None, None, "action"),
    ("ansible.builtin.meta", None, None, None, "action"),
    ("ansible.builtin.include_tasks", None, None, None, "action"),
    ("ansible.builtin.include_role", None, None, None, "action"),
    ("ansible.builtin.import_tasks", None, None, None, "action"),
    ("ansible.builtin.include_vars", None, None, None, "action"),
    ("blackwell.sglang.validate", None, None, None, "action"),
    ("blackwell.sglang.check_inputs", None, None, None, "action"),
    # Delegated to the controller: a module, but not on the host.
    ("ansible.builtin.uri", "localhost", None, None, "delegate_to"),
    ("ansible.builtin.command", "127.0.0.1", None, None, "delegate_to"),
    ("ansible.builtin.uri", "{{ groups.monitor[0] }}", None, {"ansible_delegated_host": "localhost"}, "delegate_to"),
    ("ansible.builtin.uri", "gw1", None, {"ansible_delegated_host": "gw1", "ansible_connection": "local"}, "delegate_to"),
    ("ansible.builtin.command", None, "local", None, "delegate_to"),
    # Modules on a host (delegated to another inventory host is still a host's module run).
    ("ansible.builtin.systemd_service", None, None, None, None),
    ("ansible.builtin.template", None, None, None, None),
    ("blackwell.sglang.server_state", None, None, None, None),
    ("blackwell.sglang.wait_ready", None, None, None, None),
    ("ansible.builtin.uri", "gw1", None, {"ansible_delegated_host": "gw1"}, None),
    ("ansible.builtin.gather_facts", None, None, None, None),
    ("ansible.builtin.validate_argument_spec", None, None, None, "action"),
])
def test_controller_reason(action: str, delegate_to: str | None, connection: str | None,
                           delegated_vars: dict[str, str] | None, why: str | None) -> None:
    result = {"_ansible_delegated_vars": delegated_vars} if delegated_vars else {}
    task = Task(action, delegate_to=delegate_to, connection=connection)
    assert task_counts.controller_reason(task, result) == why


def test_executions_count_loop_items_not_retries() -> None:
    assert task_counts.executions({"changed": False}) == 1
    assert task_counts.executions({"attempts": 4}) == 1 and task_counts.retries({"attempts": 4}) == 3
    loop = {"results": [{"skipped": True}, {"changed": False}, {"changed": True, "attempts": 2}]}
    assert task_counts.executions(loop) == 2 and task_counts.retries(loop) == 1
    assert task_counts.executions({"results": [{"skipped": True}]}) == 0


def test_callback_counts_per_play_and_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "counts.json"
    monkeypatch.setenv(task_counts.ENV_FILE, str(out))
    cb = task_counts.CallbackModule()
    h1, h2 = Host("h1"), Host("h2")

    class Play:
        def __init__(self, name: str) -> None:
            self.name = name

        def get_name(self) -> str:
            return self.name

    cb.v2_playbook_on_play_start(Play("validate"))
    cb.v2_runner_on_ok(Result(h1, Task("blackwell.sglang.validate", "validate"), {"changed": False}))
    cb.v2_runner_on_skipped(Result(h1, Task("ansible.builtin.debug", "report"), {"skipped": True}))
    cb.v2_playbook_on_play_start(Play("deploy"))
    for host in (h1, h2):
        cb.v2_runner_on_ok(Result(host, Task("ansible.builtin.set_fact", "plan", role="sglang"), {}))
        cb.v2_runner_on_ok(Result(host, Task("ansible.builtin.template", "unit", role="sglang_server"), {"changed": True}))
        cb.v2_runner_on_ok(Result(host, Task("ansible.builtin.stat", "stat", role="sglang"),
                                  {"results": [{"changed": False}, {"changed": False}, {"skipped": True}]}))
        cb.v2_runner_on_skipped(Result(host, Task("ansible.builtin.apt", "driver", role="nvidia_driver"), {"skipped": True}))
    cb.v2_runner_on_failed(Result(h2, Task("ansible.builtin.command", "probe"), {"failed": True}), ignore_errors=True)
    cb.v2_playbook_on_stats(None)

    data = json.loads(out.read_text())
    assert [p["name"] for p in data["plays"]] == ["validate", "deploy"]
    first = data["plays"][0]["hosts"]["h1"]
    assert (first["tasks"], first["ok"], first["skipped"], first["controller_tasks"], first["module_executions"]) == (2, 1, 1, 1, 0)
    h1_total, h2_total = data["totals"]["h1"], data["totals"]["h2"]
    assert (h1_total["tasks"], h1_total["ok"], h1_total["changed"], h1_total["skipped"]) == (6, 4, 1, 2)
    assert (h1_total["module_tasks"], h1_total["module_executions"], h1_total["controller_tasks"]) == (2, 3, 2)
    assert [(m["task"], m["executions"]) for m in h1_total["modules"]] == [("unit", 1), ("stat", 2)]
    assert [s["task"] for s in h1_total["skips"]] == ["report", "driver"]
    # A failure with ignore_errors counts as PLAY RECAP counts it: ignored; the module ran.
    assert (h2_total["ignored"], h2_total["failed"], h2_total["module_executions"]) == (1, 0, 4)


def test_no_file_without_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(task_counts.ENV_FILE, raising=False)
    monkeypatch.chdir(tmp_path)
    task_counts.CallbackModule().v2_playbook_on_stats(None)
    assert list(tmp_path.iterdir()) == []


HOOKED = textwrap.dedent("""
    import sys
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    _AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
    from ansible_collections.blackwell.sglang.plugins.filter.sglang import FilterModule
    from ansible_collections.blackwell.sglang.plugins.filter.monitoring import FilterModule as Monitoring
    from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_hostplan
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import plan_host
    filters = {**FilterModule().filters(), **Monitoring().filters()}
    assert getattr(plan_host, "__bench_counted__", False) and plan_host is sglang_hostplan.plan_host
    for name in ("instance_plans", "server_instances", "staged_models", "multinode_layout", "scrape_configs"):
        assert getattr(filters[name], "__bench_counted__", False), name
    assert not getattr(filters["systemd_quote"], "__bench_counted__", False)
    try:
        plan_host("gpu1", {"gpu1": {}}, {"all": ["gpu1"]})
    except Exception:
        pass  # the call is counted before it runs
    import ansible.plugins.action
    assert getattr(ansible.plugins.action.ActionBase._low_level_execute_command, "__wrapped__", None)
""")


def test_sitecustomize_counts_plan_host_in_a_fresh_interpreter(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "PYTHONPATH": str(BENCH / "hooks"), "BENCH_CALL_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-c", HOOKED, str(REPO / "collections")], env=env, text=True,
                          capture_output=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["fn"], c["host"], c["caller"]) for c in calls] == [("plan_host", "gpu1", "__main__")]


def test_sitecustomize_is_inert_without_the_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BENCH_CALL_LOG"}
    env["PYTHONPATH"] = str(BENCH / "hooks")
    code = "import sys; print(any(type(f).__name__ == 'Finder' and type(f).__module__ == 'sitecustomize' for f in sys.meta_path))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, text=True, capture_output=True, check=True, cwd=tmp_path)
    assert proc.stdout.strip() == "False"


def test_bench_script_reads_the_call_log_and_run_all_makes_rows() -> None:
    """bench/task_counts.py's planner table from synthetic call-log lines, and bench/run_all.py's rows of its JSON."""
    sys.path.insert(0, str(BENCH))
    try:
        import run_all
        import task_counts as script
    finally:
        sys.path.remove(str(BENCH))
    calls = [
        {"fn": "plan_host", "host": "h1", "caller": "ansible_collections.blackwell.sglang.plugins.action.validate"},
        {"fn": "plan_host", "host": "h2", "caller": "ansible_collections.blackwell.sglang.plugins.action.validate"},
        {"fn": "plan_host", "host": "h1", "caller": "ansible_collections.blackwell.sglang.plugins.filter.sglang"},
        {"fn": "instance_plans", "host": "h1", "caller": None},
        {"fn": "server_files", "host": None, "caller": None},
        {"fn": "exec", "host": "h1", "caller": None, "task": "unit", "action": "ansible.builtin.template"},
        {"fn": "exec", "host": "h1", "caller": None, "task": "unit", "action": "ansible.builtin.template"},
    ]
    run = script.Counted("noop", 1.0, 0, {"totals": {"h1": {"tasks": 3, "module_executions": 1}}}, calls, {})
    assert script.planner_calls(run) == {
        "(no host)": {"server_files": 1},
        "h1": {"instance_plans": 1, "plan_host <- action.validate": 1, "plan_host <- filter.sglang": 1},
        "h2": {"plan_host <- action.validate": 1},
    }
    assert script.round_trips(run, "h1") == 2 and script.round_trips(run, "h2") == 0
    fig = script.figures(run, "h1")
    assert (fig["tasks"], fig["module_executions"], fig["round_trips_by_task"]) == (3, 1, {"unit [ansible.builtin.template]": 2})

    noop = {"tasks": 168, "module_executions": 84}
    data = {"targets": script.TARGETS, "noop": noop, "restart": {"module_executions": 11, "controller_tasks": 60},
            "restart_wall_beyond_median_s": 9.0, "by_hand_wall_beyond_median_s": 0.5,
            "fleet": {"hosts": ["h1", "h2"], "noop": script.planner_calls(run)}}
    rows = run_all.counts_rows(data)
    assert [r[1] for r in rows] == ["168", "84", "11", "60", "9.00 s", "2"]
    assert [r[4].endswith("NOT met") for r in rows] == [True, True, True, True, True, False]
