"""The judge of the molecule scenarios (molecule/shared/sglang_judge.py) against SGLang 0.5.23 itself (issue 36, build
item 4): start records written by the stand-in, as it writes them on a simulated host, are judged by the real
resolver in ``.venv-conformance``; the stand-in and SGLang agree on the reference host's start, the incident's and an
unknown flag's, and a record on which they disagree is reported with SGLang's exception and file:line."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conformance_support import REPO

STANDIN_SRC = REPO / "tests" / "fixtures" / "sglang_standin" / "src"
SCHEMA = REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas/sglang-0.5.23.json"
sys.path.insert(0, str(REPO / "molecule" / "shared"))
import sglang_judge  # noqa: E402

RTX = "".join(f"{i}, GPU-{i:04d}, 00000000:{i + 1:02X}:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 97887\n"
              for i in range(8))


def _standin() -> tuple[Any, Any]:
    if str(STANDIN_SRC) not in sys.path:
        sys.path.insert(0, str(STANDIN_SRC))
    from sglang._standin import args, server

    assert Path(server.__file__).is_relative_to(STANDIN_SRC)
    return server, args


def _start(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the stand-in records for a start with ``argv`` on the reference host (its outcome included)."""
    server, standin_args = _standin()
    monkeypatch.setenv("SGLANG_STANDIN_SCHEMA", str(SCHEMA))
    monkeypatch.setenv("SGLANG_STANDIN_ASSERT_DELAY", "0")
    record = server.start_record(argv, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, gpu_csv=RTX, mem_total=512 * 1024 ** 3)
    try:
        cfg = standin_args.resolve(standin_args.parse_args(argv))
    except BaseException as exc:  # noqa: BLE001 - what the stand-in's run() records
        return {**record, "standin": f"refused: {type(exc).__name__}"}
    return {**record, "standin": "accepted", "resolved": {k: cfg.get(k) for k in server.RESOLVED}}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    model = tmp_path_factory.mktemp("host") / "opt" / "sglang" / "models" / "nvidia" / "Qwen3.5-397B-A17B-NVFP4"
    shutil.copytree(REPO / "tests" / "conformance" / "models" / "Qwen3.5-397B-A17B-NVFP4", model)
    m = str(model)
    with pytest.MonkeyPatch.context() as monkeypatch:
        starts = {
            "reference": _start(["--model-path", m, "--tp-size", "8", "--speculative-algorithm", "NEXTN",
                                 "--mem-fraction-static", "0.85"], monkeypatch),
            "incident": _start(["--model-path", m, "--tp-size", "8", "--speculative-algorithm", "EAGLE",
                                "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"], monkeypatch),
            "unknown-flag": _start(["--model-path", m, "--no-such-flag"], monkeypatch),
        }
    # A stand-in that would model SGLang wrongly: the incident, recorded as accepted.
    wrong = {**starts["incident"], "standin": "accepted", "argv": [*starts["incident"]["argv"], "--tp-size", "4"]}
    result = sglang_judge.judge({"bsa-mol-x": list(starts.values()), "bsa-mol-y": [wrong]},
                                tmp_path_factory.mktemp("judge"))
    return {"starts": starts, "result": result}


def test_the_standin_records_the_three_outcomes(judged: dict[str, Any]) -> None:
    outcomes = {name: record["standin"] for name, record in judged["starts"].items()}
    assert outcomes == {"reference": "accepted", "incident": "refused: AssertionError",
                        "unknown-flag": "refused: SystemExit"}
    # The reference host's automatic speculative choice, compared with SGLang's by the judge (no problem reported).
    assert judged["starts"]["reference"]["resolved"] == {
        "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4}


def test_sglang_agrees_with_the_standin_and_reports_where_it_does_not(judged: dict[str, Any]) -> None:
    result = judged["result"]
    assert (result.starts, result.distinct, result.accepted, result.rejected) == (4, 4, 1, 3), result.summary()
    (problem,) = result.problems
    assert problem.startswith("bsa-mol-y (1 start(s)): the stand-in accepted, SGLang 0.5.23 rejected: "
                              "AssertionError at sglang/srt/"), problem
