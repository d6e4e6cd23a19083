"""Every defect of the untrusted-input review, as the case that showed it.

The property-based tests (``test_input_contract.py``) prove the general rule; these pin the reported
cases, each of which passed validation (or rendered wrongly) before the input contract existed.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Result, validate_host
from reference import host_with
from rendering import exec_start, parse_env_file, parse_unit, render
from role_defaults import ROLE_DEFAULTS

host = host_with


def errors_on(result: Result, variable: str) -> list[str]:
    """Rule ids of the errors that name ``variable``."""
    return [p.rule for p in result.errors if p.variable == variable]


# --- injection into the unit and the command line ----------------------------------------------------


@pytest.mark.parametrize("end", ["\n", "\r", "\r\n"])
def test_a_line_end_in_the_model_path_cannot_add_directives(end: str) -> None:
    path = f"/models/x{end}[Service]{end}ExecStartPre=+/bin/sh -c 'id'{end}[Unit]{end}#"
    assert errors_on(validate_host(host(sglang_model_path=path)), "sglang_model_path")
    with pytest.raises(AnsibleFilterError, match="ERROR sglang_model_path"):
        render(host(sglang_model_path=path))


def test_the_model_path_reaches_description_with_specifiers_escaped() -> None:
    rendered = render(host(sglang_model_path="/srv/models/100%-Llama"))
    [description] = [v for s, k, v in parse_unit(rendered.unit) if k == "Description"]
    assert description == "SGLang server sglang (/srv/models/100%%-Llama)"
    assert [k for _, k, _ in parse_unit(rendered.unit)].count("ExecStartPre") == 0


@pytest.mark.parametrize(("key", "value"), [
    ("lora_paths", ["a=/m", "--host", "0.0.0.0"]),
    ("served_model_name", "--tp-size"),
    ("served_model_name", "-x"),
    ("served_model_name", ""),
    ("lora_paths", ["a=/m", ""]),
])
def test_values_that_argparse_would_read_as_options_or_nothing_are_refused(key: str, value: Any) -> None:
    result = validate_host(host({key: value, "enable_lora": True}))
    assert errors_on(result, f"sglang_args.{key}") == ["input.argv"]
    assert "--host" not in result.argv


def test_negative_numbers_stay_values() -> None:
    result = validate_host(host({"chunked_prefill_size": -1, "speculative_accept_threshold_single": -0.00001}))
    assert result.ok, result.errors
    argv = result.argv
    assert argv[argv.index("--chunked-prefill-size") + 1] == "-1"
    assert argv[argv.index("--speculative-accept-threshold-single") + 1] == "-0.00001"  # not -1e-05, an "option"


@pytest.mark.parametrize("char", ["\r", "\x00", "\x1b", "\t", "\x7f", "\x85", "\u2028"])
def test_control_characters_in_a_string_argument_are_refused(char: str) -> None:
    assert errors_on(validate_host(host({"served_model_name": f"qwen{char}x"})), "sglang_args.served_model_name") == ["input.argv"]


@pytest.mark.parametrize(("var", "value"), [
    ("sglang_server_service_name", "../../x"),
    ("sglang_server_service_name", "sglang@1"),
    ("sglang_server_user", "sglang\nUser=root"),
    ("sglang_server_user", "root"),
    ("sglang_server_group", "root"),
    ("sglang_server_state_dir", "/"),
    ("sglang_server_state_dir", "/var/lib"),
    ("sglang_server_cache_dir", "/var/cache/../../etc"),
    ("sglang_server_config_dir", "relative/dir"),
    ("sglang_server_venv", "/opt/sglang envs/current"),
    ("sglang_models_dir", "/etc"),
])
def test_role_variables_are_checked(var: str, value: str) -> None:
    assert errors_on(validate_host(host(**{var: value}), defaults=ROLE_DEFAULTS), var) == ["input.role_var"]
    if var.startswith("sglang_server_"):  # the server role's own variables: refused when it renders, too
        with pytest.raises(AnsibleFilterError, match=f"ERROR {var}"):
            render(host(**{var: value}))


@pytest.mark.parametrize("path", ["nvidia/../../../etc", "../x", "a/b/c", "nvidia/Qwen--x", "/data/../etc/models", "/home/me/models",
                                  "/root/models", "./models/x", "/etc"])
def test_model_paths_that_escape_or_hide_are_refused(path: str) -> None:
    assert errors_on(validate_host(host(sglang_model_path=path)), "sglang_model_path") == ["input.model_path"]


# --- secrets ------------------------------------------------------------------------------------------


def test_ssl_keyfile_password_is_a_secret_derived_from_the_schema() -> None:
    result = validate_host(host({"ssl_keyfile_password": "pw-canary-1"}))
    assert errors_on(result, "sglang_args.ssl_keyfile_password") == ["host.secret"]
    rendered = render(host({"ssl_certfile": "/etc/ssl/c.pem", "ssl_keyfile": "/etc/ssl/k.pem"},
                           sglang_ssl_keyfile_password="pw-canary-1", sglang_api_key="api-canary-1"))
    assert "pw-canary-1" not in rendered.unit and "pw-canary-1" not in repr(rendered.plan["args"])
    assert rendered.plan["args"]["ssl_keyfile_password"] == "<secret>"
    assert yaml.safe_load(rendered.config) == {"api-key": "api-canary-1", "ssl-keyfile-password": "pw-canary-1"}
    assert exec_start(rendered.unit)[-2:] == ["--config", "/etc/sglang/sglang.yaml"]
    assert "pw-canary-1" not in render(host({"ssl_certfile": "/etc/ssl/c.pem", "ssl_keyfile": "/etc/ssl/k.pem"},
                                            sglang_ssl_keyfile_password="pw-canary-1"), mask_secrets=True).config


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "DB_PASSWORD", "S3_SECRET"])
def test_secret_environment_entries_are_masked_in_the_plan(name: str) -> None:
    hostvars = host(sglang_env={name: "env-canary-77"})
    masked = render(hostvars, mask_secrets=True)
    assert "env-canary-77" not in masked.env
    assert parse_env_file(masked.env)[name].startswith("<secret")
    assert parse_env_file(render(hostvars).env)[name] == "env-canary-77"
    result = validate_host(hostvars)
    assert name not in result.as_dict()["env"] and result.as_dict()["secret_env_keys"] == [name]
    assert "env-canary-77" not in repr(result.as_dict())
    if name == "HF_TOKEN":
        assert [p.rule for p in result.warnings if p.variable == "sglang_env.HF_TOKEN"] == ["host.env_secret"]


# --- wrong values -------------------------------------------------------------------------------------


def test_a_local_model_directory_is_used_as_given() -> None:
    rendered = render(host(sglang_model_path="/data/models/Qwen3.5-397B-A17B-NVFP4"))
    argv = exec_start(rendered.unit)
    assert argv[argv.index("--model-path") + 1] == "/data/models/Qwen3.5-397B-A17B-NVFP4"  # not /opt/sglang/models//data/...


@pytest.mark.parametrize(("value", "why"), [(True, "a boolean"), (False, "a boolean"), (None, "null"), ([1], "a list"),
                                            ({"a": 1}, "a list or mapping")])
def test_environment_values_that_are_not_text_are_refused(value: Any, why: str) -> None:
    result = validate_host(host(sglang_env={"NCCL_P2P_DISABLE": value}))
    [problem] = [p for p in result.errors if p.variable == "sglang_env.NCCL_P2P_DISABLE"]
    assert why in problem.message and "quote it, e.g. '1'" in problem.message


def test_environment_numbers_render_as_numbers() -> None:
    env = parse_env_file(render(host(sglang_env={"NCCL_P2P_DISABLE": 1, "RATIO": 0.5})).env)
    assert env["NCCL_P2P_DISABLE"] == "1" and env["RATIO"] == "0.5"


@pytest.mark.parametrize(("key", "value"), [("port", 0), ("port", 70000), ("grpc_port", -1), ("tp_size", 1.0e30),
                                            ("max_running_requests", 2**64), ("mem_fraction_static", float("inf")),
                                            ("mem_fraction_static", float("nan"))])
def test_numbers_out_of_range_are_refused(key: str, value: Any) -> None:
    assert errors_on(validate_host(host({key: value})), f"sglang_args.{key}")


def test_the_role_refuses_to_manage_environment_it_sets_itself() -> None:
    result = validate_host(host(sglang_env={"HOME": "/tmp"}))
    assert errors_on(result, "sglang_env.HOME") == ["host.env"]


@pytest.mark.parametrize("key", ["tp_size", "dp_size", "pp_size"])
def test_absurd_parallel_sizes_are_refused_without_exhausting_memory(key: str) -> None:
    result = validate_host(host({key: 10**12}))
    assert [p.rule for p in result.errors if p.variable == f"sglang_args.{key}" or p.variable == "sglang_args.tp_size"]
    assert len(result.gpu_ids) <= 1024


@pytest.mark.parametrize("value", [{"temperature": float("nan")}, {"top_p": float("inf")}, '{"temperature": NaN}', "[Infinity]"])
def test_json_arguments_refuse_what_json_cannot_carry(value: Any) -> None:
    assert errors_on(validate_host(host({"preferred_sampling_params": value})), "sglang_args.preferred_sampling_params")
