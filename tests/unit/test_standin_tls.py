"""The SGLang stand-in's HTTPS (SGLang's --ssl-* options), streaming chat completions and
``/server_info``'s speculative acceptance length, in-process and as a whole server on 127.0.0.1."""
from __future__ import annotations

import http.client
import importlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standin_inproc import REPO, SCHEMA, STANDIN_SRC, make_pki, serve, standin, tls_flags

server, standin_args, proc = standin()
stream = importlib.import_module("sglang._standin.stream")
KEY = "sk-test key/with:odd=chars"


def _get(url: str, path: str, ca: Path | None = None, key: str | None = None, body: dict | None = None,
         ) -> tuple[int, dict[str, str], bytes]:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    if url.startswith("https://"):
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, int(port), timeout=10, context=ssl.create_default_context(cafile=str(ca)))
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        if body is None:
            conn.request("GET", path, headers=headers)
        else:
            conn.request("POST", path, body=json.dumps(body), headers={**headers, "content-type": "application/json"})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _events(raw: bytes) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [line[len("data: "):] for line in raw.decode().split("\n\n") if line.startswith("data: ")]


CHAT = {"model": "m", "messages": [{"role": "user", "content": "Say hello."}], "stream": True}


@pytest.fixture(autouse=True)
def _no_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "FAULTS_FILE", str(tmp_path / "faults.env"))
    for knob in ("TTFT_SECONDS", "TOKEN_SECONDS", "SPEC_ACCEPT_LENGTH"):
        monkeypatch.delenv(f"SGLANG_STANDIN_{knob}", raising=False)


def test_https_with_an_encrypted_key_whose_password_comes_from_the_config_file(tmp_path, monkeypatch):
    pki = make_pki(tmp_path / "pki", password="pa ss'w\"ord")
    with serve(["--api-key", KEY, *tls_flags(pki, tmp_path)], monkeypatch) as srv:
        assert srv.url.startswith("https://")
        assert srv.cfg["ssl_keyfile_password"] == pki.password
        assert _get(srv.url, "/health", pki.ca)[0] == 200
        assert _get(srv.url, "/v1/models", pki.ca)[0] == 401
        status, _, body = _get(srv.url, "/v1/models", pki.ca, KEY)
        assert status == 200 and json.loads(body)["data"][0]["id"] == "/models/test-model"


def test_a_client_trusting_another_ca_is_refused_and_the_server_keeps_serving(tmp_path, monkeypatch):
    pki, other = make_pki(tmp_path / "pki"), make_pki(tmp_path / "other", label="other")
    with serve(tls_flags(pki, tmp_path), monkeypatch) as srv:
        with pytest.raises(ssl.SSLCertVerificationError):
            _get(srv.url, "/health", other.ca)
        port = int(srv.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:  # plain HTTP gets no answer
            plain.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            plain.settimeout(5)
            try:
                assert not plain.recv(100).startswith(b"HTTP/")
            except (ConnectionResetError, TimeoutError):
                pass
        assert _get(srv.url, "/health", pki.ca)[0] == 200


def test_a_wrong_key_password_fails_to_load(tmp_path, monkeypatch):
    pki = make_pki(tmp_path / "pki", password="right")
    monkeypatch.setenv("SGLANG_STANDIN_SCHEMA", str(SCHEMA))
    cfg = standin_args.resolve(standin_args.parse_args(
        ["--model-path", "m", "--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key),
         "--ssl-keyfile-password", "wrong"]))
    with pytest.raises(ssl.SSLError):
        server.ssl_context(cfg)
    assert server.ssl_context({**cfg, "ssl_keyfile_password": "right"}) is not None
    assert server.ssl_context({"ssl_certfile": None, "ssl_keyfile": None}) is None


@pytest.mark.parametrize(("flags", "message"), [
    (["--ssl-certfile", "CERT"], "--ssl-certfile requires --ssl-keyfile"),
    (["--ssl-keyfile", "KEY"], "--ssl-keyfile requires --ssl-certfile"),
    (["--ssl-ca-certs", "CA"], "--ssl-ca-certs has no effect without"),
    (["--ssl-keyfile-password", "x"], "--ssl-keyfile-password has no effect without"),
    (["--ssl-certfile", "CERT", "--ssl-keyfile", "MISSING"], "SSL key file not found: '"),
    (["--ssl-certfile", "CERT", "--ssl-keyfile", "KEY", "--ssl-ca-certs", "MISSING"], "SSL CA certificates file not found"),
])
def test_inconsistent_ssl_options_are_refused_before_the_model_loads(tmp_path, monkeypatch, flags, message):
    pki = make_pki(tmp_path / "pki")
    paths = {"CERT": str(pki.cert), "KEY": str(pki.key), "CA": str(pki.ca), "MISSING": str(tmp_path / "missing.pem")}
    monkeypatch.setenv("SGLANG_STANDIN_SCHEMA", str(SCHEMA))
    ns = standin_args.parse_args(["--model-path", "m", *[paths.get(f, f) for f in flags]])
    with pytest.raises(ValueError, match=message):
        standin_args.resolve(ns)


def test_streaming_chat_completion_is_sse_with_role_tokens_finish_usage_and_done(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_STANDIN_TTFT_SECONDS", "0.2")
    monkeypatch.setenv("SGLANG_STANDIN_TOKEN_SECONDS", "0.02")
    with serve([], monkeypatch) as srv:
        started = time.monotonic()
        status, headers, raw = _get(srv.url, "/v1/chat/completions",
                                    body={**CHAT, "max_tokens": 5, "stream_options": {"include_usage": True}})
        elapsed = time.monotonic() - started
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream") and headers["transfer-encoding"] == "chunked"
    events = _events(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    tokens = [c["choices"][0]["delta"]["content"] for c in chunks[1:] if c["choices"] and c["choices"][0]["delta"]["content"]]
    assert len(tokens) == 5 and "".join(tokens) == "Hello from the SGLang stand"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    assert chunks[-1]["usage"]["total_tokens"] == chunks[-1]["usage"]["prompt_tokens"] + 5
    assert elapsed >= 0.2 + 4 * 0.02


def test_streaming_without_include_usage_has_no_usage_chunk_and_stops_at_the_end(monkeypatch):
    monkeypatch.setenv("SGLANG_STANDIN_TOKEN_SECONDS", "0")
    with serve([], monkeypatch) as srv:
        events = _events(_get(srv.url, "/v1/chat/completions", body=CHAT)[2])
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["usage"] is None and c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == len(stream.TOKENS)


def test_stream_response_default_include_usage_adds_the_usage_chunk(monkeypatch):
    monkeypatch.setenv("SGLANG_STANDIN_TOKEN_SECONDS", "0")
    with serve(["--stream-response-default-include-usage"], monkeypatch) as srv:
        events = _events(_get(srv.url, "/v1/chat/completions", body={**CHAT, "max_tokens": 3})[2])
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 3


def test_non_streaming_chat_is_unchanged(monkeypatch):
    with serve([], monkeypatch) as srv:
        status, headers, raw = _get(srv.url, "/v1/chat/completions", body={**CHAT, "stream": False})
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(raw)["object"] == "chat.completion"


def _internal(srv) -> dict:  # type: ignore[no-untyped-def]
    status, _, raw = _get(srv.url, "/server_info")
    assert status == 200
    return json.loads(raw)["internal_states"][0]


def test_server_info_reports_avg_spec_accept_length_only_with_speculative_decoding(monkeypatch):
    with serve([], monkeypatch) as srv:
        _get(srv.url, "/v1/chat/completions", body=CHAT)
        assert "avg_spec_accept_length" not in _internal(srv)
    with serve(["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/draft"],
               monkeypatch) as srv:
        assert "avg_spec_accept_length" not in _internal(srv)  # SGLang: no verify step ran yet
        _get(srv.url, "/v1/chat/completions", body={**CHAT, "max_tokens": 2})
        assert _internal(srv)["avg_spec_accept_length"] == 2.65  # auto (3, 1, 4) for an unknown family
        status, _, raw = _get(srv.url, "/get_server_info")
        assert json.loads(raw)["internal_states"][0]["avg_spec_accept_length"] == 2.65


def test_the_fault_file_sets_a_useless_acceptance_length(tmp_path, monkeypatch):
    (tmp_path / "faults.env").write_text("SPEC_ACCEPT_LENGTH=1.02\n", encoding="utf-8")
    with serve(["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "5", "--speculative-eagle-topk", "4",
                "--speculative-num-draft-tokens", "8"], monkeypatch) as srv:
        _get(srv.url, "/v1/chat/completions", body={**CHAT, "stream": False})
        assert _internal(srv)["avg_spec_accept_length"] == 1.02


def test_tls_warmup_verifies_the_certificate_for_the_url_sglang_uses(tmp_path, monkeypatch):
    good, wrong_name = make_pki(tmp_path / "good"), make_pki(tmp_path / "bad", sans=("gpu-7.example",))
    for pki, ok in ((good, True), (wrong_name, False)):
        with serve([*tls_flags(pki, tmp_path), "--ssl-ca-certs", str(pki.ca), "--api-key", KEY], monkeypatch) as srv:
            cfg = {**srv.cfg, "host": "0.0.0.0", "port": int(srv.url.rsplit(":", 1)[1])}
            error = server.tls_warmup(cfg, tries=1, pause=0)
            assert (error is None) == ok, error
            if not ok:
                assert "127.0.0.1" in error and "certificate" in error.lower()


# --- the whole stand-in (python -m sglang.launch_server) on 127.0.0.1 ----------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(tmp_path: Path, argv: list[str]) -> tuple[subprocess.Popen, Path]:
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for node in ("nvidia0", "nvidiactl"):
        (dev / node).touch()
    env = {**os.environ, "PYTHONPATH": str(STANDIN_SRC), "SGLANG_STANDIN_SCHEMA": str(SCHEMA),
           "SGLANG_STANDIN_DEV_DIR": str(dev), "SGLANG_STANDIN_NVIDIA_PROC": str(tmp_path / "no-proc"),
           "SGLANG_STANDIN_FAULTS": str(tmp_path / "faults.env"), "SGLANG_STANDIN_LOAD_SECONDS": "0",
           "SGLANG_STANDIN_DRAIN_SECONDS": "0"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        child = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/m",
                                  "--host", "127.0.0.1", *argv], env=env, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=REPO, start_new_session=True)
    return child, log


def _wait_for(log: Path, child: subprocess.Popen, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(encoding="utf-8", errors="replace")
        if needle in text or child.poll() is not None:
            return text
        time.sleep(0.1)
    return log.read_text(encoding="utf-8", errors="replace")


def _stop(child: subprocess.Popen) -> int:
    if child.poll() is None:
        os.kill(child.pid, signal.SIGTERM)
    try:
        return child.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        return child.wait(timeout=5)


def test_the_whole_server_serves_https_and_refuses_requests_without_the_key(tmp_path):
    pki, port = make_pki(tmp_path / "pki", password="pw"), _free_port()
    child, log = _launch(tmp_path, ["--port", str(port), "--api-key", KEY, "--ssl-ca-certs", str(pki.ca),
                                    *tls_flags(pki, tmp_path)])
    try:
        text = _wait_for(log, child, "fired up")
        assert "fired up" in text, text
        assert f"Uvicorn running on https://127.0.0.1:{port}" in text
        url = f"https://127.0.0.1:{port}"
        assert _get(url, "/health", pki.ca)[0] == 200
        assert _get(url, "/v1/chat/completions", pki.ca, body=CHAT)[0] == 401
        status, _, raw = _get(url, "/v1/chat/completions", pki.ca, KEY, body=CHAT)
        assert status == 200 and _events(raw)[-1] == "[DONE]"
    finally:
        assert _stop(child) == 0


@pytest.mark.parametrize("case", ["wrong password", "certificate not for 127.0.0.1"])
def test_the_whole_server_exits_1_on_a_tls_setup_it_cannot_serve(tmp_path, case):
    if case == "wrong password":
        pki = make_pki(tmp_path / "pki", password="right")
        flags = ["--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key), "--ssl-keyfile-password", "wrong"]
        needle = "cannot load the TLS certificate/key"
    else:
        pki = make_pki(tmp_path / "pki", sans=("gpu-7.example",))
        flags = [*tls_flags(pki, tmp_path), "--ssl-ca-certs", str(pki.ca)]
        needle = "Initialization failed. warmup error"
    child, log = _launch(tmp_path, ["--port", str(_free_port()), *flags])
    try:
        rc = child.wait(timeout=30)
    finally:
        _stop(child)
    text = log.read_text(encoding="utf-8")
    assert rc == 1 and needle in text and "fired up" not in text, text
