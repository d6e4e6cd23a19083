"""The simulated Blackwell host and the sglang stand-in behave like the real thing where it matters.

One systemd container (tests/fixtures/simhost) for the whole module, the stand-in wheel installed
offline into a venv inside it. Nothing is skipped: without Docker the fixture fails and says how to
get it (tests/fixtures/simhost/ensure-docker.sh).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SIMHOST = REPO / "tests/fixtures/simhost"
STANDIN = REPO / "tests/fixtures/sglang_standin"
VENV = "/opt/sglang-venv"
PY = f"{VENV}/bin/python"
MODEL = "nvidia/Qwen3.5-397B-A17B-NVFP4"
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
INCIDENT_FLAGS = "--speculative-algorithm NEXTN --speculative-num-draft-tokens 2 --speculative-eagle-topk 1"


class Host:
    """A running simulated host; every command goes through `docker exec`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, script: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(["docker", "exec", self.name, "bash", "-c", script],
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"`{script}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def out(self, script: str, timeout: float = 60) -> str:
        return self.run(script, timeout=timeout).stdout

    def pids(self, script: str) -> set[int]:
        """Integers a command prints on stdout (fuser, pgrep, ...); its stderr noise is ignored."""
        return {int(x) for x in re.findall(r"\b\d+\b", self.run(script, check=False).stdout)}

    def device_holders(self) -> set[int]:
        """PIDs holding any /dev/nvidia<N> per fuser, minus nvidia-persistenced."""
        return self.pids("fuser /dev/nvidia[0-9]* 2>/dev/null") - {self.persistenced_pid()}

    def compute_app_pids(self) -> set[int]:
        csv = self.out("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader")
        return {int(line.split(",")[0]) for line in csv.splitlines() if line.strip()}

    def persistenced_pid(self) -> int:
        return int(self.out("systemctl show -p MainPID --value nvidia-persistenced").strip())

    def http_code(self, port: int, path: str, extra: str = "") -> str:
        return self.out(f"curl -s -o /dev/null -w '%{{http_code}}' {extra} http://127.0.0.1:{port}{path} || true")

    def wait_http(self, port: int, path: str, code: str, timeout: float = 30) -> float:
        """Poll inside the container until `path` answers `code`; returns the seconds it took."""
        start = time.monotonic()
        self.run(f"for i in $(seq {int(timeout * 10)}); do "
                 f"[ \"$(curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}{path})\" = {code} ] "
                 f"&& exit 0; sleep 0.1; done; exit 1", timeout=timeout + 10)
        return time.monotonic() - start

    def wait_until(self, condition: str, timeout: float = 10) -> None:
        self.run(f"for i in $(seq {int(timeout * 10)}); do ({condition}) && exit 0; sleep 0.1; done; exit 1",
                 timeout=timeout + 10)

    def start_background(self, tag: str, args: str, env: str = "") -> int:
        """Start the stand-in outside systemd (own session); returns the main PID."""
        self.run(f"rm -f /tmp/{tag}.pid; setsid bash -c 'echo $$ > /tmp/{tag}.pid; "
                 f"exec env {env} {PY} -m sglang.launch_server {args} > /tmp/{tag}.log 2>&1' "
                 f"</dev/null >/dev/null 2>&1 &")
        self.wait_until(f"test -s /tmp/{tag}.pid")
        return int(self.out(f"cat /tmp/{tag}.pid"))

    def kill_all_standin(self) -> None:
        """SIGKILL every stand-in process this module started (by PID), then wait until gone."""
        for tag in ("kill", "orphan", "cfg", "never", "crash"):
            self.run(f"test -s /tmp/{tag}.pid && kill -KILL $(cat /tmp/{tag}.pid) 2>/dev/null; true")
        for pid in self.pids("pgrep -f '^sglang::'"):
            self.run(f"kill -KILL {pid} 2>/dev/null; true")
        self.wait_until("! pgrep -f '^sglang::' >/dev/null", timeout=5)

    def schedulers(self) -> set[int]:
        return self.pids("pgrep -f '^sglang::scheduler'")


def _sh(args: list[str], timeout: float = 600) -> None:
    subprocess.run(args, check=True, timeout=timeout)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.fail("Docker engine not available: run tests/fixtures/simhost/ensure-docker.sh")
    _sh([str(SIMHOST / "build-image.sh")])
    # The stand-in of this tree, built into the module's own wheelhouse: build/wheelhouse is what the molecule
    # scenarios running beside this test install from, against hashed locks made from it (make provision-fixtures),
    # so a test must never rewrite it.
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([str(STANDIN / "build-wheelhouse.sh"), "0.5.23"], check=True, timeout=600,
                   env={**os.environ, "WHEELHOUSE": str(wheelhouse)})
    name = f"bsa-simtest-{uuid.uuid4().hex[:8]}"
    _sh([str(SIMHOST / "simhost.sh"), "up", name], timeout=180)
    try:
        h = Host(name)
        _sh(["docker", "cp", str(wheelhouse), f"{name}:/opt/wheelhouse"])
        h.run(f"python3 -m venv {VENV} && {VENV}/bin/pip install -q --no-index --no-deps "
              f"--find-links /opt/wheelhouse sglang==0.5.23", timeout=180)
        yield h
    finally:
        subprocess.run([str(SIMHOST / "simhost.sh"), "down", name], check=False)


# --- fake driver surface ------------------------------------------------------------------------


def test_fake_devices_default_eight(host: Host) -> None:
    gpus = host.out("ls /dev/ | grep -E '^nvidia[0-9]+$' | sort -V").split()
    assert gpus == [f"nvidia{i}" for i in range(8)]
    for node in gpus + ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]:
        assert host.out(f"stat -c '%F %a' /dev/{node}").strip() == "character special file 666"
    assert host.out("systemctl is-active fake-nvidia-devices").strip() == "active"


def test_nvidia_smi_lists_eight_stable_uuids(host: Host) -> None:
    first = host.out("nvidia-smi -L").splitlines()
    assert len(first) == 8
    pattern = re.compile(rf"GPU (\d): {re.escape(GPU_NAME)} \(UUID: GPU-[0-9a-f]{{8}}(-[0-9a-f]{{4}}){{3}}-[0-9a-f]{{12}}\)")
    assert [int(pattern.fullmatch(line).group(1)) for line in first] == list(range(8))
    assert len({line.split("UUID: ")[1] for line in first}) == 8
    assert host.out("nvidia-smi -L").splitlines() == first
    assert host.out("nvidia-smi -i 3 -L").strip() == first[3]


def test_query_gpu_csv_fields(host: Host) -> None:
    fields = "index,name,uuid,compute_cap,memory.total,memory.used,memory.free,driver_version,pci.bus_id,persistence_mode,count"
    lines = host.out(f"nvidia-smi --query-gpu={fields} --format=csv").splitlines()
    assert lines[0] == ("index, name, uuid, compute_cap, memory.total [MiB], memory.used [MiB], "
                        "memory.free [MiB], driver_version, pci.bus_id, persistence_mode, count")
    assert len(lines) == 9
    row = lines[1].split(", ")
    assert row[0] == "0" and row[1] == GPU_NAME and row[2].startswith("GPU-")
    assert row[3:] == ["12.0", "97887 MiB", "0 MiB", "97887 MiB", "580.95.05", "00000000:01:00.0", "Enabled", "8"]
    nounits = host.out("nvidia-smi -i 1 --query-gpu=index,memory.total,compute_cap --format=csv,noheader,nounits")
    assert nounits.strip() == "1, 97887, 12.0"
    bad = host.run("nvidia-smi --query-gpu=bogus --format=csv", check=False)
    assert bad.returncode != 0 and 'Field "bogus" is not a valid field to query.' in bad.stderr + bad.stdout


def test_persistenced_holds_gpu_but_is_not_a_compute_app(host: Host) -> None:
    assert host.out("systemctl is-active nvidia-persistenced").strip() == "active"
    pid = host.persistenced_pid()
    assert pid in host.pids("fuser /dev/nvidia0 2>/dev/null")
    assert host.out(f"cat /proc/{pid}/comm").strip() == "nvidia-persiste"
    assert pid not in host.compute_app_pids()
    assert host.device_holders() == set() == host.compute_app_pids()


def test_nvidia_smi_without_driver_exits_9(host: Host) -> None:
    try:
        host.run("mv /dev/nvidiactl /dev/nvidiactl.away")
        res = host.run("nvidia-smi -L", check=False)
        assert res.returncode == 9
        assert "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" in res.stdout
    finally:
        host.run("mv /dev/nvidiactl.away /dev/nvidiactl")


# --- the sglang stand-in --------------------------------------------------------------------------


def test_unknown_flag_exits_2(host: Host) -> None:
    res = host.run(f"{PY} -m sglang.launch_server --model-path {MODEL} --no-such-flag 1", check=False)
    assert res.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in res.stderr


def test_incident_flags_fail_with_bare_assertion_error(host: Host) -> None:
    res = host.run(f"SGLANG_STANDIN_ASSERT_DELAY=0.3 {PY} -m sglang.launch_server --model-path {MODEL} "
                   f"--tp-size 8 {INCIDENT_FLAGS}", check=False)
    assert res.returncode != 0
    assert res.stderr.strip().splitlines()[-1] == "AssertionError"
    assert host.schedulers() == set()


def test_lifecycle_under_systemd(host: Host) -> None:
    """Load phase without a port, ready, /server_info, nvidia-smi == fuser, SIGTERM drains and exits 0."""
    unit, port = "sglang-standin-life", 30000
    host.run(f"systemd-run --unit={unit} -p KillMode=process -E SGLANG_STANDIN_LOAD_SECONDS=3 "
             f"-E SGLANG_STANDIN_DRAIN_SECONDS=2 {PY} -m sglang.launch_server --model-path {MODEL} "
             f"--tp-size 8 --speculative-algorithm NEXTN --host 127.0.0.1 --port {port} --enable-metrics")
    try:
        host.wait_until(f"journalctl -u {unit} -o cat | grep -q 'Load weight begin'", timeout=15)
        assert host.out(f"ss -Hltn 'sport = :{port}'").strip() == ""
        assert host.http_code(port, "/health") == "000"
        host.wait_http(port, "/health", "200", timeout=30)
        log = host.out(f"journalctl -u {unit} -o cat")
        assert "Load weight end" in log and "The server is fired up and ready to roll!" in log

        info = json.loads(host.out(f"curl -sf http://127.0.0.1:{port}/server_info"))
        assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
                info["speculative_num_draft_tokens"]) == (3, 1, 4)
        assert info["tp_size"] == 8 and info["version"] == "0.5.23"
        models = json.loads(host.out(f"curl -sf http://127.0.0.1:{port}/v1/models"))
        assert models["data"][0]["id"] == MODEL
        assert "sglang:num_running_reqs" in host.out(f"curl -sf http://127.0.0.1:{port}/metrics")

        main = int(host.out(f"systemctl show -p MainPID --value {unit}"))
        scheds = host.schedulers()
        assert len(scheds) == 8
        titles = {host.out(f"tr '\\0' ' ' < /proc/{p}/cmdline").split()[0] for p in scheds}
        assert titles == {f"sglang::scheduler_TP{k}" for k in range(8)}
        assert {host.out(f"cat /proc/{p}/comm").strip() for p in scheds} == {"sglang::schedul"}
        assert {int(host.out(f"ps -o pgid= -p {p}")) for p in scheds} == {main}
        assert host.compute_app_pids() == host.device_holders() == scheds
        used = host.out("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits").split()
        assert used == ["1024"] * 8
        assert main in host.pids("fuser /dev/nvidiactl 2>/dev/null")

        host.run(f"kill -TERM {main}")
        host.wait_http(port, "/health", "503", timeout=2)
        host.wait_until(f"! systemctl is-active -q {unit}", timeout=10)
        assert host.out(f"systemctl show -p ExecMainStatus --value {unit}").strip() == "0"
        assert host.schedulers() == set()
        assert host.device_holders() == set() == host.compute_app_pids()
    finally:
        host.run(f"systemctl stop {unit}; systemctl reset-failed {unit}", check=False)


def test_sigkill_of_main_takes_schedulers_along(host: Host) -> None:
    port = 30001
    main = host.start_background("kill", f"--model-path {MODEL} --tp-size 8 --port {port}",
                                 env="SGLANG_STANDIN_LOAD_SECONDS=1")
    try:
        host.wait_http(port, "/health", "200", timeout=30)
        assert len(host.schedulers()) == 8
        host.run(f"kill -KILL {main}")
        deadline = time.monotonic() + 2.5
        while host.device_holders() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert host.device_holders() == set() == host.compute_app_pids()
        assert host.schedulers() == set()
    finally:
        host.kill_all_standin()


def test_orphan_child_keeps_gpu0_after_sigkill(host: Host) -> None:
    port = 30002
    host.run("echo ORPHAN_CHILD=1 > /etc/sglang-standin/faults.env")
    try:
        main = host.start_background("orphan", f"--model-path {MODEL} --tp-size 2 --port {port}",
                                     env="SGLANG_STANDIN_LOAD_SECONDS=1")
        host.wait_http(port, "/health", "200", timeout=30)
        orphan = host.pids("pgrep -x 'sglang::orphan'")
        assert len(orphan) == 1
        host.run(f"kill -KILL {main}")
        host.wait_until("! pgrep -f '^sglang::scheduler' >/dev/null", timeout=3)
        assert host.device_holders() == orphan == host.compute_app_pids()
        assert orphan <= host.pids("fuser /dev/nvidia0 2>/dev/null")
        (pid,) = orphan
        assert int(host.out(f"ps -o pgid= -p {pid}")) != main
        apps = host.out("nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader")
        assert apps.strip() == f"{pid}, sglang::orphan"
    finally:
        host.run("rm -f /etc/sglang-standin/faults.env")
        host.kill_all_standin()


def test_config_file_api_key_and_llama_auto_params(host: Host) -> None:
    """--config YAML (CLI wins), --api-key protects all but health/metrics, (5, 4, 8) for Llama."""
    host.run("mkdir -p /tmp/llama && echo '{\"architectures\": [\"LlamaForCausalLM\"]}' > /tmp/llama/config.json && "
             "printf 'api-key: s3cret\\nserved-model-name: llama-test\\nenable-metrics: true\\n"
             "port: 30003\\nspeculative-algorithm: EAGLE\\ncuda-graph-bs-decode: [1, 8]\\n' > /tmp/serve.yaml")
    port = 30004
    host.start_background("cfg", f"--config /tmp/serve.yaml --model-path /tmp/llama --port {port}",
                          env="SGLANG_STANDIN_LOAD_SECONDS=0.5")
    try:
        host.wait_http(port, "/health", "200", timeout=30)
        auth = "-H 'Authorization: Bearer s3cret'"
        assert host.http_code(port, "/v1/models") == "401"
        assert host.http_code(port, "/v1/models", "-H 'Authorization: Bearer wrong'") == "401"
        assert host.http_code(port, "/metrics") == "200"
        info = json.loads(host.out(f"curl -sf {auth} http://127.0.0.1:{port}/server_info"))
        assert info["port"] == port and info["cuda_graph_bs_decode"] == [1, 8]
        assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
                info["speculative_num_draft_tokens"]) == (5, 4, 8)
        models = json.loads(host.out(f"curl -sf {auth} http://127.0.0.1:{port}/v1/models"))
        assert models["data"][0]["id"] == "llama-test"
        reply = json.loads(host.out(
            f"curl -sf {auth} -H 'Content-Type: application/json' -d '{{\"model\": \"llama-test\", "
            f"\"messages\": [{{\"role\": \"user\", \"content\": \"hi\"}}]}}' "
            f"http://127.0.0.1:{port}/v1/chat/completions"))
        assert reply["choices"][0]["message"]["content"]
        bad = host.run(f"{PY} -m sglang.launch_server --model-path x --config /tmp/llama/config.json", check=False)
        assert bad.returncode == 1 and "Config file must be YAML format" in bad.stderr
    finally:
        host.kill_all_standin()


def test_faults_never_ready_ignore_sigterm_crash_after(host: Host) -> None:
    try:
        host.run("printf 'NEVER_READY=1\\nLOAD_SECONDS=0.5\\n' > /etc/sglang-standin/faults.env")
        host.start_background("never", "--model-path m --port 30005")
        host.wait_until("ss -Hltn 'sport = :30005' | grep -q LISTEN", timeout=20)
        time.sleep(1)
        assert host.http_code(30005, "/health") == "503"
        host.kill_all_standin()

        host.run("printf 'IGNORE_SIGTERM=1\\nCRASH_AFTER=2\\n' > /etc/sglang-standin/faults.env")
        main = host.start_background("crash", "--model-path m --tp-size 2 --port 30006",
                                     env="SGLANG_STANDIN_LOAD_SECONDS=0.5")
        host.wait_http(30006, "/health", "200", timeout=30)
        host.run(f"kill -TERM {main}")
        time.sleep(1)
        assert host.http_code(30006, "/health") == "200"  # SIGTERM ignored
        host.wait_until(f"! kill -0 {main} 2>/dev/null", timeout=5)  # ... but it crashes
        assert "CRASH_AFTER" in host.out("cat /tmp/crash.log")
        assert host.schedulers() == set()
    finally:
        host.run("rm -f /etc/sglang-standin/faults.env")
        host.kill_all_standin()


def test_gpu_count_seven_simulates_a_missing_gpu(host: Host) -> None:
    try:
        host.run("echo 7 > /etc/fake-nvidia/gpu_count")
        assert len(host.out("nvidia-smi -L").splitlines()) == 7
        host.run("systemctl restart fake-nvidia-devices")
        assert host.run("test -e /dev/nvidia7", check=False).returncode != 0
        assert host.out("nvidia-smi --query-gpu=count --format=csv,noheader -i 0").strip() == "7"
    finally:
        host.run("rm -f /etc/fake-nvidia/gpu_count && systemctl restart fake-nvidia-devices")
    assert len(host.out("nvidia-smi -L").splitlines()) == 8


# --- hardware profiles ------------------------------------------------------------------------------


def _switch_profile(host: Host, profile: str | None) -> None:
    """Give the running host another hardware profile (None: back to the container's default)."""
    host.run("rm -f /etc/fake-nvidia/profile" if profile is None else f"echo {profile} > /etc/fake-nvidia/profile")
    host.run("systemctl restart fake-nvidia-devices")


def test_default_host_has_proc_and_pci_entries(host: Host) -> None:
    assert host.out("cat /run/fake-nvidia/profile").strip() == "rtxpro6000-8"
    info = host.out("cat /proc/driver/nvidia/gpus/0000:21:00.0/information")
    assert "Device Minor: \t 1\n" in info and "Bus Location: \t 0000:21:00.0\n" in info
    assert host.out("ls /sys/bus/pci/devices").split() == ["0000:00:00.0"] + [
        f"0000:{b}:00.0" for b in ("01", "21", "41", "61", "81", "a1", "c1", "e1")]
    assert host.out("cat /sys/bus/pci/devices/0000:01:00.0/vendor /sys/bus/pci/devices/0000:01:00.0/class").split() == \
        ["0x10de", "0x030200"]
    assert host.run("test -e /sys/bus/pci/devices/0000:01:00.0/iommu_group", check=False).returncode != 0
    assert host.run("touch /proc/driver/nvidia/x", check=False).returncode != 0  # read-only, like procfs
    # A sandboxed SGLang unit (fresh procfs) sees the same tree through the image's drop-in.
    seen = host.out("systemd-run --unit=sglang-h14-procfs --wait --pipe --quiet -p ProtectKernelTunables=yes "
                    "-p ProtectProc=invisible -p DynamicUser=yes ls /proc/driver/nvidia/gpus")
    assert len(seen.split()) == 8


def test_hgx_profile_nodes_topology_and_fabric_manager(host: Host) -> None:
    _sh([str(REPO / "tests/fixtures/aptrepo/build-aptrepo.sh")])
    deb = sorted((REPO / "build/aptrepo").glob("cuda/repos/*/*/nvidia-fabricmanager-580_*.deb"))
    assert deb, "build-aptrepo.sh built no nvidia-fabricmanager-580"
    _sh(["docker", "cp", str(deb[-1]), f"{host.name}:/var/tmp/fm.deb"])
    try:
        host.run("dpkg -i /var/tmp/fm.deb >/dev/null")
        res = host.run("systemctl start nvidia-fabricmanager", check=False)
        assert res.returncode != 0  # a PCIe host has no NVSwitch: fabric manager fails, as the real one does
        assert "NV_WARN_NOTHING_TO_DO" in host.out("journalctl -u nvidia-fabricmanager -o cat")

        _switch_profile(host, "hgx-b200")
        rows = host.out("nvidia-smi --query-gpu=index,name,compute_cap,memory.total --format=csv,noheader,nounits")
        assert rows.splitlines() == [f"{i}, NVIDIA B200, 10.0, 183359" for i in range(8)]
        assert host.out("ls /dev/nvidia-nvswitch* /dev/infiniband/ /dev/nvidia-caps-imex-channels/").split() == [
            "/dev/nvidia-nvswitch0", "/dev/nvidia-nvswitch1", "/dev/nvidia-nvswitch2", "/dev/nvidia-nvswitch3",
            "/dev/nvidia-nvswitchctl", "/dev/infiniband/:", "uverbs0", "uverbs1", "uverbs2", "uverbs3",
            "/dev/nvidia-caps-imex-channels/:", "channel0"]
        switches = host.out("grep -l 0x0680 /sys/bus/pci/devices/*/class | xargs -n1 dirname | xargs -n1 basename")
        assert switches.split() == ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
        assert host.out("cat /sys/bus/pci/devices/0000:1b:00.0/iommu_group/type").strip() == "identity"
        topo = host.out("nvidia-smi topo -m")
        assert "GPU0\t X \tNV18\tNV18" in topo and "NIC Legend:" in topo
        assert "OK" in host.out("nvidia-smi topo -p2p r") and "NS" not in host.out("nvidia-smi topo -p2p r").split("Legend")[0]

        host.run("systemctl reset-failed nvidia-fabricmanager; systemctl start nvidia-fabricmanager")
        assert host.out("systemctl is-active nvidia-fabricmanager").strip() == "active"
        pid = int(host.out("systemctl show -p MainPID --value nvidia-fabricmanager"))
        assert pid in host.pids("fuser /dev/nvidia-nvswitch0 2>/dev/null")
    finally:
        host.run("systemctl stop nvidia-fabricmanager; dpkg --purge nvidia-fabricmanager-580 >/dev/null; "
                 "systemctl reset-failed", check=False)
        _switch_profile(host, None)
    assert host.run("ls /dev/nvidia-nvswitch0 /dev/infiniband", check=False).returncode != 0
    assert len(host.out("nvidia-smi -L").splitlines()) == 8


def test_shuffled_minors_cuda_uuids_and_device_report(host: Host) -> None:
    """CUDA_VISIBLE_DEVICES UUIDs reach /dev/nvidia<minor> through the profile; the stand-in reports what it opened."""
    unit, port = "sglang-h14-shuffled", 30007
    _switch_profile(host, "minors-shuffled")
    try:
        assert host.out("ls /dev | grep -E '^nvidia[0-9]+$' | sort -V").split() == [f"nvidia{i}" for i in range(4)]
        uuids = host.out("nvidia-smi --query-gpu=uuid --format=csv,noheader").split()
        minors = {b: int(host.out(f"grep 'Device Minor' /proc/driver/nvidia/gpus/{b}/information").split()[-1])
                  for b in ("0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0")}
        assert list(minors.values()) == [2, 0, 3, 1]
        host.run(f"systemd-run --unit={unit} -p ProtectKernelTunables=yes -p ProtectProc=invisible "
                 f"-p DevicePolicy=closed -p 'DeviceAllow=/dev/nvidiactl rw' -p 'DeviceAllow=/dev/nvidia1 rw' "
                 f"-p 'DeviceAllow=/dev/nvidia3 rw' -E CUDA_VISIBLE_DEVICES={uuids[3]},{uuids[2]} "
                 f"-E SGLANG_STANDIN_LOAD_SECONDS=0.5 {PY} -m sglang.launch_server --model-path m --tp-size 2 --port {port}")
        host.wait_http(port, "/health", "200", timeout=30)
        report = json.loads(host.out(f"curl -sf http://127.0.0.1:{port}/standin/devices"))
        assert report["opened"] == {"sglang::scheduler_TP0": "/dev/nvidia1", "sglang::scheduler_TP1": "/dev/nvidia3"}
        # All simulated nodes are null devices, which DevicePolicy=closed always allows.
        assert report["openable"] == {f"/dev/nvidia{m}": "ok" for m in range(4)}
        assert "stand-in devices: " in host.out(f"journalctl -u {unit} -o cat")
        apps = host.out("nvidia-smi --query-compute-apps=gpu_bus_id,process_name --format=csv,noheader").splitlines()
        assert sorted(apps) == ["00000000:41:00.0, sglang::scheduler_TP1", "00000000:61:00.0, sglang::scheduler_TP0"]
        host.run(f"systemctl stop {unit}")

        bad = host.run(f"CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 {PY} -m sglang.launch_server "
                       f"--model-path m --port {port}", check=False, timeout=30)
        assert bad.returncode == 1 and "No CUDA GPUs are available" in bad.stderr
        bad = host.run(f"CUDA_VISIBLE_DEVICES={uuids[0]},GPU-00000000-0000-0000-0000-000000000000 SGLANG_STANDIN_LOAD_SECONDS=0.5 "
                       f"{PY} -m sglang.launch_server --model-path m --tp-size 2 --port {port}", check=False, timeout=30)
        assert bad.returncode == 1 and "invalid device ordinal" in bad.stderr
    finally:
        host.run(f"systemctl stop {unit}; systemctl reset-failed", check=False)
        _switch_profile(host, None)
    assert host.out("ls /dev | grep -E '^nvidia[0-9]+$' | sort -V").split() == [f"nvidia{i}" for i in range(8)]


def test_gb10_profile_from_the_container_environment() -> None:
    """FAKE_NVIDIA_PROFILE of the container (simhost.sh --profile) chooses the profile at boot."""
    name = f"bsa-simtest-{uuid.uuid4().hex[:8]}"
    _sh([str(SIMHOST / "simhost.sh"), "up", name, "--profile", "gb10"], timeout=180)
    try:
        h = Host(name)
        assert h.out("nvidia-smi --query-gpu=index,pci.bus_id,name,compute_cap,memory.total --format=csv,noheader,nounits") \
            == "0, 0000000F:01:00.0, NVIDIA GB10, 12.1, [N/A]\n"
        assert h.out("ls /proc/driver/nvidia/gpus").split() == ["000f:01:00.0"]
        assert h.out("ls /dev | grep -E '^nvidia[0-9]+$'").split() == ["nvidia0"]
        assert h.out("su nobody -s /bin/sh -c 'nvidia-smi -L'").startswith("GPU 0: NVIDIA GB10 (UUID: GPU-")
    finally:
        subprocess.run([str(SIMHOST / "simhost.sh"), "down", name], check=False)
