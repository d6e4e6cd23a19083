"""The "Example playbook" of each role's README, as the molecule scenario `standalone` runs it.

Every role under roles/ (but roles/sglang_common, which has no tasks) documents, in its README.md, a
section "## Example playbook" whose first fenced ```yaml block is a playbook applying that role alone.
The scenario's converge writes those blocks, unchanged, to files and runs each one in an
ansible-playbook run of its own; tests/unit/test_readme_examples.py checks their shape. There is no
copy of an example anywhere else, so README and test cannot drift apart.

Usage: python3 readme_examples.py OUT_DIR   (writes OUT_DIR/<role>.yml, prints the roles in run order)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Example playbook"
# The order the scenario runs them in. sglang_server comes before sglang, so it must create its own
# service account (prepare.yml only puts a virtualenv in place); the router last, in front of the server.
RUN_ORDER = ["nvidia_driver", "gpu_health", "cuda_toolkit", "sglang_server", "sglang", "sglang_router", "sglang_rollout",
             # the verifying TLS front: the simulated host's inventory sets no client CA, so the role checks its
             # inputs and changes nothing (the fleet scenario runs it with the front on)
             "sglang_worker_tls",
             # read only (check mode): what the rollout left running against its plan
             "sglang_drift",
             # the benchmark of what the rollout left running (no candidates: nothing restarts)
             "sglang_bench",
             # monitoring: DCGM after the driver; Prometheus last, scraping what the others put in place
             "node_exporter", "dcgm_exporter", "sglang_monitoring"]
# Roles that are no play's subject (no tasks).
NO_EXAMPLE_RUN = {"sglang_common"}

_FENCE = re.compile(r"^```yaml\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def roles(repo: Path = REPO) -> list[str]:
    """Every role of the project."""
    return sorted(p.parents[1].name for p in (repo / "roles").glob("*/meta/main.yml"))


def example(role: str, repo: Path = REPO) -> str:
    """The first ```yaml block of the README's "## Example playbook" section, byte for byte."""
    readme = (repo / "roles" / role / "README.md").read_text()
    parts = readme.split("\n" + SECTION + "\n")
    if len(parts) != 2:
        raise ValueError(f"roles/{role}/README.md: expected exactly one '{SECTION}' section, found {len(parts) - 1}")
    section = re.split(r"^## ", parts[1], maxsplit=1, flags=re.MULTILINE)[0]
    match = _FENCE.search(section)
    if match is None:
        raise ValueError(f"roles/{role}/README.md: no ```yaml block in its '{SECTION}' section")
    return match.group(1)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    # A role missing from RUN_ORDER fails tests/unit/test_readme_examples.py; the others still run here.
    for role in RUN_ORDER:
        (out / f"{role}.yml").write_text(example(role))
        print(role)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
