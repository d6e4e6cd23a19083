"""SGLang's own verdict on every start of the stand-in in a molecule scenario (issue 36: "the simulated host asks
SGLang itself").

The simulated hosts run the SGLang stand-in (tests/fixtures/sglang_standin), whose argument handling is a model of
SGLang's. Each time it starts it writes one record line to the journal (``sglang._standin.server.START_RECORD``):
its argv, the names of the ``--config`` file's options (never their values: the role writes only secrets there), the
SGLang switches of its environment, the GPUs nvidia-smi reported, the JSON files of each directory an argument names
(a model's configuration), and whether it accepted or refused the start.

At the end of a scenario's verify (molecule/conftest.py) this module reads those records back from every container
of the scenario and asks SGLang 0.5.23 itself, in ``.venv-conformance`` (tests/conformance/sglang_probe.py: its
``prepare_server_args -> resolve_once -> check_server_args`` on pretend GPUs described by the record), for each
distinct start. A start the stand-in accepted and SGLang refuses (or the other way round), or one SGLang could not
be asked about, fails the scenario, naming the host, the arguments and SGLang's exception with its file:line.

Why not real SGLang inside the image: see tests/fixtures/sglang_standin/README.md ("Judged by SGLang").
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MARKER = "sglang-standin-start "
# What an option of the --config file (a secret: API keys, a key password) is replaced by: SGLang's checks only ask
# whether it is set.
PLACEHOLDER = "judged-placeholder"
PREFLIGHT = REPO / "roles" / "sglang_server" / "files" / "sglang-preflight.py"
MIB = 1024 * 1024
FIXTURE_MODELS = REPO / "tests" / "conformance" / "models"  # the probe's checkpoints' config.json (their real ones)


def _preflight() -> ModuleType:
    """The role's preflight script, for its nvidia-smi reader (parse_gpus) and CUDA_VISIBLE_DEVICES (visible)."""
    spec = importlib.util.spec_from_file_location("sglang_preflight_for_judge", PREFLIGHT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def _conformance() -> ModuleType:
    sys.path.insert(0, str(REPO / "tests" / "conformance"))
    import conformance_support

    return conformance_support


def parse_records(journal: str) -> list[dict[str, Any]]:
    """The stand-in's start records among the journal's messages (``journalctl -o cat``), in order."""
    found = []
    for line in journal.splitlines():
        at = line.find(MARKER)
        if at < 0:
            continue
        try:
            record = json.loads(line[at + len(MARKER):])
        except ValueError:
            raise ValueError(f"a start record that is not JSON (cut by the journal?): {line[:300]}") from None
        if isinstance(record, dict) and isinstance(record.get("argv"), list):
            found.append(record)
    return found


def scenario_containers(scenario_dir: Path) -> list[str]:
    """The platform (container) names of the scenario's molecule.yml."""
    config = yaml.safe_load((scenario_dir / "molecule.yml").read_text(encoding="utf-8")) or {}
    return [str(p["name"]) for p in config.get("platforms") or [] if p.get("name")]


def _mirror(paths: dict[str, Any], root: Path) -> dict[str, str]:
    """Recreate under ``root`` what the record says of each path (a directory's JSON files, an empty file in place of
    a file); the local path of each."""
    local = {}
    for path, fact in sorted(paths.items()):
        target = root / path.lstrip("/")
        local[path] = str(target)
        if isinstance(fact, dict):
            target.mkdir(parents=True, exist_ok=True)
            for name, text in (fact.get("json") or {}).items():
                if "/" not in name and name not in (".", ".."):
                    (target / name).write_text(text, encoding="utf-8")
        elif fact == "file":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
    return local


def _without_config(argv: list[str]) -> list[str]:
    if "--config" in argv[:-1]:
        at = argv.index("--config")
        return argv[:at] + argv[at + 2:]
    return list(argv)


def probe_case(record: dict[str, Any], root: Path, ident: str, preflight: ModuleType) -> dict[str, Any]:
    """The probe's case for one start record (sglang_probe.py's input), its files mirrored under ``root``.

    The ``--config`` file's options come first (SGLang merges them before the command line), each with a
    placeholder value; every absolute path becomes its mirror; the GPUs are those the service saw (nvidia-smi,
    narrowed by CUDA_VISIBLE_DEVICES as CUDA narrows them), described by the first.
    """
    local = _mirror(record.get("paths") or {}, root)
    argv = [f"--{key}" for key in record.get("config_keys") or []]
    argv = [word for key in argv for word in (key, PLACEHOLDER)]
    argv += [local.get(word, word) for word in _without_config([str(w) for w in record["argv"]])]
    env = dict(record.get("env") or {})
    devices = preflight.visible(preflight.parse_gpus(str(record.get("gpus") or ""), record.get("mem_total")),
                                env.pop("CUDA_VISIBLE_DEVICES", None))
    case: dict[str, Any] = {"id": ident, "argv": argv, "env": env, "gpu_count": len(devices)}
    model = next((argv[i + 1] for i, w in enumerate(argv[:-1]) if w in ("--model-path", "--model")), None)
    if model and Path(model).is_absolute():
        case["model"] = model
    elif model and (FIXTURE_MODELS / model.rsplit("/", 1)[-1] / "config.json").is_file():
        # A hub id the host did not stage (SGLang would fetch its config.json at the start): the probe's copy of that
        # checkpoint's configuration. Any other hub id is asked about as is, and SGLang, offline, refuses it.
        case["model"] = str(FIXTURE_MODELS / model.rsplit("/", 1)[-1])
    if devices:
        first = devices[0]
        major, minor = first["capability"]
        case.update(compute_capability=f"{major}.{minor}", gpu_name=first["name"],
                    gpu_memory_mib=first["total"] // MIB, gpu_integrated=bool(first["unified"]))
    return case


def agrees(standin: str, verdict: dict[str, Any]) -> bool:
    """Whether the stand-in's outcome ("accepted" / "refused: Exception") is SGLang's verdict."""
    if verdict.get("status") == "accepted":
        return standin == "accepted"
    if verdict.get("status") == "rejected":
        return standin.startswith("refused")
    return False  # probe_error: no verdict


def resolved_differently(record: dict[str, Any], verdict: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What the stand-in resolved (its record's ``resolved``: the speculative choice) that SGLang resolved otherwise,
    as {name: (stand-in's, SGLang's)}; only for a start both accepted."""
    if verdict.get("status") != "accepted":
        return {}
    sglang = verdict.get("resolved") or {}
    return {k: (v, sglang.get(k)) for k, v in sorted((record.get("resolved") or {}).items()) if sglang.get(k) != v}


@dataclass
class Start:
    record: dict[str, Any]
    hosts: set[str] = field(default_factory=set)
    count: int = 0


@dataclass
class Judgement:
    starts: int = 0  # records read
    distinct: int = 0  # distinct starts asked about
    accepted: int = 0  # ... that SGLang accepted
    rejected: int = 0  # ... that SGLang refused (as the stand-in did)
    seconds: float = 0.0
    hosts: dict[str, int] = field(default_factory=dict)  # host -> its records
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        where = ", ".join(f"{h} {n}" for h, n in sorted(self.hosts.items())) or "no host"
        return (f"SGLang judged {self.distinct} distinct stand-in starts ({self.starts} in all: {where}) in "
                f"{self.seconds:.1f} s: {self.accepted} accepted, {self.rejected} refused, "
                f"{len(self.problems)} disagreements")


def _key(record: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({k: v for k, v in record.items() if k != "version"}, sort_keys=True)
                          .encode()).hexdigest()


def judge(records: dict[str, list[dict[str, Any]]], workdir: Path, run_probe: Any = None) -> Judgement:
    """SGLang's verdicts on ``records`` (host -> its start records); ``run_probe`` is the probe's runner
    (conformance_support.run_sglang_probe unless given)."""
    preflight = _preflight()
    result = Judgement()
    starts: dict[str, Start] = {}
    for host, recs in records.items():
        result.hosts[host] = len(recs)
        for record in recs:
            result.starts += 1
            start = starts.setdefault(_key(record), Start(record))
            start.hosts.add(host)
            start.count += 1
    if not starts:
        return result
    cases, by_id = [], {}
    for n, (key, start) in enumerate(sorted(starts.items())):
        ident = f"start-{n}-{key[:10]}"
        cases.append(probe_case(start.record, workdir / ident, ident, preflight))
        by_id[ident] = start
    runner = run_probe or _conformance().run_sglang_probe
    t0 = time.monotonic()
    verdicts = {v.get("id"): v for v in runner(cases)["results"]}
    result.seconds = time.monotonic() - t0
    result.distinct = len(cases)
    for case in cases:
        start, verdict = by_id[case["id"]], verdicts.get(case["id"]) or {"status": "missing"}
        outcome = str(start.record.get("standin") or "")
        if verdict.get("status") == "accepted":
            result.accepted += 1
        elif verdict.get("status") == "rejected":
            result.rejected += 1
        if agrees(outcome, verdict):
            differ = resolved_differently(start.record, verdict)
            if differ:
                result.problems.append(
                    f"{', '.join(sorted(start.hosts))} ({start.count} start(s)): the stand-in and SGLang "
                    f"{start.record.get('version')} both accepted, but resolved "
                    + ", ".join(f"{k} to {a!r} and {b!r}" for k, (a, b) in differ.items())
                    + f"\n    argv: {json.dumps(start.record['argv'])}")
            continue
        said = ("accepted" if verdict.get("status") == "accepted" else
                f"{verdict.get('status')}: {verdict.get('exception')} at {verdict.get('where')}: "
                f"{str(verdict.get('message') or '')[:400]}")
        result.problems.append(
            f"{', '.join(sorted(start.hosts))} ({start.count} start(s)): the stand-in {outcome or 'left no outcome'}, "
            f"SGLang {start.record.get('version')} {said}\n    argv: {json.dumps(start.record['argv'])}\n"
            f"    env: {json.dumps(start.record.get('env') or {})}; asked as: {json.dumps(case)}")
    return result


def read_host(container: str, timeout: int = 120) -> list[dict[str, Any]]:
    """The start records in ``container``'s journal; [] when the container is not running."""
    running = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", container],
                             capture_output=True, text=True, timeout=timeout, check=False)
    if running.stdout.strip() != "true":
        return []
    proc = subprocess.run(["docker", "exec", container, "journalctl", "-o", "cat", "--no-pager", "-q"],
                          capture_output=True, text=True, timeout=timeout, check=False, errors="replace")
    if proc.returncode in (126, 127):  # no journalctl: not a simulated GPU host (a monitoring container)
        return []
    if proc.returncode != 0:
        raise RuntimeError(f"journalctl in {container} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return parse_records(proc.stdout)


def judge_scenario(scenario_dir: Path, workdir: Path) -> Judgement:
    """Every start of the stand-in in the scenario's running containers, judged by SGLang."""
    records = {c: read_host(c) for c in scenario_containers(scenario_dir)}
    return judge({h: r for h, r in records.items() if r}, workdir)


if __name__ == "__main__":  # python molecule/shared/sglang_judge.py SCENARIO_DIR: judge a scenario left running
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sglang-judge-") as tmp:
        outcome = judge_scenario(Path(sys.argv[1] if len(sys.argv) > 1 else os.getcwd()), Path(tmp))
    print(outcome.summary())
    print("\n".join(outcome.problems))
    sys.exit(1 if outcome.problems else 0)
