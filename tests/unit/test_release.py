# SPDX-License-Identifier: Apache-2.0
"""tools/release.py (``make release VERSION=X.Y.Z``, ``make changelog``): fragments never fold into a released version.

Everything runs on temporary copies: the collection's changelog configuration with a released 0.1.0, and a small
repository (a role, a playbook, docs, a sample inventory) for the staged release that antsibull-changelog runs on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from tool_loader import load_tool

release = load_tool("release")

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
FIX = "---\nbugfixes:\n  - validate - a fix.\n"
FEATURE = "---\nminor_changes:\n  - validate - a feature.\n"


def collection_copy(where: Path, notes: dict[str, str]) -> Path:
    """galaxy.yml at 0.1.0, the changelog configuration with 0.1.0 released, and ``notes`` as fragments."""
    coll = where / "ansible_collections" / "blackwell" / "sglang"
    (coll / "changelogs" / "fragments").mkdir(parents=True)
    galaxy = (COLLECTION / "galaxy.yml").read_text(encoding="utf-8")
    (coll / "galaxy.yml").write_text(release.re.sub(r"(?m)^version: .*$", "version: 0.1.0", galaxy), encoding="utf-8")
    shutil.copyfile(COLLECTION / "changelogs" / "config.yaml", coll / "changelogs" / "config.yaml")
    changelog = {"ancestor": None, "releases": {"0.1.0": {
        "changes": {"release_summary": "First release.", "minor_changes": ["validate - first."]},
        "fragments": ["0.1.0.yml"], "release_date": "2026-12-01",
        "objects": {"playbook": [{"name": "validate", "description": "Validate.", "namespace": None}]}}}}
    (coll / "changelogs" / "changelog.yaml").write_text(yaml.safe_dump(changelog), encoding="utf-8")
    (coll / "README.md").write_text("# blackwell.sglang\n", encoding="utf-8")
    (coll / "meta").mkdir()
    (coll / "meta" / "runtime.yml").write_text("---\nrequires_ansible: '>=2.17.0'\n", encoding="utf-8")
    for name, text in notes.items():
        (coll / "changelogs" / "fragments" / name).write_text(text, encoding="utf-8")
    return coll


def snapshot(coll: Path) -> dict[str, str]:
    return {str(p.relative_to(coll)): p.read_text(encoding="utf-8") for p in sorted(coll.rglob("*")) if p.is_file()}


def test_make_changelog_refuses_to_fold_fragments_into_the_released_version(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    coll = collection_copy(tmp_path, {"feature.yml": FEATURE, "fix.yml": FIX})
    before = snapshot(coll)
    assert release.main(["--changelog", "--collection", str(coll)]) == 2
    err = capsys.readouterr().err
    assert "0.1.0 is released already" in err
    assert "feature.yml, fix.yml" in err
    assert "make release VERSION=0.2.0" in err  # a new feature: the next minor version
    assert snapshot(coll) == before


def test_the_next_version_is_a_patch_for_fixes_only(tmp_path: Path) -> None:
    coll = collection_copy(tmp_path, {"fix.yml": FIX})
    with pytest.raises(release.Refused, match=r"make release VERSION=0\.1\.1"):
        release.check(coll, "0.1.0")


@pytest.mark.parametrize(("version", "why"), [
    ("0.1.0", "released already"),
    ("0.0.9", "not above the released 0.1.0"),
    ("0.2", "is not X.Y.Z"),
    ("v0.2.0", "is not X.Y.Z"),
])
def test_make_release_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, why: str) -> None:
    coll = collection_copy(tmp_path, {"feature.yml": FEATURE})
    before = snapshot(coll)
    assert release.main([version, "--collection", str(coll)]) == 2
    assert why in capsys.readouterr().err
    assert snapshot(coll) == before


def test_make_release_refuses_without_fragments(tmp_path: Path) -> None:
    coll = collection_copy(tmp_path, {})
    with pytest.raises(release.Refused, match="nothing to release"):
        release.check(coll, "0.2.0")


def test_check_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    coll = collection_copy(tmp_path, {"feature.yml": FEATURE})
    before = snapshot(coll)
    assert release.main(["0.2.0", "--check", "--collection", str(coll)]) == 0
    assert "0.2.0: can be released (1 fragment(s))" in capsys.readouterr().out
    assert snapshot(coll) == before


def test_playbook_description_is_the_first_sentence_of_its_header(tmp_path: Path) -> None:
    playbook = tmp_path / "bench.yml"
    playbook.write_text("---\n# Measure the served model's speed\n# with SGLang's benchmark:\n#   ansible-playbook x\n")
    assert release.playbook_description(playbook) == "Measure the served model's speed with SGLang's benchmark."


def test_make_release_bumps_galaxy_and_releases_the_fragments(tmp_path: Path) -> None:
    """A whole release on copies: galaxy.yml's version, the release entry with the fragments' changes and the new
    playbook, CHANGELOG.rst, the fragments gone; 0.1.0's entry unchanged. ``make changelog`` then refuses."""
    coll = collection_copy(tmp_path / "c", {"feature.yml": FEATURE, "fix.yml": FIX})
    repo = tmp_path / "repo"
    (repo / "roles" / "demo" / "meta").mkdir(parents=True)
    (repo / "roles" / "demo" / "meta" / "main.yml").write_text("---\ngalaxy_info: {}\n")
    (repo / "roles" / "demo" / "meta" / "argument_specs.yml").write_text(
        "---\nargument_specs:\n  main:\n    short_description: A demo role\n    options: {}\n")
    # A module new in this release whose documentation still says version_added 0.1.0: new all the same.
    (coll / "plugins" / "modules").mkdir(parents=True)
    (coll / "plugins" / "modules" / "probe.py").write_text(
        '#!/usr/bin/python\nDOCUMENTATION = """\nmodule: probe\nversion_added: 0.1.0\nshort_description: Probe C(it)\n'
        'description: [Probes.]\nauthor: [nobody (!UNKNOWN)]\noptions: {}\n"""\nEXAMPLES = ""\nRETURN = ""\n')
    (repo / "playbooks").mkdir()
    (repo / "playbooks" / "validate.yml").write_text("---\n# Validate.\n- hosts: all\n  tasks: []\n")
    (repo / "playbooks" / "bench.yml").write_text("---\n# Measure the speed:\n#   run it\n- hosts: all\n  tasks: []\n")
    (repo / "docs").mkdir()
    (repo / "inventory" / "sample").mkdir(parents=True)
    shutil.copyfile(REPO / "LICENSE", repo / "LICENSE")
    old = yaml.safe_load((coll / "changelogs" / "changelog.yaml").read_text())["releases"]["0.1.0"]

    assert release.main(["0.2.0", "--date", "2026-12-04", "--collection", str(coll), "--repo", str(repo)]) == 0

    assert yaml.safe_load((coll / "galaxy.yml").read_text())["version"] == "0.2.0"
    assert "namespace: blackwell" in (coll / "galaxy.yml").read_text()  # the rest of galaxy.yml as it was
    releases = yaml.safe_load((coll / "changelogs" / "changelog.yaml").read_text())["releases"]
    assert releases["0.1.0"] == old
    new = releases["0.2.0"]
    assert sorted(new["fragments"]) == ["feature.yml", "fix.yml"]
    assert new["changes"] == {"minor_changes": ["validate - a feature."], "bugfixes": ["validate - a fix."]}
    assert new["release_date"] == "2026-12-04"
    assert new["objects"]["playbook"] == [{"description": "Measure the speed.", "name": "bench", "namespace": None}]
    assert new["objects"]["role"] == [{"description": "A demo role.", "name": "demo", "namespace": None}]
    assert new["modules"] == [{"description": "Probe :literal:`it`.", "name": "probe", "namespace": ""}]
    assert list((coll / "changelogs" / "fragments").iterdir()) == []
    rst = (coll / "CHANGELOG.rst").read_text()
    assert "v0.2.0" in rst and "validate - a feature." in rst and "Measure the speed." in rst
    assert not (coll / "changelogs" / ".plugin-cache.yaml").exists()

    (coll / "changelogs" / "fragments" / "later.yml").write_text(FIX)
    with pytest.raises(release.Refused, match=r"0\.2\.0 is released already.*make release VERSION=0\.2\.1"):
        release.check(coll, release.galaxy_version(coll))
