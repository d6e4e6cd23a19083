"""The canary's built kernels shared with the rest of the fleet (issue 35 item 1): which instances copy from which
canary (plugin_utils/sglang_kernel_share.py), the canary's manifest (blackwell.sglang.kernel_manifest), and a real copy
through roles/sglang's peer server and blackwell.sglang.model_fetch that leaves the pre-compile's marker matching."""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_precompile import (
    MARKER,
    inputs_digest,
    kernel_inputs,
    marker_document,
    marker_matches,
)
from ansible_collections.blackwell.sglang.plugins.modules import model_fetch as mf
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_kernel_share import peer_config, share_plan
from http_answers import module

REPO = Path(__file__).resolve().parents[2]
KEY = "sglang-0.5.23_torch-2.14.1_cu13_sm100"
ARGV = ["--model-path", "/models/m", "--tp-size", "8", "--quantization", "fp8", "--port", "30000"]
kernel_manifest = module("kernel_manifest")


def _peer() -> Any:
    spec = importlib.util.spec_from_file_location("sglang_model_peer", REPO / "roles/sglang/files/sglang-model-peer.py")
    assert spec and spec.loader
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def plan(name: str = "sglang", argv: list[str] | None = None, key: str = KEY) -> dict[str, Any]:
    return {"name": name, "argv": list(ARGV if argv is None else argv),
            "kernel_cache": {"root": "/var/cache/sglang/kernels", "key": key, "dir": f"/var/cache/sglang/kernels/{key}/{name}"}}


def offer(argv: list[str] | None = None, key: str = KEY, files: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    marker = marker_document(kernel_inputs(key, ARGV if argv is None else argv), 12.0, "t")
    return {"host": "gpu1", "address": "10.0.0.1", "port": 30991, "kernels": [
        {"instance": "sglang", "dir": f"/var/cache/sglang/kernels/{key}/sglang", "key": key, "marker": marker,
         "files": [{"path": "deep_gemm/k.cubin", "size": 3, "sha256": "0" * 64}] if files is None else files}]}


def test_an_instance_with_the_canarys_key_and_kernel_inputs_copies_from_it() -> None:
    [copy] = share_plan([plan()], ["sglang"], [offer()])
    digest = inputs_digest(kernel_inputs(KEY, ARGV))
    assert copy["digest"] == digest and len(digest) == 16  # the peer server's key: 16 hex digits
    assert copy["url"] == f"http://10.0.0.1:30991/{digest}/" and copy["source"] == "gpu1"
    assert copy["dir"] == f"/var/cache/sglang/kernels/{KEY}/sglang" and marker_matches(copy["marker"], kernel_inputs(KEY, ARGV))
    # Flags that change no kernel (the endpoint, the served name) may differ between hosts.
    other = [*ARGV[:-1], "31000", "--served-model-name", "m"]
    assert share_plan([plan(argv=other)], ["sglang"], [offer()])[0]["digest"] == digest


@pytest.mark.parametrize(("case", "instance", "names", "source"), [
    ("another GPU architecture", plan(key=KEY.replace("sm100", "sm90")), ["sglang"], offer()),
    ("an argument that changes kernels", plan(argv=[*ARGV[:4], "--quantization", "w8a8_fp8", "--port", "30000"]),
     ["sglang"], offer()),
    ("not restarted in this run", plan(), [], offer()),
    ("a multi-node instance", plan(argv=[*ARGV, "--nnodes", "2"]), ["sglang"], offer(argv=[*ARGV, "--nnodes", "2"])),
    ("a canary directory with no files", plan(), ["sglang"], offer(files=[])),
])
def test_no_copy_where_the_kernels_would_not_be_the_instances(case: str, instance: dict[str, Any], names: list[str],
                                                              source: dict[str, Any]) -> None:
    assert share_plan([instance], names, [source]) == [], case


def test_the_peer_config_serves_each_directory_under_its_digest_and_only_its_files() -> None:
    kernels = offer()["kernels"]
    assert peer_config(kernels, "10.0.0.1", 30991, "/run/t") == {
        "bind": "10.0.0.1", "port": 30991, "token_file": "/run/t",
        "models": {kernels[0]["marker"]["digest"]: {"dir": kernels[0]["dir"], "files": ["deep_gemm/k.cubin"]}}}


def built(directory: Path) -> dict[str, Any]:
    """A kernel directory as a pre-compile and a start leave it: kernels, a lock, an unfinished write, a link, the marker."""
    (directory / "deep_gemm" / "locks").mkdir(parents=True)
    (directory / "deep_gemm" / "locks" / "standin.lock").write_text("1")
    (directory / "deep_gemm" / "kernel.cubin").write_bytes(os.urandom(70_000))
    (directory / "triton" / "ab").mkdir(parents=True)
    (directory / "triton" / "ab" / "k.json").write_text("{}")
    (directory / "triton" / "ab" / "k.json.tmp").write_text("{")
    (directory / "jit.lock").write_text("")
    (directory / "link").symlink_to("/etc/passwd")
    marker = marker_document(kernel_inputs(KEY, ARGV), 3.0, "t")
    (directory / MARKER).write_text(json.dumps(marker))
    return marker


def test_the_manifest_lists_the_built_kernels_only_and_nothing_without_a_marker(tmp_path: Path) -> None:
    marker = built(tmp_path)
    assert kernel_manifest.read_marker(str(tmp_path)) == marker
    files = kernel_manifest.listed(str(tmp_path), 100)
    assert [f["path"] for f in files] == ["deep_gemm/kernel.cubin", "triton/ab/k.json"]
    assert files[0]["size"] == 70_000 and files[1]["sha256"] == mf.sha256_file(str(tmp_path / "triton/ab/k.json")).hexdigest()
    with pytest.raises(ValueError, match="more than 1 files"):
        kernel_manifest.listed(str(tmp_path), 1)
    (tmp_path / MARKER).unlink()
    assert kernel_manifest.read_marker(str(tmp_path)) is None


def test_a_copy_through_the_peer_server_leaves_a_directory_the_pre_compile_finds_built(tmp_path: Path) -> None:
    """The canary's directory, its manifest and marker; roles/sglang's peer server serves it under the digest the plan
    names; model_fetch copies every file checked; the marker written after it matches the copying instance's inputs."""
    canary = tmp_path / "canary"
    marker = built(canary)
    files = kernel_manifest.listed(str(canary), 100)
    [copy] = share_plan([plan()], ["sglang"], [{**offer(files=files), "address": "127.0.0.1"}])
    (tmp_path / "token").write_text("t0ken")
    config = peer_config([{"dir": str(canary), "marker": marker, "files": files}], "127.0.0.1", 0, str(tmp_path / "token"))
    (tmp_path / "config.json").write_text(json.dumps(config))
    peer = _peer()
    server = peer.make_server(peer.Config(str(tmp_path / "config.json")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dest = tmp_path / "host2"
    dest.mkdir()
    try:
        url = copy["url"].replace(":30991/", f":{server.server_address[1]}/")
        result = mf.fetch(str(dest), url, "t0ken", copy["files"])
        assert result["complete"] and sorted(result["fetched"]) == ["deep_gemm/kernel.cubin", "triton/ab/k.json"]
        assert mf.fetch(str(dest), url, "wrong", [{"path": MARKER, "size": 1, "sha256": "0" * 64}])["complete"] is False
    finally:
        server.shutdown()
        server.server_close()
    assert (dest / "deep_gemm/kernel.cubin").read_bytes() == (canary / "deep_gemm/kernel.cubin").read_bytes()
    assert not (dest / "deep_gemm" / "locks").exists() and not (dest / MARKER).exists()  # the role writes it last
    (dest / MARKER).write_text(json.dumps(copy["marker"]))
    assert marker_matches(json.loads((dest / MARKER).read_text()), kernel_inputs(KEY, ARGV))
