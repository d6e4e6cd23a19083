"""The ready wait's "no progress" detector: a start that shows no sign of life fails early, a slow one does not.

``wait`` (the action's loop) is driven by a simulated host: a fake monotonic clock and a timeline of what
server_probe would see at each moment (journal cursor and last line, GPU memory used, health status,
unit state). A probe advances the clock by the ``wait`` it was given (a round trip waits on the host
that long), or to the moment the server answers 200; nothing sleeps. The action itself is run once
in-process with ``_execute_module`` answered by the same simulated host, as Ansible would call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.action import wait_ready as plugin
from ansible_collections.blackwell.sglang.plugins.action.wait_ready import ActionModule, Progress, wait
from hypothesis import given
from hypothesis import strategies as st

UNIT = "sglang.service"
URL = "http://127.0.0.1:30000/health"


@dataclass
class Host:
    """A simulated server: log lines and GPU memory readings at given times, healthy from ``ready_at`` on."""

    lines: list[tuple[float, str]] = field(default_factory=list)  # (time, text), in time order
    memory: list[tuple[float, int]] = field(default_factory=list)  # (time, MiB), in time order
    ready_at: float | None = None
    failed_at: float | None = None
    cursors: bool = True
    now: float = 1000.0
    calls: list[dict[str, Any]] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def probe(self, module_args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(dict(module_args))
        target = self.now + float(module_args.get("wait", 0))
        if self.ready_at is not None and self.ready_at <= target:
            target = max(self.now, self.ready_at)
        self.now = target
        shown = [(t, text) for t, text in self.lines if t <= self.now]
        readings = [mib for t, mib in self.memory if t <= self.now]
        failed = self.failed_at is not None and self.now >= self.failed_at
        result: dict[str, Any] = {
            "status": 200 if self.ready_at is not None and self.now >= self.ready_at else -1,
            "unit_state": {"ActiveState": "failed" if failed else "activating", "SubState": "start", "Result": "exit-code",
                           "NRestarts": "0"},
            "log": [text for _, text in shown][-module_args.get("log_lines", 1):],
            "gpu_memory_mib": readings[-1] if readings else None,
        }
        if self.cursors:
            result["cursor"] = f"s=abc;i={len(shown)}" if shown else None
        return result


def args(**overrides: Any) -> dict[str, Any]:
    return {"url": URL, "unit": UNIT, "timeout": 3600, "interval": 0.5, "progress_every": 30,
            "no_progress_timeout": 600, "gpus": [0, 1], **overrides}


def run(host: Host, **overrides: Any) -> tuple[dict[str, Any], float, list[str]]:
    """The wait's result, the seconds it took on the fake clock, and the progress lines it printed."""
    shown: list[str] = []
    start = host.now
    result = wait(args(**overrides), host.probe, clock=host.clock, show=shown.append, host="gpu-01")
    return result, host.now - start, shown


T0 = 1000.0


def test_a_stalled_start_fails_after_the_no_progress_timeout_naming_the_stall() -> None:
    host = Host(lines=[(T0, "Load weight begin"), (T0 + 40, "Loading safetensors checkpoint shards: 12% 12/97")],
                memory=[(T0, 0), (T0 + 30, 20_000), (T0 + 60, 41_000)])
    result, took, _ = run(host)
    assert result["failed"] and result["stalled"]
    # the last sign of life was the memory growth at +60; the stall is called 600s later, not at the 3600s timeout
    assert took == pytest.approx(60 + 600, abs=0.01)
    assert "made no progress for 600s" in result["msg"]
    assert "Loading safetensors checkpoint shards: 12% 12/97" in result["msg"]
    assert "sglang_server_no_progress_timeout" in result["msg"] and "GPU(s) 0, 1" in result["msg"]
    assert "41000 MiB" in result["msg"]
    assert result["log"] == ["Load weight begin", "Loading safetensors checkpoint shards: 12% 12/97"]  # the 20-line tail


def test_gpu_memory_growth_alone_keeps_a_silent_load_alive() -> None:
    # no log line for 2000s, but the weights keep landing on the GPUs
    host = Host(lines=[(T0, "Load weight begin")], memory=[(T0 + t, 100 * t) for t in range(0, 2000, 300)],
                ready_at=T0 + 2100)
    result, took, shown = run(host)
    assert not result.get("failed") and took == pytest.approx(2100)
    assert any("GPU memory" in line for line in shown)


def test_new_log_lines_alone_keep_the_wait_going() -> None:
    host = Host(lines=[(T0 + t, f"step {t}") for t in range(0, 3000, 500)], ready_at=T0 + 3000)
    result, took, _ = run(host)
    assert not result.get("failed") and took == pytest.approx(3000)


def test_the_same_line_again_is_progress_when_the_cursor_moves() -> None:
    host = Host(lines=[(T0 + t, "NCCL INFO Channel 00") for t in range(0, 3000, 500)], ready_at=T0 + 3000)
    result, _, _ = run(host)
    assert not result.get("failed")


def test_without_a_cursor_a_different_last_line_is_the_evidence() -> None:
    host = Host(lines=[(T0 + t, f"step {t}") for t in range(0, 3000, 500)], ready_at=T0 + 3000, cursors=False)
    assert not run(host)[0].get("failed")
    host = Host(lines=[(T0 + t, "same") for t in range(0, 3000, 500)], ready_at=T0 + 3000, cursors=False)
    result, took, _ = run(host)
    assert result["stalled"] and took == pytest.approx(600)


def test_memory_that_falls_and_returns_is_not_growth() -> None:
    host = Host(lines=[(T0, "x")], memory=[(T0, 5000), (T0 + 100, 1000), (T0 + 200, 5000), (T0 + 300, 4000)])
    result, took, _ = run(host)
    assert result["stalled"] and took == pytest.approx(600)


def test_zero_disables_the_detector_and_the_start_timeout_applies() -> None:
    host = Host(lines=[(T0, "Load weight begin")])
    result, took, _ = run(host, no_progress_timeout=0)
    assert result["failed"] and not result["stalled"]
    assert result["msg"] == f"{URL} not healthy after 3600s" and took == pytest.approx(3600, abs=31)


def test_a_failed_unit_is_still_reported_as_such() -> None:
    host = Host(lines=[(T0, "Traceback ...")], failed_at=T0 + 45)
    result, took, _ = run(host)
    assert result["failed"] and not result["stalled"] and took == pytest.approx(60)
    assert result["msg"] == f"{UNIT} is failed (exit-code, 0 restarts)"


def test_each_round_trip_waits_no_longer_than_the_stall_deadline() -> None:
    host = Host(lines=[(T0, "x")])
    run(host, progress_every=250, no_progress_timeout=600)
    waits = [c["wait"] for c in host.calls if "wait" in c]
    assert waits == [250, 250, 100]  # 600s from the start: the third round trip stops at the deadline
    assert all(c.get("gpus") == [0, 1] for c in host.calls if "wait" in c)


@given(st.lists(st.tuples(st.floats(0, 5000), st.sampled_from(["line", "memory"])), max_size=30),
       st.floats(1, 1200), st.floats(1, 120))
def test_the_stall_is_called_exactly_limit_seconds_after_the_last_sign_of_life_a_probe_saw(
        events: list[tuple[float, str]], limit: float, every: float) -> None:
    events.sort()
    lines = [(T0 + t, f"line {i}") for i, (t, kind) in enumerate(events) if kind == "line"]
    memory = [(T0, 0)] + [(T0 + t, 10 * (i + 1)) for i, (t, kind) in enumerate(events) if kind == "memory"]
    host = Host(lines=lines, memory=memory)
    result, took, _ = run(host, no_progress_timeout=limit, progress_every=every, timeout=10_000)
    assert result["failed"]
    # Replay what each probe saw: progress is a line count that grew or memory above the highest reading before.
    seen, count, highest, when = T0, None, None, T0
    for call in host.calls:
        if "wait" not in call:
            continue
        when += call["wait"]
        now_count = sum(1 for t, _ in lines if t <= when)
        now_memory = [m for t, m in memory if t <= when][-1]
        if count is not None and (now_count != count or now_memory > highest):
            seen = when
        count, highest = now_count, now_memory if highest is None else max(highest, now_memory)
    if result["stalled"]:
        assert T0 + took - seen == pytest.approx(limit, abs=1e-6)
    else:
        assert took >= 10_000 and T0 + took - seen < limit + 1e-6


def test_progress_baseline_is_the_first_look() -> None:
    progress = Progress(since=0.0)
    progress.observe({"log": ["old line of the previous run"], "cursor": "c1", "gpu_memory_mib": 7}, 10.0)
    assert progress.since == 0.0  # what was there before the wait is no progress
    progress.observe({"log": ["new"], "cursor": "c2", "gpu_memory_mib": 7}, 20.0)
    assert progress.since == 20.0 and progress.line == "new"
    progress.observe({"log": ["new"], "cursor": "c2", "gpu_memory_mib": 8}, 30.0)
    assert progress.since == 30.0 and not progress.stalled(629.0, 600) and progress.stalled(630.0, 600)
    assert not progress.stalled(10_000.0, 0)


def test_the_action_runs_the_loop_through_server_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host(lines=[(T0, "Load weight begin")], memory=[(T0, 0)])
    task = SimpleNamespace(args=args(no_progress_timeout=120, progress_every=30), async_val=0, check_mode=False,
                           action="blackwell.sglang.wait_ready")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/nonexistent"))
    action = ActionModule(task, connection, SimpleNamespace(), loader=None, templar=None, shared_loader_obj=None)
    action.clock = host.clock  # type: ignore[method-assign]
    modules: list[str] = []

    def execute(module_name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        modules.append(module_name)
        return host.probe(module_args)

    monkeypatch.setattr(action, "_execute_module", execute)
    monkeypatch.setattr(plugin.display, "display", lambda *_a, **_k: None)
    result = action.run(task_vars={"inventory_hostname": "gpu-01"})
    assert result["failed"] and result["stalled"] and "made no progress for 120s" in result["msg"]
    assert set(modules) == {"blackwell.sglang.server_probe"}
    assert host.now - T0 == pytest.approx(120)


def test_cuda_system_not_yet_initialized_names_fabric_manager() -> None:
    host = Host(lines=[(T0, "torch.AcceleratorError: CUDA error: system not yet initialized"), (T0 + 1, "Traceback ...")],
                failed_at=T0 + 5)
    result, _, _ = run(host)
    assert result["failed"] and result["msg"].startswith(f"{UNIT} is failed (exit-code, 0 restarts). CUDA error 802")
    assert "systemctl status nvidia-fabricmanager" in result["msg"] and "nvidia_driver_fabricmanager: always" in result["msg"]
    assert plugin.known_cause(["RuntimeError: CUDA error: out of memory"]) is None


# --- what SGLang resolved, read in the wait's last round trip (the restart chain's report) ---------------------

def test_once_healthy_the_resolved_arguments_come_back_from_the_same_round_trip() -> None:
    host = Host(ready_at=T0 + 5)
    answered = host.probe

    def probe(module_args: dict[str, Any]) -> dict[str, Any]:
        result = answered(module_args)
        if result["status"] == 200 and module_args.get("info_url"):
            result["info"] = {"speculative_algorithm": "EAGLE"}
        return result

    result = wait(args(info_url="http://127.0.0.1:30000/server_info", info_keys=["speculative_algorithm"],
                       api_key="k"), probe, clock=host.clock, show=lambda _: None)
    assert not result.get("failed") and result["info"] == {"speculative_algorithm": "EAGLE"}
    assert all(call["info_url"].endswith("/server_info") and call["api_key"] == "k" for call in host.calls)
    # Without info_url nothing more is asked for, and no info is returned.
    plain = Host(ready_at=T0 + 5)
    result = wait(args(), plain.probe, clock=plain.clock, show=lambda _: None)
    assert "info" not in result and not any("info_url" in call or "api_key" in call for call in plain.calls)


def test_a_healthy_server_whose_resolved_arguments_cannot_be_read_fails_the_wait() -> None:
    host = Host(ready_at=T0)

    def probe(module_args: dict[str, Any]) -> dict[str, Any]:
        return {**host.probe(module_args), "info": None, "info_error": "HTTP 401"}

    result = wait(args(info_url="http://127.0.0.1:30000/server_info"), probe, clock=host.clock, show=lambda _: None)
    assert result["failed"] and result["msg"].endswith("/server_info could not be read: HTTP 401")


@pytest.mark.parametrize(("resolved", "fails"), [
    ({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}, False),
    ({"speculative_algorithm": None, "speculative_num_steps": None}, True),
    ({"speculative_algorithm": "EAGLE"}, True),  # a key SGLang did not report at all counts as unset
])
def test_the_wait_fails_when_a_required_resolved_value_is_unset(resolved: dict[str, Any], fails: bool) -> None:
    """spec=auto asks for speculative decoding: the ready wait itself fails when SGLang resolved none, so no task
    but the wait runs between the start and the gate while the instance is out of rotation."""
    host = Host(ready_at=T0 + 2)

    def probe(module_args: dict[str, Any]) -> dict[str, Any]:
        result = host.probe(module_args)
        return {**result, "info": dict(resolved)} if result["status"] == 200 else result

    result = wait(args(info_url="http://127.0.0.1:30000/server_info", info_keys=sorted(resolved),
                       require_info=["speculative_algorithm", "speculative_num_steps"],
                       require_info_why="spec=auto asked for speculative decoding"),
                  probe, clock=host.clock, show=lambda _: None)
    assert bool(result.get("failed")) is fails
    assert result["info"] == resolved
    if fails:
        assert "spec=auto asked for speculative decoding" in result["msg"]
        assert "speculative_num_steps" in result["msg"]


def test_server_probe_returns_only_the_keys_asked_for_and_sends_the_key(tmp_path: Any) -> None:
    """server_probe's read of /server_info against a real HTTP server: the report keys only (the rest of
    /server_info holds the server's secrets), with the API key as a bearer token."""
    import json

    from http_answers import module, serving

    server_probe = module("server_probe")
    seen: list[str | None] = []

    def answer(request: Any) -> tuple[int, bytes]:
        seen.append(request.headers.get("Authorization"))
        ok = request.headers.get("Authorization") == "Bearer s3cret"
        body = json.dumps({"speculative_algorithm": "EAGLE", "tp_size": 8, "api_key": "s3cret"}).encode()
        return (200, body) if ok else (401, b"{}")

    with serving(answer) as port:
        url = f"http://127.0.0.1:{port}/server_info"
        keys = ["speculative_algorithm", "tp_size", "moe_runner_backend"]
        assert server_probe.server_info(url, keys, "s3cret", 5) == ({"speculative_algorithm": "EAGLE", "tp_size": 8}, None)
        assert server_probe.server_info(url, keys, None, 5) == (None, "HTTP 401")
    assert seen == ["Bearer s3cret", None]
