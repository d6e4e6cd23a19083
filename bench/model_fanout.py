#!/usr/bin/env python3
"""Weights once per fleet: bytes pulled from the Hub and wall time, per-host Hub downloads against the fan-out.

Creates HOSTS simulated Blackwell hosts (tests/fixtures/simhost, named PREFIX1..N) and a stand-in Hugging Face
Hub (tests/fixtures/simhost/fakehub in its own container, PREFIXhub) on one docker network (PREFIXnet), the Hub
serving a synthetic checkpoint of SHARDS weight shards of SHARD_MB MB each through one link capped at RATE_MB
MB/s (a site's uplink to the Hub; the hosts' own network is not capped). Then, per mode, on fresh model
directories, it times `playbooks/deploy.yml --tags model -e rollout_serial=100%` (every host at once):

* baseline: sglang_model_fanout=false, every host downloads from the Hub (today's behaviour);
* fan-out: the default, one host downloads from the Hub, the others copy host to host in rounds.

Prints, per mode, the bytes the Hub served (read from the stand-in's counter), the copies of the checkpoint
that makes, and the wall time; then the ratio. Every host's snapshot must match the Hub's SHA-256s, and a
second fan-out run must change nothing and pull nothing (else a warning line is printed). The first,
untimed run installs the tools (uv, hf) on every host.

Usage: bench/model_fanout.py [--hosts 4] [--shards 4] [--shard-mb 64] [--rate-mb 10] [--runs 1]
                             [--prefix bsa-bench-fanout-] [--keep] [--json FILE]
Needs: make venv simhost wheelhouse (the README's `make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from simfleet import REPO, ansible_env, dexec, sh
from simfleet import playbook as run_playbook

FAKEHUB = REPO / "tests" / "fixtures" / "simhost" / "fakehub"
MODEL = "bench-org/fanout-model"
MODELS_DIR = "/opt/sglang/models"
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def revisions() -> dict[str, str]:
    out = subprocess.run([sys.executable, str(FAKEHUB / "fakehub.py"), "--print-revisions"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


class Fleet:
    """HOSTS simulated hosts and a stand-in Hub on their own docker network; an inventory for deploy.yml."""

    def __init__(self, prefix: str, hosts: int, tmp: Path, hub_args: list[str], token: str = "") -> None:
        self.prefix = prefix
        self.hosts = [f"{prefix}{i}" for i in range(1, hosts + 1)]
        self.hub = f"{prefix}hub"
        self.network = f"{prefix}net"
        self.tmp = tmp
        self.hub_args = hub_args
        self.token = token
        self.revision = revisions()["rev1"]
        self.addresses: dict[str, str] = {}
        self.inventory = tmp / "inventory"

    # -- lifecycle ------------------------------------------------------------------------------------
    def up(self) -> None:
        self.down()
        sh("docker", "network", "create", self.network)
        token = ["--token", self.token] if self.token else []
        sh("docker", "run", "-d", "--name", self.hub, "--network", self.network, "--label", "bsa.simhost=1",
           "-v", f"{FAKEHUB}:/fakehub:ro", "--entrypoint", "/usr/bin/python3", "bsa-simhost:latest",
           "/fakehub/fakehub.py", "--bind", "0.0.0.0", "--port", "8081", *token, *self.hub_args)
        for host in self.hosts:
            sh(str(REPO / "tests" / "fixtures" / "simhost" / "simhost.sh"), "up", host, "--gpus", "8", "--",
               "--network", self.network)
            sh("docker", "exec", host, "mkdir", "-p", "/srv")
            sh("docker", "cp", str(REPO / "build" / "wheelhouse"), f"{host}:/srv/wheelhouse")
            self.addresses[host] = sh("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                      host).stdout.strip()
        self.wait_hub()
        self.write_inventory()

    def down(self) -> None:
        sh("docker", "rm", "-f", *self.hosts, self.hub, check=False)
        sh("docker", "network", "rm", self.network, check=False)

    def wait_hub(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if dexec(self.hosts[0], f"curl -fsS http://{self.hub}:8081/_fakehub/stats", check=False).startswith("{"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.hub}: the stand-in Hub did not answer in {timeout:.0f} s")

    def write_inventory(self, host_vars: dict[str, dict[str, Any]] | None = None, **group: Any) -> Path:
        """inventory/sim's GPU host settings, the model from the stand-in Hub, each host's bridge address."""
        inv = self.inventory
        (inv / "group_vars").mkdir(parents=True, exist_ok=True)
        base = yaml.safe_load((REPO / "inventory" / "sim" / "group_vars" / "sglang_servers.yml").read_text())
        base.update({
            "sglang_model_path": MODEL, "sglang_model_revision": self.revision,
            "sglang_model_hf_endpoint": f"http://{self.hub}:8081", "sglang_system_packages": [],
            "sglang_model_download_poll": 1, "sglang_model_disk_headroom_bytes": 0,
            "sglang_model_fanout": True,  # opt-in (a listening service between GPU hosts); the baseline turns it off
        })
        if self.token:
            base["hf_token"] = self.token
        base.update(group)
        (inv / "group_vars" / "sglang_servers.yml").write_text("---\n" + yaml.safe_dump(base, sort_keys=False))
        hosts = {h: {"sglang_model_peer_address": self.addresses[h], **(host_vars or {}).get(h, {})} for h in self.hosts}
        (inv / "hosts.yml").write_text(json.dumps({"all": {
            "children": {"sglang_servers": {"hosts": hosts}},
            "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
        }}))
        return inv

    # -- runs and observations -------------------------------------------------------------------------
    def deploy(self, log: str, *extra: str) -> tuple[float, int, str]:
        env = ansible_env(ANSIBLE_CACHE_PLUGIN_CONNECTION=str(self.tmp / "facts"))
        return run_playbook(self.inventory, "playbooks/deploy.yml", env, self.tmp / f"{log}.log",
                            "--tags", "model", "-e", json.dumps({"rollout_serial": "100%"}), *extra)

    def hub_stats(self) -> dict[str, Any]:
        return json.loads(dexec(self.hosts[0], f"curl -fsS http://{self.hub}:8081/_fakehub/stats"))

    def hub_files(self) -> dict[str, dict[str, Any]]:
        """path -> {size, sha256} of the revision, as the Hub's tree lists them (LFS files: their sha256)."""
        auth = f"-H 'Authorization: Bearer {self.token}'" if self.token else ""
        tree = json.loads(dexec(self.hosts[0], f"curl -fsS {auth} http://{self.hub}:8081/api/models/{MODEL}/tree/{self.revision}"))
        return {e["path"]: {"size": e["size"], "sha256": e.get("lfs", {}).get("oid")} for e in tree}

    def model_dir(self) -> str:
        return f"{MODELS_DIR}/{MODEL}"

    def digests(self, host: str) -> dict[str, str]:
        """path -> sha256 of every file of the snapshot on ``host`` (the role's own files and caches left out)."""
        out = dexec(host, f"cd {self.model_dir()} 2>/dev/null && find . -type f -not -path './.cache/*' "
                          f"-not -name '.sglang-*' -not -path './.sglang-peer-partial/*' -print0 | xargs -0 -r sha256sum",
                    check=False)
        return {line.split(None, 1)[1][2:]: line.split()[0] for line in out.splitlines() if line.strip()}

    def wipe(self, hosts: list[str] | None = None) -> None:
        for host in hosts or self.hosts:
            dexec(host, f"rm -rf {self.model_dir()}")


def expected_digests(files: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The LFS files' sha256 (the Hub's own); the small files are compared across hosts instead."""
    return {path: meta["sha256"] for path, meta in files.items() if meta["sha256"]}


def recap(output: str) -> dict[str, tuple[int, int, int, int]]:
    return {m.group(1): tuple(int(m.group(i)) for i in range(2, 6)) for m in RECAP.finditer(output)}  # type: ignore[misc]


def check_snapshots(fleet: Fleet, files: dict[str, dict[str, Any]]) -> list[str]:
    """Problems: a host whose snapshot is not the Hub's (LFS sha256s) or differs from the first host's."""
    problems = []
    want = expected_digests(files)
    first = fleet.digests(fleet.hosts[0])
    for host in fleet.hosts:
        got = fleet.digests(host)
        if sorted(got) != sorted(files):
            problems.append(f"{host}: files {sorted(got)} are not the Hub's {sorted(files)}")
        bad = [p for p, sha in want.items() if got.get(p) != sha]
        if bad:
            problems.append(f"{host}: SHA-256 of {bad} is not the Hub's")
        if got != first:
            problems.append(f"{host}: snapshot differs from {fleet.hosts[0]}'s")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--shards", type=int, default=4, help="weight shards of the synthetic checkpoint")
    parser.add_argument("--shard-mb", type=int, default=64, help="MB (10^6 bytes) per shard")
    parser.add_argument("--rate-mb", type=float, default=10.0, help="the Hub link's MB/s, shared by every download")
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each mode")
    parser.add_argument("--prefix", default="bsa-bench-fanout-", help="name prefix of the containers and network")
    parser.add_argument("--keep", action="store_true", help="leave the containers, network and logs in place")
    parser.add_argument("--json", type=Path, help="write the results to this file as JSON")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bsa-bench-fanout."))
    hub_args = ["--shards", str(args.shards), "--shard-bytes", str(args.shard_mb * 10**6),
                "--rate", str(int(args.rate_mb * 10**6))]
    fleet = Fleet(args.prefix, args.hosts, tmp, hub_args)
    started = time.monotonic()
    results: dict[str, Any] = {"baseline": {"wall_s": [], "hub_bytes": []}, "fanout": {"wall_s": [], "hub_bytes": []}}
    problems: list[str] = []
    try:
        fleet.up()
        files = fleet.hub_files()
        model_bytes = sum(meta["size"] for meta in files.values())
        # Untimed: the tools virtualenv (uv, hf) on every host, and the Hub's checkpoint generated.
        _, rc, out = fleet.deploy("warmup", "-e", "sglang_model_fanout=false")
        if rc:
            print("\n".join(out.splitlines()[-40:]), file=sys.stderr)
            return 1
        for run in range(args.runs):
            for mode in (("baseline", "fanout") if run % 2 == 0 else ("fanout", "baseline")):
                fleet.wipe()
                before = fleet.hub_stats()["bytes_served"]
                extra = ["-e", "sglang_model_fanout=false"] if mode == "baseline" else []
                wall, rc, out = fleet.deploy(f"{mode}-{run}", *extra)
                pulled = fleet.hub_stats()["bytes_served"] - before
                wrong = check_snapshots(fleet, files)
                if rc or wrong:
                    problems.append(f"{mode} run {run + 1}: exit {rc}; {'; '.join(wrong) or 'snapshots fine'} "
                                    f"(log {tmp / f'{mode}-{run}.log'})")
                    print(f"WARNING: {problems[-1]}")
                results[mode]["wall_s"].append(wall)
                results[mode]["hub_bytes"].append(pulled)
                if mode == "fanout":
                    before = fleet.hub_stats()["bytes_served"]
                    _, rc, out = fleet.deploy(f"again-{run}")
                    changed = {h: r[1] for h, r in recap(out).items()}
                    again = fleet.hub_stats()["bytes_served"] - before
                    if rc or any(changed.values()) or again:
                        problems.append(f"second fan-out run {run + 1}: exit {rc}, changed {changed}, {again} bytes from the Hub")
                        print(f"WARNING: {problems[-1]}")
    finally:
        if args.keep:
            print(f"kept: containers {', '.join(fleet.hosts)}, {fleet.hub}, network {fleet.network}; logs in {tmp}")
        else:
            fleet.down()
            shutil.rmtree(tmp, ignore_errors=True)
    for mode in results.values():
        mode["median_wall_s"] = statistics.median(mode["wall_s"])
        mode["median_hub_bytes"] = statistics.median(mode["hub_bytes"])
        mode["copies"] = mode["median_hub_bytes"] / model_bytes
    base, fan = results["baseline"], results["fanout"]
    print(f"{args.hosts} simulated hosts, checkpoint {model_bytes / 1e6:.0f} MB in {len(files)} files "
          f"({args.shards} shards), Hub link {args.rate_mb:g} MB/s shared; deploy.yml --tags model, all hosts at once; "
          f"{args.runs} run(s) each, median shown")
    print(f"{'mode':34} {'Hub MB':>9} {'copies':>7} {'wall s':>8}")
    print(f"{'per-host Hub download (baseline)':34} {base['median_hub_bytes'] / 1e6:9.1f} {base['copies']:7.2f} "
          f"{base['median_wall_s']:8.2f}")
    print(f"{'fan-out (sglang_model_fanout)':34} {fan['median_hub_bytes'] / 1e6:9.1f} {fan['copies']:7.2f} "
          f"{fan['median_wall_s']:8.2f}")
    print(f"{'ratio baseline / fan-out':34} {base['median_hub_bytes'] / max(fan['median_hub_bytes'], 1):8.2f}x "
          f"{'':7} {base['median_wall_s'] / fan['median_wall_s']:7.2f}x")
    if args.json:
        args.json.write_text(json.dumps({
            "benchmark": "model_fanout", "hosts": args.hosts, "model_bytes": model_bytes, "files": len(files),
            "rate_bytes_per_s": int(args.rate_mb * 10**6), "runs": args.runs, **results, "problems": problems,
            "bench_wall_s": time.monotonic() - started,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
