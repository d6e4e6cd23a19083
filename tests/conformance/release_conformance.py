#!/usr/bin/env python3
"""The conformance cases (cases.yaml) against an older SGLang release's own resolver: a report, not yet a gate.

    .venv/bin/python tests/conformance/release_conformance.py --version 0.5.22 [--report build/conformance-0.5.22.md]

The release's wheel (``make wheels``) is unpacked as for the parser check (sglang_parser_dump.py) and put first
on the probe's ``PYTHONPATH`` inside ``.venv-conformance``, so sglang_probe.py runs that release's
``prepare_server_args`` / ``resolve_once`` / ``check_server_args`` beside 0.5.23's dependencies. Our validator runs
each case with ``sglang_version`` set to the release. Per case: whether the release agrees with what cases.yaml
records for 0.5.23, and MISSED when the release rejects what our validator accepts for it, with the rule ids that
reject the case for 0.5.23 (the rules whose ``since=`` is probably too late). Exit 1 when anything is MISSED.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import conformance_support as cs  # noqa: E402
import parser_check  # noqa: E402
from sglang_parser_dump import unpack  # noqa: E402


def run_probe(version: str, payload: list[dict]) -> dict[str, dict]:
    wheel = parser_check.WHEEL_DIR / parser_check.schema_of(version)["wheel"]["filename"]
    if not wheel.is_file():
        raise SystemExit(f"{wheel} is missing: run `make wheels`")
    tree = unpack(wheel, parser_check.TREE_DIR / version)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    python = cs.conformance_venv() / "bin" / "python"
    where = subprocess.run([str(python), "-c", "import importlib.util; print(importlib.util.find_spec('sglang').origin)"],
                           capture_output=True, text=True, env=env, check=True).stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"the probe would import sglang from {where}, not the release in {tree}")
    proc = subprocess.run([str(python), str(cs.PROBE), "--timeout", "180"], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, cwd=str(cs.REPO), timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"sglang_probe.py failed for {version}:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout)
    return {r["id"]: r for r in out["results"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--report", type=Path, help="also write the table here (markdown)")
    opts = ap.parse_args(argv)
    cs._import_validator()  # noqa: SLF001 - puts the collection on sys.path
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host

    cases, models = cs.load_cases()
    start = time.monotonic()
    sglang = run_probe(opts.version, [cs._probe_input(c) for c in cases])  # noqa: SLF001
    counts = {"agree with 0.5.23": 0, "differ from 0.5.23": 0, "probe errors": 0, "MISSED": 0, "the preflight's": 0}
    lines = []
    for case in cases:
        hv = cs.host_vars(case, models)
        ours = validate_host({**hv, "sglang_version": opts.version}, spec="keep")
        got = sglang[case["id"]]
        if got["status"] == "probe_error":
            counts["probe errors"] += 1
            lines.append(f"| `{case['id']}` | probe error | {got.get('exception')}: {(got.get('message') or '')[:120]} |")
            continue
        verdict = "accept" if got["status"] == "accepted" else "reject"
        counts["agree with 0.5.23" if verdict == case["sglang"] else "differ from 0.5.23"] += 1
        if verdict == "reject" and ours.ok and case.get("ours") == "preflight":
            counts["the preflight's"] += 1  # only the checkpoint's config.json decides it (test_preflight_real.py)
        elif verdict == "reject" and ours.ok:
            counts["MISSED"] += 1
            newest = validate_host({**hv, "sglang_version": parser_check.committed_versions()[-1]}, spec="keep")
            rules = ", ".join(sorted({p.rule for p in newest.errors})) or "none"
            message = (got.get("message") or "").replace("\n", " ").replace("|", "\\|")[:140]
            lines.append(f"| `{case['id']}` | MISSED | {got.get('exception')}: {message} (rejected for 0.5.23 by: {rules}) |")
        elif verdict != case["sglang"]:
            lines.append(f"| `{case['id']}` | {opts.version} {verdict}s, 0.5.23 {case['sglang']}s | |")
    head = (f"SGLang {opts.version}: {len(cases)} cases in {time.monotonic() - start:.0f}s: "
            + ", ".join(f"{n} {k}" for k, n in counts.items()))
    text = "\n".join([f"# Conformance cases against SGLang {opts.version}", "", head, "",
                      "| case | finding | detail |", "| --- | --- | --- |", *lines]) + "\n"
    if opts.report:
        opts.report.parent.mkdir(parents=True, exist_ok=True)
        opts.report.write_text(text, encoding="utf-8")
    print(text if len(lines) < 60 else "\n".join([head, *lines[:60], f"... ({len(lines) - 60} more)"]))
    return 1 if counts["MISSED"] else 0


if __name__ == "__main__":
    sys.exit(main())
