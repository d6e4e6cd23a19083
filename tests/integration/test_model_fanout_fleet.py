"""Weights once per fleet, end to end: `deploy.yml --tags model` on two simulated hosts and a stand-in Hub.

Two simulated hosts (tests/fixtures/simhost) and the stand-in Hub (tests/fixtures/simhost/fakehub, with a token,
in its own container) on their own docker network, set up by bench/model_fanout.py's Fleet; each host is reached
through the docker connection and serves its copies on its address on that network. The cases run in file order
on the same hosts (8 minutes on the 2-core development machine under load, most of it the first run's tools install):

1. one copy from the Hub, the other host copies from its peer; both hold the Hub's bytes; no server left;
2. a second run changes nothing and pulls nothing;
3. a peer serving a corrupted file: the receiver refuses it, takes that file alone from the Hub;
4. a peer that cannot be reached: the receiver downloads from the Hub (case 3 leaves the fleet seeded: its seeder's
   file is restored; a fleet that is not seeded, when the case runs alone, is seeded first).

Environment: BSA_FANOUT_PREFIX names the containers and the network (default bsa-itest-fanout-).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import model_fanout as mf  # noqa: E402

PREFIX = os.environ.get("BSA_FANOUT_PREFIX", "bsa-itest-fanout-")
SHARD = 2 * 10**6
SHARD_BACKUP = "/var/tmp/bsa-itest-shard.orig"  # on the simulated seeder, outside the model directory: not in the snapshot


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[mf.Fleet]:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.fail("Docker engine not available: run tests/fixtures/simhost/ensure-docker.sh")
    subprocess.run([str(REPO / "tests/fixtures/simhost/build-image.sh")], check=True, timeout=900)
    if not (REPO / "build" / "wheelhouse").is_dir():
        subprocess.run([str(REPO / "tests/fixtures/sglang_standin/build-wheelhouse.sh")], check=True, timeout=600)
    fleet = mf.Fleet(PREFIX, 2, tmp_path_factory.mktemp("fanout"), ["--shards", "3", "--shard-bytes", str(SHARD)],
                     token="fixture-hub-token")
    try:
        fleet.up()
        yield fleet
    finally:
        fleet.down()


def _deploy(fleet: mf.Fleet, name: str) -> tuple[str, int, dict[str, tuple[int, int, int, int]]]:
    """(output, Hub bytes served during the run, recap) of one `deploy.yml --tags model`; fails on a non-zero exit."""
    before = fleet.hub_stats()["bytes_served"]
    _, rc, out = fleet.deploy(name)
    assert rc == 0, "\n".join(out.splitlines()[-60:])
    return out, fleet.hub_stats()["bytes_served"] - before, mf.recap(out)


def _seeded(fleet: mf.Fleet) -> bool:
    """Every host holds the revision's complete snapshot with the Hub's bytes, recorded by the role's manifest."""
    if mf.check_snapshots(fleet, fleet.hub_files()):
        return False
    manifest = f"{fleet.model_dir()}/.sglang-model-manifest.json"
    return all(fleet.revision in mf.dexec(host, f"cat {manifest} 2>/dev/null; true") for host in fleet.hosts)


def _no_server_left(fleet: mf.Fleet) -> None:
    for host in fleet.hosts:
        assert mf.dexec(host, "systemctl is-active sglang-model-peer.service", check=False) in ("inactive", "unknown", "")
        assert mf.dexec(host, "ls /run/sglang-model-peer /run/systemd/system/sglang-model-peer.service 2>&1; true").count(
            "No such file") == 2


def test_one_copy_from_the_hub_the_rest_from_peers(fleet: mf.Fleet) -> None:
    files = fleet.hub_files()
    out, pulled, recap = _deploy(fleet, "first")
    assert pulled == sum(meta["size"] for meta in files.values()), "exactly one copy from the Hub"
    assert mf.check_snapshots(fleet, files) == []
    assert "Copy the verified snapshot from the peer" in out and "downloading it from the Hub instead" not in out
    for host in fleet.hosts:
        manifest = mf.dexec(host, f"cat {fleet.model_dir()}/.sglang-model-manifest.json")
        assert fleet.revision in manifest
    assert "fixture-hub-token" not in out
    _no_server_left(fleet)


def test_a_second_run_changes_nothing_and_pulls_nothing(fleet: mf.Fleet) -> None:
    _, pulled, recap = _deploy(fleet, "again")
    assert pulled == 0
    assert {host: r[1] for host, r in recap.items()} == {host: 0 for host in fleet.hosts}


def test_a_corrupted_peer_file_comes_from_the_hub(fleet: mf.Fleet) -> None:
    seeder, receiver = fleet.hosts
    shard = "model-00002-of-00003.safetensors"
    mf.dexec(seeder, f"cp -p {fleet.model_dir()}/{shard} {SHARD_BACKUP}")
    mf.dexec(seeder, f"printf XXXXXXXX | dd of={fleet.model_dir()}/{shard} bs=1 seek=1000 conv=notrunc 2>/dev/null")
    fleet.wipe([receiver])
    files = fleet.hub_files()
    before = fleet.hub_stats()["files_served"]
    out, _, _ = _deploy(fleet, "corrupted")
    served = {name: n - before.get(name, 0) for name, n in fleet.hub_stats()["files_served"].items()}
    assert "downloading it from the Hub instead" in out and "SHA-256" in out
    assert served[shard] == files[shard]["size"], "the refused file comes from the Hub"
    assert all(served.get(n, 0) == 0 for n in files if n.endswith(".safetensors") and n != shard), \
        "the other weights still come from the peer"
    assert fleet.digests(receiver)[shard] == files[shard]["sha256"]
    _no_server_left(fleet)
    # The seeder's file back to the Hub's bytes: the next case starts from a seeded fleet without another run.
    mf.dexec(seeder, f"cp -p {SHARD_BACKUP} {fleet.model_dir()}/{shard} && rm -f {SHARD_BACKUP}")


def test_an_unreachable_peer_falls_back_to_the_hub(fleet: mf.Fleet) -> None:
    seeder, receiver = fleet.hosts
    if not _seeded(fleet):  # run alone, or after a failed case: seed the fleet first
        fleet.wipe()
        _deploy(fleet, "reseed")
        assert _seeded(fleet)
    fleet.wipe([receiver])
    # The receivers reach the seeder at an address where it does not listen for them.
    fleet.write_inventory({seeder: {"sglang_model_peer_address": "127.0.0.1"}})
    files = fleet.hub_files()
    try:
        out, pulled, _ = _deploy(fleet, "unreachable")
    finally:
        fleet.write_inventory()
    assert "Connection refused" in out and "downloading it from the Hub instead" in out
    assert pulled >= sum(meta["size"] for name, meta in files.items() if name.endswith(".safetensors"))
    assert mf.check_snapshots(fleet, files) == []
    _no_server_left(fleet)
