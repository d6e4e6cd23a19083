"""roles/sglang_router/files/sglang-router-probe: the handover's GET past its own redirect (a marked socket).

Against a local HTTP server: the body and exit status 0 for a 200, 1 with the reason for anything else, the key sent as
bearer token from stdin (never an argument), and the socket's SO_MARK set (which nftables' ``meta mark`` matches; setting
it needs CAP_NET_ADMIN, as root on the gateway: skipped where the test runs without it).
"""

from __future__ import annotations

import http.server
import io
import socket
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = types.ModuleType("sglang_router_probe")
exec(compile((REPO / "roles" / "sglang_router" / "files" / "sglang-router-probe").read_text(),  # noqa: S102
             "sglang-router-probe", "exec"), PROBE.__dict__)
MARK = 0x53474C47


def _can_mark() -> bool:
    with socket.socket() as sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, MARK)
        except PermissionError:
            return False
    return True


pytestmark = pytest.mark.skipif(not _can_mark(), reason="setting SO_MARK needs CAP_NET_ADMIN")


class _Workers(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_GET(self) -> None:  # noqa: N802
        auth = self.headers.get("Authorization") or ""
        _Workers.seen.append({"path": self.path, "auth": auth,
                              "mark": self.connection.getsockopt(socket.SOL_SOCKET, socket.SO_MARK)})
        ok = auth == "Bearer control-key"
        body = b'{"workers": []}' if ok else b"unauthorized"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Any:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Workers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Workers.seen = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str],
        key: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(key + "\n"))
    rc = PROBE.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_200_prints_the_body_and_the_key_comes_from_stdin(server: str, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(monkeypatch, capsys, [hex(MARK), f"{server}/workers", ""], "control-key")
    assert (rc, out, err) == (0, '{"workers": []}', "")
    assert _Workers.seen == [{"path": "/workers", "auth": "Bearer control-key", "mark": 0}]  # the server's side


def test_a_refusal_or_no_listener_is_exit_status_1_with_the_reason(server: str, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(monkeypatch, capsys, [hex(MARK), f"{server}/workers", ""], "old-key")
    assert rc == 1 and "HTTP 401" in err
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    rc, out, err = run(monkeypatch, capsys, [hex(MARK), f"http://127.0.0.1:{port}/workers", ""], "control-key")
    assert rc == 1 and out == "" and f"127.0.0.1:{port}/workers" in err
    rc, _, err = run(monkeypatch, capsys, [f"{server}/workers"], "control-key")
    assert rc == 2 and "usage" in err


def test_the_socket_carries_the_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    marks: list[int] = []
    real = socket.socket

    class Recording(real):  # type: ignore[misc, valid-type]
        def connect(self, address: Any) -> None:
            marks.append(self.getsockopt(socket.SOL_SOCKET, socket.SO_MARK))
            raise ConnectionRefusedError("recorded")

    monkeypatch.setattr(PROBE.socket, "socket", Recording)
    with pytest.raises(ConnectionRefusedError):
        PROBE.fetch(MARK, "http://127.0.0.1:9/workers", "", "k")
    assert marks == [MARK]
