"""The catalog of SGLang's own launch checks (tests/catalog/) and how each is accounted for.

``catalog-<version>.json`` is what ``tools/sglang_catalog.py`` extracts from the wheel (every raise and assert
of the argument handling); ``mapping-<version>.yml`` gives each entry exactly one of ``rule`` (a problem or rule
id of the validator), ``preflight`` or ``not_applicable``.

Every entry is accounted for: a ``missing`` entry (a user-reachable check no control-node rule refuses) or an
entry without a mapping fails here, so a new SGLang check nobody looked at cannot pass unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_rules
from tool_loader import load_tool

REPO = Path(__file__).resolve().parents[2]
VERSION = "0.5.23"
CATALOG = REPO / "tests" / "catalog" / f"catalog-{VERSION}.json"
MAPPING = REPO / "tests" / "catalog" / f"mapping-{VERSION}.yml"
IMPLICIT = REPO / "tests" / "catalog" / f"implicit-{VERSION}.yml"
KINDS = ("rule", "preflight", "not_applicable")
ACCOUNT_FOR_IT = (
    f"read the check in the wheel (make wheel) and map it in tests/catalog/mapping-{VERSION}.yml as one of: "
    "`rule: <id>` (write the rule in plugins/plugin_utils/sglang_rules/, citing SGLang's file:line, with "
    "conformance cases in tests/conformance/cases.yaml; docs/contributing-rules.md), `preflight: <why it needs "
    "config.json, the GPU or the host>`, or `not_applicable: <why no deployment of this project reaches it>`"
)


tool = load_tool("sglang_catalog")


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    return json.loads(CATALOG.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mapping() -> dict[str, dict[str, str]]:
    data = yaml.safe_load(MAPPING.read_text(encoding="utf-8"))
    assert data["sglang_version"] == VERSION
    return data["entries"]


def known_rule_ids() -> set[str]:
    """Every rule id the validator registers and every problem id it can report, as the registry declares them."""
    return sglang_rules.problem_ids()


def test_known_rule_ids_are_read() -> None:
    ids = known_rule_ids()
    assert {"spec.triple", "parallel.tp_attn_dp", "sm12x.attention", "numeric.max_running_requests"} <= ids
    assert not any("{" in i for i in ids)


def test_every_entry_is_mapped_and_only_those(catalog: dict[str, Any], mapping: dict[str, dict[str, str]]) -> None:
    ids = {e["id"] for e in catalog["entries"]}
    assert sorted(ids - set(mapping)) == [], f"catalog entries without a mapping (make catalog lists them): {ACCOUNT_FOR_IT}"
    assert sorted(set(mapping) - ids) == [], "mapped ids that are no longer in the catalog"


def test_each_mapping_is_one_kind_with_a_reason(mapping: dict[str, dict[str, str]]) -> None:
    bad = {i: m for i, m in mapping.items()
           if not isinstance(m, dict) or len(m) != 1 or next(iter(m)) not in (*KINDS, "missing")
           or not isinstance(next(iter(m.values())), str) or len(next(iter(m.values())).strip()) < 5}
    assert bad == {}


def test_rules_named_exist(mapping: dict[str, dict[str, str]]) -> None:
    known = known_rule_ids()
    unknown = {i: m["rule"] for i, m in mapping.items() if "rule" in m and m["rule"] not in known}
    assert unknown == {}


def test_no_check_is_missing(mapping: dict[str, dict[str, str]]) -> None:
    missing = sorted(i for i, m in mapping.items() if "missing" in m)
    assert missing == [], f"{len(missing)} SGLang checks mapped `missing`: {ACCOUNT_FOR_IT}"


def test_catalog_is_sorted_and_stable(catalog: dict[str, Any]) -> None:
    entries = catalog["entries"]
    assert entries == sorted(entries, key=lambda e: (e["file"], e["line"], e["id"]))
    assert len({e["id"] for e in entries}) == len(entries)
    assert catalog["sglang_version"] == VERSION
    assert CATALOG.read_text(encoding="utf-8") == tool.dumps(catalog)


def test_catalog_matches_the_wheel(catalog: dict[str, Any]) -> None:
    wheel = tool.find_wheel(VERSION, REPO / tool.DEFAULT_WHEEL_DIR)
    if wheel is None:
        pytest.skip(f"no sglang-{VERSION} wheel in {tool.DEFAULT_WHEEL_DIR} (make wheel)")
    assert tool.dumps(tool.catalog(wheel, VERSION, IMPLICIT)) == tool.dumps(catalog)


def test_implicit_sites_are_entries_of_their_own_kind(catalog: dict[str, Any]) -> None:
    """Each site of implicit-<version>.yml is a catalog entry of kind ``implicit`` at that line."""
    sites = tool.implicit_sites(IMPLICIT)
    implicit = {(e["file"], line) for e in catalog["entries"] if e["kind"] == "implicit"
                for line in range(e["line"], e["end_line"] + 1)}
    assert sites and all((path, line) in implicit for path, lines in sites.items() for line in lines)
    assert len([e for e in catalog["entries"] if e["kind"] == "implicit"]) == sum(len(v) for v in sites.values())


def test_incident_check_is_in_the_catalog_and_covered(catalog: dict[str, Any], mapping: dict[str, dict[str, str]]) -> None:
    """The project's founding incident: the EMPTY AssertionError of speculative_hook.py:1160."""
    [entry] = [e for e in catalog["entries"] if e["file"].endswith("speculative_hook.py") and e["line"] == 1160]
    assert entry["kind"] == "assert" and entry["message"] == ""
    assert mapping[entry["id"]] == {"rule": "spec.triple"}


def test_extraction_of_conditions_and_ordinals() -> None:
    source = (
        "def f(a, b):\n"
        "    if a > 1:\n"
        "        raise ValueError('big', a)\n"
        "    elif b:\n"
        "        assert a, f'need {a}'\n"
        "    else:\n"
        "        try:\n"
        "            g()\n"
        "        except KeyError:\n"
        "            raise\n"
        "class C:\n"
        "    def m(self):\n"
        "        def inner():\n"
        "            raise RuntimeError\n"
        "        assert self\n"
    )
    entries = tool.module_entries("pkg/mod.py", source)
    got = [(e.id, e.line, e.kind, e.exception, e.conditions, e.message) for e in entries]
    assert got == [
        ("pkg/mod.py:f:1", 3, "raise", "ValueError", ["a > 1"], "'big', a"),
        ("pkg/mod.py:f:2", 5, "assert", "AssertionError", ["not (a > 1)", "b", "a"], "f'need {a}'"),
        ("pkg/mod.py:f:3", 10, "raise", "<re-raise>", ["not (a > 1)", "not (b)", "except KeyError"], ""),
        ("pkg/mod.py:C.m.inner:1", 14, "raise", "RuntimeError", [], ""),
        ("pkg/mod.py:C.m:1", 15, "assert", "AssertionError", ["self"], ""),
    ]
    assert [e.id for e in tool.module_entries("pkg/mod.py", source, frozenset({"C"}))] == [
        "pkg/mod.py:C.m.inner:1", "pkg/mod.py:C.m:1"]


def test_extraction_of_line_ranges_reads_and_implicit_sites() -> None:
    source = (
        "def f(cfg, server_args):\n"
        "    backend = resolved_view(server_args).attention_backend\n"
        "    if cfg.page_size > 1 and backend != 'fa3' and envs.SGLANG_X.get():\n"
        "        raise ValueError(\n"
        "            'page size'\n"
        "        )\n"
        "    if cfg.topk > 1:\n"
        "        pass\n"
        "    assert get_bool_env_var('SGL_Y') or cfg.tp_size\n"
    )
    [first, implicit, second] = tool.module_entries("pkg/mod.py", source, implicit={7: "TypeError"})
    assert (first.line, first.end_line, first.kind) == (4, 6, "raise")
    assert first.reads == ["arg:attention_backend", "arg:page_size", "env:SGLANG_X"]
    assert (implicit.id, implicit.kind, implicit.exception, implicit.line) == (
        "pkg/mod.py:f:implicit-1", "implicit", "TypeError", 7)
    assert implicit.conditions == ["at: cfg.topk > 1"] and implicit.reads == ["arg:topk"]
    assert second.reads == ["arg:tp_size", "env:SGL_Y"]
    with pytest.raises(ValueError, match="implicit failure sites"):
        tool.module_entries("pkg/mod.py", source, implicit={1: "KeyError"})


def test_scope_and_diff() -> None:
    assert tool.in_scope("sglang/srt/arg_groups/model_overrides/qwen3_5.py") is None
    assert tool.in_scope("sglang/srt/model_loader/loader.py") == frozenset({"_get_quantization_config"})
    assert tool.in_scope("sglang/srt/models/llama.py") is False
    assert tool.report_diff({"a", "b"}, {"b", "c"}) == ["new (not mapped): a", "removed (mapped, no longer in the wheel): c"]
