#!/usr/bin/env python3
"""Differential fuzzing: our validator against SGLang's own argument handling, on generated cases.

Cases come from the catalog of SGLang's raise sites (tests/catalog/catalog-<version>.json) and the committed CLI
schema of the pinned release. Each catalog entry mapped `rule` or `preflight` records what its condition reads
(``reads``: the arguments, and the environment switches); a case aims at 1-2 such entries and draws a value for
each argument they read, from the schema (choices, integers near the boundaries, switches) and from the constants
SGLang's conditions compare that argument with (``cfg.kv_cache_dtype == 'nvfp4'``). One case in GROUP_SHARE
draws hand-picked GROUPS of interacting arguments instead (extra weight); one catalog case in RESOLUTION_SHARE adds one
of the RESOLUTION_CONTEXTS SGLang's own resolution reads (context parallelism, attention DP, DWDP, waterfill, PD,
deterministic inference), and now and then any argument of the schema joins. Every speculative algorithm the schema
names, the fixture models as draft models, every hardware profile of the validator (sglang_rules.PROFILES: 8.0 to
12.1) with its GPUs' real memory (GPUS: B200, B300, Thor's and GB10's unified memory, ...), 1-8 GPUs. Generation
is derandomized: a seed and a count give the same cases on every machine.

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

Coverage: each refusal is matched to the catalog entry whose statement holds the file:line SGLang raised at
(multi-line statements by their line range); the report counts the refused inputs per entry, the share of
`rule` / `preflight` entries hit, the `rule` entries never hit, and the sites the catalog lacks (implicit failures:
tests/catalog/implicit-<version>.yml). ``--coverage-of ANSWERS`` prints the coverage of a kept answers file.

    python tests/conformance/differential.py [--cases 10000] [--seed 0] [--jobs 2] [--report build/fuzz-sglang.md]
        [--sglang-answers build/fuzz-sglang-answers.jsonl] [--save-cases FILE | --cases-from FILE | --grid NAME]
        [--unreached FILE]

``make fuzz-sglang`` runs 10,000 cases; CI runs a fixed-seed sample (test_differential.py). ``--grid NAME`` (or all)
judges a grid of grids.yaml instead: every combination of the arguments one check reads (grids.py; ``make
conformance-grids``; CI's sample: test_grids.py).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import grids  # noqa: E402
import resolution  # noqa: E402
from conformance_support import (  # noqa: E402
    MODELS_DIR,
    OURS_ARGV_SUFFIX,
    REPO,
    SGLANG_VERSION,
    _probe_input,
    load_cases,
    run_sglang_probe,
    validate_cases,
)

UNREACHABLE = HERE / "unreachable-entries.yaml"
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
    "parallel.dist_init_addr": "nnodes > 1 without dist_init_addr: SGLang's argument handling lets it through, then each "
                               "node's ranks rendezvous at that node's own address (sglang/srt/distributed/bootstrap.py:"
                               "238-247), so the nodes never form one process group and the launch hangs until the "
                               "distributed timeout",
    "input.argv": "a value the rendered launch command cannot carry as one argv word, or a port outside 1-65535: SGLang "
                  "range-checks only --grpc-port (serving_hook.py:382); any other port fails when it is bound at start-up, "
                  "and the host plan (sglang_hostplan.instance_ports) reserves --port even where SGLang leaves it "
                  "unbound (smg_grpc_mode with a --grpc-port)",
    "parallel.elastic_ep": "an elastic-EP runtime scale-up with the mooncake backend: the project installs no Mooncake "
                           "transfer engine and does not deploy elastic expert parallelism (the rule's reason; SGLang's "
                           "own scale-up checks, parallel_hook.py:594-747, refuse most such configurations too)",
    "parallel.node_rank": "a node_rank outside 0..nnodes-1 (node_rank >= 1 with one node): SGLang's argument handling "
                          "lets it through, then a node_rank >= 1 runs as a follower node, with no tokenizer and no "
                          "HTTP server (sglang/srt/entrypoints/engine.py:1234, http_server.py:3163), and waits for a "
                          "rank-0 node that never comes: the server never answers /health",
    "server.warmup": "--skip-server-warmup without sglang_server_allow_skip_warmup: SGLang accepts it, then marks itself "
                     "ready before any request ran (http_server.py:2589-2593, /ready at :714-718) and the first requests "
                     "pay the kernel JIT; the operator allows it explicitly",
    "numeric.mem_fraction_static": "a share of GPU memory outside (0, 1): SGLang's argument handling lets it through, "
                                   "the memory pool then has nothing (or more than the GPU) to allocate",
    "numeric.page_size": "a page size below 1: SGLang divides by it at run time",
    "numeric.cuda_graph_max_bs": "a largest captured CUDA-graph batch below 1 (decode or prefill): SGLang's argument "
                                 "handling lets it through, then get_batch_sizes_to_capture asserts a non-empty list of "
                                 "positive sizes (sglang/srt/model_executor/runner/base_cuda_graph_runner.py:104) when "
                                 "the graphs are captured, after the weights load; with prefill graphs off the prefill "
                                 "value is unused, and 0 there has no use either",
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
# Values of an environment switch a condition reads (SGLang's envs are booleans or integers).
ENV_VALUES = ["1", "0", "true", "false"]

# Hand-picked groups of arguments that interact: extra weight beside the catalog-driven cases (GROUP_SHARE of them).
GROUPS: dict[str, list[str]] = {
    "speculative": ["speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens", "speculative_attention_mode", "speculative_moe_runner_backend",
                    "speculative_draft_model_path"],
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
GROUP_SHARE = 4  # one case in GROUP_SHARE comes from GROUPS, the rest from the catalog's raise sites

# The settings SGLang's own resolution reads before its checks, which change what those checks see (model overrides,
# handle_a2a_moe, handle_dwdp, the PD and deterministic hooks): a catalog case draws one of them, in plausible sizes,
# one time in RESOLUTION_SHARE (extra weight). A catalog entry's own condition rarely names them, and their schema
# values (any integer near a boundary) are mostly refused before the checks behind them. Added after the attn_cp_size
# class (test_sglang_rules_attn_cp_a2a.py): seed 14's 10,000 cases drew attn_cp_size > 1 with a moe_a2a_backend on
# DeepSeek-V3 4 times, and none of them reached the backend's checks that a MISSED hid behind. With tp_size 8, 8 GPUs.
RESOLUTION_CONTEXTS: list[dict[str, Any]] = [
    {"attn_cp_size": 2, "tp_size": 8}, {"attn_cp_size": 4, "tp_size": 8},
    {"enable_prefill_cp": True, "cp_strategy": "interleave", "tp_size": 8},
    {"enable_prefill_cp": True, "cp_strategy": "zigzag", "tp_size": 8},
    {"attn_dp_size": 2, "tp_size": 8}, {"attn_dp_size": 8, "tp_size": 8},
    {"enable_dp_attention": True, "dp_size": 2, "tp_size": 8},
    {"dwdp_size": 2, "tp_size": 8}, {"dcp_size": 2, "tp_size": 8},
    {"enable_waterfill": True}, {"enable_deterministic_inference": True},
    {"disaggregation_mode": "prefill"}, {"disaggregation_mode": "decode"},
]
RESOLUTION_SHARE = 3

# Handlers SGLang runs only under a condition their entries' ``conditions`` do not hold (the caller dispatches on it,
# or the handler returns early before its raise sites): catalog ``file:function`` -> the values that open it, one
# drawn per argument. A case aimed at an entry of such a handler sets them (most of the time: a raise site before the
# gate stays reachable), so the raise sites behind the gate are reached, not refused earlier or skipped.
_FIXTURE_PATH = "tests/conformance/models/Llama-3.1-8B-Instruct"
GATES: dict[str, dict[str, list[Any]]] = {
    # SpeculativeAlgorithm.handle_server_args dispatches on the algorithm (speculative/spec_info.py:255-266); UNO needs
    # its LoRA (speculative_hook.py:460), DFLASH a draft model (:325) before the sites after them.
    "sglang/srt/arg_groups/speculative_hook.py:_handle_uno": {"speculative_algorithm": ["UNO"],
                                                               "uno_lora_path": [_FIXTURE_PATH]},
    "sglang/srt/arg_groups/speculative_hook.py:_handle_dflash": {
        "speculative_algorithm": ["DFLASH"], "speculative_draft_model_path": [_FIXTURE_PATH]},
    "sglang/srt/arg_groups/speculative_hook.py:_handle_eagle_family": {"speculative_algorithm": ["EAGLE", "EAGLE3",
                                                                                                 "STANDALONE"]},
    "sglang/srt/arg_groups/speculative_hook.py:_handle_ngram": {"speculative_algorithm": ["NGRAM"]},
    # Early returns (the handler's first statements).
    "sglang/srt/arg_groups/validation_hook.py:check_watermark_server_args": {"enable_watermark": [True]},  # :39
    "sglang/srt/arg_groups/kv_cache_hook.py:handle_kv4_compatibility": {"kv_cache_dtype": ["nvfp4", "fp4_mx_block16"]},
    "sglang/srt/arg_groups/kv_cache_hook.py:handle_nvfp4_prefill_kv_dequant_dtype": {"kv_cache_dtype": ["nvfp4"]},  # :39
    "sglang/srt/arg_groups/kv_cache_hook.py:handle_unified_memory_pool": {"enable_unified_memory": [True]},  # :531
    "sglang/srt/arg_groups/kv_cache_hook.py:validate_prefill_only_disable_kv_cache_args": {
        "prefill_only_disable_kv_cache": [True]},  # :872
    "sglang/srt/arg_groups/validation_hook.py:handle_aux_hidden_state_capture": {
        "enable_return_aux_hidden_states": [True]},  # :705
    "sglang/srt/arg_groups/hicache_hook.py:resolve_hicache_dcp_compatibility": {
        "dcp_size": [2, 4, 8], "enable_hierarchical_cache": [True]},  # :132
    "sglang/srt/arg_groups/parallel_hook.py:handle_dwdp": {"dwdp_size": [2, 4, 8]},  # :435
    "sglang/srt/arg_groups/layernorm_sp_hook.py:validate_layernorm_sp": {"enable_layernorm_sp": [True]},
    "sglang/srt/arg_groups/attention_hook.py:handle_multi_item_scoring": {"enable_mis": [True]},  # :536
    # KV-cache sharding runs on a PD prefill server only (kv_shard_hook.py:99-104): the rest of both handlers behind it.
    "sglang/srt/arg_groups/kv_shard_hook.py:handle_kv_cache_sharding": {"enable_kv_cache_sharding": [True],
                                                                      "disaggregation_mode": ["prefill"]},
    "sglang/srt/arg_groups/kv_shard_hook.py:validate_kv_shard_attention_backend": {
        "enable_kv_cache_sharding": [True], "disaggregation_mode": ["prefill"]},
    # Handlers whose conditions read their parameters, not arguments: the values their callers pass.
    # check_server_args passes --prompt-tokens-buckets to validate_buckets_rule (validation_hook.py:277, :384-430).
    "sglang/srt/arg_groups/validation_hook.py:validate_buckets_rule": {"prompt_tokens_buckets": [
        ["tse", "1", "2", "3"], ["tse", "1", "2"], ["tse", "x", "2", "3"], ["tse", "1", "1", "3"], ["tse", "1", "2", "0"],
        ["tse", "0", "2", "3"], ["default"], ["default", "1"], ["custom"], ["custom", "a"], ["custom", "1", "1"],
        ["custom", "-1"], ["custom", "1", "2"], ["linear"]]},
    # handle_ssl_validation (serving_hook.py:47-75): the files exist (a fixture's), the pairs vary.
    "sglang/srt/arg_groups/serving_hook.py:handle_ssl_validation": {
        "ssl_keyfile": [f"{_FIXTURE_PATH}/config.json"], "ssl_certfile": [f"{_FIXTURE_PATH}/config.json"],
        "ssl_ca_certs": [f"{_FIXTURE_PATH}/config.json"], "ssl_keyfile_password": ["secret"]},
}
# JSON-valued arguments (argparse type json.loads / json_list_type): a few shapes their checks tell apart.
JSON_VALUES = ["{}", "[]", '{"a": 1}', "1", "[1, 2]"]

# The GPUs each hardware profile (sglang_rules.PROFILES, every compute capability the validator knows) is generated
# with: (name, memory in MiB as the driver reports it, integrated). Integrated GPUs share the host's memory (GB10,
# Thor, Orin): nvidia-smi answers [N/A] for memory.total and SGLang falls back to torch.cuda.mem_get_info
# (sglang/srt/utils/common.py:802-832); their figure is what torch reports as the device's total.
GPUS: dict[tuple[int, int], list[tuple[str, int, bool]]] = {
    (8, 0): [("NVIDIA A100-SXM4-80GB", 81920, False), ("NVIDIA A100-SXM4-40GB", 40960, False)],
    (8, 6): [("NVIDIA A10", 23028, False), ("NVIDIA RTX A6000", 49140, False)],
    (8, 7): [("Orin (nvgpu)", 62841, True)],
    (8, 9): [("NVIDIA L40S", 46068, False), ("NVIDIA L4", 23034, False)],
    (9, 0): [("NVIDIA H100 80GB HBM3", 81559, False), ("NVIDIA H200", 143771, False)],
    (10, 0): [("NVIDIA B200", 183359, False)],
    (10, 3): [("NVIDIA B300 SXM6 AC", 275040, False)],
    (11, 0): [("NVIDIA Thor", 125772, True)],
    (12, 0): [("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, False), ("NVIDIA GeForce RTX 5090", 32607, False)],
    (12, 1): [("NVIDIA GB10", 122570, True)],
}
REFERENCE_GPU = (12, 0)  # the reference host: as often as all others together
# Arguments that name a model directory: the generator gives them the fixture models (as cases.yaml does).
MODEL_PATH_ARGS = ("speculative_draft_model_path",)

CATALOG_DIR = REPO / "tests" / "catalog"
CATALOG = CATALOG_DIR / f"catalog-{SGLANG_VERSION}.json"
MAPPING = CATALOG_DIR / f"mapping-{SGLANG_VERSION}.yml"
COVERAGE_BASELINE = HERE / "coverage-baseline.json"


def schema_arguments() -> dict[str, dict[str, Any]]:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))["arguments"]


def profiles() -> list[tuple[int, int]]:
    """Every compute capability the validator has a profile for (sglang_rules.PROFILES)."""
    collections = str(REPO / "collections")
    if collections not in sys.path:
        sys.path.insert(0, collections)
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import PROFILES  # noqa: PLC0415

    return sorted(PROFILES)


def speculative_algorithms(schema: dict[str, dict[str, Any]]) -> list[str]:
    """The release's speculative algorithms, as its schema lists them (``--speculative-algorithm``'s help:
    "Builtins: EAGLE, EAGLE3, ..."), with choices if it ever has static ones."""
    arg = schema["speculative_algorithm"]
    if arg.get("choices"):
        return list(arg["choices"])
    found = re.search(r"Builtins:\s*([A-Z0-9_, ]+)", arg.get("help") or "")
    return [name.strip() for name in found.group(1).split(",") if name.strip()] if found else []


def load_catalog() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The catalog's entries and each entry's mapping kind (rule / preflight / not_applicable)."""
    entries = json.loads(CATALOG.read_text(encoding="utf-8"))["entries"]
    mapping = yaml.safe_load(MAPPING.read_text(encoding="utf-8"))["entries"]
    return entries, {i: next(iter(m)) for i, m in mapping.items()}


def _constants(node: ast.AST) -> list[Any]:
    if isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bytes):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for elt in node.elts for v in _constants(elt)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)):
        return [-node.operand.value]
    return []


def condition_values(entries: list[dict[str, Any]]) -> dict[str, set[Any]]:
    """Argument name -> the constants SGLang's conditions compare it with (``cfg.kv_cache_dtype == 'nvfp4'``,
    ``cfg.page_size > 1``, ``x in ('a', 'b')``): the values that flip a raise site's condition."""
    out: dict[str, set[Any]] = {}
    for entry in entries:
        for text in entry["conditions"]:
            try:
                tree = ast.parse(text.removeprefix("at: "), mode="eval")
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.Compare):
                    continue
                sides = [node.left, *node.comparators]
                names = [s.attr for s in sides if isinstance(s, ast.Attribute)]
                values = [v for s in sides for v in _constants(s)]
                for name in names:
                    out.setdefault(name, set()).update(values)
    return out


def value_strategy(arg: dict[str, Any], extra: set[Any] = frozenset(),
                   dynamic: dict[str, list[str]] | None = None) -> st.SearchStrategy[Any] | None:
    """Values of one argument, from its schema entry and the constants SGLang's conditions compare it with
    (``extra``); None for arguments the fuzzer cannot give a value."""
    dest = arg["dest"]
    if dest in MODEL_PATH_ARGS:
        return st.sampled_from([f"tests/conformance/models/{m.name}" for m in sorted(MODELS_DIR.iterdir())])
    if arg["action"] == "BooleanOptionalAction":
        # A tri-state switch (default None, "SGLang decides"): false is a choice of its own (--no-X), which conditions
        # such as memory_hook.py:40's `ple_offload_embedding is False` read.
        return st.sampled_from([True, False])
    if arg["action"] in ("store_true", "DeprecatedStoreTrueAction") or arg.get("nargs") == 0:
        return st.just(True)
    choices = arg.get("choices") or (dynamic or {}).get(dest)
    if choices:
        more = sorted(v for v in extra if isinstance(v, str) and v in choices)  # only what argparse lets through
        return st.sampled_from(list(choices) + more)
    kind = arg.get("type")
    if kind in ("json.loads", "json_list_type") and arg.get("nargs") in (None, "?"):
        return st.sampled_from(JSON_VALUES)
    if kind in ("int", "human_readable_int"):
        near = sorted({int(v) + d for v in extra if isinstance(v, (int, float)) and not isinstance(v, bool)
                       and abs(v) < 1 << 40 for d in (-1, 0, 1)})
        return st.sampled_from(sorted(set(INTS) | set(near))) | st.integers(min_value=-2, max_value=20)
    if kind == "float":
        return st.sampled_from(sorted(set(FLOATS) | {float(v) for v in extra if isinstance(v, (int, float))
                                                     and not isinstance(v, bool)}))
    strings = sorted(v for v in extra if isinstance(v, str) and v)
    if kind in ("str", "nullable_str", None) and strings and arg.get("nargs") in (None, "?"):
        return st.sampled_from(strings)
    return None


@dataclass(frozen=True)
class Target:
    """A catalog entry the generator aims at: the arguments and environment switches its condition reads."""

    id: str
    kind: str
    args: tuple[str, ...]
    env: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def generator_data() -> tuple[dict[str, st.SearchStrategy[Any]], list[Target], dict[str, Any]]:
    """(a value strategy per argument, the catalog entries to aim at, facts for the report): everything from the
    schema and the catalog, nothing from a hand list but GROUPS (extra weight) and GPUS (the hardware)."""
    schema = schema_arguments()
    entries, kinds = load_catalog()
    extra = condition_values(entries)
    dynamic = {"speculative_algorithm": speculative_algorithms(schema)}
    values = {dest: v for dest, arg in schema.items()
              if (v := value_strategy(arg, extra.get(dest, set()), dynamic)) is not None}
    targets = []
    for entry in entries:
        kind = kinds.get(entry["id"], "not_applicable")
        if kind == "not_applicable":
            continue
        args = tuple(r[4:] for r in entry["reads"] if r.startswith("arg:") and r[4:] in values)
        env = tuple(r[4:] for r in entry["reads"] if r.startswith("env:"))
        if args or env or f"{entry['file']}:{entry['function']}" in GATES:
            targets.append(Target(entry["id"], kind, args, env))
    facts = {"arguments": len(schema), "valued": len(values), "targets": len(targets),
             "speculative_algorithms": dynamic["speculative_algorithm"]}
    return values, targets, facts


def case_strategy() -> st.SearchStrategy[dict[str, Any]]:
    """One case: a model, a GPU (every profile, its real memory), a GPU count, and the arguments and environment
    switches of 1-2 catalog entries' conditions (one case in GROUP_SHARE: 1-3 hand-picked GROUPS instead), plus
    now and then an argument of the whole schema."""
    values, targets, _ = generator_data()
    per_group = {group: [(d, values[d]) for d in dests if d in values] for group, dests in GROUPS.items()}
    all_args = sorted(values)
    _, models = load_cases()
    gpus = [(cc, gpu) for cc in profiles() for gpu in GPUS[cc]]
    reference = [(REFERENCE_GPU, gpu) for gpu in GPUS[REFERENCE_GPU]]
    env_values = st.sampled_from(ENV_VALUES)

    @st.composite
    def case(draw: st.DrawFn) -> dict[str, Any]:
        # Which sites, GPU and model: drawn uniformly (hypothesis' own choices lean to the first of a list, which
        # would leave the last raise sites and profiles rare); the values: hypothesis' strategies (boundaries first).
        rnd = draw(st.randoms(use_true_random=True))  # a Random seeded from the draw: deterministic
        args: dict[str, Any] = {}
        env: dict[str, str] = {}
        if rnd.randrange(GROUP_SHARE) == 0:
            groups = rnd.sample(sorted(per_group), rnd.randint(1, 3))
            for group in groups:
                for dest, strategy in rnd.sample(per_group[group], min(len(per_group[group]), rnd.randint(1, 4))):
                    args[dest] = draw(strategy)
            family = "+".join(groups)
        else:
            for target in rnd.sample(targets, rnd.randint(1, 2)):
                for dest in target.args:  # each read argument, most of the time (a condition may want it unset)
                    if rnd.randrange(5):
                        args[dest] = draw(values[dest])
                for dest, opening in GATES.get(target.id.rpartition(":")[0], {}).items():
                    if rnd.randrange(5):
                        value = rnd.choice(opening)
                        args[dest] = list(value) if isinstance(value, list) else value
                for name in target.env:
                    if rnd.randrange(2):
                        env[name] = draw(env_values)
            family = "catalog"
            if rnd.randrange(RESOLUTION_SHARE) == 0:  # the target's own arguments win
                for dest, value in rnd.choice(RESOLUTION_CONTEXTS).items():
                    args.setdefault(dest, value)
        if rnd.randrange(4) == 0:  # any argument of the schema, now and then
            dest = rnd.choice(all_args)
            args.setdefault(dest, draw(values[dest]))
        cc, (name, memory, integrated) = rnd.choice(gpus if rnd.randrange(2) else reference)
        gpu_count = rnd.choice([1, 2, 4, 8])
        return {"model": rnd.choice(sorted(models)), "gpu_count": 8 if args.get("tp_size") == 8 else gpu_count,
                "compute_capability": f"{cc[0]}.{cc[1]}", "gpu_name": name, "gpu_memory_mib": memory,
                "gpu_integrated": integrated, "args": args, "env": env, "family": family}

    return case()


@contextlib.contextmanager
def without_local_constants() -> Iterator[None]:
    """Hypothesis (6.131 on) now and then draws a literal constant of the *local* modules loaded (the collection's
    plugins, sglang_rules among them: everything outside site-packages and tests/) instead of a random value, so a
    new line number in a rule would change every generated case after it, and the same seed would give other cases
    under pytest (more modules loaded) than from the command line. Generation runs with that pool empty; the fixed
    global pool and the schema's and the catalog's values stay. A Hypothesis without the pool needs nothing."""
    try:
        from hypothesis.internal.conjecture import providers  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        yield
        return
    if not (hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants")):  # pragma: no cover
        yield
        return
    empty = providers.Constants()
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    with mock.patch.object(providers, "_get_local_constants", lambda: empty):
        if cache is not None:
            cache.cache.clear()  # allowed constants per kind, built from the local pool
        try:
            yield
        finally:
            if cache is not None:
                cache.cache.clear()


def generate(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct cases, the same for the same (count, seed) everywhere (without_local_constants)."""
    found: dict[str, dict[str, Any]] = {}
    strategy = case_strategy()

    @hypothesis_seed(seed)
    @settings(max_examples=count * 3, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(strategy)
    def collect(case: dict[str, Any]) -> None:
        if len(found) < count:
            found.setdefault(json.dumps(case, sort_keys=True), case)

    with without_local_constants():
        collect()
    cases = list(found.values())[:count]
    for number, case in enumerate(cases):
        case["id"] = f"fuzz-{seed}-{number:05d}"
    return cases


def documented_stricter(result: Any) -> bool:
    return bool(result.errors) and all(any(p.rule.startswith(prefix) for prefix in STRICTER) for p in result.errors)


def grid_cases(names: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """grids.yaml, the grids ``names`` names (``all``: every grid) and their configurations as cases: ``*`` the
    pinned release's speculative algorithms, each profile's GPU the first of GPUS."""
    doc = grids.load()
    chosen = grids.select(doc, names)
    algorithms = speculative_algorithms(schema_arguments())
    return doc, chosen, [case for grid in chosen for case in grids.expand(grid, doc, algorithms, GPUS)]


# The verdicts a test fails on; probe-error is reported, not failed.
FAILING = ("MISSED", "OUR-ARGV", "CRASH", "STRICTER-UNEXPLAINED")


def offenders(cases: list[dict[str, Any]], verdicts: dict[str, str], mine: dict[str, Any],
              sglang: dict[str, dict[str, Any]], note: str = "") -> list[str]:
    """One line per case whose verdict is FAILING: the verdict, the id (and the case's ``note`` key, e.g. a targeted
    case's intent), SGLang's answer and file:line, ours (accept, the rules that refused, or the crash), the model, the
    GPU, the arguments and the environment."""
    lines = []
    for c in cases:
        verdict = verdicts[c["id"]]
        if verdict not in FAILING:
            continue
        result, r = mine[c["id"]], sglang.get(c["id"]) or {}
        ours = repr(result) if isinstance(result, Exception) else (
            "accept" if result.ok else "reject " + ", ".join(p.rule for p in result.errors))
        lines.append(f"{verdict} {c['id']}{f' ({c[note]})' if note else ''}: SGLang {r.get('status')} "
                     f"{r.get('where') or ''}; ours {ours}; {c['model']} cc {c['compute_capability']}, "
                     f"args {json.dumps(c['args'])}, env {json.dumps(c.get('env') or {})}")
    return lines


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


SET_ASIDE = "hardware.fit"


def validate_generated(cases: list[dict[str, Any]], contexts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Our validator's Result per case, told the GPU's memory as a host's facts tell it (``nvidia_gpu_memory_mib``:
    SGLang's default chunked_prefill_size follows it, memory_hook.py:88-180), with SET_ASIDE's refusals set aside:
    the weights' fit is a documented-stricter check SGLang's argument handling never makes, and on most generated GPUs
    it would refuse first and hide what else SGLang refuses. Without the memory the validator had to allow every
    default a capability's GPUs get: the 10,000-case run's MISSED fuzz-0-05034 (page_size 8192 on an RTX 5090,
    whose 4096 default it divides not, validation_hook.py:244)."""
    mine = validate_cases(cases, load_cases()[1], gpu_memory=True, contexts=contexts)
    return {cid: res if isinstance(res, Exception) else
            dataclasses.replace(res, errors=[p for p in res.errors if p.rule != SET_ASIDE]) for cid, res in mine.items()}


def evaluate(cases: list[dict[str, Any]], jobs: int = 1, store: Path | None = None,
             contexts: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, Any], dict[str, dict[str, Any]]]:
    """(verdict per id, our results, SGLang's results incl. the our-argv variants); ``contexts`` is filled with each
    case's rule Context (resolution.py)."""
    mine = validate_generated(cases, contexts)
    payload = [_probe_input(c) for c in cases]
    payload += [_probe_input(c, id=c["id"] + OURS_ARGV_SUFFIX, argv=list(mine[c["id"]].argv))
                for c in cases if not isinstance(mine[c["id"]], Exception) and mine[c["id"]].ok and mine[c["id"]].argv]
    sglang = cached_probe(payload, jobs, store)
    verdicts = {c["id"]: classify(sglang.get(c["id"]), mine[c["id"]], sglang.get(c["id"] + OURS_ARGV_SUFFIX))
                for c in cases}
    return verdicts, mine, sglang


def shrink(cases: list[dict[str, Any]], rounds: int = 8, jobs: int = 1) -> list[dict[str, Any]]:
    """Each MISSED case with as few arguments and switches as still give MISSED (one probe run per round for all of them)."""
    current = {c["id"]: c for c in cases}
    for _ in range(rounds):
        variants = []
        for cid, case in current.items():
            for dest in case["args"]:
                variants.append({**case, "id": f"{cid}~{dest}", "args": {k: v for k, v in case["args"].items() if k != dest},
                                 "parent": cid})
            for name in case.get("env") or {}:
                variants.append({**case, "id": f"{cid}~{name}", "env": {k: v for k, v in case["env"].items() if k != name},
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
             **({"env": case["env"]} if case.get("env") else {}),
             **{k: case[k] for k in ("gpu_name", "gpu_memory_mib", "gpu_integrated") if case.get(k)},
             "sglang": "reject", "sglang_exception": sglang.get("exception"),
             "sglang_where": (sglang.get("where") or "").split(":")[0]}
    return json.dumps(entry)


@dataclass
class Coverage:
    """Where SGLang refused the probe inputs: per catalog entry, the inputs it refused there."""

    probed: int = 0
    refused: int = 0
    hits: Counter = field(default_factory=Counter)  # catalog id -> refused inputs
    argparse: int = 0  # refused by argparse itself (a type or a choice): no raise site of SGLang's
    uncatalogued: Counter = field(default_factory=Counter)  # "file:line exception" -> refused inputs

    def share(self, kinds: dict[str, str], kind: str) -> tuple[int, int]:
        """(entries of ``kind`` hit, entries of ``kind``)."""
        ids = [i for i, k in kinds.items() if k == kind]
        return sum(1 for i in ids if self.hits[i]), len(ids)


def site_index(entries: list[dict[str, Any]]) -> dict[str, list[tuple[int, int, str]]]:
    """file -> (first line, last line, id) of its catalog entries."""
    index: dict[str, list[tuple[int, int, str]]] = {}
    for e in entries:
        index.setdefault(e["file"], []).append((e["line"], e.get("end_line", e["line"]), e["id"]))
    return index


def locate(where: str, index: dict[str, list[tuple[int, int, str]]]) -> str | None:
    """The catalog entry whose statement holds ``where`` (``file:line`` as the probe reports it), the innermost
    (shortest) where statements nest."""
    path, _, line = (where or "").rpartition(":")
    if not line.isdigit():
        return None
    spans = [(last - first, eid) for first, last, eid in index.get(path, ()) if first <= int(line) <= last]
    return min(spans)[1] if spans else None


def coverage(results: list[dict[str, Any]], entries: list[dict[str, Any]]) -> Coverage:
    """Which catalog entries SGLang refused ``results`` (the probe's answers, our-argv variants included) at."""
    index = site_index(entries)
    cov = Coverage()
    for r in results:
        if r.get("status") not in ("accepted", "rejected"):
            continue
        cov.probed += 1
        if r["status"] != "rejected":
            continue
        cov.refused += 1
        eid = locate(r.get("where") or "", index)
        if eid is not None:
            cov.hits[eid] += 1
        elif r.get("exception") == "SystemExit":
            cov.argparse += 1
        else:
            cov.uncatalogued[f"{r.get('where')} {r.get('exception')}"] += 1
    return cov


def never_hit_reason(target: Target | None, entry: dict[str, Any] | None = None,
                     schema: dict[str, dict[str, Any]] | None = None) -> str:
    """Why the generator never reached a catalog entry, as far as the generator itself can tell."""
    if target is None:
        args = [r[4:] for r in (entry or {}).get("reads", []) if r.startswith("arg:")]
        if schema is not None and any(a in schema for a in args):
            return "not aimed at: the arguments it reads take free text, JSON or lists, which the generator does not draw"
        if args:
            return "not aimed at: it reads fields of a parsed value or a JSON config, not CLI arguments"
        if entry is not None:
            return "not aimed at: it reads no argument (a local of the handler, the model's config, the platform)"
        return "not aimed at: its condition reads no argument the generator can set or switch it knows"
    if target.id.rpartition(":")[0] in GATES:
        return "aimed at behind its handler's gate (GATES), its condition never held"
    return "aimed at, its condition never held"


def corpus_sites(entries: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Catalog id -> the cases.yaml cases SGLang refuses there (their ``sglang_where``)."""
    index = site_index(entries)
    out: dict[str, list[str]] = {}
    for case in load_cases()[0]:
        eid = locate(str(case.get("sglang_where") or ""), index)
        if eid is not None:
            out.setdefault(eid, []).append(case["id"])
    return out


def unreachable_entries() -> dict[str, str]:
    """Catalog id -> why no input reaches the entry through SGLang's command line or in the probe
    (unreachable-entries.yaml, written by whoever showed it; test_differential checks it against the corpus)."""
    return dict(yaml.safe_load(UNREACHABLE.read_text(encoding="utf-8")) or {})


def unreached_table(cov: Coverage, entries: list[dict[str, Any]], kinds: dict[str, str], title: str) -> str:
    """The `rule` entries ``cov`` never hit: why the generator does not reach each, and the corpus cases (cases.yaml)
    that show SGLang refusing there instead, or why no input can reach it (unreachable-entries.yaml) (markdown)."""
    aimed = {t.id: t for t in generator_data()[1]}
    schema = schema_arguments()
    corpus = corpus_sites(entries)
    unreachable = unreachable_entries()
    never = [e for e in entries if kinds.get(e["id"]) == "rule" and not cov.hits[e["id"]]]
    covered = sum(1 for e in never if corpus.get(e["id"]))
    shown = sum(1 for e in never if not corpus.get(e["id"]) and e["id"] in unreachable)
    lines = [f"# `rule` entries the differential fuzzer does not reach ({title})", "",
             "Generated by `tests/conformance/differential.py --unreached FILE` (see README.md, 'Raise-site coverage of the "
             "fuzzer'): each catalog entry mapped `rule` that SGLang refused no generated input at, why the generator "
             "does not reach it, and the conformance cases (`cases.yaml`) that show SGLang refusing there instead; for "
             "an entry no input can reach, why (after the generator's reason, from `unreachable-entries.yaml`).", "",
             f"{len(never)} entries; {covered} covered by a corpus case, {shown} unreachable (the reason given), "
             f"{len(never) - covered - shown} by none yet.", "",
             "| entry | line | why the generator does not reach it | corpus cases |", "| --- | --- | --- | --- |"]
    for e in never:
        reason = never_hit_reason(aimed.get(e["id"]), e, schema)
        cases = ", ".join(f"`{c}`" for c in sorted(corpus.get(e["id"], [])))
        if not cases and e["id"] in unreachable:
            reason, cases = f"{reason}; {' '.join(unreachable[e['id']].split())}", "none: unreachable"
        lines.append(f"| `{e['id']}` | {e['line']} | {reason} | {cases or 'none yet'} |")
    return "\n".join(lines) + "\n"


def coverage_lines(cov: Coverage, entries: list[dict[str, Any]], kinds: dict[str, str],
                   targets: list[Target], detail: bool = True) -> list[str]:
    """The coverage table of the report: per mapping kind, the catalog entries SGLang refused generated inputs at."""
    by_id = {e["id"]: e for e in entries}
    aimed = {t.id: t for t in targets}
    lines = ["", "## Raise-site coverage", "",
             f"{cov.probed} probe inputs, SGLang refused {cov.refused}: {sum(cov.hits.values())} at a catalog entry "
             f"({len(cov.hits)} entries), {cov.argparse} in argparse (a type or a choice), "
             f"{sum(cov.uncatalogued.values())} at sites the catalog lacks.", "",
             "| mapped | entries | hit | share | aimed at |", "| --- | --- | --- | --- | --- |"]
    for kind in ("rule", "preflight", "not_applicable"):
        hit, total = cov.share(kinds, kind)
        n_aimed = sum(1 for i, k in kinds.items() if k == kind and i in aimed)
        lines.append(f"| `{kind}` | {total} | {hit} | {100 * hit / max(total, 1):.0f}% | {n_aimed} |")
    implicit = [e["id"] for e in entries if e["kind"] == "implicit"]
    lines.append(f"| of which `implicit` | {len(implicit)} | {sum(1 for i in implicit if cov.hits[i])} | | |")
    if cov.uncatalogued:
        lines += ["", "Refused at sites the catalog lacks (implicit failures: add them to "
                      f"tests/catalog/implicit-{SGLANG_VERSION}.yml):", ""]
        lines += [f"- `{site}`: {n}" for site, n in cov.uncatalogued.most_common()]
    if not detail:
        return lines
    lines += ["", "Entries hit (refused inputs per entry):", "", "| entry | mapped | line | refused |",
              "| --- | --- | --- | --- |"]
    lines += [f"| `{eid}` | {kinds.get(eid)} | {by_id[eid]['line']} | {n} |"
              for eid, n in sorted(cov.hits.items(), key=lambda item: (by_id[item[0]]["file"], by_id[item[0]]["line"]))]
    never = [e for e in entries if kinds.get(e["id"]) == "rule" and not cov.hits[e["id"]]]
    schema = schema_arguments()
    reasons = Counter(never_hit_reason(aimed.get(e["id"]), e, schema) for e in never)
    lines += ["", f"`rule` entries never hit ({len(never)}), by reason:", ""]
    lines += [f"- {why}: {n}" for why, n in reasons.most_common()]
    lines += ["", "| entry | line | reads |", "| --- | --- | --- |"]
    lines += [f"| `{e['id']}` | {e['line']} | {', '.join(e['reads']) or '-'} |" for e in never]
    return lines


def sample_coverage(sglang: dict[str, dict[str, Any]]) -> tuple[Coverage, list[dict[str, Any]], dict[str, str]]:
    entries, kinds = load_catalog()
    return coverage(list(sglang.values()), entries), entries, kinds


def report(cases: list[dict[str, Any]], verdicts: dict[str, str], mine: dict[str, Any],
           sglang: dict[str, dict[str, Any]], seconds: float, seed: int, detail: bool = True,
           contexts: dict[str, Any] | None = None, source: str = "") -> str:
    """The run's Markdown report; with ``contexts`` (evaluate's), also our resolver against SGLang's resolved values
    on the cases both accept (resolution.py). ``source`` names where the cases came from (else the seed)."""
    counts = Counter(verdicts.values())
    lines = [f"# Differential fuzzing: our validator vs SGLang {SGLANG_VERSION}", "",
             f"{len(cases)} cases ({source or f'seed {seed}'}) in {seconds:.0f} s: "
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
            env = f" env `{json.dumps(case['env'], sort_keys=True)}`" if case.get("env") else ""
            lines.append(f"- `{case['id']}` {case['model']} x{case['gpu_count']} cc {case['compute_capability']} "
                         f"({case.get('gpu_name', 'reference GPU')}) `{json.dumps(case['args'], sort_keys=True)}`{env}: {why}")
    if contexts is not None:
        lines += resolution.report_lines(*resolution.differences(cases, mine, contexts, sglang))
    cov, entries, kinds = sample_coverage(sglang)
    lines += coverage_lines(cov, entries, kinds, generator_data()[1], detail=detail)
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
    parser.add_argument("--save-cases", type=Path, default=None, metavar="FILE",
                        help="write the generated cases to FILE (JSON), to judge the same cases again after a catalog "
                             "or mapping change moves what the generator draws (--cases-from)")
    parser.add_argument("--cases-from", type=Path, default=None, metavar="FILE",
                        help="judge the cases of FILE (written by --save-cases) instead of generating them")
    parser.add_argument("--grid", action="append", default=None, metavar="NAME",
                        help="judge every configuration of the grid NAME of grids.yaml (repeatable; all: every grid) "
                             "instead of generating cases")
    parser.add_argument("--unreached", type=Path, default=None, metavar="FILE",
                        help="write the table of the `rule` entries the run never reached (why, and the corpus cases "
                             "that cover them instead) to FILE")
    parser.add_argument("--coverage-of", type=Path, default=None, metavar="ANSWERS",
                        help="print the raise-site coverage of every answer a --sglang-answers file holds, and exit")
    args = parser.parse_args(argv)
    if args.cases_from is not None and args.grid:
        parser.error("--cases-from and --grid both name the cases to judge: give one")
    if args.coverage_of is not None:
        answers = [json.loads(line)["answer"] for line in args.coverage_of.read_text(encoding="utf-8").splitlines()
                   if line.strip()]
        entries, kinds = load_catalog()
        text = "\n".join(coverage_lines(coverage(answers, entries), entries, kinds, generator_data()[1]))
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0
    start = time.monotonic()
    if args.cases_from is not None:
        cases = json.loads(args.cases_from.read_text(encoding="utf-8"))
        source = f"`--cases-from` {args.cases_from.name}"
    elif args.grid:
        try:
            _, chosen, cases = grid_cases(args.grid)
        except ValueError as exc:
            parser.error(str(exc))
        source = "grids " + ", ".join(grid["name"] for grid in chosen)
    else:
        cases = generate(args.cases, args.seed)
        source = f"`--cases {args.cases} --seed {args.seed}`"
    if args.save_cases is not None:
        args.save_cases.parent.mkdir(parents=True, exist_ok=True)
        args.save_cases.write_text(json.dumps(cases, sort_keys=True) + "\n", encoding="utf-8")
    contexts: dict[str, Any] = {}
    verdicts, mine, sglang = evaluate(cases, args.jobs, args.sglang_answers, contexts)
    text = report(cases, verdicts, mine, sglang, time.monotonic() - start, args.seed, contexts=contexts,
                  source=source if args.cases_from is not None or args.grid else "")
    _, differ = resolution.differences(cases, mine, contexts, sglang)
    if args.unreached is not None:
        cov, entries, kinds = sample_coverage(sglang)
        args.unreached.write_text(unreached_table(cov, entries, kinds, f"{len(cases)} cases, {source}"), encoding="utf-8")
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
    return 1 if bad or any(d.explained is None for d in differ) else 0


if __name__ == "__main__":
    raise SystemExit(main())
