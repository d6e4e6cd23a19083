# SPDX-License-Identifier: Apache-2.0
"""The rule registry: every rule is a function registered with its data, which the validator runs in order.

A rule declares, on its decorator, what is data rather than code:

* ``rule_id``: the rule's own id (``Rule.rule_id``), and ``ids``: every problem id it can report (the rule id
  itself when it reports under it). ``{family}`` in an id stands for each hardware profile's family (sm90, sm12x...).
* ``sources``: the SGLang checks it mirrors, as ``file:line`` of the release it was written against, or, for a
  rule SGLang has no check for, ``stricter``: why the project refuses what SGLang lets through (or fails late on).
* ``since`` / ``until``: the SGLang releases it holds for (PEP 440, ``since`` <= version < ``until``).
* ``file``: the SGLang file its ``report.refuse(..., line)`` calls cite by line.
* ``shared``: the id is also registered by another function (which runs at another point of the order).

The rule function gets the validation context and a :class:`Report` bound to its rule: ``report.refuse`` records
SGLang's own refusal with the rule's id and its file; ``report.of(problem_id)`` reports under another declared id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import model_after_overrides
from packaging.version import Version

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context

RuleFn = Callable[..., None]
FIRST = "0.5.20"  # the first release the rules are written for


@dataclass(frozen=True)
class Rule:
    """A rule and the SGLang versions it applies to (inclusive lower bound, exclusive upper)."""

    rule_id: str
    fn: RuleFn
    since: Version = Version(FIRST)
    until: Version | None = None
    ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    stricter: str = ""
    file: str = ""
    shared: bool = False

    def applies(self, version: Version) -> bool:
        """True when this rule holds for ``version``."""
        return version >= self.since and (self.until is None or version < self.until)

    @property
    def name(self) -> str:
        """module.function, as the run order names it."""
        return f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.fn.__name__}"

    @property
    def problem_ids(self) -> tuple[str, ...]:
        """Every problem id the rule may report: its declared ids, else its own id."""
        return self.ids or (self.rule_id,)


RULES: list[Rule] = []

# Problem ids the validator reports itself, outside the rules (sglang_validate: each argument's type and choices
# against the schema, the rendered command line, the declared hardware); the catalog's mapping names them too.
VALIDATOR_IDS: dict[str, str] = {
    "schema.type": "an argument's value against the schema's type and nargs",
    "schema.choices": "an argument's value against the schema's choices",
    "input.argv": "a value the launch command cannot carry",
    "host.hardware": "the declared GPU count, compute capability and memory",
}


def rule(rule_id: str, *, since: str = FIRST, until: str | None = None, ids: tuple[str, ...] = (),
         sources: tuple[str, ...] = (), stricter: str = "", file: str = "", shared: bool = False) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn(ctx, report)`` as a rule for the SGLang releases ``since`` <= version < ``until`` (PEP 440:
    0.5.24rc1 < 0.5.24), with the problem ids it reports and the SGLang sources it mirrors."""

    def wrap(fn: RuleFn) -> RuleFn:
        RULES.append(Rule(rule_id, fn, Version(since), Version(until) if until else None, tuple(ids), tuple(sources),
                          stricter, file, shared))
        return fn

    return wrap


class Report:
    """The problem recorder of one rule: ``ctx.error`` / ``ctx.warn`` bound to the rule's problem id and its file."""

    def __init__(self, ctx: Context, item: Rule, problem_id: str | None = None) -> None:
        self.ctx, self.rule = ctx, item
        self.problem_id = problem_id or item.rule_id

    def of(self, problem_id: str) -> Report:
        """The same rule reporting under another of its declared ids."""
        if problem_id not in self.rule.problem_ids:
            raise ValueError(f"rule {self.rule.rule_id} reports {problem_id}, which it does not declare in ids=")
        return Report(self.ctx, self.rule, problem_id)

    def source(self, at: int | str) -> str:
        """``file:line`` for a line of the rule's ``file``; ``at`` itself (a whole source) when it has none."""
        return f"{self.rule.file}:{at}" if self.rule.file else str(at)

    def error(self, dest: str, message: str, fix: str, source: str | None = None, value: Any = None) -> None:
        """An error under the bound problem id."""
        self.ctx.error(self.problem_id, dest, message, fix, source, value)

    def warn(self, dest: str, message: str, fix: str, source: str | None = None, value: Any = None) -> None:
        """A warning under the bound problem id."""
        self.ctx.warn(self.problem_id, dest, message, fix, source, value)

    def refuse(self, dest: str, message: str, fix: str, at: int | str) -> None:
        """SGLang's own refusal of the launch, at line ``at`` of the rule's file (or the source ``at``)."""
        self.ctx.error(self.problem_id, dest, message + " SGLang refuses the launch.", fix, self.source(at))


def run_rules(ctx: Context) -> None:
    """Apply every rule that holds for the context's SGLang version, in registration order, to the model as SGLang
    sees it (base.model_after_overrides: the architecture after json_model_override_args, published once here)."""
    ctx.model = model_after_overrides(ctx)
    for item in RULES:
        if item.applies(ctx.version):
            item.fn(ctx, Report(ctx, item))


_T = TypeVar("_T")


def added_in(ctx: Context, version: str) -> bool:
    """A check's own lower bound inside a rule (a table entry SGLang added after the rule's ``since=``): True when
    the context's SGLang release has it, ``version`` <= release, compared as Rule.applies compares."""
    return ctx.version >= Version(version)


def release_line(ctx: Context, lines: Mapping[str, _T]) -> _T:
    """What a check cites for the context's release out of ``lines`` ({first release: its line}): the entry of the
    newest release the context has (added_in), the oldest entry for a release before all of them. Any per-release
    value reads the same way (a table of keys, a tuple of lines)."""
    ordered = sorted(lines.items(), key=lambda item: Version(item[0]), reverse=True)
    return next((line for version, line in ordered if added_in(ctx, version)), ordered[-1][1])
