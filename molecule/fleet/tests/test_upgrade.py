"""An SGLang upgrade of the simulated fleet builds the new kernels before each drain, once (issue 35).

The fleet (two of the scenario's simulated Blackwell hosts behind the gateway: the canary and one host of the rest, so
that the case costs the scenario minutes, not a quarter of an hour) is first taken to release A, the 0.5.22 stand-in,
with playbooks/deploy.yml, and a second run with ``sglang_keep_venvs: 1`` prunes the 0.5.23 virtualenv and, with it, every
0.5.23 kernel cache (roles/sglang, "Kernel caches" in docs/restarts-and-rollouts.md): the hosts have never compiled
0.5.23. Then the upgrade to 0.5.23 goes through the project's normal entry, deploy.yml (roles/sglang installs the new
release beside the old one, roles/sglang_rollout rolls it out canary first), with ``sglang_server_precompile: always``
(the simulated GPUs are SM120, where ``auto`` builds nothing: SGLang 0.5.23 runs DeepGEMM on SM90/SM100 only) and
``sglang_rollout_kernel_share: true`` (the canary's built kernels are copied to the later hosts of the same key and
kernel inputs, as the model fan-out copies weights).

What it proves, per host, from ansible-runner's events and the stand-in's own record of what each start found
(``/var/lib/sglang/standin-kernels.jsonl``, tests/fixtures/sglang_standin/src/sglang/_standin/kernels.py):

* on the canary, the pre-compile (python -m sglang.compile_deep_gemm of the new virtualenv, with the instance's
  arguments) ran and found the new key's cache cold while the old release still served: it ended before the drain;
* every other host copied the canary's kernel directory (from the canary's peer server, every file checked) after the
  canary joined and before its own drain; its pre-compile then found the kernels built (the canary's marker: the same
  key and kernel inputs) and compiled nothing: only the canary ran compile_deep_gemm for the key;
* every host's first start of 0.5.23 found its kernels warm (no compile out of rotation), and the canary's kernel
  server is gone afterwards;
* a second run changes nothing, restarts nothing, copies and compiles nothing.

Cases run in file order and leave the fleet on 0.5.23, as it was (the other hosts stay on it throughout).
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import simrun
import yaml
from simrun import REPO, final_failure

GPUS = ["bsa-fleet-gpu1", "bsa-fleet-gpu2"]
CANARY = GPUS[0]  # rollout_canary 1: the first host of sglang_servers; GPUS[1] is the rest's one batch
GATEWAY = "bsa-fleet-gw"
OLD, NEW = "0.5.22", "0.5.23"
SERVICE = "sglang.service"
RECORDS = "/var/lib/sglang/standin-kernels.jsonl"  # sglang_server_state_dir: the unit's HOME
KERNELS = "/var/cache/sglang/kernels"  # sglang_server_cache_dir/kernels
VENVS = "/opt/sglang/venvs"
API_KEY: str = yaml.safe_load((REPO / "inventory" / "fleet-sim" / "group_vars" / "all.yml").read_text())["sglang_api_key"]
FAST = {"sglang_server_ready_timeout": 60, "sglang_server_ready_poll_interval": 1,
        "sglang_server_ready_progress_every": 5}
PRECOMPILE = "Build the instance's kernels into its new kernel cache before the stop"
DRAIN = "Take the server out of the routers and let it finish its requests"
RESTART = "Stop the server, release the GPUs it left behind, start it and wait for its health"
JOIN = "Put the server back into the routers"
COPY = "Copy the kernel directories from the canary (every file checked against its manifest)"
MARKER = ".blackwell-precompiled.json"


def sh(container: str, command: str) -> str:
    done = subprocess.run(["docker", "exec", container, "bash", "-c", command], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, f"{container}: {command}: {done.stderr}"
    return done.stdout.strip()


def records(host: str) -> list[dict[str, Any]]:
    """What every modelled start and pre-compile of the host found, oldest first."""
    text = sh(host, f"cat {RECORDS} 2>/dev/null || true")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def releases(host: str) -> list[str]:
    """The releases of the host's virtualenvs (<release>-<hash>), sorted."""
    return sorted({name.split("-")[0] for name in sh(host, f"ls {VENVS}").split() if not name.endswith(".txt")})


def kernel_keys(host: str) -> list[str]:
    return sorted(sh(host, f"ls {KERNELS} 2>/dev/null || true").split())


def served_version(host: str) -> str:
    """The release the host's server reports (/server_info with the fleet's key, on loopback behind the host's TLS
    front: SGLang's backend port, tests/test_fleet.py's LOCAL)."""
    info = sh(host, f"curl -fsS -H 'Authorization: Bearer {API_KEY}' http://127.0.0.1:31000/server_info")
    return str(json.loads(info)["version"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("upgrade")
    shutil.copytree(REPO / "inventory" / "fleet-sim" / "group_vars", directory / "group_vars")
    (directory / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": {"hosts": {h: {} for h in GPUS}},
                     "sglang_routers": {"hosts": {GATEWAY: {}}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    return directory


def deploy(inventory: Path, tmp_path: Path, **extravars: Any) -> ansible_runner.Runner:
    return simrun.play(inventory, tmp_path, "deploy.yml", skip_tags="driver,cuda", **{**FAST, **extravars})


def when(event: dict[str, Any]) -> float:
    """An event's time on the controller's clock (the containers share the machine's clock)."""
    return datetime.datetime.fromisoformat(event["created"]).timestamp()


def first(runner: ansible_runner.Runner, task: str, host: str) -> tuple[int, dict[str, Any]]:
    """(index, event) of the task's first ok event on the host."""
    for index, event in enumerate(runner.events):
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task") == task and data.get("host") == host:
            return index, event
    raise AssertionError(f"{task!r} did not run on {host}")


# The whole upgrade story runs in the extended tier (make molecule-extended): about 8 minutes of the fleet lane, and
# make test's budget. In make test: the kernels built before the stop and found warm by the start (molecule default's
# test_restart kernel cases), the precompile/copy/join order (tests/unit/test_kernel_precompile.py,
# tests/unit/test_kernel_share.py), a release installed beside the old one (molecule provision).
@pytest.mark.extended  # the upgrade story: kernels before the stop in default, the copy in unit tests (above)
def test_the_fleet_runs_the_old_release_and_has_never_compiled_the_new_one(fleet: Path, tmp_path: Path) -> None:
    runner = deploy(fleet, tmp_path, sglang_version=OLD)
    assert runner.rc == 0, final_failure(runner)
    # A second run that keeps only the current virtualenv: 0.5.23's is pruned, and its caches with it; nothing restarts.
    pids = {host: sh(host, f"systemctl show -p MainPID --value {SERVICE}") for host in GPUS}
    runner = deploy(fleet, tmp_path, sglang_version=OLD, sglang_keep_venvs=1)
    assert runner.rc == 0, final_failure(runner)
    for host in GPUS:
        assert sh(host, f"systemctl show -p MainPID --value {SERVICE}") == pids[host], host
        assert served_version(host) == OLD, host
        assert releases(host) == [OLD], host
        keys = kernel_keys(host)
        assert keys and all(k.startswith(f"sglang-{OLD}_") for k in keys), (host, keys)


@pytest.mark.extended  # the upgrade story: the case above prepares the fleet for it
def test_an_upgrade_builds_the_kernels_once_on_the_canary_and_every_host_starts_warm(fleet: Path, tmp_path: Path) -> None:
    seen = {host: len(records(host)) for host in GPUS}
    pids = {host: sh(host, f"systemctl show -p MainPID --value {SERVICE}") for host in GPUS}
    runner = deploy(fleet, tmp_path, sglang_version=NEW, sglang_server_precompile="always",
                    sglang_rollout_kernel_share=True)
    assert runner.rc == 0, final_failure(runner)

    figures = []
    canary_join, _ = first(runner, JOIN, CANARY)
    for host in GPUS:
        assert served_version(host) == NEW, host
        assert sh(host, f"systemctl show -p MainPID --value {SERVICE}") != pids[host], f"{host} was not restarted"
        # Installed beside the old release (kept for a rollback).
        assert releases(host) == [OLD, NEW], host
        built_at, built = first(runner, PRECOMPILE, host)
        drain_at, drain = first(runner, DRAIN, host)
        restart_at, _ = first(runner, RESTART, host)
        join_at, _ = first(runner, JOIN, host)
        res = built["event_data"]["res"]
        assert built_at < drain_at < restart_at < join_at, (host, built_at, drain_at, restart_at, join_at)
        new = [(r["version"], r["by"], r["found"]) for r in records(host)[seen[host]:]]
        started = records(host)[-1]
        assert started["dir"].startswith(f"{KERNELS}/sglang-{NEW}_"), host
        # In time: the first start of 0.5.23 came after the drain, and found its kernels warm.
        assert started["at"] > when(drain), (host, started, drain["created"])
        if host == CANARY:
            # The stand-in's own record: the pre-compile of 0.5.23 found a cold cache of the new key while the old
            # release served and ended before the drain; the first start found it warm.
            assert res["changed"] and res["built"] and res["compile"]["rc"] == 0, (host, res)
            assert new == [(NEW, "compile_deep_gemm", "cold"), (NEW, "server", "warm")], (host, new)
            compiled = records(host)[seen[host]]
            assert compiled["dir"] == started["dir"], host
            assert compiled["at"] + compiled["seconds"] <= when(drain), (host, compiled, drain["created"])
            figures.append(f"{host}: pre-compile {res['seconds']} s (stand-in compile {compiled['seconds']} s), ended "
                           f"{when(drain) - compiled['at'] - compiled['seconds']:.1f} s before the drain; first start warm")
            continue
        # The rest: the canary's kernel directory copied after the canary joined and before this host's pre-compile,
        # every file checked; the pre-compile found the canary's marker and compiled nothing; the start was warm.
        copied_at, copied = first(runner, COPY, host)
        [fetched] = copied["event_data"]["res"]["results"]  # one instance, one loop item
        assert canary_join < copied_at < built_at, (host, canary_join, copied_at, built_at)
        assert fetched["complete"] and fetched["fetched"] and fetched["error"] is None, (host, fetched)
        assert not res["changed"] and not res["built"] and "are built" in res["skip_reason"], (host, res)
        assert new == [(NEW, "server", "warm")], (host, new)
        marker = json.loads(sh(host, f"cat {started['dir'].rsplit('/', 1)[0]}/{MARKER}"))
        assert marker == json.loads(sh(CANARY, f"cat {started['dir'].rsplit('/', 1)[0]}/{MARKER}")), host
        figures.append(f"{host}: copied {len(fetched['fetched'])} file(s), {fetched['bytes']} bytes from {CANARY}; "
                       "pre-compile skipped; first start warm")

    # Only the canary compiled the new key; its kernel server is gone.
    compiles = [(host, r["version"]) for host in GPUS for r in records(host)[seen[host]:] if r["by"] == "compile_deep_gemm"]
    assert compiles == [(CANARY, NEW)], compiles
    assert sh(CANARY, "systemctl is-active sglang-kernel-peer.service || true") in ("inactive", "unknown", "failed")
    assert sh(CANARY, "test -e /run/sglang-kernel-peer && echo left || echo gone") == "gone"
    print("\n".join(figures))


@pytest.mark.extended  # a second deploy changes nothing: test_fleet's; built kernels not rebuilt: the marker check above
def test_a_second_run_of_the_upgrade_changes_nothing(fleet: Path, tmp_path: Path) -> None:
    seen = {host: len(records(host)) for host in GPUS}
    runner = deploy(fleet, tmp_path, sglang_version=NEW, sglang_server_precompile="always",
                    sglang_rollout_kernel_share=True)
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}, runner.stats["changed"]
    assert not [e for e in runner.events if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == COPY]
    for host in GPUS:
        assert records(host)[seen[host]:] == [], host
        skipped = [e["event_data"]["res"] for e in runner.events if e.get("event") == "runner_on_ok"
                   and e["event_data"].get("task") == PRECOMPILE and e["event_data"].get("host") == host]
        assert skipped == [], f"{host}: no restart is due, so nothing is prepared: {skipped}"
