# SPDX-License-Identifier: Apache-2.0
"""Where an instance's compiled kernels live: one directory per SGLang release, torch and CUDA stack, GPU architecture
and instance, computed once in the plan (``sglang_hostplan``: the public plan's ``kernel_cache``) and rendered into the
instance's environment file (``templates/sglang.env.j2``).

Layout: ``<sglang_server_cache_dir>/kernels/<key>/<service>``, where the key is
``sglang-<release>_<torch variant>_cu<CUDA major>_<architecture>`` (``sglang-0.5.23_torch-2.14.1_cu13_sm100``). A new
release, torch, CUDA stack or GPU compiles into a new directory instead of loading stale kernels; two instances of a
host never compile into the same directory at once (SGLang's locks are per process tree); the caches of a release
whose virtualenv roles/sglang prunes go with it (``release_prefix``). HF_HOME (the weights) is not a kernel cache and
stays shared. Controller-only: modules never import it.

The variables, as SGLang 0.5.23 and its kernel libraries read them (the wheel in ``.venv-conformance``):

* ``SGLANG_CACHE_DIR``: SGLang's root, default ``~/.cache/sglang`` (sglang/srt/environ.py:1383); the CuTe AOT cache
  (environ.py:1387), FlashInfer's autotune results (srt/model_executor/runner/flashinfer_autotune.py:193) and the
  custom all-reduce's files (srt/distributed/device_communicators/custom_all_reduce_utils.py:267) follow it.
* ``SGLANG_JIT_CACHE_DIR``: SGLang's JIT kernel builds; unset it is a fixed ``~/.cache/sglang/jit`` that does not follow
  SGLANG_CACHE_DIR (environ.py:1397, sglang/kernels/jit/utils/compile/cache.py:318, .../compile/sailify.py:82).
* ``SGLANG_DG_CACHE_DIR``: DeepGEMM's, default SGLANG_CACHE_DIR/deep_gemm (environ.py:1373); SGLang overwrites
  DeepGEMM's own ``DG_JIT_CACHE_DIR`` with it at import (srt/layers/deep_gemm_wrapper/compile_utils.py:51), so
  ``DG_JIT_CACHE_DIR`` is set to the same directory only for a DeepGEMM used outside that module.
* ``TRITON_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``, ``CUDA_CACHE_PATH`` (the driver's PTX JIT cache),
  ``TILELANG_CACHE_DIR`` and ``FLASHINFER_WORKSPACE_BASE`` (FlashInfer appends ``.cache/flashinfer`` to it:
  flashinfer/jit/env.py, ``FLASHINFER_BASE_DIR = os.getenv("FLASHINFER_WORKSPACE_BASE", home)``): SGLang 0.5.23
  defaults each under SGLANG_CACHE_DIR with exactly these names (environ.py:2308-2321, ``third_party_cache_defaults``,
  applied with ``setdefault`` at ``import sglang``: sglang/__init__.py:14), unless the variable is already set; torch
  reads ``TORCHINDUCTOR_CACHE_DIR`` in torch/_inductor/runtime/cache_dir_utils.py (``cache_dir``). The unit sets them
  explicitly, so a process that imports FlashInfer or torch before sglang (the launcher, a pre-compile) agrees.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_lock import lock_variant

# The directory under sglang_server_cache_dir that holds every key.
KERNELS = "kernels"
# What a key component may hold: a path component of its own, never "/" nor a leading dot.
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")

# The variables the unit sets, each relative to the instance's kernel directory ("" is the directory itself), with
# where the release reads it (module docstring).
CACHE_ENV: dict[str, str] = {
    "SGLANG_CACHE_DIR": "",  # sglang/srt/environ.py:1383
    "SGLANG_JIT_CACHE_DIR": "jit",  # sglang/srt/environ.py:1397 (does not follow SGLANG_CACHE_DIR)
    "SGLANG_DG_CACHE_DIR": "deep_gemm",  # sglang/srt/environ.py:1373
    "DG_JIT_CACHE_DIR": "deep_gemm",  # DeepGEMM's own; srt/layers/deep_gemm_wrapper/compile_utils.py:51
    "TRITON_CACHE_DIR": "triton",  # sglang/srt/environ.py:2311
    "TORCHINDUCTOR_CACHE_DIR": "inductor",  # sglang/srt/environ.py:2312
    "CUDA_CACHE_PATH": "nv",  # sglang/srt/environ.py:2313
    "TILELANG_CACHE_DIR": "tilelang",  # sglang/srt/environ.py:2317
    "FLASHINFER_WORKSPACE_BASE": "",  # sglang/srt/environ.py:2320 (FlashInfer appends .cache/flashinfer)
}


# A systemd unit name's characters (letters, digits and ``_.:@-``), not starting with a dot.
_UNIT_WORD = re.compile(r"[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]*")


def _component(text: Any, empty: str) -> str:
    """``text`` as one safe path word: runs of anything but letters, digits and ``.+-`` become ``-``; never empty, never
    starting with a dot (so never ``.`` or ``..``)."""
    word = _UNSAFE.sub("-", str(text if text is not None else "")).strip("-.")
    return word or empty


def _instance_component(service: Any) -> str:
    """The instance's directory: its unit name as it is (unit names are one path word already, and two instances'
    names must never meet in one directory: ``sglang_`` and ``sglang`` are two), else a safe word of it."""
    text = str(service if service is not None else "")
    return text if _UNIT_WORD.fullmatch(text) else _component(text, "instance")


def arch_tag(capabilities: Iterable[tuple[int, int]]) -> str:
    """``sm100`` for compute capability 10.0, ``sm103+sm120`` for a mix, ``sm-unknown`` when none is known."""
    tags = sorted({f"sm{int(major)}{int(minor)}" for major, minor in capabilities})
    return "+".join(tags) if tags else "sm-unknown"


def cuda_tag(version: str) -> str:
    """``cu13``: the CUDA major of the release's pinned stack (sglang_rules/stack.py RELEASE_CUDA), ``cu-unknown`` for
    a release without an entry."""
    # Imported here: the rules package imports packaging, which the sanity import test of this module lacks.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.stack import (  # pylint: disable=import-outside-toplevel
        RELEASE_CUDA,
    )

    stack = RELEASE_CUDA.get(str(version))
    return f"cu{stack.cuda_major}" if stack is not None else "cu-unknown"


def kernel_cache_key(version: Any, torch_requirement: Any, capabilities: Iterable[tuple[int, int]]) -> str:
    """The key of a release's kernels on one GPU architecture: ``sglang-0.5.23_torch-2.14.1_cu13_sm100``."""
    release = _component(version, "unknown")
    return "_".join((f"sglang-{release}", _component(lock_variant(str(torch_requirement or "")), "no-torch"),
                     cuda_tag(str(version)), _component(arch_tag(capabilities), "sm-unknown")))


def release_prefix(version: Any) -> str:
    """The start of every key of SGLang ``version`` (what roles/sglang removes with the release's last virtualenv)."""
    return f"sglang-{_component(version, 'unknown')}_"


def kernel_cache(cache_dir: Any, version: Any, torch_requirement: Any, capabilities: Iterable[tuple[int, int]],
                 service: Any) -> dict[str, Any]:
    """An instance's kernel caches: ``root`` (every key's directory), ``key``, ``dir`` (the instance's own directory)
    and ``env`` (the variables of :data:`CACHE_ENV`, each a directory under ``dir``)."""
    root = f"{str(cache_dir).rstrip('/') or '/'}/{KERNELS}".replace("//", "/")
    key = kernel_cache_key(version, torch_requirement, capabilities)
    directory = f"{root}/{key}/{_instance_component(service)}"
    env = {name: f"{directory}/{sub}" if sub else directory for name, sub in CACHE_ENV.items()}
    return {"root": root, "key": key, "dir": directory, "release_prefix": release_prefix(version), "env": env}


__all__ = ["CACHE_ENV", "KERNELS", "arch_tag", "cuda_tag", "kernel_cache", "kernel_cache_key", "release_prefix"]
