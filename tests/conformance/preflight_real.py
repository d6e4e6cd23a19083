"""The role's preflight against the real SGLang (issue 36): render a unit as the role does, run the role's own
``sglang-preflight.py`` on it in ``.venv-conformance`` on a pretend GPU host (preflight_host.py), and read its report.

The unit, environment file and ``--config`` file come from the collection's one rendering function
(``sglang_files.server_files``) on the role's variables for the host (tests/unit/rendering.py evaluates them as
Ansible does), with three role variables pointed at this checkout: ``sglang_server_venv`` at ``.venv-conformance``
(the unit runs its python), ``sglang_server_libexec_dir`` at ``roles/sglang_server/files`` (the launcher the
preflight checks the unit runs is the one beside it) and ``sglang_server_config_dir`` at a scratch directory under
``build/`` (the contract refuses directories under ``/tmp``, which every user can write). The model directories are
the conformance fixtures (their ``config.json``), staged under ``sglang_models_dir`` as roles/sglang stages them.

``argv`` replaces the plan's launch arguments before rendering, for configurations the validator refuses (the
incident): the preflight is what stands between such a unit and the stop of a running server when a rule is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "unit"))
sys.path.insert(0, str(REPO / "collections"))

import rendering  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import SETTINGS, server_files  # noqa: E402
from conformance_support import conformance_venv, host_vars  # noqa: E402

SCRATCH = REPO / "build" / "preflight-real"
HOST_SCRIPT = HERE / "preflight_host.py"
FILES = REPO / "roles" / "sglang_server" / "files"
PLANNED_MODEL = "Llama-3.1-8B-Instruct"


@dataclass
class Report:
    """One preflight run: its exit status, its JSON report (its last stdout line), its output, and the unit."""

    id: str
    rc: int
    report: dict[str, Any]
    stdout: str
    stderr: str
    unit: str
    argv: list[str]
    seconds: float


def stage_models(models: dict[str, Any], root: Path) -> Path:
    """Every fixture model's config.json under ``root``/<hf id>, as roles/sglang stages a model."""
    for name, model in models.items():
        target = root / model["hf_id"]
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / "models" / name / "config.json", target / "config.json")
    return root


def render(case: dict[str, Any], models: dict[str, Any], name: str, argv: list[str] | None = None) -> dict[str, Any]:
    """The unit of ``case`` (a cases.yaml case, defaults applied) as the role renders it, written under build/, and the
    preflight job that checks it (preflight_host.py's input). ``argv``: the launch arguments after ``--model-path``,
    in place of the plan's (a configuration the validator refuses)."""
    work = SCRATCH / name
    shutil.rmtree(work, ignore_errors=True)
    (work / "etc").mkdir(parents=True)
    staged = stage_models(models, SCRATCH / "models")
    # A configuration the validator refuses has no plan: the unit is planned for a valid one (the smallest fixture
    # model, default arguments) and gets the case's model and arguments instead.
    planned = case if argv is None else {**case, "model": PLANNED_MODEL, "args": {}, "env": {}}
    hostvars = {**host_vars(planned, models),
                "sglang_models_dir": str(staged),
                "sglang_server_venv": str(conformance_venv().absolute()),
                "sglang_server_libexec_dir": str(FILES),
                "sglang_server_config_dir": str(work / "etc")}
    context = rendering.role_context(hostvars)
    plan = dict(context["__sglang_server_plan"])
    if argv is not None:
        plan["argv"] = ["--model-path", str(staged / models[case["model"]]["hf_id"]), *argv]
        plan["config"] = {}
        plan["env"] = {**plan["env"], **{str(k): str(v) for k, v in (case.get("env") or {}).items()}}
    files = server_files(plan, {key: context[key] for key in SETTINGS}, str(REPO / "templates"))
    unit = work / f"{files['service']}.service"
    unit.write_text(files["unit"], encoding="utf-8")
    Path(files["paths"]["env"]).write_text(files["env"], encoding="utf-8")
    if files["config"] is not None:
        Path(files["paths"]["config"]).write_text(files["config"], encoding="utf-8")
    return {"id": name, "unit": str(unit), "env": rendering.parse_env_file(files["env"]),
            "gpus": int(case.get("gpu_count", 8)), "capability": str(case.get("compute_capability", "12.0")),
            "memory_mib": case.get("gpu_memory_mib"), "name": case.get("gpu_name"),
            "integrated": bool(case.get("gpu_integrated")), "unit_text": files["unit"], "argv": files["argv"]}


def run(jobs: list[dict[str, Any]], timeout: int = 300) -> dict[str, Report]:
    """The preflight of every job (:func:`render`'s), in one preflight_host.py process; by job id."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    batch = SCRATCH / "jobs.json"
    batch.write_text(json.dumps([{k: v for k, v in job.items() if k not in ("unit_text", "argv")} for job in jobs]),
                     encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    python = conformance_venv() / "bin" / "python"
    proc = subprocess.run([str(python), str(HOST_SCRIPT), str(batch), "--workdir", str(SCRATCH / "host"),
                           "--timeout", str(timeout)], capture_output=True, text=True,
                          timeout=120 + timeout * len(jobs), env=env, cwd=str(REPO), check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"preflight_host.py failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    by_id = {job["id"]: job for job in jobs}
    out: dict[str, Report] = {}
    for result in json.loads(proc.stdout.splitlines()[-1]):
        lines = [line for line in result["stdout"].splitlines() if line.startswith("{")]
        job = by_id[result["id"]]
        out[result["id"]] = Report(result["id"], result["rc"], json.loads(lines[-1]) if lines else {}, result["stdout"],
                                   result["stderr"], job["unit_text"], job["argv"], result["seconds"])
    return out
