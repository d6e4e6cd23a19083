"""A running sglang-router 0.3.2 gateway moves to smg 1.13.0 in place while clients send requests (issue 32).

The fleet's gateway is first taken to sglang-router 0.3.2 (``sglang_router_gateway: sglang-router``, a plain restart).
Then ``deploy.yml --tags router`` with ``sglang_router_gateway: smg`` and ``sglang_router_handover: true`` moves it to
smg through roles/sglang_router's handover (tasks/handover.yml: a second unit on the handover port, an nftables
redirect of new connections, the old gateway's graceful stop, smg on the gateway's own port, the redirect removed)
while three clients send chat completions through the gateway's address, each checked for a 200 with choices:

* a remote client on the scenario's network (a GPU host's network namespace is not needed: the controller is on the
  bridge), a new TLS connection per request (the nat prerouting path);
* a remote client on one keep-alive connection, reconnecting when the gateway closed it (as every HTTP/1.1 client
  must for an idle timeout: urllib3 checks the socket before reuse, and a "Connection: close" answer ends it);
* a client on the gateway host itself, curl to 127.0.0.1 (the nat output path).

Not one request may fail. Afterwards smg serves on the same address and port with every worker healthy, the redirect
and the second unit are gone, and a second run of the play changes nothing. The cases run in file order and leave the
gateway as the converge made it (smg 1.13.0, the fleet's four GPU hosts).
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import select
import shutil
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import test_fleet
import yaml
from simrun import REPO, final_failure

GPUS = [f"bsa-fleet-gpu{i}" for i in range(1, 5)]
GATEWAY = "bsa-fleet-gw"
NETWORK = "bsa-fleet"
PORT = 30000
GROUP_VARS = REPO / "inventory" / "fleet-sim" / "group_vars"
API_KEY: str = yaml.safe_load((GROUP_VARS / "all.yml").read_text())["sglang_api_key"]
CONTROL_KEY: str = yaml.safe_load((GROUP_VARS / "sglang_routers.yml").read_text())["sglang_router_control_plane_api_key"]
CA = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "tls" / "ca.pem"
DEFAULTS = yaml.safe_load((REPO / "roles" / "sglang_router" / "defaults" / "main.yml").read_text())
HANDOVER_PORT = DEFAULTS["sglang_router_handover_port"]
HANDOVER_UNIT = "sglang-router-handover.service"
CHAT = {"model": "qwen3.5-397b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
TO_SMG = {"sglang_router_gateway": "smg", "sglang_router_handover": True}
# The client on the gateway host: a new connection per request to loopback, one line per answer ("200" or curl's
# error), until the stop file appears.
LOCAL_LOOP = (
    "while [ ! -e /run/migration-loop.stop ]; do "
    "code=$(curl -sS -o /run/migration-loop.body -w '%{{http_code}}' --max-time 30 --cacert /etc/ssl/sglang/ca.pem "
    "-H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' -d '{body}' "
    "https://127.0.0.1:{port}/v1/chat/completions 2>&1); "
    "if [ \"$code\" = 200 ] && grep -q choices /run/migration-loop.body; then echo 200; else echo \"FAIL $code\"; fi "
    ">> /run/migration-loop.log; sleep 0.3; done"
)


def sh(container: str, command: str, check: bool = True) -> str:
    done = subprocess.run(["docker", "exec", container, "bash", "-c", command], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{container}: {command}: {done.stderr}")
    return done.stdout.strip()


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("migration")
    shutil.copytree(GROUP_VARS, directory / "group_vars")
    (directory / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": {"hosts": {h: {} for h in GPUS}},
                     "sglang_routers": {"hosts": {GATEWAY: {}}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    return directory


# The gateway's address on the scenario's network and HTTPS to it verifying its certificate for GATEWAY: test_fleet's.
router = test_fleet.router
_Gateway = test_fleet._Gateway


def connection(router: str, timeout: float = 30) -> _Gateway:
    return _Gateway(router, PORT, timeout=timeout, context=ssl.create_default_context(cafile=str(CA)))


def send(conn: _Gateway, path: str, key: str, body: Any = None) -> tuple[int, bytes, bool]:
    """(status, body, whether the gateway ends the connection) of one request on ``conn``."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    conn.request("POST" if body is not None else "GET", path, json.dumps(body).encode() if body is not None else None,
                 headers)
    resp = conn.getresponse()
    return resp.status, resp.read(), resp.will_close


def get_json(router: str, path: str) -> Any:
    conn = connection(router, timeout=10)
    try:
        status, body, _ = send(conn, path, CONTROL_KEY)
    finally:
        conn.close()
    assert status == 200, f"GET {path}: HTTP {status} {body[:200]!r}"
    return json.loads(body)


def healthy_workers(router: str) -> list[str]:
    return sorted(w["url"] for w in get_json(router, "/workers")["workers"] if w["is_healthy"])


def deploy(inventory: Path, tmp_path: Path, **extravars: Any) -> ansible_runner.Runner:
    """playbooks/deploy.yml --tags router (the gateway, and the joins of the GPU hosts' unchanged servers)."""
    private = tmp_path / f"runner-deploy-{time.monotonic_ns()}"
    private.mkdir(parents=True)
    return ansible_runner.run(
        private_data_dir=str(private), project_dir=str(REPO), playbook=str(REPO / "playbooks" / "deploy.yml"),
        inventory=str(inventory), tags="router", extravars=extravars or None,
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                 "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        quiet=True)


def gateway_release() -> str:
    """The release the gateway's unit runs, from the virtualenv its ExecStart names."""
    exec_start = sh(GATEWAY, "systemctl show -p ExecStart --value sglang-router.service")
    venv = exec_start.split("path=", 1)[1].split(" ;", 1)[0].rsplit("/bin/", 1)[0]
    return venv.rsplit("/", 1)[-1]


class Clients:
    """The three clients of the module docstring, each recording (time, None) per answered request or (time, error)."""

    PAUSE = 0.25

    def __init__(self, router: str) -> None:
        self.router = router
        self.stop = threading.Event()
        self.fresh: list[tuple[float, str | None]] = []
        self.kept: list[tuple[float, str | None]] = []
        self.reconnects = 0
        self.threads = [threading.Thread(target=self._fresh, daemon=True), threading.Thread(target=self._kept, daemon=True)]

    @staticmethod
    def _check(status: int, raw: bytes) -> str | None:
        if status != 200:
            return f"HTTP {status} {raw[:200]!r}"
        return None if json.loads(raw).get("choices") else f"no choices: {raw[:200]!r}"

    def _fresh(self) -> None:
        while not self.stop.is_set():
            conn = connection(self.router)
            try:
                status, raw, _ = send(conn, "/v1/chat/completions", API_KEY, CHAT)
                self.fresh.append((time.time(), self._check(status, raw)))
            except (OSError, ValueError, http.client.HTTPException) as exc:
                self.fresh.append((time.time(), repr(exc)))
            finally:
                conn.close()
            time.sleep(self.PAUSE)

    def _kept(self) -> None:
        conn = connection(self.router)
        while not self.stop.is_set():
            # Before reusing the connection, whether the gateway closed it while it was idle (it is readable then:
            # end of file), as urllib3 does; then a new one.
            if conn.sock is not None and select.select([conn.sock], [], [], 0)[0]:
                conn.close()
                self.reconnects += 1
            try:
                status, raw, closing = send(conn, "/v1/chat/completions", API_KEY, CHAT)
                self.kept.append((time.time(), self._check(status, raw)))
                if closing:
                    self.reconnects += 1  # http.client opens a new connection for the next request
            except (OSError, ValueError, http.client.HTTPException) as exc:
                self.kept.append((time.time(), repr(exc)))
                conn.close()
            time.sleep(self.PAUSE)
        conn.close()

    def __enter__(self) -> Clients:
        sh(GATEWAY, "rm -f /run/migration-loop.stop /run/migration-loop.log")
        subprocess.run(["docker", "exec", "-d", GATEWAY, "bash", "-c",
                        LOCAL_LOOP.format(key=API_KEY, body=json.dumps(CHAT), port=PORT)], check=True)
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        sh(GATEWAY, "touch /run/migration-loop.stop")
        for thread in self.threads:
            thread.join(timeout=60)
        time.sleep(1)
        self.local = sh(GATEWAY, "cat /run/migration-loop.log").splitlines()


def task_times(runner: ansible_runner.Runner, task: str) -> tuple[float, float]:
    """(start, end) of a task's ok event, as epoch seconds."""
    for event in runner.events:
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task") == task:
            return (datetime.datetime.fromisoformat(data["start"]).timestamp(),
                    datetime.datetime.fromisoformat(data["end"]).timestamp())
    raise AssertionError(f"task {task!r} did not run")


# The migration runs in the extended tier (make molecule-extended): about 4 minutes of the fleet lane, and make test's
# budget. In make test: smg serving the fleet over mTLS (the converge and every case of test_fleet), and the handover's
# probe past its own redirect (tests/unit/test_router_probe.py); the handover end to end only here.
@pytest.mark.extended  # the migration story: smg itself in every test_fleet case, the probe in unit tests (above)
def test_the_gateway_runs_sglang_router_0_3_2_first(inventory: Path, router: str, tmp_path: Path) -> None:
    runner = deploy(inventory, tmp_path, sglang_router_gateway="sglang-router")
    assert runner.rc == 0, final_failure(runner)
    assert gateway_release() == "0.3.2"
    deadline = time.monotonic() + 120
    while healthy_workers(router) != sorted(f"https://{h}:30000" for h in GPUS) and time.monotonic() < deadline:
        time.sleep(1)
    assert healthy_workers(router) == sorted(f"https://{h}:30000" for h in GPUS)


@pytest.mark.extended  # the migration story: the case above prepares the gateway for it
def test_the_gateway_moves_to_smg_under_requests_with_no_failed_request(inventory: Path, router: str,
                                                                          tmp_path: Path) -> None:
    old_pid = sh(GATEWAY, "systemctl show -p MainPID --value sglang-router.service")
    with Clients(router) as clients:
        time.sleep(3)  # requests before the play
        runner = deploy(inventory, tmp_path, **TO_SMG)
        time.sleep(3)  # and after it
    assert runner.rc == 0, final_failure(runner)

    redirect_on, _ = task_times(runner, "Redirect new connections on the gateway's port to the handover gateway")
    _, redirect_off = task_times(runner, "Send new connections to the new gateway on its own port")
    stop_start, stop_end = task_times(runner, "Stop the old gateway and start the new one on the gateway's port")
    remote = clients.fresh + clients.kept
    during = [t for t, _ in remote if redirect_on <= t <= redirect_off]
    failed = [f"new connection at {t:.2f}: {e}" for t, e in clients.fresh if e] + \
             [f"keep-alive at {t:.2f}: {e}" for t, e in clients.kept if e] + \
             [f"on the gateway: {line}" for line in clients.local if line != "200"]
    print(f"migration: {len(clients.fresh)} requests on new connections, {len(clients.kept)} on keep-alive "
          f"({clients.reconnects} reconnects), {len(clients.local)} from the gateway host; {len(failed)} failed; "
          f"redirect in place {redirect_off - redirect_on:.1f} s ({len(during)} remote requests in it), old gateway's "
          f"stop and smg's start {stop_end - stop_start:.1f} s")
    assert failed == [], failed
    assert len(clients.fresh) >= 20 and len(clients.kept) >= 20 and len(clients.local) >= 10
    assert len(during) >= 10, "requests were sent while the redirect was in place"
    # The handover gateway took some of them: its journal logs each request it answered (smg's http_request).
    served = sh(GATEWAY, f"journalctl -q -o cat -u {HANDOVER_UNIT} | grep -c 'chat/completions.*status_code' || true")
    assert int(served or 0) > 0, "the handover gateway served requests while the redirect was in place"

    # smg 1.13.0 on the same address and port, every worker healthy; nothing of the handover left.
    assert gateway_release() == "smg-1.13.0"
    assert sh(GATEWAY, "systemctl show -p MainPID --value sglang-router.service") != old_pid
    assert healthy_workers(router) == sorted(f"https://{h}:30000" for h in GPUS)
    assert "sglang_handover" not in sh(GATEWAY, "nft list tables")
    assert sh(GATEWAY, f"systemctl is-active {HANDOVER_UNIT}", check=False) != "active"
    assert sh(GATEWAY, f"test -e /run/systemd/system/{HANDOVER_UNIT} && echo left || true") == ""
    assert sh(GATEWAY, f"ss -Hltn 'sport = :{HANDOVER_PORT}'") == ""


@pytest.mark.extended  # a second deploy of the smg gateway changes nothing: test_fleet's second-deploy case
def test_a_second_run_of_the_migration_changes_nothing(inventory: Path, router: str, tmp_path: Path) -> None:
    runner = deploy(inventory, tmp_path, **TO_SMG)
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}
    assert not [e for e in runner.events if e.get("event") == "runner_on_ok"
                and e["event_data"].get("task") == "Install the handover unit (the new gateway on the handover port)"]
    assert gateway_release() == "smg-1.13.0"
    assert healthy_workers(router) == sorted(f"https://{h}:30000" for h in GPUS)
