#!/usr/bin/env python3
"""Our resolver against SGLang's: the values SGLang resolved, on cases both accept, against resolve.py's.

The rules read SGLang's defaults through resolve.py (the attention backends SGLang picks, the page size a backend
forces, the chunked-prefill size the GPU's memory gives, the MoE backends, the speculative top-k, the Mamba cache
strategy, the quantization a checkpoint fills in). A wrong default there is a wrong verdict waiting for the case
that needs it: the seeds' 10,000-case runs kept finding refusals that hinge on one (a model override's backend, a
per-rank division, a checkpoint's quantization). The probe reports what SGLang resolved for every case it accepts
(sglang_probe.RESOLVED_FIELDS); this compares it with what our resolver says for the same case, field by field,
where our resolver claims a value (a resolver function answers None where SGLang's choice is not certain).

A difference is either explained in resolution-expected.yaml (SGLang changes the value after every check our rules
mirror reads it, so the final value differs and no verdict does: each entry cites the SGLang file:line of the change
and says why) or a finding: a resolver function to fix, or an entry to add with its reason.

    python tests/conformance/resolution.py CASES.json ANSWERS.jsonl [CASES.json ANSWERS.jsonl ...]

(the case and answer files of ``differential.py --save-cases FILE --sglang-answers FILE``).  differential.py's
report carries the same comparison; test_differential.py and test_conformance.py fail on an unexplained difference.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
EXPECTED_FILE = HERE / "resolution-expected.yaml"
sys.path.insert(0, str(HERE))
from conformance_support import _import_validator  # noqa: E402

_import_validator()  # puts the collection on sys.path
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import moe, parallel, resolve  # noqa: E402

SPEC_TRIPLE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
EAGLE_FAMILY = {"EAGLE": "EAGLE", "EAGLE3": "EAGLE3", "NEXTN": "EAGLE", "STANDALONE": "STANDALONE"}


def _base(ctx: Any) -> str | None:
    return resolve.resolved_base_attention_backend(ctx)


def _prefill(ctx: Any) -> str | None:
    return resolve.resolved_attention_backends(ctx)[0]


def _decode(ctx: Any) -> str | None:
    return resolve.resolved_attention_backends(ctx)[1]


def final_chunked_prefill_size(ctx: Any) -> int | None:
    """chunked_prefill_size as SGLang leaves it after resolution, composed of what the rules read at their own points:
    the chunk as the KV-sharding hook reads it (resolve.kv_shard_chunk: -1 with enable_mis, else the written chunk or
    the default by the GPUs' memory, floor-divided by chunk_dp_width), rounded up to a multiple of the page under
    KV-cache sharding (kv_shard_hook.py:287-292, resolve.kv_shard_rounds_chunk). None where the memory is not known or
    the chunk is not a number. Not modelled: the model overrides that turn chunked prefill off
    (model_hook.py:206-221 ...)."""
    chunk = resolve.kv_shard_chunk(ctx)
    page = resolve.resolved_page_size(ctx) if chunk is not None and resolve.kv_shard_rounds_chunk(ctx) else None
    if page is not None and page > 1 and chunk is not None and chunk > 0:
        return -(-chunk // page) * page
    return chunk


def _mamba(ctx: Any) -> str | None:
    return resolve.resolved_mamba_strategy(ctx) if ctx.model.hybrid_linear_attention else None


# "No quantization" is a value the rules act on (the CuteDSL runner refuses it, moe_hook.py:95-101), not "not
# claimed": compared as NO_QUANTIZATION on both sides. Comparing it found Qwen3.5-397B-A17B-NVFP4 on a B200, where a
# model override fills in the checkpoint's modelopt_fp4 (resolve.checkpoint_quantization_filled).
NO_QUANTIZATION = "(none)"


def _quantization(ctx: Any) -> str | None:
    quant = resolve.moe_kernel_quantization(ctx)
    return None if quant == resolve.UNCERTAIN else NO_QUANTIZATION if quant is None else quant


def _moe_runner(ctx: Any) -> str | None:
    # As the checks from handle_moe_kernel_config on read it (resolve.resolved_moe_runner: the quantizations'
    # replacements, the runner written, the SM100 model overrides' flashinfer_trtllm). Not claimed where handle_a2a_moe
    # replaces an unset one afterwards (flashinfer_megamoe, deepep_v2, pplx: moe_hook.py:328-330, :405-409, :603-608).
    runner = resolve.resolved_moe_runner(ctx)
    if runner == "auto" and resolve.handled_a2a_backend(ctx) in ("flashinfer_megamoe", "deepep_v2", "pplx"):
        return None
    return runner


def _a2a(ctx: Any) -> str | None:
    # As the checks from handle_a2a_moe on read it; not claimed where DeepSeek's context-parallel overrides may set
    # deepep in ways handled_a2a_backend does not model (the rules stay silent there: _a2a_may_change). Claimed for MLA
    # prefill CP (deepep) and a DSA-by-override model's prefill CP (deepep for zigzag only, else the host's:
    # resolve.dsa_prefill_cp_a2a_certain; the targeted set's targeted-arch-02, -18).
    if resolve._a2a_may_change(ctx) and not (resolve.mla_prefill_cp_deepep(ctx)
                                             or resolve.dsa_prefill_cp_a2a_certain(ctx)):
        return None
    return resolve.handled_a2a_backend(ctx)


def _eagle_topk(ctx: Any) -> int | float | None:
    algo = EAGLE_FAMILY.get(str(ctx.args.get("speculative_algorithm") or "").upper())
    if algo is None or any(ctx.args.get(d) is not None for d in SPEC_TRIPLE):
        return None  # no EAGLE-family algorithm, or the host wrote the triple (nothing resolved)
    return resolve.effective_eagle_topk(ctx, algo)


def _attn_dp_size(ctx: Any) -> int | None:
    # The attention-DP width the checks from handle_dwdp on read (resolve.attention_dp_width: handle_dwdp's dwdp_size,
    # parallel_hook.py:466-471, pipeline.py:189; the deprecated dp_size + enable_dp_attention moved first, :45). Not
    # claimed where a hook derives it from the checkpoint: the DeepSeek family's prefill-CP overrides
    # (parallel.cp_derived, deepseek_v2.py:191-212), DeepSeek-V4's hook (deepseek_v4_hook.py:209), a model not in the
    # table. The resolver-differential's fuzz-3-06256 / fuzz-4-07854: dwdp_size 4 / 8, SGLang's attn_dp_size 4 / 8.
    if not ctx.model.known or "DeepseekV4" in str(ctx.model.architecture or "") or parallel.cp_derived(ctx):
        return None
    return resolve.attention_dp_width(ctx)


# SGLang's resolved field -> our resolver's value for it (None: not claimed). An unset prefill or decode backend in
# SGLang's answer is its base backend's (attention_backends_of, model_override_base.py:138-152).
OURS: dict[str, Callable[[Any], Any]] = {
    "attention_backend": _base,
    "prefill_attention_backend": _prefill,
    "decode_attention_backend": _decode,
    "page_size": resolve.resolved_page_size,
    "chunked_prefill_size": final_chunked_prefill_size,
    "mamba_radix_cache_strategy": _mamba,
    "moe_a2a_backend": _a2a,
    "moe_runner_backend": _moe_runner,
    "quantization": _quantization,
    "speculative_eagle_topk": _eagle_topk,
    "attn_dp_size": _attn_dp_size,
    # DWDP's dwdp_size (parallel_hook.py:485-489), an EP-spanning all-to-all backend's tp_size (overrides.py:1609-1620),
    # else the host's; None where a model override may set it.
    "ep_size": moe.resolved_ep_size,
}
FALLBACK = {"prefill_attention_backend": "attention_backend", "decode_attention_backend": "attention_backend"}


@dataclass(frozen=True)
class Difference:
    case: str
    field: str
    ours: Any
    sglang: Any
    explained: str | None  # the resolution-expected.yaml entry's source, else None


def expected() -> list[dict[str, Any]]:
    """resolution-expected.yaml: each entry a field, the arguments (``when``: a value, or ``"*"`` for any set value)
    under which SGLang's final value differs from ours by design, SGLang's value there (optional), the source and
    the reason."""
    return yaml.safe_load(EXPECTED_FILE.read_text(encoding="utf-8")) or []


def _matches(entry: Mapping[str, Any], field: str, args: Mapping[str, Any], sglang: Any) -> bool:
    if entry["field"] != field or ("sglang" in entry and entry["sglang"] != sglang):
        return False
    for dest, want in (entry.get("when") or {}).items():
        have = args.get(dest)
        if (have in (None, False)) if want == "*" else have != want:
            return False
    return True


def sglang_value(resolved: Mapping[str, Any], field: str) -> Any:
    value = resolved.get(field)
    if value is None and field in FALLBACK:
        value = resolved.get(FALLBACK[field])
    if value is None and field == "quantization":
        return NO_QUANTIZATION
    return value


def differences(cases: Iterable[Mapping[str, Any]], results: Mapping[str, Any], contexts: Mapping[str, Any],
                sglang: Mapping[str, Mapping[str, Any]]) -> tuple[Counter[str], list[Difference]]:
    """(cases compared per field, the differences) over the cases SGLang and our validator both accept."""
    entries = expected()
    compared: Counter[str] = Counter()
    found: list[Difference] = []
    for case in cases:
        cid = case["id"]
        answer, result, ctx = sglang.get(cid) or {}, results.get(cid), contexts.get(cid)
        if answer.get("status") != "accepted" or ctx is None or isinstance(result, Exception) or not result.ok:
            continue
        resolved = answer.get("resolved") or {}
        for field, ours_of in OURS.items():
            ours = ours_of(ctx)
            if ours is None:
                continue
            compared[field] += 1
            theirs = sglang_value(resolved, field)
            if theirs != ours:
                hit = next((e for e in entries if _matches(e, field, ctx.args, theirs)), None)
                found.append(Difference(cid, field, ours, theirs, None if hit is None else hit["source"]))
    return compared, found


def report_lines(compared: Counter[str], found: list[Difference], limit: int = 50) -> list[str]:
    """The report's section: fields compared, unexplained differences by class (field, ours, SGLang's) with example
    cases, and the explained ones counted by entry."""
    unexplained = [d for d in found if d.explained is None]
    lines = ["", "## Resolution: SGLang's resolved values against resolve.py's", "",
             "Cases both accept, values compared per field: "
             + (", ".join(f"{f} {n}" for f, n in sorted(compared.items())) or "none")
             + f". Differences: {len(unexplained)} unexplained, {len(found) - len(unexplained)} explained "
               f"({EXPECTED_FILE.name})."]
    classes: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for d in unexplained:
        classes[(d.field, repr(d.ours), repr(d.sglang))].append(d.case)
    if classes:
        lines += ["", "| field | ours | SGLang's | cases | examples |", "| --- | --- | --- | --- | --- |"]
        for (fld, ours, theirs), ids in sorted(classes.items(), key=lambda kv: -len(kv[1]))[:limit]:
            lines.append(f"| {fld} | {ours} | {theirs} | {len(ids)} | {', '.join(f'`{i}`' for i in ids[:3])} |")
    explained = Counter(d.explained for d in found if d.explained is not None)
    if explained:
        lines += ["", "Explained: " + "; ".join(f"{src} ({n})" for src, n in explained.most_common()) + "."]
    return lines


def main(argv: list[str]) -> int:
    import differential  # noqa: PLC0415  (the answer keys, and the validator as the fuzzer runs it)

    if not argv or len(argv) % 2:
        print(__doc__.split("\n\n")[-2].strip())
        return 2
    cases: list[dict[str, Any]] = []
    known: dict[str, dict[str, Any]] = {}
    for cases_file, answers_file in zip(argv[::2], argv[1::2], strict=True):
        cases += json.loads(Path(cases_file).read_text(encoding="utf-8"))
        for line in Path(answers_file).read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                known[record["key"]] = record["answer"]
    sglang = {c["id"]: known.get(differential.probe_key(differential._probe_input(c))) or {} for c in cases}
    contexts: dict[str, Any] = {}
    results = differential.validate_generated(cases, contexts)
    compared, found = differences(cases, results, contexts, sglang)
    print("\n".join(report_lines(compared, found)))
    return 1 if any(d.explained is None for d in found) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
