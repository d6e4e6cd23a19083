# SPDX-License-Identifier: Apache-2.0
"""The key of an instance's kernel caches (plugin_utils/sglang_kernel_cache.py, issue 35 item 1): one directory per SGLang
release, torch and CUDA stack, GPU architecture and instance, computed in the plan and written into the environment file
exactly, whatever text the variables hold."""

from __future__ import annotations

import posixpath

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_kernel_cache as kc
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import systemd_env_quote
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.stack import RELEASE_CUDA, Stack
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import MANAGED_ENV
from hypothesis import example, given, settings
from hypothesis import strategies as st
from reference import host_with
from rendering import parse_env_file, render

BASE = {"cache_dir": "/var/cache/sglang", "version": "0.5.23", "torch_requirement": "torch==2.14.1",
        "capabilities": [(10, 0)], "service": "sglang"}


def cache(**changes: object) -> dict[str, object]:
    return kc.kernel_cache(**{**BASE, **changes})


def test_same_inputs_same_key() -> None:
    assert cache() == cache()
    assert cache()["key"] == "sglang-0.5.23_torch-2.14.1_cu13_sm100"
    assert cache()["dir"] == "/var/cache/sglang/kernels/sglang-0.5.23_torch-2.14.1_cu13_sm100/sglang"
    # the order of the GPUs, and several GPUs of one architecture, make no other key
    assert cache(capabilities=[(10, 0), (10, 0)])["key"] == cache()["key"]
    assert cache(capabilities=[(12, 0), (10, 3)])["key"] == cache(capabilities=[(10, 3), (12, 0)])["key"]


@pytest.mark.parametrize("change", [
    {"version": "0.5.24"},
    {"torch_requirement": "torch==2.14.2"},
    {"torch_requirement": ""},
    {"capabilities": [(10, 3)]},
    {"capabilities": [(12, 1)]},
    {"capabilities": []},
])
def test_release_torch_and_architecture_change_the_key(change: dict[str, object]) -> None:
    assert cache(**change)["key"] != cache()["key"]
    assert cache(**change)["dir"] != cache()["dir"]


def test_the_cuda_stack_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = cache()["key"]
    monkeypatch.setitem(RELEASE_CUDA, "0.5.23", Stack(14, "a later stack"))
    assert cache()["key"] != before and "_cu14_" in cache()["key"]


def test_each_instance_has_its_own_directory() -> None:
    one, two = cache(service="sglang-a"), cache(service="sglang-b")
    assert one["key"] == two["key"]  # the same release's kernels ...
    assert one["dir"] != two["dir"]  # ... compiled by each instance into its own directory
    assert not posixpath.commonpath([one["dir"], two["dir"]]).endswith(("sglang-a", "sglang-b"))
    assert set(one["env"].values()).isdisjoint(two["env"].values())


@given(st.from_regex(r"sglang[A-Za-z0-9_.:@-]{0,20}", fullmatch=True), st.from_regex(r"sglang[A-Za-z0-9_.:@-]{0,20}", fullmatch=True))
@example("sglang", "sglang_")
def test_two_unit_names_never_share_a_directory(first: str, second: str) -> None:
    # Two instances compiling into one directory at once is what the per-instance key prevents.
    one, two = (kc.kernel_cache("/var/cache/sglang", "0.5.23", "torch==2.14.1", [(12, 0)], name)["dir"] for name in (first, second))
    assert (one == two) is (first == second)


def test_every_cache_variable_is_under_the_instance_directory_and_set_by_the_role_only() -> None:
    found = cache()
    assert set(found["env"]) == set(kc.CACHE_ENV)
    assert {"SGLANG_CACHE_DIR", "SGLANG_JIT_CACHE_DIR", "SGLANG_DG_CACHE_DIR", "TRITON_CACHE_DIR",
            "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "FLASHINFER_WORKSPACE_BASE"} <= set(found["env"])
    for value in found["env"].values():
        assert value == found["dir"] or value.startswith(found["dir"] + "/")
    # SGLang 0.5.23's JIT cache does not follow SGLANG_CACHE_DIR: it is set on its own, under the same directory
    assert found["env"]["SGLANG_JIT_CACHE_DIR"] == found["dir"] + "/jit"
    # DeepGEMM: SGLang overwrites DG_JIT_CACHE_DIR with SGLANG_DG_CACHE_DIR; both name one directory
    assert found["env"]["DG_JIT_CACHE_DIR"] == found["env"]["SGLANG_DG_CACHE_DIR"]
    assert set(kc.CACHE_ENV) <= set(MANAGED_ENV)  # sglang_env cannot set one of them behind the plan's back
    assert found["key"].startswith(found["release_prefix"]) and found["release_prefix"] == "sglang-0.5.23_"


TEXT = st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(version=TEXT, torch=TEXT, service=TEXT,
       capabilities=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 9)), max_size=3))
@example(version="../..", torch="torch==../../etc", service="..", capabilities=[])
@example(version="0.5.23\nX=1", torch='torch==2"$`\\', service="a/b", capabilities=[(10, 0)])
def test_untrusted_text_makes_one_path_word_each(version: str, torch: str, service: str,
                                                 capabilities: list[tuple[int, int]]) -> None:
    found = kc.kernel_cache("/var/cache/sglang", version, torch, capabilities, service)
    key = found["key"]
    instance = found["dir"].rsplit("/", 1)[1]
    for word in (key, instance):
        assert word and "/" not in word and not word.startswith(".") and word.isascii()
        assert all(c.isalnum() or c in "._+-" for c in word)
    assert found["dir"] == f"/var/cache/sglang/kernels/{key}/{instance}" == posixpath.normpath(found["dir"])
    # the same inputs give the same key; the environment file carries every value exactly
    assert kc.kernel_cache("/var/cache/sglang", version, torch, capabilities, service) == found
    text = "".join(f"{name}={systemd_env_quote(value)}\n" for name, value in found["env"].items())
    assert parse_env_file(text) == found["env"]


@settings(max_examples=100, deadline=None)
@given(cache_dir=st.text(max_size=30).map(lambda t: "/" + t))
def test_the_cache_directory_round_trips_or_is_refused(cache_dir: str) -> None:
    found = kc.kernel_cache(cache_dir, "0.5.23", "torch==2.14.1", [(10, 0)], "sglang")
    assert found["dir"].startswith(found["root"] + "/")
    try:
        text = "".join(f"{name}={systemd_env_quote(value)}\n" for name, value in found["env"].items())
    except AnsibleFilterError:
        return  # a value no environment line can carry is refused (the plan's contract names the variable first)
    assert parse_env_file(text) == found["env"]


# --- in the plan and the files --------------------------------------------------------------------------------------


def facts(cc: str, count: int = 8) -> dict[str, object]:
    return {"schema": 1, "driver_loaded": True, "gpu_count": count,
            "gpus": [{"index": i, "uuid": f"GPU-{i:08d}", "minor": i, "compute_capability": cc, "memory_mib": 183359}
                     for i in range(count)]}


def test_the_plan_keys_the_instance_by_its_release_and_gpus_and_the_env_file_sets_it() -> None:
    rendered = render(host_with())
    plan = rendered.context["__sglang_server_plan"]
    found = plan["kernel_cache"]
    cc = rendered.context["nvidia_gpu_compute_capability"]
    assert found["key"] == f"sglang-{plan['version']}_torch-2.14.1_cu13_sm{cc.replace('.', '')}"
    assert found["dir"] == f"{rendered.context['sglang_server_cache_dir']}/kernels/{found['key']}/{plan['service']}"
    env = parse_env_file(rendered.env)
    assert {k: env[k] for k in found["env"]} == found["env"]
    assert env["HF_HOME"] == f"{rendered.context['sglang_server_cache_dir']}/huggingface"  # the weights stay shared


def test_two_instances_of_a_host_compile_into_their_own_directories() -> None:
    hostvars = host_with(sglang_instances=[{"name": "a", "gpus": [0, 1, 2, 3], "args": {"tp_size": 4}},
                                           {"name": "b", "gpus": [4, 5, 6, 7], "args": {"tp_size": 4}, "port": 30001}])
    one = render(hostvars, instance="a").context["__sglang_server_plan"]["kernel_cache"]
    two = render(hostvars, instance="b").context["__sglang_server_plan"]["kernel_cache"]
    assert one["key"] == two["key"] and one["dir"] != two["dir"]


@settings(max_examples=15, deadline=None)
@given(torch=st.text(max_size=30))
def test_the_torch_requirement_reaches_the_env_file_as_a_safe_word(torch: str) -> None:
    rendered = render(host_with(sglang_torch_requirement=torch))
    found = rendered.context["__sglang_server_plan"]["kernel_cache"]
    assert all(c.isalnum() or c in "._+-" for c in found["key"])
    env = parse_env_file(rendered.env)
    assert {k: env[k] for k in found["env"]} == found["env"]


# --- pruned with the release's last virtualenv (roles/sglang tasks/install.yml, venv_state) -----------------------------


def _prune_loop(installed: list[str], current: str, new: str, caches: list[str], plan: object, keep: int = 2) -> list[str]:
    import yaml  # pylint: disable=import-outside-toplevel
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel
    from rendering import REPO  # pylint: disable=import-outside-toplevel

    tasks = yaml.safe_load((REPO / "roles/sglang/tasks/install.yml").read_text(encoding="utf-8"))
    prune = next(t for t in tasks if t["name"].startswith("Remove virtualenvs"))
    role_vars = yaml.safe_load((REPO / "roles/sglang/vars/main.yml").read_text(encoding="utf-8"))
    trusted = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in prune["vars"].items()}
    variables = {**trusted, "__sglang_kernel_caches_dir": trust_as_template(role_vars["__sglang_kernel_caches_dir"]),
                 "__sglang_venv": new, "sglang_keep_venvs": keep,
                 "__sglang_venv_state": {"venvs": [{"path": p} for p in installed], "current": {"lnk_source": current},
                                         "kernel_caches": caches}}
    if plan is not None:
        variables["sglang_server_plan"] = plan
    return list(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(prune["loop"])))


def test_a_releases_kernel_caches_go_with_its_last_virtualenv() -> None:
    venvs = "/opt/sglang/venvs"
    installed = [f"{venvs}/0.5.24-aaaaaaaaaaaa", f"{venvs}/0.5.23-bbbbbbbbbbbb", f"{venvs}/0.5.22-cccccccccccc"]
    caches = ["sglang-0.5.22_torch-2.13.0_cu12_sm100", "sglang-0.5.23_torch-2.14.1_cu13_sm100", "sglang-0.5.2_x"]
    plan = {"instances": [{"kernel_cache": cache(cache_dir="/var/cache/sglang")}]}
    removed = _prune_loop(installed, installed[1], installed[0], caches, plan)
    # 0.5.22's virtualenv goes (0.5.24 is new, 0.5.23 kept for a rollback), and with it 0.5.22's caches only
    assert removed == [installed[2], installed[2] + ".requirements.txt",
                       "/var/cache/sglang/kernels/sglang-0.5.22_torch-2.13.0_cu12_sm100"]
    # a release that keeps another virtualenv keeps its caches; without a published plan no cache is touched
    also = [*installed, f"{venvs}/0.5.22-dddddddddddd"]  # newest first: 0.5.22-c is kept with sglang_keep_venvs 3
    removed = _prune_loop(also, also[1], also[0], caches, plan, keep=3)
    assert removed == [also[3], also[3] + ".requirements.txt"]
    assert not [p for p in _prune_loop(installed, installed[1], installed[0], caches, None) if "kernels" in p]


def test_venv_state_lists_the_kernel_caches(tmp_path: object) -> None:
    from pathlib import Path  # pylint: disable=import-outside-toplevel

    from ansible_collections.blackwell.sglang.plugins.modules import venv_state  # pylint: disable=import-outside-toplevel

    root = Path(str(tmp_path)) / "kernels"
    for name in ("sglang-0.5.23_x", "sglang-0.5.22_y"):
        (root / name).mkdir(parents=True)
    (root / "file").write_text("")
    assert sorted(Path(d["path"]).name for d in venv_state.listed(str(root))) == ["sglang-0.5.22_y", "sglang-0.5.23_x"]
