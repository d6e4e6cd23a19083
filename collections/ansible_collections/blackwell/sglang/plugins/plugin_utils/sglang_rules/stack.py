# SPDX-License-Identifier: Apache-2.0
"""The software stack under SGLang and how SGLang is stopped: the NVIDIA driver a host runs against the CUDA stack
its SGLang release pins; the environment switch that skips SGLang's drain on SIGTERM.

Data, each entry with its source:

* :data:`RELEASE_CUDA`: the CUDA major version of each release's pinned stack, from the wheel's own requirements
  (``Requires-Dist`` of its METADATA) and the release's hashed lock (``roles/sglang/files/locks``);
  ``tests/unit/test_sglang_stack.py`` derives the same from every committed lock and from the SGLang wheel of
  ``.venv-conformance``, so the table cannot drift from them. A release without an entry is not checked.
* :data:`DRIVER_FLOOR`: NVIDIA's minimum Linux driver of each CUDA major's runtime.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import FORCE_SHUTDOWN_ENV

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


class Stack(NamedTuple):
    """The CUDA stack an SGLang release pins, and where that is read."""

    cuda_major: int
    source: str


# The CUDA major of each SGLang release's stack. 0.5.23: its wheel requires torch==2.14.1,
# flashinfer_python[cu13]==0.7.2, nvidia-cutlass-dsl[cu13]==4.8.0 and cuda-python>=13.0 (sglang-0.5.23.dist-info/METADATA);
# the lock resolves torch's CUDA runtime to nvidia-cuda-runtime==13.0.96 on Linux
# (roles/sglang/files/locks/sglang-0.5.23-torch-2.14.1.txt). The releases before 0.5.23 have no lock and no wheel
# in the project to read theirs from: not checked (no entry), never guessed.
RELEASE_CUDA: dict[str, Stack] = {
    "0.5.23": Stack(13, "sglang-0.5.23 METADATA: torch==2.14.1, flashinfer_python[cu13]==0.7.2, cuda-python>=13.0; "
                        "lock sglang-0.5.23-torch-2.14.1.txt: nvidia-cuda-runtime==13.0.96"),
}

# NVIDIA's minimum Linux driver for a CUDA major's runtime (minor-version compatibility: any 13.x runtime runs on the
# driver of 13.0 GA). CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions" (Table 3):
# CUDA 12.0 GA >= 525.60.13, CUDA 13.0 GA >= 580.65.06.
DRIVER_FLOOR: dict[int, str] = {12: "525.60.13", 13: "580.65.06"}
DRIVER_SOURCE = "NVIDIA CUDA Toolkit release notes, Table 3 (CUDA Toolkit and Corresponding Driver Versions)"

_DRIVER = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){0,2}")


def driver_tuple(text: str) -> tuple[int, ...] | None:
    """``580.95.05`` -> (580, 95, 5): NVIDIA's driver versions compare field by field as numbers; None for text
    that is not a driver version (the input contract names it)."""
    text = str(text).strip()
    if not _DRIVER.fullmatch(text):
        return None
    return tuple(int(part) for part in text.split("."))


def driver_floor(version: str) -> tuple[str, Stack] | None:
    """The minimum driver of SGLang ``version``'s CUDA stack and the stack, or None when the release has no entry."""
    stack = RELEASE_CUDA.get(str(version))
    if stack is None or stack.cuda_major not in DRIVER_FLOOR:
        return None
    return DRIVER_FLOOR[stack.cuda_major], stack


def below_floor(driver: str, floor: str) -> bool:
    """True when ``driver`` is a driver version older than ``floor``; text that is no version is not judged."""
    have, need = driver_tuple(driver), driver_tuple(floor)
    if have is None or need is None:
        return False
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) < need + (0,) * (width - len(need))


@rule("stack.driver", stricter=(
    "SGLang does not check the driver: torch's CUDA runtime fails at the server's first CUDA call "
    "(cudaErrorInsufficientDriver, 'The NVIDIA driver on your system is too old'), after the install and the download"))
def _driver_floor(ctx: Context, report: Report) -> None:
    """The driver the host will run (nvidia_driver_version, roles/nvidia_driver installs exactly it) must be at least
    the minimum driver of the CUDA major the release's stack pins."""
    if ctx.driver_version is None:
        return
    found = driver_floor(ctx.schema.version)
    if found is None:
        return
    floor, stack = found
    if not below_floor(ctx.driver_version, floor):
        return
    report.error("nvidia_driver_version",
                 f"nvidia_driver_version {ctx.driver_version}: SGLang {ctx.schema.version} pins a CUDA {stack.cuda_major} "
                 f"stack ({stack.source}), whose runtime needs NVIDIA driver {floor} or newer. torch would fail at the "
                 "server's first CUDA call, after the install.",
                 f"set nvidia_driver_version to {floor} or a newer release (with nvidia_driver_branch to match, e.g. the "
                 "role's default), or pin an SGLang release whose CUDA stack this driver runs",
                 f"{DRIVER_SOURCE}; {stack.source}", value=ctx.driver_version)


# How SGLang 0.5.23 stops on SIGTERM (sglang/srt/managers/tokenizer_manager.py): sigterm_watchdog (:3508-3540) waits
# for every request in flight, polling every 5 s with no deadline, unless the health check failed or the switch
# SGL_FORCE_SHUTDOWN is on (:3526, get_bool_env_var: "true" or "1", any case; utils/common.py:1424-1441); then it
# asks the schedulers to release the GPUs and gives them 15 s (_SCHEDULER_EXIT_TIMEOUT_SECS, :456). The name
# SGLANG_FORCE_SHUTDOWN is declared (environ.py:400) but read by nothing: only SGL_FORCE_SHUTDOWN skips the wait
# (environ.py:2298-2305 copies SGL_* to SGLANG_*, never the other way).
FORCE_SHUTDOWN = FORCE_SHUTDOWN_ENV
FORCE_SHUTDOWN_UNREAD = "SGLANG_FORCE_SHUTDOWN"
_TM = "sglang/srt/managers/tokenizer_manager.py"


@rule("stop.force_shutdown", file=_TM, sources=(
    "sglang/srt/managers/tokenizer_manager.py:3526 (0.5.22 :3523; 0.5.21 :3319; 0.5.20 :3299)",
    "sglang/srt/environ.py:400 (0.5.22 :391; 0.5.20-0.5.21 :399)",
    "sglang/srt/utils/common.py:1424-1441",
))
def _force_shutdown(ctx: Context, report: Report) -> None:
    """The switch that skips SGLang's wait for in-flight requests on SIGTERM: set by the name SGLang does not read,
    or to a value get_bool_env_var reads as off."""
    if FORCE_SHUTDOWN_UNREAD in ctx.env and FORCE_SHUTDOWN not in ctx.env:
        report.warn(f"sglang_env.{FORCE_SHUTDOWN_UNREAD}",
                    f"{FORCE_SHUTDOWN_UNREAD} is declared by SGLang {ctx.schema.version} (sglang/srt/environ.py) but nothing reads "
                    f"it: on SIGTERM the server still waits for every request in flight, with no deadline, until systemd "
                    f"SIGKILLs the unit at sglang_server_drain_timeout. The drain reads only {FORCE_SHUTDOWN}.",
                    f"rename it to sglang_env.{FORCE_SHUTDOWN}: \"1\"", report.source(3526),
                    value=ctx.env[FORCE_SHUTDOWN_UNREAD])
    raw = ctx.env.get(FORCE_SHUTDOWN)
    if raw is not None and raw.lower() not in ("true", "1", "false", "0"):
        report.warn(f"sglang_env.{FORCE_SHUTDOWN}",
                    f"{FORCE_SHUTDOWN}={raw!r}: SGLang reads it with get_bool_env_var, which takes only true/1 and false/0 "
                    "and reads anything else as off (with a warning in the log), so SIGTERM still waits for the requests "
                    "in flight.", f"set sglang_env.{FORCE_SHUTDOWN}: \"1\" (or remove it to keep the drain)",
                    "sglang/srt/utils/common.py:1424-1441", value=raw)
