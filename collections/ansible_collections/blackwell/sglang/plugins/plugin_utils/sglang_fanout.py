# SPDX-License-Identifier: Apache-2.0
"""Weights once per fleet: which host stages each (model, revision) from the Hub and who copies it from whom.

Pure functions, no Ansible import: the filter ``blackwell.sglang.model_fanout_plan`` and the unit tests
call them. Every host of the play states (a fact, ``__sglang_model_state``) what it needs and what it
already holds; the plan then says, per (model, revision):

* round 0: one host downloads it from the Hub (``sglang_model_seed_host`` when that host needs it, else
  the first host of the play that does), unless a host already holds a verified copy;
* rounds 1, 2, ...: every host that holds a verified copy serves up to ``per_source`` hosts still without
  one, so the number of copies grows like a tree (1, 2, 4, 8, ... with one client per source) instead of
  every host pulling from one seeder.

A receiver whose peer copy fails (unreachable peer, checksum mismatch) falls back to the Hub within its
own round (the role does that), so a later round never depends on a copy that failed: the plan can be
made once, up front.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any


def model_key(repo: str, revision: str) -> str:
    """A short, path-safe name of (repo, revision): the first path segment of the peers' URLs."""
    return hashlib.sha256(f"{repo}@{revision}".encode()).hexdigest()[:16]


def _slurped_json(result: Any) -> Any:
    """The JSON document of an ``ansible.builtin.slurp`` result, or None (no file, not JSON)."""
    if not isinstance(result, Mapping) or "content" not in result:
        return None
    try:
        return json.loads(base64.b64decode(result["content"]))
    except (binascii.Error, ValueError, TypeError):
        return None


def valid_manifest(manifest: Any, repo: str, revision: str) -> bool:
    """``manifest`` is a manifest of ``repo`` at ``revision``: commit and files with path, size and sha256."""
    if not isinstance(manifest, Mapping) or manifest.get("repo") != repo or manifest.get("revision") != revision:
        return False
    files = manifest.get("files")
    return bool(manifest.get("commit")) and isinstance(files, list) and all(
        isinstance(f, Mapping) and isinstance(f.get("path"), str) and isinstance(f.get("size"), int)
        and isinstance(f.get("sha256"), str) and len(f["sha256"]) == 64 for f in files)


def model_state(models: Iterable[Mapping[str, Any]], markers: Iterable[Any], manifests: Iterable[Any],
                endpoint: str = "") -> dict[str, Any]:
    """What a host needs and holds, from roles/sglang's slurps of each model's marker and manifest.

    ``models``: ``[{repo, revision, dir}]`` (blackwell.sglang.staged_models); ``markers`` and ``manifests``: the
    slurp results of each model's ``.sglang-model.json`` and ``.sglang-model-manifest.json``, in the same order.
    A model is staged when its marker is the stamp ``{repo, revision, endpoint}``; it can be served to peers when,
    besides, its manifest is valid. Returns ``models`` (each with its ``key`` and ``staged``), ``needs`` (keys),
    ``have`` (key -> manifest) and ``dirs`` (key -> directory).
    """
    out: dict[str, Any] = {"models": [], "needs": [], "have": {}, "dirs": {}}
    for model, marker, manifest in zip(models, markers, manifests, strict=True):
        repo, revision = str(model["repo"]), str(model["revision"])
        key = model_key(repo, revision)
        staged = _slurped_json(marker) == {"repo": repo, "revision": revision, "endpoint": endpoint}
        out["models"].append({**model, "key": key, "staged": staged})
        out["dirs"][key] = model["dir"]
        if not staged:
            out["needs"].append(key)
            continue
        document = _slurped_json(manifest)
        if valid_manifest(document, repo, revision):
            out["have"][key] = document
    return out


def _manifest_commit(manifest: Any) -> str | None:
    return manifest.get("commit") if isinstance(manifest, Mapping) else None


def fanout_plan(
    play_hosts: Iterable[str],
    states: Mapping[str, Mapping[str, Any]],
    seed_host: str | None = None,
    enabled: bool = True,
    per_source: int = 1,
) -> dict[str, Any]:
    """The staging plan of the play.

    ``play_hosts``: the play's hosts, in order (the receivers and, first, the candidate seeders).
    ``states``: per host (the play's and any other host that ran the role earlier in the same run):
    ``needs`` (keys it must stage), ``have`` (key -> manifest of a verified copy it holds).
    Returns ``hub`` (host -> keys to download from the Hub in round 0), ``peer`` (list of
    ``{round, key, host, source}``), ``rounds`` (the number of peer rounds), ``servers`` (hosts that serve
    in some round, in plan order) and ``origin`` (key -> the host whose manifest every copy is checked against).
    """
    if per_source < 1:
        raise ValueError(f"per_source must be at least 1, not {per_source}")
    hosts = [h for h in play_hosts if h in states]
    others = sorted(h for h in states if h not in hosts)
    hub: dict[str, list[str]] = {}
    peer: list[dict[str, Any]] = []
    origin: dict[str, str] = {}
    keys: list[str] = []
    for h in hosts:
        for key in states[h].get("needs", []):
            if key not in keys:
                keys.append(key)
    for key in keys:
        needing = [h for h in hosts if key in states[h].get("needs", [])]
        holders = [h for h in hosts + others if key in (states[h].get("have") or {})]
        if not enabled:
            for h in needing:
                hub.setdefault(h, []).append(key)
            continue
        if holders:
            # Copies of a branch name staged at different times may differ: the first holder's commit wins,
            # and only holders of that same commit serve.
            commit = _manifest_commit(states[holders[0]]["have"][key])
            holders = [h for h in holders if _manifest_commit(states[h]["have"][key]) == commit]
        else:
            seed = seed_host if seed_host in needing else needing[0]
            hub.setdefault(seed, []).append(key)
            holders = [seed]
            needing = [h for h in needing if h != seed]
        origin[key] = holders[0]
        complete = list(holders)
        round_no = 1
        while needing:
            added: list[str] = []
            for source in complete:
                for _ in range(per_source):
                    if not needing:
                        break
                    host = needing.pop(0)
                    peer.append({"round": round_no, "key": key, "host": host, "source": source})
                    added.append(host)
            complete += added
            round_no += 1
    servers: list[str] = []
    for step in peer:
        if step["source"] not in servers:
            servers.append(step["source"])
    return {
        "hub": hub,
        "peer": peer,
        "rounds": max((s["round"] for s in peer), default=0),
        "servers": servers,
        "origin": origin,
    }


def peer_url(address: str, port: int, key: str) -> str:
    """The base URL of ``key`` on a peer: http://ADDRESS:PORT/KEY/ (an IPv6 address in brackets)."""
    host = f"[{address}]" if ":" in address and not address.startswith("[") else address
    return f"http://{host}:{int(port)}/{key}/"


def peer_config(state: Mapping[str, Any], token_file: str) -> dict[str, Any]:
    """The configuration of a host's sglang-model-peer: its address and port, the token file, and per key it holds
    the directory and the manifest's files (nothing else of the directory is served)."""
    have = state.get("have") or {}
    dirs = state.get("dirs") or {}
    return {
        "bind": state["address"],
        "port": int(state["port"]),
        "token_file": token_file,
        "models": {key: {"dir": dirs[key], "files": [f["path"] for f in manifest["files"]]}
                   for key, manifest in sorted(have.items()) if key in dirs},
    }
