"""roles/sglang_bench's filters (blackwell.sglang.bench_candidates, bench_record, bench_report) and the validator's
run spec given as the triple itself (what a candidate becomes)."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.bench import bench_candidates, bench_record, bench_report
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from reference import host_with

TRIPLE = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


# --- bench_candidates -------------------------------------------------------------------------------------------


def test_candidates_modes_and_triples() -> None:
    got = bench_candidates(["off", "AUTO", TRIPLE])
    assert got == [{"label": "off", "spec": "off"}, {"label": "auto", "spec": "auto"},
                   {"label": "steps=3 topk=1 draft=4", "spec": TRIPLE}]
    # YAML's unquoted off, another spelling of a key, a number as a string; a JSON string of the list (-e k=v).
    spelled = bench_candidates([False, {"speculative-num-steps": "5", "speculative_eagle_topk": 4,
                                        "speculative_num_draft_tokens": 8}])
    assert spelled[0]["spec"] == "off" and spelled[1]["spec"]["speculative_num_steps"] == 5
    assert bench_candidates('["keep", "auto"]') == [{"label": "keep", "spec": "keep"}, {"label": "auto", "spec": "auto"}]
    assert [c["spec"] for c in bench_candidates("off,auto")] == ["off", "auto"]


@pytest.mark.parametrize(("value", "words"), [
    (["auto", "explicit"], ["spec_candidates[1]", "'explicit' is not a candidate"]),
    (["auto", {"speculative_num_steps": 3}], ["spec_candidates[1]", "missing speculative_eagle_topk"]),
    ([{"speculative_num_steps": "x", "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}],
     ["spec_candidates[0]", "whole number"]),
    ([{**TRIPLE, "speculative_eagle_topk": True}], ["spec_candidates[0]", "whole number"]),
    ([{**TRIPLE, "speculative_algorithm": "EAGLE"}], ["spec_candidates[0]", "'speculative_algorithm' is not one of"]),
    (["off", "off"], ["spec_candidates[1]", "listed twice"]),
    ([], ["non-empty list"]),
    ({"a": 1}, ["non-empty list"]),
])
def test_malformed_candidates_are_refused_by_name(value: object, words: list[str]) -> None:
    with pytest.raises(AnsibleFilterError) as exc:
        bench_candidates(value)
    for word in words:
        assert word in str(exc.value), str(exc.value)


# --- bench_record and bench_report ------------------------------------------------------------------------------


def record(throughput: float, accept: float | None, synthetic: bool = True, **more: object) -> str:
    rec = {"output_throughput": throughput, "median_ttft_ms": 30.0, "p99_ttft_ms": 40.0, "median_itl_ms": 7.0,
           "p99_itl_ms": 9.0, "accept_length": accept, "completed": 8, "server_info": {"api_key": "s3cret"}, **more}
    if synthetic:
        rec["standin"] = {"synthetic": True}
    return json.dumps({"output_throughput": 1.0}) + "\n" + json.dumps(rec) + "\n"


def test_record_keeps_the_last_line_and_no_server_info() -> None:
    got = bench_record(record(500.0, 2.65))
    assert got["output_throughput"] == 500.0 and got["accept_length"] == 2.65 and got["synthetic"] is True
    assert "server_info" not in got and "s3cret" not in json.dumps(got)
    assert bench_record(record(1.0, None, synthetic=False))["synthetic"] is False
    with pytest.raises(AnsibleFilterError, match="no record"):
        bench_record("")
    with pytest.raises(AnsibleFilterError, match="not JSON"):
        bench_record("{oops")


def run(label: str, spec: object, throughput: float, accept: float | None, **more: object) -> dict:
    return {"label": label, "spec": spec, "host": "gpu1", "instance": "sglang", "argv": ["--model-path", "/m"],
            "record": bench_record(record(throughput, accept)), "resolved": more.pop("resolved", {}), **more}


def test_report_picks_the_fastest_candidate_and_says_how_to_adopt_it() -> None:
    report = bench_report([run("off", "off", 400.0, None), run("auto", "auto", 600.0, 2.65, resolved=TRIPLE),
                           run("steps=5 topk=4 draft=8", {**TRIPLE, "speculative_num_steps": 5}, 550.0, 3.75),
                           {"label": "x", "spec": "keep", "host": "gpu1", "instance": "-", "error": "failed: boom"}],
                          "title line")
    assert report["best"]["label"] == "auto" and report["synthetic"] is True
    assert report["adopt"][0] == "sglang_spec: auto" and "speculative_num_steps: 3" in report["adopt"][1]
    text = report["text"]
    assert text.startswith("title line\ncandidate") and "best: auto (600.0 output tokens/s on gpu1 sglang)" in text
    assert "synthetic (stand-in server)" in text and "failed: boom" in text
    lines = report["table"]
    assert "output tok/s" in lines[0] and "TTFT p99 ms" in lines[0] and "ITL p50 ms" in lines[0] and "accept len" in lines[0]
    assert "| 2.65 " in next(line for line in lines if line.startswith("auto"))


def test_report_adopt_lines() -> None:
    triple = bench_report([run("t", TRIPLE, 1.0, 2.0)])
    assert triple["adopt"] == ["sglang_spec: explicit", "sglang_args:  # merged into the host's own",
                               "  speculative_num_steps: 3", "  speculative_eagle_topk: 1", "  speculative_num_draft_tokens: 4"]
    assert bench_report([run("off", "off", 1.0, None)])["adopt"] == ['sglang_spec: "off"']


def test_a_plain_run_has_no_best() -> None:
    report = bench_report([run("current", None, 500.0, 2.65)])
    assert report["best"] is None and report["adopt"] == [] and "best:" not in report["text"]
    real = bench_report([{**run("current", None, 1.0, None), "record": bench_record(record(1.0, None, synthetic=False))}])
    assert real["synthetic"] is False and "synthetic" not in real["text"]


# --- the validator's spec as a triple ---------------------------------------------------------------------------


def test_spec_triple_is_explicit_with_those_values() -> None:
    host = host_with({"speculative_num_steps": 5, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8})
    result = validate_host(host, spec=TRIPLE)
    assert result.ok, [p.message for p in result.errors]
    assert result.spec == {"mode": "explicit", "host": "keep", "override": True, "triple": TRIPLE}
    argv = result.argv
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"
    # The host's own spelling of a key is replaced, not doubled.
    spelled = validate_host(host_with({"speculative-num-steps": 5}), spec=TRIPLE)
    assert spelled.ok and spelled.argv.count("--speculative-num-steps") == 1


def test_spec_triple_is_checked_like_sglang_args() -> None:
    refused = validate_host(host_with(), spec={**TRIPLE, "speculative_eagle_topk": 0})
    assert not refused.ok and any(p.rule == "spec.values" for p in refused.errors)
    malformed = validate_host(host_with(), spec={"speculative_num_steps": 3})
    problem = next(p for p in malformed.errors if p.variable == "spec")
    assert "missing speculative_eagle_topk" in problem.message
    no_algorithm = validate_host(host_with(), spec=TRIPLE)
    assert no_algorithm.ok  # the reference host runs NEXTN
