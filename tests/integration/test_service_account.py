"""The account option of blackwell.sglang.server_files (every role's service account), through ansible-playbook on this
machine in check mode (nothing is created here): an account that exists as a person's or a login's (uid/gid from 1000
or a login shell) is refused, naming the variables, before anything changes; an absent account, or a system account
without login, passes (the absent one reported as a change)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLAY = [{"hosts": "localhost", "gather_facts": False, "connection": "local", "tasks": [{
    "blackwell.sglang.server_files": {"account": {"user": "{{ u }}", "group": "{{ g }}", "home": "/var/lib/bsa-test",
                                                  "names": "sglang_user / sglang_group"}}}]}]


def _run(tmp_path: Path, user: str, group: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["ansible-playbook", "--check", "-i", "localhost,", str(tmp_path / "play.yml"),
                           "-e", f"u={user}", "-e", f"g={group}",
                           "-e", f"ansible_python_interpreter={sys.executable}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)


def _login_account() -> tuple[str, str] | None:
    """An account of this machine with a login shell (root, at least, on a Debian machine)."""
    for entry in pwd.getpwall():
        if entry.pw_shell not in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false", ""):
            return entry.pw_name, entry.pw_name
    return None


def test_an_absent_account_passes(tmp_path: Path) -> None:
    proc = _run(tmp_path, "bsa-no-such-user", "bsa-no-such-group")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "changed=1" in proc.stdout


def test_a_login_account_is_refused_naming_the_variables(tmp_path: Path) -> None:
    found = _login_account()
    if found is None:
        pytest.skip("this machine has no account with a login shell")
    proc = _run(tmp_path, *found)
    assert proc.returncode != 0
    assert "sglang_user / sglang_group" in proc.stdout and "Nothing was changed" in proc.stdout


def test_a_system_account_without_login_passes(tmp_path: Path) -> None:
    system = next((e for e in pwd.getpwall() if e.pw_uid < 1000 and e.pw_shell.endswith(("nologin", "false"))
                   and e.pw_gid < 1000), None)
    if system is None:
        pytest.skip("no system account without login here")
    import grp  # noqa: PLC0415 (Unix only, like the test)

    proc = _run(tmp_path, system.pw_name, grp.getgrgid(system.pw_gid).gr_name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
