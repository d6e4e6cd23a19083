# SPDX-License-Identifier: Apache-2.0
"""Filters that turn validated host variables into what the systemd unit renders."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_deployment as deployment
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway as _gateway
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import fanout_plan
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import model_key as _model_key
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import model_state as _model_state
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import peer_config as _peer_config
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import peer_url as _peer_url
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import server_files as _server_files
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import (
    systemd_env_quote,
    systemd_exec_lines,
    systemd_quote,
    systemd_text,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_gateway import address_problem, connect_address, is_loopback
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_gateway import file_problem as gateway_file_problem
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import (
    PLANNER_DEFAULTS,
    PUBLISHED,
    HostPlan,
    plan_host,
    read_host_vars,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import staged_models as _staged_models
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import (
    model_path_problem,
    path_problem,
    secret_var,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_lock import lock_name
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_multinode import LayoutError, host_layout, hostvars_getter
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_multinode import rollout_plan as _rollout_plan
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import load_schema
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import secret_host_vars as _all_secret_vars
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import format_report
from jinja2 import TemplateError


def sglang_lock_name(version: Any, torch_requirement: Any = "") -> str:
    """The file name of the hashed lock of SGLang ``version`` with ``torch_requirement`` (``sglang_lock``).

    Usage: ``sglang_version | blackwell.sglang.sglang_lock_name(sglang_torch_requirement)``
    -> ``'sglang-0.5.23-torch-2.14.1.txt'``.
    """
    return lock_name(str(version), str(torch_requirement or ""))


def secret_host_vars(version: Any = None) -> list[str]:
    """The host variables of the secret arguments of SGLang ``version`` (all releases' when it has no schema).

    Usage: ``sglang_version | blackwell.sglang.secret_host_vars`` -> ``['sglang_admin_api_key', 'sglang_api_key', ...]``.
    """
    try:
        return [secret_var(d) for d in sorted(load_schema(str(version)).secrets)]
    except KeyError:
        return list(_all_secret_vars())


@functools.lru_cache(maxsize=1)
def _roles_defaults() -> dict[str, Any]:
    """The roles' defaults files (sglang_deployment.DEFAULTS_ROLES: this collection's roles, else the roles path),
    merged as written, once a process."""
    try:
        return deployment.roles_defaults(deployment.role_search_path())
    except LookupError as exc:
        raise AnsibleFilterError(f"cannot read the roles' defaults: {exc}") from None


def roles_defaults_of(names: tuple[str, ...], needed_by: str) -> dict[str, Any]:
    """The roles' defaults of ``names``, for a filter that checks or plans what the run has not (a host outside the
    run's validation): from the roles' own defaults files, each template among them rendered with the roles'
    defaults alone (``{{ bundle_dir | default('/srv/sglang-bundle') }}``), as the validate action reads them."""
    try:
        rendered = deployment.rendered_defaults(_roles_defaults(), names)
    except TemplateError as exc:
        raise AnsibleFilterError(f"a roles' default of {', '.join(names)} does not render outside a play: {exc}") from None
    return contract.role_defaults(rendered, names, needed_by)


def _valid_plan(host: Any, hostvars: Any, groups: Mapping[str, Any], spec: str | None,
                role_vars: Mapping[str, Any] | None = None) -> HostPlan:
    plan = plan_host(str(host), hostvars, groups, spec, role_vars=role_vars,
                     role_defaults=roles_defaults_of(PLANNER_DEFAULTS, "the launch planner"))
    if not plan.ok:
        raise AnsibleFilterError("SGLang configuration rejected\n" + format_report(str(host), plan.result()))
    return plan


def _url(address: str, scheme: str, port: Any) -> str:
    return f"{scheme}://{f'[{address}]' if ':' in address else address}:{port}"


# roles/sglang_router's settings that say where and how its API answers (sglang_router_<key>).
ROUTER_SETTINGS = ("host", "port", "tls_cert_file", "tls_key_file", "ca_file", "api_key", "control_plane_api_key",
                   "allow_unauthenticated")
_ROUTER_SECRETS = ("api_key", "control_plane_api_key")
# Listen addresses that mean "every address", reached over loopback (any spelling: sglang_gateway.connect_address).
_ANY = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
_TRUTHY = {"true", "yes", "on", "1"}


def _router_problems(cfg: Mapping[str, Any]) -> list[str]:
    """``"sglang_router_<key>: why"`` for each router setting that cannot be used as given.

    The address is parsed (``sglang_gateway.address_problem``) and loopback decided by ``is_loopback`` (127.0.0.0/8,
    ::1 or exactly ``localhost``), never by a prefix: ``localhost.attacker.example`` listens beyond loopback.
    """
    out = []
    host = cfg["host"]
    if address_problem(host):
        out.append(f"sglang_router_host {host!r}: it must be an address or host name (e.g. 127.0.0.1 or 0.0.0.0): "
                   f"{address_problem(host)}")
    if not re.fullmatch(r"[1-9][0-9]{0,4}", str(cfg["port"])) or int(cfg["port"]) > 65535 or isinstance(cfg["port"], bool):
        out.append(f"sglang_router_port {cfg['port']!r}: it must be a TCP port, 1-65535")
    for key in ("tls_cert_file", "tls_key_file", "ca_file"):
        if cfg[key]:
            why = path_problem(cfg[key]) or gateway_file_problem(cfg[key])
            if why:
                out.append(f"sglang_router_{key} {cfg[key]!r}: {why}")
    if bool(cfg["tls_cert_file"]) != bool(cfg["tls_key_file"]):
        out.append("sglang_router_tls_cert_file and sglang_router_tls_key_file: set both (TLS) or neither")
    for key in _ROUTER_SECRETS:
        value = cfg[key]
        if not isinstance(value, str):
            out.append(f"sglang_router_{key}: it must be a string (value not shown)")
        elif value and not all("!" <= c <= "~" for c in value):
            out.append(f"sglang_router_{key}: an API key travels in an HTTP Authorization header, which carries "
                       "printable ASCII without spaces (value not shown)")
    open_port = not is_loopback(host)
    if open_port and not cfg["allow_unauthenticated"] and not (cfg["api_key"] and cfg["control_plane_api_key"]):
        missing = " and ".join(f"sglang_router_{k}" for k in _ROUTER_SECRETS if not cfg[k])
        out.append(f"sglang_router_host {host!r} listens beyond loopback without {missing}: anyone who reaches the "
                   "port could send requests or change the workers. Set the keys (from Ansible Vault), or "
                   "sglang_router_allow_unauthenticated: true if a firewall or the network already restricts it")
    return out


def router_endpoint(settings: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Where a router's API answers and how the role calls it, from its ``sglang_router_*`` settings.

    ``settings``: a mapping of the bare keys (``host``, ``port``, ...) as a play has them; or, with
    ``defaults`` (such a mapping), a router host's ``hostvars``, whose ``sglang_router_<key>`` values (its
    inventory and group values) win over ``defaults``. Returns ``{url, headers, ca_path, tls, api_key, problems}``: ``url`` is
    loopback when the router listens on every address, ``headers`` carry the control-plane key (a secret:
    use no_log), ``problems`` the settings that are refused (empty when usable). One computation for the
    router's own play (main.yml) and the GPU hosts' drain and join, which run with their own variables.
    Usage: ``hostvars[router] | blackwell.sglang.router_endpoint(__sglang_router_settings)``.
    """
    cfg = {}
    for key in ROUTER_SETTINGS:
        value = settings.get(key) if defaults is None else settings.get(f"sglang_router_{key}", defaults.get(key))
        cfg[key] = "" if value is None else value
    cfg["allow_unauthenticated"] = str(cfg["allow_unauthenticated"]).strip().lower() in _TRUTHY
    problems = _router_problems(cfg)
    host = str(cfg["host"])
    connect = _ANY.get(host) or connect_address(host)
    tls = bool(cfg["tls_cert_file"])
    key = cfg["control_plane_api_key"] if isinstance(cfg["control_plane_api_key"], str) else ""
    return {
        "url": _url(connect, "https" if tls else "http", cfg["port"]),
        "headers": {"Authorization": f"Bearer {key}"} if key else {},
        "ca_path": str(cfg["ca_file"] or ""),
        "tls": tls,
        # The data-plane key clients send (a secret: no_log), for the request through the router.
        "api_key": str(cfg["api_key"]) if not problems else "",
        "problems": problems,
    }


def published_plan(host: Any, hostvars: Any, spec: Any = None, any_spec: bool = False) -> Mapping[str, Any] | None:
    """``host``'s plan as this run published it (the ``sglang_server_plan`` fact: playbooks/validate.yml, then
    roles/sglang_server bound to its GPUs), when it was planned with the run's ``spec``; None when the run has not
    planned the host (a host outside --limit, a role run on its own), which is then planned here."""
    try:
        plan = hostvars[str(host)].get(PUBLISHED[0])
    except (KeyError, AttributeError):
        return None
    if not isinstance(plan, Mapping) or not isinstance(plan.get("instances"), list):
        return None
    return plan if any_spec or (plan.get("spec_override") or None) == (spec or None) else None


def instance_plans(host: str, hostvars: Any, groups: Mapping[str, Any], spec: str | None = None,
                   role_vars: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The launch plan of every SGLang instance of ``host``, as the validate task computed it, with secrets.

    Each plan: ``name``, ``service`` (the unit's name), ``gpus`` (nvidia-smi indices), ``argv``, ``env``,
    ``endpoint``, ``spec``, ``digest`` ... and the secret parts ``config`` and ``secret_env``: use only in
    ``no_log`` tasks and facts. ``role_vars``: the server role's own variables (service name, user,
    directories) as the play sets them. Raises with the validator's report for an invalid host.
    Usage: ``inventory_hostname | blackwell.sglang.instance_plans(hostvars, groups, spec | default(none), role_vars)``.
    """
    return [i.full() for i in _valid_plan(host, hostvars, groups, spec, role_vars).instances]


def server_instances(host: str, hostvars: Any, groups: Mapping[str, Any], spec: str | None = None) -> list[dict[str, Any]]:
    """Where each SGLang instance of ``host`` listens and how it is reached, from its launch plan.

    ``[{name, service, scheme, ca_file, listen_host, port, local_url, url, node_rank, served_model}]``: the same plans the validate
    task and the units use, so ``port``, ``--port`` and ``port: "31000"`` all give 31000. ``local_url`` is how
    the host itself reaches the server, ``url`` how others do (its ``ansible_host``, else its inventory name).
    Read from the host's published plan (``sglang_server_plan``) when the run has one; a host the run has not
    planned is planned here, with ``spec`` (default: its own ``sglang_spec``). Raises for an invalid host.
    Usage: ``inventory_hostname | blackwell.sglang.server_instances(hostvars, groups)``.
    """
    address = str(hostvars[host].get("ansible_host") or host)
    published = published_plan(host, hostvars, any_spec=True)  # names and endpoints do not depend on the spec mode
    instances = published["instances"] if published is not None else [
        i.public() for i in _valid_plan(host, hostvars, groups, spec).instances]
    out = []
    for inst in instances:
        endpoint = dict(inst["endpoint"])
        args = inst["args"]
        endpoint.update(name=inst["name"], service=inst["service"], url=_url(address, endpoint["scheme"], endpoint["port"]),
                        served_model=str(args.get("served_model_name") or args.get("model_path") or ""))
        out.append(endpoint)
    return out


def staged_models(host: str, hostvars: Any, role_vars: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The Hugging Face models to stage on ``host``: ``[{repo, revision, dir}]``, one per distinct model of its
    instances, into the directory its server loads from (the plan's ``--model-path``).

    ``role_vars``: roles/sglang's own settings as the play has them (sglang_models_dir, sglang_model_dir,
    sglang_model_revision, sglang_model_download).
    Usage: ``inventory_hostname | blackwell.sglang.staged_models(hostvars, {'sglang_models_dir': sglang_models_dir, ...})``.
    """
    raw = read_host_vars(hostvars, str(host))
    raw.update({k: v for k, v in (role_vars or {}).items() if v is not None})
    published = published_plan(host, hostvars, any_spec=True)  # the models do not depend on the spec mode
    defaults = roles_defaults_of(PLANNER_DEFAULTS, "staged_models")
    stages = [dict(m) for m in published["models"]] if published is not None else _staged_models(raw, defaults)
    context = contract.context_of(raw, defaults)
    for stage in stages:  # each directory is handed to the service user and written into
        problem = contract.service_dir_problem(stage["dir"], context) or model_path_problem(stage["repo"])
        if problem:
            raise AnsibleFilterError(f"{host}: cannot stage {stage['repo']!r} into {stage['dir']!r}: {problem}")
    return stages


def model_key(repo: Any, revision: Any) -> str:
    """The short name of (repo, revision) in the peers' URLs. Usage: ``repo | blackwell.sglang.model_key(revision)``."""
    return _model_key(str(repo), str(revision))


def model_state(models: Any, markers: Any, manifests: Any, endpoint: Any = "") -> dict[str, Any]:
    """What a host needs and holds: ``{models, needs, have, dirs}`` from the slurps of each model's marker and manifest.

    Usage: ``__sglang_models | blackwell.sglang.model_state(markers.results, manifests.results, sglang_model_hf_endpoint)``.
    """
    try:
        return _model_state(list(models), list(markers), list(manifests), str(endpoint or ""))
    except (ValueError, KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"model_state: {exc}") from None


def model_peer_config(state: Mapping[str, Any], token_file: str) -> dict[str, Any]:
    """A host's sglang-model-peer configuration from its ``__sglang_model_state``: bind, port, token_file, models.

    Usage: ``hostvars[host].__sglang_model_state | blackwell.sglang.model_peer_config('/run/sglang-model-peer/token')``.
    """
    try:
        return _peer_config(state, str(token_file))
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"model_peer_config: {exc}") from None


def model_peer_url(state: Mapping[str, Any], key: str) -> str:
    """The base URL of ``key`` on a peer, from the peer's ``__sglang_model_state`` (address, port).

    Usage: ``hostvars[source].__sglang_model_state | blackwell.sglang.model_peer_url(key)``.
    """
    return _peer_url(str(state["address"]), int(state["port"]), str(key))


def model_fanout_plan(play_hosts: Any, hostvars: Any, candidates: Any = (), seed_host: Any = None, enabled: Any = True,
                      per_source: Any = 1, fact: str = "__sglang_model_state") -> dict[str, Any]:
    """Who stages each (model, revision) from the Hub and who copies it from whom, in which round.

    Reads the ``fact`` (``{needs: [key], have: {key: manifest}, ...}``, set by roles/sglang) of the play's hosts
    and of the ``candidates`` (hosts that may hold a copy from earlier in the run, e.g. an earlier batch or the
    canary's play) from ``hostvars``. Only those hosts are looked up: reading every host's variables costs time.
    Usage: ``ansible_play_hosts | blackwell.sglang.model_fanout_plan(hostvars, ansible_play_hosts_all, seed, true, 1)``.
    """
    states: dict[str, Mapping[str, Any]] = {}
    for host in [*play_hosts, *(candidates or [])]:
        host = str(host)
        if host in states or host not in hostvars:
            continue
        state = hostvars[host].get(fact)
        if isinstance(state, Mapping):
            states[host] = state
    try:
        return fanout_plan([str(h) for h in play_hosts], states, str(seed_host) if seed_host else None,
                           bool(enabled), int(per_source))
    except ValueError as exc:
        raise AnsibleFilterError(f"model_fanout_plan: {exc}") from None


def multinode_layout(host: str, hostvars: Any, groups: Mapping[str, Any]) -> dict[str, Any] | None:
    """``host``'s place in its multi-node instance (group, members, nnodes, node_rank, dist_init_addr), or None.

    Usage: ``inventory_hostname | blackwell.sglang.multinode_layout(hostvars, groups)``.
    """
    published = published_plan(host, hostvars, any_spec=True)  # the layout does not depend on the spec mode
    if published is not None:
        return published.get("layout")
    try:
        layout = host_layout(str(host), hostvars_getter(hostvars), groups)
    except LayoutError as exc:
        raise AnsibleFilterError(f"{host}: {exc.variable}: {exc.message} Fix: {exc.fix}") from None
    return None if layout is None else layout.as_dict()


def rollout_plan(hosts: list[str], hostvars: Any, groups: Mapping[str, Any], canary: Any = 1, serial: Any = 1,
                 within: list[str] | None = None, all_at_once: Any = False) -> dict[str, Any]:
    """Canary hosts, remaining hosts and batch sizes that keep each multi-node instance in one batch.

    ``within``: only these hosts take part (the run's --limit); the order stays that of ``hosts``.
    A canary of more than one unit that takes every host, or more hosts than the first batch after it, is refused
    unless ``all_at_once`` (the run's -e rollout_all_at_once=true) says that is meant: it would restart them unbatched.
    ``serial`` exactly "100%" is all at once: no canary, every host in one batch.
    Usage: ``groups.sglang_servers | blackwell.sglang.rollout_plan(hostvars, groups, canary=1, serial=[1, "25%"])``.
    """
    keep = None if within is None else {str(h) for h in within}
    ordered = [str(h) for h in hosts if keep is None or str(h) in keep]
    try:
        plan = _rollout_plan(ordered, hostvars_getter(hostvars), groups, canary, serial)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from None
    # serial exactly "100%" is all at once by definition: no canary, one batch of every host.
    if str(serial).strip() == "100%":
        every = plan["canary"] + plan["rest"]
        return {"canary": [], "rest": every, "batches": [max(len(every), 1)]}
    if str(all_at_once).strip().lower() not in _TRUTHY:
        problem = canary_problem(plan, canary)
        if problem:
            raise AnsibleFilterError(problem)
    return plan


def canary_problem(plan: Mapping[str, Any], canary: Any) -> str | None:
    """Why the canary of a rollout plan defeats the batching (None when it does not): more than one unit that
    is every host of the run, or more hosts than the first batch after it."""
    units = int(canary)
    taken, rest, batches = len(plan["canary"]), len(plan["rest"]), list(plan["batches"])
    if units <= 1 or not taken:
        return None
    if rest and taken <= batches[0]:
        return None
    why = (f"it takes all {taken} host(s) of the run" if not rest
           else f"its {taken} host(s) are more than the first batch after it ({batches[0]} host(s))")
    return (f"rollout_canary={canary}: {why}, so they would all restart at once, unbatched. Lower rollout_canary "
            "(default 1) or raise rollout_serial; to restart them all at once on purpose, add -e rollout_all_at_once=true.")


def server_files(plan: Mapping[str, Any], settings: Mapping[str, Any], templates_dir: str,
                 mask_secrets: bool = False) -> dict[str, Any]:
    """The unit, environment file, secret ``--config`` YAML and spec record of one instance, from its full plan and
    the server role's settings (``sglang_files.server_files``, the one rendering function; secrets inside: no_log).

    Usage: ``__sglang_server_plan | blackwell.sglang.server_files(__sglang_server_settings, role_path ~ '/templates')``.
    """
    return _server_files(plan, settings, str(templates_dir), bool(mask_secrets))


class FilterModule:
    """blackwell.sglang filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "router_endpoint": router_endpoint,
            "multinode_layout": multinode_layout,
            "server_instances": server_instances,
            "instance_plans": instance_plans,
            "staged_models": staged_models,
            "model_key": model_key,
            "model_fanout_plan": model_fanout_plan,
            "model_state": model_state,
            "model_peer_config": model_peer_config,
            "model_peer_url": model_peer_url,
            "rollout_plan": rollout_plan,
            "server_files": server_files,
            "systemd_quote": systemd_quote,
            "systemd_exec_lines": systemd_exec_lines,
            "systemd_env_quote": systemd_env_quote,
            "systemd_text": systemd_text,
            "secret_host_vars": secret_host_vars,
            "sglang_lock_name": sglang_lock_name,
            "gateway_problems": gateway_problems,
        }


def gateway_problems(values: Mapping[str, Any], workers: Mapping[str, Any] | None = None,
                     urls: Mapping[str, Any] | None = None, strict: bool = False) -> list[str]:
    """Every problem of a gateway's ``sglang_router_*`` variables and of its workers, one line each (no secret).

    ``values``: the gateway host's role variables (missing ones at the role's defaults); ``workers``: GPU host
    name -> its hostvars (worker URL or address, each instance's API key against the gateway's); ``urls``:
    ``{label: url}`` of URLs about to be rendered (only those are checked when ``values`` is empty).
    ``strict``: raise, listing the problems, instead of returning them (a template that must not render).
    Usage: ``__sglang_router_inputs | blackwell.sglang.gateway_problems(__sglang_router_workers)``.
    """
    found = (_gateway.gateway_problems(values, workers or {}, roles_defaults_of(_gateway.GATEWAY_DEFAULTS_READ, "gateway_problems"))
             if values else [])
    if not values and workers:
        found += [p for host in workers for p in _gateway.worker_problems(str(host), workers[host] or {})]
    found += _gateway.url_problems(urls or {})
    lines = [_gateway.format_problem(p) for p in found]
    if strict and lines:
        raise AnsibleFilterError("gateway configuration refused:\n" + "\n".join(lines))
    return lines
