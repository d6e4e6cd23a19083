"""server_files: roles/sglang_server's one-step install of a host's directories, scripts, units and secret files.

The module runs here against a temporary directory, owned by the test's own user and group; systemctl and
systemd-analyze are answered by a fake run_command. One test runs the module as Ansible does (a separate
process, arguments as JSON) to show that the secret contents never reach its output.
"""

from __future__ import annotations

import grp
import importlib.util
import json
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "collections/ansible_collections/blackwell/sglang/plugins/modules/server_files.py"
spec = importlib.util.spec_from_file_location("_server_files_module", MODULE)
server_files = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(server_files)  # type: ignore[union-attr]

USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name
SECRET = "hf_CANARY-secret-token-0123456789"


class Failed(Exception):
    pass


class FakeModule:
    """The parts of AnsibleModule the module uses; systemctl and systemd-analyze answered from ``answers``."""

    def __init__(self, params: dict[str, Any], check_mode: bool = False, diff: bool = False,
                 answers: dict[tuple[str, ...], tuple[int, str, str]] | None = None) -> None:
        self.params = params
        self.check_mode = check_mode
        self._diff = diff
        self.answers = answers or {}
        self.calls: list[list[str]] = []

    def get_bin_path(self, name: str, required: bool = False) -> str:
        return name

    def run_command(self, argv: list[str], check_rc: bool = False) -> tuple[int, str, str]:
        self.calls.append([os.path.basename(argv[0]), *argv[1:]])
        for prefix, answer in self.answers.items():
            if tuple(self.calls[-1][:len(prefix)]) == prefix:
                return answer
        if argv[1:2] == ["is-enabled"]:
            return 1, "disabled\n", ""
        return 0, "", ""


def owned(path: Path, mode: str = "0644", **extra: Any) -> dict[str, Any]:
    return {"path": str(path), "owner": USER, "group": GROUP, "mode": mode, **extra}


def host(tmp: Path, unit: str = "[Service]\nExecStart=/bin/true\n", env: str = f"HF_TOKEN={SECRET}\n",
         config: str | None = "api-key: s3cret\n", marker: dict[str, Any] | None = None, run_has_spec: bool = False,
         script: str = "#!/usr/bin/env python3\nprint('launch')\n") -> dict[str, Any]:
    """The parameters install.yml passes for one instance "default" (unit sglang.service) under ``tmp``."""
    marker = marker or {"mode": "keep", "host": "keep", "override": False, "argv": ["python", "-m", "sglang"]}
    etc, libexec = tmp / "etc", tmp / "libexec"
    return {
        "directories": [owned(etc, "0750"), owned(libexec, "0755")],
        "files": [owned(libexec / "sglang-launch.py", "0755", content=script),
                  owned(etc / "sglang.service", content=unit, instance="default", unit="sglang.service"),
                  owned(etc / "sglang.spec.json", content=json.dumps(marker) + "\n", instance="default",
                        restart=False)],
        "secret_files": [owned(etc / "sglang.env", "0600", instance="default")]
                        + ([owned(etc / "sglang.yaml", "0640", instance="default")] if config is not None else []),
        "secret_content": {str(etc / "sglang.env"): env, **({str(etc / "sglang.yaml"): config} if config else {})},
        "absent": [] if config is not None else [{"path": str(etc / "sglang.yaml"), "instance": "default"}],
        "enable": ["sglang.service"],
        "spec_guard": [{"marker": str(etc / "sglang.spec.json"), "service": "sglang", "host": "gpu1",
                        "run_has_spec": run_has_spec}],
    }


def run(params: dict[str, Any], **kwargs: Any) -> tuple[dict[str, Any], FakeModule]:
    module = FakeModule(params, **kwargs)
    for item in params["files"] + params["secret_files"]:
        item.setdefault("instance", None)
        item.setdefault("unit", None)
        item.setdefault("restart", True)
    return server_files.install(module), module


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_installs_every_file_with_its_mode_then_a_second_run_changes_nothing(tmp_path: Path) -> None:
    result, module = run(host(tmp_path))
    etc = tmp_path / "etc"
    assert result["changed"] and result["changed_instances"] == ["default"] and result["shared_changed"]
    assert (etc / "sglang.env").read_text() == f"HF_TOKEN={SECRET}\n" and mode(etc / "sglang.env") == 0o600
    assert (etc / "sglang.yaml").read_text() == "api-key: s3cret\n" and mode(etc / "sglang.yaml") == 0o640
    assert mode(etc) == 0o750 and mode(tmp_path / "libexec" / "sglang-launch.py") == 0o755
    assert result["daemon_reload"] and result["enabled"] == ["sglang.service"]
    assert ["systemd-analyze", "verify"] == module.calls[0][:2] and module.calls[0][2].endswith("/sglang.service")
    assert [call[:2] for call in module.calls[2:]] == [["systemctl", "daemon-reload"], ["systemctl", "enable"]]
    again, module = run(host(tmp_path), answers={("systemctl", "is-enabled"): (0, "enabled\n", "")})
    assert again == {"changed": False, "changed_instances": [], "shared_changed": False, "written": [], "removed": [],
                     "directories": [], "enabled": [], "daemon_reload": False, "account": []}
    assert module.calls == [["systemctl", "is-enabled", "sglang.service"]]


def test_a_changed_mode_is_corrected_and_makes_only_its_instance_due(tmp_path: Path) -> None:
    run(host(tmp_path))
    os.chmod(tmp_path / "etc" / "sglang.env", 0o644)
    result, module = run(host(tmp_path), answers={("systemctl", "is-enabled"): (0, "enabled\n", "")})
    assert result["written"] == [str(tmp_path / "etc" / "sglang.env")] and result["changed_instances"] == ["default"]
    assert not result["shared_changed"] and not result["daemon_reload"] and mode(tmp_path / "etc" / "sglang.env") == 0o600
    assert not any(call[0] == "systemd-analyze" for call in module.calls)


def test_the_spec_record_alone_makes_no_restart_due(tmp_path: Path) -> None:
    run(host(tmp_path))
    marker = {"mode": "keep", "host": "keep", "override": False, "argv": ["python", "-m", "sglang", "--x"]}
    result, _ = run(host(tmp_path, marker=marker))
    assert result["written"] == [str(tmp_path / "etc" / "sglang.spec.json")]
    assert result["changed"] and result["changed_instances"] == [] and not result["shared_changed"]


def test_a_run_after_a_spec_override_with_the_same_argv_changes_nothing(tmp_path: Path) -> None:
    """The demo: restart.yml -e spec=auto, then deploy.yml; auto and keep give the same argv on this host."""
    argv = ["python", "-m", "sglang"]
    run(host(tmp_path, marker={"mode": "auto", "host": "keep", "override": True, "argv": argv}))
    record = (tmp_path / "etc" / "sglang.spec.json").read_bytes()
    keep = {"mode": "keep", "host": "keep", "override": False, "argv": argv}
    result, _ = run(host(tmp_path, marker=keep), answers={("systemctl", "is-enabled"): (0, "enabled\n", "")})
    assert not result["changed"] and result["written"] == []
    assert (tmp_path / "etc" / "sglang.spec.json").read_bytes() == record  # still how the running unit was started
    # Other arguments: the record is rewritten (and the guard decides, as before).
    result, _ = run(host(tmp_path, marker={**keep, "argv": [*argv, "--x"]}, run_has_spec=True))
    assert result["written"] == [str(tmp_path / "etc" / "sglang.spec.json")]


def test_a_unit_that_systemd_refuses_changes_nothing(tmp_path: Path) -> None:
    run(host(tmp_path))
    before = {path: path.read_bytes() for path in (tmp_path / "etc").iterdir()}
    refused = {("systemd-analyze", "verify"): (1, "", "sglang.service: Unknown key name 'ExecStrat'")}
    with pytest.raises(server_files.Refused, match="ExecStrat.*|systemd-analyze verify refused"):
        run(host(tmp_path, unit="[Service]\nExecStrat=/bin/true\n", env="CHANGED=1\n"), answers=refused)
    assert {path: path.read_bytes() for path in (tmp_path / "etc").iterdir()} == before


def test_a_run_that_would_only_undo_a_spec_override_changes_nothing(tmp_path: Path) -> None:
    auto = {"mode": "auto", "host": "keep", "override": True, "argv": ["python", "-m", "sglang", "--spec-auto"]}
    run(host(tmp_path, marker=auto))
    before = {path: path.read_bytes() for path in (tmp_path / "etc").iterdir()}
    keep = {"mode": "keep", "host": "keep", "override": False, "argv": ["python", "-m", "sglang"]}
    with pytest.raises(server_files.Refused) as refused:
        run(host(tmp_path, marker=keep, unit="[Service]\nExecStart=/bin/false\n"))
    for words in ("gpu1: sglang runs with spec=auto, set by an earlier run's -e spec=auto", "set sglang_spec: auto",
                  "-e spec=keep", "Nothing was changed"):
        assert words in str(refused.value)
    assert {path: path.read_bytes() for path in (tmp_path / "etc").iterdir()} == before
    # The same run with -e spec confirms the change.
    result, _ = run(host(tmp_path, marker=keep, unit="[Service]\nExecStart=/bin/false\n", run_has_spec=True))
    assert result["changed_instances"] == ["default"]


def test_a_config_file_no_longer_needed_is_removed_and_makes_its_instance_due(tmp_path: Path) -> None:
    run(host(tmp_path))
    result, _ = run(host(tmp_path, config=None), answers={("systemctl", "is-enabled"): (0, "enabled\n", "")})
    assert result["removed"] == [str(tmp_path / "etc" / "sglang.yaml")] and result["changed_instances"] == ["default"]
    assert not (tmp_path / "etc" / "sglang.yaml").exists()


def test_check_mode_reports_everything_and_writes_nothing(tmp_path: Path) -> None:
    result, module = run(host(tmp_path), check_mode=True, diff=True)
    assert not (tmp_path / "etc").exists() and result["changed"] and result["daemon_reload"]
    assert result["enabled"] == ["sglang.service"] and result["changed_instances"] == ["default"]
    assert [call[:2] for call in module.calls] == [["systemd-analyze", "verify"], ["systemctl", "is-enabled"]]
    # The diff shows the unit, the spec record and the script; never a secret file.
    assert [d["after_header"] for d in result["diff"]] == [str(tmp_path / "libexec" / "sglang-launch.py"),
                                                           str(tmp_path / "etc" / "sglang.service"),
                                                           str(tmp_path / "etc" / "sglang.spec.json")]
    assert SECRET not in json.dumps(result)


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(unit=TEXT, env=TEXT, config=TEXT, script=TEXT)
def test_every_content_round_trips_exactly_and_no_secret_is_returned(tmp_path: Path, unit: str, env: str,
                                                                     config: str, script: str) -> None:
    root = tmp_path / f"h{abs(hash((unit, env, config, script)))}"
    secret_env, secret_config = f"{env}{SECRET}", f"{SECRET}{config}"
    result, _ = run(host(root, unit=unit, env=secret_env, config=secret_config, script=script), diff=True)
    etc = root / "etc"
    assert (etc / "sglang.service").read_bytes() == unit.encode()
    assert (etc / "sglang.env").read_bytes() == secret_env.encode()
    assert (etc / "sglang.yaml").read_bytes() == secret_config.encode()
    assert (root / "libexec" / "sglang-launch.py").read_bytes() == script.encode()
    assert SECRET not in json.dumps(result)
    again, _ = run(host(root, unit=unit, env=secret_env, config=secret_config, script=script),
                   answers={("systemctl", "is-enabled"): (0, "enabled\n", "")})
    assert again["changed"] is False


def test_as_ansible_runs_it_the_secret_contents_are_censored(tmp_path: Path) -> None:
    """The module in its own process (AnsibleModule, arguments as JSON, check mode): the invocation Ansible shows
    (module_args) never carries a secret file's content."""
    params = host(tmp_path)
    params["enable"] = []
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**params, "_ansible_check_mode": True}}))
    proc = subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    result = json.loads(proc.stdout)
    assert not result.get("failed"), result
    assert result["changed"] and SECRET not in proc.stdout and "s3cret" not in proc.stdout
    shown = result["invocation"]["module_args"]["secret_content"]
    assert set(shown) == set(params["secret_content"]) and set(shown.values()) == {"VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}
    assert not (tmp_path / "etc").exists()


def account(user: str, group: str, **extra: Any) -> dict[str, Any]:
    """The account option as the roles pass it (module defaults for what they leave out)."""
    return {"user": user, "group": group, "home": "/var/lib/bsa-test", "shell": "/usr/sbin/nologin", "uid_min": 1000,
            "nologin_shells": ["/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false"],
            "names": "sglang_user / sglang_group", "host": "gpu1", **extra}


def test_an_absent_account_is_created_first_and_counts_as_a_change(tmp_path: Path) -> None:
    params = {**host(tmp_path), "account": account("bsa-no-such-user", "bsa-no-such-group")}
    checked, module = run(params, check_mode=True)
    assert checked["changed"] and checked["account"] == [
        "groupadd --system bsa-no-such-group",
        "useradd --system --gid bsa-no-such-group --home-dir /var/lib/bsa-test --no-create-home --shell /usr/sbin/nologin "
        "bsa-no-such-user"]
    assert not any(call[0] in ("groupadd", "useradd") for call in module.calls)  # check mode creates nothing
    assert not (tmp_path / "etc").exists()
    result, module = run({**host(tmp_path), "account": account("bsa-no-such-user", "bsa-no-such-group")})
    changes = [call[0] if call[0] != "systemctl" else call[1] for call in module.calls
               if call[0] in ("groupadd", "useradd") or call[1:2] in (["daemon-reload"], ["enable"])]
    assert changes == ["groupadd", "useradd", "daemon-reload", "enable"]  # the first changes, after the looks
    assert result["account"] == checked["account"] and (tmp_path / "etc" / "sglang.env").exists()


def test_a_login_account_is_refused_before_anything_changes(tmp_path: Path) -> None:
    login = next((e for e in pwd.getpwall() if e.pw_shell not in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false",
                                                                  "/usr/bin/false", "")), None)
    if login is None:
        pytest.skip("this machine has no account with a login shell")
    params = {**host(tmp_path), "account": account(login.pw_name, grp.getgrgid(login.pw_gid).gr_name)}
    with pytest.raises(server_files.Refused, match="sglang_user / sglang_group: gpu1 already has user .* Nothing was changed"):
        run(params)
    assert not (tmp_path / "etc").exists()


def test_an_existing_system_account_is_corrected_as_the_user_module_would(tmp_path: Path) -> None:
    system = next((e for e in pwd.getpwall() if e.pw_uid < 1000 and e.pw_gid < 1000
                   and e.pw_shell in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")), None)
    if system is None:
        pytest.skip("no system account without login here")
    group = grp.getgrgid(system.pw_gid).gr_name
    same = account(system.pw_name, group, home=system.pw_dir, shell=system.pw_shell)
    result, module = run({**host(tmp_path), "account": same}, check_mode=True)
    assert result["account"] == []
    moved = account(system.pw_name, group, home="/var/lib/bsa-elsewhere", shell=system.pw_shell)
    result, module = run({**host(tmp_path), "account": moved}, check_mode=True)
    assert result["account"] == [f"usermod --home /var/lib/bsa-elsewhere {system.pw_name}"]
