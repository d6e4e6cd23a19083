#!/usr/bin/env python3
"""Differential fuzzing: our validator against SGLang's own argument handling, on generated cases.

Cases come from hypothesis strategies built from the committed CLI schema of the pinned release (choices,
integers near the boundaries the rules care about, switches) over the combinations the launch checks look at:
speculative decoding, parallel sizes, attention / MoE / sampling backends, quantization and KV cache dtype,
mamba / hybrid models, pipeline parallelism, LoRA, page size and chunked prefill; on the four fixture models,
1-8 GPUs and the hardware profiles (12.0 reference, 12.1, 10.0, 9.0). Generation is derandomized: a seed and a
count give the same cases on every machine.

Oracle: SGLang's ``prepare_server_args -> resolve_once() -> check_server_args()`` in .venv-conformance
(sglang_probe.py, one forked child per case). Every case gets one verdict:

* ``agree``: both accept, or both reject;
* ``stricter``: we reject, SGLang accepts, and every rule that refused is one the project documents as
  stricter (a run-time failure or a hardware fact SGLang's argument handling does not see: STRICTER below);
* ``STRICTER-UNEXPLAINED``: we reject what SGLang accepts under a rule not documented as stricter (a false alarm);
* ``MISSED``: SGLang rejects what we accept (the incident's class of bug);
* ``OUR-ARGV``: we accept, SGLang accepts the arguments, but not the argv our renderer produced;
* ``probe-error``: the probe could not run SGLang's check (never a verdict).

A MISSED case is shrunk (arguments dropped one at a time while SGLang still rejects and we still accept) and
printed as a ready cases.yaml entry, to be added to the conformance corpus with the rule that fixes it.

    python tests/conformance/differential.py [--cases 10000] [--seed 0] [--jobs 2] [--report build/fuzz-sglang.md]
        [--sglang-answers build/fuzz-sglang-answers.jsonl]

``make fuzz-sglang`` runs 10,000 cases; CI runs a fixed-seed sample (test_differential.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from conformance_support import (  # noqa: E402
    OURS_ARGV_SUFFIX,
    REPO,
    SGLANG_VERSION,
    _probe_input,
    load_cases,
    run_sglang_probe,
    validate_cases,
)

SCHEMA = (REPO / "collections" / "ansible_collections" / "blackwell" / "sglang" / "plugins" / "plugin_utils"
          / "schemas" / f"sglang-{SGLANG_VERSION}.json")

# Rule ids (prefixes) the project documents as stricter than SGLang's argument handling, each with why. A
# rejection by any other rule of a configuration SGLang accepts is a false alarm.
STRICTER = {
    "arch.": "hardware profiles: kernels SGLang lets through on this compute capability fail at run time "
             "(docs/validation.md 'Host profiles', each refusal's message says so)",
    "sm8x.": "per-architecture kernels (SM80-SM89) that fail at run time (docs/validation.md 'Host profiles')",
    "sm90.": "per-architecture kernels (SM90) that fail at run time (docs/validation.md 'Host profiles')",
    "sm10x.": "per-architecture kernels (SM100/SM103) that fail at run time (docs/validation.md 'Host profiles')",
    "sm110.": "per-architecture kernels (SM110) that fail at run time (docs/validation.md 'Host profiles')",
    "sm12x.": "SM120/SM121 kernels that fail or give garbage at run time (docs/validation.md 'What the validator checks')",
    "parallel.size": "a parallel size below 1: SGLang's argument handling lets it through, the launch fails when it "
                     "spawns the ranks",
    "hardware.fit": "the model does not fit the GPUs' memory: fails at load time, after minutes",
    "host.": "facts of the host (GPU count, IOMMU and NCCL): fail at run time",
    "parallel.gpus": "more GPUs than the host has: fails when the scheduler starts",
    "numeric.mem_fraction_static": "a share of GPU memory outside (0, 1): SGLang's argument handling lets it through, "
                                   "the memory pool then has nothing (or more than the GPU) to allocate",
    "numeric.page_size": "a page size below 1: SGLang divides by it at run time",
    "numeric.max_running_requests": "fewer than 1 running request: SGLang's workers assert it after loading the weights",
    "spec.values": "an EAGLE draft with no candidates (eagle_topk 0 with drafting on, a negative num_steps, or "
                   "num_draft_tokens below 1 for a tree): SGLang's argument handling lets it through, then the draft "
                   "forward picks fast_topk(probs, eagle_topk) (sglang/srt/speculative/eagle_worker_v2.py:887) and "
                   "organize_draft_results calls torch.topk(scores, num_draft_tokens - 1) on what is left "
                   "(sglang/srt/speculative/eagle_utils.py:110), which raises in the first draft forward (the CUDA-graph "
                   "capture at start-up)",
}

# Integers the rules compare against: zero and negatives, 1-2 (speculative steps, topk), powers of two (parallel
# sizes, page sizes), and big values.
INTS = [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256, 1024, 2048, 8192, 16384, 131072]
FLOATS = [-0.1, 0.0, 0.05, 0.5, 0.8, 0.88, 0.95, 1.0, 1.5]

GROUPS: dict[str, list[str]] = {
    "speculative": ["speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens", "speculative_attention_mode", "speculative_moe_runner_backend"],
    "parallel": ["tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention", "moe_dense_tp_size",
                 "enable_dp_lm_head", "pp_max_micro_batch_size"],
    "backends": ["attention_backend", "prefill_attention_backend", "decode_attention_backend", "sampling_backend",
                 "moe_runner_backend", "moe_a2a_backend", "grammar_backend"],
    "quantization": ["quantization", "kv_cache_dtype"],
    "mamba": ["mamba_ssm_dtype", "mamba_radix_cache_strategy", "mamba_backend", "linear_attn_backend",
              "max_mamba_cache_size", "mamba_full_memory_ratio"],
    "lora": ["enable_lora", "max_lora_rank", "max_loras_per_batch", "lora_backend"],
    "memory": ["page_size", "chunked_prefill_size", "max_running_requests", "mem_fraction_static",
               "max_prefill_tokens", "context_length", "max_total_tokens"],
    "scheduling": ["disable_radix_cache", "enable_mixed_chunk", "disable_overlap_schedule", "schedule_policy",
                   "stream_interval", "enable_hierarchical_cache", "enable_two_batch_overlap"],
}
# Values for arguments whose schema has no static choices.
DYNAMIC_CHOICES = {"speculative_algorithm": ["NEXTN", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM"]}
PROFILES = ["12.0", "12.0", "12.0", "12.1", "10.0", "9.0"]


def schema_arguments() -> dict[str, dict[str, Any]]:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))["arguments"]


def value_strategy(arg: dict[str, Any]) -> st.SearchStrategy[Any] | None:
    """Values of one argument, from its schema entry; None for arguments the fuzzer does not vary."""
    dest = arg["dest"]
    if arg["action"] in ("store_true", "DeprecatedStoreTrueAction") or arg.get("nargs") == 0:
        return st.just(True)
    choices = arg.get("choices") or DYNAMIC_CHOICES.get(dest)
    if choices:
        return st.sampled_from(list(choices))
    kind = arg.get("type")
    if kind in ("int", "human_readable_int"):
        return st.sampled_from(INTS) | st.integers(min_value=-2, max_value=20)
    if kind == "float":
        return st.sampled_from(FLOATS)
    return None


def case_strategy() -> st.SearchStrategy[dict[str, Any]]:
    """One case: a model, GPU count, compute capability and 1-3 groups' worth of arguments."""
    schema = schema_arguments()
    per_group: dict[str, list[tuple[str, st.SearchStrategy[Any]]]] = {}
    for group, dests in GROUPS.items():
        for dest in dests:
            arg = schema.get(dest)
            values = value_strategy(arg) if arg else None
            if values is not None:
                per_group.setdefault(group, []).append((dest, values))
    _, models = load_cases()

    @st.composite
    def case(draw: st.DrawFn) -> dict[str, Any]:
        groups = draw(st.lists(st.sampled_from(sorted(per_group)), min_size=1, max_size=3, unique=True))
        args: dict[str, Any] = {}
        for group in groups:
            members = draw(st.lists(st.sampled_from(per_group[group]), min_size=1, max_size=4,
                                    unique_by=lambda member: member[0]))
            for dest, values in members:
                args[dest] = draw(values)
        return {"model": draw(st.sampled_from(sorted(models))), "gpu_count": draw(st.sampled_from([1, 2, 4, 8])),
                "compute_capability": draw(st.sampled_from(PROFILES)), "args": args, "env": {},
                "family": "+".join(groups)}

    return case()


def generate(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct cases, the same for the same (count, seed) everywhere."""
    found: dict[str, dict[str, Any]] = {}
    strategy = case_strategy()

    @hypothesis_seed(seed)
    @settings(max_examples=count * 3, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(strategy)
    def collect(case: dict[str, Any]) -> None:
        if len(found) < count:
            found.setdefault(json.dumps(case, sort_keys=True), case)

    collect()
    cases = list(found.values())[:count]
    for number, case in enumerate(cases):
        case["id"] = f"fuzz-{seed}-{number:05d}"
    return cases


def documented_stricter(result: Any) -> bool:
    return bool(result.errors) and all(any(p.rule.startswith(prefix) for prefix in STRICTER) for p in result.errors)


def classify(sglang: dict[str, Any] | None, mine: Any, variant: dict[str, Any] | None) -> str:
    if not sglang or sglang.get("status") not in ("accepted", "rejected"):
        return "probe-error"
    if isinstance(mine, Exception):
        return "CRASH"
    accepted = sglang["status"] == "accepted"
    if accepted and mine.ok:
        if variant is not None and variant.get("status") == "rejected":
            return "OUR-ARGV"
        return "agree"
    if not accepted and not mine.ok:
        return "agree"
    if not accepted:
        return "MISSED"
    return "stricter" if documented_stricter(mine) else "STRICTER-UNEXPLAINED"


def probe(payload: list[dict[str, Any]], jobs: int = 1) -> dict[str, dict[str, Any]]:
    """SGLang's result per id: ``jobs`` probe processes side by side, each on every ``jobs``-th entry (a probe
    forks per case in one process, so one probe keeps one core busy)."""
    parts = [payload[i::jobs] for i in range(max(1, jobs)) if payload[i::jobs]]
    with ThreadPoolExecutor(max_workers=len(parts) or 1) as pool:
        answers = list(pool.map(lambda part: run_sglang_probe(part, timeout=7200)["results"], parts))
    return {r["id"]: r for results in answers for r in results}


def probe_key(entry: dict[str, Any]) -> str:
    """What SGLang's answer depends on: the release and the whole probe input but its id (model, GPUs, arguments
    or argv, environment)."""
    return json.dumps({"sglang": SGLANG_VERSION, **{k: v for k, v in entry.items() if k != "id"}}, sort_keys=True)


def cached_probe(payload: list[dict[str, Any]], jobs: int, store: Path | None) -> dict[str, dict[str, Any]]:
    """probe(), with SGLang's answers kept in ``store`` (JSON lines: the probe input and the answer). Entries the
    store already answers are not probed again, so a run after a rule fix re-judges the same cases against the
    same oracle in seconds; SGLang's answers do not depend on our rules, only on the probe input."""
    known: dict[str, dict[str, Any]] = {}
    if store is not None and store.exists():
        records = (json.loads(line) for line in store.read_text(encoding="utf-8").splitlines() if line.strip())
        known = {r["key"]: r["answer"] for r in records}
    keys = {e["id"]: probe_key(e) for e in payload}
    fresh = probe([e for e in payload if keys[e["id"]] not in known], jobs)
    answered = {cid: r for cid, r in fresh.items() if r.get("status") in ("accepted", "rejected")}
    if store is not None and answered:
        store.parent.mkdir(parents=True, exist_ok=True)
        with store.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps({"key": keys[cid], "answer": r}, sort_keys=True) + "\n" for cid, r in answered.items())
    return {cid: fresh[cid] if cid in fresh else {**known[key], "id": cid}
            for cid, key in keys.items() if cid in fresh or key in known}


def evaluate(cases: list[dict[str, Any]], jobs: int = 1,
             store: Path | None = None) -> tuple[dict[str, str], dict[str, Any], dict[str, dict[str, Any]]]:
    """(verdict per id, our results, SGLang's results incl. the our-argv variants)."""
    mine = validate_cases(cases, load_cases()[1])
    payload = [_probe_input(c) for c in cases]
    payload += [_probe_input(c, id=c["id"] + OURS_ARGV_SUFFIX, argv=list(mine[c["id"]].argv))
                for c in cases if not isinstance(mine[c["id"]], Exception) and mine[c["id"]].ok and mine[c["id"]].argv]
    sglang = cached_probe(payload, jobs, store)
    verdicts = {c["id"]: classify(sglang.get(c["id"]), mine[c["id"]], sglang.get(c["id"] + OURS_ARGV_SUFFIX))
                for c in cases}
    return verdicts, mine, sglang


def shrink(cases: list[dict[str, Any]], rounds: int = 8, jobs: int = 1) -> list[dict[str, Any]]:
    """Each MISSED case with as few arguments as still give MISSED (one probe run per round for all of them)."""
    current = {c["id"]: c for c in cases}
    for _ in range(rounds):
        variants = []
        for cid, case in current.items():
            for dest in case["args"]:
                variants.append({**case, "id": f"{cid}~{dest}", "args": {k: v for k, v in case["args"].items() if k != dest},
                                 "parent": cid})
        if not variants:
            break
        verdicts, _, _ = evaluate(variants, jobs)
        progressed = False
        for cid in list(current):
            smaller = next((v for v in variants if v["parent"] == cid and verdicts[v["id"]] == "MISSED"), None)
            if smaller is not None:
                current[cid] = {k: v for k, v in smaller.items() if k != "parent"} | {"id": cid}
                progressed = True
        if not progressed:
            break
    return list(current.values())


def as_corpus_entry(case: dict[str, Any], sglang: dict[str, Any]) -> str:
    entry = {"id": case["id"].replace("fuzz-", "fuzzed-"), "family": case["family"].split("+")[0],
             "why": "found by differential fuzzing (tests/conformance/differential.py)", "model": case["model"],
             "gpu_count": case["gpu_count"], "compute_capability": case["compute_capability"], "args": case["args"],
             "sglang": "reject", "sglang_exception": sglang.get("exception"),
             "sglang_where": (sglang.get("where") or "").split(":")[0]}
    return json.dumps(entry)


def report(cases: list[dict[str, Any]], verdicts: dict[str, str], mine: dict[str, Any],
           sglang: dict[str, dict[str, Any]], seconds: float, seed: int) -> str:
    counts = Counter(verdicts.values())
    lines = [f"# Differential fuzzing: our validator vs SGLang {SGLANG_VERSION}", "",
             f"{len(cases)} cases (seed {seed}) in {seconds:.0f} s: "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), "",
             "| verdict | cases |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    by_rule = Counter(p.rule for cid, v in verdicts.items() if v == "stricter" for p in mine[cid].errors)
    if by_rule:
        lines += ["", "Stricter, by rule (the reason each is allowed: STRICTER in differential.py):", ""]
        lines += [f"- `{rule}`: {n}" for rule, n in by_rule.most_common()]
    for kind in ("MISSED", "STRICTER-UNEXPLAINED", "OUR-ARGV", "CRASH", "probe-error"):
        bad = [c for c in cases if verdicts[c["id"]] == kind]
        if not bad:
            continue
        lines += ["", f"## {kind} ({len(bad)})", ""]
        for case in bad[:50]:
            r = sglang.get(case["id"]) or {}
            res = mine[case["id"]]
            why = (f"SGLang: {r.get('exception')} at {r.get('where')}: {(r.get('message') or '')[:160]!r}"
                   if kind == "MISSED" else
                   f"ours: {', '.join(p.rule for p in res.errors)}" if kind == "STRICTER-UNEXPLAINED" else
                   f"{r.get('exception')}: {(r.get('message') or '')[:160]!r}")
            lines.append(f"- `{case['id']}` {case['model']} x{case['gpu_count']} cc {case['compute_capability']} "
                         f"`{json.dumps(case['args'], sort_keys=True)}`: {why}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", type=Path, default=REPO / "build" / "fuzz-sglang.md")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--jobs", type=int, default=1, help="probe processes side by side (one core each)")
    parser.add_argument("--sglang-answers", type=Path, default=None,
                        help="keep SGLang's answers in this JSON-lines file and reuse them: a re-run after a rule fix "
                             "re-judges the same cases without probing them again")
    args = parser.parse_args(argv)
    start = time.monotonic()
    cases = generate(args.cases, args.seed)
    verdicts, mine, sglang = evaluate(cases, args.jobs, args.sglang_answers)
    text = report(cases, verdicts, mine, sglang, time.monotonic() - start, args.seed)
    missed = [c for c in cases if verdicts[c["id"]] == "MISSED"]
    if missed and not args.no_shrink:
        small = shrink(missed, jobs=args.jobs)
        _, _, again = evaluate(small, args.jobs)
        text += "\n## Shrunk MISSED cases, as cases.yaml entries\n\n" + "\n".join(
            f"- {as_corpus_entry(c, again.get(c['id']) or {})}" for c in small) + "\n"
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text, encoding="utf-8")
    print(text)
    bad = sum(1 for v in verdicts.values() if v in ("MISSED", "OUR-ARGV", "CRASH"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
