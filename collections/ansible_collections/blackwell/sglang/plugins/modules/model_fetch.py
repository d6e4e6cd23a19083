#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: copy a model snapshot from a peer host, resumable, every file checked against its manifest."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_fetch
version_added: 0.2.0
short_description: Copy a verified model snapshot from a peer host over HTTP, resumable, checked file by file
description:
  - Fetches each file of O(files) from O(url) (a peer's read-only model server, roles/sglang's
    C(sglang-model-peer)) into O(dest), with C(Authorization Bearer) O(token).
  - A file already in O(dest) with the manifest's size and SHA-256 is kept and not fetched. Others are fetched into
    O(dest)C(/.sglang-peer-partial/) and moved into place only once their size and SHA-256 match the manifest; an
    interrupted copy resumes from the bytes already there (HTTP Range), the partial bytes count towards the hash.
  - The manifest comes from the control node (the seeding host's check against the Hub's own metadata), never from
    the peer, so a peer cannot vouch for its own files.
  - Never fails on the peer's account. An unreachable peer, an HTTP error or a checksum mismatch returns
    RV(complete=false) and RV(error), so that the role falls back to the Hub. A file whose bytes do not match is
    removed and the other files are still fetched (the Hub then only sends that one); an unreachable or refusing
    peer stops the copy at once. A cut transfer is resumed twice before the peer is given up.
  - Proxy variables of the environment are ignored (peers are reached over the inventory's own network).
options:
  dest:
    description: The model directory (it must exist).
    type: path
    required: true
  url:
    description: Base URL of the snapshot on the peer, ending in C(/); each file is O(url) + its path.
    type: str
    required: true
  token:
    description: The distribution's bearer token (never logged).
    type: str
    required: true
  files:
    description: The manifest's files.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Path relative to the snapshot (no C(..), not absolute).
        type: str
        required: true
      size:
        description: Size in bytes.
        type: int
        required: true
      sha256:
        description: SHA-256, hex.
        type: str
        required: true
  timeout:
    description: Seconds without progress before a connection is given up.
    type: int
    default: 60
  mode:
    description: Mode of the files written.
    type: raw
    default: "0644"
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Reports whether files would be copied and copies none.
  diff_mode:
    support: none
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Copy the model from a peer
  blackwell.sglang.model_fetch:
    dest: /opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4
    url: http://10.0.0.11:30990/0123456789abcdef/
    token: "{{ distribution_token }}"
    files: "{{ manifest.files }}"
  register: fetched
"""

RETURN = r"""
complete:
  description: Every file of the manifest is in O(dest) with its size and SHA-256.
  type: bool
  returned: always
fetched:
  description: Paths fetched (or, in check mode, that would be).
  type: list
  elements: str
  returned: always
bytes:
  description: Bytes received from the peer by the attempts that completed a file.
  type: int
  returned: always
resumed_bytes:
  description: Bytes of partial files (an earlier run's or attempt's) that were resumed, not fetched again.
  type: int
  returned: always
error:
  description: Why the copy is not complete (null when it is).
  type: str
  returned: always
"""

import hashlib
import os
import shutil
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url

PARTIAL = ".sglang-peer-partial"
CHUNK = 1 << 20


class FetchError(Exception):
    """The peer could not deliver a file intact: the role falls back to the Hub."""


class CutError(FetchError):
    """The transfer stopped part way: what arrived is kept and the next try resumes it."""


class ChecksumError(FetchError):
    """The peer delivered other bytes than the manifest's: not worth another try."""


def safe_relpath(path: str) -> str:
    """``path`` if it names a file inside the snapshot; ValueError otherwise."""
    parts = path.split("/")
    if (not path or path.startswith("/") or "\\" in path or "\0" in path
            or any(p in ("", ".", "..") for p in parts) or parts[0] == PARTIAL):
        raise ValueError(f"not a file path inside the snapshot: {path!r}")
    return path


def sha256_file(path: str, hasher: Any = None) -> Any:
    """``hasher`` (a new SHA-256 when None) updated with the file's bytes."""
    hasher = hasher or hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            hasher.update(chunk)
    return hasher


def intact(path: str, size: int, sha256: str) -> bool:
    """``path`` exists with ``size`` bytes and SHA-256 ``sha256``."""
    try:
        if os.path.getsize(path) != size:
            return False
    except OSError:
        return False
    return sha256_file(path).hexdigest() == sha256.lower()


# (url, headers, timeout) -> a response with .status, .read(n) and a context manager.
Opener = Callable[[str, dict[str, str], float], Any]


def default_opener(url: str, headers: dict[str, str], timeout: float) -> Any:
    """Ansible's ``open_url`` without proxies (the peers are on the inventory's network) and without redirects."""
    return open_url(url, headers=headers, timeout=timeout, use_proxy=False, follow_redirects="none")


def fetch_file(opener: Opener, url: str, token: str, partial: str, size: int, sha256: str,
               timeout: float) -> tuple[int, int]:
    """Fetch ``url`` into ``partial`` (resuming it), check size and SHA-256: (bytes received, bytes resumed).

    Raises FetchError; a partial file that cannot be right (too long, wrong hash) is removed first.
    """
    have = os.path.getsize(partial) if os.path.exists(partial) else 0
    if have > size:
        os.unlink(partial)
        have = 0
    hasher = sha256_file(partial) if have else hashlib.sha256()
    received = 0
    if have < size:
        headers = {"Authorization": f"Bearer {token}"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            response = opener(url, headers, timeout)
        except urllib.error.HTTPError as exc:
            raise FetchError(f"{url}: HTTP {exc.code}") from None
        except (urllib.error.URLError, UrlsConnectionError, OSError) as exc:
            raise FetchError(f"{url}: {getattr(exc, 'reason', exc)}") from None
        with response:
            status = getattr(response, "status", 200)
            if have and status != 206:  # the peer sent the whole file: start over
                have, hasher = 0, hashlib.sha256()
            try:
                with open(partial, "ab" if have else "wb") as out:
                    for chunk in iter(lambda: response.read(CHUNK), b""):
                        if have + received + len(chunk) > size:
                            raise ChecksumError(f"{url}: the peer sent more than the manifest's {size} bytes")
                        out.write(chunk)
                        hasher.update(chunk)
                        received += len(chunk)
            except (OSError, urllib.error.URLError) as exc:  # cut: what arrived stays for the next try
                raise CutError(f"{url}: interrupted after {have + received} of {size} bytes: {exc}") from None
    if have + received != size:
        raise CutError(f"{url}: {have + received} of {size} bytes")
    if hasher.hexdigest() != sha256.lower():
        os.unlink(partial)
        raise ChecksumError(f"{url}: SHA-256 {hasher.hexdigest()} is not the manifest's {sha256.lower()}")
    return received, have


def fetch(dest: str, url: str, token: str, files: Sequence[Mapping[str, Any]], timeout: float = 60,
          mode: int = 0o644, check_mode: bool = False, opener: Opener | None = None, retries: int = 2) -> dict[str, Any]:
    """Fetch what ``dest`` lacks of ``files`` from ``url``; the module's result.

    A cut transfer is resumed up to ``retries`` times; a checksum mismatch or a refused request is not retried.
    """
    opener = opener or default_opener
    todo = []
    for entry in files:
        rel = safe_relpath(str(entry["path"]))
        if not intact(os.path.join(dest, rel), int(entry["size"]), str(entry["sha256"])):
            todo.append((rel, int(entry["size"]), str(entry["sha256"])))
    result: dict[str, Any] = {"changed": bool(todo), "complete": not todo, "fetched": [rel for rel, _, _ in todo],
                              "bytes": 0, "resumed_bytes": 0, "error": None}
    if check_mode or not todo:
        return result
    result["fetched"] = []
    errors: list[str] = []
    partial_root = os.path.join(dest, PARTIAL)
    for rel, size, sha256 in todo:
        partial = os.path.join(partial_root, rel)
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        error: FetchError | None = None
        for _ in range(retries + 1):
            try:
                received, resumed = fetch_file(opener, url + rel, token, partial, size, sha256, timeout)
                error = None
                break
            except CutError as exc:  # resume it, a few times
                error = exc
            except FetchError as exc:
                error = exc
                break
        if isinstance(error, ChecksumError):  # this file from the Hub; the others may still come from the peer
            errors.append(str(error))
            continue
        if error is not None:  # the peer is gone, refuses or keeps cutting: stop asking it
            errors.append(str(error))
            break
        result["bytes"] += received
        result["resumed_bytes"] += resumed
        final = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.chmod(partial, mode)
        os.replace(partial, final)
        result["fetched"].append(rel)
    if errors:
        result.update(complete=False, error="; ".join(errors))
        return result
    shutil.rmtree(partial_root, ignore_errors=True)
    result["complete"] = True
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "url": {"type": "str", "required": True},
            "token": {"type": "str", "required": True, "no_log": True},
            "files": {"type": "list", "elements": "dict", "required": True, "options": {
                "path": {"type": "str", "required": True},
                "size": {"type": "int", "required": True},
                "sha256": {"type": "str", "required": True},
            }},
            "timeout": {"type": "int", "default": 60},
            "mode": {"type": "raw", "default": "0644"},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not params["url"].startswith(("http://", "https://")) or not params["url"].endswith("/"):
        module.fail_json(msg=f"url must be an http(s) URL ending in /: {params['url']!r}")
    if not os.path.isdir(params["dest"]):
        module.fail_json(msg=f"{params['dest']}: no such directory")
    mode = params["mode"]
    try:
        mode = int(str(mode), 8) if isinstance(mode, str) else int(mode)
        result = fetch(params["dest"], params["url"], params["token"], params["files"], params["timeout"],
                       mode, module.check_mode)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"{params['dest']}: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
