#!/usr/bin/env python3
"""Dump the argparse parser that one SGLang release itself builds (``ServerArgs.add_cli_args``), as JSON.

Runs INSIDE ``.venv-conformance`` (sglang 0.5.23's dependencies, a CPU torch). The release's own ``sglang``
package comes from its wheel: every ``sglang/**`` member is unpacked once into ``--tree`` (a wheel is a zip;
unpacked with ``--no-deps`` semantics: the package alone) and put first on ``sys.path``, so the import sees that
release's source and the venv's dependencies. The GPU-only packages are stubbed exactly as the conformance probe
does (sglang_probe.py), and nothing else is patched: the parser is SGLang's, built by SGLang's code.

    .venv-conformance/bin/python tests/conformance/sglang_parser_dump.py --wheel W.whl --tree DIR > parser.json

Output: {"sglang_version", "sglang_file", "arguments": [{dest, option_strings, action, nargs, const, default,
choices, type, required}, ...]} in registration order (``-h`` left out). Values that JSON cannot hold are
written as {"__repr__": repr(value)}; a callable ``type`` as its ``__name__``.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import shutil
import sys
import tempfile
import traceback
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sglang_probe  # noqa: E402 - the conformance probe's stubs for the GPU-only packages


def unpack(wheel: Path, tree: Path) -> Path:
    """``tree`` holding the wheel's ``sglang`` package (re-unpacked when the wheel differs)."""
    stamp = tree / ".wheel"
    if stamp.is_file() and stamp.read_text() == wheel.name and (tree / "sglang").is_dir():
        return tree
    tree.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".unpack-", dir=tree.parent))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(scratch, [n for n in zf.namelist() if n.startswith("sglang/")])
    (scratch / ".wheel").write_text(wheel.name)
    if tree.exists():
        shutil.rmtree(tree)
    scratch.rename(tree)
    return tree


def plain(value):
    """JSON form of a parser attribute."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"__repr__": repr(value)}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v) for k, v in value.items()}
    return {"__repr__": repr(value)}


def type_name(value):
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return getattr(value, "__name__", None) or repr(value)


def dump(parser: argparse.ArgumentParser) -> list[dict]:
    out = []
    for action in parser._actions:  # noqa: SLF001 - argparse keeps them nowhere else
        if isinstance(action, argparse._HelpAction):  # noqa: SLF001
            continue
        out.append({
            "dest": action.dest,
            "option_strings": list(action.option_strings),
            "action": type(action).__name__,
            "nargs": action.nargs,
            "const": plain(action.const),
            "default": plain(action.default),
            "choices": plain(list(action.choices)) if action.choices is not None else None,
            "type": type_name(action.type),
            "required": bool(action.required),
        })
    return out


# The OpenAI-compatible request models: pydantic classes over openai's and xgrammar's types, imported by the
# tool-call and reasoning parser registries whose names are the choices of --tool-call-parser/--reasoning-parser.
# Where they do not build beside 0.5.23's venv (0.5.18/0.5.19: a stubbed openai), they are stubbed: the
# registries' names are literal dict keys in the parser modules, which the models never touch.
PROTOCOL = "sglang.srt.entrypoints.openai.protocol"
PROTOCOL_FILE = "sglang/srt/entrypoints/openai/protocol.py"


def forget_sglang() -> None:
    """Drop the half-imported release, so the next import starts over."""
    for loaded in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[loaded]


def stub_module(name: str, stubbed: list[str]) -> None:
    """Replace ``name`` (and what is below it) by sglang_probe's stand-in; forget the half-imported sglang."""
    forget_sglang()
    stub, _ = sglang_probe._stub_types()  # noqa: SLF001
    sys.modules[name] = stub(name)
    sys.meta_path.insert(0, sglang_probe._StubFinder([name]))  # noqa: SLF001
    stubbed.append(name)


def idempotent(register):
    """``AutoConfig.register`` that accepts a model type transformers already has (``exist_ok=True``)."""

    def wrapper(model_type, config, exist_ok=False):
        return register(model_type, config, exist_ok=True)

    return wrapper


def import_server_args():
    """``sglang.srt.server_args`` of the release, and the third-party packages stubbed to import it.

    An older release imports packages at module level that 0.5.23's venv does not have (0.5.19's server_args
    imports the OpenAI protocol models through the reasoning parser registry): a missing top-level package
    that is not SGLang's is stubbed (sglang_probe's stand-ins: any attribute exists) and the import retried.
    The parser's choices come from SGLang's own registries, whose keys the stubs do not touch.
    """
    import importlib.util

    stubbed: list[str] = []
    for _ in range(40):
        try:
            import sglang.srt.server_args as sa

            return sa, stubbed
        except ModuleNotFoundError as exc:
            root = (exc.name or "").split(".")[0]
            if not root or root == "sglang" or root in stubbed or importlib.util.find_spec(root) is not None:
                raise
            stub_module(root, stubbed)
        except ValueError as exc:
            if "already used by a Transformers config" not in str(exc) or "transformers.AutoConfig.register" in stubbed:
                raise
            # 0.5.18 registers model configs (qwen3_asr) that transformers 5.19, 0.5.23's pin, ships itself:
            # registration is made idempotent; the parser never reads a model config.
            import transformers

            transformers.AutoConfig.register = staticmethod(idempotent(transformers.AutoConfig.register))
            forget_sglang()
            stubbed.append("transformers.AutoConfig.register")
        except Exception as exc:  # noqa: BLE001 - only the protocol models' failure is handled
            frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
            if PROTOCOL in stubbed or not any(f.endswith(PROTOCOL_FILE) for f in frames):
                raise
            stub_module(PROTOCOL, stubbed)
    raise SystemExit(f"gave up importing sglang.srt.server_args after stubbing {stubbed}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--tree", type=Path, required=True, help="where the wheel's sglang package is unpacked (cached)")
    ap.add_argument("--deps", type=Path, action="append", default=[],
                    help="a directory of the release's own pins that 0.5.23's venv lacks (requirements-parser.txt)")
    opts = ap.parse_args()
    tree = unpack(opts.wheel.resolve(), opts.tree.resolve())
    sys.path[0:0] = [str(tree)] + [str(d.resolve()) for d in opts.deps if d.is_dir()]
    # Nothing from the caller's environment may change the parser (an env var can add a choice).
    for name in list(os.environ):
        if name.startswith(("SGLANG_", "SGL_")):
            del os.environ[name]
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.path.insert(1, str(HERE))

    sglang_probe._install_stubs()  # noqa: SLF001
    sglang_probe._patch_torch()  # noqa: SLF001
    sa, stubbed = import_server_args()

    if not sa.__file__.startswith(str(tree)):
        raise SystemExit(f"imported {sa.__file__}, not the release in {tree}")
    parser = argparse.ArgumentParser(prog="sglang_parser_dump")
    sa.ServerArgs.add_cli_args(parser)
    json.dump({"wheel": opts.wheel.name, "sglang_file": os.path.relpath(sa.__file__, tree), "stubbed": stubbed,
               "arguments": dump(parser)}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
