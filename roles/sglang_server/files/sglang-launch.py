#!/usr/bin/env python3
"""Run `python -m sglang.launch_server ARGS` with the service's secrets redacted from its output.

SGLang logs its server_args, API keys included, when it starts. The unit runs this launcher
instead of SGLang directly: it reads the secret values from the --config file named in ARGS
(the file only holds secrets) and HF_TOKEN plus the variables named in SGLANG_REDACT_ENV from the
environment, starts SGLang with stdout and
stderr on one pipe, and copies every line to its own stdout (the journal) with each secret
replaced by "<redacted>". SIGTERM, SIGINT and SIGHUP are passed on to SGLang; its exit status
becomes the launcher's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import yaml  # SGLang reads the same file with PyYAML: every SGLang virtualenv has it

REDACTED = b"<redacted>"
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Comma-separated names of further environment variables holding secrets (the role writes it).
REDACT_VARIABLE = "SGLANG_REDACT_ENV"


def config_secrets(argv: list[str]) -> list[str]:
    """Values of the --config YAML (a flat mapping of option names to secrets, the role's to_nice_yaml)."""
    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        return []
    with open(argv[argv.index("--config") + 1], encoding="utf-8") as handle:
        config = yaml.safe_load(handle) or {}
    if not isinstance(config, dict):
        raise ValueError(f"the --config file holds a {type(config).__name__}, not a mapping of option names to values")
    return [str(value) for value in config.values() if value is not None and str(value)]


def redact(line: bytes, secrets: list[bytes]) -> bytes:
    """The line with every secret replaced."""
    for secret in secrets:
        line = line.replace(secret, REDACTED)
    return line


def main(argv: list[str]) -> int:
    names = set(TOKEN_VARIABLES) | {n for n in os.environ.get(REDACT_VARIABLE, "").split(",") if n}
    secrets = config_secrets(argv) + [os.environ[v] for v in sorted(names) if os.environ.get(v)]
    # Longest first, so a secret containing another is replaced whole.
    encoded = sorted({s.encode() for s in secrets if len(s) >= 4}, key=len, reverse=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    out = sys.stdout.buffer
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        out.write(redact(line, encoded))
        out.flush()
    code = proc.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
