"""The one rendering function (plugin_utils/sglang_files.py) on values as Ansible hands them to a filter."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_files import SECRET_MARKER, SETTINGS, server_files

REPO = Path(__file__).resolve().parents[2]
SETTINGS_VALUES = {name: f"/x/{name}" for name in SETTINGS} | {"sglang_server_user": "sglang", "sglang_server_group": "sglang"}


class Tagged(str):
    """A string type of Ansible's own (a value that carries its origin): not a plain ``str``."""


def plan(**extra: object) -> dict[str, object]:
    return {"name": "default", "service": "sglang", "last_good": "last-good", "version": "0.5.23", "model": "m",
            "argv": ["--model-path", Tagged("/m")], "env": {"A": Tagged("1")}, "secret_env": {},
            "config": {"api-key": Tagged("k-1")}, "binding": {"devices": [], "extra_devices": [], "cuda_visible_devices": ""},
            "spec": {"mode": "keep", "host": "keep", "override": False},
            "kernel_cache": {"key": "sglang-0.5.23_torch-2.14.1_cu13_sm100", "dir": "/c/kernels/k/sglang",
                             "env": {"SGLANG_CACHE_DIR": Tagged("/c/kernels/k/sglang")}}, **extra}


def test_strings_of_ansibles_own_types_are_written_as_their_text() -> None:
    out = server_files(plan(), SETTINGS_VALUES, str(REPO / "templates"))
    assert yaml.safe_load(out["config"]) == {"api-key": "k-1"}
    assert 'A="1"' in out["env"] and "--model-path /m" in out["unit"]
    assert out["argv"][-2:] == ["--config", "/x/sglang_server_config_dir/sglang.yaml"]


def test_masked_secrets_and_no_config_without_secret_arguments() -> None:
    masked = server_files(plan(secret_env={"HF_TOKEN": "t"}), SETTINGS_VALUES, str(REPO / "templates"), mask_secrets=True)
    assert yaml.safe_load(masked["config"]) == {"api-key": SECRET_MARKER}
    assert f'HF_TOKEN="{SECRET_MARKER}"' in masked["env"] and '"t"' not in masked["env"]
    bare = server_files(plan(config={}), SETTINGS_VALUES, str(REPO / "templates"))
    assert bare["config"] is None and "--config" not in bare["unit"]
