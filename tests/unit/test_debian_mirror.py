"""tests/fixtures/simhost/debian-mirror.sh: the simulated host's Debian mirror comes from the building machine's apt
sources (deb822 ``.sources`` and one-line ``.list``), not from a host name written in the repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tests/fixtures/simhost/debian-mirror.sh"

DEB822 = """\
Types: deb deb-src
# a comment
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def mirror(etc: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DEBIAN_MIRROR_APT_ETC=str(etc))
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    return tmp_path


def test_deb822_source_of_the_release(etc: Path) -> None:
    (etc / "sources.list.d/debian.sources").write_text(DEB822)
    result = mirror(etc)
    assert (result.returncode, result.stdout) == (0, "http://mirror.example/debian\n"), result.stderr


def test_another_release_from_the_same_mirror(etc: Path) -> None:
    (etc / "sources.list.d/debian.sources").write_text(DEB822)
    assert mirror(etc, "trixie").stdout == "http://mirror.example/debian\n"


def test_the_source_that_names_the_release_wins(etc: Path) -> None:
    (etc / "sources.list.d/debian.sources").write_text(DEB822)
    (etc / "sources.list.d/trixie.list").write_text("deb [arch=amd64 signed-by=/k.gpg] https://other.example/debian/ trixie main\n")
    assert mirror(etc, "trixie").stdout == "https://other.example/debian\n"
    assert mirror(etc, "bookworm").stdout == "http://mirror.example/debian\n"


def test_one_line_sources_list(etc: Path) -> None:
    (etc / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb file:///srv/local bookworm main\n"
        "deb http://mirror.example/debian bookworm main contrib\n"
    )
    assert mirror(etc).stdout == "http://mirror.example/debian\n"


def test_disabled_and_non_debian_sources_are_skipped(etc: Path) -> None:
    (etc / "sources.list.d/a.sources").write_text(
        "Types: deb\nURIs: http://disabled.example/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb\nURIs: http://ubuntu.example/ubuntu\nSuites: noble noble-updates\n"
    )
    result = mirror(etc)
    assert result.returncode == 1 and result.stdout == ""
    assert "set SIMHOST_MIRROR" in result.stderr


def test_no_sources_at_all(tmp_path: Path) -> None:
    result = mirror(tmp_path / "missing")
    assert result.returncode == 1
    assert "no http(s) Debian mirror for bookworm" in result.stderr
