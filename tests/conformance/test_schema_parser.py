"""Every committed CLI schema against the argparse parser its own SGLang release builds.

The schemas are extracted statically (tools/sglang_schema.py, no import). Here each release's wheel is unpacked
(no dependencies: the ``sglang`` package alone) and imported inside ``.venv-conformance`` beside 0.5.23's
dependencies, with the conformance probe's stubs for the GPU-only packages; ``ServerArgs.add_cli_args`` builds
SGLang's real parser (sglang_parser_dump.py), and every argument's option strings, dest, action, nargs, const,
default, choices (as a set), type and required must equal the schema's. One dump per wheel, cached in
``.cache/sglang-parsers/`` (the cache is keyed by the wheel's name and refreshed when the wheel or the dumper is
newer). The wheels come from ``make wheels``.

A missing conformance venv fails the test in CI (``CI`` set) and skips it elsewhere; a missing wheel fails it.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import parser_check  # noqa: E402
from conformance_support import conformance_venv  # noqa: E402

VERSIONS = parser_check.committed_versions()


@pytest.fixture(scope="module")
def dumps() -> dict[str, object]:
    python = conformance_venv() / "bin" / "python"
    if not python.exists():
        message = f"the conformance venv {conformance_venv()} is missing: run tests/conformance/setup-venv.sh"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)

    def one(version: str) -> object:
        try:
            return parser_check.parser_dump(version, python)
        except (OSError, RuntimeError) as exc:  # reported by the release's own test
            return exc

    with ThreadPoolExecutor(max_workers=min(3, os.cpu_count() or 1)) as pool:
        return dict(zip(VERSIONS, pool.map(one, VERSIONS), strict=True))


def test_every_supported_release_has_a_schema() -> None:
    assert VERSIONS[-1] == "0.5.23"
    assert {"0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_schema_equals_the_releases_own_parser(dumps: dict[str, object], version: str) -> None:
    got = dumps[version]
    if isinstance(got, Exception):
        pytest.fail(str(got), pytrace=False)
    dump, seconds = got
    schema = parser_check.schema_of(version)
    assert dump["wheel"] == schema["wheel"]["filename"]
    lines = parser_check.differences(schema, dump)
    assert not lines, (f"schemas/sglang-{version}.json differs from SGLang {version}'s own parser "
                       f"({len(lines)} difference(s)):\n" + "\n".join(lines[:40]))
    assert len(dump["arguments"]) == len(schema["arguments"])
    print(f"SGLang {version}: {len(dump['arguments'])} arguments agree"
          + (f" (stubbed to import: {', '.join(dump['stubbed'])})" if dump["stubbed"] else "")
          + (f", parser dumped in {seconds:.1f}s" if seconds else ", cached dump"))


def test_the_comparison_sees_every_field() -> None:
    """parser_check.differences on a one-argument schema and dump: equal, then one field off at a time."""
    schema = {"arguments": {"tp_size": {"dest": "tp_size", "option_strings": ["--tp-size", "--tensor-parallel-size"],
                                        "action": "store", "nargs": None, "const": None, "default": 1,
                                        "choices": [1, 2], "type": "int", "required": False}}}
    real = {"dest": "tp_size", "option_strings": ["--tp-size", "--tensor-parallel-size"], "action": "_StoreAction",
            "nargs": None, "const": None, "default": 1, "choices": [2, 1], "type": "int", "required": False}
    assert parser_check.differences(schema, {"arguments": [real]}) == []
    for field, value in (("dest", "tp"), ("action", "_AppendAction"), ("nargs", "+"), ("const", 3), ("default", 2),
                         ("choices", [1, 2, 4]), ("type", "float"), ("required", True)):
        [line] = parser_check.differences(schema, {"arguments": [{**real, field: value}]})
        assert f"--tp-size {field}:" in line
    assert parser_check.differences(schema, {"arguments": [{**real, "option_strings": ["--tp-size"]}]}) == [
        "only in the schema: --tp-size --tensor-parallel-size", "only in SGLang's parser: --tp-size"]
