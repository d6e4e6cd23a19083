"""Every route of the SGLang server that the project calls exists in SGLang 0.5.23's HTTP server, and the stand-in
(tests/fixtures/sglang_standin) serves each of them (issue 35 item 8).

The routes are read from the wheel in .venv-conformance: the FastAPI route decorators of
sglang/srt/entrypoints/http_server.py (``@app.get``, ``@app.post``, ``@app.api_route``, ``@app.websocket``), and
``/metrics``, which add_prometheus_middleware mounts (sglang/srt/utils/common.py:2849) when metrics are on (the
project's default: sglang_metrics). Without .venv-conformance the wheel checks are skipped, with the reason.

:data:`CALLED` is the project's calls, each with a file that makes it; :func:`test_no_call_is_left_out` scans the
roles, plugins and templates for string literals naming any route of the wheel, so a new call cannot go unlisted.
"""

from __future__ import annotations

import ast
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from standin_inproc import serve

REPO = Path(__file__).resolve().parents[2]
SITE = sorted((REPO / ".venv-conformance" / "lib").glob("python*/site-packages"))
HTTP_SERVER = "sglang/srt/entrypoints/http_server.py"
METRICS_MOUNT = "sglang/srt/utils/common.py"

# Route -> (HTTP method the project uses, a file of the project that calls it).
CALLED: dict[str, tuple[str, str]] = {
    "/health": ("GET", "roles/sglang_server/tasks/gate.yml"),  # the deep check; the ready wait of nodes 1..N-1
    "/v1/models": ("GET", "roles/sglang_server/tasks/gate.yml"),
    "/v1/chat/completions": ("POST", "collections/ansible_collections/blackwell/sglang/plugins/modules/chat_probe.py"),
    "/server_info": ("GET", "roles/sglang_server/vars/main.yml"),  # wait_ready's info_url; chat_probe, server_probe
    "/get_server_info": ("GET", "collections/ansible_collections/blackwell/sglang/plugins/modules/chat_probe.py"),
    "/metrics": ("GET", "roles/sglang_router/tasks/drain.yml"),  # the drain's in-flight count; Prometheus's scrape
    "/ready": ("GET", "collections/ansible_collections/blackwell/sglang/plugins/filter/monitoring.py"),  # Prometheus; the ready wait
    "/weights_checker": ("GET", "collections/ansible_collections/blackwell/sglang/plugins/modules/chat_probe.py"),  # quality gate
}

# Where the project's calls to the server are written: a string literal naming a route of the wheel here is a call.
SCANNED = ("roles/*/tasks/*.yml", "roles/*/vars/main.yml", "roles/*/defaults/main.yml", "roles/*/templates/*.j2",
           "playbooks/*.yml", "collections/ansible_collections/blackwell/sglang/plugins/modules/*.py",
           "collections/ansible_collections/blackwell/sglang/plugins/module_utils/*.py",
           "collections/ansible_collections/blackwell/sglang/plugins/filter/*.py")
# Literals that name a route of the wheel but are no call to the SGLang server: path -> why.
NOT_CALLS = {
    "/generate": "roles/sglang_router's defaults comment: the router's data plane, which the clients call",
}


def wheel_routes() -> dict[str, tuple[str, int]]:
    """route -> (file, line) of SGLang's HTTP server in .venv-conformance; skips when the wheel is absent."""
    if not SITE:
        pytest.skip(".venv-conformance is absent (make conformance-venv): SGLang 0.5.23's HTTP server cannot be read")
    server = SITE[0] / HTTP_SERVER
    if not server.is_file():
        pytest.skip(f".venv-conformance has no {HTTP_SERVER}")
    routes: dict[str, tuple[str, int]] = {}
    for node in ast.walk(ast.parse(server.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                    and isinstance(deco.func.value, ast.Name) and deco.func.value.id == "app"
                    and deco.func.attr in ("get", "post", "put", "delete", "api_route", "websocket")
                    and deco.args and isinstance(deco.args[0], ast.Constant) and isinstance(deco.args[0].value, str)):
                routes.setdefault(deco.args[0].value, (HTTP_SERVER, deco.lineno))
    common = (SITE[0] / METRICS_MOUNT).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(common, 1):
        if 'Mount("/metrics"' in line:
            routes.setdefault("/metrics", (METRICS_MOUNT, number))
    return routes


def wheel_version() -> str:
    text = next((SITE[0]).glob("sglang-*.dist-info/METADATA")).read_text(encoding="utf-8")
    return re.search(r"(?m)^Version: (.+)$", text).group(1).strip()


def test_the_wheel_is_0_5_23() -> None:
    wheel_routes()
    assert wheel_version() == "0.5.23"


@pytest.mark.parametrize("path", sorted(CALLED))
def test_every_route_the_project_calls_exists_in_sglang(path: str) -> None:
    routes = wheel_routes()
    assert path in routes, f"{CALLED[path][1]} calls {path}, which SGLang {wheel_version()}'s HTTP server does not serve"


def test_the_listed_callers_make_the_calls() -> None:
    for path, (_, caller) in CALLED.items():
        assert re.search(re.escape(path) + r"(?![a-z_/])", (REPO / caller).read_text(encoding="utf-8")), (path, caller)


def test_no_call_is_left_out() -> None:
    """A string literal naming a route of the wheel (``'/health'``, ``"/server_info"``, ``~ '/metrics'``) in the
    project's tasks, vars, templates and plugins is in CALLED (or NOT_CALLS, with the reason)."""
    routes = {r for r in wheel_routes() if "{" not in r and r != "/"}
    found: dict[str, str] = {}
    for pattern in SCANNED:
        for path in sorted(REPO.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            for literal in re.findall(r"""(?<![\w.-])(/[a-z0-9_][a-z0-9_/.-]*)(?![\w/.-])""", text):
                if literal in routes:
                    found.setdefault(literal, str(path.relative_to(REPO)))
    unlisted = {p: f for p, f in found.items() if p not in CALLED and p not in NOT_CALLS}
    assert unlisted == {}, f"calls to SGLang routes missing from CALLED: {unlisted}"


# --- the stand-in serves them ----------------------------------------------------------------------------


def _call(url: str, method: str) -> tuple[int, bytes, str]:
    body = None
    headers = {}
    if method == "POST":
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (127.0.0.1 only)
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def test_the_standin_serves_every_called_route(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each route the project calls answers 200 from the stand-in, JSON where SGLang answers JSON."""
    with serve(["--enable-metrics"], monkeypatch) as srv:
        for path, (method, _) in sorted(CALLED.items()):
            status, body, ctype = _call(srv.url + path, method)
            assert status == 200, (path, status, body[:200])
            if path in ("/v1/models", "/v1/chat/completions", "/server_info", "/get_server_info"):
                data = json.loads(body)
                assert isinstance(data, dict), path
            if path == "/v1/models":
                assert data["object"] == "list" and data["data"] and data["data"][0]["object"] == "model"
            if path == "/v1/chat/completions":
                assert data["object"] == "chat.completion" and data["choices"][0]["message"]["role"] == "assistant"
            if path == "/metrics":
                assert "text/plain" in ctype and b"sglang:" in body
