"""The upgrade check of validate.yml, run as a user runs it: ``-e sglang_version=0.5.23`` on hosts whose inventory
pins 0.5.19 lists each argument the upgrade renames or removes (errors), with the new name and the host variable;
a host without such arguments passes; hosts already on the target release are validated exactly as before."""

from __future__ import annotations

from pathlib import Path

from test_validate_playbook import VALIDATE, make_inventory, run, task_results


def test_upgrade_from_0_5_19_names_the_renamed_flag(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path, {
        # --mamba-scheduler-strategy: a deprecated alias of --mamba-radix-cache-strategy in 0.5.19, gone in 0.5.20.
        "old-renamed": {"sglang_version": "0.5.19", "sglang_args": {"mamba_scheduler_strategy": "extra_buffer"}},
        "old-clean": {"sglang_version": "0.5.19"},
    })
    runner = run(tmp_path, inv, sglang_version="0.5.23")
    assert runner.rc != 0
    [event] = task_results(runner, VALIDATE)
    res = event["res"]
    assert res["invalid_hosts"] == ["old-renamed"]
    assert res["hosts"]["old-renamed"]["errors"] == ["sglang_args.mamba_scheduler_strategy: upgrade.renamed"]
    assert res["hosts"]["old-clean"]["ok"] is True
    report = res["report"]
    for words in ("old-renamed", "sglang_args.mamba_scheduler_strategy", "--mamba-scheduler-strategy",
                  "--mamba-radix-cache-strategy", "SGLang 0.5.20", "upgrading 0.5.19 -> 0.5.23",
                  "rename sglang_args.mamba_scheduler_strategy to mamba_radix_cache_strategy"):
        assert words in report, words
    assert "old-clean: " not in report or "ERROR" not in report.split("old-clean: ", 1)[1]


def test_the_same_inventory_without_an_upgrade_is_valid(tmp_path: Path) -> None:
    """Without -e the hosts are validated against their own release (0.5.19 still has the alias): no upgrade check.
    roles/sglang ships no lock of 0.5.19: the host installs it unlocked (sglang_lock false), else validate refuses it."""
    inv = make_inventory(tmp_path, {
        "old-renamed": {"sglang_version": "0.5.19", "sglang_lock": False,
                        "sglang_args": {"mamba_scheduler_strategy": "extra_buffer"}},
    })
    runner = run(tmp_path, inv)
    [event] = task_results(runner, VALIDATE)
    assert runner.rc == 0, event["res"].get("report")
    assert "upgrade." not in str(event["res"]["hosts"]), event["res"]["hosts"]


def test_hosts_already_on_the_target_release_are_unchanged(tmp_path: Path) -> None:
    """-e sglang_version equal to the inventory's: the same result as without it."""
    inv = make_inventory(tmp_path, {"new": {"sglang_args": {"mamba_scheduler_strategy": "extra_buffer"}}})
    plain, pinned = tmp_path / "plain", tmp_path / "pinned"
    plain.mkdir()
    pinned.mkdir()
    without = task_results(run(plain, inv), VALIDATE)[0]["res"]
    with_e = task_results(run(pinned, inv, sglang_version="0.5.23"), VALIDATE)[0]["res"]
    assert with_e["hosts"] == without["hosts"] and with_e["report"] == without["report"]
    assert without["hosts"]["new"]["errors"] == ["sglang_args.mamba_scheduler_strategy: schema.renamed"]
