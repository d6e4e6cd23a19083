"""Warmup and readiness (issue 35 item 3): the validation refuses --skip-server-warmup unless
sglang_server_allow_skip_warmup allows it (sglang_rules/warmup.py), the ready wait polls /ready on node 0 and /health on
the other nodes of a multi-node instance, and the stand-in's /ready has SGLang 0.5.23's semantics (503 until the warmup
passed and while draining, 200 in between; nodes 1..N-1 serve no /ready)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import RULES
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from standin_inproc import serve

REPO = Path(__file__).resolve().parents[2]
HOST = {"sglang_version": "0.5.23", "sglang_model_path": "meta-llama/Llama-3.1-8B-Instruct", "nvidia_gpu_count": 8,
        "nvidia_gpu_compute_capability": "12.0", "sglang_args": {"tp_size": 1}}
DEFAULTS = {"sglang_version": "0.5.23", "nvidia_driver_version": "580.95.05"}


def errors(**host: object) -> list[tuple[str, str]]:
    result = validate_host({**HOST, **host}, defaults=DEFAULTS)
    return [(p.rule, p.variable) for p in result.errors]


def test_skip_server_warmup_is_refused_naming_the_variable_and_the_fix() -> None:
    result = validate_host({**HOST, "sglang_args": {"tp_size": 1, "skip_server_warmup": True}}, defaults=DEFAULTS)
    [problem] = [p for p in result.errors if p.rule == "server.warmup"]
    assert problem.variable == "sglang_args.skip_server_warmup"
    assert "sglang_server_allow_skip_warmup: true" in problem.fix
    assert problem.source == "sglang/srt/entrypoints/http_server.py:2589-2593"
    assert "http_server.py:714-718" in problem.message


@pytest.mark.parametrize("allow", [True, "true", "yes"])
def test_skip_server_warmup_is_accepted_when_allowed(allow: object) -> None:
    assert errors(sglang_args={"tp_size": 1, "skip_server_warmup": True}, sglang_server_allow_skip_warmup=allow) == []


def test_without_the_flag_nothing_is_refused() -> None:
    assert errors() == [] and errors(sglang_args={"tp_size": 1, "skip_server_warmup": False}) == []


def test_the_rule_cites_the_wheel_it_mirrors() -> None:
    [item] = [r for r in RULES if r.rule_id == "server.warmup"]
    site = sorted((REPO / ".venv-conformance" / "lib").glob("python*/site-packages"))
    if not site:
        pytest.skip(".venv-conformance is absent")
    lines = (site[0] / "sglang/srt/entrypoints/http_server.py").read_text(encoding="utf-8").splitlines()
    assert lines[713] == '@app.get("/ready")' and "is_ready()" in lines[716]
    assert "skip_server_warmup" in lines[2588] and "ServerStatus.Up" in lines[2592]
    assert any("2589-2593" in s for s in item.sources)


def test_the_ready_wait_polls_ready_on_node_0_and_health_on_the_others() -> None:
    defaults = yaml.safe_load((REPO / "roles/sglang_server/defaults/main.yml").read_text(encoding="utf-8"))
    assert defaults["sglang_server_ready_path"] == "/ready"
    assert defaults["sglang_server_allow_skip_warmup"] is False
    rendered = (REPO / "roles/sglang_server/vars/main.yml").read_text(encoding="utf-8")
    assert "sglang_server_ready_path if __sglang_server_plan.endpoint.node_rank | int == 0 else '/health'" in rendered


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310  (loopback test server)
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_standin_is_ready_only_after_its_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("http_proxy", raising=False)
    with serve([], monkeypatch) as srv:
        for state, code in (("starting", 503), ("up", 200), ("draining", 503)):
            srv.state.status = state
            assert status(srv.url + "/ready") == code, state
        srv.state.status = "up"
        srv.state.health_only = True  # nodes 1..N-1: SGLang's dummy health server
        assert status(srv.url + "/ready") == 404 and status(srv.url + "/health") == 200
