"""Unit tests of the validator (``sglang_validate.validate_host``) and its rules (``sglang_rules``).

Every test starts from the sample inventory's reference host (8x RTX PRO 6000 Blackwell, compute
capability "12.0", nvidia/Qwen3.5-397B-A17B-NVFP4 with NEXTN), which must validate clean, and changes
only what the test is about.  Assertions name the rule id, the host variable the problem points at,
and key words of the message and fix a user reads.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import load_schema, normalize_key
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import (
    Problem,
    Result,
    format_report,
    render_argv,
    validate_host,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import INCIDENT, load_reference

REPO = Path(__file__).resolve().parents[2]
REFERENCE_MODEL = "nvidia/Qwen3.5-397B-A17B-NVFP4"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SCHEMA = load_schema("0.5.23")

TRIPLE_AUTO_QWEN = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}

MISSING = object()  # override value that removes a host variable


REFERENCE = load_reference()


def ref_host(args: dict[str, Any] | None = None, *, drop: tuple[str, ...] = (), **hostvars: Any) -> dict[str, Any]:
    """The reference host's variables with ``sglang_args`` overrides, dropped args and host-var overrides."""
    host = copy.deepcopy(REFERENCE)
    for key in drop:
        del host["sglang_args"][key]  # KeyError on a typo in the test itself
    host["sglang_args"].update(args or {})
    for name, value in hostvars.items():
        if value is MISSING:
            host.pop(name, None)
        else:
            host[name] = value
    return host


def llama_host(args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    """A plain Llama 3.1 8B (non-hybrid, bf16, 128k context) on the reference hardware."""
    hostvars.setdefault("sglang_model_path", LLAMA)
    return ref_host(args, drop=("quantization", "moe_runner_backend", "mamba_radix_cache_strategy", "context_length"), **hostvars)


def rules(result: Result) -> list[str]:
    return [p.rule for p in result.errors]


def the_error(result: Result, rule: str) -> Problem:
    """The only error of ``result``, which must have rule id ``rule``."""
    assert [p.rule for p in result.errors] == [rule], format_report("host", result)
    return result.errors[0]


def find(problems: list[Problem], rule: str) -> Problem:
    matches = [p for p in problems if p.rule == rule]
    assert matches, f"no {rule} in {[p.rule for p in problems]}"
    return matches[0]


def flag_values(argv: list[str], flag: str) -> list[str]:
    """The words following ``flag`` in argv up to the next flag."""
    assert argv.count(flag) == 1, argv
    out = []
    for word in argv[argv.index(flag) + 1 :]:
        if word.startswith("--"):
            break
        out.append(word)
    return out


# --- the reference host -------------------------------------------------------------------------


def test_reference_host_is_clean() -> None:
    result = validate_host(ref_host())
    assert result.ok, format_report("blackwell-01", result)
    assert result.errors == [] and result.warnings == []
    assert result.version == "0.5.23"
    assert result.argv[:2] == ["--model-path", REFERENCE_MODEL]
    assert flag_values(result.argv, "--speculative-algorithm") == ["NEXTN"]
    assert result.config == {}
    assert result.model is not None and result.model.hybrid_linear_attention and result.model.quantization == "nvfp4"


def test_validate_host_does_not_mutate_its_input() -> None:
    host = ref_host(INCIDENT)
    before = copy.deepcopy(host)
    validate_host(host, spec="auto")
    assert host == before


# --- schema: names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("tp_szie", "tp_size"),
        ("mem_frac", "mem_fraction_static"),
        ("enable_metric", "enable_metrics"),
        ("--tp", "tp_size"),  # a prefix argparse might accept: refused, never rendered
        ("speculative_num", "speculative_num_steps"),
    ],
)
def test_unknown_key_with_did_you_mean(key: str, suggestion: str) -> None:
    result = validate_host(ref_host({key: 8}))
    problem = the_error(result, "schema.unknown")
    assert problem.variable == f"sglang_args.{key}"
    assert "unrecognized arguments" in problem.message and repr(key) in problem.message
    assert problem.fix.startswith("did you mean") and suggestion in problem.fix
    assert result.argv == validate_host(ref_host()).argv  # the unknown key renders nothing


def test_unknown_key_without_close_match_points_at_help() -> None:
    problem = the_error(validate_host(ref_host({"zzqqxx_frobnicate": 1})), "schema.unknown")
    assert "--help" in problem.fix


@pytest.mark.parametrize("key", ["tp-size", "--tp-size", "tensor_parallel_size", "--tensor-parallel-size", " tp_size "])
def test_dashed_and_alias_keys_are_accepted(key: str) -> None:
    result = validate_host(ref_host({key: 4}, drop=("tp_size",)))
    assert result.ok, format_report("host", result)
    assert result.args["tp_size"] == 4
    assert flag_values(result.argv, "--tp-size") == ["4"]
    assert "--tensor-parallel-size" not in result.argv


@pytest.mark.parametrize("key", ["tp-size", "--tp-size", "tensor_parallel_size"])
def test_same_argument_twice_is_a_duplicate(key: str) -> None:
    problem = the_error(validate_host(ref_host({key: 8})), "schema.duplicate")
    assert problem.variable == f"sglang_args.{key}"
    assert repr(key) in problem.message and "'tp_size'" in problem.message and "--tp-size" in problem.message
    assert "keep one" in problem.fix


# --- schema: types ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["eight", "8.5", 8.5, "8x", ""])
def test_tp_size_must_be_an_integer(value: Any) -> None:
    result = validate_host(ref_host({"tp_size": value}))
    problem = the_error(result, "schema.type")
    assert problem.variable == "sglang_args.tp_size"
    assert "--tp-size" in problem.message and "integer" in problem.message and repr(value) in problem.message
    assert "sglang_args.tp_size" in problem.fix
    assert "--tp-size" not in result.argv


@pytest.mark.parametrize("value", ["8", " 8 ", 8, 8.0])
def test_tp_size_numeric_text_is_converted_to_int(value: Any) -> None:
    result = validate_host(ref_host({"tp_size": value}))
    assert result.ok, format_report("host", result)
    assert result.args["tp_size"] == 8 and type(result.args["tp_size"]) is int
    assert flag_values(result.argv, "--tp-size") == ["8"]


def test_int_flag_refuses_true_and_omits_false() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": True})), "schema.type")
    assert "takes a value" in problem.message and problem.value is True
    result = validate_host(ref_host({"tp_size": False}))
    assert result.ok and "--tp-size" not in result.argv


@pytest.mark.parametrize(("value", "typed"), [("0.8", 0.8), (0.8, 0.8), ("0.75 ", 0.75)])
def test_float_flag_converts(value: Any, typed: float) -> None:
    result = validate_host(ref_host({"mem_fraction_static": value}))
    assert result.ok
    assert result.args["mem_fraction_static"] == typed and isinstance(result.args["mem_fraction_static"], float)
    assert flag_values(result.argv, "--mem-fraction-static") == [repr(typed)]


def test_float_flag_given_an_int_renders_as_float() -> None:
    result = validate_host(ref_host({"watchdog_timeout": 600}))
    assert result.ok
    assert flag_values(result.argv, "--watchdog-timeout") == ["600.0"]


def test_float_flag_refuses_text() -> None:
    problem = the_error(validate_host(ref_host({"mem_fraction_static": "0.8x"})), "schema.type")
    assert problem.variable == "sglang_args.mem_fraction_static" and "a number" in problem.message


def test_value_outside_choices() -> None:
    problem = the_error(validate_host(ref_host({"attention_backend": "flashinfer_x"})), "schema.choices")
    assert problem.variable == "sglang_args.attention_backend"
    assert "'flashinfer_x'" in problem.message and "--attention-backend" in problem.message
    assert "triton" in problem.message and "flashinfer" in problem.message and "0.5.23" in problem.message


def test_choices_near_miss_suggests_the_close_ones() -> None:
    problem = the_error(validate_host(ref_host({"kv_cache_dtype": "fp8"})), "schema.choices")
    assert "did you mean" in problem.fix and "fp8_e4m3" in problem.fix and "fp8_e5m2" in problem.fix


def test_yaml_off_for_a_string_choice_warns_and_is_not_rendered() -> None:
    # YAML 1.1 reads an unquoted `off` as false (= leave the flag out); SGLang's choice is the string 'off'.
    result = validate_host(ref_host({"weight_cache_mode": False}))
    assert result.ok
    [problem] = result.warnings
    assert problem.rule == "schema.false" and problem.variable == "sglang_args.weight_cache_mode"
    assert '"off"' in problem.fix
    assert "--weight-cache-mode" not in result.argv


@pytest.mark.parametrize("value", ["maybe", 2, "enabled", [True]])
def test_switch_given_a_non_boolean(value: Any) -> None:
    result = validate_host(ref_host({"enable_metrics": value}))
    problem = the_error(result, "schema.type")
    assert problem.variable == "sglang_args.enable_metrics"
    assert "--enable-metrics is a switch" in problem.message
    assert "true" in problem.fix and "false" in problem.fix
    assert "--enable-metrics" not in result.argv


@pytest.mark.parametrize(("value", "present"), [(True, True), ("yes", True), ("true", True), (1, True), ("on", True),
                                                (False, False), ("no", False), ("false", False), (0, False), (None, False)])
def test_switch_spellings(value: Any, present: bool) -> None:
    result = validate_host(ref_host({"enable_metrics": value}))
    assert result.ok
    assert ("--enable-metrics" in result.argv) is present
    assert "--no-enable-metrics" not in result.argv


@pytest.mark.parametrize(
    ("dest", "flag", "choice_hint"),
    [
        ("served_model_name", "--served-model-name", None),
        ("tp_size", "--tp-size", None),
        ("attention_backend", "--attention-backend", "one of"),
    ],
)
def test_value_taking_flag_given_true(dest: str, flag: str, choice_hint: str | None) -> None:
    result = validate_host(ref_host({dest: True}))
    problem = the_error(result, "schema.type")
    assert problem.variable == f"sglang_args.{dest}"
    assert f"{flag} takes a value" in problem.message and "true is not one" in problem.message
    if choice_hint:
        assert choice_hint in problem.message and "triton" in problem.message
    assert "null" in problem.fix
    assert flag not in result.argv


def test_optional_value_flag_given_true_renders_the_flag_alone() -> None:
    result = validate_host(ref_host({"model_checksum": True}))  # nargs='?'
    assert result.ok
    assert flag_values(result.argv, "--model-checksum") == []


@pytest.mark.parametrize(("value", "words"), [([1, 2, 4, 8], ["1", "2", "4", "8"]), (["16", 32], ["16", "32"]), (8, ["8"])])
def test_list_flag(value: Any, words: list[str]) -> None:
    result = validate_host(ref_host({"cuda_graph_bs_decode": value}))
    assert result.ok
    assert result.args["cuda_graph_bs_decode"] == [int(w) for w in words]
    assert flag_values(result.argv, "--cuda-graph-bs-decode") == words


def test_list_flag_needs_a_value() -> None:
    problem = the_error(validate_host(ref_host({"cuda_graph_bs_decode": []})), "schema.type")
    assert "at least one value" in problem.message and "non-empty list" in problem.fix


def test_list_flag_items_are_type_checked() -> None:
    problem = the_error(validate_host(ref_host({"cuda_graph_bs_decode": [1, "two"]})), "schema.type")
    assert "'two'" in problem.message


def test_single_value_flag_refuses_a_list() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": [8]})), "schema.type")
    assert "got a list" in problem.message and "single value" in problem.fix


def test_json_flag_given_a_mapping_renders_compact_json() -> None:
    params = {"top_p": 0.9, "temperature": 0.7}
    result = validate_host(ref_host({"preferred_sampling_params": params}))
    assert result.ok
    (text,) = flag_values(result.argv, "--preferred-sampling-params")
    assert json.loads(text) == params
    assert text == '{"temperature":0.7,"top_p":0.9}'  # sorted keys, no spaces: stable unit files


def test_json_list_flag_given_a_list_renders_json() -> None:
    hooks = [{"name": "probe", "target_modules": ["model.layers.0"]}]
    result = validate_host(ref_host({"forward_hooks": hooks}))
    assert result.ok
    (text,) = flag_values(result.argv, "--forward-hooks")
    assert json.loads(text) == hooks


def test_json_flag_given_json_text_is_kept_verbatim() -> None:
    result = validate_host(ref_host({"preferred_sampling_params": '{"temperature": 0.7}'}))
    assert result.ok
    assert flag_values(result.argv, "--preferred-sampling-params") == ['{"temperature": 0.7}']


def test_json_flag_refuses_text_that_is_not_json() -> None:
    problem = the_error(validate_host(ref_host({"preferred_sampling_params": "temperature=0.7"})), "schema.type")
    assert "not valid JSON" in problem.message


@pytest.mark.parametrize(
    ("value", "tokens"),
    [("256Ki", 262144), ("128Ki", 131072), ("262144", 262144), (262144, 262144), ("128k", 128000), ("25.6k", 25600)],
)
def test_human_readable_int(value: Any, tokens: int) -> None:
    result = validate_host(ref_host({"context_length": value}))
    assert result.ok, format_report("host", result)
    assert result.args["context_length"] == tokens
    assert flag_values(result.argv, "--context-length") == [str(tokens)]


@pytest.mark.parametrize("value", ["1.5Ki", "256ki", "lots", "256 Ki"])
def test_human_readable_int_refuses(value: str) -> None:
    problem = the_error(validate_host(ref_host({"context_length": value})), "schema.type")
    assert problem.variable == "sglang_args.context_length" and repr(value) in problem.message


@pytest.mark.parametrize(("value", "expected"), [(False, ["--no-enable-tf32-matmul"]), (True, ["--enable-tf32-matmul"]), (None, [])])
def test_boolean_optional_action(value: Any, expected: list[str]) -> None:
    result = validate_host(ref_host({"enable_tf32_matmul": value}))
    assert result.ok
    assert [w for w in result.argv if "tf32" in w] == expected


@pytest.mark.parametrize(
    ("key", "new_flag", "fix_word"),
    [
        ("mamba_scheduler_strategy", "--mamba-radix-cache-strategy", "mamba_radix_cache_strategy"),
        ("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy", "mamba_radix_cache_strategy"),
        ("cuda_graph_max_bs", "--cuda-graph-max-bs-decode", "cuda_graph_max_bs_decode"),
    ],
)
def test_renamed_flags(key: str, new_flag: str, fix_word: str) -> None:
    value = "extra_buffer" if "mamba" in key else 64
    result = validate_host(ref_host({key: value}))
    problem = the_error(result, "schema.renamed")
    assert problem.variable == f"sglang_args.{key}"
    assert "0.5.20" in problem.message and new_flag in problem.message and "0.5.23" in problem.message
    assert fix_word in problem.fix
    assert not any("scheduler-strategy" in w or w == "--cuda-graph-max-bs" for w in result.argv)


@pytest.mark.parametrize(
    ("key", "fix_words"),
    [
        ("enable_dp_attention", ["attn_dp_size"]),
        ("disable_cuda_graph", ["cuda_graph_backend_decode: disabled", "cuda_graph_backend_prefill: disabled"]),
    ],
)
def test_deprecated_flags(key: str, fix_words: list[str]) -> None:
    # SGLang 0.5.23 still honours both: a warning, not an error (more in test_false_alarms.py).
    result = validate_host(ref_host({key: True}))
    assert result.ok, format_report("host", result)
    (problem,) = result.warnings
    assert problem.rule == "schema.deprecated" and problem.variable == f"sglang_args.{key}"
    assert "deprecated" in problem.message
    assert all(word in problem.fix for word in fix_words)


@pytest.mark.parametrize("key", ["enable_dp_attention", "disable_cuda_graph"])
def test_deprecated_switch_set_to_false_is_harmless(key: str) -> None:
    result = validate_host(ref_host({key: False}))
    assert result.ok
    assert "--" + key.replace("_", "-") not in result.argv


# --- schema: secrets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "var"), [("api_key", "sglang_api_key"), ("admin_api_key", "sglang_admin_api_key"), ("api-key", "sglang_api_key")]
)
def test_secret_in_sglang_args_is_refused(key: str, var: str) -> None:
    result = validate_host(ref_host({key: "s3cr3t-value"}))
    problem = the_error(result, "host.secret")
    assert problem.variable == f"sglang_args.{key}"
    assert "secret" in problem.message and var in problem.fix and "Vault" in problem.fix
    assert "s3cr3t-value" not in result.argv
    assert not any("api-key" in w for w in result.argv)
    assert result.config == {}


def test_secret_in_sglang_args_is_not_echoed_in_the_report() -> None:
    result = validate_host(ref_host({"api_key": "s3cr3t-value"}))
    assert not result.ok
    assert "s3cr3t-value" not in format_report("blackwell-01", result)
    assert "s3cr3t-value" not in json.dumps(result.as_dict())


@pytest.mark.parametrize(("var", "config_key", "dest"), [("sglang_api_key", "api-key", "api_key"),
                                                         ("sglang_admin_api_key", "admin-api-key", "admin_api_key")])
def test_secret_host_var_goes_to_config_only(var: str, config_key: str, dest: str) -> None:
    result = validate_host(ref_host(**{var: "vault-secret-123"}))
    assert result.ok
    assert result.config == {config_key: "vault-secret-123"}
    assert result.args[dest] == "vault-secret-123"
    assert not any("vault-secret-123" in w for w in result.argv)
    assert "--" + config_key not in result.argv
    public = result.as_dict()
    assert "vault-secret-123" not in json.dumps(public)
    assert public["args"][dest] == "<secret>"
    assert public["config_keys"] == [config_key]


def test_empty_secret_host_var_is_ignored() -> None:
    result = validate_host(ref_host(sglang_api_key=""))
    assert result.ok and result.config == {} and "api_key" not in result.args


# --- host facts ---------------------------------------------------------------------------------


def test_missing_gpu_count() -> None:
    result = validate_host(ref_host({"tp_size": 64}, nvidia_gpu_count=MISSING))
    problem = the_error(result, "host.hardware")  # and no parallel.gpus: nothing to check against
    assert problem.variable == "nvidia_gpu_count"
    assert "not declared" in problem.message and "nvidia_gpu_count: 8" in problem.fix


@pytest.mark.parametrize("count", ["eight", "8.5", True])
def test_invalid_gpu_count(count: Any) -> None:
    problem = the_error(validate_host(ref_host(nvidia_gpu_count=count)), "host.hardware")
    assert problem.variable == "nvidia_gpu_count" and "positive integer" in problem.message


@pytest.mark.parametrize("count", [0, -8])
def test_non_positive_gpu_count_is_refused(count: int) -> None:
    result = validate_host(ref_host(nvidia_gpu_count=count))
    problem = find(result.errors, "host.hardware")
    assert problem.variable == "nvidia_gpu_count" and "positive integer" in problem.message


@pytest.mark.parametrize(
    "args",
    [
        {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4},
        {"speculative_num_steps": 3, "speculative_eagle_topk": 1},
        {"speculative_num_steps": 5, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8},
        {"speculative_num_steps": 2, "speculative_eagle_topk": 2},
    ],
    ids=["all-three", "steps-topk", "topk4", "topk2-no-draft"],
)
def test_valid_speculative_settings(args: dict[str, int]) -> None:
    result = validate_host(ref_host(args))
    assert result.ok and result.warnings == [], format_report("host", result)
    for dest, value in args.items():
        assert flag_values(result.argv, "--" + dest.replace("_", "-")) == [str(value)]


def test_steps_without_topk() -> None:
    problem = the_error(validate_host(ref_host({"speculative_num_steps": 3})), "spec.steps_without_topk")
    assert problem.variable == "sglang_args.speculative_eagle_topk"
    assert "TypeError" in problem.message and "speculative_eagle_topk" in problem.fix and "= 4" in problem.fix


def test_topk_1_with_draft_other_than_steps_plus_1_is_only_a_warning() -> None:
    result = validate_host(ref_host({"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}))
    assert result.ok
    (warning,) = result.warnings
    assert warning.rule == "spec.topk1_draft" and warning.level == "warning"
    assert warning.variable == "sglang_args.speculative_num_draft_tokens" and warning.value == 2
    assert "speculative_num_draft_tokens: 4" in warning.fix


@pytest.mark.parametrize(("dest", "value", "least"), [("speculative_num_steps", -1, 0), ("speculative_eagle_topk", 0, 1),
                                                      ("speculative_num_draft_tokens", 0, 1)])
def test_speculative_values_the_eagle_worker_cannot_draft(dest: str, value: int, least: int) -> None:
    args = {**TRIPLE_AUTO_QWEN, "speculative_eagle_topk": 2, dest: value}
    result = validate_host(ref_host(args))
    problem = the_error(result, "spec.values")
    assert problem.variable == f"sglang_args.{dest}" and problem.value == value
    assert f"at least {least}" in problem.message and f">= {least}" in problem.fix


@pytest.mark.parametrize("args", [
    {"speculative_num_steps": 0, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 1},  # drafting off
    {"speculative_num_steps": 0, "speculative_eagle_topk": 0, "speculative_num_draft_tokens": 1},  # topk unused
    {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 0},  # rewritten to 4
])
def test_speculative_values_sglang_runs(args: dict) -> None:
    result = validate_host(ref_host({**TRIPLE_AUTO_QWEN, **args}))
    assert not [p for p in result.errors if p.rule == "spec.values"]


def test_unknown_speculative_algorithm() -> None:
    problem = the_error(validate_host(ref_host({"speculative_algorithm": "MEDUSA"})), "spec.algorithm")
    assert problem.variable == "sglang_args.speculative_algorithm" and problem.value == "MEDUSA"
    assert "'MEDUSA'" in problem.message and "NEXTN" in problem.fix and "EAGLE3" in problem.fix


def test_lower_case_nextn_is_accepted_and_still_checked() -> None:
    assert validate_host(ref_host({"speculative_algorithm": "nextn"})).ok
    assert rules(validate_host(ref_host({"speculative_algorithm": "nextn", **INCIDENT}))) == ["spec.triple"]


def test_triple_without_algorithm_is_a_warning() -> None:
    result = validate_host(ref_host({"speculative_algorithm": None, "speculative_num_steps": 3}))
    assert result.ok
    (warning,) = result.warnings
    assert warning.rule == "spec.algorithm" and "speculative_algorithm" in warning.fix


@pytest.mark.parametrize("dest", ["attention_backend", "decode_attention_backend", "prefill_attention_backend"])
def test_trtllm_mha_with_topk_above_1(dest: str) -> None:
    tree = {"speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}
    problem = the_error(validate_host(ref_host({**tree, dest: "trtllm_mha"})), "spec.backend")
    assert problem.variable == f"sglang_args.{dest}" and "eagle_topk" in problem.message
    assert "speculative_eagle_topk: 1" in problem.fix
    assert validate_host(ref_host({**TRIPLE_AUTO_QWEN, dest: "trtllm_mha"})).ok


@pytest.mark.parametrize("algorithm", ["NGRAM", "STANDALONE"])
def test_ngram_and_standalone_refuse_attention_dp(algorithm: str) -> None:
    problem = the_error(validate_host(ref_host({"speculative_algorithm": algorithm, "attn_dp_size": 2})), "spec.attn_dp")
    assert problem.variable == "sglang_args.speculative_algorithm"
    assert algorithm in problem.message and "attn_dp_size=2" in problem.message and "attn_dp_size: 1" in problem.fix


@pytest.mark.parametrize("algorithm", ["NEXTN", "EAGLE"])
def test_eagle_family_allows_attention_dp(algorithm: str) -> None:
    assert validate_host(ref_host({"speculative_algorithm": algorithm, "attn_dp_size": 2})).ok


# --- speculative modes (spec=keep|auto|off|explicit) ---------------------------------------------


@pytest.mark.parametrize("args", [INCIDENT, TRIPLE_AUTO_QWEN, {"speculative_num_steps": 3}])
def test_spec_auto_strips_the_triple(args: dict[str, int]) -> None:
    result = validate_host(ref_host(args), spec="auto")
    assert result.ok, format_report("host", result)
    assert not any(dest in result.args for dest in TRIPLE_AUTO_QWEN)
    assert not any(w in result.argv for w in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"))
    assert flag_values(result.argv, "--speculative-algorithm") == ["NEXTN"]


@pytest.mark.parametrize("mode", [" Auto ", "AUTO"])
def test_spec_mode_is_case_insensitive(mode: str) -> None:
    assert validate_host(ref_host(INCIDENT), spec=mode).ok


def test_spec_auto_without_algorithm() -> None:
    problem = the_error(validate_host(ref_host({"speculative_algorithm": None}), spec="auto"), "spec.mode")
    assert problem.variable == "spec" and "speculative_algorithm" in problem.message and "spec=keep" in problem.fix


def test_spec_off_strips_every_speculative_arg() -> None:
    extra = {**INCIDENT, "speculative_draft_attention_backend": "triton", "speculative_moe_runner_backend": "flashinfer_trtllm"}
    result = validate_host(ref_host(extra), spec="off")
    assert result.ok, format_report("host", result)
    assert not any(dest.startswith("speculative_") for dest in result.args)
    assert not any(w.startswith("--speculative") for w in result.argv)


def test_spec_explicit_requires_all_three() -> None:
    result = validate_host(ref_host(INCIDENT), spec="explicit")
    problem = find(result.errors, "spec.mode")
    assert problem.variable == "spec" and "missing: speculative_num_steps" in problem.message and "spec=auto" in problem.fix
    assert "spec.triple" in rules(result)  # the keep-mode check still applies


def test_spec_explicit_without_algorithm() -> None:
    problem = the_error(validate_host(ref_host({"speculative_algorithm": None, **TRIPLE_AUTO_QWEN}), spec="explicit"), "spec.mode")
    assert "speculative_algorithm" in problem.message


def test_spec_explicit_with_all_three() -> None:
    result = validate_host(ref_host(TRIPLE_AUTO_QWEN), spec="explicit")
    assert result.ok
    assert flag_values(result.argv, "--speculative-num-steps") == ["3"]


def test_bogus_spec_mode() -> None:
    problem = the_error(validate_host(ref_host(), spec="sometimes"), "spec.mode")
    assert problem.variable == "spec" and "'sometimes'" in problem.message
    assert all(mode in problem.fix for mode in ("keep", "auto", "off", "explicit"))


@pytest.mark.parametrize("spec", [None, "", "keep"])
def test_spec_defaults_to_keep(spec: Any) -> None:
    assert rules(validate_host(ref_host(INCIDENT), spec=spec)) == ["spec.triple"]


# --- compute capability 12.x ----------------------------------------------------------------------

SM12X_CASES = [
    pytest.param({"attention_backend": "fa3"}, "sm12x.attention", "attention_backend", id="fa3"),
    pytest.param({"attention_backend": "hpc_ops"}, "sm12x.attention", "attention_backend", id="hpc_ops"),
    pytest.param({"prefill_attention_backend": "cutedsl_mla"}, "sm12x.attention", "prefill_attention_backend", id="cutedsl_mla-prefill"),
    pytest.param({"decode_attention_backend": "trtllm_mla"}, "sm12x.attention", "decode_attention_backend", id="trtllm_mla-decode"),
    pytest.param({"prefill_attention_backend": "trtllm_mla"}, "sm12x.attention", "prefill_attention_backend", id="trtllm_mla-prefill"),
    pytest.param({"speculative_draft_attention_backend": "fa3"}, "sm12x.attention", "speculative_draft_attention_backend", id="fa3-draft"),
    pytest.param({"attention_backend": "fa4"}, "sm12x.hybrid_attention", "attention_backend", id="hybrid-fa4"),
    pytest.param({"decode_attention_backend": "flex_attention"}, "sm12x.hybrid_attention", "decode_attention_backend", id="hybrid-flex"),
    pytest.param({"attention_backend": "trtllm_mha", "kv_cache_dtype": "fp8_e4m3"}, "sm12x.trtllm_mha_kv", "kv_cache_dtype",
                 id="trtllm_mha-fp8"),
    pytest.param({"moe_runner_backend": "flashinfer_trtllm"}, "sm12x.moe", "moe_runner_backend", id="moe-flashinfer_trtllm"),
    pytest.param({"moe_runner_backend": "flashinfer_trtllm_routed"}, "sm12x.moe", "moe_runner_backend", id="moe-trtllm_routed"),
    pytest.param({"moe_runner_backend": "experimental_sgl_trtllm"}, "sm12x.moe", "moe_runner_backend", id="moe-sgl_trtllm"),
    pytest.param({"speculative_moe_runner_backend": "flashinfer_trtllm"}, "sm12x.moe", "speculative_moe_runner_backend", id="spec-moe"),
]


@pytest.mark.parametrize(("args", "rule", "dest"), SM12X_CASES)
def test_sm12x_rejects(args: dict[str, str], rule: str, dest: str) -> None:
    problem = the_error(validate_host(ref_host(args)), rule)
    assert problem.variable == f"sglang_args.{dest}" and problem.value == args.get(dest, problem.value)
    assert "12.0" in problem.message
    assert problem.fix


@pytest.mark.parametrize(("args", "rule", "dest"), SM12X_CASES)
def test_same_configs_on_compute_capability_10_are_not_sm12x_errors(args: dict[str, str], rule: str, dest: str) -> None:
    result = validate_host(ref_host(args, nvidia_gpu_compute_capability="10.0"))
    assert not [p for p in result.errors if p.rule.startswith("sm12x")]
    # 10.0 has its own profile (tests/unit/test_arch_profiles.py): fa3, hpc_ops, flex_attention for hybrid models.
    assert all(p.rule.startswith("sm10x.") for p in result.errors), format_report("host", result)
    backend = args.get(dest)
    hybrid_refuses = dest in ("attention_backend", "prefill_attention_backend", "decode_attention_backend") and backend not in (
        "triton", "trtllm_mha", "fa4", "flashinfer")  # the reference model is hybrid (attention_registry.py:44, 462-476)
    assert result.ok == (backend not in ("fa3", "hpc_ops") and not hybrid_refuses), format_report("host", result)


def test_nvfp4_online_is_sm100_only_and_needs_a_checkpoint_it_requantizes() -> None:
    """nvfp4_online requantizes FP8 checkpoints on SM100 only; a ModelOpt NVFP4 checkpoint is not one of them."""
    fp8 = "Qwen/Qwen3.5-397B-A17B-FP8"
    args = {"quantization": "nvfp4_online"}
    problem = the_error(validate_host(ref_host(args, sglang_model_path=fp8, sglang_model_quantization="fp8")),
                        "sm12x.quantization")
    assert problem.variable == "sglang_args.quantization" and "12.0" in problem.message and problem.fix
    on_sm100 = validate_host(ref_host({**args, "moe_runner_backend": "auto"}, sglang_model_path=fp8,
                                      sglang_model_quantization="fp8", nvidia_gpu_compute_capability="10.0"))
    assert on_sm100.ok, format_report("host", on_sm100)
    # The reference host's flashinfer_cutlass MoE runner is not one nvfp4_online runs (overrides.py:1466-1471).
    problem = the_error(validate_host(ref_host(args, sglang_model_path=fp8, sglang_model_quantization="fp8",
                                               nvidia_gpu_compute_capability="10.0")), "server.moe")
    assert problem.variable == "sglang_args.moe_runner_backend" and "overrides.py:1471" in problem.source
    # The reference NVFP4 checkpoint: SGLang refuses the pair on any GPU (sglang/srt/configs/model_config.py:2143).
    problem = the_error(validate_host(ref_host({**args, "moe_runner_backend": "auto"}, nvidia_gpu_compute_capability="10.0")),
                        "quantization.checkpoint")
    assert "modelopt_fp4" in problem.message and "sglang_args.quantization" in problem.fix


def test_sm121_is_sm12x_too() -> None:
    problem = the_error(validate_host(ref_host({"attention_backend": "fa3"}, nvidia_gpu_compute_capability="12.1")), "sm12x.attention")
    assert "12.1" in problem.message


def test_sm12x_attention_fix_for_hybrid_models_mentions_trtllm_mha() -> None:
    problem = the_error(validate_host(ref_host({"attention_backend": "fa3"})), "sm12x.attention")
    assert "triton" in problem.fix and "trtllm_mha" in problem.fix and "FlashAttention 3" in problem.message


@pytest.mark.parametrize("backend", ["triton", "flashinfer", "trtllm_mha"])
def test_hybrid_model_allowed_backends(backend: str) -> None:
    assert validate_host(ref_host({"attention_backend": backend, "decode_attention_backend": backend})).ok


def test_hybrid_rule_does_not_apply_to_the_draft_backend() -> None:
    assert validate_host(ref_host({"speculative_draft_attention_backend": "fa4"})).ok


EXAONE_SWA = '{"architectures": ["Exaone4ForCausalLM"], "sliding_window_pattern": 4}'


@pytest.mark.parametrize(("cc", "args", "refused"), [
    ("12.0", {}, "sm12x.attention"),  # the override fills fa3 (model_overrides/exaone.py:26-27)
    ("12.1", {}, "sm12x.attention"),
    ("11.0", {}, "sm110.attention"),
    ("12.0", {"prefill_attention_backend": "triton"}, "sm12x.attention"),  # decode runs the filled fa3
    ("10.0", {}, None),  # trtllm_mha on SM100
    ("9.0", {}, None),
    ("8.9", {}, None),  # fa3 runs non-MLA models on SM8x
    ("12.0", {"attention_backend": "triton"}, None),
    ("12.0", {"prefill_attention_backend": "triton", "decode_attention_backend": "triton"}, None),
])
def test_exaone_sliding_window_default_fa3_where_it_fails(cc: str, args: dict[str, Any], refused: str | None) -> None:
    """EXAONE 4 with a sliding window and no attention_backend: SGLang fills fa3 from SM80 on but SM100, which fails when
    the backend is built on Blackwell workstations and Thor; refused there as a written fa3 is, naming the fill."""
    host = llama_host({"json_model_override_args": EXAONE_SWA, **args}, nvidia_gpu_compute_capability=cc)
    if "attention_backend" not in args:
        del host["sglang_args"]["attention_backend"]  # the reference host writes triton
    result = validate_host(host)
    assert rules(result) == ([refused] if refused else [])
    if refused:
        problem = the_error(result, refused)
        assert "'fa3'" in problem.message and "exaone.py" in problem.message and "triton" in problem.fix


def test_non_hybrid_model_is_not_limited_to_hybrid_backends() -> None:
    assert validate_host(llama_host({"attention_backend": "fa4"})).ok
    assert rules(validate_host(llama_host({"attention_backend": "fa3"}))) == ["sm12x.attention"]


@pytest.mark.parametrize("kv", ["auto", "bf16", "fp8_e5m2"])
def test_trtllm_mha_with_other_kv_dtypes(kv: str) -> None:
    assert validate_host(ref_host({"attention_backend": "trtllm_mha", "kv_cache_dtype": kv})).ok


def test_fp8_e4m3_kv_without_trtllm_mha() -> None:
    assert validate_host(ref_host({"kv_cache_dtype": "fp8_e4m3"})).ok


@pytest.mark.parametrize("runner", ["flashinfer_cutlass", "triton", "auto"])
def test_sm120_capable_moe_runners(runner: str) -> None:
    assert validate_host(ref_host({"moe_runner_backend": runner})).ok


def test_nvfp4_checkpoint_needs_modelopt_fp4_or_flashinfer_cutlass() -> None:
    result = validate_host(ref_host(drop=("quantization", "moe_runner_backend")))
    problem = the_error(result, "sm12x.nvfp4")
    assert problem.variable == "sglang_args.quantization"
    assert REFERENCE_MODEL in problem.message and "NVFP4" in problem.message
    assert "modelopt_fp4" in problem.fix and "flashinfer_cutlass" in problem.fix


@pytest.mark.parametrize("drop", [("quantization",), ("moe_runner_backend",)], ids=["runner-only", "quantization-only"])
def test_either_nvfp4_setting_is_enough(drop: tuple[str, ...]) -> None:
    assert validate_host(ref_host(drop=drop)).ok


def test_nvfp4_rule_follows_declared_quantization() -> None:
    host = llama_host(sglang_model_path="/models/private-nvfp4", sglang_model_quantization="modelopt_fp4",
                      sglang_model_architecture="Qwen3MoeForCausalLM")  # the rule is for MoE models
    assert rules(validate_host(host)) == ["sm12x.nvfp4"]
    assert validate_host(llama_host(sglang_model_path="/models/private-bf16", sglang_model_quantization="none")).ok


# --- parallelism ----------------------------------------------------------------------------------


def test_tp_larger_than_the_gpu_count() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 16})), "parallel.gpus")
    assert problem.variable == "sglang_args.tp_size" and problem.value == 16
    assert "16 GPU(s)" in problem.message and "nvidia_gpu_count=8" in problem.message
    assert "tp_size: 8" in problem.fix


@pytest.mark.parametrize(
    ("args", "ok"),
    [
        ({"tp_size": 4, "base_gpu_id": 4}, True),  # GPUs 4..7
        ({"tp_size": 4, "base_gpu_id": 5}, False),  # GPUs 5..8
        ({"tp_size": 4, "gpu_id_step": 2}, True),  # GPUs 0, 2, 4, 6 (SGLang: base + tp_rank * step)
        ({"tp_size": 4, "gpu_id_step": 3}, False),  # GPUs 0, 3, 6, 9
        ({"tp_size": 8, "gpu_id_step": 2}, False),  # GPUs 0..14
        ({"tp_size": 2, "gpu_id_step": 2, "base_gpu_id": 1}, True),  # GPUs 1, 3
        ({"tp_size": 4, "pp_size": 2, "speculative_algorithm": None}, True),
        ({"tp_size": 8, "pp_size": 2, "speculative_algorithm": None}, False),
        ({"tp_size": 4, "dp_size": 2}, True),
        ({"tp_size": 8, "dp_size": 2}, False),
    ],
)
def test_gpu_placement(args: dict[str, int], ok: bool) -> None:
    result = validate_host(ref_host(args))
    if ok:
        assert result.ok, format_report("host", result)
    else:
        problem = the_error(result, "parallel.gpus")
        assert "nvidia_gpu_count=8" in problem.message and "base_gpu_id" in problem.fix


def test_gpu_placement_message_shows_ids_and_step() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 4, "gpu_id_step": 3})), "parallel.gpus")
    assert "GPU ids 0..9 (step 3)" in problem.message
    problem = the_error(validate_host(ref_host({"tp_size": 4, "base_gpu_id": 5})), "parallel.gpus")
    assert "GPU ids 5..8" in problem.message


def test_tp_pp_not_divisible_by_nnodes() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 3, "nnodes": 2, "dist_init_addr": "10.0.0.1:5000"})), "parallel.nnodes")
    assert problem.variable == "sglang_args.nnodes" and "nnodes = 2" in problem.message


def test_dp_across_nodes() -> None:
    args = {"tp_size": 8, "dp_size": 2, "nnodes": 2, "dist_init_addr": "10.0.0.1:5000"}
    problem = find(validate_host(ref_host(args)).errors, "parallel.dp_multinode")
    assert problem.variable == "sglang_args.dp_size" and "attn_dp_size" in problem.fix


def test_dp_with_attention_dp() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 4, "dp_size": 2, "attn_dp_size": 2})), "parallel.dp_attn_dp")
    assert problem.variable == "sglang_args.attn_dp_size" and "dp_size: 1" in problem.fix


@pytest.mark.parametrize(("attn_dp", "ok"), [(2, True), (4, True), (8, True), (3, False), (16, False)])
def test_tp_divisible_by_attn_dp(attn_dp: int, ok: bool) -> None:
    result = validate_host(ref_host({"attn_dp_size": attn_dp}))
    if ok:
        assert result.ok
    else:
        problem = the_error(result, "parallel.tp_attn_dp")
        assert problem.variable == "sglang_args.attn_dp_size" and f"attn_dp_size={attn_dp}" in problem.message


def test_multi_node_needs_dist_init_addr() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 16, "nnodes": 2})), "parallel.dist_init_addr")
    assert problem.variable == "sglang_args.dist_init_addr" and "nnodes=2" in problem.message


def test_node_rank_out_of_range() -> None:
    args = {"tp_size": 16, "nnodes": 2, "node_rank": 2, "dist_init_addr": "10.0.0.1:5000"}
    problem = the_error(validate_host(ref_host(args)), "parallel.node_rank")
    assert problem.variable == "sglang_args.node_rank" and "0..1" in problem.message


def test_node_rank_on_a_single_node() -> None:
    problem = the_error(validate_host(ref_host({"node_rank": 1})), "parallel.node_rank")
    assert "nnodes=1" in problem.message


@pytest.mark.parametrize("rank", [0, 1])
def test_two_nodes_tp16_with_8_gpus_each(rank: int) -> None:
    args = {"tp_size": 16, "nnodes": 2, "node_rank": rank, "dist_init_addr": "10.0.0.1:5000"}
    result = validate_host(ref_host(args))
    assert result.ok, format_report("host", result)
    assert flag_values(result.argv, "--dist-init-addr") == ["10.0.0.1:5000"]


@pytest.mark.parametrize(("args", "rule", "dest"), [
    ({"tp_size": 0}, "parallel.size", "tp_size"),
    ({"pp_size": -1}, "parallel.size", "pp_size"),
    ({"base_gpu_id": -1}, "parallel.gpu_ids", "base_gpu_id"),
    ({"gpu_id_step": 0}, "parallel.gpu_ids", "gpu_id_step"),
])
def test_parallel_values_out_of_range(args: dict[str, int], rule: str, dest: str) -> None:
    problem = the_error(validate_host(ref_host(args)), rule)
    assert problem.variable == f"sglang_args.{dest}"


# --- numbers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "ok"), [(0, False), (1, False), (1.2, False), (-0.1, False), (0.85, True), (0.5, True), ("0.9", True)])
def test_mem_fraction_static(value: Any, ok: bool) -> None:
    result = validate_host(ref_host({"mem_fraction_static": value}))
    if ok:
        assert result.ok
    else:
        problem = the_error(result, "numeric.mem_fraction_static")
        assert problem.variable == "sglang_args.mem_fraction_static" and "between 0 and 1" in problem.message
        assert "0.85" in problem.fix


@pytest.mark.parametrize("dest", ["max_running_requests", "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill"])
def test_counts_at_least_1(dest: str) -> None:
    problem = the_error(validate_host(ref_host({dest: 0})), f"numeric.{dest}")
    assert problem.variable == f"sglang_args.{dest}" and problem.value == 0 and "at least 1" in problem.message
    assert validate_host(ref_host({dest: 1})).ok


@pytest.mark.parametrize(("chunk", "page", "ok"), [(8100, 64, False), (8192, 64, True), (-1, 64, True), (8100, 1, True), (100, 64, False)])
def test_chunked_prefill_multiple_of_page_size(chunk: int, page: int, ok: bool) -> None:
    result = validate_host(ref_host({"chunked_prefill_size": chunk, "page_size": page}))
    if ok:
        assert result.ok
    else:
        problem = the_error(result, "numeric.chunked_prefill_size")
        assert f"page_size={page}" in problem.message
        assert f"{chunk - chunk % page or page}" in problem.fix


def test_context_length_over_the_model_maximum() -> None:
    problem = the_error(validate_host(ref_host({"context_length": 300000})), "numeric.context_length")
    assert problem.variable == "sglang_args.context_length" and problem.value == 300000
    assert "262144" in problem.message
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in problem.fix


@pytest.mark.parametrize("allow", ["1", 1, "true", "yes"])  # not " yes ": SGLang's EnvBool does not strip
def test_longer_context_allowed_by_env(allow: Any) -> None:
    env = {**REFERENCE.get("sglang_env", {}), "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": allow}
    result = validate_host(ref_host({"context_length": "512Ki"}, sglang_env=env))
    assert result.ok, format_report("host", result)
    assert flag_values(result.argv, "--context-length") == ["524288"]


def test_longer_context_env_set_to_0_does_not_allow() -> None:
    result = validate_host(ref_host({"context_length": 300000}, sglang_env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "0"}))
    assert rules(result) == ["numeric.context_length"]


def test_declared_max_context_overrides_the_table() -> None:
    assert validate_host(ref_host({"context_length": 300000}, sglang_model_max_context=1048576)).ok


def test_llama_context_maximum() -> None:
    problem = the_error(validate_host(llama_host({"context_length": "256Ki"})), "numeric.context_length")
    assert "131072" in problem.message


def test_served_model_name_with_colon() -> None:
    problem = the_error(validate_host(ref_host({"served_model_name": "qwen3.5:397b"})), "numeric.served_model_name")
    assert problem.variable == "sglang_args.served_model_name" and "':'" in problem.message
    assert "'qwen3.5-397b'" in problem.fix


@pytest.mark.parametrize(
    ("args", "ok"),
    [
        ({"grpc_port": 30000}, False),  # equals the default port
        ({"grpc_port": 31000, "port": 31000}, False),  # equals the explicit port
        ({"grpc_port": 31000}, True),
        ({"grpc_port": 30000, "port": 8000}, True),
        ({"grpc_port": 30000, "smg_grpc_mode": True}, True),
    ],
)
def test_grpc_port(args: dict[str, Any], ok: bool) -> None:
    result = validate_host(ref_host(args))
    if ok:
        assert result.ok
    else:
        problem = the_error(result, "numeric.grpc_port")
        assert problem.variable == "sglang_args.grpc_port" and str(args["grpc_port"]) in problem.message


# --- all problems at once -----------------------------------------------------------------------


def test_every_problem_is_reported_at_once() -> None:
    args = {
        "tp_szie": 8,
        **INCIDENT,
        "attention_backend": "fa3",
        "mem_fraction_static": 1.2,
        "tp_size": 16,
        "served_model_name": "a:b",
        "mamba_scheduler_strategy": "extra_buffer",
        "enable_metrics": "maybe",
        "grpc_port": 30000,
    }
    result = validate_host(ref_host(args, drop=("mamba_radix_cache_strategy",), nvidia_gpu_compute_capability="12.0"))
    assert sorted(rules(result)) == sorted([
        "schema.unknown",
        "schema.renamed",
        "schema.type",
        "spec.triple",
        "sm12x.attention",
        "parallel.gpus",
        "numeric.mem_fraction_static",
        "numeric.served_model_name",
        "numeric.grpc_port",
    ])
    report = format_report("blackwell-01", result)
    assert report.splitlines()[0] == "blackwell-01: 9 error(s), 0 warning(s) (SGLang 0.5.23)"


def test_host_fact_problems_and_arg_problems_together() -> None:
    result = validate_host(ref_host({"tp_size": "eight"}, nvidia_gpu_count=MISSING, sglang_model_path=MISSING))
    assert sorted(rules(result)) == ["host.hardware", "host.model_path", "schema.type"]


def test_type_error_carries_the_offending_value() -> None:
    result = validate_host(ref_host({"tp_size": "eight"}))
    problem = the_error(result, "schema.type")
    assert problem.value == "eight"
    assert "sglang_args.tp_size = 'eight'" in format_report("host", result)


# --- argv rendering -----------------------------------------------------------------------------


def test_argv_model_path_first_then_flags_sorted() -> None:
    result = validate_host(ref_host({"cuda_graph_bs_decode": [1, 2], "dllm_fdfo": False, "port": 8000}))
    assert result.argv[:2] == ["--model-path", REFERENCE_MODEL]
    flags = [w for w in result.argv[2:] if w.startswith("--")]
    # Ordered by the canonical flag; a BooleanOptionalAction false renders as --no-X in X's place.
    canonical = [SCHEMA.lookup(f).flag for f in flags]
    assert canonical == sorted(canonical)
    assert flags[canonical.index("--dllm-fdfo")] == "--no-dllm-fdfo"


def test_argv_uses_full_canonical_flag_names_only() -> None:
    canonical = {spec.flag for spec in SCHEMA.arguments.values()} | {
        spec.negation for spec in SCHEMA.arguments.values() if spec.negation
    }
    args = {"tensor-parallel-size": 8, "dllm_fdfo": False, "--nccl-init-addr": "10.0.0.1:5000"}
    result = validate_host(ref_host(args, drop=("tp_size",)))
    assert result.ok
    flags = [w for w in result.argv if w.startswith("--")]
    assert flags and set(flags) <= canonical
    assert "--tp-size" in flags and "--dist-init-addr" in flags and "--no-dllm-fdfo" in flags


def test_render_argv_directly() -> None:
    args = {
        "tp_size": 8,
        "model_path": "/models/m",
        "enable_metrics": True,
        "enable_flashinfer_allreduce_fusion": False,
        "cuda_graph_bs_decode": [1, 2, 4],
        "mem_fraction_static": 0.85,
        "enable_tf32_matmul": False,
        "served_model_name": None,
    }
    assert render_argv(SCHEMA, args) == [
        "--model-path", "/models/m",
        "--cuda-graph-bs-decode", "1", "2", "4",
        "--enable-metrics",
        "--no-enable-tf32-matmul",
        "--mem-fraction-static", "0.85",
        "--tp-size", "8",
    ]


def test_argv_false_switch_is_omitted() -> None:
    result = validate_host(ref_host({"enable_metrics": False}))
    assert result.ok and not any("metrics" in w for w in result.argv)


# --- the report ---------------------------------------------------------------------------------


def test_format_report_contains_every_variable_value_rule_and_fix() -> None:
    args = {**INCIDENT, "tp_size": 16, "speculative_algorithm": "nextn", "served_model_name": "a:b"}
    result = validate_host(ref_host(args))
    report = format_report("blackwell-01", result)
    lines = report.splitlines()
    assert lines[0] == f"blackwell-01: {len(result.errors)} error(s), 0 warning(s) (SGLang 0.5.23)"
    for problem in result.errors:
        assert f"ERROR {problem.variable}" in report
        assert f"[{problem.rule}]" in report
        assert problem.message in report
        assert f"fix: {problem.fix}" in report
        if problem.source:
            assert f"source: {problem.source}" in report
    assert "sglang_args.tp_size = 16  [parallel.gpus]" in report
    assert "sglang_args.served_model_name = 'a:b'  [numeric.served_model_name]" in report


def test_format_report_lists_warnings() -> None:
    result = validate_host(ref_host({"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}))
    report = format_report("h1", result)
    assert report.startswith("h1: 0 error(s), 1 warning(s)")
    assert "WARN  sglang_args.speculative_num_draft_tokens = 2  [spec.topk1_draft]" in report


def test_as_dict_is_json_serialisable() -> None:
    result = validate_host(ref_host({**INCIDENT, "tp_size": 16}))
    data = json.loads(json.dumps(result.as_dict()))
    assert data["ok"] is False and {e["rule"] for e in data["errors"]} == {"spec.triple", "parallel.gpus"}
    assert data["model"]["architecture"] == "Qwen3_5MoeForConditionalGeneration"


def test_pipeline_parallel_with_mtp_is_refused() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 4, "pp_size": 2})), "spec.pipeline")
    assert problem.variable == "sglang_args.pp_size" and "validation_hook.py:161" in problem.source


def test_no_buffer_needs_the_overlap_scheduler_off() -> None:
    problem = the_error(validate_host(ref_host({"mamba_radix_cache_strategy": "no_buffer"})), "mamba.no_buffer")
    assert "disable_overlap_schedule: true" in problem.fix
    assert validate_host(ref_host({"mamba_radix_cache_strategy": "no_buffer", "disable_overlap_schedule": True})).ok


@pytest.mark.parametrize("page_size", [0, -1])
def test_page_size_must_be_positive(page_size: int) -> None:
    problem = the_error(validate_host(ref_host({"page_size": page_size})), "numeric.page_size")
    assert problem.value == page_size


@pytest.mark.parametrize("cc", ["12.0", "10.0"])
def test_trtllm_mha_refuses_no_buffer_on_any_gpu(cc: str) -> None:
    args = {"attention_backend": "trtllm_mha", "mamba_radix_cache_strategy": "no_buffer", "disable_overlap_schedule": True}
    problem = the_error(validate_host(ref_host(args, nvidia_gpu_compute_capability=cc)), "mamba.trtllm_mha")
    assert problem.variable == "sglang_args.mamba_radix_cache_strategy" and "mamba_hook.py:161" in problem.source


@pytest.mark.parametrize(("listen", "extra", "ok"), [
    ("0.0.0.0", {}, False),
    ("0.0.0.0", {"sglang_api_key": "k3y-value"}, True),
    ("0.0.0.0", {"sglang_allow_unauthenticated": True}, True),
    ("127.0.0.1", {}, True),
    ("::1", {}, True),
])
def test_listening_beyond_loopback_needs_an_api_key(listen: str, extra: dict[str, Any], ok: bool) -> None:
    result = validate_host(ref_host(sglang_listen_host=listen, **extra))
    assert result.ok is ok, format_report("host", result)
    if ok:
        assert result.argv[result.argv.index("--host") + 1] == listen
    else:
        assert [p.rule for p in result.errors] == ["security.unauthenticated"]
        assert result.errors[0].variable == "sglang_listen_host" and "sglang_api_key" in result.errors[0].fix


def test_host_inside_sglang_args_is_refused() -> None:
    result = validate_host(ref_host({"host": "0.0.0.0"}))
    assert "host.managed" in [p.rule for p in result.errors]


# --- SGLang versions: PEP 440 (packaging.version), as SGLang numbers its releases -----------------


def test_versions_compare_as_pep_440() -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import RENAMED, Rule
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import parse_version
    from packaging.version import Version

    assert parse_version("0.5.24rc1") < parse_version("0.5.24") < parse_version("0.5.24.post1") < parse_version("0.5.100")
    assert parse_version("0.5.23-post1") == parse_version("0.5.23.post1")
    renamed = RENAMED["cuda_graph_max_bs"]  # since 0.5.20
    assert not renamed.applies(Version("0.5.20rc1")) and renamed.applies(Version("0.5.20.post1"))
    bounded = Rule("x", lambda ctx: None, Version("0.5.20"), Version("0.5.24"))
    assert bounded.applies(Version("0.5.23.post2")) and bounded.applies(Version("0.5.24rc1"))
    assert not bounded.applies(Version("0.5.24"))


def test_a_version_that_is_not_pep_440_is_refused_naming_the_variable() -> None:
    result = validate_host(ref_host(sglang_version="latest"))
    assert [p.variable for p in result.errors] == ["sglang_version"] and not result.ok


def test_metrics_are_on_by_default_and_the_host_can_turn_them_off() -> None:
    # Prometheus, the drain and the request report read /metrics, which SGLang serves only with --enable-metrics.
    host = llama_host()
    host["sglang_args"].pop("enable_metrics", None)
    host.pop("sglang_metrics", None)
    assert "--enable-metrics" in validate_host(host).argv
    assert "--enable-metrics" not in validate_host({**host, "sglang_metrics": False}).argv
    # enable_metrics written in sglang_args wins over sglang_metrics, either way.
    off = copy.deepcopy(host)
    off["sglang_args"]["enable_metrics"] = False
    assert "--enable-metrics" not in validate_host(off).argv
    on = copy.deepcopy(host)
    on["sglang_args"]["enable_metrics"] = True
    assert "--enable-metrics" in validate_host({**on, "sglang_metrics": False}).argv


# --- SGLang's own launch checks on the arguments (rules server.*; conformance cases srv-*) -----------------


_QWEN4_EXP = '{"architectures": ["Qwen4ExpForConditionalGeneration"]}'


@pytest.mark.parametrize(("args", "rule", "variable"), [
    ({"tokenizer_worker_num": 0}, "server.minimum", "sglang_args.tokenizer_worker_num"),
    ({"mamba_max_states_per_path": -2}, "server.minimum", "sglang_args.mamba_max_states_per_path"),
    ({"gc_threshold": [1, 2, 3, 4]}, "server.minimum", "sglang_args.gc_threshold"),
    ({"retraction_policy": "priority"}, "server.combination", "sglang_args.retraction_policy"),
    ({"ple_offload_backend": "file", "ple_offload_embedding": False}, "server.combination", "sglang_args.ple_offload_backend"),
    # Qwen4-Exp resolves an unset embedding to False off bfloat16 (model_overrides/qwen4_exp.py:42-47)
    ({"ple_offload_backend": "file", "dtype": "float16", "json_model_override_args": _QWEN4_EXP},
     "server.combination", "sglang_args.ple_offload_backend"),
    ({"min_free_slots_delay": 0, "pp_size": 2, "tp_size": 4}, "server.combination", "sglang_args.min_free_slots_delay"),
    ({"prompt_tokens_buckets": ["tse", "x", 2, 8]}, "server.buckets", "sglang_args.prompt_tokens_buckets"),
    ({"prompt_tokens_buckets": ["custom", "a"]}, "server.buckets", "sglang_args.prompt_tokens_buckets"),
    ({"watermark_config": '{"key": "k"}'}, "server.watermark", "sglang_args.watermark_config"),
    ({"enable_watermark": True, "speculative_algorithm": "STANDALONE"}, "server.watermark", "sglang_args.speculative_algorithm"),
    ({"enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3",
      "return_aux_hidden_state_layer_ids": [-1, 2]}, "server.aux_hidden_states", "sglang_args.return_aux_hidden_state_layer_ids"),
    ({"enable_http2": True, "enable_ssl_refresh": True, "ssl_certfile": "/etc/c.pem", "ssl_keyfile": "/etc/k.pem"},
     "server.http", "sglang_args.enable_ssl_refresh"),
    ({"sidecar": "/usr/bin/side", "grpc_mode": True}, "server.grpc", "sglang_args.sidecar"),
])
def test_sglang_launch_checks_refuse(args: dict[str, Any], rule: str, variable: str) -> None:
    problem = find(validate_host(llama_host(args)).errors, rule)
    assert problem.variable == variable and problem.source and problem.fix


@pytest.mark.parametrize("args", [
    {"ple_offload_backend": "file"},  # unset embedding: SGLang's default, accepted
    {"ple_offload_backend": "file", "dtype": "float16"},  # only Qwen4-Exp's override turns the embedding off
    {"ple_offload_backend": "file", "dtype": "bfloat16", "json_model_override_args": _QWEN4_EXP},
    {"ple_offload_backend": "file", "json_model_override_args": _QWEN4_EXP},  # auto: the checkpoint's dtype decides
    {"weight_cache_mode": False, "speculative_algorithm": None},
    {"enable_watermark": True, "speculative_algorithm": "NGRAM"},
    {"enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3", "return_aux_hidden_state_layer_ids": [1, 5]},
    {"grpc_mode": True, "tokenizer_worker_num": 2},  # the legacy gRPC server has no tokenizer-worker limit
    {"prompt_tokens_buckets": ["default"], "generation_tokens_buckets": ["custom", 0, 10.5, 100]},
    {"mm_processor_worker_num": 0, "schedule_conservativeness": 0, "prefill_decode_interval": 0},
])
def test_sglang_launch_checks_accept(args: dict[str, Any]) -> None:
    result = validate_host(llama_host(args))
    assert not [p for p in result.errors if p.rule.startswith("server.")], format_report("host", result)


@pytest.mark.parametrize(("args", "variable"), [
    ({"speculative_algorithm": "DSPARK", "speculative_draft_model_path": "org/draft", "speculative_dspark_block_size": 0},
     "sglang_args.speculative_dspark_block_size"),
    ({"speculative_algorithm": "STANDALONE", "speculative_draft_model_path": "org/draft",
      "speculative_use_rejection_sampling": True}, "sglang_args.speculative_use_rejection_sampling"),
    ({"speculative_algorithm": "DSPARK", "speculative_draft_model_path": "org/draft", "tp_size": 2, "attn_dp_size": 2,
      "enable_dp_lm_head": True, "attn_cp_size": 2}, "sglang_args.attn_cp_size"),
])
def test_speculative_launch_checks_without_a_conformance_case(args: dict[str, Any], variable: str) -> None:
    """STANDALONE needs a real draft checkpoint, which the conformance fixtures lack; the DSPARK ones have conformance
    cases since the probe stands in for `openai` (catalog-dspark-block-size-zero, catalog-dspark-dp-attn-cp)."""
    assert find(validate_host(llama_host(args)).errors, "server.speculative").variable == variable


@pytest.mark.parametrize(("extra", "left_alone"), [
    # MLA prefill CP: DeepSeek's override sets deepep itself (model_overrides/deepseek_v2.py:191-201).
    ({"enable_prefill_cp": True, "cp_strategy": "interleave"}, True),
    # attn_cp_size alone: the override does not run, SGLang checks the written pplx (moe_hook.py:591; the attn-cp-*
    # conformance cases, probed on 0.5.20-0.5.23).
    ({}, False),
])
def test_two_batch_overlap_and_a2a_wait_for_deepseek_prefill_cp_only(extra: dict[str, Any], left_alone: bool) -> None:
    """DeepSeek's CP overrides set moe_a2a_backend deepep themselves, under enable_prefill_cp only: no server.* refusal
    of TBO / a2a there, and the written backend's checks everywhere else."""
    args = {"enable_two_batch_overlap": True, "attn_cp_size": 2, "tp_size": 8, "moe_a2a_backend": "pplx", **extra}
    result = validate_host(llama_host(args, sglang_model_path="deepseek-ai/DeepSeek-V3"))
    found = [p for p in result.errors if p.rule in ("tbo.attention_dp", "server.moe")]
    assert (not found) is left_alone, format_report("host", result)
    refused = validate_host(llama_host({"enable_two_batch_overlap": True}))
    assert find(refused.errors, "tbo.attention_dp").variable == "sglang_args.enable_two_batch_overlap"


@pytest.mark.parametrize("key", ["--no-ple-offload-embedding", "no_ple_offload_embedding", "no-enable-tf32-matmul"])
@pytest.mark.parametrize("value", [True, False])
def test_the_negative_spelling_of_a_boolean_optional_flag_is_refused(key: str, value: bool) -> None:
    # SGLang's BooleanOptionalAction: --no-X stores false. Taken as the argument's name, `--no-X: true` would render
    # --X, the opposite of what it says; the key is refused with the spelling to use instead.
    problem = the_error(validate_host(llama_host({key: value})), "schema.negated")
    dest = normalize_key(key)[3:]
    assert problem.variable == f"sglang_args.{key}" and f"sglang_args.{dest}: false" in problem.fix


def test_a_boolean_optional_flag_renders_both_ways_under_its_own_name() -> None:
    assert "--ple-offload-embedding" in validate_host(llama_host({"ple_offload_embedding": True})).argv
    assert "--no-ple-offload-embedding" in validate_host(llama_host({"ple_offload_embedding": False})).argv


def test_mori_dispatch_buffer_against_chunked_prefill() -> None:
    """SGLang sizes MoRI's per-rank buffer (4096 tokens) against chunked prefill, by default 8192 on 96 GB GPUs."""
    args = {"moe_a2a_backend": "mori", "ep_size": 8}
    assert "moe.mori" in rules(validate_host(ref_host(args, nvidia_gpu_memory_mib=97887)))
    assert "moe.mori" not in rules(validate_host(ref_host(args, nvidia_gpu_memory_mib=40960)))  # default 4096
    assert "moe.mori" not in rules(validate_host(ref_host({**args, "chunked_prefill_size": 4096})))
    raised = ref_host(args, nvidia_gpu_memory_mib=97887)
    raised["sglang_env"] = {**raised.get("sglang_env", {}), "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "8192"}
    assert "moe.mori" not in rules(validate_host(raised))
    # MoRI is AMD's library: every NVIDIA profile refuses it (documented stricter).
    assert "sm12x.moe" in rules(validate_host(ref_host({**args, "chunked_prefill_size": 4096})))


# --- DSPARK's launch checks (SGLang's cases: catalog-dspark-* in tests/conformance/cases.yaml) -------------------

DSPARK = {"speculative_algorithm": "DSPARK", "speculative_draft_model_path": "org/draft"}


def test_dspark_needs_a_draft_path_on_a_table_checkpoint() -> None:
    """speculative_hook.py:752: without a draft path DSpark takes a draft the target bundles (dspark_* keys in its
    config.json) or ships as dspark/; the model table's checkpoints have neither (the CI sample's fuzz-0-00094). A model
    outside the table: its config decides (the preflight); the rule stays silent."""
    problem = the_error(validate_host(llama_host({"speculative_algorithm": "DSPARK"})), "server.speculative")
    assert problem.variable == "sglang_args.speculative_draft_model_path" and problem.source.endswith(":752")
    assert "server.speculative" not in rules(validate_host(llama_host(DSPARK)))
    unknown = llama_host({"speculative_algorithm": "DSPARK"}, sglang_model_path="/srv/models/in-house",
                         sglang_model_architecture="LlamaForCausalLM")
    assert "server.speculative" not in rules(validate_host(unknown))


@pytest.mark.parametrize(("args", "dest", "where"), [
    ({"speculative_dspark_block_size": 4, "speculative_num_draft_tokens": 4}, "speculative_num_draft_tokens", ":830"),
    ({"speculative_num_draft_tokens": 1}, "speculative_num_draft_tokens", ":847"),
    ({"tp_size": 2, "attn_dp_size": 2, "enable_dp_lm_head": True, "moe_a2a_backend": "deepep"}, "moe_a2a_backend", ":678"),
    ({"tp_size": 2, "attn_dp_size": 2, "enable_dp_lm_head": True, "speculative_moe_a2a_backend": "mori"},
     "speculative_moe_a2a_backend", ":707"),
])
def test_dspark_draft_shapes(args: dict, dest: str, where: str) -> None:
    host = llama_host({**DSPARK, **args})
    problem = the_error(validate_host(host), "server.speculative")
    assert problem.variable == f"sglang_args.{dest}" and problem.source.endswith(where)


def test_dspark_ragged_verify_with_an_a2a_moe() -> None:
    host = llama_host({**DSPARK, "tp_size": 2, "attn_dp_size": 2, "enable_dp_lm_head": True,
                       "moe_a2a_backend": "megamoe"}, nvidia_gpu_compute_capability="10.0",
                      sglang_env={"SGLANG_RAGGED_VERIFY_MODE": "compact"})
    problem = find(validate_host(host).errors, "server.speculative")
    assert problem.variable == "sglang_env.SGLANG_RAGGED_VERIFY_MODE" and problem.source.endswith(":693")


@pytest.mark.parametrize("args", [
    {"speculative_dspark_block_size": 4, "speculative_num_draft_tokens": 5},
    {"speculative_dspark_block_size": 4},
    {"tp_size": 2, "attn_dp_size": 2, "enable_dp_lm_head": True},
])
def test_dspark_shapes_sglang_takes(args: dict) -> None:
    host = llama_host({**DSPARK, **args})
    assert not [p for p in validate_host(host).errors if p.rule == "server.speculative"]


def test_megamoe_runner_alias_is_an_a2a_backend() -> None:
    """moe_runner_backend megamoe turns into moe_a2a_backend megamoe (mega_moe_hook.py:259-276): a static EP dispatch
    is then fine (parallel_hook.py:779-783 asks for an a2a backend)."""
    moe = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    static = validate_host(ref_host({"ep_dispatch_algorithm": "static"}, drop=("quantization", "moe_runner_backend"),
                                    sglang_model_path=moe))
    assert find(static.errors, "server.moe").source.endswith("parallel_hook.py:783")
    alias = validate_host(ref_host({"ep_dispatch_algorithm": "static", "moe_runner_backend": "megamoe"},
                                   drop=("quantization",), sglang_model_path=moe))
    assert not [p for p in alias.errors if p.source and p.source.endswith("parallel_hook.py:783")]


@pytest.mark.parametrize(("version", "cc", "rule", "where"), [
    ("0.5.23", "12.0", "moe.megamoe", "mega_moe_hook.py:43"),  # SGLang's own start-up check
    ("0.5.21", "12.0", "moe.megamoe", "mega_moe_hook.py:43"),
    ("0.5.20", "12.0", "sm12x.moe", "mega_moe.py:353-400"),  # no check yet: the kernels fail at run time (stricter)
    ("0.5.20", "8.9", "sm8x.moe", "mega_moe.py:353-400"),
])
def test_megamoe_outside_sm90_sm100(version: str, cc: str, rule: str, where: str) -> None:
    """moe_a2a_backend megamoe off SM90/SM100: SGLang 0.5.21+ refuses it at start-up (mega_moe_hook.py:43); 0.5.20
    has no such check, so the refusal there is a hardware rule (STRICTER in tests/conformance/differential.py)."""
    host = llama_host({"moe_a2a_backend": "megamoe", "tp_size": 2}, sglang_version=version,
                      nvidia_gpu_compute_capability=cc)
    result = validate_host(host)
    problem = find(result.errors, rule)
    assert problem.variable == "sglang_args.moe_a2a_backend" and problem.source.endswith(where)
    assert "moe.megamoe" not in rules(result) or rule == "moe.megamoe"


@pytest.mark.parametrize("cc", ["9.0", "10.0"])
def test_megamoe_on_sm90_sm100_is_not_refused_for_the_gpu(cc: str) -> None:
    for version in ("0.5.20", "0.5.23"):
        host = llama_host({"moe_a2a_backend": "megamoe", "tp_size": 2}, sglang_version=version,
                          nvidia_gpu_compute_capability=cc)
        result = validate_host(host)
        assert not [p for p in result.errors if "megamoe" in p.message and p.rule.endswith(".moe")]
        assert "moe.megamoe" not in rules(result)


@pytest.mark.parametrize(("version", "refused"), [("0.5.23", False), ("0.5.21", False), ("0.5.20", True)])
def test_nvfp4_kv_cache_decode_backend_sets_the_page(version: str, refused: bool) -> None:
    """From 0.5.21 an NVFP4 KV cache decodes with trtllm_mha (kv_cache_hook.py:77-89), which turns page 131072 into
    64; 0.5.20 has no such hook, so its page stays 131072 and no default chunked_prefill_size is a multiple."""
    host = llama_host({"kv_cache_dtype": "nvfp4", "page_size": 131072}, sglang_version=version,
                      nvidia_gpu_compute_capability="12.1")
    assert ("memory.chunked_page" in rules(validate_host(host))) is refused


def deepep_v2_host(args: dict[str, Any], capacity: int | None = None, **hostvars: Any) -> dict[str, Any]:
    """DeepSeek-V3 with DeepEP v2 on the reference host (its buffer raised to ``capacity`` tokens per rank), without
    the reference host's NEXTN: SGLang's automatic speculative choice verifies 4 tokens per decode graph request, which
    the decode budget counts (moe_hook.py:671-675), and DeepEP v2 is no draft a2a backend (moe_hook.py:635)."""
    env = {} if capacity is None else {"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": str(capacity)}
    hostvars.setdefault("sglang_model_path", "deepseek-ai/DeepSeek-V3")
    return ref_host({"moe_a2a_backend": "deepep_v2", "cuda_graph_max_bs_decode": 32, **args},
                    drop=("quantization", "moe_runner_backend", "mamba_radix_cache_strategy", "context_length",
                          "speculative_algorithm"), sglang_env=env, **hostvars)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(chunk=st.sampled_from([256, 1024, 2048, 4096, 8192]), tp=st.sampled_from([1, 2, 4, 8]),
       capacity=st.integers(min_value=1, max_value=9000))
def test_deepep_v2_prefill_budget(chunk: int, tp: int, capacity: int) -> None:
    """moe_hook.py:641-653 and :688-695: a chunk scattered over tp_size ranks, against the buffer."""
    host = deepep_v2_host({"tp_size": tp, "chunked_prefill_size": chunk}, capacity)
    result = validate_host(host)
    assert ("moe.deepep_v2" in rules(result)) is (-(-chunk // tp) > capacity)
    if -(-chunk // tp) > capacity:
        problem = find(result.errors, "moe.deepep_v2")
        assert problem.source.startswith("sglang/srt/arg_groups/moe_hook.py:688")
        assert f">= {-(-chunk // tp)}" in problem.fix


def test_deepep_v2_prefill_budget_per_release_and_gpu() -> None:
    """0.5.21 does not scatter the chunk (its moe_hook.py:547-556); a known GPU memory gives the exact default
    (B200: 16384), an unknown one the smallest default of its architecture; prefill-free decode servers skip it."""
    scattered = {"tp_size": 8, "chunked_prefill_size": 2048}
    assert "moe.deepep_v2" not in rules(validate_host(deepep_v2_host(scattered, 256)))
    old = validate_host(deepep_v2_host(scattered, 256, sglang_version="0.5.21"))
    assert find(old.errors, "moe.deepep_v2").source.endswith("moe_hook.py:567-574")
    b200 = {"nvidia_gpu_compute_capability": "10.0", "nvidia_gpu_memory_mib": 183359}
    assert "moe.deepep_v2" not in rules(validate_host(deepep_v2_host({"tp_size": 8}, 2048, **b200)))
    assert "moe.deepep_v2" in rules(validate_host(deepep_v2_host({"tp_size": 8}, 2047, **b200)))
    assert "moe.deepep_v2" not in rules(validate_host(deepep_v2_host({"tp_size": 8}, 256)))  # 2048 / 8
    assert "moe.deepep_v2" in rules(validate_host(deepep_v2_host({"tp_size": 8}, 255)))
    decode = {"tp_size": 8, "disaggregation_mode": "decode"}
    assert "moe.deepep_v2" not in rules(validate_host(deepep_v2_host(decode)))


def test_moe_kernel_quantization_is_what_sglang_compares() -> None:
    """handle_moe_kernel_config (moe_hook.py:80-100) compares the host's --quantization, or none; where SGLang fills it
    in first from the checkpoint (the DeepSeek family on SM100) it compares the checkpoint's, fp8 for the table's FP8
    checkpoints (the seed-3 10,000-case run, resolve.checkpoint_fp8_filled), and where that is not known or a runner
    constraint acts first (mxfp8, nvfp4_online), server.moe says nothing."""
    def moe(args: dict[str, Any], **hostvars: Any) -> list[str]:
        return [p.source for p in validate_host(llama_host(args, **hostvars)).errors if p.rule == "server.moe"]

    assert moe({"moe_runner_backend": "flashinfer_cutlass", "quantization": "awq"}) == \
        ["sglang/srt/arg_groups/moe_hook.py:81"]
    assert moe({"moe_runner_backend": "flashinfer_cutlass", "quantization": "unquant"}) == []
    assert moe({"moe_runner_backend": "flashinfer_cutlass", "quantization": "mxfp8"}) == []
    deepseek = {"sglang_model_path": "deepseek-ai/DeepSeek-V3"}
    assert moe({"moe_runner_backend": "flashinfer_cutedsl"}, nvidia_gpu_compute_capability="9.0", **deepseek) == \
        ["sglang/srt/arg_groups/moe_hook.py:98"]
    # On SM100 SGLang fills DeepSeek-V3's fp8 in, and refuses it too (probed: moe_hook.py:98, 'fp8').
    assert moe({"moe_runner_backend": "flashinfer_cutedsl"}, nvidia_gpu_compute_capability="10.0", **deepseek) == \
        ["sglang/srt/arg_groups/moe_hook.py:98"]
    nvfp4 = {"sglang_model_path": "nvidia/DeepSeek-V3-0324-FP4"}  # not fp8: what SGLang fills in is not the table's
    assert moe({"moe_runner_backend": "flashinfer_cutedsl"}, nvidia_gpu_compute_capability="10.0", **nvfp4) == []


@pytest.mark.parametrize(("version", "refused"), [("0.5.23", True), ("0.5.21", True), ("0.5.20", False)])
def test_nvfp4_kv_cache_runs_the_draft_on_trtllm_mha(version: str, refused: bool) -> None:
    """From 0.5.21 an NVFP4 KV cache decodes with trtllm_mha (kv_cache_hook.py:77-89), which runs an EAGLE-family
    draft with topk 1 only (speculative_hook.py:1175-1179): NEXTN's own choice for Llama (topk 4) is refused, a chain
    is not."""
    host = llama_host({"kv_cache_dtype": "nvfp4", "speculative_algorithm": "NEXTN"}, sglang_version=version)
    assert ("spec.backend" in rules(validate_host(host))) is refused
    chain = llama_host({"kv_cache_dtype": "nvfp4", "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}, sglang_version=version)
    assert "spec.backend" not in rules(validate_host(chain))


@pytest.mark.parametrize(("args", "backend"), [
    ({}, "trtllm_mha"),
    ({"speculative_eagle_topk": 4}, "flashinfer"),  # a tree (no algorithm: the triple is not checked)
    ({"speculative_eagle_topk": 1, "page_size": 16}, "flashinfer"),  # topk 1 with pages counts as a tree
    ({"speculative_algorithm": "NGRAM"}, "flashinfer"),  # speculative decoding, topk unset
    ({"speculative_algorithm": "DFLASH"}, "trtllm_mha"),
    ({"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1}, "trtllm_mha"),
])
def test_default_attention_backend_on_sm100(args: dict[str, Any], backend: str) -> None:
    """get_default_attn_backend for Llama on SM100 (model_override_base.py:310-323), seen through an FP4 KV cache:
    trtllm_mha runs it, flashinfer is refused (kv_cache_hook.py:313)."""
    host = {"sglang_version": "0.5.23", "sglang_model_path": LLAMA, "nvidia_gpu_count": 1,
            "nvidia_gpu_compute_capability": "10.0", "sglang_args": {"kv_cache_dtype": "fp4_mx_block16", **args}}
    assert ("kv4.attention" in rules(validate_host(host))) is (backend == "flashinfer")
