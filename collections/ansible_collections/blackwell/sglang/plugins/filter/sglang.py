"""Filters that turn validated host variables into what the systemd unit renders."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_inputs import secret_var, text_problem
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_multinode import LayoutError, host_layout, hostvars_getter
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_multinode import rollout_plan as _rollout_plan
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_schema import load_schema
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_schema import secret_host_vars as _all_secret_vars
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_validate import format_report, role_var_problems, validate_host
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import host_plan

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def launch_plan(hostvars: Mapping[str, Any], spec: str | None = None, host: str = "this host") -> dict[str, Any]:
    """Validate one host's variables and return its launch plan; raise with the full report if invalid.

    ``spec`` is the run's override (``-e spec=``) of the host's ``sglang_spec``; None keeps the host's mode.

    The plan: ``args`` (effective, secrets masked), ``argv`` (no secrets), ``env`` (the public
    environment), ``warnings``, and two parts with real secret values, to use only in ``no_log``
    tasks: ``config`` (the secret ``--config`` YAML mapping) and ``secret_env`` (``HF_TOKEN`` and
    ``sglang_env`` entries named like secrets).
    """
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("launch_plan expects a mapping of host variables")
    result = validate_host(hostvars, spec=spec)
    if not result.ok:
        raise AnsibleFilterError("SGLang configuration rejected\n" + format_report(host, result))
    plan = result.as_dict()
    plan["config"] = dict(result.config)
    plan["secret_env"] = dict(result.secret_env)
    return plan


def input_problems(values: Mapping[str, Any]) -> list[str]:
    """``"variable 'value': why"`` for each role variable that is not a plain name or path (the validator's rules).

    For roles that write files before the server role validates anything (``roles/sglang``).
    Usage: ``{'sglang_user': sglang_user, 'sglang_models_dir': sglang_models_dir} | blackwell.sglang.input_problems``.
    """
    try:
        return [f"{var} {value!r}: {why}" for var, value, why in role_var_problems(values)]
    except KeyError as exc:
        raise AnsibleFilterError(f"input_problems does not know the variable {exc}") from None


def secret_host_vars(version: Any = None) -> list[str]:
    """The host variables of the secret arguments of SGLang ``version`` (all releases' when it has no schema).

    Usage: ``sglang_version | blackwell.sglang.secret_host_vars`` -> ``['sglang_admin_api_key', 'sglang_api_key', ...]``.
    """
    try:
        return [secret_var(d) for d in sorted(load_schema(str(version)).secrets)]
    except KeyError:
        return list(_all_secret_vars())


def server_endpoint(host: str, hostvars: Any, groups: Mapping[str, Any], spec: str | None = None) -> dict[str, Any]:
    """Where ``host``'s SGLang server listens and how it is reached, from its launch plan.

    ``{scheme, listen_host, port, local_url, node_rank, url}``: the same plan the validate task and the
    unit use, so ``port``, ``--port`` and ``port: "31000"`` all give 31000. ``local_url`` is how the host
    itself reaches the server, ``url`` how others do (its ``ansible_host``, else its inventory name).
    Raises for an invalid host (the run stops at validation before anything uses this); ``spec`` is the
    run's override of the host's ``sglang_spec``, as validated.
    Usage: ``inventory_hostname | blackwell.sglang.server_endpoint(hostvars, groups, spec | default(none))``.
    """
    result, _ = host_plan(str(host), hostvars, groups, spec)
    if not result.ok:
        raise AnsibleFilterError("SGLang configuration rejected\n" + format_report(str(host), result))
    out = dict(result.endpoint)
    address = str(hostvars[host].get("ansible_host") or host)
    out["url"] = f"{out['scheme']}://{f'[{address}]' if ':' in address else address}:{out['port']}"
    return out


def multinode_layout(host: str, hostvars: Any, groups: Mapping[str, Any]) -> dict[str, Any] | None:
    """``host``'s place in its multi-node instance (group, members, nnodes, node_rank, dist_init_addr), or None.

    Usage: ``inventory_hostname | blackwell.sglang.multinode_layout(hostvars, groups)``.
    """
    try:
        layout = host_layout(str(host), hostvars_getter(hostvars), groups)
    except LayoutError as exc:
        raise AnsibleFilterError(f"{host}: {exc.variable}: {exc.message} Fix: {exc.fix}") from None
    return None if layout is None else layout.as_dict()


def rollout_plan(hosts: list[str], hostvars: Any, groups: Mapping[str, Any], canary: Any = 1, serial: Any = 1,
                 within: list[str] | None = None) -> dict[str, Any]:
    """Canary hosts, remaining hosts and batch sizes that keep each multi-node instance in one batch.

    ``within``: only these hosts take part (the run's --limit); the order stays that of ``hosts``.
    Usage: ``groups.sglang_servers | blackwell.sglang.rollout_plan(hostvars, groups, canary=1, serial=[1, "25%"])``.
    """
    keep = None if within is None else {str(h) for h in within}
    ordered = [str(h) for h in hosts if keep is None or str(h) in keep]
    try:
        return _rollout_plan(ordered, hostvars_getter(hostvars), groups, canary, serial)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def systemd_quote(word: Any) -> str:
    """Quote one argv word for a systemd ExecStart= line (no variable or specifier expansion)."""
    text = str(word)
    problem = text_problem(text)
    if problem:
        raise AnsibleFilterError(f"refusing to write {text!r} into ExecStart=: {problem}")
    text = text.replace("%", "%%").replace("$", "$$")
    if text and _SAFE.fullmatch(text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def systemd_text(value: Any) -> str:
    """Free text for a unit setting that expands specifiers only (``Description=``): ``%`` doubled.

    Text that a unit line cannot carry (line breaks, control characters) is refused, never rewritten.
    """
    text = str(value)
    problem = text_problem(text)
    if problem:
        raise AnsibleFilterError(f"refusing to write {text!r} into a unit: {problem}")
    return text.replace("%", "%%")


def systemd_env_quote(value: Any) -> str:
    """Quote a value for a systemd EnvironmentFile= line (double quotes, shell-style escapes)."""
    text = str(value)
    problem = text_problem(text)
    if problem:
        raise AnsibleFilterError(f"an EnvironmentFile value cannot hold this text: {problem}")
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return '"' + text + '"'


def systemd_exec_lines(argv: list[Any]) -> list[str]:
    """Group argv into one line per flag (the flag with its values), each word quoted for systemd."""
    lines: list[list[str]] = []
    for word in argv:
        text = str(word)
        if text.startswith("--") or not lines:
            lines.append([])
        lines[-1].append(systemd_quote(text))
    return [" ".join(line) for line in lines]


class FilterModule:
    """blackwell.sglang filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "launch_plan": launch_plan,
            "multinode_layout": multinode_layout,
            "server_endpoint": server_endpoint,
            "rollout_plan": rollout_plan,
            "systemd_quote": systemd_quote,
            "systemd_exec_lines": systemd_exec_lines,
            "systemd_env_quote": systemd_env_quote,
            "systemd_text": systemd_text,
            "secret_host_vars": secret_host_vars,
            "input_problems": input_problems,
        }
