#!/usr/bin/env bash
# Side-by-side LoRA fine-tuning benchmark of SmolLM2-135M-Instruct: Patchbay against PyTorch +
# PEFT on identical batches (bench_lora_peft.py says how). Not part of CI.
#
#   scripts/finetune/bench_lora_peft.sh [bench_lora_peft.py options]
#
# Python: $PATCHBAY_TORCH_VENV/bin/python (default /work/.venvs/torch, which must hold torch,
# transformers, peft and safetensors). Patchbay: $PATCHBAY_BIN (default build/patchbay). The GGUF
# file: $PATCHBAY_SMOLLM2_DIR/SmolLM2-135M-Instruct.Q4_1.gguf (default data/models/smollm2, where
# fetch_smollm2.sh puts it), unless --gguf is given.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${PATCHBAY_TORCH_VENV:-/work/.venvs/torch}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "no Python at $venv/bin/python: set PATCHBAY_TORCH_VENV to a venv with torch, transformers, peft, safetensors" >&2
  exit 2
fi
gguf="${PATCHBAY_SMOLLM2_DIR:-$root/data/models/smollm2}/SmolLM2-135M-Instruct.Q4_1.gguf"
cd "$root"
exec "$venv/bin/python" "$here/bench_lora_peft.py" --patchbay "${PATCHBAY_BIN:-build/patchbay}" \
  --gguf "$gguf" "$@"
