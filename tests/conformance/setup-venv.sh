#!/usr/bin/env bash
# Create .venv-conformance (repo root): SGLang 0.5.23 + the minimum its argument
# handling needs, pinned in requirements-conformance.txt. Idempotent: skipped when
# the stamp inside the venv matches the hash of the requirements (and this script).
#
#   tests/conformance/setup-venv.sh           # create or reuse
#   tests/conformance/setup-venv.sh --force   # rebuild from scratch
#
# Env: CONFORMANCE_VENV (default <repo>/.venv-conformance), PYTHON (default python3.11).
# Network: PyPI only (sglang, transformers, ...); torch-2.13.0+cpu comes from the
# machine's local wheel directory /opt/wheels. Measured cold: see tests/conformance/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${CONFORMANCE_VENV:-$repo/.venv-conformance}"
req="$repo/requirements-conformance.txt"
stamp="$venv/.conformance-stamp"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then python="$cand"; break; fi
  done
fi

force=0
[[ "${1:-}" == "--force" ]] && force=1

want="$(cat "$req" "$here/setup-venv.sh" | sha256sum | cut -d' ' -f1)"

if [[ $force -eq 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]] \
   && "$venv/bin/python" -c 'import importlib.metadata as m, torch, transformers; m.version("sglang")' >/dev/null 2>&1; then
  # (`import sglang` itself needs the probe's stubs: triton is deliberately absent.)
  echo "setup-venv: $venv is up to date ($(cut -c1-12 <<<"$want"))"
  exit 0
fi

"$python" - <<'EOF' || { echo "setup-venv: needs Python 3.11 (sglang 0.5.23 ships cp311 wheels)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
EOF

start=$(date +%s)
echo "setup-venv: building $venv"
rm -rf "$venv"
"$python" -m venv "$venv"

pip_args=(--no-deps --no-input --disable-pip-version-check -r "$req")
# torch-2.13.0+cpu is not on PyPI: it lies in the machine's local wheel directory.
if [[ -d /opt/wheels ]]; then
  pip_args+=(--find-links /opt/wheels)
fi
"$venv/bin/python" -m pip install -q "${pip_args[@]}" 2>&1 \
  | grep -v -E "is ignored: it is neither a file nor a directory|^$" || true
# pip's exit status is hidden by the filter above: check the result instead.
if ! "$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import sys
want = {"sglang": "0.5.23", "transformers": "5.19.0"}
bad = {k: md.version(k) for k in want if md.version(k) != want[k]}
import torch  # noqa: F401  - the CPU build must import
sys.exit(1 if bad else 0)
EOF
then
  echo "setup-venv: installation into $venv failed (see pip output above)" >&2
  exit 1
fi

echo "$want" >"$stamp"
end=$(date +%s)
echo "setup-venv: done in $((end - start)) s ($(du -sh "$venv" | cut -f1))"
