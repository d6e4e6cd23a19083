"""Weights once per fleet: the fan-out plan, the host state, the peers' server and blackwell.sglang.model_fetch."""

from __future__ import annotations

import base64
import hashlib
import http.client
import importlib.util
import json
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.modules import model_fetch as mf
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import (
    fanout_plan,
    model_key,
    model_state,
    peer_config,
    peer_url,
    valid_manifest,
)

REPO = Path(__file__).resolve().parents[2]
KEY = model_key("org/model", "c" * 40)


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer = _load("sglang_model_peer", REPO / "roles/sglang/files/sglang-model-peer.py")
fakehub = _load("fakehub", REPO / "tests/fixtures/simhost/fakehub/fakehub.py")


def _manifest(commit: str = "c" * 40, files: dict[str, bytes] | None = None) -> dict[str, Any]:
    files = files or {"a.safetensors": b"a"}
    return {"repo": "org/model", "revision": "c" * 40, "commit": commit,
            "files": [{"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in files.items()]}


def _state(needs: list[str] = (), have: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"needs": list(needs), "have": have or {}, "dirs": {KEY: "/m"}, "address": "10.0.0.1", "port": 30990}


# --- the plan -------------------------------------------------------------------------------------------------


def _rounds(plan: dict[str, Any]) -> dict[int, set[tuple[str, str]]]:
    out: dict[int, set[tuple[str, str]]] = {}
    for step in plan["peer"]:
        out.setdefault(step["round"], set()).add((step["source"], step["host"]))
    return out


def test_one_host_downloads_from_the_hub_as_before() -> None:
    plan = fanout_plan(["h1"], {"h1": _state([KEY])})
    assert plan == {"hub": {"h1": [KEY]}, "peer": [], "rounds": 0, "servers": [], "origin": {KEY: "h1"}}


def test_four_hosts_one_hub_copy_then_a_tree() -> None:
    hosts = ["h1", "h2", "h3", "h4"]
    plan = fanout_plan(hosts, {h: _state([KEY]) for h in hosts})
    assert plan["hub"] == {"h1": [KEY]}
    assert _rounds(plan) == {1: {("h1", "h2")}, 2: {("h1", "h3"), ("h2", "h4")}}
    assert plan["rounds"] == 2 and plan["servers"] == ["h1", "h2"] and plan["origin"] == {KEY: "h1"}


@pytest.mark.parametrize("count", [2, 3, 5, 8, 9, 33])
def test_copies_double_every_round(count: int) -> None:
    hosts = [f"h{i}" for i in range(count)]
    plan = fanout_plan(hosts, {h: _state([KEY]) for h in hosts})
    assert plan["rounds"] == math.ceil(math.log2(count))
    assert sorted(s["host"] for s in plan["peer"]) == sorted(hosts[1:])  # every other host exactly once
    holding = {"h0"}
    for round_no in range(1, plan["rounds"] + 1):
        steps = [s for s in plan["peer"] if s["round"] == round_no]
        sources = [s["source"] for s in steps]
        assert set(sources) <= holding, "a source must hold a copy before its round"
        assert len(sources) == len(set(sources)), "one client per source and round"
        holding |= {s["host"] for s in steps}


def test_per_source_serves_more_hosts_per_round() -> None:
    hosts = [f"h{i}" for i in range(9)]
    plan = fanout_plan(hosts, {h: _state([KEY]) for h in hosts}, per_source=2)
    assert plan["rounds"] == 2  # 1 -> 3 -> 9
    with pytest.raises(ValueError):
        fanout_plan(hosts, {h: _state([KEY]) for h in hosts}, per_source=0)


def test_seed_host_downloads_when_it_needs_the_model() -> None:
    hosts = ["h1", "h2", "h3"]
    plan = fanout_plan(hosts, {h: _state([KEY]) for h in hosts}, seed_host="h3")
    assert plan["hub"] == {"h3": [KEY]} and _rounds(plan)[1] == {("h3", "h1")}
    plan = fanout_plan(hosts, {h: _state([KEY]) for h in hosts}, seed_host="elsewhere")
    assert plan["hub"] == {"h1": [KEY]}


def test_disabled_every_host_downloads_from_the_hub() -> None:
    hosts = ["h1", "h2", "h3"]
    plan = fanout_plan(hosts, {h: _state([KEY]) for h in hosts}, enabled=False)
    assert plan["hub"] == {h: [KEY] for h in hosts} and plan["peer"] == [] and plan["rounds"] == 0


def test_a_copy_from_an_earlier_batch_serves_and_nothing_comes_from_the_hub() -> None:
    states = {"canary": _state([], {KEY: _manifest()}), "h2": _state([KEY]), "h3": _state([KEY])}
    plan = fanout_plan(["h2", "h3"], states)
    assert plan["hub"] == {} and plan["origin"] == {KEY: "canary"}
    assert _rounds(plan) == {1: {("canary", "h2")}, 2: {("canary", "h3")}}
    assert plan["servers"][0] == "canary"


def test_holders_of_another_commit_do_not_serve() -> None:
    states = {"a": _state([], {KEY: _manifest("1" * 40)}), "b": _state([], {KEY: _manifest("2" * 40)}),
              "h": _state([KEY]), "i": _state([KEY])}
    plan = fanout_plan(["a", "b", "h", "i"], states)
    assert {s["source"] for s in plan["peer"]} <= {"a", "h", "i"} and plan["origin"] == {KEY: "a"}


def test_hosts_without_the_model_or_without_state_are_left_alone() -> None:
    other = model_key("org/other", "main")
    states = {"h1": _state([KEY]), "h2": _state([other]), "h3": _state([])}
    plan = fanout_plan(["h1", "h2", "h3", "ghost"], states)
    assert plan["hub"] == {"h1": [KEY], "h2": [other]} and plan["peer"] == []


def test_keys_and_urls() -> None:
    assert model_key("org/model", "main") == model_key("org/model", "main") != model_key("org/model", "v2")
    assert len(KEY) == 16 and all(c in "0123456789abcdef" for c in KEY)
    assert peer_url("10.0.0.1", 30990, KEY) == f"http://10.0.0.1:30990/{KEY}/"
    assert peer_url("fd00::1", 30990, KEY) == f"http://[fd00::1]:30990/{KEY}/"


# --- what a host holds ------------------------------------------------------------------------------------------


def _slurp(doc: Any) -> dict[str, Any]:
    return {"content": base64.b64encode(json.dumps(doc).encode()).decode()}


def test_model_state_from_markers_and_manifests() -> None:
    models = [{"repo": "org/model", "revision": "c" * 40, "dir": "/m/a"},
              {"repo": "org/other", "revision": "main", "dir": "/m/b"},
              {"repo": "org/third", "revision": "main", "dir": "/m/c"}]
    stamp = {"repo": "org/model", "revision": "c" * 40, "endpoint": ""}
    markers = [_slurp(stamp), {"failed": True}, _slurp({"repo": "org/third", "revision": "main", "endpoint": ""})]
    manifests = [_slurp(_manifest()), {"failed": True}, {"failed": True}]
    state = model_state(models, markers, manifests, "")
    third = model_key("org/third", "main")
    assert state["needs"] == [model_key("org/other", "main")]
    assert state["have"] == {KEY: _manifest()}  # org/third is staged but has no manifest: it does not serve
    assert [m["staged"] for m in state["models"]] == [True, False, True]
    assert state["dirs"][third] == "/m/c"
    # Another endpoint in the stamp: not staged.
    assert model_state(models[:1], markers[:1], manifests[:1], "http://mirror")["needs"] == [KEY]


def test_valid_manifest() -> None:
    assert valid_manifest(_manifest(), "org/model", "c" * 40)
    assert not valid_manifest(_manifest(), "org/model", "main")
    broken = _manifest()
    broken["files"][0]["sha256"] = "x"
    assert not valid_manifest(broken, "org/model", "c" * 40)
    assert not valid_manifest({**_manifest(), "commit": ""}, "org/model", "c" * 40)


def test_peer_config_lists_only_manifest_files() -> None:
    state = {**_state([], {KEY: _manifest(files={"a": b"1", "sub/b": b"2"})}), "dirs": {KEY: "/m/a"}}
    assert peer_config(state, "/run/t") == {"bind": "10.0.0.1", "port": 30990, "token_file": "/run/t",
                                            "models": {KEY: {"dir": "/m/a", "files": ["a", "sub/b"]}}}


# --- the peers' server and the fetch module, against each other ---------------------------------------------

FILES = {"config.json": b'{"a": 1}', "model-1.safetensors": os.urandom(300_000), "sub/tokenizer.json": b"{}" * 1000}
TOKEN = "t0ken"


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    src = tmp_path / "src"
    for rel, data in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (src / "secret.txt").write_text("not in the manifest")
    (tmp_path / "token").write_text(TOKEN + "\n")
    manifest = _manifest(files=FILES)
    config = {"bind": "127.0.0.1", "port": 0, "token_file": str(tmp_path / "token"),
              "models": {KEY: {"dir": str(src), "files": sorted(FILES)}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    server = peer.make_server(peer.Config(str(tmp_path / "config.json")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    dest = tmp_path / "dest"
    dest.mkdir()
    port = server.server_address[1]
    try:
        yield {"url": f"http://127.0.0.1:{port}/{KEY}/", "port": port, "src": src, "dest": dest,
               "files": manifest["files"], "tmp": tmp_path}
    finally:
        server.shutdown()
        server.server_close()


def _get(port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    return response.status, response.read()


def test_fetch_copies_and_verifies_every_file(served: dict[str, Any]) -> None:
    result = mf.fetch(str(served["dest"]), served["url"], TOKEN, served["files"])
    assert result["complete"] and result["changed"] and result["error"] is None
    assert sorted(result["fetched"]) == sorted(FILES) and result["bytes"] == sum(map(len, FILES.values()))
    for rel, data in FILES.items():
        assert (served["dest"] / rel).read_bytes() == data
    assert not (served["dest"] / mf.PARTIAL).exists()
    again = mf.fetch(str(served["dest"]), served["url"], TOKEN, served["files"])
    assert not again["changed"] and again["complete"] and again["fetched"] == [] and again["bytes"] == 0


def test_check_mode_fetches_nothing(served: dict[str, Any]) -> None:
    result = mf.fetch(str(served["dest"]), served["url"], TOKEN, served["files"], check_mode=True)
    assert result["changed"] and not result["complete"] and len(result["fetched"]) == len(FILES)
    assert list(served["dest"].iterdir()) == []


def test_an_interrupted_copy_resumes_with_a_range_request(served: dict[str, Any]) -> None:
    partial = served["dest"] / mf.PARTIAL / "model-1.safetensors"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(FILES["model-1.safetensors"][:123_456])
    result = mf.fetch(str(served["dest"]), served["url"], TOKEN, served["files"])
    assert result["complete"] and result["resumed_bytes"] == 123_456
    assert (served["dest"] / "model-1.safetensors").read_bytes() == FILES["model-1.safetensors"]


def test_a_corrupted_file_is_refused_and_the_rest_still_copied(served: dict[str, Any]) -> None:
    data = bytearray(FILES["model-1.safetensors"])
    data[1000] ^= 0xFF
    (served["src"] / "model-1.safetensors").write_bytes(bytes(data))
    result = mf.fetch(str(served["dest"]), served["url"], TOKEN, served["files"])
    assert not result["complete"] and "SHA-256" in result["error"] and "model-1.safetensors" in result["error"]
    assert not (served["dest"] / "model-1.safetensors").exists()
    assert not (served["dest"] / mf.PARTIAL / "model-1.safetensors").exists()
    assert (served["dest"] / "sub/tokenizer.json").read_bytes() == FILES["sub/tokenizer.json"]


def test_an_unreachable_peer_stops_the_copy(served: dict[str, Any]) -> None:
    url = f"http://127.0.0.1:{served['port'] + 1 if served['port'] < 65535 else 1}/{KEY}/"
    result = mf.fetch(str(served["dest"]), url, TOKEN, served["files"], timeout=2)
    assert not result["complete"] and result["fetched"] == [] and result["error"]


def test_a_wrong_token_is_refused(served: dict[str, Any]) -> None:
    result = mf.fetch(str(served["dest"]), served["url"], "wrong", served["files"])
    assert not result["complete"] and "HTTP 401" in result["error"]
    assert _get(served["port"], f"/{KEY}/config.json")[0] == 401


def test_the_server_serves_only_the_manifest_read_only(served: dict[str, Any]) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    port = served["port"]
    assert _get(port, f"/{KEY}/config.json", auth) == (200, FILES["config.json"])
    assert _get(port, f"/{KEY}/secret.txt", auth)[0] == 404
    assert _get(port, f"/{KEY}/", auth)[0] == 404
    assert _get(port, f"/{KEY}/../src/secret.txt", auth)[0] == 404
    assert _get(port, f"/{KEY}/%2e%2e/token", auth)[0] == 404
    assert _get(port, "/0000000000000000/config.json", auth)[0] == 404
    assert _get(port, f"/{KEY}/config.json", auth, method="PUT")[0] == 501
    assert _get(port, f"/{KEY}/config.json", auth, method="DELETE")[0] == 501
    status, body = _get(port, f"/{KEY}/model-1.safetensors", {**auth, "Range": "bytes=10-19"})
    assert status == 206 and body == FILES["model-1.safetensors"][10:20]
    assert _get(port, f"/{KEY}/config.json", {**auth, "Range": "bytes=999999-"})[0] == 416


def test_the_server_rereads_its_configuration(served: dict[str, Any]) -> None:
    config_path = served["tmp"] / "config.json"
    config = json.loads(config_path.read_text())
    config["models"][KEY]["files"] = ["config.json"]
    time.sleep(0.01)
    config_path.write_text(json.dumps(config))
    os.utime(config_path, (time.time() + 5, time.time() + 5))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _get(served["port"], f"/{KEY}/sub/tokenizer.json", auth)[0] == 404
    assert _get(served["port"], f"/{KEY}/config.json", auth)[0] == 200


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "", "a//b", f"{mf.PARTIAL}/x", "a\\b", "./a"])
def test_manifest_paths_must_stay_inside_the_snapshot(bad: str) -> None:
    with pytest.raises(ValueError):
        mf.safe_relpath(bad)


def test_a_cut_transfer_is_resumed_within_the_run(tmp_path: Path) -> None:
    data = os.urandom(50_000)
    sha = hashlib.sha256(data).hexdigest()
    calls: list[str | None] = []

    class Cut:
        status = 200

        def __init__(self, body: bytes, cut: bool, status: int) -> None:
            self.body, self.cut, self.status, self.pos = body, cut, status, 0

        def read(self, n: int) -> bytes:
            if self.cut and self.pos >= 20_000:
                raise ConnectionResetError("reset")
            chunk = self.body[self.pos:self.pos + min(n, 10_000)]
            self.pos += len(chunk)
            return chunk

        def __enter__(self) -> Cut:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def opener(url: str, headers: dict[str, str], timeout: float) -> Cut:
        rng = headers.get("Range")
        calls.append(rng)
        start = int(rng[6:-1]) if rng else 0
        return Cut(data[start:], cut=len(calls) == 1, status=206 if rng else 200)

    result = mf.fetch(str(tmp_path), "http://peer/k/", TOKEN, [{"path": "w", "size": len(data), "sha256": sha}],
                      opener=opener)
    assert result["complete"] and (tmp_path / "w").read_bytes() == data
    assert calls == [None, "bytes=20000-"] and result["resumed_bytes"] == 20_000


# --- the stand-in Hub's link ------------------------------------------------------------------------------------


def test_fakehub_link_caps_the_rate_and_counts_bytes() -> None:
    class Sink:
        def __init__(self) -> None:
            self.data = b""

        def write(self, chunk: bytes) -> None:
            self.data += chunk

    link = fakehub.Link(rate=400_000)
    sink = Sink()
    start = time.monotonic()
    link.send(sink, "w", b"x" * 200_000)
    assert time.monotonic() - start >= 0.4
    assert sink.data == b"x" * 200_000 and link.bytes_served == 200_000 and link.files == {"w": 200_000}
    big = fakehub._files(fakehub.REV1, shards=3, shard_bytes=1000)
    assert len([n for n in big if n.endswith(".safetensors")]) == 3
    assert fakehub._files(fakehub.REV1) == fakehub.REVISIONS[fakehub.REV1]
