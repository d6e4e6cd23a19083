# SPDX-License-Identifier: Apache-2.0
"""The quality gate of a restart (issue 35 item 4): a fixed prompt set's answers at temperature 0 and SGLang's
``/weights_checker`` checksum, compared with what the last good start recorded on the host and with the fleet.

Pure functions, no Ansible (module_utils: blackwell.sglang.chat_probe imports it on the host; tests/unit/test_quality_gate.py
checks it). The record is ``quality.json`` in the instance's last-known-good directory, written after a good restart
(roles/sglang_server tasks/finish.yml) from :func:`compare`'s ``record``; the gate (tasks/gate.yml) only reads it.

What is compared with what:

* **Answers** are recorded per model, revision, host class and weight layout (:data:`LAYOUT_ARGS`), NOT per SGLang
  release: an upgrade that answers the fixed prompts differently from the last good release fails. A prompt without a
  recorded answer (a prompt added to the set) is recorded, not judged.
* **The weights checksum** (SGLang 0.5.23 ``GET /weights_checker``, sglang/srt/entrypoints/http_server.py:1599-1618:
  ``per_engine_checksum``, the sha256 over every rank's ``per_gpu_checksum``, managers/tokenizer_control_mixin.py:890-909)
  is recorded per model, revision, host class, layout AND release: how a release lays out, fuses or requantises the
  loaded tensors may change it, while two starts of one release on the same files must agree. It is also compared with
  the checksums the other instances of the run reported for the same key (the rest of the fleet after the canary).
* Nothing recorded and no fleet checksum for the key: the answers and checksum are recorded and the gate passes
  (status ``recorded``: the first start of a model, layout or release).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

SCHEMA = 1
# The records kept per kind (answers, checksums), newest first.
MAX_RECORDS = 8
# The fields of a start's key (module_utils/sglang_startup.KEY_FIELDS) the answers are recorded for: not the release.
ANSWER_FIELDS = ("model", "revision", "host_class", "layout")
CHECKSUM_FIELDS = ("model", "revision", "host_class", "layout", "release")
# The launch arguments that change which tensors each rank loads or how they are computed (the parallel layout, the
# quantization and data types): a change of any of them starts a new record.
LAYOUT_ARGS = ("tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention", "quantization", "dtype",
               "kv_cache_dtype")
# How much of an answer, and of a prompt, a message shows (characters).
SHOWN = 60
SHOWN_PROMPT = 160


def checksum_of(answer: Any) -> tuple[str | None, str | None]:
    """(``per_engine_checksum``, None) of SGLang's ``/weights_checker`` answer, or (None, why there is none): what the
    quality gate (chat_probe) and the drift report (drift_probe) read."""
    if not isinstance(answer, Mapping):
        return None, "not a JSON object"
    checksum = answer.get("per_engine_checksum")
    if answer.get("success") is not True or not isinstance(checksum, str) or not checksum:
        return None, f"no checksum: {str(answer.get('message') or 'no per_engine_checksum')[:200]}"
    return checksum, None


def layout(args: Mapping[str, Any]) -> str:
    """The weight layout of launch arguments, as text (``tp_size=8,quantization=modelopt_fp4``; unset ones left out)."""
    return ",".join(f"{name}={args[name]}" for name in LAYOUT_ARGS if args.get(name) not in (None, "", False))


def key_of(fields: Iterable[str], key: Mapping[str, Any]) -> dict[str, str]:
    """``key``'s ``fields``, each as text."""
    return {name: "" if key.get(name) is None else str(key.get(name)) for name in fields}


def load(text: str | None) -> tuple[dict[str, Any], str | None]:
    """The record from ``quality.json``'s text (None: no file) and why it was not read (None when it was)."""
    empty: dict[str, Any] = {"schema": SCHEMA, "answers": [], "checksums": []}
    if text is None:
        return empty, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return empty, f"not JSON ({exc})"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return empty, f"not a schema {SCHEMA} record"
    out = dict(empty)
    for kind in ("answers", "checksums"):
        entries = data.get(kind)
        out[kind] = [e for e in entries if isinstance(e, dict) and isinstance(e.get("key"), dict)] if isinstance(entries, list) else []
    return out, None


def _find(entries: list[dict[str, Any]], key: Mapping[str, str]) -> dict[str, Any] | None:
    return next((e for e in entries if e.get("key") == dict(key)), None)


def _short(text: Any, limit: int = SHOWN) -> str:
    text = str(text)
    return json.dumps(text if len(text) <= limit else text[:limit] + "...")


def _put(entries: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """``entry`` first, the others with another key after it, at most MAX_RECORDS."""
    return ([entry] + [e for e in entries if e.get("key") != entry["key"]])[:MAX_RECORDS]


def compare(record: Mapping[str, Any], key: Mapping[str, Any], answers: Mapping[str, str], checksum: str | None,
            fleet: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Compare this start's ``answers`` (prompt -> answer) and weights ``checksum`` (None: not read) with the
    ``record`` (:func:`load`) and with the ``fleet`` (``{host, instance, key, checksum}`` of the run's other
    instances, ``key`` as :func:`compare` returns it).

    Returns ``status`` (``passed``, ``recorded`` or ``failed``), ``differences`` (each ``{what, detail}``, ``what`` one of
    ``answer``, ``weights_checksum``, ``fleet_weights_checksum``), ``compared`` (how many answers, whether the recorded
    checksum, how many fleet checksums), ``key`` (``answers`` and ``checksum`` keys), ``summary`` (one line) and
    ``record``: the record to keep should this start be kept as good (this start's answers and checksum first).
    """
    answer_key = key_of(ANSWER_FIELDS, key)
    checksum_key = key_of(CHECKSUM_FIELDS, key)
    differences: list[dict[str, str]] = []
    recorded = _find(list(record.get("answers") or []), answer_key)
    old_answers = recorded.get("answers") if recorded and isinstance(recorded.get("answers"), dict) else {}
    release = (recorded or {}).get("release") or "?"
    compared_answers = 0
    for prompt, answer in answers.items():
        if prompt not in old_answers:
            continue
        compared_answers += 1
        if old_answers[prompt] != answer:
            differences.append({"what": "answer", "detail": (
                f"prompt {_short(prompt, SHOWN_PROMPT)}: release {release} answered {_short(old_answers[prompt])}, "
                f"this start {_short(answer)}")})
    old_checksum = _find(list(record.get("checksums") or []), checksum_key)
    compared_checksum = False
    if checksum is not None and old_checksum and old_checksum.get("checksum"):
        compared_checksum = True
        if old_checksum["checksum"] != checksum:
            differences.append({"what": "weights_checksum", "detail": (
                f"/weights_checker per_engine_checksum {checksum[:16]}... differs from the one recorded for this model "
                f"revision, layout and release ({str(old_checksum['checksum'])[:16]}...)")})
    compared_fleet = 0
    if checksum is not None:
        for other in fleet:
            other_key = other.get("key") if isinstance(other.get("key"), Mapping) else {}
            theirs = other.get("checksum")
            if not theirs or dict(other_key.get("checksum") or {}) != checksum_key:
                continue
            compared_fleet += 1
            if theirs != checksum:
                differences.append({"what": "fleet_weights_checksum", "detail": (
                    f"/weights_checker per_engine_checksum {checksum[:16]}... differs from "
                    f"{other.get('host')} {other.get('instance')}'s ({str(theirs)[:16]}...) for the same model revision, "
                    "layout and release")})
    new_record = {"schema": SCHEMA, "answers": list(record.get("answers") or []),
                  "checksums": list(record.get("checksums") or [])}
    new_record["answers"] = _put(new_record["answers"], {"key": answer_key, "release": key_of(("release",), key)["release"],
                                                         "answers": {**old_answers, **dict(answers)}})
    if checksum is not None:
        new_record["checksums"] = _put(new_record["checksums"], {"key": checksum_key, "checksum": checksum})
    compared = {"answers": compared_answers, "checksum": compared_checksum, "fleet": compared_fleet}
    if differences:
        status = "failed"
        kinds = sorted({d["what"] for d in differences})
        summary = (f"quality gate failed ({', '.join(kinds)}): " + "; ".join(d["detail"] for d in differences))
    elif compared_answers or compared_checksum or compared_fleet:
        status = "passed"
        summary = (f"quality gate passed: {compared_answers} of {len(answers)} answers as recorded from release {release}"
                   + (", weights checksum as recorded" if compared_checksum else "")
                   + (f", weights checksum as {compared_fleet} other instance(s) of the fleet" if compared_fleet else "")
                   + (", weights checksum recorded (first start of this release)"
                      if checksum is not None and not (compared_checksum or compared_fleet) else ""))
    else:
        status = "recorded"
        summary = (f"quality gate: nothing recorded yet for this model revision, layout"
                   f"{'' if checksum is None else ' and release'}: {len(answers)} answers"
                   f"{'' if checksum is None else ' and the weights checksum'} recorded, passed")
    return {"status": status, "differences": differences, "compared": compared,
            "key": {"answers": answer_key, "checksum": checksum_key}, "summary": summary, "record": new_record}
