"""The validator's trust boundary (issue 30): bounded host-variable values, no crash on any value, distinct ports,
no internals from outside, a checked render_dir, and no secret in plans or reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import (
    HOST_VARS,
    INSTANCE_FIELDS,
    INSTANCE_MERGED,
    INSTANCE_OTHER,
    MAX_VALUE_DEPTH,
    MAX_VALUE_NODES,
    instance_ports,
    plan_host,
    value_bound_problem,
)
from hypothesis import given
from hypothesis import strategies as st
from reference import host_with
from role_defaults import ROLE_DEFAULTS

HOST = "blackwell-01"


def plan(hostvars: dict[str, Any]) -> Any:
    return plan_host(HOST, {HOST: hostvars}, {"all": [HOST]}, role_defaults=ROLE_DEFAULTS)


def problems(hostvars: dict[str, Any]) -> list[Any]:
    return plan(hostvars).result().errors


def two(first: dict[str, Any] | None = None, second: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The reference host running two tp-4 instances on GPUs 0-3 and 4-7, ports 30001 and 30002, plus args."""
    host = host_with({"tp_size": 4}, **extra)
    host["sglang_instances"] = [
        {"name": "chat", "gpus": [0, 1, 2, 3], "port": 30001, "args": dict(first or {})},
        {"name": "code", "gpus": [4, 5, 6, 7], "port": 30002, "args": dict(second or {})},
    ]
    return host


# --- (10) Control node: bounded values ------------------------------------------------------------------------


def alias_bomb(levels: int = 8, width: int = 9) -> list[Any]:
    """What YAML builds from a chain of aliases: each level is ``width`` references to the one below (shared)."""
    value: Any = ["lol"] * width
    for _ in range(levels - 1):
        value = [value] * width
    return value


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize("where", ["sglang_args", "sglang_env", "sglang_instances", "nvidia_gpu_facts", "sglang_model_path"])
@pytest.mark.parametrize("kind", ["aliases", "depth", "text"])
def test_an_oversized_value_is_refused_at_once_naming_the_variable_and_showing_none_of_it(where: str, kind: str) -> None:
    bomb = {"aliases": alias_bomb(), "depth": nested(MAX_VALUE_DEPTH + 5), "text": ["y" * 4096] * 300}[kind]
    host = host_with()
    if where == "sglang_args":
        host["sglang_args"]["served_model_name"] = bomb
    elif where == "sglang_env":
        host["sglang_env"] = {"NCCL_DEBUG": bomb}
    else:
        host[where] = bomb
    start = time.monotonic()
    result = plan(host)
    assert time.monotonic() - start < 1.0
    [problem] = result.result().errors
    assert (problem.rule, problem.variable, problem.value) == ("input.bounds", where, None)
    text = json.dumps(result.as_dict(), default=str)
    assert "lol" not in text and "yyyy" not in text and len(text) < 20_000


@given(st.integers(min_value=1, max_value=12), st.integers(min_value=2, max_value=12))
def test_the_bound_counts_each_use_of_a_shared_value(levels: int, width: int) -> None:
    expanded = sum(width**k for k in range(1, levels + 1)) + 1  # every list and string once per use
    assert (value_bound_problem(alias_bomb(levels, width)) is None) == (expanded <= MAX_VALUE_NODES)


def test_the_reference_host_is_within_the_bounds() -> None:
    assert all(value_bound_problem(v) is None for v in host_with().values())
    assert plan(host_with()).ok


# --- (10) Control node: no value crashes the validator ---------------------------------------------------------

_LEAVES = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
           | st.sampled_from(["²", "٣", "8.0", "-1", "1e3", "nan", "inf", "0x10", "30000", "127.0.0.1:5000"]))
VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=4), max_leaves=10)
INSTANCE_KEYS = sorted({*INSTANCE_FIELDS, *INSTANCE_MERGED, *INSTANCE_OTHER, "api_key", "admin_api_key"})


@pytest.mark.parametrize("variable", HOST_VARS)
@given(value=VALUES)
def test_no_value_of_a_host_variable_escapes_as_an_exception(variable: str, value: Any) -> None:
    host = host_with()
    host[variable] = value
    result = plan(host)  # must not raise
    for problem in result.result().errors:
        assert problem.variable  # every problem names a variable
        if problem.rule == "input.unreadable":
            assert problem.variable.split(".")[0].split("[")[0] == variable


@pytest.mark.parametrize("key", INSTANCE_KEYS)
@given(value=VALUES)
def test_no_value_of_an_instance_key_escapes_as_an_exception(key: str, value: Any) -> None:
    host = two()
    host["sglang_instances"][0][key] = value
    result = plan(host)
    for problem in result.result().errors:
        if problem.rule == "input.unreadable":
            assert problem.variable.startswith("sglang_instances[0]")


@pytest.mark.parametrize("gpus", [["²"], ["٣"], [-1], ["-1"], [2**31], [True], [1.5], ["0x1"]])
@pytest.mark.parametrize("count", [8, "8.0", "8", None])
def test_gpu_indices_are_ascii_whole_numbers_below_2_31(gpus: list[Any], count: Any) -> None:
    host = host_with(sglang_gpus=gpus, nvidia_gpu_count=count)
    result = plan(host)
    assert not result.ok
    assert "sglang_gpus" in [p.variable for p in result.result().errors]
    assert not any("/dev/nvidia-" in str(i.binding) for i in result.instances)


@pytest.mark.parametrize("count", ["8.5", "eight", "-8", [8], {"n": 8}, True])
def test_a_listed_gpu_needs_a_whole_declared_gpu_count(count: Any) -> None:
    host = host_with(sglang_gpus=[0, 1, 2, 3, 4, 5, 6, 7], nvidia_gpu_count=count)
    assert "nvidia_gpu_count" in [p.variable for p in problems(host)]


# --- (7) Ports: every port an instance binds is its own on the host ---------------------------------------------

# (args of the first instance, args of the second): each pair binds one port twice on the host.
_PORT_CLASHES = {
    "nccl_port": ({"nccl_port": 31000}, {"nccl_port": 31000}),
    "grpc_port = other's port": ({"grpc_port": 30002}, {}),
    "grpc_port": ({"grpc_port": 40000}, {"grpc_port": 40000}),
    "legacy grpc derived": ({"grpc_mode": True}, {"grpc_port": 40001}),
    "sidecar derived = other's port": ({"smg_grpc_mode": True, "grpc_port": 41000}, {"port": 30002}),
    "gated_launch_port": ({"gated_launch_port": 32000}, {"gated_launch_port": 32000}),
    "dist_init_addr": ({"dist_init_addr": "127.0.0.1:25000"}, {"nccl_port": 25000}),
    "dp attention derived": ({"enable_dp_attention": True, "dp_size": 2}, {"nccl_port": 30001 + 233}),
    "dp attention zmq ports": ({"enable_dp_attention": True, "dp_size": 2}, {"nccl_port": 30001 + 233 + 3}),
    "engine info bootstrap": ({"remote_instance_weight_loader_start_seed_via_transfer_engine": True},
                              {"remote_instance_weight_loader_start_seed_via_transfer_engine": True}),
}


@pytest.mark.parametrize("first, second", list(_PORT_CLASHES.values()), ids=list(_PORT_CLASHES))
def test_two_instances_cannot_bind_one_port(first: dict[str, Any], second: dict[str, Any]) -> None:
    second = {k: v for k, v in second.items() if k != "port"}
    host = two(first, second)
    assert plan(two()).ok
    found = [p for p in plan(host).problems if p.rule == "instances.port"]
    if not found:  # the arguments themselves may be refused by the validator: then they are not planned at all
        assert not plan(host).ok, "a shared port passed"
    else:
        assert found[0].variable.startswith("sglang_instances[1]")


@given(st.sampled_from(["port", "nccl_port", "grpc_port", "gated_launch_port"]),
       st.sampled_from(["port", "nccl_port", "grpc_port", "gated_launch_port"]), st.integers(20000, 60000))
def test_any_two_port_arguments_of_two_instances_must_differ(one: str, other: str, port: int) -> None:
    host = two()
    for index, dest in ((0, one), (1, other)):
        entry = host["sglang_instances"][index]
        if dest == "port":
            entry["port"] = port
        else:
            entry["args"][dest] = port
    result = plan(host)
    if result.instances and all(i.result.ok for i in result.instances):
        assert [p for p in result.problems if p.rule == "instances.port"], (one, other, port)


def test_the_ports_sglang_derives_from_port_are_listed() -> None:
    [inst] = plan(host_with({"grpc_mode": True, "port": 30000})).instances
    ports = dict(instance_ports(inst.result))
    assert ports[30000] == "port" and 40000 in ports and 30001 in ports


# --- (9) Secrets: sglang_secret_env, name heuristics, no secret in any report -------------------------------------

SECRET = "s3kr1t-VALUE-42"


def shown(result: Any) -> str:
    """Everything a plan, a report and -vvv show of a host."""
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import format_report

    return json.dumps(result.as_dict(), default=str) + format_report(HOST, result.result())


@pytest.mark.parametrize("name", ["DB_PASS", "API_KEYS", "REDIS_PWD", "SMTP_PASSWORD", "MY_AUTH", "AWS_CREDENTIALS",
                                  "GCP_CREDENTIAL", "TLS_PRIVATE_KEY", "SESSION_COOKIE", "WEBHOOK_SIGNATURE",
                                  "AWS_SECRET_ACCESS_KEY", "PASSWORD_FILE", "OPENAI_API_KEY", "HF_TOKEN", "db_passwd"])
def test_secret_named_env_entries_stay_out_of_the_plan(name: str) -> None:
    result = plan(host_with(sglang_env={name: SECRET, "NCCL_DEBUG": "INFO"}))
    [inst] = result.instances
    assert inst.full()["secret_env"][name] == SECRET and name not in inst.public()["env"]
    assert SECRET not in shown(result)


@pytest.mark.parametrize("name", ["TOKENIZERS_PARALLELISM", "NCCL_IB_DISABLE", "CUDA_DEVICE_MAX_CONNECTIONS",
                                  "PYTORCH_CUDA_ALLOC_CONF", "NCCL_SOCKET_IFNAME", "OMP_NUM_THREADS"])
def test_ordinary_env_entries_stay_in_the_plan(name: str) -> None:
    [inst] = plan(host_with(sglang_env={name: "1"})).instances
    assert inst.public()["env"][name] == "1"


@given(st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True), st.text(min_size=6, max_size=20).filter(str.isprintable))
def test_every_sglang_secret_env_entry_is_secret_whatever_its_name(name: str, value: str) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import MANAGED_ENV, legacy_alias

    value = "Z" + value.replace("\\", "").replace('"', "") + "Q"
    result = plan(host_with(sglang_secret_env={name: value}))
    if name in MANAGED_ENV or legacy_alias(name) in MANAGED_ENV or name.startswith("HF_"):
        return
    [inst] = result.instances
    assert inst.full()["secret_env"].get(name) == value, result.result().errors
    assert name not in inst.public()["env"]


@pytest.mark.parametrize("bad", [[SECRET], {"k": SECRET}, None, True])
def test_a_refused_secret_env_entry_never_shows_its_value(bad: Any) -> None:
    result = plan(host_with(sglang_secret_env={"VAULT_X": bad, "OTHER": SECRET}, sglang_env={"DB_PASS": [SECRET]}))
    assert not result.ok and SECRET not in shown(result)


def test_sglang_secret_env_is_a_mapping_and_an_instance_key() -> None:
    assert [p.variable for p in problems(host_with(sglang_secret_env=[SECRET]))] == ["sglang_secret_env"]
    assert SECRET not in shown(plan(host_with(sglang_secret_env=[SECRET])))
    host = two()
    host["sglang_secret_env"] = {"SHARED_X": "a"}
    host["sglang_instances"][0]["secret_env"] = {"MINE_X": SECRET}
    result = plan(host)
    assert result.ok, result.result().errors
    assert result.instances[0].full()["secret_env"] == {"SHARED_X": "a", "MINE_X": SECRET}
    assert result.instances[1].full()["secret_env"] == {"SHARED_X": "a"}
    assert SECRET not in json.dumps(result.as_dict(), default=str)
    host["sglang_env"] = {"MINE_X": "b"}
    assert "sglang_env.MINE_X" in [p.variable for p in problems(host)]


@pytest.mark.parametrize("args", [
    {"watermark_config": json.dumps({"key": SECRET, "bogus": 1})},
    {"watermark_config": {"key": SECRET}},
    {"watermark-config": [SECRET]},
    {"enable_watermark": True, "watermark_config": json.dumps({"key": SECRET, "mixing_probability": 7})},
    {"enable_watermark": True, "watermark_config": json.dumps({"key": SECRET})},
])
def test_an_argument_that_carries_a_key_is_shown_nowhere(args: dict[str, Any]) -> None:
    result = plan(host_with(args))
    assert SECRET not in shown(result)
    for inst in result.instances:
        assert not any(SECRET in a for a in inst.public()["argv"])
        if inst.result.ok:
            assert SECRET in inst.full()["config"]["watermark-config"]  # SGLang still gets it, through --config


# --- (11) Switches: a canary that is the whole run, or more than a batch, is asked for explicitly -----------------


def rollout(n_hosts: int, canary: Any, serial: Any, all_at_once: Any = False) -> dict[str, Any]:
    from ansible_collections.blackwell.sglang.plugins.filter.sglang import rollout_plan

    hosts = [f"gpu-{i:02d}" for i in range(n_hosts)]
    return rollout_plan(hosts, {h: {} for h in hosts}, {"all": hosts, "sglang_servers": hosts}, canary=canary,
                        serial=serial, all_at_once=all_at_once)


@given(st.integers(1, 40), st.integers(1, 45), st.sampled_from([["25%"], "25%", 1, 2, "50%", [1, "25%"], ["100%"], 5]))
def test_a_canary_that_restarts_more_than_a_batch_at_once_is_refused_unless_asked(n_hosts: int, canary: int,
                                                                                    serial: Any) -> None:
    from ansible.errors import AnsibleFilterError

    allowed = rollout(n_hosts, canary, serial, all_at_once=True)
    assert len(allowed["canary"]) == min(canary, n_hosts)
    unbatched = canary > 1 and (not allowed["rest"] or len(allowed["canary"]) > allowed["batches"][0])
    if unbatched:
        with pytest.raises(AnsibleFilterError, match=r"rollout_canary=\d+: .*rollout_all_at_once=true"):
            rollout(n_hosts, canary, serial)
        assert rollout(n_hosts, canary, serial, all_at_once="true") == allowed
    else:
        assert rollout(n_hosts, canary, serial) == allowed


@pytest.mark.parametrize("n_hosts, canary, serial, refused", [
    (9, 1, ["25%"], False), (1, 1, ["25%"], False), (4, 2, 2, False),  # the defaults and what holds today
    (4, 4, ["25%"], True), (4, 9, ["25%"], True), (9, 3, ["25%"], True), (2, 2, 1, True),
    (4, 4, "100%", False),  # exactly 100% is all at once by definition
])
def test_canary_examples(n_hosts: int, canary: int, serial: Any, refused: bool) -> None:
    from ansible.errors import AnsibleFilterError

    if refused:
        with pytest.raises(AnsibleFilterError):
            rollout(n_hosts, canary, serial)
    else:
        rollout(n_hosts, canary, serial)


# --- (11) Internals: '__' variables cannot be set from outside -------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "inventory" / "sample"


INTERNALS = ["__sglang_validation", "__sglang_server_render_only", "nvidia_gpu_facts_fresh", "__rollout_canary_hosts",
             "__sglang_server_plans"]


@pytest.mark.parametrize("name", INTERNALS)
def test_the_inventory_internals_of_a_host_are_its_prefixed_names(name: str) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import HostVarsCache

    assert HostVarsCache({HOST: host_with(**{name: True, "_sglang_x": 1, "sglang__x": 2})}).inventory_internals(HOST) == [name]


def inventory_copy(tmp_path: Path, **host_vars: Any) -> Path:
    inv = tmp_path / "inventory"
    shutil.copytree(SAMPLE, inv)
    path = inv / "host_vars" / f"{HOST}.yml"
    path.write_text(path.read_text() + "".join(f"{k}: {json.dumps(v)}\n" for k, v in host_vars.items()))
    return inv


def playbook(tmp_path: Path, inv: Path, book: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(book), *args],
                          capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})


def test_an_extra_var_cannot_forge_the_verdict(tmp_path: Path) -> None:
    inv = inventory_copy(tmp_path, sglang_args={"tp_size": 7})  # a broken host
    forged = json.dumps({"__sglang_validation": {"report": "", "invalid_hosts": [], "msg": "ok"}})
    proc = playbook(tmp_path, inv, REPO / "playbooks" / "validate.yml", "-e", forged)
    assert proc.returncode != 0
    assert "__sglang_validation is internal" in proc.stdout + proc.stderr


def test_internal_variables_from_the_inventory_are_refused_naming_each(tmp_path: Path) -> None:
    inv = inventory_copy(tmp_path, **{name: True for name in INTERNALS})
    proc = playbook(tmp_path, inv, REPO / "playbooks" / "validate.yml")
    assert proc.returncode != 0
    for name in INTERNALS:
        assert f"ERROR {name}  [input.internal]" in proc.stdout + proc.stderr


def test_what_the_run_itself_sets_is_not_refused(tmp_path: Path) -> None:
    inv = inventory_copy(tmp_path)
    book = tmp_path / "book.yml"
    book.write_text(json.dumps([{"hosts": "sglang_servers", "gather_facts": False, "tasks": [
        {"ansible.builtin.set_fact": {"nvidia_gpu_facts_fresh": True, "sglang_common_restart_pending": False,
                                      "sglang_server_plan": {"instances": []}}},
        {"blackwell.sglang.validate": {}}]}]))
    proc = playbook(tmp_path, inv, book)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "input.unknown" not in proc.stdout + proc.stderr  # the run's published facts are no typos either
    # The same name from the inventory is refused (the inventory is read again through public interfaces).
    (inv / "group_vars" / "sglang_servers.yml").write_text(
        (inv / "group_vars" / "sglang_servers.yml").read_text() + "\nnvidia_gpu_facts_fresh: true\n")
    proc = playbook(tmp_path, inv, book)
    assert proc.returncode != 0 and "nvidia_gpu_facts_fresh" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


# --- (12) render_dir: a new or project-marked directory, no symbolic link followed, host names checked -----------


def plan_dir(root: Path) -> Any:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import PlanDir

    return PlanDir(root)


FILES = {"sglang.service": "[Unit]\n", "sglang.env": "A=1\n"}


def test_a_new_render_dir_is_created_private_and_marked(tmp_path: Path) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import MARKER

    root = tmp_path / "a" / "plan"
    with plan_dir(root) as out:
        out.write("gpu-01", FILES)
    assert root.stat().st_mode & 0o777 == 0o700 and (root / MARKER).stat().st_mode & 0o777 == 0o600
    assert (root / "gpu-01").stat().st_mode & 0o777 == 0o700
    assert (root / "gpu-01" / "sglang.env").read_text() == "A=1\n"
    with plan_dir(root) as out:  # marked: rendered into again
        out.write("gpu-01", {"sglang.env": "B=2\n"})
    assert (root / "gpu-01" / "sglang.env").read_text() == "B=2\n"


@pytest.mark.parametrize("existing", ["/etc", "home", "file"])
def test_an_existing_unmarked_directory_is_refused_and_left_as_it_is(tmp_path: Path, existing: str) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import PlanDirError

    if existing == "/etc":
        root = Path("/etc")
    else:
        root = tmp_path / existing
        root.mkdir(mode=0o755)
        root.chmod(0o755)
        (root / ("notes.txt" if existing == "home" else "x")).write_text("mine")
    before = {p.name: p.stat().st_mtime_ns for p in root.iterdir()} if existing != "/etc" else None
    mode = root.stat().st_mode
    with pytest.raises(PlanDirError, match="no .blackwell-sglang-plan"):
        plan_dir(root)
    assert root.stat().st_mode == mode
    if before is not None:
        assert {p.name: p.stat().st_mtime_ns for p in root.iterdir()} == before


def test_an_empty_existing_directory_is_adopted_without_a_chmod(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir(mode=0o750)
    root.chmod(0o750)
    with plan_dir(root) as out:
        out.write("gpu-01", FILES)
    assert root.stat().st_mode & 0o777 == 0o750 and (root / "gpu-01" / "sglang.env").is_file()


@pytest.mark.parametrize("trap", ["file symlink", "host dir symlink", "hard link", "root symlink"])
def test_no_symbolic_or_hard_link_is_followed(tmp_path: Path, trap: str) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import PlanDirError

    root = tmp_path / "plan"
    with plan_dir(root) as out:
        out.write("gpu-01", FILES)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "victim"
    target.write_text("precious")
    if trap == "file symlink":
        (root / "gpu-01" / "sglang.env").unlink()
        (root / "gpu-01" / "sglang.env").symlink_to(target)
    elif trap == "host dir symlink":
        (root / "gpu-02").symlink_to(outside)
    elif trap == "hard link":
        (root / "gpu-01" / "sglang.env").unlink()
        os.link(target, root / "gpu-01" / "sglang.env")
    else:
        link = tmp_path / "link"
        link.symlink_to(root)
        root = link
    with pytest.raises(PlanDirError):
        with plan_dir(root) as out:
            out.write("gpu-02" if trap == "host dir symlink" else "gpu-01", {"sglang.env": "pwned", "victim": "pwned"})
    assert target.read_text() == "precious" and sorted(p.name for p in outside.iterdir()) == ["victim"]


@given(st.text(min_size=1, max_size=30))
def test_a_host_name_is_a_directory_name_only_when_it_is_safe(host: str) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import host_component_problem

    if host_component_problem(host) is None:
        assert "/" not in host and ".." not in host and not host.startswith(".") and host.isascii()
        assert os.path.basename(host) == host and os.path.normpath(host) == host


@pytest.mark.parametrize("host", ["../../x", "..", ".", ".hidden", "a/b", "/abs", "a\nb", "é", "a..b", ""])
def test_an_unsafe_host_name_is_refused_naming_the_host(tmp_path: Path, host: str) -> None:
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_render import PlanDirError

    with plan_dir(tmp_path / "plan") as out, pytest.raises(PlanDirError, match="inventory host"):
        out.write(host, FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def test_validate_refuses_a_host_name_that_would_leave_render_dir(tmp_path: Path) -> None:
    import yaml

    inv = tmp_path / "inventory"
    shutil.copytree(SAMPLE / "group_vars", inv / "group_vars")
    host_vars = yaml.safe_load((SAMPLE / "host_vars" / f"{HOST}.yml").read_text())
    (inv / "hosts.yml").write_text(json.dumps({"all": {"children": {"sglang_servers": {"hosts": {
        "../../x": host_vars, "good-01": host_vars}}}}}))
    out = tmp_path / "a" / "b" / "plan"
    proc = playbook(tmp_path, inv, REPO / "playbooks" / "validate.yml", "-e", f"render_dir={out}")
    assert proc.returncode != 0
    assert "'../../x'" in proc.stdout + proc.stderr and "cannot name a plan directory" in proc.stdout + proc.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["inventory"]


def test_every_oversized_variable_of_a_host_is_named() -> None:
    host = host_with(sglang_env={"NCCL_DEBUG": alias_bomb()}, sglang_instances=alias_bomb(6, 10))
    host["sglang_args"]["served_model_name"] = alias_bomb()
    assert sorted(p.variable for p in problems(host)) == ["sglang_args", "sglang_env", "sglang_instances"]


@pytest.mark.parametrize("args", [{"nccl_port": 9100}, {"grpc_port": 9100}, {"gated_launch_port": 9100}])
def test_an_sglang_port_other_than_the_http_one_is_compared_with_the_roles_ports(tmp_path: Path,
                                                                                  args: dict[str, Any]) -> None:
    inv = inventory_copy(tmp_path, node_exporter_port=9100)
    path = inv / "host_vars" / f"{HOST}.yml"
    path.write_text(path.read_text() + f"sglang_instances: {json.dumps([{'name': 'chat', 'args': args}])}\n")
    proc = playbook(tmp_path, inv, REPO / "playbooks" / "validate.yml")
    assert proc.returncode != 0 and "node_exporter_port 9100 is also the port of SGLang instance chat" in proc.stdout + proc.stderr


def test_sglang_secret_env_renders_into_the_secret_part_of_the_environment_file(tmp_path: Path) -> None:
    inv = inventory_copy(tmp_path, sglang_secret_env={"VAULT_DB_URL": SECRET})  # the sample's sglang_env stays
    out = tmp_path / "plan"
    proc = playbook(tmp_path, inv, REPO / "playbooks" / "validate.yml", "-e", f"render_dir={out}", "-vvv")
    assert proc.returncode == 0, proc.stdout[-3000:]
    env = (out / HOST / "sglang.env").read_text()
    assert 'VAULT_DB_URL="<secret' in env and 'NCCL_IB_DISABLE="1"' in env
    assert "VAULT_DB_URL" in next(line for line in env.splitlines() if line.startswith("SGLANG_REDACT_ENV="))
    assert SECRET not in proc.stdout + proc.stderr
    assert not any(SECRET in p.read_text() for p in out.rglob("*") if p.is_file())
