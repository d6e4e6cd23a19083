# SPDX-License-Identifier: Apache-2.0
"""The gateway's input contract: what roles/sglang_router and the GPU hosts it fronts may hand the router.

The router (sglang-router, the SGLang Model Gateway) runs from a unit the role renders and starts with
the worker URLs of the GPU hosts, and sends its fleet API key to every one of them.  So every value that
reaches its unit, its environment file, its command line or its worker list is checked here, with the
variable (and, for a worker, the GPU host) named; a refusal never shows a secret:

- **Addresses** (``sglang_router_host``, ``sglang_router_prometheus_host``, a worker's ``ansible_host``):
  an IP address (``ipaddress``) or a DNS name of RFC 1123 labels.  Loopback is decided by parsing
  (``is_loopback``: 127.0.0.0/8, ::1, or exactly ``localhost``), never by a string prefix.
- **Worker URLs**: ``http``/``https``, such a host (IPv6 in brackets), an optional port and nothing else.
- **Extra arguments** may not override what the role manages (``MANAGED_OPTIONS``, in every spelling
  sglang-router 0.3.2's argparse parser accepts: ``--host``, ``--host=...`` and unique abbreviations
  such as ``--ho``), nor carry a secret (a key would land on the command line and in the 0644 unit).
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
    "sglang_router_tls_cert_file", "sglang_router_tls_key_file",
)
POLICIES = ROUTER_POLICIES
LOG_LEVELS = ROUTER_LOG_LEVELS
SECRET_VARS = ("sglang_router_api_key", "sglang_router_control_plane_api_key")
_TRUTHY = {"true", "yes", "on", "1"}

# Every option of `sglang-router launch` 0.3.2 (sglang_router/router_args.py, RouterArgs.add_cli_args with
# use_router_prefix=False; parse_router_args builds an argparse parser with allow_abbrev left at True, so a
# unique prefix of any of these is that option, and --opt=value is one word).
ROUTER_OPTIONS = (
    "-h", "--help", "--host", "--port", "--worker-urls", "--policy", "--prefill-policy", "--decode-policy",
    "--cache-threshold", "--balance-abs-threshold", "--balance-rel-threshold", "--bucket-adjust-interval-secs",
    "--eviction-interval-secs", "--max-tree-size", "--max-idle-secs", "--assignment-mode", "--max-payload-size",
    "--dp-aware", "--enable-igw", "--mini-lb", "--pd-disaggregation", "--prefill", "--decode",
    "--worker-startup-timeout-secs", "--worker-startup-check-interval", "--log-dir", "--log-level",
    "--service-discovery", "--selector", "--service-discovery-port", "--service-discovery-namespace",
    "--prefill-selector", "--decode-selector", "--prometheus-port", "--prometheus-host",
    "--prometheus-duration-buckets", "--request-id-headers", "--request-timeout-secs",
    "--shutdown-grace-period-secs", "--cors-allowed-origins", "--max-concurrent-requests", "--queue-size",
    "--queue-timeout-secs", "--rate-limit-tokens-per-second", "--retry-max-retries", "--retry-initial-backoff-ms",
    "--retry-max-backoff-ms", "--retry-backoff-multiplier", "--retry-jitter-factor", "--disable-retries",
    "--cb-failure-threshold", "--cb-success-threshold", "--cb-timeout-duration-secs", "--cb-window-duration-secs",
    "--disable-circuit-breaker", "--health-failure-threshold", "--health-success-threshold",
    "--health-check-timeout-secs", "--health-check-interval-secs", "--health-check-endpoint",
    "--disable-health-check", "--model-path", "--tokenizer-path", "--chat-template", "--tokenizer-cache-enable-l0",
    "--tokenizer-cache-l0-max-entries", "--tokenizer-cache-enable-l1", "--tokenizer-cache-l1-max-memory",
    "--reasoning-parser", "--tool-call-parser", "--mcp-config-path", "--backend", "--history-backend",
    "--oracle-wallet-path", "--oracle-tns-alias", "--oracle-connect-descriptor", "--oracle-username",
    "--oracle-password", "--oracle-pool-min", "--oracle-pool-max", "--oracle-pool-timeout-secs", "--postgres-db-url",
    "--postgres-pool-max", "--redis-url", "--redis-pool-max", "--redis-retention-days", "--client-cert-path",
    "--client-key-path", "--ca-cert-paths", "--tls-cert-path", "--tls-key-path", "--enable-trace",
    "--otlp-traces-endpoint", "--api-key", "--control-plane-api-keys", "--control-plane-audit-enabled", "--jwt-issuer",
    "--jwt-audience", "--jwt-jwks-uri", "--jwt-role-mapping",
)

# The options the role sets itself (the unit's ExecStart and the launcher), with what to set instead.  An extra
# argument naming one of them would win or lose against the role's value depending on its place (argparse keeps
# the last): the listener, the keys, TLS, the worker list and how the router authenticates are the role's.
MANAGED_OPTIONS: dict[str, str] = {
    "--host": "set sglang_router_host",
    "--port": "set sglang_router_port",
    "--prometheus-host": "set sglang_router_prometheus_host",
    "--prometheus-port": "set sglang_router_prometheus_port",
    "--tls-cert-path": "set sglang_router_tls_cert_file",
    "--tls-key-path": "set sglang_router_tls_key_file",
    "--ca-cert-paths": "set sglang_router_ca_file",
    "--api-key": "set sglang_router_api_key (Ansible Vault); the launcher passes it off the command line",
    "--control-plane-api-keys": "set sglang_router_control_plane_api_key (Ansible Vault)",
    "--jwt-issuer": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "--jwt-audience": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "--jwt-jwks-uri": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "--jwt-role-mapping": "the role authenticates the control plane with sglang_router_control_plane_api_key",
    "--worker-urls": "the workers are the GPU hosts of sglang_router_worker_group",
    "--prefill": "the workers are the GPU hosts of sglang_router_worker_group",
    "--decode": "the workers are the GPU hosts of sglang_router_worker_group",
    "--pd-disaggregation": "the workers are the GPU hosts of sglang_router_worker_group",
    "--service-discovery": "the workers are the GPU hosts of sglang_router_worker_group",
    "--service-discovery-port": "the workers are the GPU hosts of sglang_router_worker_group",
    "--service-discovery-namespace": "the workers are the GPU hosts of sglang_router_worker_group",
    "--selector": "the workers are the GPU hosts of sglang_router_worker_group",
    "--prefill-selector": "the workers are the GPU hosts of sglang_router_worker_group",
    "--decode-selector": "the workers are the GPU hosts of sglang_router_worker_group",
    "--mini-lb": "the debugging load balancer checks no API key; the role runs the Rust router",
    "--policy": "set sglang_router_policy",
    "--log-level": "set sglang_router_log_level",
    "--max-concurrent-requests": "set sglang_router_max_concurrent_requests",
    "--queue-size": "set sglang_router_queue_size",
    "--rate-limit-tokens-per-second": "set sglang_router_rate_limit_tokens_per_second",
    "-h": "help is not a launch option",
    "--help": "help is not a launch option",
}
# Words of an option's name that say it carries a secret: anywhere (password...), or as its last word (key, token:
# --client-key-path and --tokenizer-path are paths).
_SECRET_WORDS = {"password", "passwd", "passphrase", "secret", "secrets", "credential", "credentials", "apikey"}
_SECRET_LAST_WORDS = {"key", "keys", "token", "tokens", "pass", "pwd", "auth"}
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
    words = [w for w in re.split(r"[-_]+", name.lstrip("-").lower()) if w]
    return bool(words) and (bool(_SECRET_WORDS.intersection(words)) or words[-1] in _SECRET_LAST_WORDS
                            or "apikey" in "".join(words))


def router_extra_args_problems(args: Any) -> list[str]:
    """``"sglang_router_extra_args[i]: why"`` for each extra argument of ``sglang-router launch`` that is refused.

    Refused: an item that is not text or cannot be written (``text_problem``); an option that overrides one the role
    manages (``MANAGED_OPTIONS``) in any spelling argparse accepts (``--host``, ``--host=0.0.0.0``, an abbreviation
    ``--ho``); an option whose name says it carries a secret, or a URL with a password in it (the unit is 0644 and
    the command line public); ``--`` and single-dash words other than negative numbers.  Secrets are not repeated.
    """
    if args is None:
        return []
    if isinstance(args, (str, bytes)) or not isinstance(args, Iterable) or isinstance(args, Mapping):
        return ["sglang_router_extra_args: it must be a list of arguments, e.g. ['--retry-max-retries', '5']"]
    out: list[str] = []
    for index, word in enumerate(args):
        where = f"sglang_router_extra_args[{index}]"
        if not _is_text(word):
            out.append(f"{where}: each argument is text (quote it, e.g. '5'), not {type(word).__name__}")
            continue
        problem = text_problem(word)
        if problem:
            out.append(f"{where}: {problem}")
            continue
        if not word.strip():
            out.append(f"{where}: an empty or blank word is no argument of sglang-router (leave it out)")
            continue
        if _URL_USERINFO.search(word):
            out.append(f"{where}: it carries a user name or password in a URL (value not shown): the unit file and the "
                       "command line are readable by every user")
            continue
        if not word.startswith("-") or NEGATIVE_NUMBER.match(word):
            continue
        name = _option_name(word)
        if name == "--":
            out.append(f"{where}: '--' would end the options: the worker list the role appends would not be read")
            continue
        if not name.startswith("--"):
            out.append(f"{where} {name!r}: sglang-router has no single-dash option to pass (only -h, help)")
            continue
        if _names_secret(name):
            out.append(f"{where} {name!r}: it carries a secret, which would be on the router's command line and in its "
                       "0644 unit file; the role passes its keys through a 0640 file (sglang_router_api_key, "
                       "sglang_router_control_plane_api_key)")
            continue
        managed = [option for option in MANAGED_OPTIONS if option.startswith(name) and len(name) > 2]
        if managed:
            spelled = "" if name in MANAGED_OPTIONS else f" (argparse reads {name!r} as {' or '.join(managed)})"
            out.append(f"{where} {name!r}: the role manages {managed[0]}{spelled}; {MANAGED_OPTIONS[managed[0]]}")
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
                 "sglang_router_api_key", "sglang_router_control_plane_api_key", "sglang_router_allow_unauthenticated")


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
    if "sglang_router_extra_args" not in flagged:
        for message in router_extra_args_problems(cfg.get("sglang_router_extra_args")):
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
