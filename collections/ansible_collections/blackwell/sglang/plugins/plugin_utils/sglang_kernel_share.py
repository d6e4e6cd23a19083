# SPDX-License-Identifier: Apache-2.0
"""The canary's built kernels shared with the rest of the fleet, the way the model fan-out shares weights (issue 35).

In a rollout the canary pre-compiles each instance's kernels into the new release's kernel cache key
(blackwell.sglang.kernel_precompile, its marker records the key and a digest of the arguments that change kernels:
module_utils/sglang_precompile.py) and starts on them. Afterwards (roles/sglang_rollout) it lists each instance's kernel
directory (blackwell.sglang.kernel_manifest: every file's size and SHA-256, and the marker); every later host copies the
directory of an instance whose kernel inputs are the same (same key, same digest) from the canary's peer server
(roles/sglang's sglang-model-peer, one key per directory: the marker's 16-hex digest) with blackwell.sglang.model_fetch,
each file checked against the manifest that came through the control node, then writes the marker. Its pre-compile
then finds the marker and its start a warm cache. A host whose copy fails writes no marker and compiles as before.

:func:`share_plan` decides, on the control node, which of a host's instances copy from which source; nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_precompile import inputs_digest, kernel_inputs
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_fanout import peer_url


def _nnodes(argv: Iterable[Any]) -> int:
    words = [str(w) for w in argv]
    for i, word in enumerate(words):
        value = words[i + 1] if word == "--nnodes" and i + 1 < len(words) else (
            word.split("=", 1)[1] if word.startswith("--nnodes=") else None)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                return 1
    return 1


def share_plan(instances: Iterable[Mapping[str, Any]], names: Iterable[str],
               sources: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Which of ``names`` (instances of this host, whose public plans are ``instances``) copy their kernel directory
    from which source.

    ``sources``: ``{host, address, port, kernels}``, ``kernels`` being what the source published after its rollout:
    ``{instance, key, marker, files}`` per instance (blackwell.sglang.kernel_manifest's ``marker`` and ``files``).
    An instance copies when it is single-node, and a source's marker records the instance's own key and the digest of
    its own kernel inputs (:func:`sglang_precompile.kernel_inputs` of its key and argv), with files to copy; the first
    such source is taken. Returns ``{instance, dir, key, digest, source, url, files, marker}`` per copy, in ``names``
    order.
    """
    wanted = list(dict.fromkeys(str(n) for n in names))
    plans = {str(p.get("name")): p for p in instances if isinstance(p, Mapping)}
    offers = []
    for source in sources:
        for kernels in source.get("kernels") or []:
            marker = kernels.get("marker")
            if isinstance(marker, Mapping) and kernels.get("files"):
                offers.append((source, kernels, marker))
    out = []
    for name in wanted:
        plan = plans.get(name)
        cache = plan.get("kernel_cache") if plan else None
        if not isinstance(cache, Mapping) or not cache.get("key") or not cache.get("dir"):
            continue
        argv = [str(a) for a in plan.get("argv") or []]
        if _nnodes(argv) > 1:
            continue
        digest = inputs_digest(kernel_inputs(str(cache["key"]), argv))
        for source, kernels, marker in offers:
            if marker.get("digest") == digest and marker.get("key") == cache["key"]:
                out.append({"instance": name, "dir": str(cache["dir"]), "key": str(cache["key"]), "digest": digest,
                            "source": str(source["host"]),
                            "url": peer_url(str(source["address"]), int(source["port"]), digest),
                            "files": list(kernels["files"]), "marker": dict(marker)})
                break
    return out


def peer_config(kernels: Iterable[Mapping[str, Any]], bind: str, port: int, token_file: str) -> dict[str, Any]:
    """The source's sglang-model-peer configuration: each published kernel directory under its marker's digest, only
    the files of its manifest."""
    return {"bind": str(bind), "port": int(port), "token_file": str(token_file),
            "models": {str(k["marker"]["digest"]): {"dir": str(k["dir"]), "files": [f["path"] for f in k["files"]]}
                       for k in kernels if isinstance(k.get("marker"), Mapping) and k.get("files")}}


__all__ = ["peer_config", "share_plan"]
