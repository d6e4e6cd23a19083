"""Support code of the conformance tier (imported by conftest.py and the tests).

Runs SGLang 0.5.23's own argument handling (sglang_probe.py in .venv-conformance) over
tests/conformance/cases.yaml once per session, runs our validator over the same cases,
and builds the agreement table.

CI probes a fixed-seed sample of the corpus (CORPUS_SAMPLE, default 8 cases of each family and recorded verdict,
seed 0) and every probe input SGLang has not confirmed yet: a case whose input or recorded verdict is not in the
confirmation record (CONFIRMED_FILE), and the argv our renderer produces for a case where that argv is not in it. It
judges our validator on every case, against the probe's verdict where the case was probed, else against the verdict
cases.yaml records, which the record says SGLang confirmed. The record holds the fingerprints of the inputs SGLang
answered as cases.yaml records (and of the argvs it accepted), with the probe, its parser stubs, the conformance
venv's pins and the fixture models in each; a session adds what it confirmed, and ``make conformance``
(CORPUS_SAMPLE=all), which probes every case, rebuilds it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROBE = HERE / "sglang_probe.py"
CASES_FILE = HERE / "cases.yaml"
REPORT_MD = REPO / "build" / "conformance-report.md"
PROBE_JSON = REPO / "build" / "conformance-probe.json"
SGLANG_VERSION = "0.5.23"
# The probe inputs SGLang confirmed (each session adds what it confirmed; CI probes the sample and what it lacks).
CONFIRMED_FILE = HERE / f"corpus-confirmed-{SGLANG_VERSION}.json"
# What SGLang's answer to a probe input depends on besides the input: the probe, the parser stubs it imports, the
# conformance venv's pins (SGLang's wheel among them) and the fixture models (config.json files, drafts included).
PROBE_DEPENDENCIES = (PROBE, HERE / "sglang_parser_dump.py", REPO / "requirements-conformance.txt")
MODELS_DIR = HERE / "models"
# The fields of a case that state what SGLang does with it (test_sglang_expectation checks each).
EXPECTATION_FIELDS = ("sglang", "sglang_exception", "sglang_message_contains", "sglang_message", "sglang_where",
                      "sglang_resolved", "sglang_warning_contains")

# Where the variant fed with OUR rendered argv is reported.
OURS_ARGV_SUFFIX = "@ours-argv"

# How many corpus cases of each family and recorded verdict CI probes ("all": every case, make conformance), and how
# many units of the valid family test_preflight_real.py runs the real preflight on (every one with "all").
CORPUS_SAMPLE = os.environ.get("CORPUS_SAMPLE", "8")
PREFLIGHT_VALID_SAMPLE = "40"
SAMPLE_SEED = 0


def fixed_seed_sample(cases: list[dict], key: Any, groups: list[Any], per: str, variable: str,
                      seed: int = SAMPLE_SEED) -> list[dict]:
    """The cases to probe: every case for ``all``, else up to ``per`` cases of each group (``key(case)`` equal to it),
    drawn with ``seed`` group after group in the order of ``groups``; the cases' own order is kept, so a report reads
    as the file does. ``variable`` names the setting in the error for anything but a positive number or ``all``."""
    if per == "all":
        return list(cases)
    if not per.isdigit() or int(per) < 1:
        raise ValueError(f"{variable}: a positive number of cases per group, or all, not {per!r}")
    rng = random.Random(seed)
    chosen: set[str] = set()
    for group in groups:
        ids = [c["id"] for c in cases if key(c) == group]
        chosen.update(rng.sample(ids, min(int(per), len(ids))))
    return [c for c in cases if c["id"] in chosen]


def _family_verdict(case: dict) -> tuple[str, str]:
    return str(case.get("family")), str(case["sglang"])


def corpus_sample(cases: list[dict], per: str = CORPUS_SAMPLE) -> list[dict]:
    """The corpus cases CI probes: CORPUS_SAMPLE of each family and recorded verdict (all of them for ``all``)."""
    return fixed_seed_sample(cases, _family_verdict, sorted({_family_verdict(c) for c in cases}), per, "CORPUS_SAMPLE")


def preflight_sample(valid: list[dict], per: str = CORPUS_SAMPLE) -> list[dict]:
    """The valid-family cases test_preflight_real.py renders and runs the real preflight on: PREFLIGHT_VALID_SAMPLE
    of them, or every one when CORPUS_SAMPLE is ``all``."""
    return fixed_seed_sample(valid, lambda c: "valid", ["valid"], "all" if per == "all" else PREFLIGHT_VALID_SAMPLE,
                             "CORPUS_SAMPLE")


@functools.cache
def probe_digest() -> str:
    """sha256 of what every probe answer depends on besides its input (PROBE_DEPENDENCIES, the fixture models)."""
    digest = hashlib.sha256()
    files = [*PROBE_DEPENDENCIES, *sorted(p for p in MODELS_DIR.rglob("*") if p.is_file())]
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def fingerprint(probe_input: dict, expected: dict) -> str:
    """The fingerprint of one probe input (its id aside) with what SGLang is expected to do with it, under
    probe_digest(): equal fingerprints, equal questions to the same SGLang."""
    body = {k: v for k, v in probe_input.items() if k != "id"}
    blob = json.dumps({"probe": probe_digest(), "input": body, "expected": expected}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def case_fingerprint(case: dict) -> str:
    """A corpus case's fingerprint: its probe input and its recorded verdict (EXPECTATION_FIELDS)."""
    return fingerprint(_probe_input(case), {k: case[k] for k in EXPECTATION_FIELDS if k in case})


def argv_fingerprint(case: dict, argv: list[str]) -> str:
    """The fingerprint of the argv our renderer produced for ``case`` (SGLang must accept it). The argv names the model
    as the inventory does (its hub id; the probe maps it to the fixture), so every clone has the same fingerprints."""
    return fingerprint(_probe_input(case, argv=list(argv)), {"sglang": "accept"})


def load_confirmed(path: Path = CONFIRMED_FILE) -> dict[str, str]:
    """The confirmation record: probe input id (a case id, or a case id + OURS_ARGV_SUFFIX) -> fingerprint; empty
    when there is none."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return dict(data.get("confirmed") or {})


def probed_cases(cases: list[dict], per: str = CORPUS_SAMPLE,
                 confirmed: dict[str, str] | None = None) -> list[dict]:
    """The corpus cases a session asks SGLang about: corpus_sample(), and every case whose fingerprint the
    confirmation record does not hold (new, changed, or never confirmed); the corpus's order."""
    record = load_confirmed() if confirmed is None else confirmed
    chosen = {c["id"] for c in corpus_sample(cases, per)}
    chosen.update(c["id"] for c in cases if record.get(c["id"]) != case_fingerprint(c))
    return [c for c in cases if c["id"] in chosen]


def describe(r: dict) -> str:
    """One probe answer in a line: status, exception, where, message, stage."""
    return (f"{r.get('status')} {r.get('exception') or ''} at {r.get('where') or '-'}: "
            f"{(r.get('message') or '')[:300]!r} (stage {r.get('stage')})")


def expectation_failures(case: dict, r: dict) -> list[str]:
    """What SGLang's answer ``r`` (the probe's result for ``case``) contradicts in the case's recorded expectations
    (EXPECTATION_FIELDS); empty when SGLang did what cases.yaml says."""
    said = describe(r)
    want = case["sglang"]
    got = "accept" if r.get("status") == "accepted" else "reject"
    if got != want:
        return [f"{case['id']}: cases.yaml says SGLang will {want}, it did: {said}"]
    out = []
    if want == "reject":
        message = r.get("message") or ""
        if "sglang_exception" in case and r.get("exception") != case["sglang_exception"]:
            out.append(f"{case['id']}: exception {r.get('exception')!r}, cases.yaml says {case['sglang_exception']!r}: {said}")
        if "sglang_message_contains" in case and case["sglang_message_contains"] not in message:
            out.append(f"{case['id']}: the message lacks {case['sglang_message_contains']!r}: {said}")
        if "sglang_message" in case and message != case["sglang_message"]:  # exact (e.g. the empty assertion message)
            out.append(f"{case['id']}: the message is not {case['sglang_message']!r}: {said}")
        if "sglang_where" in case and case["sglang_where"] not in (r.get("where") or ""):
            out.append(f"{case['id']}: raised at {r.get('where')!r}, cases.yaml says {case['sglang_where']!r}: {said}")
    resolved = r.get("resolved") or {}
    for field, value in (case.get("sglang_resolved") or {}).items():
        if resolved.get(field) != value:
            out.append(f"{case['id']}: SGLang resolved {field}={resolved.get(field)!r}, cases.yaml says {value!r}")
    if "sglang_warning_contains" in case and not any(case["sglang_warning_contains"] in w for w in r.get("warnings") or []):
        out.append(f"{case['id']}: no warning containing {case['sglang_warning_contains']!r}: {r.get('warnings')}")
    return out


def conformance_venv() -> Path:
    return Path(os.environ.get("CONFORMANCE_VENV", REPO / ".venv-conformance"))


def load_cases() -> tuple[list[dict], dict]:
    """The cases with defaults applied, and the model table."""
    data = yaml.safe_load(CASES_FILE.read_text())
    defaults = data.get("defaults") or {}
    models = data.get("models") or {}
    cases = []
    for raw in data["cases"]:
        case = {**defaults, **raw}
        case.setdefault("args", {})
        case.setdefault("env", {})
        cases.append(case)
    return cases, models


def _import_validator():
    """Our validator, imported lazily: the probe side works without it."""
    collections = str(REPO / "collections")
    if collections not in sys.path:
        sys.path.insert(0, collections)
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import (  # noqa: E501
        validate_host,
    )

    return validate_host


def host_vars(case: dict, models: dict) -> dict:
    """A case as an inventory host's variables, for validate_host()."""
    model = models[case["model"]]
    hv: dict[str, Any] = {
        "sglang_version": SGLANG_VERSION,
        "sglang_model_path": model["hf_id"],
        "sglang_args": dict(case.get("args") or {}),
        "sglang_env": dict(case.get("env") or {}),
        "nvidia_gpu_count": int(case.get("gpu_count", 8)),
        "nvidia_gpu_compute_capability": str(case.get("compute_capability", "12.0")),
    }
    # What the fixture's config.json says, so both sides know the same model facts.
    for key, var in (
        ("architecture", "sglang_model_architecture"),
        ("quantization", "sglang_model_quantization"),
        ("max_context", "sglang_model_max_context"),
    ):
        if model.get(key) is not None:
            hv[var] = model[key]
    return hv


def _probe_input(case: dict, **extra) -> dict:
    out = {
        "id": case["id"],
        "model": case["model"],
        "args": case.get("args") or {},
        "env": case.get("env") or {},
        "gpu_count": int(case.get("gpu_count", 8)),
        "compute_capability": str(case.get("compute_capability", "12.0")),
    }
    # The GPU the probe pretends (name, memory, unified memory), where the case names one (differential.py's GPUS).
    out.update({k: case[k] for k in ("gpu_name", "gpu_memory_mib", "gpu_integrated") if case.get(k) is not None})
    out.update(extra)
    return out


def validate_cases(cases: list[dict], models: dict, *, gpu_memory: bool = False,
                   contexts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Our validator's Result per case id (an Exception where it crashed: a crash is a finding). ``gpu_memory``: tell
    the validator the GPU memory the probe pretends (a case's gpu_memory_mib), as a host's GPU facts do.
    ``contexts``: filled with each case's rule Context as the rules saw it (resolution.py reads our resolver's values
    from it)."""
    validate_host = _import_validator()
    from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_validate  # noqa: PLC0415

    seen: list[Any] = []
    run_rules = sglang_validate.run_rules

    def keeping(ctx: Any) -> None:
        seen.append(ctx)
        run_rules(ctx)

    results: dict[str, Any] = {}
    with mock.patch.object(sglang_validate, "run_rules", keeping) if contexts is not None else contextlib.nullcontext():
        for case in cases:
            hv = host_vars(case, models)
            if gpu_memory and case.get("gpu_memory_mib"):
                hv["nvidia_gpu_memory_mib"] = int(case["gpu_memory_mib"])
            seen.clear()
            try:
                results[case["id"]] = validate_host(hv, spec="keep")
            except Exception as exc:  # noqa: BLE001 - reported by the caller
                results[case["id"]] = exc
            if contexts is not None and seen:
                contexts[case["id"]] = seen[-1]
    return results


class ProbeError(RuntimeError):
    """sglang_probe.py could not give verdicts (no conformance venv, a crash, no JSON)."""


def run_sglang_probe(payload: list[dict], timeout: int = 1800) -> dict:
    """SGLang's own verdicts on ``payload`` (sglang_probe.py inside .venv-conformance): the probe's JSON output."""
    venv = conformance_venv()
    python = venv / "bin" / "python"
    if not python.exists():
        raise ProbeError(f"the conformance venv {venv} is missing: run tests/conformance/setup-venv.sh "
                         "(creates .venv-conformance with sglang==0.5.23, a few minutes, PyPI only)")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "SGL_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [str(python), str(PROBE), "--timeout", "180"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(REPO),
    )
    if proc.returncode != 0:
        raise ProbeError(f"sglang_probe.py failed (exit {proc.returncode}) in {venv}:\n"
                         f"{proc.stderr[-4000:]}\n(rebuild with tests/conformance/setup-venv.sh --force)")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise ProbeError(f"sglang_probe.py printed no JSON:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}") from None


class Conformance:
    """Results of one session: SGLang's verdicts and ours."""

    def __init__(self) -> None:
        self.cases, self.models = load_cases()
        self.by_id = {c["id"]: c for c in self.cases}
        # The cases SGLang is asked about in this session (probed_cases: the sample and what the record lacks); the
        # rest are judged by the verdict cases.yaml records, which the record says SGLang confirmed.
        self.confirmed = load_confirmed()
        self.sampled = probed_cases(self.cases, confirmed=self.confirmed)
        self.probed = {c["id"] for c in self.sampled}
        self.sample_size = len(corpus_sample(self.cases))
        self.record_written = False
        self.sglang: dict[str, dict] = {}
        self.ours: dict[str, Any] = {}  # id -> Result, or an Exception
        self.contexts: dict[str, Any] = {}  # id -> the rules' Context (resolution.py)
        self.validator_error: str | None = None
        self.probe_meta: dict = {}

    # ---- our side ------------------------------------------------------------
    def run_ours(self) -> None:
        try:
            self.ours = validate_cases(self.cases, self.models, contexts=self.contexts)
        except Exception as exc:  # noqa: BLE001 - the import failed: reported by every agreement test
            self.validator_error = f"{type(exc).__name__}: {exc}"

    # ---- SGLang's side -------------------------------------------------------
    def argv_confirmed(self, case: dict) -> bool:
        """Whether the record holds the argv our renderer produced for ``case`` (SGLang accepted it)."""
        argv = getattr(self.ours.get(case["id"]), "argv", None) or []
        return self.confirmed.get(case["id"] + OURS_ARGV_SUFFIX) == argv_fingerprint(case, argv)

    def run_probe(self) -> None:
        payload = [_probe_input(c) for c in self.sampled]
        # Our argv of every case probed, and of every other case our validator accepts whose argv is not confirmed.
        for case in self.cases:
            res = self.ours.get(case["id"])
            argv = getattr(res, "argv", None)
            if getattr(res, "ok", False) and argv and (case["id"] in self.probed or not self.argv_confirmed(case)):
                payload.append(
                    _probe_input(case, id=case["id"] + OURS_ARGV_SUFFIX, argv=list(argv))
                )
        t0 = time.monotonic()
        try:
            out = run_sglang_probe(payload)
        except ProbeError as exc:
            pytest.fail(str(exc), pytrace=False)
        self.probe_meta = {k: v for k, v in out.items() if k != "results"}
        self.probe_meta["wall_seconds"] = round(time.monotonic() - t0, 1)
        self.probe_meta["cases"] = len(payload)
        for r in out["results"]:
            self.sglang[r["id"]] = r
        PROBE_JSON.parent.mkdir(parents=True, exist_ok=True)
        PROBE_JSON.write_text(json.dumps(out, indent=1) + "\n")

    def confirmation_record(self) -> dict[str, str]:
        """What this session's probe confirmed: the fingerprint of each case SGLang answered as cases.yaml records,
        and of each argv of ours it accepted."""
        record: dict[str, str] = {}
        for case in self.cases:
            r = self.sglang.get(case["id"])
            if (case["id"] in self.probed and r is not None and r.get("status") in ("accepted", "rejected")
                    and not expectation_failures(case, r)):
                record[case["id"]] = case_fingerprint(case)
            variant = self.sglang.get(case["id"] + OURS_ARGV_SUFFIX)
            if variant is not None and variant.get("status") == "accepted":
                record[case["id"] + OURS_ARGV_SUFFIX] = argv_fingerprint(case, self.ours[case["id"]].argv)
        return record

    def current_record(self) -> dict[str, str]:
        """The entries of the record loaded at the start that still hold: a case's, or its argv's, fingerprint as the
        case and our renderer are now."""
        kept: dict[str, str] = {}
        for case in self.cases:
            cid = case["id"]
            if self.confirmed.get(cid) == case_fingerprint(case):
                kept[cid] = self.confirmed[cid]
            if self.confirmed.get(cid + OURS_ARGV_SUFFIX) and self.argv_confirmed(case):
                kept[cid + OURS_ARGV_SUFFIX] = self.confirmed[cid + OURS_ARGV_SUFFIX]
        return kept

    def write_confirmation_record(self, path: Path = CONFIRMED_FILE) -> bool:
        """Bring the record up to date: the old entries that still hold and what this session confirmed (a session that
        probed every case confirms every entry anew; entries of cases no longer in the corpus go). Written only when
        that differs from the file; True when it was."""
        record = {**self.current_record(), **self.confirmation_record()}
        if record == self.confirmed:
            return False
        body = {
            "about": ("Corpus probe inputs SGLang confirmed: case id (or case id + @ours-argv) -> fingerprint "
                      "(tests/conformance/conformance_support.py). Brought up to date by every conformance run that "
                      "probed what it lacked; commit it."),
            "sglang": SGLANG_VERSION,
            "confirmed": dict(sorted(record.items())),
        }
        path.write_text(json.dumps(body, indent=0) + "\n")
        return True


_STATE: dict[str, Conformance] = {}


def session_conformance() -> Conformance:
    """The session's results, computed on first use."""
    if "c" not in _STATE:
        c = Conformance()
        c.run_ours()
        c.run_probe()
        c.record_written = c.write_confirmation_record()
        _STATE["c"] = c
    return _STATE["c"]


# --------------------------------------------------------------------------
# Agreement table.
# --------------------------------------------------------------------------


def _sglang_cell(r: dict | None) -> str:
    if not r:
        return "not run"
    if r.get("status") == "accepted":
        res = r.get("resolved") or {}
        extra = ""
        if res.get("speculative_algorithm"):
            extra = " spec={}({},{},{})".format(
                res.get("speculative_algorithm"),
                res.get("speculative_num_steps"),
                res.get("speculative_eagle_topk"),
                res.get("speculative_num_draft_tokens"),
            )
        return "accept" + extra
    if r.get("status") == "rejected":
        msg = (r.get("message") or "").replace("\n", " ").replace("|", "\\|")
        if len(msg) > 70:
            msg = msg[:67] + "..."
        return f"reject {r.get('exception')} @ {r.get('where')}: \"{msg}\""
    return f"PROBE ERROR {r.get('exception')}: {(r.get('message') or '')[:80]}"


def _ours_cell(res: Any) -> str:
    if res is None:
        return "n/a"
    if isinstance(res, Exception):
        return f"CRASH {type(res).__name__}: {str(res)[:60]}"
    if res.ok:
        warn = sorted({p.rule for p in res.warnings})
        return "accept" + (f" (warn: {', '.join(warn)})" if warn else "")
    return "reject: " + ", ".join(sorted({p.rule for p in res.errors}))


def _agreement(r: dict | None, res: Any, preflight_only: bool = False) -> str:
    if not r or r.get("status") not in ("accepted", "rejected"):
        return "PROBE ERROR"
    if res is None or isinstance(res, Exception):
        return "n/a"
    s_ok = r["status"] == "accepted"
    if preflight_only and not s_ok and res.ok:
        return "the preflight's (ok)"  # `ours: preflight`: only config.json decides; test_preflight_real.py
    if s_ok == res.ok:
        return "agree"
    if s_ok and not res.ok:
        return "stricter (ok)"
    return "VIOLATION"


def build_report(c: Conformance) -> str:
    lines = [
        f"# Conformance report: our validator vs SGLang {SGLANG_VERSION}",
        "",
        "SGLang side: `prepare_server_args -> resolve_once -> check_server_args` inside "
        ".venv-conformance, pretending to be the reference host (SM120, 97887 MiB GPUs).",
        "Requirement (one-directional): SGLang rejects => we reject; we accept => SGLang accepts.",
        "",
    ]
    if c.validator_error:
        lines += [f"**Our validator could not be imported:** `{c.validator_error}`", ""]
    meta = c.probe_meta
    if meta:
        lines += [
            f"Probe: {meta.get('cases')} runs in {meta.get('wall_seconds')} s "
            f"(warm-up {meta.get('warmup_seconds')} s; stubbed: {', '.join(meta.get('stubbed_modules') or [])}).",
            f"Cases probed: {len(c.sampled)} of {len(c.cases)}: the sample (CORPUS_SAMPLE={CORPUS_SAMPLE}, "
            f"{c.sample_size}) and {len(c.sampled) - c.sample_size} more whose input or recorded verdict "
            f"{CONFIRMED_FILE.name} does not hold; the table lists those."
            + (f" {CONFIRMED_FILE.relative_to(REPO)} was brought up to date: commit it." if c.record_written else ""),
            "",
        ]
    lines += [
        "| case | family | SGLang | ours | agreement |",
        "| --- | --- | --- | --- | --- |",
    ]
    counts: dict[str, int] = {}
    for case in c.sampled:
        cid = case["id"]
        r = c.sglang.get(cid)
        res = c.ours.get(cid)
        agree = _agreement(r, res, case.get("ours") == "preflight")
        counts[agree] = counts.get(agree, 0) + 1
        ours = _ours_cell(res)
        variant = c.sglang.get(cid + OURS_ARGV_SUFFIX)
        if variant is not None and variant.get("status") != "accepted" and case.get("ours") != "preflight":
            ours += f" / OUR ARGV: {_sglang_cell(variant)}"
            if agree == "agree":
                agree = "VIOLATION (our argv)"
        lines.append(
            f"| {cid} | {case.get('family', '')} | {_sglang_cell(r)} | {ours} | {agree} |"
        )
    lines += ["", "Totals: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), ""]
    return "\n".join(lines)
