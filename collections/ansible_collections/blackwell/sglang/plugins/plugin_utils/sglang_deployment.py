# SPDX-License-Identifier: Apache-2.0
"""The input contract over the whole deployment: every host of every group, before any host changes.

The validate action plans the GPU hosts (sglang_hostplan); this module checks what the planner does not read:
every variable of :data:`sglang_contract.CONTRACT` that the inventory sets for any host (gateways, monitoring
hosts, the GPU hosts' other roles), the size of every such value before anything walks it (a YAML alias chain is
refused, not expanded), and the ports each host binds across the roles that run on it. Values come from the
inventory only; the roles' defaults are the project's own and are read from their ``defaults/main.yml`` where a
check needs the effective value (ports, the roots of service directories, the gateway's settings): the callers pass
them in, and no default is kept in Python.

Controller-only; used by ``plugins/action/validate.py``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from ansible import constants as C
from ansible.errors import AnsibleUndefinedVariable
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway as gateway
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Problem
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

SERVERS_GROUP = "sglang_servers"
ROUTERS_GROUP = "sglang_routers"
MONITORING_GROUP = "sglang_monitoring"

# The ports each group's roles bind on a host, by the variable that sets them (the roles' plays: deploy.yml,
# monitoring.yml). The model peer listens only while a fan-out copies weights, the kernel peer only while a rollout
# copies the canary's built kernels, but on the same host.
GROUP_PORTS = {
    SERVERS_GROUP: ("sglang_model_peer_port", "sglang_rollout_kernel_share_port", "node_exporter_port",
                    "dcgm_exporter_port"),
    # The handover ports are bound only while roles/sglang_router hands the gateway's port over, on the same host.
    ROUTERS_GROUP: ("sglang_router_port", "sglang_router_prometheus_port", "sglang_router_handover_port",
                    "sglang_router_handover_prometheus_port", "node_exporter_port"),
    MONITORING_GROUP: ("sglang_monitoring_port",),
}
# The roles whose defaults hold the default of each such port.
PORT_ROLES = ("sglang", "sglang_rollout", "node_exporter", "dcgm_exporter", "sglang_router", "sglang_monitoring")
# The roles whose defaults hold the defaults of the plan's inputs (nvidia_driver: the driver the stack rules check), of
# the contract's roots and project directories and of the gateway's settings, dependency first (a later role's default
# wins, as a role's own over its dependency's).
DEFAULTS_ROLES = ("nvidia_driver", "sglang_common", "sglang", "sglang_server", "sglang_router", "sglang_worker_tls")
# The gateway's group of workers where its inventory does not set one: roles/sglang_router's default.
WORKER_GROUP_VAR = "sglang_router_worker_group"
# Every role default the deployment's checks read: the gateway's (which include the contract's context) and its group.
DEFAULTS_READ = (*gateway.GATEWAY_DEFAULTS_READ, WORKER_GROUP_VAR)


def defaults_file(role_dir: str) -> dict[str, Any]:
    """The role's ``defaults/main.yml`` as written (templates unexpanded); empty when it has none."""
    try:
        with open(os.path.join(role_dir, "defaults", "main.yml"), encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError:
        return {}
    return data if isinstance(data, dict) else {}


def role_search_path(*first: str) -> list[str]:
    """Where a role is looked for outside a play's own search: ``first`` (e.g. the directory of the running role's
    siblings), this collection's ``roles/`` (as ``ansible-galaxy collection install`` lays it out), the roles path
    (ansible.cfg ``roles_path``)."""
    return [*first, str(Path(__file__).resolve().parents[2] / "roles"), *C.DEFAULT_ROLES_PATH]


def roles_defaults(search: Iterable[str], roles: Iterable[str] = DEFAULTS_ROLES) -> dict[str, Any]:
    """The defaults files of ``roles`` (each the first found in ``search``), merged in order, templates unexpanded."""
    places = list(search)
    out: dict[str, Any] = {}
    for role in roles:
        found = next((os.path.join(p, role) for p in places if os.path.isdir(os.path.join(p, role))), None)
        if found is None:
            raise LookupError(f"the role {role} (whose defaults the checks read) is in none of {', '.join(places)}")
        out.update(defaults_file(found))
    return out


def rendered_defaults(defaults: Mapping[str, Any], names: Iterable[str], variables: Mapping[str, Any] | None = None,
                      filters: Mapping[str, Callable[..., Any]] | None = None) -> dict[str, Any]:
    """``names`` among ``defaults`` (the roles' defaults files, merged), each template rendered with the roles'
    defaults alone (``sglang_bundle_dir: "{{ bundle_dir | default('/srv/sglang-bundle') }}"``), not with any host's
    variables: what every host is checked against. Plain sandboxed Jinja: no Ansible templating, whose trust rules
    would leave a string read as plain YAML unrendered. A name no role defines is left out; a template that does not
    render raises jinja2.TemplateError.

    ``variables``: values in place of the defaults of the same names, and those a play provides (a role's
    ``role_path``), while rendering; ``filters``: the filters the templates use, by the names they use
    (``blackwell.sglang.sglang_lock_name``)."""
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    env.filters.update(filters or {})
    context = {**defaults, **(variables or {})}
    out: dict[str, Any] = {}
    for name in names:
        if name in defaults:
            value = defaults[name]
            is_template = isinstance(value, str) and ("{{" in value or "{%" in value)
            out[name] = env.from_string(str(value)).render(context) if is_template else value
    return out


def oversized(raw: Mapping[str, Any]) -> list[Problem]:
    """A problem for each contract or launch variable whose value is too big or deep to read, found without
    expanding it; the caller reads none of the host's variables when there is one."""
    out = []
    for name in list(raw):
        if not isinstance(name, str) or not name.startswith(("sglang", "nvidia", "hf_", "cuda", "dcgm", "node_", "gpu_")):
            continue
        try:
            value = raw[name]
        except Exception:  # noqa: BLE001 (a value that does not template: the planner names it)
            continue
        why = contract.size_problem(value)
        if why:
            out.append(Problem("input.size", name, None, f"{name}: {why}; nothing of it was read.",
                               f"write {name} out plainly (no chains of YAML aliases), within the bounds"))
    return out


# The prefixes of the variables the collection's roles read: a name with one of them that no role reads is a typo.
PREFIXES = ("sglang_", "nvidia_", "cuda_toolkit_", "dcgm_exporter_", "node_exporter_", "gpu_health_")


def unknown_problems(names: Iterable[str], known: Iterable[str]) -> list[Problem]:
    """A warning for each variable with a role's prefix that no role reads (``sglang_arg:`` for ``sglang_args:``),
    with the closest names: it would otherwise pass unnoticed and change nothing."""
    known_set = set(known) | set(contract.CONTRACT)
    out = []
    for name in sorted(n for n in names if isinstance(n, str) and n.startswith(PREFIXES) and n not in known_set):
        close = difflib.get_close_matches(name, sorted(known_set), n=3, cutoff=0.75)
        out.append(Problem("input.unknown", name, None,
                           f"{name} is not a variable of any role of the collection: it changes nothing"
                           + (f" (did you mean {' or '.join(close)}?)" if close else "."),
                           f"rename it to {close[0]}" if close else "remove it, or check its name in the roles' README",
                           level="warning"))
    return out


def _read(names: Iterable[str], read: Callable[[str], Any]) -> tuple[dict[str, Any], list[Problem]]:
    """``names`` read with ``read`` (templated), and a problem for each that does not template, never a crash.

    A value that uses a variable only a role defines (e.g. nvidia_driver_repo_key_url: "{{ nvidia_driver_repo_url
    }}...") is left out: the role checks it at its entry (check_inputs), with its defaults, before it changes anything.
    """
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for name in names:
        try:
            values[name] = read(name)
        except AnsibleUndefinedVariable:
            continue
        except Exception as exc:  # noqa: BLE001 (a variable that does not template: named, never a crash)
            problems.append(Problem("host.template", name, None, f"{name} does not template: {str(exc).splitlines()[0]}",
                                    "fix the variable's Jinja expression or define what it uses"))
    return values, problems


def contract_problems(host: str, raw: Mapping[str, Any], read: Callable[[str], Any],
                      skip: Iterable[str] = (), defaults: Mapping[str, Any] | None = None) -> list[Problem]:
    """The contract's problems of the variables ``host``'s inventory sets (``raw``: its variables as Ansible keeps
    them), each read with ``read`` (templated); ``skip``: variables another check reads (the planner's);
    ``defaults``: the roles' defaults of contract.CONTEXT_DEFAULTS (from their defaults files), required."""
    known = contract.role_defaults(defaults, contract.CONTEXT_DEFAULTS, "contract_problems")
    present = set(raw) - set(skip)  # names only: a Mapping's "in" would read (template) the value
    values, problems = _read([n for n in contract.CONTRACT if n in present], read)
    roots = (contract.SERVICE_ROOTS_VAR, contract.MODELS_DIR_VAR)
    context = contract.context_of({k: v for k, v in values.items() if k in roots}, known)
    for finding in contract.check(values, context=context):
        problems.append(Problem("input.contract", finding.variable, finding.value,
                                f"{host}: {finding.message()}", finding.fix()))
    return problems


def gateway_problems(host: str, raw: Mapping[str, Any], read: Callable[[str], Any], hostvars: Any,
                     groups: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> list[Problem]:
    """A gateway host's settings and what it will render from its workers' variables (their URLs, their keys):
    sglang_gateway.gateway_problems over the ``sglang_router_*`` variables its inventory sets and the GPU hosts of
    its ``sglang_router_worker_group``, with the roles' ``defaults`` (:data:`DEFAULTS_READ`, from their defaults
    files; required). A variable that does not template is named, never a crash."""
    known = contract.role_defaults(defaults, DEFAULTS_READ, "gateway_problems")
    values, problems = _read([n for n in raw if isinstance(n, str) and n.startswith("sglang_router_")], read)
    group = values.get(WORKER_GROUP_VAR, known[WORKER_GROUP_VAR])
    members = groups.get(group) if isinstance(group, str) else None
    workers = {w: hostvars[w] for w in (members or []) if w in hostvars}
    for problem in gateway.gateway_problems(values, workers, known):
        where = "" if problem.message.startswith(("GPU host", host)) else f"{host}: "
        problems.append(Problem(problem.rule, problem.variable, problem.value, where + problem.message, problem.fix,
                                problem.source, problem.level))
    return problems


def port_problems(host: str, groups_of_host: Iterable[str], values: Mapping[str, Any], defaults: Mapping[str, Any],
                  instance_ports: Mapping[int, str] | None = None) -> list[Problem]:
    """Two things on one host bind one port: each role's listener (by the groups the host is in) and the
    SGLang instances' ports (``instance_ports``: port -> what binds it, from the plan)."""
    taken: dict[int, str] = dict(instance_ports or {})
    problems: list[Problem] = []
    seen: set[str] = set()
    for group in groups_of_host:
        for var in GROUP_PORTS.get(group, ()):
            if var in seen:
                continue
            seen.add(var)
            value = values.get(var, defaults.get(var))
            try:
                port = int(value)
            except (TypeError, ValueError):
                continue  # the contract names a port that is not one
            if port in taken:
                problems.append(Problem("host.port", var, port,
                                        f"{host}: {var} {port} is also the port of {taken[port]} on this host.",
                                        f"give {var} a port of its own on {host}"))
            else:
                taken[port] = var
    return problems
