#!/usr/bin/env python3
"""Validation at fleet scale: playbooks/validate.yml against the assert playbook a user would write.

Three parts, every figure against a baseline measured in the same run:

classic  inventories of N hosts in one hosts.yml (every 10th host invalid: the incident's speculative
         flags); `ansible-playbook playbooks/validate.yml` (one controller-side pass over all hosts) against
         one `ansible.builtin.assert` task per rule per host (8 rules, connection local, the project's
         ansible.cfg), with the ratio.
layouts  the same hosts in both inventory layouts, one hosts.yml with the variables inline and one
         host_vars/<host>.yml per host (what a real fleet keeps), at --layout-sizes: validate.yml against
         `ansible-playbook --list-hosts` on the same inventory (Ansible's start-up, inventory parsing and
         playbook loading), run alternately (--runs of each, medians). "beyond" is validate's own time.
         With per-host files Ansible reads each host's file when a task first asks for the host's
         variables, which --list-hosts never does: "read vars" is a playbook that reads one variable of every
         host (one `hostvars` access per host, as any per-host task does), the cost of the layout itself.
render   --render-hosts valid hosts, one host_vars file each and no two alike (each has its own
         environment variable): `validate.yml -e render_dir=DIR` against the same command without render_dir
         (the files are rendered by the function the role installs them with).

Usage: bench/validate_scale.py [--parts classic,layouts,render] [--sizes 10,100,1000,5000] [--baseline-max 1000]
                               [--layout-sizes 1000,5000] [--render-hosts 1000]
                               [--runs 1] [--json FILE]
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

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

BASELINE = """---
- name: Validate with one assert per rule per host (what a user writes without the project)
  hosts: sglang_servers
  gather_facts: false
  connection: local
  tasks:
    - name: Parallel sizes fit the GPUs
      ansible.builtin.assert:
        that: (sglang_args.tp_size | default(1)) * (sglang_args.pp_size | default(1)) <= nvidia_gpu_count
    - name: mem_fraction_static between 0 and 1
      ansible.builtin.assert:
        that: sglang_args.mem_fraction_static is not defined or (0 < sglang_args.mem_fraction_static < 1)
    - name: Speculative triple all or none
      ansible.builtin.assert:
        that: >-
          sglang_args.speculative_num_steps is defined or
          (sglang_args.speculative_eagle_topk is not defined and sglang_args.speculative_num_draft_tokens is not defined)
    - name: No FlashAttention 3 on SM120
      ansible.builtin.assert:
        that: sglang_args.attention_backend | default('') != 'fa3'
    - name: No SM100-only MoE runner
      ansible.builtin.assert:
        that: sglang_args.moe_runner_backend | default('') not in ['flashinfer_trtllm', 'flashinfer_trtllm_routed']
    - name: NVFP4 checkpoint needs modelopt_fp4
      ansible.builtin.assert:
        that: "'NVFP4' not in sglang_model_path or sglang_args.quantization | default('') == 'modelopt_fp4'"
    - name: served_model_name without a colon
      ansible.builtin.assert:
        that: "':' not in (sglang_args.served_model_name | default(''))"
    - name: Context length within the model's maximum
      ansible.builtin.assert:
        that: sglang_args.context_length | default(0) <= 262144
"""


READ_VARS = """---
- name: Read one variable of every host (what any per-host task costs the inventory)
  hosts: sglang_servers
  gather_facts: false
  tasks:
    - name: One hostvars access per host
      ansible.builtin.debug:
        msg: "{{ ansible_play_hosts_all | map('extract', hostvars, 'sglang_model_path') | list | length }}"
      run_once: true
"""

def _hosts(hosts: int) -> list[str]:
    return [f"gpu-{i:05d}" for i in range(hosts)]


def inventory(directory: Path, hosts: int, layout: str = "inline", invalid: bool = True, distinct: bool = False) -> Path:
    """N hosts with the sample's group and host variables; every 10th has the incident's flags (``invalid``).

    ``layout``: ``inline`` (one hosts.yml, the sample's variables as group vars, changes per host inline) or
    ``files`` (hosts.yml lists the hosts; group_vars/sglang_servers.yml; one host_vars/<host>.yml each, with the
    sample host's variables). ``distinct``: every host gets an environment variable of its own.
    """
    sample = yaml.safe_load((REPO / "inventory" / "sample" / "host_vars" / "blackwell-01.yml").read_text())
    group = yaml.safe_load((REPO / "inventory" / "sample" / "group_vars" / "sglang_servers.yml").read_text())
    bad = {**sample["sglang_args"], "speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}

    def own(i: int, name: str) -> dict[str, object]:
        data: dict[str, object] = {"sglang_args": bad} if invalid and i % 10 == 9 else {}
        if distinct:
            data["sglang_env"] = {**sample.get("sglang_env", {}), "HOST_TAG": name}
        return data

    root = directory / f"{layout}-{hosts}{'-valid' if not invalid else ''}{'-distinct' if distinct else ''}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    if layout == "inline":
        group.update(sample)
        members = {name: own(i, name) for i, name in enumerate(_hosts(hosts))}
        (root / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": members, "vars": group}}}}))
        return root / "hosts.yml"
    (root / "group_vars").mkdir()
    (root / "host_vars").mkdir()
    (root / "group_vars" / "sglang_servers.yml").write_text(yaml.safe_dump(group))
    for i, name in enumerate(_hosts(hosts)):
        (root / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump({**sample, **own(i, name)}))
    (root / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": dict.fromkeys(_hosts(hosts))}}}}))
    return root


def timed(playbook: Path, inv: Path, *extra: str) -> tuple[float, int]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inv), str(playbook), *extra], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start, proc.returncode


VALIDATE = REPO / "playbooks" / "validate.yml"


def classic(tmp: Path, sizes: list[int], baseline_max: int) -> list[dict[str, float | int | None]]:
    rows: list[dict[str, float | int | None]] = []
    print(f"{'hosts':>6} {'validate.yml s':>15} {'per host ms':>12} {'baseline s':>11} {'ratio':>7}")
    baseline = tmp / "baseline.yml"
    baseline.write_text(BASELINE)
    for size in sizes:
        inv = inventory(tmp, size)
        ours, rc = timed(VALIDATE, inv)
        assert rc == 2, f"validate.yml exit {rc} (expected 2: some hosts are invalid)"
        if size <= baseline_max:
            base, _ = timed(baseline, inv)
            row = f"{base:11.2f} {base / ours:6.1f}x"
        else:
            base, row = None, f"{'-':>11} {'-':>7}"
        print(f"{size:6d} {ours:15.2f} {ours / size * 1000:12.2f} {row}", flush=True)
        rows.append({"hosts": size, "ours_s": ours, "baseline_s": base, "ratio": base / ours if base else None})
    return rows


def layouts(tmp: Path, sizes: list[int], runs: int) -> list[dict[str, float | int | str]]:
    """validate.yml, --list-hosts and the read-vars playbook on both layouts, alternately; medians."""
    rows: list[dict[str, float | int | str]] = []
    read_vars = tmp / "read_vars.yml"
    read_vars.write_text(READ_VARS)
    print(f"{'hosts':>6} {'layout':>13} {'validate s':>11} {'list-hosts s':>13} {'beyond s':>9} {'read vars s':>12}"
          f" {'beyond read vars s':>19}")
    for size in sizes:
        for layout in ("inline", "files"):
            inv = inventory(tmp, size, layout)
            seen: dict[str, list[float]] = {"validate": [], "list": [], "read": []}
            for _ in range(runs):
                took, rc = timed(VALIDATE, inv, "--list-hosts")
                assert rc == 0, f"--list-hosts exit {rc}"
                seen["list"].append(took)
                took, rc = timed(VALIDATE, inv)
                assert rc == 2, f"validate.yml exit {rc} (expected 2: some hosts are invalid)"
                seen["validate"].append(took)
                took, rc = timed(read_vars, inv)
                assert rc == 0, f"read-vars playbook exit {rc}"
                seen["read"].append(took)
            ours, base, read = (statistics.median(seen[k]) for k in ("validate", "list", "read"))
            name = "one hosts.yml" if layout == "inline" else "host_vars/*"
            print(f"{size:6d} {name:>13} {ours:11.2f} {base:13.2f} {ours - base:9.2f} {read:12.2f} {ours - read:19.2f}",
                  flush=True)
            rows.append({"hosts": size, "layout": layout, "ours_s": ours, "list_hosts_s": base, "beyond_s": ours - base,
                         "read_vars_s": read, "beyond_read_vars_s": ours - read, "runs": runs})
    return rows


def render(tmp: Path, hosts: int) -> dict[str, float | int]:
    """validate.yml -e render_dir against the same without it: the rendering's own time (the install's function,
    sglang_files.server_files, for every instance of every host)."""
    inv = inventory(tmp, hosts, "files", invalid=False, distinct=True)
    plan = tmp / "plan"
    plain, rc = timed(VALIDATE, inv)
    assert rc == 0, f"validate.yml exit {rc}"
    ours, rc = timed(VALIDATE, inv, "-e", f"render_dir={plan}")
    assert rc == 0, f"validate.yml -e render_dir exit {rc}"
    files = sum(1 for p in plan.rglob("*") if p.is_file() and p.parent != plan)
    rendered = [h for h in _hosts(hosts) if (plan / h / "sglang.service").is_file() and (plan / h / "sglang.env").is_file()]
    assert len(rendered) == hosts, f"{len(rendered)} of {hosts} hosts rendered"
    print(f"{'hosts':>6} {'files':>6} {'render_dir s':>13} {'without s':>10} {'rendering s':>12} {'per host ms':>12}")
    print(f"{hosts:6d} {files:6d} {ours:13.2f} {plain:10.2f} {ours - plain:12.2f} {1000 * (ours - plain) / hosts:12.2f}",
          flush=True)
    return {"hosts": hosts, "files": files, "ours_s": ours, "without_s": plain, "render_s": ours - plain}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="classic,layouts,render")
    parser.add_argument("--sizes", default="10,100,1000,5000")
    parser.add_argument("--baseline-max", type=int, default=1000, help="largest size the slow baseline runs at")
    parser.add_argument("--layout-sizes", default="1000,5000")
    parser.add_argument("--render-hosts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1, help="runs of each command in the layouts part (medians)")
    parser.add_argument("--json", type=Path, help="also write the rows to this file as JSON")
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    out: dict[str, object] = {"benchmark": "validate_scale", "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        if "classic" in parts:
            out["rows"] = classic(Path(tmp), [int(s) for s in args.sizes.split(",")], args.baseline_max)
        if "layouts" in parts:
            print("\nvalidate.yml by inventory layout, against --list-hosts on the same inventory (same run, alternately)")
            out["layouts"] = layouts(Path(tmp), [int(s) for s in args.layout_sizes.split(",")], args.runs)
        if "render" in parts:
            print("\nvalidate.yml -e render_dir=DIR, against the same without render_dir")
            out["render"] = render(Path(tmp), args.render_hosts)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
