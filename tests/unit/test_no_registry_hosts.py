"""No package-registry host name anywhere in the repository (a project rule).

Every package source is a variable whose empty default means "the tool's own default" (pip/uv's index, the
Hugging Face client's hub, no NVIDIA apt repository), and the simulated host takes its Debian mirror from the
building machine's apt sources: a host name written here would pin a site to one registry, and an offline site
would find out only at install time. Links to a project's home page on a code host are fine; registries are not,
in code or in documentation.

The names are assembled from parts so that this file does not name them itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _host(*labels: str) -> str:
    return ".".join(labels)


# Registries of packages, images, models and collections. A name matches with any subdomain
# (e.g. the index's test instance), never as part of a longer label.
REGISTRY_HOSTS = (
    _host("pypi", "org"),
    _host("pypi", "python", "org"),
    _host("files", "pythonhosted", "org"),
    _host("download", "pytorch", "org"),
    _host("deb", "debian", "org"),
    _host("security", "debian", "org"),
    _host("ftp", "debian", "org"),
    _host("archive", "ubuntu", "com"),
    _host("security", "ubuntu", "com"),
    _host("ports", "ubuntu", "com"),
    _host("download", "nvidia", "com"),
    _host("nvcr", "io"),
    _host("huggingface", "co"),
    _host("hf", "co"),
    _host("ghcr", "io"),
    _host("quay", "io"),
    _host("gcr", "io"),
    _host("galaxy", "ansible", "com"),
    _host("registry", "npmjs", "org"),
    _host("proxy", "golang", "org"),
    _host("crates", "io"),
    _host("conda", "anaconda", "org"),
    _host("repo", "anaconda", "com"),
)
# Docker's registry: its bare name is also Debian's package of the Docker engine (`apt-get install` of it is fine),
# so it counts as a host only with a subdomain, in a URL or in an image reference (name/...).
DOCKER = _host("docker", "io")

_SUB = r"(?:[a-z0-9-]+\.)*"
PATTERNS = [re.compile(rf"(?<![\w.-]){_SUB}{re.escape(h)}(?![\w-])", re.IGNORECASE) for h in REGISTRY_HOSTS] + [
    re.compile(rf"(?<![\w.-])(?:[a-z0-9-]+\.)+{re.escape(DOCKER)}(?![\w-])", re.IGNORECASE),
    re.compile(rf"(?:(?<=//)|(?<=@)){re.escape(DOCKER)}(?![\w-])", re.IGNORECASE),
    re.compile(rf"(?<![\w.-]){re.escape(DOCKER)}(?=[/:]\w)", re.IGNORECASE),
]
# Every pattern above matches one of these names (case-insensitively) or nothing: a text without any of them needs
# no line-by-line scan, which costs seconds on the large schema, catalog and lock files.
_NAMES = (*REGISTRY_HOSTS, DOCKER)
_ANY_NAME = re.compile("|".join(re.escape(h) for h in _NAMES), re.IGNORECASE)


def may_mention(text: str) -> bool:
    """False only when no pattern can match in ``text``: it holds none of the names, in any case.

    An ASCII text is lower-cased and searched for each name as a plain string; any other goes through one regular
    expression of all the names with the patterns' own flag, whose case folding also pairs some non-ASCII letters
    with ASCII ones.
    """
    if text.isascii():
        lower = text.lower()
        return any(h in lower for h in _NAMES)
    return _ANY_NAME.search(text) is not None


def repository_files() -> list[str]:
    """Tracked files and new ones git does not ignore (what a commit would carry)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO, check=True, capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git work tree")
    return sorted({f for f in out.decode().split("\0") if f})


def registry_mentions(text: str) -> list[tuple[int, str]]:
    """(line number, matched host) of every registry host name in ``text``."""
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in PATTERNS:
            hits.extend((number, m.group(0)) for m in pattern.finditer(line))
    return hits


def test_no_file_names_a_package_registry() -> None:
    found = []
    for name in repository_files():
        path = REPO / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if may_mention(text):
            found.extend(f"{name}:{number}: {host}" for number, host in registry_mentions(text))
    assert not found, "package-registry host names (make them a variable, empty = the tool's default):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "index_url: https://" + _host("pypi", "org") + "/simple",
        "--extra-index-url https://" + _host("download", "pytorch", "org") + "/whl/cu130",
        "HF_ENDPOINT=https://" + _host("huggingface", "co"),
        "pip download from " + _host("test", "pypi", "org"),
        "FROM " + DOCKER + "/library/debian:bookworm",
        "https://registry-1." + DOCKER + "/v2/",
        "http://" + _host("deb", "debian", "org") + "/debian bookworm main",
        "Mirror: " + _host("us", "archive", "ubuntu", "com"),
    ],
)
def test_the_scan_finds_registry_hosts(line: str) -> None:
    assert registry_mentions(line), line
    assert may_mention(line), line
    assert may_mention(line.upper()), line
    # The patterns' case folding pairs the Kelvin sign with k, the long s with s, the dotless i with i: the quick
    # check must not skip a text that the patterns would flag.
    odd = line.replace("k", "\u212a").replace("s", "\u017f").replace("i", "\u0131")
    assert bool(registry_mentions(odd)) <= may_mention(odd), odd


@pytest.mark.parametrize(
    "line",
    [
        "apt-get install -y " + DOCKER + " debootstrap",
        "PKGS=(" + DOCKER + " debootstrap)",
        "https://github.com/sgl-project/sglang",
        "sglang/srt/layers/attention/attention_registry.py",
        "http://127.0.0.1:8080/cuda/repos",
        "see " + _host("docs", "ansible", "com"),
        "a" + _host("pypi", "org") + "x",
    ],
)
def test_the_scan_leaves_other_names(line: str) -> None:
    assert not registry_mentions(line), line
