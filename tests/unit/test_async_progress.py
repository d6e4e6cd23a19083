"""blackwell.sglang.async_progress: the wait on an async job (``poll: 0``) that prints progress lines.

``wait`` (the action's loop) is driven by a simulated job: a fake monotonic clock and a download whose bytes and
files grow at a given rate until it finishes. A poll advances the clock by the ``wait`` it was given (the host side
waits that long) or to the moment the job finishes; nothing sleeps. The action itself runs once in-process with
``_execute_module`` answered by the same simulated job. The host side (the module's status read and directory
measure) runs on real files; and one playbook on localhost runs a real job through Ansible's async wrapper.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleConnectionFailure
from ansible_collections.blackwell.sglang.plugins.action import async_progress as plugin
from ansible_collections.blackwell.sglang.plugins.action.async_progress import ActionModule, Samples, duration, size, wait
from ansible_collections.blackwell.sglang.plugins.modules import async_progress as host_side

REPO = Path(__file__).resolve().parents[2]
T0 = 5000.0
GIB = 1 << 30
MIB = 1 << 20
JOB = {"started": 1, "finished": 0, "ansible_job_id": "j123", "results_file": "/srv/.ansible_async/j123", "changed": False}
DONE = {"rc": 0, "cmd": ["hf", "download", "org/model"], "stdout": "/opt/sglang/models/org/model", "stderr": "",
        "changed": True, "invocation": {"module_args": {"argv": ["hf", "download", "org/model"]}}}


@dataclass
class Download:
    """A simulated job that fills a directory at ``rate`` bytes/s from ``have`` bytes, finishing at ``done_at``."""

    total: int = 16 * GIB
    files: int = 5
    have: int = 0
    rate: float = 100 * MIB
    done_at: float | None = None
    result: dict[str, Any] = field(default_factory=lambda: dict(DONE))
    now: float = T0
    lost: bool = False  # the status file is gone (another run cleaned it up)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def measured(self) -> dict[str, Any]:
        done = min(self.total, int(self.have + self.rate * (self.now - T0)))
        whole = min(self.files, self.files * done // self.total)
        return {"time": self.now, "watch": [],
                "path": {"path": "/m", "exists": True, "bytes": done, "files": whole}}

    def poll(self, module_args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(dict(module_args))
        before = self.measured() if module_args.get("baseline") else None
        target = self.now + float(module_args.get("wait", 0))
        finished = self.done_at is not None and self.done_at <= target
        self.now = max(self.now, self.done_at) if finished and self.done_at is not None else target
        if self.lost:
            return {"failed": True, "msg": "could not find job", "ansible_job_id": "j123", "started": True, "finished": True}
        job = {**self.result, "finished": True, "ansible_job_id": "j123"} if finished else dict(JOB)
        return {"changed": False, "job": job, "before": before, "after": self.measured()}


def args(**over: Any) -> dict[str, Any]:
    base = {"job": dict(JOB), "timeout": 86400, "poll": 10.0, "label": "org/model@main", "path": "/m",
            "total_bytes": 16 * GIB, "total_files": 5, "count_exclude": [".cache/*"], "watch": []}
    return {**base, **over}


def run(sim: Download, **over: Any) -> tuple[dict[str, Any], list[str]]:
    lines: list[str] = []
    return wait(args(**over), sim.poll, clock=sim.clock, show=lines.append, host="gpu-01"), lines


# --- formatting ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
                                         (100 * MIB, "100.0 MiB"), (int(6.2 * GIB), "6.2 GiB"), (3 << 40, "3.0 TiB"),
                                         (5000 << 40, "5000.0 TiB")])
def test_sizes_in_binary_units(n: int, text: str) -> None:
    assert size(n) == text


@pytest.mark.parametrize(("s", "text"), [(0, "0s"), (-3, "0s"), (44.6, "45s"), (60, "1m00s"), (125, "2m05s"),
                                         (3599, "59m59s"), (3600, "1h00m"), (11220, "3h07m"), (187200, "2d04h")])
def test_durations(s: float, text: str) -> None:
    assert duration(s) == text


def test_rate_is_taken_over_the_last_minute() -> None:
    samples = Samples()
    assert samples.rate() is None
    samples.add(0, 0)
    assert samples.rate() is None
    for t in range(10, 200, 10):
        samples.add(t, 0 if t <= 100 else (t - 100) * MIB)  # stalled for 100 s, then 1 MiB/s
    assert samples.rate() == pytest.approx(MIB)
    assert samples.points[-1][0] - samples.points[0][0] >= 60 > samples.points[-1][0] - samples.points[1][0]


# --- the wait ----------------------------------------------------------------------------------------------------

def test_a_download_prints_bytes_files_rate_and_time_left() -> None:
    job = Download(done_at=T0 + 35)
    result, lines = run(job)
    # No time left from the first poll alone (its interval holds the job's start).
    assert lines[0] == "[gpu-01] org/model@main: 10s elapsed; 1000.0 MiB of 16.0 GiB (6%), 0 of 5 files, 100.0 MiB/s"
    assert lines[1] == ("[gpu-01] org/model@main: 20s elapsed; 2.0 GiB of 16.0 GiB (12%), 0 of 5 files, 100.0 MiB/s, "
                        "about 2m24s left")
    assert lines[2].startswith("[gpu-01] org/model@main: 30s elapsed; 2.9 GiB of 16.0 GiB (18%)")
    assert lines[-1] == "[gpu-01] org/model@main: done in 35s, 3.4 GiB in 1 files (3.4 GiB this run, 100.0 MiB/s)"
    assert len(lines) == 4
    # The job's own result, as async_status returns it: register and failed_when/changed_when see the command's result.
    assert result["rc"] == 0 and result["finished"] is True and result["cmd"] == DONE["cmd"] and not result.get("failed")
    # One round trip per line, each waiting on the host; the first also measures before it waits (the rate's start);
    # the host gets the job's id and status file only, never anything else of the job's result.
    assert [c["wait"] for c in job.calls] == [10.0] * 4
    assert [c["baseline"] for c in job.calls] == [True, False, False, False]
    assert all(c["cleanup"] and c["job"] == {"ansible_job_id": "j123", "results_file": JOB["results_file"]}
               for c in job.calls)


def test_a_resumed_download_counts_what_was_there_in_the_share_not_the_rate() -> None:
    job = Download(have=12 * GIB, rate=50 * MIB, done_at=T0 + 25)
    _, lines = run(job)
    assert lines[1].endswith("13.0 GiB of 16.0 GiB (81%), 4 of 5 files, 50.0 MiB/s, about 1m02s left")
    assert lines[-1].endswith("done in 25s, 13.2 GiB in 4 files (1.2 GiB this run, 50.0 MiB/s)")


def test_without_totals_a_heartbeat_with_the_directory_and_the_watched_growth() -> None:
    job = Download(done_at=T0 + 25, rate=10 * MIB)
    cache = {"n": 0}

    def poll(module_args: dict[str, Any]) -> dict[str, Any]:
        result = job.poll(module_args)
        for key in ("before", "after"):
            if result[key]:
                result[key]["watch"] = [{"path": "/var/cache/uv", "exists": True, "bytes": GIB + cache["n"] * MIB,
                                         "files": 9}]
                cache["n"] += 40
        return result

    lines: list[str] = []
    wait(args(total_bytes=None, total_files=None, label="venv"), poll, clock=job.clock, show=lines.append, host="h")
    assert lines[0] == "[h] venv: 10s elapsed; /m 100.0 MiB in 0 files, 10.0 MiB/s; /var/cache/uv +40.0 MiB (4.0 MiB/s)"
    assert lines[1].endswith("/var/cache/uv +80.0 MiB (4.0 MiB/s)")


def test_a_quick_job_prints_only_its_summary() -> None:
    job = Download(done_at=T0 + 2)
    result, lines = run(job)
    assert lines == ["[gpu-01] org/model@main: done in 2s, 200.0 MiB in 0 files (200.0 MiB this run, 100.0 MiB/s)"]
    assert len(job.calls) == 1 and result["rc"] == 0


def test_a_failed_job_fails_the_wait_with_its_result() -> None:
    failed = {**DONE, "rc": 1, "failed": True, "msg": "non-zero return code", "stderr": "401 Unauthorized"}
    job = Download(done_at=T0 + 12, result=failed)
    result, lines = run(job)
    assert result["failed"] and result["rc"] == 1 and result["msg"] == "non-zero return code"
    assert result["stderr"] == "401 Unauthorized"
    assert lines[-1] == "[gpu-01] org/model@main: failed after 12s"


def test_a_lost_job_fails_like_async_status() -> None:
    job = Download(lost=True)
    result, lines = run(job)
    assert result["failed"] and result["msg"] == "could not find job" and result["ansible_job_id"] == "j123"
    assert lines == []


def test_a_job_that_does_not_finish_in_time_fails() -> None:
    job = Download()
    result, lines = run(job, timeout=95)
    assert result["failed"] and result["finished"] is False
    assert result["msg"] == "async task did not complete within the requested time - 95s"
    assert result["async_result"]["ansible_job_id"] == "j123"
    assert job.now == pytest.approx(T0 + 95) and [c["wait"] for c in job.calls][-1] == pytest.approx(5)
    assert len(lines) == 9


def test_a_skipped_job_check_mode_returns_skipped_quietly() -> None:
    job = Download(done_at=T0 + 1, result={"skipped": True, "changed": False,
                                           "msg": "Command would have run if not in check mode"})
    result, lines = run(job)
    assert result["skipped"] and lines == []


def test_a_start_that_failed_or_was_skipped_is_returned_as_is() -> None:
    job = Download()
    result, _ = run(job, job={"skipped": True, "skip_reason": "Conditional result was False"})
    assert result == {"skipped": True, "skip_reason": "Conditional result was False"} and job.calls == []
    result, _ = run(job, job={"changed": False})
    assert result["failed"] and "No job id was returned" in result["msg"]


def test_a_connection_that_bounces_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Download(done_at=T0 + 25)
    bounced = {"n": 0}

    def poll(module_args: dict[str, Any]) -> dict[str, Any]:
        if len(job.calls) == 1 and bounced["n"] < 2:
            bounced["n"] += 1
            raise AnsibleConnectionFailure("ssh: connection reset")
        return job.poll(module_args)

    monkeypatch.setattr(plugin.display, "vvvv", lambda *_a, **_k: None)
    result = wait(args(), poll, clock=job.clock, show=lambda _: None)
    assert result["rc"] == 0 and bounced["n"] == 2

    def down(module_args: dict[str, Any]) -> dict[str, Any]:
        raise AnsibleConnectionFailure("ssh: no route to host")

    with pytest.raises(AnsibleConnectionFailure):
        wait(args(), down, clock=job.clock, show=lambda _: None)


def test_the_action_runs_the_loop_through_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Download(done_at=T0 + 25)
    task_args = {k: v for k, v in args(poll=10).items() if v is not None}
    task = SimpleNamespace(args=task_args, async_val=0, check_mode=False, action="blackwell.sglang.async_progress")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/nonexistent"))
    action = ActionModule(task, connection, SimpleNamespace(), loader=None, templar=None, shared_loader_obj=None)
    action.clock = job.clock  # type: ignore[method-assign]
    modules: list[str] = []

    def execute(module_name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        modules.append(module_name)
        return job.poll(module_args)

    shown: list[str] = []
    monkeypatch.setattr(action, "_execute_module", execute)
    monkeypatch.setattr(plugin.display, "display", lambda msg, *_a, **_k: shown.append(msg))
    result = action.run(task_vars={"inventory_hostname": "gpu-01"})
    assert result["rc"] == 0 and result["finished"] and not result.get("failed")
    assert set(modules) == {"blackwell.sglang.async_progress"} and len(modules) == 3
    assert len(shown) == 3 and shown[0].startswith("[gpu-01] org/model@main: 10s elapsed; ")


def test_the_documented_options_are_the_actions_and_the_modules() -> None:
    documented = set(yaml.safe_load(host_side.DOCUMENTATION)["options"])
    assert documented - {"wait", "baseline", "cleanup"} == set(ActionModule._VALID_ARGS)


# --- the host side -------------------------------------------------------------------------------------------

def test_the_status_file_is_read_as_async_status_reads_it(tmp_path: Path) -> None:
    status = tmp_path / "j1"
    assert host_side.job_status(str(status)) is None
    status.write_text("")
    assert host_side.job_status(str(status)) == {"started": True, "finished": False}
    status.write_text('{"started": 1, "fini')  # half written
    assert host_side.job_status(str(status))["finished"] is False
    status.write_text(json.dumps({"started": 1, "finished": 0, "ansible_job_id": "j1"}))
    assert host_side.job_status(str(status))["finished"] is False
    status.write_text(json.dumps({"rc": 0, "changed": True}))
    assert host_side.job_status(str(status)) == {"rc": 0, "changed": True, "finished": True}
    status.write_text(json.dumps({"failed": 1, "finished": 1, "started": 1, "msg": "Timeout exceeded"}))
    assert host_side.job_status(str(status))["finished"] is True


def test_a_directory_is_measured_in_bytes_and_counted_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "sub" / "config.json").write_bytes(b"{}")
    (tmp_path / ".gitattributes").write_bytes(b"a")
    partial = tmp_path / ".cache" / "huggingface" / "download"
    partial.mkdir(parents=True)
    (partial / "model-00002.safetensors.incomplete").write_bytes(b"y" * 500)
    (tmp_path / ".sglang-model.json").write_bytes(b"{}")
    (tmp_path / "link").symlink_to(tmp_path / "model-00001.safetensors")
    measured = host_side.measure(str(tmp_path), [".cache/*", ".sglang-*"])
    assert measured == {"path": str(tmp_path), "exists": True, "bytes": 1505, "files": 3}
    assert host_side.measure(str(tmp_path / "nothing"), []) == {"path": str(tmp_path / "nothing"), "exists": False,
                                                                "bytes": 0, "files": 0}


def test_a_real_job_through_ansibles_async_wrapper(tmp_path: Path) -> None:
    """A job on localhost (local connection) that writes 4 files of 1 MiB, one every 1.5 s, waited for with poll 1."""
    out = tmp_path / "out"
    out.mkdir()
    writer = ("import os, sys, time\n"
              "for i in range(4):\n"
              "    open(os.path.join(sys.argv[1], f'f{i}'), 'wb').write(b'x' * 1048576)\n"
              "    time.sleep(1.5)\n"
              "print('wrote 4')\n")
    book = tmp_path / "job.yml"
    book.write_text(yaml.safe_dump([{
        "name": "A job", "hosts": "localhost", "gather_facts": False,
        "vars": {"ansible_async_dir": str(tmp_path / "async"), "ansible_python_interpreter": sys.executable},
        "tasks": [
            {"name": "Start", "ansible.builtin.command": {"argv": [sys.executable, "-c", writer, str(out)]},
             "async": 60, "poll": 0, "register": "job", "changed_when": False},
            {"name": "Wait", "blackwell.sglang.async_progress": {
                "job": "{{ job }}", "timeout": 60, "poll": 1, "label": "writer", "path": str(out),
                "total_bytes": 4 * MIB, "total_files": 4}, "register": "waited"},
            {"name": "Show", "ansible.builtin.debug": {"msg": "{{ waited.stdout }} rc={{ waited.rc }}"}},
            {"name": "Fail", "ansible.builtin.command": {"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
             "async": 60, "poll": 0, "register": "bad", "changed_when": False},
            {"name": "Wait for the failure", "blackwell.sglang.async_progress": {"job": "{{ bad }}", "poll": 1},
             "register": "failed_wait", "failed_when": "failed_wait.rc != 3"},
        ]}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(book)], capture_output=True, text=True, timeout=180, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    lines = re.findall(r"^\[localhost\] writer: \d+s elapsed; (\S+ \S+) of 4\.0 MiB \(\d+%\), (\d) of 4 files", proc.stdout,
                       re.MULTILINE)
    assert lines and lines[0][0] != "4.0 MiB", proc.stdout  # at least one line while the job was writing
    assert "[localhost] writer: done in " in proc.stdout and "4.0 MiB in 4 files" in proc.stdout
    assert "wrote 4 rc=0" in proc.stdout
    assert os.listdir(tmp_path / "async") == []  # both status files removed once read, as poll does
