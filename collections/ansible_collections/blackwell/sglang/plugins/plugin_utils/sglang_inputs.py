# SPDX-License-Identifier: Apache-2.0
"""The input contract: what host and role variables may hold before they reach a file, a path or argv.

Every host or role variable is untrusted text.  A value either round-trips exactly into the unit,
the environment file, the ``--config`` YAML, a path or the server's argv, or it is refused here with
the variable named.  The renderers (the ``systemd_*`` filters and the templates) quote for their
format; this module decides what can be quoted faithfully at all:

- **Text** (argv words, environment values, secrets, the model path in ``Description=``): any
  Unicode text except characters no line-based format can carry: control characters (category Cc:
  C0 incl. tab, newline, carriage return and NUL, DEL, C1), surrogates, line and paragraph
  separators (U+2028/U+2029, YAML line breaks) and non-characters (U+FFFE, U+FDD0...).
- **Argv values** additionally are not empty and do not start with ``-`` (argparse would read
  ``--host`` as an option, not as the value of the flag before it), except negative numbers.
- **Role paths** (directories and files the roles create or the unit names in ``ReadWritePaths=``,
  ``WorkingDirectory=``, ``EnvironmentFile=``, ``ExecStart=``): absolute, normalised (no ``.``,
  ``..`` or empty segment), only letters, digits and ``. _ - + @ /``; directories that the service
  user owns are not ``/`` nor a top-level or system directory.
- **Names** (service name, user, group): systemd unit-name and Debian user-name character sets;
  the service never runs as root.
- **Model path**: a Hugging Face repository id (``org/name``) or an absolute local directory that
  the service's sandbox can see (``ProtectHome=yes`` hides ``/home``, ``/root`` and ``/run/user``).

Pure Python, no Ansible import: the validator (controller) and the filters use it alike.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

# argparse's own test for "this looks like a negative number, not an option" (argparse.py).
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# Environment variable names systemd and the shell accept.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Environment names that hold secrets: kept out of plans, Ansible output and the journal.
# A safety net under sglang_secret_env (the explicit way): the last word of the name says secret (DB_PASS, API_KEYS,
# REDIS_PWD, *_AUTH, *_COOKIE, *_SIGNATURE ...), or a word that only secrets carry is anywhere in it (AWS_SECRET_ID,
# PASSWORD_FILE, *_PRIVATE_KEY_PEM). Not TOKEN anywhere: TOKENIZERS_PARALLELISM is no secret.
SECRET_ENV_NAME = re.compile(
    r"(^|_)(TOKENS?|KEYS?|API_?KEYS?|PASS|PASSWORDS?|PASSWDS?|PWDS?|PASSPHRASES?|SECRETS?|CREDENTIALS?|CREDS?|AUTH"
    r"|AUTHORIZATION|COOKIES?|SIGNATURES?|SIGNING_KEY|DSN|SAS|PSK|HMAC)$"
    r"|PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIAL|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|AUTH_?TOKEN|BEARER|COOKIE",
    re.IGNORECASE)
# Argument dests (from SGLang's schema) that hold secrets: their last word, or a help text that says so.
_SECRET_DEST_WORDS = {"key", "password", "passwd", "token", "secret"}
_SECRET_HELP = re.compile(r"\b(password|passphrase|api key|secret)\b", re.IGNORECASE)
# Path characters of role paths: enough for every distribution's layout, nothing a unit file or a
# shell would interpret (no whitespace, quotes, backslash, %, $, *, ?).
_PATH_CHARS = re.compile(r"[A-Za-z0-9._+@/-]+")
# systemd unit names: letters, digits and ":-_.\" (systemd.unit(5)); no template "@", no "\".
SERVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,200}")
# Debian's default NAME_REGEX (adduser.conf), without the trailing "$" of machine accounts.
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# Hugging Face repository ids: [org/]name, letters, digits, "-", "_", "."; "--" and ".." are refused,
# names do not start or end with "-" or "." (huggingface_hub validate_repo_id), at most 96 characters.
_HF_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
HF_REPO_ID = re.compile(rf"(?:{_HF_PART}/)?{_HF_PART}")
# Directories a service-owned directory must not be (it would be chowned to the service user).
SYSTEM_DIRS = frozenset({
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt", "/opt",
    "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
    "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/local/bin", "/usr/local/lib",
    "/usr/local/libexec", "/usr/local/sbin", "/usr/sbin", "/usr/share", "/var/cache", "/var/lib", "/var/log",
    "/var/tmp", "/var/spool", "/var/mail", "/var/opt", "/etc/systemd", "/etc/systemd/system",
})
# Paths ProtectHome=yes hides from the service (systemd.exec(5)).
HIDDEN_BY_PROTECT_HOME = ("/home", "/root", "/run/user")
# Integers SGLang's argparse int() would take but no C, CUDA or torch size can hold.
INT_LIMIT = 2**63
PORT_RANGE = (1, 65535)


def bad_characters(text: str) -> list[str]:
    """The characters of ``text`` that no line-based file format here can carry, as readable names."""
    found: list[str] = []
    for char in text:
        code = ord(char)
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Zl", "Zp") or 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE:
            name = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL byte"}.get(
                char, f"U+{code:04X} ({unicodedata.name(char, 'control character').lower()})")
            if name not in found:
                found.append(name)
    return found


def text_problem(value: Any) -> str | None:
    """Why ``value`` cannot be written faithfully as text, or None."""
    if not isinstance(value, str):
        return None
    bad = bad_characters(value)
    if bad:
        return "it contains " + ", ".join(bad[:3]) + (" and more" if len(bad) > 3 else "") + \
            ", which a unit, environment or YAML line cannot carry"
    return None


def header_token_problem(value: str) -> str | None:
    """Why ``value`` cannot travel as a bearer token (``Authorization: Bearer <value>``), or None.

    Clients, the roles' health checks and the routers send API keys in an HTTP header; a header value
    carries printable ASCII only, and a space would end the token (RFC 9110 section 11.4).
    """
    bad = sorted({c for c in value if not ("!" <= c <= "~")})
    if bad:
        return ("an API key travels in an HTTP Authorization header, which carries printable ASCII without "
                "spaces (found " + ", ".join(repr(c) for c in bad[:3]) + ")")
    return None


def argv_value_problem(word: str) -> str | None:
    """Why ``word`` cannot be the value of an option on SGLang's command line, or None."""
    if word == "":
        return "it is empty (use null to leave the flag out)"
    if word.startswith("-") and not NEGATIVE_NUMBER.match(word):
        return f"it starts with '-': argparse would read {word!r} as an option, not as this flag's value"
    return text_problem(word)


def render_number(value: int | float) -> str:
    """An int or float as argv text that argparse's int()/float() reads back exactly.

    Floats are written positionally (``-0.00001``, not ``-1e-05``, which argparse would take for an
    option); the digits are Python's shortest round-trip representation.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    text = format(Decimal(repr(value)), "f")
    return text if "." in text or "e" in text.lower() else text + ".0"


def number_problem(value: Any) -> str | None:
    """Why a number cannot be passed on, or None (non-finite floats, integers beyond 64 bits)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "it is not a finite number"
    if isinstance(value, int) and abs(value) >= INT_LIMIT:
        return f"{value} does not fit in 64 bits"
    return None


def port_problem(value: Any) -> str | None:
    """Why ``value`` is not a TCP port, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not PORT_RANGE[0] <= value <= PORT_RANGE[1]:
        return f"{value!r} is not a TCP port ({PORT_RANGE[0]}-{PORT_RANGE[1]})"
    return None


def path_problem(value: Any, *, service_owned: bool = False) -> str | None:
    """Why ``value`` is not a plain, absolute, normalised role path, or None."""
    if not isinstance(value, str) or not value:
        return "it must be an absolute path (a non-empty string)"
    if not value.startswith("/"):
        return "it must be an absolute path"
    if not _PATH_CHARS.fullmatch(value):
        bad = sorted({c for c in value if not _PATH_CHARS.fullmatch(c)})
        return "role paths hold only letters, digits and . _ - + @ / (found " + ", ".join(repr(c) for c in bad[:5]) + ")"
    parts = value.split("/")[1:]
    if value != "/" and (any(p in ("", ".", "..") for p in parts)):
        return "it must be normalised: no '.', '..', '//' or trailing '/'"
    if service_owned and (value == "/" or value in SYSTEM_DIRS):
        return (f"{value} is a system directory; the role would hand it to the service user (use a directory under the "
                "models directory or a root of sglang_service_roots, e.g. /var/lib/sglang)")
    return None


# Services an SGLang unit must never take the name of: the NVIDIA and DCGM services the server orders itself after
# and the restart chain never stops (the unit's After=nvidia-persistenced.service would name itself), and the units
# of the project's other roles (their defaults). The server's unit would replace theirs.
RESERVED_SERVICE_NAMES = ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "nv-hostengine",
                          "nvidia-dcgm-exporter", "dcgm-exporter", "prometheus-node-exporter", "prometheus",
                          "sglang-router", "sglang-model-peer")


def service_name_problem(value: Any) -> str | None:
    """Why ``value`` is not a plain systemd service name (no suffix, no template) the server may own, or None."""
    if not isinstance(value, str) or not SERVICE_NAME.fullmatch(value) or value.endswith(".service") or ".." in value:
        return "service names are letters, digits and _ . : - (no '/', '@', '..' or .service suffix)"
    if value in RESERVED_SERVICE_NAMES:
        return f"{value}.service is not the SGLang server's to take: the server's unit would replace it (use e.g. sglang)"
    return None


def user_problem(value: Any) -> str | None:
    """Why ``value`` is not a system user or group name the service may run as, or None."""
    if not isinstance(value, str) or not USER_NAME.fullmatch(value):
        return "user and group names are lower-case letters, digits, '_' and '-', starting with a letter or '_'"
    if value == "root":
        return "the service never runs as root (nor with root's group)"
    return None


def model_path_problem(value: Any) -> str | None:
    """Why ``value`` is neither a Hugging Face repository id nor a usable absolute local directory."""
    if not isinstance(value, str) or not value:
        return "it must be a Hugging Face id (org/name) or an absolute local directory"
    if value.startswith("/"):
        problem = text_problem(value)
        if problem:
            return problem
        parts = value.split("/")[1:]
        if value != "/" and any(p in ("", ".", "..") for p in parts):
            return "a local model directory must be normalised: no '.', '..', '//' or trailing '/'"
        if value == "/" or value in SYSTEM_DIRS:
            return f"{value} is a system directory, not a model directory"
        hidden = next((h for h in HIDDEN_BY_PROTECT_HOME if value == h or value.startswith(h + "/")), None)
        if hidden:
            return (f"{hidden} is hidden from the service by its sandbox (ProtectHome=yes): the server would not "
                    "find the model although a check outside the sandbox does")
        return None
    if ".." in value or "--" in value or not HF_REPO_ID.fullmatch(value):
        return ("it is neither an absolute local directory nor a Hugging Face id (org/name: letters, digits, "
                "'-', '_', '.'; no '..' or '--'; at most 96 characters per part)")
    return None


def secret_dests(arguments: Iterable[tuple[str, str | None, str]]) -> frozenset[str]:
    """The secret arguments of a release, from ``(dest, type, help)``: string arguments whose name ends in a
    secret word (key, password, token, secret) or whose help says password, passphrase, API key or secret.

    ``ssl_keyfile`` (a path), ``max_total_tokens`` and ``bucket_time_to_first_token`` (numbers) are not
    secrets: the last word and the type decide.
    """
    out = set()
    for dest, kind, help_text in arguments:
        if kind not in (None, "str"):
            continue
        if dest.rsplit("_", 1)[-1] in _SECRET_DEST_WORDS or (_SECRET_HELP.search(help_text or "") and "file" not in dest):
            out.add(dest)
    return frozenset(out)


def secret_var(dest: str) -> str:
    """The host variable that carries secret argument ``dest`` (``api_key`` -> ``sglang_api_key``)."""
    return f"sglang_{dest}"


def is_secret_env(name: str) -> bool:
    """True when an environment variable's name says it holds a secret (``*_TOKEN``, ``*_KEY``, ``*_PASS``,
    ``*_PWD``, ``*_AUTH``, ``*_CREDENTIALS``, anything with PASSWORD, SECRET or PRIVATE_KEY in it ...)."""
    return bool(SECRET_ENV_NAME.search(name))


def env_value(value: Any) -> str:
    """An environment value as the text systemd passes on; ValueError for what is not a plain value.

    Strings stay as they are and numbers render as numbers.  YAML booleans, null, lists and mappings
    are refused: ``NCCL_P2P_DISABLE: true`` would become ``True``, which NCCL reads as 0.
    """
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict, tuple, set)):
        kind = "a boolean" if isinstance(value, bool) else "null" if value is None else "a list or mapping"
        raise ValueError(f"{kind} is not an environment value; quote it, e.g. '1'")
    if isinstance(value, (int, float)):
        problem = number_problem(value)
        if problem:
            raise ValueError(problem)
        return render_number(value)
    if not isinstance(value, str):
        raise ValueError(f"a {type(value).__name__} is not an environment value; quote it")
    problem = text_problem(value)
    if problem:
        raise ValueError(problem)
    return value
