"""server_state: install.yml's one read-only look at a host's instances (units, activity, health, virtualenv).

The unit and virtualenv-record scans run on temporary directories; systemctl answers and health statuses are
scripted (test_restart_modules' fake AnsibleModule), and one real GET finds nothing listening.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_restart_modules import Failed, FakeModule, load

server_state = load("server_state")
# The look itself lives in module_utils (server_files takes the same look after installing): patch it there.
state_utils = sys.modules[server_state.look.__module__]


def test_finds_the_units_this_role_installed_only(tmp_path: Path) -> None:
    units = tmp_path / "system"
    units.mkdir()
    (units / "sglang.service").write_text("[Unit]\n# SGLang 0.5.23 (blackwell)\n")
    (units / "sglang-code.service").write_text("# SGLang 0.5.23\n[Unit]\n")
    (units / "sglang-mine.service").write_text("[Unit]\nDescription=written by hand\n  # SGLang 1 (not at a line start)\n")
    (units / "other.service").write_text("# SGLang 0.5.23\n")
    (units / ".sglang-hidden.service").write_text("# SGLang 0.5.23\n")
    (units / "sglang-link.service").symlink_to(units / "sglang.service")
    assert state_utils.installed_units(str(units), ["sglang.service", "sglang-*.service", ".sglang-*"], "^# SGLang [0-9]") \
        == ["sglang", "sglang-code"]
    assert state_utils.installed_units(str(tmp_path / "none"), ["*"], ".") == []


def test_finds_the_virtualenv_records_that_name_the_current_virtualenv(tmp_path: Path) -> None:
    config = tmp_path / "sglang"
    for sub, text in [("last-good", "/opt/venvs/b\n"), ("last-good-code", "/opt/venvs/a\n"),
                      ("last-good-chat", "/opt/venvs/b"), ("x/deeper", "/opt/venvs/b\n"), ("other", "/opt/venvs/bb\n")]:
        (config / sub).mkdir(parents=True)
        (config / sub / "venv").write_text(text)
    (config / "venv").write_text("# old\n/opt/venvs/b\n")
    (config / "linked").symlink_to(config / "last-good")
    assert state_utils.venv_records(str(config), "venv", "/opt/venvs/b") == sorted([
        str(config / "last-good" / "venv"), str(config / "last-good-chat" / "venv"), str(config / "venv")])


def test_looks_at_activity_and_health_of_the_running_instances_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def health(url: str, timeout: float, ca_path: str | None) -> tuple[int, str]:
        asked.append(url)
        return {"http://127.0.0.1:30000/health": (200, ""), "http://127.0.0.1:30002/health": (-1, "refused")}[url]

    monkeypatch.setattr(state_utils, "health_status", health)
    module = FakeModule({("systemctl", "is-active"): (3, "active\ninactive\nactive\n", "")})
    instances = [{"name": n, "unit": f"sglang-{n}.service", "url": f"http://127.0.0.1:3000{k}/health", "ca_path": None}
                 for k, n in enumerate(["chat", "code", "embed"])]
    result = server_state.look(module, {"instances": instances, "unit_dir": str(tmp_path), "unit_patterns": ["*"],
                                        "unit_marker": "x", "health_timeout": 5, "health_status_codes": [-1, 200, 503],
                                        "venv": str(tmp_path / "venv"), "config_dir": str(tmp_path),
                                        "venv_record_name": "venv"})
    assert module.calls == [["systemctl", "is-active", "sglang-chat.service", "sglang-code.service", "sglang-embed.service"]]
    assert result["active"] == {"chat": "active", "code": "inactive", "embed": "active"}
    assert result["health"] == {"chat": 200, "embed": -1} and asked == ["http://127.0.0.1:30000/health",
                                                                        "http://127.0.0.1:30002/health"]
    assert result["venv"] == str(tmp_path / "venv") and result["venv_records"] == [] and result["changed"] is False


def test_a_health_status_that_is_no_answer_fails_as_uri_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_utils, "health_status", lambda url, timeout, ca_path: (500, "HTTP Error 500"))
    module = FakeModule({("systemctl", "is-active"): (0, "active\n", "")})
    with pytest.raises(Failed, match=r"Status code was 500 and not \[-1, 200, 503\]"):
        server_state.look(module, {"instances": [{"name": "sglang", "unit": "sglang.service", "url": "http://x/health"}],
                                   "unit_dir": str(tmp_path), "unit_patterns": ["*"], "unit_marker": "x",
                                   "health_timeout": 5, "health_status_codes": [-1, 200, 503], "venv": "/v",
                                   "config_dir": str(tmp_path), "venv_record_name": "venv"})


def test_the_health_check_answers_minus_one_when_nothing_listens() -> None:
    status, error = state_utils.health_status("http://127.0.0.1:9/health", 2, None)
    assert status == -1 and error
