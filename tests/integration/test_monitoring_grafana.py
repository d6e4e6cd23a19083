"""roles/sglang_monitoring's Grafana provisioning refused before anything changes when it cannot work: a provider
needs the dashboards directory it loads. The files themselves are checked on the monitoring scenario's host
(molecule/monitoring: the data source's URL answers that Prometheus's API)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def run_role(tmp_path: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """roles/sglang_monitoring on localhost in check mode (nothing it reaches may change), json callback."""
    play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
             "roles": [{"role": str(REPO / "roles" / "sglang_monitoring")}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json",
           "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["ansible-playbook", "--check", "-i", "localhost,", str(tmp_path / "play.yml"),
                           "-e", f"@{tmp_path / 'extra.json'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_provisioning_without_a_dashboards_directory_is_refused_first(tmp_path: Path) -> None:
    proc = run_role(tmp_path, {"sglang_monitoring_grafana_provisioning_dir": str(tmp_path / "provisioning")})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    tasks = json.loads(proc.stdout[proc.stdout.index("{"):])["plays"][0]["tasks"]
    failed = [t for t in tasks if t["hosts"]["localhost"].get("failed")]
    assert [t["task"]["name"].rsplit(" : ", 1)[-1] for t in failed] == ["Check Prometheus's address and arguments"]
    assert "set sglang_monitoring_grafana_dashboards_dir too" in failed[0]["hosts"]["localhost"]["msg"]
    # The argument spec, the contract check and this assert are all that ran: nothing was installed or written.
    assert [t["hosts"]["localhost"].get("action") for t in tasks][:1] == ["ansible.builtin.validate_argument_spec"]
    assert tasks[1]["task"]["name"].endswith("Check the role's variables against the input contract")
    assert len(tasks) == 3 and not (tmp_path / "provisioning").exists()
