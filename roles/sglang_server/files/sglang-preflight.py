#!/usr/bin/env python3
"""Preflight of an SGLang launch: let the installed SGLang resolve and check an argv, start nothing.

Usage: python sglang-preflight.py -- ARGV...   (the exact launch_server arguments)

Runs what `python -m sglang.launch_server` runs before it spawns any process:
prepare_server_args(argv) -> resolve_once() -> check_server_args(). The GPUs are described to
torch from `nvidia-smi` (count, name, compute capability, total memory, all of it free, as it
will be once the running server is stopped), so no CUDA context is created and the running
server's GPU memory is left alone. Prints one JSON line: {"ok", "error", "where", "resolved"}.
Exit 0 when SGLang accepts, 1 when it rejects, 2 on argparse errors (like launch_server).
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from types import SimpleNamespace
from typing import Any

REPORTED = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "attention_backend",
    "moe_runner_backend",
    "mem_fraction_static",
    "tp_size",
)


def gpus() -> list[dict[str, Any]]:
    """The host's GPUs as nvidia-smi reports them; [] without nvidia-smi."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        name, cap, mem = (part.strip() for part in line.split(","))
        major, minor = (int(x) for x in cap.split("."))
        found.append({"name": name, "capability": (major, minor), "total": int(float(mem)) * 1024 * 1024})
    return found


def describe_gpus_to_torch(devices: list[dict[str, Any]]) -> None:
    """Answer torch.cuda's queries from nvidia-smi instead of initialising CUDA."""
    try:
        import torch  # noqa: PLC0415 - SGLang imports it anyway; absent from a torch-less install
    except ImportError:
        return
    if not devices:
        return
    cuda = torch.cuda

    def dev(index: Any = None) -> dict[str, Any]:
        i = index if isinstance(index, int) else getattr(index, "index", None) or 0
        return devices[min(int(i), len(devices) - 1)]

    cuda.is_available = lambda: True
    cuda.device_count = lambda: len(devices)
    cuda.current_device = lambda: 0
    cuda.set_device = lambda *_a, **_k: None
    cuda.get_device_capability = lambda index=None: dev(index)["capability"]
    cuda.get_device_name = lambda index=None: dev(index)["name"]
    cuda.mem_get_info = lambda index=None: (dev(index)["total"], dev(index)["total"])
    cuda.get_device_properties = lambda index=None: SimpleNamespace(
        name=dev(index)["name"], major=dev(index)["capability"][0], minor=dev(index)["capability"][1],
        total_memory=dev(index)["total"], multi_processor_count=188, is_integrated=False,
    )


def where(exc: BaseException) -> str:
    """file:line of the innermost frame inside sglang."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "sglang" in f.filename]
    if not frames:
        return ""
    frame = frames[-1]
    path = frame.filename[frame.filename.rfind("sglang/"):]
    return f"{path}:{frame.lineno}"


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    describe_gpus_to_torch(gpus())
    from sglang.srt.server_args import prepare_server_args  # noqa: PLC0415

    report: dict[str, Any] = {"ok": False, "error": "", "where": "", "resolved": {}}
    try:
        server_args = prepare_server_args(argv)
        server_args.resolve_once()
        server_args.check_server_args()
    except SystemExit as exc:  # argparse already printed its message
        report["error"] = f"argparse exited with {exc.code}"
        print(json.dumps(report), flush=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - SGLang raises anything from AssertionError to TypeError
        report["error"] = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} (empty message)"
        report["where"] = where(exc)
        traceback.print_exc()
        print(json.dumps(report), flush=True)
        return 1
    report["ok"] = True
    report["resolved"] = {k: getattr(server_args, k, None) for k in REPORTED}
    print(json.dumps(report, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
