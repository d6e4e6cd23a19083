"""The stand-in's serving benchmark (``python -m sglang.benchmark.serving``) against the stand-in server, in-process.

It must take the real SGLang 0.5.23 command line (module name, options), write the real JSONL record's keys, and
measure the server's synthetic speed model: deterministic figures that depend on the speculative settings.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from standin_inproc import STANDIN_SRC, serve

REPO = Path(__file__).resolve().parents[2]
WHEEL = REPO / ".cache/sglang-wheels/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"
KEYS = ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "accept_length",
        "completed", "duration", "total_output_tokens", "backend", "dataset_name", "request_rate", "random_input_len",
        "random_output_len", "server_info")
QWEN = ["--speculative-algorithm", "NEXTN"]


def bench(url: str, out: Path, *extra: str, api_key: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "API_KEY")}
    env["PYTHONPATH"] = str(STANDIN_SRC)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    argv = [sys.executable, "-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", url,
            "--dataset-name", "random-ids", "--random-input-len", "64", "--random-output-len", "32",
            "--random-range-ratio", "1.0", "--num-prompts", "8", "--request-rate", "4", "--seed", "1",
            "--output-file", str(out), "--disable-tqdm", "--ready-check-timeout-sec", "5", *extra]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Serving Benchmark Result" in proc.stdout
    return json.loads(out.read_text(encoding="utf-8").splitlines()[-1])


def test_same_module_and_options_as_the_real_release() -> None:
    if not WHEEL.is_file():
        pytest.skip("the SGLang 0.5.23 wheel is not downloaded (make wheel)")
    with zipfile.ZipFile(WHEEL) as wheel:
        real = wheel.read("sglang/benchmark/serving.py").decode()
    for option in ("--backend", "--base-url", "--dataset-name", "--random-input-len", "--random-output-len",
                   "--random-range-ratio", "--num-prompts", "--request-rate", "--seed", "--output-file",
                   "--disable-tqdm", "--ready-check-timeout-sec", "--max-concurrency", "--warmup-requests"):
        assert f'"{option}"' in real, option
        assert f'"{option}"' in (STANDIN_SRC / "sglang/benchmark/serving.py").read_text(encoding="utf-8"), option
    for key in KEYS:
        assert f'"{key}"' in real, key


def test_figures_follow_the_speculative_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_STANDIN_BENCH_TIME_SCALE", "0")
    runs = {}
    for label, flags in (("off", []), ("auto", QWEN), ("5-4-8", [*QWEN, "--speculative-num-steps", "5",
                                                                  "--speculative-eagle-topk", "4",
                                                                  "--speculative-num-draft-tokens", "8"])):
        with serve(flags, monkeypatch) as running:
            runs[label] = bench(running.url, tmp_path / f"{label}.jsonl")
            again = bench(running.url, tmp_path / f"{label}-again.jsonl")
        assert set(KEYS) <= set(runs[label]), label
        assert runs[label]["standin"]["synthetic"] is True
        assert runs[label]["completed"] == 8 and runs[label]["total_output_tokens"] == 8 * 32
        # Deterministic: the same run twice gives the same figures.
        for key in ("output_throughput", "median_ttft_ms", "p99_itl_ms", "duration"):
            assert again[key] == pytest.approx(runs[label][key]), (label, key)
    assert runs["off"]["accept_length"] is None
    assert runs["auto"]["accept_length"] == pytest.approx(2.65)
    assert runs["5-4-8"]["accept_length"] == pytest.approx(3.75)
    assert runs["off"]["median_itl_ms"] == pytest.approx(14.0, rel=0.01)
    assert runs["auto"]["output_throughput"] > runs["5-4-8"]["output_throughput"] > runs["off"]["output_throughput"]


def test_api_key_and_unknown_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_STANDIN_BENCH_TIME_SCALE", "0")
    with serve(["--api-key", "k3y"], monkeypatch) as running:
        assert bench(running.url, tmp_path / "a.jsonl", api_key="k3y")["completed"] == 8
        proc = subprocess.run([sys.executable, "-m", "sglang.benchmark.serving", "--no-such-option"],
                              env={**os.environ, "PYTHONPATH": str(STANDIN_SRC)}, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr
