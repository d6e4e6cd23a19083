#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What changed in SGLang's command line between committed releases (their schemas), for review.

    python3 tools/sglang_schema_diff.py --list                 # releases with a committed schema, oldest first
    python3 tools/sglang_schema_diff.py --to 0.5.24            # the diff against the release before 0.5.24
    python3 tools/sglang_schema_diff.py --from 0.5.19 --to 0.5.23   # every step in between

The diff itself is plugins/plugin_utils/sglang_schema_diff.py (loaded from its file: no Ansible needed), the same
code the validator's upgrade check uses. ``make schema`` prints it after writing a schema.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

MODULE = (Path(__file__).resolve().parents[1] / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils"
          / "sglang_schema_diff.py")


def load():
    spec = importlib.util.spec_from_file_location("sglang_schema_diff", MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the releases with a committed schema")
    parser.add_argument("--from", dest="old", help="the older release (default: the one before --to)")
    parser.add_argument("--to", dest="new", help="the newer release")
    args = parser.parse_args(argv)
    diff = load()
    versions = diff.committed_versions()
    if args.list:
        print(" ".join(versions))
        return 0
    if not args.new or args.new not in versions:
        parser.error(f"--to must be a release with a committed schema: {', '.join(versions)}")
    old = args.old or (versions[versions.index(args.new) - 1] if versions.index(args.new) else None)
    if old is None:
        print(f"SGLang {args.new} is the oldest committed release: nothing to compare it with")
        return 0
    for step in diff.steps(old, args.new):
        print(step.summary())
    print("review: extend RENAMES in plugins/plugin_utils/sglang_schema_diff.py for any 'removed' argument that lives "
          "on under another name; give sglang_rules.py rules that changed their bounds (since=/until=)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
