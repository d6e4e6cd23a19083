"""The restart chain's one-step modules: server_restart (stop, release, reload, start) and last_good (save).

server_restart runs against a fake AnsibleModule whose systemctl answers are scripted (no host is touched):
the order of the steps, the first failing step failing the module with systemctl's error and nothing after
it, check mode changing nothing. The release in between is the shared module_utils code, run for real on
device globs that match nothing. last_good writes into a temporary directory, owned by the test's user.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules"


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_{name}_module", MODULES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


server_restart = load("server_restart")
last_good = load("last_good")
gpu_holders = load("gpu_holders")


class Failed(Exception):
    pass


class FakeModule:
    """run_command answered from ``answers`` (argv prefix -> (rc, out, err)); every call recorded."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]], check_mode: bool = False) -> None:
        self.answers = answers
        self.check_mode = check_mode
        self.calls: list[list[str]] = []
        self.failed: dict[str, Any] | None = None

    def run_command(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        for prefix, answer in self.answers.items():
            if tuple(argv[:len(prefix)]) == prefix:
                return answer
        return 0, "", ""

    def fail_json(self, **result: Any) -> None:
        self.failed = result
        raise Failed(result["msg"])


def params(**extra: Any) -> dict[str, Any]:
    """server_restart's parameters with its defaults, on device files that do not exist (nothing holds them)."""
    base = {name: spec.get("default") for name, spec in server_restart.HOLDER_OPTIONS.items()}
    base.update({"devices": ["/nonexistent/nvidia*"], "nvidia_smi": "/nonexistent/nvidia-smi", "unit": "sglang.service",
                 "daemon_reload": True, "owner_user": "sglang"})
    base.update(extra)
    return base


def show(active: str, load: str = "loaded", reload: str = "no") -> dict[tuple[str, ...], tuple[int, str, str]]:
    return {("systemctl", "show"): (0, f"LoadState={load}\nActiveState={active}\nNeedDaemonReload={reload}\n", "")}


def steps(module: FakeModule) -> list[str]:
    return [call[1] for call in module.calls if call[0] == "systemctl" and call[1] != "show"]


def test_resets_the_rate_limit_stops_and_starts_a_running_server_in_that_order() -> None:
    module = FakeModule(show("active"))
    result = server_restart.restart(module, params())
    assert steps(module) == ["reset-failed", "stop", "start"]
    assert result["changed"] and result["stopped"] and result["started"] and result["killed"] == []
    assert not result["reloaded"]


def test_the_start_rate_limit_is_reset_before_every_stop() -> None:
    """Without it, a restart soon after others was refused ("start of the service was attempted too often"). The reset
    comes before the stop, so that it does not lengthen the downtime."""
    module = FakeModule(show("inactive"))
    server_restart.restart(module, params())
    assert steps(module) == ["reset-failed", "start"]


def test_a_unit_file_changed_on_disk_is_reloaded_before_the_stop_not_in_the_downtime() -> None:
    module = FakeModule(show("active", reload="yes"))
    result = server_restart.restart(module, params())
    assert steps(module) == ["daemon-reload", "reset-failed", "stop", "start"] and result["reloaded"]
    module = FakeModule(show("active", reload="yes"))
    result = server_restart.restart(module, params(daemon_reload=False))
    assert steps(module) == ["reset-failed", "stop", "start"] and not result["reloaded"]


def test_a_failing_rate_limit_reset_does_not_stop_the_restart() -> None:
    module = FakeModule({**show("active"), ("systemctl", "reset-failed"): (1, "", "Unit sglang.service not failed.\n")})
    result = server_restart.restart(module, params())
    assert steps(module) == ["reset-failed", "stop", "start"] and result["started"]


def test_with_nothing_to_terminate_only_the_port_is_waited_for() -> None:
    module = FakeModule(show("active"))
    server_restart.restart(module, params(nvidia_smi="/bin/true", port=9))
    assert not [call for call in module.calls if call[0] == "/bin/true"]


def test_a_stopped_server_is_only_started() -> None:
    module = FakeModule(show("failed"))
    result = server_restart.restart(module, params(daemon_reload=False))
    assert steps(module) == ["reset-failed", "start"]
    assert not result["stopped"] and result["started"]


@pytest.mark.parametrize(("failing", "done", "reload"), [
    ("daemon-reload", ["daemon-reload"], "yes"),
    ("stop", ["reset-failed", "stop"], "no"),
    ("start", ["reset-failed", "stop", "start"], "no"),
])
def test_the_first_failing_step_fails_the_module_with_systemctls_error(failing: str, done: list[str], reload: str) -> None:
    answers = {**show("active", reload=reload), ("systemctl", failing): (1, "", "Job for sglang.service failed.\n")}
    module = FakeModule(answers)
    with pytest.raises(Failed, match=r"^Unable to (stop|reload|start) (service sglang.service|systemd): Job for"):
        server_restart.restart(module, params())
    assert steps(module) == done
    assert module.failed is not None and module.failed["started"] is False


def test_an_unknown_unit_fails_before_anything_is_done() -> None:
    module = FakeModule(show("inactive", load="not-found"))
    with pytest.raises(Failed, match="Could not find the requested service sglang.service"):
        server_restart.restart(module, params())
    assert steps(module) == []


def test_check_mode_stops_and_starts_nothing() -> None:
    module = FakeModule(show("active"), check_mode=True)
    result = server_restart.restart(module, params())
    assert steps(module) == [] and result["changed"] and result["stopped"] and not result["started"]


def test_a_release_that_times_out_fails_before_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_gpu_holders

    monkeypatch.setattr(sglang_gpu_holders, "listening", lambda port: True)
    module = FakeModule(show("active"))
    with pytest.raises(Failed, match=r"GPUs not released after 0.0s: port 30000 is still listening"):
        server_restart.restart(module, params(port=30000, wait_timeout=0.0))
    assert steps(module) == ["reset-failed", "stop"]


def test_gpu_holders_and_server_restart_share_the_release() -> None:
    assert gpu_holders.release is server_restart.release
    assert gpu_holders.HOLDER_OPTIONS is server_restart.HOLDER_OPTIONS


# --- last_good ---------------------------------------------------------------------------------------------


@pytest.fixture
def owned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files owned by the test's user count as root's (the module runs as root on a host)."""
    monkeypatch.setattr(last_good, "OWNER", (os.getuid(), os.getgid()))


def running(tmp_path: Path, config: bool = True) -> dict[str, Any]:
    live = tmp_path / "live"
    live.mkdir()
    (live / "sglang.service").write_text("[Service]\nExecStart=/bin/true\n")
    (live / "sglang.env").write_text("HF_TOKEN=secret\n")
    files = [{"name": "unit", "src": str(live / "sglang.service")}, {"name": "env", "src": str(live / "sglang.env")}]
    if config:
        (live / "sglang.yaml").write_text("api-key: secret\n")
        files.append({"name": "config", "src": str(live / "sglang.yaml")})
    venvs = tmp_path / "venvs"
    (venvs / "0.5.23").mkdir(parents=True)
    (venvs / "current").symlink_to(venvs / "0.5.23")
    return {"path": str(tmp_path / "etc" / "last-good"), "files": files, "remove": [] if config else ["config"],
            "venv": str(venvs / "current")}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_saves_the_running_files_and_the_virtualenv_root_only(tmp_path: Path, owned: None) -> None:
    args = running(tmp_path)
    result = last_good.save(args, check_mode=False)
    good = Path(args["path"])
    assert result["changed"] and result["saved"] == ["unit", "env", "config", "venv"] and result["removed"] == []
    assert mode(good) == 0o700 and all(mode(good / n) == 0o600 for n in ("unit", "env", "config", "venv"))
    assert (good / "env").read_text() == "HF_TOKEN=secret\n"
    assert (good / "venv").read_text() == f"{tmp_path / 'venvs' / '0.5.23'}\n"
    assert result["venv"] == str(tmp_path / "venvs" / "0.5.23")
    assert sorted(p.name for p in good.iterdir()) == ["config", "env", "unit", "venv"]  # no temporary file left


def test_a_second_save_changes_nothing_and_a_changed_file_is_rewritten(tmp_path: Path, owned: None) -> None:
    args = running(tmp_path)
    last_good.save(args, check_mode=False)
    assert last_good.save(args, check_mode=False) == {"changed": False, "saved": [], "removed": [],
                                                        "venv": str(tmp_path / "venvs" / "0.5.23"), "startup": None,
                                                        "quality": False}
    Path(args["files"][0]["src"]).write_text("[Service]\nExecStart=/bin/false\n")
    os.chmod(Path(args["path"]) / "env", 0o644)
    result = last_good.save(args, check_mode=False)
    assert result["saved"] == ["unit", "env"]
    assert (Path(args["path"]) / "unit").read_text().endswith("/bin/false\n") and mode(Path(args["path"]) / "env") == 0o600


def test_forgets_a_config_file_the_running_configuration_does_not_have(tmp_path: Path, owned: None) -> None:
    args = running(tmp_path)
    last_good.save(args, check_mode=False)
    without = {**args, "files": args["files"][:2], "remove": ["config"]}
    assert last_good.save(without, check_mode=False)["removed"] == ["config"]
    assert not (Path(args["path"]) / "config").exists()
    assert last_good.save(without, check_mode=False)["changed"] is False


def test_a_virtualenv_that_is_not_a_link_is_recorded_as_it_is(tmp_path: Path, owned: None) -> None:
    args = running(tmp_path)
    plain = tmp_path / "venvs" / "0.5.23"
    last_good.save({**args, "venv": str(plain)}, check_mode=False)
    assert (Path(args["path"]) / "venv").read_text() == f"{plain}\n"


def test_check_mode_writes_nothing(tmp_path: Path, owned: None) -> None:
    args = running(tmp_path)
    result = last_good.save(args, check_mode=True)
    assert result["changed"] and result["saved"] == ["unit", "env", "config", "venv"]
    assert not Path(args["path"]).exists()


def test_a_missing_running_file_fails_before_anything_is_written(tmp_path: Path, owned: None) -> None:
    args = running(tmp_path)
    os.unlink(args["files"][1]["src"])
    with pytest.raises(FileNotFoundError):
        last_good.save(args, check_mode=False)
    assert not Path(args["path"]).exists()

