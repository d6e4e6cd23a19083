"""The release-to-release diff of the committed CLI schemas (plugins/plugin_utils/sglang_schema_diff.py) and the
upgrade check built on it: renames and removals derived from the schemas, with the small hand table checked."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_schema_diff as sd


def _schema(version: str, **arguments: dict) -> dict:
    base = {"option_strings": [], "action": "store", "default": None, "choices": None, "nargs": None}
    return {"sglang_version": version,
            "arguments": {name: {**base, "dest": name, "option_strings": ["--" + name.replace("_", "-")], **raw}
                          for name, raw in arguments.items()}}


def test_synthetic_diff_finds_every_kind_of_change() -> None:
    old = _schema("1.0", keep={"choices": ["a", "b"], "default": 1}, gone={}, moved={},
                  alias={"dest": "keep", "action": "DeprecatedAliasStoreAction"})
    old["arguments"]["keep"]["option_strings"].append("--keep-old")
    new = _schema("1.1", keep={"choices": ["b", "c"], "default": 2}, moved_new={}, fresh={})
    diff = sd.diff_schemas(old, new, renames={"moved": sd.Rename("moved", "moved_new", "1.1")})
    assert [c.dest for c in diff.of("removed")] == ["gone"]
    assert {(c.dest, c.renamed_to) for c in diff.of("renamed")} == {("moved", "moved_new"), ("alias", "keep")}
    assert sorted(c.dest for c in diff.of("added")) == ["fresh", "moved_new"]
    (keep,) = diff.of("choices")
    assert (keep.choices_removed, keep.choices_added, keep.default, keep.options_removed) == (["a"], ["c"], (1, 2), ["--keep-old"])
    assert "moved -> moved_new" in diff.summary() and "default 1 -> 2" in diff.summary()


def test_a_rename_applies_only_in_its_release() -> None:
    old, new = _schema("1.0", moved={}), _schema("1.1", moved_new={})
    diff = sd.diff_schemas(old, new, renames={"moved": sd.Rename("moved", "moved_new", "1.2")})
    assert [c.dest for c in diff.of("removed")] == ["moved"] and not diff.of("renamed")


def test_computed_defaults_are_not_compared() -> None:
    old = _schema("1.0", x={"default": {"__expr__": "os.cpu_count()"}})
    new = _schema("1.1", x={"default": 4})
    assert not sd.diff_schemas(old, new).changes


def test_committed_releases() -> None:
    assert sd.committed_versions()[-6:] == ["0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]


def test_hand_table_holds_only_what_the_diff_cannot_know() -> None:
    versions = sd.committed_versions()
    for rename in sd.RENAMES.values():
        assert rename.since in versions[1:], rename
        before = sd.raw_schema(versions[versions.index(rename.since) - 1])["arguments"]
        after = sd.raw_schema(rename.since)["arguments"]
        assert rename.old in before and rename.old not in after and rename.new in after, rename
        assert before[rename.old].get("dest", rename.old) == rename.old, f"{rename.old}: an alias, the diff derives it"


def test_derived_renames_of_0_5_20() -> None:
    diff = sd.diff_schemas(sd.raw_schema("0.5.19"), sd.raw_schema("0.5.20"))
    renamed = {c.dest: (c.renamed_to, c.alias_const) for c in diff.of("renamed")}
    assert renamed["mamba_scheduler_strategy"] == ("mamba_radix_cache_strategy", None)
    assert renamed["cuda_graph_max_bs"] == ("cuda_graph_max_bs_decode", None)
    assert renamed["stream_output"] == ("incremental_streaming_output", None)
    assert renamed["disable_piecewise_cuda_graph"] == ("cuda_graph_backend_prefill", "disabled")
    assert len(renamed) == 14
    assert "enable_prefill_context_parallel" in {c.dest for c in diff.of("removed")}


def test_every_step_of_the_supported_releases() -> None:
    counts = {f"{s.old_version}->{s.new_version}": (len(s.of("renamed")), len(s.of("removed")), len(s.of("added")))
              for s in sd.steps("0.5.18", "0.5.23")}
    assert counts == {"0.5.18->0.5.19": (0, 0, 15), "0.5.19->0.5.20": (14, 9, 14), "0.5.20->0.5.21": (0, 2, 20),
                      "0.5.21->0.5.22": (0, 1, 10), "0.5.22->0.5.23": (0, 1, 11)}


def test_upgrade_findings_0_5_19_to_0_5_23() -> None:
    args = {"mamba-scheduler-strategy": "extra_buffer", "tp_size": 2, "disable_piecewise_cuda_graph": True,
            "enable_prefill_context_parallel": True, "speculative_skip_dp_mlp_sync": True, "quantization": "marlin",
            "hicache_storage_prefetch_retry_max_attempts": 3, "not_an_argument": 1}
    found = {f.key: f for f in sd.upgrade_findings(args, "0.5.19", "0.5.23")}
    assert set(found) == set(args) - {"tp_size", "not_an_argument"}
    mamba = found["mamba-scheduler-strategy"]
    assert (mamba.level, mamba.kind, mamba.since) == ("error", "renamed", "0.5.20")
    assert "--mamba-radix-cache-strategy" in mamba.message and "mamba_radix_cache_strategy" in mamba.fix
    assert found["disable_piecewise_cuda_graph"].fix.endswith("cuda_graph_backend_prefill: disabled")
    assert (found["enable_prefill_context_parallel"].kind, found["speculative_skip_dp_mlp_sync"].since) == ("removed", "0.5.23")
    assert found["quantization"].kind == "choice" and "marlin" in found["quantization"].message
    assert found["hicache_storage_prefetch_retry_max_attempts"].level == "warning"


def test_no_findings_without_an_upgrade() -> None:
    assert sd.upgrade_findings({"mamba_scheduler_strategy": "auto"}, "0.5.19", "0.5.19") == []
    with pytest.raises(ValueError):
        sd.upgrade_findings({}, "0.5.23", "0.5.19")
    with pytest.raises(KeyError):
        sd.upgrade_findings({}, "0.4.0", "0.5.23")


def test_the_diff_does_not_change_the_schemas() -> None:
    old = copy.deepcopy(sd.raw_schema("0.5.22"))
    sd.diff_schemas(sd.raw_schema("0.5.22"), sd.raw_schema("0.5.23"))
    assert sd.raw_schema("0.5.22") == old


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.20", "0.5.22", "0.5.23"])
def test_a_release_without_rules_says_so(version: str) -> None:
    """0.5.18/0.5.19 have a schema but no launch rules (they apply from 0.5.20): a warning, never a silent pass."""
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import validate_host
    from reference import host_with

    result = validate_host(host_with(sglang_version=version))
    unchecked = [p for p in result.warnings if p.rule == "rules.unchecked"]
    assert result.ok, [p.rule for p in result.errors]
    assert bool(unchecked) == (version in ("0.5.18", "0.5.19"))
