#!/usr/bin/env python3
"""Ask SGLang itself whether it accepts a set of launch arguments.

Runs INSIDE `.venv-conformance` (see setup-venv.sh): sglang==0.5.23 and the few
packages its argument handling imports. For each case it renders the argv the
way our launcher renders it and runs exactly what `sglang serve` /
`python -m sglang.launch_server` runs before it spawns any scheduler:

    server_args = prepare_server_args(argv)   # argparse: types, choices
    server_args.resolve_once()                # arg_groups/pipeline.py: every hook
    server_args.check_server_args()           # arg_groups/validation_hook.py

(`Engine._launch_subprocesses` in sglang/srt/entrypoints/engine.py: resolve_once,
then check_server_args, then parsers/ports/processes.)

The process PRETENDS to be the reference host: CUDA available, `gpu_count`
devices of compute capability 12.0 (SM120), 97887 MiB each, named
"NVIDIA RTX PRO 6000 Blackwell Server Edition". torch.cuda is patched, a fake
`nvidia-smi` answers the memory query, and SGLang's own
`runtime_context.override_platform(...)` pins the platform facts so every
reader agrees. Packages that need a real GPU (the CUDA kernel package, which
dlopens libcuda.so.1; Triton; FlashInfer) are stubbed in `sys.modules`.
No network: the hub is offline and socket connects outside AF_UNIX raise.

Each case runs in a child forked from a warmed-up parent (SGLang keeps global
state: lru caches, the runtime context, registered overrides), so cases cannot
influence each other.

Input (stdin, or a file given as the first argument): JSON, either a list of
cases or {"cases": [...]}; a case is
    {"id": str, "args": {dest: value}, "model": "<dir under models/>",
     "gpu_count": 8, "compute_capability": "12.0", "env": {NAME: value},
     "gpu_memory_mib": 97887, "gpu_name": "...", "gpu_integrated": false}
(the GPU fields are optional: the reference host's RTX PRO 6000 by default)
or, instead of "args", a ready "argv" list (its --model-path value is replaced
by the fixture directory).
Output (stdout): a JSON list, one object per case:
    {"id", "status": "accepted"|"rejected"|"probe_error", "accepted": bool|null,
     "exception", "message", "where", "stage", "argv", "resolved", "warnings",
     "seconds"}
"probe_error" means the probe itself could not run SGLang's check (a missing
module in the venv, a crash, a timeout): never a verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import select
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS_DIR = HERE / "models"

GPU_MEM_MIB = 97887
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_SM_COUNT = 188

# Fields reported back for every case (read through SGLang's resolution result).
RESOLVED_FIELDS = [
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "mamba_backend",
    "linear_attn_backend",
    "mamba_radix_cache_strategy",
    "moe_runner_backend",
    "moe_a2a_backend",
    "mem_fraction_static",
    "quantization",
    "kv_cache_dtype",
    "page_size",
    "chunked_prefill_size",
    "max_running_requests",
    "context_length",
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_dp_size",
    "ep_size",
    "nnodes",
    "served_model_name",
    "disable_overlap_schedule",
    "sampling_backend",
    "device",
]

_STATE = {"gpu_count": 8, "capability": (12, 0), "memory_mib": GPU_MEM_MIB, "name": GPU_NAME, "integrated": False}


# --------------------------------------------------------------------------
# Environment: offline, no network, fake GPU host.
# --------------------------------------------------------------------------


def set_process_env(env: dict) -> None:
    """A case's environment in this (forked) process, as a server's process has it when SGLang starts.

    SGLang's envs registry reads the process environment lazily; nothing to reset. What it does once, when a
    server's process imports it (the warm-up imported it before the case's env was set), is rename old names:
    forward deprecated ones and copy every SGL_* name to SGLANG_* (environ.py _handle_deprecated_envs, 0.5.23
    :2294-2305; every release the probe runs has it). It runs again here, as the case's own process would run it.
    """
    for k, v in env.items():
        os.environ[str(k)] = str(v)
    import sglang.srt.environ as sglang_environ

    handle_deprecated = getattr(sglang_environ, "_handle_deprecated_envs", None)
    if handle_deprecated is not None:
        handle_deprecated()


def _setup_environment(workdir: Path) -> None:
    # Nothing from the caller's environment may change SGLang's answer: drop every
    # SGLANG_* variable (SGLANG_IS_IN_CI, for one, lifts the context-length
    # check) and the GPU selection. A case brings its own `env`.
    for name in list(os.environ):
        if name.startswith(("SGLANG_", "SGL_")) or name in (
            "CUDA_VISIBLE_DEVICES",
            "HF_ENDPOINT",
            "HF_TOKEN",
        ):
            del os.environ[name]
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HOME", str(workdir / "hf-home"))
    os.environ["SGLANG_USE_MODELSCOPE"] = "false"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("NO_PROXY", "*")
    # A fake nvidia-smi: SGLang asks it for the total memory of each GPU.
    bindir = workdir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        "# stand-in written by tests/conformance/sglang_probe.py\n"
        'n="${PROBE_GPU_COUNT:-8}"\n'
        f'mem="${{PROBE_GPU_MEMORY:-{GPU_MEM_MIB}}}"\n'
        f'name="${{PROBE_GPU_NAME:-{GPU_NAME}}}"\n'
        'case "$*" in\n'
        '  *memory.total*) i=0; while [ "$i" -lt "$n" ]; do echo "$mem"; i=$((i+1)); done ;;\n'
        '  *name*) i=0; while [ "$i" -lt "$n" ]; do echo "$name"; i=$((i+1)); done ;;\n'
        '  *compute_cap*) i=0; while [ "$i" -lt "$n" ]; do echo "${PROBE_GPU_CC:-12.0}"; i=$((i+1)); done ;;\n'
        '  *) echo "nvidia-smi stand-in: unsupported query: $*" >&2; exit 1 ;;\n'
        "esac\n"
    )
    smi.chmod(0o755)
    os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    _block_network()


def _block_network() -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def _allowed(sock, address) -> bool:
        return sock.family == getattr(socket, "AF_UNIX", None)

    def connect(self, address):
        if not _allowed(self, address):
            raise OSError(f"network access blocked by sglang_probe: {address!r}")
        return real_connect(self, address)

    def connect_ex(self, address):
        if not _allowed(self, address):
            raise OSError(f"network access blocked by sglang_probe: {address!r}")
        return real_connect_ex(self, address)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex

    def getaddrinfo(*a, **k):
        raise OSError("name resolution blocked by sglang_probe")

    socket.getaddrinfo = getaddrinfo


# --------------------------------------------------------------------------
# Stubs for packages that need a real NVIDIA GPU.
# --------------------------------------------------------------------------


def _platform_stubs():
    """sglang/_platform_stubs.py (SGLang's own Triton stand-in for macOS), loaded
    without importing the sglang package (whose __init__ imports half of it)."""
    import importlib.util

    name = "_sglang_platform_stubs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("sglang")
    path = Path(list(spec.submodule_search_locations)[0]) / "_platform_stubs.py"
    mspec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[name] = mod
    mspec.loader.exec_module(mod)
    return mod


_STUB_CLASSES: dict = {}


def _stub_types():
    """Module/class stand-ins built on SGLang's own `_MockModule`: any attribute
    exists, calling one is a pass-through decorator, `import a.b.c` works."""
    if _STUB_CLASSES:
        return _STUB_CLASSES["module"], _STUB_CLASSES["loader"]
    import importlib.abc
    import importlib.machinery

    ps = _platform_stubs()

    class _StubMeta(type):
        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _Stub(f"{cls.__module__}.{cls.__name__}.{name}")

    class _StubClass(ps._StubBase, metaclass=_StubMeta):
        def __init__(self, *a, **k):
            pass

    class _StubLoader(importlib.abc.Loader):
        def create_module(self, spec):
            return _Stub(spec.name)

        def exec_module(self, module):
            pass

    class _Stub(ps._MockModule):
        def __init__(self, name: str):
            super().__init__(name)
            self.__spec__ = importlib.machinery.ModuleSpec(
                name, _LOADER, is_package=True
            )
            self.__loader__ = _LOADER

        def __getattr__(self, name: str):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            full = f"{self.__name__}.{name}"
            if full in sys.modules:
                return sys.modules[full]
            children = self.__dict__.setdefault("_children", {})
            if name in children:
                return children[name]
            if name[0:1].isupper():
                value = _StubMeta(name, (_StubClass,), {"__module__": self.__name__})
            else:
                value = _Stub(full)
            children[name] = value
            return value

    _LOADER = _StubLoader()
    _STUB_CLASSES.update(module=_Stub, loader=_LOADER)
    return _Stub, _LOADER


class _StubFinder:
    """Meta-path finder that answers `import <root>.*` with stub modules."""

    def __init__(self, roots):
        self.roots = tuple(roots)

    def find_spec(self, fullname, path=None, target=None):
        if not any(fullname == r or fullname.startswith(r + ".") for r in self.roots):
            return None
        _Stub, _ = _stub_types()
        if fullname in sys.modules:
            return getattr(sys.modules[fullname], "__spec__", None)
        return _Stub(fullname).__spec__


def _install_stubs() -> list[str]:
    """Stub what cannot load without a GPU. Returns the stubbed roots."""
    import importlib.util

    ps = _platform_stubs()
    _Stub, _ = _stub_types()
    roots = []
    # The CUDA kernel package (sglang-kernel, module `sgl_kernel`) dlopens
    # libcuda.so.1 on import: always stubbed. The other GPU-only packages of the
    # full install are stubbed when absent (they are, in .venv-conformance), and
    # so is torchvision (imported at module level by multimodal helpers that
    # the config registry pulls in; PyPI's torchvision does not import beside
    # the small CPU torch, and nothing in argument handling runs it).
    roots.append("sgl_kernel")
    for name in ("flashinfer", "triton", "deep_gemm", "flash_mla", "deep_ep",
                 "tilelang", "quack", "cutlass", "cuda", "flash_attn", "humming",
                 "torch_memory_saver", "nvshmem", "tvm_ffi", "torchvision"):
        if importlib.util.find_spec(name) is None:
            roots.append(name)
    for name in roots:
        sys.modules.pop(name, None)
        m = _Stub(name)
        sys.modules[name] = m
        m.__version__ = {"flashinfer": "0.7.2", "triton": "3.6.0"}.get(name, "0.4.10")
    if "triton" in roots:
        triton = sys.modules["triton"]
        triton.cdiv = ps._cdiv
        triton.next_power_of_2 = ps._next_power_of_2
        triton.Config = ps._Config
        tl = _Stub("triton.language")
        sys.modules["triton.language"] = tl

        class _constexpr:
            def __init__(self, value=None):
                self.value = value

        tl.constexpr = _constexpr
        triton.language = tl
    sys.meta_path.insert(0, _StubFinder(roots))
    return roots


# What 0.5.23's DSpark handler imports (speculative_hook.py:791: dspark_config -> dflash_utils -> the sampler and
# spec_utils) that .venv-conformance lacks: the OpenAI-compatible request models' `openai` (reached through the
# grammar backends' reasoning parser, sglang/srt/entrypoints/openai/protocol.py:41-60), the function-call detectors'
# partial_json_parser and the expert-distribution recorder's einops. All are imported at module level only; no
# argument check calls them. OPENAI_NAMES: the names protocol.py imports from `openai`, by module, as (name, kind):
# kind "model" a pydantic model, "dict" a TypedDict (protocol.py subclasses two with total=False, :1901-1908).
OPENAI_NAMES = {
    "openai.types.responses": (("ResponseFunctionToolCall", "model"), ("ResponseInputItemParam", "dict"),
                               ("ResponseOutputItem", "model"), ("ResponseOutputMessage", "model"),
                               ("ResponseOutputText", "model"), ("ResponseReasoningItem", "model"),
                               ("ResponseTextConfig", "model")),
    "openai.types.responses.easy_input_message_param": (("EasyInputMessageParam", "dict"),),
    "openai.types.responses.response": (("ToolChoice", "model"),),
    "openai.types.responses.response_format_text_json_schema_config": (("ResponseFormatTextJSONSchemaConfig", "model"),),
    "openai.types.responses.response_function_tool_call_param": (("ResponseFunctionToolCallParam", "dict"),),
    "openai.types.shared.response_format_json_object": (("ResponseFormatJSONObject", "model"),),
}
IMPORT_ONLY = ("partial_json_parser", "einops")  # stubbed as the GPU-only packages are (_install_stubs)


def _install_import_only_stubs() -> list[str]:
    """IMPORT_ONLY's roots the venv lacks, as the generic stand-ins of _install_stubs (every release: 0.5.20's DFLASH
    handler imports dflash_utils, whose module level imports einops, as 0.5.23's does). Returns the stubbed roots."""
    import importlib.util

    roots = [root for root in IMPORT_ONLY if root not in sys.modules and importlib.util.find_spec(root) is None]
    _Stub, _ = _stub_types()
    for root in roots:
        sys.modules[root] = _Stub(root)
    if roots:
        sys.meta_path.insert(0, _StubFinder(roots))
    return roots


def _install_dspark_stubs() -> list[str]:
    """Stand in for what DSpark's handler imports and the venv lacks, where the release's server_args imported
    without stand-ins (0.5.23; the older releases that import `openai` with server_args keep sglang_parser_dump's
    generic ones and get none of these). `openai`: real modules holding exactly OPENAI_NAMES, as empty pydantic
    models and TypedDicts, so protocol.py's own models build; an import of any other `openai` name fails as before,
    naming it. IMPORT_ONLY: the generic stand-ins of _install_stubs. Returns the stubbed roots."""
    import importlib.util
    import types

    def absent(root: str) -> bool:
        return root not in sys.modules and importlib.util.find_spec(root) is None

    roots = _install_import_only_stubs()
    if not absent("openai"):
        return roots
    import pydantic
    from typing_extensions import TypedDict

    modules: dict[str, types.ModuleType] = {}
    for full in sorted({m for name in OPENAI_NAMES for m in _parents(name)}):
        module = modules[full] = types.ModuleType(full)
        module.__path__ = []  # a package: its submodules are imported by name
        sys.modules[full] = module
        parent, _, child = full.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    for full, names in OPENAI_NAMES.items():
        for name, kind in names:
            base = (pydantic.BaseModel,) if kind == "model" else (TypedDict,)
            setattr(modules[full], name, types.new_class(name, base, {} if kind == "model" else {"total": False},
                                                         lambda ns, m=full: ns.update(__module__=m)))
    return [*roots, "openai"]


def _parents(name: str) -> list[str]:
    """``a.b.c`` -> [``a``, ``a.b``, ``a.b.c``]."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


# --------------------------------------------------------------------------
# torch.cuda: pretend to be the reference host.
# --------------------------------------------------------------------------


def _patch_torch() -> None:
    import torch

    class _Props:
        def __init__(self, index: int):
            self.name = _STATE["name"]
            self.major, self.minor = _STATE["capability"]
            self.total_memory = _STATE["memory_mib"] * 1024 * 1024
            self.multi_processor_count = GPU_SM_COUNT
            self.is_integrated = _STATE["integrated"]
            self.is_multi_gpu_board = False
            self.warp_size = 32
            self.max_threads_per_multi_processor = 1536
            self.regs_per_multiprocessor = 65536
            self.shared_memory_per_block_optin = 101376
            self.L2_cache_size = 128 * 1024 * 1024
            self.gcnArchName = ""
            self.uuid = f"GPU-00000000-0000-0000-0000-{index:012d}"
            self.pci_bus_id = index

        def __repr__(self):
            return f"_CudaDeviceProperties(name={self.name!r}, major={self.major}, minor={self.minor})"

    def _index(device=None) -> int:
        if device is None:
            return 0
        if isinstance(device, int):
            return device
        idx = getattr(device, "index", None)
        if idx is None and isinstance(device, str) and ":" in device:
            idx = int(device.split(":", 1)[1])
        return idx or 0

    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: _STATE["gpu_count"]
    cuda.get_device_capability = lambda device=None: tuple(_STATE["capability"])
    cuda.get_device_name = lambda device=None: _STATE["name"]
    cuda.get_device_properties = lambda device=None: _Props(_index(device))
    cuda.mem_get_info = lambda device=None: (
        _STATE["memory_mib"] * 1024 * 1024 - 512 * 1024 * 1024,
        _STATE["memory_mib"] * 1024 * 1024,
    )
    cuda.current_device = lambda: 0
    cuda.set_device = lambda device: None
    cuda.is_initialized = lambda: False
    cuda.get_arch_list = lambda: ["sm_90", "sm_100", "sm_120"]
    cuda._get_nvml_device_index = lambda device: _index(device)
    cuda.is_bf16_supported = lambda *a, **k: True
    cuda.memory_allocated = lambda device=None: 0
    cuda.memory_reserved = lambda device=None: 0
    if torch.version.cuda is None:
        torch.version.cuda = "13.0"
    torch.backends.cuda.is_built = lambda: True


# --------------------------------------------------------------------------
# Logging capture.
# --------------------------------------------------------------------------


_ANSI = __import__("re").compile(r"\x1b\[[0-9;]*m")


class _Collector(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            msg = str(record.msg)
        msg = _ANSI.sub("", msg)
        self.lines.append(f"{record.levelname} {record.name}: {msg}")


def _install_collector() -> _Collector:
    collector = _Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    logging.captureWarnings(True)
    real_basic_config = logging.basicConfig

    def basic_config(*a, **k):
        # prepare_server_args calls basicConfig(force=True), which drops every
        # root handler: put ours back.
        real_basic_config(*a, **k)
        if collector not in root.handlers:
            root.addHandler(collector)
        for h in root.handlers:
            if h is not collector:
                h.setLevel(logging.CRITICAL + 1)

    logging.basicConfig = basic_config
    return collector


# --------------------------------------------------------------------------
# argv, exactly as our renderer builds it.
# --------------------------------------------------------------------------


def _option_strings(parser: argparse.ArgumentParser) -> dict:
    """dest -> (first option string, action)."""
    out = {}
    for action in parser._actions:
        if not action.option_strings:
            continue
        out.setdefault(action.dest, (action.option_strings[0], action))
    return out


def render_argv(model_path: str, args: dict, options: dict) -> list[str]:
    argv = ["--model-path", model_path]
    for key, value in args.items():
        dest = key.replace("-", "_").lstrip("_")
        if dest not in options:
            # An unknown key: hand it to argparse as our renderer would
            # (it turns dashes around): argparse rejects it.
            flag = "--" + key.replace("_", "-").lstrip("-")
            action = None
        else:
            flag, action = options[dest]
        if value is False and isinstance(action, argparse.BooleanOptionalAction):
            # A tri-state switch (default None): false is its --no- spelling, as our renderer writes it
            # (sglang_schema.ArgSpec.negation); dropped, SGLang would read None ("decide yourself").
            argv.append(next(o for o in action.option_strings if o.startswith("--no-")))
            continue
        if value is False and action is None:
            argv.append(flag)  # unknown whatever its value: argparse rejects it, as our validator does
            continue
        if value is None or value is False:
            continue
        if value is True:
            if action is not None and action.nargs == 0:
                argv.append(flag)
            else:
                argv += [flag, "true"]
            continue
        if isinstance(value, (list, tuple)):
            argv.append(flag)
            argv += [_scalar(v) for v in value]
            continue
        if isinstance(value, dict):
            argv += [flag, json.dumps(value)]
            continue
        argv += [flag, _scalar(value)]
    return argv


def with_model_path(argv: list, model_path: str) -> list:
    """A ready argv (e.g. our renderer's), its model swapped for the fixture dir."""
    out, i, seen = [], 0, False
    while i < len(argv):
        a = str(argv[i])
        if a in ("--model-path", "--model"):
            out += ["--model-path", model_path]
            seen = True
            i += 2
            continue
        if a.startswith(("--model-path=", "--model=")):
            out += ["--model-path", model_path]
            seen = True
            i += 1
            continue
        out.append(a)
        i += 1
    return out if seen else ["--model-path", model_path] + out


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


# --------------------------------------------------------------------------
# One case.
# --------------------------------------------------------------------------


def _where(exc: BaseException) -> str:
    import sglang

    root = str(Path(sglang.__file__).resolve().parent.parent) + os.sep
    where = ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        fn = os.path.realpath(frame.f_code.co_filename)
        if fn.startswith(root) and "/sglang/" in fn:
            where = f"{fn[len(root):]}:{lineno}"
    return where


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def _resolved(server_args) -> dict:
    from sglang.srt.arg_groups.overrides import resolution_result

    out = {}
    for name in RESOLVED_FIELDS:
        try:
            out[name] = _jsonable(resolution_result(server_args, name))
        except Exception as e:  # noqa: BLE001
            out[name] = f"<unreadable: {type(e).__name__}>"
    # What SGLang's ModelConfig made of the checkpoint (built during resolution).
    mc = getattr(server_args, "_model_config", None)
    if mc is not None:
        archs = getattr(getattr(mc, "hf_config", None), "architectures", None) or []
        out["model.architecture"] = archs[0] if archs else None
        for attr in ("quantization", "context_len", "is_hybrid_swa"):
            try:
                out[f"model.{attr}"] = _jsonable(getattr(mc, attr, None))
            except Exception:  # noqa: BLE001
                pass
    return out


PROBE_ERROR_TYPES = ("ModuleNotFoundError", "ImportError")


def platform_facts(major: int, minor: int) -> dict:
    """SGLang's platform facts (runtime_context.override_platform) of a CUDA GPU of compute capability
    ``major``.``minor``, as a CUDA build of torch on that GPU reports them (also preflight_host.py's)."""
    return dict(
        is_cuda=True,
        is_hip=False,
        is_npu=False,
        is_xpu=False,
        is_musa=False,
        is_mps=False,
        is_sm90=major == 9,
        is_sm100=major == 10,
        is_sm100_or_sm110=major in (10, 11),
        is_sm110=major == 11,
        is_sm120=major == 12,
        is_blackwell=major in (10, 11, 12),
        is_hopper_with_cuda_12_3=major == 9,
        has_amx=False,
        has_flashinfer=True,
        device_sm=major * 10 + minor,
        device_capability=(major, minor),
    )


def _clear_capability_caches() -> None:
    """Forget what SGLang's lru_cached device helpers (is_sm100_supported, is_blackwell_supported, ... in
    sglang/srt/utils/common.py:287-335) answered before this case: the warm-up parent asked them on the default
    pretend GPU, and a fork inherits the cache, so a B200 case read 12.0's answers (FlashInfer MegaMoE refused at
    moe_hook.py:335-339 as not SM100 on a B200)."""
    import sglang.srt.utils.common as common

    for value in list(vars(common).values()):
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()


def run_case(case: dict, collector: _Collector, options: dict) -> dict:
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.server_args import prepare_server_args

    result = {
        "id": case.get("id"),
        "status": None,
        "accepted": None,
        "exception": None,
        "message": None,
        "where": None,
        "stage": None,
        "argv": None,
        "resolved": {},
        "warnings": [],
    }
    gpu_count = int(case.get("gpu_count", 8))
    cc = str(case.get("compute_capability", "12.0"))
    major, minor = (int(x) for x in cc.split("."))
    _STATE["gpu_count"] = gpu_count
    _STATE["capability"] = (major, minor)
    # The GPU itself (differential.py's GPUS: each profile's real memory): its name, memory in MiB, and whether it
    # is integrated (GB10, Thor: unified memory; nvidia-smi answers [N/A] for memory.total and SGLang falls back to
    # torch.cuda.mem_get_info, sglang/srt/utils/common.py:802-832).
    _STATE["memory_mib"] = int(case.get("gpu_memory_mib") or GPU_MEM_MIB)
    _STATE["name"] = str(case.get("gpu_name") or GPU_NAME)
    _STATE["integrated"] = bool(case.get("gpu_integrated"))
    os.environ["PROBE_GPU_COUNT"] = str(gpu_count)
    os.environ["PROBE_GPU_MEMORY"] = "[N/A]" if _STATE["integrated"] else str(_STATE["memory_mib"])
    os.environ["PROBE_GPU_NAME"] = _STATE["name"]
    os.environ["PROBE_GPU_CC"] = cc
    set_process_env(case.get("env") or {})

    model = case.get("model")
    model_path = str(MODELS_DIR / model) if model else "dummy"
    if case.get("argv") is not None:
        argv = with_model_path(list(case["argv"]), model_path)
    else:
        argv = render_argv(model_path, case.get("args") or {}, options)
    result["argv"] = argv
    platform = platform_facts(major, minor)
    # An older release (run by release_conformance.py) knows fewer facts (0.5.21: no is_mps, is_sm110) and refuses
    # unknown ones: it is given those it has. 0.5.23 knows them all.
    import sglang.srt.runtime_context as runtime_context

    known = set(getattr(runtime_context, "_PLATFORM_PROBES", {})) | set(getattr(runtime_context, "_PLATFORM_VALUES", {}))
    if known:
        platform = {k: v for k, v in platform.items() if k in known}
    _clear_capability_caches()
    stage = "prepare_server_args"
    stderr = io.StringIO()
    try:
        with override_platform(**platform):
            with contextlib.redirect_stderr(stderr):
                server_args = prepare_server_args(argv)
            stage = "resolve_once"
            server_args.resolve_once()
            stage = "check_server_args"
            server_args.check_server_args()
            stage = "done"
            result["resolved"] = _resolved(server_args)
        result["status"] = "accepted"
        result["accepted"] = True
    except SystemExit as e:
        # argparse: prints "usage: ...\n<prog>: error: <message>" and exits 2.
        text = stderr.getvalue().strip().splitlines()
        msg = next((ln for ln in reversed(text) if "error:" in ln), text[-1] if text else "")
        result.update(
            status="rejected",
            accepted=False,
            exception="SystemExit",
            message=msg.split("error:", 1)[-1].strip(),
            where=_where(e) or "argparse",
        )
    except BaseException as e:  # noqa: BLE001
        kind = type(e).__name__
        result.update(
            status="rejected",
            accepted=False,
            exception=kind,
            message=str(e),
            where=_where(e),
        )
        if kind in PROBE_ERROR_TYPES or isinstance(e, (ImportError, KeyboardInterrupt)):
            result["status"] = "probe_error"
            result["accepted"] = None
            result["traceback"] = traceback.format_exc()
        elif os.environ.get("PROBE_TRACEBACKS"):
            result["traceback"] = traceback.format_exc()
    result["stage"] = stage
    result["warnings"] = list(collector.lines)
    return result


# --------------------------------------------------------------------------
# Driver: warm up once, fork per case.
# --------------------------------------------------------------------------


def _warm_up() -> tuple[_Collector, dict, list[str]]:
    stubbed = _install_stubs()
    _patch_torch()
    collector = _install_collector()
    try:
        import sglang.srt.server_args as sa
    except ModuleNotFoundError:
        # An older release (0.5.18-0.5.20) imports packages this venv lacks at module level (openai, through the
        # OpenAI protocol models): stubbed as for the parser check (sglang_parser_dump.import_server_args).
        from sglang_parser_dump import import_server_args

        sa, more = import_server_args()
        stubbed += more + _install_import_only_stubs()
    else:
        stubbed += _install_dspark_stubs()

    # Import what resolution imports lazily, so every fork starts warm.
    for mod in (
        "sglang.srt.arg_groups.pipeline",
        "sglang.srt.arg_groups.validation_hook",
        "sglang.srt.arg_groups.speculative_hook",
        "sglang.srt.arg_groups.attention_hook",
        "sglang.srt.arg_groups.parallel_hook",
        "sglang.srt.arg_groups.moe_hook",
        "sglang.srt.arg_groups.kv_cache_hook",
        "sglang.srt.arg_groups.memory_hook",
        "sglang.srt.arg_groups.model_hook",
        "sglang.srt.arg_groups.mamba_hook",
        "sglang.srt.arg_groups.serving_hook",
        "sglang.srt.configs.model_config",
        "sglang.srt.speculative.spec_info",
        "sglang.srt.sampling.watermarking.core",
        # Imported by the resolution of every case (0.5.23's expert_pack_hook imports the model loader, about half a
        # second each time a fork did it; the layer boundaries, the muse-spark defaults and the hub's file system
        # with them): the profile of a 10-case run, `cProfile` in the child.
        "sglang.srt.arg_groups.expert_pack_hook",
        "sglang.srt.arg_groups.muse_spark_hook",
        "sglang.srt.model_loader",
        "sglang.srt.layers.layer_boundary",
        "sglang.srt.layers.layer_boundary.adapters.attention",
        "sglang.srt.utils.hf_transformers.config",
    ):
        try:
            __import__(mod)
        except Exception:  # noqa: BLE001 - the case itself will report it
            pass
    # The per-class caches of the dataclass metadata (functools.cache, pure functions of the class: type hints and
    # field declarations), which every fork otherwise recomputed from typing.get_type_hints (a fifth of a second).
    try:
        from sglang.srt.arg_groups import arg_utils

        for fn in ("field_names", "resolvable_fields", "fallbacks_of"):
            if hasattr(arg_utils, fn):
                getattr(arg_utils, fn)(sa.ServerArgs)
    except Exception:  # noqa: BLE001 - an older release without them: the forks compute what they need
        pass
    parser = argparse.ArgumentParser(prog="probe")
    sa.ServerArgs.add_cli_args(parser)
    return collector, _option_strings(parser), stubbed


def _run_forked(case: dict, collector: _Collector, options: dict, timeout: float) -> dict:
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code = 0
        try:
            res = run_case(case, collector, options)
            payload = json.dumps(res, default=str).encode()
        except BaseException as e:  # noqa: BLE001
            payload = json.dumps(
                {
                    "id": case.get("id"),
                    "status": "probe_error",
                    "accepted": None,
                    "exception": type(e).__name__,
                    "message": str(e),
                    "traceback": traceback.format_exc(),
                }
            ).encode()
            code = 1
        with os.fdopen(w, "wb") as f:
            f.write(payload)
        os._exit(code)
    os.close(w)
    chunks = []
    deadline = t0 + timeout
    timed_out = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], remaining)
        if not ready:
            continue
        data = os.read(r, 1 << 16)
        if not data:
            break
        chunks.append(data)
    os.close(r)
    if timed_out:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    elapsed = round(time.monotonic() - t0, 3)
    try:
        res = json.loads(b"".join(chunks).decode())
    except ValueError:
        res = {
            "id": case.get("id"),
            "status": "probe_error",
            "accepted": None,
            "exception": "Timeout" if timed_out else "ChildDied",
            "message": f"child exited with status {status}"
            + (f" after the {timeout}s timeout" if timed_out else ""),
        }
    res["seconds"] = elapsed
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", nargs="?", help="JSON cases file (default: stdin)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument(
        "--no-fork",
        action="store_true",
        help="run each case in a fresh interpreter instead of a fork (slow; for comparison)",
    )
    ap.add_argument("--only", action="append", help="run only these case ids")
    opts = ap.parse_args(argv)

    raw = json.load(open(opts.input) if opts.input else sys.stdin)
    cases = raw["cases"] if isinstance(raw, dict) else raw
    if opts.only:
        cases = [c for c in cases if c.get("id") in set(opts.only)]

    workdir = Path(tempfile.mkdtemp(prefix="sglang-probe-"))
    _setup_environment(workdir)
    t0 = time.monotonic()
    results = []
    if opts.no_fork:
        import subprocess

        for case in cases:
            t1 = time.monotonic()
            p = subprocess.run(
                [sys.executable, __file__, "--timeout", str(opts.timeout)],
                input=json.dumps([case]),
                capture_output=True,
                text=True,
                timeout=opts.timeout + 120,
            )
            try:
                res = json.loads(p.stdout)["results"][0]
            except (ValueError, KeyError, IndexError):
                res = {
                    "id": case.get("id"),
                    "status": "probe_error",
                    "accepted": None,
                    "exception": "ChildDied",
                    "message": p.stderr[-2000:],
                }
            res["seconds"] = round(time.monotonic() - t1, 3)
            results.append(res)
        warm = 0.0
        stubbed = []
    else:
        collector, options, stubbed = _warm_up()
        warm = round(time.monotonic() - t0, 3)
        for case in cases:
            results.append(_run_forked(case, collector, options, opts.timeout))
    import importlib.metadata

    out = {
        "sglang_version": importlib.metadata.version("sglang"),
        "stubbed_modules": stubbed,
        "warmup_seconds": warm,
        "total_seconds": round(time.monotonic() - t0, 3),
        "results": results,
    }
    json.dump(out, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
