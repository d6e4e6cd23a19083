# SPDX-License-Identifier: Apache-2.0
"""The gateway's input contract: what roles/sglang_router and the GPU hosts it fronts may hand the router.

The gateway (smg, the Shepherd Model Gateway, by default; sglang-router 0.3.2 by ``sglang_router_gateway``) runs
from a unit the role renders and starts with the worker URLs of the GPU hosts, and sends its fleet API key to every
one of them.  So every value that reaches its unit, its environment file, its command line or its worker list is
checked here, with the variable (and, for a worker, the GPU host) named; a refusal never shows a secret:

- **Addresses** (``sglang_router_host``, ``sglang_router_prometheus_host``, a worker's ``ansible_host``):
  an IP address (``ipaddress``) or a DNS name of RFC 1123 labels.  Loopback is decided by parsing
  (``is_loopback``: 127.0.0.0/8, ::1, or exactly ``localhost``), never by a string prefix.
- **Worker URLs**: ``http``/``https``, such a host (IPv6 in brackets), an optional port and nothing else.
- **Extra arguments** are read as the pinned gateway's own ``launch`` parser reads them (its schema,
  ``schemas/gateway-<gateway>-<version>.json``, extracted from the wheel by ``tools/gateway_schema.py``;
  ``sglang_gateway_args``): unknown options and values its types or choices refuse are refused citing the
  parser's source line; none may override what the role manages (``MANAGED_DESTS``, in every spelling the
  parser accepts: ``--host``, ``--host=...``, unique abbreviations such as ``--ho``, aliases), nor carry a
  secret (a key would land on the command line and in the 0644 unit).  ``sglang_router_policy`` and
  ``sglang_router_log_level`` take the pinned gateway's own choices.
- **Identity**: a system user and group that are neither privileged nor a well-known account.
- **Paths**: absolute and normalised, directories the project's own, TLS files visible in the sandbox.
- **Keys**: bearer tokens (printable ASCII); each worker instance's key equals the gateway's.

Pure Python, no Ansible import: the filters (``blackwell.sglang.gateway_problems``, ``router_endpoint``)
and the validator use it alike.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway_args as gateway_args
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_contract import (  # noqa: F401 (re-exported)
    PRIVILEGED_GROUPS,
    ROUTER_LOG_LEVELS,
    ROUTER_POLICIES,
    address_problem,
    connect_address,
    is_loopback,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import (
    NEGATIVE_NUMBER,
    RESERVED_SERVICE_NAMES,
    text_problem,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Problem

# The settings checked together, at roles/sglang_router's defaults where a host does not set them: the callers read
# the defaults from the role's defaults/main.yml (the one source) and pass them in (``defaults``).
GATEWAY_VARS = (
    "sglang_router_version", "sglang_router_service_name", "sglang_router_user", "sglang_router_group",
    "sglang_router_host", "sglang_router_port", "sglang_router_prometheus_host", "sglang_router_prometheus_port",
    "sglang_router_api_key", "sglang_router_control_plane_api_key", "sglang_router_allow_unauthenticated",
    "sglang_router_tls_cert_file", "sglang_router_tls_key_file", "sglang_router_gateway", "sglang_router_smg_version",
    "sglang_router_policy", "sglang_router_log_level", "sglang_router_client_cert_file", "sglang_router_client_key_file",
)
# The gateway's health checks, retries and circuit breaker as the role's variables: each maps onto one option of the
# pinned gateway's parser (the same in smg 1.13.0 and sglang-router 0.3.2), a switch (a bool variable) onto the option
# that turns the feature off. Checked against that parser (its schema) like the extra arguments, and rendered by the
# unit in this order.
TUNING: dict[str, str] = {
    "sglang_router_health_check_endpoint": "health_check_endpoint",
    "sglang_router_health_check_interval": "health_check_interval_secs",
    "sglang_router_health_check_timeout": "health_check_timeout_secs",
    "sglang_router_health_failure_threshold": "health_failure_threshold",
    "sglang_router_health_success_threshold": "health_success_threshold",
    "sglang_router_health_check_enabled": "disable_health_check",
    "sglang_router_retry_max_retries": "retry_max_retries",
    "sglang_router_retry_initial_backoff_ms": "retry_initial_backoff_ms",
    "sglang_router_retry_max_backoff_ms": "retry_max_backoff_ms",
    "sglang_router_retries_enabled": "disable_retries",
    "sglang_router_circuit_breaker_failure_threshold": "cb_failure_threshold",
    "sglang_router_circuit_breaker_success_threshold": "cb_success_threshold",
    "sglang_router_circuit_breaker_timeout": "cb_timeout_duration_secs",
    "sglang_router_circuit_breaker_window": "cb_window_duration_secs",
    "sglang_router_circuit_breaker_enabled": "disable_circuit_breaker",
}
GATEWAY_VARS = (*GATEWAY_VARS, *TUNING)
POLICIES = ROUTER_POLICIES
LOG_LEVELS = ROUTER_LOG_LEVELS
SECRET_VARS = ("sglang_router_api_key", "sglang_router_control_plane_api_key")
_TRUTHY = {"true", "yes", "on", "1"}

# The options the role sets itself (the unit's ExecStart and the launcher), by argparse dest, with what to set
# instead.  An extra argument naming one of them, in any spelling the gateway's parser reads as it (``--host``,
# ``--host=...``, a unique prefix ``--ho``, an alias), would win or lose against the role's value depending on its
# place (argparse keeps the last): the listener, the keys, TLS, the worker list and how the gateway authenticates
# are the role's.  A dest the pinned gateway does not have is simply not there (``--mini-lb`` is sglang-router's,
# ``--encode`` smg's); tests/unit/test_gateway_schema.py checks that each is in one gateway's schema at least.
_WORKERS_FIX = "the workers are the GPU hosts of sglang_router_worker_group"
MANAGED_DESTS: dict[str, str] = {
    "host": "set sglang_router_host",
    "port": "set sglang_router_port",
    "prometheus_host": "set sglang_router_prometheus_host",
    "prometheus_port": "set sglang_router_prometheus_port",
    "tls_cert_path": "set sglang_router_tls_cert_file",
    "tls_key_path": "set sglang_router_tls_key_file",
    "ca_cert_paths": "set sglang_router_ca_file",
    "client_cert_path": "set sglang_router_client_cert_file",
    "client_key_path": "set sglang_router_client_key_file",
    "api_key": "set sglang_router_api_key (Ansible Vault); the launcher passes it off the command line",
    "control_plane_api_keys": "set sglang_router_control_plane_api_key (Ansible Vault)",
    "tenant_api_key": "set sglang_router_api_key (Ansible Vault); a key on the command line is readable by every user",
    "jwt_issuer": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "jwt_audience": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "jwt_jwks_uri": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "jwt_role_mapping": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "worker_urls": _WORKERS_FIX,
    "prefill": _WORKERS_FIX,
    "decode": _WORKERS_FIX,
    "encode": _WORKERS_FIX,
    "pd_disaggregation": _WORKERS_FIX,
    "epd_disaggregation": _WORKERS_FIX,
    "service_discovery": _WORKERS_FIX,
    "discovery_provider": _WORKERS_FIX,
    "discovery_file": _WORKERS_FIX,
    "service_discovery_port": _WORKERS_FIX,
    "service_discovery_namespace": _WORKERS_FIX,
    "selector": _WORKERS_FIX,
    "prefill_selector": _WORKERS_FIX,
    "decode_selector": _WORKERS_FIX,
    "encode_selector": _WORKERS_FIX,
    "router_selector": _WORKERS_FIX,
    "mini_lb": "the debugging load balancer checks no API key; the role runs the Rust router",
    "policy": "set sglang_router_policy",
    "log_level": "set sglang_router_log_level",
    "max_concurrent_requests": "set sglang_router_max_concurrent_requests",
    "queue_size": "set sglang_router_queue_size",
    "rate_limit_tokens_per_second": "set sglang_router_rate_limit_tokens_per_second",
    "help": "help is not a launch option",
    **{dest: f"set {var}" for var, dest in TUNING.items()},
}


def managed_options(schema: gateway_args.GatewaySchema) -> dict[str, str]:
    """Every option string of ``schema`` that sets a managed dest (:data:`MANAGED_DESTS`), with its fix."""
    return {o: MANAGED_DESTS[a["dest"]] for a in schema.actions if a["dest"] in MANAGED_DESTS for o in a["option_strings"]}


# Words of an option's name that say it carries a secret: anywhere (password...), or as its last word (key, token:
# --client-key-path and --tokenizer-path are paths).
_SECRET_WORDS = {"password", "passwd", "passphrase", "secret", "secrets", "credential", "credentials", "apikey"}
_SECRET_LAST_WORDS = {"key", "keys", "token", "tokens", "pass", "pwd", "auth"}
# Options named "...key" whose value is the path of a PEM key file, not a key: the gateway reads the file (smg 1.13.0
# refuses to start with "the mesh TLS material cannot be read" when it cannot), so the path on the command line
# discloses nothing; the file itself is kept 0640 to the gateway's group. (--tls-key-path, --client-key-path:
# their last word, path, already says so.)
KEY_PATH_OPTIONS = frozenset({"--mesh-tls-key"})
# Types the gateways' parsers convert a value with to a number (sglang_gateway_args.TYPES): no secret is a number.
_NUMBER_TYPES = frozenset({"int", "float", "_non_negative_int", "_parse_int_csv"})
# userinfo in a URL: scheme://user:password@host
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*@")

# Accounts the router never takes beyond the contract's (sglang_contract.RESERVED_ACCOUNTS): the project's other
# services' (the user task would change their group and shell).
WELL_KNOWN_ACCOUNTS = contract.RESERVED_ACCOUNTS | {"sglang", "sglang-model-peer"}
# Units the gateway's name may not take: the server's and the other services' of the project.
_OTHER_UNITS = ("sglang", "sglang-model-peer")
# The other roles' directories, by the variable whose role default each is, with how many levels above it the tree
# starts: the server's venvs, models and tools (the tree above sglang_venvs_dir), configuration, state, caches and
# libexec, the bundles. The router's configuration directory holds its keys; its mode would also change theirs.
OTHER_ROLES_DIRS: dict[str, int] = {
    "sglang_venvs_dir": 1,
    "sglang_server_config_dir": 0,
    "sglang_server_state_dir": 0,
    "sglang_server_cache_dir": 0,
    "sglang_server_libexec_dir": 0,
    "sglang_bundle_dir": 0,
    "sglang_uv_cache_dir": 0,
}
# Every role default the gateway's checks read (gateway_problems' ``defaults``).
GATEWAY_DEFAULTS_READ = tuple(dict.fromkeys((*GATEWAY_VARS, *OTHER_ROLES_DIRS, *contract.CONTEXT_DEFAULTS)))
_PORT_TEXT = re.compile(r"[1-9][0-9]{0,4}")
_WORKER_URL = re.compile(r"(?P<scheme>https?)://(?P<host>\[[^\]/]*\]|[^:/\[\]]*)(?::(?P<port>[0-9]*))?(?P<path>/?)")


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def worker_host_problem(value: Any) -> str | None:
    """Why ``value`` (a worker's ``ansible_host`` or inventory name) cannot be the host of its worker URL, or None."""
    return address_problem(value)


def worker_url_problem(value: Any) -> str | None:
    """Why ``value`` is not a plain worker URL (``http(s)://host[:port][/]``), or None.

    The router splits its start-up list on white space and sends its fleet API key to every worker: no white
    space, no control character, no userinfo, path, query or fragment; the host an IP address (IPv6 in brackets)
    or a DNS name; the port 1-65535.  The message never repeats the URL (it may hold a password).
    """
    if not isinstance(value, str) or not value:
        return "a worker URL is a non-empty string, e.g. http://10.0.0.5:30000"
    problem = text_problem(value)
    if problem:
        return problem
    if any(c.isspace() for c in value):
        return "a worker URL holds no white space: the router's start-up list is split on it (a second worker)"
    match = _WORKER_URL.fullmatch(value)
    if not match:
        if _URL_USERINFO.match(value):
            return "a worker URL carries no user name or password ('@'): the router sends its own key"
        return ("a worker URL is http:// or https://, a host, an optional :port and nothing else "
                "(no user, path, query or fragment)")
    why = address_problem(match["host"], brackets=True)
    if why:
        return f"its host: {why}"
    port = match["port"]
    if port is not None and (not _PORT_TEXT.fullmatch(port) or int(port) > 65535):
        return "its port is 1-65535, without leading zeros"
    return None


def _option_name(word: str) -> str:
    return word.split("=", 1)[0]


def _names_secret(name: str) -> bool:
    """Whether option ``name`` says it carries a secret (a password, a key, a token), unless it names a key's file
    (:data:`KEY_PATH_OPTIONS`)."""
    if name in KEY_PATH_OPTIONS:
        return False
    words = [w for w in re.split(r"[-_]+", name.lstrip("-").lower()) if w]
    return bool(words) and (bool(_SECRET_WORDS.intersection(words)) or words[-1] in _SECRET_LAST_WORDS
                            or "apikey" in "".join(words))


def _carries_secret(action: Mapping[str, Any]) -> bool:
    """Whether the gateway's option ``action`` (a schema record) carries a secret: one of its names says so
    (:func:`_names_secret`) and it takes a value that is text. A switch (no value) or a number the parser converts
    (``--least-load-mean-prefill-tokens 1024``, ``--oracle-external-auth``) carries none."""
    if action.get("nargs") == 0 or action.get("type") in _NUMBER_TYPES:
        return False
    return any(_names_secret(o) for o in action["option_strings"])


def release_of(cfg: Mapping[str, Any]) -> tuple[str, str]:
    """(gateway, release) the settings ``cfg`` install: smg at ``sglang_router_smg_version``, sglang-router at
    ``sglang_router_version``."""
    gateway = cfg.get("sglang_router_gateway")
    version = cfg.get("sglang_router_smg_version") if gateway == "smg" else cfg.get("sglang_router_version")
    return str(gateway), str(version)


def router_extra_args_problems(args: Any, gateway: str = "smg", version: str | None = None) -> list[str]:
    """``"sglang_router_extra_args[i]: why"`` for each extra argument of ``<gateway> launch`` that is refused.

    Every word is read as the pinned gateway's own parser reads it (``sglang_gateway_args.parse`` over the
    committed schema of ``gateway`` ``version``, default the newest): an unknown option or ambiguous prefix, a
    missing or surplus value, a value its type or choices refuse, a stray word are refused citing the parser
    (``smg/router_args.py:NNN``).  Refused as well: an item that is not text or cannot be written
    (``text_problem``); an option that overrides one the role manages (:data:`MANAGED_DESTS`) in any spelling
    argparse accepts (``--host``, ``--host=0.0.0.0``, an abbreviation ``--ho``, an alias); an option whose name
    says it carries a secret, or a URL with a password in it (the unit is 0644 and the command line public);
    ``--`` and single-dash words other than negative numbers.  Secrets are not repeated.
    """
    if args is None:
        return []
    if isinstance(args, (str, bytes)) or not isinstance(args, Iterable) or isinstance(args, Mapping):
        return ["sglang_router_extra_args: it must be a list of arguments, e.g. ['--retry-max-retries', '5']"]
    args = list(args)
    if version is None:
        known = gateway_args.releases(gateway)
        version = known[-1] if known else ""
    schema = gateway_args.load(gateway, version)
    out: dict[int, str] = {}
    for index, word in enumerate(args):
        where = f"sglang_router_extra_args[{index}]"
        if not _is_text(word):
            out[index] = f"{where}: each argument is text (quote it, e.g. '5'), not {type(word).__name__}"
            continue
        problem = text_problem(word)
        if problem:
            out[index] = f"{where}: {problem}"
            continue
        if not word.strip():
            out[index] = f"{where}: an empty or blank word is no argument of the gateway (leave it out)"
            continue
        if _URL_USERINFO.search(word):
            out[index] = (f"{where}: it carries a user name or password in a URL (value not shown): the unit file "
                          "and the command line are readable by every user")
            continue
        if not word.startswith("-") or NEGATIVE_NUMBER.match(word):
            continue
        name = _option_name(word)
        if name == "--":
            out[index] = f"{where}: '--' would end the options: the worker list the role appends would not be read"
            continue
        if not name.startswith("--"):
            out[index] = f"{where} {name!r}: the gateway has no single-dash option to pass (only -h, help)"
            continue
        exact = schema.option_strings().get(name) if schema is not None else None
        if (_carries_secret(exact) if exact is not None else _names_secret(name)):
            out[index] = (f"{where} {name!r}: it carries a secret, which would be on the gateway's command line and "
                          "in its 0644 unit file; the role passes its keys through a 0640 file "
                          "(sglang_router_api_key, sglang_router_control_plane_api_key)")
    if not args or out:
        return [out[i] for i in sorted(out)]
    if schema is None:
        return [f"sglang_router_extra_args: no schema of {gateway} {version}'s parser is committed "
                f"(plugin_utils/schemas/{gateway_args.schema_name(gateway, version)}), so its extra arguments cannot be "
                f"checked: run tools/gateway_schema.py --gateway {gateway} --version {version}, or leave them out"]
    reading = gateway_args.parse(schema, args)
    managed = managed_options(schema)
    for parsed in reading.options:
        dest = parsed.action["dest"]
        word = args[parsed.index]
        name = _option_name(word)
        if dest in MANAGED_DESTS and parsed.index not in out:
            spelled = "" if name == parsed.word else f" (its parser reads {name!r} as {parsed.word})"
            out[parsed.index] = (f"sglang_router_extra_args[{parsed.index}] {name!r}: the role manages "
                                 f"{parsed.word}{spelled}, {schema.cite(parsed.action)}; {managed[parsed.word]}")
        elif parsed.word in KEY_PATH_OPTIONS and parsed.values and parsed.index not in out and file_problem(parsed.values[0]):
            out[parsed.index] = (f"sglang_router_extra_args[{parsed.index}] {name!r}: {parsed.word} is the path of a key "
                                 f"file the gateway reads ({schema.cite(parsed.action)}): {file_problem(parsed.values[0])}")
        elif _carries_secret(parsed.action) and parsed.index not in out:
            out[parsed.index] = (f"sglang_router_extra_args[{parsed.index}] {name!r}: {parsed.word} carries a secret "
                                 f"({schema.cite(parsed.action)}), which would be on the command line and in the 0644 "
                                 "unit file")
    for index, message in reading.problems:
        if index not in out:
            out[index] = f"sglang_router_extra_args[{index}]: {message}"
    return [out[i] for i in sorted(out)]


def choice_problems(cfg: Mapping[str, Any]) -> list[Problem]:
    """``sglang_router_policy`` and ``sglang_router_log_level`` against the pinned gateway's own choices (its
    schema's ``--policy`` and ``--log-level``), citing its parser."""
    gateway, version = release_of(cfg)
    schema = gateway_args.load(gateway, version)
    out: list[Problem] = []
    if schema is None:
        return out
    for var, dest in (("sglang_router_policy", "policy"), ("sglang_router_log_level", "log_level")):
        action = schema.by_dest(dest)
        value = cfg.get(var)
        if action is None or not isinstance(value, str):
            continue
        why = gateway_args.convert(schema, action, value)
        if why:
            out.append(Problem("gateway.choice", var, _shown(value), f"{var} {value!r}: {why}",
                               f"one of the choices of {gateway} {version}'s {action['option_strings'][0]}"))
    return out


def _as_int(value: Any) -> int | None:
    """``value`` as a whole number (an int, or its text as an inventory may give it), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,18}\s*", value):
        return int(value)
    return None


def tuning_problems(cfg: Mapping[str, Any]) -> list[Problem]:
    """The health, retry and circuit-breaker variables (:data:`TUNING`) against the pinned gateway's own parser: its
    option must be there (a release without it is refused, naming the option) and take the value; and what they must
    be together (a probe's timeout below the interval between probes, the first retry's backoff at most the longest)."""
    gateway, version = release_of(cfg)
    schema = gateway_args.load(gateway, version)
    out: list[Problem] = []
    if schema is None:
        return out
    for var, dest in TUNING.items():
        action = schema.by_dest(dest)
        if action is None:
            out.append(Problem("gateway.tuning", var, _shown(cfg.get(var)),
                               f"{var}: {gateway} {version}'s parser has no --{dest.replace('_', '-')} "
                               f"(schemas/{schema.name}), so the role cannot set it",
                               f"leave {var} at its default, or install a gateway release that has the option"))
            continue
        value = cfg.get(var)
        if action.get("nargs") == 0 or isinstance(value, bool):
            continue  # a switch: the contract checked the boolean
        why = gateway_args.convert(schema, action, str(value))
        if why:
            out.append(Problem("gateway.tuning", var, _shown(value), f"{var} {_shown(value)!r}: {why}",
                               f"a value {action['option_strings'][0]} takes"))
    pairs = (("sglang_router_health_check_timeout", "sglang_router_health_check_interval",
              "a probe's timeout must be shorter than the interval between probes (they would overlap)"),
             ("sglang_router_retry_initial_backoff_ms", "sglang_router_retry_max_backoff_ms",
              "the first retry's backoff cannot exceed the longest backoff"))
    for low, high, why in pairs:
        a, b = _as_int(cfg.get(low)), _as_int(cfg.get(high))
        if a is not None and b is not None and (a >= b if low.endswith("timeout") else a > b):
            out.append(Problem("gateway.tuning", low, a, f"{low} {a} and {high} {b}: {why}", f"lower {low} or raise {high}"))
    return out


def _text_of(value: Any) -> str:
    return "" if value is None else str(value)


def other_roles_dirs(defaults: Mapping[str, Any]) -> tuple[str, ...]:
    """The other roles' directories (:data:`OTHER_ROLES_DIRS`) from their roles' defaults (``defaults``)."""
    known = contract.role_defaults(defaults, OTHER_ROLES_DIRS, "other_roles_dirs")
    out = []
    for var, up in OTHER_ROLES_DIRS.items():
        path = str(known[var])
        for _ in range(up):
            path = posixpath.dirname(path)
        out.append(path)
    return tuple(out)


def _dir_problem(value: Any, others: Iterable[str]) -> str | None:
    """Beyond the contract (a path the project writes as root): a directory of the router's own, not another role's
    (``others``: :func:`other_roles_dirs`)."""
    other = next((root for root in others if value == root or str(value).startswith(root + "/")), None)
    if other:
        return f"{other} is another role's directory of the project (the server's or the bundles'): use the router's own"
    if "sglang" not in str(value).rsplit("/", 1)[-1]:
        return "the role's own directory names the project: its last component contains 'sglang' (e.g. /opt/sglang-router)"
    return None


def file_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a file the router reads (TLS certificate, key, CA bundle), or None."""
    return contract.READ_PATH.problem(value)


def identity_problem(value: Any, kind: str) -> str | None:
    """Why ``value`` cannot be the router's system user (``kind`` "user") or group ("group"), or None: the
    contract's service account, and none of the project's other services'."""
    problem = contract.account_problem(value)
    if problem:
        return problem
    if value in WELL_KNOWN_ACCOUNTS:
        return (f"{value} belongs to another service of the project: the role would take it over "
                "(use the router's own, e.g. sglang-router)")
    return None


def gateway_service_name_problem(value: Any) -> str | None:
    """Why ``value`` cannot name the gateway's unit, or None: a plain unit name in the project's namespace."""
    if value == "sglang-router":
        return None
    problem = contract.owned_unit_problem(value)
    if problem:
        return problem
    if value in _OTHER_UNITS or value in RESERVED_SERVICE_NAMES:
        return ("the gateway's unit stays in the project's namespace: a name starting with 'sglang' that no other "
                "unit of the project has (e.g. sglang-router): the role would replace that unit's file")
    return None


def _add(out: list[Problem], rule: str, variable: str, value: Any, message: str | None, fix: str,
         source: str | None = None) -> None:
    if message:
        out.append(Problem(rule, variable, value, message, fix, source))


def _shown(value: Any) -> Any:
    """The value as a report may show it: short text, never a URL with a password."""
    if isinstance(value, str) and _URL_USERINFO.search(value):
        return None
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "..."
    return value if isinstance(value, (str, int, float, bool)) or value is None else None


def _settings(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    out = contract.role_defaults(defaults, GATEWAY_VARS, "the gateway's checks")
    for key in values:
        if isinstance(key, str) and key.startswith("sglang_router_"):
            out[key] = values[key]
    return out


# The settings router_endpoint decides with (listener, TLS, keys): checked by endpoint_problems, also where a GPU
# host's drain and join read a router's settings.
ENDPOINT_VARS = ("sglang_router_host", "sglang_router_port", "sglang_router_prometheus_host", "sglang_router_prometheus_port",
                 "sglang_router_tls_cert_file", "sglang_router_tls_key_file", "sglang_router_ca_file",
                 "sglang_router_client_cert_file", "sglang_router_client_key_file", "sglang_router_api_key",
                 "sglang_router_control_plane_api_key", "sglang_router_allow_unauthenticated")


def _contract(cfg: Mapping[str, Any], names: Iterable[str], defaults: Mapping[str, Any]) -> list[Problem]:
    """The input contract's findings for ``names`` (sglang_contract: one kind per variable), as Problems."""
    values = {n: cfg[n] for n in names if n in cfg}
    return [Problem("gateway.contract", f.variable, _shown(f.value), f.message(), f.fix())
            for f in contract.check(values, context=contract.context_of(values, defaults))]


def endpoint_problems(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[Problem]:
    """The problems of the router's listener, TLS and keys (what ``router_endpoint`` decides with): each variable
    against the input contract, then what they must be together. ``defaults``: as :func:`gateway_problems`."""
    cfg = _settings(values, defaults)
    out = _contract(cfg, ENDPOINT_VARS, defaults)
    if bool(cfg["sglang_router_tls_cert_file"]) != bool(cfg["sglang_router_tls_key_file"]):
        missing = "sglang_router_tls_key_file" if cfg["sglang_router_tls_cert_file"] else "sglang_router_tls_cert_file"
        out.append(Problem("gateway.tls", missing, None,
                           "sglang_router_tls_cert_file and sglang_router_tls_key_file: set both (TLS) or neither",
                           "set both files, or neither"))
    if bool(cfg["sglang_router_client_cert_file"]) != bool(cfg["sglang_router_client_key_file"]):
        missing = "sglang_router_client_key_file" if cfg["sglang_router_client_cert_file"] else "sglang_router_client_cert_file"
        out.append(Problem("gateway.tls", missing, None,
                           "sglang_router_client_cert_file and sglang_router_client_key_file (the gateway's client "
                           "certificate for the workers' TLS front): set both (mTLS) or neither",
                           "set both files, or neither"))
    host = cfg["sglang_router_host"]
    allow = str(cfg["sglang_router_allow_unauthenticated"]).strip().lower() in _TRUTHY
    if not is_loopback(host) and not allow and not (cfg["sglang_router_api_key"] and cfg["sglang_router_control_plane_api_key"]):
        missing = " and ".join(k for k in SECRET_VARS if not cfg[k])
        out.append(Problem("gateway.unauthenticated", "sglang_router_host", _shown(host),
                           f"sglang_router_host {_shown(host)!r} listens beyond loopback without {missing}: anyone who "
                           "reaches the port could send requests or change the workers",
                           "set the keys (from Ansible Vault), or sglang_router_allow_unauthenticated: true if a "
                           "firewall or the network already restricts it"))
    return out


def _worker_key_problems(host: str, hostvars: Mapping[str, Any], router_key: str) -> list[Problem]:
    out: list[Problem] = []
    host_key = hostvars.get("sglang_api_key")
    instances = hostvars.get("sglang_instances")
    checks: list[tuple[str, Any]] = []
    if isinstance(instances, (list, tuple)) and instances:
        for index, entry in enumerate(instances):
            if isinstance(entry, Mapping) and "api_key" in entry:
                checks.append((f"sglang_instances[{index}].api_key", entry.get("api_key")))
            else:
                checks.append(("sglang_api_key", host_key))
    else:
        checks.append(("sglang_api_key", host_key))
    for variable, key in dict(checks).items():
        if _text_of(key) in ("", router_key):
            continue
        out.append(Problem("gateway.worker_key", variable, None,
                           f"GPU host {host}: {variable} differs from the gateway's sglang_router_api_key (values not "
                           "shown): the router sends its own key to the workers and takes it from clients, so this "
                           "worker would answer 401",
                           "one fleet key from Ansible Vault: set the gateway's sglang_router_api_key and every "
                           "worker's key to it", host))
    return out


def worker_problems(host: str, hostvars: Mapping[str, Any], router_key: str | None = None) -> list[Problem]:
    """The problems of GPU host ``host`` as a worker of the gateway: the URL the gateway reaches it at (its
    ``sglang_router_worker_url``, else its ``ansible_host``, else its inventory name) and, with ``router_key``
    (the gateway's data-plane key), each instance's key."""
    out: list[Problem] = []
    if not isinstance(hostvars, Mapping):
        return [Problem("gateway.worker", "hostvars", None, f"GPU host {host}: its variables are not a mapping",
                        "check the inventory of the GPU host", host)]
    url = hostvars.get("sglang_router_worker_url")
    if url is not None:
        why = worker_url_problem(url)
        if why:
            out.append(Problem("gateway.worker_url", "sglang_router_worker_url", _shown(url), f"GPU host {host}: {why}",
                               "the URL the gateway reaches the worker at, e.g. https://10.0.0.5:30000", host))
    address = hostvars.get("ansible_host")
    variable = "ansible_host" if address not in (None, "") else "inventory_hostname"
    address = address if address not in (None, "") else host
    why = worker_host_problem(address)
    if why:
        out.append(Problem("gateway.worker_host", variable, _shown(address), f"GPU host {host}: {why}",
                           "an IP address or DNS name the gateway reaches the GPU host at", host))
    if router_key is not None:
        out.extend(_worker_key_problems(host, hostvars, router_key))
    return out


def gateway_problems(values: Mapping[str, Any], workers: Mapping[str, Mapping[str, Any]] | None = None,
                     defaults: Mapping[str, Any] | None = None) -> list[Problem]:
    """Everything a gateway host's variables (``values``: ``sglang_router_*``, missing ones at the role's
    defaults) and its workers (``workers``: GPU host name -> its hostvars) can get wrong, as Problems: each
    variable against the input contract (sglang_contract), and what the gateway needs beyond it (its unit, account
    and directories its own, the extra arguments against sglang-router's parser, each worker's URL and key).
    ``defaults``: the roles' defaults of :data:`GATEWAY_DEFAULTS_READ`, read by the caller from the roles' defaults
    files (roles/sglang_router's, and the other roles' whose directories the router's may not take); required.

    No Problem carries a secret: the keys' values and URLs with passwords are shown as None.
    """
    known = contract.role_defaults(defaults, GATEWAY_DEFAULTS_READ, "gateway_problems")
    cfg = _settings(values, known)
    out = endpoint_problems(values, known)
    others = [n for n in cfg if isinstance(n, str) and n.startswith("sglang_router_") and n not in ENDPOINT_VARS]
    out += _contract(cfg, others, known)
    flagged = {p.variable for p in out}
    _add(out, "gateway.service", "sglang_router_service_name", _shown(cfg["sglang_router_service_name"]),
         None if "sglang_router_service_name" in flagged else gateway_service_name_problem(cfg["sglang_router_service_name"]),
         "e.g. sglang-router")
    for var, kind in (("sglang_router_user", "user"), ("sglang_router_group", "group")):
        if var not in flagged:
            _add(out, "gateway.identity", var, _shown(cfg[var]), identity_problem(cfg[var], kind),
                 f"the router's own system {kind}, e.g. sglang-router")
    for var in ("sglang_router_venvs_dir", "sglang_router_config_dir"):
        if var in cfg and var not in flagged:
            _add(out, "gateway.path", var, _shown(cfg[var]), _dir_problem(cfg[var], other_roles_dirs(known)),
                 "a directory of the router's own, e.g. /opt/sglang-router or /etc/sglang-router")
    if not flagged.intersection(("sglang_router_gateway", "sglang_router_version", "sglang_router_smg_version",
                                 "sglang_router_policy", "sglang_router_log_level")):
        out += choice_problems(cfg)
    if not flagged.intersection(("sglang_router_gateway", "sglang_router_version", "sglang_router_smg_version", *TUNING)):
        out += tuning_problems(cfg)
    if not flagged.intersection(("sglang_router_extra_args", "sglang_router_gateway", "sglang_router_version",
                                 "sglang_router_smg_version")):
        gateway, version = release_of(cfg)
        for message in router_extra_args_problems(cfg.get("sglang_router_extra_args"), gateway, version):
            where = re.match(r"sglang_router_extra_args(?:\[[0-9]+\])?:? ?", message)
            variable = where[0].rstrip(": ") if where else "sglang_router_extra_args"
            out.append(Problem("gateway.extra_args", variable, None, message[len(where[0]):] if where else message,
                               "leave the role's options to its variables; put no secret on the command line"))
    if workers:
        router_key = cfg["sglang_router_api_key"]
        key = _text_of(router_key) if isinstance(router_key, str) or router_key is None else None
        for host in workers:
            out.extend(worker_problems(str(host), {} if workers[host] is None else workers[host], key))
    return out


def url_problems(urls: Mapping[str, Any]) -> list[Problem]:
    """The problems of rendered URLs (``{label: url}``), e.g. the worker list of the router's environment file."""
    return [Problem("gateway.worker_url", str(label), _shown(url), why,
                    "give the GPU host a plain address (ansible_host) or sglang_router_worker_url")
            for label, url in urls.items() if (why := worker_url_problem(url))]


def format_problem(problem: Problem) -> str:
    """One line of a refusal: variable, the GPU host where there is one, the shown value, why and the fix."""
    where = f"{problem.source}: " if problem.source and not problem.message.startswith("GPU host") else ""
    shown = "" if problem.value is None else f" {problem.value!r}"
    return f"{where}{problem.variable}{shown}: {problem.message}. Fix: {problem.fix}"
