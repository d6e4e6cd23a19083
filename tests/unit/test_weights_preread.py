"""weights_preread: the memory rule, the residency measurement and the read on real files, the refusal of paths.

The memory rule is pure (:func:`decide`): fits, does not fit, already resident, several instances of one model
counted once. Residency is measured with mincore on a real temporary file (not tmpfs: eviction must work there),
before and after reading it and after ``posix_fadvise(DONTNEED)``. Untrusted paths (relative, ``..``, links leading
out of the model directory, non-directories) are refused naming the option entry, for any such path hypothesis
draws.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.module_utils import sglang_preread as pr
from hypothesis import given
from hypothesis import strategies as st
from test_restart_modules import load

weights_preread = load("weights_preread")
GIB = pr.GIB
MEMINFO = "MemTotal:       25000000 kB\nMemFree:        1000 kB\nMemAvailable:   20000000 kB\nHugePages_Total:       0\n"


def params(paths: list[str], **extra: Any) -> dict[str, Any]:
    base = {"paths": paths, "mode": "auto", "margin_gib": 8.0, "margin_percent": 10.0, "parallelism": 4,
            "patterns": list(pr.DEFAULT_PATTERNS), "timeout": 0.0}
    base.update(extra)
    return base


def write(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(os.urandom(size))
        handle.flush()
        os.fsync(handle.fileno())  # clean pages: DONTNEED drops only those
    return path


@pytest.fixture()
def evictable(tmp_path: Path) -> Path:
    """A directory whose files' pages posix_fadvise(DONTNEED) really drops (not tmpfs); else the test is skipped."""
    probe = write(tmp_path / "probe.bin", 1 << 20)
    pr.evict(str(probe))
    if pr.residency(str(probe))[0].resident:
        pytest.skip("the temporary directory keeps its pages (tmpfs?): eviction cannot be measured")
    return tmp_path


# --- the memory rule ------------------------------------------------------------------------------------------------

def test_meminfo_is_read_in_bytes() -> None:
    assert pr.meminfo(MEMINFO) == {"MemTotal": 25000000 * 1024, "MemFree": 1024000, "MemAvailable": 20000000 * 1024,
                                   "HugePages_Total": 0}


def test_the_margin_is_the_larger_of_the_floor_and_the_share_of_memory() -> None:
    assert pr.margin_bytes(64 * GIB, 8, 10) == 8 * GIB  # small host: the floor
    assert pr.margin_bytes(2048 * GIB, 8, 10) == int(204.8 * GIB)  # large host: 10 %
    assert pr.margin_bytes(64 * GIB, 0, 0) == 0
    with pytest.raises(pr.PrereadError):
        pr.margin_bytes(64 * GIB, -1, 10)
    with pytest.raises(pr.PrereadError):
        pr.margin_bytes(64 * GIB, 8, 101)


def test_a_checkpoint_that_fits_is_read() -> None:
    decision = pr.decide("auto", total=230 * GIB, resident=0, mem_available=1800 * GIB, margin=205 * GIB)
    assert decision.read and decision.reason is None
    assert decision.to_read == 230 * GIB
    assert decision.budget == 1595 * GIB


def test_a_checkpoint_that_does_not_fit_is_skipped_with_the_figures() -> None:
    decision = pr.decide("auto", total=230 * GIB, resident=0, mem_available=200 * GIB, margin=8 * GIB)
    assert not decision.read
    assert decision.reason == ("does not fit: needs 230.00 GiB, MemAvailable 200.00 GiB minus 0.00 GiB already "
                               "resident minus margin 8.00 GiB")


def test_the_resident_part_counts_against_the_memory_it_sits_in() -> None:
    # MemAvailable counts the resident 60 GiB as reclaimable cache: reading 40 GiB more into the 30 GiB left
    # would evict the checkpoint's own pages.
    assert not pr.decide("auto", total=100 * GIB, resident=60 * GIB, mem_available=90 * GIB, margin=0).read
    assert pr.decide("auto", total=100 * GIB, resident=60 * GIB, mem_available=100 * GIB, margin=0).read
    # At the edge: exactly the budget fits, a byte more does not.
    assert pr.decide("auto", total=10, resident=2, mem_available=20, margin=10).read
    assert not pr.decide("auto", total=11, resident=2, mem_available=20, margin=10).read


def test_an_already_resident_checkpoint_reads_nothing() -> None:
    decision = pr.decide("auto", total=230 * GIB, resident=230 * GIB, mem_available=240 * GIB, margin=8 * GIB)
    assert not decision.read and decision.to_read == 0
    assert decision.reason == "already resident: all 230.00 GiB in the page cache"


def test_always_ignores_memory_and_never_reads_nothing() -> None:
    assert pr.decide("always", total=230 * GIB, resident=0, mem_available=GIB, margin=8 * GIB).read
    never = pr.decide("never", total=GIB, resident=0, mem_available=100 * GIB, margin=0)
    assert not never.read and never.reason == "mode is never"
    assert pr.decide("auto", total=0, resident=0, mem_available=GIB, margin=0).reason == "no weight files"
    with pytest.raises(pr.PrereadError, match="mode must be one of"):
        pr.decide("sometimes", total=1, resident=0, mem_available=1, margin=0)
    with pytest.raises(pr.PrereadError):
        pr.decide("auto", total=1, resident=2, mem_available=1, margin=0)


@given(total=st.integers(0, 1 << 50), share=st.floats(0, 1), available=st.integers(0, 1 << 51),
       margin=st.integers(0, 1 << 45))
def test_auto_reads_exactly_when_the_rest_fits_beside_the_resident_part(total: int, share: float, available: int,
                                                                          margin: int) -> None:
    resident = int(total * share)
    decision = pr.decide("auto", total, resident, available, margin)
    assert decision.read == (0 < total - resident <= available - resident - margin)
    assert decision.read == (decision.reason is None)
    assert pr.decide("always", total, resident, available, margin).read == (total - resident > 0)


def test_several_instances_of_one_model_are_counted_once(tmp_path: Path) -> None:
    model = tmp_path / "models" / "org" / "chat"
    write(model / "model-00001-of-00002.safetensors", 3000)
    write(model / "model-00002-of-00002.safetensors", 5000)
    other = tmp_path / "models" / "org" / "code"
    write(other / "pytorch_model.bin", 7000)
    (tmp_path / "chat-link").symlink_to(model)
    os.link(other / "pytorch_model.bin", tmp_path / "shared.bin")  # the same file under another name
    (tmp_path / "elsewhere").mkdir()
    os.link(other / "pytorch_model.bin", tmp_path / "elsewhere" / "pytorch_model.bin")
    paths = [str(model), str(model) + "/", str(tmp_path / "chat-link"), str(other), str(tmp_path / "elsewhere")]
    files = pr.checkpoint("paths", paths)
    assert sorted(f.size for f in files) == [3000, 5000, 7000]
    assert pr.model_dirs("paths", paths) == [str(model), str(other), str(tmp_path / "elsewhere")]
    result = pr.run(params(paths, mode="never"), False, MEMINFO)
    assert result["files"] == 3 and result["bytes_total"] == 15000


def test_the_weight_files_are_those_sglang_reads(tmp_path: Path) -> None:
    model = tmp_path / "m"
    for name in ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "consolidated.safetensors",
                 "pytorch_model.bin", "config.json"]:
        write(model / name, 100)
    write(model / "original" / "consolidated.00.pth", 100)  # below the top level: not read
    (model / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}')
    names = [Path(f.path).name for f in pr.weight_files("paths[0]", str(model))]
    assert names == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    (model / "model.safetensors.index.json").unlink()
    assert len(pr.weight_files("paths[0]", str(model))) == 3  # no index: every safetensors file
    bins = tmp_path / "bins"
    write(bins / "pytorch_model-00001-of-00001.bin", 100)
    assert [Path(f.path).name for f in pr.weight_files("paths[0]", str(bins))] == ["pytorch_model-00001-of-00001.bin"]
    assert pr.weight_files("paths[0]", str(tmp_path / "m" / "original")) == []  # *.pth is not a default pattern
    assert len(pr.weight_files("paths[0]", str(tmp_path / "m" / "original"), ["*.pth"])) == 1


# --- residency, measured --------------------------------------------------------------------------------------------

def test_residency_before_and_after_reading_and_after_dontneed(evictable: Path) -> None:
    size = 3 * pr.CHUNK // 2 + 12345  # two windows, the last page partial
    path = write(evictable / "model" / "model.safetensors", size)
    pr.evict(str(path))
    cold = pr.residency(str(path))
    assert [(c.offset, c.length) for c in cold] == [(0, pr.CHUNK), (pr.CHUNK, size - pr.CHUNK)]
    assert sum(c.resident for c in cold) == 0
    with open(path, "rb") as handle:  # read the first window only
        handle.read(pr.CHUNK)
    half = pr.residency(str(path))
    assert half[0].resident == pr.CHUNK  # readahead may have pulled a little of the second window in
    assert half[1].resident < half[1].length
    result = pr.run(params([str(path.parent)]), False, MEMINFO)
    assert result["bytes_total"] == size
    assert result["bytes_resident_before"] >= pr.CHUNK
    assert result["bytes_to_read"] == size - result["bytes_resident_before"]
    assert result["bytes_read"] == size - pr.CHUNK  # the second window only: the first was resident
    assert result["bytes_resident_after"] == size and result["resident_percent_after"] == 100.0
    assert result["preread"] and result["skip_reason"] is None and not result["changed"]
    assert "rc" not in result
    pr.evict(str(path))
    assert sum(c.resident for c in pr.residency(str(path))) == 0


def test_check_mode_measures_and_reads_nothing(evictable: Path) -> None:
    path = write(evictable / "model" / "model.safetensors", 2 << 20)
    pr.evict(str(path))
    result = pr.run(params([str(path.parent)]), True, MEMINFO)
    assert result["preread"] and result["bytes_to_read"] == 2 << 20 and result["bytes_read"] == 0
    assert sum(c.resident for c in pr.residency(str(path))) == 0


def test_a_checkpoint_that_does_not_fit_is_not_read(evictable: Path) -> None:
    path = write(evictable / "model" / "model.safetensors", 4 << 20)
    pr.evict(str(path))
    tight = "MemTotal: 1000000 kB\nMemAvailable: 2048 kB\n"  # 2 MiB available, margin 0: the rest does not fit
    result = pr.run(params([str(path.parent)], margin_gib=0, margin_percent=0), False, tight)
    assert not result["preread"] and result["bytes_read"] == 0
    assert result["skip_reason"].startswith("does not fit: needs 0.00 GiB, MemAvailable 0.00 GiB")
    assert sum(c.resident for c in pr.residency(str(path))) == 0
    again = pr.run(params([str(path.parent)], mode="always"), False, tight)
    assert again["preread"] and again["bytes_resident_after"] == 4 << 20


def test_the_timeout_stops_taking_windows() -> None:
    ticks = iter([0.0, 0.0, 5.0, 5.0, 5.0, 5.0])
    chunks = [pr.Chunk("/nonexistent", 0, 1, 0)] * 3
    done = pr.read(chunks, 1, timeout=1.0, clock=lambda: next(ticks))
    assert done.timed_out and done.chunks_read == 0 and len(done.errors) == 1  # one window taken, then the deadline


# --- untrusted paths ------------------------------------------------------------------------------------------------

def refused(paths: list[str]) -> str:
    with pytest.raises(pr.PrereadError) as info:
        pr.run(params(paths), True, MEMINFO)
    return str(info.value)


def test_refuses_relative_dotdot_missing_and_non_directories(tmp_path: Path) -> None:
    write(tmp_path / "file", 1)
    (tmp_path / "ok").mkdir()
    ok = str(tmp_path / "ok")
    assert refused([ok, "models/x"]) == "paths[1]: models/x is not an absolute path"
    assert refused([f"{ok}/../ok"]).startswith("paths[0]: ") and "'..'" in refused([f"{ok}/../ok"])
    assert refused([str(tmp_path / "none")]) == f"paths[0]: {tmp_path / 'none'} is not a directory"
    assert refused([str(tmp_path / "file")]) == f"paths[0]: {tmp_path / 'file'} is not a directory"
    assert refused(["/x\0y"]).startswith("paths[0]: ")
    assert refused([""]).startswith("paths[0]: ")


def test_refuses_a_weight_file_that_links_out_of_its_directory(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.bin", 10)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").symlink_to(secret)
    message = refused([str(model)])
    assert message.startswith("paths[0]: ") and "leads outside the directory" in message
    # A link inside the directory is followed; the directory itself may be a link.
    (model / "model.safetensors").unlink()
    write(model / "blobs" / "x", 10)
    (model / "model.safetensors").symlink_to(model / "blobs" / "x")
    (tmp_path / "current").symlink_to(model)
    assert [f.size for f in pr.checkpoint("paths", [str(tmp_path / "current")])] == [10]


def test_special_files_are_not_opened(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    os.mkfifo(model / "model.safetensors")  # opening it for reading would block
    assert pr.checkpoint("paths", [str(model)]) == []
    with pytest.raises(pr.PrereadError, match="not a regular file"):
        pr.residency(str(model / "model.safetensors"))


def test_bad_numbers_are_refused_naming_the_option(tmp_path: Path) -> None:
    for extra, option in [({"parallelism": 0}, "parallelism"), ({"timeout": -1.0}, "timeout"),
                          ({"patterns": []}, "patterns"), ({"margin_gib": -1.0}, "margin_gib")]:
        with pytest.raises(pr.PrereadError, match=f"^{option}"):
            pr.run(params([str(tmp_path)], **extra), True, MEMINFO)


segment = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=8)


@given(parts=st.lists(st.one_of(segment, st.just(".."), st.just(".")), min_size=1, max_size=5))
def test_any_relative_path_is_refused_naming_its_entry(parts: list[str]) -> None:
    path = "/".join(parts)
    with pytest.raises(pr.PrereadError, match=r"^paths\[2\]: "):
        pr.model_dirs("paths", ["/", "/", path])


@given(prefix=st.lists(segment, max_size=3), suffix=st.lists(segment, max_size=3))
def test_any_path_with_a_dotdot_component_is_refused(prefix: list[str], suffix: list[str]) -> None:
    path = "/" + "/".join([*prefix, "..", *suffix])
    with pytest.raises(pr.PrereadError, match=r"^paths\[0\]: .* has a '\.\.' component$"):
        pr.check_directory("paths[0]", path)


@given(target=st.lists(st.sampled_from(["..", "x", "model", "."]), min_size=1, max_size=4),
       absolute=st.booleans())
def test_a_link_is_followed_only_when_it_stays_inside(tmp_path_factory: pytest.TempPathFactory, target: list[str],
                                                      absolute: bool) -> None:
    root = tmp_path_factory.mktemp("link")
    model = root / "model"
    (model / "x").mkdir(parents=True)
    write(model / "x" / "weights.safetensors", 10)
    write(model / "weights.safetensors", 10)
    write(root / "x" / "weights.safetensors", 10)
    link = model / "link.safetensors"
    relative = "/".join([*target, "weights.safetensors"])
    link.symlink_to(str(model / relative) if absolute else relative)
    resolved = os.path.realpath(link)
    inside = resolved.startswith(str(model) + "/")
    if not inside:
        with pytest.raises(pr.PrereadError, match=r"^paths\[0\]: .*leads outside the directory"):
            pr.checkpoint("paths", [str(model)])
        return
    files = pr.checkpoint("paths", [str(model)])
    assert all(f.path.startswith(str(model) + "/") for f in files)


# --- the stand-in SGLang reads what the module pre-reads ------------------------------------------------------------

def test_the_standin_reads_the_files_the_module_preads(tmp_path: Path) -> None:
    import sys

    src = str(Path(__file__).resolve().parents[2] / "tests/fixtures/sglang_standin/src")
    if src not in sys.path:
        sys.path.insert(0, src)
    from sglang._standin import weights

    model = tmp_path / "m"
    for name in ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "consolidated.safetensors",
                 "pytorch_model.bin", "config.json"]:
        write(model / name, 1000)
    (model / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}')
    assert [str(p) for p in weights.weight_files(str(model))] == [f.path for f in pr.checkpoint("paths", [str(model)])]
    assert weights.read_weights(str(model))[:2] == (2, 2000)
    assert weights.weight_files(str(tmp_path / "none")) == [] and weights.weight_files("org/model") == []
    assert not weights.enabled("0") and not weights.enabled(" off ") and weights.enabled(None) and weights.enabled("1")
