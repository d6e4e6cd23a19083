"""The project's own HTTP calls (SGLang, its routers, the exporters, Prometheus) never go through a proxy and never follow
a redirect, in every role and module: the class of server_state's health check, which did both (module_utils/sglang_http).

A GPU host often has ``http_proxy`` in its environment (``/etc/environment`` of a fleet behind a corporate proxy, or
the proxy variables the roles set for downloads): a health check or a router call through it asks the proxy, not the
server, and a bearer key sent over plain HTTP to a proxy leaves the fleet. A redirect re-sends the request's headers
(the router's admin key, the server's API key) to wherever it points. Downloads (the Hub, apt, pip) keep the proxy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_readme_examples import _tasks as tasks  # every task mapping of a task list, blocks included

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "collections/ansible_collections/blackwell/sglang/plugins"
# Python files that call open_url themselves, and why they may (everything else goes through module_utils/sglang_http).
OPEN_URL_ALLOWED = {
    "module_utils/sglang_http.py": "the one GET of the local server: use_proxy=False, follow_redirects='none'",
    "modules/chat_probe.py": "POSTs and streams; its use_proxy option is set false by every task that calls it (below)",
    "modules/model_fetch.py": "peer-to-peer weight copies: use_proxy=False, follow_redirects='none'",
    "modules/apt_repo_subset.py": "downloads an apt repository's files, which may need the proxy",
}


def task_files() -> list[Path]:
    return sorted(p for p in (REPO / "roles").glob("*/*/*.yml") if p.parent.name in ("tasks", "handlers"))


def calls(module: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in task_files():
        for task in tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if module in task:
                found.append((f"{path.relative_to(REPO)}: {task.get('name')}", task[module] or {}))
    return found


URI_CALLS = calls("ansible.builtin.uri")


def test_the_roles_make_http_calls_of_their_own() -> None:
    """The check below has something to check (a rename of the module would otherwise pass it empty)."""
    assert len(URI_CALLS) >= 15
    assert len(calls("blackwell.sglang.chat_probe")) >= 2


@pytest.mark.parametrize(("where", "args"), URI_CALLS, ids=[w for w, _ in URI_CALLS])
def test_every_uri_call_skips_the_proxy_and_follows_no_redirect(where: str, args: dict[str, Any]) -> None:
    assert args.get("use_proxy") is False, f"{where}: use_proxy: false"
    assert args.get("follow_redirects") == "none", f"{where}: follow_redirects: none"


@pytest.mark.parametrize(("where", "args"), calls("blackwell.sglang.chat_probe"))
def test_every_chat_probe_skips_the_proxy(where: str, args: dict[str, Any]) -> None:
    assert args.get("use_proxy") is False, f"{where}: use_proxy: false"


def test_open_url_only_where_allowed() -> None:
    users = {str(p.relative_to(PLUGINS)) for p in PLUGINS.rglob("*.py")
             if re.search(r"\bopen_url\(", p.read_text(encoding="utf-8"))}
    assert users == set(OPEN_URL_ALLOWED), (
        f"open_url outside module_utils/sglang_http: {sorted(users - set(OPEN_URL_ALLOWED))}; "
        f"allowed but unused: {sorted(set(OPEN_URL_ALLOWED) - users)}")


@pytest.mark.parametrize("name", ["module_utils/sglang_http.py", "modules/model_fetch.py"])
def test_the_local_gets_pass_no_proxy_and_no_redirect(name: str) -> None:
    for call in re.findall(r"\bopen_url\((.*?)\)\s*(?:as|$)", (PLUGINS / name).read_text(encoding="utf-8"), re.S | re.M):
        assert "use_proxy=False" in call and 'follow_redirects="none"' in call, f"{name}: open_url({call})"
