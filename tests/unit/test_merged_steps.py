"""The steps issue 31 merged into fewer module runs, each as the separate steps did it.

* server_restart's action: the module (stop, release, start), then, with ``wait``, the ready wait of wait_ready (the same
  loop, through server_probe) in the same task; a failed module is not waited on, a failed wait fails the task with its
  message and log; check mode does not wait.
* server_preflight: the GPU holders as gpu_holders' query finds them (a foreign one fails), then the preflight command,
  whose exit code does not fail the module.
* venv_state: the marker, the import check only of a complete virtualenv, the current link, the installed virtualenvs.
* gpu_health's report facts: gpu_health_report and nvidia_gpu_facts_fresh from the module, no set_fact.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.action import server_restart as restart_plugin
from ansible_collections.blackwell.sglang.plugins.action import wait_ready
from ansible_collections.blackwell.sglang.plugins.modules import gpu_health, server_preflight, venv_state
from test_restart_modules import Failed, FakeModule, load

WAIT = {"url": "http://127.0.0.1:30000/health", "unit": "sglang.service", "timeout": 60, "interval": 0.1,
        "progress_every": 30, "no_progress_timeout": 0, "info_url": "http://127.0.0.1:30000/server_info",
        "info_keys": ["speculative_algorithm"]}


def action(args: dict[str, Any], answers: list[dict[str, Any]] | Callable[[str, list[Any]], dict[str, Any]],
           check_mode: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """Run the server_restart action in-process; ``_execute_module`` answers from ``answers`` in order, or, when it is
    a function, with ``answers(module_name, calls)`` (the calls so far, this one last)."""
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode, action="blackwell.sglang.server_restart")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/nonexistent"))
    plugin = restart_plugin.ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), loader=None,
                                         templar=None, shared_loader_obj=None)
    calls: list[Any] = []

    def execute(module_name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        calls.append((module_name, module_args))
        return answers(module_name, calls) if callable(answers) else answers.pop(0)

    plugin._execute_module = execute  # type: ignore[method-assign]
    return plugin.run(task_vars={"inventory_hostname": "gpu-01"}), calls


RESTARTED = {"changed": True, "stopped": True, "started": True, "reloaded": False, "holders": [], "killed": [], "foreign": []}
HEALTHY = {"status": 200, "unit_state": {"ActiveState": "active"}, "info": {"speculative_algorithm": "EAGLE"}}


def test_the_restart_then_the_wait_run_in_one_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_ready.display, "display", lambda *_a, **_k: None)
    result, calls = action({"unit": "sglang.service", "owner_user": "sglang", "wait": WAIT}, [dict(RESTARTED), dict(HEALTHY)])
    assert [name for name, _ in calls] == ["blackwell.sglang.server_restart", "blackwell.sglang.server_probe"]
    assert "wait" not in calls[0][1] and calls[0][1]["unit"] == "sglang.service"
    assert calls[1][1]["url"] == WAIT["url"] and calls[1][1]["info_url"] == WAIT["info_url"]
    assert not result.get("failed") and result["started"] and result["ready"]["info"] == {"speculative_algorithm": "EAGLE"}


def test_a_failed_restart_is_not_waited_on() -> None:
    failed = {**RESTARTED, "failed": True, "msg": "Unable to stop service sglang.service: boom", "started": False}
    result, calls = action({"unit": "sglang.service", "wait": WAIT}, [failed])
    assert len(calls) == 1 and result["failed"] and "boom" in result["msg"] and "ready" not in result


def test_a_failed_wait_fails_the_task_with_its_message_and_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_ready.display, "display", lambda *_a, **_k: None)
    dead = {"status": -1, "unit_state": {"ActiveState": "failed", "Result": "exit-code", "NRestarts": "0"}, "log": ["x"]}
    tail = {"status": -1, "log": ["Traceback", "AssertionError: speculative"]}
    result, calls = action({"unit": "sglang.service", "wait": WAIT}, [dict(RESTARTED), dead, tail])
    assert result["failed"] and result["msg"].startswith("sglang.service is failed")
    assert result["log"] == ["Traceback", "AssertionError: speculative"] and result["started"]


def test_check_mode_and_no_wait_end_after_the_module() -> None:
    for args, check in (({"unit": "sglang.service", "wait": WAIT}, True), ({"unit": "sglang.service"}, False)):
        result, calls = action(args, [dict(RESTARTED)], check_mode=check)
        assert len(calls) == 1 and "ready" not in result


def test_a_misspelled_wait_option_is_refused_before_anything_runs() -> None:
    with pytest.raises(Exception, match="wait"):
        action({"unit": "sglang.service", "wait": {**WAIT, "timout": 5}}, [])


def test_the_wait_option_is_documented_as_wait_ready_s_options() -> None:
    import yaml  # noqa: PLC0415 (only here)

    def options(name: str) -> dict[str, Any]:
        text = load(name).DOCUMENTATION
        return yaml.safe_load(text)["options"]

    def kinds(documented: dict[str, Any]) -> dict[str, Any]:
        return {name: (spec.get("type"), spec.get("elements"), spec.get("required", False), spec.get("default"))
                for name, spec in documented.items()}

    assert kinds(options("server_restart")["wait"]["suboptions"]) == kinds(options("wait_ready"))
    assert set(options("wait_ready")) == set(wait_ready.WAIT_SPEC)


# --- server_preflight ----------------------------------------------------------------------------------------------

def preflight_params(**extra: Any) -> dict[str, Any]:
    base = {name: spec.get("default") for name, spec in server_preflight.HOLDER_OPTIONS.items()}
    base.update({"devices": ["/nonexistent/nvidia*"], "nvidia_smi": "/nonexistent/nvidia-smi", "owner_unit": "sglang.service",
                 "owner_user": "sglang", "argv": None, "preread": None})
    base.update(extra)
    return base


class ExitModule(FakeModule):
    def __init__(self, params: dict[str, Any], answers: dict[tuple[str, ...], tuple[int, str, str]]) -> None:
        super().__init__(answers)
        self.params = params

    def exit_json(self, **result: Any) -> None:
        self.exited = result
        raise SystemExit(0)


def run_main(module_file: Any, params: dict[str, Any], answers: dict[tuple[str, ...], tuple[int, str, str]] | None = None,
             monkeypatch: pytest.MonkeyPatch | None = None) -> ExitModule:
    fake = ExitModule(params, answers or {})
    assert monkeypatch is not None
    monkeypatch.setattr(module_file, "AnsibleModule", lambda **_kwargs: fake)
    with pytest.raises(SystemExit):
        module_file.main()
    return fake


def test_the_preflight_command_runs_after_the_holders_and_its_exit_code_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["/opt/sglang/current/bin/python", "/usr/local/libexec/sglang/sglang-preflight.py", "--unit", "/x.service"]
    fake = run_main(server_preflight, preflight_params(argv=argv), {tuple(argv[:1]): (4, '{"error": "no"}\n', "bad\n")},
                    monkeypatch)
    ran = fake.exited["preflight"]
    assert "rc" not in fake.exited  # at the top, Ansible would fail the task on a non-zero rc
    assert ran["rc"] == 4 and ran["stdout_lines"] == ['{"error": "no"}'] and ran["stderr"] == "bad\n"
    assert fake.exited["holders"] == [] and "killed" not in fake.exited and not fake.exited["changed"]
    fake = run_main(server_preflight, preflight_params(), {}, monkeypatch)
    assert "preflight" not in fake.exited and fake.calls == []


def test_a_foreign_holder_fails_before_the_preflight_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    foreign = [{"pid": 4242, "name": "python3", "user": "alice", "devices": ["/dev/nvidia0"], "kind": "foreign"}]
    utils = __import__("sys").modules[server_preflight.release.__module__]
    monkeypatch.setattr(utils, "holders_of", lambda _params: (["/dev/nvidia0"], foreign))
    fake = ExitModule(preflight_params(argv=["/bin/true"]), {})
    fake.fail_json = FakeModule.fail_json.__get__(fake)  # type: ignore[method-assign]
    monkeypatch.setattr(server_preflight, "AnsibleModule", lambda **_kwargs: fake)
    with pytest.raises(Failed, match="foreign process.*python3 \\(pid 4242, user alice\\)"):
        server_preflight.main()
    assert fake.calls == []  # the preflight did not run


def preread_options(paths: list[str], **extra: Any) -> dict[str, Any]:
    base = {name: spec.get("default") for name, spec in server_preflight.PREREAD_SPEC.items()}
    base.update({"paths": paths, **extra})
    return base


def test_the_preread_runs_in_the_same_module_run_after_a_passed_preflight_only(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"x" * 4096)
    argv = ["/opt/sglang/current/bin/python", "/usr/local/libexec/sglang/sglang-preflight.py"]
    fake = run_main(server_preflight, preflight_params(argv=argv, preread=preread_options([str(model)])),
                    {tuple(argv[:1]): (0, "{}\n", "")}, monkeypatch)
    done = fake.exited["preread"]
    assert done["files"] == 1 and done["bytes_total"] == 4096 and done["paths"] == [str(model)], done
    assert done["resident_percent_after"] == 100.0 and not fake.exited["changed"]
    # A rejected preflight stops the restart: nothing is read.
    fake = run_main(server_preflight, preflight_params(argv=argv, preread=preread_options([str(model)])),
                    {tuple(argv[:1]): (4, "{}\n", "")}, monkeypatch)
    assert "preread" not in fake.exited and fake.exited["preflight"]["rc"] == 4
    # Without the preflight command (check mode, or sglang_server_preflight off) the pre-read still runs.
    fake = run_main(server_preflight, preflight_params(preread=preread_options([str(model)], mode="never")), {}, monkeypatch)
    assert fake.exited["preread"]["mode"] == "never" and fake.exited["preread"]["bytes_read"] == 0


def test_a_refused_preread_path_fails_naming_the_suboption(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ExitModule(preflight_params(preread=preread_options(["relative/model"])), {})
    fake.fail_json = FakeModule.fail_json.__get__(fake)  # type: ignore[method-assign]
    monkeypatch.setattr(server_preflight, "AnsibleModule", lambda **_kwargs: fake)
    with pytest.raises(Failed, match=r"^preread\.paths\[0\]"):
        server_preflight.main()


# --- venv_state -----------------------------------------------------------------------------------------------------

def test_venv_state_reads_marker_import_link_and_installed_venvs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venvs = tmp_path / "venvs"
    old, new = venvs / "0.5.22-aaaa", venvs / "0.5.23-bbbb"
    for path in (old, new):
        (path / "bin").mkdir(parents=True)
    (venvs / "0.5.23-bbbb.requirements.txt").write_text("sglang==0.5.23\n")
    os.utime(old, (time.time() - 100, time.time() - 100))
    current = tmp_path / "current"
    current.symlink_to(old)
    params = {"venv": str(new), "marker": str(new / ".sglang-venv-complete"), "import_check": "print('0.5.23')",
              "import_timeout": 60, "current_link": str(current), "venvs_dir": str(venvs)}
    fake = run_main(venv_state, params, {}, monkeypatch)
    assert fake.exited["complete"] is False and fake.exited["imported"]["rc"] is None and fake.calls == []
    assert fake.exited["current"] == {"exists": True, "islnk": True, "lnk_source": str(old)}
    assert [v["path"] for v in fake.exited["venvs"]] == [str(new), str(old)]  # newest first, directories only
    (new / ".sglang-venv-complete").write_text("id\n")
    fake = run_main(venv_state, params, {("timeout",): (0, "warning\n0.5.23\n", "")}, monkeypatch)
    assert fake.exited["complete"] and fake.exited["imported"] == {"rc": 0, "last_line": "0.5.23", "stderr_tail": []}
    assert fake.calls == [["timeout", "60", str(new / "bin" / "python"), "-c", "print('0.5.23')"]]
    params["current_link"] = str(tmp_path / "none")
    fake = run_main(venv_state, {**params, "venvs_dir": str(tmp_path / "nothing")}, {}, monkeypatch)
    assert fake.exited["current"]["exists"] is False and fake.exited["venvs"] == []


# --- gpu_health's published facts ----------------------------------------------------------------------------------

def test_the_gate_publishes_its_report_and_the_facts_freshness() -> None:
    result = {"healthy": False, "problems": [{"message": "GPU 0: Xid 79"}, {"message": "GPU 1: ECC"}], "gpu_warnings": [],
              "checked": ["xid"], "not_checked": []}
    facts = gpu_health.report(result, "gpu-01")
    assert facts["nvidia_gpu_facts_fresh"] is True
    assert facts["gpu_health_report"] == {
        "healthy": False, "problems": result["problems"], "warnings": [], "checked": ["xid"], "not_checked": [],
        "message": "gpu-01 failed the GPU health gate (2 problem(s)): GPU 0: Xid 79 | GPU 1: ECC"}
