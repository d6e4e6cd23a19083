"""Locked installs of the server virtualenv (roles/sglang, ``sglang_lock``): names, the committed lock, the tool."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml
from ansible_collections.blackwell.sglang.plugins.filter.sglang import sglang_lock_name
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_lock import lock_name, lock_variant
from hypothesis import given
from hypothesis import strategies as st
from tool_loader import load_tool

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "roles/sglang/defaults/main.yml").read_text(encoding="utf-8"))
LOCKS = REPO / "roles/sglang/files/locks"
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+?)(?: |;|$)", re.M)


def test_lock_names() -> None:
    assert lock_variant("torch==2.14.1") == "torch-2.14.1"
    assert lock_variant(" torch == 2.14.1 ") == "torch-2.14.1"
    assert lock_variant("") == "no-torch"
    assert lock_variant("torch>=2.9,<3") == "torch-2.9-3"
    assert lock_name("0.5.23", "torch==2.14.1") == "sglang-0.5.23-torch-2.14.1.txt"
    assert sglang_lock_name("0.5.23", None) == "sglang-0.5.23-no-torch.txt"


@given(st.text(max_size=40))
def test_a_lock_name_is_one_plain_file_name(requirement: str) -> None:
    name = lock_name("0.5.23", requirement)
    assert re.fullmatch(r"sglang-0\.5\.23-[A-Za-z0-9.+-]+\.txt", name), name
    assert "/" not in name and ".." not in name.removesuffix(".txt").split("-")


def test_the_role_defaults_have_a_committed_lock_of_the_pinned_release_and_torch() -> None:
    """The lock roles/sglang installs by default exists, pins that release and torch, and hashes every package."""
    lock = LOCKS / lock_name(DEFAULTS["sglang_version"], DEFAULTS["sglang_torch_requirement"])
    assert lock.is_file(), f"no lock {lock.name}: run `make lock SGLANG_VERSION={DEFAULTS['sglang_version']}`"
    text = lock.read_text(encoding="utf-8")
    pins = dict(PIN.findall(text))
    assert pins["sglang"] == DEFAULTS["sglang_version"]
    assert "torch==" + pins["torch"] == DEFAULTS["sglang_torch_requirement"].replace(" ", "")
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    # A universal lock may pin a package twice, under exclusive markers (numpy for Python 3.11 and for 3.12+).
    assert len(blocks) == len(PIN.findall(text)) > 100
    for block in blocks:
        assert "--hash=sha256:" in block, block.splitlines()[0]
    # No index URL or machine path: the installer's default index and the lock's own name only.
    assert "--index-url" not in text and "--find-links" not in text and "/tmp" not in text


def test_every_committed_lock_is_named_after_what_it_pins() -> None:
    for lock in sorted(LOCKS.glob("*.txt")):
        pins = dict(PIN.findall(lock.read_text(encoding="utf-8")))
        torch = f"torch=={pins['torch']}" if "torch" in pins else ""
        assert lock.name == lock_name(pins["sglang"], torch), lock.name


def test_local_wheels_of_a_pinned_version_all_get_their_hash(tmp_path: Path) -> None:
    """A flat directory's wheels for other Pythons join the lock, so each Python installs with --require-hashes."""
    tool = load_tool("sglang_lock")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    files = {}
    for name in ("PyYAML-6.0.4-cp311-cp311-manylinux2014_x86_64.whl", "pyyaml-6.0.4-cp313-cp313-manylinux2014_x86_64.whl",
                 "pyyaml-6.0.3-cp311-cp311-manylinux2014_x86_64.whl", "sglang-0.5.23-py3-none-any.whl"):
        (wheels / name).write_bytes(name.encode())
        files[name] = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
    lock = tmp_path / "lock.txt"
    first = files["PyYAML-6.0.4-cp311-cp311-manylinux2014_x86_64.whl"]
    lock.write_text("# header\n#    make lock\n"
                    f"pyyaml==6.0.4 ; sys_platform == 'linux' \\\n    --hash={first}\n    # via sglang\n"
                    f"sglang==0.5.23 \\\n    --hash={files['sglang-0.5.23-py3-none-any.whl']}\n    # via -r requirements.in\n",
                    encoding="utf-8")
    tool.add_local_hashes(lock, [str(wheels)])
    text = lock.read_text(encoding="utf-8")
    yaml_block = text.split("sglang==")[0]
    assert "pyyaml==6.0.4 ; sys_platform == 'linux' \\\n" in yaml_block
    assert files["pyyaml-6.0.4-cp313-cp313-manylinux2014_x86_64.whl"] in yaml_block
    assert first in yaml_block
    assert files["pyyaml-6.0.3-cp311-cp311-manylinux2014_x86_64.whl"] not in text
    assert text.count("--hash=") == 3
    # The last hash of a block ends its requirement: no line continuation into the comment.
    assert re.search(r"--hash=sha256:[0-9a-f]+\n    # via sglang", text)
