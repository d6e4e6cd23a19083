"""A lock for every release the validator accepts, or a refusal at validate time (issue 33, build item 6).

roles/sglang installs the server's virtualenv from the hashed lock of the host's ``sglang_version`` while
``sglang_lock`` is true (its default). The validate action refuses a host whose release has no such lock, before any
host changes, naming the variable, the releases that have a lock where the host looks for one, and the fixes; the
role's own check (roles/sglang/tasks/lock.yml) is what is left for the role used alone. The lock variables are each
host's own where its inventory sets them, else roles/sglang's defaults, read from its defaults file (``role_path``:
the role's directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_lock
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_lock import lock_name
from test_action_plugin import blocks, ref_host, report, run_action

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "roles" / "sglang" / "defaults" / "main.yml").read_text(encoding="utf-8"))
LOCKS = REPO / "roles" / "sglang" / "files" / "locks"
# The releases the project ships a lock of, for the role's default torch requirement.
SHIPPED = sorted(p.name.split("-")[1] for p in LOCKS.glob(f"sglang-*-{sglang_lock.lock_variant(DEFAULTS['sglang_torch_requirement'])}.txt"))
UNLOCKED = "0.5.20"  # a release with a committed schema and no lock in the role


def write_lock(directory: Path, version: str, torch: str, pinned: str | None = None) -> Path:
    """A stand-in lock (its first pin is ``sglang==<pinned or version>``) where roles/sglang looks for it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / lock_name(version, torch)
    path.write_text(f"# uv pip compile --universal --generate-hashes\nsglang=={pinned or version} \\\n"
                    "    --hash=sha256:" + "0" * 64 + "\n", encoding="utf-8")
    return path


def errors(result: dict[str, Any], host: str) -> list[str]:
    return result["hosts"][host]["errors"] if not result["hosts"][host]["ok"] else []


def test_the_default_release_has_its_lock_and_passes() -> None:
    assert DEFAULTS["sglang_version"] in SHIPPED
    result = run_action({"gpu-01": ref_host()})
    assert not result.get("failed") and result["invalid_hosts"] == [], report(result)


def test_a_release_without_a_lock_is_refused_naming_the_locked_releases() -> None:
    assert UNLOCKED not in SHIPPED
    result = run_action({"old": ref_host(sglang_version=UNLOCKED), "new": ref_host()}, {"fail_on_error": False})
    assert result["invalid_hosts"] == ["old"]
    assert errors(result, "old") == ["sglang_version: lock.missing"]  # nothing else is wrong with the host
    (block,) = blocks(result)
    assert block.startswith("old: 1 error(s)")
    for words in (f"sglang_version = '{UNLOCKED}'", "[lock.missing]", "sglang_lock is true",
                  lock_name(UNLOCKED, DEFAULTS["sglang_torch_requirement"]), str(LOCKS),
                  f"Releases with a lock for sglang_torch_requirement {DEFAULTS['sglang_torch_requirement']!r}",
                  ": " + ", ".join(SHIPPED) + ".",
                  # the fixes, for a user of the repository or of the installed collection
                  "set sglang_lock: false", f"tools/sglang_lock.py --version {UNLOCKED}", "point sglang_locks_dir at",
                  "sglang_lock_file at the file", f'sglang_version: "{SHIPPED[-1]}"'):
        assert words in block, (words, block)


def test_the_refusal_comes_with_the_run_failing_before_anything_changes() -> None:
    result = run_action({"old": ref_host(sglang_version=UNLOCKED)})
    assert result["failed"] is True and result["invalid_hosts"] == ["old"]
    assert "[lock.missing]" in report(result)


@pytest.mark.parametrize("off", [False, "false", "no"])
def test_sglang_lock_false_checks_nothing(off: Any) -> None:
    result = run_action({"old": ref_host(sglang_version=UNLOCKED, sglang_lock=off,
                                         sglang_locks_dir="/nonexistent/locks")})
    assert result["invalid_hosts"] == [], report(result)


def test_a_hosts_own_locks_dir_and_torch_requirement(tmp_path: Path) -> None:
    """Per-host values win over the role's defaults: a host whose own locks dir holds its release's lock (for its own
    torch requirement) passes; the same release elsewhere is refused, each with the releases of its own directory."""
    mine = tmp_path / "locks"
    write_lock(mine, UNLOCKED, "")
    write_lock(mine, "0.5.21", "")
    write_lock(mine, "0.5.22", "torch==2.9.0")  # another torch variant: not listed for ""
    result = run_action({
        "custom": ref_host(sglang_version=UNLOCKED, sglang_locks_dir=str(mine), sglang_torch_requirement=""),
        "wrong-torch": ref_host(sglang_version=UNLOCKED, sglang_locks_dir=str(mine)),
        "default-dir": ref_host(sglang_version=UNLOCKED),
    }, {"fail_on_error": False})
    assert result["invalid_hosts"] == ["wrong-torch", "default-dir"], report(result)
    by_host = {b.split(":", 1)[0]: b for b in blocks(result)}
    wrong, default = by_host["wrong-torch"], by_host["default-dir"]
    assert f"sglang_locks_dir {mine}: none." in wrong and lock_name(UNLOCKED, DEFAULTS["sglang_torch_requirement"]) in wrong
    assert f"sglang_locks_dir {LOCKS}: {', '.join(SHIPPED)}." in default


def test_a_hosts_locks_dir_lists_its_own_releases(tmp_path: Path) -> None:
    mine = tmp_path / "locks"
    write_lock(mine, "0.5.21", "")
    write_lock(mine, "0.5.22", "")
    write_lock(mine, "0.5.99", "")  # a lock of a release the validator does not accept: not offered
    result = run_action({"h": ref_host(sglang_version=UNLOCKED, sglang_locks_dir=str(mine), sglang_torch_requirement="")},
                        {"fail_on_error": False})
    text = report(result)
    assert f"Releases with a lock for no torch requirement in sglang_locks_dir {mine}: 0.5.21, 0.5.22." in text, text
    assert "--torch ''" in text and 'sglang_version: "0.5.22"' in text


def test_a_hosts_own_lock_file(tmp_path: Path) -> None:
    good = write_lock(tmp_path / "a", UNLOCKED, "anything")
    other = write_lock(tmp_path / "b", UNLOCKED, "anything", pinned="0.5.21")
    result = run_action({
        "good": ref_host(sglang_version=UNLOCKED, sglang_lock_file=str(good)),
        "other": ref_host(sglang_version=UNLOCKED, sglang_lock_file=str(other)),
        "missing": ref_host(sglang_lock_file=str(tmp_path / "nope.txt")),
    }, {"fail_on_error": False})
    assert result["invalid_hosts"] == ["other", "missing"], report(result)
    assert errors(result, "other") == ["sglang_lock_file: lock.mismatch"]
    assert errors(result, "missing") == ["sglang_lock_file: lock.missing"]
    text = report(result)
    assert f"sglang_lock_file {other}: it does not pin sglang=={UNLOCKED}" in text
    assert f"sglang_lock_file {tmp_path / 'nope.txt'}: no such file on the control node" in text


def test_a_lock_named_for_the_release_must_pin_it(tmp_path: Path) -> None:
    write_lock(tmp_path, UNLOCKED, "", pinned="0.5.21")
    result = run_action({"h": ref_host(sglang_version=UNLOCKED, sglang_locks_dir=str(tmp_path),
                                       sglang_torch_requirement="")}, {"fail_on_error": False})
    assert errors(result, "h") == ["sglang_version: lock.mismatch"]
    assert f"it does not pin sglang=={UNLOCKED}" in report(result)


def test_a_release_without_a_schema_is_refused_once() -> None:
    result = run_action({"h": ref_host(sglang_version="0.5.99")}, {"fail_on_error": False})
    assert errors(result, "h") == ["sglang_version: host.version"]


def test_check_locks_false_leaves_the_lock_to_the_role() -> None:
    """The sglang_server role's binding and the bench's candidates: the run's validate task checked the locks."""
    result = run_action({"old": ref_host(sglang_version=UNLOCKED)}, {"check_locks": False})
    assert result["invalid_hosts"] == [], report(result)


def test_hosts_with_the_same_lock_share_one_block() -> None:
    result = run_action({f"gpu-{i}": ref_host(sglang_version=UNLOCKED) for i in range(3)}, {"fail_on_error": False})
    (block,) = blocks(result)
    assert block.startswith("3 hosts (gpu-0, gpu-1, gpu-2): 1 error(s)")
