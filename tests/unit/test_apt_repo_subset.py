"""blackwell.sglang.apt_repo_subset: the closure of pinned packages in a flat apt repository, copied with its index."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from ansible_collections.blackwell.sglang.plugins.modules import apt_repo_subset as m


def _stanza(name: str, version: str, depends: str = "", filename: str | None = None, data: bytes | None = None) -> str:
    data = data if data is not None else f"{name} {version}".encode()
    fields = [f"Package: {name}", f"Version: {version}", "Architecture: amd64"]
    if depends:
        fields.append(f"Depends: {depends}")
    fields += [f"Filename: ./{filename or f'{name}_{version}_amd64.deb'}", f"Size: {len(data)}",
               f"SHA256: {hashlib.sha256(data).hexdigest()}"]
    return "\n".join(fields) + "\n"


REPO_PACKAGES = [
    ("nvidia-driver-cuda", "575.57.08-1", "nvidia-smi (>= 575.57.08), libcuda1 (>= 575.57.08), dkms"),
    ("nvidia-driver-cuda", "580.95.05-1", "nvidia-smi (>= 580.95.05), libcuda1 (>= 580.95.05), dkms"),
    ("nvidia-smi", "575.57.08-1", "libnvidia-ml1 (= 575.57.08-1)"),
    ("nvidia-smi", "580.95.05-1", "libnvidia-ml1 (= 580.95.05-1)"),
    ("libnvidia-ml1", "575.57.08-1", ""),
    ("libnvidia-ml1", "580.95.05-1", ""),
    ("libcuda1", "575.57.08-1", "libc6 (>= 2.34) | libc6-compat"),
    ("libcuda1", "580.95.05-1", ""),
    ("cuda-toolkit-12-9", "12.9.1-1", "cuda-nvcc-12-9 (>= 12.9.86), cuda-missing-12-9 | cuda-cudart-12-9"),
    ("cuda-nvcc-12-9", "12.9.86-1", ""),
    ("cuda-cudart-12-9", "12.9.79-1", ""),
]
DRIVER_PINS = ["nvidia-*=575.57.08-*", "libnvidia-*=575.57.08-*", "libcuda*=575.57.08-*"]


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    stanzas = []
    for name, version, depends in REPO_PACKAGES:
        data = f"{name} {version}".encode()
        (root / f"{name}_{version}_amd64.deb").write_bytes(data)
        stanzas.append(_stanza(name, version, depends, data=data))
    (root / "Packages").write_text("\n".join(stanzas), encoding="utf-8")
    (root / "InRelease").write_text("signed index\n", encoding="utf-8")
    (root / "repo-key.pub").write_text("key\n", encoding="utf-8")
    return root


def _index(repo: Path) -> dict:
    return m.parse_index((repo / "Packages").read_text(encoding="utf-8"))


def _names(stanzas: list[dict[str, str]]) -> dict[str, str]:
    return {s["Package"]: s["Version"] for s in stanzas}


def test_the_closure_follows_the_pin_as_apt_would(repo: Path) -> None:
    stanzas, external = m.resolve(_index(repo), ["nvidia-driver-cuda=575.57.08-*"], DRIVER_PINS)
    assert _names(stanzas) == {"nvidia-driver-cuda": "575.57.08-1", "nvidia-smi": "575.57.08-1",
                               "libnvidia-ml1": "575.57.08-1", "libcuda1": "575.57.08-1"}
    # Not in the repository: the distribution's, listed as the index writes them.
    assert external == ["dkms", "libc6 (>= 2.34) | libc6-compat"]


def test_without_a_pin_a_dependency_takes_its_highest_matching_version(repo: Path) -> None:
    stanzas, _ = m.resolve(_index(repo), ["nvidia-driver-cuda=575.57.08-*"])
    assert _names(stanzas)["libcuda1"] == "580.95.05-1"
    # An exact dependency (=) is kept whatever the highest is.
    stanzas, _ = m.resolve(_index(repo), ["nvidia-smi=575.57.08-*"])
    assert _names(stanzas) == {"nvidia-smi": "575.57.08-1", "libnvidia-ml1": "575.57.08-1"}


def test_an_alternative_the_repository_lacks_falls_to_the_next(repo: Path) -> None:
    stanzas, external = m.resolve(_index(repo), ["cuda-toolkit-12-9=12.9.1-*"])
    assert _names(stanzas) == {"cuda-toolkit-12-9": "12.9.1-1", "cuda-nvcc-12-9": "12.9.86-1",
                               "cuda-cudart-12-9": "12.9.79-1"}
    assert external == []


@pytest.mark.parametrize(("wanted", "message"), [
    (["nvidia-fabricmanager-575=575.57.08-*"], "nvidia-fabricmanager-575: not in the repository"),
    (["nvidia-driver-cuda=570.*"], "no version in the repository matches nvidia-driver-cuda=570.*"),
    (["nvidia-smi=580.95.05-*", "libnvidia-ml1=575.57.08-*"], "conflicts"),
])
def test_what_cannot_be_met_is_an_error(repo: Path, wanted: list[str], message: str) -> None:
    with pytest.raises(m.SubsetError, match=message):
        m.resolve(_index(repo), wanted, DRIVER_PINS)


def _params(repo: Path, dest: Path, packages: list[str]) -> dict:
    return {"repo_url": repo.as_uri() + "/", "key_url": (repo / "repo-key.pub").as_uri(), "packages": packages,
            "pins": DRIVER_PINS, "dest": str(dest), "timeout": 5}


def test_run_copies_the_index_unchanged_and_only_what_is_needed_then_changes_nothing(repo: Path, tmp_path: Path) -> None:
    dest = tmp_path / "bundle" / "apt" / "debian12" / "x86_64"
    params = _params(repo, dest, ["nvidia-driver-cuda=575.57.08-*"])
    assert m.run(params, check_mode=True)["changed"] is True
    assert not dest.exists(), "check mode writes nothing"
    result = m.run(params, check_mode=False)
    assert result["changed"] is True
    assert sorted(p.name for p in dest.iterdir()) == sorted([
        "InRelease", "Packages", "repo-key.pub", "libcuda1_575.57.08-1_amd64.deb", "libnvidia-ml1_575.57.08-1_amd64.deb",
        "nvidia-driver-cuda_575.57.08-1_amd64.deb", "nvidia-smi_575.57.08-1_amd64.deb"])
    assert (dest / "Packages").read_bytes() == (repo / "Packages").read_bytes()
    assert (dest / "InRelease").read_bytes() == (repo / "InRelease").read_bytes()
    assert m.run(params, check_mode=False)["changed"] is False
    assert m.run(params, check_mode=True)["changed"] is False


def test_a_download_that_does_not_match_the_index_is_refused(repo: Path, tmp_path: Path) -> None:
    (repo / "libnvidia-ml1_575.57.08-1_amd64.deb").write_bytes(b"tampered")
    with pytest.raises(m.SubsetError, match="libnvidia-ml1 575.57.08-1: the download does not match"):
        m.run(_params(repo, tmp_path / "out", ["nvidia-smi=575.57.08-*"]), check_mode=False)


def test_an_index_naming_a_file_outside_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    (repo / "Packages").write_text(_stanza("evil", "1.0-1", filename="../../etc/passwd"), encoding="utf-8")
    with pytest.raises(m.SubsetError, match="outside the repository"):
        m.run(_params(repo, tmp_path / "out", ["evil"]), check_mode=False)
