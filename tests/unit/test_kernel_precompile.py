# SPDX-License-Identifier: Apache-2.0
"""Kernel pre-compile before the drain and the stuck-compile decision (issue 35 item 1): module_utils/sglang_precompile.py,
the kernel_precompile module (driven end to end with the stand-in's ``sglang.compile_deep_gemm`` behind a fake
``systemd-run``), the stand-in's warm / cold / locked kernel cache, and the role's wiring (the pre-compile runs in
prepare.yml, which the rollout runs before the drain)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_precompile as pc
from hypothesis import given
from hypothesis import strategies as st
from standin_inproc import REPO, SCHEMA, STANDIN_SRC
from test_restart_modules import load

kernel_precompile = load("kernel_precompile")

KEY = "sglang-0.5.23_torch-2.14.1_cu13_sm100"
CACHE = {"root": "/var/cache/sglang/kernels", "key": KEY, "dir": f"/var/cache/sglang/kernels/{KEY}/sglang"}
ARGV = ["--model-path", "/opt/sglang/models/deepseek-ai/DeepSeek-V3", "--host", "0.0.0.0", "--port", "30000",
        "--quantization", "fp8", "--tp-size", "8", "--ssl-certfile", "/etc/sglang/tls/cert.pem",
        "--ssl-keyfile=/etc/sglang/tls/key.pem", "--enable-metrics"]


# --- the compile command --------------------------------------------------------------------------------------------


def test_the_compile_command_takes_the_instances_arguments_on_a_loopback_port_without_tls() -> None:
    argv = pc.compile_argv("/opt/sglang/current/bin/python", ARGV, 41234, 1800)
    assert argv[:3] == ["/opt/sglang/current/bin/python", "-m", "sglang.compile_deep_gemm"]
    assert argv[3:] == ["--model-path", "/opt/sglang/models/deepseek-ai/DeepSeek-V3", "--quantization", "fp8",
                        "--tp-size", "8", "--enable-metrics", "--host", "127.0.0.1", "--port", "41234",
                        "--timeout", "1800"]


def test_the_kernel_inputs_ignore_what_changes_no_kernel() -> None:
    base = pc.kernel_inputs(KEY, ARGV)
    moved = pc.kernel_inputs(KEY, [*ARGV[:4], "--port", "31000", *ARGV[6:], "--log-level", "debug"])
    assert pc.inputs_digest(base) == pc.inputs_digest(moved)
    assert pc.inputs_digest(base) != pc.inputs_digest(pc.kernel_inputs(KEY, [*ARGV, "--ep-size", "8"]))
    assert pc.inputs_digest(base) != pc.inputs_digest(pc.kernel_inputs(KEY.replace("0.5.23", "0.5.24"), ARGV))


@pytest.mark.parametrize(("argv", "config", "key", "applies", "why"), [
    (ARGV, None, KEY, True, "FP8 weights (--quantization fp8) on sm100"),
    (["--model-path", "/m"], {"quantization_config": {"quant_method": "fp8"}}, KEY.replace("sm100", "sm90"), True,
     "config.json quantization_config.quant_method fp8"),
    (["--model-path", "/m"], {"quantization_config": {"quant_method": "modelopt_fp4"}}, KEY, False, "not FP8"),
    (["--model-path", "/m", "--quantization", "awq"], None, KEY, False, "not FP8"),
    (ARGV, None, KEY.replace("sm100", "sm89"), False, "below SM90"),
    (ARGV, None, KEY.replace("sm100", "sm120"), False, "SM120 kernels"),
    (ARGV, None, KEY.replace("sm100", "sm100+sm120"), False, "SM120 kernels"),
    (ARGV, None, KEY.replace("sm100", "sm-unknown"), False, "unknown"),
])
def test_deepgemm_runs_for_fp8_weights_on_sm90_and_sm100(argv: list[str], config: Any, key: str, applies: bool,
                                                         why: str) -> None:
    got, reason = pc.deepgemm_applies(argv, config, key)
    assert got is applies and why in reason


def test_the_marker_matches_only_its_inputs() -> None:
    inputs = pc.kernel_inputs(KEY, ARGV)
    doc = pc.marker_document(inputs, 12.34, "2026-12-05T03:00:00Z")
    assert pc.marker_matches(doc, inputs) and doc["seconds"] == 12.3 and doc["key"] == KEY
    assert not pc.marker_matches(doc, pc.kernel_inputs(KEY, [*ARGV, "--tp-size", "4"]))
    assert not pc.marker_matches({**doc, "schema": 0}, inputs) and not pc.marker_matches("x", inputs)


# --- the stuck-compile decision -------------------------------------------------------------------------------------

COLD = ["Load weight begin. avail mem=94.52 GB", "Load weight end. type=X",
        "Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins)",
        "Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=4096, K=7168, num_groups=1 with all Ms."]


def stuck(lines: list[str], **changes: Any) -> dict[str, Any]:
    args = {"ready": False, "waited": 900.0, "budget": 900.0, "attempt": 0, "kernel_cache": CACHE, **changes}
    return pc.stuck_in_compile(lines, **args)


def test_a_start_that_stopped_in_the_compile_beyond_its_budget_is_stuck_and_retried_once() -> None:
    first = stuck(COLD)
    assert first["stuck"] and first["retry"] and first["clear"] == [CACHE["dir"]]
    assert first["evidence"].startswith("Try DeepGEMM JIT Compiling")
    again = stuck(COLD, attempt=1)
    assert again["stuck"] and not again["retry"] and again["clear"] == [CACHE["dir"]]
    assert "already retried once" in again["why"]


@pytest.mark.parametrize(("lines", "changes", "why"), [
    (COLD, {"ready": True}, "became ready"),
    (COLD, {"waited": 899.0}, "within its budget"),
    (COLD[:2], {}, "never entered the kernel compile"),
    ([*COLD, "PP-parallel DeepGEMM warmup done in 3.00s (pp_rank=0)."], {}, "got past the kernel compile"),
    ([*COLD, "The server is fired up and ready to roll!"], {}, "got past the kernel compile"),
])
def test_anything_else_is_not_a_stuck_compile(lines: list[str], changes: dict[str, Any], why: str) -> None:
    result = stuck(lines, **changes)
    assert not result["stuck"] and not result["retry"] and result["clear"] == [] and why in result["why"]


@pytest.mark.parametrize("directory", ["/var/cache/sglang/kernels", f"/var/cache/sglang/kernels/{KEY}",
                                       f"/var/cache/sglang/kernels/{KEY}/../other/sglang", "/", "relative/sglang",
                                       f"/elsewhere/{KEY}/sglang"])
def test_nothing_outside_the_instances_kernel_directory_is_ever_cleared(directory: str) -> None:
    result = stuck(COLD, kernel_cache={**CACHE, "dir": directory})
    assert result["stuck"] and result["clear"] == [] and "nothing is cleared" in result["why"]


@given(st.lists(st.sampled_from([*COLD, "noise", "PP-parallel DeepGEMM warmup start (pp_rank=0)",
                                 "PP-parallel DeepGEMM warmup done in 1s", "The server is fired up and ready to roll!"]),
                max_size=12), st.booleans(), st.integers(0, 3))
def test_the_decision_is_consistent(lines: list[str], ready: bool, attempt: int) -> None:
    result = stuck(lines, ready=ready, attempt=attempt)
    assert result["retry"] <= result["stuck"] and (not result["stuck"] or not ready)
    assert result["clear"] in ([], [CACHE["dir"]]) and (result["clear"] == []) == (not result["stuck"])
    assert result["retry"] == (result["stuck"] and attempt < pc.MAX_RETRIES)


# --- the module, end to end with the stand-in's compile_deep_gemm behind a fake systemd-run --------------------------

FAKE_SYSTEMD_RUN = textwrap.dedent('''\
    #!{python}
    """systemd-run --wait --pipe as the module calls it: -p EnvironmentFile= and Environment= applied, the rest ignored."""
    import os, shlex, sys
    args = sys.argv[1:]
    env = dict(os.environ)
    with open(os.environ["FAKE_SYSTEMD_LOG"], "a") as log:
        log.write(" ".join(args) + "\\n")
    while args and args[0] != "--":
        word = args.pop(0)
        if word == "-p":
            name, _, value = args.pop(0).partition("=")
            if name == "EnvironmentFile":
                for line in open(value):
                    if "=" in line and not line.startswith("#"):
                        key, _, val = line.strip().partition("=")
                        env[key] = val
            elif name == "Environment":
                for item in shlex.split(value):
                    key, _, val = item.partition("=")
                    env[key] = val
    os.execve(args[1], args[1:], env)
    ''')


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A unit and environment file, fake systemd-run / systemctl on PATH, the stand-in importable."""
    bin_dir, state, cache = tmp_path / "bin", tmp_path / "state", tmp_path / "kernels" / KEY / "sglang"
    for d in (bin_dir, state, cache):
        d.mkdir(parents=True)
    (bin_dir / "systemd-run").write_text(FAKE_SYSTEMD_RUN.format(python=sys.executable))
    (bin_dir / "systemctl").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("systemd-run", "systemctl"):
        (bin_dir / tool).chmod(stat.S_IRWXU)
    env = tmp_path / "sglang.env"
    env.write_text(f"HOME={state}\nSGLANG_CACHE_DIR={cache}\nSGLANG_DG_CACHE_DIR={cache}/deep_gemm\n"
                   f"SGLANG_STANDIN_COMPILE_SECONDS=0.2\nSGLANG_STANDIN_FAULTS={tmp_path}/faults.env\n")
    unit = tmp_path / "sglang.service"
    unit.write_text(f"[Unit]\nDescription=x\n\n[Service]\nUser=nobody\n"
                    f"EnvironmentFile={env}\nExecStart=/bin/true \\\n    --port 30000\n")
    (tmp_path / "sglang.service.d").mkdir()
    (tmp_path / "sglang.service.d" / "extra.conf").write_text(
        f'[Service]\nEnvironment="PYTHONPATH={STANDIN_SRC}" "SGLANG_STANDIN_SCHEMA={SCHEMA}"\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SYSTEMD_LOG", str(tmp_path / "systemd-run.log"))
    return {"unit": unit, "cache": cache, "state": state, "log": tmp_path / "systemd-run.log"}


def run_module(capsys: pytest.CaptureFixture[str], host: dict[str, Path], check: bool = False,
               **changes: Any) -> dict[str, Any]:
    args = {"key": KEY, "cache_dir": str(host["cache"]), "args": ["--model-path", "/m", "--port", "30000"],
            "python": sys.executable, "unit_path": str(host["unit"]), "transient_unit": "sglang-precompile",
            "mode": "always", "timeout": 5, "_ansible_check_mode": check, **changes}
    with patch_module_args(args), pytest.raises(SystemExit):
        kernel_precompile.main()
    return json.loads([line for line in capsys.readouterr().out.splitlines() if line.startswith("{")][-1])


def records(host: dict[str, Path]) -> list[dict[str, Any]]:
    path = host["state"] / "standin-kernels.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_module_builds_once_under_the_units_identity_and_environment(capsys, host) -> None:
    checked = run_module(capsys, host, check=True)
    assert checked["changed"] and not checked["built"] and not host["log"].exists()
    built = run_module(capsys, host)
    assert built["changed"] and built["built"] and built["compile"]["rc"] == 0, built
    assert records(host)[-1]["found"] == "cold" and records(host)[-1]["by"] == "compile_deep_gemm"
    marker = json.loads((host["cache"] / pc.MARKER).read_text())
    assert marker["key"] == KEY and marker["digest"] == pc.inputs_digest(pc.kernel_inputs(KEY, ["--model-path", "/m",
                                                                                                 "--port", "30000"]))
    called = host["log"].read_text()
    assert "--unit=sglang-precompile --wait --pipe" in called and "-p User=nobody" in called
    assert f"-p EnvironmentFile={host['unit'].parent}/sglang.env" in called and "RuntimeMaxSec=65" in called
    assert "-m sglang.compile_deep_gemm --model-path /m --host 127.0.0.1 --port " in called
    again = run_module(capsys, host)
    assert not again["changed"] and not again["built"] and "are built" in again["skip_reason"]
    other = run_module(capsys, host, args=["--model-path", "/m", "--tp-size", "2"])
    assert other["built"] and records(host)[-1]["found"] == "warm"  # new arguments: built again (the stand-in's cache is per model)


def test_auto_skips_where_deepgemm_does_not_run_and_multi_node_is_never_built(capsys, host) -> None:
    skipped = run_module(capsys, host, mode="auto")
    assert not skipped["changed"] and "not FP8" in skipped["skip_reason"] and not host["log"].exists()
    multi = run_module(capsys, host, args=["--model-path", "/m", "--nnodes", "2", "--quantization", "fp8"])
    assert not multi["changed"] and "multi-node" in multi["skip_reason"]


def test_a_stale_lock_hangs_the_build_until_its_timeout(capsys, host) -> None:
    locks = host["cache"] / "deep_gemm" / "locks"
    locks.mkdir(parents=True)
    (locks / "standin.lock").write_text("4242\n")
    failed = run_module(capsys, host, timeout=1)
    assert failed["failed"] and "exited 1" in failed["msg"] and "compilation timeout" in failed["msg"]
    assert not (host["cache"] / pc.MARKER).exists() and records(host)[-1]["found"] == "locked"
    soft = run_module(capsys, host, timeout=1, fail_on_error=False)
    assert not soft.get("failed") and not soft["changed"] and soft["error"].startswith(f"{sys.executable} -m")


# --- the stand-in's start finds a warm cache after the pre-compile ----------------------------------------------------


def test_the_standins_start_compiles_a_cold_cache_and_finds_a_warm_one(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(STANDIN_SRC), "SGLANG_STANDIN_SCHEMA": str(SCHEMA), "HOME": str(tmp_path),
           "SGLANG_CACHE_DIR": str(tmp_path / "k"), "SGLANG_STANDIN_COMPILE_SECONDS": "0.3",
           "SGLANG_STANDIN_FAULTS": str(tmp_path / "none.env")}
    env.pop("SGLANG_DG_CACHE_DIR", None)
    code = "from sglang._standin import kernels; print(kernels.ensure('/m', 'server'))"
    found = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                            timeout=30).stdout.strip() for _ in range(2)]
    assert found == ["cold", "warm"]
    lines = [json.loads(x) for x in (tmp_path / "standin-kernels.jsonl").read_text().splitlines()]
    assert [x["found"] for x in lines] == ["cold", "warm"] and lines[0]["dir"] == str(tmp_path / "k" / "deep_gemm")
    assert lines[0]["seconds"] >= 0.3 and lines[1]["seconds"] == 0.0


# --- the role: before the drain -------------------------------------------------------------------------------------


def test_the_precompile_runs_in_prepare_which_the_rollout_runs_before_the_drain() -> None:
    roles = REPO / "roles"
    prepare = yaml.safe_load((roles / "sglang_server/tasks/prepare.yml").read_text())
    include = [t for t in prepare if t.get("ansible.builtin.include_tasks") == "precompile.yml"]
    assert include and include[0]["when"].startswith("sglang_server_precompile == 'always' or (sglang_server_precompile == 'auto'")
    task = yaml.safe_load((roles / "sglang_server/tasks/precompile.yml").read_text())[0]
    module = task["blackwell.sglang.kernel_precompile"]
    assert module["cache_dir"] == "{{ __sglang_server_plan.kernel_cache.dir }}"
    assert module["unit_path"] == "{{ __sglang_server_unit_path }}"
    steps = yaml.safe_load((roles / "sglang_rollout/tasks/instance.yml").read_text())[0]["block"]
    names = [s.get("ansible.builtin.include_role", {}).get("tasks_from") for s in steps]
    assert names.index("prepare.yml") < names.index("drain.yml") < names.index("restart_chain.yml")


@pytest.mark.parametrize(("arch", "runs"), [("sm90", True), ("sm100", True), ("sm103", True), ("sm90+sm100", True),
                                            ("sm120", False), ("sm121", False), ("sm100+sm120", False),
                                            ("sm89", False), ("sm-unknown", False)])
def test_auto_spends_no_module_run_where_deepgemm_does_not_run(arch: str, runs: bool) -> None:
    # The condition is on the include in prepare.yml (an SM120 host spends neither the include nor the module run).
    [task] = [t for t in yaml.safe_load((REPO / "roles/sglang_server/tasks/prepare.yml").read_text())
              if t.get("ansible.builtin.include_tasks") == "precompile.yml"]
    pattern = task["when"].split("regex('", 1)[1].rsplit("')", 1)[0]
    key = KEY.replace("sm100", arch)
    assert bool(re.search(pattern, key)) is runs
    # the module's own rule agrees on the architecture (for FP8 weights)
    assert pc.deepgemm_applies(ARGV, None, key)[0] is runs
