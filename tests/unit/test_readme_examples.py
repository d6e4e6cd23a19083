"""Every role works alone (issue 13): its README example applies it alone, and nothing ties it to another role.

The examples themselves run against a simulated host in molecule/standalone, which takes them from the
READMEs with the same code (molecule/standalone/readme_examples.py). These checks need no container.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
TOPIC = "sglang server restart"
COMMON = "sglang_common"

_spec = importlib.util.spec_from_file_location("readme_examples", REPO / "molecule" / "standalone" / "readme_examples.py")
assert _spec and _spec.loader
readme_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_examples)

ALL_ROLES = readme_examples.roles(REPO)
PLAYED = [r for r in ALL_ROLES if r not in readme_examples.NO_EXAMPLE_RUN]


def _yaml_files(role: str) -> list[Path]:
    return sorted(p for p in (ROLES / role).rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml", ".j2"))


def _names(path: Path) -> set[str]:
    return set(re.findall(r"\b__[a-z][a-z0-9_]*", path.read_text()))


def _private_names(role: str) -> set[str]:
    """The __<role>_* names roles/<role> itself uses (set, registered or read)."""
    return {n for p in _yaml_files(role) for n in _names(p) if n.startswith(f"__{role}_")}


def _tasks(node: object):
    """Every task mapping of a task list, blocks included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            if key in node:
                yield from _tasks(node[key])


def _dependencies(role: str) -> list[str]:
    meta = yaml.safe_load((ROLES / role / "meta" / "main.yml").read_text()) or {}
    return [d if isinstance(d, str) else d.get("role", d.get("name")) for d in meta.get("dependencies") or []]


def test_every_role_has_a_place_in_the_standalone_run() -> None:
    missing = sorted(set(PLAYED) - set(readme_examples.RUN_ORDER))
    assert not missing, (
        f"roles {missing} have no place in molecule/standalone/readme_examples.py RUN_ORDER: their README's "
        "'## Example playbook' is not run alone (add the role there, in an order where it needs no other role's work)"
    )
    assert not set(readme_examples.RUN_ORDER) - set(PLAYED)
    assert COMMON in ALL_ROLES


@pytest.mark.parametrize("role", PLAYED)
def test_readme_example_applies_the_role_alone(role: str) -> None:
    text = readme_examples.example(role, REPO)
    plays = yaml.safe_load(text)
    assert isinstance(plays, list) and plays, f"roles/{role}/README.md: the example is not a playbook"
    applied: list[str] = []
    for play in plays:
        assert "import_playbook" not in play and "ansible.builtin.import_playbook" not in play
        assert "hosts" in play, f"roles/{role}/README.md: a play without hosts"
        # A play of its own: no handler the role would need from elsewhere.
        assert "handlers" not in play, f"roles/{role}/README.md: the example brings its own handlers"
        for entry in play.get("roles") or []:
            applied.append(entry if isinstance(entry, str) else entry.get("role", entry.get("name")))
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in _tasks(play.get(section) or []):
                for key in ("include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role"):
                    if key in task:
                        applied.append(task[key]["name"])
    assert applied and set(applied) == {role}, f"roles/{role}/README.md: the example applies {applied}, not {role} alone"


def test_common_role_owns_the_restart_topic() -> None:
    handlers = yaml.safe_load((ROLES / COMMON / "handlers" / "main.yml").read_text())
    listening = [h for h in handlers if h.get("listen") == TOPIC]
    assert len(listening) == 1
    assert listening[0]["ansible.builtin.set_fact"] == {"sglang_common_restart_pending": True}
    # As a dependency it runs nothing: no tasks/main.yml.
    main = ROLES / COMMON / "tasks" / "main.yml"
    assert not main.exists() or not yaml.safe_load(main.read_text())
    for role in ALL_ROLES:
        if role == COMMON:
            continue
        handler_file = ROLES / role / "handlers" / "main.yml"
        if handler_file.exists():
            names = [(h.get("name"), h.get("listen")) for h in yaml.safe_load(handler_file.read_text()) or []]
            assert all(TOPIC not in (name, listen) for name, listen in names), f"roles/{role} defines a {TOPIC!r} handler"


@pytest.mark.parametrize("role", [r for r in ALL_ROLES if r != COMMON])
def test_a_role_that_notifies_the_topic_depends_on_the_common_role(role: str) -> None:
    notifies = False
    for path in _yaml_files(role):
        if path.suffix == ".j2" or "tasks" not in path.parts:
            continue
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            notify = task.get("notify")
            if notify == TOPIC or (isinstance(notify, list) and TOPIC in notify):
                notifies = True
    if notifies:
        assert COMMON in _dependencies(role), f"roles/{role} notifies {TOPIC!r} without the dependency {COMMON}"


@pytest.mark.parametrize("role", ALL_ROLES)
def test_a_role_reads_no_private_variable_of_another_role(role: str) -> None:
    """`__<role>_*` used in roles/<role> is private to it (the restart link is the public sglang_common_restart_pending)."""
    owners = sorted(ALL_ROLES, key=len, reverse=True)
    used = {r: _private_names(r) for r in ALL_ROLES}
    shared: dict[str, set[str]] = {}
    problems = []
    for path in _yaml_files(role):
        for name in sorted(_names(path)):
            owner = next((o for o in owners if name.startswith(f"__{o}_")), None)
            if owner is None or owner == role or role in shared.get(name, set()) or name not in used[owner]:
                continue
            problems.append(f"{path.relative_to(REPO)}: {name} (private to roles/{owner})")
    assert not problems, "\n".join(problems)
