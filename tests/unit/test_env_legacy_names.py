"""Old environment names: the rules read the environment as SGLang does once it has renamed them.

When a server's process imports SGLang's environment registry (sglang/srt/environ.py, _handle_deprecated_envs: 0.5.23
:2294-2305), each deprecated name with a replacement forwards its value to the new name, then every SGL_* name is
copied to its SGLANG_* name, over a value written there too. So SGL_MOE_NVFP4_DISPATCH trips the check of
SGLANG_MOE_NVFP4_DISPATCH, and SGL_CACHE_DIR replaces the kernel cache directory the role manages. Probe-confirmed by
the ``env-legacy-*`` / ``env-deprecated-*`` corpus cases (the probe renames the case's environment as a server's
process does).
"""

from __future__ import annotations

import ast
import re
import zipfile

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_validate as sv
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import resolve
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version
from reference import REPO
from test_sglang_rules_resolution_B import ALL
from test_sglang_rules_seed0_2000 import QWEN3_NEXT, host

RULES_DIR = REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/sglang_rules"
WHEELS = REPO / ".cache" / "sglang-wheels"
FI_A2A = {"tp_size": 4, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_cutlass",
          "flashinfer_a2a_dispatch_type": "bf16"}
SECRET = "s3cr3t-Value-9f"


def fi_a2a(env: dict[str, str], version: str = "0.5.23") -> dict:
    return host(FI_A2A, version, model=QWEN3_NEXT, cc="12.0", gpus=4, env=env)


def dispatch_refusals(hostvars: dict) -> list:
    return [p for p in validate_host(hostvars).errors if "SGLANG_MOE_NVFP4_DISPATCH cannot be set" in p.message]


def legacy_warnings(hostvars: dict) -> list:
    return [p for p in validate_host(hostvars).warnings if p.rule == "host.env_legacy"]


@pytest.mark.parametrize("version", ALL)
def test_the_legacy_prefix_reaches_the_check_of_the_new_name(version: str) -> None:
    assert not dispatch_refusals(fi_a2a({}, version))
    assert dispatch_refusals(fi_a2a({"SGLANG_MOE_NVFP4_DISPATCH": "0"}, version))
    assert dispatch_refusals(fi_a2a({"SGL_MOE_NVFP4_DISPATCH": "0"}, version))
    [warning] = legacy_warnings(fi_a2a({"SGL_MOE_NVFP4_DISPATCH": "0"}, version))
    assert warning.variable == "sglang_env.SGL_MOE_NVFP4_DISPATCH"
    assert warning.fix == "rename it to sglang_env.SGLANG_MOE_NVFP4_DISPATCH"


@pytest.mark.parametrize(("version", "refused"), [("0.5.20", True), ("0.5.21", False), ("0.5.22", False), ("0.5.23", False)])
def test_a_deprecated_name_forwards_only_where_the_release_forwards_it(version: str, refused: bool) -> None:
    hostvars = fi_a2a({"SGLANG_CUTEDSL_MOE_NVFP4_DISPATCH": "0"}, version)
    assert bool(dispatch_refusals(hostvars)) is refused
    assert [w.variable for w in legacy_warnings(hostvars)] == (["sglang_env.SGLANG_CUTEDSL_MOE_NVFP4_DISPATCH"] if refused else [])


def test_the_legacy_value_wins_over_the_new_one() -> None:
    on_then_off = {"SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE": "1", "SGL_KV_CANARY_ENABLE_TOKEN_ORACLE": "0"}
    assert validate_host(host({"sampling_backend": "token_oracle"}, env={"SGL_KV_CANARY_ENABLE_TOKEN_ORACLE": "1"})).ok
    result = validate_host(host({"sampling_backend": "token_oracle"}, env=on_then_off))
    assert [p.rule for p in result.errors] == ["schema.choices"]
    [warning] = [p for p in result.warnings if p.rule == "host.env_legacy"]
    assert "It replaces the value written for SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE ('1')" in warning.message


def test_a_secret_value_is_never_shown_by_the_warning() -> None:
    hostvars = host({}, env={"SGLANG_X_TOKEN": "a" + SECRET})
    hostvars["sglang_secret_env"] = {"SGL_X_TOKEN": SECRET}
    result = validate_host(hostvars)
    [warning] = [p for p in result.warnings if p.rule == "host.env_legacy"]
    assert warning.variable == "sglang_secret_env.SGL_X_TOKEN" and warning.fix.endswith("sglang_secret_env.SGLANG_X_TOKEN")
    assert SECRET not in repr(result.warnings) + repr(result.errors)


@pytest.mark.parametrize(("name", "version", "warned"), [
    ("SGL_FORCE_SHUTDOWN", "0.5.23", False), ("SGL_FORCE_SHUTDOWN", "0.5.20", False),
    ("SGL_DG_USE_NVRTC", "0.5.22", False), ("SGL_DG_USE_NVRTC", "0.5.23", True),
])
def test_a_name_sglang_reads_as_written_is_not_to_be_renamed(name: str, version: str, warned: bool) -> None:
    hostvars = host({}, version, env={name: "1"})
    assert bool(legacy_warnings(hostvars)) is warned
    assert validate_host(hostvars).ok


MANAGED_SGLANG = sorted(n for n in sv.MANAGED_ENV if n.startswith(resolve.CURRENT_PREFIX))


@given(st.sampled_from(MANAGED_SGLANG), st.sampled_from(["sglang_env", "sglang_secret_env"]),
       st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=12))
def test_a_managed_name_cannot_be_set_through_its_legacy_name(managed: str, source: str, value: str) -> None:
    legacy = resolve.LEGACY_PREFIX + managed[len(resolve.CURRENT_PREFIX):]
    hostvars = host({})
    hostvars[source] = {legacy: value}
    result = validate_host(hostvars)
    assert [(p.rule, p.variable) for p in result.errors] == [("host.env", f"{source}.{legacy}")]
    assert managed in result.errors[0].message and legacy not in result.env and legacy not in result.secret_env


def test_every_managed_sglang_name_has_a_legacy_alias_refused() -> None:
    assert MANAGED_SGLANG and {"SGLANG_CACHE_DIR", "SGLANG_REDACT_ENV"} <= set(MANAGED_SGLANG)


# --- the tables against every release's own environment registry ------------------------------------------------


def _environ(version: str) -> ast.Module:
    [wheel] = WHEELS.glob(f"sglang-{version}-*.whl") or [None]
    if wheel is None:
        pytest.fail(f"the sglang {version} wheel is missing; run `make wheels` from the repository root first", pytrace=False)
    return ast.parse(zipfile.ZipFile(wheel).read("sglang/srt/environ.py").decode())


def _renames(tree: ast.Module) -> dict[str, str]:
    """{old name: the name SGLang gives its value}: _DEPRECATED_ENVS' replacements and the With-Alias fields'
    deprecated names."""
    found: dict[str, str] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0] if isinstance(node, ast.Assign) else None
        if getattr(target, "id", None) == "_DEPRECATED_ENVS" and isinstance(node.value, ast.Dict):
            for key, call in zip(node.value.keys, node.value.values, strict=True):
                assert isinstance(key, ast.Constant) and isinstance(call, ast.Call)
                kwargs = {k.arg: k.value for k in call.keywords}
                replacement = call.args[0] if call.args else kwargs.get("replacement")
                if isinstance(replacement, ast.Constant):
                    found[key.value] = replacement.value
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", "").endswith("WithAlias"):
            alias = {k.arg: k.value for k in node.value.keywords}.get("deprecated_name")
            if isinstance(alias, ast.Constant):
                found[alias.value] = node.targets[0].id  # type: ignore[attr-defined]
    return found


def _read_by_rules() -> set[str]:
    text = "".join(p.read_text(encoding="utf-8") for p in RULES_DIR.glob("*.py"))
    return set(re.findall(r"\"(SGLANG_[A-Z0-9_]+)\"", text))


@pytest.mark.parametrize("version", ALL)
def test_every_rename_to_a_name_the_rules_read_is_modelled(version: str) -> None:
    """A check reads a name; SGLang also gives it the value of an older name. Each such pair of each release is in
    FORWARDED_ENV, for exactly the releases that have it (the SGL_ prefix is modelled for every name)."""
    read = _read_by_rules()
    assert "SGLANG_MOE_NVFP4_DISPATCH" in read and len(read) > 20
    renames = {old: new for old, new in _renames(_environ(version)).items() if new in read}
    modelled = {old: new for old, (new, gone) in resolve.FORWARDED_ENV.items()
                if Version(version) < Version(gone)}
    assert renames == modelled


@pytest.mark.parametrize("version", ALL)
def test_the_legacy_prefix_and_the_names_read_as_written_are_the_release_s(version: str) -> None:
    [wheel] = WHEELS.glob(f"sglang-{version}-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        source = "".join(whl.read(n).decode(errors="replace") for n in whl.namelist() if n.endswith(".py"))
    assert 'if key.startswith("SGL_") and key not in _DEPRECATED_ENVS:' in source
    assert 'new_key = key.replace("SGL_", "SGLANG_", 1)' in source
    read = {name for name, gone in resolve.READ_AS_LEGACY.items() if gone is None or Version(version) < Version(gone)}
    assert set(re.findall(r"[\"'](SGL_[A-Z0-9_]+)[\"']", source)) == read


def test_the_unit_keeps_each_name_as_written() -> None:
    result = validate_host(host({}, env={"SGL_ENABLE_JIT_DEEPGEMM": "0"}))
    assert result.ok and result.env == {"SGL_ENABLE_JIT_DEEPGEMM": "0"}
