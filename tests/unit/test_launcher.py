"""roles/sglang_server/files/sglang-launch.py: secrets out of the journal, signals passed on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "roles" / "sglang_server" / "files" / "sglang-launch.py"
FAKE_SERVER = '''
import signal, sys, time
print("server_args=ServerArgs(" + repr(sys.argv[1:]) + ", api_key='canary-api-key-123', token='hf_canary_token')", flush=True)
print("stderr line with canary-api-key-123", file=sys.stderr, flush=True)
def stop(*_):
    print("draining; bye", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
if "--exit" in sys.argv:
    sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
print("ready", flush=True)
while True:
    time.sleep(0.1)
'''


@pytest.fixture()
def fake_sglang(tmp_path: Path) -> dict[str, str]:
    package = tmp_path / "site" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text(FAKE_SERVER)
    config = tmp_path / "secrets.yaml"
    config.write_text('# managed\napi-key: "canary-api-key-123"\n')
    return {"PYTHONPATH": str(tmp_path / "site"), "config": str(config)}


def start(fake: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": fake["PYTHONPATH"], "HF_TOKEN": "hf_canary_token"}
    return subprocess.Popen([sys.executable, str(LAUNCHER), "--model-path", "m", "--config", fake["config"], *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_secrets_are_redacted_from_stdout_and_stderr(fake_sglang: dict[str, str]) -> None:
    proc = start(fake_sglang, "--exit", "3")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert b"canary-api-key-123" not in out + err and b"hf_canary_token" not in out + err
    assert out.count(b"<redacted>") == 3
    assert b"--model-path" in out and b"stderr line with <redacted>" in out


def test_sigterm_reaches_the_server_which_drains(fake_sglang: dict[str, str]) -> None:
    proc = start(fake_sglang)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while b"ready" not in proc.stdout.readline():
        assert time.monotonic() < deadline
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert b"draining; bye" in out
    assert proc.returncode == 0


def test_secret_environment_named_by_the_role_is_redacted(fake_sglang: dict[str, str]) -> None:
    # The role lists the secret sglang_env entries (*_TOKEN, *_KEY, *_PASSWORD ...) in SGLANG_REDACT_ENV.
    code = 'import os; print("key=" + os.environ["WANDB_API_KEY"] + " other=" + os.environ["PLAIN"], flush=True)'
    (Path(fake_sglang["PYTHONPATH"]) / "sglang" / "launch_server.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": fake_sglang["PYTHONPATH"], "WANDB_API_KEY": "wandb-canary-9f8e",
           "PLAIN": "visible-value", "SGLANG_REDACT_ENV": "WANDB_API_KEY"}
    proc = subprocess.run([sys.executable, str(LAUNCHER), "--model-path", "m"], capture_output=True, env=env, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"key=<redacted> other=visible-value\n"
