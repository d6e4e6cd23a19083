#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compile the hashed lock of SGLang's server virtualenv: ``make lock [SGLANG_VERSION=X] [TORCH=torch==Y]``.

``uv pip compile --universal --generate-hashes`` of ``sglang==VERSION`` and the torch requirement, for every
Python from ``--python-version`` up and every platform, into ``<out>/<name>`` where the name is the one
roles/sglang looks for (``plugin_utils/sglang_lock.py``). roles/sglang installs it with ``uv pip sync``, so a
host rebuilt months later gets the same packages, each checked against its hash.

The defaults (SGLang version, torch requirement) are roles/sglang's own (``defaults/main.yml``). The index is
the installer's default (uv's configuration: ``UV_INDEX_URL``, ``uv.toml``); ``--index-url``,
``--extra-index-url`` (e.g. a PyTorch CUDA wheel index for another variant, then pass ``--variant``),
``--find-links`` and ``--no-index`` are passed on. No index URL is written into the lock.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_lock import lock_name  # noqa: E402

DEFAULTS = REPO / "roles" / "sglang" / "defaults" / "main.yml"
LOCKS = REPO / "roles" / "sglang" / "files" / "locks"


_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^ ;\\]+)")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def add_local_hashes(lock: Path, directories: list[str]) -> None:
    """Add the hash of every file in ``directories`` of a version the lock pins.

    uv records one file per package from a flat directory (--find-links) in a universal lock; a wheel of the
    same version for another Python (cp311 / cp313) would then fail ``--require-hashes`` on that Python.
    """
    files: dict[tuple[str, str], list[Path]] = {}
    for directory in directories:
        for path in sorted(Path(directory).glob("*")):
            parts = path.name.split("-")
            if path.is_file() and len(parts) >= 2 and path.suffix in (".whl", ".gz", ".zip"):
                files.setdefault((_normalize(parts[0]), parts[1].removesuffix(".tar.gz").removesuffix(".zip")),
                                 []).append(path)
    out: list[str] = []
    lines = lock.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        pin = _PIN.match(lines[i])
        if not pin:
            out.append(lines[i])
            i += 1
            continue
        block = [lines[i]]
        i += 1
        while i < len(lines) and lines[i].startswith("    --hash="):
            block.append(lines[i])
            i += 1
        known = {line.strip().rstrip(" \\") for line in block[1:]}
        for path in files.get((_normalize(pin.group(1)), pin.group(2)), []):
            digest = "--hash=sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in known:
                known.add(digest)
                block.append("    " + digest)
        hashes = sorted(line.strip().rstrip(" \\") for line in block[1:])
        head = block[0].rstrip(" \\")
        out.append(head + (" \\" if hashes else ""))
        out.extend("    " + h + (" \\" if n < len(hashes) - 1 else "") for n, h in enumerate(hashes))
    lock.write_text("\n".join(out) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    defaults = yaml.safe_load(DEFAULTS.read_text(encoding="utf-8"))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=defaults["sglang_version"], help="SGLang release (roles/sglang's default)")
    parser.add_argument("--torch", default=defaults["sglang_torch_requirement"],
                        help="torch requirement, '' for none (roles/sglang's default)")
    parser.add_argument("--out-dir", type=Path, default=LOCKS, help="where the lock is written (roles/sglang/files/locks)")
    parser.add_argument("--python-version", default="3.11", help="the oldest Python the lock is for")
    parser.add_argument("--index-url")
    parser.add_argument("--extra-index-url", action="append", default=[])
    parser.add_argument("--find-links", action="append", default=[])
    parser.add_argument("--no-index", action="store_true")
    sibling = Path(sys.executable).parent / "uv"
    parser.add_argument("--uv", default=str(sibling) if sibling.exists() else shutil.which("uv") or "uv",
                        help="uv (requirements.txt pins it into .venv)")
    args = parser.parse_args(argv)
    args.find_links = [str(Path(link).resolve()) if Path(link).exists() else link for link in args.find_links]

    requirements = [f"sglang=={args.version}"] + ([args.torch] if args.torch else [])
    out = args.out_dir / lock_name(args.version, args.torch)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    command = [args.uv, "pip", "compile", "--quiet", "--universal", "--generate-hashes",
               "--python-version", args.python_version, "--no-emit-index-url", "--no-emit-find-links",
               "--custom-compile-command", f"make lock SGLANG_VERSION={args.version}"]
    if args.no_index:
        command.append("--no-index")
    if args.index_url:
        command += ["--index-url", args.index_url]
    for url in args.extra_index_url:
        command += ["--extra-index-url", url]
    for link in args.find_links:
        command += ["--find-links", link]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "requirements.in"
        source.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        # Relative, so the lock's "via" comments name no temporary path.
        command += [source.name, "--output-file", str(out.resolve())]
        result = subprocess.run(command, check=False, cwd=tmp)
    if result.returncode != 0:
        print(f"sglang_lock: uv pip compile failed for {' '.join(requirements)}", file=sys.stderr)
        return result.returncode
    local = [link for link in args.find_links if Path(link).is_dir()]
    if local:
        add_local_hashes(out, local)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
