# SPDX-License-Identifier: Apache-2.0
"""Every Python file of the covered globs names its licence in an SPDX header (issue 33, build item 6).

The header is ``# SPDX-License-Identifier: Apache-2.0`` (galaxy.yml's ``license``), on the first line or, after a
shebang, the second. COVERED holds every plugin directory of the collection (modules, module_utils, doc_fragments,
callback, lookup, action, filter, plugin_utils with sglang_rules/ and any subpackage: ``**`` globs, so a new file or
subpackage is covered as it is added), the tools and these tests; widen it to bring more files under the rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "collections" / "ansible_collections" / "blackwell" / "sglang"
HEADER = "# SPDX-License-Identifier: Apache-2.0"
# Globs relative to the repository.
COVERED = (
    "collections/ansible_collections/blackwell/sglang/plugins/modules/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/module_utils/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/doc_fragments/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/callback/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/lookup/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/action/**/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/filter/**/*.py",
    "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/**/*.py",
    "tools/*.py",
    "tests/unit/test_spdx_headers.py",
    "tests/unit/test_release.py",
)


def covered() -> list[str]:
    return sorted({str(p.relative_to(REPO)) for glob in COVERED for p in REPO.glob(glob) if p.is_file()})


def test_the_header_names_the_collections_licence() -> None:
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text(encoding="utf-8"))
    assert HEADER.rsplit(" ", 1)[1] in galaxy["license"]


def test_the_globs_cover_files() -> None:
    assert len(covered()) > 20, covered()
    # The recursive globs reach the plugins' subpackages (plugin_utils/sglang_rules/).
    assert any("/plugin_utils/sglang_rules/" in name for name in covered()), covered()


@pytest.mark.parametrize("name", covered())
def test_spdx_header(name: str) -> None:
    lines = (REPO / name).read_text(encoding="utf-8").splitlines()[:2]
    head = lines[1:2] if lines and lines[0].startswith("#!") else lines[:1]
    assert head == [HEADER], f"{name}: no '{HEADER}' on its first line (after the shebang, if any)"
