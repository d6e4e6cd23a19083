#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: proof by a real request: one streaming OpenAI-API chat completion, timed."""

from __future__ import annotations

DOCUMENTATION = r"""
module: chat_probe
version_added: 0.1.0
short_description: Send one streaming chat completion to an SGLang server or router and time it
description:
  - Sends ONE OpenAI-API streaming chat completion (C(POST <url>/v1/chat/completions) with C(stream=true)
    and usage requested) with the API key, and reports time to first token, decode rate and total time.
  - Fails, with a message that says why, on an HTTP error (401 or 403 means the API key was refused), on a
    TLS certificate that does not verify against O(ca_path), on an error event in the stream, and when
    no token came back.
  - With O(server_info_url) it then reads that server's C(/server_info) with the same key and CA and
    returns SGLang's average speculative acceptance length, so that speculative decoding that is on but
    useless (close to 1.0) is visible.
  - With O(check_paths) it first GETs each of those paths of O(url) with the same key and CA; each must answer
    200 (a health gate's C(/health) and C(/v1/models) in the same module run as the completion).
  - With O(quality), the quality gate of a restart in the same module run, after the completion, on an SGLang server
    itself (not a router) - each prompt of O(quality.prompts) as a non-streaming chat completion at temperature 0 with
    O(quality.max_tokens), and with O(quality.weights) SGLang's C(GET /weights_checker) checksum (C(per_engine_checksum)).
    Compared with the answers and checksum the last good start recorded in O(quality.record) for the same key, and
    the checksum with O(quality.fleet). A difference fails the module, naming what differed. Nothing recorded for the
    key - status C(recorded), the gate passes. The record is read, never written (the caller writes the returned C(quality.record)
    after a good restart).
  - It changes nothing, so check mode sends the request too.
options:
  url:
    description: >-
      Base URL of the server or router, C(http[s]://host:port) (the request goes to
      C(<url>/v1/chat/completions)).
    type: str
    required: true
  api_key:
    description: >-
      API key, sent as C(Authorization: Bearer <api_key>); unset or empty, no header.
    type: str
  model:
    description: The C(model) of the request (the server's served model name).
    type: str
    required: true
  prompt:
    description: The user message.
    type: str
    default: Say hello in one short sentence.
  max_tokens:
    description: The request's C(max_tokens) (at least 1).
    type: int
    default: 32
  ca_path:
    description: >-
      PEM CA bundle that verifies the server's TLS certificate for https URLs (O(url) and
      O(server_info_url)); unset or empty, the system's CA store.
    type: path
  timeout:
    description: Seconds to wait for the connection and for each read of the answer.
    type: float
    default: 60
  use_proxy:
    description: Whether the C(https_proxy)/C(http_proxy)/C(no_proxy) environment applies, as for M(ansible.builtin.uri).
    type: bool
    default: true
  server_info_url:
    description: >-
      Base URL of the SGLang server itself (for a router, one of its workers) whose C(/server_info)
      (the older C(/get_server_info) where that answers 404) to read after the completion; unset, not read.
    type: str
  check_paths:
    description: >-
      Paths of O(url) (e.g. C(/health), C(/v1/models)) to GET, in order, before the completion, with the API key;
      any answer but 200 fails the module, naming the path.
    type: list
    elements: str
    default: []
  admin_api_key:
    description: >-
      The server's admin API key; SGLang then wants it, not O(api_key), for C(/weights_checker) (its admin-optional
      endpoints). Unset or empty, O(api_key).
    type: str
  quality:
    description: The quality gate's settings (see above); unset, no gate.
    type: dict
    suboptions:
      prompts:
        description: The fixed prompt set, each sent as one user message.
        type: list
        elements: str
        required: true
      max_tokens:
        description: The C(max_tokens) of each prompt's request (at least 1).
        type: int
        default: 16
      weights:
        description: Whether to read and compare the C(/weights_checker) checksum.
        type: bool
        default: true
      record:
        description: >-
          The host's record of the last good start (C(quality.json) in the instance's last-known-good directory);
          a missing file is no record.
        type: path
        required: true
      key:
        description: >-
          What the start is (C(model), C(revision), C(release), C(host_class), C(layout)): answers are compared for
          the same model, revision, host class and layout, the checksum for the same release too.
        type: dict
        required: true
      args:
        description: >-
          The server's launch arguments; their weight layout (tensor, pipeline, data and expert parallel sizes, DP
          attention, quantization, dtype, KV cache dtype) is the C(layout) of O(quality.key) where that has none.
        type: dict
        default: {}
      fleet:
        description: >-
          The checksums other instances of the run reported, each C(host), C(instance), C(key) (as the returned C(quality.key))
          and C(checksum); those with the same checksum key must match.
        type: list
        elements: dict
        default: []
notes:
  - Supports check mode (it changes nothing).
  - RV(tokens_per_s) is the decode rate after the first token, the completion tokens but one divided by the
    seconds between the first and the last token.
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Prove the server answers, through TLS and with the key
  blackwell.sglang.chat_probe:
    url: https://gpu-01.example:30000
    api_key: "{{ sglang_server_api_key }}"
    model: qwen3.5-397b
    ca_path: /etc/ssl/sglang/ca.pem
    server_info_url: https://gpu-01.example:30000
  register: proof

- name: Report it
  ansible.builtin.debug:
    msg: "TTFT {{ proof.ttft_s }} s, {{ proof.tokens_per_s }} tok/s, acceptance {{ proof.avg_spec_accept_length }}"
"""

RETURN = r"""
status:
  description: HTTP status of the completion request (-1 when nothing answered).
  type: int
  returned: always
ok:
  description: Whether the server returned at least one token.
  type: bool
  returned: always
completion_tokens:
  description: Tokens returned, from the answer's usage, else the number of chunks that carried text.
  type: int
  returned: always
ttft_s:
  description: Seconds from sending the request to the first token (null without a token).
  type: float
  returned: always
tokens_per_s:
  description: Decode rate after the first token in tokens per second (null with fewer than two tokens).
  type: float
  returned: always
total_s:
  description: Seconds from sending the request to the end of the answer.
  type: float
  returned: always
text:
  description: The first 80 characters of the answer.
  type: str
  returned: always
finish_reason:
  description: The answer's finish reason (C(stop), C(length), ...), or null.
  type: str
  returned: always
avg_spec_accept_length:
  description: >-
    SGLang's average accepted tokens per speculative verify step from C(/server_info)
    (C(internal_states[].avg_spec_accept_length), averaged over data-parallel ranks); null when
    speculative decoding is off, not reported yet, or O(server_info_url) is unset.
  type: float
  returned: always
speculative_algorithm:
  description: The server's C(speculative_algorithm) from C(/server_info) (null when off or not read).
  type: str
  returned: always
quality:
  description: >-
    The quality gate - C(status) (C(passed), C(recorded) when nothing was recorded for the key, C(failed)),
    C(differences) (each C(what) and C(detail)), C(compared), C(summary), C(answers) (prompt to answer),
    C(checksum) (null when not read), C(key) (C(answers) and C(checksum) keys) and C(record) (the record to keep if
    this start is kept as good).
  type: dict
  returned: with O(quality)
"""

import json
import ssl
import time
import urllib.error
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import SSLValidationError, open_url
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_quality import checksum_of, compare, layout, load


class ProbeError(Exception):
    """A failed probe: the message for the operator and the HTTP status (-1 when nothing answered)."""

    def __init__(self, message: str, status: int = -1) -> None:
        super().__init__(message)
        self.status = status


def _explain(exc: BaseException, url: str, ca_path: str | None, key_given: bool) -> ProbeError:
    """A ProbeError that says what went wrong with ``url`` (never the key itself)."""
    if isinstance(exc, urllib.error.HTTPError):
        try:
            body = exc.read(300).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            body = ""
        reason = f"HTTP {exc.code}" + (f": {body}" if body else "")
        if exc.code in (401, 403):
            key = "the API key was refused" if key_given else "the server wants an API key and none was given"
            return ProbeError(f"{url}: {reason}: {key} (api_key)", exc.code)
        return ProbeError(f"{url}: {reason}", exc.code)
    reason = getattr(exc, "reason", None) if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, (ssl.SSLError, ssl.CertificateError, SSLValidationError)):
        store = f"the CA file {ca_path} (ca_path)" if ca_path else "the system CA store (ca_path unset)"
        if isinstance(reason, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(reason):
            return ProbeError(f"{url}: TLS certificate verification against {store} failed: {reason}")
        return ProbeError(f"{url}: TLS error (CA: {store}): {reason}")
    return ProbeError(f"{url}: no answer: {reason}")


def _open(url: str, params: dict[str, Any], body: dict[str, Any] | None = None, key: str | None = None) -> Any:
    headers = {"Accept": "text/event-stream" if body is not None and body.get("stream") else "application/json"}
    key = key or params["api_key"]
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    return open_url(url, data=data, headers=headers, method="POST" if body is not None else "GET",
                    timeout=params["timeout"], validate_certs=True, ca_path=params["ca_path"] or None,
                    use_proxy=params["use_proxy"], follow_redirects="none", decompress=False, use_netrc=False)


def sse_events(response: Any) -> Any:
    """The ``data`` of each default-type (``message``) server-sent event, as it arrives."""
    event, data = "message", []
    for raw in iter(response.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data and event == "message":
                yield "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                event = value
    if data and event == "message":
        yield "\n".join(data)


def chat(params: dict[str, Any]) -> dict[str, Any]:
    """Send the streaming chat completion; the timings and what came back. Raises ProbeError."""
    url = params["url"].rstrip("/") + "/v1/chat/completions"
    body = {"model": params["model"], "messages": [{"role": "user", "content": params["prompt"]}],
            "max_tokens": params["max_tokens"], "stream": True, "stream_options": {"include_usage": True}}
    key_given = bool(params["api_key"])
    result: dict[str, Any] = {"status": -1, "finish_reason": None}
    started = time.monotonic()
    first = last = None
    parts: list[str] = []
    chunks, usage_tokens = 0, None
    try:
        with _open(url, params, body) as response:
            result["status"] = response.status
            if "text/event-stream" not in (response.headers.get("Content-Type") or ""):  # a non-streaming answer
                answer = json.loads(response.read() or b"{}")
                first = last = time.monotonic()
                choice = (answer.get("choices") or [{}])[0]
                content = (choice.get("message") or {}).get("content") or ""
                parts, chunks = [content], 1 if content else 0
                usage_tokens = (answer.get("usage") or {}).get("completion_tokens")
                result["finish_reason"] = choice.get("finish_reason")
            else:
                for data in sse_events(response):
                    if data.strip() == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("object") == "error" or "error" in chunk:
                        error = chunk.get("error") if isinstance(chunk.get("error"), dict) else chunk
                        raise ProbeError(f"{url}: error in the stream: {error.get('message') or error}", result["status"])
                    if isinstance(chunk.get("usage"), dict) and chunk["usage"].get("completion_tokens") is not None:
                        usage_tokens = chunk["usage"]["completion_tokens"]
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        piece = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
                        if piece or delta.get("tool_calls"):
                            last = time.monotonic()
                            first = first or last
                            chunks += 1
                            parts.append(piece)
                        if choice.get("finish_reason"):
                            result["finish_reason"] = choice["finish_reason"]
    except ProbeError:
        raise
    except ValueError as exc:  # JSON that does not parse
        raise ProbeError(f"{url}: not an OpenAI chat completion answer: {exc}", result["status"]) from None
    except (urllib.error.URLError, OSError, SSLValidationError) as exc:
        raise _explain(exc, url, params["ca_path"], key_given) from None
    ended = time.monotonic()
    tokens = int(usage_tokens) if isinstance(usage_tokens, int) else chunks
    text = "".join(parts)
    result.update(ok=tokens > 0 and first is not None, completion_tokens=tokens, total_s=round(ended - started, 4),
                  text=text[:80], ttft_s=None if first is None else round(first - started, 4))
    if first is not None and last is not None and tokens > 1 and last > first:
        result["tokens_per_s"] = round((tokens - 1) / (last - first), 2)
    return result


def check_paths(params: dict[str, Any]) -> list[int]:
    """GET each of ``params["check_paths"]`` of the url; their statuses, all 200. Raises ProbeError."""
    statuses = []
    key_given = bool(params["api_key"])
    for path in params["check_paths"]:
        url = params["url"].rstrip("/") + "/" + path.lstrip("/")
        try:
            with _open(url, params) as response:
                status = response.status
        except (urllib.error.URLError, OSError, SSLValidationError) as exc:
            raise _explain(exc, url, params["ca_path"], key_given) from None
        if status != 200:
            raise ProbeError(f"{url}: HTTP {status}, not 200", status)
        statuses.append(status)
    return statuses


def server_info(params: dict[str, Any]) -> dict[str, Any]:
    """``avg_spec_accept_length`` and ``speculative_algorithm`` from the server's /server_info. Raises ProbeError."""
    base = params["server_info_url"].rstrip("/")
    answer = None
    for path in ("/server_info", "/get_server_info"):
        url = base + path
        try:
            with _open(url, params) as response:
                answer = json.loads(response.read())
                break
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and path == "/server_info":
                continue
            raise _explain(exc, url, params["ca_path"], bool(params["api_key"])) from None
        except ValueError as exc:
            raise ProbeError(f"{url}: not JSON: {exc}") from None
        except (urllib.error.URLError, OSError, SSLValidationError) as exc:
            raise _explain(exc, url, params["ca_path"], bool(params["api_key"])) from None
    if not isinstance(answer, dict):
        raise ProbeError(f"{base}/server_info: not a JSON object")
    states = answer.get("internal_states") if isinstance(answer.get("internal_states"), list) else []
    values = [float(s["avg_spec_accept_length"]) for s in states if isinstance(s, dict)
              and isinstance(s.get("avg_spec_accept_length"), (int, float)) and not isinstance(s["avg_spec_accept_length"], bool)]
    algorithm = answer.get("speculative_algorithm")
    return {"avg_spec_accept_length": round(sum(values) / len(values), 4) if values else None,
            "speculative_algorithm": str(algorithm) if algorithm else None}


def ask(params: dict[str, Any], prompt: str, max_tokens: int) -> str:
    """One non-streaming chat completion of ``prompt`` at temperature 0: the answer's text. Raises ProbeError."""
    url = params["url"].rstrip("/") + "/v1/chat/completions"
    body = {"model": params["model"], "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": False}
    try:
        with _open(url, params, body) as response:
            answer = json.loads(response.read() or b"{}")
    except ValueError as exc:
        raise ProbeError(f"{url}: not an OpenAI chat completion answer: {exc}") from None
    except (urllib.error.URLError, OSError, SSLValidationError) as exc:
        raise _explain(exc, url, params["ca_path"], bool(params["api_key"])) from None
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ProbeError(f"{url}: no choice in the answer to the quality prompt {prompt[:40]!r}")
    message = choices[0].get("message") or {}
    return str(message.get("reasoning_content") or "") + str(message.get("content") or "")


def weights_checksum(params: dict[str, Any]) -> str:
    """SGLang's ``GET /weights_checker`` (action checksum): its ``per_engine_checksum``. Raises ProbeError."""
    url = params["url"].rstrip("/") + "/weights_checker"
    key = params["admin_api_key"] or params["api_key"]
    try:
        with _open(url, params, key=key) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise _explain(exc, url, params["ca_path"], bool(key)) from None
    except ValueError as exc:
        raise ProbeError(f"{url}: not JSON: {exc}") from None
    except (urllib.error.URLError, OSError, SSLValidationError) as exc:
        raise _explain(exc, url, params["ca_path"], bool(key)) from None
    checksum, _ = checksum_of(answer)
    if checksum is None:
        message = answer.get("message") if isinstance(answer, dict) else answer
        raise ProbeError(f"{url}: no weights checksum ({message}); turn the weights check off where the server cannot "
                         "compute it (sglang_server_quality_weights_checksum: false)")
    return checksum


def quality_gate(params: dict[str, Any]) -> dict[str, Any]:
    """The quality gate (see DOCUMENTATION): this start against the host's record and the fleet."""
    gate = params["quality"]
    answers = {prompt: ask(params, prompt, gate["max_tokens"]) for prompt in dict.fromkeys(gate["prompts"])}
    checksum = weights_checksum(params) if gate["weights"] else None
    try:
        with open(gate["record"], encoding="utf-8") as handle:
            text: str | None = handle.read()
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise ProbeError(f"{gate['record']}: cannot read the quality record: {exc}") from None
    record, unread = load(text)
    key = {"layout": layout(gate["args"]), **gate["key"]}
    outcome = compare(record, key, answers, checksum, gate["fleet"])
    if unread:
        outcome["summary"] += f" (the record {gate['record']} was {unread}: read as empty)"
    outcome.update(answers=answers, checksum=checksum)
    return outcome


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "model": {"type": "str", "required": True},
            "prompt": {"type": "str", "default": "Say hello in one short sentence."},
            "max_tokens": {"type": "int", "default": 32},
            "ca_path": {"type": "path"},
            "timeout": {"type": "float", "default": 60},
            "use_proxy": {"type": "bool", "default": True},
            "server_info_url": {"type": "str"},
            "check_paths": {"type": "list", "elements": "str", "default": []},
            "admin_api_key": {"type": "str", "no_log": True},
            "quality": {"type": "dict", "options": {
                "prompts": {"type": "list", "elements": "str", "required": True},
                "max_tokens": {"type": "int", "default": 16},
                "weights": {"type": "bool", "default": True},
                "record": {"type": "path", "required": True},
                "key": {"type": "dict", "required": True},
                "args": {"type": "dict", "default": {}},
                "fleet": {"type": "list", "elements": "dict", "default": []},
            }},
        },
        supports_check_mode=True,
    )
    params = module.params
    for name in ("url", "server_info_url"):
        value = params[name]
        if value is not None and not value.lower().startswith(("http://", "https://")):
            module.fail_json(msg=f"{name} must be an http:// or https:// URL, got {value!r}")
    if params["max_tokens"] < 1:
        module.fail_json(msg=f"max_tokens must be at least 1, got {params['max_tokens']}")
    if params["timeout"] <= 0:
        module.fail_json(msg=f"timeout must be more than 0, got {params['timeout']}")
    if params["quality"] is not None and (params["quality"]["max_tokens"] < 1 or not params["quality"]["prompts"]):
        module.fail_json(msg="quality needs at least one prompt and max_tokens of at least 1")
    result: dict[str, Any] = {"changed": False, "status": -1, "ok": False, "completion_tokens": 0, "ttft_s": None,
                              "tokens_per_s": None, "total_s": None, "text": "", "finish_reason": None,
                              "avg_spec_accept_length": None, "speculative_algorithm": None}
    try:
        check_paths(params)
        result.update(chat(params))
        if not result["ok"]:
            raise ProbeError(f"{params['url']}: HTTP {result['status']} but no token came back "
                             f"(finish_reason {result['finish_reason']})", result["status"])
        if params["server_info_url"]:
            result.update(server_info(params))
        if params["quality"] is not None:
            result["quality"] = quality_gate(params)
            if result["quality"]["status"] == "failed":
                raise ProbeError(f"{params['url']}: {result['quality']['summary']}", result["status"])
    except ProbeError as exc:
        if result["status"] == -1:
            result["status"] = exc.status
        module.fail_json(msg=str(exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
