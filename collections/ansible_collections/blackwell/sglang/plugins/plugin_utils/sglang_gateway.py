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

import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import (
    HIDDEN_BY_PROTECT_HOME,
    NEGATIVE_NUMBER,
    RESERVED_SERVICE_NAMES,
    SERVICE_NAME,
    header_token_problem,
    path_problem,
    port_problem,
    service_name_problem,
    text_problem,
    user_problem,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Problem

# The role's defaults (roles/sglang_router/defaults/main.yml) for the settings checked together (a test keeps
# them equal): a host that does not set a variable gets these.
GATEWAY_DEFAULTS: dict[str, Any] = {
    "sglang_router_version": "0.3.2",
    "sglang_router_service_name": "sglang-router",
    "sglang_router_user": "sglang-router",
    "sglang_router_group": "sglang-router",
    "sglang_router_host": "127.0.0.1",
    "sglang_router_port": 30000,
    "sglang_router_prometheus_host": "127.0.0.1",
    "sglang_router_prometheus_port": 29000,
    "sglang_router_api_key": "",
    "sglang_router_control_plane_api_key": "",
    "sglang_router_allow_unauthenticated": False,
    "sglang_router_tls_cert_file": "",
    "sglang_router_tls_key_file": "",
}
POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "manual")  # router_args.py of 0.3.2
LOG_LEVELS = ("debug", "info", "warn", "error")
SECRET_VARS = ("sglang_router_api_key", "sglang_router_control_plane_api_key")
_TRUTHY = {"true", "yes", "on", "1"}
_BOOLEANS = _TRUTHY | {"false", "no", "off", "0"}

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

# Groups that grant more than a network proxy needs (root-equivalent, logs, disks, containers, VMs).
PRIVILEGED_GROUPS = frozenset({
    "root", "sudo", "adm", "wheel", "shadow", "docker", "disk", "lxd", "libvirt", "libvirt-qemu", "systemd-journal",
    "kvm", "staff", "admin", "sys", "kmem", "tty", "video", "render", "input", "lp", "dialout", "plugdev", "netdev",
    "operator", "podman", "incus", "incus-admin", "microk8s", "ssl-cert", "utmp", "mail", "crontab", "audio",
})
# Accounts that belong to the distribution, the cloud image or another service: the router never takes one (the
# user task would change its group and shell).
WELL_KNOWN_ACCOUNTS = frozenset({
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "systemd-network", "systemd-resolve",
    "systemd-timesync", "systemd-journal", "systemd-coredump", "messagebus", "syslog", "sshd", "polkitd",
    "ubuntu", "debian", "admin", "ec2-user", "centos", "fedora", "rocky", "almalinux", "cloud-user", "vagrant",
    "user", "users", "postfix", "chrony", "ntp", "dnsmasq", "tss", "uuidd", "tcpdump", "landscape", "pollinate",
    "lxd", "docker", "sglang", "prometheus", "node-exporter", "nvidia-dcgm", "dcgm-exporter", "sglang-model-peer",
})
# Units the gateway's name may not take: the server's and the other services' of the project.
_OTHER_UNITS = ("sglang", "sglang-model-peer")
# Directories below which the role's own (root-owned) directories must not live: the system's, systemd's, the
# distribution's, and what the sandbox hides or a reboot empties.
_FORBIDDEN_ROOTS = ("/bin", "/boot", "/dev", "/etc/systemd", "/etc/sudoers.d", "/etc/ssl", "/etc/pam.d", "/etc/cron.d",
                    "/etc/security", "/etc/apt", "/etc/default", "/etc/profile.d", "/etc/ld.so.conf.d", "/home", "/lib",
                    "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr/bin",
                    "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/sbin", "/usr/share", "/usr/include", "/var/lib/dpkg",
                    "/var/lib/apt", "/var/log", "/var/tmp", "/var/spool", "/var/mail")
# The other roles' directories (their defaults): the server's venvs, models, configuration, state, caches and libexec,
# the bundles. The router's configuration directory holds its keys; its mode would also change theirs.
_PROJECT_DIRS = ("/opt/sglang", "/etc/sglang", "/var/lib/sglang", "/var/cache/sglang", "/usr/local/libexec/sglang",
                 "/srv/sglang-bundle", "/var/cache/sglang-uv")
# RFC 1123 host name labels; the last label is not all digits (it would read as an IPv4 address: 127.1).
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_PORT_TEXT = re.compile(r"[1-9][0-9]{0,4}")
_WORKER_URL = re.compile(r"(?P<scheme>https?)://(?P<host>\[[^\]/]*\]|[^:/\[\]]*)(?::(?P<port>[0-9]*))?(?P<path>/?)")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){0,3}(?:(?:a|b|rc|\.post|\.dev)[0-9]+){0,2}")
_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_DEB_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{0,127}(?:=[A-Za-z0-9.+:~-]{1,64})?")
_PIP_SOURCE = re.compile(r"(?:https?|file)://[^\s@]+|/[^\s]*")


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def is_loopback(host: str) -> bool:
    """True when ``host`` names this machine only: an address of 127.0.0.0/8, ::1, or exactly ``localhost``.

    Parsed, never prefixed: ``localhost.attacker.example``, ``127.attacker.example`` and ``localhostx`` are names
    any resolver may point elsewhere, and ``0.0.0.0``/``::`` mean every address.
    """
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def connect_address(listen: str) -> str:
    """How the host itself reaches a service listening on ``listen``: every address (``0.0.0.0``, ``::``, "")
    is reached over loopback of the same family; any other address as it is."""
    if listen == "":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(listen)
    except ValueError:
        return listen
    if address.is_unspecified:
        return "127.0.0.1" if address.version == 4 else "::1"
    return listen


def dns_name_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS host name of RFC 1123 labels, or None."""
    if not value or len(value) > 253:
        return "a host name has 1 to 253 characters"
    labels = value.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return "a host name is dot-separated labels of letters, digits and '-' (RFC 1123), not starting or ending with '-'"
    if labels[-1].isdigit():
        return "its last label is all digits, which resolvers read as an IPv4 address: write the address in full"
    return None


def address_problem(value: Any, *, brackets: bool = False) -> str | None:
    """Why ``value`` is neither an IP address nor a DNS name, or None (``brackets``: IPv6 written ``[::1]``)."""
    if not isinstance(value, str) or not value:
        return "it must be an IP address or a DNS name (e.g. 127.0.0.1, 0.0.0.0, :: or gateway.example)"
    problem = text_problem(value)
    if problem:
        return problem
    if any(c.isspace() for c in value):
        return "an address holds no white space"
    if "%" in value:
        return "an IPv6 zone id ('%') has no place here"
    if value.startswith("["):
        if not brackets or not value.endswith("]"):
            return "write an IPv6 address without brackets here" if not brackets else "an unterminated IPv6 bracket"
        try:
            ipaddress.IPv6Address(value[1:-1])
        except ValueError:
            return "the brackets hold no IPv6 address (no zone id either)"
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        if ":" in value:
            return "it is not an IPv6 address (and ':' has no place in a host name)"
        return dns_name_problem(value)
    if brackets and address.version == 6:
        return "an IPv6 address in a URL is written in brackets, e.g. http://[::1]:30000"
    return None


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


def _int_value(value: Any) -> int | None:
    """An int as a YAML or inventory value gives it (an int, or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,18}", value):
        return int(value)
    return None


def _port(value: Any) -> str | None:
    if isinstance(value, str) and _PORT_TEXT.fullmatch(value):
        return port_problem(int(value))
    return port_problem(value)


def _dir_problem(value: Any) -> str | None:
    problem = path_problem(value, service_owned=True)
    if problem:
        return problem
    under = next((root for root in _FORBIDDEN_ROOTS if value == root or value.startswith(root + "/")), None)
    if under:
        return f"it is under {under}, which the system, systemd or the distribution owns (use e.g. /opt/sglang-router)"
    other = next((root for root in _PROJECT_DIRS if value == root or value.startswith(root + "/")), None)
    if other:
        return f"{other} is another role's directory of the project (the server's or the bundles'): use the router's own"
    if "sglang" not in value.rsplit("/", 1)[-1]:
        return "the role's own directory names the project: its last component contains 'sglang' (e.g. /opt/sglang-router)"
    return None


def file_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a file the router reads (TLS certificate, key, CA bundle), or None."""
    problem = path_problem(value)
    if problem:
        return problem
    hidden = next((h for h in HIDDEN_BY_PROTECT_HOME if value == h or value.startswith(h + "/")), None)
    if hidden:
        return (f"{hidden} is hidden from the router by its sandbox (ProtectHome=yes): the router would not find the "
                "file although a check outside the sandbox does")
    return None


# Directories any local user may write: an interpreter there runs as root when the role creates the virtualenv.
_WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/user", "/home")
# The environment of the tasks that download (apt, pip, as root): proxy settings only, not LD_PRELOAD or PIP_*.
PROXY_ENV_NAMES = frozenset({"http_proxy", "https_proxy", "no_proxy", "all_proxy", "ftp_proxy"})


def interpreter_problem(value: Any) -> str | None:
    """Why ``value`` cannot be the interpreter root creates the router's virtualenv with, or None."""
    problem = path_problem(value)
    if problem:
        return problem
    under = next((d for d in _WORLD_WRITABLE if value == d or value.startswith(d + "/")), None)
    if under:
        return f"it is under {under}, which other users can write: root would run their program"
    return None


def proxy_env_problem(value: Any) -> str | None:
    """Why ``value`` cannot be the environment of the tasks that download (proxy settings only), or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, Mapping):
        return "it must be a mapping of proxy settings (http_proxy, https_proxy, no_proxy ...)"
    for name, setting in value.items():
        if not isinstance(name, str) or name.lower() not in PROXY_ENV_NAMES:
            return (f"{str(name)[:40]!r} is not a proxy setting: the tasks that download run as root, so only "
                    f"{', '.join(sorted(PROXY_ENV_NAMES))} (any case) may be set (values not shown)")
        if not isinstance(setting, str) or text_problem(setting) or any(c.isspace() for c in setting):
            return f"{name}: a proxy setting is one line of text without white space (value not shown)"
    return None


def identity_problem(value: Any, kind: str) -> str | None:
    """Why ``value`` cannot be the router's system user (``kind`` "user") or group ("group"), or None."""
    problem = user_problem(value)
    if problem:
        return problem
    if kind == "group" and value in PRIVILEGED_GROUPS:
        return f"{value} is a privileged group: its members can read logs, disks, keys or become root"
    if value in WELL_KNOWN_ACCOUNTS or value in PRIVILEGED_GROUPS:
        return (f"{value} belongs to the system, the image or another service: the role would take it over "
                "(use the router's own, e.g. sglang-router)")
    return None


def gateway_service_name_problem(value: Any) -> str | None:
    """Why ``value`` cannot name the gateway's unit, or None: a plain unit name in the project's namespace."""
    if value == "sglang-router":
        return None
    if not isinstance(value, str) or not SERVICE_NAME.fullmatch(value) or value.endswith(".service") or ".." in value:
        return service_name_problem(value) or "it must be a plain systemd service name"
    if not value.startswith("sglang") or value in _OTHER_UNITS or value in RESERVED_SERVICE_NAMES:
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


def _settings(values: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(GATEWAY_DEFAULTS)
    for key in values:
        if isinstance(key, str) and key.startswith("sglang_router_"):
            out[key] = values[key]
    return out


def endpoint_problems(values: Mapping[str, Any]) -> list[Problem]:
    """The problems of the router's listener, TLS and keys (what ``router_endpoint`` decides with)."""
    cfg = _settings(values)
    out: list[Problem] = []
    for var in ("sglang_router_host", "sglang_router_prometheus_host"):
        _add(out, "gateway.address", var, _shown(cfg[var]), address_problem(cfg[var]),
             "an IP address (127.0.0.1, 0.0.0.0, ::) or a DNS name")
    for var in ("sglang_router_port", "sglang_router_prometheus_port"):
        _add(out, "gateway.port", var, _shown(cfg[var]), _port(cfg[var]), "a TCP port, 1-65535")
    for var in ("sglang_router_tls_cert_file", "sglang_router_tls_key_file", "sglang_router_ca_file"):
        if cfg.get(var):
            _add(out, "gateway.path", var, _shown(cfg[var]), file_problem(cfg[var]),
                 "an absolute, normalised path of a PEM file on the gateway, outside /home, /root and /run/user")
    if bool(cfg["sglang_router_tls_cert_file"]) != bool(cfg["sglang_router_tls_key_file"]):
        missing = "sglang_router_tls_key_file" if cfg["sglang_router_tls_cert_file"] else "sglang_router_tls_cert_file"
        out.append(Problem("gateway.tls", missing, None,
                           "sglang_router_tls_cert_file and sglang_router_tls_key_file: set both (TLS) or neither",
                           "set both files, or neither"))
    for var in SECRET_VARS:
        value = cfg[var]
        if value is None:
            continue
        if not isinstance(value, str):
            out.append(Problem("gateway.key", var, None, f"{var} must be a string (value not shown)",
                               "quote the key (from Ansible Vault)"))
        elif value:
            why = header_token_problem(value)
            if why:
                out.append(Problem("gateway.key", var, None, f"{why.split(' (found')[0]} (value not shown)",
                                   "use a key of printable ASCII without spaces"))
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


def gateway_problems(values: Mapping[str, Any], workers: Mapping[str, Mapping[str, Any]] | None = None) -> list[Problem]:
    """Everything a gateway host's variables (``values``: ``sglang_router_*``, missing ones at the role's
    defaults) and its workers (``workers``: GPU host name -> its hostvars) can get wrong, as Problems.

    No Problem carries a secret: the keys' values and URLs with passwords are shown as None.
    """
    cfg = _settings(values)
    out = endpoint_problems(values)
    _add(out, "gateway.version", "sglang_router_version", _shown(cfg["sglang_router_version"]),
         None if isinstance(cfg["sglang_router_version"], str) and _VERSION.fullmatch(cfg["sglang_router_version"])
         else "it must be a release number, e.g. 0.3.2 (it names the virtualenv in the unit's ExecStart)",
         "the pinned sglang-router release, e.g. '0.3.2'")
    _add(out, "gateway.service", "sglang_router_service_name", _shown(cfg["sglang_router_service_name"]),
         gateway_service_name_problem(cfg["sglang_router_service_name"]), "e.g. sglang-router")
    _add(out, "gateway.identity", "sglang_router_user", _shown(cfg["sglang_router_user"]),
         identity_problem(cfg["sglang_router_user"], "user"), "the router's own system user, e.g. sglang-router")
    _add(out, "gateway.identity", "sglang_router_group", _shown(cfg["sglang_router_group"]),
         identity_problem(cfg["sglang_router_group"], "group"), "the router's own system group, e.g. sglang-router")
    for var in ("sglang_router_venvs_dir", "sglang_router_config_dir"):
        if var in cfg:
            _add(out, "gateway.path", var, _shown(cfg[var]), _dir_problem(cfg[var]),
                 "a directory of the router's own, e.g. /opt/sglang-router or /etc/sglang-router")
    if "sglang_router_python" in cfg:
        _add(out, "gateway.path", "sglang_router_python", _shown(cfg["sglang_router_python"]),
             interpreter_problem(cfg["sglang_router_python"]), "an absolute interpreter path, e.g. /usr/bin/python3")
    if "sglang_router_proxy_env" in cfg:
        _add(out, "gateway.proxy_env", "sglang_router_proxy_env", None, proxy_env_problem(cfg["sglang_router_proxy_env"]),
             "only proxy settings, e.g. {https_proxy: 'http://proxy.example:3128', no_proxy: 'localhost,10.0.0.0/8'}")
    choices = (("sglang_router_policy", POLICIES), ("sglang_router_log_level", LOG_LEVELS))
    for var, allowed in choices:
        if var in cfg and cfg[var] not in allowed:
            out.append(Problem("gateway.choice", var, _shown(cfg[var]), f"{var} must be one of {', '.join(allowed)}",
                               f"one of {', '.join(allowed)}"))
    for var, low in (("sglang_router_max_concurrent_requests", -1), ("sglang_router_queue_size", 0),
                     ("sglang_router_rate_limit_tokens_per_second", 1), ("sglang_router_pip_timeout", 1),
                     ("sglang_router_drain_timeout", 0), ("sglang_router_registration_timeout", 0),
                     ("sglang_router_poll_interval", 1)):
        if var not in cfg or (cfg[var] is None and var == "sglang_router_rate_limit_tokens_per_second"):
            continue
        number = _int_value(cfg[var])
        if number is None or not low <= number < 2**31:
            out.append(Problem("gateway.number", var, _shown(cfg[var]), f"{var} must be an integer from {low}",
                               f"an integer, at least {low}"))
    for var in ("sglang_router_allow_unauthenticated", "sglang_router_request_check", "sglang_router_pip_no_index"):
        value = cfg.get(var)
        if var in cfg and not (isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _BOOLEANS)):
            out.append(Problem("gateway.bool", var, _shown(value), f"{var} must be true or false", "true or false"))
    for var in ("sglang_router_worker_group", "sglang_router_group_name"):
        if var in cfg and not (isinstance(cfg[var], str) and _GROUP_NAME.fullmatch(cfg[var])):
            out.append(Problem("gateway.group", var, _shown(cfg[var]),
                               f"{var} must be an inventory group name (letters, digits, '_')", "e.g. sglang_servers"))
    for message in router_extra_args_problems(cfg.get("sglang_router_extra_args")):
        where = re.match(r"sglang_router_extra_args(?:\[[0-9]+\])?:? ?", message)
        variable = where[0].rstrip(": ") if where else "sglang_router_extra_args"
        out.append(Problem("gateway.extra_args", variable, None, message[len(where[0]):] if where else message,
                           "leave the role's options to its variables; put no secret on the command line"))
    out.extend(_pip_problems(cfg))
    if workers:
        router_key = cfg["sglang_router_api_key"]
        key = _text_of(router_key) if isinstance(router_key, str) or router_key is None else None
        for host in workers:
            out.extend(worker_problems(str(host), {} if workers[host] is None else workers[host], key))
    return out


def _pip_problems(cfg: Mapping[str, Any]) -> list[Problem]:
    """The package sources and packages: each becomes one word of pip's or apt's command (no option smuggled in)."""
    out: list[Problem] = []
    index = cfg.get("sglang_router_pip_index_url")
    if index not in (None, "") and not (isinstance(index, str) and _PIP_SOURCE.fullmatch(index) and not text_problem(index)):
        out.append(Problem("gateway.pip", "sglang_router_pip_index_url", _shown(index),
                           "it must be one http(s):// or file:// URL without white space or credentials",
                           "e.g. https://pypi.example/simple"))
    links = cfg.get("sglang_router_pip_find_links")
    if links not in (None, ""):
        if isinstance(links, (str, bytes)) or not isinstance(links, (list, tuple)):
            out.append(Problem("gateway.pip", "sglang_router_pip_find_links", None, "it must be a list", "a list of paths or URLs"))
        else:
            for i, link in enumerate(links):
                if not (isinstance(link, str) and _PIP_SOURCE.fullmatch(link) and not text_problem(link)):
                    out.append(Problem("gateway.pip", f"sglang_router_pip_find_links[{i}]", _shown(link),
                                       "it must be an absolute path or an http(s)/file URL, without white space or "
                                       "credentials", "e.g. /srv/wheels"))
    packages = cfg.get("sglang_router_system_packages")
    if packages not in (None, ""):
        if isinstance(packages, (str, bytes)) or not isinstance(packages, (list, tuple)):
            out.append(Problem("gateway.packages", "sglang_router_system_packages", None, "it must be a list",
                               "e.g. [python3-venv]"))
        else:
            for i, name in enumerate(packages):
                if not (isinstance(name, str) and _DEB_PACKAGE.fullmatch(name)):
                    out.append(Problem("gateway.packages", f"sglang_router_system_packages[{i}]", _shown(name),
                                       "it must be a Debian package name (optionally =version)", "e.g. python3-venv"))
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
