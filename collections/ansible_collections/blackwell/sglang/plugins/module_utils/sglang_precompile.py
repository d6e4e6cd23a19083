# SPDX-License-Identifier: Apache-2.0
"""Kernel pre-compile before the drain, and the stuck-compile decision (issue 35 item 1).

Pure functions, no Ansible: the kernel_precompile module (on the host) and the server_restart action (on the
controller) import them; tests/unit/test_kernel_precompile.py checks them.

**Pre-compile.** SGLang 0.5.23 ships ``python -m sglang.compile_deep_gemm`` (sglang/compile_deep_gemm.py): it parses the
server's own arguments (``ServerArgs.add_cli_args`` plus ``--timeout``, :233-236; ``--config`` is parsed but not merged,
unlike ``prepare_server_args``, sglang/srt/server_args.py:683), starts a server of the model on ``--host``/``--port``
with CUDA graphs and torch.compile off (:183-204), waits for ``/v1/models`` (:128), sends one ``/generate`` so that
every DeepGEMM kernel of the model compiles into the DeepGEMM cache (``SGLANG_DG_CACHE_DIR``), then kills the server
(:207-229). :func:`compile_argv` builds that command from the instance's public argv, on a free loopback port (the
running server keeps its own) and without TLS (the script polls plain http, :123).

It is useful only where DeepGEMM runs (:func:`deepgemm_applies`): FP8 weights (``--quantization`` fp8 variants, or a
``config.json`` whose ``quantization_config.quant_method`` is an fp8 one) on SM90 or SM100-class GPUs. SGLang turns
DeepGEMM off below SM90 (sglang/srt/layers/deep_gemm_wrapper/configurer.py:39) and on SM120/SM121 unless the installed
DeepGEMM has the SM120 kernels (configurer.py:44), which nothing on the host can tell without importing it on the GPU.

**Stuck compile.** :func:`stuck_in_compile` reads a start's journal after its ready wait ran out of budget and decides
whether it hung in the kernel compile (the last phase line of the start is a compile line: SGLang's DeepGEMM pre-compile
messages, sglang/srt/layers/deep_gemm_wrapper/compile_utils.py:170 and :179, its warmup :589; nothing after it that
marks a later phase); then it names the directories to clear (the instance's kernel directory of that key, never
anything outside it) and whether to retry (once).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COMPILE_MODULE = "sglang.compile_deep_gemm"
# The "built" marker in the instance's kernel directory (cleared with it).
MARKER = ".blackwell-precompiled.json"
SCHEMA = 1

# Flags the compile command must not take from the instance: its endpoint (the compile server listens on a loopback
# port of its own while the instance serves) and TLS (compile_deep_gemm.py:123 polls plain http).
_DROPPED_FLAGS = {"--host": 1, "--port": 1, "--ssl-certfile": 1, "--ssl-keyfile": 1, "--ssl-ca-certs": 1,
                  "--ssl-keyfile-password": 1, "--config": 1, "--api-key": 1, "--admin-api-key": 1}
# Flags that change no kernel: a change of these alone does not ask for a new pre-compile.
_NO_KERNEL_FLAGS = {"--host", "--port", "--served-model-name", "--enable-metrics", "--log-level", "--log-requests",
                    "--log-requests-level", "--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certs", "--api-key",
                    "--config", "--watchdog-timeout", "--enable-cache-report", "--show-time-cost"}
# FP8 quantization methods (sglang/srt/arg_groups/fields/model.py:177 choices that carry FP8 weights).
FP8_METHODS = ("fp8", "w8a8_fp8", "modelopt_fp8", "fbgemm_fp8", "mxfp8")

# SGLang 0.5.23's lines of the compile phase (sglang/srt/layers/deep_gemm_wrapper/compile_utils.py:170, :179, :589)
# and of phases after it (compile_utils.py:618, the ready line of sglang/srt/entrypoints/http_server.py:2600).
COMPILE_LINES = ("Entering DeepGEMM JIT Pre-Compile session", "Try DeepGEMM JIT Compiling for",
                 "PP-parallel DeepGEMM warmup start")
AFTER_COMPILE_LINES = ("PP-parallel DeepGEMM warmup done", "The server is fired up and ready to roll!")
# A start is retried once after its cache was cleared.
MAX_RETRIES = 1

_ARCH = re.compile(r"^sm(\d+)$")


def split_flag(word: str) -> str:
    """``--port`` of ``--port=30000``; the word itself otherwise."""
    return word.split("=", 1)[0] if word.startswith("--") else word


def _without(argv: Sequence[str], flags: Mapping[str, int]) -> list[str]:
    out: list[str] = []
    skip = 0
    for word in argv:
        if skip:
            skip -= 1
            continue
        flag = split_flag(str(word))
        if flag in flags:
            skip = 0 if "=" in str(word) else flags[flag]
            continue
        out.append(str(word))
    return out


def compile_argv(python: str, argv: Sequence[str], port: int, timeout: int) -> list[str]:
    """``python -m sglang.compile_deep_gemm`` with the instance's public ``argv`` (its endpoint and TLS flags left
    out), on ``127.0.0.1:port``, waiting at most ``timeout`` seconds (compile_deep_gemm.py:52)."""
    return [str(python), "-m", COMPILE_MODULE, *_without(argv, _DROPPED_FLAGS), "--host", "127.0.0.1",
            "--port", str(int(port)), "--timeout", str(int(timeout))]


def kernel_inputs(key: str, argv: Sequence[str]) -> dict[str, Any]:
    """What the built kernels depend on: the cache key (release, torch/CUDA, GPU architecture) and the instance's
    arguments, less those that change no kernel (endpoint, TLS, logging, names)."""
    flags = {f: 1 for f in _NO_KERNEL_FLAGS}
    flags.update({f: 0 for f in ("--enable-metrics", "--log-requests", "--enable-cache-report", "--show-time-cost")})
    return {"key": str(key), "argv": _without(argv, flags)}


def inputs_digest(inputs: Mapping[str, Any]) -> str:
    """A stable digest of :func:`kernel_inputs`."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def arch_of_key(key: str) -> list[int]:
    """The compute capabilities (as ``100`` for 10.0) of a kernel cache key's architecture part
    (sglang_kernel_cache.kernel_cache_key: ``..._sm100`` or ``..._sm100+sm120``); empty when unknown."""
    tag = str(key).rsplit("_", 1)[-1]
    out = []
    for part in tag.split("+"):
        match = _ARCH.match(part)
        if match:
            out.append(int(match.group(1)))
    return out


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    value = None
    for i, word in enumerate(argv):
        word = str(word)
        if word == flag and i + 1 < len(argv):
            value = str(argv[i + 1])
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


def fp8_weights(argv: Sequence[str], model_config: Mapping[str, Any] | None) -> str | None:
    """Why the model's weights are FP8 (``--quantization fp8``, or config.json's ``quant_method``), or None."""
    method = _flag_value(argv, "--quantization")
    if method:
        return f"--quantization {method}" if method in FP8_METHODS else None
    quant = (model_config or {}).get("quantization_config") if isinstance(model_config, Mapping) else None
    declared = str(quant.get("quant_method") or "") if isinstance(quant, Mapping) else ""
    if declared in FP8_METHODS:
        return f"config.json quantization_config.quant_method {declared}"
    return None


def deepgemm_applies(argv: Sequence[str], model_config: Mapping[str, Any] | None, key: str) -> tuple[bool, str]:
    """Whether SGLang runs DeepGEMM for this instance (so a pre-compile pays off), and why."""
    archs = arch_of_key(key)
    if not archs:
        return False, f"the GPU architecture of kernel cache key {key} is unknown"
    fp8 = fp8_weights(argv, model_config)
    if fp8 is None:
        return False, "the model's weights are not FP8 (DeepGEMM's GEMMs are FP8): nothing to pre-compile"
    low = [a for a in archs if a < 90]
    if low:
        return False, (f"sm{low[0]}: SGLang turns DeepGEMM off below SM90 "
                       "(sglang/srt/layers/deep_gemm_wrapper/configurer.py:39)")
    consumer = [a for a in archs if a in (120, 121)]
    if consumer:
        return False, (f"sm{consumer[0]}: SGLang runs DeepGEMM there only with a DeepGEMM build that has the SM120 "
                       "kernels (configurer.py:44); set the pre-compile to always to build anyway")
    return True, f"FP8 weights ({fp8}) on sm{'+sm'.join(str(a) for a in archs)}: SGLang runs DeepGEMM"


def marker_matches(marker: Any, inputs: Mapping[str, Any]) -> bool:
    """A marker document records a build of exactly these inputs."""
    return (isinstance(marker, Mapping) and marker.get("schema") == SCHEMA
            and marker.get("digest") == inputs_digest(inputs))


def marker_document(inputs: Mapping[str, Any], seconds: float, at: str) -> dict[str, Any]:
    """The marker written after a successful build."""
    return {"schema": SCHEMA, "digest": inputs_digest(inputs), "key": inputs.get("key"), "seconds": round(seconds, 1),
            "at": at, "by": COMPILE_MODULE}


def _safe_dir(kernel_cache: Mapping[str, Any]) -> str | None:
    """The instance's kernel directory of the plan's ``kernel_cache`` when it really is ``<root>/<key>/<instance>``."""
    root, key, directory = (str(kernel_cache.get(k) or "") for k in ("root", "key", "dir"))
    if not (root.startswith("/") and key and directory):
        return None
    norm = os.path.normpath(directory)
    parent = os.path.normpath(f"{root}/{key}")
    if norm != directory.rstrip("/") or os.path.dirname(norm) != parent or ".." in norm.split("/"):
        return None
    return norm


def stuck_in_compile(lines: Iterable[str], *, ready: bool, waited: float, budget: float, attempt: int,
                     kernel_cache: Mapping[str, Any]) -> dict[str, Any]:
    """Decide whether a start hung in the kernel compile and what to clear (the contract the restart relies on).

    ``lines``: the journal messages of this start, oldest first (only this start: from its ``Started`` on);
    ``ready``: whether the server became ready; ``waited``: seconds the ready wait ran; ``budget``: the seconds it
    was allowed (the startup budget's timeout); ``attempt``: 0 for the first start, 1 for the retry;
    ``kernel_cache``: the instance plan's ``kernel_cache`` (``root``, ``key``, ``dir``).

    Returns ``stuck`` (bool), ``retry`` (stuck and ``attempt < MAX_RETRIES``), ``clear`` (the directories to remove
    before the retry, as a list: the instance's kernel directory of this key only, or empty when not stuck or when the
    plan's directory is not ``<root>/<key>/<instance>``), ``evidence`` (the compile line the start stopped at, or None)
    and ``why`` (one sentence).
    """
    out: dict[str, Any] = {"stuck": False, "retry": False, "clear": [], "evidence": None}
    if ready:
        return {**out, "why": "the server became ready"}
    if float(waited) < float(budget):
        return {**out, "why": f"the start ended after {float(waited):g}s, within its budget of {float(budget):g}s"}
    last_compile, last_after = -1, -1
    text = [str(line) for line in lines]
    for i, line in enumerate(text):
        if any(marker in line for marker in COMPILE_LINES):
            last_compile = i
        if any(marker in line for marker in AFTER_COMPILE_LINES):
            last_after = i
    if last_compile < 0:
        return {**out, "why": "the start never entered the kernel compile (no DeepGEMM compile line in its journal)"}
    if last_after > last_compile:
        return {**out, "why": "the start got past the kernel compile (a later phase's line follows it)"}
    directory = _safe_dir(kernel_cache)
    evidence = text[last_compile]
    if directory is None:
        return {**out, "stuck": True, "evidence": evidence,
                "why": "stuck in the kernel compile, but the plan's kernel directory is not <root>/<key>/<instance>: "
                       "nothing is cleared"}
    retry = int(attempt) < MAX_RETRIES
    return {"stuck": True, "retry": retry, "clear": [directory], "evidence": evidence,
            "why": (f"stuck in the kernel compile for {float(waited):g}s (budget {float(budget):g}s) at: "
                    f"{evidence.strip()[:200]}; " + ("clear the instance's kernel cache and start once more"
                                                     if retry else "already retried once: give up"))}


__all__ = ["AFTER_COMPILE_LINES", "COMPILE_LINES", "COMPILE_MODULE", "FP8_METHODS", "MARKER", "MAX_RETRIES",
           "arch_of_key", "compile_argv", "deepgemm_applies", "fp8_weights", "inputs_digest", "kernel_inputs",
           "marker_document", "marker_matches", "split_flag", "stuck_in_compile"]
