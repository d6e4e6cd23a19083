#!/usr/bin/env python3
"""Validation at fleet scale: playbooks/validate.yml against the assert playbook a user would write.

Generates inventories of N hosts (every 10th host invalid: the incident's speculative flags),
times `ansible-playbook playbooks/validate.yml` (one controller-side pass over all hosts), and,
in the same run, the baseline: one `ansible.builtin.assert` task per rule per host (8 rules,
connection local, the project's ansible.cfg). Prints a table with the ratio.

Usage: bench/validate_scale.py [--sizes 10,100,1000,5000] [--baseline-max 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
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


def inventory(directory: Path, hosts: int) -> Path:
    """hosts.yml with N hosts; group vars from the sample; every 10th host has the incident's flags."""
    sample = yaml.safe_load((REPO / "inventory" / "sample" / "host_vars" / "blackwell-01.yml").read_text())
    group = yaml.safe_load((REPO / "inventory" / "sample" / "group_vars" / "sglang_servers.yml").read_text())
    group.update(sample)
    bad = {**sample["sglang_args"], "speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}
    members = {f"gpu-{i:05d}": ({"sglang_args": bad} if i % 10 == 9 else {}) for i in range(hosts)}
    path = directory / f"hosts-{hosts}.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": members, "vars": group}}}}))
    return path


def timed(playbook: Path, inv: Path) -> tuple[float, int]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inv), str(playbook)], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,5000")
    parser.add_argument("--baseline-max", type=int, default=1000, help="largest size the slow baseline runs at")
    parser.add_argument("--json", type=Path, help="also write the rows to this file as JSON")
    args = parser.parse_args()
    rows: list[dict[str, float | int | None]] = []
    print(f"{'hosts':>6} {'validate.yml s':>15} {'per host ms':>12} {'baseline s':>11} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        baseline = Path(tmp) / "baseline.yml"
        baseline.write_text(BASELINE)
        for size in (int(s) for s in args.sizes.split(",")):
            inv = inventory(Path(tmp), size)
            ours, rc = timed(REPO / "playbooks" / "validate.yml", inv)
            assert rc == 2, f"validate.yml exit {rc} (expected 2: some hosts are invalid)"
            if size <= args.baseline_max:
                base, _ = timed(baseline, inv)
                row = f"{base:11.2f} {base / ours:6.1f}x"
            else:
                base, row = None, f"{'-':>11} {'-':>7}"
            print(f"{size:6d} {ours:15.2f} {ours / size * 1000:12.2f} {row}", flush=True)
            rows.append({"hosts": size, "ours_s": ours, "baseline_s": base, "ratio": base / ours if base else None})
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "validate_scale", "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
