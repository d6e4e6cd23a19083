#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Documentation of the blackwell.sglang.async_progress action plugin, and the host side of one of its polls.

The action plugin plugins/action/async_progress.py waits on the controller and prints the progress lines; this
file holds its documentation (which ansible-doc and ansible-test read from modules) and the code it runs on the
host once per poll: wait there until the job finishes or the poll is due, read the job's status file (as
async_status does), and measure the directories the job writes (bytes, files).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: async_progress
version_added: 0.3.0
short_description: Wait for an asynchronous job, printing its progress (bytes, files, rate, time left)
description:
  - Waits for a job started by a task with C(async) and C(poll 0) (its registered result is O(job)), like C(poll)
    does, and prints one progress line every O(poll) seconds on the default callback instead of a bare
    C(ASYNC POLL) line. The line tells the elapsed time, the bytes and files in O(path) so far, with
    O(total_bytes) and O(total_files) the share done, the rate and an estimate of the time left, and the growth
    of each of O(watch) (a download cache) since the wait began.
  - Each poll is one round trip, which waits on the host until the job finishes or the next line is due, so the
    wait ends as soon as the job does. Only sizes, counts and paths are printed; never the job's environment,
    arguments or output.
  - Returns the job's own result, as C(async_status) would once it finished, so C(register), C(changed_when)
    and C(failed_when) work on it as on a task with C(poll); fails with it when the job failed, and after
    O(timeout) seconds when it did not finish. The job's status file is removed once read, as C(poll) does.
  - In check mode a job started in check mode is waited for the same way (its module reports what it would do).
options:
  job:
    description: The registered result of the task that started the job (C(async) with C(poll 0)).
    type: dict
    required: true
  timeout:
    description: Seconds to wait in total (the job's own C(async) limit stops it on the host).
    type: int
    default: 3600
  poll:
    description: Seconds between progress lines (each is one round trip to the host).
    type: float
    default: 10
  label:
    description: What the job does, the first words of each line (empty, the job id).
    type: str
    default: ""
  path:
    description: The directory the job fills (a download's target, a virtualenv), measured at each poll.
    type: path
  total_bytes:
    description: The bytes O(path) holds once the job is done; with it the share done, rate and time left.
    type: int
  total_files:
    description: The files O(path) holds once the job is done (as counted, without O(count_exclude)).
    type: int
  count_exclude:
    description: >-
      Glob patterns, relative to O(path), of files that count towards the bytes but not the files (the partial
      files of a download in flight, markers).
    type: list
    elements: str
    default: []
  watch:
    description: More directories whose growth since the wait began is printed (a download cache).
    type: list
    elements: path
    default: []
  wait:
    description: Internal (the action sets it); seconds the host side waits for the job before measuring.
    type: float
    default: 0
  baseline:
    description: Internal (the action sets it); also measure before waiting.
    type: bool
    default: false
  cleanup:
    description: Internal (the action sets it); remove the job's status file once it has finished.
    type: bool
    default: false
notes:
  - An action plugin; it runs this module on the host once per poll, with the task's C(become) (the user the job
    ran as, who owns its status file).
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Waits for the job as in a normal run (a job started in check mode changes nothing itself).
  diff_mode:
    support: N/A
    details: The module changes nothing but the job's status file.
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Start the download
  ansible.builtin.command:
    argv: [/opt/sglang/tools/bin/hf, download, Qwen/Qwen3-8B, --local-dir, /opt/sglang/models/Qwen/Qwen3-8B]
  async: 86400
  poll: 0
  register: download
  changed_when: false

- name: Wait for the download, printing its progress
  blackwell.sglang.async_progress:
    job: "{{ download }}"
    timeout: 86400
    label: Qwen/Qwen3-8B
    path: /opt/sglang/models/Qwen/Qwen3-8B
    total_bytes: 16384000000
    total_files: 15
    count_exclude: [".cache/*"]
  register: downloaded
"""

RETURN = r"""
finished:
  description: Whether the job finished (false only with a failure, after O(timeout)).
  type: bool
  returned: always
ansible_job_id:
  description: The job's id.
  type: str
  returned: always
async_result:
  description: The job's last status when it did not finish within O(timeout).
  type: dict
  returned: on timeout
"""

import fnmatch
import json
import os
import stat
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def job_status(results_file: str) -> dict[str, Any] | None:
    """The job's status as async_status reads it: None when the file is gone, else its data with ``finished``."""
    if not os.path.exists(results_file):
        return None
    try:
        with open(results_file, encoding="utf-8") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):  # not written yet, or half written: running
        return {"started": True, "finished": False}
    if "started" not in data:  # the module's own result replaced the wrapper's note
        data["finished"] = True
    elif "finished" not in data:
        data["finished"] = False
    data["finished"] = bool(data["finished"])
    return data


def measure(path: str, count_exclude: list[str]) -> dict[str, Any]:
    """Bytes of the regular files under ``path`` (symbolic links not followed) and how many are not excluded."""
    total = files = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            try:
                info = os.lstat(full)
            except OSError:  # moved into place or removed meanwhile
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            total += info.st_size
            relative = os.path.relpath(full, path)
            if not any(fnmatch.fnmatchcase(relative, pattern) for pattern in count_exclude):
                files += 1
    return {"path": path, "exists": os.path.isdir(path), "bytes": total, "files": files}


def measure_all(params: dict[str, Any]) -> dict[str, Any]:
    return {"time": time.time(),
            "path": measure(params["path"], params["count_exclude"]) if params["path"] else None,
            "watch": [measure(p, []) for p in params["watch"]]}


# The task's options: the action (plugins/action/async_progress.py) checks them on the controller with this spec,
# the host's paths left as text (expanded here, where a "~" is the host user's).
OPTIONS: dict[str, dict[str, Any]] = {
    "job": {"type": "dict", "required": True},
    "timeout": {"type": "int", "default": 3600},
    "poll": {"type": "float", "default": 10},
    "label": {"type": "str", "default": ""},
    "path": {"type": "path"},
    "total_bytes": {"type": "int"},
    "total_files": {"type": "int"},
    "count_exclude": {"type": "list", "elements": "str", "default": []},
    "watch": {"type": "list", "elements": "path", "default": []},
}
# What the action adds to each poll.
POLL_OPTIONS: dict[str, dict[str, Any]] = {
    "wait": {"type": "float", "default": 0},
    "baseline": {"type": "bool", "default": False},
    "cleanup": {"type": "bool", "default": False},
}


def main() -> None:
    module = AnsibleModule(argument_spec={**OPTIONS, **POLL_OPTIONS}, supports_check_mode=True)
    params = module.params
    results_file = str(params["job"].get("results_file") or "")
    jid = str(params["job"].get("ansible_job_id") or "")
    if not results_file or not jid:
        module.fail_json(msg="the job has no results_file and ansible_job_id: pass the registered result of a task "
                             "started with async and poll 0")
    before = measure_all(params) if params["baseline"] else None
    deadline = time.monotonic() + params["wait"]
    while True:
        status = job_status(results_file)
        if status is None:
            module.fail_json(msg="could not find job", ansible_job_id=jid, started=True, finished=True,
                             results_file=results_file)
        remaining = deadline - time.monotonic()
        if status["finished"] or remaining <= 0:
            break
        time.sleep(min(1.0, remaining))
    after = measure_all(params)
    if status["finished"]:
        status["ansible_job_id"] = jid
        if params["cleanup"]:
            os.unlink(results_file)
    module.exit_json(changed=False, job=status, before=before, after=after)


if __name__ == "__main__":
    main()
