"""The input contract, property-based: every string a host or role variable can hold either round-trips
exactly into the unit, the environment file, the ``--config`` YAML and the server's argv, or is refused
with that variable named.

Each property takes arbitrary text (hypothesis: all of Unicode, with extra weight on what line-based
formats, systemd and argparse interpret: line ends, NUL, quotes, backslashes, ``%``, ``$``, ``;``, ``#``,
``=``, ``[``, leading dashes), renders the role's three files as the role would (``rendering.render``)
and reads them back with systemd's rules (``rendering.parse_unit`` / ``systemd_split`` /
``parse_env_file``), with PyYAML for the ``--config`` file, with an argparse parser built from SGLang's
schema for the argv, and with ``systemd-analyze verify``.  CI runs a fixed-seed sample
(``HYPOTHESIS_PROFILE=ci``); ``make fuzz`` runs each property 10,000 times.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import secret_var
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import load_schema
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import HEADER_SECRETS
from hypothesis import example, given
from hypothesis import strategies as st
from reference import host_with, load_reference
from rendering import Rendered, exec_start, parse_env_file, parse_unit, render

SCHEMA = load_schema("0.5.23")
REFERENCE = load_reference()
SPECIAL = "\n\r\x00\t\x0b\x0c\x1b\x7f\x85\u2028\u2029\ufeff\ufffe \"'\\$%;#=[]`-/.:@{}é中\U0001f600"
TEXT = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from([*SPECIAL, "a", "0"]), max_size=24),
    st.sampled_from(["--host", "-", "", " ", "0.0.0.0", "%h", "$HOME", "${X}", "a\\", "\\", ";", "x\n[Service]\nExecStartPre=+/bin/sh",
                     "/models/x\r[Service]\rUser=root", "-1", "-1.5", "-1e-05", "..", "../../x", "/", "root"]),
)
_VENV = Path(__file__).resolve().parents[2] / "build" / "test-venv"


@pytest.fixture(scope="module", autouse=True)
def fake_venv() -> None:
    """systemd-analyze verify wants ExecStart='s executable to exist: a plain-path stand-in."""
    (_VENV / "bin").mkdir(parents=True, exist_ok=True)
    python = _VENV / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)


def host(args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    """The reference host (valid as it is) with changes, served from the stand-in virtualenv."""
    return host_with(args, **{"sglang_server_venv": str(_VENV), **hostvars})


_BASELINE = render(host())


def _keys(rendered: Rendered) -> list[tuple[str, str]]:
    return [(section, key) for section, key, _ in parse_unit(rendered.unit)]


def _schema_parser() -> argparse.ArgumentParser:
    """An argparse parser with SGLang 0.5.23's options as the schema records them (values as strings)."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    for dest, spec in SCHEMA.arguments.items():
        if spec.action == "BooleanOptionalAction":
            parser.add_argument(*[o for o in spec.option_strings if not o.startswith("--no-")], dest=dest,
                                action=argparse.BooleanOptionalAction)
        elif spec.is_switch:
            parser.add_argument(*spec.option_strings, dest=dest, action="store_true")
        else:
            parser.add_argument(*spec.option_strings, dest=dest, nargs=spec.nargs)
    return parser


PARSER = _schema_parser()


def refused(call: Any, variable: str) -> bool:
    """Run ``call``; True when it was refused with ``variable`` named in an ERROR line, False when it rendered."""
    try:
        call()
    except AnsibleFilterError as exc:
        text = str(exc)
        assert f"ERROR {variable}" in text, f"refused, but without naming {variable}:\n{text}"
        return True
    return False


def check_files(rendered: Rendered) -> argparse.Namespace:
    """What systemd, PyYAML and argparse read from the files is exactly the plan; returns the parsed argv."""
    plan, ctx = rendered.plan, rendered.context
    assert _keys(rendered) == _keys(_BASELINE) or _gpu_only_difference(rendered), "the unit's directives changed"
    settings = {(s, k): v for s, k, v in parse_unit(rendered.unit)}
    description = settings[("Unit", "Description")].replace("%%", "%")
    assert description == f"SGLang server {ctx['sglang_server_service_name']} ({ctx['sglang_model_path']})"
    for key, var in (("User", "sglang_server_user"), ("Group", "sglang_server_group"), ("WorkingDirectory", "sglang_server_state_dir"),
                     ("SyslogIdentifier", "sglang_server_service_name")):
        assert settings[("Service", key)] == ctx[var]
    assert settings[("Service", "EnvironmentFile")] == f"{ctx['sglang_server_config_dir']}/{ctx['sglang_server_service_name']}.env"
    assert settings[("Service", "ReadWritePaths")].split(" ") == [ctx["sglang_server_state_dir"], ctx["sglang_server_cache_dir"]]
    argv = exec_start(rendered.unit)
    config = [] if not plan["config"] else ["--config", f"{ctx['sglang_server_config_dir']}/{ctx['sglang_server_service_name']}.yaml"]
    launcher = [f"{ctx['sglang_server_venv']}/bin/python", f"{ctx['sglang_server_libexec_dir']}/sglang-launch.py"]
    assert argv == [*launcher, *plan["argv"], *config]
    env = parse_env_file(rendered.env)
    cache = ctx["sglang_server_cache_dir"]
    kernels = plan["kernel_cache"]["dir"]  # under the cache directory, keyed by release, stack, GPU and instance
    assert kernels.startswith(f"{cache.rstrip('/')}/kernels/sglang-") and kernels.endswith(f"/{ctx['sglang_server_service_name']}")
    expected = {"HOME": ctx["sglang_server_state_dir"], "HF_HOME": f"{cache}/huggingface", "XDG_CACHE_HOME": cache,
                **plan["kernel_cache"]["env"], **plan["env"], **plan["secret_env"]}
    assert expected["SGLANG_CACHE_DIR"] == kernels and expected["SGLANG_JIT_CACHE_DIR"] == f"{kernels}/jit"
    if plan["binding"]["cuda_visible_devices"]:
        expected.update(CUDA_VISIBLE_DEVICES=plan["binding"]["cuda_visible_devices"], CUDA_DEVICE_ORDER="PCI_BUS_ID")
    if plan["secret_env"]:
        expected["SGLANG_REDACT_ENV"] = ",".join(sorted(plan["secret_env"]))
    assert env == expected
    assert (yaml.safe_load(rendered.config) or {}) == plan["config"]
    for secret in [*plan["config"].values(), *plan["secret_env"].values()]:
        assert str(secret) not in rendered.unit and str(secret) not in " ".join(plan["argv"])
    return PARSER.parse_args(argv[2:])


def _gpu_only_difference(rendered: Rendered) -> bool:
    strip = [k for k in _keys(rendered) if k != ("Service", "DeviceAllow")]
    return strip == [k for k in _keys(_BASELINE) if k != ("Service", "DeviceAllow")]


def verify(rendered: Rendered, tmp: Path) -> None:
    """systemd-analyze verify accepts the unit (where systemd-analyze is installed)."""
    if shutil.which("systemd-analyze") is None:
        return
    name = rendered.context["sglang_server_service_name"]
    path = tmp / f"{name}.service"
    path.write_text(rendered.unit, encoding="utf-8")
    proc = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0 and f"{name}.service" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


# --- host variables ------------------------------------------------------------------------------


@given(TEXT)
@example("/models/x\n[Service]\nExecStartPre=+/bin/sh -c 'id'\n[Unit]\n#")
@example("/models/x\r[Service]\rExecStartPre=+/bin/sh")
@example("/models/../../etc/x")
@example("/data/models/100%/Llama $HOME;x")
def test_model_path(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    hostvars = host(sglang_model_path=text)
    if refused(lambda: render(hostvars), "sglang_model_path"):
        return
    rendered = render(hostvars)
    parsed = check_files(rendered)
    assert parsed.model_path == (text if text.startswith("/") else f"/opt/sglang/models/{text}")
    verify(rendered, tmp_path_factory.mktemp("unit"))


@given(TEXT)
@example("--tp-size")
@example("")
@example("name\x00nul")
def test_string_argument(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    hostvars = host({"served_model_name": text})
    if refused(lambda: render(hostvars), "sglang_args.served_model_name"):
        return
    rendered = render(hostvars)
    parsed = check_files(rendered)
    assert parsed.served_model_name == text
    assert parsed.host is None  # nothing the value holds became another flag
    verify(rendered, tmp_path_factory.mktemp("unit"))


@given(st.lists(TEXT, min_size=1, max_size=4))
@example(["a=/m", "--host", "0.0.0.0"])
def test_list_argument(items: list[str]) -> None:
    hostvars = host({"lora_paths": items, "enable_lora": True})
    if refused(lambda: render(hostvars), "sglang_args.lora_paths"):
        return
    parsed = check_files(render(hostvars))
    assert parsed.lora_paths == items
    assert parsed.host is None


@given(st.dictionaries(TEXT, st.one_of(TEXT, st.integers(), st.floats(allow_nan=True)), max_size=3))
@example({"temperature": "x\ny"})
@example({"": float("nan")})  # found by `make fuzz`: NaN is not JSON, and NaN != NaN
def test_json_argument(value: dict[str, Any]) -> None:
    hostvars = host({"preferred_sampling_params": value})
    if refused(lambda: render(hostvars), "sglang_args.preferred_sampling_params"):
        return
    parsed = check_files(render(hostvars))
    import json

    assert json.loads(parsed.preferred_sampling_params) == value


@given(TEXT)
@example("0.0.0.0 --api-key x")
def test_listen_host(text: str) -> None:
    hostvars = host(sglang_listen_host=text, sglang_allow_unauthenticated=True)
    if refused(lambda: render(hostvars), "sglang_listen_host"):
        return
    parsed = check_files(render(hostvars))
    assert parsed.host == (text or None)


@given(TEXT, st.one_of(TEXT, st.integers(), st.floats(), st.booleans(), st.none(), st.lists(st.integers(), max_size=2)))
@example("NCCL_P2P_DISABLE", True)
@example("X", "a\nB=2")
@example("MY_TOKEN", "t0k\"$`\\")
def test_environment(tmp_path_factory: pytest.TempPathFactory, name: str, value: Any) -> None:
    hostvars = host(sglang_env={**REFERENCE.get("sglang_env", {}), name: value})
    if refused(lambda: render(hostvars), f"sglang_env.{name}"):
        return
    rendered = render(hostvars)
    check_files(rendered)
    env = parse_env_file(rendered.env)
    assert env[name] == (value if isinstance(value, str) else str(value) if isinstance(value, int) else env[name])
    if isinstance(value, float):
        assert float(env[name]) == value
    masked = parse_env_file(render(hostvars, mask_secrets=True).env)
    if name in rendered.plan["secret_env"]:
        assert masked[name] != value
    verify(rendered, tmp_path_factory.mktemp("unit"))


CANARY = "Zq9x"  # starts every secret, so an echo of it in a message is seen whatever the rest is


@pytest.mark.parametrize("dest", sorted(SCHEMA.secrets))
@given(text=TEXT)
@example(text="k\nUser=root")
def test_secret_argument(dest: str, text: str) -> None:
    var, value = secret_var(dest), CANARY + text
    hostvars = host(**{var: value}, sglang_listen_host="0.0.0.0")
    try:
        rendered = render(hostvars)
    except AnsibleFilterError as exc:
        assert f"ERROR {var}" in str(exc) or "ERROR sglang_listen_host" in str(exc), str(exc)
        assert CANARY not in str(exc), "a refused secret was echoed"
        return
    check_files(rendered)
    assert yaml.safe_load(rendered.config)[SCHEMA.arguments[dest].flag[2:]] == value
    if dest in HEADER_SECRETS:  # clients send it as "Authorization: Bearer <key>"
        assert all("!" <= c <= "~" for c in value)
    assert CANARY not in repr(rendered.plan["args"]) + repr(rendered.plan["argv"]) + rendered.unit
    assert CANARY not in render(hostvars, mask_secrets=True).config


@given(text=TEXT)
@example(text="hf_\nHF_HOME=/tmp")
def test_hf_token(text: str) -> None:
    token = CANARY + text
    hostvars = host(hf_token=token)
    try:
        rendered = render(hostvars)
    except AnsibleFilterError as exc:
        assert "ERROR hf_token" in str(exc) and CANARY not in str(exc), str(exc)
        return
    check_files(rendered)
    assert parse_env_file(rendered.env)["HF_TOKEN"] == token
    assert CANARY not in render(hostvars, mask_secrets=True).env


# --- role variables --------------------------------------------------------------------------------

ROLE_STRINGS = ("sglang_server_service_name", "sglang_server_user", "sglang_server_group", "sglang_server_venv",
                "sglang_server_config_dir", "sglang_server_state_dir", "sglang_server_cache_dir", "sglang_server_libexec_dir")


@pytest.mark.parametrize("var", ROLE_STRINGS)
@given(value=TEXT)
@example(value="../../x")
@example(value="sglang\nUser=root")
@example(value="root")
@example(value="nvidia-persistenced")
def test_role_variable(tmp_path_factory: pytest.TempPathFactory, var: str, value: str) -> None:
    hostvars = host(**{var: value})
    if refused(lambda: render(hostvars), var):
        return
    rendered = render(hostvars)
    check_files(rendered)
    assert rendered.context[var] == value
    if var in ("sglang_server_venv",):
        return  # the stand-in virtualenv is what systemd-analyze verify can check
    verify(rendered, tmp_path_factory.mktemp("unit"))
