"""The provisioning roles on a bare simulated Blackwell host, case by case (molecule scenario `provision`).

After molecule's converge and idempotence (driver 575.57.08, CUDA 12.9.1, SGLang 0.5.23, model
revision 1), the tests check the host, then drive converge.yml through ansible-runner: a version change
while a process holds a GPU (reboot pending, host failed), the same change with the GPU free (live
reload), the kernel caches across that SGLang upgrade (built before the stop, found warm, a stuck compile),
check mode, a missing GPU, Secure Boot, a full disk, and last an offline site: playbooks/bundle.yml builds
the bundle of the older versions, the fixtures are taken away, and the host goes back to those versions from the
bundle alone. They run in file order; each but the last leaves the host provisioned at the newer versions.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
from simrun import unreachable

SCENARIO = Path(__file__).resolve().parents[1]
REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", SCENARIO.parents[1]))
HOST = "bsa-mol-provision"
MODEL_DIR = "/opt/sglang/models/nvidia/Qwen3.5-397B-A17B-NVFP4"
TOKEN = "hf_fixture_token_0123456789"
REVISIONS = json.loads(
    subprocess.run([sys.executable, str(REPO / "tests/fixtures/simhost/fakehub/fakehub.py"), "--print-revisions"],
                   check=True, capture_output=True, text=True).stdout
)
OLD_DRIVER, NEW_DRIVER = "575.57.08", "580.95.05"
UPGRADE = {
    "nvidia_driver_branch": "580",
    "nvidia_driver_version": NEW_DRIVER,
    "cuda_toolkit_version": "13.0.2",
    "sglang_version": "0.5.24",
    "sglang_model_revision": REVISIONS["rev2"],
}
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def sh(script: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", "exec", HOST, "bash", "-c", script], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"`{script}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def out(script: str) -> str:
    return sh(script).stdout.strip()


def packages() -> dict[str, tuple[str, str]]:
    """Installed packages: name -> (dpkg status abbreviation, version)."""
    lines = out(r"dpkg-query --show --showformat='${db:Status-Abbrev}|${Package}|${Version}\n'").splitlines()
    return {name: (status.strip(), version) for status, name, version in (line.split("|") for line in lines) if status[1:2] == "i"}


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario's group variables with its container as the only host."""
    inv = tmp_path_factory.mktemp("inventory")
    shutil.copytree(SCENARIO / "inventory" / "group_vars", inv / "group_vars")
    (inv / "hosts.yml").write_text(json.dumps({
        "all": {
            "children": {"sglang_servers": {"hosts": {HOST: {}}}},
            "vars": {"ansible_connection": "community.docker.docker_api", "ansible_python_interpreter": "/usr/bin/python3"},
        }
    }))
    return inv


class Run:
    def __init__(self, runner: ansible_runner.Runner) -> None:
        self.runner = runner
        self.stats = runner.stats or {}
        self.stdout = runner.stdout.read()

    @property
    def changed(self) -> int:
        return sum(self.stats.get("changed", {}).values())

    @property
    def failed(self) -> bool:
        return self.runner.rc != 0

    def failures(self) -> list[str]:
        """Why the run ended: its failed tasks, else its unreachable hosts, else the tail of its output."""
        failed = [
            f"{e['event_data'].get('task')}: {e['event_data'].get('res', {}).get('msg', '')}"
            for e in self.runner.events
            if e.get("event") == "runner_on_failed" and not e["event_data"].get("ignore_errors")
        ]
        lost = [f"unreachable {host}" for host in unreachable(self.runner)]
        return failed + lost or [f"rc {self.runner.rc}, the output ends:", *self.stdout.splitlines()[-40:]]

    def changed_tasks(self) -> list[str]:
        return [e["event_data"].get("task", "") for e in self.runner.events
                if e.get("event") == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")]


def play(inventory: Path, tmp_path: Path, tags: str | None = None, check: bool = False, verbosity: int = 0,
         playbook: Path = SCENARIO / "converge.yml", **extravars: Any) -> Run:
    private = tmp_path / f"runner-{time.monotonic_ns()}"
    private.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(playbook),
        inventory=str(inventory),
        extravars=extravars,
        tags=tags,
        cmdline="--check --diff" if check else None,
        verbosity=verbosity,
        envvars={
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_GATHERING": "explicit",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
        quiet=True,
    )
    return Run(runner)


# --- after converge + idempotence: driver 575, CUDA 12.9, SGLang 0.5.23, model revision 1 -------------


def test_repository_is_signed_and_pinned() -> None:
    source = out("cat /etc/apt/sources.list.d/cuda.sources")
    assert "URIs: http://127.0.0.1:8080/cuda/repos/debian12/x86_64/" in source
    assert "Suites: /" in source
    assert "Signed-By: /etc/apt/keyrings/cuda-archive-keyring.asc" in source
    assert out("head -c 36 /etc/apt/keyrings/cuda-archive-keyring.asc") == "-----BEGIN PGP PUBLIC KEY BLOCK-----"
    assert sh("test -e /etc/apt/trusted.gpg", check=False).returncode != 0, "apt-key's keyring must not be used"
    pref = out("cat /etc/apt/preferences.d/nvidia-driver")
    assert f"Pin: version {OLD_DRIVER}-*" in pref and "Pin-Priority: 1001" in pref
    # The metapackage's ">=" dependencies would pull the newer branch without the pin.
    assert "Candidate: 575.57.08-1" in out("apt-cache policy nvidia-smi")


def test_open_driver_installed_held_and_loaded() -> None:
    pkgs = packages()
    for name in ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced", "libcuda1",
                 "libnvidia-ml1", "libnvidia-gpucomp"):
        assert pkgs[name] == ("hi", f"{OLD_DRIVER}-1"), (name, pkgs.get(name))
    assert "nvidia-kernel-dkms" not in pkgs
    assert not [p for p in pkgs if p.startswith("nvidia-fabricmanager")], "no fabric manager on a PCIe host"
    kernel = out("uname -r")
    assert pkgs[f"linux-headers-{kernel}"][0] == "ii"
    assert out("modinfo -F license nvidia") == "Dual MIT/GPL"
    assert out("modinfo -F version nvidia") == OLD_DRIVER
    gpus = out("nvidia-smi --query-gpu=index,compute_cap,driver_version,persistence_mode --format=csv,noheader").splitlines()
    assert gpus == [f"{i}, 12.0, {OLD_DRIVER}, Enabled" for i in range(8)]
    assert "--no-persistence-mode" not in out("systemctl show -p ExecStart nvidia-persistenced")
    assert out("systemctl is-enabled nvidia-persistenced") == "enabled"
    assert "blacklist nouveau" in out("cat /etc/modprobe.d/blacklist-nouveau.conf")
    assert out("grep -c 'update-initramfs -u' /var/log/update-initramfs.log") == "1"
    assert sh("test -e /run/reboot-required", check=False).returncode != 0


def test_cuda_toolkit_held_with_nvcc_on_the_service_path() -> None:
    pkgs = packages()
    assert pkgs["cuda-toolkit-12-9"] == ("hi", "12.9.1-1")
    assert pkgs["cuda-nvcc-12-9"][0] == "hi"
    dropin = out("cat /etc/systemd/system/sglang.service.d/cuda-toolkit.conf")
    assert '"CUDA_HOME=/usr/local/cuda-12.9"' in dropin and '"PATH=/usr/local/cuda-12.9/bin:' in dropin
    assert "release 12.9," in out("bash -lc 'nvcc --version'")


def test_sglang_installed_with_uv_into_a_versioned_venv() -> None:
    target = out("readlink /opt/sglang/current")
    assert re.fullmatch(r"/opt/sglang/venvs/0\.5\.23-[0-9a-f]{12}", target)
    assert out("/opt/sglang/current/bin/python -c 'import importlib.metadata as m; print(m.version(\"sglang\"))'") == "0.5.23"
    assert "uv" in out("cat /opt/sglang/current/pyvenv.cfg"), "the venv is made by uv"
    assert out("/opt/sglang/tools/bin/uv --version").startswith("uv 0.13.8")
    assert out("getent passwd sglang").endswith(":/var/lib/sglang:/usr/sbin/nologin")


def test_model_staged_at_the_pinned_revision() -> None:
    stamp = json.loads(out(f"cat {MODEL_DIR}/.sglang-model.json"))
    assert stamp["revision"] == REVISIONS["rev1"]
    assert "Qwen3_5MoeForConditionalGeneration" in out(f"cat {MODEL_DIR}/config.json")
    assert out(f"stat -c '%U %s' {MODEL_DIR}/model-00002-of-00002.safetensors").startswith("sglang ")
    assert out("stat -c '%U %a' /opt/sglang/models/.huggingface/token") == "sglang 600"
    log = out("cat /var/log/fakehub.log")
    assert " 401" not in log, "every request carried the token"
    # converge downloaded each file once; idempotence asked the hub nothing (revision marker).
    assert len(re.findall(r"^GET /nvidia/\S+/resolve/", log, re.M)) == 8


# --- a version change -------------------------------------------------------------------------------


def test_version_change_with_a_gpu_in_use_fails_with_reboot_pending(inventory: Path, tmp_path: Path) -> None:
    sh("systemd-run --unit=bsa-gpu-holder /bin/sh -c 'exec 3</dev/nvidia0; exec sleep infinity'")
    try:
        run = play(inventory, tmp_path, tags="driver", **UPGRADE)
        assert run.failed
        failures = run.failures()
        assert len(failures) == 1 and "reboot required" in failures[0], failures
        assert "Module nvidia is in use" in failures[0] and "nvidia_driver_reboot is never" in failures[0]
        # Installed and held before the host was failed; the old branch is gone.
        pkgs = packages()
        for name in ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced"):
            assert pkgs[name] == ("hi", f"{NEW_DRIVER}-1"), (name, pkgs.get(name))
        assert "libnvidia-gpucomp" not in pkgs
        assert not [p for p, (_, v) in pkgs.items() if v.startswith(OLD_DRIVER)]
        assert out("cat /run/reboot-required") == "*** System restart required ***"
        smi = sh("nvidia-smi", check=False)
        assert smi.returncode == 18 and "Driver/library version mismatch" in smi.stdout
        assert out("systemctl is-active nvidia-persistenced") == "active", "stopped for the reload, started again"
    finally:
        sh("systemctl stop bsa-gpu-holder", check=False)


def test_version_change_reloads_the_module_live(inventory: Path, tmp_path: Path) -> None:
    sh("rm -f /run/sglang-server-restart-requested && : > /var/log/fakehub.log")
    run = play(inventory, tmp_path, verbosity=2, **UPGRADE)
    assert not run.failed, run.failures()
    assert TOKEN not in run.stdout, "hf_token leaked into the output"
    pkgs = packages()
    assert pkgs["nvidia-driver-cuda"] == ("hi", f"{NEW_DRIVER}-1")
    assert f"Pin: version {NEW_DRIVER}-*" in out("cat /etc/apt/preferences.d/nvidia-driver")
    gpus = out("nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader").splitlines()
    assert gpus == [f"{NEW_DRIVER}, Enabled"] * 8
    # CUDA: the new series held, the old one removed.
    assert pkgs["cuda-toolkit-13-0"] == ("hi", "13.0.2-1")
    assert not [p for p in pkgs if p.endswith("-12-9")]
    assert "release 13.0," in out("PATH=/usr/local/cuda-13.0/bin:/usr/bin:/bin nvcc --version")
    assert '"CUDA_HOME=/usr/local/cuda-13.0"' in out("cat /etc/systemd/system/sglang.service.d/cuda-toolkit.conf")
    # SGLang: current switched, the previous venv kept for a rollback.
    assert re.fullmatch(r"/opt/sglang/venvs/0\.5\.24-[0-9a-f]{12}", out("readlink /opt/sglang/current"))
    venvs = out("ls /opt/sglang/venvs").split()
    assert [v.split("-")[0] for v in venvs if not v.endswith(".txt")] == ["0.5.23", "0.5.24"]
    # Model: only the files that changed between the revisions were downloaded.
    assert json.loads(out(f"cat {MODEL_DIR}/.sglang-model.json"))["revision"] == REVISIONS["rev2"]
    fetched = sorted(re.findall(r"^GET /nvidia/\S+/resolve/\w+/(\S+) 200$", out("cat /var/log/fakehub.log"), re.M))
    assert fetched == ["README.md", "generation_config.json"]
    assert out("cat /run/sglang-server-restart-requested") == "restart requested"



# --- kernel caches across the upgrade (issue 35 item 1) ---------------------------------------------------------------
# No release after 0.5.23 has a schema, so the validator (and with it roles/sglang_server) cannot run 0.5.24 here: the
# instance is a unit of this test's own, rendered as roles/sglang_server renders its environment (the kernel cache
# variables of sglang_kernel_cache.kernel_cache), running the stand-in of the release's virtualenv as the service user.
# tests/unit/test_kernel_precompile.py checks that the role runs the same module in prepare.yml, before the drain.

KUNIT = "bsa-kernels"
KROOT = "/var/cache/bsa-kernels"
KSTATE = "/var/lib/bsa-kernels"
KPORT = 30123


def _kernel_cache(version: str) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "collections"))
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_kernel_cache import kernel_cache

    return kernel_cache(KROOT, version, "", [(12, 0)], KUNIT)


def _install_unit(version: str) -> dict[str, Any]:
    """The instance's unit and environment for ``version`` (daemon-reload, no restart: the running server stays)."""
    venv = out(f"ls -d /opt/sglang/venvs/{version}-* | grep -v '\\.txt$' | head -1")
    cache = _kernel_cache(version)
    env = {"HOME": KSTATE, "SGLANG_STANDIN_STATE_DIR": KSTATE, "SGLANG_STANDIN_LOAD_SECONDS": "0",
           "SGLANG_STANDIN_READ_WEIGHTS": "0", **cache["env"]}
    unit = (f"[Unit]\nDescription=kernel cache test instance\n\n[Service]\nType=exec\nUser=sglang\nGroup=sglang\n"
            f"WorkingDirectory={KSTATE}\nEnvironmentFile=/etc/{KUNIT}.env\n"
            f"ExecStart={venv}/bin/python -m sglang.launch_server --model-path {MODEL_DIR} --host 127.0.0.1 "
            f"--port {KPORT}\n")
    env_text = "".join(f"{k}={v}\n" for k, v in sorted(env.items()))
    encoded = {name: base64.b64encode(text.encode()).decode() for name, text in (("env", env_text), ("unit", unit))}
    sh(f"install -d -o sglang -g sglang {KROOT} {KSTATE} && echo {encoded['env']} | base64 -d > /etc/{KUNIT}.env"
       f" && echo {encoded['unit']} | base64 -d > /etc/systemd/system/{KUNIT}.service && systemctl daemon-reload")
    return {"venv": venv, "cache": cache}


def _ready(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sh(f"python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{KPORT}/health', timeout=1)\"",
              check=False).returncode == 0:
            return True
        time.sleep(0.3)
    return False


def _starts() -> list[dict[str, Any]]:
    text = sh(f"cat {KSTATE}/standin-kernels.jsonl", check=False).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _precompile(inventory: Path, tmp_path: Path, installed: dict[str, Any], **extra: Any) -> Run:
    book = tmp_path / f"precompile-{time.monotonic_ns()}.yml"
    task = {"key": installed["cache"]["key"], "cache_dir": installed["cache"]["dir"],
            "args": ["--model-path", MODEL_DIR, "--host", "127.0.0.1", "--port", str(KPORT)],
            "python": f"{installed['venv']}/bin/python", "unit_path": f"/etc/systemd/system/{KUNIT}.service",
            "transient_unit": f"{KUNIT}-precompile", "mode": "always", "timeout": 60, **extra}
    book.write_text(json.dumps([{"name": "Pre-compile", "hosts": "sglang_servers", "become": True,
                                 "gather_facts": False,
                                 "tasks": [{"name": "Build the kernels before the stop",
                                            "blackwell.sglang.kernel_precompile": task, "register": "built"},
                                           {"name": "Show", "ansible.builtin.debug": {"var": "built"}}]}]))
    return play(inventory, tmp_path, playbook=book)


def _built(run: Run) -> dict[str, Any]:
    return next(e["event_data"]["res"] for e in run.runner.events
                if e.get("event") in ("runner_on_ok", "runner_on_failed")
                and e["event_data"].get("task") == "Build the kernels before the stop")


@pytest.mark.extended  # kernels built before the stop, then warm: test_upgrade (fleet) and test_restart's kernel case
def test_an_upgrade_builds_the_new_releases_kernels_before_the_stop(inventory: Path, tmp_path: Path) -> None:
    try:
        # The instance serves 0.5.23; its first start compiled 0.5.23's kernels (a cold cache).
        _install_unit("0.5.23")
        sh(f"systemctl start {KUNIT}")
        assert _ready(60), sh(f"journalctl -u {KUNIT} -o cat | tail -20", check=False).stdout
        assert [(s["version"], s["by"], s["found"]) for s in _starts()] == [("0.5.23", "server", "cold")]
        pid = out(f"systemctl show -p MainPID --value {KUNIT}")

        # The upgrade installs 0.5.24's unit (a new kernel cache key) and, while 0.5.23 still serves, builds its kernels
        # with the instance's arguments, as the service, with the unit's environment.
        new = _install_unit("0.5.24")
        assert new["cache"]["key"].startswith("sglang-0.5.24_") and new["cache"]["dir"] != _kernel_cache("0.5.23")["dir"]
        start = time.monotonic()
        run = _precompile(inventory, tmp_path, new)
        took = time.monotonic() - start
        assert not run.failed, run.failures()
        built = _built(run)
        assert built["changed"] and built["built"] and built["compile"]["rc"] == 0, built
        assert out(f"systemctl show -p MainPID --value {KUNIT}") == pid, "the running server was not touched"
        assert _starts()[-1]["version"] == "0.5.24" and _starts()[-1]["by"] == "compile_deep_gemm"
        assert _starts()[-1]["found"] == "cold" and _starts()[-1]["dir"] == f"{new['cache']['dir']}/deep_gemm"
        marker = json.loads(out(f"cat {new['cache']['dir']}/.blackwell-precompiled.json"))
        assert marker["key"] == new["cache"]["key"]
        print(f"pre-compile of 0.5.24 before the stop: {built['seconds']} s in the module, {took:.1f} s the play")

        again = _built(_precompile(inventory, tmp_path, new))
        assert not again["changed"] and "are built" in again["skip_reason"], again

        # The restart: the first start of 0.5.24 finds its kernels warm.
        sh(f"systemctl restart {KUNIT}")
        assert _ready(60)
        first = _starts()[-1]
        assert (first["version"], first["by"], first["found"]) == ("0.5.24", "server", "warm"), _starts()

        # A stale lock (a killed compile) hangs the next cold start in the compile; the stuck-compile decision names
        # the instance's directory of that key; cleared, the one retry compiles and serves.
        from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_precompile import stuck_in_compile

        sh(f"systemctl stop {KUNIT} && rm -rf {new['cache']['dir']} && install -d -o sglang -g sglang"
           f" {new['cache']['dir']}/deep_gemm/locks && echo 4242 > {new['cache']['dir']}/deep_gemm/locks/standin.lock")
        sh(f"systemctl start {KUNIT}")
        assert not _ready(8)
        invocation = out(f"systemctl show -p InvocationID --value {KUNIT}")
        journal = sh(f"journalctl -o cat _SYSTEMD_INVOCATION_ID={invocation}", check=False).stdout.splitlines()
        decision = stuck_in_compile(journal, ready=False, waited=8, budget=8, attempt=0, kernel_cache=new["cache"])
        assert decision["stuck"] and decision["retry"] and decision["clear"] == [new["cache"]["dir"]], (decision, journal)
        assert _starts()[-1]["found"] == "locked"
        sh(f"systemctl stop {KUNIT} && rm -rf {decision['clear'][0]} && systemctl start {KUNIT}")
        assert _ready(60)
        assert (_starts()[-1]["version"], _starts()[-1]["found"]) == ("0.5.24", "cold")
    finally:
        sh(f"systemctl stop {KUNIT} {KUNIT}-precompile; rm -rf /etc/systemd/system/{KUNIT}.service /etc/{KUNIT}.env"
           f" {KROOT} {KSTATE}; systemctl daemon-reload", check=False)

def test_check_mode_reports_no_changes(inventory: Path, tmp_path: Path) -> None:
    run = play(inventory, tmp_path, check=True, **UPGRADE)
    assert not run.failed, run.failures()
    assert run.changed == 0, run.changed_tasks()
    # Converged: what the driver and toolkit roles read of the host (blackwell.sglang.driver_state) is what they would
    # write, so their changing steps are skipped as a whole.
    for task in ("Bring the host to the pinned driver", "Bring the host to the pinned toolkit"):
        events = [e["event"] for e in run.runner.events if e.get("event_data", {}).get("task") == task
                  and e["event"].startswith("runner_on_") and e["event"] != "runner_on_start"]
        assert events == ["runner_on_skipped"], (task, events)


# --- failures: each fails the host with a message, and changes nothing that it should not -------------


def test_missing_gpu_fails_the_host(inventory: Path, tmp_path: Path) -> None:
    sh("echo 7 > /etc/fake-nvidia/gpu_count")
    try:
        run = play(inventory, tmp_path, tags="driver", **UPGRADE)
        assert run.failed
        failures = run.failures()
        assert len(failures) == 1, failures
        assert "nvidia-smi shows 7 GPU(s) (index 0, 1, 2, 3, 4, 5, 6) but nvidia_gpu_count is 8" in failures[0]
        assert run.changed == 0, run.changed_tasks()
    finally:
        sh("rm -f /etc/fake-nvidia/gpu_count")


def test_secure_boot_with_unsigned_modules_fails_before_any_change(inventory: Path, tmp_path: Path) -> None:
    sh(f"mount -t tmpfs efi /sys/firmware && mkdir -p {os.path.dirname(SECURE_BOOT_VAR)}"
       f" && printf '\\006\\000\\000\\000\\001' > {SECURE_BOOT_VAR}")
    try:
        # A downgrade would change everything: nothing may happen.
        run = play(inventory, tmp_path, tags="driver")
        assert run.failed
        failures = run.failures()
        assert len(failures) == 1 and "Secure Boot is enabled" in failures[0], failures
        assert "nvidia_driver_secure_boot_mok_enrolled" in failures[0]
        assert run.changed == 0, run.changed_tasks()
        assert packages()["nvidia-smi"][1] == f"{NEW_DRIVER}-1"
    finally:
        sh("umount /sys/firmware", check=False)


def test_full_disk_stops_the_model_download(inventory: Path, tmp_path: Path) -> None:
    sh(": > /var/log/fakehub.log")
    run = play(inventory, tmp_path, tags="model",
               **{**UPGRADE, "sglang_model_revision": REVISIONS["rev1"], "sglang_model_disk_headroom_bytes": 10**18})
    assert run.failed
    failures = run.failures()
    assert len(failures) == 1 and "not enough disk space" in failures[0], failures
    assert "2 file(s) of 8 still to download" in failures[0] and "Nothing was downloaded" in failures[0]
    assert not re.findall(r"^GET /nvidia/\S+/resolve/", out("cat /var/log/fakehub.log"), re.M)
    assert json.loads(out(f"cat {MODEL_DIR}/.sglang-model.json"))["revision"] == REVISIONS["rev2"]


# --- a site behind a proxy ----------------------------------------------------------------------------------------


def test_proxy_env_carries_every_download(inventory: Path, tmp_path: Path) -> None:
    """proxy_env reaches apt, the key download and the Hub client: each goes through the (logging) proxy."""
    subprocess.run(["docker", "cp", str(REPO / "tests/fixtures/simhost/fakeproxy/fakeproxy.py"), f"{HOST}:/srv/fixtures/"],
                   check=True)
    sh("systemd-run --unit=bsa-fixture-proxy /usr/bin/python3 /srv/fixtures/fakeproxy.py --log /var/log/fakeproxy.log"
       " && for i in $(seq 50); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 3128))' 2>/dev/null"
       " && break; sleep 0.1; done")
    proxy = {"http_proxy": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128", "no_proxy": ""}
    try:
        # Something to fetch: apt's lists and the repository key gone, the model at the other revision.
        sh("apt-get clean && rm -rf /var/lib/apt/lists/* /etc/apt/keyrings/cuda-archive-keyring.asc")
        run = play(inventory, tmp_path, proxy_env=proxy, **{**UPGRADE, "sglang_model_revision": REVISIONS["rev1"]})
        assert not run.failed, run.failures()
        log = out("cat /var/log/fakeproxy.log")
        repo = "http://127.0.0.1:8080/cuda/repos/debian12/x86_64/"
        assert f"GET {repo}fixture-archive-key.pub 200" in log.splitlines(), log
        assert re.search(rf"^GET {re.escape(repo)}(InRelease|Release) 200$", log, re.M), log
        # hf asks the Hub for each file's metadata (HEAD) and fetches what changed.
        assert re.search(r"^(HEAD|GET) http://127\.0\.0\.1:8081/\S+/resolve/\S+ 200$", log, re.M), log
        # Back at the newer revision, through the proxy too.
        run = play(inventory, tmp_path, proxy_env=proxy, tags="model", **UPGRADE)
        assert not run.failed, run.failures()
        assert json.loads(out(f"cat {MODEL_DIR}/.sglang-model.json"))["revision"] == REVISIONS["rev2"]
    finally:
        sh("systemctl stop bsa-fixture-proxy", check=False)


# --- an offline site: the bundle, then a provision with no index, no repository and no wheelhouse reachable -------


BUNDLE = "/srv/sglang-bundle"


def test_offline_bundle_provisions_the_host_with_nothing_reachable(inventory: Path, tmp_path: Path) -> None:
    # Built on this host while the fixtures (the index, NVIDIA's repository) are reachable, for the versions it runs:
    # driver 580, CUDA 13.0, SGLang 0.5.24 from its lock.
    run = play(inventory, tmp_path, playbook=REPO / "playbooks/bundle.yml", bundle_hosts=HOST, bundle_dir=BUNDLE,
               **UPGRADE)
    assert not run.failed, run.failures()
    repo = f"{BUNDLE}/apt/debian12/x86_64"
    files = set(out(f"ls {repo}").split())
    assert {"InRelease", "Packages", "fixture-archive-key.pub", "nvidia-driver-cuda_580.95.05-1_amd64.deb",
            "nvidia-kernel-open-dkms_580.95.05-1_amd64.deb", "nvidia-smi_580.95.05-1_amd64.deb",
            "libnvidia-ml1_580.95.05-1_amd64.deb", "nvidia-fabricmanager-580_580.95.05-1_amd64.deb",
            "cuda-toolkit-13-0_13.0.2-1_amd64.deb", "cuda-nvcc-13-0_13.0.88-1_amd64.deb"} <= files, files
    # Only what the pinned versions need: no other branch, no other series; the index is the repository's, unchanged.
    assert not [f for f in files if "575." in f or "12-9" in f or "datacenter-gpu" in f], files
    assert out(f"sha256sum < {repo}/InRelease") == out("sha256sum < /srv/fixtures/aptrepo/cuda/repos/debian12/x86_64/InRelease")
    wheels = set(out(f"ls {BUNDLE}/wheels").split())
    assert {"sglang-0.5.24-py3-none-any.whl", "uv-0.13.8-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "huggingface_hub-2.4.0-py3-none-any.whl"} <= wheels, wheels
    assert "sglang-0.5.23-py3-none-any.whl" not in wheels
    assert out(f"ls {BUNDLE}/locks") == "sglang-0.5.24-no-torch.txt"
    again = play(inventory, tmp_path, playbook=REPO / "playbooks/bundle.yml", bundle_hosts=HOST, bundle_dir=BUNDLE,
                 **UPGRADE)
    assert not again.failed and again.changed == 0, again.changed_tasks()

    # The site has no network: the repository server and the hub stopped, the wheelhouse gone, apt's lists and cache
    # empty, NVIDIA's source removed (a new host has none); the toolkit, the virtualenvs and the tools removed.
    sh("systemctl stop bsa-fixture-aptrepo bsa-fixture-hub && mv /srv/fixtures/wheelhouse /srv/fixtures/wheelhouse.away"
       " && apt-mark unhold 'cuda-*-13-0' >/dev/null && apt-get purge -y -q 'cuda-*-13-0' >/dev/null"
       " && rm -f /etc/apt/sources.list.d/cuda.sources && apt-get clean && rm -rf /var/lib/apt/lists/*"
       " && rm -rf /opt/sglang/venvs /opt/sglang/current /opt/sglang/tools /var/cache/sglang-uv")
    assert "cuda-toolkit-13-0" not in packages()
    try:
        offline = {**UPGRADE, "offline_bundle_dir": BUNDLE}
        run = play(inventory, tmp_path, **offline)
        assert not run.failed, run.failures()
        pkgs = packages()
        assert pkgs["cuda-toolkit-13-0"] == ("hi", "13.0.2-1")
        assert pkgs["nvidia-driver-cuda"] == ("hi", f"{NEW_DRIVER}-1")
        assert f"URIs: file://{repo}/" in out("cat /etc/apt/sources.list.d/cuda.sources")
        # The driver's packages come from the bundle too: apt fetches one from it, its signature and hash checked.
        sh(f"cd /tmp && apt-get download -q nvidia-smi={NEW_DRIVER}-1 && rm -f nvidia-smi_*.deb")
        assert re.fullmatch(r"/opt/sglang/venvs/0\.5\.24-[0-9a-f]{12}", out("readlink /opt/sglang/current"))
        assert out("/opt/sglang/current/bin/python -c 'import importlib.metadata as m; print(m.version(\"sglang\"))'") == "0.5.24"
        assert out("/opt/sglang/tools/bin/uv --version").startswith("uv 0.13.8")
        # Installed from the lock: the venv's requirements file is the lock, with its hashes.
        assert "--hash=sha256:" in out(f"cat {out('readlink /opt/sglang/current')}.requirements.txt")
        again = play(inventory, tmp_path, **offline)
        assert not again.failed and again.changed == 0, again.changed_tasks()
    finally:
        sh("mv /srv/fixtures/wheelhouse.away /srv/fixtures/wheelhouse; systemctl start bsa-fixture-aptrepo bsa-fixture-hub",
           check=False)
