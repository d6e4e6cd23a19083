# SPDX-License-Identifier: Apache-2.0
"""The modules' GETs of the SGLang server on the host, in one place (server_probe, drift_probe, and the health check
of the server_state look).

Every GET here is the same kind of request: the server's own URL on the host, so

* TLS is verified (against ``ca_path`` when given, the system's trust store otherwise);
* no redirect is followed (a redirect's status comes back as the answer: nothing is read from where it points);
* no proxy is used, whatever ``http_proxy``/``https_proxy`` the task's environment holds (the roles set them for
  downloads; a local health check through a proxy would ask the proxy, not the server), and no ``.netrc``;
* ``Authorization: Bearer`` is sent only when an API key is given, and the key never appears in an error;
* the body is read bounded (``limit`` bytes, one more to tell "larger than").

No Ansible module object is needed (open_url only); tests/unit/test_sglang_http.py checks it against a real loopback
server.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
from typing import Any

from ansible.module_utils.urls import open_url

# The largest body read by default (a server's info answer is some KiB, its weights checksums a few hundred bytes per
# rank; Prometheus text, which is larger, passes its own limit).
MAX_BYTES = 8 << 20
# The longest error text returned (an exception's text can quote a whole answer).
MAX_ERROR_CHARS = 300


def _error(exc: BaseException, api_key: str | None) -> str:
    text = str(exc) or type(exc).__name__
    if api_key:
        text = text.replace(api_key, "********")
    return text[:MAX_ERROR_CHARS]


def get(url: str, *, timeout: float, ca_path: str | None = None, api_key: str | None = None,
        limit: int = MAX_BYTES) -> tuple[int, bytes, str | None]:
    """One GET of ``url``: (HTTP status, body, why the body is not usable or None).

    The body holds at most ``limit`` + 1 bytes; one more than ``limit`` gives the error ``larger than LIMIT bytes``.
    ``limit`` 0 reads no body (a status check). An HTTP error status (a redirect included) gives (status, empty body,
    ``HTTP STATUS``); nothing answered (no connection, a timeout, a certificate that does not verify, a malformed URL
    or answer) gives (-1, empty body, the error, at most MAX_ERROR_CHARS characters).
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with open_url(url, headers=headers, timeout=timeout, ca_path=ca_path or None, validate_certs=True,
                      follow_redirects="none", use_proxy=False, use_netrc=False) as response:
            status = response.status
            body = response.read(limit + 1) if limit > 0 else b""
    except urllib.error.HTTPError as exc:
        return exc.code, b"", f"HTTP {exc.code}"
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return -1, b"", _error(exc, api_key)
    if len(body) > limit:
        return status, body, f"larger than {limit} bytes"
    return status, body, None


def get_json(url: str, *, timeout: float, ca_path: str | None = None, api_key: str | None = None,
             limit: int = MAX_BYTES) -> tuple[int, Any, str | None]:
    """One GET of ``url`` (:func:`get`) read as JSON: (HTTP status, the JSON value or None, why it could not be read
    or None); ``not JSON: ...`` when the body does not parse."""
    status, body, error = get(url, timeout=timeout, ca_path=ca_path, api_key=api_key, limit=limit)
    if error is not None:
        return status, None, error
    try:
        return status, json.loads(body), None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        return status, None, f"not JSON: {exc}"[:MAX_ERROR_CHARS]
