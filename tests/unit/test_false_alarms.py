"""False alarms are defects too: what SGLang 0.5.23 accepts, the validator must not refuse.

One section per defect that was fixed; each test failed before its fix.  What SGLang really does is
pinned down case by case in tests/conformance/cases.yaml (it runs SGLang's own argument handling);
the file:line each rule relies on is in the rule's ``source``.  The helpers and the reference host come
from test_validate.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_validate
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import RENAMED, env_true
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import Schema
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Result, format_report, validate_host
from test_validate import LLAMA, MISSING, REFERENCE, SCHEMA, find, flag_values, llama_host, ref_host, rules, the_error

QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
YARN_4 = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}


def env(**values: str) -> dict[str, str]:
    """The reference host's sglang_env plus ``values``."""
    return {**REFERENCE.get("sglang_env", {}), **values}


def warned(result: Result) -> list[str]:
    return [p.rule for p in result.warnings]


def clean_but(result: Result, *warnings: str) -> None:
    """No error, and exactly these warnings."""
    assert result.ok, format_report("host", result)
    assert warned(result) == list(warnings), format_report("host", result)


# --- 1. enable_dp_attention: deprecated, still converted by SGLang -------------------------------------


def test_enable_dp_attention_is_a_warning_with_the_modern_spelling() -> None:
    result = validate_host(ref_host({"dp_size": 8, "enable_dp_attention": True}))
    clean_but(result, "schema.deprecated")  # and no "needs 64 GPUs"
    (warning,) = result.warnings
    assert warning.variable == "sglang_args.enable_dp_attention"
    assert "attn_dp_size=8, dp_size=1" in warning.message
    assert "attn_dp_size: 8" in warning.fix and "dp_size stays 1" in warning.fix
    assert "parallel_hook.py:39-61" in (warning.source or "")


def test_enable_dp_attention_is_converted_for_the_rules_and_the_command_line() -> None:
    result = validate_host(ref_host({"dp_size": 8, "enable_dp_attention": True}))
    assert result.args["attn_dp_size"] == 8 and "dp_size" not in result.args and "enable_dp_attention" not in result.args
    assert flag_values(result.argv, "--attn-dp-size") == ["8"]
    assert "--dp-size" not in result.argv and "--enable-dp-attention" not in result.argv
    assert result.gpu_ids == list(range(8))


def test_converted_attn_dp_size_is_what_later_rules_check() -> None:
    # SGLang: attn_dp_size 3 after the conversion, then tp 8 % 3 fails (parallel_hook.py:326).
    problem = the_error(validate_host(ref_host({"dp_size": 3, "enable_dp_attention": True})), "parallel.tp_attn_dp")
    assert problem.variable == "sglang_args.attn_dp_size" and problem.value == 3


def test_converted_attn_dp_size_meets_the_pp_spec_rule() -> None:
    host = ref_host({"tp_size": 4, "pp_size": 2, "dp_size": 2, "enable_dp_attention": True},
                    sglang_env=env(SGLANG_ENABLE_PP_SPEC="1"))
    problem = the_error(validate_host(host), "spec.pipeline")
    assert problem.variable == "sglang_args.attn_dp_size" and "validation_hook.py:156" in (problem.source or "")


def test_enable_dp_attention_next_to_attn_dp_size_adds_nothing() -> None:
    result = validate_host(ref_host({"attn_dp_size": 4, "enable_dp_attention": True}))
    clean_but(result, "schema.deprecated")
    assert "adds nothing" in result.warnings[0].message and "remove" in result.warnings[0].fix
    assert flag_values(result.argv, "--attn-dp-size") == ["4"] and "--enable-dp-attention" not in result.argv


@pytest.mark.parametrize(
    ("key", "source"),
    [("enable_dp_attention", "parallel_hook.py:39-61"), ("disable_cuda_graph", "cuda_graph_hook.py:55-57")],
)
def test_renamed_table_calls_them_deprecated_not_removed(key: str, source: str) -> None:
    entry = RENAMED[key]
    assert entry.deprecated and "still" in entry.fix and source in (entry.source or "")
    assert "removed" not in entry.message("0.6.0") and "deprecated" in entry.message("0.6.0")
    if key == "enable_dp_attention":
        assert "attn_dp_size: N" in entry.fix and "dp_size stays 1" in entry.fix


# --- 2. deprecated flags SGLang still honours: warnings; only real refusals are errors ------------------

HONOURED = ["disable_cuda_graph", "disable_fast_image_processor", "enable_flashinfer_allreduce_fusion", "grpc_mode"]


def test_the_schema_has_no_other_deprecated_flags() -> None:
    """A new pin with other deprecated flags needs a look at what SGLang does with them."""
    deprecated = {d for d, spec in SCHEMA.arguments.items() if spec.deprecated}
    assert deprecated == {*HONOURED, "enable_dp_attention", "monokernel_backend"}


def test_disable_cuda_graph_is_a_warning_and_still_rendered() -> None:
    result = validate_host(ref_host({"disable_cuda_graph": True}))
    clean_but(result, "schema.deprecated")
    fix = result.warnings[0].fix
    assert "cuda_graph_backend_decode: disabled" in fix and "cuda_graph_backend_prefill: disabled" in fix
    assert "--disable-cuda-graph" in result.argv


@pytest.mark.parametrize("key", HONOURED)
def test_honoured_deprecated_flags_warn_and_render(key: str) -> None:
    result = validate_host(llama_host({key: True}))
    clean_but(result, "schema.deprecated")
    assert result.warnings[0].variable == f"sglang_args.{key}" and "deprecated" in result.warnings[0].message
    assert SCHEMA.arguments[key].flag in result.argv


@pytest.mark.parametrize(("args", "dest"), [({"monokernel_backend": "amd"}, "monokernel_backend"),
                                            ({"enable_amd_monokernel": True}, "enable_amd_monokernel")])
def test_amd_monokernel_is_refused_on_nvidia(args: dict[str, Any], dest: str) -> None:
    # SGLang: "no monokernel backend 'amd' is registered" (kernel_plugins/amd/binding.py:215).
    problem = the_error(validate_host(llama_host(args)), "nvidia.amd_only")
    assert problem.variable == f"sglang_args.{dest}"


def test_disable_fast_image_processor_conflicting_with_the_backend_is_refused() -> None:
    result = validate_host(llama_host({"disable_fast_image_processor": True, "image_processor_backend": "torchvision"}))
    assert "serving_hook.py:258-263" in (the_error(result, "schema.deprecated_conflict").source or "")


def test_a_deprecated_action_with_an_error_message_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a DeprecatedAction registered with error_message stops SGLang (argparse_actions.py:56-70)."""
    data = json.loads(json.dumps({"sglang_version": "0.5.23", "arguments": {}}))
    for dest, spec in SCHEMA.arguments.items():
        data["arguments"][dest] = {"option_strings": list(spec.option_strings), "action": spec.action, "type": spec.type,
                                   "nargs": spec.nargs, "choices": spec.choices, "default": spec.default,
                                   "deprecated": spec.deprecated, "deprecated_message": spec.deprecated_message}
    data["arguments"]["old_knob"] = {"option_strings": ["--old-knob"], "action": "DeprecatedAction", "nargs": 0,
                                     "deprecated": True, "deprecated_message": "Retired. error_message: use --new-knob"}
    data["arguments"]["quiet_knob"] = {"option_strings": ["--quiet-knob"], "action": "DeprecatedAction", "nargs": 0,
                                       "deprecated": True, "deprecated_message": "Retired; a no-op."}
    schema = Schema(data)
    monkeypatch.setattr(sglang_validate, "load_schema", lambda version: schema)
    refused = the_error(validate_host(ref_host({"old_knob": True})), "schema.deprecated")
    assert "refuses" in refused.message and "--new-knob" in refused.message
    clean_but(validate_host(ref_host({"quiet_knob": True})), "schema.deprecated")


# --- 3. PP + speculative decoding with SGLANG_ENABLE_PP_SPEC ---------------------------------------------

PP_MTP = {"tp_size": 4, "pp_size": 2}


@pytest.mark.parametrize("value", ["1", "true", "True", "YES", "y", "Y"])
def test_pp_with_mtp_allowed_by_the_pp_spec_env(value: str) -> None:
    clean_but(validate_host(ref_host(PP_MTP, sglang_env=env(SGLANG_ENABLE_PP_SPEC=value))))


@pytest.mark.parametrize("value", ["0", "no", "on", " 1", "1 ", ""])
def test_pp_spec_env_spellings_sglang_reads_as_off(value: str) -> None:
    problem = the_error(validate_host(ref_host(PP_MTP, sglang_env=env(SGLANG_ENABLE_PP_SPEC=value))), "spec.pipeline")
    assert 'SGLANG_ENABLE_PP_SPEC: "1"' in problem.fix and "validation_hook.py:161" in (problem.source or "")


@pytest.mark.parametrize(
    ("args", "dest", "line"),
    [
        ({"attn_dp_size": 2}, "attn_dp_size", "156"),
        ({"speculative_adaptive": True}, "speculative_adaptive", "150"),
        ({"disaggregation_mode": "prefill"}, "disaggregation_mode", "145"),
    ],
)
def test_pp_spec_env_incompatibilities(args: dict[str, Any], dest: str, line: str) -> None:
    host = ref_host({**PP_MTP, **args}, sglang_env=env(SGLANG_ENABLE_PP_SPEC="1"))
    problem = find(validate_host(host).errors, "spec.pipeline")
    assert problem.variable == f"sglang_args.{dest}" and problem.source == f"sglang/srt/arg_groups/validation_hook.py:{line}"


@pytest.mark.parametrize("algorithm", ["EAGLE3", "STANDALONE", "NGRAM"])
def test_pp_takes_eagle_and_nextn_only(algorithm: str) -> None:
    host = llama_host({**PP_MTP, "speculative_algorithm": algorithm}, sglang_env=env(SGLANG_ENABLE_PP_SPEC="1"))
    problem = find(validate_host(host).errors, "spec.pipeline")
    assert problem.variable == "sglang_args.speculative_algorithm" and "validation_hook.py:132-135" in (problem.source or "")


# --- 4. json_model_override_args raises (or keeps) the derived context length ---------------------------


def qwen_next(args: dict[str, Any], **hostvars: Any) -> dict[str, Any]:
    return llama_host(args, sglang_model_path=QWEN_NEXT, **hostvars)


@pytest.mark.parametrize("override", [YARN_4, json.dumps(YARN_4), {"rope_parameters": YARN_4["rope_scaling"]}])
def test_rope_factor_raises_the_context_limit(override: Any) -> None:
    clean_but(validate_host(qwen_next({"context_length": "1Mi", "json_model_override_args": override})))


def test_one_token_over_the_raised_limit_is_refused() -> None:
    problem = the_error(validate_host(qwen_next({"context_length": 1048577, "json_model_override_args": YARN_4})),
                        "numeric.context_length")
    assert "maximum of 1048576 tokens (262144 as shipped, 1048576 after json_model_override_args)" in problem.message
    assert "common.py:677-692" in (problem.source or "")


def test_original_max_position_embeddings_keeps_the_factor_out() -> None:
    override = {"rope_scaling": {**YARN_4["rope_scaling"], "original_max_position_embeddings": 262144}}
    problem = the_error(validate_host(qwen_next({"context_length": "1Mi", "json_model_override_args": override})),
                        "numeric.context_length")
    assert "maximum of 262144 tokens" in problem.message


def test_llama3_rope_scaling_of_the_checkpoint_is_merged_and_keeps_the_factor_out() -> None:
    result = validate_host(llama_host({"context_length": "256Ki", "json_model_override_args": {"rope_scaling": {"factor": 2.0}}}))
    assert "maximum of 131072 tokens" in the_error(result, "numeric.context_length").message


@pytest.mark.parametrize("host", [llama_host, qwen_next])
def test_max_position_embeddings_override_raises_the_limit(host: Any) -> None:
    clean_but(validate_host(host({"context_length": "1Mi", "json_model_override_args": {"max_position_embeddings": 1048576}})))


def test_vision_language_model_takes_the_override_under_text_config() -> None:
    clean_but(validate_host(ref_host({"context_length": "1Mi", "json_model_override_args": {"text_config": YARN_4}})))
    problem = the_error(validate_host(ref_host({"context_length": "1Mi", "json_model_override_args": YARN_4})),
                        "numeric.context_length")
    assert "maximum of 262144 tokens" in problem.message and '"text_config"' in problem.fix


def test_rope_override_of_a_checkpoint_outside_the_table_warns_about_its_own_rope_scaling() -> None:
    host = llama_host({"context_length": "256Ki", "json_model_override_args": {"rope_scaling": {"factor": 2.0}}},
                      sglang_model_path="/srv/models/private", sglang_model_max_context=131072)
    result = validate_host(host)
    clean_but(result, "numeric.context_length")
    assert "original_max_position_embeddings" in result.warnings[0].message


# --- 5. the NVFP4 MoE-runner rule is for MoE models ----------------------------------------------------


def test_dense_nvfp4_checkpoint_needs_no_moe_runner() -> None:
    clean_but(validate_host(llama_host(sglang_model_path="nvidia/Llama-3.3-70B-Instruct-FP4")))


def test_nvfp4_checkpoint_of_unknown_architecture_is_not_accused() -> None:
    host = llama_host(sglang_model_path="/srv/models/private-nvfp4", sglang_model_quantization="modelopt_fp4")
    assert "sm12x.nvfp4" not in rules(validate_host(host))


@pytest.mark.parametrize(("path", "arch"), [("nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4", None),
                                            ("/srv/models/private-nvfp4", "Qwen3MoeForCausalLM")])
def test_nvfp4_moe_checkpoint_still_needs_the_sm120_runner(path: str, arch: str | None) -> None:
    extra = {"sglang_model_quantization": "nvfp4", "sglang_model_architecture": arch} if arch else {}
    assert rules(validate_host(llama_host(sglang_model_path=path, **extra))) == ["sm12x.nvfp4"]


# --- 6. SGLang's own environment truthiness --------------------------------------------------------------


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("TRUE", True), ("yes", True), ("y", True),
                                           ("Y", True), ("0", False), ("n", False), ("on", False), (" 1", False),
                                           (" yes ", False), ("", False), (None, False)])
def test_env_true_is_sglang_envbool(value: str | None, on: bool) -> None:
    assert env_true({} if value is None else {"X": value}, "X") is on


@pytest.mark.parametrize("value", ["y", "Y", "YES", "True"])
def test_longer_context_allowed_by_every_spelling_sglang_takes(value: str) -> None:
    clean_but(validate_host(ref_host({"context_length": "512Ki"}, sglang_env=env(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=value))))


@pytest.mark.parametrize("value", [" yes ", "on", " 1", "0"])
def test_longer_context_not_allowed_by_spellings_sglang_reads_as_off(value: str) -> None:
    host = ref_host({"context_length": "512Ki"}, sglang_env=env(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=value))
    the_error(validate_host(host), "numeric.context_length")


def test_longer_context_allowed_in_sglang_ci_mode() -> None:
    # model_config.py:1302-1304: SGLANG_IS_IN_CI lifts the check too.
    clean_but(validate_host(ref_host({"context_length": "512Ki"}, sglang_env=env(SGLANG_IS_IN_CI="true"))))


# --- 7. nvidia_gpu_count as YAML and Jinja hand it over --------------------------------------------------


@pytest.mark.parametrize("count", [8, 8.0, "8", " 8 ", "8.0"])
def test_whole_gpu_counts_are_accepted(count: Any) -> None:
    result = validate_host(ref_host(nvidia_gpu_count=count))
    clean_but(result)
    assert result.gpu_ids == list(range(8))


@pytest.mark.parametrize("count", [8.5, "8.5", 0, 0.0, -8, "-8", True, False, 1025, 10**6, "eight", "1e3", [8],
                                   float("nan"), float("inf")])
def test_gpu_counts_no_host_has_are_refused(count: Any) -> None:
    problem = find(validate_host(ref_host(nvidia_gpu_count=count)).errors, "host.hardware")
    assert problem.variable == "nvidia_gpu_count" and "1024" in problem.message


# --- 8. parallel.gpus names what pushes it over, and a value that fits -----------------------------------


@pytest.mark.parametrize(
    ("args", "dest", "fix"),
    [
        ({"tp_size": 16}, "tp_size", "tp_size: 8"),
        ({"tp_size": 8, "dp_size": 2}, "dp_size", "dp_size: 1"),
        ({"tp_size": 4, "dp_size": 4}, "dp_size", "dp_size: 2"),
        ({"tp_size": 8, "pp_size": 2, "speculative_algorithm": None}, "pp_size", "pp_size: 1"),
        ({"tp_size": 16, "pp_size": 2, "speculative_algorithm": None}, "tp_size", "tp_size: 8, pp_size: 1"),
        ({"tp_size": 4, "base_gpu_id": 5}, "base_gpu_id", "base_gpu_id: 4"),
        ({"tp_size": 4, "gpu_id_step": 3}, "gpu_id_step", "gpu_id_step: 2"),
        ({"tp_size": 8, "gpu_id_step": 2}, "gpu_id_step", "gpu_id_step: 1"),
    ],
)
def test_gpu_overflow_names_its_cause_and_a_fitting_value(args: dict[str, Any], dest: str, fix: str) -> None:
    problem = the_error(validate_host(ref_host(args)), "parallel.gpus")
    assert problem.variable == f"sglang_args.{dest}" and problem.value == args[dest]
    assert f"{dest}={args[dest]}" in problem.message and f"set {fix} " in problem.fix
    for name, value in re.findall(r"(\w+_(?:size|id|step)): (\d+)", problem.fix):
        assert int(value) != ref_host(args)["sglang_args"].get(name), f"suggests the current {name}: {problem.fix}"


def test_gpu_overflow_fix_fits() -> None:
    problem = the_error(validate_host(ref_host({"tp_size": 4, "dp_size": 4})), "parallel.gpus")
    assert validate_host(ref_host({"tp_size": 4, "dp_size": 2})).ok and "dp_size: 2" in problem.fix


# --- 9. a model the validator knows nothing about --------------------------------------------------------


def test_unknown_model_is_a_warning_that_names_what_was_skipped() -> None:
    result = validate_host(llama_host(sglang_model_path="/srv/models/private"))
    clean_but(result, "model.unknown")
    (warning,) = result.warnings
    assert warning.variable == "sglang_model_path" and warning.value == "/srv/models/private"
    assert all(word in warning.message for word in ("hybrid", "NVFP4", "context length", "speculative"))
    assert all(var in warning.fix for var in ("sglang_model_architecture", "sglang_model_quantization", "sglang_model_max_context"))


@pytest.mark.parametrize(
    "facts",
    [{"sglang_model_architecture": "LlamaForCausalLM"}, {"sglang_model_quantization": "none"}, {"sglang_model_max_context": 32768}],
)
def test_any_declared_fact_silences_the_unknown_model_warning(facts: dict[str, Any]) -> None:
    assert "model.unknown" not in warned(validate_host(llama_host(sglang_model_path="/srv/models/private", **facts)))


@pytest.mark.parametrize("path", [LLAMA, "/srv/models/Llama-3.1-8B-Instruct"])
def test_known_model_has_no_unknown_model_warning(path: str) -> None:
    clean_but(validate_host(llama_host(sglang_model_path=path)))


def test_no_unknown_model_warning_without_a_model_path() -> None:
    result = validate_host(ref_host(sglang_model_path=MISSING))
    assert rules(result) == ["host.model_path"] and "model.unknown" not in warned(result)



# --- a disaggregation decode server's chunk size (validation_hook.py:241-243) ---------------------------------------


def test_a_decode_server_chunk_size_is_not_checked_against_the_page_size() -> None:
    # SGLang skips the divisibility check on a decode server (it does no prefill); the prefill server keeps it.
    args = {"page_size": 16, "chunked_prefill_size": 1000}
    assert "numeric.chunked_prefill_size" not in rules(validate_host(llama_host({**args, "disaggregation_mode": "decode"})))
    assert "numeric.chunked_prefill_size" in rules(validate_host(llama_host({**args, "disaggregation_mode": "prefill"})))
    assert "numeric.chunked_prefill_size" in rules(validate_host(llama_host(args)))


# --- MXFP8 replaces a MoE runner it does not run (issue 36; overrides.py:1484-1509) --------------------------


_MXFP8_A2A = {"moe_a2a_backend": "flashinfer", "tp_size": 2, "attn_dp_size": 2, "flashinfer_a2a_dispatch_type": "mxfp8",
              "quantization": "mxfp8"}


@pytest.mark.parametrize("runner", ["triton", "flashinfer_cutlass"])
def test_mxfp8_replaces_a_runner_it_does_not_run_before_the_a2a_checks(runner: str) -> None:
    """SGLang 0.5.23 turns triton / flashinfer_cutlass under quantization mxfp8 into flashinfer_trtllm (then
    flashinfer_trtllm_routed under FlashInfer A2A) and accepts: no server.moe refusal (conformance probe, 12.0 and 10.0)."""
    host = llama_host({**_MXFP8_A2A, "moe_runner_backend": runner}, sglang_model_path=QWEN_NEXT, nvidia_gpu_count=2)
    result = validate_host(host)
    assert "server.moe" not in rules(result), format_report("host", result)


@pytest.mark.parametrize("runner", ["deep_gemm", "cutlass"])
def test_mxfp8_keeps_the_runners_it_runs_and_the_dispatch_check_refuses_them(runner: str) -> None:
    """deep_gemm and cutlass are MXFP8 runners SGLang keeps, so the MXFP8 dispatch refuses them (moe_hook.py:197)."""
    host = llama_host({**_MXFP8_A2A, "moe_runner_backend": runner}, sglang_model_path=QWEN_NEXT, nvidia_gpu_count=2)
    problem = find(validate_host(host).errors, "server.moe")
    assert problem.variable == "sglang_args.moe_runner_backend" and "moe_hook.py:197" in problem.source
