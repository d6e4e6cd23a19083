# SPDX-License-Identifier: Apache-2.0
"""The launch plans of one inventory host, computed on the controller the same way everywhere.

A host runs one SGLang instance (the shorthand: ``sglang_model_path``, ``sglang_args``, ``sglang_env`` ...)
or several (``sglang_instances``: a list of ``{name, model, args, env, gpus, port, ...}``; each is one
systemd unit ``<sglang_server_service_name>-<name>``). :func:`plan_host` builds the plan of every
instance of a host and checks the instances against each other (disjoint GPUs, distinct ports).

The validate action plugin calls it for every host of a run; the filters (``instance_plans`` for the
server role, ``server_instances`` for the router and the rollout) call it for one host. They read the
same variables through the same function, so they cannot disagree; the role checks the plan's digest
against the one the validate task reported. Controller-only: modules never import it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible.errors import AnsibleError
from ansible.inventory.helpers import get_group_vars, sort_groups
from ansible.inventory.manager import InventoryManager
from ansible.module_utils.common.text.converters import to_text
from ansible.utils.vars import combine_vars, load_extra_vars
from ansible.vars.plugins import get_vars_from_inventory_sources, get_vars_from_path
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_startup import start_key
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import RESERVED_SERVICE_NAMES
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_kernel_cache import arch_tag, kernel_cache
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_multinode import (
    ADDR_VAR,
    GROUP_VAR,
    PORT_VAR,
    Getter,
    Layout,
    LayoutError,
    host_layout,
    hostvars_getter,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import load_schema, normalize_key, secret_host_vars
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema_diff import committed_versions, upgrade_findings
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import (
    CC_VAR,
    FACTS_VAR,
    FRONT_CA_VAR,
    FRONT_CERT_VAR,
    FRONT_KEY_VAR,
    FRONT_OFFSET_VAR,
    ROLE_VARS,
    SECRET_MARKER,
    VALIDATE_DEFAULTS,
    Problem,
    Result,
    facts_usable,
    gpu_count_problem,
    parse_compute_capability,
    render_argv,
    validate_host,
)

INSTANCES_VAR = "sglang_instances"
GPUS_VAR = "sglang_gpus"
SERVICE_VAR = "sglang_server_service_name"
REVISION_VAR = "sglang_model_revision"
# The torch requirement of the server's virtualenv (roles/sglang): part of the key of the instance's kernel caches.
TORCH_VAR = "sglang_torch_requirement"
CACHE_DIR_VAR = "sglang_server_cache_dir"
# The roles' defaults the planner reads whatever the host sets (the release, the unit's name, the models directory and
# the model's revision where the host's own is empty, the directories the server is handed are checked against):
# plan_host's ``role_defaults``, read by its caller from the roles' defaults files (roles/sglang, roles/sglang_server).
PLANNER_DEFAULTS = tuple(dict.fromkeys((SERVICE_VAR, contract.MODELS_DIR_VAR, REVISION_VAR, TORCH_VAR, *VALIDATE_DEFAULTS)))

# The host variables the validator reads; nothing else is templated.
HOST_VARS = (
    "sglang_version",
    "sglang_model_path",
    "sglang_args",
    "sglang_env",
    "sglang_secret_env",
    "nvidia_gpu_count",
    "nvidia_gpu_compute_capability",
    "sglang_model_architecture",
    "sglang_model_quantization",
    "sglang_model_max_context",
    "sglang_listen_host",
    "sglang_allow_unauthenticated",
    "sglang_server_allow_skip_warmup",
    "sglang_tls_ca_file",
    FRONT_CA_VAR,
    FRONT_CERT_VAR,
    FRONT_KEY_VAR,
    FRONT_OFFSET_VAR,
    "sglang_metrics",
    "sglang_spec",
    "sglang_model_download",
    "sglang_model_revision",
    "nvidia_gpu_memory_mib",
    "nvidia_driver_version",
    FACTS_VAR,
    "hf_token",
    INSTANCES_VAR,
    GPUS_VAR,
    GROUP_VAR,
    TORCH_VAR,
    *ROLE_VARS,
    *secret_host_vars(),
)

# An instance's keys and the host variables they stand for (the shorthand's names).
INSTANCE_FIELDS = {
    "model": "sglang_model_path",
    "model_dir": "sglang_model_local_path",
    "spec": "sglang_spec",
    "listen_host": "sglang_listen_host",
    "allow_unauthenticated": "sglang_allow_unauthenticated",
    "model_architecture": "sglang_model_architecture",
    "model_quantization": "sglang_model_quantization",
    "model_max_context": "sglang_model_max_context",
    "hf_token": "hf_token",
    "gpus": GPUS_VAR,
    "model_revision": "sglang_model_revision",
}
# Keys that add to the host's mappings (the instance wins key by key), keys with their own meaning,
# and keys other roles read (roles/sglang stages each instance's model at its revision).
INSTANCE_MERGED = {"args": "sglang_args", "env": "sglang_env", "secret_env": "sglang_secret_env"}
INSTANCE_OTHER = ("name", "port")
INSTANCE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")
# Arguments that open a TCP port of their own when set (each is also opened under the conditions of
# instance_ports); two instances of a host must not share one. SGLang 0.5.23 (sglang/srt/...):
_PORT_ARGS = (
    "port",  # the HTTP server (entrypoints/http_server.py)
    "grpc_port",  # the native gRPC server, alongside HTTP (arg_groups/fields/serving.py, serving_hook.py:360-366)
    "smg_http_sidecar_port",  # legacy SMG mode's sidecar (entrypoints/grpc_server.py:176-182)
    "nccl_port",  # NCCL setup, bound by the scheduler (server_args.py:771-775; a random free port when unset)
    "gated_launch_port",  # the gate server of the first rank (distributed/bootstrap.py:200-202)
    "engine_info_bootstrap_port",  # with a transfer-engine seed, node 0 (entrypoints/engine.py:1187-1198)
    "disaggregation_bootstrap_port",  # a prefill (or role-switching) server (managers/disagg_service.py:28-48)
    "encoder_bootstrap_port",  # a language-only server (managers/tokenizer_manager.py:812-826)
)
ZMQ_TCP_PORT_DELTA = 233  # sglang/srt/server_args.py:728
DP_DERIVED_PORTS = 6  # sglang/srt/server_args.py:835 (without SGLANG_RUST_SERVER)


@dataclass
class Instance:
    """One SGLang instance of a host: its unit and its launch plan."""

    name: str
    service: str
    result: Result
    gpus: list[int]  # the nvidia-smi indices of the GPUs its ranks use
    index: int | None  # position in sglang_instances; None for the shorthand
    model: Any
    model_revision: Any = None
    binding: dict[str, Any] = field(default_factory=dict)  # see gpu_binding(); not part of the public plan
    # Where its kernels compile to (sglang_kernel_cache.kernel_cache): the environment file sets it; roles/sglang
    # prunes a release's keys with its last virtualenv.
    kernel_cache: dict[str, Any] = field(default_factory=dict)
    # What its startup budget is learnt for (module_utils/sglang_startup.start_key): the model and its revision, the
    # release, and the host class (the GPUs its ranks use here, count and architecture: "8xsm100").
    startup_key: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The plan with no secret in it (``Result.as_dict`` plus the unit), and its digest."""
        data = self.result.as_dict()
        data.update(name=self.name, service=self.service, gpus=list(self.gpus), shorthand=self.index is None,
                    model=self.model, model_revision=self.model_revision, kernel_cache=copy.deepcopy(self.kernel_cache),
                    startup_key=dict(self.startup_key),
                    # under sglang_server_config_dir: the shorthand keeps the one-instance layout
                    last_good="last-good" if self.index is None else f"last-good-{self.name}")
        data["digest"] = digest(data)
        return data

    def full(self) -> dict[str, Any]:
        """The plan with the secret parts the files need (``config``, ``secret_env``): for no_log use only."""
        data = self.public()
        data["binding"] = dict(self.binding)
        data["config"] = dict(self.result.config)
        data["secret_env"] = dict(self.result.secret_env)
        return data


@dataclass
class HostPlan:
    """Every instance of one host, and the problems across them."""

    host: str
    instances: list[Instance] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    layout: Layout | None = None
    models: list[dict[str, Any]] = field(default_factory=list)  # what roles/sglang stages (staged_models)

    def published(self, spec: Any = None) -> dict[str, Any]:
        """What the run publishes of the host (the ``sglang_server_plan`` fact, no secret in it): every instance's public
        plan, its multi-node layout, the models to stage and the run's spec override it was planned with."""
        return {"instances": [i.public() for i in self.instances], "layout": None if self.layout is None else self.layout.as_dict(),
                "models": [dict(m) for m in self.models], "spec_override": spec}

    @property
    def ok(self) -> bool:
        return not self.problems and all(i.result.ok for i in self.instances)

    def result(self) -> Result:
        """One Result for reports: every problem of every instance (named by its variable path).

        For a host with one instance it is that instance's result, so ``args``, ``argv`` ... are there.
        """
        if len(self.instances) == 1 and self.instances[0].index is None:
            one = self.instances[0].result
            return dataclasses.replace(one, errors=[p for p in self.problems if p.level == "error"] + one.errors,
                                       warnings=[p for p in self.problems if p.level != "error"] + one.warnings)
        out = Result()
        if self.instances:
            out.version = self.instances[0].result.version
        problems = list(self.problems) + [p for i in self.instances for p in i.result.errors + i.result.warnings]
        out.errors = [p for p in problems if p.level == "error"]
        out.warnings = [p for p in problems if p.level != "error"]
        return out

    def as_dict(self) -> dict[str, Any]:
        """What the validate task reports for the host: the combined result and every instance's public plan."""
        data = self.result().as_dict()
        data["instances"] = [i.public() for i in self.instances]
        return data


def digest(public: Mapping[str, Any]) -> str:
    """A short fingerprint of a public plan (no secret values): the validate task and the role compare it."""
    keys = ("version", "argv", "config_keys", "env", "secret_env_keys", "gpus", "gpu_ids", "endpoint", "spec", "service")
    text = json.dumps({k: public.get(k) for k in keys}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Bounds of one host variable's value, checked before anything else walks it (templating, copying, the memo's JSON
# text, the report): YAML aliases let a few hundred bytes of host_vars stand for billions of values (an "alias
# bomb"); a shared reference counts each time it is reached, as every later walk would reach it.
MAX_VALUE_NODES = contract.DATA_MAX_NODES
MAX_VALUE_DEPTH = contract.DATA_MAX_DEPTH
MAX_VALUE_TEXT = contract.DATA_MAX_TEXT


class ValueTooLarge(Exception):
    """A host variable's value is over the bounds: the plan names ``variable`` and shows nothing of the value."""

    def __init__(self, variable: str, why: str, more: list[ValueTooLarge] | None = None) -> None:
        super().__init__(f"{variable}: {why}")
        self.variable, self.why = variable, why
        self.all = [self, *(more or [])]  # every variable of the host over the bounds


value_bound_problem = contract.size_problem  # the one bound of every variable (sglang_contract)


def check_bounds(name: str, value: Any) -> Any:
    """``value``, or ValueTooLarge naming ``name`` when it is over the bounds."""
    if isinstance(value, (dict, list, tuple, set, frozenset, Mapping)) or (isinstance(value, str) and len(value) > 4096):
        why = value_bound_problem(value)
        if why:
            raise ValueTooLarge(name, why)
    return value


def _plain(value: Any) -> bool:
    """True for data that templates to itself: scalars, and dicts and lists of them, with no ``{`` in a string."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return "{" not in value
    # Exactly a dict or a list: a container that templates its items when read (ansible-core's lazy ones) is not.
    if type(value) is dict:  # pylint: disable=unidiomatic-typecheck
        return all(isinstance(k, (str, int)) and _plain(k) and _plain(v) for k, v in value.items())
    if type(value) is list:  # pylint: disable=unidiomatic-typecheck
        return all(_plain(v) for v in value)
    return False


is_plain = _plain


def _copy_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_plain(v) for v in value]
    return value


class _RawHostVars(Mapping):
    """One host's variables from a single ``hostvars.raw_get``: a value that cannot hold a template is returned as
    is (what templating it gives), any other is templated by Ansible's own per-host view, on first access."""

    def __init__(self, raw: Mapping[str, Any], loader: Any, host: str) -> None:
        self._raw, self._loader, self._host = raw, loader, host
        self._view: Any = None

    @property
    def raw(self) -> Mapping[str, Any]:
        """The host's variables before templating (for checks that must not expand a value, e.g. its size)."""
        return self._raw

    def __getitem__(self, key: str) -> Any:
        value = check_bounds(key, self._raw[key])  # before any walk of it, templating included
        if _plain(value):
            return _copy_plain(value)
        if self._view is None:
            from ansible.vars.hostvars import HostVarsVars  # pylint: disable=import-outside-toplevel

            try:
                self._view = HostVarsVars(self._raw, loader=self._loader, host=self._host)
            except TypeError:  # pragma: no cover (ansible-core < 2.19: no host argument)
                self._view = HostVarsVars(self._raw, loader=self._loader)  # pylint: disable=no-value-for-parameter
        return check_bounds(key, self._view[key])  # what a template made of it (a Jinja loop can multiply too)

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


# The roles' internal variables: set by the roles and playbooks themselves, never by an inventory or -e.
INTERNAL_PREFIXES = ("__sglang", "__nvidia", "__rollout")
# Facts the run publishes for the roles (playbooks/validate.yml; roles/sglang_server binds it to the GPUs; roles/sglang_common
# marks a restart; roles/nvidia_driver, gpu_health and sglang_server mark the GPU facts gathered in this run): never an
# inventory's or -e's to set, like the internals.
PUBLISHED = ("sglang_server_plan", "sglang_common_restart_pending", "nvidia_gpu_facts_fresh")


def internal_problem(variable: str, source: str) -> Problem:
    """The error of an internal variable set from outside (``source``: the inventory, or -e)."""
    return Problem("input.internal", variable, None,
                   f"{variable} is internal to the roles and playbooks ("
                   + ("a fact the run publishes" if variable in PUBLISHED else "a '__' name")
                   + f"); {source} may not set it: it would forge their state or verdicts.", f"remove {variable} from {source}")


class HostVarsCache(Mapping):
    """``hostvars`` for a pass over many hosts: each host's variables are gathered once (Ansible's
    ``hostvars[host]`` runs the variable manager, vars plugins included, on every access)."""

    def __init__(self, hostvars: Any, loader: Any = None, sources: list[str] | None = None,
                 basedirs: list[str] | None = None) -> None:
        self._hostvars = hostvars
        self._loader = loader  # the action's DataLoader: what templates a host's values
        self._sources = list(sources or [])  # the run's inventory sources (ansible_inventory_sources)
        self._basedirs = list(basedirs or [])  # where group_vars / host_vars beside the playbook are
        self._inventory: Any = None  # the inventory read again, for without_extra_vars
        self._views: dict[str, Any] = {}

    def __getitem__(self, host: str) -> Any:
        view = self._views.get(host)
        if view is None:
            view = self._views[host] = self._view(host)
        return view

    def _view(self, host: str) -> Any:
        raw_get, loader = getattr(self._hostvars, "raw_get", None), self._loader
        if raw_get is None or loader is None:
            return self._hostvars[host]  # a plain mapping (tests) or another wrapper: as given
        raw = raw_get(host)
        return _RawHostVars(raw, loader, host) if isinstance(raw, Mapping) else self._hostvars[host]

    def without_extra_vars(self, host: str, name: str) -> tuple[bool, Any]:
        """``(True, value)`` of variable ``name`` of ``host`` as the inventory alone sets it (group_vars, host_vars,
        the inventory file), when this run's extra vars (``-e``) override it; ``(False, None)`` when they do not (the
        host's variable is then the inventory's), when the inventory does not set it, or without the inventory's
        sources (a plain mapping in tests).

        The inventory is read again from its sources (``ansible_inventory_sources``) with ansible-core's public
        interfaces, in the order of its default variable precedence: the ``all`` group, the host's groups, their
        ``group_vars`` (beside the inventory, then beside the playbook), the host, its ``host_vars``. Only a run that
        overrides ``name`` with ``-e`` pays for it, once.
        """
        if self._loader is None or not self._sources or name not in load_extra_vars(self._loader):
            return False, None
        raw = self._inventory_only(host)
        if name not in raw:
            return False, None
        return True, _RawHostVars(raw, self._loader, host)[name]

    def _inventory_only(self, host: str) -> dict[str, Any]:
        if self._inventory is None:
            self._inventory = InventoryManager(loader=self._loader, sources=list(self._sources))
        found = self._inventory.get_host(host)
        if found is None:
            return {}
        every = self._inventory.groups.get("all")
        groups = sort_groups([g for g in found.get_groups() if g.name != "all"])
        sources = list(self._sources)

        def beside_playbook(entities: list[Any]) -> dict[str, Any]:
            data: dict[str, Any] = {}
            for path in self._basedirs:
                data = combine_vars(data, get_vars_from_path(self._loader, path, entities, "task"))
            return data

        data: dict[str, Any] = {}
        for part in (every.get_vars(), get_group_vars(groups),
                     get_vars_from_inventory_sources(self._loader, sources, [every], "task"), beside_playbook([every]),
                     get_vars_from_inventory_sources(self._loader, sources, groups, "task"), beside_playbook(groups),
                     found.get_vars(), get_vars_from_inventory_sources(self._loader, sources, [found], "task"),
                     beside_playbook([found])):
            data = combine_vars(data, part)
        return data

    def inventory_internals(self, host: str) -> list[str]:
        """The roles' internal variables (``__sglang*``, ``__nvidia*``, ``__rollout*``) and published facts that the
        inventory sets for ``host`` (inventory file, group_vars, host_vars, vars plugins); those the run itself set
        (set_fact, register, an earlier playbook of the same run) do not count. Only when the host carries such a name
        is the inventory read again (``_inventory_only``, public interfaces); without the inventory's sources (a plain
        mapping in tests) every such name counts."""
        names = sorted(n for n in self[host] if isinstance(n, str) and (n.startswith(INTERNAL_PREFIXES) or n in PUBLISHED))
        if not names or self._loader is None or not self._sources:
            return names
        inventory_vars = self._inventory_only(host)
        return [n for n in names if n in inventory_vars]

    def raw(self, host: str) -> Mapping[str, Any]:
        """The host's variables as Ansible keeps them, before templating (what a task's variables are built from)."""
        view = self[host]
        return view._raw if isinstance(view, _RawHostVars) else {k: view[k] for k in view}  # pylint: disable=protected-access

    def __contains__(self, host: object) -> bool:
        return host in self._hostvars

    def __iter__(self) -> Iterator[str]:
        return iter(self._hostvars)

    def __len__(self) -> int:
        return len(self._hostvars)


INVENTORY_VERSION_VAR = "sglang_version"


def upgrade_problems(host: str, hostvars: Any, target: str | None, result: Result,
                     role_defaults: Mapping[str, Any] | None = None) -> list[Problem]:
    """The upgrade check: a run that validates ``host`` against SGLang ``target`` (``-e sglang_version=T``) while
    its inventory pins another release F lists every argument of its ``sglang_args`` (and of each instance's
    ``args``) that was renamed or removed (errors), lost its value from the choices (error) or changed its default
    (warning) between F and T, with the fix (sglang_schema_diff.upgrade_findings). The host's own schema errors
    about the same keys (unknown, renamed) give way to these, which say which release changed what.

    F is the inventory's ``sglang_version``: what the last deploy from this inventory installed. The validation
    contacts no host, so no installed version is read from facts. Nothing is added when F equals T or when the
    run does not override ``sglang_version``. ``role_defaults``: roles/sglang's ``sglang_version`` (from its
    defaults file), which an inventory that sets the variable empty installs; required then.
    """
    if not isinstance(hostvars, HostVarsCache) or not target:
        return []
    try:
        found, old = hostvars.without_extra_vars(host, INVENTORY_VERSION_VAR)
    except ValueTooLarge:  # the host's plan names it (input.bounds)
        return []
    if found and not old:
        old = contract.role_defaults(role_defaults, [INVENTORY_VERSION_VAR], "upgrade_problems")[INVENTORY_VERSION_VAR]
    old = str(old) if found else None
    if old is None or old == str(target):
        return []
    versions = committed_versions()
    if old not in versions or str(target) not in versions or versions.index(old) > versions.index(str(target)):
        return [Problem("upgrade.unchecked", INVENTORY_VERSION_VAR, old,
                        f"{host}'s inventory pins SGLang {old}; this run validates it against {target}, and the upgrade "
                        f"check compares committed schemas of an older with a newer release ({', '.join(versions)}).",
                        "check the release notes between the two by hand, or pin a release with a schema",
                        level="warning")]
    view = hostvars[host]
    try:
        sources: list[tuple[str, Any]] = [("sglang_args", view["sglang_args"] if "sglang_args" in view else None)]
        instances = view[INSTANCES_VAR] if INSTANCES_VAR in view else None
    except ValueTooLarge:  # the host's plan names it (input.bounds)
        return []
    if isinstance(instances, (list, tuple)):
        sources += [(f"{INSTANCES_VAR}[{i}].args", e.get("args")) for i, e in enumerate(instances) if isinstance(e, Mapping)]
    problems: list[Problem] = []
    for prefix, args in sources:
        if not isinstance(args, Mapping):
            continue
        for finding in upgrade_findings(dict(args), old, str(target)):
            variable = f"{prefix}.{finding.key}"
            problems.append(Problem(f"upgrade.{finding.kind}", variable,
                                    args[finding.key] if finding.kind in ("choice", "default") else None,
                                    finding.message, finding.fix, f"schemas/sglang-{old}.json -> sglang-{target}.json",
                                    finding.level))
    covered = {p.variable for p in problems if p.level == "error"}
    result.errors[:] = [p for p in result.errors if not (p.variable in covered and p.rule.startswith("schema."))]
    return problems


# validate_host() of identical inputs (a fleet's hosts mostly share one configuration): by their JSON text.
_VALIDATED: dict[str, Result] = {}
_VALIDATED_MAX = 4096


def _key_default(value: Any) -> str:
    return f"<{type(value).__module__}.{type(value).__qualname__}:{value!r}>"


def validate_memo(raw: Mapping[str, Any], spec: str | None, defaults: Mapping[str, Any]) -> Result:
    """``validate_host(raw, spec, defaults)``, computed once per distinct input; each caller gets its own copy."""
    try:
        key = json.dumps([raw, spec, defaults], sort_keys=True, default=_key_default)
    except (TypeError, ValueError):  # keys that do not sort or serialise: no memo
        return validate_host(raw, spec=spec, defaults=defaults)
    result = _VALIDATED.get(key)
    if result is None:
        if len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.clear()
        result = _VALIDATED[key] = validate_host(raw, spec=spec, defaults=defaults)
    # The callers add problems and read the containers; the values in them are never changed.
    return dataclasses.replace(result, **{f.name: copy.copy(getattr(result, f.name)) for f in _RESULT_CONTAINERS})


_RESULT_CONTAINERS = [f for f in dataclasses.fields(Result) if f.name in (
    "errors", "warnings", "args", "argv", "config", "env", "secret_env", "gpu_ids", "endpoint", "spec")]


def read_host_vars(hostvars: Any, host: str) -> dict[str, Any]:
    """Template only the variables the validator needs from one host's hostvars.

    A ``sglang_server_model_path`` set in the inventory is the directory the server loads from.
    """
    host_vars = hostvars[host]
    raw: dict[str, Any] = {}
    over: list[ValueTooLarge] = []
    for name in HOST_VARS:
        if name in host_vars:
            try:
                raw[name] = check_bounds(name, host_vars[name])
            except ValueTooLarge as exc:
                over.append(exc)
    if over:
        raise ValueTooLarge(over[0].variable, over[0].why, over[1:])
    if "sglang_server_model_path" in raw:
        raw["sglang_model_local_path"] = raw.pop("sglang_server_model_path")
    return raw


def _truthy(value: Any, default: bool) -> bool:
    if value is None or value == "":
        return default
    return str(value).strip().lower() in ("true", "yes", "on", "1")


def local_model_path(raw: Mapping[str, Any], shorthand: bool, role_defaults: Mapping[str, Any] | None = None) -> Any:
    """Where the server loads the model from (``--model-path``): the one place this is decided.

    An explicit directory (``model_dir`` of an instance; ``sglang_server_model_path`` or ``sglang_model_dir``
    for the shorthand), else, for a Hugging Face id that roles/sglang stages (``sglang_model_download``,
    default true), ``<sglang_models_dir>/<id>``, else the id or local directory itself. ``role_defaults``: roles/sglang's
    ``sglang_models_dir`` (from its defaults file), required where the host's own is empty and a model is staged.
    """
    model = raw.get("sglang_model_path")
    explicit = raw.get("sglang_model_local_path") or (raw.get("sglang_model_dir") if shorthand else None)
    if explicit:
        return explicit
    if not isinstance(model, str) or not model or model.startswith("/") or not _truthy(raw.get("sglang_model_download"), True):
        return model
    models_dir = raw.get(contract.MODELS_DIR_VAR) or \
        contract.role_defaults(role_defaults, [contract.MODELS_DIR_VAR], "local_model_path")[contract.MODELS_DIR_VAR]
    return f"{models_dir}/{model}"


def staged_models(raw: Mapping[str, Any], role_defaults: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The Hugging Face models roles/sglang stages for a host: ``[{repo, revision, dir}]``, one per distinct model.

    Every instance's model (or the shorthand's), at its ``model_revision`` (else ``sglang_model_revision``), into
    the directory its server loads from (:func:`local_model_path`). Local directories and ``sglang_model_download:
    false`` stage nothing. Type errors are left to the validator, which runs before anything is staged.
    ``role_defaults``: roles/sglang's ``sglang_model_revision`` and ``sglang_models_dir`` (from its defaults file),
    required where the host's own are empty.
    """
    if not _truthy(raw.get("sglang_model_download"), True):
        return []
    entries = raw.get(INSTANCES_VAR)
    views: list[tuple[dict[str, Any], bool]] = []
    if isinstance(entries, (list, tuple)):
        scratch, names = HostPlan(""), set()  # problems are the validator's to report
        for index, entry in enumerate(entries):
            view, _ = _instance_vars(scratch, dict(raw), entry, index, names)
            if view is not None:
                views.append((view, False))
    else:
        views.append((dict(raw), True))
    out: list[dict[str, Any]] = []
    for view, shorthand in views:
        repo = view.get("sglang_model_path")
        if not isinstance(repo, str) or not repo or repo.startswith("/"):
            continue
        revision = view.get(REVISION_VAR) or contract.role_defaults(role_defaults, [REVISION_VAR], "staged_models")[REVISION_VAR]
        stage = {"repo": repo, "revision": str(revision),
                 "dir": local_model_path(view, shorthand, role_defaults)}
        if stage not in out:
            out.append(stage)
    return out


_INDEX = re.compile(r"[0-9]{1,10}")
MAX_GPU_INDEX = 2**31  # device minors and CUDA ordinals are C ints


def declared_gpu_count(value: Any) -> int | None:
    """``nvidia_gpu_count`` as a whole number (8, 8.0, "8", "8.0", as the validator reads it), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,10}(\.0*)?", value.strip()):
        return int(float(value))
    return None


def _gpu_list(value: Any) -> tuple[list[int] | None, str | None]:
    """The GPU indices of ``gpus`` / ``sglang_gpus``, or why they are not a list of distinct GPU indices."""
    if value is None:
        return None, None
    if not isinstance(value, (list, tuple)) or not value:
        return None, "it must be a non-empty list of GPU indices (nvidia-smi -L), e.g. [0, 1, 2, 3]"
    out = []
    for item in value:
        # ASCII digits only: str.isdigit() is true of "²", which int() refuses.
        if isinstance(item, bool) or not (isinstance(item, int) or (isinstance(item, str) and _INDEX.fullmatch(item.strip()))):
            return None, f"{item!r} is not a GPU index (a whole number from nvidia-smi -L)"
        if not 0 <= int(item) < MAX_GPU_INDEX:
            return None, f"{item!r} is not a GPU index (0 to {MAX_GPU_INDEX - 1}, as nvidia-smi -L numbers them)"
        out.append(int(item))
    if len(set(out)) != len(out):
        return None, "a GPU is listed twice"
    return out, None


def plan_host(host: str, hostvars: Any, groups: Any, spec: str | None = None, get: Getter | None = None,
              role_vars: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None, *,
              role_defaults: Mapping[str, Any]) -> HostPlan:
    """Plan every instance of ``host`` as the validate action does: its variables, its multi-node layout,
    the hand-typed nnodes check, and the checks across its instances.

    ``spec`` is the run's override of the host's ``sglang_spec`` (None: each instance's own mode).
    ``role_vars``: the role variables as a play sets them (the role passes its own; the validate task reads
    the inventory's). ``defaults``: the roles' defaults of plan inputs the host does not set (the validate action
    reads them from the roles' defaults files). ``role_defaults``: the roles' defaults of :data:`PLANNER_DEFAULTS`,
    read by the caller from the same files (a TypeError names any that is missing). Problems of the variables
    themselves (a Jinja error, a misdeclared group) become errors.
    """
    fallbacks = contract.role_defaults(role_defaults, PLANNER_DEFAULTS, "plan_host")
    plan = HostPlan(host)
    raw: dict[str, Any] | None = None
    unknown = [name for name in (role_vars or {}) if name not in ROLE_VARS]
    if unknown:  # a caller's mistake, not the inventory's
        raise KeyError(f"{unknown[0]} is not a role variable of the plan")
    try:
        raw = read_host_vars(hostvars, host)
        for name, value in (defaults or {}).items():
            if name not in raw and value is not None:
                raw["sglang_model_local_path" if name == "sglang_server_model_path" else name] = check_bounds(name, value)
        for name, value in (role_vars or {}).items():
            if value is not None:
                raw["sglang_model_local_path" if name == "sglang_server_model_path" else name] = check_bounds(name, value)
        plan.layout = host_layout(host, get or hostvars_getter(hostvars), groups)
        if plan.layout is not None:
            raw["sglang_multinode"] = plan.layout.as_dict()
        _plan_raw(plan, raw, spec, fallbacks)
        plan.models = staged_models(raw, fallbacks) if plan.ok else []
    except ValueTooLarge as exc:
        plan.instances = []
        plan.problems = [Problem("input.bounds", e.variable, None,
                                 f"{e.variable}: {e.why}; refused before it is read (value not shown).",
                                 f"write {e.variable} out plainly: a few values, no chains of YAML aliases (&a / *a)")
                         for e in exc.all]
    except LayoutError as exc:
        plan.instances = []
        plan.problems = [Problem("multinode.layout", exc.variable, exc.value, exc.message, exc.fix)]
    except AnsibleError as exc:  # a host variable that does not template (undefined, syntax)
        plan.instances = []
        plan.problems = [Problem("host.template", "host variables", None, to_text(exc).splitlines()[0],
                                 "fix the variable's Jinja expression or define what it uses")]
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # Any other failure of the planner is a value it does not expect: a problem naming that variable.
        plan.instances = []
        plan.problems = [_crash_problem(host, raw, spec, exc, fallbacks)]
    return plan


def _plan_raw(plan: HostPlan, raw: dict[str, Any], spec: str | None, fallbacks: Mapping[str, Any]) -> None:
    _plan_instances(plan, raw, spec, fallbacks)


def _crashes(host: str, raw: dict[str, Any], spec: str | None, fallbacks: Mapping[str, Any]) -> bool:
    try:
        _plan_raw(HostPlan(host), raw, spec, fallbacks)
    except Exception:  # pylint: disable=broad-exception-caught
        return True
    return False


# Variables that are mappings of their own keys: a failure is named down to the key.
_MAPPING_VARS = ("sglang_args", "sglang_env", "sglang_secret_env", FACTS_VAR)


def _crash_problem(host: str, raw: dict[str, Any] | None, spec: str | None, exc: Exception,
                   fallbacks: Mapping[str, Any]) -> Problem:
    """The problem of a planner failure, naming the variable (down to the key) without which the host plans:
    each variable read is left out in turn (only on this path, so the cost of the search does not matter)."""
    variable = "host variables"
    if raw is not None:
        for name in list(raw):
            if not _crashes(host, {k: v for k, v in raw.items() if k != name}, spec, fallbacks):
                variable = name
                value = raw[name]
                subs: list[tuple[str, dict[str, Any]]] = []
                if name in _MAPPING_VARS and isinstance(value, Mapping):
                    subs = [(f"{name}.{k}", {**raw, name: {a: b for a, b in value.items() if a != k}}) for k in value]
                elif name == INSTANCES_VAR and isinstance(value, (list, tuple)):
                    for i, entry in enumerate(value):
                        if isinstance(entry, Mapping):
                            subs += [(f"{name}[{i}].{k}",
                                      {**raw, name: [*value[:i], {a: b for a, b in entry.items() if a != k}, *value[i + 1:]]})
                                     for k in entry if k != "name"]
                for sub, without in subs:
                    if not _crashes(host, without, spec, fallbacks):
                        variable = sub
                        break
                break
    return Problem("input.unreadable", variable, None,
                   f"{variable}: the validator cannot read this value ({type(exc).__name__}: value not shown).",
                   f"check {variable} against the input contract (docs/security.md, 'The input contract': its type and form)")


def _plan_instances(plan: HostPlan, raw: dict[str, Any], spec: str | None, fallbacks: Mapping[str, Any]) -> None:
    service = raw.get(SERVICE_VAR) or fallbacks[SERVICE_VAR]
    entries = raw.get(INSTANCES_VAR)
    if entries is None:
        _plan_one(plan, raw, None, service, service, spec, fallbacks)
    else:
        if not isinstance(entries, (list, tuple)) or not entries:
            plan.problems.append(Problem("instances.list", INSTANCES_VAR, None,
                                         "sglang_instances must be a non-empty list of instances ({name, model, args, ...}).",
                                         "write it as a YAML list, or remove it to run one instance from sglang_args"))
            return
        if raw.get(GROUP_VAR):
            # Stricter than SGLang: a multi-node instance restarts in lockstep with its group; several of them per
            # host would make the lockstep span instances of different groups.
            plan.problems.append(Problem("instances.multinode", INSTANCES_VAR, None,
                                         f"sglang_instances and {GROUP_VAR} together: a multi-node instance is one per host.",
                                         f"use one of them for {plan.host}"))
            return
        for var in ("sglang_model_local_path", "sglang_model_dir", GPUS_VAR):
            if raw.get(var) not in (None, ""):
                shown = "sglang_server_model_path" if var == "sglang_model_local_path" else var
                plan.problems.append(Problem("instances.shorthand", shown, raw.get(var),
                                             f"{shown} belongs to the one-instance shorthand; with sglang_instances it would be "
                                             "the same for every instance.", "set it per instance (model_dir / gpus) instead"))
        names: set[str] = set()
        for index, entry in enumerate(entries):
            instance_raw, name = _instance_vars(plan, raw, entry, index, names)
            if instance_raw is None:
                continue
            unit = f"{service}-{name}"
            if unit in RESERVED_SERVICE_NAMES:  # e.g. instance "router" of service "sglang": sglang-router.service
                plan.problems.append(Problem("instances.name", f"{INSTANCES_VAR}[{index}].name", name,
                                             f"instance {name}'s unit would be {unit}.service, which is not the SGLang "
                                             "server's to take: the instance's unit would replace it.",
                                             "give the instance another name (e.g. chat)"))
                continue
            _plan_one(plan, instance_raw, index, name, unit, spec, fallbacks, entry)
    _check_across(plan, raw)


def _instance_vars(plan: HostPlan, raw: dict[str, Any], entry: Any, index: int,
                   names: set[str]) -> tuple[dict[str, Any] | None, str]:
    """The host variables of instance ``index``: the host's, overridden by the entry's keys."""
    where = f"{INSTANCES_VAR}[{index}]"

    def problem(rule: str, variable: str, value: Any, message: str, fix: str) -> None:
        plan.problems.append(Problem(rule, variable, value, message, fix))

    if not isinstance(entry, Mapping):
        problem("instances.entry", where, None, f"{where} must be a mapping ({{name, model, args, ...}}).",
                "write each instance as a YAML mapping")
        return None, ""
    name = entry.get("name")
    if not isinstance(name, str) or not INSTANCE_NAME.fullmatch(name):
        problem("instances.name", f"{where}.name", name if isinstance(name, (str, int)) else None,
                f"{where}.name must be a short name: lower-case letters, digits and '-', at most 32 characters.",
                "name each instance, e.g. name: chat (its unit is sglang-chat.service)")
        return None, ""
    if name in names:
        problem("instances.name", f"{where}.name", name, f"two instances of {plan.host} are named {name!r}.",
                "give every instance of a host its own name")
        return None, ""
    names.add(name)
    secrets = {var.removeprefix("sglang_"): var for var in secret_host_vars()}
    known = {*INSTANCE_FIELDS, *INSTANCE_MERGED, *INSTANCE_OTHER, *secrets}
    unknown = sorted(str(k) for k in entry if k not in known)
    if unknown:
        problem("instances.key", f"{where}.{unknown[0]}", None,
                f"instance {name}: unknown key(s) {', '.join(unknown)}.",
                f"use only: {', '.join(sorted(known))}")
        return None, name
    out = {k: v for k, v in raw.items() if k not in (INSTANCES_VAR, "sglang_model_local_path", "sglang_model_dir", GPUS_VAR)}
    for key, var in INSTANCE_FIELDS.items():
        if key in entry:
            out[var] = entry[key]
    for dest, var in secrets.items():
        if dest in entry:
            out[var] = entry[dest]
    for key, var in INSTANCE_MERGED.items():
        mine = entry.get(key)
        if mine is None:
            continue
        base = raw.get(var) or {}
        if not isinstance(mine, Mapping) or not isinstance(base, Mapping):
            out[var] = mine  # validate_host names the wrong type
        else:
            out[var] = {**base, **mine}
    if "port" in entry and isinstance(out.get("sglang_args") or {}, Mapping):  # else validate_host names the type
        args = dict(out.get("sglang_args") or {})
        spelled = [k for k in args if str(k).lstrip("-").replace("-", "_") == "port"]
        if spelled:
            problem("instances.port", f"{where}.port", entry["port"],
                    f"instance {name}: the port is given twice (port and args.{spelled[0]}).", "keep one of them")
            return None, name
        args["port"] = entry["port"]
        out["sglang_args"] = args
    return out, name


def _rename(problem: Problem, index: int, name: str, entry: Mapping[str, Any]) -> Problem:
    """Name the instance's own variable path (sglang_instances[1].args.tp_size) when the value came from it."""
    var = problem.variable
    where = f"{INSTANCES_VAR}[{index}]"
    new = var
    for key, host_var in INSTANCE_MERGED.items():
        if var == host_var or var.startswith(host_var + "."):
            sub = var[len(host_var) + 1:]
            if key in entry and (not sub or sub.split(".")[0] in (entry.get(key) or {})):
                new = f"{where}.{key}" + (f".{sub}" if sub else "")
    if var == "sglang_args.port" and "port" in entry:
        new = f"{where}.port"
    for key, host_var in INSTANCE_FIELDS.items():
        if var == host_var and key in entry:
            new = f"{where}.{key}"
    if var == "sglang_server_model_path" and "model_dir" in entry:
        new = f"{where}.model_dir"
    if var == "nvidia_gpu_count" and "gpus" in entry:
        new = f"{where}.gpus"
    if var.startswith("sglang_") and var.removeprefix("sglang_") in entry:
        new = f"{where}.{var.removeprefix('sglang_')}"
    return Problem(problem.rule, new, problem.value, f"instance {name}: {problem.message}", problem.fix,
                   problem.source, problem.level)


def _plan_one(plan: HostPlan, raw: dict[str, Any], index: int | None, name: str, service: str, spec: str | None,
              fallbacks: Mapping[str, Any], entry: Mapping[str, Any] | None = None) -> None:
    gpus, why = _gpu_list(raw.get(GPUS_VAR))
    gpus_var = GPUS_VAR if index is None else f"{INSTANCES_VAR}[{index}].gpus"
    declared = raw.get("nvidia_gpu_count")
    early: list[Problem] = []
    if why:
        early.append(Problem("instances.gpus", gpus_var, raw.get(GPUS_VAR), f"{gpus_var}: {why}.",
                             "list the GPUs this instance uses, e.g. gpus: [4, 5, 6, 7]"))
    elif gpus is not None:
        count = declared_gpu_count(declared)
        if declared not in (None, "") and (count is None or count < 1):
            # The instance is validated with len(gpus) as its count: the host's own declaration is checked here.
            early.append(Problem("host.hardware", "nvidia_gpu_count", declared if isinstance(declared, (str, int, float)) else None,
                                 f"nvidia_gpu_count must be a positive whole number of GPUs, got {declared!r}"[:300] + ".",
                                 "set nvidia_gpu_count: 8 (the number of GPUs nvidia-smi -L lists)"))
        outside = [g for g in gpus if count is not None and not 0 <= g < count]
        if outside:
            early.append(Problem("instances.gpus", gpus_var, gpus,
                                 f"GPU(s) {outside} do not exist on a host with nvidia_gpu_count {count} (indices 0-{count - 1}).",
                                 "list GPUs the host has"))
        raw = {**raw, "nvidia_gpu_count": len(gpus)}
    raw = {**raw, "sglang_model_local_path": local_model_path(raw, index is None, fallbacks)}
    facts = raw.get(FACTS_VAR)
    if gpus is not None and facts_usable(facts):
        raw = {**raw, FACTS_VAR: visible_facts(facts, gpus)}  # the instance sees its GPUs as CUDA numbers them
    result = validate_memo(raw, spec, {n: fallbacks[n] for n in VALIDATE_DEFAULTS})
    _hide_secret_bearing(result, raw)
    check_manual_multinode(plan.host, raw, result)
    result.errors = early + result.errors
    if gpus is not None:
        physical = [gpus[i] for i in result.gpu_ids if i < len(gpus)]
        visible = list(gpus)
    else:
        physical = list(result.gpu_ids)
        # base_gpu_id / gpu_id_step count from the host's first GPU: CUDA sees the GPUs up to the last one used.
        visible = list(range(max(physical) + 1)) if physical and not early else []
    binding, why = gpu_binding(visible, facts if facts_usable(facts) else None, (result.args.get("nnodes") or 1) > 1)
    if why and result.ok:  # a layout already refused needs no second error
        result.errors.append(Problem("host.facts", gpus_var if gpus is not None else "sglang_args.base_gpu_id", visible,
                                     why, "list GPUs nvidia-smi -L shows on the host (or correct nvidia_gpu_count)"))
    if index is not None:
        result.errors = [_rename(p, index, name, entry or {}) for p in result.errors]
        result.warnings = [_rename(p, index, name, entry or {}) for p in result.warnings]
    capabilities = instance_capabilities(raw)
    caches = kernel_cache(raw.get(CACHE_DIR_VAR) or fallbacks[CACHE_DIR_VAR], result.version,
                          raw.get(TORCH_VAR) if raw.get(TORCH_VAR) is not None else fallbacks[TORCH_VAR],
                          capabilities, service)
    plan.instances.append(Instance(name, service, result, physical, index, raw.get("sglang_model_path"),
                                   (entry or {}).get("model_revision"), binding, caches,
                                   start_key(raw.get("sglang_model_path"),
                                             (entry or {}).get("model_revision") or raw.get(REVISION_VAR),
                                             result.version, f"{len(physical)}x{arch_tag(capabilities)}")))


def instance_capabilities(raw: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The compute capabilities of an instance's GPUs: from the gathered facts of the GPUs it sees, else the host's
    declared nvidia_gpu_compute_capability; none when neither reads (the plan reports that variable itself)."""
    facts = raw.get(FACTS_VAR)
    found = []
    if facts_usable(facts):
        for gpu in facts.get("gpus") or []:
            try:
                found.append(parse_compute_capability(gpu.get("compute_capability")))
            except (AttributeError, ValueError):
                continue
    if found:
        return found
    try:
        return [parse_compute_capability(raw.get(CC_VAR))]
    except ValueError:
        return []


# Arguments that are no secret themselves but carry one in their value: a JSON configuration with a key field
# (watermark_config: "an inline JSON object with optional key, key_b, ...", sglang/srt/arg_groups/fields/exec_.py:78),
# found by their help text in every release's schema.
_BEARING_HELP = re.compile(r"\b(key|key_b|api_key|password|passwd|secret|token|credentials?)\b\s*[,:)]", re.IGNORECASE)


@functools.lru_cache(maxsize=16)
def secret_bearing_args(version: str) -> frozenset[str]:
    """The arguments of SGLang ``version`` whose value may hold a secret (a JSON configuration with a key field)."""
    try:
        schema = load_schema(version)
    except KeyError:
        return frozenset()
    return frozenset(d for d, a in schema.arguments.items() if d not in schema.secrets and not a.is_switch
                     and a.type in (None, "str", "json.loads") and ("config" in d or "json" in a.help.lower())
                     and _BEARING_HELP.search(a.help))


def _hide_secret_bearing(result: Result, raw: Mapping[str, Any]) -> None:
    """A secret-bearing argument is handled as a secret one: out of the command line (into the --config file, 0640),
    its value masked in the public plan, and neither its value nor its text in any problem."""
    bearing = secret_bearing_args(result.version)
    if not bearing:
        return
    given = raw.get("sglang_args")
    texts = set()
    if isinstance(given, Mapping):
        for key, value in given.items():
            if isinstance(key, str) and normalize_key(key) in bearing and value not in (None, "", False, True):
                texts |= {str(value), repr(value)}
                try:
                    texts.add(json.dumps(value))
                except (TypeError, ValueError):
                    pass
    texts.discard("")

    def scrub(text: str) -> str:
        for secret in sorted(texts, key=len, reverse=True):
            text = text.replace(secret, SECRET_MARKER)
        return text

    def masked(problem: Problem) -> Problem:
        dest = normalize_key(problem.variable.rsplit(".", 1)[-1])
        value = SECRET_MARKER if dest in bearing and problem.value is not None else problem.value
        if value is problem.value and not texts:
            return problem
        return dataclasses.replace(problem, value=value, message=scrub(problem.message), fix=scrub(problem.fix))

    result.errors = [masked(p) for p in result.errors]
    result.warnings = [masked(p) for p in result.warnings]
    present = {d for d in bearing if result.args.get(d) is not None}
    if present:
        schema = load_schema(result.version)
        result.secrets = result.secrets | present
        result.argv = render_argv(schema, {k: v for k, v in result.args.items() if k not in result.secrets})
        result.config = {**result.config, **{schema.arguments[d].flag[2:]: result.args[d] for d in sorted(present)}}


def visible_facts(facts: Mapping[str, Any], gpus: list[int]) -> dict[str, Any]:
    """The host's facts as an instance restricted to ``gpus`` sees them: those GPUs, renumbered 0..n-1 in that
    order (as CUDA numbers CUDA_VISIBLE_DEVICES), with the links between them; everything else unchanged."""
    by_index = {g.get("index"): g for g in facts["gpus"] if isinstance(g, Mapping)}
    out = dict(facts)
    out["gpus"] = [{**by_index[g], "index": k} for k, g in enumerate(gpus) if g in by_index]
    out["gpu_count"] = len(out["gpus"])
    topology = facts.get("topology") if isinstance(facts.get("topology"), Mapping) else {}
    new_topology: dict[str, Any] = {"nvlink": False}
    for kind in ("links", "p2p_read"):
        table = topology.get(kind) if isinstance(topology.get(kind), Mapping) else {}
        renamed = {}
        for a in range(len(gpus)):
            for b in range(a + 1, len(gpus)):
                lo, hi = sorted((gpus[a], gpus[b]))
                if f"{lo},{hi}" in table:
                    renamed[f"{a},{b}"] = table[f"{lo},{hi}"]
        new_topology[kind] = renamed
    new_topology["nvlink"] = any(str(v).startswith("NV") for v in new_topology["links"].values())
    out["topology"] = new_topology
    return out


def gpu_binding(visible: list[int], facts: Mapping[str, Any] | None, multinode: bool) -> tuple[dict[str, Any], str | None]:
    """How the unit pins an instance to its GPUs, and why it cannot (or None).

    ``visible``: the nvidia-smi indices CUDA is to see, in order. Returns ``{cuda_visible_devices, devices,
    extra_devices, source}``: with the host's facts the GPUs are named by UUID (what a reboot or a driver
    reload does not renumber) and their device nodes by device minor (the driver names the node
    /dev/nvidia<minor>, and the minor is not the nvidia-smi index in general); without facts (a run that
    never gathered them, e.g. validate.yml -e render_dir) by index, which is right where the minors follow
    the index order. A multi-node instance may also open the host's InfiniBand and IMEX channel nodes, so
    NCCL uses them instead of falling back to sockets.
    """
    binding: dict[str, Any] = {"cuda_visible_devices": ",".join(str(g) for g in visible),
                               "devices": [f"/dev/nvidia{g}" for g in visible], "extra_devices": [],
                               "source": "inventory"}
    if facts is None:
        return binding, None
    by_index = {g.get("index"): g for g in facts["gpus"] if isinstance(g, Mapping)}
    missing = [g for g in visible if g not in by_index]
    if missing:
        shown = ", ".join(str(i) for i in sorted(by_index)) or "none"
        return binding, (f"GPU(s) {missing} are not on the host: nvidia-smi lists GPU indices {shown} "
                         f"({facts.get('gpu_count', len(by_index))} GPU(s) in the gathered facts).")
    nameless = [g for g in visible if not by_index[g].get("uuid") or not isinstance(by_index[g].get("minor"), int)]
    if nameless:
        return binding, (f"the facts give no UUID or device minor for GPU(s) {nameless} "
                         "(/proc/driver/nvidia/gpus/*/information unreadable?), so the unit cannot pin them.")
    binding.update(cuda_visible_devices=",".join(str(by_index[g]["uuid"]) for g in visible),
                   devices=[f"/dev/nvidia{by_index[g]['minor']}" for g in visible], source="facts")
    if multinode:
        binding["extra_devices"] = [str(d) for d in list(facts.get("infiniband_devices") or [])
                                    + list(facts.get("imex_channels") or [])]
    return binding, None


def _check_across(plan: HostPlan, raw: Mapping[str, Any]) -> None:
    """Instances of one host share no GPU and no port; the host has the GPUs the inventory declares.

    An instance that lists its GPUs is validated against those GPUs only (the facts as it sees them), so the
    host's GPU count is compared with the facts here; the shorthand without a GPU list is compared by the validator.
    """
    facts = raw.get(FACTS_VAR)
    declared = raw.get("nvidia_gpu_count")
    count = declared_gpu_count(declared)  # None: the validator reports the declaration itself
    listed = raw.get(INSTANCES_VAR) is not None or raw.get(GPUS_VAR) is not None
    if listed and count is not None and facts_usable(facts) and count != facts.get("gpu_count"):
        plan.problems.append(gpu_count_problem(declared, facts))
    owner: dict[int, str] = {}
    ports: dict[int, tuple[str, str]] = {}  # port -> (instance, what opens it)
    for inst in plan.instances:
        if not inst.result.ok:
            continue
        where = INSTANCES_VAR if inst.index is None else f"{INSTANCES_VAR}[{inst.index}]"
        shared = [g for g in inst.gpus if g in owner]
        if shared:
            plan.problems.append(Problem(
                "instances.gpus", f"{where}.gpus", inst.gpus,
                f"instance {inst.name} uses GPU(s) {shared}, which instance {owner[shared[0]]} uses too: two servers on one GPU "
                "run out of memory at start, and a restart of one would release the other's GPUs.",
                "give each instance its own GPUs (gpus: [...], or base_gpu_id in args)"))
        for g in inst.gpus:
            owner.setdefault(g, inst.name)
        mine: dict[int, str] = {}
        for value, what in instance_ports(inst.result):
            if value in mine and mine[value] != what:
                plan.problems.append(Problem(
                    "instances.port", _port_variable(inst, what), value,
                    f"instance {inst.name} opens port {value} twice: for {mine[value]} and for {what}.",
                    "give each of its ports its own number"))
                continue
            mine.setdefault(value, what)
            if value in ports and ports[value][0] != inst.name:
                other, used = ports[value]
                # A backend port of the TLS front on either side: its offset is what to change.
                variable = FRONT_OFFSET_VAR if used.startswith(FRONT_OFFSET_VAR) else _port_variable(inst, what)
                plan.problems.append(Problem(
                    "instances.port", variable, value,
                    f"instance {inst.name} opens port {value} for {what}, which instance {other} opens for {used}: "
                    "the second to start fails to bind it.",
                    "give each instance its own ports (port: 30001 ..., and its own grpc_port, nccl_port, "
                    "dist_init_addr ... in args)"))
            ports.setdefault(value, (inst.name, what))


def _port_variable(inst: Instance, what: str) -> str:
    """The variable that sets a port of ``instance_ports``: an argument of the instance, else its port."""
    where = INSTANCES_VAR if inst.index is None else f"{INSTANCES_VAR}[{inst.index}]"
    args_var = "sglang_args" if inst.index is None else f"{where}.args"
    dest = what.split(" ")[0].removesuffix("'s")
    if dest == FRONT_OFFSET_VAR:
        return dest
    if (dest in _PORT_ARGS[1:] and dest in inst.result.args) or dest == "dist_init_addr":
        return f"{args_var}.{dest}"
    return f"{where}.port"  # the port, or one SGLang derives from it


def _addr_port(addr: Any) -> int | None:
    """The port of a ``host:port`` / ``[v6]:port`` address, or None."""
    text = str(addr or "")
    port = text.rsplit(":", 1)[-1] if ":" in text else ""
    return int(port) if port.isascii() and port.isdigit() else None


def instance_ports(result: Result) -> list[tuple[int, str]]:
    """Every TCP port an instance binds on its host (``(port, what opens it)``), from its typed arguments, with the
    ports SGLang 0.5.23 derives from ``--port`` when they are not given. A port SGLang picks at random is not listed.
    """
    if not result.version:  # validate_host names the release of every result it returns
        raise ValueError("instance_ports: the result names no SGLang release")
    try:
        schema = load_schema(result.version)
    except (KeyError, ValueError):
        schema = None
    # The effective arguments: the instance's, else SGLang's defaults (a bootstrap server's port has one).
    args = {**({d: schema.default(d) for d in _PORT_ARGS} if schema is not None else {}),
            **{k: v for k, v in result.args.items() if v is not None}}

    def on(dest: str) -> bool:
        return args.get(dest) not in (None, False)

    port = result.endpoint.get("port")
    port = port if isinstance(port, int) and not isinstance(port, bool) else None
    out: list[tuple[int, str]] = []
    if port is not None:
        out.append((port, "port"))
    front = result.endpoint.get("front")
    if port is not None and isinstance(front, Mapping):
        # Behind the host's TLS front (roles/sglang_worker_tls) the front binds the instance's port and SGLang its
        # backend port, from which SGLang derives the others.
        port = int(front["backend_port"])
        out.append((port, f"{FRONT_OFFSET_VAR} (the TLS front's backend port: the port plus it)"))
    legacy_grpc = on("smg_grpc_mode") or on("grpc_mode")
    explicit = {dest: args[dest] for dest in _PORT_ARGS[1:] if isinstance(args.get(dest), int)
                and not isinstance(args.get(dest), bool)}
    conditional = {
        "engine_info_bootstrap_port": on("remote_instance_weight_loader_start_seed_via_transfer_engine")
        and not args.get("node_rank"),
        "disaggregation_bootstrap_port": args.get("disaggregation_mode") == "prefill"
        or (on("enable_pd_role_switch") and args.get("disaggregation_mode") not in (None, "null")),
        "encoder_bootstrap_port": on("language_only"),
    }
    for dest, value in explicit.items():
        if conditional.get(dest, True):
            out.append((value, dest))
    if port is not None and legacy_grpc:
        if "grpc_port" not in explicit:  # --port + 10000: sglang/srt/arg_groups/serving_hook.py:368-376
            out.append((port + 10000, "grpc_port (--port + 10000)"))
        if "smg_http_sidecar_port" not in explicit:  # --port + 1: sglang/srt/entrypoints/grpc_server.py:178-182
            out.append((port + 1, "smg_http_sidecar_port (--port + 1)"))
    dist = _addr_port(args.get("dist_init_addr"))
    if dist is not None and not args.get("node_rank"):  # the rendezvous (TCP store) of node 0
        out.append((dist, "dist_init_addr's port"))
    # DP attention: attn_dp_size > 1 (sglang/srt/runtime_context.py:191-199), enable_dp_attention before it.
    dp_attention = on("enable_dp_attention") or (isinstance(args.get("attn_dp_size"), int) and args["attn_dp_size"] > 1)
    if dp_attention and port is not None:
        # DP attention talks over TCP: on dist_init_addr's port, else --port + 233 (server_args.py:819-822), and the
        # DP_DERIVED_PORTS ports after it (port_base = dist_init_port + 1 ...: server_args.py:835-848).
        base = dist
        if base is None and (args.get("nnodes") or 1) == 1:
            base = port + ZMQ_TCP_PORT_DELTA if port + ZMQ_TCP_PORT_DELTA <= 65535 else port - ZMQ_TCP_PORT_DELTA
            out.append((base, "the DP attention rendezvous (--port + 233)"))
        if base is not None:
            first = base + 1 if base + DP_DERIVED_PORTS <= 65535 else base - DP_DERIVED_PORTS - 1
            out += [(first + k, "DP attention's ZMQ ports (after the rendezvous port)") for k in range(DP_DERIVED_PORTS)]
    return out


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


__all__ = ["HOST_VARS", "SECRET_MARKER", "HostPlan", "HostVarsCache", "Instance", "is_plain", "plan_host", "read_host_vars"]
