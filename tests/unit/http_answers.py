# SPDX-License-Identifier: Apache-2.0
"""A real HTTP server on loopback for the unit tests of the modules that read one (server_probe), and the module itself.

``serving(answer)`` runs ``http.server`` on 127.0.0.1 (a free port) for the ``with`` block; each GET is answered by
``answer(request)`` -> (status, body), where ``request`` is the handler (its ``path`` and ``headers``).
``module(name)`` loads a module file of the collection (``plugins/modules/NAME.py``) as the host would run it.
"""

from __future__ import annotations

import http.server
import importlib.util
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

MODULES = Path(__file__).resolve().parents[2] / "collections/ansible_collections/blackwell/sglang/plugins/modules"


@contextmanager
def serving(answer: Callable[[http.server.BaseHTTPRequestHandler], tuple[int, bytes]]) -> Iterator[int]:
    """The port of a loopback HTTP server answering each GET with ``answer``; stopped when the block ends."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            status, body = answer(self)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def module(name: str) -> ModuleType:
    """plugins/modules/NAME.py, loaded from its file."""
    spec = importlib.util.spec_from_file_location(f"_{name}", MODULES / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(loaded)  # type: ignore[union-attr]
    return loaded
