"""Molecule's converge and idempotence run with the project's ansible.cfg settings that change how a run goes.

Molecule writes its own ansible.cfg for converge and idempotence (from .config/molecule/config.yml's
config_options), so a setting of the project's ansible.cfg is missing there unless repeated. Without
pipelining, for one, each module costs four `docker exec`s instead of one (a no-op deploy: 357 execs instead
of 114). This test keeps the repeated settings equal to the project's.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# Settings of the project's ansible.cfg that molecule's runs must share: (section, key).
SHARED = [("defaults", "gathering"), ("defaults", "gather_subset"), ("defaults", "forks"),
          ("defaults", "callback_result_format"), ("connection", "pipelining")]


def test_molecule_runs_with_the_project_ansible_cfg_settings() -> None:
    project = configparser.ConfigParser(interpolation=None)
    project.read(REPO / "ansible.cfg", encoding="utf-8")
    molecule = yaml.safe_load((REPO / ".config" / "molecule" / "config.yml").read_text(encoding="utf-8"))
    options = molecule["provisioner"]["config_options"]
    for section, key in SHARED:
        assert str(options[section][key]).lower() == project[section][key].lower(), f"[{section}] {key}"
