#!/usr/bin/env python3
# Installed by roles/sglang (blackwell-sglang-ansible); run as the unit sglang-model-peer while a model is distributed.
"""Serve verified model snapshots to the other hosts of the fleet: read-only, allow-listed, with a bearer token.

Usage: sglang-model-peer CONFIG

CONFIG (JSON, re-read when it changes): bind (the host's inventory address), port, token_file, and models:
{KEY: {dir, files: [path, ...]}}. Answers GET and HEAD of /KEY/PATH for exactly the files listed (a manifest
the role checked against the Hub's metadata), nothing else: no directory listing, no other file of the
directory, no write method. Every request needs "Authorization: Bearer <token>" (the token file's content,
a secret of the one distribution run); Range requests are answered (resumable copies). Stdlib only.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

CHUNK = 1 << 20


class Config:
    """The configuration file, re-read when its modification time changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime = -1.0
        self._lock = threading.Lock()
        self.data: dict[str, Any] = {}
        self.token = b""
        self.reload()

    def reload(self) -> None:
        with self._lock:
            mtime = os.stat(self.path).st_mtime
            if mtime == self._mtime:
                return
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
            with open(data["token_file"], "rb") as fh:
                token = fh.read().strip()
            if not token:
                raise ValueError(f"{data['token_file']}: empty token")
            self.data, self.token, self._mtime = data, token, mtime

    def lookup(self, key: str, rel: str) -> str | None:
        """The file ``rel`` of model ``key`` when it is listed, inside the model directory, else None."""
        model = self.data.get("models", {}).get(key)
        if not isinstance(model, dict) or rel not in model.get("files", []):
            return None
        root = os.path.realpath(model["dir"])
        path = os.path.realpath(os.path.join(root, rel))
        return path if path.startswith(root + os.sep) and os.path.isfile(path) else None


class Handler(BaseHTTPRequestHandler):
    server_version = "sglang-model-peer"
    sys_version = ""
    config: Config

    def log_message(self, fmt: str, *args: Any) -> None:  # the journal; never a header (the token)
        sys.stdout.write(f"{self.client_address[0]} {fmt % args}\n")
        sys.stdout.flush()

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(head=False)

    def _reply(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, head: bool) -> None:
        try:
            self.config.reload()
        except (OSError, ValueError, KeyError):
            return self._reply(503)
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), b"Bearer " + self.config.token):
            return self._reply(401, {"WWW-Authenticate": "Bearer"})
        m = re.fullmatch(r"/([0-9a-f]{16})/(.+)", unquote(urlsplit(self.path).path))
        path = self.config.lookup(m.group(1), m.group(2)) if m else None
        if path is None:
            return self._reply(404)
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            start, end, status = 0, size - 1, 200
            headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            rng = self.headers.get("Range")
            if rng:
                r = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not r or int(r.group(1)) >= size:
                    return self._reply(416, {"Content-Range": f"bytes */{size}"})
                start = int(r.group(1))
                end = min(int(r.group(2)), size - 1) if r.group(2) else size - 1
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            headers["Content-Length"] = str(end - start + 1)
            self._reply(status, headers)
            if head:
                return None
            fh.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = fh.read(min(CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
        return None


def make_server(config: Config) -> ThreadingHTTPServer:
    bind, port = config.data["bind"], int(config.data["port"])
    family = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("PeerServer", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    Handler.config = config
    return server_class((bind, port), Handler)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(__doc__ or "")
        return 2
    server = make_server(Config(argv[1]))
    print(f"sglang-model-peer: serving on {server.server_address[0]}:{server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
