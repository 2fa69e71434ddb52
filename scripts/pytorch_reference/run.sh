#!/usr/bin/env bash
# Runs compare.py with a Python that has PyTorch: $PATCHBAY_TORCH_VENV if set (an existing
# virtual environment), else .venv-torch in this folder, created on first use from PyPI
# (torch + numpy). Not part of CI; needs network the first time.
#   bash scripts/pytorch_reference/run.sh configs/quickstart.toml [compare.py options]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PATCHBAY_TORCH_VENV:-$here/.venv-torch}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "creating $venv (torch, numpy from PyPI)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch numpy
fi
exec "$venv/bin/python" "$here/compare.py" "$@"
