# SPDX-License-Identifier: Apache-2.0
"""Action plugin: validate the SGLang launch configuration of many hosts in one pass.

Documented by the docs-only module ``plugins/modules/validate.py``, where ansible-doc and ansible-test read it.
"""

from __future__ import annotations

import difflib
import gc
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.path import unfrackpath
from ansible.utils.vars import load_extra_vars
from ansible_collections.blackwell.sglang.plugins.filter.sglang import FilterModule
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_deployment as deployment
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_lock
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import SETTINGS, server_files
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import (  # noqa: F401 (re-exported)
    HOST_VARS,
    PLANNER_DEFAULTS,
    PUBLISHED,
    HostPlan,
    HostVarsCache,
    instance_ports,
    internal_problem,
    plan_host,
    read_host_vars,
    upgrade_problems,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_multinode import GROUP_VAR, Layout, hostvars_getter
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import PlanDir, PlanDirError, host_component_problem
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import available_versions
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Problem, Result, format_report
from jinja2 import TemplateError

display = Display()

# The roles whose defaults reach a plan, its files and the contract's and the gateway's checks, dependency first
# (roles/sglang_server depends on sglang_common): sglang_deployment.DEFAULTS_ROLES.
DEFAULTS_ROLES = deployment.DEFAULTS_ROLES
# The role defaults every host's checks read whatever the host sets (the planner's fallbacks, the roots and project
# directories of the contract, the gateway's settings): read once a pass, the same for every host.
PASS_DEFAULTS = tuple(dict.fromkeys((*PLANNER_DEFAULTS, *deployment.DEFAULTS_READ)))
# The plan's inputs that have a role default: a host that does not set one is planned with the role's value.
PLAN_DEFAULTS = ("sglang_version", "sglang_server_service_name", "sglang_server_user", "sglang_server_group",
                 "sglang_server_venv", "sglang_server_config_dir", "sglang_server_state_dir", "sglang_server_cache_dir",
                 "sglang_server_libexec_dir", "sglang_models_dir")
# Host variables the roles' defaults may read (a host that sets none of them shares its defaults with its twins).
_DEFAULTS_READ = ("sglang_", "nvidia_", "cuda_")

# The role that installs SGLang from the lock (sglang_lock), whose defaults choose it; its path is their role_path.
LOCK_ROLE = "sglang"
# The collection's filters by the names the roles' defaults use them with (sglang_lock_file's sglang_lock_name).
_FILTERS = {f"blackwell.sglang.{name}": f for name, f in FilterModule().filters().items()}

# Effective arguments that may differ between the nodes of one instance.
_PER_NODE_ARGS = {"node_rank", "host", "model_path"}


def check_instances(layouts: dict[str, Layout], outcomes: dict[str, Result], hosts: list[str]) -> None:
    """Problems that span the hosts of a multi-node instance; added to the outcomes of the hosts concerned.

    Every node of the instance must be in this run (a partial run would restart one node of a running
    instance), and its nodes must agree on the SGLang version and on every argument but the node rank.
    """
    in_run = set(hosts)
    for host, layout in layouts.items():
        missing = [m for m in layout.members if m not in in_run]
        if missing:
            outcomes[host].errors.append(Problem(
                "multinode.partial", GROUP_VAR, layout.group,
                f"{host} is node {layout.node_rank} of the multi-node instance {layout.group!r}, whose other node(s) "
                f"{', '.join(missing)} are not part of this run: its nodes are validated, restarted and rolled back together.",
                f"include the whole group (e.g. --limit {layout.group}) or none of it"))
            continue
        leader = layout.members[0]
        if host == leader or not outcomes[leader].ok or not outcomes[host].ok:
            continue
        mine, theirs = outcomes[host], outcomes[leader]
        if mine.version != theirs.version:
            mine.errors.append(Problem("multinode.mismatch", "sglang_version", mine.version,
                                       f"{host} runs SGLang {mine.version}, node 0 of {layout.group!r} ({leader}) {theirs.version}.",
                                       f"set sglang_version for the whole group {layout.group}"))
        keys = (set(mine.args) | set(theirs.args)) - _PER_NODE_ARGS
        if theirs.endpoint.get("front"):
            # Node 0 behind its host's TLS front (roles/sglang_worker_tls) listens on its backend port, the other nodes
            # (no API, no front) on the instance's: compared as the instance's port, the endpoints'.
            keys.discard("port")
            if mine.endpoint.get("port") != theirs.endpoint.get("port"):
                keys.add("port")
        differ = sorted(k for k in keys if mine.args.get(k) != theirs.args.get(k))
        if differ:
            shown = ", ".join(f"{k}={mine.args.get(k)!r} vs {theirs.args.get(k)!r}" for k in differ[:6])
            mine.errors.append(Problem("multinode.mismatch", "sglang_args", None,
                                       f"{host} differs from node 0 of {layout.group!r} ({leader}): {shown}.",
                                       f"set sglang_args once for the whole instance, in group_vars/{layout.group}.yml"))


def _spec_words(spec: Any) -> str:
    """The run's spec override as the summary line shows it: ``spec=auto`` (-e spec=auto), or, without one, that each
    host's own sglang_spec applies (not ``spec=sglang_spec``, which read like a variable left unexpanded)."""
    if isinstance(spec, Mapping):
        return "spec=explicit " + json.dumps(dict(spec), sort_keys=True, default=str)
    return f"spec={spec}" if spec not in (None, "") else "each host's own sglang_spec"


def _memo(cache: dict[str, Any], inputs: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept in ``cache`` under the JSON of ``inputs`` for a pass: hosts with equal inputs share one
    result. Inputs that are not JSON (a value of an odd type) are computed each time. Callers copy what they return."""
    try:
        key = json.dumps(inputs, sort_keys=True)
    except (TypeError, ValueError):
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]


class ActionModule(ActionBase):
    """Validate every listed host; never contacts a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("hosts", "spec", "fail_on_error", "render_dir", "render_role", "check_internals", "role_vars",
                             "secret_plans", "show_report", "allow_no_servers", "check_locks"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        with _collector_paused():
            return self._run(tmp, task_vars)

    def _run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(
            argument_spec={
                "hosts": {"type": "list", "elements": "str"},
                # A mode (keep, auto, off, explicit) or the triple itself (a mapping): sglang_validate.spec_triple.
                "spec": {"type": "raw"},
                "fail_on_error": {"type": "bool", "default": True},
                "render_dir": {"type": "path"},
                "render_role": {"type": "str", "default": "sglang_server"},
                "check_internals": {"type": "bool", "default": True},
                "role_vars": {"type": "dict"},
                "secret_plans": {"type": "bool", "default": False},
                "show_report": {"type": "bool"},
                "allow_no_servers": {"type": "bool", "default": False},
                "check_locks": {"type": "bool", "default": True},
            },
        )
        # A '__' extra var overrides what the roles and playbooks set and register (extra vars win over everything),
        # this task's own result included: the run stops here, whatever fail_on_error says.
        forged = sorted(str(n) for n in load_extra_vars(self._loader) if str(n).startswith("__") or str(n) in PUBLISHED)
        if forged:
            raise AnsibleActionFail("; ".join(internal_problem(n, "the run's extra vars (-e)").message for n in forged)
                                    + f" Remove {', '.join(forged)} from -e. Nothing was validated or changed.")
        hosts = list(dict.fromkeys(args["hosts"] if args["hosts"] is not None else task_vars.get("ansible_play_hosts_all", [])))
        # Each host's variables gathered once; the inventory's sources for the upgrade check's inventory-only view.
        hostvars = HostVarsCache(task_vars["hostvars"], self._loader, task_vars.get("ansible_inventory_sources"),
                                 [self._loader.get_basedir()] if self._loader is not None else [])
        groups = task_vars.get("groups", {})
        if args["hosts"] is None and not args["allow_no_servers"]:
            missing = no_servers_problem(groups)
            if missing:
                raise AnsibleActionFail(missing)
        get = hostvars_getter(hostvars)
        # The GPU hosts are planned; every host (gateways, monitoring hosts ...) gets the input contract.
        # A plain host list (no groups at all): every host is a GPU host, as before. An inventory with groups but
        # without this one got here only with allow_no_servers: none is.
        plain = not any(g not in ("all", "ungrouped") for g in groups)
        servers = set(hosts) if args["hosts"] is not None or (plain and deployment.SERVERS_GROUP not in groups) \
            else set(groups.get(deployment.SERVERS_GROUP) or [])
        per_host: dict[str, dict[str, Any]] = {}
        warnings = 0
        outcomes: dict[str, Result] = {}
        plans: dict[str, HostPlan] = {}
        layouts: dict[str, Layout] = {}
        for host in hosts:
            if host not in hostvars:
                outcomes[host] = Result(errors=[Problem("host.unknown", "hosts", host, f"{host!r} is not in the inventory.",
                                                        "check the host name (ansible-inventory --list)")])
                continue
            # Every variable of the input contract the inventory sets, for every host of every group; a value too big
            # to read stops the host's checks before anything (the planner included) walks it.
            view = hostvars[host]
            raw = view.raw if isinstance(getattr(view, "raw", None), Mapping) else view  # before templating, where it can
            too_big = deployment.oversized(raw)
            if too_big:
                outcomes[host] = Result(errors=too_big)
                continue
            planned = host in servers
            gateway = host in (groups.get(deployment.ROUTERS_GROUP) or [])
            # What the planner or the gateway's own check reads is theirs to report (once).
            skip = [*(HOST_VARS if planned else ()), *(n for n in raw if gateway and str(n).startswith("sglang_router_"))]
            checked = deployment.contract_problems(host, raw, view.__getitem__, skip, self._pass_defaults())
            if args["check_internals"]:
                checked += [internal_problem(n, "the inventory") for n in hostvars.inventory_internals(host)]
            unknown = deployment.unknown_problems(raw, (*HOST_VARS, *PUBLISHED))  # the run's own facts are known
            if gateway:
                checked += deployment.gateway_problems(host, raw, view.__getitem__, hostvars, groups, self._pass_defaults())
            if not planned:
                outcomes[host] = Result(errors=checked + deployment.port_problems(
                    host, _groups_of(host, groups), hostvars[host], self._port_defaults()), warnings=unknown)
                continue
            plans[host] = plan_host(host, hostvars, groups, args["spec"], get,
                                    args["role_vars"], self._role_defaults(host, raw, PLAN_DEFAULTS),
                                    role_defaults=self._pass_defaults())
            outcomes[host] = plans[host].result()
            outcomes[host].errors += checked
            outcomes[host].warnings += unknown
            # The ports of the instances that planned, against the roles' ports on the host.
            outcomes[host].errors += deployment.port_problems(
                host, _groups_of(host, groups), hostvars[host], self._port_defaults(), _instance_ports(plans[host]))
            # -e sglang_version=T on hosts whose inventory pins another release: what the upgrade renames, removes,
            # narrows or re-defaults among their arguments (nothing when the versions match).
            for problem in upgrade_problems(host, hostvars, outcomes[host].version, outcomes[host], self._pass_defaults()):
                (outcomes[host].errors if problem.level == "error" else outcomes[host].warnings).append(problem)
            # The lock roles/sglang installs the release from (sglang_lock): refused here, not by the role mid-run.
            if args["check_locks"]:
                outcomes[host].errors += self._lock_problems(view, raw, outcomes[host])
            if plans[host].layout is not None:
                layouts[host] = plans[host].layout
        check_instances(layouts, outcomes, hosts)
        for host, outcome in outcomes.items():
            per_host[host] = {**outcome.as_dict(), **(plans[host].published(args["spec"]) if host in plans else {"instances": []})
                              } if outcome.ok else {
                "ok": False,
                "errors": [f"{p.variable}: {p.rule}" for p in outcome.errors],
                "warnings": [f"{p.variable}: {p.rule}" for p in outcome.warnings],
            }
            warnings += len(outcome.warnings)
        invalid = [h for h, r in per_host.items() if not r["ok"]]
        if invalid:  # the readable report is the point now; keep the per-host data small for big fleets
            per_host = {h: r if not r["ok"] else {"ok": True, "warnings": [f"{w['variable']}: {w['rule']}" for w in r["warnings"]]}
                        for h, r in per_host.items()}
        report = grouped_report(outcomes)
        summary = (f"SGLang configuration rejected for {len(invalid)} of {len(hosts)} host(s): {_names(invalid)}" if invalid else
                   f"{len(hosts)} of {len(hosts)} host(s) valid") + f", {warnings} warning(s), {_spec_words(args['spec'])}"
        result.update(changed=False, hosts=per_host, invalid_hosts=invalid, spec=args["spec"], report=report, msg=summary)
        if args["secret_plans"] and not invalid:  # the files' inputs, secrets included: the caller's task is no_log
            result["secret_plans"] = {h: [i.full() for i in plans[h].instances] for h in plans}
        if args["render_dir"] and not invalid:  # an invalid host stops the run before anything is rendered
            result["rendered"] = self._render(args, hostvars, plans)
            result["msg"] += f"; plan of {len(plans)} host(s) rendered into {result['rendered']['dir']}"
        show = args["fail_on_error"] if args["show_report"] is None else args["show_report"]
        if report and show:  # printed once, here, as lines: a result's message is printed JSON-escaped by the default
            # callback outside the project's ansible.cfg, and twice when the task fails. On stderr: a machine-readable
            # callback's stdout (json, yaml) stays what it was; the report is also the result's "report".
            display.display(report, color="bright red" if invalid else "bright purple", stderr=True)
        if show and not invalid:  # a passing run says so in one line too (the default callback hides an ok task's msg)
            display.display(f"validate: {result['msg']}", color="green", stderr=True)
        if not args["fail_on_error"]:
            if show and invalid:
                result["msg"] += " (report above)"
            return result  # the caller decides (playbooks/validate.yml: a task of its own stops the run)
        if invalid:
            result["failed"] = True
            result["msg"] += " (report above)"
            del result["report"]
        return result

    def _port_defaults(self) -> dict[str, Any]:
        """The default of each port the roles bind (deployment.GROUP_PORTS), from the roles' own defaults files."""
        if self._ports is None:
            self._ports = {}
            for role in deployment.PORT_ROLES if self._loader is not None else ():
                try:
                    data = self._defaults_of(role)
                except (AnsibleError, OSError):
                    continue  # a role not installed here: its port is checked where it is set
                self._ports.update({k: v for k, v in data.items() if k.endswith("_port") and isinstance(v, int)})
        return self._ports

    _ports: dict[str, Any] | None = None
    _defaults: dict[str, Any] | None = None
    _pass: dict[str, Any] | None = None
    _resolved: dict[str, dict[str, Any]] | None = None
    _role_files: dict[str, dict[str, Any]] | None = None
    _locks: dict[str, list[Problem]] | None = None

    def _lock_problems(self, view: Mapping[str, Any], raw: Mapping[str, Any], outcome: Result) -> list[Problem]:
        """The host's lock (roles/sglang, sglang_lock true): sglang_lock_file must be a lock of the host's release.

        Each of sglang_lock, sglang_torch_requirement, sglang_locks_dir and sglang_lock_file is the host's own value
        when its inventory sets it, else roles/sglang's default from its defaults file (the one source), rendered with
        the host's values before it and the role's own role_path. Nothing is checked with sglang_lock false, for a
        release the validator refused (host.version) or where the contract refused one of these variables; a value
        that uses a variable only a role defines is left to the role's own check (tasks/lock.yml). Hosts with the same
        values share one check a pass.
        """
        if any(p.rule == "host.version" or p.variable in sglang_lock.LOCK_VARS for p in outcome.errors):
            return []
        own: dict[str, Any] = {}
        for name in ("sglang_version", *sglang_lock.LOCK_VARS):
            if name in raw:  # names only: reading a value templates it
                try:
                    own[name] = view[name]
                except Exception:  # noqa: BLE001 (undefined: the role's own check; a template error: the contract's)
                    return []
        defaults = self._role_defaults_files()
        version = outcome.version or own.get("sglang_version", defaults.get("sglang_version"))
        if self._locks is None:
            self._locks = {}
        return list(_memo(self._locks, [version, own], lambda: self._lock_check(defaults, version, own)))

    def _lock_check(self, defaults: Mapping[str, Any], version: Any, own: dict[str, Any]) -> list[Problem]:
        """_lock_problems' check of one set of the host's own values (``own``) for SGLang ``version``."""
        values = {**own, "sglang_version": version, "role_path": self._role_dir(LOCK_ROLE)}
        try:
            for name in sglang_lock.LOCK_VARS:  # in order: each default may use those before it
                if name not in own:
                    values.update(deployment.rendered_defaults(defaults, (name,), values, _FILTERS))
        except TemplateError as exc:
            raise AnsibleActionFail(f"roles/{LOCK_ROLE}'s defaults of {', '.join(sglang_lock.LOCK_VARS)} do not render: "
                                    f"{exc}") from None
        missing = [n for n in sglang_lock.LOCK_VARS if n not in values]
        if missing:
            raise AnsibleActionFail(f"roles/{LOCK_ROLE}'s defaults/main.yml does not define {', '.join(missing)}")
        problems: list[Problem] = []
        if boolean(values["sglang_lock"], strict=False):
            refusal = sglang_lock.lock_refusal(str(version), values["sglang_torch_requirement"], values["sglang_locks_dir"],
                                               values["sglang_lock_file"], "sglang_lock_file" in own, available_versions())
            if refusal is not None:
                problems.append(Problem(*refusal))
        return problems

    def _defaults_of(self, role: str) -> dict[str, Any]:
        """``role``'s defaults/main.yml as the loader reads it (templates kept, trusted as a role's own), once a pass:
        the one reader of the roles' defaults files (ports, plan inputs, render settings)."""
        if self._role_files is None:
            self._role_files = {}
        if role not in self._role_files:
            path = os.path.join(self._role_dir(role), "defaults", "main.yml")
            try:
                data = self._loader.load_from_file(path, trusted_as_template=True)
            except TypeError:  # pragma: no cover (ansible-core < 2.19)
                data = self._loader.load_from_file(path)
            self._role_files[role] = dict(data or {})
        return self._role_files[role]

    def _role_dir(self, name: str) -> str:
        """Where the role ``name`` is: a path as given; else this collection's own role (``roles/<name>`` beside its
        plugins, as ``ansible-galaxy collection install`` lays it out); else the play's ``roles/`` directory, the roles
        path (ansible.cfg ``roles_path``) or the playbook's own directory, as a play would search them."""
        if os.path.isabs(name):
            return name
        short = name.rsplit(".", 1)[-1] if name.count(".") >= 2 else name
        collection_roles = Path(__file__).resolve().parents[2] / "roles"
        basedir = self._loader.get_basedir()
        for path in [str(collection_roles), os.path.join(basedir, "roles"), *C.DEFAULT_ROLES_PATH, basedir]:
            candidate = unfrackpath(os.path.join(path, short))
            if os.path.isdir(candidate):
                return candidate
        raise AnsibleActionFail(f"the role {name!r} was not found in the blackwell.sglang collection, "
                                f"{os.path.join(basedir, 'roles')} or the roles path")

    def _role_defaults_files(self) -> dict[str, Any]:
        """The defaults of the roles whose variables reach a plan and its files (DEFAULTS_ROLES, later ones win, as a
        role's defaults win over its dependency's): read from the roles' own defaults/main.yml, the one source."""
        if self._defaults is None:
            self._defaults = {}
            for role in DEFAULTS_ROLES if self._loader is not None else ():
                self._defaults.update(self._defaults_of(role))
        return self._defaults

    def _pass_defaults(self) -> dict[str, Any]:
        """The roles' defaults of PASS_DEFAULTS as the roles' defaults files have them, each templated with the roles'
        defaults alone (``sglang_bundle_dir: "{{ bundle_dir | default('/srv/sglang-bundle') }}"``), not with any
        host's variables: what every host is checked against, once a pass. A name no role defines is left out (the
        function that needs it says so)."""
        if self._pass is None:
            self._pass = deployment.rendered_defaults(self._role_defaults_files(), PASS_DEFAULTS)
        return self._pass

    def _role_defaults(self, host: str, raw: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        """The role defaults of ``names`` that ``host``'s own variables do not set, each templated with the host's
        variables over the roles' defaults (``sglang_server_user: "{{ sglang_common_user }}"`` follows the host's
        ``sglang_common_user``): what a play's roles would see. Hosts whose variables the defaults read are equal
        share one resolution."""
        defaults = self._role_defaults_files()
        wanted = [n for n in names if n not in raw and n in defaults]
        if not wanted:
            return {}
        read = sorted(n for n in raw if n.startswith(_DEFAULTS_READ))

        def resolve() -> dict[str, Any]:
            templar = self._templar.copy_with_new_env(available_variables={**defaults, **raw})
            return {n: templar.template(defaults[n]) for n in wanted}

        if self._resolved is None:
            self._resolved = {}
        return dict(_memo(self._resolved, [wanted, {n: raw[n] for n in read}], resolve))

    def _render(self, args: dict[str, Any], hostvars: HostVarsCache, plans: dict[str, HostPlan]) -> dict[str, Any]:
        """Write render_dir/<host>/ with each instance's unit, environment file and --config YAML (secrets replaced by
        a marker), from the plans of this pass, by the function the role installs them with (sglang_files)."""
        start = time.monotonic()
        templates = os.path.join(self._role_dir(args["render_role"]), "templates")
        root = Path(os.path.realpath(os.path.expanduser(args["render_dir"])))
        # Host names become directory names: all of them are checked before anything is written.
        unsafe = [f"{host!r} ({why})" for host in plans if (why := host_component_problem(host))]
        if unsafe:
            raise AnsibleActionFail(f"render_dir: inventory host name(s) {', '.join(unsafe[:5])} cannot name a plan "
                                    "directory. Nothing was rendered.")
        files = 0
        try:
            with PlanDir(root) as plan_dir:
                for host, plan in plans.items():
                    view = hostvars[host]
                    raw = view.raw if isinstance(getattr(view, "raw", None), Mapping) else view
                    settings = {n: view[n] for n in SETTINGS if n in raw}
                    settings.update(self._role_defaults(host, raw, SETTINGS))
                    rendered: dict[str, str] = {}
                    for instance in plan.instances:
                        out = server_files(instance.full(), settings, templates, mask_secrets=True)
                        rendered.update({os.path.basename(out["paths"][k]): out[k] for k in ("unit", "env", "config")
                                         if out[k] is not None})
                    plan_dir.write(host, rendered)
                    files += len(rendered)
        except PlanDirError as exc:
            raise AnsibleActionFail(f"{exc} Nothing more was rendered.") from None
        return {"dir": str(root), "templates": templates, "hosts": len(plans), "files": files,
                "seconds": round(time.monotonic() - start, 3)}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one pass over the fleet, its objects exempted from it afterwards.

    Every value Ansible reads from an inventory file is a tagged object (its origin) that the collector tracks, and
    the pass keeps each host's variables until it ends: with the collector on, its full collections scan all of them
    again and again as the fleet's variables accumulate (about a fifth of the reading at 5,000 hosts). In the worker
    process of its task (forked by ansible-playbook, it exits after the task), ``gc.freeze`` then moves what the pass
    allocated out of the collector's generations, so re-enabling it does not scan them once more; elsewhere (a test
    calling the plugin) nothing is frozen. Nothing read or computed changes.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if multiprocessing.parent_process() is not None:
            gc.freeze()
        if enabled:
            gc.enable()


def no_servers_problem(groups: Mapping[str, Any]) -> str:
    """Why a run cannot go on without GPU hosts, or "": the inventory has groups but no host in ``sglang_servers``.

    A plain host list (only ``all`` and ``ungrouped``) is a list of GPU hosts, as before; a misnamed group would
    otherwise pass validation and leave every later play with "no hosts matched".
    """
    if groups.get(deployment.SERVERS_GROUP):
        return ""
    named = sorted(str(g) for g in groups if g not in ("all", "ungrouped"))
    if deployment.SERVERS_GROUP not in groups and not named:
        return ""
    close = difflib.get_close_matches(deployment.SERVERS_GROUP, named, n=2, cutoff=0.6)
    state = "is empty" if deployment.SERVERS_GROUP in groups else "is not in the inventory"
    return (f"The GPU hosts' group {deployment.SERVERS_GROUP} {state}"
            + (f" (did you mean {' or '.join(close)}?)" if close else "")
            + f"; the inventory's groups: {', '.join(named) or 'none'}. Put the GPU hosts in {deployment.SERVERS_GROUP}, "
            "or, for a run on gateways or monitoring hosts only, set -e allow_no_servers=true. Nothing was validated or changed.")


def _groups_of(host: str, groups: Mapping[str, Any]) -> list[str]:
    """The deployment groups ``host`` is in (those whose roles bind ports), in a fixed order."""
    return [g for g in deployment.GROUP_PORTS if host in (groups.get(g) or [])]


def _instance_ports(plan: HostPlan) -> dict[int, str]:
    """Port -> the instance that binds it, from a host's plan: every port SGLang binds (HTTP, gRPC, NCCL, the
    rendezvous, DP attention's, the bootstrap servers': sglang_hostplan.instance_ports), not only the HTTP one."""
    out: dict[int, str] = {}
    for inst in plan.instances:
        for port, what in instance_ports(inst.result) if inst.result.ok else ():
            out.setdefault(port, f"SGLang instance {inst.name} ({what})")
    return out


def _names(hosts: list[str], shown: int = 5) -> str:
    """'a, b, c' or 'a, b, c, d, e and 407 more'."""
    return ", ".join(hosts[:shown]) + (f" and {len(hosts) - shown} more" if len(hosts) > shown else "")


def grouped_report(outcomes: dict[str, Result]) -> str:
    """One block per distinct set of problems: hosts with identical problems share one block ("412 hosts: ...")."""
    groups: dict[str, list[str]] = {}
    for host, outcome in outcomes.items():
        if outcome.errors or outcome.warnings:
            head, _, body = format_report("", outcome).partition("\n")
            groups.setdefault(head.removeprefix(": ") + "\n" + body, []).append(host)
    blocks = []
    for text, members in sorted(groups.items(), key=lambda item: (-("ERROR" in item[0]), item[1][0])):
        head, _, body = text.partition("\n")
        label = members[0] if len(members) == 1 else f"{len(members)} hosts ({_names(members)})"
        blocks.append(f"{label}: {head}\n{body}")
    return "\n\n".join(blocks)
