"""What the 10,000-case differential fuzz run of seed 4 (``differential.py --cases 10000 --seed 4``) found: three MISSED
classes (SGLang 0.5.23 refuses, the validator accepted) and one false alarm (the validator refused what SGLang
accepts, for a reason that is not an allowed stricter one), on what the conformance corpus cannot show: the older
releases, the GPUs' memory, the edges of each condition, the messages.

Each refusal and its neighbour is probe-confirmed by a case of tests/conformance/cases.yaml
(``fuzzed-mis-qwen3-next-sm100-override-triton``, ``fuzzed-chunked-page-llada2-cfg-flashinfer``,
``fuzzed-shared-experts-tp-attn-cp``, ``fuzzed-shared-experts-tp-attn-cp-kimi-only``,
``fuzzed-mori-attention-dp-chunk-per-rank`` and the cases beside them); the cases here that the corpus lacks were
probed the same way (SGLang 0.5.20-0.5.23).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
from test_sglang_rules_fuzz10k_s3 import errors, with_memory
from test_sglang_rules_seed0_2000 import host

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
QWEN35 = "nvidia/Qwen3.5-397B-A17B-NVFP4"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
KIMI_K3 = '{"architectures": ["KimiK3ForConditionalGeneration"]}'
RTX_PRO_6000, H200 = 97887, 143771


# --- enable_mis on the backend a model override or deterministic inference fills in (fuzz-4-05272, fuzz-4-01360) ----


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "cc", "model", "refused"), [
    ({}, "10.0", QWEN3_NEXT, True),  # fuzz-4-05272: the SM100 override's triton
    ({"speculative_algorithm": "NGRAM", "speculative_ngram_external_sam_budget": 5}, "10.3", QWEN3_NEXT, True),  # -01360
    ({"disable_radix_cache": True}, "10.0", QWEN3_NEXT, True),  # the override's trtllm_mha
    ({}, "10.0", QWEN35, True),
    ({"enable_deterministic_inference": True}, "10.0", QWEN3_NEXT, True),  # the override first: triton stays
    ({"prefill_attention_backend": "flashinfer"}, "10.0", QWEN3_NEXT, True),  # decode falls back to triton
    ({"attention_backend": "flashinfer"}, "10.0", QWEN3_NEXT, False),
    ({"prefill_attention_backend": "flashinfer", "decode_attention_backend": "flashinfer"}, "10.0", QWEN3_NEXT, False),
    ({}, "12.0", QWEN3_NEXT, False),  # no override off SM100: flashinfer
    ({}, "10.0", LLAMA, True),  # SGLang's default, trtllm_mha
    ({"enable_deterministic_inference": True}, "10.0", LLAMA, False),  # deterministic inference fills flashinfer in
    ({"enable_deterministic_inference": True, "decode_attention_backend": "flashinfer"}, "10.0", LLAMA, False),
    ({"enable_deterministic_inference": True}, "9.0", LLAMA, True),  # fa3 on Hopper
    ({}, "10.0", DEEPSEEK, True),  # the override's trtllm_mla
    ({"prefill_attention_backend": "flashinfer"}, "10.0", DEEPSEEK, False),  # no override: the MLA default, flashinfer
    ({"decode_attention_backend": "flashinfer"}, "10.0", DEEPSEEK, False),
    ({"decode_attention_backend": "triton"}, "10.0", DEEPSEEK, True),
    ({"decode_attention_backend": "flashinfer", "enable_deterministic_inference": True}, "10.0", DEEPSEEK, True),  # triton
    ({"prefill_attention_backend": "flashinfer"}, "9.0", DEEPSEEK, True),  # fa3
    ({"enable_deterministic_inference": True}, "12.0", DEEPSEEK, True),  # triton for the DeepSeek models
])
def test_multi_item_scoring_on_the_resolved_backend(version: str, args: dict[str, Any], cc: str, model: str,
                                                    refused: bool) -> None:
    found = errors(host({"enable_mis": True, **args}, version, model=model, cc=cc, gpus=8), "server.multi_item_scoring")
    assert bool(found) is refused


def test_the_override_names_itself() -> None:
    found = errors(host({"enable_mis": True}, model=QWEN3_NEXT, cc="10.0", gpus=8), "server.multi_item_scoring")
    assert [(p.variable, p.source) for p in found] == [("sglang_args.enable_mis",
                                                        "sglang/srt/arg_groups/attention_hook.py:573")]
    assert "not triton (which SGLang picks for Qwen3NextForCausalLM on this GPU" in found[0].message
    written = errors(host({"enable_mis": True, "attention_backend": "triton"}, model=LLAMA, cc="12.0", gpus=1),
                     "server.multi_item_scoring")
    assert "SGLang picks" not in written[0].message


# --- the chunk against the page llada2_cfg_flashinfer leaves alone (fuzz-4-01872..01874) ---------------------------


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "model", "refused"), [
    ({"page_size": 11}, LLAMA, True),
    ({"page_size": 13, "context_length": 13, "max_total_tokens": 13, "prefill_attention_backend": "flex_attention"},
     DEEPSEEK, True),  # fuzz-4-01874
    ({"page_size": 16}, LLAMA, False),
    ({"page_size": 11, "chunked_prefill_size": 8800}, DEEPSEEK, False),  # the host's own pair: a multiple
    ({"page_size": 11, "chunked_prefill_size": 8801}, DEEPSEEK, True),  # numeric.chunked_prefill_size
])
def test_llada2_cfg_flashinfer_keeps_the_page(version: str, args: dict[str, Any], model: str, refused: bool) -> None:
    hostvars = with_memory(host({"attention_backend": "llada2_cfg_flashinfer", **args}, version, model=model, cc="12.0",
                                gpus=1), RTX_PRO_6000)
    found = [p for rule in ("memory.chunked_page", "numeric.chunked_prefill_size") for p in errors(hostvars, rule)]
    assert [(p.source or "").endswith("validation_hook.py:244") for p in found] == ([True] if refused else [])


def test_llada2_cfg_flashinfer_is_not_a_choice_before_0522() -> None:
    hostvars = host({"attention_backend": "llada2_cfg_flashinfer", "page_size": 11}, "0.5.21", cc="12.0", gpus=1)
    assert "schema.choices" in {p.rule for p in validate_host(hostvars).errors}


@pytest.mark.parametrize(("args", "refused"), [
    ({"prefill_attention_backend": "flashinfer", "chunked_prefill_size": 100}, False),  # the MLA default: no page forced
    ({"chunked_prefill_size": 100}, True),  # the override's trtllm_mla forces page 64
    ({"decode_attention_backend": "trtllm_mla", "chunked_prefill_size": 100}, True),
])
def test_deepseek_on_sm100_with_one_side_written(args: dict[str, Any], refused: bool) -> None:
    found = errors(host(args, model=DEEPSEEK, cc="10.0", gpus=8), "memory.chunked_page")
    assert bool(found) is refused


# --- shared_experts_tp_size against the attention TP size under attn_cp_size (fuzz-4-04568) -------------------------


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "where"), [
    ({"attn_cp_size": 5, "moe_a2a_backend": "ascend_fuseep", "shared_experts_tp_size": 5, "tp_size": 5}, 216),  # the run's
    ({"attn_cp_size": 2, "moe_a2a_backend": "deepep", "shared_experts_tp_size": 4, "tp_size": 4,
      "json_model_override_args": KIMI_K3}, 216),
    ({"attn_cp_size": 2, "moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4,
      "json_model_override_args": KIMI_K3}, None),
    ({"attn_cp_size": 2, "attn_dp_size": 2, "moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4,
      "json_model_override_args": KIMI_K3}, 216),  # 4 // 2 // 2 = 1
    # DeepSeek's prefill CP derives the sizes itself (cp_derived): the divisor is not checked, but DeepSeek-V3 is not
    # Kimi-K3 (:226).
    ({"attn_cp_size": 5, "enable_prefill_cp": True, "shared_experts_tp_size": 5, "tp_size": 5}, 226),
])
def test_shared_experts_tp_with_attention_cp(version: str, args: dict[str, Any], where: int | None) -> None:
    if version == "0.5.21" and "attn_dp_size" in args:
        pytest.skip("attn_dp_size is new in 0.5.22")
    found = [p for p in errors(host(args, version, model=DEEPSEEK, cc="12.0", gpus=8), "server.parallel")
             if "shared_experts_tp_size" in p.message]
    assert [p.variable for p in found] == (["sglang_args.shared_experts_tp_size"] if where else [])
    if where == 216:
        assert "must be a positive divisor of the attention TP size" in found[0].message
    elif where:
        assert "only supported for Kimi-K3" in found[0].message


# --- shared_experts_tp_size on a model other than Kimi-K3 (parallel_hook.py:226), where the architecture is certain ---

KIMI_ONLY = {"0.5.21": 178, "0.5.22": 220, "0.5.23": 226}  # parallel_hook.py's raise in each release


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22", "0.5.23"])
@pytest.mark.parametrize(("args", "model", "refused"), [
    # the seed-4 run's re-judge left it alone: attention TP size 1, shared_experts_tp_size 1 divides it
    ({"attn_cp_size": 5, "shared_experts_tp_size": 1, "tp_size": 5}, DEEPSEEK, True),
    ({"attn_cp_size": 5, "moe_a2a_backend": "deepep", "shared_experts_tp_size": 1, "tp_size": 5}, DEEPSEEK, True),
    ({"attn_cp_size": 5, "moe_a2a_backend": "none", "shared_experts_tp_size": 1, "tp_size": 5}, DEEPSEEK, True),
    ({"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4}, DEEPSEEK, True),  # without CP
    ({"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4}, QWEN3_NEXT, True),
    ({"shared_experts_tp_size": 2, "tp_size": 4}, QWEN3_NEXT, True),  # before the backend check (:234)
    ({"moe_a2a_backend": "mori", "shared_experts_tp_size": 1, "tp_size": 4}, LLAMA, True),
    # an override's architectures decide, whatever the checkpoint
    ({"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4,
      "json_model_override_args": '{"architectures": ["Qwen3MoeForCausalLM"]}'}, DEEPSEEK, True),
    ({"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4,
      "json_model_override_args": '{"architectures": ["SomethingForCausalLM"]}'}, DEEPSEEK, True),
    # the accepting neighbours: Kimi-K3 through the override, with and without CP
    ({"attn_cp_size": 5, "moe_a2a_backend": "deepep", "shared_experts_tp_size": 1, "tp_size": 5,
      "json_model_override_args": KIMI_K3}, DEEPSEEK, False),
    ({"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4, "json_model_override_args": KIMI_K3},
     DEEPSEEK, False),
    ({"moe_a2a_backend": "mooncake", "shared_experts_tp_size": 4, "tp_size": 4, "json_model_override_args": KIMI_K3},
     QWEN3_NEXT, False),
    ({"attn_cp_size": 5, "tp_size": 5}, DEEPSEEK, False),  # no shared_experts_tp_size
])
def test_shared_experts_tp_is_kimi_k3_only(version: str, args: dict[str, Any], model: str, refused: bool) -> None:
    found = [p for p in errors(host(args, version, model=model, cc="12.0", gpus=8), "server.parallel")
             if "shared_experts_tp_size" in p.message]
    assert [p.variable for p in found] == (["sglang_args.shared_experts_tp_size"] if refused else [])
    if refused:
        assert "only supported for Kimi-K3" in found[0].message
        assert found[0].source == f"sglang/srt/arg_groups/parallel_hook.py:{KIMI_ONLY[version]}"


def test_shared_experts_tp_is_not_a_choice_before_0521() -> None:
    args = {"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4}
    assert not [p for p in errors(host(args, "0.5.20", model=DEEPSEEK, cc="12.0", gpus=8), "server.parallel")
                if "Kimi-K3" in p.message]


def test_an_unknown_checkpoint_is_the_preflights() -> None:
    """Where only the checkpoint's config.json names the architecture, the rule stays silent (the preflight runs :226);
    an override's architectures decide there too."""
    args = {"moe_a2a_backend": "deepep", "shared_experts_tp_size": 2, "tp_size": 4}
    assert errors(host(args, model="example/unknown-model", cc="12.0", gpus=8), "server.parallel") == []
    args["json_model_override_args"] = '{"architectures": ["DeepseekV3ForCausalLM"]}'
    assert [p.variable for p in errors(host(args, model="example/unknown-model", cc="12.0", gpus=8), "server.parallel")] \
        == ["sglang_args.shared_experts_tp_size"]
    args["json_model_override_args"] = KIMI_K3
    assert errors(host(args, model="example/unknown-model", cc="12.0", gpus=8), "server.parallel") == []


def test_shared_experts_on_deepseek_is_refused_for_the_model_first() -> None:
    """DeepSeek-V3 with shared_experts_tp_size is refused at :226 (Kimi-K3 only), before the backend's check (:231).
    That check reads the written backend here: attn_cp_size alone does not run DeepSeek's CP override
    (test_sglang_rules_attn_cp_a2a.py)."""
    args = {"attn_cp_size": 5, "moe_a2a_backend": "none", "shared_experts_tp_size": 1, "tp_size": 5}
    assert [p.source for p in errors(host(args, model=DEEPSEEK, cc="12.0", gpus=8), "server.parallel")] == \
        ["sglang/srt/arg_groups/parallel_hook.py:226"]


# --- MoRI's dispatch tokens per attention-DP rank (fuzz-4-01951, a false alarm) -----------------------------------


def mori(hostvars: dict[str, Any]) -> list[Any]:
    return errors(hostvars, "moe.mori")


def test_the_fuzz_case() -> None:
    """fuzz-4-01951: Qwen3.5 on two H200, attn_dp_size 13: SGLang's default 8192 becomes 630 per rank."""
    args = {"attn_dp_size": 13, "enable_tp_lm_head_all_to_all": True, "moe_a2a_backend": "mori", "tp_size": 13}
    hostvars = with_memory(host(args, model=QWEN35, cc="9.0", gpus=2), H200)
    assert mori(hostvars) == []
    assert {p.rule for p in validate_host(hostvars).errors} == {"parallel.gpus", "sm90.moe"}  # allowed stricter


@pytest.mark.parametrize(("version", "args", "per_rank"), [
    ("0.5.23", {"attn_dp_size": 2, "tp_size": 2, "chunked_prefill_size": 8194}, 4097),
    ("0.5.23", {"attn_dp_size": 2, "tp_size": 2, "chunked_prefill_size": 8193}, None),
    ("0.5.23", {"attn_dp_size": 2, "tp_size": 2}, None),  # SGLang's default 8192 on 96 GB: 4096 per rank
    ("0.5.23", {"tp_size": 2}, 8192),
    ("0.5.23", {"chunked_prefill_size": 4097}, 4097),
    ("0.5.22", {"attn_dp_size": 2, "tp_size": 2, "chunked_prefill_size": 8194}, 4097),
    ("0.5.22", {"enable_dp_attention": True, "dp_size": 2, "tp_size": 2, "chunked_prefill_size": 8193}, None),
    ("0.5.21", {"enable_dp_attention": True, "dp_size": 2, "tp_size": 2, "chunked_prefill_size": 8194}, 4097),
    ("0.5.20", {"enable_dp_attention": True, "dp_size": 2, "tp_size": 2, "chunked_prefill_size": 8193}, None),
    ("0.5.23", {"attn_dp_size": 2, "tp_size": 2, "chunked_prefill_size": 1}, None),  # 0 per rank: the check is skipped
])
def test_mori_chunk_per_attention_dp_rank(version: str, args: dict[str, Any], per_rank: int | None) -> None:
    hostvars = with_memory(host({"moe_a2a_backend": "mori", "ep_size": 2, **args}, version, model=DEEPSEEK, cc="12.0",
                                gpus=2), RTX_PRO_6000)
    found = mori(hostvars)
    assert [p.source for p in found] == (["sglang/srt/arg_groups/moe_hook.py:564-572"] if per_rank else [])
    if per_rank:
        assert f"{per_rank} tokens per rank" in found[0].message
