# SPDX-License-Identifier: Apache-2.0
"""The files of one SGLang instance, rendered from its launch plan: the one rendering function.

:func:`server_files` turns an instance's plan (``sglang_hostplan.Instance.full``) and the server role's settings
(:data:`SETTINGS`: the account, the directories and the unit's timeouts) into the systemd unit, the environment
file, the secret ``--config`` YAML and the spec record that the sglang_server role installs
(``tasks/install.yml``, through the ``blackwell.sglang.server_files`` filter) and that ``playbooks/validate.yml -e
render_dir=DIR`` writes for review (the validate action), with the same templates (``templates/`` at the top of the
repository; ``roles/sglang_server/templates`` in the collection).

It is a pure function: plain Jinja2 with the few filters below, no Ansible templating, no variable of a play. Every
value that reaches a unit or environment line is quoted for systemd (:func:`systemd_quote`,
:func:`systemd_env_quote`, :func:`systemd_text`), or refused when no quoting can carry it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import text_problem

# The sglang_server role's variables the files read (its defaults/main.yml holds their defaults).
SETTINGS = (
    "sglang_server_user",
    "sglang_server_group",
    "sglang_server_venv",
    "sglang_server_config_dir",
    "sglang_server_state_dir",
    "sglang_server_cache_dir",
    "sglang_server_libexec_dir",
    "sglang_server_timeout_start_sec",
    "sglang_server_drain_timeout",
    "sglang_server_restart_sec",
    "sglang_server_start_limit_burst",
    "sglang_server_start_limit_interval_sec",
)
TEMPLATES = {"unit": "sglang.service.j2", "env": "sglang.env.j2", "config": "sglang-config.yaml.j2"}
# What stands in for a secret value in a plan rendered for review (render_dir).
SECRET_MARKER = "<secret: set on the host only>"
# The first line of every file (Ansible's default ansible_managed).
MANAGED = "Ansible managed"
LAUNCHER = "sglang-launch.py"

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


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


def _plain_data(value: Any) -> Any:
    """``value`` as plain ``dict``, ``list`` and ``str``: Ansible hands templates its own string types (a value with its
    origin, a vaulted one), which the YAML writer does not know; their text is what is written."""
    if isinstance(value, Mapping):
        return {_plain_data(k): _plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_data(v) for v in value]
    if isinstance(value, str):
        text = str(value)  # a vaulted value decrypts here
        return text if type(text) is str else str.__str__(text)  # pylint: disable=unidiomatic-typecheck
    return value


def _nice_yaml(value: Any) -> str:
    """YAML as Ansible's ``to_nice_yaml(indent=2, width=2147483647)`` writes plain data."""
    return yaml.safe_dump(_plain_data(value), indent=2, allow_unicode=True, default_flow_style=False, width=2147483647)


@functools.lru_cache(maxsize=8)
def _environment(templates_dir: str) -> jinja2.Environment:
    """The templates of ``templates_dir`` as Ansible's template module renders them (``trim_blocks``, the file's
    trailing newline kept, no autoescaping); an undefined name is an error, never an empty string."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir), trim_blocks=True, lstrip_blocks=False,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters.update(systemd_quote=systemd_quote, systemd_text=systemd_text, systemd_env_quote=systemd_env_quote,
                       to_nice_yaml=_nice_yaml)
    return env


def paths(plan: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, str]:
    """Where the instance's files live: ``unit``, ``env``, ``config``, ``marker`` (the spec record) and ``last_good``."""
    service, config_dir = str(plan["service"]), str(settings["sglang_server_config_dir"])
    return {"unit": f"/etc/systemd/system/{service}.service", "env": f"{config_dir}/{service}.env",
            "config": f"{config_dir}/{service}.yaml", "marker": f"{config_dir}/{service}.spec.json",
            "last_good": f"{config_dir}/{plan['last_good']}"}


def server_argv(plan: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """The arguments of ``sglang.launch_server``: the plan's, and ``--config`` when it has secret arguments."""
    return [*map(str, plan["argv"]), *(["--config", paths(plan, settings)["config"]] if plan.get("config") else [])]


def spec_record(plan: Mapping[str, Any], argv: list[str]) -> str:
    """The spec record kept beside the unit (``<service>.spec.json``): the plan's spec mode and the argv it ran with,
    as Ansible's ``to_nice_json`` writes it."""
    return json.dumps({**dict(plan["spec"]), "argv": argv}, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def server_files(plan: Mapping[str, Any], settings: Mapping[str, Any], templates_dir: str,
                 mask_secrets: bool = False) -> dict[str, Any]:
    """The files of one instance from its full plan (secrets included) and the server role's ``settings``.

    Returns ``{name, service, unit, env, config, marker, argv, paths}``: ``config`` is None when the plan has no
    secret argument (no ``--config`` file); with ``mask_secrets`` every secret value is :data:`SECRET_MARKER`
    (the plan rendered for review). Raises AnsibleFilterError for a value no systemd line can carry.
    """
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise AnsibleFilterError(f"server_files: the settings {', '.join(missing)} are missing")
    where = paths(plan, settings)
    argv = server_argv(plan, settings)
    context = {
        **{name: settings[name] for name in SETTINGS},
        "ansible_managed": MANAGED,
        "plan": plan,
        "service": plan["service"],
        "env_path": where["env"],
        "exec_lines": systemd_exec_lines(argv),
        "python": f"{settings['sglang_server_venv']}/bin/python",
        "launcher": f"{settings['sglang_server_libexec_dir']}/{LAUNCHER}",
        "devices": [*plan["binding"]["devices"], *plan["binding"]["extra_devices"]],
        "mask_secrets": bool(mask_secrets),
        "secret_marker": SECRET_MARKER,
    }
    env = _environment(str(Path(templates_dir)))
    out: dict[str, Any] = {"name": plan["name"], "service": plan["service"], "argv": argv, "paths": where,
                           "marker": spec_record(plan, argv)}
    for key, template in TEMPLATES.items():
        out[key] = env.get_template(template).render(context)
    if not plan.get("config"):
        out["config"] = None
    return out


__all__ = ["SECRET_MARKER", "SETTINGS", "paths", "server_argv", "server_files", "spec_record", "systemd_env_quote",
           "systemd_exec_lines", "systemd_quote", "systemd_text"]
