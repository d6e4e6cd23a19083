"""The sample inventory's reference host, shared by the unit tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "inventory" / "sample"
# The incident: NEXTN with draft tokens and topk but no num_steps.
INCIDENT = {"speculative_num_draft_tokens": 2, "speculative_eagle_topk": 1}


def load_reference() -> dict[str, Any]:
    """The reference host's variables: the sample group_vars, then its host_vars."""
    hostvars: dict[str, Any] = {}
    for path in (SAMPLE / "group_vars" / "sglang_servers.yml", SAMPLE / "host_vars" / "blackwell-01.yml"):
        hostvars.update(yaml.safe_load(path.read_text(encoding="utf-8")))
    return hostvars


def host_with(args: dict[str, Any] | None = None, **hostvars: Any) -> dict[str, Any]:
    """A fresh copy of the reference host's variables with ``sglang_args`` changes and host-variable overrides."""
    host = copy.deepcopy(_REFERENCE)
    host["sglang_args"].update(args or {})
    host.update(hostvars)
    return host


_REFERENCE = load_reference()
