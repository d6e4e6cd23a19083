"""A fleet behind the real gateway, smg 1.13.0 (molecule scenario `fleet`).

Four simulated Blackwell hosts serve through a gateway running the pinned smg (Shepherd Model Gateway). Each case
drives playbooks/deploy.yml, restart.yml or rollout.yml (canary, then serial batches: the default of all
three) through ansible-runner and
asserts on the hosts (PIDs, what SGLang resolved), on the router (its /workers, polled during the
run) and on a stream of requests sent through the router. The cases run in file order.
Only the docker network of the scenario's own containers is addressed. Every hop is HTTPS with keys
(inventory/fleet-sim/group_vars): the certificates come from the scenario's prepare (a throwaway CA),
requests carry the fleet's API key, the router's /workers its control-plane key.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import simrun
import yaml
from rollout_window import WINDOW, window_events
from simrun import BASE_ENV, REPO, final_failure

GPUS = [f"bsa-fleet-gpu{i}" for i in range(1, 5)]
SPARE = "bsa-fleet-gpu5"
PAIR = ["bsa-fleet-mn1", "bsa-fleet-mn2"]  # one multi-node instance (group fleet_pair), node ranks 0 and 1
GATEWAY = "bsa-fleet-gw"
NETWORK = "bsa-fleet"
SERVICE = "sglang.service"
GROUP_VARS = REPO / "inventory" / "fleet-sim" / "group_vars"
# The fleet's own settings, read from the inventory (one source): arguments, keys.
FLEET_ARGS: dict[str, Any] = yaml.safe_load((GROUP_VARS / "sglang_servers.yml").read_text())["sglang_args"]
API_KEY: str = yaml.safe_load((GROUP_VARS / "all.yml").read_text())["sglang_api_key"]
CONTROL_KEY: str = yaml.safe_load((GROUP_VARS / "sglang_routers.yml").read_text())["sglang_router_control_plane_api_key"]
# The scenario's CA (molecule/fleet/prepare.yml), on the control node and on the hosts.
CA = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "tls" / "ca.pem"
# curl on a host, to its own server: verified against the CA, with the API key.
CURL = f"curl --cacert /etc/ssl/sglang/ca.pem -H 'Authorization: Bearer {API_KEY}'"
# A GPU host to its own server: behind the host's verifying TLS front (roles/sglang_worker_tls, which holds
# 0.0.0.0:30000), SGLang listens on loopback on the backend port (30000 + sglang_worker_tls_backend_port_offset).
LOCAL = "http://127.0.0.1:31000"
FAST = {"sglang_server_ready_timeout": 60, "sglang_server_ready_poll_interval": 1,
        "sglang_server_ready_progress_every": 5, "rollout_confirm": "yes"}


def sh(container: str, command: str, check: bool = True) -> str:
    done = subprocess.run(["docker", "exec", container, "bash", "-c", command], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{container}: {command}: {done.stderr}")
    return done.stdout.strip()


def main_pid(container: str) -> int:
    return int(sh(container, f"systemctl show -p MainPID --value {SERVICE}"))


def server_info(container: str) -> dict[str, Any]:
    return json.loads(sh(container, f"{CURL} -fsS {LOCAL}/server_info"))


def worker_urls(hosts: list[str]) -> list[str]:
    """The workers the router lists for ``hosts``: the plans' https URLs."""
    return sorted(f"https://{h}:30000" for h in hosts)


def make_inventory(directory: Path, gpus: list[str], pair: bool = False) -> Path:
    shutil.copytree(REPO / "inventory" / "fleet-sim" / "group_vars", directory / "group_vars")
    servers: dict[str, Any] = {"hosts": {h: {} for h in gpus}}
    if pair:
        servers["children"] = {"fleet_pair": {"hosts": {h: {} for h in PAIR}}}
    (directory / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": servers,
                     "sglang_routers": {"hosts": {GATEWAY: {}}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    return directory


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_inventory(tmp_path_factory.mktemp("fleet"), GPUS)


@pytest.fixture(scope="module")
def router() -> str:
    """The gateway's address on the scenario's network (its certificate names GATEWAY: see request())."""
    fmt = '{{(index .NetworkSettings.Networks "' + NETWORK + '").IPAddress}}'
    address = subprocess.run(["docker", "inspect", "-f", fmt, GATEWAY], capture_output=True, text=True, check=True).stdout.strip()
    assert address, "the gateway has no address on the scenario's network"
    return address


class _Gateway(http.client.HTTPSConnection):
    """HTTPS to the gateway's address, verifying its certificate for GATEWAY (the controller cannot resolve it)."""

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=GATEWAY)  # type: ignore[attr-defined]


def request(router: str, path: str, key: str | None, body: Any = None, timeout: float = 30) -> tuple[int, bytes]:
    """(status, body) of one request to the router, over verified TLS, with ``key`` as bearer token (None: none)."""
    conn = _Gateway(router, 30000, timeout=timeout, context=ssl.create_default_context(cafile=str(CA)))
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {key}"} if key else {})
    try:
        conn.request("POST" if body is not None else "GET", path, json.dumps(body).encode() if body is not None else None,
                     headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get_json(router: str, path: str) -> Any:
    status, body = request(router, path, CONTROL_KEY, timeout=5)
    if status != 200:
        raise OSError(f"GET {path}: HTTP {status} {body[:200]!r}")
    return json.loads(body)


def healthy_workers(router: str) -> list[str]:
    return sorted(w["url"] for w in get_json(router, "/workers")["workers"] if w["is_healthy"])


def rollout(inventory: Path, tmp_path: Path, limit: str = "", **extravars: Any) -> ansible_runner.Runner:
    return simrun.play(inventory, tmp_path, "rollout.yml", skip_tags="driver,cuda", limit=limit, **{**FAST, **extravars})


class Traffic:
    """Polls the router's healthy workers and sends chat requests through it while a playbook runs.

    A request every PAUSE seconds, each a new TLS connection through the router to a worker: enough to catch
    any failed request of a drain or a restart, not so many that the handshakes take the CPU the playbook
    under test needs (the scenarios share two cores)."""

    PAUSE = 0.25
    POLL = 0.5

    def __init__(self, router: str, max_requests: int = 5000) -> None:
        self.router, self.max_requests = router, max_requests
        self.stop = threading.Event()
        self.healthy_counts: list[int] = []
        self.sent, self.failed = 0, []
        self.threads = [threading.Thread(target=self._poll, daemon=True), threading.Thread(target=self._send, daemon=True)]

    def _poll(self) -> None:
        while not self.stop.is_set():
            try:
                self.healthy_counts.append(len(healthy_workers(self.router)))
            except (OSError, ValueError) as exc:
                self.healthy_counts.append(-1)
                self.failed.append(f"router /workers: {exc}")
            time.sleep(self.POLL)

    def _send(self) -> None:
        body = {"model": "qwen3.5-397b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        while not self.stop.is_set() and self.sent < self.max_requests:
            self.sent += 1
            try:
                status, raw = request(self.router, "/v1/chat/completions", API_KEY, body)
                answer = json.loads(raw) if status == 200 else {}
                if status != 200 or not answer.get("choices"):
                    self.failed.append(f"request {self.sent}: HTTP {status} {raw[:200]!r}")
            except (OSError, ValueError) as exc:
                self.failed.append(f"request {self.sent}: {exc}")
            time.sleep(self.PAUSE)

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def test_the_router_serves_through_every_gpu_host(router: str) -> None:
    assert healthy_workers(router) == worker_urls(GPUS)
    with Traffic(router) as traffic:
        time.sleep(20 * Traffic.PAUSE + 1)  # about 20 requests, 10 needed
    assert traffic.sent >= 10 and traffic.failed == []
    served = [int(sh(h, f"{CURL} -fsS {LOCAL}/metrics | awk '/^sglang:num_requests_total/ {{print $2}}'")
                  .split(".")[0]) for h in GPUS]
    assert all(n > 0 for n in served), f"every worker takes requests through the router: {served}"


def test_every_hop_is_tls_and_refuses_a_request_without_its_key(router: str) -> None:
    chat = {"model": "qwen3.5-397b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    # The router's data plane takes the fleet's key only; its control plane only the control-plane key.
    assert request(router, "/v1/chat/completions", None, chat)[0] == 401
    assert request(router, "/v1/chat/completions", "not-the-key", chat)[0] == 401
    assert request(router, "/v1/chat/completions", API_KEY, chat)[0] == 200
    assert request(router, "/workers", API_KEY)[0] == 401
    assert request(router, "/workers", None)[0] == 401
    # A worker, from the gateway as the router reaches it: HTTPS verified for its name, through the worker's TLS front,
    # which takes only a client certificate of the gateways' CA (mTLS): without one, or with one of another CA (the
    # gateway's own server certificate, from the hosts' CA), the TLS handshake fails and nothing reaches SGLang;
    # with the gateway's client certificate, SGLang answers (401 without the key).
    worker = f"https://{GPUS[0]}:30000/v1/models"
    code = "-s -o /dev/null -w '%{http_code}' --cacert /etc/ssl/sglang/ca.pem"
    bearer = f"-H 'Authorization: Bearer {API_KEY}'"
    client = "--cert /etc/ssl/sglang/client.pem --key /etc/ssl/sglang/client.key"
    other_ca = "--cert /etc/ssl/sglang/server.pem --key /etc/ssl/sglang/server.key"
    for refused in ("", other_ca):
        assert sh(GATEWAY, f"curl {code} {refused} {bearer} {worker}", check=False) == "000"
        # The front's TLS alert (certificate required / decrypt error), not an HTTP answer.
        said = sh(GATEWAY, f"curl -sS -o /dev/null --cacert /etc/ssl/sglang/ca.pem {refused} {worker} 2>&1", check=False)
        assert "alert" in said, said
    assert sh(GATEWAY, f"curl {code} {client} {worker}", check=False) == "401"
    assert sh(GATEWAY, f"curl {code} {client} {bearer} {worker}", check=False) == "200"
    # The gateway's own requests pass the front (its --client-cert-path): it lists every worker healthy, and
    # answered above.
    assert healthy_workers(router) == worker_urls(GPUS)
    assert "--client-cert-path /etc/ssl/sglang/client.pem" in sh(GATEWAY, "systemctl show -p ExecStart sglang-router")
    # No plain HTTP on either: the TLS handshake fails, nothing answers in clear.
    assert sh(GATEWAY, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health", check=False) == "000"
    assert sh(GPUS[0], "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health", check=False) == "000"
    # SGLang itself listens on loopback only, behind the front.
    listening = sh(GPUS[0], "ss -Hltn")
    assert "127.0.0.1:31000" in listening and "0.0.0.0:31000" not in listening
    # The keys are on no command line, and their files are root's and the service's only; the front's certificate
    # file (its key in it) is root's alone.
    for host in [GATEWAY, GPUS[0]]:
        processes = sh(host, "ps -eo args=")
        assert not any(secret in processes for secret in (API_KEY, CONTROL_KEY)), f"a secret is in {host}'s ps"
    assert sh(GATEWAY, "stat -c '%a %U %G' /etc/sglang-router/sglang-router.secrets.json") == "640 root sglang-router"
    assert sh(GATEWAY, "stat -c '%a %U %G' /etc/ssl/sglang/client.key") == "640 root sglang-router"
    assert sh(GPUS[0], "stat -c '%a %U %G' /etc/haproxy/sglang-worker-tls.pem") == "600 root root"


def test_a_second_deploy_changes_nothing_and_plans_each_host_twice(fleet: Path, tmp_path: Path) -> None:
    """The router role, the joins and the servers' files (the provisioning roles' idempotence is the default
    scenario's): changed=0. Each GPU host is planned twice in the run (issue 31), counted by the bench's call log:
    once by playbooks/validate.yml, once when roles/sglang_server binds the plan to its GPUs; the router's worker
    list, the rollout and the joins read the published plan and plan nothing."""
    private = tmp_path / "runner-again"
    private.mkdir()
    calls = tmp_path / "calls.jsonl"
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(REPO), playbook=str(REPO / "playbooks" / "deploy.yml"),
        inventory=str(fleet), tags="router,server",
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PYTHONPATH": str(REPO / "bench" / "hooks"),
                 "BENCH_CALL_LOG": str(calls),
                 "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        quiet=True)
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"] == {}
    assert set(runner.stats["ok"]) == {*GPUS, GATEWAY}
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    planned = [entry for entry in logged if entry["fn"] == "plan_host"]
    assert {host: sum(1 for e in planned if e["host"] == host) for host in GPUS} == {host: 2 for host in GPUS}
    assert {e["caller"].rsplit(".", 1)[-1] for e in planned} == {"validate"}  # the action, never a filter


def test_injected_values_on_a_gateway_and_a_gpu_host_are_refused_before_any_change(tmp_path: Path) -> None:
    """Issue 30's classes through the real deploy.yml: a line break in the router's Prometheus address (its unit's
    ExecStart=), a worker URL with a second URL and an LD_PRELOAD line (the router's environment file), the server's
    state directory in the project's libexec and a login account as its user: the validate play refuses them all,
    naming each, and no PID of the fleet or the gateway changes, nor the router's files."""
    inventory = make_inventory(tmp_path / "inventory", GPUS)
    (inventory / "host_vars").mkdir()
    (inventory / "host_vars" / f"{GATEWAY}.yml").write_text(json.dumps({
        "sglang_router_prometheus_host": "127.0.0.1\nExecStartPre=+/bin/sh -c 'touch /root/owned'\nUser=root",
        "sglang_router_extra_args": ["--host=0.0.0.0"]}))
    (inventory / "host_vars" / f"{GPUS[1]}.yml").write_text(json.dumps({
        "sglang_router_worker_url": "https://10.0.0.5:30000 https://evil.example:1\nLD_PRELOAD=/tmp/x.so",
        "sglang_server_state_dir": "/usr/local/libexec/sglang", "sglang_server_user": "ubuntu"}))
    router_pid = sh(GATEWAY, "systemctl show -p MainPID --value sglang-router.service")
    router_files = sh(GATEWAY, "sha256sum /etc/systemd/system/sglang-router.service /etc/sglang-router/sglang-router.env")
    before = {h: started(h) for h in GPUS}
    runner = deploy(inventory, tmp_path)
    assert runner.rc != 0
    output = final_failure(runner)  # with the validation report
    for variable in ("sglang_router_prometheus_host", "sglang_router_extra_args[0]", "sglang_router_worker_url",
                     "sglang_server_state_dir", "sglang_server_user"):
        assert variable in output, variable
    assert plays(runner) == ["Validate SGLang launch configuration"]
    assert {h: started(h) for h in GPUS} == before
    assert sh(GATEWAY, "systemctl show -p MainPID --value sglang-router.service") == router_pid
    assert sh(GATEWAY, "sha256sum /etc/systemd/system/sglang-router.service /etc/sglang-router/sglang-router.env") == router_files
    assert sh(GATEWAY, "test -e /root/owned && echo yes || echo no") == "no"


def deploy(inventory: Path, tmp_path: Path, limit: str = "", **extravars: Any) -> ansible_runner.Runner:
    return simrun.play(inventory, tmp_path, "deploy.yml", skip_tags="driver,cuda", limit=limit,
                       **{**{k: v for k, v in FAST.items() if k != "rollout_confirm"}, **extravars})


def plays(runner: ansible_runner.Runner) -> list[str]:
    return [e["event_data"].get("play") for e in runner.events if e.get("event") == "playbook_on_play_start"]


def started(container: str) -> tuple[int, int]:
    """The server's main PID and the monotonic time its process started: both change with any restart."""
    return main_pid(container), int(sh(container, f"systemctl show -p ExecMainStartTimestampMonotonic --value {SERVICE}"))


# --- deploy.yml --check --diff on the gateway: reports, changes nothing ----------------------------


ROUTER_UNIT = "/etc/systemd/system/sglang-router.service"


def check_deploy(inventory: Path, tmp_path: Path, limit: str, **extravars: Any) -> ansible_runner.Runner:
    """deploy.yml --check --diff on ``limit`` (offline: check mode installs and downloads nothing)."""
    private = tmp_path / f"runner-check-{time.monotonic_ns()}"
    private.mkdir()
    return ansible_runner.run(
        private_data_dir=str(private), project_dir=str(REPO), playbook=str(REPO / "playbooks" / "deploy.yml"),
        inventory=str(inventory), limit=limit, skip_tags="driver,cuda", cmdline="--check --diff",
        extravars=extravars or None,
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                 "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        quiet=True)


def gateway_state(container: str) -> str:
    """The router's files (names, modes, times, checksums), its account, its unit and its process."""
    return sh(container, "ls -laR --time-style=+%s /opt/sglang-router /etc/sglang-router 2>&1;"
                         f" sha256sum {ROUTER_UNIT} /etc/sglang-router/* 2>&1; getent passwd sglang-router;"
                         " getent group sglang-router; systemctl show -p LoadState,UnitFileState,MainPID,"
                         "ExecMainStartTimestampMonotonic sglang-router.service; ps -eo pid=,comm= | grep -E '(sglang|smg)::router'",
              check=False)


def changed_tasks(runner: ansible_runner.Runner, host: str) -> dict[str, Any]:
    """The tasks check mode reports as changes on ``host``: task name -> result."""
    return {e["event_data"]["task"]: e["event_data"]["res"] for e in runner.events
            if e.get("event") == "runner_on_ok" and e["event_data"].get("host") == host
            and e["event_data"]["res"].get("changed")}


def test_check_mode_on_a_new_gateway_and_a_router_upgrade_reports_them_and_changes_nothing(router: str, tmp_path: Path) -> None:
    """deploy.yml --check --diff on two gateways in one run: the spare added as a second gateway (never converged: no
    router account, virtualenv, files, unit nor router wheelhouse), and the running gateway with a new
    gateway (sglang-router 0.3.3 instead of smg: not in the offline router wheelhouse, and check mode must not need
    it). rc 0; each
    reports its changes (the first install; the new virtualenv, unit and restart); neither host changes."""
    inventory = make_inventory(tmp_path / "gateways", GPUS)
    hosts = json.loads((inventory / "hosts.yml").read_text())
    hosts["all"]["children"]["sglang_routers"]["hosts"] = {GATEWAY: {"sglang_router_gateway": "sglang-router",
                                                                          "sglang_router_version": "0.3.3"}, SPARE: {}}
    (inventory / "hosts.yml").write_text(json.dumps(hosts))
    absent = (f"test ! -e /opt/sglang-router && test ! -e /etc/sglang-router && test ! -e {ROUTER_UNIT}"
              " && ! getent passwd sglang-router && ! getent group sglang-router"
              " && ! ps -eo comm= | grep -qE '(sglang|smg)::router'")
    sh(SPARE, absent)  # a fresh gateway
    before = {h: gateway_state(h) for h in (SPARE, GATEWAY)}
    workers = healthy_workers(router)
    runner = check_deploy(inventory, tmp_path, limit=f"{SPARE},{GATEWAY}")
    assert runner.rc == 0, final_failure(runner)
    assert runner.stats["changed"].get(SPARE, 0) > 0 and runner.stats["changed"].get(GATEWAY, 0) > 0, runner.stats
    hosts_run = {e["event_data"].get("host") for e in runner.events if e.get("event") in ("runner_on_ok", "runner_on_failed")}
    assert hosts_run <= {SPARE, GATEWAY}, hosts_run

    fresh = changed_tasks(runner, SPARE)
    account = "Create the router's account and its virtualenv and configuration directories"
    for task in (account, "Install the gateway into its versioned virtualenv",
                 "Write the worker list the router starts with", "Install the router's unit"):
        assert task in fresh, (task, sorted(fresh))
    assert [c.split()[0] for c in fresh[account]["account"]] == ["groupadd", "useradd"], fresh[account]
    assert any("ExecStart=/opt/sglang-router/smg-1.13.0/" in d.get("after", "") and not d.get("before")
               for d in fresh["Install the router's unit"]["diff"]), fresh["Install the router's unit"]
    sh(SPARE, absent)

    upgrade = changed_tasks(runner, GATEWAY)
    for task in ("Install the gateway into its versioned virtualenv", "Install the router's unit",
                 "Restart the SGLang router"):
        assert task in upgrade, (task, sorted(upgrade))
    assert any("/opt/sglang-router/0.3.3/" in d.get("after", "") and "/opt/sglang-router/smg-1.13.0/" in d.get("before", "")
               for d in upgrade["Install the router's unit"]["diff"]), upgrade["Install the router's unit"]
    assert sh(GATEWAY, "test -e /opt/sglang-router/0.3.3 && echo yes || echo no") == "no"

    assert {h: gateway_state(h) for h in (SPARE, GATEWAY)} == before
    assert healthy_workers(router) == workers


def test_restart_restarts_every_host_one_at_a_time(router: str, fleet: Path, tmp_path: Path) -> None:
    # restart.yml's default: canary, then batches of 25% (one host of four), each drained from the router first.
    before = {h: main_pid(h) for h in GPUS}
    with Traffic(router) as traffic:
        runner = simrun.play(fleet, tmp_path, "restart.yml", sglang_args={**FLEET_ARGS, "mem_fraction_static": 0.8},
                             **{k: v for k, v in FAST.items() if k != "rollout_confirm"})
        time.sleep(0.5)
    assert runner.rc == 0, final_failure(runner)
    for h in GPUS:
        assert main_pid(h) != before[h], f"{h} was not restarted"
        assert server_info(h)["mem_fraction_static"] == 0.8
    assert traffic.failed == [], traffic.failed[:5]
    assert traffic.sent >= 50, f"only {traffic.sent} requests were sent during the restart"
    assert min(traffic.healthy_counts) == len(GPUS) - 1, "each host left the router (drain), one at a time"
    assert healthy_workers(router) == worker_urls(GPUS)
    assert plays(runner).count("Restart the rest of the fleet in batches") == len(GPUS) - 1
    assert_real_requests(runner, GPUS)
    # Out of the router (between each host's drain and join) only the restart's floor ran.
    for h in GPUS:
        [window] = window_events(runner.events, h)
        assert [task for task in window if task not in WINDOW] == [], (h, window)
    print(f"restart: {traffic.sent} requests, 0 failed; healthy workers {min(traffic.healthy_counts)}..{max(traffic.healthy_counts)}")


DIRECT_REQUEST = "Send one real chat completion (the model answers, with the API key, over verified TLS)"
ROUTER_REQUEST = "Send one real chat completion through each router (the router's key, verified TLS)"


def assert_real_requests(runner: ansible_runner.Runner, hosts: list[str]) -> None:
    """Each restarted host answered one real chat completion directly and through the router, and the report says
    how fast (time to first token, tokens/s) and how well speculative decoding (the fleet runs NEXTN) accepted."""
    ok = [e["event_data"] for e in runner.events if e.get("event") == "runner_on_ok"]
    direct = {e["host"]: e["res"] for e in ok if e.get("task") == DIRECT_REQUEST}
    assert set(direct) == set(hosts), f"direct requests ran on {sorted(direct)}"
    for host, res in direct.items():
        assert res["completion_tokens"] > 0 and res["ttft_s"] is not None and res["tokens_per_s"] > 0, (host, res)
        assert res["avg_spec_accept_length"] is not None, (host, res)
    routed = {e["host"]: e["res"] for e in ok if e.get("task") == ROUTER_REQUEST}
    assert set(routed) == set(hosts), f"requests through the router ran for {sorted(routed)}"
    for host, res in routed.items():
        assert res["results"] and all(r["completion_tokens"] > 0 for r in res["results"]), (host, res)
    shown = [" ".join(e["res"].get("msg") or []) for e in ok if e.get("task") == "Report the restart" and e["host"] in hosts]
    assert len(shown) == len(hosts) and all("time to first token" in m and "speculative acceptance length" in m
                                            for m in shown), shown


def test_a_host_that_never_becomes_ready_stops_the_rollout(router: str, fleet: Path, tmp_path: Path) -> None:
    sh(GPUS[1], "mkdir -p /etc/sglang-standin && printf 'NEVER_READY=1\\n' > /etc/sglang-standin/never-ready.env")
    before = {h: main_pid(h) for h in GPUS}
    bad_env = {**BASE_ENV, "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/never-ready.env"}
    with Traffic(router) as traffic:
        runner = rollout(fleet, tmp_path, sglang_args={**FLEET_ARGS, "mem_fraction_static": 0.75}, sglang_env=bad_env,
                         sglang_server_ready_timeout=6)
    assert runner.rc != 0
    assert f"Rollout stopped at {GPUS[1]}" in final_failure(runner)
    assert "Rolled back to the last known good configuration: it is healthy again" in final_failure(runner)
    assert server_info(GPUS[0])["mem_fraction_static"] == 0.75  # the canary went first
    assert server_info(GPUS[1])["mem_fraction_static"] == 0.8  # rolled back
    assert "SGLANG_STANDIN_FAULTS" not in sh(GPUS[1], "cat /etc/sglang/sglang.env")
    for h in GPUS[2:]:
        assert main_pid(h) == before[h], f"{h} was reached"
        assert server_info(h)["mem_fraction_static"] == 0.8
        assert "SGLANG_STANDIN_FAULTS" not in sh(h, "cat /etc/sglang/sglang.env")
    assert traffic.failed == [], traffic.failed[:5]
    assert min(traffic.healthy_counts) >= len(GPUS) - 1
    assert healthy_workers(router) == worker_urls(GPUS), "the rolled-back host serves again"


@pytest.mark.extended  # deploy.yml in batches: the converge; a stopped rollout: the case above
def test_a_deploy_after_the_failure_restarts_only_the_failed_and_the_rest(router: str, fleet: Path, tmp_path: Path) -> None:
    # The previous case stopped at GPUS[1] (rolled back); GPUS[0] already has the target, GPUS[2:] were not reached.
    # deploy.yml with that target, under traffic: provisioning and restarts in batches, GPUS[0] only provisioned.
    sh(GPUS[1], "rm -f /etc/sglang-standin/never-ready.env")  # the fault is fixed
    updated = started(GPUS[0])
    before = {h: main_pid(h) for h in GPUS[1:]}
    bad_env = {**BASE_ENV, "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/never-ready.env"}  # the same target as before
    with Traffic(router) as traffic:
        runner = deploy(fleet, tmp_path, sglang_args={**FLEET_ARGS, "mem_fraction_static": 0.75}, sglang_env=bad_env)
        time.sleep(0.5)
    assert runner.rc == 0, final_failure(runner)
    assert plays(runner).count("Provision and roll out to the rest of the fleet in batches") == len(GPUS) - 1
    assert started(GPUS[0]) == updated, f"{GPUS[0]} already had the target and was restarted again"
    for h in GPUS[1:]:
        assert main_pid(h) != before[h], f"{h} was not restarted"
    for h in GPUS:
        assert server_info(h)["mem_fraction_static"] == 0.75
    drained = {e["event_data"]["host"] for e in runner.events if e.get("event") == "runner_on_ok"
               and e["event_data"].get("task") == "Take the server out of the routers and let it finish its requests"}
    assert drained == set(GPUS[1:])
    assert traffic.failed == [], traffic.failed[:5]
    assert traffic.sent >= 50, f"only {traffic.sent} requests were sent during the deploy"
    assert min(traffic.healthy_counts) == len(GPUS) - 1
    assert healthy_workers(router) == worker_urls(GPUS)
    print(f"deploy: {traffic.sent} requests, 0 failed; healthy workers {min(traffic.healthy_counts)}..{max(traffic.healthy_counts)}")


@pytest.mark.extended  # a stopped rollout and the hosts after it untouched: the never-ready case
def test_a_failed_canary_touches_no_other_host(router: str, fleet: Path, tmp_path: Path) -> None:
    sh(GPUS[0], "mkdir -p /etc/sglang-standin && printf 'NEVER_READY=1\\n' > /etc/sglang-standin/canary-bad.env")
    before = {h: main_pid(h) for h in GPUS}
    canary_mem = server_info(GPUS[0])["mem_fraction_static"]
    bad_env = {**BASE_ENV, "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/canary-bad.env"}
    runner = rollout(fleet, tmp_path, sglang_args={**FLEET_ARGS, "mem_fraction_static": 0.7}, sglang_env=bad_env,
                     sglang_server_ready_timeout=6)
    assert runner.rc != 0
    assert f"Rollout stopped at {GPUS[0]}" in final_failure(runner)
    assert server_info(GPUS[0])["mem_fraction_static"] == canary_mem
    for h in GPUS[1:]:
        assert main_pid(h) == before[h], f"{h} was reached after a failed canary"
        assert server_info(h)["mem_fraction_static"] != 0.7
    # A one-host instance: stop, release, start and the ready wait in one task.
    stop = "Stop the server, release the GPUs it left behind, start it and wait for its health"
    stopped = {e["event_data"]["host"] for e in runner.events
               if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == stop}
    assert stopped == {GPUS[0]}
    assert healthy_workers(router) == worker_urls(GPUS)


def test_adding_a_host_restarts_nobody_else(router: str, tmp_path: Path) -> None:
    before = {h: main_pid(h) for h in GPUS}
    inventory = make_inventory(tmp_path / "grown", [*GPUS, SPARE])

    def add(name: str) -> ansible_runner.Runner:
        private = tmp_path / name
        private.mkdir()
        return ansible_runner.run(
            private_data_dir=str(private), project_dir=str(REPO),
            playbook=str(REPO / "playbooks" / "deploy.yml"), inventory=str(inventory), limit=SPARE,
            skip_tags="driver,cuda", extravars={k: v for k, v in FAST.items() if k != "rollout_confirm"},
            envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}, quiet=True)

    # The new host's GPU 3 trained its PCIe link at x4: the GPU health gate fails it, naming the host, the GPU
    # and the reason, before its server starts; it never joins the router.
    sh(SPARE, """echo '{"gpus": {"3": {"pcie.link.width.current": "4"}}}' > /etc/fake-nvidia/faults.json""")
    try:
        runner = add("runner-faulty")
    finally:
        sh(SPARE, "rm -f /etc/fake-nvidia/faults.json")
    assert runner.rc != 0
    failure = final_failure(runner)
    assert f"{SPARE} failed the GPU health gate" in failure and "GPU 3" in failure and "PCIe link is x4" in failure, failure
    assert sh(SPARE, f"systemctl is-active {SERVICE}", check=False) != "active"
    assert healthy_workers(router) == worker_urls(GPUS)
    assert f"https://{SPARE}:30000" not in [w["url"] for w in get_json(router, "/workers")["workers"]]

    # The link reseated: the host passes the gate, starts and joins; nobody else is touched.
    runner = add("runner-add")
    assert runner.rc == 0, final_failure(runner)
    assert {h: main_pid(h) for h in GPUS} == before
    assert sh(SPARE, f"systemctl is-active {SERVICE}") == "active"
    assert healthy_workers(router) == worker_urls([*GPUS, SPARE])
    hosts = {e["event_data"].get("host") for e in runner.events if e.get("event") in ("runner_on_ok", "runner_on_failed")}
    assert hosts <= {SPARE, GATEWAY}


@pytest.mark.extended  # rollout.yml's batches: the restart and multi-node cases
def test_without_a_router_the_rollout_skips_drain_and_join(tmp_path: Path) -> None:
    # The same playbook on an inventory with no sglang_routers group; Ansible's list form of serial.
    hosts = GPUS[2:]
    inventory = tmp_path / "no-router"
    shutil.copytree(REPO / "inventory" / "fleet-sim" / "group_vars", inventory / "group_vars")
    (inventory / "hosts.yml").write_text(json.dumps({"all": {
        "children": {"sglang_servers": {"hosts": {h: {} for h in hosts}}},
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"},
    }}))
    before = {h: main_pid(h) for h in hosts}
    runner = rollout(inventory, tmp_path, sglang_args={**FLEET_ARGS, "mem_fraction_static": 0.65}, rollout_serial=[1, "100%"])
    assert runner.rc == 0, final_failure(runner)
    for h in hosts:
        assert main_pid(h) != before[h]
        assert server_info(h)["mem_fraction_static"] == 0.65
    ran = {e["event_data"].get("task") for e in runner.events if e.get("event") == "runner_on_ok"}
    # A one-host instance: stop, release, start and the ready wait in one task.
    stop = "Stop the server, release the GPUs it left behind, start it and wait for its health"
    assert {e["event_data"]["host"] for e in runner.events
            if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == stop} == set(hosts)
    skipped = {e["event_data"].get("task") for e in runner.events if e.get("event") == "runner_on_skipped"}
    assert "Take the server out of the routers and let it finish its requests" in skipped
    assert not any(str(t).startswith("sglang_router") or "routers' workers" in str(t) for t in ran)


# --- a multi-node instance: two hosts, one model, one unit of the rollout ----------------------------


def unit_args(container: str) -> dict[str, str]:
    """--nnodes, --node-rank and --dist-init-addr as the installed unit passes them."""
    words = sh(container, f"systemctl show -p ExecStart --value {SERVICE}").split()
    return {flag: words[words.index(flag) + 1] for flag in ("--nnodes", "--node-rank", "--dist-init-addr", "--tp-size")}


def monotonic(container: str, prop: str) -> int:
    """A systemd timestamp of the service; the containers share the kernel's monotonic clock."""
    return int(sh(container, f"systemctl show -p {prop} --value {SERVICE}"))


def schedulers(container: str) -> list[str]:
    return sorted(sh(container, "ps -eo comm= | grep '^sglang::schedul' || true", check=False).split(), key=len)


@pytest.fixture(scope="module")
def paired(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_inventory(tmp_path_factory.mktemp("paired"), GPUS, pair=True)


def test_a_two_host_instance_gets_node_ranks_and_one_rendezvous(router: str, paired: Path, tmp_path: Path) -> None:
    before = {h: main_pid(h) for h in GPUS}
    private = tmp_path / "runner-pair"
    private.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(REPO), playbook=str(REPO / "playbooks" / "deploy.yml"),
        inventory=str(paired), limit="fleet_pair", skip_tags="driver,cuda",
        extravars={k: v for k, v in FAST.items() if k != "rollout_confirm"},
        envvars={"ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}, quiet=True)
    assert runner.rc == 0, final_failure(runner)
    first, second = (unit_args(h) for h in PAIR)
    assert first == {"--nnodes": "2", "--node-rank": "0", "--dist-init-addr": f"{PAIR[0]}:20000", "--tp-size": "16"}
    assert second == {**first, "--node-rank": "1"}
    # Node 0 serves the API over TLS; node 1 only health, on plain HTTP (SGLang's health-only server).
    assert sh(PAIR[0], f"{CURL} -fsS -o /dev/null -w '%{{http_code}}' {LOCAL}/health") == "200"
    assert sh(PAIR[1], "curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health") == "200"
    # 16 tensor-parallel ranks, eight on each host's own GPUs; only node 0 serves the API.
    assert [s.split("_TP")[1] for s in sh(PAIR[0], "ps -eo args= | grep -o '^sglang::scheduler_TP[0-9]*'").split()] == \
        [str(i) for i in range(8)]
    assert [s.split("_TP")[1] for s in sh(PAIR[1], "ps -eo args= | grep -o '^sglang::scheduler_TP[0-9]*'").split()] == \
        [str(i) for i in range(8, 16)]
    assert server_info(PAIR[0])["tp_size"] == 16
    assert sh(PAIR[1], "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models", check=False) == "404"
    workers = healthy_workers(router)
    assert f"https://{PAIR[0]}:30000" in workers and f"https://{PAIR[1]}:30000" not in workers
    assert {h: main_pid(h) for h in GPUS} == before


def test_part_of_an_instance_is_refused_before_anything_changes(paired: Path, tmp_path: Path) -> None:
    before = {h: main_pid(h) for h in PAIR}
    runner = simrun.play(paired, tmp_path, "restart.yml", limit=PAIR[1], skip_tags="driver,cuda", **FAST)
    assert runner.rc != 0
    failure = final_failure(runner)
    assert "[multinode.partial]" in failure and PAIR[0] in failure and "--limit fleet_pair" in failure
    assert {h: main_pid(h) for h in PAIR} == before


@pytest.mark.extended  # the pair as one unit: the never-ready case below (node 1 restarted with node 0's rollback)
def test_the_instance_rolls_out_as_one_unit_node_0_first(router: str, paired: Path, tmp_path: Path) -> None:
    hosts = [GPUS[3], *PAIR]
    before = {h: main_pid(h) for h in hosts}
    workers = len(healthy_workers(router))
    with Traffic(router) as traffic:
        runner = rollout(paired, tmp_path, limit=",".join(hosts), sglang_env={**BASE_ENV, "BSA_ROLLOUT_MARK": "pair-1"})
        time.sleep(0.5)
    assert runner.rc == 0, final_failure(runner)
    for h in hosts:
        assert main_pid(h) != before[h], f"{h} was not restarted"
        assert "BSA_ROLLOUT_MARK" in sh(h, "cat /etc/sglang/sglang.env")
    assert traffic.failed == [], traffic.failed[:5]
    assert min(traffic.healthy_counts) == workers - 1, "one unit (one router worker) out at a time"
    # The canary (gpu4) first, then the instance as one batch: node 0 stops first and starts first.
    assert monotonic(GPUS[3], "ExecMainStartTimestampMonotonic") < monotonic(PAIR[0], "ActiveExitTimestampMonotonic")
    # ActiveExit: the stop began (node 0 drains, then its shutdown broadcast ends node 1).
    assert monotonic(PAIR[0], "ActiveExitTimestampMonotonic") < monotonic(PAIR[1], "ActiveExitTimestampMonotonic")
    assert monotonic(PAIR[0], "ExecMainStartTimestampMonotonic") < monotonic(PAIR[1], "ExecMainStartTimestampMonotonic")
    plays = [e["event_data"].get("play") for e in runner.events if e.get("event") == "playbook_on_play_start"]
    assert plays.count("Roll out to the rest of the fleet in batches") == 1, "the two nodes went in one batch"
    assert unit_args(PAIR[1])["--node-rank"] == "1"


def test_node_0_never_ready_rolls_back_the_whole_instance(router: str, paired: Path, tmp_path: Path) -> None:
    sh(PAIR[0], "mkdir -p /etc/sglang-standin && printf 'NEVER_READY=1\\n' > /etc/sglang-standin/pair-bad.env")
    others = {h: main_pid(h) for h in GPUS}
    good = {h: sh(h, "cat /etc/sglang/sglang.env") for h in PAIR}
    bad_env = {**BASE_ENV, "BSA_ROLLOUT_MARK": "pair-2", "SGLANG_STANDIN_FAULTS": "/etc/sglang-standin/pair-bad.env"}
    runner = rollout(paired, tmp_path, limit="fleet_pair", sglang_env=bad_env, sglang_server_ready_timeout=6)
    assert runner.rc != 0
    failure = final_failure(runner)
    assert "Rollout stopped at" in failure and "Rolled back to the last known good configuration" in failure
    for h in PAIR:
        assert sh(h, "cat /etc/sglang/sglang.env") == good[h], f"{h} was not rolled back"
        url = LOCAL if h == PAIR[0] else "http://127.0.0.1:30000"  # node 1: health only, plain HTTP
        assert sh(h, f"{CURL} -fsS -o /dev/null -w '%{{http_code}}' {url}/health") == "200"
    rolled = {e["event_data"]["host"] for e in runner.events if e.get("event") == "runner_on_ok"
              and e["event_data"].get("task") == "Start the other nodes of the multi-node instance"}
    assert rolled == {PAIR[1]}, "node 1 was restarted with node 0's rollback"
    assert {h: main_pid(h) for h in GPUS} == others
    assert f"https://{PAIR[0]}:30000" in healthy_workers(router)
