# SPDX-License-Identifier: Apache-2.0
"""A start stuck in the kernel compile is retried once with its kernel cache cleared (issue 35 item 1): the
server_restart action judges the failed start with sglang_precompile.stuck_in_compile and runs the module again with
``clear``; the module removes only absolute, normalised, non-link directories between the stop and the start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.action import server_restart as restart_plugin
from ansible_collections.blackwell.sglang.plugins.action import wait_ready
from test_merged_steps import HEALTHY, RESTARTED, WAIT, action
from test_restart_modules import Failed, FakeModule, load

CACHE = {"root": "/var/cache/sglang/kernels", "key": "sglang-0.5.24_torch-2.14.1_cu13_sm100",
         "dir": "/var/cache/sglang/kernels/sglang-0.5.24_torch-2.14.1_cu13_sm100/sglang"}
# A start of 8 ranks hung in rank 0's compile: its last 20 lines are the other ranks' load lines, logged after the
# compile line (what the molecule case met under load); the compile line is in the lines of this start that the failed
# wait's last probe reads with the compile markers (server_probe's markers).
TAIL = [f"[TP{rank}] {line}" for rank in range(1, 8) for line in ("Load weight begin.", "Load weight end.",
                                                                 "KV Cache is allocated. #tokens: 1048576")][-20:]
HUNG = {"status": 503, "unit_state": {"ActiveState": "active"}, "log": TAIL,
        "marked": ["[TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time",
                   "[TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=4096, K=7168, num_groups=1 with all Ms."]}


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_ready.display, "display", lambda *_a, **_k: None)
    monkeypatch.setattr(restart_plugin.Display, "display", lambda *_a, **_k: None)
    original = wait_ready.wait

    def fast_wait(args: dict[str, Any], probe: Any, **kwargs: Any) -> dict[str, Any]:
        clock = iter(float(n) for n in range(1000))
        return original(args, probe, clock=lambda: next(clock), **kwargs)

    monkeypatch.setattr(restart_plugin, "wait", fast_wait)


def run(args: dict[str, Any], restarts: list[dict[str, Any]], probes: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    """The server_restart action in-process: the n-th module run answers ``restarts[n]``, every probe after it
    ``probes[n]`` (the start's behaviour)."""

    def answer(module_name: str, calls: list[Any]) -> dict[str, Any]:
        started = sum(name == "blackwell.sglang.server_restart" for name, _ in calls)
        return dict((restarts if module_name == "blackwell.sglang.server_restart" else probes)[started - 1])

    return action(args, answer)


ARGS = {"unit": "sglang.service", "wait": {**WAIT, "timeout": 10}, "kernel_cache": CACHE}


def test_a_start_stuck_in_the_compile_is_retried_once_with_its_kernel_directory_cleared() -> None:
    result, calls = run(ARGS, [RESTARTED, {**RESTARTED, "cleared": [CACHE["dir"]]}], [HUNG, HEALTHY])
    restarts = [a for name, a in calls if name == "blackwell.sglang.server_restart"]
    assert len(restarts) == 2 and "kernel_cache" not in restarts[0] and restarts[0].get("clear") is None
    assert restarts[1]["clear"] == [CACHE["dir"]]
    retry = result["compile_retry"]
    assert retry["stuck"] and retry["retried"] and retry["cleared"] == [CACHE["dir"]], retry
    assert "DeepGEMM" in retry["evidence"] and not result.get("failed") and result["ready"]["info"]


def test_the_compile_is_judged_on_the_starts_marked_lines_not_the_tail() -> None:
    assert not any("DeepGEMM" in line for line in HUNG["log"])  # the tail alone would say: never entered the compile
    result, calls = run(ARGS, [RESTARTED, {**RESTARTED, "cleared": [CACHE["dir"]]}], [HUNG, HEALTHY])
    asked = [a for name, a in calls if name == "blackwell.sglang.server_probe" and a.get("markers")]
    assert asked and set(asked[0]["markers"]) == {*restart_plugin.COMPILE_LINES, *restart_plugin.AFTER_COMPILE_LINES}
    assert result["compile_retry"]["retried"] and result["compile_retry"]["evidence"] == HUNG["marked"][-1]
    # A start whose marked lines show a later phase after the compile is not retried.
    past = {**HUNG, "marked": [*HUNG["marked"], "PP-parallel DeepGEMM warmup done"]}
    result, calls = run(ARGS, [RESTARTED], [past])
    assert result["failed"] and not result["compile_retry"]["stuck"]
    # Without a kernel cache the failed wait asks for no marked lines.
    result, calls = run({**ARGS, "kernel_cache": None}, [RESTARTED], [HUNG])
    assert not any(a.get("markers") for name, a in calls if name == "blackwell.sglang.server_probe")


def test_a_second_hang_fails_the_restart_naming_the_retry() -> None:
    result, calls = run(ARGS, [RESTARTED, RESTARTED], [HUNG, HUNG])
    assert sum(name == "blackwell.sglang.server_restart" for name, _ in calls) == 2
    assert result["failed"] and "after one retry with the kernel cache cleared" in result["msg"]


def test_a_start_that_failed_elsewhere_or_without_kernel_cache_is_not_retried() -> None:
    crashed = {"status": 503, "unit_state": {"ActiveState": "failed", "Result": "exit-code", "NRestarts": "0"},
               "log": ["RuntimeError: CUDA error: out of memory"]}
    result, calls = run(ARGS, [RESTARTED], [crashed])
    assert result["failed"] and result["compile_retry"]["retry"] is False
    assert sum(name == "blackwell.sglang.server_restart" for name, _ in calls) == 1
    result, calls = run({**ARGS, "kernel_cache": None}, [RESTARTED], [HUNG])
    assert result["failed"] and "compile_retry" not in result
    assert sum(name == "blackwell.sglang.server_restart" for name, _ in calls) == 1


def test_the_module_clears_between_the_stop_and_the_start_and_refuses_unsafe_paths(tmp_path: Path) -> None:
    module_file = load("server_restart")
    cache = tmp_path / "kernels" / "key" / "sglang"
    (cache / "deep_gemm").mkdir(parents=True)
    (cache / "deep_gemm" / "lock").write_text("")
    params = {name: spec.get("default") for name, spec in module_file.HOLDER_OPTIONS.items()}
    params.update(devices=["/nonexistent/nvidia*"], nvidia_smi="/nonexistent/nvidia-smi", unit="sglang.service",
                  daemon_reload=False, owner_user="sglang", clear=[str(cache)])
    fake = FakeModule({("systemctl", "show"): (0, "LoadState=loaded\nActiveState=active\nNeedDaemonReload=no\n", "")})
    fake.params = params
    done = module_file.restart(fake, params)
    assert done["cleared"] == [str(cache)] and not cache.exists() and done["started"]
    commands = [" ".join(c) for c in fake.calls]
    assert commands.index("systemctl stop sglang.service") < commands.index("systemctl start sglang.service")
    for bad in ("relative/dir", "/a/../b/c", "/var", str(tmp_path / "link")):
        if bad.endswith("link"):
            (tmp_path / "link").symlink_to(tmp_path)
        with pytest.raises(Failed, match=r"^clear\[0\]"):
            module_file.restart(FakeModule({}), {**params, "clear": [bad]})


def test_the_probe_returns_the_marked_lines_of_the_units_current_start_only() -> None:
    server_probe = load("server_probe")
    invocation = "0123456789abcdef0123456789abcdef"
    journal = "\n".join(["[TP0] Load weight begin.", HUNG["marked"][0], *TAIL, HUNG["marked"][1], *TAIL]) + "\n"
    module = FakeModule({("systemctl", "show", "-p", "InvocationID"): (0, invocation + "\n", ""),
                         ("journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}"): (0, journal, "")})
    markers = [*restart_plugin.COMPILE_LINES, *restart_plugin.AFTER_COMPILE_LINES]
    assert server_probe.marked_lines(module, "sglang.service", markers) == HUNG["marked"]
    assert module.calls[-1] == ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "cat", "--no-pager"]
    # Only the newest MARKED_LINES; a unit without an invocation (never started, or an odd answer) reads its last lines.
    many = "\n".join(f"{HUNG['marked'][0]} {n}" for n in range(server_probe.MARKED_LINES + 5))
    module = FakeModule({("systemctl", "show"): (0, "\n", ""), ("journalctl",): (0, many, "")})
    lines = server_probe.marked_lines(module, "sglang.service", markers)
    assert len(lines) == server_probe.MARKED_LINES and lines[-1].endswith(f" {server_probe.MARKED_LINES + 4}")
    assert module.calls[-1][:3] == ["journalctl", "-u", "sglang.service"]
    module = FakeModule({("systemctl", "show"): (0, "x; rm -rf /\n", ""), ("journalctl",): (1, "", "no journal")})
    assert server_probe.marked_lines(module, "sglang.service", markers) == []
    assert module.calls[-1][:3] == ["journalctl", "-u", "sglang.service"]
