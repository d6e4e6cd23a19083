"""The launch plan of one inventory host, computed on the controller the same way everywhere.

The validate action plugin computes it for every host of a run; the filters
(``blackwell.sglang.server_endpoint``) compute it for one host when a role or playbook needs a
part of it (the router's worker URL, the rollout's health gate). Both call :func:`host_plan` on the
same variables, so they cannot disagree. Controller-only: modules never import it.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_multinode import (
    ADDR_VAR,
    GROUP_VAR,
    PORT_VAR,
    Getter,
    Layout,
    LayoutError,
    host_layout,
    hostvars_getter,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_schema import secret_host_vars
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_validate import (
    ROLE_VARS,
    Problem,
    Result,
    validate_host,
)

# The host variables the validator reads; nothing else is templated.
HOST_VARS = (
    "sglang_version",
    "sglang_model_path",
    "sglang_args",
    "sglang_env",
    "nvidia_gpu_count",
    "nvidia_gpu_compute_capability",
    "sglang_model_architecture",
    "sglang_model_quantization",
    "sglang_model_max_context",
    "sglang_listen_host",
    "sglang_allow_unauthenticated",
    "sglang_spec",
    "hf_token",
    GROUP_VAR,
    *ROLE_VARS,
    *secret_host_vars(),
)


def read_host_vars(hostvars: Any, host: str) -> dict[str, Any]:
    """Template only the variables the validator needs from one host's hostvars.

    A ``sglang_server_model_path`` set in the inventory is the directory the server loads from.
    """
    host_vars = hostvars[host]
    raw = {name: host_vars[name] for name in HOST_VARS if name in host_vars}
    if "sglang_server_model_path" in raw:
        raw["sglang_model_local_path"] = raw.pop("sglang_server_model_path")
    return raw


def host_plan(host: str, hostvars: Any, groups: Any, spec: str | None = None, get: Getter | None = None) -> tuple[Result, Layout | None]:
    """Validate ``host`` as the validate action does: its variables, its multi-node layout, the hand-typed nnodes check.

    ``spec`` is the run's override of the host's ``sglang_spec`` (None: the host's own mode).

    Problems of the variables themselves (a Jinja error, a misdeclared group) become errors of the result.
    """
    layout = None
    try:
        raw = read_host_vars(hostvars, host)
        layout = host_layout(host, get or hostvars_getter(hostvars), groups)
        if layout is not None:
            raw["sglang_multinode"] = layout.as_dict()
        outcome = validate_host(raw, spec=spec)
        check_manual_multinode(host, raw, outcome)
    except LayoutError as exc:
        outcome = Result(errors=[Problem("multinode.layout", exc.variable, exc.value, exc.message, exc.fix)])
    except AnsibleError as exc:  # a host variable that does not template (undefined, syntax)
        outcome = Result(errors=[Problem("host.template", "host variables", None, to_text(exc).splitlines()[0],
                                         "fix the variable's Jinja expression or define what it uses")])
    return outcome, layout


def check_manual_multinode(host: str, raw: dict[str, Any], outcome: Result) -> None:
    """nnodes > 1 typed by hand, without a group: the rollout could not treat the nodes as one instance."""
    if raw.get(GROUP_VAR):
        return
    nnodes = outcome.args.get("nnodes") or 1  # typed by the validator; absent when its value was rejected
    if nnodes > 1:
        outcome.errors.append(Problem(
            "multinode.manual", "sglang_args.nnodes", nnodes,
            f"{host} types nnodes/node_rank/dist_init_addr by hand: the playbooks would restart and roll out its nodes "
            "one by one, which breaks a running multi-node instance.",
            f"put the instance's hosts in one inventory group in node-rank order, set {GROUP_VAR}: <group> for them "
            f"({PORT_VAR} / {ADDR_VAR} optional) and remove nnodes, node_rank and dist_init_addr from sglang_args"))
