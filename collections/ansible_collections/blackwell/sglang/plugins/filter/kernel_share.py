# SPDX-License-Identifier: Apache-2.0
"""Filters of roles/sglang_rollout's kernel sharing (plugin_utils/sglang_kernel_share.py)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_kernel_share import peer_config, share_plan


def kernel_share_plan(instances: Any, names: Any, sources: Any) -> list[dict[str, Any]]:
    """Which instances of this host copy their kernel directory from which source (see share_plan)."""
    try:
        return share_plan(list(instances or []), list(names or []), list(sources or []))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"kernel_share_plan: {exc}") from None


def kernel_peer_config(kernels: Any, bind: Any, port: Any, token_file: Any) -> dict[str, Any]:
    """A source's peer server configuration for the kernel directories it published."""
    try:
        return peer_config(list(kernels or []), str(bind), int(port), str(token_file))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"kernel_peer_config: {exc}") from None


class FilterModule:
    """blackwell.sglang kernel sharing filters."""

    def filters(self) -> dict[str, Any]:
        return {"kernel_share_plan": kernel_share_plan, "kernel_peer_config": kernel_peer_config}
