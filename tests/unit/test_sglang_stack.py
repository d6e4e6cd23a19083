"""The stack guards (issue 35 item 6): the NVIDIA driver a host will run against the CUDA stack its SGLang release
pins (sglang_rules/stack.py), and TRITON_PTXAS_PATH on the architectures whose ptxas Triton may not bundle
(roles/cuda_toolkit's drop-in).

The release table (stack.RELEASE_CUDA) is checked against the release's own requirements: every committed lock
(roles/sglang/files/locks) and, where .venv-conformance has it, the SGLang wheel's METADATA."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import jinja2
import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import stack
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import VALIDATE_DEFAULTS, validate_host
from hypothesis import given
from hypothesis import strategies as st
from reference import host_with
from role_defaults import ROLE_DEFAULTS
from test_action_plugin import run_action

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "roles" / "sglang" / "files" / "locks"
DEFAULTS = {n: ROLE_DEFAULTS[n] for n in VALIDATE_DEFAULTS}
CONFORMANCE_SITE = sorted((REPO / ".venv-conformance" / "lib").glob("python*/site-packages"))


def driver_errors(host: dict, defaults: dict | None = None) -> list:
    result = validate_host(host, defaults=DEFAULTS if defaults is None else defaults)
    return [p for p in result.errors if p.rule == "stack.driver"]


# --- the driver floor ----------------------------------------------------------------------------


def test_the_roles_default_driver_runs_the_default_release() -> None:
    """roles/nvidia_driver's pinned driver is at least the floor of roles/sglang's pinned release (read from the files)."""
    floor, _ = stack.driver_floor(ROLE_DEFAULTS["sglang_version"])
    assert not stack.below_floor(ROLE_DEFAULTS["nvidia_driver_version"], floor)
    assert driver_errors(host_with()) == []


@pytest.mark.parametrize("driver", ["575.57.08", "570.172.08", "580.65.05", "580", "535.261.03"])
def test_a_driver_below_the_cuda13_floor_is_refused(driver: str) -> None:
    (problem,) = driver_errors(host_with(nvidia_driver_version=driver))
    assert problem.variable == "nvidia_driver_version" and problem.value == driver
    assert "580.65.06" in problem.message and "CUDA 13" in problem.message
    assert "set nvidia_driver_version to 580.65.06" in problem.fix
    assert "Table 3" in problem.source and "torch==2.14.1" in problem.source


@pytest.mark.parametrize("driver", ["580.65.06", "580.95.05", "590.44.01", "600"])
def test_a_driver_at_or_above_the_floor_passes(driver: str) -> None:
    assert driver_errors(host_with(nvidia_driver_version=driver)) == []


def test_the_roles_default_is_what_is_checked_when_the_host_sets_none() -> None:
    """No nvidia_driver_version on the host: roles/nvidia_driver's default (from its defaults file) is checked."""
    assert driver_errors(host_with(), {**DEFAULTS, "nvidia_driver_version": "570.133.20"})


def test_a_release_without_a_recorded_stack_is_not_judged() -> None:
    """0.5.22 has no lock or wheel in the project to read its CUDA stack from: nothing is guessed."""
    assert "0.5.22" not in stack.RELEASE_CUDA
    assert driver_errors(host_with(sglang_version="0.5.22", nvidia_driver_version="535.261.03")) == []


def test_the_validate_action_refuses_it_before_anything_changes() -> None:
    """playbooks/validate.yml's action: the role default read from roles/nvidia_driver/defaults/main.yml passes, a
    host pinning an old driver is refused by name."""
    result = run_action({"gpu-01": host_with(), "gpu-02": host_with(nvidia_driver_version="570.172.08")})
    assert result["invalid_hosts"] == ["gpu-02"]
    assert result["hosts"]["gpu-02"]["errors"] == ["nvidia_driver_version: stack.driver"]


@given(st.lists(st.integers(0, 999), min_size=1, max_size=3), st.lists(st.integers(0, 999), min_size=1, max_size=3))
def test_driver_order_is_numeric_field_by_field(a: list[int], b: list[int]) -> None:
    """580.95.05 > 580.65.06 > 575.x: as numbers, missing fields as 0 (never as text: "580.100" > "580.95")."""
    left, right = ".".join(map(str, a)), ".".join(map(str, b))
    width = max(len(a), len(b))
    assert stack.below_floor(left, right) == (a + [0] * (width - len(a)) < b + [0] * (width - len(b)))


@pytest.mark.parametrize("text", ["", "latest", "580.95.05-1ubuntu1", "r580", "580..1"])
def test_text_that_is_no_driver_version_is_not_judged(text: str) -> None:
    assert stack.driver_tuple(text) is None and not stack.below_floor(text, "580.65.06")


# --- the release table against the release's own requirements ----------------------------------------


def lock_cuda_major(text: str) -> int | None:
    """torch's CUDA runtime in a hashed lock: the Linux pin of nvidia-cuda-runtime (or its cu12 name)."""
    for line in text.splitlines():
        found = re.match(r"^nvidia-cuda-runtime(?:-cu\d+)?==(\d+)\.[^ ;]*(?: ; (.*?))? \\$", line)
        if found and "sys_platform == 'darwin'" not in (found.group(2) or ""):
            return int(found.group(1))
    return None


def test_every_committed_lock_agrees_with_the_release_table() -> None:
    locks = sorted(LOCKS.glob("sglang-*.txt"))
    assert locks, "no committed lock"
    for lock in locks:
        version = re.match(r"sglang-(.+?)-(torch-|no-torch)", lock.name).group(1)
        major = lock_cuda_major(lock.read_text(encoding="utf-8"))
        if major is None:
            continue  # a lock without torch (no-torch) says nothing of the stack
        assert version in stack.RELEASE_CUDA, f"{lock.name} pins a CUDA {major} stack; add {version} to stack.RELEASE_CUDA"
        assert stack.RELEASE_CUDA[version].cuda_major == major, lock.name
        assert stack.RELEASE_CUDA[version].cuda_major in stack.DRIVER_FLOOR


def test_the_wheel_requirements_agree_with_the_release_table() -> None:
    """The SGLang wheel of .venv-conformance: its cuNN extras and cuda-python floor name the stack's CUDA major."""
    if not CONFORMANCE_SITE:
        pytest.skip(".venv-conformance is absent (make conformance-venv): the wheel's METADATA cannot be read")
    dists = list(metadata.distributions(path=[str(CONFORMANCE_SITE[0])]))
    sglang = next((d for d in dists if (d.metadata["Name"] or "").lower() == "sglang"), None)
    if sglang is None:
        pytest.skip(".venv-conformance has no sglang wheel installed")
    version = sglang.version
    requires = [r for r in (sglang.requires or []) if "extra ==" not in r]
    majors = {int(m) for r in requires for m in re.findall(r"\[cu(\d+)\]", r)}
    majors |= {int(m) for r in requires for m in re.findall(r"^cuda-python>=(\d+)", r)}
    assert len(majors) == 1, requires
    assert version in stack.RELEASE_CUDA, f"SGLang {version} requires a CUDA {majors} stack; add it to stack.RELEASE_CUDA"
    assert {stack.RELEASE_CUDA[version].cuda_major} == majors
    assert any(r.startswith("torch==") and r.split("==")[1] in stack.RELEASE_CUDA[version].source for r in requires)


# --- TRITON_PTXAS_PATH on sm_103 and sm_121 ---------------------------------------------------------------

DROPIN = REPO / "roles" / "cuda_toolkit" / "templates" / "cuda-toolkit.conf.j2"
TOOLKIT = {"ansible_managed": "Ansible managed", "cuda_toolkit_version": "13.0.2", "cuda_toolkit_home": "/usr/local/cuda-13.0",
           "cuda_toolkit_service_path": "/usr/local/cuda-13.0/bin:/usr/bin:/bin"}


def dropin(**hostvars: object) -> str:
    """The drop-in as Ansible's template module renders it (trim_blocks), for a host with ``hostvars``."""
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return env.from_string(DROPIN.read_text(encoding="utf-8")).render({**TOOLKIT, **hostvars})


@pytest.mark.parametrize("cc", ["10.3", 10.3, "12.1", 12.1, " 12.1"])
def test_the_toolkits_ptxas_on_the_architectures_that_need_it(cc: object) -> None:
    text = dropin(nvidia_gpu_compute_capability=cc)
    assert 'Environment="TRITON_PTXAS_PATH=/usr/local/cuda-13.0/bin/ptxas"' in text
    assert 'Environment="CUDA_HOME=/usr/local/cuda-13.0"' in text


@pytest.mark.parametrize("cc", ["9.0", "10.0", 10.0, "12.0", 12.0, "", None])
def test_no_ptxas_override_where_tritons_own_knows_the_gpu(cc: object) -> None:
    text = dropin() if cc is None else dropin(nvidia_gpu_compute_capability=cc)
    assert "TRITON_PTXAS_PATH" not in text
    assert text.count("\n") == 4 and "{%" not in text  # trim_blocks: no blank line left by the condition


def test_the_users_own_value_wins() -> None:
    """sglang_env.TRITON_PTXAS_PATH goes to the unit's EnvironmentFile=, which overrides Environment= (systemd.exec(5),
    EnvironmentFile=: "Settings from these files override settings made with Environment="): the validator lets it
    through and the env file carries it."""
    result = validate_host(host_with(nvidia_gpu_compute_capability="12.1",
                                     sglang_env={"TRITON_PTXAS_PATH": "/opt/ptxas/bin/ptxas"}), defaults=DEFAULTS)
    assert result.env.get("TRITON_PTXAS_PATH") == "/opt/ptxas/bin/ptxas"


# --- the stop switch SGLang reads ---------------------------------------------------------------------------


def stop_warnings(env: dict) -> list:
    result = validate_host(host_with(sglang_env=env), defaults=DEFAULTS)
    assert [p.rule for p in result.errors] == []
    return [p for p in result.warnings if p.rule == "stop.force_shutdown"]


def test_the_unread_name_is_named_with_the_one_sglang_reads() -> None:
    """0.5.23 declares SGLANG_FORCE_SHUTDOWN (environ.py:400) and reads only SGL_FORCE_SHUTDOWN
    (tokenizer_manager.py:3526): the first changes nothing on SIGTERM."""
    (problem,) = stop_warnings({"SGLANG_FORCE_SHUTDOWN": "1"})
    assert problem.variable == "sglang_env.SGLANG_FORCE_SHUTDOWN" and "SGL_FORCE_SHUTDOWN" in problem.fix
    assert problem.source == "sglang/srt/managers/tokenizer_manager.py:3526"


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "0", "false"])
def test_the_read_name_with_a_value_sglang_reads_is_quiet(value: str) -> None:
    assert stop_warnings({"SGL_FORCE_SHUTDOWN": value}) == []
    assert stop_warnings({"SGL_FORCE_SHUTDOWN": value, "SGLANG_FORCE_SHUTDOWN": value}) == []


@pytest.mark.parametrize("value", ["yes", "on", " 1", "2"])
def test_a_value_get_bool_env_var_reads_as_off(value: str) -> None:
    """get_bool_env_var (utils/common.py:1424-1441) takes true/1 and false/0 only; the rest is off."""
    (problem,) = stop_warnings({"SGL_FORCE_SHUTDOWN": value})
    assert problem.variable == "sglang_env.SGL_FORCE_SHUTDOWN" and problem.value == value


def test_the_wheel_reads_the_names_as_the_rule_says() -> None:
    """Read from the SGLang wheel of .venv-conformance: the watchdog's switch and the declared-but-unread name."""
    if not CONFORMANCE_SITE:
        pytest.skip(".venv-conformance is absent (make conformance-venv): the wheel's source cannot be read")
    srt = CONFORMANCE_SITE[0] / "sglang" / "srt"
    if not srt.is_dir():
        pytest.skip(".venv-conformance has no sglang wheel installed")
    manager = (srt / "managers" / "tokenizer_manager.py").read_text(encoding="utf-8").splitlines()
    assert 'get_bool_env_var("SGL_FORCE_SHUTDOWN")' in manager[3526 - 1]
    assert "_SCHEDULER_EXIT_TIMEOUT_SECS = 15" in manager[456 - 1]
    sources = [p.read_text(encoding="utf-8", errors="replace") for p in srt.rglob("*.py")]
    readers = [s for s in sources if "SGLANG_FORCE_SHUTDOWN" in s and "SGLANG_FORCE_SHUTDOWN = EnvBool" not in s]
    assert readers == [], "a module of the wheel reads SGLANG_FORCE_SHUTDOWN now: revisit stop.force_shutdown"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
