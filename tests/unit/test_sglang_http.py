"""module_utils/sglang_http: the modules' one way to GET the SGLang server on the host (server_probe, drift_probe, the
server_state look's health check), against a real loopback HTTP(S) server that records what it was asked.

No proxy whatever the environment says, no redirect followed, the body read bounded, the API key sent as a bearer
token only when given and never shown in an error, TLS verified against the CA given.
"""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import sys
import threading
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from ansible.module_utils.urls import open_url
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_http import MAX_BYTES, MAX_ERROR_CHARS, get, get_json
from standin_inproc import make_pki
from test_restart_modules import load

# The look lives in module_utils (server_state and server_files take it): its health check is checked here too.
state_utils = sys.modules[load("server_state").look.__module__]

KEY = "sk-http-9c1e secret"
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
Answer = tuple[int, bytes, dict[str, str]]


@pytest.fixture(autouse=True)
def _no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's own proxy settings play no part (the proxy test sets its own)."""
    for var in (*PROXY_VARS, "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(answers: dict[str, Answer], context: ssl.SSLContext | None = None,
            ) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """(base URL, the (path, Authorization header) of each request) of a loopback server answering GETs from
    ``answers`` (404 otherwise); HTTPS with ``context``."""
    asked: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            asked.append((self.path, self.headers.get("Authorization")))
            status, body, headers = answers.get(self.path, (404, b"", {}))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    scheme = "https" if context is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_get_reads_the_body_and_sends_the_key_as_a_bearer_token_only_when_given() -> None:
    with serving({"/info": (200, b'{"tp_size": 8}', {})}) as (url, asked):
        assert get(f"{url}/info", timeout=5) == (200, b'{"tp_size": 8}', None)
        assert get_json(f"{url}/info", timeout=5, api_key=KEY) == (200, {"tp_size": 8}, None)
        assert get_json(f"{url}/info", timeout=5, api_key="") == (200, {"tp_size": 8}, None)
    assert asked == [("/info", None), ("/info", f"Bearer {KEY}"), ("/info", None)]


def test_an_environment_proxy_is_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The roles set proxy variables for downloads: the local server is still asked directly (no no_proxy set)."""
    for var in PROXY_VARS:
        monkeypatch.setenv(var, f"http://127.0.0.1:{free_port()}")
    with serving({"/health": (200, b"", {}), "/info": (200, b"{}", {})}) as (url, asked):
        with pytest.raises(urllib.error.URLError):  # the control: a GET that honours the environment goes nowhere
            open_url(f"{url}/health", timeout=5, use_proxy=True)
        assert get(f"{url}/info", timeout=5) == (200, b"{}", None)
        assert get_json(f"{url}/info", timeout=5) == (200, {}, None)
        assert state_utils.health_status(f"{url}/health", 5, None) == (200, "")
    assert asked == [("/info", None), ("/info", None), ("/health", None)]


def test_a_redirect_is_not_followed() -> None:
    with serving({}) as (elsewhere, away):
        with serving({"/health": (302, b"", {"Location": f"{elsewhere}/target"}),
                      "/moved": (302, b"", {"Location": "/target"}), "/target": (200, b"{}", {})}) as (url, asked):
            assert get(f"{url}/moved", timeout=5) == (302, b"", "HTTP 302")
            assert get_json(f"{url}/moved", timeout=5, api_key=KEY) == (302, None, "HTTP 302")
            assert state_utils.health_status(f"{url}/health", 5, None) == (302, "HTTP 302")
    assert asked == [("/moved", None), ("/moved", f"Bearer {KEY}"), ("/health", None)]
    assert away == []


def test_the_body_is_read_bounded() -> None:
    with serving({"/16": (200, b"x" * 16, {}), "/17": (200, b"x" * 17, {}), "/json": (200, b'"' + b"x" * 15 + b'"', {})}
                 ) as (url, _):
        assert get(f"{url}/16", timeout=5, limit=16) == (200, b"x" * 16, None)
        status, body, error = get(f"{url}/17", timeout=5, limit=16)
        assert (status, len(body), error) == (200, 17, "larger than 16 bytes")
        assert get_json(f"{url}/17", timeout=5, limit=16) == (200, None, "larger than 16 bytes")
        assert get_json(f"{url}/json", timeout=5, limit=17) == (200, "x" * 15, None)
        assert get(f"{url}/17", timeout=5, limit=0) == (200, b"", None)  # a status check reads no body
    assert MAX_BYTES == 8 << 20  # the default bound: the largest JSON answer the modules read


def test_an_error_status_and_nothing_listening() -> None:
    with serving({"/denied": (401, b'{"error": "no key"}', {})}) as (url, _):
        assert get(f"{url}/nothing", timeout=5) == (404, b"", "HTTP 404")
        assert get_json(f"{url}/nothing", timeout=5) == (404, None, "HTTP 404")
        assert get_json(f"{url}/denied", timeout=5, api_key=KEY) == (401, None, "HTTP 401")
    dead = f"http://127.0.0.1:{free_port()}/health"
    status, body, error = get(dead, timeout=5, api_key=KEY)
    assert (status, body) == (-1, b"") and error and len(error) <= MAX_ERROR_CHARS and KEY not in error
    status, value, error = get_json(dead, timeout=5)
    assert (status, value) == (-1, None) and error
    status, error = state_utils.health_status(dead, 5, None)
    assert status == -1 and error


def test_the_key_never_appears_in_an_error() -> None:
    """Even an error that quotes the URL (a malformed one holding the key by mistake) does not show it."""
    status, _, error = get(KEY, timeout=5, api_key=KEY)
    assert status == -1 and error and KEY not in error and "********" in error


def test_a_body_that_is_not_json() -> None:
    with serving({"/html": (200, b"<html></html>", {}), "/deep": (200, b"[" * 200_000, {})}) as (url, _):
        status, value, error = get_json(f"{url}/html", timeout=5)
        assert (status, value) == (200, None) and error and error.startswith("not JSON: ")
        status, value, error = get_json(f"{url}/deep", timeout=5)
        assert (status, value) == (200, None) and error and error.startswith("not JSON: ")
        assert get(f"{url}/html", timeout=5) == (200, b"<html></html>", None)


def test_tls_is_verified_against_the_ca_given(tmp_path: Path) -> None:
    pki, other = make_pki(tmp_path / "pki"), make_pki(tmp_path / "other", label="other")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert, pki.key)
    with serving({"/info": (200, b'{"ok": true}', {})}, context) as (url, asked):
        assert get_json(f"{url}/info", timeout=5, ca_path=str(pki.ca), api_key=KEY) == (200, {"ok": True}, None)
        status, value, error = get_json(f"{url}/info", timeout=5, ca_path=str(other.ca), api_key=KEY)
        assert (status, value) == (-1, None) and error and "certificate" in error.lower() and KEY not in error
        assert state_utils.health_status(f"{url}/info", 5, str(pki.ca)) == (200, "")
        assert state_utils.health_status(f"{url}/info", 5, str(other.ca))[0] == -1
    assert asked == [("/info", f"Bearer {KEY}"), ("/info", None)]


def test_a_json_answer_round_trips() -> None:
    document = {"version": "0.5.23", "tp_size": 8, "nested": {"list": [1, 2.5, None, True]}}
    with serving({"/info": (200, json.dumps(document).encode(), {})}) as (url, _):
        assert get_json(f"{url}/info", timeout=5) == (200, document, None)
