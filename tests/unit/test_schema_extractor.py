"""Tests of tools/sglang_schema.py and of the committed SGLang 0.5.23 CLI schema.

No network: the sglang wheel must already be in ``.cache/sglang-wheels/``
(``make deps``, or ``python3 tools/sglang_schema.py --version 0.5.23 --download-only``).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tool_loader import load_tool

REPO = Path(__file__).resolve().parents[2]


extractor = load_tool("sglang_schema")

VERSION = "0.5.23"
SCHEMA_PATH = (
    REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas" / f"sglang-{VERSION}.json"
)
WHEEL_DIR = REPO / extractor.DEFAULT_WHEEL_DIR


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed_text() -> str:
    return SCHEMA_PATH.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def schema(committed_text: str) -> dict[str, Any]:
    return json.loads(committed_text)


@pytest.fixture(scope="module")
def args(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return schema["arguments"]


@pytest.fixture(scope="module")
def wheel(schema: dict[str, Any]) -> Path:
    path = WHEEL_DIR / schema["wheel"]["filename"]
    if not path.is_file():
        pytest.fail(
            f"sglang wheel {path} is missing; run "
            f"`python3 tools/sglang_schema.py --version {VERSION} --download-only` "
            "(or `make deps`) from the repository root first",
            pytrace=False,
        )
    return path


# ---------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------


def test_wheel_matches_committed_hash(wheel: Path, schema: dict[str, Any]) -> None:
    assert extractor.sha256_of(wheel) == schema["wheel"]["sha256"]


def test_extractor_reproduces_committed_json_byte_for_byte(wheel: Path, committed_text: str) -> None:
    assert extractor.schema_for_wheel(wheel, VERSION) == committed_text


def _committed_versions() -> list[str]:
    from packaging.version import Version

    return sorted((p.name[len("sglang-"):-len(".json")] for p in SCHEMA_PATH.parent.glob("sglang-*.json")), key=Version)


@pytest.mark.parametrize("version", [v for v in _committed_versions() if v != VERSION])
def test_every_committed_schema_is_its_wheels_extraction(version: str) -> None:
    """Each older supported release's schema is what the extractor makes of its wheel (``make wheels``); the
    pinned release's is checked above."""
    path = SCHEMA_PATH.parent / f"sglang-{version}.json"
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["sglang_version"] == version
    wheel = WHEEL_DIR / data["wheel"]["filename"]
    if not wheel.is_file():
        pytest.fail(f"sglang wheel {wheel} is missing; run `make wheels` from the repository root first", pytrace=False)
    assert extractor.sha256_of(wheel) == data["wheel"]["sha256"]
    assert extractor.schema_for_wheel(wheel, version) == text


# ---------------------------------------------------------------------------
# Committed schema: shape and targeted facts
# ---------------------------------------------------------------------------


def test_header(schema: dict[str, Any]) -> None:
    assert schema["format"] == 1
    assert schema["sglang_version"] == VERSION
    assert schema["generator"] == "tools/sglang_schema.py"
    assert schema["wheel"]["filename"].startswith(f"sglang-{VERSION}-")


def test_argument_and_option_counts(args: dict[str, dict[str, Any]]) -> None:
    assert 520 <= len(args) <= 540
    option_strings = [o for a in args.values() for o in a["option_strings"]]
    assert 545 <= len(option_strings) <= 575
    assert len(option_strings) == len(set(option_strings)), "an option string is registered twice"


def test_every_record_has_the_documented_keys(args: dict[str, dict[str, Any]]) -> None:
    keys = {
        "dest",
        "option_strings",
        "action",
        "type",
        "nargs",
        "choices",
        "choices_dynamic",
        "default",
        "required",
        "const",
        "deprecated",
        "help",
        "source",
    }
    for name, record in args.items():
        assert keys <= set(record), name
        assert ("deprecated_message" in record) == record["deprecated"], name
        assert record["source"].startswith("sglang/") and ":" in record["source"], name


def test_speculative_flags(args: dict[str, dict[str, Any]]) -> None:
    steps = args["speculative_num_steps"]
    assert (steps["type"], steps["action"]) == ("int", "store")
    assert args["speculative_algorithm"]["option_strings"] == ["--speculative-algorithm"]


def test_tp_size_aliases(args: dict[str, dict[str, Any]]) -> None:
    assert args["tp_size"]["option_strings"] == ["--tp-size", "--tensor-parallel-size"]
    assert args["tp_size"]["type"] == "int" and args["tp_size"]["default"] == 1


def test_mamba_strategy_renamed(args: dict[str, dict[str, Any]]) -> None:
    assert "mamba_scheduler_strategy" not in args
    strategy = args["mamba_radix_cache_strategy"]
    assert strategy["choices"] == ["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"]


def test_store_true_flag(args: dict[str, dict[str, Any]]) -> None:
    metrics = args["enable_metrics"]
    assert metrics["action"] == "store_true"
    assert metrics["nargs"] == 0 and metrics["default"] is False and metrics["type"] is None


def test_list_flag_has_nargs(args: dict[str, dict[str, Any]]) -> None:
    bs = args["cuda_graph_bs_decode"]
    assert (bs["nargs"], bs["type"]) == ("+", "int")


def test_choices_resolved_from_choices_module(args: dict[str, dict[str, Any]]) -> None:
    load_format = args["load_format"]
    assert load_format["source"].startswith("sglang/srt/arg_groups/fields/model.py:")
    assert {"auto", "safetensors", "gguf", "dummy"} <= set(load_format["choices"])
    assert load_format["choices_dynamic"] is False


def test_model_path_required_with_alias(args: dict[str, dict[str, Any]]) -> None:
    model = args["model_path"]
    assert model["required"] is True
    assert model["option_strings"] == ["--model-path", "--model"]


def test_backend_choices(args: dict[str, dict[str, Any]]) -> None:
    assert {"fa3", "triton", "flashinfer", "trtllm_mha"} <= set(args["attention_backend"]["choices"])
    assert {"flashinfer_cutlass", "flashinfer_trtllm"} <= set(args["moe_runner_backend"]["choices"])
    assert "modelopt_fp4" in args["quantization"]["choices"]


def test_dynamic_choices_are_marked(args: dict[str, dict[str, Any]]) -> None:
    for name in ("reasoning_parser", "tool_call_parser", "sampling_backend"):
        assert args[name]["choices_dynamic"] is True, name
        assert args[name]["choices"], name
    assert "auto" in args["reasoning_parser"]["choices"]


def test_deprecated_flags(args: dict[str, dict[str, Any]]) -> None:
    for name in ("enable_dp_attention", "disable_cuda_graph"):
        assert args[name]["deprecated"] is True
        assert args[name]["action"] == "DeprecatedStoreTrueAction"
    monokernel = args["monokernel_backend"]
    assert monokernel["dest"] == "enable_amd_monokernel" and monokernel["deprecated"] is True
    assert args["tp_size"]["deprecated"] is False


def test_custom_types_and_actions_are_described(schema: dict[str, Any]) -> None:
    used_types = {a["type"] for a in schema["arguments"].values()} - {None, "str", "int", "float", "bool"}
    assert used_types == set(schema["custom_types"])
    used_actions = {a["action"] for a in schema["arguments"].values()} - set(extractor.STRING_ACTIONS)
    assert used_actions == set(schema["custom_actions"])
    assert "BooleanOptionalAction" in schema["custom_actions"]


# ---------------------------------------------------------------------------
# AST helpers on synthetic sources
# ---------------------------------------------------------------------------

SYNTHETIC = textwrap.dedent('''
    from typing import Annotated, Callable, List, Literal, Optional
    import argparse
    import msgspec

    A = Annotated
    MODES = ["fast", "slow"]


    def comma_list(value):
        """Comma separated values."""
        return value.split(",")


    class Arg(msgspec.Struct):
        help: str = ""
        choices: list | None = None
        aliases: list | None = None
        cli_name: str | None = None
        type_parser: Callable | None = None
        nargs: str | None = None
        required: bool | None = None
        action: object = None
        action_kwargs: dict | None = None
        const: object = None
        no_cli: bool = False


    class Demo(msgspec.Struct):
        model_path: A[str, Arg(help="Model.", aliases=["--model"])]
        mode: A[Literal["x", "y"], "Mode."] = "x"
        level: A[Optional[Literal[1, 2]], "Level."] = None
        workers: A[Optional[int], "Workers."] = None
        ids: A[Optional[List[int]], "Ids."] = None
        names: A[List[str], Arg(help="Names.", nargs="*")] = msgspec.field(default_factory=list)
        speed: A[str, Arg(help="Speed.", choices=MODES + ["auto"])] = "auto"
        flag: A[bool, "Flag."] = False
        tri: A[Optional[bool], Arg(help="Tri.", action=argparse.BooleanOptionalAction)] = None
        tp: A[int, Arg(help="TP.", cli_name="--tensor-parallel", aliases=["--tp"])] = 1
        items: A[Optional[List[str]], Arg(help="Items.", type_parser=comma_list)] = None
        hidden: A[bool, Arg(no_cli=True)] = False
        plain: Optional[str] = None
        big: A[int, "Big."] = 10 * 1000
    ''')


@pytest.fixture(scope="module")
def demo() -> dict[str, dict[str, Any]]:
    tree = extractor.SourceTree({"pkg/demo.py": SYNTHETIC})
    return extractor.records_for_class(tree, "pkg.demo", "Demo")


def test_synthetic_literal_choices(demo: dict[str, dict[str, Any]]) -> None:
    assert demo["mode"]["choices"] == ["x", "y"] and demo["mode"]["type"] == "str"
    assert demo["mode"]["default"] == "x"


def test_synthetic_optional_literal_infers_int(demo: dict[str, dict[str, Any]]) -> None:
    assert demo["level"]["choices"] == [1, 2] and demo["level"]["type"] == "int"


def test_synthetic_optional_scalar(demo: dict[str, dict[str, Any]]) -> None:
    assert (demo["workers"]["type"], demo["workers"]["nargs"], demo["workers"]["default"]) == ("int", None, None)


def test_synthetic_list_nargs(demo: dict[str, dict[str, Any]]) -> None:
    assert (demo["ids"]["nargs"], demo["ids"]["type"]) == ("+", "int")
    assert (demo["names"]["nargs"], demo["names"]["default"]) == ("*", [])


def test_synthetic_choices_expression(demo: dict[str, dict[str, Any]]) -> None:
    assert demo["speed"]["choices"] == ["fast", "slow", "auto"]
    assert demo["speed"]["choices_dynamic"] is False


def test_synthetic_bool_and_boolean_optional(demo: dict[str, dict[str, Any]]) -> None:
    assert (demo["flag"]["action"], demo["flag"]["nargs"], demo["flag"]["default"]) == ("store_true", 0, False)
    assert demo["tri"]["action"] == "BooleanOptionalAction"
    assert demo["tri"]["option_strings"] == ["--tri", "--no-tri"]


def test_synthetic_required_and_aliases(demo: dict[str, dict[str, Any]]) -> None:
    assert demo["model_path"]["required"] is True
    assert demo["model_path"]["option_strings"] == ["--model-path", "--model"]
    assert demo["mode"]["required"] is False


def test_synthetic_cli_name_keeps_field_dest(demo: dict[str, dict[str, Any]]) -> None:
    assert demo["tp"]["option_strings"] == ["--tensor-parallel", "--tp"]
    assert demo["tp"]["dest"] == "tp"


def test_synthetic_type_parser_disables_list_nargs(demo: dict[str, dict[str, Any]]) -> None:
    assert (demo["items"]["type"], demo["items"]["nargs"]) == ("comma_list", None)


def test_synthetic_skips_no_cli_and_unannotated(demo: dict[str, dict[str, Any]]) -> None:
    assert "hidden" not in demo and "plain" not in demo


def test_synthetic_arithmetic_default(demo: dict[str, dict[str, Any]]) -> None:
    assert demo["big"]["default"] == 10000


def test_synthetic_manual_registration_dynamic_choices() -> None:
    source = textwrap.dedent("""
        import os
        BASE = frozenset({"b", "a"})

        def _names():
            if os.environ.get("X"):
                return ["plugin"]
            return ["one", "two"]

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                backends = set(BASE)
                if os.environ.get("Y"):
                    backends.add("extra")
                parser.add_argument("--backend", type=str, choices=backends, default="a")
                parser.add_argument("--parser", choices=["auto"] + _names(), help=f"One of {_names()}.")
                parser.add_argument("--static", type=int, choices=[1, 2], default=1)
        """)
    tree = extractor.SourceTree({"pkg/srv.py": source})
    evaluator = extractor.Evaluator(tree)
    module = tree.module("pkg.srv")
    cls = evaluator.module_attr(module, "ServerArgs").node
    interpreter = extractor.CliInterpreter(evaluator, [], "ServerArgs")
    regs = interpreter.run(module, extractor.find_method(cls, "add_cli_args"), "parser")
    records = {r["dest"]: r for r in (extractor.argument_record(evaluator, reg) for reg in regs)}
    assert records["backend"]["choices"] == ["a", "b"] and records["backend"]["choices_dynamic"] is True
    assert records["parser"]["choices"] == ["auto", "one", "two"] and records["parser"]["choices_dynamic"] is True
    assert records["parser"]["help"] == "One of ['one', 'two']."
    assert records["static"]["choices_dynamic"] is False and records["static"]["type"] == "int"
