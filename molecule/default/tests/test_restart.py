"""The restart chain, case by case, on one simulated Blackwell host (molecule scenario `default`, after
test_default and test_security).

Each case drives playbooks/restart.yml or deploy.yml through ansible-runner against the scenario's
container and asserts on the runner's events and on the host: PIDs, device holders, health,
what SGLang resolved. The cases run in file order and each leaves a healthy server behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import simrun
from rollout_window import WINDOW, window_events
from simrun import BASE_ARGS, BASE_ENV, failures, final_failure, task_result

SERVICE = "sglang.service"
# Short timeouts so failing cases fail fast; they are ordinary role variables.
FAST = {"sglang_server_ready_timeout": 60, "sglang_server_ready_poll_interval": 1, "sglang_server_ready_progress_every": 5}


def play(inventory: Path, tmp_path: Path, playbook: str, **extravars: Any) -> ansible_runner.Runner:
    """A project playbook against the container, with the fast timeouts; the driver and CUDA roles,
    tested by the provision scenario, are skipped to keep the many deploys short."""
    return simrun.play(inventory, tmp_path, playbook, skip_tags="driver,cuda", **{**FAST, **extravars})


def main_pid(host) -> int:
    return int(host.check_output(f"systemctl show -p MainPID --value {SERVICE}"))


def started_at(host) -> str:
    return host.check_output(f"systemctl show -p ExecMainStartTimestampMonotonic --value {SERVICE}")


def server_info(host) -> dict[str, Any]:
    return json.loads(host.check_output("curl -fsS http://127.0.0.1:30000/server_info"))


def healthy(host) -> bool:
    return host.run("curl -fsS -o /dev/null http://127.0.0.1:30000/health").rc == 0


def device_holders(host) -> set[int]:
    out = host.run("fuser /dev/nvidia[0-9]* 2>/dev/null").stdout
    return {int(p.rstrip("cemfr")) for p in out.split() if p.rstrip("cemfr").isdigit()}


def compute_apps(host) -> set[int]:
    out = host.check_output("nvidia-smi --query-compute-apps=pid --format=csv,noheader")
    return {int(line) for line in out.split()}


@pytest.fixture(scope="module")
def persistenced(host) -> int:
    """PID of the nvidia-persistenced stand-in before any case; it must never change."""
    return int(host.check_output("systemctl show -p MainPID --value nvidia-persistenced"))


def assert_clean_and_healthy(host, persistenced: int) -> None:
    assert healthy(host)
    schedulers = {int(p) for p in host.check_output("pgrep -f '^sglang::scheduler_TP'").split()}
    assert len(schedulers) == 8
    assert compute_apps(host) == schedulers, "nvidia-smi must list exactly the running schedulers"
    assert device_holders(host) == schedulers | {persistenced}
    assert int(host.check_output("systemctl show -p MainPID --value nvidia-persistenced")) == persistenced


@pytest.mark.extended  # a deploy that changes nothing: molecule's idempotence step and test_instances' second deploy
def test_deploy_without_changes_does_not_restart(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    pid = main_pid(host)
    runner = play(inventory, tmp_path, "deploy.yml")
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}
    assert main_pid(host) == pid
    assert_clean_and_healthy(host, persistenced)


@pytest.mark.extended  # restart.yml's whole chain: the spec cases; only the floor out of rotation: test_fleet's restart
def test_restart_of_an_unchanged_config_runs_the_whole_chain(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    pid = main_pid(host)
    runner = play(inventory, tmp_path, "restart.yml")
    assert runner.rc == 0, final_failure(runner)
    assert main_pid(host) != pid
    task_result(runner, "Stop the server, release the GPUs it left behind, start it and wait for its health")
    assert any(" serves on " in line for line in task_result(runner, "Report the restart")["msg"])
    # Out of rotation (between the drain and the join, skipped here without routers) only the restart's floor ran.
    [window] = window_events(runner.events)
    assert "Stop the server, release the GPUs it left behind, start it and wait for its health" in window
    assert [task for task in window if task not in WINDOW] == [], window
    assert_clean_and_healthy(host, persistenced)


def test_spec_auto_replaces_explicit_speculative_settings(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    explicit = {**BASE_ARGS, "speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3}
    runner = play(inventory, tmp_path, "restart.yml", sglang_args=explicit)
    assert runner.rc == 0, final_failure(runner)
    info = server_info(host)
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (2, 1, 3)
    runner = play(inventory, tmp_path, "restart.yml", sglang_args=explicit, spec="auto")
    assert runner.rc == 0, final_failure(runner)
    info = server_info(host)
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (3, 1, 4)
    resolved = task_result(runner, "Keep the resolved speculative and backend settings")["ansible_facts"]["sglang_server_resolved"]
    assert resolved["speculative_num_steps"] == 3
    assert "--speculative-num-steps" not in host.file("/etc/systemd/system/sglang.service").content_string
    # How to keep it: the host-variable lines, printed by the run.
    keep = " ".join(task_result(runner, "Report the restart")["msg"])
    assert "`sglang_spec: auto`" in keep and '"speculative_num_steps": 3' in keep
    assert_clean_and_healthy(host, persistenced)


def test_a_run_without_the_spec_override_does_not_silently_undo_it(host, inventory: Path, tmp_path: Path,
                                                                   persistenced: int) -> None:
    # The case above left the server on spec=auto (-e spec=auto) over arguments that spell the triple out
    # (sglang_spec keep): a run without -e spec would put the triple back and restart the server.
    explicit = {**BASE_ARGS, "speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3}
    marker = json.loads(host.file("/etc/sglang/sglang.spec.json").content_string)
    assert (marker["mode"], marker["host"], marker["override"]) == ("auto", "keep", True)
    pid, unit = main_pid(host), host.file("/etc/systemd/system/sglang.service").content_string
    runner = play(inventory, tmp_path, "deploy.yml", sglang_args=explicit)
    assert runner.rc != 0
    [failed] = failures(runner)
    assert failed["task"] == "Install the directories, helper scripts and files of every instance, enable their units, and look at them"
    for words in ("spec=auto, set by an earlier run's -e spec=auto", "set sglang_spec: auto", "-e spec=keep", "Nothing was changed"):
        assert words in failed["res"]["msg"]
    assert main_pid(host) == pid and host.file("/etc/systemd/system/sglang.service").content_string == unit
    # Setting the host variable keeps the running mode: the unit stays, nothing restarts.
    runner = play(inventory, tmp_path, "deploy.yml", sglang_args=explicit, sglang_spec="auto")
    assert runner.rc == 0, final_failure(runner)
    assert main_pid(host) == pid and host.file("/etc/systemd/system/sglang.service").content_string == unit
    # An explicit -e spec=keep confirms the change back to the triple as written.
    runner = play(inventory, tmp_path, "restart.yml", sglang_args=explicit, spec="keep")
    assert runner.rc == 0, final_failure(runner)
    info = server_info(host)
    assert main_pid(host) != pid and (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (2, 3)
    marker = json.loads(host.file("/etc/sglang/sglang.spec.json").content_string)
    assert (marker["mode"], marker["override"]) == ("keep", False) and "--speculative-num-steps" in marker["argv"]
    assert_clean_and_healthy(host, persistenced)


def test_incident_arguments_are_rejected_and_the_server_is_untouched(host, inventory: Path, tmp_path: Path) -> None:
    pid, since, unit = main_pid(host), started_at(host), host.file("/etc/systemd/system/sglang.service").content_string
    incident = {**BASE_ARGS, "speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}
    start = time.monotonic()
    runner = play(inventory, tmp_path, "restart.yml", sglang_args=incident)
    elapsed = time.monotonic() - start
    assert runner.rc != 0
    [failed] = failures(runner)
    assert failed["task"] == "Stop when any host is invalid"
    [validated] = [e["event_data"]["res"] for e in runner.events if e.get("event") == "runner_on_ok"
                   and e["event_data"].get("task") == "Validate every host's SGLang arguments against the pinned release"]
    assert "speculative_num_steps" in validated["report"] and "spec=auto" in validated["report"]
    assert (main_pid(host), started_at(host)) == (pid, since)
    assert host.file("/etc/systemd/system/sglang.service").content_string == unit
    assert healthy(host)
    print(f"incident rejected in {elapsed:.1f}s")


@pytest.mark.extended  # the stop and kill of leftovers: the leftover case
def test_sigterm_ignored_is_killed_after_the_drain_timeout(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    host.run("printf 'IGNORE_SIGTERM=1\\n' > /etc/sglang-standin/faults.env")
    try:
        runner = play(inventory, tmp_path, "restart.yml", sglang_server_drain_timeout=3)
        assert runner.rc == 0, final_failure(runner)  # the new server now ignores SIGTERM
        stubborn = main_pid(host)
        start = time.monotonic()
        runner = play(inventory, tmp_path, "restart.yml", sglang_server_drain_timeout=3)
        assert runner.rc == 0, final_failure(runner)
        assert time.monotonic() - start >= 3
        assert host.run(f"test -d /proc/{stubborn}").rc != 0
        journal = host.check_output(f"journalctl -u {SERVICE} --no-pager -o cat | grep -c 'timed out. Killing' || true")
        assert int(journal or 0) >= 1
    finally:
        host.run("rm -f /etc/sglang-standin/faults.env")
    runner = play(inventory, tmp_path, "restart.yml")
    assert runner.rc == 0, final_failure(runner)
    assert_clean_and_healthy(host, persistenced)


def test_a_leftover_sglang_process_outside_the_unit_is_killed_and_reported(host, inventory: Path, tmp_path: Path,
                                                                           persistenced: int) -> None:
    # A scheduler left behind by a server launched by hand: titled like SGLang's, holding GPU 0,
    # in another cgroup than the unit's, so systemd's KillMode cannot reach it.
    host.run("systemd-run --unit=stray-sglang -p User=sglang /bin/bash -c 'exec -a sglang::scheduler_TP0 sleep 600 < /dev/nvidia0'")
    time.sleep(1)
    stray = int(host.check_output("systemctl show -p MainPID --value stray-sglang"))
    assert stray in device_holders(host)
    runner = play(inventory, tmp_path, "restart.yml")
    assert runner.rc == 0, final_failure(runner)
    released = task_result(runner, "Stop the server, release the GPUs it left behind, start it and wait for its health")
    assert stray in [h["pid"] for h in released["killed"]]
    assert host.run(f"test -d /proc/{stray}").rc != 0
    assert any(line.startswith("Killed leftovers of sglang: ") and str(stray) in line
               for line in task_result(runner, "Report the restart")["msg"])
    assert_clean_and_healthy(host, persistenced)


def test_a_foreign_gpu_holder_fails_the_host_and_is_left_alive(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    host.run("systemd-run --unit=foreign-job -p User=nobody /bin/bash -c 'exec sleep 600 < /dev/nvidia3'")
    time.sleep(1)
    foreign = int(host.check_output("systemctl show -p MainPID --value foreign-job"))
    pid = main_pid(host)
    try:
        runner = play(inventory, tmp_path, "restart.yml")
        assert runner.rc != 0
        message = final_failure(runner)
        assert f"pid {foreign}" in message and "/dev/nvidia3" in message and "sleep" in message
        assert host.run(f"test -d /proc/{foreign}").rc == 0
        assert main_pid(host) == pid  # found in preflight: the running server was not stopped
        assert healthy(host)
    finally:
        host.run("systemctl stop foreign-job")
    assert_clean_and_healthy(host, persistenced)


def test_a_server_that_never_becomes_ready_is_rolled_back(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    host.run("printf 'NEVER_READY=1\\n' > /etc/sglang-standin/never-ready.env")
    bad_env = {**BASE_ENV, "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/never-ready.env"}
    runner = play(inventory, tmp_path, "restart.yml", sglang_env=bad_env, sglang_server_ready_timeout=8)
    assert runner.rc != 0
    message = final_failure(runner)
    assert "not healthy after 8s" in message
    assert "Rolled back to the last known good configuration: it is healthy again" in message
    assert "SGLANG_STANDIN_FAULTS" not in host.file("/etc/sglang/sglang.env").content_string
    assert_clean_and_healthy(host, persistenced)


def env_value(host, name: str) -> str | None:
    """A variable of the instance's environment file (the role writes NAME="value")."""
    for line in host.file("/etc/sglang/sglang.env").content_string.splitlines():
        key, _, value = line.partition("=")
        if key == name:
            return value.strip('"')
    return None


def test_a_start_stuck_in_the_kernel_compile_is_cleared_and_retried_once(host, inventory: Path, tmp_path: Path,
                                                                         persistenced: int) -> None:
    # What a killed compile leaves: a cold DeepGEMM cache whose lock nobody holds (SGLang's locks/ under it). The
    # stand-in's compile then waits for the lock forever (tests/fixtures/sglang_standin/.../kernels.py), logging
    # SGLang's compile lines and nothing after them.
    cache = env_value(host, "SGLANG_CACHE_DIR")
    deep_gemm = env_value(host, "SGLANG_DG_CACHE_DIR") or f"{cache}/deep_gemm"
    assert cache and deep_gemm.startswith(cache + "/")
    host.run(f"rm -f {deep_gemm}/standin-kernels-*.json; install -d -o sglang -g sglang {deep_gemm}/locks; "
             f"install -o sglang -g sglang -m 0644 /dev/null {deep_gemm}/locks/standin.lock")
    before = len(host.file("/var/lib/sglang/standin-kernels.jsonl").content_string.splitlines())
    runner = play(inventory, tmp_path, "restart.yml", sglang_server_no_progress_timeout=10)
    assert runner.rc == 0, final_failure(runner)
    retry = task_result(runner, "Stop the server, release the GPUs it left behind, start it and wait for its health")["compile_retry"]
    assert retry["stuck"] and retry["retried"] and retry["cleared"] == [cache], retry
    assert "DeepGEMM" in retry["evidence"] and retry["ready"]["elapsed"] > 0
    assert not host.file(f"{deep_gemm}/locks/standin.lock").exists
    starts = [json.loads(line) for line in host.file("/var/lib/sglang/standin-kernels.jsonl").content_string.splitlines()]
    assert [s["found"] for s in starts[before:] if s["by"] == "server"] == ["locked", "cold"]
    assert_clean_and_healthy(host, persistenced)
    # The next restart finds the kernels the retry compiled.
    runner = play(inventory, tmp_path, "restart.yml")
    assert runner.rc == 0, final_failure(runner)
    last = json.loads(host.file("/var/lib/sglang/standin-kernels.jsonl").content_string.splitlines()[-1])
    assert last["found"] == "warm" and last["by"] == "server"


def kernel_records(host) -> list[dict[str, Any]]:
    """What each start and pre-compile of the stand-in found in its kernel cache (tests/fixtures/sglang_standin)."""
    text = host.file("/var/lib/sglang/standin-kernels.jsonl").content_string
    return [json.loads(line) for line in text.splitlines()]


PRECOMPILE = "Build the instance's kernels into its new kernel cache before the stop"
RESTART = "Stop the server, release the GPUs it left behind, start it and wait for its health"


def test_the_restart_builds_the_kernels_before_the_stop_and_the_start_finds_them_warm(host, inventory: Path, tmp_path: Path,
                                                                                      persistenced: int) -> None:
    # A key nothing was built for (a new release's, after an upgrade): the instance's kernel directory is gone. The
    # reference host (SM120, NVFP4) is one where `auto` builds nothing (no DeepGEMM there): `always` builds anyway.
    cache = env_value(host, "SGLANG_CACHE_DIR")
    assert cache
    host.run(f"rm -rf {cache}")
    before = len(kernel_records(host))
    runner = play(inventory, tmp_path, "restart.yml", sglang_server_precompile="always")
    assert runner.rc == 0, final_failure(runner)
    ran = [e["event_data"]["task"] for e in runner.events if e.get("event") == "runner_on_ok"]
    assert ran.index(PRECOMPILE) < ran.index(RESTART), "the kernels are built while the server still serves"
    built = task_result(runner, PRECOMPILE)
    assert built["changed"] and built["built"], built
    found = [(r["by"], r["found"]) for r in kernel_records(host)[before:]]
    assert found == [("compile_deep_gemm", "cold"), ("server", "warm")], found
    # The same key and arguments again: the marker says they are built, nothing runs.
    runner = play(inventory, tmp_path, "restart.yml", sglang_server_precompile="always")
    assert runner.rc == 0, final_failure(runner)
    assert not task_result(runner, PRECOMPILE)["changed"]
    assert [(r["by"], r["found"]) for r in kernel_records(host)[before + 2:]] == [("server", "warm")]
    assert_clean_and_healthy(host, persistenced)


QUALITY_RECORD = "/etc/sglang/last-good/quality.json"


def chat_answer(host, prompt: str, max_tokens: int) -> str:
    """The server's non-streamed answer to ``prompt`` at temperature 0."""
    body = json.dumps({"model": BASE_ARGS["served_model_name"], "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0})
    out = host.check_output(f"curl -fsS -H 'Content-Type: application/json' -d '{body}' "
                            "http://127.0.0.1:30000/v1/chat/completions")
    return json.loads(out)["choices"][0]["message"]["content"]


@pytest.mark.parametrize(("switch", "what"), [
    ("ANSWER_SALT", "answer"),
    pytest.param("WEIGHTS_SALT", "weights_checksum",
                 marks=pytest.mark.extended),  # the answer's rollback: the case above; the checksum: tests/unit/test_quality_gate.py
])
def test_a_restart_whose_answers_or_weights_differ_from_the_last_good_is_rolled_back(
        host, inventory: Path, tmp_path: Path, persistenced: int, switch: str, what: str) -> None:
    # The restarts before kept the quality gate's record: the fixed prompts' answers and the weights checksum.
    record = json.loads(host.check_output(f"cat {QUALITY_RECORD}"))
    [answers] = [entry["answers"] for entry in record["answers"][:1]]
    assert answers and record["checksums"]
    # The stand-in's switch (its README): the same model answers otherwise, or reports another weights checksum.
    host.run(f"printf '{switch}=regressed\\n' > /etc/sglang-standin/quality.env")
    bad_env = {**BASE_ENV, "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/quality.env"}
    runner = play(inventory, tmp_path, "restart.yml", sglang_env=bad_env)
    assert runner.rc != 0
    message = final_failure(runner)
    # The rollout stops at the canary (restart.yml's first host, max_fail_percentage 0): its last task says so.
    assert message.startswith("Rollout stopped at bsa-mol-default (instance sglang): "), message
    assert f"quality gate failed ({what})" in message, message
    if what == "answer":
        assert json.dumps(next(iter(answers))) in message  # the prompt whose answer differs is named
    else:
        assert "per_engine_checksum" in message and "recorded for this model revision, layout and release" in message
    assert "Rolled back to the last known good configuration: it is healthy again" in message
    # The old unit is back and serving, with the recorded answers; the record is the last good one's still.
    assert "SGLANG_STANDIN_FAULTS" not in host.file("/etc/sglang/sglang.env").content_string
    prompt, answer = next(iter(answers.items()))
    assert chat_answer(host, prompt, 16) == answer
    assert json.loads(host.check_output(f"cat {QUALITY_RECORD}")) == record
    assert_clean_and_healthy(host, persistenced)


@pytest.mark.extended  # the rollback to last known good: the never-ready case
def test_a_crash_loop_hits_the_start_limit_and_is_rolled_back(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    host.run("printf 'EXIT_AT_START=1\\nLOAD_SECONDS=0\\n' > /etc/sglang-standin/crash.env")
    bad_env = {**BASE_ENV, "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/crash.env"}
    runner = play(inventory, tmp_path, "restart.yml", sglang_env=bad_env, sglang_server_restart_sec=1,
                  sglang_server_start_limit_burst=2)
    assert runner.rc != 0
    message = final_failure(runner)
    assert "start-limit-hit" in message or "failed" in message
    assert "CUDA error: out of memory" in message
    assert "healthy again" in message
    assert "StartLimitBurst=3" in host.file("/etc/systemd/system/sglang.service").content_string
    assert_clean_and_healthy(host, persistenced)


def test_deploy_puts_the_inventory_configuration_back(host, inventory: Path, tmp_path: Path, persistenced: int) -> None:
    runner = play(inventory, tmp_path, "deploy.yml")
    assert runner.rc == 0, final_failure(runner)
    runner = play(inventory, tmp_path, "deploy.yml")
    assert runner.stats["changed"] == {}
    assert_clean_and_healthy(host, persistenced)


def wait_healthy(host, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not healthy(host):
        assert time.monotonic() < deadline, "the server did not become healthy"
        time.sleep(0.5)


DRIFT_DROPIN = "/etc/systemd/system/sglang.service.d/zz-drift-case.conf"


def test_drift_flags_an_instance_whose_running_arguments_differ_from_the_plan(host, inventory: Path, tmp_path: Path,
                                                                               persistenced: int) -> None:
    # As deployed (the case above put the inventory's configuration back): one table line "as planned", and check mode
    # finds nothing a deploy would change.
    runner = play(inventory, tmp_path, "drift.yml")
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}, [e["event_data"]["task"] for e in runner.events
                                           if e.get("event") == "runner_on_ok" and e["event_data"]["res"].get("changed")]
    [header, line] = task_result(runner, "Show every instance of the play against its plan")["msg"]
    print(f"{header}\n{line}")  # the fleet table, in the log with pytest -rA
    assert line.endswith("as planned"), line
    # The table's columns: release, arguments hash, weights checksum (/weights_checker, the one the quality gate
    # recorded) and startup time (the last good start the host recorded for this model, release and host class).
    row = dict(zip(header.replace("args (plan/running)", "args").split()[:7], line.split()[:7], strict=True))
    info = server_info(host)
    assert row["release"] == info["version"] == "0.5.23", row
    assert len(row["args"]) == 12 and "/" not in row["args"], row
    quality = json.loads(host.file("/etc/sglang/last-good/quality.json").content_string)
    [recorded] = [c["checksum"] for c in quality["checksums"] if c["key"]["release"] == info["version"]]
    assert row["checksum"] == recorded[:12], (row, recorded)
    starts = json.loads(host.file("/etc/sglang/last-good/startup.json").content_string)["starts"]
    newest = next(s for s in starts if s["release"] == info["version"])
    assert row["startup"] == f"{float(newest['seconds']):g}s", (row, newest)
    # A drop-in that starts the server with another --mem-fraction-static (the unit file itself is untouched).
    unit = host.file(f"/etc/systemd/system/{SERVICE}").content_string
    lines, logical = unit.splitlines(), []
    start = next(i for i, text in enumerate(lines) if text.startswith("ExecStart="))
    for text in lines[start:]:
        logical.append(text.rstrip("\\").rstrip())
        if not text.endswith("\\"):
            break
    exec_start = " ".join(logical)
    assert "--mem-fraction-static 0.85" in exec_start, exec_start
    host.run(f"mkdir -p {Path(DRIFT_DROPIN).parent}")
    dropin = "[Service]\nExecStart=\n" + exec_start.replace("--mem-fraction-static 0.85", "--mem-fraction-static 0.8") + "\n"
    host.run(f"cat > {DRIFT_DROPIN} <<'EOF'\n{dropin}EOF")
    try:
        assert host.run(f"systemctl daemon-reload && systemctl restart {SERVICE}").rc == 0
        wait_healthy(host)
        assert server_info(host)["mem_fraction_static"] == 0.8
        runner = play(inventory, tmp_path, "drift.yml")
        assert runner.rc != 0
        [failed] = failures(runner)
        assert failed["task"] == "Fail when an instance drifted from its plan"
        assert "arguments differ: mem_fraction_static planned 0.85 running 0.8" in failed["res"]["msg"], failed["res"]["msg"]
        assert runner.stats["changed"] == {}
    finally:
        host.run(f"rm -f {DRIFT_DROPIN} && systemctl daemon-reload && systemctl restart {SERVICE}")
    wait_healthy(host)
    assert server_info(host)["mem_fraction_static"] == 0.85
    assert_clean_and_healthy(host, persistenced)
