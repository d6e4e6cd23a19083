"""playbooks/bench.yml on one simulated GPU host that runs the stand-in SGLang server: shared end-to-end cases.

The host (tests/fixtures/simhost, reached with the docker connection) must run one instance, ``sglang``, deployed
from the inventory given (speculative decoding NEXTN, sglang_spec keep). The cases, in order:

1. two candidates (off, and a triple) are validated, restarted into and benchmarked: bench.txt and bench.json exist
   with the figures (output tokens/s, TTFT and ITL p50/p99, acceptance length), marked synthetic; the best candidate
   and the lines that adopt it are printed; the host's files (unit, environment, spec record) are the same as before;
2. a malformed candidate is refused, naming spec_candidates[1], and a candidate the validator refuses stops the run
   before anything changes;
3. a forced failure after the canary was restarted into a candidate (an option the benchmark does not know) fails
   the run, and the original plan is back: the same files, the server healthy with its own speculative settings;
4. a second, plain run (no candidates) leaves the host's files as they were.

Used by molecule/standalone/tests/test_standalone.py (its container, molecule's inventory); run by hand against
another host with ``python3 molecule/shared/bench_cases.py INVENTORY HOST [EXTRA_VARS_FILE ...]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[2]))
# Files of the deployed instance whose content must survive a benchmark unchanged.
FILES = ("/etc/systemd/system/sglang.service", "/etc/sglang/sglang.env", "/etc/sglang/sglang.spec.json")
# A small workload, so that a candidate takes seconds.
WORKLOAD = {"sglang_bench_num_prompts": 8, "sglang_bench_input_len": 128, "sglang_bench_output_len": 32}
TRIPLE = {"speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3}


def docker(host: str, script: str) -> str:
    return subprocess.run(["docker", "exec", host, "sh", "-c", script], capture_output=True, text=True,
                          check=True, timeout=120).stdout


def fingerprint(host: str) -> str:
    """The deployed files' checksums and the running server's main PID."""
    return docker(host, f"sha256sum {' '.join(FILES)}")


# Extra-vars files every run takes (run_all's vars_files: the scenario's fixture settings, e.g. its router's port).
VARS_FILES: list[Path] = []


def bench(inventory: Path, out: Path, **extra: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    extravars = {**WORKLOAD, "bench_dir": str(out), **extra}
    files = [arg for path in VARS_FILES for arg in ("-e", f"@{path}")]
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           str(REPO / "playbooks" / "bench.yml"), *files, "-e", json.dumps(extravars)],
                          capture_output=True, text=True, env=env, timeout=1500, check=False)


def server_info(host: str) -> dict:
    return json.loads(docker(host, "curl -fsS http://127.0.0.1:30000/server_info"))


def case_candidates(inventory: Path, host: str, work: Path) -> None:
    before = fingerprint(host)
    run = bench(inventory, work / "one", spec_candidates=["off", TRIPLE])
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr
    report = json.loads((work / "one" / "bench.json").read_text())
    table = (work / "one" / "bench.txt").read_text()
    assert [r["label"] for r in report["runs"]] == ["off", "steps=2 topk=1 draft=3"], report
    for row in report["runs"]:
        for key in ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms"):
            assert isinstance(row[key], float) and row[key] > 0, (row["label"], key, row)
        assert row["synthetic"] is True and row["argv"][:1] == ["--model-path"], row
    off, triple = report["runs"]
    assert off["accept_length"] is None and "--speculative-algorithm" not in off["argv"]
    assert triple["accept_length"] == 2.1 and triple["argv"][triple["argv"].index("--speculative-num-steps") + 1] == "2"
    assert report["best"]["label"] == "steps=2 topk=1 draft=3", report["best"]
    assert report["adopt"][0] == "sglang_spec: explicit" and "  speculative_num_steps: 2" in report["adopt"]
    assert "synthetic (stand-in server)" in table and "best: steps=2 topk=1 draft=3" in table
    assert "best: steps=2 topk=1 draft=3" in run.stdout and "sglang_spec: explicit" in run.stdout
    assert fingerprint(host) == before, "the original plan is not back"
    marker = json.loads(docker(host, f"cat {FILES[2]}"))
    assert marker["override"] is False, marker
    assert server_info(host)["speculative_num_steps"] == 3  # SGLang's auto choice for the host's own NEXTN


def case_refused(inventory: Path, host: str, work: Path) -> None:
    before = fingerprint(host)
    run = bench(inventory, work / "bad", spec_candidates=["auto", {"speculative_num_steps": "x"}])
    assert run.returncode != 0 and "spec_candidates[1]" in run.stdout, run.stdout[-4000:]
    refused = {"speculative_num_steps": 3, "speculative_eagle_topk": 0, "speculative_num_draft_tokens": 4}
    run = bench(inventory, work / "refused", spec_candidates=["off", refused])
    assert run.returncode != 0 and "spec_candidates[1] refused" in run.stdout, run.stdout[-4000:]
    assert "Nothing was changed" in run.stdout
    assert fingerprint(host) == before


def case_forced_failure(inventory: Path, host: str, work: Path) -> None:
    before = fingerprint(host)
    run = bench(inventory, work / "fail", spec_candidates=["off"], sglang_bench_extra_args=["--no-such-option"])
    assert run.returncode != 0, run.stdout[-4000:]
    assert "The original plan was restored" in run.stdout, run.stdout[-4000:]
    assert "Restart the canary into its original plan" in run.stdout
    assert fingerprint(host) == before
    assert server_info(host)["speculative_algorithm"] == "EAGLE"  # NEXTN, resolved: speculative decoding is back
    rows = json.loads((work / "fail" / "bench.json").read_text())["runs"]
    assert rows[-1]["error"].startswith("failed:"), rows


def case_plain_run_changes_nothing(inventory: Path, host: str, work: Path) -> None:
    before = fingerprint(host)
    pid = docker(host, "systemctl show -p MainPID --value sglang.service")
    run = bench(inventory, work / "plain")
    assert run.returncode == 0, run.stdout[-4000:]
    rows = json.loads((work / "plain" / "bench.json").read_text())["runs"]
    assert [r["label"] for r in rows] == ["current"] and rows[0]["accept_length"] == 2.65
    assert fingerprint(host) == before
    assert docker(host, "systemctl show -p MainPID --value sglang.service") == pid  # not restarted


CASES = (case_candidates, case_refused, case_forced_failure, case_plain_run_changes_nothing)


def run_all(inventory: Path, host: str, vars_files: tuple[Path, ...] = (),
            cases: tuple[Callable[[Path, str, Path], None], ...] = CASES) -> None:
    """Run ``cases`` (default: all four, in order) against ``host``."""
    VARS_FILES[:] = vars_files
    with tempfile.TemporaryDirectory(prefix="bsa-bench-") as tmp:
        for case in cases:
            print(f"bench_cases: {case.__name__}", flush=True)
            case(inventory, host, Path(tmp))


if __name__ == "__main__":
    run_all(Path(sys.argv[1]), sys.argv[2], tuple(Path(p) for p in sys.argv[3:]))
