"""The README is a way in, and every link of it and of docs/ leads somewhere (issue 33).

The README stays short (at most 300 lines: what it is, quick start, from the sample to your hosts, the host variables,
the playbooks, upgrading SGLang, troubleshooting) and indexes every page of docs/. Every relative link of README.md and
docs/*.md points at a file of the repository, and every ``#anchor`` at a heading of its target (GitHub's slugs), so a
section moved between pages leaves no dead link behind.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]

_FENCE = re.compile(r"^(```|~~~)")
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked out (a link there is not a link)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            lines.append(line)
    return lines


def _links_in(text: str) -> list[str]:
    targets = []
    for line in _prose(text):
        # A link's text may hold code (`[`x`](y)`): blank code spans only outside the link's target.
        stripped = _CODE.sub(lambda m: "`" + "x" * (len(m.group(0)) - 2) + "`", line)
        targets += [line[m.start(1):m.end(1)] for m in _LINK.finditer(stripped)]
    return targets


def _links(page: Path) -> list[str]:
    return _links_in(page.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation but '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in _prose(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines: move the detail to a page of docs/ and link it"


@pytest.mark.parametrize("section", ["Quick start", "From the sample to your hosts", "Host variables", "Playbooks",
                                     "Upgrading SGLang", "Troubleshooting", "Documentation"])
def test_the_readme_has_its_sections(section: str) -> None:
    assert f"\n## {section}\n" in README.read_text(encoding="utf-8")


def test_the_readme_indexes_every_page_of_docs() -> None:
    index = README.read_text(encoding="utf-8").split("\n## Documentation\n", 1)[1]
    missing = [p.name for p in DOCS if f"(docs/{p.name})" not in index]
    assert not missing, f"README's Documentation index lists no link to docs/{missing}"


def test_the_readme_lists_every_playbook() -> None:
    section = README.read_text(encoding="utf-8").split("\n## Playbooks\n", 1)[1].split("\n## ", 1)[0]
    missing = [p.name for p in sorted((REPO / "playbooks").glob("*.yml")) if f"(playbooks/{p.name})" not in section]
    assert not missing, f"README's Playbooks table has no line for {missing}"


def _cases() -> list[tuple[str, str]]:
    return [(str(page.relative_to(REPO)), target) for page in PAGES for target in _links(page)]


@pytest.mark.parametrize(("page", "target"), _cases())
def test_every_relative_link_resolves(page: str, target: str) -> None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... are not checked here
        return
    path, _, anchor = target.partition("#")
    source = REPO / page
    file = (source.parent / unquote(path)).resolve() if path else source
    assert file.is_relative_to(REPO), f"{page}: {target} leaves the repository"
    assert file.exists(), f"{page}: {target} points at {file.relative_to(REPO)}, which does not exist"
    if anchor:
        assert file.suffix == ".md" and file.is_file(), f"{page}: {target}: an anchor into something not a Markdown file"
        assert anchor in anchors(file), (f"{page}: {target}: {file.relative_to(REPO)} has no heading #{anchor} "
                                         f"(has: {sorted(anchors(file))})")


def test_the_links_are_found() -> None:
    """The link parser sees links, also those whose text is code, and skips code spans and blocks."""
    assert _links(README)
    assert _links_in("[a](x.md) `[b](y.md)` [`c`](z.md#h)\n```\n[d](w.md)\n```\n    [e](v.md)\n") == ["x.md", "z.md#h"]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Upgrading SGLang", "upgrading-sglang"),
    ("The serving benchmark (`playbooks/bench.yml`)", "the-serving-benchmark-playbooksbenchyml"),
    ("A new release: schema, diff and rules", "a-new-release-schema-diff-and-rules"),
    ("The catalog of SGLang's own checks", "the-catalog-of-sglangs-own-checks"),
    ("Why restart.yml is not within 5 s", "why-restartyml-is-not-within-5-s"),
    ("AWX / Ansible Automation Platform", "awx--ansible-automation-platform"),
])
def test_slugs_are_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
