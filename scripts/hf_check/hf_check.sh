#!/usr/bin/env bash
# Checks Patchbay's Hugging Face export/import against transformers itself (not part of the
# README's two commands; needs Python with torch + transformers + safetensors):
#   1. quickstart   configs/quickstart.toml trained --steps steps (GPT-2 shape, char tokenizer)
#   2. llama        the same with rotary, RMSNorm, SwiGLU, untied head (LlamaForCausalLM)
#   3. gpt2-shape   configs/gpt2-124m.toml (12 x 768, context 1024), one training step from random
#                   init, with GPT-2's published tokenizer (50,257 ids) when its files are in
#                   --gpt2-tokenizer DIR (scripts/tokenizers/fetch_gpt2.sh puts them in the default
#                   build/third_party/gpt2-tokenizer), else a BPE trained on the KJV (15k ids)
# Each is exported (`patchbay export RUN --format hf`), loaded with AutoModelForCausalLM and
# AutoTokenizer, compared (tokenizer ids, logits max abs diff <= 1e-4 in f32, greedy continuation),
# imported back (`patchbay import`) and compared again (scripts/hf_check/compare.py).
#
# Usage: scripts/hf_check/hf_check.sh [--python PY | --create-venv DIR] [--work DIR] [--steps N]
#                                     [--models quickstart,llama,gpt2-shape]
#   --python PY        a Python that has torch, transformers, safetensors (default: $HF_CHECK_PYTHON or python3)
#   --create-venv DIR  create DIR with `python3 -m venv` and install torch transformers safetensors
#                      tokenizers numpy from PyPI into it, then use it
#   --work DIR         runs and exports go here (default: /tmp/patchbay_hf_check)
#   --steps N          training steps of the quickstart-sized models (default 800, the quickstart's own)
# The Patchbay binary is $PATCHBAY_BUILD_DIR/patchbay (default build/patchbay): build it first.
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${HF_CHECK_PYTHON:-python3}"
work=/tmp/patchbay_hf_check
steps=800
models=quickstart,llama,gpt2-shape
venv=""
gpt2_tokenizer=build/third_party/gpt2-tokenizer
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --create-venv) venv="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --gpt2-tokenizer) gpt2_tokenizer="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "hf_check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n "$venv" ]]; then
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet torch transformers safetensors tokenizers numpy
  python="$venv/bin/python"
fi
if ! "$python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  echo "hf_check: $python lacks torch/transformers/safetensors; pass --python PY or --create-venv DIR" >&2
  exit 2
fi
patchbay="$(pwd)/${PATCHBAY_BUILD_DIR:-build}/patchbay"
[[ -x "$patchbay" ]] || { echo "hf_check: $patchbay not found; run scripts/build.sh first" >&2; exit 2; }
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
warmup=$((steps / 5 < 50 ? steps / 5 : 50))  # the quickstart's 50, fewer for short checks
mkdir -p "$work"
"$python" -c "import torch, transformers; print('python packages: torch', torch.__version__, '| transformers', transformers.__version__)"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg), OMP_NUM_THREADS=$OMP_NUM_THREADS"

prompt="And God said"
text="And it came to pass, when men began to multiply on the face of the earth, and daughters were born unto them, that the sons of God saw the daughters of men that they were fair; and they took them wives of all which they chose. In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep."
status=0
check() {  # label, config, new tokens, extra --set arguments...
  local label="$1" config="$2" new_tokens="$3"; shift 3
  local run="$work/runs/$label" hf="$work/hf/$label" imported="$work/imported/$label"
  local start=$SECONDS
  "$patchbay" train "$config" --no-progress --overwrite --set train.out_dir="\"$run\"" --set train.sample_tokens=0 "$@" \
    > "$work/$label.train.log" 2>&1 || { echo "[$label] training failed: see $work/$label.train.log"; tail -5 "$work/$label.train.log"; return 1; }
  echo "[$label] trained in $((SECONDS - start)) s: $(grep -E '^val loss' "$work/$label.train.log" || true)"
  rm -rf "$hf" "$imported"
  "$patchbay" export "$run" --format hf "$hf" | sed "s/^/[$label] /"
  local seq_len  # evaluate both runs on the same windows
  seq_len=$(awk '/^\[/{section=$0} section=="[train]" && $1=="seq_len"{print $3; exit}' "$run/config.toml")
  "$patchbay" import "$hf" "$imported" --set data.output_dir='"data/kjv"' --set train.seq_len="$seq_len" | sed "s/^/[$label] /"
  echo "[$label] eval run:      $("$patchbay" eval "$run" --batches 2 --batch-size 8 2>/dev/null | grep '^loss')"
  echo "[$label] eval imported: $("$patchbay" eval "$imported" --batches 2 --batch-size 8 2>/dev/null | grep '^loss')"
  "$python" scripts/hf_check/compare.py --patchbay "$patchbay" --label "$label" --run "$run" --hf "$hf" \
    --imported "$imported" --prompt "$prompt" --text "$text" --new-tokens "$new_tokens"
}
IFS=',' read -ra chosen <<< "$models"
for m in "${chosen[@]}"; do
  case "$m" in
    quickstart) check quickstart configs/quickstart.toml 100 --set train.max_steps="$steps" --set train.warmup_steps=$warmup || status=1 ;;
    llama) check llama configs/quickstart.toml 100 --set train.max_steps="$steps" --set train.warmup_steps=$warmup --set model.positional='"rotary"' \
             --set model.norm='"rmsnorm"' --set model.feedforward.activation='"swiglu"' --set model.d_ff=344 \
             --set model.tie_embeddings=false || status=1 ;;
    gpt2-shape)
      gpt2_files=()
      if [[ -f "$gpt2_tokenizer/encoder.json" && -f "$gpt2_tokenizer/vocab.bpe" ]]; then
        echo "[gpt2-shape] GPT-2's published tokenizer from $gpt2_tokenizer"
        gpt2_files=(--set tokenizer.bpe.vocab_file="\"$(realpath "$gpt2_tokenizer/encoder.json")\""
                    --set tokenizer.bpe.merges_file="\"$(realpath "$gpt2_tokenizer/vocab.bpe")\"")
      else
        echo "[gpt2-shape] no GPT-2 tokenizer files in $gpt2_tokenizer (scripts/tokenizers/fetch_gpt2.sh): BPE trained on the KJV"
      fi
      check gpt2-shape configs/gpt2-124m.toml 20 --set train.max_steps=1 --set train.batch_size=1 \
        --set train.seq_len=64 --set train.eval_batches=1 --set train.eval_every=1 --set train.warmup_steps=0 \
        "${gpt2_files[@]}" || status=1 ;;
    *) echo "hf_check: unknown model '$m'" >&2; status=2 ;;
  esac
done
echo "hf_check: $([[ $status == 0 ]] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')"
exit $status
