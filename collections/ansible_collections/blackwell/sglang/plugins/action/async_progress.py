# SPDX-License-Identifier: Apache-2.0
"""Action plugin: wait for an asynchronous job (``async``, ``poll: 0``), printing its progress while it runs.

Documented by ``plugins/modules/async_progress.py``, which also holds the host side of each poll (it waits on the
host until the job finishes or the next line is due, reads the job's status file and measures its directories).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.blackwell.sglang.plugins.modules.async_progress import OPTIONS

display = Display()
# The module's options with the host's paths as text: the module expands them on the host (a "~" is the host user's).
CONTROLLER_OPTIONS: dict[str, dict[str, Any]] = {
    name: {**spec, "type": "str"} if spec["type"] == "path" else {**spec, "elements": "str"} if spec.get("elements") == "path"
    else spec for name, spec in OPTIONS.items()}

# One poll on the host: the module's arguments in, its result out.
Poll = Callable[[dict[str, Any]], dict[str, Any]]
# Seconds of history the rate is taken over (a moving window: it follows a download that speeds up or stalls).
RATE_WINDOW = 60.0
# Polls that may fail one after the other (a connection bounce) before the wait gives up.
RETRIES = 3
_SLACK = 0.001


def size(n: float) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``12.3 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    """Seconds as ``45s``, ``2m05s``, ``3h07m``, ``2d04h``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


@dataclass
class Samples:
    """(time, bytes) of one directory at each poll: its growth and the rate over the last RATE_WINDOW seconds."""

    points: list[tuple[float, int]] = field(default_factory=list)

    def add(self, when: float, nbytes: int) -> None:
        self.points.append((when, nbytes))
        # Keep one point older than the window, the start of the rate.
        while len(self.points) > 2 and self.points[-1][0] - self.points[1][0] >= RATE_WINDOW:
            self.points.pop(0)

    def rate(self) -> float | None:
        if len(self.points) < 2:
            return None
        (t0, b0), (t1, b1) = self.points[0], self.points[-1]
        return max(0.0, (b1 - b0) / (t1 - t0)) if t1 > t0 else None


@dataclass
class Watch:
    """What the progress lines say of one job: the samples of its directory and of the watched ones."""

    args: dict[str, Any]
    path: Samples = field(default_factory=Samples)
    watched: dict[str, Samples] = field(default_factory=dict)
    first: dict[str, int] = field(default_factory=dict)  # each watched directory's bytes when the wait began
    start_bytes: int | None = None
    last: dict[str, Any] | None = None  # the latest measurement of path

    def observe(self, measured: dict[str, Any] | None) -> None:
        if not measured:
            return
        when = float(measured["time"])
        if measured.get("path"):
            self.last = measured["path"]
            self.path.add(when, int(self.last["bytes"]))
            if self.start_bytes is None:
                self.start_bytes = int(self.last["bytes"])
        for item in measured.get("watch") or []:
            self.first.setdefault(item["path"], int(item["bytes"]))
            self.watched.setdefault(item["path"], Samples()).add(when, int(item["bytes"]))

    def line(self, label: str, elapsed: float) -> str:
        """One progress line: the bytes and files so far (of the totals), rate, time left; the watched growth."""
        parts = [f"{label}: {duration(elapsed)} elapsed"]
        total_bytes, total_files = self.args.get("total_bytes"), self.args.get("total_files")
        if self.last is not None:
            done = int(self.last["bytes"])
            if total_bytes:
                share = min(100.0, 100.0 * done / total_bytes)
                what = f"{size(min(done, total_bytes))} of {size(total_bytes)} ({share:.0f}%)"
            else:
                what = size(done)
            if total_files:
                what += f", {min(int(self.last['files']), total_files)} of {total_files} files"
            else:
                what += f" in {int(self.last['files'])} files"
            rate = self.path.rate()
            if rate is not None:
                what += f", {size(rate)}/s"
                # Not from the first poll alone: its interval holds the job's start (a download's metadata requests).
                if total_bytes and done < total_bytes and rate > 0 and len(self.path.points) > 2:
                    what += f", about {duration((total_bytes - done) / rate)} left"
            parts.append(what if total_bytes else f"{self.last['path']} {what}")
        for path, samples in self.watched.items():
            grown = samples.points[-1][1] - self.first[path]
            rate = samples.rate()
            parts.append(f"{path} +{size(grown)}" + (f" ({size(rate)}/s)" if rate is not None else ""))
        return "; ".join(parts)

    def summary(self, label: str, elapsed: float, failed: bool) -> str:
        """The line once the job ended: how long, and what its directory holds."""
        if failed:
            return f"{label}: failed after {duration(elapsed)}"
        text = f"{label}: done in {duration(elapsed)}"
        if self.last is not None:
            done = int(self.last["bytes"])
            moved = done - (self.start_bytes or 0)
            text += f", {size(done)} in {int(self.last['files'])} files"
            if moved > 0 and elapsed > 0:
                text += f" ({size(moved)} this run, {size(moved / elapsed)}/s)"
        return text


def wait(args: dict[str, Any], poll: Poll, clock: Callable[[], float] = time.monotonic,
         show: Callable[[str], None] = display.display, host: str = "?") -> dict[str, Any]:
    """Poll the job until it finishes, fails to be found, or ``timeout``; the job's result, or a failure.

    ``poll`` runs the module (the host side) with the given arguments, ``clock`` is monotonic seconds: the loop
    takes no time of its own, so tests drive it with a simulated job and a fake clock.
    """
    job = args["job"]
    jid = job.get("ansible_job_id")
    if job.get("skipped") or job.get("failed"):  # the start itself did not run or failed: nothing to wait for
        return dict(job)
    if not jid or not job.get("results_file"):
        return {"failed": True, "msg": "No job id was returned by the async task: pass the registered result of a "
                                       "task started with async and poll 0"}
    label = args.get("label") or f"job {jid}"
    watch = Watch(args)
    host_args = {"job": {"ansible_job_id": jid, "results_file": job["results_file"]},
                 "path": args.get("path"), "count_exclude": list(args.get("count_exclude") or []),
                 "watch": list(args.get("watch") or [])}
    start = clock()
    status: dict[str, Any] = {}
    first = True
    errors = 0
    while True:
        remaining = args["timeout"] - (clock() - start)
        try:
            result = poll({**host_args, "wait": max(0.0, min(float(args["poll"]), remaining)), "baseline": first,
                           "cleanup": True})
        except AnsibleError as error:  # a connection that bounced: the job goes on, so does the wait
            errors += 1
            display.vvvv(f"async_progress: poll of {jid} failed ({errors} in a row): {error}")
            if errors >= RETRIES or clock() - start >= args["timeout"] - _SLACK:
                raise
            continue
        errors = 0
        elapsed = clock() - start
        if result.get("failed"):
            return {**{k: v for k, v in result.items() if k not in ("before", "after", "job")}, "failed": True,
                    "ansible_job_id": jid, "finished": result.get("finished", True)}
        first = False
        watch.observe(result.get("before"))
        watch.observe(result.get("after"))
        status = dict(result.get("job") or {})
        if status.get("finished"):
            if not status.get("skipped"):
                show(f"[{host}] {watch.summary(label, elapsed, bool(status.get('failed')))}")
            return status
        if elapsed >= args["timeout"] - _SLACK:
            return {"failed": True, "finished": False, "ansible_job_id": jid, "async_result": status,
                    "msg": f"async task did not complete within the requested time - {args['timeout']}s"}
        show(f"[{host}] {watch.line(label, elapsed)}")


class ActionModule(ActionBase):
    """Wait for an asynchronous job, one progress line per poll."""

    TRANSFERS_FILES = False
    # Monotonic seconds of the wait (tests put a fake clock here).
    clock: Callable[[], float] = staticmethod(time.monotonic)
    _VALID_ARGS = frozenset(OPTIONS)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=CONTROLLER_OPTIONS)

        def poll(module_args: dict[str, Any]) -> dict[str, Any]:
            return self._execute_module(module_name="blackwell.sglang.async_progress", module_args=module_args,
                                        task_vars=task_vars)

        result.update(wait(args, poll, clock=self.clock, show=display.display, host=task_vars.get("inventory_hostname", "?")))
        return result
