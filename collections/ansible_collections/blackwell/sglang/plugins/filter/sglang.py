"""Filters that turn validated host variables into what the systemd unit renders."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_validate import format_report, validate_host

_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def launch_plan(hostvars: Mapping[str, Any], spec: str = "keep", host: str = "this host") -> dict[str, Any]:
    """Validate one host's variables and return its launch plan; raise with the full report if invalid.

    The plan: ``args`` (effective, secrets masked), ``argv`` (no secrets), ``config`` (the secret
    ``--config`` YAML mapping, real values: use only in ``no_log`` tasks), ``warnings``.
    """
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("launch_plan expects a mapping of host variables")
    result = validate_host(hostvars, spec=spec)
    if not result.ok:
        raise AnsibleFilterError("SGLang configuration rejected\n" + format_report(host, result))
    plan = result.as_dict()
    plan["config"] = dict(result.config)
    return plan


def systemd_quote(word: Any) -> str:
    """Quote one argv word for a systemd ExecStart= line (no variable or specifier expansion)."""
    text = str(word)
    text = text.replace("%", "%%").replace("$", "$$")
    if text and _SAFE.match(text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def systemd_env_quote(value: Any) -> str:
    """Quote a value for a systemd EnvironmentFile= line (double quotes, shell-style escapes)."""
    text = str(value)
    if "\n" in text:
        raise AnsibleFilterError("an EnvironmentFile value cannot hold a line break")
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
            "systemd_quote": systemd_quote,
            "systemd_exec_lines": systemd_exec_lines,
            "systemd_env_quote": systemd_env_quote,
        }
