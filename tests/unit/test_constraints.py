"""constraints.txt pins the control-node virtualenv's other packages (tools/constraints.py, `make venv`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import constraints  # noqa: E402


def test_this_virtualenv_is_the_one_constraints_txt_describes() -> None:
    """The tests run in `make venv`'s virtualenv: every package requirements.txt pulls in is pinned, at the installed
    version, and nothing else is (a requirements.txt change without `make constraints` fails here)."""
    problems = constraints.differences(constraints.REQUIREMENTS.read_text(encoding="utf-8"),
                                       constraints.CONSTRAINTS.read_text(encoding="utf-8"))
    assert problems == [], "\n".join(problems) + "\nrun `make constraints` (tools/constraints.py --write)"


def test_the_file_is_what_the_tool_writes() -> None:
    assert constraints.CONSTRAINTS.read_text(encoding="utf-8") == constraints.render(
        constraints.REQUIREMENTS.read_text(encoding="utf-8"))


def test_make_venv_installs_under_the_constraints() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "$(BIN)/.stamp: requirements.txt constraints.txt" in makefile
    assert "pip install --quiet -r requirements.txt -c constraints.txt" in makefile


@pytest.mark.parametrize("line", ["cryptography>=51", "cryptography", "foo @ https://example.invalid/foo.whl",
                                  'tomli==2.0.1; python_version < "3.11"', "a==1,!=2"])
def test_only_exact_pins_are_read(line: str) -> None:
    with pytest.raises(ValueError, match="line 2"):
        constraints.pinned(f"# header\n{line}\n")


def test_a_package_pinned_in_both_files_is_named() -> None:
    requirements = "ansible-core==2.19.14\n"
    problems = constraints.differences(requirements, "Ansible_Core==2.19.14\n")
    assert any("Ansible_Core is pinned in both files" in p for p in problems)


def test_a_missing_and_a_stale_pin_are_named() -> None:
    requirements = constraints.REQUIREMENTS.read_text(encoding="utf-8")
    written = constraints.pinned(constraints.CONSTRAINTS.read_text(encoding="utf-8"))
    (name, version), *_ = sorted(written.values())
    rest = "".join(f"{n}=={v}\n" for n, v in sorted(written.values())[1:])
    assert any(p.startswith(f"{name.lower()}=={version} is installed") for p in constraints.differences(requirements, rest))
    stale = rest + f"{name}==0.0.0.dev0\n"
    assert f"{name.lower()} is {version} here but constraints.txt pins 0.0.0.dev0" in constraints.differences(requirements, stale)
    extra = constraints.CONSTRAINTS.read_text(encoding="utf-8") + "left-over-package==1.0\n"
    assert "left-over-package is pinned but nothing in requirements.txt needs it here" in constraints.differences(requirements, extra)
