"""The rule registry (plugins/plugin_utils/sglang_rules/registry.py) holds what each rule declares, and it holds up.

Each rule declares its id and the problem ids it reports, the SGLang checks it mirrors (file:line) or why it is
stricter than SGLang, and the releases it holds for; the catalog test (test_sglang_catalog.py) reads the ids from
here.  docs/contributing-rules.md says how to add a rule.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_rules
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import RULES, VALIDATOR_IDS, Rule
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/sglang_rules"
# An SGLang source: a file of the wheel, with line(s) where the check is (a file alone where lines vary per case),
# maybe a note on the releases: sglang/srt/arg_groups/speculative_hook.py:296-300 (0.5.22; 0.5.21 :273-277).
SOURCE = re.compile(r"^sglang/[A-Za-z0-9_/]+\.py(:\d[\d\-]*)?( \(.+\))?$")
ID = re.compile(r"^(\{family\}|[a-z0-9_]+)(\.[a-z0-9_]+)*$")


def test_every_rule_is_registered_once_in_the_run_order() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)), "a function registered twice"
    assert names == list(sglang_rules.ORDER), "RULES runs in ORDER (sglang_rules/__init__.py)"
    assert len(RULES) >= 50


def test_an_id_is_one_function_or_declared_shared() -> None:
    by_id: dict[str, list[Rule]] = defaultdict(list)
    for item in RULES:
        by_id[item.rule_id].append(item)
    for rule_id, items in by_id.items():
        if len(items) > 1:
            assert all(i.shared for i in items), f"{rule_id} is registered by {[i.name for i in items]}: declare shared=True"
        else:
            assert not items[0].shared, f"{rule_id} is declared shared but only {items[0].name} registers it"


def test_every_rule_cites_sglang_or_says_why_it_is_stricter() -> None:
    for item in RULES:
        assert item.sources or item.stricter, f"{item.name}: declare sources=(file:line...) or stricter='why'"
        for source in item.sources:
            assert SOURCE.match(source), f"{item.name}: {source!r} is not sglang/...py:LINE"
        if item.stricter:
            assert len(item.stricter) > 20, f"{item.name}: say why it is stricter than SGLang"
        if item.file:
            assert re.match(r"^sglang/[A-Za-z0-9_/]+\.py$", item.file), f"{item.name}: file= is a file without a line"


def test_version_ranges_parse_and_are_ordered() -> None:
    for item in RULES:
        assert isinstance(item.since, Version) and Version(str(item.since)) == item.since
        assert item.until is None or item.since < item.until, f"{item.name}: since {item.since} >= until {item.until}"
    assert min(r.since for r in RULES) == Version("0.5.20")


def test_declared_ids_are_well_formed() -> None:
    for item in RULES:
        assert ID.match(item.rule_id), item.rule_id
        assert len(item.problem_ids) == len(set(item.problem_ids)), item.name
        for pid in item.problem_ids:
            assert ID.match(pid), f"{item.name}: {pid!r}"


def _reported_ids(fn: ast.FunctionDef, helpers: dict[str, ast.FunctionDef], seen: set[str]) -> set[str]:
    """The literal problem ids a function (and the helpers of its module it calls) reports through ctx or report."""
    seen.add(fn.name)
    ids: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func in ("ctx.error", "ctx.warn") and node.args:
            first = node.args[0]
            options = [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]
            for arg in options:
                if isinstance(arg, ast.Constant):
                    ids.add(arg.value)
                elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[-1], ast.Constant):
                    head = arg.values[0]
                    ids.add("{family}" + arg.values[-1].value if isinstance(head, ast.FormattedValue) else "numeric.*")
        elif func.startswith("report.of(") and isinstance(node.func, ast.Attribute):
            ids.add(node.func.value.args[0].value)  # type: ignore[attr-defined]
        elif isinstance(node.func, ast.Name) and node.func.id in helpers and node.func.id not in seen:
            ids |= _reported_ids(helpers[node.func.id], helpers, seen)
    return ids


@pytest.mark.parametrize("item", RULES, ids=lambda r: r.name)
def test_a_rule_reports_only_ids_it_declares(item: Rule) -> None:
    module = inspect.getmodule(item.fn)
    tree = ast.parse(textwrap.dedent(inspect.getsource(module)))
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    reported = _reported_ids(helpers[item.fn.__name__], helpers, set())
    declared = set(item.problem_ids)
    if "numeric.*" in reported:
        reported.discard("numeric.*")
        assert any(p.startswith("numeric.") for p in declared)
    assert reported <= declared, f"{item.name} reports {sorted(reported - declared)} without declaring them in ids="


def test_the_validators_own_ids_are_reported_by_it() -> None:
    validate = (PACKAGE.parent / "sglang_validate.py").read_text(encoding="utf-8")
    for pid in VALIDATOR_IDS:
        assert f'"{pid}"' in validate, f"VALIDATOR_IDS names {pid}, which sglang_validate.py no longer reports"


def test_problem_ids_expand_the_families() -> None:
    ids = sglang_rules.problem_ids()
    families = {p.family for p in sglang_rules.PROFILES.values()}
    assert {f"{fam}.attention" for fam in families} <= ids
    assert {"schema.type", "spec.triple", "server.lora", "numeric.cuda_graph_max_bs_prefill"} <= ids
    assert not any("{" in i for i in ids)


def test_rules_modules_are_the_package() -> None:
    """Every module of the package is imported by it (a rule in a module nobody imports would never run)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    registered = {r.fn.__module__.rsplit(".", 1)[-1] for r in RULES}
    assert registered <= modules
    assert modules - registered == {"base", "profiles", "registry", "resolve"}
