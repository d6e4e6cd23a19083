"""The roles' defaults the planner and the checks read, as the validate action reads them, for tests that call those
functions directly: from the roles' own ``defaults/main.yml`` (the one source; no copy is kept in Python), each
template among them rendered with the roles' defaults alone (``{{ bundle_dir | default('/srv/sglang-bundle') }}``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_deployment as deployment
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import PLANNER_DEFAULTS
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = Path(__file__).resolve().parents[2]
FILES = deployment.roles_defaults([str(REPO / "roles")])


def _rendered(value: Any) -> Any:
    if isinstance(value, str) and "{{" in value:
        return ImmutableSandboxedEnvironment(undefined=StrictUndefined).from_string(value).render(FILES)
    return value


# Every role default the planner, the contract's context and the gateway's checks read.
ROLE_DEFAULTS: dict[str, Any] = {n: _rendered(FILES[n]) for n in dict.fromkeys((*PLANNER_DEFAULTS, *deployment.DEFAULTS_READ))}
# The context a host that sets none of the roots or directories is checked against.
CONTEXT = contract.context_of({}, ROLE_DEFAULTS)
