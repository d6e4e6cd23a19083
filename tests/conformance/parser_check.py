"""Compare a committed CLI schema with the parser its SGLang release builds (sglang_parser_dump.py).

Used by test_schema_parser.py; runs in the main venv. The dump of each release is made once per wheel and
kept in ``.cache/sglang-parsers/<wheel>.json`` (the wheel's name pins the release; its hash is the schema's).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMA_DIR = REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas"
WHEEL_DIR = REPO / ".cache" / "sglang-wheels"
TREE_DIR = REPO / ".cache" / "sglang-trees"
DUMP_DIR = REPO / ".cache" / "sglang-parsers"
DUMPER = HERE / "sglang_parser_dump.py"

# argparse's registry names -> the Action classes the real parser holds.
ACTION_CLASSES = {
    "store": "_StoreAction",
    "store_const": "_StoreConstAction",
    "store_true": "_StoreTrueAction",
    "store_false": "_StoreFalseAction",
    "append": "_AppendAction",
    "append_const": "_AppendConstAction",
    "count": "_CountAction",
    "extend": "_ExtendAction",
}
FIELDS = ("dest", "option_strings", "action", "nargs", "const", "default", "choices", "type", "required")


def committed_versions() -> list[str]:
    from packaging.version import Version

    names = [p.name[len("sglang-"):-len(".json")] for p in SCHEMA_DIR.glob("sglang-*.json")]
    return sorted(names, key=Version)


def schema_of(version: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"sglang-{version}.json").read_text(encoding="utf-8"))


def parser_dump(version: str, python: Path) -> tuple[dict[str, Any], float]:
    """The release's own parser (cached per wheel) and the seconds it took (0 when cached)."""
    wheel = WHEEL_DIR / schema_of(version)["wheel"]["filename"]
    if not wheel.is_file():
        raise FileNotFoundError(f"{wheel} is missing: run `make wheels` (or make wheel SGLANG_VERSION={version})")
    cached = DUMP_DIR / (wheel.name + ".json")
    if cached.is_file() and cached.stat().st_mtime >= max(wheel.stat().st_mtime, DUMPER.stat().st_mtime):
        return json.loads(cached.read_text(encoding="utf-8")), 0.0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    start = time.monotonic()
    proc = subprocess.run([str(python), str(DUMPER), "--wheel", str(wheel), "--tree", str(TREE_DIR / version)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=str(REPO))
    if proc.returncode != 0:
        raise RuntimeError(f"sglang_parser_dump.py failed for {version} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout)
    DUMP_DIR.mkdir(parents=True, exist_ok=True)
    cached.write_text(proc.stdout, encoding="utf-8")
    return data, time.monotonic() - start


def _choices(value: Any) -> Any:
    if value is None or isinstance(value, dict):
        return value
    return sorted({json.dumps(v, sort_keys=True) for v in value})  # argparse tests membership: order is not meaning


def _type(value: Any) -> Any:
    return value.rsplit(".", 1)[-1] if isinstance(value, str) else value  # json.loads -> loads, as __name__ reads


def normalize_schema(record: dict[str, Any]) -> dict[str, Any]:
    out = {f: record.get(f) for f in FIELDS}
    out["action"] = ACTION_CLASSES.get(out["action"], out["action"])
    out["choices"] = _choices(out["choices"])
    out["type"] = _type(out["type"])
    out["required"] = bool(out["required"])
    return out


def normalize_real(record: dict[str, Any]) -> dict[str, Any]:
    out = {f: record.get(f) for f in FIELDS}
    out["choices"] = _choices(out["choices"])
    out["type"] = _type(out["type"])
    return out


def differences(schema: dict[str, Any], dump: dict[str, Any]) -> list[str]:
    """Every difference between the schema's arguments and the real parser's, one line each ([] when they agree)."""
    ours = {tuple(r["option_strings"]): normalize_schema(r) for r in schema["arguments"].values()}
    real = {tuple(r["option_strings"]): normalize_real(r) for r in dump["arguments"]}
    lines = [f"only in the schema: {' '.join(k)}" for k in ours if k not in real]
    lines += [f"only in SGLang's parser: {' '.join(k)}" for k in real if k not in ours]
    for key in [k for k in real if k in ours]:
        for field in FIELDS:
            if ours[key][field] != real[key][field]:
                lines.append(f"{key[0]} {field}: schema {ours[key][field]!r}, SGLang {real[key][field]!r}")
    return lines
