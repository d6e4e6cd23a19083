#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: what one SGLang instance runs, for the drift report, in one module run on its host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: drift_probe
version_added: 0.3.0
short_description: Read what an SGLang instance runs for the drift report (health, /server_info, weights, startup)
description:
  - One look at an SGLang instance for C(playbooks/drift.yml), in one module run on its host (no round trip per
    endpoint). Never fails for a server that is down or an endpoint that does not answer; each read says why it could
    not be made.
  - Fetches O(url) (its health). Once that answers 200, reads the values of O(info_keys) from C(/server_info) beside it
    (the arguments SGLang resolved, the release, the weight version), and with O(weights) SGLang's
    C(GET /weights_checker) checksum of the loaded weights (C(per_engine_checksum); SGLang 0.5.23
    sglang/srt/entrypoints/http_server.py:1599-1618).
  - Reads the host's record of good starts (O(startup_record), C(startup.json) in the instance's last-known-good
    directory, which the restart keeps) and returns the last good start of O(startup_key) (model, revision, release,
    host class).
options:
  url:
    description: Health URL of the instance, e.g. http://127.0.0.1:30000/ready.
    type: str
    required: true
  info_keys:
    description: >-
      The keys of C(/server_info)'s JSON to return; only these are returned (C(/server_info) also holds the API key
      and other secrets of the server's arguments).
    type: list
    elements: str
    default: []
  api_key:
    description: "The server's API key, sent as C(Authorization: Bearer). Kept out of the output."
    type: str
  admin_api_key:
    description: >-
      The server's admin API key; SGLang then wants it, not O(api_key), for C(/weights_checker) (its admin-optional
      endpoints). Unset or empty, O(api_key).
    type: str
  ca_path:
    description: PEM CA bundle that verifies the server's TLS certificate when O(url) is https; unset, the system's store.
    type: str
  timeout:
    description: HTTP timeout in seconds of each read (C(/weights_checker) hashes every loaded tensor).
    type: float
    default: 60
  weights:
    description: Whether to read C(/weights_checker) (off where the server cannot compute it).
    type: bool
    default: true
  startup_record:
    description: The host's record of good starts (C(startup.json)); unset, not read. A missing file is no record.
    type: path
  startup_key:
    description: The start to look up in O(startup_record) (C(model), C(revision), C(release), C(host_class)).
    type: dict
    default: {}
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read what the instance runs
  blackwell.sglang.drift_probe:
    url: https://127.0.0.1:30000/ready
    info_keys: [version, weight_version, tp_size]
    ca_path: /etc/ssl/sglang/ca.pem
    startup_record: /etc/sglang/last-good/startup.json
    startup_key: {model: /models/qwen, revision: main, release: 0.5.23, host_class: b200x8}
  register: running
"""

RETURN = r"""
status:
  description: HTTP status of O(url), or -1 when nothing answered.
  type: int
  returned: always
info:
  description: The values of O(info_keys) in C(/server_info) (a key it lacks is left out), once O(url) answered 200.
  type: dict
  returned: always
info_error:
  description: Why C(/server_info) could not be read (null when it was, or the server was not healthy).
  type: str
  returned: always
weights_checksum:
  description: SGLang's C(per_engine_checksum) from C(/weights_checker), or null.
  type: str
  returned: always
weights_error:
  description: Why the checksum could not be read (null when it was, or was not asked for).
  type: str
  returned: always
startup:
  description: >-
    The last good start of O(startup_key) in O(startup_record) (C(seconds), C(release), C(at), C(source)), or null
    when the record holds none.
  type: dict
  returned: always
"""

from collections.abc import Mapping
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_http import get_json
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_quality import checksum_of
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_startup import KEY_FIELDS, read_record, usable_records


def base_url(url: str) -> str:
    """``scheme://host:port`` of a URL (the health URL's server)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def last_start(history: Any, key: Mapping[str, Any]) -> dict[str, Any] | None:
    """The newest good start of ``key`` in a ``startup.json`` document (:func:`sglang_startup.usable_records`), as
    ``{seconds, release, at, source}``; None when it holds none."""
    wanted = {f: "" if key.get(f) is None else str(key.get(f)) for f in KEY_FIELDS}
    for record in usable_records(history):
        if all(record[f] == wanted[f] for f in KEY_FIELDS):
            return {"seconds": float(record["seconds"]), "release": record["release"], "at": str(record.get("at") or ""),
                    "source": str(record.get("source") or "")}
    return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "info_keys": {"type": "list", "elements": "str", "default": [], "no_log": False},  # key names, not keys
            "api_key": {"type": "str", "no_log": True},
            "admin_api_key": {"type": "str", "no_log": True},
            "ca_path": {"type": "str"},
            "timeout": {"type": "float", "default": 60},
            "weights": {"type": "bool", "default": True},
            "startup_record": {"type": "path"},
            "startup_key": {"type": "dict", "default": {}, "no_log": False},  # model, revision, release, host class
        },
        supports_check_mode=True,
    )
    p = module.params
    if not p["url"].lower().startswith(("http://", "https://")):
        module.fail_json(msg=f"url must be an http:// or https:// URL, got {p['url']!r}")
    base = base_url(p["url"])
    status, _, error = get_json(p["url"], api_key=p["api_key"], timeout=p["timeout"], ca_path=p["ca_path"])
    if error and error.startswith("not JSON"):  # a health answer needs no JSON body
        error = None
    info, info_error, checksum, weights_error = None, None, None, None
    if status == 200:
        _, body, info_error = get_json(f"{base}/server_info", api_key=p["api_key"], timeout=p["timeout"], ca_path=p["ca_path"])
        if info_error is None and not isinstance(body, Mapping):
            info_error = "not a JSON object"
        if info_error is None:
            info = {key: body[key] for key in p["info_keys"] if key in body}
        if p["weights"]:
            key = p["admin_api_key"] or p["api_key"]
            _, answer, weights_error = get_json(f"{base}/weights_checker", api_key=key, timeout=p["timeout"], ca_path=p["ca_path"])
            if weights_error is None:
                checksum, weights_error = checksum_of(answer)
    startup = last_start(read_record(p["startup_record"] or ""), p["startup_key"]) if p["startup_record"] else None
    module.exit_json(changed=False, status=status, error=error, info=info, info_error=info_error,
                     weights_checksum=checksum, weights_error=weights_error, startup=startup)


if __name__ == "__main__":
    main()
