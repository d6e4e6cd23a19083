"""The stand-in's start records and molecule/shared/sglang_judge.py, which asks SGLang about each (issue 36).

The judge's runner is faked here; tests/conformance/test_standin_judged.py runs it against SGLang itself."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standin_inproc import REPO, SCHEMA, standin

sys.path.insert(0, str(REPO / "molecule" / "shared"))
import sglang_judge  # noqa: E402

server, standin_args, _proc = standin()
PREFLIGHT = sglang_judge._preflight()
GPUS = "".join(f"{i}, GPU-{i:04d}, 00000000:{i + 1:02X}:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 97887\n"
               for i in range(4))
GB10 = "0, GPU-aaaa, 0000000F:01:00.0, NVIDIA GB10, 12.1, [N/A]\n"


def _emitted(record: dict, outcome: str) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        server.emit_start_record(record, outcome)
    return err.getvalue()


def test_a_record_keeps_what_sglang_reads_and_no_secret(tmp_path: Path) -> None:
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / "big.json").write_text("[" + "0," * 40000 + "0]")  # over 64 KiB: left out
    (model / "weights.safetensors").write_bytes(b"\0" * 16)
    key = tmp_path / "key.pem"
    key.write_text("-----BEGIN PRIVATE KEY----- secret-key-bytes")
    config = tmp_path / "secrets.yaml"
    config.write_text("api-key: sk-the-api-key\nssl-keyfile-password: the-key-password\n")
    argv = ["--model-path", str(model), "--ssl-keyfile", str(key), "--config", str(config), "--tp-size", "4",
            "--tokenizer-path", "/nowhere/at/all"]
    environ = {"SGLANG_ENABLE_JIT_DEEPGEMM": "0", "SGLANG_STANDIN_FAULTS": "/f", "SGLANG_REDACT_ENV": "SGLANG_SECRET",
               "SGLANG_SECRET": "env-secret-value", "CUDA_VISIBLE_DEVICES": "1,2", "HF_TOKEN": "hf_token_value",
               "PATH": "/usr/bin"}
    record = server.start_record(argv, environ, gpu_csv=GPUS, mem_total=1 << 30)
    assert record["config_keys"] == ["api-key", "ssl-keyfile-password"]
    assert record["env"] == {"CUDA_VISIBLE_DEVICES": "1,2", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    assert record["paths"] == {str(model): {"json": {"config.json": '{"architectures": ["LlamaForCausalLM"]}'}},
                               str(key): "file", "/nowhere/at/all": "missing"}
    line = _emitted(record, "accepted")
    for secret in ("sk-the-api-key", "the-key-password", "env-secret-value", "hf_token_value", "secret-key-bytes"):
        assert secret not in line
    assert sglang_judge.parse_records("journal noise\n" + line + "more noise\n") == [{**record, "standin": "accepted"}]


def test_a_start_refused_by_argparse_is_recorded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "_gpu_csv", lambda: GPUS)
    monkeypatch.setenv("SGLANG_STANDIN_FAULTS", str(tmp_path / "none.env"))
    monkeypatch.setenv("SGLANG_STANDIN_SCHEMA", str(SCHEMA))
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit):
        server.run(["--model-path", str(tmp_path), "--no-such-flag"])
    (record,) = sglang_judge.parse_records(err.getvalue())
    assert record["standin"] == "refused: SystemExit"
    assert record["argv"] == ["--model-path", str(tmp_path), "--no-such-flag"]


def test_the_probe_case_mirrors_the_host(tmp_path: Path) -> None:
    record = {"argv": ["--model-path", "/opt/m", "--config", "/etc/s.yaml", "--ssl-keyfile", "/etc/k.pem",
                       "--ssl-certfile", "/etc/c.pem", "--tp-size", "2"],
              "config_keys": ["api-key"], "env": {"CUDA_VISIBLE_DEVICES": "2,3", "SGLANG_X": "1"}, "gpus": GPUS,
              "mem_total": None, "paths": {"/opt/m": {"json": {"config.json": "{}", "../x.json": "{}"}},
                                           "/etc/k.pem": "file", "/etc/c.pem": "missing"}}
    case = sglang_judge.probe_case(record, tmp_path, "c1", PREFLIGHT)
    model = str(tmp_path / "opt" / "m")
    assert case["argv"] == ["--api-key", sglang_judge.PLACEHOLDER, "--model-path", model, "--ssl-keyfile",
                            str(tmp_path / "etc" / "k.pem"), "--ssl-certfile", str(tmp_path / "etc" / "c.pem"),
                            "--tp-size", "2"]
    assert (tmp_path / "opt" / "m" / "config.json").read_text() == "{}"
    assert not (tmp_path / "opt" / "x.json").exists()
    assert (tmp_path / "etc" / "k.pem").is_file() and not (tmp_path / "etc" / "c.pem").exists()
    assert case["model"] == model
    assert case["env"] == {"SGLANG_X": "1"}
    assert (case["gpu_count"], case["compute_capability"], case["gpu_memory_mib"], case["gpu_integrated"]) == (
        2, "12.0", 97887, False)


def test_a_unified_memory_gpu_is_described_with_the_hosts_memory(tmp_path: Path) -> None:
    record = {"argv": ["--model-path", "org/model"], "gpus": GB10, "mem_total": 128 * 1024 ** 3, "paths": {}}
    case = sglang_judge.probe_case(record, tmp_path, "c2", PREFLIGHT)
    assert "model" not in case  # a hub id the probe has no copy of: asked about as is
    assert (case["gpu_count"], case["compute_capability"], case["gpu_memory_mib"], case["gpu_integrated"]) == (
        1, "12.1", 128 * 1024, True)


def _record(argv: list[str], outcome: str) -> dict:
    return {"version": "0.5.23", "argv": argv, "config_keys": [], "env": {}, "gpus": GPUS, "mem_total": None,
            "paths": {}, "standin": outcome}


def test_judge_asks_once_per_distinct_start_and_reports_each_disagreement(tmp_path: Path) -> None:
    asked: list[dict] = []

    def runner(cases: list[dict]) -> dict:
        asked.extend(cases)
        return {"results": [{"id": c["id"], "status": "rejected" if "--bad" in c["argv"] else "accepted",
                 "exception": "AssertionError", "where": "server_args.py:1", "message": ""} for c in cases]}

    good, bad = _record(["--tp-size", "2"], "accepted"), _record(["--bad"], "accepted")
    refused = _record(["--bad", "x"], "refused: AssertionError")
    result = sglang_judge.judge({"h1": [good, good, bad], "h2": [good, refused]}, tmp_path, runner)
    assert (result.starts, result.distinct, result.accepted, result.rejected) == (5, 3, 1, 2)
    assert len(asked) == 3
    (problem,) = result.problems
    assert problem.startswith("h1 (1 start(s)): the stand-in accepted, SGLang 0.5.23 rejected: AssertionError at "
                              "server_args.py:1")


def test_a_probe_error_is_never_agreement() -> None:
    assert not sglang_judge.agrees("accepted", {"status": "probe_error"})
    assert not sglang_judge.agrees("refused: SystemExit", {"status": "missing"})
    assert sglang_judge.agrees("refused: SystemExit", {"status": "rejected"})


@settings(max_examples=60, deadline=None)
@given(argv=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), max_size=6),
       env=st.dictionaries(st.sampled_from(["SGLANG_A", "SGL_B", "CUDA_VISIBLE_DEVICES"]),
                           st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)))
def test_any_argv_and_environment_round_trip_through_the_journal_line(argv: list[str], env: dict[str, str]) -> None:
    record = server.start_record(argv, env, gpu_csv="", mem_total=None)
    line = _emitted(record, "accepted")
    assert "\n" not in line.rstrip("\n")  # one journal line, whatever the arguments hold
    (back,) = sglang_judge.parse_records(line)
    assert back["argv"] == argv and back["env"] == env


def test_scenario_containers_are_the_platforms(tmp_path: Path) -> None:
    assert sglang_judge.scenario_containers(REPO / "molecule" / "default") == ["bsa-mol-default"]
    (tmp_path / "molecule.yml").write_text(json.dumps({"platforms": [{"name": "a"}, {"name": "b"}]}))
    assert sglang_judge.scenario_containers(tmp_path) == ["a", "b"]


def test_a_hub_id_the_probe_has_a_checkpoint_of_is_judged_on_it(tmp_path: Path) -> None:
    record = {"argv": ["--model-path", "nvidia/Qwen3.5-397B-A17B-NVFP4"], "gpus": GPUS, "paths": {}}
    case = sglang_judge.probe_case(record, tmp_path, "c3", PREFLIGHT)
    assert case["model"] == str(REPO / "tests" / "conformance" / "models" / "Qwen3.5-397B-A17B-NVFP4")


def test_a_start_both_accept_but_resolve_otherwise_is_reported(tmp_path: Path) -> None:
    def runner(cases: list[dict]) -> dict:
        return {"results": [{"id": c["id"], "status": "accepted", "resolved": {
            "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4}} for c in cases]}

    same = {**_record(["--a"], "accepted"), "resolved": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}}
    other = {**_record(["--b"], "accepted"), "resolved": {"speculative_algorithm": "EAGLE",
                                                         "speculative_num_draft_tokens": 8}}
    result = sglang_judge.judge({"h": [same, other]}, tmp_path, runner)
    (problem,) = result.problems
    assert "both accepted, but resolved speculative_num_draft_tokens to 8 and 4" in problem


def test_the_accepted_record_carries_the_standins_speculative_choice() -> None:
    record = server.start_record(["--model-path", "/m"], {}, gpu_csv="", mem_total=None)
    line = _emitted_with(record, {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "tp_size": 8})
    (back,) = sglang_judge.parse_records(line)
    assert back["resolved"] == {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                                "speculative_eagle_topk": None, "speculative_num_draft_tokens": None}


def _emitted_with(record: dict, cfg: dict) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        server.emit_start_record(record, "accepted", cfg)
    return err.getvalue()
