# SPDX-License-Identifier: Apache-2.0
"""Action plugin: a role's own variables against the input contract, at the role's entry, before anything changes.

Documented by the docs-only module ``plugins/modules/check_inputs.py``, where ansible-doc and ansible-test read it.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_deployment as deployment
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_contract import (
    CONTRACT,
    MODELS_DIR_VAR,
    SERVICE_ROOTS_VAR,
    check,
    context_of,
    size_problem,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_gateway import format_problem, gateway_problems


def entry_options(role_path: str, entry: str) -> list[str]:
    """The variables of entry point ``entry`` of the role at ``role_path``, from its ``meta/argument_specs.yml``."""
    path = os.path.join(role_path, "meta", "argument_specs.yml")
    try:
        with open(path, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise AnsibleActionFail(f"check_inputs: cannot read {path}: {exc}") from None
    entry_spec = (specs.get("argument_specs") or {}).get(entry)
    if not isinstance(entry_spec, dict):
        raise AnsibleActionFail(f"check_inputs: {path} has no entry point {entry!r}")
    return list((entry_spec.get("options") or {}).keys())


def role_defaults(role_path: str) -> dict[str, Any]:
    """The role's ``defaults/main.yml`` as written (templates unexpanded); empty when it has none."""
    return deployment.defaults_file(role_path)


class ActionModule(ActionBase):
    """Check the role's variables (those of its argument spec that the play defines); never contacts a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("role_path", "entry", "extra", "gateway"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec={
            "role_path": {"type": "path", "required": True},
            "entry": {"type": "str", "default": "main"},
            "extra": {"type": "list", "elements": "str", "default": []},
            "gateway": {"type": "bool", "default": False},
        })
        names = [n for n in [*entry_options(args["role_path"], args["entry"]), *args["extra"]] if n in CONTRACT]
        defaults = role_defaults(args["role_path"])
        values: dict[str, Any] = {}
        problems: list[str] = []
        for name in dict.fromkeys(names):
            if name not in task_vars:
                continue
            raw = task_vars[name]
            if name in defaults and raw == defaults[name]:
                continue  # the role's own default: its inputs are variables checked themselves
            too_big = size_problem(raw)  # before templating walks it (a YAML alias chain)
            if too_big:
                problems.append(f"{name}: {too_big}.")
                continue
            try:
                values[name] = self._templar.template(raw)
            except AnsibleError as exc:
                problems.append(f"{name}: does not template: {to_text(exc).splitlines()[0]}")
        # The roots service directories are checked against: the inventory's, also where the role does not own them.
        context_vars = {}
        for name in (SERVICE_ROOTS_VAR, MODELS_DIR_VAR):
            if name in values:
                context_vars[name] = values[name]
            elif name in task_vars:
                try:
                    context_vars[name] = self._templar.template(task_vars[name])
                except AnsibleError:
                    pass  # its own role names it
        known = self._checks_defaults(args["role_path"])
        problems += [f"{f.message()} Fix: {f.fix()}." for f in check(values, context=context_of(context_vars, known))]
        if args["gateway"] and not problems:
            problems += self._gateway_problems(names, values, task_vars, known)
        result.update(changed=False, checked=sorted(values), problems=problems)

        if problems:
            result["failed"] = True
            result["msg"] = "Input contract: " + " | ".join(problems)
        else:
            result["msg"] = f"{len(values)} variable(s) match the input contract"
        return result

    def _checks_defaults(self, role_path: str) -> dict[str, Any]:
        """The roles' defaults the checks read (sglang_deployment.DEFAULTS_READ: the roots and project directories of
        the contract, the gateway's settings), from the roles' own defaults files (this role's siblings first), each
        templated with the roles' defaults alone: the values the validate action checks every host against."""
        try:
            defaults = deployment.roles_defaults(deployment.role_search_path(os.path.dirname(role_path)))
        except LookupError as exc:
            raise AnsibleActionFail(f"check_inputs: {exc}") from None
        return deployment.rendered_defaults(defaults, deployment.DEFAULTS_READ)

    def _gateway_problems(self, names: list[str], values: dict[str, Any], task_vars: dict[str, Any],
                          known: dict[str, Any]) -> list[str]:
        """The gateway's own rules (sglang_gateway.gateway_problems) over every variable of the role as the play has
        it, defaults included, and the GPU hosts of its sglang_router_worker_group (their URLs, their keys);
        ``known``: the roles' defaults (_checks_defaults)."""
        settings = dict(values)
        for name in names:
            if name not in settings and name in task_vars:
                try:
                    settings[name] = self._templar.template(task_vars[name])
                except AnsibleError:
                    continue  # a default that needs what the play does not define: the contract named what it could
        group = settings.get(deployment.WORKER_GROUP_VAR, known.get(deployment.WORKER_GROUP_VAR))
        hostvars = task_vars.get("hostvars") or {}
        members = (task_vars.get("groups") or {}).get(group) or [] if isinstance(group, str) else []
        workers = {host: hostvars[host] for host in members if host in hostvars}
        return [format_problem(p) for p in gateway_problems(settings, workers, known)]
