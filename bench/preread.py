#!/usr/bin/env python3
"""Restart downtime with the checkpoint evicted from the page cache, against the same restart after a pre-read.

On one simulated Blackwell host (tests/fixtures/simhost, named bsa-bench-preread-1) whose stand-in SGLang reads its
model directory's weight files at start (as SGLang's loader does) and then takes LOAD s for the rest of its load:

1. Stages a fake checkpoint of SHARDS x SHARD_MB MB the way the roles stage a model: the fixture Hub
   (tests/fixtures/simhost/fakehub, started with --shards/--shard-bytes) serves it and deploy.yml downloads it into
   /opt/sglang/models/<id>; the stand-in is built from this tree into a private wheelhouse (and its hashed lock), so the
   figures are the tree's, and the shared build/ is not touched.
2. Then, RUNS times each, interleaved (cold first):
   * cold: every weight file's clean pages dropped (fdatasync, then posix_fadvise(DONTNEED), inside the host), the
     residency measured, then `systemctl restart sglang` timed until /health answers 200 (polled every 0.1 s inside
     the host): the downtime, the stand-in's stop (DRAIN s) and start included;
   * pre-read: evicted the same way, then blackwell.sglang.weights_preread run ad hoc (`ansible -m`), the residency
     measured again before the stop (mincore, through the module with mode=never: measured, not assumed), then the
     same timed restart.
   The stand-in logs how long its own read of the files took (`stand-in: read ... in X s`); that is reported too.

Printed: downtime cold and pre-read (median), their ratio (cold / pre-read), the residency before the stop in both,
the checkpoint's bytes, the pre-read's bytes and seconds (the module's read, and the whole ad hoc run), and the
stand-in's own read time in both. The ratio is this machine's: its disk, its page cache (and its hypervisor's), the
stand-in's LOAD and DRAIN; on a real host the read is SGLang's and the checkpoint hundreds of GB.

Usage: bench/preread.py [--runs 3] [--shards 12] [--shard-mb 250] [--load 2] [--drain 1] [--host NAME] [--keep]
                        [--json FILE]
Needs: make venv simhost wheelhouse provision-fixtures, and memory and disk for the checkpoint (twice its size in
memory while it is staged: the fixture Hub holds it too, and is stopped afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import simfleet
from simfleet import REPO, ansible_env, fail, sh, up, write_hosts

HOST = "bsa-bench-preread-1"
ANSIBLE = Path(sys.executable).parent / "ansible"
MODEL_ID = "nvidia/Qwen3.5-397B-A17B-NVFP4"  # inventory/sim's sglang_model_path
EVICT = r"""
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # DONTNEED drops clean pages only
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
"""


def dexec(script: str, check: bool = True) -> str:
    return simfleet.dexec(HOST, script, check=check)


def private_fixtures(tmp: Path) -> Path:
    """A fixtures root like the repository's: build/aptrepo, build/wheelhouse with the stand-in built from this tree,
    its hashed lock in build/locks, and the fixture Hub. molecule/provision/fixtures.yml serves it
    (``__fixtures_repo_root``)."""
    root = tmp / "fixtures-root"
    shutil.copytree(REPO / "build" / "aptrepo", root / "build" / "aptrepo", symlinks=False)
    wheels = root / "build" / "wheelhouse"
    shutil.copytree(REPO / "build" / "wheelhouse", wheels, symlinks=False)
    env = {**os.environ, "WHEELHOUSE": str(wheels), "PYTHON": sys.executable}
    subprocess.run([str(REPO / "tests/fixtures/sglang_standin/build-wheelhouse.sh"), "0.5.23"], env=env, check=True,
                   capture_output=True, text=True)
    subprocess.run([sys.executable, str(REPO / "tools/sglang_lock.py"), "--version", "0.5.23", "--torch", "",
                    "--no-index", "--find-links", str(wheels), "--out-dir", str(root / "build" / "locks")],
                   check=True, capture_output=True, text=True)
    hub = root / "tests" / "fixtures" / "simhost" / "fakehub"
    hub.mkdir(parents=True)
    shutil.copy2(REPO / "tests/fixtures/simhost/fakehub/fakehub.py", hub / "fakehub.py")
    return root


def inventory(tmp: Path, load: float, drain: float, locks: Path) -> tuple[Path, dict[str, Any]]:
    """inventory/sim's group variables with this host as the only GPU host; the deploy's extra variables."""
    inv = tmp / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    group = (REPO / "inventory" / "sim" / "group_vars" / "sglang_servers.yml").read_text()
    (inv / "group_vars" / "sglang_servers.yml").write_text(group)
    env = {"NCCL_IB_DISABLE": "1", "SGLANG_STANDIN_LOAD_SECONDS": str(load), "SGLANG_STANDIN_DRAIN_SECONDS": str(drain)}
    return write_hosts(inv, [HOST]), {"sglang_env": env, "sglang_locks_dir": str(locks)}


def big_hub(shards: int, shard_bytes: int) -> None:
    """Restart the fixture Hub serving ``shards`` weight shards of ``shard_bytes`` bytes (a drop-in of the bench's)."""
    dexec("mkdir -p /etc/systemd/system/bsa-fixture-hub.service.d && printf '%s\\n' '[Service]' 'ExecStart=' "
          f"'ExecStart=/usr/bin/python3 /srv/fixtures/fakehub.py --bind 127.0.0.1 --port 8081 --log /var/log/fakehub.log "
          f"--shards {shards} --shard-bytes {shard_bytes}' > /etc/systemd/system/bsa-fixture-hub.service.d/bench.conf "
          "&& systemctl daemon-reload && systemctl restart bsa-fixture-hub")
    dexec("for i in $(seq 600); do curl -fs -o /dev/null http://127.0.0.1:8081/api/models/" + MODEL_ID +
          " && exit 0; systemctl is-failed -q bsa-fixture-hub && exit 1; sleep 0.5; done; exit 1")


def module(inv: Path, args: dict[str, Any]) -> dict[str, Any]:
    """One ad hoc run of blackwell.sglang.weights_preread on the host: (its result, with the run's wall time)."""
    start = time.monotonic()
    proc = subprocess.run([str(ANSIBLE), "-i", str(inv), HOST, "-o", "-m", "blackwell.sglang.weights_preread", "-a",
                           json.dumps(args)], env=ansible_env(), text=True, capture_output=True, cwd=REPO)
    wall = time.monotonic() - start
    line = next((x for x in proc.stdout.splitlines() if x.startswith(HOST) and "=>" in x), "")
    if proc.returncode or "SUCCESS" not in line:
        raise RuntimeError(f"weights_preread failed (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    result = json.loads(line.split("=>", 1)[1])
    result["wall_s"] = wall
    return result


def weight_files(model_dir: str) -> list[str]:
    return dexec(f"ls -1 {model_dir}/*.safetensors").split()


def evict(files: list[str]) -> None:
    sh("docker", "exec", HOST, "python3", "-c", EVICT, *files)


def restart(timeout: float = 600) -> float:
    """`systemctl restart sglang`, timed until /health answers 200 (polled every 0.1 s inside the host).

    The unit's start rate limit (sglang_server_start_limit_burst) is reset first, as the role's restart does.
    """
    out = dexec("systemctl reset-failed sglang; s=$(date +%s.%N); systemctl restart sglang; "
                f"timeout {int(timeout)} sh -c 'until [ \"$(curl -s -o /dev/null -w %{{http_code}} "
                "http://127.0.0.1:30000/health)\" = 200 ]; do systemctl is-failed -q sglang && exit 1; sleep 0.1; "
                "done' || exit 1; e=$(date +%s.%N); echo \"$s $e\"")
    start, end = (float(x) for x in out.split())
    return end - start


def standin_read_s() -> float | None:
    """The stand-in's own read of the weight files at its last start (its log line), seconds."""
    line = dexec("journalctl -u sglang -o cat --since '-10min' | grep 'stand-in: read' | tail -1", check=False)
    try:
        return float(line.split(" in ")[1].split(" s")[0])
    except (IndexError, ValueError):
        return None


def main() -> int:
    global HOST
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed restarts of each kind (interleaved)")
    parser.add_argument("--shards", type=int, default=12, help="weight shards of the fake checkpoint")
    parser.add_argument("--shard-mb", type=int, default=250,
                        help="MB (10^6 bytes) per shard, at most 268 (the fixture Hub draws a shard in one call)")
    parser.add_argument("--load", type=float, default=2.0, help="the stand-in's load time beyond its read, s")
    parser.add_argument("--drain", type=float, default=1.0, help="the stand-in's drain time at stop, s")
    parser.add_argument("--parallelism", type=int, default=8, help="the module's reader threads")
    parser.add_argument("--host", default=HOST, help=f"name of the simulated host's container (default {HOST})")
    parser.add_argument("--keep", action="store_true", help="leave the container in place")
    parser.add_argument("--json", type=Path, help="also write the results to this file as JSON")
    args = parser.parse_args()
    if not 0 < args.shard_mb <= 268:
        parser.error("--shard-mb must be between 1 and 268")
    HOST = args.host
    up([HOST])
    cold: list[dict[str, Any]] = []
    warm: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bsa-bench-preread.") as tmpdir:
            tmp = Path(tmpdir)
            root = private_fixtures(tmp)
            inv, extra = inventory(tmp, args.load, args.drain, root / "build" / "locks")
            _, rc, out = simfleet.playbook(inv, "molecule/provision/fixtures.yml",
                                           {**ansible_env(), "TMPDIR": str(tmp)}, tmp / "fixtures.log",
                                           "-e", json.dumps({"__fixtures_repo_root": str(root)}))
            if rc:
                return fail("molecule/provision/fixtures.yml", out)
            big_hub(args.shards, args.shard_mb * 10**6)
            _, rc, out = simfleet.playbook(inv, "playbooks/deploy.yml", ansible_env(), tmp / "deploy.log",
                                           "-e", json.dumps(extra))
            if rc:
                return fail("deploy.yml", out)
            dexec("systemctl stop bsa-fixture-hub")  # it holds the checkpoint in memory too
            info = json.loads(dexec("curl -fs http://127.0.0.1:30000/get_server_info"))
            model_dir = str(info["model_path"])
            files = weight_files(model_dir)
            measure = {"paths": [model_dir], "mode": "never"}
            for _ in range(args.runs):
                evict(files)
                before = module(inv, measure)
                down = restart()
                cold.append({"downtime_s": down, "resident_pct": before["resident_percent_before"],
                             "standin_read_s": standin_read_s(), "bytes": before["bytes_total"]})
                evict(files)
                pre = module(inv, {"paths": [model_dir], "parallelism": args.parallelism})
                before = module(inv, measure)
                down = restart()
                warm.append({"downtime_s": down, "resident_pct": before["resident_percent_before"],
                             "standin_read_s": standin_read_s(), "bytes_read": pre["bytes_read"],
                             "read_s": pre["read_seconds"], "module_wall_s": pre["wall_s"],
                             "resident_pct_evicted": pre["resident_percent_before"],
                             "skip_reason": pre["skip_reason"], "files": pre["files"]})
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"bench/preread.py: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept: container {HOST}")
        else:
            simfleet.down([HOST])

    def med(rows: list[dict[str, Any]], key: str) -> float:
        values = [r[key] for r in rows if r[key] is not None]
        return statistics.median(values) if values else float("nan")

    size = cold[0]["bytes"]
    ratio = med(cold, "downtime_s") / med(warm, "downtime_s")
    read_s = med(warm, "read_s")
    print(f"checkpoint {size / 1e6:.0f} MB in {warm[0]['files']} weight files; stand-in stop {args.drain:g} s + load "
          f"{args.load:g} s beyond its read; systemctl restart until /health 200; {args.runs} run(s) each, median shown")
    print(f"{'measure':52} {'value':>10}")
    print(f"{'downtime, cold (checkpoint evicted), s':52} {med(cold, 'downtime_s'):10.2f}")
    print(f"{'downtime, pre-read, s':52} {med(warm, 'downtime_s'):10.2f}")
    print(f"{'ratio cold / pre-read':52} {ratio:10.2f}")
    print(f"{'residency before the stop, cold, %':52} {med(cold, 'resident_pct'):10.1f}")
    print(f"{'residency before the stop, pre-read, %':52} {med(warm, 'resident_pct'):10.1f}")
    print(f"{'pre-read: MB read':52} {med(warm, 'bytes_read') / 1e6:10.0f}")
    print(f"{'pre-read: module read, s':52} {read_s:10.2f}")
    print(f"{'pre-read: module read, MB/s':52} {med(warm, 'bytes_read') / 1e6 / read_s if read_s else 0:10.0f}")
    print(f"{'pre-read: whole ad hoc module run, s':52} {med(warm, 'module_wall_s'):10.2f}")
    print(f"{'stand-in read of the files at start, cold, s':52} {med(cold, 'standin_read_s'):10.2f}")
    print(f"{'stand-in read of the files at start, pre-read, s':52} {med(warm, 'standin_read_s'):10.2f}")
    skipped = [r["skip_reason"] for r in warm if r["skip_reason"]]
    if skipped:
        print(f"WARNING: the pre-read was skipped: {skipped[0]}")
    if args.json:
        args.json.write_text(json.dumps({
            "benchmark": "preread", "runs": args.runs, "load_s": args.load, "drain_s": args.drain,
            "checkpoint_bytes": size, "downtime_cold_s": med(cold, "downtime_s"),
            "downtime_preread_s": med(warm, "downtime_s"), "ratio": ratio,
            "resident_pct_cold": med(cold, "resident_pct"), "resident_pct_preread": med(warm, "resident_pct"),
            "preread_bytes": med(warm, "bytes_read"), "preread_s": read_s,
            "preread_module_wall_s": med(warm, "module_wall_s"),
            "standin_read_cold_s": med(cold, "standin_read_s"), "standin_read_preread_s": med(warm, "standin_read_s"),
            "cold": cold, "preread": warm}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
