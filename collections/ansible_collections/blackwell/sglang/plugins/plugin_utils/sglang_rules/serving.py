# SPDX-License-Identifier: Apache-2.0
"""Serving and security: TLS, HTTP and gRPC serving, JSON arguments, watermarking and an unauthenticated listener.
"""

from __future__ import annotations

import ipaddress
import json
from typing import TYPE_CHECKING, Any

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_contract import is_loopback
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.base import (
    _AH,
    _SH,
    _VH,
    _choice,
    _given,
    _int,
    _json_arg,
    _num,
    env_true,
)
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, added_in, release_line, rule
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.resolve import resolved_attention_backends

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context


@rule("serving.ssl", sources=(
    "sglang/srt/arg_groups/serving_hook.py:47-87",
))
def _ssl(ctx: Context, report: Report) -> None:
    """TLS arguments that only work together (the files themselves are checked on the host by the preflight)."""
    where = "sglang/srt/arg_groups/serving_hook.py:47-87 (handle_ssl_validation)"
    cert, key = ctx.is_set("ssl_certfile"), ctx.is_set("ssl_keyfile")
    if cert != key:
        have, lacks = ("ssl_certfile", "ssl_keyfile") if cert else ("ssl_keyfile", "ssl_certfile")
        ctx.error("serving.ssl", have, f"--{have.replace('_', '-')} requires --{lacks.replace('_', '-')}; SGLang "
                  "refuses one without the other.", f"set sglang_args.{lacks} (a PEM file on the host) or remove "
                  f"{ctx.var(have)}", where)
    elif not cert:
        for dest, var in (("ssl_ca_certs", ctx.var("ssl_ca_certs")), ("ssl_keyfile_password", "sglang_ssl_keyfile_password")):
            if ctx.is_set(dest):
                named = var if dest == "ssl_keyfile_password" else dest
                ctx.error("serving.ssl", named, f"{var} has no effect without ssl_certfile and ssl_keyfile; SGLang "
                          "refuses it.", f"set sglang_args.ssl_certfile and ssl_keyfile, or remove {var}", where)
    if ctx.is_set("enable_ssl_refresh") and not (cert and key):
        ctx.error("serving.ssl", "enable_ssl_refresh", "--enable-ssl-refresh reloads a certificate the server does not "
                  "have; SGLang refuses it without ssl_certfile and ssl_keyfile.",
                  f"set sglang_args.ssl_certfile and ssl_keyfile, or remove {ctx.var('enable_ssl_refresh')}", where)


@rule("security",
      ids=("security.unauthenticated",),
      stricter=("SGLang serves without an API key on any address; the project refuses an unauthenticated server on a non-"
                "loopback address"))
def _security(ctx: Context, report: Report) -> None:
    listen = str(ctx.get("host", "127.0.0.1"))
    # Parsed, not prefixed (sglang_contract.is_loopback): localhost.attacker.example is any resolver's to point elsewhere.
    if is_loopback(listen) or ctx.is_set("api_key") or ctx.allow_unauthenticated:
        return
    ctx.error("security.unauthenticated", "sglang_listen_host",
              f"the server would listen on {listen} without an API key: anyone who reaches the port can use the model "
              "(and the admin endpoints).",
              "set sglang_api_key (from Ansible Vault), or sglang_allow_unauthenticated: true if a firewall or the "
              "router is the only way in")


_COMMON = "sglang/srt/utils/common.py"


def media_domain_problem(domain: Any) -> str | None:
    """Why _normalize_media_domain (sglang/srt/utils/common.py:1739-1768) refuses an allowed media domain, or None:
    a hostname or an IP address, without scheme, path, user, port or an empty label (IDNA)."""
    if not isinstance(domain, str):
        return "allowed media domains must be strings"
    domain = domain.strip().rstrip(".")
    if not domain:
        return "allowed media domains cannot be empty"
    if "://" in domain or any(char in domain for char in "/?#@"):
        return f"invalid allowed media domain {domain!r}: provide a hostname only"
    if domain.startswith("[") and domain.endswith("]"):
        domain = domain[1:-1]
    try:
        ipaddress.ip_address(domain)
        return None
    except ValueError:
        if ":" in domain:
            return f"invalid allowed media domain {domain!r}: ports are not supported"
    try:
        normalized = domain.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return f"invalid allowed media domain {domain!r}"
    return None if normalized else "allowed media domains cannot be empty"


@rule("server.media_url", sources=(
    "sglang/srt/utils/common.py:1783",
    "sglang/srt/utils/common.py:1741",
    "sglang/srt/utils/common.py:1745",
    "sglang/srt/utils/common.py:1747",
    "sglang/srt/utils/common.py:1758",
    "sglang/srt/utils/common.py:1765",
    "sglang/srt/utils/common.py:1767",
))
def _media_url(ctx: Context, report: Report) -> None:
    """handle_media_url_security (serving_hook.py:203-214) publishes the media URL policy through
    configure_media_url_security (sglang/srt/utils/common.py:1771-1790), which refuses a negative size limit and
    normalizes every allowed domain (the fresh 2000-case run of issue 36: media_url_max_file_size_mb -1)."""
    size = _num(ctx, "media_url_max_file_size_mb")
    if size is not None and size < 0:
        report.refuse("media_url_max_file_size_mb", f"media_url_max_file_size_mb must be non-negative, not {size}.",
                      f"set {ctx.var('media_url_max_file_size_mb')} to 0 (no limit) or a size in MiB", f"{_COMMON}:1783")
        return
    domains = ctx.args.get("allowed_media_domains")
    for domain in domains if isinstance(domains, list) else ():
        why = media_domain_problem(domain)
        if why is not None:
            report.refuse("allowed_media_domains", f"allowed_media_domains: {why}.",
                          f"give {ctx.var('allowed_media_domains')} bare hostnames or IP addresses",
                          f"{_COMMON}:1741-1767")
            return


WATERMARK_SPEC = ("EAGLE", "NEXTN", "EAGLE3", "NGRAM")  # NEXTN resolves to EAGLE before the check


@rule("server.watermark", since="0.5.22", sources=(
    "sglang/srt/arg_groups/validation_hook.py:35-106",
    "sglang/srt/arg_groups/validation_hook.py:37",
    "sglang/srt/arg_groups/validation_hook.py:43",
))
def _watermark(ctx: Context, report: Report) -> None:
    """check_watermark_server_args (sglang/srt/arg_groups/validation_hook.py:35-106), on the flags (not the config's fields)."""
    if not ctx.is_set("enable_watermark"):
        if _given(ctx, "watermark_config"):
            ctx.error("server.watermark", "watermark_config", "watermark_config without enable_watermark; SGLang refuses it.",
                      f"set {ctx.var('enable_watermark')}: true, or remove {ctx.var('watermark_config')}", f"{_VH}:37")
        return
    _watermark_config(ctx)
    aux = ctx.is_set("enable_return_aux_hidden_states")  # it resets speculative_algorithm to None first
    algo = None if aux or not _given(ctx, "speculative_algorithm") else str(ctx.args["speculative_algorithm"]).upper()
    device = _choice(ctx, "device", "cuda")  # unset: SGLang detects cuda on an NVIDIA host
    for bad, dest, why, line in (
        # SGLang compares the text: "cuda:0" is refused as well (the fresh 2000-case run of issue 36: device xpu).
        (device != "cuda", "device", f"device {device!r} (watermarking needs device cuda)", 43),
        (ctx.is_set("enable_custom_logit_processor"), "enable_custom_logit_processor", "enable_custom_logit_processor", 75),
        (_given(ctx, "dllm_algorithm"), "dllm_algorithm", "a diffusion LLM (dllm_algorithm)", 87),
        # A disaggregation mode the host sets (the project deploys none itself; the 10,000-case fuzz run's MISSED).
        (_choice(ctx, "disaggregation_mode", "null") != "null", "disaggregation_mode", "PD disaggregation", 89),
        (algo is not None and algo not in WATERMARK_SPEC, "speculative_algorithm",
         f"speculative_algorithm {algo} (only NGRAM, EAGLE/NEXTN and EAGLE3)", 91),
        (algo is not None and _int(ctx, "pp_size", 1) > 1, "pp_size", "pipeline-parallel speculative decoding", 96),
        (ctx.is_set("speculative_use_rejection_sampling"), "speculative_use_rejection_sampling",
         "speculative_use_rejection_sampling", 101),
        (env_true(ctx.env, "SGLANG_RUST_SERVER"), "sglang_env.SGLANG_RUST_SERVER", "SGLANG_RUST_SERVER", 106),
    ):
        if bad:
            ctx.error("server.watermark", dest, f"enable_watermark is not supported with {why}; SGLang refuses the launch.",
                      f"remove {dest if dest.startswith('sglang_env') else ctx.var(dest)} or "
                      f"{ctx.var('enable_watermark')}", f"{_VH}:{line}")
            return


def _watermark_config(ctx: Context) -> None:
    """The resolved fields of an inline --watermark-config (a file path is read on the host: the preflight)."""
    raw = ctx.args.get("watermark_config")
    if not isinstance(raw, str) or not raw.lstrip().startswith("{"):
        return
    config = _json_arg(ctx, "watermark_config")
    if not isinstance(config, dict):
        return
    # Defaults of the resolved fields: sglang/srt/arg_groups/fields/exec_.py:84-112.
    key, key_b = config.get("key"), config.get("key_b")
    window, mixing = config.get("context_window", 4), config.get("mixing_probability", 0.5)
    highest = config.get("max_probability", 1.0)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (mixing, highest))
    for bad, why, line in (
        (isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 64,
         f"context_window must be an integer from 1 to 64 (got {window!r})", 55),
        (key_b is not None and key is None, "key_b needs key", 57),
        (numbers and not 0 < mixing < 1, f"mixing_probability must be strictly between 0 and 1 (got {mixing})", 59),
        (numbers and key_b is None and mixing != 0.5, "mixing_probability other than 0.5 needs key_b", 63),
        (numbers and not 0 < highest <= 1, f"max_probability must be in (0, 1] (got {highest})", 65),
        ((config.get("default_enabled") is True or config.get("enforce_all") is True) and key is None,
         "default_enabled and enforce_all need key", 71),
    ):
        if bad:
            ctx.error("server.watermark", "watermark_config", f"watermark_config: {why}; SGLang refuses the launch.",
                      f"fix {ctx.var('watermark_config')}", f"{_VH}:{line}")
            return


@rule("server.http", since="0.5.23", shared=True, sources=(
    "sglang/srt/arg_groups/serving_hook.py:91",
))
def _http_reuseport(ctx: Context, report: Report) -> None:
    """enable_http_worker_reuseport needs tokenizer workers and HTTP/1 (serving_hook.py:91, new in 0.5.23)."""
    if ctx.is_set("enable_http_worker_reuseport") and (_int(ctx, "tokenizer_worker_num", 1) == 1 or ctx.is_set("enable_http2")):
        report.error("enable_http_worker_reuseport", "enable_http_worker_reuseport needs tokenizer_worker_num > 1 and has no "
                     "effect with enable_http2; SGLang refuses it.",
                     f"set {ctx.var('tokenizer_worker_num')} > 1 (without enable_http2), or remove "
                     f"{ctx.var('enable_http_worker_reuseport')}", f"{_SH}:91")


@rule("server.http", shared=True, sources=(
    "sglang/srt/arg_groups/serving_hook.py:88-120",
    "sglang/srt/arg_groups/serving_hook.py:98",
    "sglang/srt/arg_groups/serving_hook.py:102",
    "sglang/srt/arg_groups/serving_hook.py:116",
    "sglang/srt/arg_groups/serving_hook.py:110",
))
def _http(ctx: Context, report: Report) -> None:
    """handle_ssl_validation's HTTP server checks (sglang/srt/arg_groups/serving_hook.py:88-120).

    enable_http2 needs the granian package (SGLang's http2 extra), which SGLang imports at start-up and refuses the
    launch without (serving_hook.py:106-113). The validator cannot see the host's packages, but it knows what the
    project installs: roles/sglang installs sglang==<version> without extras, or the release's lock
    (roles/sglang/files/locks/), and neither brings granian, so every host it deploys refuses --enable-http2 (the
    seed-0 fuzzer's MISSED, issue 36; the conformance venv lacks granian too). A site that adds granian through
    sglang_extra_requirements is refused as well: deliberately stricter until the validator is told the host's extra
    requirements."""
    http2 = ctx.is_set("enable_http2")
    if not http2:
        return
    streams, window = _num(ctx, "http2_max_concurrent_streams"), _num(ctx, "http2_initial_connection_window_size")
    if streams is not None and not 0 < streams < 2**32:
        ctx.error("server.http", "http2_max_concurrent_streams", f"http2_max_concurrent_streams={streams} is outside "
                  "1..4294967295; SGLang refuses it.", f"set {ctx.var('http2_max_concurrent_streams')} in that range "
                  "(default 200)", f"{_SH}:98")
    if window is not None and not 1024 <= window < 2**31:
        ctx.error("server.http", "http2_initial_connection_window_size", f"http2_initial_connection_window_size={window} "
                  "is outside 1024..2147483647; SGLang refuses it.",
                  f"set {ctx.var('http2_initial_connection_window_size')} in that range (default 1048576)", f"{_SH}:102")
    if ctx.is_set("enable_ssl_refresh"):
        ctx.error("server.http", "enable_ssl_refresh", "enable_ssl_refresh with enable_http2: the HTTP/2 server "
                  "(Granian) cannot reload certificates; SGLang refuses the pair.",
                  f"remove {ctx.var('enable_ssl_refresh')} or {ctx.var('enable_http2')}", f"{_SH}:116")
    # After the pairs: SGLang tests the package between them (serving_hook.py:106-113), but a pair the host can fix
    # is named first.
    ctx.error("server.http", "enable_http2", "enable_http2 needs the granian package (sglang[http2]), which the project's "
              "SGLang install (sglang==<version> or the release's lock) does not include; SGLang refuses the launch without it.",
              f"remove {ctx.var('enable_http2')} (HTTP/1.1 with Uvicorn, SGLang's default)", f"{_SH}:110")


@rule("server.megakernel", since="0.5.23", file="sglang/srt/kernel_plugins/nvidia/binding.py", sources=(
    "sglang/srt/kernel_plugins/nvidia/binding.py:380",
))
def _nvidia_megakernel(ctx: Context, report: Report) -> None:
    """enable_nvidia_megakernel (new in 0.5.23) needs the sgl-nvidia-mega plugin: handle_nvidia_megakernel lists its
    absence as the reason and refuses the launch (binding.py:363-382, plugin_reasons :288-294); the reasons a plugin
    adds read the model's config and the GPU's ISA (the on-host preflight). As with HTTP/2 (server.http), the project's
    SGLang install (sglang==<version> or the release's lock) does not bring the plugin, so every host it deploys
    refuses the flag; a site that adds it through sglang_extra_requirements is refused as well, deliberately stricter
    until the validator is told the host's extra requirements. The CI sample's MISSED once the generator opened the
    handlers' gates (issue 36)."""
    if ctx.is_set("enable_nvidia_megakernel"):
        report.refuse("enable_nvidia_megakernel", "enable_nvidia_megakernel needs the sgl-nvidia-mega plugin, which the "
                      "project's SGLang install (sglang==<version> or the release's lock) does not include.",
                      f"remove {ctx.var('enable_nvidia_megakernel')}", 380)


@rule("server.grpc", shared=True, file=_SH, sources=(
    "sglang/srt/arg_groups/serving_hook.py:356-433",
    "sglang/srt/arg_groups/serving_hook.py:397",
    "sglang/srt/arg_groups/serving_hook.py:414",
    "sglang/srt/arg_groups/serving_hook.py:404",
    "sglang/srt/arg_groups/serving_hook.py:424",
    "sglang/srt/arg_groups/serving_hook.py:406",
    "sglang/srt/arg_groups/serving_hook.py:429",
    "sglang/srt/arg_groups/serving_hook.py:411",
))
def _grpc(ctx: Context, report: Report) -> None:
    """handle_deprecated_args' gRPC and sidecar checks (sglang/srt/arg_groups/serving_hook.py:356-433)."""
    legacy = ctx.is_set("smg_grpc_mode") or ctx.is_set("grpc_mode")
    port = ctx.args.get("grpc_port") if _given(ctx, "grpc_port") else None
    if port is None and ctx.env.get("SGLANG_GRPC_PORT"):
        port = ctx.env["SGLANG_GRPC_PORT"]
    if port is None and legacy:
        port = _int(ctx, "port", 30000) + 10000

    sidecar = ctx.args.get("sidecar") if _given(ctx, "sidecar") else None
    if _given(ctx, "sidecar_args") and sidecar is None:
        report.refuse("sidecar_args", "sidecar_args without sidecar.", f"set {ctx.var('sidecar')}, or remove "
                      f"{ctx.var('sidecar_args')}", 397)
    if sidecar is not None:
        if not str(sidecar).strip():
            report.refuse("sidecar", "sidecar is empty.", f"set {ctx.var('sidecar')} to the sidecar's command, or remove it", 404)
        elif legacy:
            report.refuse("sidecar", "sidecar needs SGLang's native gRPC server, not smg_grpc_mode / grpc_mode.",
                          "remove smg_grpc_mode / grpc_mode (and set grpc_port)", 406)
        elif port is None:
            report.refuse("sidecar", "sidecar needs grpc_port (or SGLANG_GRPC_PORT).", f"set {ctx.var('grpc_port')}", 411)
    if port is None or legacy:
        return
    if ctx.is_set("use_ray"):
        report.refuse("use_ray", "grpc_port (native gRPC) with use_ray: the Ray launch path does not start the gRPC server.",
                      f"remove {ctx.var('grpc_port')} or {ctx.var('use_ray')}", 414)
    elif _int(ctx, "tokenizer_worker_num", 1) > 1:
        report.refuse("tokenizer_worker_num", "native gRPC (grpc_port) does not support tokenizer_worker_num > 1.",
                      f"set {ctx.var('tokenizer_worker_num')}: 1, or remove {ctx.var('grpc_port')}", 424)
    elif ctx.is_set("api_key") or ctx.is_set("admin_api_key"):
        report.refuse("grpc_port", "grpc_port (native gRPC) with an API key: the gRPC listener bypasses the HTTP auth.",
                      f"remove {ctx.var('grpc_port')}, or serve without sglang_api_key / sglang_admin_api_key", 429)


# SamplingParams' fields (sglang/srt/sampling/sampling_params.py:140-200, the keyword arguments its constructor takes;
# 0.5.20 and 0.5.21 the same without watermark): what preferred_sampling_params may name under skip_tokenizer_init.
SAMPLING_PARAMS_FIELDS = frozenset((
    "beam_width", "custom_params", "ebnf", "ebnf_full_assistant", "frequency_penalty", "ignore_eos", "is_normalized",
    "json_schema", "logit_bias", "max_new_tokens", "min_new_tokens", "min_p", "n", "no_stop_trim", "presence_penalty",
    "regex", "repetition_penalty", "sampling_seed", "skip_special_tokens", "spaces_between_special_tokens", "stop",
    "stop_regex", "stop_regex_max_len", "stop_regex_strs", "stop_str_max_len", "stop_strs", "stop_token_ids",
    "stream_interval", "structural_tag", "temperature", "top_k", "top_p", "watermark"))


@rule("server.json_args", file=_SH, sources=(
    "sglang/srt/arg_groups/serving_hook.py:501",
    "sglang/srt/arg_groups/serving_hook.py:603",
    "sglang/srt/arg_groups/serving_hook.py:619",
    "sglang/srt/arg_groups/serving_hook.py:618",
    "sglang/srt/arg_groups/serving_hook.py:612",
    "sglang/srt/arg_groups/serving_hook.py:401",
    "sglang/srt/arg_groups/serving_hook.py:627",
    "sglang/srt/arg_groups/serving_hook.py:629",
))
def _json_args(ctx: Context, report: Report) -> None:
    """JSON arguments whose decoded shape SGLang checks (serving_hook.py)."""
    kwargs = _json_arg(ctx, "default_chat_template_kwargs")
    if _given(ctx, "default_chat_template_kwargs") and kwargs is not None and not isinstance(kwargs, dict):
        report.refuse("default_chat_template_kwargs", "default_chat_template_kwargs must be a JSON object (a mapping).",
                      f"write {ctx.var('default_chat_template_kwargs')} as a mapping, e.g. {{enable_thinking: false}}", 501)
    config = _json_arg(ctx, "mm_process_config")
    if _given(ctx, "mm_process_config") and config is not None:
        bad = [k for k in ("image", "video", "audio") if isinstance(config, dict) and k in config
               and not isinstance(config[k], dict)]
        if not isinstance(config, dict) or bad:
            report.refuse("mm_process_config", "mm_process_config must be a mapping" + (f", and {bad} mappings too" if bad else "")
                          + ".", f"write {ctx.var('mm_process_config')} as a mapping of modality to settings", 148 if not bad else 156)
    limits = _json_arg(ctx, "limit_mm_data_per_request")
    if isinstance(limits, dict) and limits and set(limits) - {"image", "video", "audio"}:
        report.refuse("limit_mm_data_per_request", f"limit_mm_data_per_request names {sorted(set(limits) - {'image', 'video', 'audio'})}; "
                      "the modalities are image, video and audio.", f"keep only those keys in {ctx.var('limit_mm_data_per_request')}",
                      603)
    raw = ctx.args.get("preferred_sampling_params")
    try:
        preferred = json.loads(raw) if isinstance(raw, str) else None  # the argument's own type (json.loads)
    except ValueError:
        preferred = None  # not JSON: the input checks of the JSON arguments
    if preferred:  # a false value (0, "", [], {}, null) is skipped (serving_hook.py:610)
        if isinstance(preferred, str):
            try:  # a JSON string is decoded once more (serving_hook.py:611-612; 0.5.20 and 0.5.21 :559-563)
                preferred = json.loads(preferred)
            except ValueError:
                report.refuse("preferred_sampling_params", f"preferred_sampling_params {raw} is a JSON string that is not "
                              "JSON itself (SGLang decodes a string once more).",
                              f"write {ctx.var('preferred_sampling_params')} as a mapping of sampling parameters",
                              release_line(ctx, {"0.5.23": "612", "0.5.22": "591", "0.5.20": "563"}))
                return
        # `"watermark" in` a number, a boolean or null is a TypeError (serving_hook.py:618; the fresh 2000-case run
        # of issue 36: "1"); a string is searched for the word.
        if added_in(ctx, "0.5.22") and not isinstance(preferred, (dict, list, str)):
            report.refuse("preferred_sampling_params", "preferred_sampling_params must be a JSON object (SGLang's "
                          f"watermark check fails with a TypeError on {raw}).",
                          f"write {ctx.var('preferred_sampling_params')} as a mapping of sampling parameters",
                          release_line(ctx, {"0.5.23": "618", "0.5.22": "597"}))
            return
    if added_in(ctx, "0.5.22") and isinstance(preferred, (dict, list, str)) and "watermark" in preferred:
        report.refuse("preferred_sampling_params", "preferred_sampling_params may not set watermark.",
                      f"remove watermark from {ctx.var('preferred_sampling_params')} (enable_watermark is the server's switch)", 619)
    elif preferred and not isinstance(preferred, dict) and ctx.is_set("skip_tokenizer_init"):
        # SamplingParams(**preferred) on a list, a string or (before 0.5.22, which has no watermark check) a number is
        # a TypeError, "argument after ** must be a mapping" (serving_hook.py:627; 0.5.22 :606, 0.5.20/0.5.21 :570;
        # the seed-10 10,000-case run's MISSED fuzz-10-04821: "[1, 2]").
        report.refuse("preferred_sampling_params", f"preferred_sampling_params {raw} is not a JSON object; with "
                      "skip_tokenizer_init SGLang builds SamplingParams from it, which needs a mapping.",
                      f"write {ctx.var('preferred_sampling_params')} as a mapping of sampling parameters",
                      release_line(ctx, {"0.5.23": "627", "0.5.22": "606", "0.5.20": "570"}))
    elif isinstance(preferred, dict) and ctx.is_set("skip_tokenizer_init"):
        # skip_tokenizer_init: SamplingParams(**preferred) refuses a key it does not have (a TypeError,
        # serving_hook.py:627; 0.5.22 :606, 0.5.20/0.5.21 :570), then .normalize(None) what needs the tokenizer
        # (serving_hook.py:629, sampling_params.py:432-464 raise_if_tokenizer_required; 0.5.22 :608, 0.5.20/0.5.21
        # :572; targeted-serving-45): stop strings, stop_regex patterns (a string counts as one) and min_new_tokens > 0.
        unknown = [k for k in preferred
                   if k not in SAMPLING_PARAMS_FIELDS or (k == "watermark" and not added_in(ctx, "0.5.22"))]
        if unknown:
            report.refuse("preferred_sampling_params", f"preferred_sampling_params sets {unknown[0]!r}, which is not a "
                          "sampling parameter (with skip_tokenizer_init SGLang builds SamplingParams from the defaults).",
                          f"remove {unknown[0]} from {ctx.var('preferred_sampling_params')}",
                          release_line(ctx, {"0.5.23": "627", "0.5.22": "606", "0.5.20": "570"}))
        stop, stop_regex, min_new = preferred.get("stop"), preferred.get("stop_regex"), preferred.get("min_new_tokens")
        needs = [f"{name}={value!r}" for name, value in (("stop", stop), ("stop_regex", stop_regex))
                 if isinstance(value, str) or (isinstance(value, list) and value)]
        if isinstance(min_new, int) and not isinstance(min_new, bool) and min_new > 0:
            needs.append(f"min_new_tokens={min_new}")
        if needs and not unknown:  # the constructor's TypeError comes first
            report.refuse("preferred_sampling_params", f"preferred_sampling_params sets {', '.join(needs)}, which needs "
                          "the tokenizer, and skip_tokenizer_init leaves none (SGLang's check of the defaults).",
                          f"remove {' and '.join(n.split('=')[0] for n in needs)} from "
                          f"{ctx.var('preferred_sampling_params')}, or serve without skip_tokenizer_init",
                          release_line(ctx, {"0.5.23": "629", "0.5.22": "608", "0.5.20": "572"}))
    sidecar_args = _json_arg(ctx, "sidecar_args")
    if _given(ctx, "sidecar_args") and _given(ctx, "sidecar") and sidecar_args is not None and not (
            isinstance(sidecar_args, list) and all(isinstance(a, str) for a in sidecar_args)):
        report.refuse("sidecar_args", "sidecar_args must be a JSON array of strings.",
                      f"write {ctx.var('sidecar_args')} as a list of strings", 401)


@rule("server.multi_item_scoring", sources=(
    "sglang/srt/arg_groups/attention_hook.py:573",
))
def _multi_item_scoring(ctx: Context, report: Report) -> None:
    """handle_multi_item_scoring (attention_hook.py:536-577): enable_mis needs flashinfer for prefill and decode, as the
    hooks before it have resolved them (resolved_attention_backends: a model override's pick for an unset backend, e.g.
    Qwen3-Next's triton on SM100, the seed-4 10,000-case run's MISSED fuzz-4-05272 and fuzz-4-01360)."""
    if not ctx.is_set("enable_mis"):
        return
    prefill, decode = resolved_attention_backends(ctx)
    bad = [b for b in (prefill, decode) if b is not None and b != "flashinfer"]
    if bad:
        picked = "" if _choice(ctx, "attention_backend", "") or bad[0] in (
            _choice(ctx, "prefill_attention_backend", ""), _choice(ctx, "decode_attention_backend", "")) else (
            f" (which SGLang picks for {ctx.model.architecture} on this GPU when attention_backend is unset)")
        if decode == "trtllm_mha" and _choice(ctx, "kv_cache_dtype", "") == "nvfp4":
            picked = " (kv_cache_dtype nvfp4 decodes with trtllm_mha: kv_cache_hook.py:77-89)"
        elif _choice(ctx, "device", "cuda") in ("cpu", "hpu") and bad[0] == "torch_native":
            picked = f" (device {_choice(ctx, 'device', 'cuda')}'s attention backend: platform_hook.py:158-183)"
        ctx.error("server.multi_item_scoring", "enable_mis", f"enable_mis (multi-item scoring) needs the flashinfer "
                  f"attention backend for prefill and decode (custom attention masks), not {bad[0]}{picked}. SGLang "
                  "refuses the launch.", f"set {ctx.var('attention_backend')}: flashinfer (and no other prefill / decode "
                  "backend), or remove enable_mis", f"{_AH}:573")


@rule("server.grpc", shared=True, file=_SH, sources=(
    "sglang/srt/arg_groups/serving_hook.py:388",
))
def _grpc_threads(ctx: Context, report: Report) -> None:
    """handle_deprecated_args' SGLANG_GRPC_WORKER_THREADS check (serving_hook.py:381-390), when gRPC is on."""
    legacy = ctx.is_set("smg_grpc_mode") or ctx.is_set("grpc_mode")
    if not (_given(ctx, "grpc_port") or ctx.env.get("SGLANG_GRPC_PORT") or legacy):
        return
    raw = ctx.env.get("SGLANG_GRPC_WORKER_THREADS")
    try:
        threads = int(raw) if raw is not None else None
    except ValueError:
        return  # EnvInt refuses it itself, elsewhere
    if threads is not None and threads < 1:
        report.refuse("sglang_env.SGLANG_GRPC_WORKER_THREADS", f"SGLANG_GRPC_WORKER_THREADS={raw} must be at least 1 "
                      "with the gRPC server on.", "set sglang_env.SGLANG_GRPC_WORKER_THREADS >= 1, or remove it (default 4)", 388)
