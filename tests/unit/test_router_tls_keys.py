"""TLS and keys of the router (roles/sglang_router) and of the servers' clients, property-based.

Every router setting that reaches its unit, its secrets file or an HTTP header either round-trips exactly
(the unit's ExecStart read back with systemd's rules; the secrets file through the launcher into an argparse
parser with sglang-router 0.3.2's option shapes; the key as a bearer token) or is refused by
``blackwell.sglang.router_endpoint`` naming the variable, without echoing a secret.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import threading
import types
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.filter.sglang import instance_plans, router_endpoint
from hypothesis import example, given
from rendering import exec_start, jinja_env
from test_input_contract import CANARY, TEXT, host, refused

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_router"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
LAUNCHER = types.ModuleType("sglang_router_launch")
exec(compile((ROLE / "files" / "sglang-router-launch").read_text(), "sglang-router-launch", "exec"), LAUNCHER.__dict__)  # noqa: S102


def settings(**changes: Any) -> dict[str, Any]:
    """The role's defaults as bare keys (sglang_router_host -> host), with ``changes``."""
    base = {k: DEFAULTS.get(f"sglang_router_{k}", "") for k in ("host", "port", "tls_cert_file", "tls_key_file",
                                                                   "api_key", "control_plane_api_key",
                                                                   "allow_unauthenticated")}
    return {**base, "ca_file": "", **changes}


def render_unit(cfg: dict[str, Any]) -> str:
    """The router's unit as the role renders it for ``cfg`` (bare keys)."""
    env = jinja_env()
    env.undefined = jinja2.StrictUndefined
    context = {f"sglang_router_{k}": v for k, v in cfg.items()}
    context.update({k: v for k, v in DEFAULTS.items() if k not in context and "{{" not in str(v)})
    context.update(ansible_managed="managed", __sglang_router_venv="/opt/sglang-router/smg-1.13.0",
                   __sglang_router_release=DEFAULTS["sglang_router_smg_version"],
                   __sglang_router_launcher="/opt/sglang-router/sglang-router-launch",
                   __sglang_router_secrets_file="/etc/sglang-router/sglang-router.secrets.json",
                   __sglang_router_self=router_endpoint(cfg))
    unit = env.from_string((ROLE / "templates" / "sglang-router.service.j2").read_text()).render(**context)
    # systemd splits the unbraced $SGLANG_ROUTER_WORKER_URLS into the workers (the env file): a plain word here.
    return unit.replace("$SGLANG_ROUTER_WORKER_URLS", "WORKERS")


def option(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words else None


class _Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = (self.headers.get("Authorization") or "").encode("latin-1")
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


_ECHO = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
threading.Thread(target=_ECHO.serve_forever, daemon=True).start()


def header_round_trip(value: str) -> str:
    """The Authorization header as a loopback HTTP server receives it (http.client sends it)."""
    conn = http.client.HTTPConnection("127.0.0.1", _ECHO.server_address[1], timeout=5)
    try:
        conn.request("GET", "/", headers={"Authorization": value})
        return conn.getresponse().read().decode("latin-1")
    finally:
        conn.close()


def router_parser() -> argparse.ArgumentParser:
    """The shapes of sglang-router 0.3.2's key options (router_args.py: --api-key str, --control-plane-api-keys nargs=*)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--api-key", type=str, default=None)
    parser.add_argument("--control-plane-api-keys", type=str, nargs="*", default=[])
    parser.add_argument("--host")
    return parser


@pytest.mark.parametrize("key", ["tls_cert_file", "tls_key_file", "ca_file"])
@given(text=TEXT)
@example(text="/etc/ssl/a b.pem")
@example(text="/etc/ssl/x.pem --api-key=stolen")
def test_router_file_settings_round_trip_or_are_refused(key: str, text: str) -> None:
    pair = {"tls_cert_file": "/etc/ssl/r.pem", "tls_key_file": "/etc/ssl/r.key"} if key != "ca_file" else {}
    cfg = settings(host="127.0.0.1", **{**pair, key: text})
    result = router_endpoint(cfg)
    mine = [p for p in result["problems"] if p.startswith(f"sglang_router_{key}")]
    if mine or not text:
        return
    assert result["problems"] == []
    words = exec_start(render_unit(cfg))
    flag = {"tls_cert_file": "--tls-cert-path", "tls_key_file": "--tls-key-path", "ca_file": "--ca-cert-paths"}[key]
    assert option(words, flag) == text


@given(text=TEXT)
@example(text="0.0.0.0 --api-key x")
def test_router_host_round_trips_or_is_refused(text: str) -> None:
    cfg = settings(host=text, allow_unauthenticated=True)
    result = router_endpoint(cfg)
    if any(p.startswith("sglang_router_host") for p in result["problems"]):
        return
    assert option(exec_start(render_unit(cfg)), "--host") == text


@pytest.mark.parametrize("key", ["api_key", "control_plane_api_key"])
@given(text=TEXT)
@example(text="-starts-with-dash")
@example(text="with:colons:admin:x")
def test_router_keys_reach_the_router_exactly_or_are_refused(key: str, text: str) -> None:
    value = text + CANARY  # the canary last: a key may start with "-"
    cfg = settings(host="0.0.0.0", **{"api_key": "k", "control_plane_api_key": "c", key: value})
    result = router_endpoint(cfg)
    if result["problems"]:
        assert any(p.startswith(f"sglang_router_{key}") for p in result["problems"]), result["problems"]
        assert CANARY not in " ".join(result["problems"]), "a refused key was echoed"
        return
    # The role's secrets file (to_json), read by the launcher and parsed as sglang-router parses its options.
    secrets = json.loads(json.dumps({"api_key": cfg["api_key"],
                                     "control_plane_api_keys": ["ansible:ansible:admin:" + cfg["control_plane_api_key"]]}))
    parsed = router_parser().parse_args(["--host", "0.0.0.0", *LAUNCHER.secret_args(secrets)])
    assert parsed.api_key == cfg["api_key"]
    [entry] = parsed.control_plane_api_keys
    assert entry.split(":", 3) == ["ansible", "ansible", "admin", cfg["control_plane_api_key"]]
    # Never on the command line; a valid HTTP header value as a bearer token.
    assert CANARY not in " ".join(exec_start(render_unit(cfg)))
    assert header_round_trip(f"Bearer {value}") == f"Bearer {value}"


@pytest.mark.parametrize("host_", ["0.0.0.0", "10.0.0.5", "::"])
@pytest.mark.parametrize("keys", [{}, {"api_key": "a"}, {"control_plane_api_key": "c"}])
def test_an_open_router_without_both_keys_is_refused(host_: str, keys: dict[str, str]) -> None:
    problems = router_endpoint(settings(host=host_, **keys))["problems"]
    assert len(problems) == 1 and "listens beyond loopback" in problems[0]
    assert "sglang_router_allow_unauthenticated" in problems[0]
    assert router_endpoint(settings(host=host_, allow_unauthenticated="true", **keys))["problems"] == []


def test_the_api_url_scheme_headers_and_ca_follow_the_settings() -> None:
    plain = router_endpoint(settings())
    assert plain == {"url": "http://127.0.0.1:30000", "headers": {}, "ca_path": "", "tls": False, "api_key": "", "problems": []}
    tls = router_endpoint(settings(host="::", port=30443, tls_cert_file="/etc/ssl/r.pem", tls_key_file="/etc/ssl/r.key",
                                   ca_file="/etc/ssl/ca.pem", api_key="a", control_plane_api_key="c"))
    assert tls == {"url": "https://[::1]:30443", "headers": {"Authorization": "Bearer c"}, "ca_path": "/etc/ssl/ca.pem",
                   "tls": True, "api_key": "a", "problems": []}
    # A router's own host variables win over the calling play's defaults (drain and join run on GPU hosts).
    hostvars = {"sglang_router_host": "10.0.0.9", "sglang_router_control_plane_api_key": "mine", "unrelated": 1}
    remote = router_endpoint(hostvars, settings(allow_unauthenticated=True))
    assert remote["url"] == "http://10.0.0.9:30000" and remote["headers"] == {"Authorization": "Bearer mine"}
    assert router_endpoint(settings(tls_cert_file="/etc/ssl/r.pem"))["problems"] == [
        "sglang_router_tls_cert_file and sglang_router_tls_key_file: set both (TLS) or neither"]


@given(text=TEXT)
@example(text="/etc/ssl/ca.pem")
def test_the_servers_ca_file_reaches_the_plan_or_is_refused(text: str) -> None:
    hostvars = host({"ssl_certfile": "/etc/ssl/s.pem", "ssl_keyfile": "/etc/ssl/s.key"}, sglang_tls_ca_file=text)
    if refused(lambda: _instances(hostvars), "sglang_tls_ca_file"):
        return
    [endpoint] = [i["endpoint"] for i in _instances(hostvars)]
    assert endpoint["scheme"] == "https" and endpoint["ca_file"] == text


def _instances(hostvars: dict[str, Any]) -> list[dict[str, Any]]:
    return instance_plans("h", {"h": hostvars}, {"all": ["h"], "sglang_servers": ["h"]})


@pytest.mark.parametrize("var", ["sglang_api_key", "sglang_admin_api_key"])
@pytest.mark.parametrize("value", ["has space", "tab\there", "é-accent", "ok-key_1.~+/="])
def test_server_api_keys_must_be_header_safe(var: str, value: str) -> None:
    hostvars = host(**{var: CANARY + value})
    if refused(lambda: _instances(hostvars), var):
        assert any(c == " " or not ("!" <= c <= "~") for c in value)
    else:
        assert all("!" <= c <= "~" for c in value)


@pytest.mark.parametrize(("args", "extra", "variable"), [
    ({"ssl_certfile": "/etc/ssl/s.pem"}, {}, "sglang_args.ssl_certfile"),
    ({"ssl_keyfile": "/etc/ssl/s.key"}, {}, "sglang_args.ssl_keyfile"),
    ({}, {"sglang_ssl_keyfile_password": "pw"}, "sglang_ssl_keyfile_password"),
    ({"ssl_ca_certs": "/etc/ssl/ca.pem"}, {}, "sglang_args.ssl_ca_certs"),
    ({"enable_ssl_refresh": True}, {}, "sglang_args.enable_ssl_refresh"),
])
def test_tls_arguments_sglang_refuses_alone_are_refused(args: dict[str, Any], extra: dict[str, Any], variable: str) -> None:
    # serving_hook.py:47-87 (handle_ssl_validation) raises ValueError for each of these at launch.
    assert refused(lambda: _instances(host(args, **extra)), variable)


def test_tls_with_a_key_password_is_accepted_and_only_node_0_serves_https() -> None:
    tls = {"ssl_certfile": "/etc/ssl/s.pem", "ssl_keyfile": "/etc/ssl/s.key"}
    [endpoint] = [i["endpoint"] for i in _instances(host(tls, sglang_ssl_keyfile_password="pw"))]
    assert endpoint["scheme"] == "https" and endpoint["local_url"].startswith("https://127.0.0.1:")


def test_the_router_limits_reach_its_command_line() -> None:
    words = exec_start(render_unit(settings(max_concurrent_requests=64, queue_size=0, rate_limit_tokens_per_second=2000)))
    assert (option(words, "--max-concurrent-requests"), option(words, "--queue-size"),
            option(words, "--rate-limit-tokens-per-second")) == ("64", "0", "2000")
    # The defaults: no concurrency cap (-1), a queue of 100, and no token bucket at all.
    words = exec_start(render_unit(settings()))
    assert (option(words, "--max-concurrent-requests"), option(words, "--queue-size")) == ("-1", "100")
    assert "--rate-limit-tokens-per-second" not in words
