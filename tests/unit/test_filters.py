"""Unit tests of the blackwell.sglang filters and of the systemd unit they feed.

The unit template is rendered with plain Jinja2 (no Ansible run): the role's ``vars/main.yml``
expressions are evaluated with ``compile_expression`` and the filters are registered under their
``blackwell.sglang.`` names, as Ansible would resolve them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.sglang import (
    FilterModule,
    instance_plans,
    systemd_env_quote,
    systemd_exec_lines,
    systemd_quote,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from reference import INCIDENT, host_with, load_reference
from rendering import exec_start_lines, render, systemd_split

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_server"


REFERENCE = load_reference()


ref_host = host_with


# --- systemd_quote ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("plain", "plain"),
        ("/opt/sglang/current", "/opt/sglang/current"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "nvidia/Qwen3.5-397B-A17B-NVFP4"),
        ("10.0.0.1:5000", "10.0.0.1:5000"),
        ("a b", '"a b"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("50%", "50%%"),
        ("100% sure", '"100%% sure"'),
        ("$HOME", '"$$HOME"'),
        ("", '""'),
        ('{"a":1}', '"{\\"a\\":1}"'),
        ("it's", '"it\'s"'),
        (8, "8"),
        (0.85, "0.85"),
    ],
)
def test_systemd_quote(word: Any, quoted: str) -> None:
    assert systemd_quote(word) == quoted


@pytest.mark.parametrize(
    "word",
    ["plain", "a b", 'say "hi"', "back\\slash", "50%", "%h/%i", "$HOME", "$$", "", '{"a": [1, "x y"]}', "it's", ";", "a\\nb"],
)
def test_systemd_quote_round_trips_through_systemd_splitting(word: str) -> None:
    assert systemd_split(systemd_quote(word)) == [word]


@pytest.mark.parametrize("word", ["line\nbreak", "tab\there", "cr\rhere", "nul\x00", "del\x7f", "nel\x85", "ls\u2028"])
def test_systemd_quote_refuses_what_a_unit_line_cannot_carry(word: str) -> None:
    with pytest.raises(AnsibleFilterError, match="ExecStart"):
        systemd_quote(word)


# --- systemd_exec_lines -------------------------------------------------------------------------


def test_systemd_exec_lines_one_flag_per_line() -> None:
    argv = ["--model-path", "m", "--tp-size", "8", "--enable-metrics", "--cuda-graph-bs-decode", "1", "2", "4",
            "--served-model-name", "a b", "--chunked-prefill-size", "-1"]
    assert systemd_exec_lines(argv) == [
        "--model-path m",
        "--tp-size 8",
        "--enable-metrics",
        "--cuda-graph-bs-decode 1 2 4",
        '--served-model-name "a b"',
        "--chunked-prefill-size -1",
    ]


def test_systemd_exec_lines_leading_word_and_empty() -> None:
    assert systemd_exec_lines(["serve", "--port", 30000]) == ["serve", "--port 30000"]
    assert systemd_exec_lines([]) == []


def test_systemd_exec_lines_quote_every_word() -> None:
    lines = systemd_exec_lines(["--preferred-sampling-params", '{"top_p":0.9}', "--download-dir", "/data/50%"])
    assert lines == ['--preferred-sampling-params "{\\"top_p\\":0.9}"', "--download-dir /data/50%%"]


def test_systemd_exec_lines_of_a_real_argv_round_trip() -> None:
    result = validate_host(ref_host({"preferred_sampling_params": {"temperature": 0.7}, "served_model_name": "qwen 3.5 $x"}))
    assert result.ok
    assert systemd_split(" ".join(systemd_exec_lines(result.argv))) == result.argv


# --- systemd_env_quote --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("1", '"1"'),
        (1, '"1"'),
        ("a b", '"a b"'),
        ('a"b', '"a\\"b"'),
        ("$HOME", '"\\$HOME"'),
        ("`id`", '"\\`id\\`"'),
        ("back\\slash", '"back\\\\slash"'),
        ("50%", '"50%"'),  # no specifier expansion in EnvironmentFile=
        ("", '""'),
    ],
)
def test_systemd_env_quote(value: Any, quoted: str) -> None:
    assert systemd_env_quote(value) == quoted


# --- instance_plans ------------------------------------------------------------------------------


def test_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"systemd_quote", "systemd_exec_lines", "systemd_env_quote",
                                             "systemd_text", "secret_host_vars", "gateway_problems",
                                             "multinode_layout", "rollout_plan", "server_instances",
                                             "instance_plans", "staged_models", "router_endpoint",
                                             "sglang_lock_name", "model_key", "model_state", "model_fanout_plan",
                                             "model_peer_config", "model_peer_url", "server_files"}


def plans(hostvars: dict[str, Any], spec: str | None = None) -> list[dict[str, Any]]:
    return instance_plans("blackwell-01", {"blackwell-01": hostvars}, {"all": ["blackwell-01"]}, spec)


def test_instance_plans_of_the_reference_host() -> None:
    [plan] = plans(ref_host())
    assert plan["ok"] is True and plan["errors"] == [] and plan["warnings"] == []
    assert plan["argv"][2:] == validate_host(ref_host()).argv[2:]  # the model path is the staged copy
    assert plan["args"]["tp_size"] == 8 and plan["config"] == {} and plan["config_keys"] == []


def test_instance_plans_reject_an_invalid_host_with_the_report() -> None:
    with pytest.raises(AnsibleFilterError) as info:
        plans(ref_host({**INCIDENT, "tp_size": 16}))
    text = str(info.value)
    assert "SGLang configuration rejected" in text
    assert "blackwell-01: 2 error(s)" in text
    assert "[spec.triple]" in text and "[parallel.gpus]" in text
    assert "spec=auto" in text and "fix:" in text


def test_instance_plans_spec_auto_fixes_the_incident() -> None:
    [plan] = plans(ref_host(INCIDENT), spec="auto")
    assert "--speculative-eagle-topk" not in plan["argv"] and "--speculative-algorithm" in plan["argv"]


def test_instance_plans_return_the_secret_config() -> None:
    [plan] = plans(ref_host(sglang_api_key="vault-api", sglang_admin_api_key="vault-admin"))
    assert plan["config"] == {"api-key": "vault-api", "admin-api-key": "vault-admin"}
    assert plan["config_keys"] == ["admin-api-key", "api-key"]
    assert plan["args"]["api_key"] == "<secret>" and plan["args"]["admin_api_key"] == "<secret>"
    assert not any("vault-" in word for word in plan["argv"])


def test_instance_plans_pass_warnings_through() -> None:
    [plan] = plans(ref_host({"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}))
    assert [w["rule"] for w in plan["warnings"]] == ["spec.topk1_draft"]


# --- the systemd unit, rendered with plain Jinja2 (tests/unit/rendering.py) ---------------------


def render_unit(hostvars: dict[str, Any], spec: str | None = None) -> tuple[str, dict[str, Any]]:
    rendered = render(hostvars, spec)
    return rendered.unit, rendered.context


exec_start = exec_start_lines


def test_unit_has_one_flag_per_line_with_continuations() -> None:
    unit, context = render_unit(ref_host())
    lines = exec_start(unit)
    assert lines[0] == "ExecStart=/opt/sglang/current/bin/python /usr/local/libexec/sglang/sglang-launch.py \\"
    body = lines[1:]
    lines_of_argv = systemd_exec_lines(context["argv"])
    assert body == [f"    {line} \\" for line in lines_of_argv[:-1]] + [f"    {lines_of_argv[-1]}"]
    # The sglang role stages the weights; the server loads them from there.
    assert body[0] == "    --model-path /opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4 \\"
    assert "    --tp-size 8" in [line.rstrip(" \\") for line in body]
    assert all(line.startswith("    --") for line in body)
    # What systemd would execute is exactly python -m sglang.launch_server + the validated argv.
    joined = " ".join(line.removesuffix("\\").strip() for line in lines).removeprefix("ExecStart=")
    argv = context["__sglang_server_plan"]["argv"]
    assert systemd_split(joined) == ["/opt/sglang/current/bin/python", "/usr/local/libexec/sglang/sglang-launch.py", *argv]
    # The directives after ExecStart= are still there (the continuation ends where it should).
    assert lines[-1] in unit and "KillMode=mixed" in unit.split(lines[-1], 1)[1]


def test_unit_without_secret_has_no_config_flag() -> None:
    unit, context = render_unit(ref_host())
    assert context["__sglang_server_plan"]["config"] == {}
    assert "--config" not in unit


def test_unit_with_secret_points_at_the_config_file_and_never_holds_the_secret() -> None:
    secret = "sk-vault-9f8e7d"
    unit, context = render_unit(ref_host(sglang_api_key=secret))
    assert secret not in unit
    assert [line.strip(" \\") for line in exec_start(unit) if "--config" in line] == ["--config /etc/sglang/sglang.yaml"]
    assert context["__sglang_server_plan"]["config"] == {"api-key": secret}


def test_unit_renders_spec_auto() -> None:
    unit, _ = render_unit(ref_host(INCIDENT), spec="auto")
    assert "--speculative-eagle-topk" not in unit and "--speculative-algorithm NEXTN" in unit


def test_unit_refuses_to_render_an_invalid_plan() -> None:
    with pytest.raises(AnsibleFilterError, match=r"spec\.triple"):
        render_unit(ref_host(INCIDENT))


def test_unit_refuses_a_venv_path_a_unit_line_would_reinterpret() -> None:
    # Role paths reach ExecStart=, ReadWritePaths=, WorkingDirectory= and EnvironmentFile=, each with its own
    # quoting rules: they are plain absolute paths, or refused naming the variable.
    with pytest.raises(AnsibleFilterError, match=r"sglang_server_venv .*role paths hold only"):
        render_unit(ref_host(sglang_server_venv="/opt/sglang envs/100%/current"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_rendered_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    venv = tmp_path / "sglang-venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    args = {"preferred_sampling_params": {"temperature": 0.7}, "served_model_name": "qwen 3.5 100% $x", "cuda_graph_bs_decode": [1, 2]}
    unit, _ = render_unit(ref_host(args, sglang_api_key="s3cr3t", sglang_server_venv=str(venv)))
    path = tmp_path / "sglang.service"
    path.write_text(unit)
    proc = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sglang.service" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_systemd_env_quote_refuses_a_line_break() -> None:
    with pytest.raises(AnsibleFilterError, match="line break"):
        systemd_env_quote("two\nlines")
