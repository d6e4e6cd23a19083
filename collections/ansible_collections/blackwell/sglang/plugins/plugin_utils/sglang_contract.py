# SPDX-License-Identifier: Apache-2.0
"""The input contract of the whole deployment: the kind of every variable a role or playbook reads, in one place.

Every host, group and role variable is untrusted text. :data:`CONTRACT` declares, for each variable any role of
the collection reads, what it must be: a path under an allowed root, a unit name in the project's namespace, a
service account, a host or address, a URL, a port, a secret, bounded free text, a number ... (:class:`Kind`).
The validate action (``playbooks/validate.yml``) checks every variable the inventory sets, for every host of
every group, before any host changes; each role checks its own variables again at its entry
(``blackwell.sglang.check_inputs``), when it runs alone. The launch planner (sglang_hostplan / sglang_validate)
checks the server's launch inputs (``sglang_args``, ``sglang_env``, ``sglang_instances`` ...) on top: their kind
here is :data:`PLANNED`. The README's input-contract table lists the kinds (``kinds_table``), and a test holds
the roles' ``meta/argument_specs.yml`` and this table to the same set of variables and types.

Pure Python, no Ansible import: the action plugins, the filters and the tests use it alike.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_inputs as inputs

# Bounds of free text and of structured values (a YAML alias chain expands exponentially).
TEXT_MAX = 4096
DATA_MAX_NODES = 100_000
DATA_MAX_DEPTH = 32
DATA_MAX_TEXT = 1 << 20  # characters of all its strings (keys included)

# Directories the distribution, systemd or the kernel own, and everything below them: never a directory the
# project creates, hands to a service user or writes a file into, whatever the variable says.
PROTECTED_TREES = (
    "/bin", "/boot", "/dev", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run", "/sbin", "/sys",
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include", "/usr/share",
    "/usr/src", "/usr/local/bin", "/usr/local/sbin",
    "/etc/systemd", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/etc/ssl", "/etc/pam.d", "/etc/security",
    "/etc/cron.d", "/etc/cron.daily", "/etc/cron.hourly", "/etc/cron.weekly", "/etc/cron.monthly", "/etc/crontab",
    "/etc/apt", "/etc/profile.d", "/etc/ld.so.conf.d", "/etc/modprobe.d", "/etc/sysctl.d", "/etc/udev",
    "/etc/polkit-1", "/etc/init.d", "/etc/rc0.d", "/etc/default", "/etc/passwd", "/etc/shadow", "/etc/group",
    "/etc/gshadow", "/etc/environment", "/etc/hosts", "/etc/resolv.conf", "/etc/nvidia-imex",
    "/var/lib/dpkg", "/var/lib/apt", "/var/lib/systemd", "/var/log", "/var/spool", "/var/mail", "/home",
)
# World-writable trees: another local user can create or swap what lies there. Never handed to a service user (root
# writes its own files there only where an operator points a role at a scratch copy, e.g. a test's virtualenv).
WORLD_WRITABLE_TREES = ("/tmp", "/var/tmp", "/dev/shm")
# Directories that are themselves system directories (their own files are the distribution's), though a
# project directory may live below them (/etc/sglang, /opt/sglang, /var/lib/sglang, /usr/local/libexec/sglang).
SYSTEM_DIRS = frozenset(inputs.SYSTEM_DIRS) | {"/usr/local/share", "/usr/local/etc", "/var/backups", "/etc/opt", "/srv"}

# Groups that give root or the host's devices, disks, logs or containers: never a service's group (nor, as a name,
# its user). Accounts the distribution ships or a person logs in with: never a service account of the project.
PRIVILEGED_GROUPS = frozenset((
    "root", "sudo", "wheel", "admin", "adm", "shadow", "disk", "docker", "lxd", "libvirt", "kvm", "systemd-journal",
    "staff", "src", "operator", "sys", "tty", "kmem", "video", "render", "input", "dialout", "netdev", "plugdev",
    "lpadmin", "sambashare", "audio", "users", "utmp", "crontab", "ssh", "ssl-cert", "messagebus", "tss",
    "libvirt-qemu", "lp", "mail", "podman", "incus", "incus-admin", "microk8s",
))
RESERVED_ACCOUNTS = frozenset((
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "gnats", "nobody", "nogroup", "systemd-network", "systemd-resolve", "systemd-timesync",
    "systemd-journal", "systemd-coredump", "messagebus", "sshd", "_apt", "syslog", "uuidd", "tcpdump", "polkitd",
    "ubuntu", "debian", "admin", "ec2-user", "centos", "fedora", "cloud-user", "ansible", "vagrant", "user",
    "nvidia-persistenced", "prometheus", "node-exporter", "grafana", "rocky", "almalinux", "users", "postfix",
    "chrony", "ntp", "dnsmasq", "tss", "landscape", "pollinate", "lxd", "docker", "nvidia-dcgm", "dcgm-exporter",
))
# The environment the roles' download tasks may be given (proxy_env and each role's *_proxy_env).
PROXY_ENV_NAMES = frozenset({"http_proxy", "https_proxy", "no_proxy", "all_proxy", "ftp_proxy"})
# The gateways' choices (--policy, --log-level): every one of smg 1.13.0 and sglang-router 0.3.2 (schemas/gateway-*.json);
# sglang_gateway checks a value against the pinned gateway's own parser.
ROUTER_POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "manual", "passthrough", "least_load",
                   "consistent_hashing", "prefix_hash")
ROUTER_LOG_LEVELS = ("debug", "info", "warn", "error")
# The gateways roles/sglang_router installs: smg (Shepherd Model Gateway), or the legacy sglang-router.
ROUTER_GATEWAYS = ("smg", "sglang-router")
# The namespace of the units the project writes: a unit whose file the project installs must be one of its own.
UNIT_NAMESPACE = "sglang"
_DNS_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+~=<>!*,@-]{0,254}")
_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")
_URL = re.compile(r"(?P<scheme>https?|file)://(?P<rest>[^\s]*)")


@dataclass(frozen=True)
class Context:
    """What some kinds are checked against: the allowed roots of service directories, the project's own
    directories (a service directory neither contains nor lies inside one)."""

    service_roots: tuple[str, ...] = ()
    project_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    """What a variable must hold: a name for the README's table, the ``type`` of its argument spec (and
    ``elements``), a one-line description, and the check (``problem(value, context) -> why | None``)."""

    name: str
    spec_type: str
    describe: str
    check: Callable[[Any, Context], str | None]
    elements: str | None = None

    def problem(self, value: Any, context: Context | None = None) -> str | None:
        return self.check(value, context or Context())


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


# --- scalar checks ------------------------------------------------------------------------------------------


def _text(value: Any, _: Context | None = None, limit: int = TEXT_MAX) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict, tuple, set)):
        return "it must be text"
    if isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str):
        return "it must be text"
    if len(value) > limit:
        return f"it is {len(value)} characters long (at most {limit})"
    return inputs.text_problem(value)


def _token(value: Any, _: Context | None = None) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "it must be a plain word (a name, a version or a package)"
    text = str(value)
    if not _TOKEN.fullmatch(text):
        return ("it must be a plain word: letters, digits and . _ : + ~ = < > ! * , @ -, starting with a letter or "
                "digit, at most 255 characters")
    return None


def _optional(check: Callable[[Any, Context], str | None]) -> Callable[[Any, Context], str | None]:
    def optional(value: Any, context: Context) -> str | None:
        return None if value in ("", None) else check(value, context)

    return optional


def _bool(value: Any, _: Context) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _printable(value) and value.strip().lower() in (
            "true", "false", "yes", "no", "on", "off", "1", "0"):
        return None
    if isinstance(value, int) and value in (0, 1):
        return None
    return "it must be true or false"


def _printable(text: str) -> bool:
    """No line break or control character anywhere (str.strip, float and int take Unicode line breaks as white space)."""
    return text.isprintable()


def _int(low: int | None = None, high: int | None = None) -> Callable[[Any, Context], str | None]:
    def check(value: Any, _: Context) -> str | None:
        if isinstance(value, bool):
            return "it must be a whole number"
        if isinstance(value, str) and _printable(value) and re.fullmatch(r" *-?[0-9]{1,19} *", value):
            value = int(value)
        if not isinstance(value, int):
            return "it must be a whole number"
        if (low is not None and value < low) or (high is not None and value > high) or abs(value) >= inputs.INT_LIMIT:
            return f"{value} is out of range ({low if low is not None else '...'}-{high if high is not None else '...'})"
        return None

    return check


def _number(low: float | None = None, high: float | None = None) -> Callable[[Any, Context], str | None]:
    def check(value: Any, _: Context) -> str | None:
        if isinstance(value, bool):
            return "it must be a number"
        if isinstance(value, str):
            if not _printable(value):  # float() strips Unicode line breaks (NEL, U+2028) as white space
                return "it must be a number"
            try:
                value = float(value)
            except ValueError:
                return "it must be a number"
        if not isinstance(value, (int, float)):
            return "it must be a number"
        problem = inputs.number_problem(value)
        if problem:
            return problem
        if (low is not None and value < low) or (high is not None and value > high):
            return f"{value} is out of range ({low}-{high})"
        return None

    return check


def _port(value: Any, _: Context) -> str | None:
    if isinstance(value, str) and _printable(value) and value.strip().isdigit() and value.isascii():
        value = int(value)
    return inputs.port_problem(value)


def dns_name_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS host name of RFC 1123 labels, or None."""
    name = value[:-1] if value.endswith(".") else value
    if not name or len(name) > 253:
        return "a host name has 1 to 253 characters"
    labels = name.split(".")
    if not name.isascii() or not all(_DNS_LABEL.fullmatch(label) for label in labels):
        return "a host name is dot-separated labels of letters, digits and '-' (RFC 1123), not starting or ending with '-'"
    if labels[-1].isdigit():
        return "its last label is all digits, which resolvers read as an IPv4 address: write the address in full"
    return None


def address_problem(value: Any, _: Context | None = None, *, brackets: bool = False) -> str | None:
    """Why ``value`` is neither an IP address nor a DNS name, or None (``brackets``: IPv6 written ``[::1]``, as in a
    URL). No white space, no zone id, no port."""
    if not isinstance(value, str) or not value:
        return "it must be an IP address or a DNS name (e.g. 127.0.0.1, 0.0.0.0, :: or gateway.example)"
    problem = inputs.text_problem(value)
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
            return "the brackets hold no IPv6 address"
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


def is_loopback(host: Any) -> bool:
    """True when ``host`` names this machine only: an address of 127.0.0.0/8, ::1, or exactly ``localhost``.

    Parsed, never prefixed: ``localhost.attacker.example``, ``127.attacker.example`` and ``localhostx`` are names any
    resolver may point elsewhere, and ``0.0.0.0``/``::`` mean every address.
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
    """How the host itself reaches a service listening on ``listen``: every address (``0.0.0.0``, ``::``, "") over
    loopback of the same family; any other address as it is."""
    if listen == "":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(listen)
    except ValueError:
        return listen
    if address.is_unspecified:
        return "127.0.0.1" if address.version == 4 else "::1"
    return listen


def _host_port(value: Any, context: Context) -> str | None:
    if not isinstance(value, str) or ":" not in value:
        return "it must be host:port"
    host, _, port = value.rpartition(":")
    return address_problem(host, context) or _port(port, context)


def url_problem(value: Any, _: Context | None = None, schemes: tuple[str, ...] = ("http", "https")) -> str | None:
    """Why ``value`` is not a plain ``scheme://host[:port][/path]`` URL, or None."""
    problem = _text(value)
    if problem:
        return problem
    match = _URL.fullmatch(str(value))
    if not match or match["scheme"] not in schemes:
        return f"it must be a URL ({' or '.join(s + '://' for s in schemes)}...) without spaces"
    if match["scheme"] == "file":
        return inputs.path_problem("/" + match["rest"].lstrip("/"))
    netloc = match["rest"].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in netloc:
        return "a URL here carries no user name or password (use the variables made for secrets)"
    host = netloc
    if netloc.startswith("["):
        host, _, rest = netloc.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else None
    elif ":" in netloc:
        host, _, port = netloc.rpartition(":")
    else:
        port = None
    return address_problem(host, brackets=True) or (_port(port, Context()) if port is not None else None)


def _url(value: Any, context: Context) -> str | None:
    return url_problem(value, context)


def _url_or_file(value: Any, context: Context) -> str | None:
    return url_problem(value, context, ("http", "https", "file"))


def _find_link(value: Any, context: Context) -> str | None:
    """pip's --find-links: a local directory or a URL."""
    if isinstance(value, str) and value.startswith("/"):
        return inputs.path_problem(value)
    return url_problem(value, context, ("http", "https", "file"))


def _group_name(value: Any, _: Context) -> str | None:
    if not isinstance(value, str) or not _GROUP_NAME.fullmatch(value):
        return "an inventory group name is letters, digits and '_', starting with a letter or '_'"
    return None


def _duration(value: Any, _: Context) -> str | None:
    if not isinstance(value, str) or not _DURATION.fullmatch(value):
        return "it must be a Prometheus duration, e.g. 15s, 1m, 15d"
    return None


# --- paths --------------------------------------------------------------------------------------------------


def protected_path_problem(value: str) -> str | None:
    """Why the project must not create or write ``value`` (a system directory or below a protected tree), or None."""
    if value == "/" or value in SYSTEM_DIRS:
        return f"{value} is a system directory"
    tree = next((t for t in PROTECTED_TREES if _within(value, t)), None)
    if tree:
        return f"{value} is inside {tree}, which the distribution, systemd or the kernel own"
    return None


def _role_path(value: Any, _: Context) -> str | None:
    """A file or directory the project writes as root (its configuration, its virtualenvs, its tools)."""
    return inputs.path_problem(value) or protected_path_problem(str(value))


def _under(*trees: str, why: str) -> Callable[[Any, Context], str | None]:
    """A file root writes or removes in a place the distribution owns, limited to the one tree it belongs in."""
    def check(value: Any, _: Context) -> str | None:
        problem = inputs.path_problem(value)
        if problem:
            return problem
        if not any(str(value).startswith(t + "/") for t in trees):
            return f"{why}: it must lie under {' or '.join(trees)}"
        return None

    return check


# The /etc/default files of the exporters' and Prometheus' Debian units, which the roles write (ARGS=).
DEFAULTS_FILES = ("/etc/default/prometheus", "/etc/default/prometheus-node-exporter")


def _defaults_file(value: Any, context: Context) -> str | None:
    """A unit's /etc/default file the role writes as root: one of the exporters' or Prometheus', or outside the
    trees the distribution owns (never /etc/default/ssh, /etc/sudoers ...)."""
    if value in DEFAULTS_FILES:
        return None
    problem = _role_path(value, context)
    return None if problem is None else problem + f" (the exporters' own files are {', '.join(DEFAULTS_FILES)})"


def _exec_path(value: Any, _: Context) -> str | None:
    """A program the project runs (an interpreter, an exporter's binary): a plain absolute path."""
    return inputs.path_problem(value)


def _program(value: Any, _: Context) -> str | None:
    """A program root runs (an interpreter a virtualenv is made from, an exporter): not in a tree other users write."""
    problem = inputs.path_problem(value)
    if problem:
        return problem
    shared = next((t for t in (*WORLD_WRITABLE_TREES, "/home", "/run/user") if _within(str(value), t)), None)
    if shared:
        return f"it is under {shared}, which other users can write: root would run their program"
    return None


def _read_path(value: Any, _: Context) -> str | None:
    """A file a sandboxed service reads (a TLS certificate, key or CA bundle): not hidden by its sandbox."""
    problem = inputs.path_problem(value)
    if problem:
        return problem
    hidden = next((h for h in inputs.HIDDEN_BY_PROTECT_HOME if _within(str(value), h)), None)
    if hidden:
        return f"{hidden} is hidden from the service by its sandbox (ProtectHome=yes): it could not read the file"
    return None


def service_dir_problem(value: Any, context: Context) -> str | None:
    """Why ``value`` may not be a directory the project hands to a service user, or None.

    It lies under an allowed root (the models directory, ``sglang_service_roots``), is not a system directory
    nor below a protected tree, and neither contains nor lies inside a directory the project owns as root (its
    virtualenvs, configuration, libexec): the service user could otherwise replace what root runs.
    """
    problem = inputs.path_problem(value)
    if problem:
        return problem
    path = str(value)
    problem = protected_path_problem(path)
    if problem:
        return problem + "; the role would hand it to the service user"
    shared = next((t for t in WORLD_WRITABLE_TREES if _within(path, t)), None)
    if shared:
        return f"{path} is inside {shared}, which every local user can write; the role would hand it to the service user"
    owned = next((d for d in context.project_dirs if d and (_within(path, d) or _within(d, path))), None)
    if owned:
        return (f"it {'is inside' if _within(path, owned) and path != owned else 'contains'} {owned}, a directory the "
                "project keeps for root; the service user could replace what root runs")
    roots = [r for r in context.service_roots if isinstance(r, str) and r]
    if roots and not any(_within(path, r) for r in roots):
        return ("it is not under an allowed root of service directories (" + ", ".join(roots) + "): add its root to "
                "sglang_service_roots if the service user is to own it")
    return None


# --- names --------------------------------------------------------------------------------------------------


def account_problem(value: Any, _: Context | None = None) -> str | None:
    """Why ``value`` may not be a service account (user or group) the project creates and runs a service as."""
    problem = inputs.user_problem(value)
    if problem:
        return problem
    if value in PRIVILEGED_GROUPS:
        return f"{value} is a privileged group (root, devices, disks, logs or containers); a service never runs with it"
    if value in RESERVED_ACCOUNTS:
        return (f"{value} is an account the distribution or the login of people uses; the project runs services "
                "as system accounts of its own")
    return None


def _owner(value: Any, _: Context) -> str | None:
    """An existing account that owns files (root is allowed): the user-name syntax only."""
    if not isinstance(value, str) or not inputs.USER_NAME.fullmatch(value):
        return "user and group names are lower-case letters, digits, '_' and '-', starting with a letter or '_'"
    return None


def owned_unit_problem(value: Any, _: Context | None = None) -> str | None:
    """Why the project may not write the unit file ``value``.service: not a plain name, or outside its namespace."""
    if not isinstance(value, str) or not inputs.SERVICE_NAME.fullmatch(value) or value.endswith(".service") or ".." in value:
        return "service names are letters, digits and _ . : - (no '/', '@', '..' or .service suffix)"
    if not (value == UNIT_NAMESPACE or value.startswith(UNIT_NAMESPACE + "-") or value.startswith(UNIT_NAMESPACE + "_")):
        return (f"the project writes the unit file of {value}.service: its name stays in the project's namespace "
                f"({UNIT_NAMESPACE} or {UNIT_NAMESPACE}-<name>), so no unit the distribution ships is replaced")
    return None


def server_unit_problem(value: Any, context: Context | None = None) -> str | None:
    """Why the SGLang server may not take the unit name ``value``: :func:`owned_unit_problem`, or a unit of the
    project's other roles or of NVIDIA (sglang_inputs.RESERVED_SERVICE_NAMES)."""
    return owned_unit_problem(value, context) or inputs.service_name_problem(value)


# Units of others the project writes a drop-in for (an ExecStart= override, an environment): NVIDIA's and DCGM's, the
# exporters', and its own. A drop-in into any other unit (ssh, systemd-journald) would change what that unit runs.
DROPIN_UNITS = frozenset(("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "nv-hostengine", "nvidia-dcgm-exporter",
                          "dcgm-exporter", "prometheus-node-exporter", "prometheus"))


def dropin_unit_problem(value: Any, context: Context | None = None) -> str | None:
    """Why the project may not write a drop-in for the unit ``value``: not a plain unit name, or neither its own
    (the sglang namespace) nor one of NVIDIA's, DCGM's or the exporters' (:data:`DROPIN_UNITS`)."""
    problem = _unit_ref(value, context or Context())
    if problem:
        return problem
    name = str(value).removesuffix(".service")
    if name in DROPIN_UNITS or not owned_unit_problem(name):
        return None
    return (f"the project writes a drop-in for {name}.service, which would change what that unit runs: only its own units "
            f"({UNIT_NAMESPACE}-...) and {', '.join(sorted(DROPIN_UNITS))} take one")


def _unit_ref(value: Any, _: Context) -> str | None:
    """The name of a unit the project uses but does not write (nvidia-dcgm, prometheus-node-exporter)."""
    text = str(value).removesuffix(".service") if isinstance(value, str) else value
    if not isinstance(text, str) or not inputs.SERVICE_NAME.fullmatch(text) or ".." in text:
        return "unit names are letters, digits and _ . : -"
    return None


# --- containers ---------------------------------------------------------------------------------------------


def size_problem(value: Any, max_nodes: int = DATA_MAX_NODES, max_depth: int = DATA_MAX_DEPTH) -> str | None:
    """Why ``value`` is over the bounds (too many values, too deep, too much text), or None: the one bound of every
    host and role variable, checked before anything else walks, copies or templates the value.

    Walks at most ``max_nodes`` values, without templating anything (a lazily templated container is read as the
    dict or list it is) and counting a shared reference once per use, as a YAML alias chain expands: it stops at the
    first bound hit, so it never expands what it refuses.
    """
    nodes = text = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return (f"it holds more than {max_nodes:,} values (YAML aliases count once per use: an alias chain "
                    "expands to that many)")
        if depth > max_depth:
            return f"it is nested more than {max_depth} levels deep"
        if isinstance(item, (str, bytes)):
            text += len(item)
            if text > DATA_MAX_TEXT:
                return f"its text is over {DATA_MAX_TEXT // (1 << 20)} MiB"
        elif isinstance(item, dict):
            for key, sub in dict.items(item):
                stack.append((key, depth + 1))
                stack.append((sub, depth + 1))
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                stack.append((key, depth + 1))
                stack.append((sub, depth + 1))
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((sub, depth + 1) for sub in (list.__iter__(item) if isinstance(item, list) else iter(item)))
    return None


def _list_of(check: Callable[[Any, Context], str | None]) -> Callable[[Any, Context], str | None]:
    def listing(value: Any, context: Context) -> str | None:
        if not isinstance(value, (list, tuple)):
            return "it must be a list"
        if len(value) > 1024:
            return "it lists more than 1024 items"
        for index, item in enumerate(value):
            problem = check(item, context)
            if problem:
                return f"item {index} ({_shown(item)}): {problem}"
        return None

    return listing


def _env_map(value: Any, _: Context) -> str | None:
    """The environment of the tasks that download (apt, pip, as root): proxy settings only, one word each; never
    LD_PRELOAD, PIP_* or PYTHON* (values are not shown: a proxy URL may hold a password)."""
    if value in (None, ""):
        return None
    if not isinstance(value, Mapping):
        return "it must be a mapping of proxy settings (http_proxy, https_proxy, no_proxy ...)"
    for name, item in value.items():
        if not isinstance(name, str) or name.lower() not in PROXY_ENV_NAMES:
            return (f"{str(name)[:40]!r} is not a proxy setting: the tasks that download run as root, so only "
                    f"{', '.join(sorted(PROXY_ENV_NAMES))} (any case) may be set (values not shown)")
        if not isinstance(item, str) or inputs.text_problem(item) or any(c.isspace() for c in item):
            return f"{name}: a proxy setting is one line of text without white space (value not shown)"
    return None


def _data(value: Any, _: Context) -> str | None:
    """Structured data a role checks itself (scrape configs, alert durations): bounded, its text line-safe."""
    problem = size_problem(value)
    if problem:
        return problem
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            problem = inputs.text_problem(item)
            if problem:
                return problem
    return None


def _planned(value: Any, _: Context) -> str | None:
    """The launch inputs: the planner checks them in full; here only their size (before anything walks them)."""
    return size_problem(value)


def _secret(value: Any, _: Context) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return "it must be text"
    if len(value) > TEXT_MAX:
        return f"it is longer than {TEXT_MAX} characters"
    return inputs.text_problem(value)


def _bearer(value: Any, context: Context) -> str | None:
    return _secret(value, context) or (inputs.header_token_problem(value) if isinstance(value, str) and value else None)


def _choice(*choices: Any) -> Callable[[Any, Context], str | None]:
    def check(value: Any, _: Context) -> str | None:
        if value not in choices and str(value) not in [str(c) for c in choices]:
            return "it must be one of " + ", ".join(str(c) for c in choices)
        return None

    return check


def _rate(value: Any, context: Context) -> str | None:
    return None if str(value) in ("inf", "Infinity") else _number(0)(value, context)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- the kinds ----------------------------------------------------------------------------------------------

TEXT = Kind("text", "str", f"free text without control characters or line breaks, at most {TEXT_MAX} characters", _text)
WORD = Kind("word", "str", "a plain word: a version, a package, a choice (letters, digits and . _ : + ~ = < > ! * , @ -)",
            _token)
OPTIONAL_WORD = Kind("word", "str", WORD.describe + "; empty for none", _optional(_token))
BOOL = Kind("bool", "bool", "true or false", _bool)
INT = Kind("int", "int", "a whole number", _int())
COUNT = Kind("count", "int", "a whole number, 0 or more", _int(0))
SECONDS = Kind("seconds", "int", "a whole number of seconds, 0 or more", _int(0, 10 * 365 * 86400))
NUMBER = Kind("number", "float", "a number", _number())
PORT = Kind("port", "int", "a TCP port, 1-65535", _port)
ADDRESS = Kind("address", "str", "an IP address or a DNS name (parsed: a name other than localhost is not loopback)",
               address_problem)
OPTIONAL_ADDRESS = Kind("address", "str", ADDRESS.describe + "; empty for the default", _optional(address_problem))
HOST_PORT = Kind("host:port", "str", "an address and a port, host:port", _host_port)
URL = Kind("url", "str", "an http(s) URL: scheme://host[:port][/path], no user or password, no spaces", _optional(_url))
URL_OR_FILE = Kind("url", "str", "an http(s) or file URL", _optional(_url_or_file))
DURATION = Kind("duration", "str", "a Prometheus duration (15s, 1m, 15d)", _duration)
GROUP = Kind("group", "str", "an inventory group name", _group_name)
ROLE_PATH = Kind("path", "path", "an absolute, normalised path the project writes as root; never a system directory or "
                 "inside one the distribution, systemd or the kernel own", _role_path)
OPTIONAL_ROLE_PATH = Kind("path", "path", ROLE_PATH.describe + "; empty for none", _optional(_role_path))
EXEC_PATH = Kind("program", "path", "the absolute path of a program", _exec_path)
CONTROLLER_PATH = Kind("controller path", "path", "a file or directory on the control node (read there, never on a "
                       "host): text without control characters", _text)
READ_PATH = Kind("readable file", "path", "an absolute path a sandboxed service reads (not under /home, /root, /run/user)",
                 _optional(_read_path))
SERVICE_DIR = Kind("service dir", "path", "a directory handed to the service user: under the models directory or a root "
                   "of sglang_service_roots, never a system or project directory", service_dir_problem)
ACCOUNT = Kind("account", "str", "a system account the project creates and runs a service as: not root, no privileged "
               "group, no account of the distribution or of people", account_problem)
OWNER = Kind("owner", "str", "an existing account that owns files (root allowed)", _owner)
UNIT = Kind("unit", "str", f"a unit the project writes: {UNIT_NAMESPACE} or {UNIT_NAMESPACE}-<name>", owned_unit_problem)
SERVER_UNIT = Kind("unit", "str", UNIT.describe + "; not a unit of the project's other roles", server_unit_problem)
UNIT_REF = Kind("unit name", "str", "a unit the project uses but does not write", _unit_ref)
SECRET = Kind("secret", "str", "a secret (Ansible Vault): never printed, never on a command line, files 0600/0640",
              _secret)
BEARER = Kind("secret", "str", SECRET.describe + "; an HTTP bearer token (printable ASCII, no spaces)", _bearer)
ARGV = Kind("argv", "list", "command-line words, each free text", _list_of(_text), "str")
DEFAULTS_FILE = Kind("defaults file", "path", "a unit's /etc/default file the role writes: the exporters' or "
                     "Prometheus' own, or a path outside the distribution's trees", _defaults_file)
KEYRING = Kind("keyring", "path", "an apt keyring the role writes, under /etc/apt/keyrings or /usr/share/keyrings",
               _under("/etc/apt/keyrings", "/usr/share/keyrings", why="an apt keyring"))
APT_SOURCES = Kind("apt sources", "list", "apt source files the role removes, under /etc/apt/sources.list.d",
                   _list_of(_under("/etc/apt/sources.list.d", why="the role removes this file as root")), "path")
ENV_ARGV = Kind("env argv", "list", "command-line words of an EnvironmentFile's $ARGS (the unit splits it on white space): "
                "no white space, quotes, backslash, $ or `", _list_of(lambda v, c: _text(v, c) or (
                    None if isinstance(v, str) and re.fullmatch(r"[^\s\"'\\$`]+", v) else
                    "an $ARGS word holds no white space, quotes, backslash, $ or `")), "str")
SEARCH_PATH = Kind("search path", "str", "a PATH: absolute directories (letters, digits and . _ - + @ /) joined by ':'",
                   lambda v, c: next((f"{d!r}: {why}" for d in str(v).split(":") if (why := inputs.path_problem(d))), None)
                   if isinstance(v, str) else "it must be text")
WORDS = Kind("words", "list", "a list of plain words (packages, names)", _list_of(_token), "str")
UNITS = Kind("unit names", "list", "a list of unit names", _list_of(_unit_ref), "str")
DROPIN_UNIT = Kind("drop-in unit", "str", "a unit the project writes a drop-in for: its own or NVIDIA's, DCGM's or the "
                   "exporters'", dropin_unit_problem)
DROPIN_UNITS_KIND = Kind("drop-in units", "list", "units the project writes a drop-in for: its own or NVIDIA's, DCGM's "
                         "or the exporters'", _list_of(dropin_unit_problem), "str")
GROUPS = Kind("groups", "list", "a list of inventory group names", _list_of(_group_name), "str")
PATHS = Kind("paths", "list", "a list of absolute paths the project writes", _list_of(_role_path), "path")
LINKS = Kind("urls", "list", "a list of URLs or local directories", _list_of(_find_link), "str")
URLS = Kind("urls", "list", "a list of http(s) URLs", _list_of(_url), "str")
HOSTS = Kind("hosts", "list", "a list of inventory host names", _list_of(_token), "str")
ENV = Kind("environment", "dict", "proxy settings of the download tasks (http_proxy, https_proxy, no_proxy ...)",
           _env_map)
PROGRAM = Kind("program", "path", "the absolute path of a program root runs, outside trees other users can write",
               _program)
DATA = Kind("data", "raw", f"structured data the role checks, at most {DATA_MAX_NODES} values and {DATA_MAX_DEPTH} levels, "
            "text without control characters", _data)
PLANNED = Kind("launch input", "raw", "a launch input the planner checks in full (sglang_args, sglang_env, "
               "sglang_instances ...); bounded in size before anything reads it", _planned)


def _with_type(kind: Kind, spec_type: str, elements: str | None = None) -> Kind:
    return Kind(kind.name, spec_type, kind.describe, kind.check, elements)


def _choices(kind: Kind, *choices: Any) -> Kind:
    return Kind(kind.name, kind.spec_type, f"one of {', '.join(map(str, choices))}", _choice(*choices), kind.elements)


# --- the declaration ------------------------------------------------------------------------------------------

_PLANNED_DICT = _with_type(PLANNED, "dict")
# The gateway's health, retry and circuit-breaker settings: at least 1 (its parser's "at least 1").
_ROUTER_SECONDS = Kind("seconds", "int", "a whole number of seconds, 1 or more", _int(1, 86400))
_ROUTER_COUNT = Kind("count", "int", "a whole number, 1-65535", _int(1, 65535))


def _url_path(value: Any, _: Context) -> str | None:
    if not isinstance(value, str) or not re.fullmatch(r"/[A-Za-z0-9_.~-]+(/[A-Za-z0-9_.~-]+)*", value) or "/.." in value:
        return "it must be a URL path: '/' and letters, digits, '_', '-', '.', '~' (no query, no '..')"
    return None


_URL_PATH = Kind("url path", "str", "a URL path on the same server, e.g. a health endpoint", _url_path)
_PLANNED_LIST = _with_type(PLANNED, "list", "dict")

CONTRACT: dict[str, Kind] = {
    # Run switches and the whole deployment. ansible_host: how the gateways, Prometheus and the other nodes of an
    # instance reach the host (its workers' URLs, scrape targets, dist-init address), not only how Ansible does.
    "ansible_host": ADDRESS,
    "sglang_service_roots": _with_type(PATHS, "list", "path"),
    "proxy_env": ENV,
    "bundle_dir": ROLE_PATH,
    "offline_bundle_dir": OPTIONAL_ROLE_PATH,
    # cuda_toolkit
    "cuda_toolkit_proxy_env": ENV,
    "cuda_toolkit_version": WORD,
    "cuda_toolkit_min_version": WORD,
    "cuda_toolkit_packages": WORDS,
    "cuda_toolkit_home": ROLE_PATH,
    "cuda_toolkit_remove_other_versions": BOOL,
    "cuda_toolkit_install_recommends": BOOL,
    "cuda_toolkit_apt_cache_valid_time": SECONDS,
    "cuda_toolkit_service_units": DROPIN_UNITS_KIND,
    "cuda_toolkit_service_path": SEARCH_PATH,
    "cuda_toolkit_profile_script": BOOL,
    "cuda_toolkit_bundle_dir": _with_type(ROLE_PATH, "str"),
    # dcgm_exporter
    "dcgm_exporter_proxy_env": ENV,
    "dcgm_exporter_enabled": BOOL,
    "dcgm_exporter_dcgm_version": WORD,
    "dcgm_exporter_dcgm_packages": WORDS,
    "dcgm_exporter_cuda_major": WORD,
    "dcgm_exporter_hostengine_service_name": UNIT_REF,
    "dcgm_exporter_version": WORD,
    "dcgm_exporter_package": WORD,
    "dcgm_exporter_service_name": DROPIN_UNIT,
    "dcgm_exporter_binary": PROGRAM,
    "dcgm_exporter_counters_file": ROLE_PATH,
    "dcgm_exporter_extra_counters": _with_type(DATA, "list", "dict"),
    "dcgm_exporter_listen_host": OPTIONAL_ADDRESS,
    "dcgm_exporter_port": PORT,
    "dcgm_exporter_collect_interval_ms": COUNT,
    "dcgm_exporter_hostengine_address": HOST_PORT,
    "dcgm_exporter_extra_args": ARGV,
    "dcgm_exporter_apt_cache_valid_time": SECONDS,
    "dcgm_exporter_start_timeout": SECONDS,
    # gpu_health
    "gpu_health_fatal_xids": Kind("ints", "list", "a list of whole numbers", _list_of(_int(0)), "int"),
    "gpu_health_xid_since": TEXT,
    "gpu_health_require_persistence": BOOL,
    "gpu_health_dcgm_diag_level": _choices(INT, 0, 1, 2, 3, 4),
    "gpu_health_ignore": _with_type(WORDS, "list", "str"),
    "gpu_health_fail_host": BOOL,
    "gpu_health_timeout": SECONDS,
    "gpu_health_report": _with_type(DATA, "dict"),
    # sglang_drift
    "sglang_drift_fail": BOOL,
    "sglang_drift_ignore_args": _with_type(WORDS, "list", "str"),
    # node_exporter
    "node_exporter_proxy_env": ENV,
    "node_exporter_package": WORD,
    "node_exporter_version": OPTIONAL_WORD,
    "node_exporter_service_name": UNIT_REF,
    "node_exporter_defaults_file": DEFAULTS_FILE,
    "node_exporter_listen_host": OPTIONAL_ADDRESS,
    "node_exporter_port": PORT,
    "node_exporter_collectors_enabled": WORDS,
    "node_exporter_collectors_disabled": WORDS,
    "node_exporter_extra_args": ENV_ARGV,
    "node_exporter_start_timeout": SECONDS,
    # nvidia_driver
    "nvidia_gpu_count": COUNT,
    "nvidia_gpu_compute_capability": WORD,
    "nvidia_driver_branch": WORD,
    "nvidia_driver_version": WORD,
    "nvidia_driver_repo_base_url": URL_OR_FILE,
    "nvidia_driver_repo_distro": WORD,
    "nvidia_driver_repo_arch": WORD,
    "nvidia_driver_repo_url": URL_OR_FILE,
    "nvidia_driver_repo_key_url": URL_OR_FILE,
    "nvidia_driver_repo_key_checksum": OPTIONAL_WORD,
    "nvidia_driver_offline_bundle_dir": _with_type(OPTIONAL_ROLE_PATH, "str"),
    "nvidia_driver_proxy_env": ENV,
    "nvidia_driver_repo_keyring": KEYRING,
    "nvidia_driver_repo_name": WORD,
    "nvidia_driver_repo_obsolete_files": APT_SOURCES,
    "nvidia_driver_apt_cache_valid_time": SECONDS,
    "nvidia_driver_kernel_module_source": _choices(WORD, "dkms", "precompiled"),
    "nvidia_driver_packages": WORDS,
    "nvidia_driver_kernel_packages": WORDS,
    "nvidia_driver_hold_patterns": WORDS,
    "nvidia_driver_conflicting_packages": WORDS,
    "nvidia_driver_install_recommends": BOOL,
    "nvidia_driver_fabricmanager": _choices(WORD, "auto", "true", "false", True, False),
    "nvidia_driver_nvlsm": _choices(WORD, "auto", "true", "false", True, False),
    "nvidia_driver_nvlsm_packages": WORDS,
    "nvidia_driver_fabricmanager_packages": WORDS,
    "nvidia_driver_fabricmanager_service": UNIT_REF,
    "nvidia_driver_persistenced_args": ARGV,
    "nvidia_driver_reload_stop_services": UNITS,
    "nvidia_driver_reboot": _choices(WORD, "auto", "true", "false", "never", True, False),
    "nvidia_driver_reboot_timeout": SECONDS,
    "nvidia_driver_initramfs_command": ARGV,
    "nvidia_driver_secure_boot_mok_enrolled": BOOL,
    "nvidia_driver_bundle_dir": _with_type(ROLE_PATH, "str"),
    # sglang (install and model staging)
    "sglang_version": WORD,
    "sglang_user": ACCOUNT,
    "sglang_group": ACCOUNT,
    "sglang_user_home": _with_type(SERVICE_DIR, "path"),
    "sglang_venvs_dir": ROLE_PATH,
    "sglang_current_link": ROLE_PATH,
    "sglang_keep_venvs": COUNT,
    "sglang_python": PROGRAM,
    "sglang_system_packages": WORDS,
    "sglang_pip_index_url": URL_OR_FILE,
    "sglang_pip_no_index": BOOL,
    "sglang_pip_extra_index_urls": _with_type(LINKS, "list", "str"),
    "sglang_pip_find_links": LINKS,
    "sglang_extra_requirements": Kind("requirements", "list", "a list of pip requirements (free text)", _list_of(_text), "str"),
    "sglang_pip_timeout": SECONDS,
    "sglang_torch_requirement": TEXT,
    "sglang_torch_index_url": URL_OR_FILE,
    "sglang_lock": BOOL,
    "sglang_locks_dir": CONTROLLER_PATH,
    "sglang_lock_file": CONTROLLER_PATH,
    "sglang_offline_bundle_dir": _with_type(OPTIONAL_ROLE_PATH, "str"),
    "sglang_proxy_env": ENV,
    "sglang_uv_index_strategy": _choices(WORD, "first-index", "unsafe-first-match", "unsafe-best-match"),
    "sglang_tools_venv": ROLE_PATH,
    "sglang_uv_version": WORD,
    "sglang_hf_hub_version": WORD,
    "sglang_uv_cache_dir": _with_type(SERVICE_DIR, "path"),
    "sglang_model_path": Kind("model", "str", "a Hugging Face id (org/name) or an absolute local directory the service can "
                              "see", lambda v, _: inputs.model_path_problem(v)),
    "sglang_model_download": BOOL,
    "sglang_model_revision": WORD,
    "sglang_models_dir": _with_type(SERVICE_DIR, "path"),
    "sglang_model_dir": _with_type(SERVICE_DIR, "path"),
    "sglang_model_hf_endpoint": URL,
    "sglang_model_disk_headroom_bytes": COUNT,
    "sglang_model_download_workers": Kind("count", "int", "a whole number, 1-256", _int(1, 256)),
    "sglang_model_download_timeout": SECONDS,
    "sglang_model_download_poll": SECONDS,
    "sglang_model_fanout": BOOL,
    "sglang_model_seed_host": Kind("host", "str", "an inventory host name, empty for the first", _optional(_token)),
    "sglang_model_fanout_per_source": Kind("count", "int", "a whole number, 1-64", _int(1, 64)),
    "sglang_model_fanout_hosts": HOSTS,
    "sglang_model_peer_address": ADDRESS,
    "sglang_model_peer_port": PORT,
    "sglang_model_peer_timeout": SECONDS,
    "sglang_model_fanout_timeout": SECONDS,
    "hf_token": SECRET,
    "sglang_bundle_dir": _with_type(ROLE_PATH, "str"),
    # sglang_bench
    "sglang_bench_candidates": DATA,
    "sglang_bench_canary": WORD,
    "sglang_bench_router_url": URL,
    "sglang_bench_router_api_key": BEARER,
    "sglang_bench_router_ca_file": _with_type(READ_PATH, "str"),
    "sglang_bench_dataset_name": _choices(WORD, "random", "random-ids", "sharegpt", "generated-shared-prefix"),
    "sglang_bench_input_len": COUNT,
    "sglang_bench_output_len": COUNT,
    "sglang_bench_range_ratio": Kind("ratio", "float", "a number from 0 to 1", _number(0, 1)),
    "sglang_bench_num_prompts": COUNT,
    "sglang_bench_request_rate": Kind("rate", "raw", "requests per second, or inf", _rate),
    "sglang_bench_seed": INT,
    "sglang_bench_extra_args": ARGV,
    "sglang_bench_timeout": SECONDS,
    "sglang_bench_venv": _with_type(EXEC_PATH, "path"),
    "sglang_bench_module": WORD,
    "sglang_bench_output_dir": _with_type(TEXT, "path"),
    # sglang_common
    "sglang_common_user": ACCOUNT,
    "sglang_common_group": ACCOUNT,
    "sglang_common_home": _with_type(SERVICE_DIR, "path"),
    "sglang_common_uid_min": Kind("count", "int", "a whole number, 1-65535", _int(1, 65535)),
    "sglang_common_nologin_shells": Kind("paths", "list", "a list of absolute paths", _list_of(_exec_path), "str"),
    "sglang_common_account_user": ACCOUNT,
    "sglang_common_account_group": ACCOUNT,
    "sglang_common_account_vars": TEXT,
    # sglang_monitoring
    "sglang_monitoring_proxy_env": ENV,
    "sglang_monitoring_package": WORD,
    "sglang_monitoring_version": OPTIONAL_WORD,
    "sglang_monitoring_service_name": UNIT_REF,
    "sglang_monitoring_promtool": PROGRAM,
    "sglang_monitoring_defaults_file": DEFAULTS_FILE,
    "sglang_monitoring_config_file": _with_type(ROLE_PATH, "path"),
    "sglang_monitoring_rules_file": _with_type(ROLE_PATH, "path"),
    "sglang_monitoring_storage_dir": _with_type(ROLE_PATH, "path"),
    "sglang_monitoring_retention": DURATION,
    "sglang_monitoring_listen_host": OPTIONAL_ADDRESS,
    "sglang_monitoring_port": PORT,
    "sglang_monitoring_scrape_interval": DURATION,
    "sglang_monitoring_scrape_timeout": DURATION,
    "sglang_monitoring_evaluation_interval": DURATION,
    "sglang_monitoring_external_labels": _with_type(DATA, "dict"),
    "sglang_monitoring_alertmanagers": Kind("targets", "list", "a list of host:port", _list_of(_host_port), "str"),
    "sglang_monitoring_extra_args": ENV_ARGV,
    "sglang_monitoring_server_group": GROUP,
    "sglang_monitoring_router_group": GROUP,
    "sglang_monitoring_node_exporter_groups": GROUPS,
    "sglang_monitoring_dcgm_exporter_groups": GROUPS,
    "sglang_monitoring_tls_ca_file": _with_type(READ_PATH, "str"),
    "sglang_monitoring_client_cert_file": _with_type(READ_PATH, "str"),
    "sglang_monitoring_client_key_file": _with_type(READ_PATH, "str"),
    "sglang_monitoring_extra_scrape_configs": _with_type(DATA, "list", "dict"),
    "sglang_monitoring_queue_growth_max": _with_type(NUMBER, "raw"),
    "sglang_monitoring_spec_accept_length_min": _with_type(NUMBER, "raw"),
    "sglang_monitoring_startup_regression_max": _with_type(NUMBER, "raw"),
    "sglang_monitoring_gpu_temperature_max": _with_type(NUMBER, "raw"),
    "sglang_monitoring_pcie_gen_busy_util": _with_type(NUMBER, "raw"),
    "sglang_monitoring_gateway_error_ratio_max": _with_type(NUMBER, "raw"),
    "sglang_monitoring_gateway_workers_missing_max": _with_type(NUMBER, "raw"),
    "sglang_monitoring_alert_for": _with_type(DATA, "dict"),
    "sglang_monitoring_grafana_dashboards_dir": _with_type(OPTIONAL_ROLE_PATH, "str"),
    "sglang_monitoring_grafana_dashboard_owner": OWNER,
    "sglang_monitoring_grafana_dashboard_group": OWNER,
    "sglang_monitoring_grafana_provisioning_dir": _with_type(OPTIONAL_ROLE_PATH, "str"),
    "sglang_monitoring_grafana_datasource_url": URL,
    "sglang_monitoring_grafana_service_name": Kind("unit name", "str", UNIT_REF.describe + "; empty for none",
                                                   _optional(_unit_ref)),
    "sglang_monitoring_start_timeout": SECONDS,
    # sglang_rollout (and its run switches)
    "sglang_rollout_instances": _with_type(DATA, "raw"),
    "sglang_rollout_canary": COUNT,
    "sglang_rollout_serial": _with_type(DATA, "raw"),
    "sglang_rollout_canary_soak_seconds": SECONDS,
    "sglang_rollout_canary_soak_interval": SECONDS,
    "sglang_rollout_confirm": _choices(WORD, "yes", "no", True, False),
    "sglang_rollout_force_restart": BOOL,
    "sglang_rollout_group": GROUP,
    "sglang_rollout_router_group": GROUP,
    "sglang_rollout_plan": _with_type(DATA, "dict"),
    "sglang_rollout_kernel_share": BOOL,
    "sglang_rollout_kernel_share_port": PORT,
    # sglang_router
    "sglang_router_gateway": _choices(WORD, *ROUTER_GATEWAYS),
    "sglang_router_version": WORD,
    "sglang_router_smg_version": WORD,
    "sglang_router_service_name": UNIT,
    "sglang_router_user": ACCOUNT,
    "sglang_router_group": ACCOUNT,
    "sglang_router_python": _with_type(PROGRAM, "str"),
    "sglang_router_venvs_dir": _with_type(ROLE_PATH, "str"),
    "sglang_router_config_dir": _with_type(ROLE_PATH, "str"),
    "sglang_router_system_packages": WORDS,
    "sglang_router_pip_index_url": URL_OR_FILE,
    "sglang_router_pip_no_index": BOOL,
    "sglang_router_pip_find_links": LINKS,
    "sglang_router_pip_timeout": Kind("seconds", "int", "a whole number of seconds, 1 or more", _int(1, 86400)),
    "sglang_router_host": ADDRESS,
    "sglang_router_port": PORT,
    "sglang_router_prometheus_host": ADDRESS,
    "sglang_router_prometheus_port": PORT,
    "sglang_router_handover": BOOL,
    "sglang_router_handover_port": PORT,
    "sglang_router_handover_prometheus_port": PORT,
    "sglang_router_handover_settle": SECONDS,
    "sglang_router_policy": _choices(WORD, *ROUTER_POLICIES),
    "sglang_router_max_concurrent_requests": Kind("int", "int", "a whole number, -1 for no limit", _int(-1)),
    "sglang_router_queue_size": COUNT,
    "sglang_router_rate_limit_tokens_per_second": Kind("int", "int", "a whole number, or null",
                                                       lambda v, c: None if v is None else _int(1)(v, c)),
    "sglang_router_request_check": BOOL,
    "sglang_router_api_key": BEARER,
    "sglang_router_control_plane_api_key": BEARER,
    "sglang_router_allow_unauthenticated": BOOL,
    "sglang_router_tls_cert_file": _with_type(READ_PATH, "str"),
    "sglang_router_tls_key_file": _with_type(READ_PATH, "str"),
    "sglang_router_ca_file": _with_type(READ_PATH, "str"),
    "sglang_router_client_cert_file": _with_type(READ_PATH, "str"),
    "sglang_router_client_key_file": _with_type(READ_PATH, "str"),
    "sglang_router_health_check_enabled": BOOL,
    "sglang_router_health_check_endpoint": _URL_PATH,
    "sglang_router_health_check_interval": _ROUTER_SECONDS,
    "sglang_router_health_check_timeout": _ROUTER_SECONDS,
    "sglang_router_health_failure_threshold": _ROUTER_COUNT,
    "sglang_router_health_success_threshold": _ROUTER_COUNT,
    "sglang_router_retries_enabled": BOOL,
    "sglang_router_retry_max_retries": _ROUTER_COUNT,
    "sglang_router_retry_initial_backoff_ms": COUNT,
    "sglang_router_retry_max_backoff_ms": COUNT,
    "sglang_router_circuit_breaker_enabled": BOOL,
    "sglang_router_circuit_breaker_failure_threshold": _ROUTER_COUNT,
    "sglang_router_circuit_breaker_success_threshold": _ROUTER_COUNT,
    "sglang_router_circuit_breaker_timeout": _ROUTER_SECONDS,
    "sglang_router_circuit_breaker_window": _ROUTER_SECONDS,
    "sglang_router_extra_args": ARGV,
    "sglang_router_log_level": _choices(WORD, *ROUTER_LOG_LEVELS),
    "sglang_router_worker_group": GROUP,
    "sglang_router_worker_url": Kind("url", "str", "the URL the gateways reach the host's server at", _url),
    "sglang_router_group_name": GROUP,
    "sglang_router_drain_timeout": SECONDS,
    "sglang_router_registration_timeout": SECONDS,
    "sglang_router_poll_interval": Kind("seconds", "int", "a whole number of seconds, 1 or more",
                                                   _int(1, 3600)),
    "sglang_router_proxy_env": ENV,
    "sglang_router_instance": _with_type(DATA, "dict"),
    # sglang_server (its launch inputs are PLANNED: the planner reads them in full)
    "sglang_args": _PLANNED_DICT,
    "sglang_env": _PLANNED_DICT,
    "sglang_secret_env": _PLANNED_DICT,
    "sglang_instances": _PLANNED_LIST,
    "sglang_gpus": _with_type(PLANNED, "list", "int"),
    "sglang_model_architecture": OPTIONAL_WORD,
    "sglang_model_quantization": OPTIONAL_WORD,
    "sglang_model_max_context": COUNT,
    "sglang_api_key": BEARER,
    "sglang_admin_api_key": BEARER,
    "sglang_ssl_keyfile_password": SECRET,
    "sglang_server_model_path": _with_type(SERVICE_DIR, "str"),
    "sglang_server_service_name": SERVER_UNIT,
    "sglang_server_user": ACCOUNT,
    "sglang_server_group": ACCOUNT,
    "sglang_server_venv": ROLE_PATH,
    "sglang_server_config_dir": ROLE_PATH,
    "sglang_server_state_dir": SERVICE_DIR,
    "sglang_server_cache_dir": SERVICE_DIR,
    "sglang_server_timeout_start_sec": SECONDS,
    "sglang_server_drain_timeout": SECONDS,
    "sglang_server_restart_sec": SECONDS,
    "sglang_server_start_limit_burst": COUNT,
    "sglang_server_start_limit_interval_sec": SECONDS,
    "sglang_server_ready_timeout": SECONDS,
    "sglang_server_ready_path": Kind("url path", "str", "an absolute URL path (/health)",
                                     lambda v, _: None if isinstance(v, str) and re.fullmatch(r"/[A-Za-z0-9._~/-]*", v)
                                     else "it must be an absolute URL path of letters, digits and . _ ~ / -"),
    "sglang_server_allow_skip_warmup": BOOL,
    "sglang_server_ready_poll_interval": Kind("seconds", "float", "seconds, more than 0", _number(0.01)),
    "sglang_server_ready_progress_every": Kind("seconds", "float", "seconds, 0 or more", _number(0)),
    "sglang_server_no_progress_timeout": SECONDS,
    "sglang_server_ready_budget": BOOL,
    "sglang_server_ready_budget_floor": SECONDS,
    "sglang_server_ready_budget_factor": _with_type(NUMBER, "float"),
    "sglang_server_ready_budget_slack": SECONDS,
    "sglang_server_ready_budget_first_start": SECONDS,
    "sglang_server_preread": _choices(WORD, "auto", "always", "never"),
    "sglang_server_preread_margin_gib": _with_type(NUMBER, "float"),
    "sglang_server_preread_margin_percent": _with_type(NUMBER, "float"),
    "sglang_server_preread_parallelism": Kind("count", "int", "a whole number, 1-256", _int(1, 256)),
    "sglang_server_preread_timeout": SECONDS,
    "sglang_server_precompile": _choices(WORD, "auto", "always", "never"),
    "sglang_server_precompile_timeout": Kind("seconds", "int", "a whole number of seconds, 1 or more", _int(1, 86400)),
    "sglang_server_request_check": BOOL,
    "sglang_server_request_prompt": TEXT,
    "sglang_server_request_max_tokens": COUNT,
    "sglang_server_request_timeout": SECONDS,
    "sglang_server_min_spec_accept_length": _with_type(NUMBER, "float"),
    "sglang_server_quality_gate": BOOL,
    "sglang_server_quality_prompts": Kind("texts", "list", "a list of free texts, each without control characters or "
                                          "line breaks", _list_of(_text), "str"),
    "sglang_server_quality_max_tokens": Kind("count", "int", "a whole number, 1-256", _int(1, 256)),
    "sglang_server_quality_weights_checksum": BOOL,
    "sglang_server_spec_override": Kind("spec", "str", "keep, auto, off or explicit; empty or null for each instance's own",
                                        _optional(_choice("keep", "auto", "off", "explicit"))),
    "sglang_server_spec_restore": BOOL,
    "sglang_server_preflight": BOOL,
    "sglang_server_preflight_timeout": SECONDS,
    "sglang_server_preflight_toolchain": BOOL,
    "sglang_server_gpu_allow_list": WORDS,
    "sglang_server_kill_foreign_gpu_holders": BOOL,
    "sglang_server_term_timeout": Kind("seconds", "float", "seconds, 0 or more", _number(0)),
    "sglang_server_release_timeout": Kind("seconds", "float", "seconds, 0 or more", _number(0)),
    "sglang_server_libexec_dir": ROLE_PATH,
    "sglang_listen_host": ADDRESS,
    "sglang_allow_unauthenticated": BOOL,
    "sglang_tls_ca_file": _with_type(READ_PATH, "str"),
    "sglang_worker_tls_client_ca_file": _with_type(READ_PATH, "str"),
    "sglang_worker_tls_cert_file": _with_type(READ_PATH, "str"),
    "sglang_worker_tls_key_file": _with_type(READ_PATH, "str"),
    "sglang_worker_tls_backend_port_offset": PORT,
    "sglang_worker_tls_package": WORD,
    "sglang_worker_tls_timeout": SECONDS,
    "sglang_metrics": BOOL,
    "sglang_spec": Kind("spec", "str", "keep, auto, off or explicit", _choice("keep", "auto", "off", "explicit")),
    "sglang_multinode_group": GROUP,
    "sglang_multinode_port": PORT,
    "sglang_multinode_addr": ADDRESS,
    "render_dir": _with_type(TEXT, "path"),
}

# Variables handed to a service user's ownership, by the service account they are handed to.
SERVICE_ROOTS_VAR = "sglang_service_roots"
# Where service directories may live when sglang_service_roots is not set: the roles' defaults of these service
# directories (the roots themselves, in this order; one role default, one root).
SERVICE_ROOT_VARS = ("sglang_common_home", "sglang_server_state_dir", "sglang_server_cache_dir", "sglang_uv_cache_dir")
# Directories the project keeps for root (a service directory neither contains nor lies inside one): a host's own
# value, else its role's default; the check needs them also where the inventory does not set them.
PROJECT_DIR_VARS = ("sglang_venvs_dir", "sglang_current_link", "sglang_tools_venv", "sglang_server_venv",
                    "sglang_server_config_dir", "sglang_server_libexec_dir", "sglang_router_venvs_dir",
                    "sglang_router_config_dir")
MODELS_DIR_VAR = "sglang_models_dir"
# The role defaults a context is made of (context_of): the callers read them from the roles' defaults files, the one
# source of every default; none is kept here.
CONTEXT_DEFAULTS = (*SERVICE_ROOT_VARS, MODELS_DIR_VAR, *PROJECT_DIR_VARS)


def role_defaults(defaults: Mapping[str, Any] | None, names: Iterable[str], needed_by: str) -> dict[str, Any]:
    """``names`` from ``defaults``, the roles' defaults as the caller read them from the roles' ``defaults/main.yml``
    (the validate and check_inputs actions, the filters). Every one is required: a caller that passes none, or not
    all of them, is told which, never given a value kept in Python."""
    wanted = list(names)
    missing = wanted if defaults is None else [n for n in wanted if n not in defaults]
    if defaults is None or missing:
        raise TypeError(f"{needed_by} needs the roles' defaults of {', '.join(missing)} (from the roles' "
                        "defaults/main.yml, read by the caller)")
    return {n: defaults[n] for n in wanted}


def context_of(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> Context:
    """The roots and project directories the path kinds of one host are checked against, from its variables and the
    roles' defaults (``defaults``: every name of :data:`CONTEXT_DEFAULTS`, from the roles' defaults files)."""
    known = role_defaults(defaults, CONTEXT_DEFAULTS, "context_of")
    roots_value = values.get(SERVICE_ROOTS_VAR)
    roots: list[Any] = []
    if isinstance(roots_value, (list, tuple)):
        roots = list(roots_value)
    else:
        for var in SERVICE_ROOT_VARS:  # two roles may share a default (sglang_common_home, the state directory)
            if known[var] not in roots:
                roots.append(known[var])
    models = values.get(MODELS_DIR_VAR) or known[MODELS_DIR_VAR]
    roots.append(models)
    project = []
    for var in PROJECT_DIR_VARS:
        value = values.get(var) or known[var]
        if isinstance(value, str) and not inputs.path_problem(value):
            project.append(value)
    return Context(tuple(r for r in roots if isinstance(r, str) and not inputs.path_problem(r)), tuple(project))


@dataclass(frozen=True)
class Finding:
    """One variable that breaks the contract: its name, what it holds (None for a secret) and why."""

    variable: str
    value: Any
    why: str
    kind: Kind

    def message(self) -> str:
        shown = "(secret)" if self.value is None and self.kind in (SECRET, BEARER) else _shown(self.value)
        return f"{self.variable} {shown}: {self.why}."

    def fix(self) -> str:
        return f"set {self.variable} to {self.kind.describe}"


def check(values: Mapping[str, Any], names: Iterable[str] | None = None, *, context: Context) -> list[Finding]:
    """The contract's findings for ``values`` (variable -> value), in declaration order.

    ``names``: the variables to check (default: every declared one present in ``values``); unset ones (absent, or
    None for a kind whose value may not be None) are the roles' defaults and are not checked. ``context``: the roots
    and project directories the path kinds are checked against (:func:`context_of`, with the roles' defaults).
    """
    ctx = context
    wanted = set(names) if names is not None else None
    out: list[Finding] = []
    for var, kind in CONTRACT.items():
        if (wanted is not None and var not in wanted) or var not in values:
            continue
        value = values[var]
        if value is None:
            continue
        why = size_problem(value) or kind.problem(value, ctx)
        if why:
            secret = kind.name == "secret"
            out.append(Finding(var, None if secret else value, why, kind))
    return out


def internal_problems(names: Iterable[str]) -> list[str]:
    """The role internals (``__``-prefixed) among ``names``: set from outside, they would forge a role's state."""
    return sorted(n for n in names if isinstance(n, str) and n.startswith("__"))


def kinds_table() -> list[tuple[str, str, int]]:
    """(kind, what it holds, how many variables) for the README's input-contract table."""
    rows: dict[tuple[str, str], int] = {}
    for kind in CONTRACT.values():
        key = (kind.name, kind.describe)
        rows[key] = rows.get(key, 0) + 1
    return sorted(((k, d, n) for (k, d), n in rows.items()), key=lambda r: (r[0], r[1]))
