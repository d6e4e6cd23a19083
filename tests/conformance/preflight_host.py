#!/usr/bin/env python3
"""Run the role's own preflight (roles/sglang_server/files/sglang-preflight.py) on a rendered unit, against the real
SGLang of ``.venv-conformance``, on a pretend GPU host (issue 36: "the preflight against the real SGLang").

Runs INSIDE ``.venv-conformance``. What it pretends is the machine, never the preflight: the preflight script runs
unchanged (``runpy``, as ``python sglang-preflight.py --unit UNIT`` runs it), reads the unit's ``ExecStart=`` with
systemd's rules, runs the launcher's ``--config`` reading and SGLang's ``prepare_server_args`` -> ``resolve_once`` ->
``check_server_args``, and prints its one JSON report. The machine around it is sglang_probe.py's:

* no network, offline hub, the GPU-only packages (sgl_kernel, Triton, FlashInfer ...) stubbed, torch.cuda answering
  for the GPUs (sglang_probe's ``_install_stubs``, ``_patch_torch``) and SGLang's platform facts pinned to the GPU's
  architecture (``runtime_context.override_platform``), as a CUDA build of torch on that GPU would report them;
* an ``nvidia-smi`` on ``PATH`` that answers the preflight's CSV query (index, uuid, bus id, name, compute
  capability, memory) for the GPUs given, which is what the preflight describes them to torch from;
* the unit's ``EnvironmentFile=`` assignments (a job's ``env``, read by the caller with systemd's rules) in the
  process environment, as systemd sets them for the service (the preflight's ``--sandbox`` mode gets them from
  systemd-run; this run is not sandboxed: no systemd here).

Usage: preflight_host.py JOBS.json --workdir DIR [--timeout 300]
SGLang is imported once; each job (a unit, its environment and its GPUs) runs in a child forked from that process,
as sglang_probe.py runs its cases (SGLang keeps global state). Prints a JSON list: per job its id, the preflight's exit
status, stdout and stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PREFLIGHT = REPO / "roles" / "sglang_server" / "files" / "sglang-preflight.py"
sys.path.insert(0, str(HERE))

import sglang_probe as probe  # noqa: E402


def fake_nvidia_smi(bindir: Path, gpus: int, capability: str, memory_mib: int, name: str, integrated: bool) -> None:
    """An nvidia-smi answering ``--query-gpu=index,uuid,pci.bus_id,name,compute_cap,memory.total`` (the preflight's)
    and ``--query-gpu=memory.total`` (SGLang's own, sglang/srt/utils/common.py's get_nvgpu_memory_capacity)."""
    memory = "[N/A]" if integrated else str(memory_mib)
    rows = "\\n".join(f"{i}, GPU-00000000-0000-0000-0000-{i:012d}, 00000000:{0x18 + i:02X}:00.0, {name}, {capability}, {memory}"
                      for i in range(gpus))
    bindir.mkdir(parents=True, exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n# written by tests/conformance/preflight_host.py\n"
                   'case "$*" in\n'
                   f'  *index,uuid,pci.bus_id,name,compute_cap,memory.total*) printf "{rows}\\n" ;;\n'
                   f'  *memory.total*) i=0; while [ "$i" -lt {gpus} ]; do echo "{memory}"; i=$((i+1)); done ;;\n'
                   '  *) echo "nvidia-smi stand-in: unsupported query: $*" >&2; exit 1 ;;\n'
                   "esac\n", encoding="utf-8")
    smi.chmod(0o755)


def run_job(job: dict[str, Any], workdir: Path) -> int:
    """In a forked child: the machine of ``job``, then the preflight on its unit; the preflight's exit status."""
    from sglang.srt.runtime_context import override_platform  # noqa: PLC0415 - after the stubs

    gpus, capability = int(job.get("gpus", 8)), str(job.get("capability", "12.0"))
    memory_mib, name = int(job.get("memory_mib") or probe.GPU_MEM_MIB), str(job.get("name") or probe.GPU_NAME)
    integrated = bool(job.get("integrated"))
    fake_nvidia_smi(workdir / "smi", gpus, capability, memory_mib, name, integrated)
    os.environ["PATH"] = f"{workdir / 'smi'}{os.pathsep}{os.environ['PATH']}"
    major, minor = (int(x) for x in capability.split("."))
    probe._STATE.update(gpu_count=gpus, capability=(major, minor), memory_mib=memory_mib, name=name,
                        integrated=integrated)
    probe.set_process_env(job.get("env") or {})  # as systemd sets it before the preflight imports SGLang
    probe._clear_capability_caches()  # the device helpers answer for this job's GPUs, not the warm-up's
    sys.argv = [str(PREFLIGHT), "--unit", str(job["unit"]), "--skip-toolchain"]
    with override_platform(**probe.platform_facts(major, minor)):
        try:
            runpy.run_path(str(PREFLIGHT), run_name="__main__")
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    return 0


def forked(job: dict[str, Any], workdir: Path, timeout: float) -> dict[str, Any]:
    """``job`` in a child forked from this warmed-up process: {id, rc, stdout, stderr, seconds}."""
    workdir.mkdir(parents=True, exist_ok=True)
    out, err = workdir / "stdout", workdir / "stderr"
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child: its stdout and stderr into files, whatever the preflight or SGLang print
        code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            code = run_job(job, workdir)
        except BaseException:  # noqa: BLE001 - reported through stderr and the exit status
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = started + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.05)
    rc = os.waitstatus_to_exitcode(status)
    return {"id": job["id"], "rc": rc, "stdout": out.read_text(errors="replace"), "stderr": err.read_text(errors="replace"),
            "seconds": round(time.monotonic() - started, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("jobs", type=Path, help="a JSON list of jobs: {id, unit, env, gpus, capability, memory_mib, "
                                                "name, integrated}")
    parser.add_argument("--workdir", type=Path, required=True, help="scratch directory (fake nvidia-smi, output, HF_HOME)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per job")
    options = parser.parse_args(argv)
    jobs = json.loads(options.jobs.read_text(encoding="utf-8"))
    probe._setup_environment(options.workdir)  # offline, no network, the caller's SGLANG_* dropped
    probe._install_stubs()
    probe._patch_torch()
    import sglang.srt.server_args  # noqa: F401, PLC0415 - warm: every child starts with SGLang imported

    # What DFLASH's and DSpark's handlers import that the venv lacks (openai's request models, einops ...), as the
    # probe stands in for them: a real host has SGLang's dependencies installed (requirements of the release).
    probe._install_dspark_stubs()
    for module in ("sglang.srt.arg_groups.pipeline", "sglang.srt.arg_groups.validation_hook",
                   "sglang.srt.configs.model_config"):
        __import__(module)
    results = [forked(job, options.workdir / str(job["id"]), options.timeout) for job in jobs]
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
