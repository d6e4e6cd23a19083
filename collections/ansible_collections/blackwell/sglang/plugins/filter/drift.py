# SPDX-License-Identifier: Apache-2.0
"""Filters of playbooks/drift.yml: what each SGLang instance runs against its plan (plugin_utils/sglang_drift.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_drift import (
    fleet_drift,
    fleet_table,
    instance_drift,
    probe_keys,
)


class FilterModule:
    """blackwell.sglang drift filters."""

    def filters(self) -> dict[str, Any]:
        return {"server_drift": instance_drift, "drift_probe_keys": probe_keys, "drift_table": fleet_table,
                "drift_fleet": fleet_drift}
