"""What the 10,000-case differential fuzz run of issue 36 (``differential.py --cases 10000 --seed 0``) found SGLang
0.5.23 refusing while the validator accepted, in the speculative and serving rules; each refusal and neighbour is
probe-confirmed by a ``fuzzed-*`` case of tests/conformance/cases.yaml."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_validate import LLAMA, find, llama_host, rules

QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
A100 = {"nvidia_gpu_compute_capability": "8.0", "nvidia_gpu_count": 1, "nvidia_gpu_memory_mib": 81920}
H100 = {"nvidia_gpu_compute_capability": "9.0", "nvidia_gpu_count": 1, "nvidia_gpu_memory_mib": 81559}


def uno(hardware: dict[str, Any], **args: Any) -> dict[str, Any]:
    return llama_host({"tp_size": 1, "speculative_algorithm": "UNO", "uno_lora_path": "/srv/uno",
                       "speculative_num_draft_tokens": 4, "attention_backend": None, **args},
                      sglang_spec="keep", **hardware)


# --- UNO needs FA3 as SGLang resolves the backends (speculative_hook.py:606-611) -----------------------------------


def test_uno_on_a100_with_sglangs_default_backend_is_refused() -> None:
    problem = find(validate_host(uno(A100)).errors, "server.speculative")
    assert problem.variable == "sglang_args.attention_backend"
    assert "prefill flashinfer / decode flashinfer (SGLang's default" in problem.message


def test_uno_on_h100_with_a_written_prefill_backend_is_refused() -> None:
    problem = find(validate_host(uno(H100, prefill_attention_backend="flashinfer")).errors, "server.speculative")
    assert "prefill flashinfer / decode fa3." in problem.message  # written: no "SGLang's default"


@pytest.mark.parametrize("args", [{}, {"attention_backend": "fa3"}])
def test_uno_on_h100_with_fa3_is_accepted(args: dict[str, Any]) -> None:
    assert "server.speculative" not in rules(validate_host(uno(H100, **args)))


# --- DFLASH runs on cuda, npu or xpu (speculative_hook.py:291-301) -------------------------------------------------


@pytest.mark.parametrize(("device", "refused"), [("cpu", True), ("mps", True), ("cuda", False), ("cuda:1", False),
                                                 ("xpu", False), ("npu", False)])
def test_dflash_device(device: str, refused: bool) -> None:
    host = llama_host({"device": device, "speculative_algorithm": "DFLASH", "speculative_draft_model_path": LLAMA},
                      sglang_spec="keep")
    found = [p for p in validate_host(host).errors if p.variable == "sglang_args.device" and "DFLASH" in p.message]
    assert bool(found) is refused
    if refused:
        assert "speculative_hook.py:298" in (found[0].source or "")


# --- the aux hidden-state capture takes no draft model (validation_hook.py:719-723) ---------------------------------


def test_aux_capture_with_a_draft_model_is_refused_and_without_one_accepted() -> None:
    args = {"enable_return_aux_hidden_states": True, "return_aux_hidden_state_layer_ids": [0],
            "speculative_algorithm": "DFLASH"}
    problem = find(validate_host(llama_host({**args, "speculative_draft_model_path": LLAMA}, sglang_model_path=QWEN_NEXT,
                                            sglang_spec="keep")).errors, "server.aux_hidden_states")
    assert problem.variable == "sglang_args.speculative_draft_model_path"
    assert "validation_hook.py:720" in (problem.source or "")
    assert rules(validate_host(llama_host(args, sglang_model_path=QWEN_NEXT, sglang_spec="keep"))) == []


# --- watermarking without PD disaggregation (validation_hook.py:88-89) -------------------------------------------


@pytest.mark.parametrize(("mode", "refused"), [("prefill", True), ("decode", True), ("null", False), (None, False)])
def test_watermark_and_disaggregation_mode(mode: str | None, refused: bool) -> None:
    host = llama_host({"enable_watermark": True, "disaggregation_mode": mode}, sglang_model_path=QWEN_NEXT)
    found = [p for p in validate_host(host).errors if p.variable == "sglang_args.disaggregation_mode"]
    assert bool(found) is refused
    if refused:
        assert found[0].rule == "server.watermark" and "validation_hook.py:89" in (found[0].source or "")


# --- block verification turns rejection sampling on for EAGLE (speculative_hook.py:185-194; the second 10,000-case
# run of seed 0, drawn after the mapping grew) ----------------------------------------------------------------------


@pytest.mark.parametrize(("version", "refused"), [("0.5.22", True), ("0.5.23", True)])
def test_block_verification_with_llamas_automatic_tree_is_refused(version: str, refused: bool) -> None:
    host = llama_host({"speculative_algorithm": "EAGLE", "speculative_draft_model_path": LLAMA,
                       "speculative_use_block_verification": True}, sglang_spec="keep", sglang_version=version)
    problem = find(validate_host(host).errors, "server.speculative")
    assert problem.variable == "sglang_args.speculative_eagle_topk"
    assert "speculative_use_block_verification turns on" in problem.message
    assert "remove sglang_args.speculative_use_block_verification" in problem.fix


def test_block_verification_with_a_linear_draft_is_accepted() -> None:
    host = llama_host({"speculative_algorithm": "EAGLE", "speculative_draft_model_path": LLAMA,
                       "speculative_use_block_verification": True, "speculative_num_steps": 3,
                       "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}, sglang_spec="keep")
    assert "server.speculative" not in rules(validate_host(host))


def test_block_verification_does_not_turn_rejection_on_for_dflash() -> None:
    host = llama_host({"speculative_algorithm": "DFLASH", "speculative_draft_model_path": LLAMA,
                       "speculative_use_block_verification": True}, sglang_spec="keep")
    assert "server.speculative" not in rules(validate_host(host))
