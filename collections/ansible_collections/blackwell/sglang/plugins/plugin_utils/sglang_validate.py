# SPDX-License-Identifier: Apache-2.0
"""Validate one host's SGLang launch configuration and build its launch plan.

Entry point: :func:`validate_host`.  It takes a host's variables exactly as the
inventory defines them (``sglang_args``, ``sglang_model_path``, ``nvidia_gpu_count``
...), checks them against the committed schema of the pinned SGLang release and
against the rules in :mod:`sglang_rules`, and returns every problem at once
together with the effective arguments and the rendered argv.  Pure Python, no
Ansible import, no I/O besides reading the schema file once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as contract
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_inputs as inputs
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_models import ModelFacts, lookup_model
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules import RENAMED, RULES, run_rules
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import env_true
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import (
    MAX_GPUS_PER_HOST,
    env_renames,
    gpu_ids,
    legacy_alias,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_schema import (
    ArgSpec,
    Schema,
    available_versions,
    load_schema,
    normalize_key,
)
from packaging.version import InvalidVersion, Version

SPEC_MODES = ("keep", "auto", "off", "explicit")
SPEC_TRIPLE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")

# Arguments that are secrets (Schema.secrets, derived from SGLang's own argument names and help:
# api_key, admin_api_key, ssl_keyfile_password in 0.5.23) come from the host variable sglang_<dest>,
# never from sglang_args; they go only to the root-owned --config file, never on the command line.
SECRET_MARKER = "<secret>"
# Environment variables the role sets itself in the environment file.
MANAGED_ENV = {
    "HOME": "sglang_server_state_dir",
    "HF_HOME": "sglang_server_cache_dir",
    "XDG_CACHE_HOME": "sglang_server_cache_dir",
    # The instance's kernel caches (sglang_kernel_cache.CACHE_ENV: one directory per release, stack, GPU architecture
    # and instance, under sglang_server_cache_dir/kernels).
    **{name: "sglang_server_cache_dir (the instance's kernel caches)" for name in (
        "SGLANG_CACHE_DIR", "SGLANG_JIT_CACHE_DIR", "SGLANG_DG_CACHE_DIR", "DG_JIT_CACHE_DIR", "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "TILELANG_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE")},
    "SGLANG_REDACT_ENV": "the role (it lists the secret variables the launcher redacts)",
    # The unit allows exactly the plan's GPU device nodes (DevicePolicy=closed): a hand-set list would
    # point CUDA at GPUs the sandbox hides, and the server would fail at start.
    "CUDA_VISIBLE_DEVICES": "sglang_gpus, or gpus of an entry of sglang_instances",
    "CUDA_DEVICE_ORDER": "the role (PCI bus order, as nvidia-smi numbers the GPUs, when the instance lists its gpus)",
}
# The Hugging Face token comes from hf_token (which the weights download uses too).
HF_TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Role variables that reach a file, a path or the unit; what they must be is their kind in sglang_contract.CONTRACT.
ROLE_NAMES = ("sglang_server_service_name", "sglang_server_user", "sglang_server_group", "sglang_user", "sglang_group")
ROLE_DIRS = (
    "sglang_server_venv",
    "sglang_server_config_dir",
    "sglang_server_state_dir",
    "sglang_server_cache_dir",
    "sglang_server_libexec_dir",
    "sglang_models_dir",
    "sglang_model_dir",
    "sglang_venvs_dir",
    "sglang_current_link",
    "sglang_tools_venv",
    "sglang_uv_cache_dir",
    "sglang_user_home",
)
# Secrets that clients send in an HTTP header (Authorization: Bearer <key>), not only write to a file.
HEADER_SECRETS = frozenset(("api_key", "admin_api_key"))
ROLE_VARS = (*ROLE_NAMES, *ROLE_DIRS, "sglang_server_model_path", contract.SERVICE_ROOTS_VAR)
# Arguments the roles manage themselves.
MANAGED_ARGS = {
    "model_path": "sglang_model_path",
    "host": "sglang_listen_host",
    "config": "the role (it holds the secret arguments)",
}

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


@dataclass(frozen=True)
class Problem:
    """One finding: what is wrong, where, why, and how to fix it."""

    rule: str
    variable: str
    value: Any
    message: str
    fix: str
    source: str | None = None
    level: str = "error"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form for Ansible results."""
        return {
            "rule": self.rule,
            "variable": self.variable,
            "value": self.value,
            "message": self.message,
            "fix": self.fix,
            "source": self.source,
            "level": self.level,
        }


@dataclass
class Result:
    """The outcome of validating one host."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)
    gpu_ids: list[int] = field(default_factory=list)
    endpoint: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)
    model: ModelFacts | None = None
    version: str = ""
    secrets: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form with no secret in it: secret arguments and secret environment values are a marker."""
        return {
            "ok": self.ok,
            "version": self.version,
            "errors": [p.as_dict() for p in self.errors],
            "warnings": [p.as_dict() for p in self.warnings],
            "args": {k: (SECRET_MARKER if k in self.secrets else v) for k, v in self.args.items()},
            "argv": list(self.argv),
            "config_keys": sorted(self.config),
            "env": dict(self.env),
            "secret_env_keys": sorted(self.secret_env),
            "gpu_ids": list(self.gpu_ids),
            "endpoint": dict(self.endpoint),
            "spec": dict(self.spec),
            "model": None if self.model is None else self.model.__dict__.copy(),
        }


@dataclass
class Context:
    """What a rule sees: typed effective args plus host and model facts."""

    schema: Schema
    version: Version
    args: dict[str, Any]
    keys: dict[str, str]  # dest -> the key as the user wrote it
    env: dict[str, str]
    gpu_count: int | None
    compute_capability: tuple[int, int] | None
    model: ModelFacts
    spec: str
    allow_unauthenticated: bool = False
    # sglang_server_allow_skip_warmup: --skip-server-warmup is allowed (sglang_rules/warmup.py).
    allow_skip_warmup: bool = False
    # sglang_tls_ca_file: the CA bundle (on the hosts) that verifies the servers' certificates; "" = system store.
    tls_ca_file: str = ""
    # The verifying TLS front of the host (roles/sglang_worker_tls), when sglang_worker_tls_client_ca_file is set:
    # {listen_host, port, backend_port, client_ca_file, cert_file, key_file}; None without one.
    front: dict[str, Any] | None = None
    problems: list[Problem] = field(default_factory=list)
    # nvidia-smi indexes (as the instance's CUDA numbers them) of the GPUs the ranks on this node use; set by
    # the host plan (sglang_hostplan); None: sglang_rules.gpu_ids(ctx) (base_gpu_id onwards).
    host_gpus: list[int] | None = None
    # The host's gathered GPU facts (hostvars nvidia_gpu_facts, schema 1, driver answered), else None.
    facts: Mapping[str, Any] | None = None
    # Memory of each GPU in MiB: nvidia_gpu_memory_mib, else the facts' smallest over the instance's GPUs.
    gpu_memory_mib: int | None = None
    gpu_memory_source: str = ""
    # The NVIDIA driver the host runs: nvidia_driver_version (the host's, else roles/nvidia_driver's default), as
    # text; None when the caller passes neither (the stack rules then check nothing).
    driver_version: str | None = None

    @property
    def secrets(self) -> frozenset[str]:
        """Dests of the secret arguments of this release."""
        return self.schema.secrets

    def get(self, dest: str, default: Any = None) -> Any:
        """The effective value: explicit, else SGLang's literal default, else ``default``."""
        value = self.args.get(dest)
        if value is None:
            value = self.schema.default(dest)
        return default if value is None else value

    def is_set(self, dest: str) -> bool:
        """True when the host sets the argument (a switch set to false counts as unset)."""
        return self.args.get(dest) not in (None, False)

    def var(self, dest: str) -> str:
        """The host variable path that sets ``dest``, for messages."""
        return f"sglang_args.{self.keys.get(dest, dest)}"

    @property
    def sm12x(self) -> bool:
        """True on workstation Blackwell (compute capability 12.x, SM120/SM121)."""
        return self.compute_capability is not None and self.compute_capability[0] == 12

    def error(
        self, rule: str, dest_or_var: str, message: str, fix: str, source: str | None = None, value: Any = None
    ) -> None:
        """Record an error about an argument (dest) or a host variable (name with a dot or prefix)."""
        self._add(rule, dest_or_var, message, fix, source, "error", value)

    def warn(
        self, rule: str, dest_or_var: str, message: str, fix: str, source: str | None = None, value: Any = None
    ) -> None:
        """Record a warning."""
        self._add(rule, dest_or_var, message, fix, source, "warning", value)

    def _add(self, rule: str, target: str, message: str, fix: str, source: str | None, level: str, value: Any) -> None:
        """The problem names the variable; its value is the given one, else the typed one, never a secret."""
        if target in self.schema.arguments or target in self.args:
            variable = self.var(target)
            if value is None:
                value = self.args.get(target)
            if target in self.secrets:
                value = SECRET_MARKER if value is not None else None
        else:
            variable = target
        self.problems.append(Problem(rule, variable, value, message, fix, source, level))


def parse_version(version: str) -> Version:
    """'0.5.23' -> Version('0.5.23'): PEP 440, as SGLang's releases are numbered (0.5.23.post1, 0.5.24rc1).

    InvalidVersion for what is not a version.
    """
    return Version(str(version))


CC_VAR = "nvidia_gpu_compute_capability"
# MAJOR.MINOR as nvidia-smi --query-gpu=compute_cap prints it: no sign, no leading zero, one-digit minor
# (SGLang computes major * 10 + minor and asserts 0 <= minor < 10, sglang/srt/model_loader/loader.py:256-258).
_CC = re.compile(r"([1-9][0-9]?)\.([0-9])")


def parse_compute_capability(value: Any) -> tuple[int, int]:
    """'12.0' -> (12, 0); ValueError saying why for anything else.

    Strict: only a string like "12.0", "12.1", "10.3", "8.6".  A YAML number is refused even when it
    would round-trip, because YAML has already lost the text: 12.10 reads as 12.1, and 12.0 as 12.0 only by luck.
    """
    if isinstance(value, bool) or not isinstance(value, str):
        kind = "a YAML number" if isinstance(value, (int, float)) and not isinstance(value, bool) else f"a {type(value).__name__}"
        raise ValueError(f"{kind}, not a quoted string (YAML reads 12.10 as 12.1, so a number is ambiguous)")
    match = _CC.fullmatch(value)
    if not match:
        raise ValueError("not MAJOR.MINOR with a one-digit minor, as nvidia-smi --query-gpu=compute_cap prints it")
    return int(match.group(1)), int(match.group(2))


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
# argparse type functions of SGLang that take JSON text (sglang/srt/arg_groups/argparse_actions.py & co).
_JSON_TYPES = {"json.loads", "json_list_type", "parse_cuda_graph_config_arg"}


def _scalar_type(spec: ArgSpec) -> str:
    """What a value of ``spec`` must be: int, float, json, or str (other custom parsers take strings)."""
    if spec.type in ("int", "float", "human_readable_int"):
        return "int" if spec.type == "human_readable_int" else spec.type
    if spec.type in _JSON_TYPES:
        return "json"
    if spec.choices and all(isinstance(c, int) and not isinstance(c, bool) for c in spec.choices):
        return "int"
    return "str"


def _human_readable_int(text: str) -> int:
    """SGLang's human_readable_int: 262144, '256Ki', '25.6k' -> int."""
    match = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?", text)
    if not match:
        raise ValueError("not an integer (suffixes k, M, G, T, Ki, Mi, Gi, Ti allowed)")
    number, suffix = match.groups()
    if suffix in _IEC:
        if "." in number:
            raise ValueError("IEC suffixes take whole numbers only")
        return int(number) * _IEC[suffix]
    if suffix in _SI:
        return int(float(number) * _SI[suffix])
    if "." in number:
        raise ValueError("not an integer")
    return int(number)


def _coerce_scalar(spec: ArgSpec, value: Any) -> Any:
    """Convert one YAML/Jinja value to what argparse would produce; ValueError when it cannot."""
    kind = _scalar_type(spec)
    if kind == "json":
        if isinstance(value, (dict, list)):
            return _json_text(value)
        try:
            json.loads(str(value), parse_constant=_no_json_constant)
        except ValueError:
            raise ValueError("not valid JSON (give a YAML mapping/list or a JSON string; NaN and Infinity are not JSON)") from None
        return str(value)
    if isinstance(value, dict) and kind == "str":
        return _json_text(value)  # as SGLang's --config merger does
    if isinstance(value, (dict, list)):
        raise ValueError("a mapping or list")
    if isinstance(value, bool) and kind in ("int", "float"):
        raise ValueError("a boolean")
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            value = _human_readable_int(str(value).strip()) if spec.type == "human_readable_int" else _plain_int(value)
        problem = inputs.number_problem(value)
        if problem:
            raise ValueError(problem)
        return value
    if kind == "float":
        try:
            number = float(value) if isinstance(value, (int, float)) else float(str(value).strip())
        except ValueError:
            raise ValueError("not a number") from None
        problem = inputs.number_problem(number)
        if problem:
            raise ValueError(problem)
        return number
    if isinstance(value, bool):
        return str(value).lower()
    if spec.type == "parse_cuda_graph_backend_arg" and str(value) == "tc_piecewise":
        raise ValueError("'tc_piecewise' was retired")
    return str(value)


def _no_json_constant(name: str) -> Any:
    """json.loads hook: NaN, Infinity and -Infinity are Python's extension, not JSON."""
    raise ValueError(name)


def _json_text(value: Any) -> str:
    """A YAML mapping or list as compact JSON; ValueError for NaN or infinite numbers (not JSON, and NaN != NaN)."""
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except ValueError:
        raise ValueError("it holds NaN or an infinite number, which JSON cannot carry") from None
    except TypeError as exc:  # keys that cannot be sorted or values JSON does not know
        raise ValueError(f"not JSON-able ({exc})") from None


def _plain_int(value: Any) -> int:
    text = str(value).strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    raise ValueError("not an integer")


_KIND_WORDS = {"int": "an integer", "float": "a number", "json": "JSON (a mapping, list or JSON text)", "str": "a string"}


# Choices SGLang adds to a flag's argparse choices when an environment switch is on: add_cli_args puts
# token_oracle among --sampling-backend's choices under SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE (server_args.py:357;
# 0.5.22 :356, 0.5.21 :289, 0.5.20 :352), which the schema's choices (dumped without it) cannot know.
_ENV_CHOICES = {("sampling_backend", "token_oracle"): "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE"}


def _env_choice(ctx: Context, dest: str, value: Any) -> bool:
    """True where ``value`` is a choice of ``dest`` only because the host's environment turns its switch on."""
    switch = _ENV_CHOICES.get((dest, value))
    return switch is not None and env_true(ctx.env, switch)


def _coerce(ctx: Context, spec: ArgSpec, value: Any) -> tuple[bool, Any]:
    """Type-check one argument; records problems and returns (ok, typed value)."""
    dest = spec.dest
    if spec.is_switch:
        if isinstance(value, bool):
            return True, value
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return True, text in _TRUE
        ctx.error(
            "schema.type",
            dest,
            f"{spec.flag} is a switch (it takes no value), got {value!r}.",
            f"set {ctx.var(dest)}: true to pass {spec.flag}, or false/null to leave it out",
            spec.source,
            value,
        )
        return False, None
    if spec.nargs == "?" and value is True:
        return True, True  # flag alone: argparse stores const
    if value is False:
        falsy = [c for c in spec.choices or () if str(c).lower() in ("off", "false", "no")]
        if falsy:
            ctx.warn(
                "schema.false", dest,
                f"false leaves {spec.flag} out; its choices include {falsy}.",
                f"quote the value (e.g. {ctx.var(dest)}: \"off\") if you meant that choice", spec.source, value,
            )
        return True, False
    if isinstance(value, bool) and value is True and not spec.is_switch:
        ctx.error(
            "schema.type",
            dest,
            f"{spec.flag} takes a value ({_scalar_type(spec)}"
            + (f", one of {list(spec.choices)}" if spec.choices else "")
            + "), true is not one.",
            f"set {ctx.var(dest)} to a value, or null to leave the flag out",
            spec.source,
            value,
        )
        return False, None
    items = value if isinstance(value, list) else None
    if spec.takes_list:
        items = value if isinstance(value, list) else [value]
        if spec.nargs == "+" and not items:
            ctx.error(
                "schema.type", dest, f"{spec.flag} needs at least one value.",
                f"give {ctx.var(dest)} a non-empty list, or null", spec.source, value,
            )
            return False, None
        if isinstance(spec.nargs, int) and len(items) != spec.nargs:
            ctx.error(
                "schema.type", dest, f"{spec.flag} takes exactly {spec.nargs} values, got {len(items)}.",
                f"give {ctx.var(dest)} a list of {spec.nargs} values", spec.source, value,
            )
            return False, None
    elif items is not None and _scalar_type(spec) != "json":
        ctx.error(
            "schema.type",
            dest,
            f"{spec.flag} takes one {_scalar_type(spec)} value, got a list.",
            f"set {ctx.var(dest)} to a single value",
            spec.source,
            value,
        )
        return False, None
    values = items if spec.takes_list else [value]
    typed = []
    for item in values:
        try:
            item_typed = _coerce_scalar(spec, item)
        except ValueError as exc:
            ctx.error(
                "schema.type",
                dest,
                f"{spec.flag} takes {_KIND_WORDS[_scalar_type(spec)]}, got {item!r} ({exc}).",
                f"set {ctx.var(dest)} to {_KIND_WORDS[_scalar_type(spec)]}",
                spec.source,
                value,
            )
            return False, None
        if spec.choices is not None and item_typed not in spec.choices and not _env_choice(ctx, dest, item_typed):
            near = [str(c) for c in spec.choices if str(item_typed).lower() in str(c).lower()]
            ctx.error(
                "schema.choices",
                dest,
                f"{item_typed!r} is not a choice of {spec.flag}; SGLang {ctx.schema.version} accepts: "
                + ", ".join(str(c) for c in spec.choices)
                + ".",
                f"set {ctx.var(dest)} to one of those" + (f" (did you mean {', '.join(near[:3])}?)" if near else ""),
                spec.source,
                value,
            )
            return False, None
        problem = _word_problem(spec, item_typed)
        if problem:
            ctx.error("input.argv", dest, f"{spec.flag} cannot take {item!r}: {problem}.",
                      f"set {ctx.var(dest)} to a plain value" + (" (null leaves the flag out)" if item == "" else ""),
                      spec.source, value)
            return False, None
        typed.append(item_typed)
    return True, typed if spec.takes_list else typed[0]


def _word_problem(spec: ArgSpec, typed: Any) -> str | None:
    """Why a typed value cannot be one word of SGLang's argv after ``spec.flag`` (ports: 1-65535)."""
    if isinstance(typed, int) and not isinstance(typed, bool) and (spec.dest.endswith(("_port", "_ports")) or spec.dest == "port"):
        return inputs.port_problem(typed)
    if isinstance(typed, bool):
        return None
    return inputs.argv_value_problem(_render_value(typed))


def _read_args(ctx: Context, raw_args: Mapping[str, Any]) -> None:
    """Map host-var keys to dests, type-check values, report unknown/renamed/deprecated keys."""
    for key, value in raw_args.items():
        spec = ctx.schema.lookup(key)
        norm = normalize_key(key)
        if spec is None:
            renamed = RENAMED.get(norm)
            if renamed and renamed.applies(ctx.version):
                ctx.error("schema.renamed", f"sglang_args.{key}", renamed.message(ctx.schema.version), renamed.fix, renamed.source)
                continue
            hints = ctx.schema.suggest(key)
            ctx.error(
                "schema.unknown",
                f"sglang_args.{key}",
                f"SGLang {ctx.schema.version} has no argument {key!r} (python -m sglang.launch_server exits with "
                "'unrecognized arguments').",
                ("did you mean " + " or ".join(hints) + "?")
                if hints
                else "remove it, or check the name against `python -m sglang.launch_server --help`",
            )
            continue
        if spec.negation and norm == normalize_key(spec.negation) and norm != spec.dest:
            # `--no-X: true` would otherwise set X to true, the opposite of what the key says; SGLang's argparse
            # (BooleanOptionalAction) gives --no-X the value false. The key names the argument, the value says on/off.
            ctx.error(
                "schema.negated",
                f"sglang_args.{key}",
                f"{key!r} is the negative spelling of {spec.flag} (argparse's BooleanOptionalAction): a key names the "
                "argument and its value says on or off, so this key is ambiguous.",
                f"write sglang_args.{spec.dest}: false (renders {spec.negation}) or true (renders {spec.flag})",
                spec.source,
            )
            continue
        if spec.dest in ctx.keys:
            ctx.error(
                "schema.duplicate",
                f"sglang_args.{key}",
                f"{key!r} and {ctx.keys[spec.dest]!r} both set {spec.flag}.",
                "keep one of them",
            )
            continue
        ctx.keys[spec.dest] = str(key)
        if value is None:
            continue
        if spec.deprecated and str(value).strip().lower() not in _FALSE:
            # SGLang still honours the deprecated flags it registers: the Deprecated*Action classes and the
            # store_true flags whose help says "Deprecated" warn and store
            # (sglang/srt/arg_groups/argparse_actions.py:77-149), and resolution translates them.  So they are
            # kept (and rendered); the rule schema.deprecated (sglang_rules) warns and translates.  Only a
            # DeprecatedAction registered with an error_message stops the launch (argparse_actions.py:56-70);
            # the schema generator appends that error_message to deprecated_message (tools/sglang_schema.py).
            if spec.action == "DeprecatedAction" and "error_message" in spec.deprecated_message:
                renamed = RENAMED.get(spec.dest)
                ctx.error(
                    "schema.deprecated",
                    spec.dest,
                    f"{spec.flag} is retired in SGLang {ctx.schema.version}, which refuses it: {spec.deprecated_message}",
                    renamed.fix if renamed else f"remove {ctx.var(spec.dest)}",
                    spec.source,
                )
                continue
        ok, typed = _coerce(ctx, spec, value)
        if ok:
            ctx.args[spec.dest] = typed


def _apply_spec_mode(ctx: Context) -> None:
    """Apply ``spec`` (keep/auto/off/explicit) to the typed args."""
    if ctx.spec == "auto":
        if not ctx.is_set("speculative_algorithm"):
            ctx.error(
                "spec.mode", "spec",
                "spec=auto asks SGLang to choose the speculative parameters, but no speculative_algorithm is set.",
                "set sglang_args.speculative_algorithm (e.g. NEXTN), or use spec=keep",
            )
        for dest in SPEC_TRIPLE:
            ctx.args.pop(dest, None)
    elif ctx.spec == "off":
        for dest in [d for d in ctx.args if d.startswith("speculative_")]:
            ctx.args.pop(dest)
    elif ctx.spec == "explicit":
        missing = [d for d in SPEC_TRIPLE if ctx.args.get(d) is None]
        if not ctx.is_set("speculative_algorithm") or missing:
            ctx.error(
                "spec.mode", "spec",
                "spec=explicit requires speculative_algorithm and all of "
                + ", ".join(SPEC_TRIPLE)
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + ".",
                "set the missing sglang_args, or use spec=auto to let SGLang choose them",
            )


def render_argv(schema: Schema, args: Mapping[str, Any]) -> list[str]:
    """The launch_server argv for typed args: full flag names, model path first, then by flag name.

    True -> flag alone, False/None -> omitted, lists -> flag followed by each item.
    """
    argv: list[str] = []
    order = sorted(args, key=lambda d: (d != "model_path", schema.arguments[d].flag))
    for dest in order:
        value = args[dest]
        spec = schema.arguments[dest]
        if value is False and spec.negation:
            argv.append(spec.negation)
            continue
        if value is None or value is False:
            continue
        if value is True:
            argv.append(spec.flag)
            continue
        argv.append(spec.flag)
        argv.extend(_render_value(v) for v in (value if isinstance(value, list) else [value]))
    return argv


def _render_value(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return inputs.render_number(value)
    return str(value)


def config_file_data(schema: Schema, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``--config`` YAML mapping for the secret args, keyed as SGLang's ConfigArgumentMerger wants.

    SGLang turns each key into ``--{key}``, so the key is the full option name without dashes.
    """
    return {schema.arguments[d].flag[2:]: args[d] for d in sorted(args) if d in schema.secrets and args[d] is not None}


def spec_triple(spec: Mapping[str, Any]) -> tuple[dict[str, int] | None, str | None]:
    """A run's spec given as the triple itself: ``({dest: int}, None)``, or ``(None, why it is not one)``.

    Exactly the three keys of :data:`SPEC_TRIPLE` (any spelling: ``speculative-num-steps`` too), each a whole
    number (``"3"`` included, never a boolean); what SGLang accepts of the values is the rules' business.
    """
    out: dict[str, int] = {}
    for key, value in spec.items():
        dest = normalize_key(key)
        if dest not in SPEC_TRIPLE:
            return None, f"{key!r} is not one of " + ", ".join(SPEC_TRIPLE)
        if dest in out:
            return None, f"{dest} is given twice"
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit())):
            return None, f"{dest} must be a whole number, got {value!r}"
        out[dest] = int(value)
    missing = [d for d in SPEC_TRIPLE if d not in out]
    if missing:
        return None, "missing " + ", ".join(missing)
    return {d: out[d] for d in SPEC_TRIPLE}, None


# The roles' defaults validate_host reads where the host's own value is empty (the release) or to check the directories
# the server is handed against (the contract's context); the caller reads them from the roles' defaults files.
# roles/nvidia_driver's nvidia_driver_version: the driver the host will run, which the stack rules check against the
# release's CUDA stack (sglang_rules/stack.py).
DRIVER_VERSION_VAR = "nvidia_driver_version"
# roles/sglang_worker_tls: the verifying TLS front of the host's instances (the gateway's mTLS to its workers).
FRONT_CA_VAR = "sglang_worker_tls_client_ca_file"
FRONT_CERT_VAR = "sglang_worker_tls_cert_file"
FRONT_KEY_VAR = "sglang_worker_tls_key_file"
FRONT_OFFSET_VAR = "sglang_worker_tls_backend_port_offset"
VALIDATE_DEFAULTS = ("sglang_version", DRIVER_VERSION_VAR, FRONT_OFFSET_VAR, *contract.CONTEXT_DEFAULTS)


def validate_host(hostvars: Mapping[str, Any], spec: str | Mapping[str, Any] | None = None,
                  defaults: Mapping[str, Any] | None = None) -> Result:
    """Validate a host's variables; see the module docstring and README for the contract.

    ``spec``: the run's override of ``sglang_spec`` (a mode, or the triple itself as a mapping: spec_triple).
    ``defaults``: the roles' defaults of :data:`VALIDATE_DEFAULTS` (roles/sglang's sglang_version, roles/nvidia_driver's
    nvidia_driver_version, the directories'), as the caller read them from the roles' defaults files; required where
    the host leaves sglang_version empty or sets a role variable or a staged model directory that is checked against
    them (a TypeError names what is missing). Without the driver's (host's or default), the driver is not checked.
    """
    result = Result()
    version = str(hostvars.get("sglang_version")
                  or contract.role_defaults(defaults, ["sglang_version"], "validate_host")["sglang_version"])
    result.version = version
    # The spec mode: the host's sglang_spec (default keep), unless the run overrides it (-e spec=...).
    raw_host_spec = hostvars.get("sglang_spec")
    # YAML reads an unquoted `off` as false: that is the mode "off", said so by a warning below.
    host_spec = "off" if raw_host_spec is False else str(raw_host_spec or "keep").strip().lower()
    # The run's override may also be the triple itself ({speculative_num_steps: 3, ...}): the mode explicit with
    # these values in place of the host's (playbooks/bench.yml tries such candidates on a canary).
    raw_run_spec = spec
    run_triple, triple_problem = spec_triple(spec) if isinstance(spec, Mapping) else (None, None)
    run_spec = (None if spec in (None, "") else "off" if spec is False
                else "explicit" if isinstance(spec, Mapping) else str(spec).strip().lower())
    spec = run_spec or host_spec
    result.spec = {"mode": spec, "host": host_spec,
                   "override": run_spec is not None and (run_spec != host_spec or isinstance(raw_run_spec, Mapping))}
    if run_triple is not None:
        result.spec["triple"] = dict(run_triple)

    def fail(rule: str, variable: str, value: Any, message: str, fix: str) -> Result:
        result.errors.append(Problem(rule, variable, value, message, fix))
        return result

    try:
        schema = load_schema(version)
    except KeyError:
        return fail(
            "host.version", "sglang_version", version,
            f"no schema for SGLang {version} in this project (have: {', '.join(available_versions())}).",
            "pin a version listed above; a new release's schema is added to the collection by its maintainers "
            "(docs/sglang-releases.md in the project's repository: tools/sglang_schema.py --version "
            f"{version})",
        )
    try:
        parsed_version = parse_version(version)
    except InvalidVersion:
        return fail("host.version", "sglang_version", version, f"{version!r} is not a PEP 440 version (e.g. 0.5.23).",
                    "pin one of the versions with a schema: " + ", ".join(available_versions()))
    raw_args = hostvars.get("sglang_args") or {}
    if not isinstance(raw_args, Mapping):
        return fail("host.args", "sglang_args", raw_args, "sglang_args must be a mapping of SGLang argument names to values.",
                    "write sglang_args as a YAML mapping, e.g. {tp_size: 8}")
    env = hostvars.get("sglang_env") or {}
    if not isinstance(env, Mapping):
        return fail("host.env", "sglang_env", env, "sglang_env must be a mapping of environment variable names to values.",
                    "write sglang_env as a YAML mapping, e.g. {NCCL_P2P_DISABLE: '1'}")
    model_path = hostvars.get("sglang_model_path")
    model = lookup_model(
        model_path,
        hostvars.get("sglang_model_architecture"),
        hostvars.get("sglang_model_quantization"),
        hostvars.get("sglang_model_max_context"),
    )
    result.model = model
    result.secrets = schema.secrets
    ctx = Context(
        schema=schema, version=parsed_version, args={}, keys={}, env={},
        gpu_count=None, compute_capability=None, model=model, spec=spec,
    )
    _read_host_facts(ctx, hostvars)
    driver = hostvars.get(DRIVER_VERSION_VAR) or (defaults or {}).get(DRIVER_VERSION_VAR)
    ctx.driver_version = None if driver in (None, "") else str(driver)
    _read_role_vars(ctx, hostvars, defaults)
    result.env, result.secret_env = _read_env(ctx, env, hostvars.get("hf_token"), hostvars.get(SECRET_ENV_VAR))
    _env_as_sglang_reads(ctx, result.secret_env)
    if raw_host_spec is False:
        ctx.warn("spec.mode", "sglang_spec", "sglang_spec is the YAML boolean false (an unquoted off), read as the mode 'off'.",
                 'quote the mode: sglang_spec: "off"')
    if host_spec not in SPEC_MODES:
        ctx.error("spec.mode", "sglang_spec", f"sglang_spec={host_spec!r} is not a mode.", f"use one of: {', '.join(SPEC_MODES)}")
    if run_spec is not None and run_spec not in SPEC_MODES:
        ctx.error("spec.mode", "spec", f"spec={run_spec!r} is not a mode.", f"use one of: {', '.join(SPEC_MODES)}")
    if triple_problem:
        ctx.error("spec.mode", "spec", f"spec={dict(raw_run_spec)!r}: {triple_problem}.",
                  "give spec all three of " + ", ".join(SPEC_TRIPLE) + " as whole numbers, e.g. {speculative_num_steps: 3, "
                  "speculative_eagle_topk: 1, speculative_num_draft_tokens: 4}, or one of: " + ", ".join(SPEC_MODES))
    if run_triple is not None:  # the run's triple replaces the host's, whatever spelling sglang_args used
        raw_args = {**{k: v for k, v in raw_args.items() if normalize_key(k) not in SPEC_TRIPLE}, **run_triple}
    _read_args(ctx, raw_args)
    _refuse_hidden_paths(ctx)
    for dest, owner in MANAGED_ARGS.items():
        if dest in ctx.args:
            ctx.error("host.managed", dest, f"{dest} is set by {owner}, not inside sglang_args.",
                      f"remove it from sglang_args{'; set ' + owner if owner.startswith('sglang_') else ''}")
            ctx.args.pop(dest)
    _apply_multinode(ctx, hostvars.get("sglang_multinode"))
    _apply_metrics(ctx, hostvars.get("sglang_metrics", True))
    listen = hostvars.get("sglang_listen_host")
    if listen not in (None, ""):
        problem = inputs.argv_value_problem(listen) if isinstance(listen, str) else "it must be an address or host name"
        if problem:
            ctx.error("input.listen_host", "sglang_listen_host", f"sglang_listen_host {listen!r}: {problem}.",
                      "set sglang_listen_host to an address (e.g. 0.0.0.0, 10.0.0.7 or ::) or remove it (127.0.0.1)", value=listen)
        else:
            ctx.args["host"] = listen
    ctx.allow_unauthenticated = str(hostvars.get("sglang_allow_unauthenticated", False)).strip().lower() in _TRUE
    ctx.allow_skip_warmup = str(hostvars.get("sglang_server_allow_skip_warmup", False)).strip().lower() in _TRUE
    _read_tls_ca(ctx, hostvars.get("sglang_tls_ca_file"))
    _read_front(ctx, hostvars, defaults)
    if not model_path:
        ctx.error("host.model_path", "sglang_model_path", "sglang_model_path is required (the --model-path of the server).",
                  "set sglang_model_path to a Hugging Face id or a local directory")
    else:
        # The model's facts come from its id; the server may load it from a staged local copy.
        local = hostvars.get("sglang_model_local_path") or model_path
        for variable, path in (("sglang_model_path", model_path), ("sglang_server_model_path", local)):
            problem = inputs.model_path_problem(path)
            if not problem and path is local and local != model_path:
                # A directory roles/sglang stages the weights into, as the service user: a service directory.
                problem = contract.service_dir_problem(local, contract.context_of(
                    hostvars, contract.role_defaults(defaults, contract.CONTEXT_DEFAULTS, "validate_host")))
            if problem:
                ctx.error("input.model_path", variable, f"{variable} {path!r}: {problem}.",
                          "use an org/name Hugging Face id, or an absolute, normalised directory outside /home and /root "
                          "(move the weights, e.g. under /srv/models or /opt/sglang/models)", value=path)
                break
        else:
            ctx.args = {"model_path": local, **ctx.args}
    _read_secrets(ctx, hostvars)
    if spec in SPEC_MODES:
        _apply_spec_mode(ctx)
    run_rules(ctx)
    _apply_front(ctx)
    first_rules = min(r.since for r in RULES)
    if parsed_version < first_rules:  # a release with a schema but no rules: say so, never a silent pass
        ctx.warn("rules.unchecked", "sglang_version",
                 f"SGLang {version}: only its schema was checked (argument names, types, choices); the launch rules "
                 f"(speculative decoding, hardware, parallelism, numbers) are written for {first_rules} and later.",
                 "review the launch arguments against this release by hand, or pin a release the rules cover",
                 value=version)
    result.errors = [p for p in ctx.problems if p.level == "error"]
    result.warnings = [p for p in ctx.problems if p.level != "error"]
    result.args = dict(ctx.args)
    public = {k: v for k, v in ctx.args.items() if k not in schema.secrets}
    result.argv = render_argv(schema, public)
    result.config = config_file_data(schema, ctx.args)
    result.gpu_ids = gpu_ids(ctx)
    result.endpoint = endpoint(ctx)
    return result


# Listen addresses that mean "every address": the host itself reaches the server on loopback.
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def _refuse_hidden_paths(ctx: Context) -> None:
    """A path in any argument (ssl_certfile, ssl_keyfile, a chat template, a LoRA ...) that the unit's sandbox hides
    (ProtectHome=yes: /home, /root, /run/user): the server would not find it, although a check outside does."""
    for dest, value in list(ctx.args.items()):
        words = value if isinstance(value, list) else [value]
        hidden = next((w for w in words if isinstance(w, str) and any(
            w == h or w.startswith(h + "/") for h in inputs.HIDDEN_BY_PROTECT_HOME)), None)
        if hidden is not None and dest not in ctx.secrets:
            ctx.error("input.hidden_path", dest,
                      f"{ctx.var(dest)} {hidden!r} is under a directory the server's sandbox hides (ProtectHome=yes: "
                      "/home, /root, /run/user): SGLang would not find it.",
                      "move the file outside /home, /root and /run/user (e.g. /etc/ssl/sglang or /opt/sglang/models)")


def endpoint(ctx: Context) -> dict[str, Any]:
    """Where the server listens and how the host itself reaches it, from the typed args (any spelling of port).

    ``scheme`` is https when SGLang serves TLS (it does when ``ssl_certfile`` is set:
    sglang/srt/entrypoints/http_server.py:2916); ``local_url`` is what health checks, drains and reports
    on the host use; ``node_rank`` 0 is the node that serves the API.
    """
    listen = str(ctx.args.get("host") or "127.0.0.1")
    port = ctx.get("port", 30000)
    connect = _ANY_ADDRESS.get(listen, listen)
    node_rank = ctx.args.get("node_rank") or 0
    # Nodes 1..N-1 of a multi-node instance serve only health (and metrics) on plain HTTP, whatever the TLS
    # arguments: sglang/srt/utils/common.py:3624-3664 (launch_dummy_health_check_server, no ssl options),
    # started for node_rank > 0 at sglang/srt/entrypoints/engine.py:1281.
    local_scheme = "https" if ctx.is_set("ssl_certfile") and node_rank == 0 else "http"
    local_url = f"{local_scheme}://{f'[{connect}]' if ':' in connect else connect}:{port}"
    out = {
        "scheme": local_scheme,
        # What every client of the plan (health waits, drains, reports, the routers) verifies TLS against.
        "ca_file": ctx.tls_ca_file if local_scheme == "https" else "",
        "listen_host": listen,
        "port": port,
        "local_url": local_url,
        "node_rank": node_rank,
    }
    if ctx.front is not None:
        # Behind the host's TLS front: others (the gateways, Prometheus) reach the front on the instance's own
        # address and port over HTTPS with a client certificate; the host's own checks reach SGLang on loopback.
        out.update(scheme="https", ca_file=ctx.tls_ca_file, listen_host=ctx.front["listen_host"],
                   port=ctx.front["port"], front=dict(ctx.front))
    return out


def _apply_metrics(ctx: Context, value: Any) -> None:
    """``sglang_metrics`` (default true): ``--enable-metrics`` unless ``sglang_args`` says otherwise.

    Prometheus (roles/sglang_monitoring), the drain (in-flight requests) and the request report read
    /metrics; SGLang serves it only with --enable-metrics (sglang/srt/entrypoints/http_server.py, the
    /metrics mount under ``if server_args.enable_metrics``). ``enable_metrics`` written in sglang_args wins.
    """
    if value in (True, False):
        on = value
    else:
        on = str(value).strip().lower() in _TRUE
        if str(value).strip().lower() not in _TRUE | {"false", "no", "off", "0"}:
            ctx.error("input.metrics", "sglang_metrics", f"sglang_metrics {value!r} is not a boolean.",
                      "set sglang_metrics: true (the default) or false")
            return
    # Any spelling of enable_metrics in sglang_args (true, false, or null: leave the flag out) wins.
    if on and "enable_metrics" not in ctx.keys and "enable_metrics" in ctx.schema.arguments:
        ctx.args["enable_metrics"] = True


def _read_tls_ca(ctx: Context, value: Any) -> None:
    """``sglang_tls_ca_file``: an absolute file path (it reaches the roles' HTTP clients and the routers' argv)."""
    if value in (None, ""):
        return
    problem = inputs.path_problem(value)
    if problem:
        ctx.error("input.tls_ca_file", "sglang_tls_ca_file", f"sglang_tls_ca_file {value!r}: {problem}.",
                  "set sglang_tls_ca_file to the absolute path of a PEM CA bundle on the hosts, e.g. "
                  "/etc/ssl/sglang/ca.pem, or remove it (the system's CA store)", value=value)
        return
    ctx.tls_ca_file = value


def _read_front(ctx: Context, hostvars: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> None:
    """``sglang_worker_tls_client_ca_file`` set: node 0 of each instance is behind the host's verifying TLS front
    (roles/sglang_worker_tls), which alone serves the instance's address and port, with TLS, and admits only clients
    with a certificate of that CA (the gateways). SGLang 0.5.23 cannot require one itself: its uvicorn Server gets no
    ``ssl_cert_reqs`` (sglang/srt/entrypoints/http_server.py:2990-3005) and granian ``ssl_verify=False``, "No MTLS
    supported for now" (http_server.py:2944).

    The front's backend port (SGLang's own ``--port``, on loopback) is the instance's port plus
    ``sglang_worker_tls_backend_port_offset``, computed here once; the front serves the certificate
    ``sglang_worker_tls_cert_file`` / ``_key_file``, so SGLang's own TLS arguments are refused with it."""
    ca = hostvars.get(FRONT_CA_VAR)
    if ca in (None, "") or (ctx.args.get("node_rank") or 0) != 0:
        return  # nodes 1..N-1 serve no API (endpoint()): nothing to front
    ok = True
    for var in (FRONT_CA_VAR, FRONT_CERT_VAR, FRONT_KEY_VAR):
        value = hostvars.get(var)
        problem = inputs.path_problem(value) if value not in (None, "") else "the TLS front needs it"
        if problem:
            ok = False
            ctx.error("input.front", var, f"{var} {value!r}: {problem}.",
                      f"set {var} to the absolute path of a PEM file on the GPU hosts (the front's "
                      + ("client CA bundle" if var == FRONT_CA_VAR else "certificate" if var == FRONT_CERT_VAR
                         else "unencrypted private key") + f"), or remove {FRONT_CA_VAR} (no front)", value=value)
    for dest in ("ssl_certfile", "ssl_keyfile"):
        if ctx.is_set(dest):
            ok = False
            ctx.error("input.front", ctx.var(dest), f"{ctx.var(dest)}: the instance is behind the TLS front "
                      f"({FRONT_CA_VAR} is set), which serves TLS with {FRONT_CERT_VAR}; SGLang serves plain HTTP on "
                      "loopback behind it.", f"remove {dest} (and sglang_ssl_keyfile_password) from the instance's "
                      f"arguments, or remove {FRONT_CA_VAR}")
    raw = hostvars.get(FRONT_OFFSET_VAR)
    if raw in (None, ""):
        raw = contract.role_defaults(defaults, [FRONT_OFFSET_VAR], "validate_host")[FRONT_OFFSET_VAR]
    offset = raw if isinstance(raw, int) and not isinstance(raw, bool) else (
        int(raw) if isinstance(raw, str) and raw.isascii() and raw.strip().isdigit() else None)
    port = ctx.get("port", 30000)
    if not isinstance(port, int) or isinstance(port, bool):
        return  # the schema names a port that is not one
    backend = None if offset is None else port + offset
    if offset is None or offset < 1 or backend is None or backend > 65535:
        ctx.error("input.front", FRONT_OFFSET_VAR, f"{FRONT_OFFSET_VAR} {raw!r}: the front's backend port is the "
                  f"instance's port ({port}) plus it, a TCP port 1-65535.",
                  f"set {FRONT_OFFSET_VAR} to a whole number from 1 to {65535 - port}", value=raw)
        return
    if ok:
        ctx.front = {"listen_host": str(ctx.args.get("host") or "127.0.0.1"), "port": port, "backend_port": backend,
                     "client_ca_file": ca, "cert_file": hostvars.get(FRONT_CERT_VAR),
                     "key_file": hostvars.get(FRONT_KEY_VAR)}


def _apply_front(ctx: Context) -> None:
    """Behind the front, SGLang listens on loopback on the backend port (after the rules, which check the
    instance's public address and port: its key, its port's collisions)."""
    if ctx.front is not None and not any(p.level == "error" for p in ctx.problems):
        ctx.args["host"] = "127.0.0.1"
        ctx.args["port"] = ctx.front["backend_port"]


def _read_secrets(ctx: Context, hostvars: Mapping[str, Any]) -> None:
    """Secret arguments come from ``sglang_<dest>`` (Vault), never from sglang_args; their values are never shown."""
    for dest in sorted(ctx.secrets):
        var = inputs.secret_var(dest)
        if dest in ctx.args:
            ctx.error("host.secret", dest, f"{dest} is a secret and must not be in sglang_args (it would land in the inventory "
                      "in clear and on the command line).", f"set {var} instead (from Ansible Vault)")
            ctx.args.pop(dest)
            continue
        value = hostvars.get(var)
        if value in (None, ""):
            continue
        problem = inputs.text_problem(value) if isinstance(value, str) else "it must be a string"
        if not problem and dest in HEADER_SECRETS:
            problem = inputs.header_token_problem(value)
        if problem:
            ctx.error("input.secret", var, f"{var}: {problem} (value not shown).", f"set {var} to the secret text alone")
        else:
            ctx.args[dest] = value


def role_var_problems(values: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> list[tuple[str, Any, str]]:
    """(variable, value, why) for each role variable in ``values`` that breaks the input contract
    (sglang_contract.CONTRACT: names, service accounts, directories under the allowed roots).

    Role variables reach the unit, file names and the directories the roles create and hand to the
    service user; unset ones (None) are the roles' defaults and are not checked. ``values`` may carry
    ``sglang_service_roots`` and ``sglang_models_dir``, the roots service directories are checked against;
    ``defaults``: the roles' defaults of the others (contract.CONTEXT_DEFAULTS), required once a value is set.
    """
    unknown = [var for var in values if var not in contract.CONTRACT]
    if unknown:
        raise KeyError(unknown[0])
    if all(value is None for value in values.values()):
        return []  # nothing set: nothing to check, nor to check against
    context = contract.context_of(values, contract.role_defaults(defaults, contract.CONTEXT_DEFAULTS, "role_var_problems"))
    return [(f.variable, values[f.variable], f.why) for f in contract.check(values, context=context)]


def _read_role_vars(ctx: Context, hostvars: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> None:
    """Role variables that reach the unit, a path or a file name: names and plain absolute paths only."""
    for var, value, problem in role_var_problems({v: hostvars.get(v) for v in (*ROLE_NAMES, *ROLE_DIRS, contract.SERVICE_ROOTS_VAR)},
                                                 defaults):
        kind = "a plain name, e.g. sglang" if var in ROLE_NAMES else "a plain absolute directory of its own, e.g. its default"
        ctx.error("input.role_var", var, f"{var} {value!r}: {problem}.", f"set {var} to {kind}", value=value)


SECRET_ENV_VAR = "sglang_secret_env"


def _read_env(ctx: Context, env: Mapping[str, Any], hf_token: Any,
              secret_env: Any = None) -> tuple[dict[str, str], dict[str, str]]:
    """Type-check sglang_env, sglang_secret_env (and hf_token); returns the public and the secret environment.

    ``ctx.env`` gets every valid entry as text, for the rules.  Every entry of ``sglang_secret_env`` (the explicit
    way, e.g. from Ansible Vault), and each of sglang_env whose name says it holds a secret (``*_TOKEN``, ``*_KEY``,
    ``*_PASS`` ...: inputs.is_secret_env, a safety net), go to the secret environment, which plans and Ansible's
    output never show and the launcher redacts from the journal. No problem shows a secret entry's value.
    """
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    if secret_env in (None, ""):
        secret_env = {}
    if not isinstance(secret_env, Mapping):
        ctx.error("host.env", SECRET_ENV_VAR, f"{SECRET_ENV_VAR} must be a mapping of environment variable names to "
                  "values (value not shown).", f"write {SECRET_ENV_VAR} as a YAML mapping, e.g. {{DB_PASSWORD: ...}} from Vault")
        secret_env = {}
    entries = [("sglang_env", name, value) for name, value in env.items()]
    entries += [(SECRET_ENV_VAR, name, value) for name, value in secret_env.items()]
    for source, name, value in entries:
        var = f"{source}.{name}"
        shown = name if isinstance(name, str) and len(name) <= 200 else None
        if not isinstance(name, str) or not inputs.ENV_NAME.fullmatch(name):
            ctx.error("host.env", f"{source}.{str(name)[:64]}", f"{shown!r} is not an environment variable name.",
                      "use letters, digits and _ (not starting with a digit)")
            continue
        if name in MANAGED_ENV:
            ctx.error("host.env", var, f"{name} is set by the role ({MANAGED_ENV[name]}).", f"remove {var}")
            continue
        alias = legacy_alias(name)
        if alias in MANAGED_ENV:
            ctx.error("host.env", var, f"{name} is the legacy name of {alias}, which SGLang gives its value when it starts "
                      f"({_ENVIRON_PY}, _handle_deprecated_envs) and which is set by the role ({MANAGED_ENV[alias]}).",
                      f"remove {var}")
            continue
        if source == "sglang_env" and name in secret_env:
            ctx.error("host.env", var, f"{name} is set both in sglang_env and in {SECRET_ENV_VAR}.",
                      f"keep it in {SECRET_ENV_VAR} only")
            continue
        is_secret = source == SECRET_ENV_VAR or inputs.is_secret_env(name)
        try:
            text = inputs.env_value(value)
        except ValueError as exc:
            ctx.error("host.env", var, f"{var}: {exc}" + (" (value not shown)." if is_secret else "."),
                      f"write {var} as a quoted string, e.g. {name}: '1'", value=None if is_secret else value)
            continue
        if name in HF_TOKEN_ENV:
            if source == "sglang_env":
                ctx.warn("host.env_secret", var, f"{name} in sglang_env is the Hugging Face token; hf_token also gives it to "
                         "the weights download and keeps it out of plans and logs.",
                         f"remove {var} and set hf_token (from Ansible Vault)")
            if hf_token not in (None, ""):
                ctx.error("host.env", var, f"{name} is set both here and by hf_token.", f"remove {var}")
                continue
        (secret if is_secret else public)[name] = text
        ctx.env[name] = text
    if hf_token not in (None, ""):
        problem = inputs.text_problem(hf_token) if isinstance(hf_token, str) else "it must be a string"
        if problem:
            ctx.error("input.secret", "hf_token", f"hf_token: {problem} (value not shown).", "set hf_token to the token alone")
        else:
            secret["HF_TOKEN"] = hf_token
    return public, secret


_ENVIRON_PY = "sglang/srt/environ.py"


def _env_as_sglang_reads(ctx: Context, secret: Mapping[str, str]) -> None:
    """Give the rules ``ctx.env`` after SGLang's renames of old names (resolve.env_renames), and warn on each old name
    the host uses (``secret``: the entries of the secret environment, whose values no message shows)."""
    def source(name: str) -> str:
        return SECRET_ENV_VAR if name in secret else "sglang_env"

    def replaced(old: str, new: str) -> str:
        if new not in ctx.env or ctx.env[new] == ctx.env[old]:
            return ""
        shown = "" if new in secret or old in secret else f" ({ctx.env[new]!r})"
        return f" It replaces the value written for {new}{shown}."

    for old, new, how in env_renames(ctx):
        if how != "read":
            what = (f"the old name of {new}: SGLang {ctx.schema.version} forwards its value there when it starts "
                    f"({_ENVIRON_PY}, _DEPRECATED_ENVS)." if how == "forwarded" else
                    f"the legacy name of {new}: SGLang copies it there when it starts ({_ENVIRON_PY}, "
                    f"_handle_deprecated_envs), and the checks here read it as {new}.")
            ctx.warn("host.env_legacy", f"{source(old)}.{old}", f"{old} is {what}{replaced(old, new)}",
                     f"rename it to {source(old)}.{new}")
        ctx.env[new] = ctx.env[old]


MULTINODE_ARGS = ("nnodes", "node_rank", "dist_init_addr")


def _apply_multinode(ctx: Context, layout: Any) -> None:
    """Put the node rank, node count and rendezvous address derived from the inventory group into the args.

    ``layout`` is :meth:`sglang_multinode.Layout.as_dict` (or None for a single-node server).
    """
    if not layout:
        return
    if not isinstance(layout, Mapping):
        ctx.error("multinode.layout", "sglang_multinode", "the multi-node layout must be a mapping.",
                  "set sglang_multinode_group and let the roles derive the layout")
        return
    group = layout.get("group", "?")
    for dest in MULTINODE_ARGS:
        if dest in ctx.args:
            ctx.error("multinode.derived", dest,
                      f"{dest} is derived from the inventory group {group!r} (sglang_multinode_group): node ranks follow the "
                      "order of the group's hosts, dist_init_addr is its first host and sglang_multinode_port.",
                      "remove it from sglang_args")
            ctx.args.pop(dest)
    ctx.args["nnodes"] = int(layout["nnodes"])
    ctx.args["node_rank"] = int(layout["node_rank"])
    ctx.args["dist_init_addr"] = str(layout["dist_init_addr"])
    problem = inputs.argv_value_problem(ctx.args["dist_init_addr"])
    if problem:
        ctx.error("input.argv", "sglang_multinode_addr", f"the rendezvous address {layout['dist_init_addr']!r}: {problem}.",
                  "set sglang_multinode_addr (or node 0's ansible_host) to a plain address", value=layout["dist_init_addr"])
    dist_port = str(layout["dist_init_addr"]).rsplit(":", 1)[-1]
    for dest in ("port", "grpc_port"):
        if str(ctx.get(dest, "")) == dist_port:
            ctx.error("multinode.port", dest,
                      f"{dest} {dist_port} is also the rendezvous port of dist_init_addr {layout['dist_init_addr']}.",
                      "set sglang_multinode_port (on the group's first host) to another free port")


def _read_host_facts(ctx: Context, hostvars: Mapping[str, Any]) -> None:
    count = hostvars.get("nvidia_gpu_count")
    if count in (None, ""):
        ctx.error("host.hardware", "nvidia_gpu_count", "nvidia_gpu_count is not declared; the parallel sizes cannot be checked.",
                  "declare the host's GPU count, e.g. nvidia_gpu_count: 8")
    else:
        # A whole number of GPUs as YAML or Jinja hands it over: 8, 8.0, "8", "8.0".  Not a boolean (YAML true
        # is 1), a fraction, nor a count no host has.
        most = MAX_GPUS_PER_HOST
        number = None
        if isinstance(count, (int, float)) and not isinstance(count, bool):
            number = count
        elif isinstance(count, str) and re.fullmatch(r"\d+(\.0*)?", count.strip()):
            number = float(count)
        if number is not None and 1 <= number <= most and float(number).is_integer():
            ctx.gpu_count = int(number)
        else:
            ctx.error("host.hardware", "nvidia_gpu_count",
                      f"nvidia_gpu_count must be a positive integer (a whole number of GPUs, at most {most}), got {count!r}.",
                      "set nvidia_gpu_count: 8 (the number of GPUs nvidia-smi -L lists)")
    cap = hostvars.get(CC_VAR)
    if cap is None or cap == "":
        ctx.error("host.hardware", CC_VAR,
                  f"{CC_VAR} is not declared; the backend rules for the GPU cannot be checked.",
                  f"declare it, e.g. {CC_VAR}: \"12.0\" for RTX PRO 6000 Blackwell (nvidia-smi --query-gpu=compute_cap)")
    else:
        try:
            ctx.compute_capability = parse_compute_capability(cap)
        except ValueError as exc:
            ctx.error("host.hardware", CC_VAR, f"{CC_VAR} {cap!r} is not a compute capability like \"12.0\": {exc}.",
                      f"quote it as a string: {CC_VAR}: \"12.0\" (what nvidia-smi --query-gpu=compute_cap prints)", value=cap)
    _read_gpu_memory(ctx, hostvars.get(MEMORY_VAR))
    _read_gpu_facts(ctx, hostvars, count)


MEMORY_VAR = "nvidia_gpu_memory_mib"
FACTS_VAR = "nvidia_gpu_facts"


def _read_gpu_memory(ctx: Context, value: Any) -> None:
    """nvidia_gpu_memory_mib (optional): each GPU's memory in MiB, as nvidia-smi --query-gpu=memory.total prints it."""
    if value is None or value == "":
        return
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and re.fullmatch(r"[1-9][0-9]{0,8}", value):
        number = int(value)
    if number is None or not 0 < number < 10**9:
        ctx.error("host.hardware", MEMORY_VAR, f"{MEMORY_VAR} must be a whole number of MiB per GPU, got {value!r}.",
                  f"set {MEMORY_VAR}: 97887 (nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits), or remove it",
                  value=value)
        return
    ctx.gpu_memory_mib, ctx.gpu_memory_source = number, MEMORY_VAR


def facts_usable(facts: Any) -> bool:
    """True for gathered facts of the schema this code reads whose nvidia-smi answered (see the gpu_facts module)."""
    return (isinstance(facts, Mapping) and facts.get("schema") == 1 and facts.get("driver_loaded") is True
            and isinstance(facts.get("gpus"), list) and all(isinstance(g, Mapping) for g in facts["gpus"]))


def gpu_count_problem(declared: Any, facts: Mapping[str, Any]) -> Problem:
    """``host.facts``: the inventory declares ``declared`` GPUs, the gathered facts show another count."""
    found = facts.get("gpu_count")
    return Problem("host.facts", "nvidia_gpu_count", declared,
                   f"nvidia_gpu_count={declared!r} (inventory) but nvidia-smi on the host lists {found} GPU(s) "
                   f"({FACTS_VAR}.gpu_count).",
                   f"set nvidia_gpu_count: {found}, or find out why the host shows {found} (a GPU fallen off the bus, "
                   "a driver that did not load)")


def _read_gpu_facts(ctx: Context, hostvars: Mapping[str, Any], declared_count: Any) -> None:
    """Cross-check the declared GPUs against the host's gathered facts (absent: the declarations alone, as before).

    The declarations stay required: the validator runs before any host is reached, and facts only confirm them.
    """
    facts = hostvars.get(FACTS_VAR)
    if facts is None:
        return
    if not facts_usable(facts):
        if isinstance(facts, Mapping) and facts.get("schema") == 1 and facts.get("driver_loaded") is False:
            return  # no driver yet (first deploy): nothing to compare
        ctx.warn("host.facts", FACTS_VAR, f"{FACTS_VAR} is not a gathered facts mapping of schema 1; the hardware was not "
                 "cross-checked against the host.", "gather them again (blackwell.sglang.gpu_facts), or clear the fact cache")
        return
    ctx.facts = facts
    gpus = facts["gpus"]
    found = facts.get("gpu_count")
    if ctx.gpu_count is not None and found != ctx.gpu_count:
        problem = gpu_count_problem(declared_count, facts)
        ctx.error(problem.rule, problem.variable, problem.message, problem.fix, value=problem.value)
    caps = sorted({str(g.get("compute_capability")) for g in gpus if g.get("compute_capability") is not None})
    if len(caps) > 1:
        ctx.error("host.facts", CC_VAR,
                  f"the host mixes GPUs of compute capabilities {', '.join(caps)} ({FACTS_VAR}.gpus); one "
                  f"{CC_VAR} cannot describe them, and one SGLang server needs GPUs of one kind.",
                  "serve each kind of GPU by its own host entry or instance (sglang_gpus), or remove the odd GPU")
    elif caps and ctx.compute_capability is not None:
        try:
            found_cc = parse_compute_capability(caps[0])
        except ValueError:
            found_cc = None
        if found_cc != ctx.compute_capability:
            declared = ".".join(map(str, ctx.compute_capability))
            ctx.error("host.facts", CC_VAR,
                      f"{CC_VAR}={declared!r} (inventory) but nvidia-smi on the host reports compute capability "
                      f"{caps[0]!r} ({FACTS_VAR}.gpus[].compute_capability); the hardware rules would judge the wrong GPU.",
                      f"set {CC_VAR}: \"{caps[0]}\"", value=declared)


def format_report(host: str, result: Result) -> str:
    """A readable block for one host: every error and warning with its fix."""
    version = f" (SGLang {result.version})" if result.version else ""
    lines = [f"{host}: {len(result.errors)} error(s), {len(result.warnings)} warning(s){version}"]
    for problem in list(result.errors) + list(result.warnings):
        mark = "ERROR" if problem.level == "error" else "WARN "
        shown = "" if problem.value is None else f" = {problem.value!r}"
        lines.append(f"  {mark} {problem.variable}{shown}  [{problem.rule}]")
        lines.append(f"        {problem.message}")
        lines.append(f"        fix: {problem.fix}")
        if problem.source:
            lines.append(f"        source: {problem.source}")
    return "\n".join(lines)
