#!/usr/bin/env bash
# Checks `patchbay eval --tasks` against lm-evaluation-harness itself (not CI):
#   1. exports RUN with `patchbay export --format hf` (a transformers model directory);
#   2. runs lm-eval's Hugging Face backend on the same task files (configs/tasks/*.yaml, run
#      from that folder so the relative data_files resolve the same way), float32 on the CPU;
#   3. runs `patchbay eval RUN --tasks ...` with --log-samples on the same threads;
#   4. compare_samples.py: per-item log-likelihoods within 1e-4, identical predictions, the
#      aggregate metrics, and the wall time of both.
# Usage: scripts/eval/check_lm_eval.sh RUN [TASKS] [LIMIT]
#   TASKS default kjv_cloze,kjv_next_verse,wordnet_definitions,kjv_ppl; LIMIT default 100.
#   NUM_FEWSHOT=N passes the same few-shot count to both (the prompts are compared too).
#   PER_TOKEN=1 applies the 1e-4 tolerance per continuation token (deep imported models: their
#   float32 differences add up over long continuations; both figures are printed either way).
#   Wall time and CPU time (user + system, /usr/bin/time) of both are printed.
# Needs a venv with lm-eval (LM_EVAL_VENV, default /work/.venvs/lmeval38):
#   python3 -m venv /work/.venvs/lmeval38 && /work/.venvs/lmeval38/bin/pip install lm-eval transformers torch
set -euo pipefail
cd "$(dirname "$0")/../.."
run="${1:?usage: check_lm_eval.sh RUN [TASKS] [LIMIT]}"
tasks="${2:-kjv_cloze,kjv_next_verse,wordnet_definitions,kjv_ppl}"
limit="${3:-100}"
venv="${LM_EVAL_VENV:-/work/.venvs/lmeval38}"
build_dir="${PATCHBAY_BUILD_DIR:-build}"
threads="${THREADS:-$(nproc)}"
fewshot_lm_eval=() fewshot_patchbay=()
if [ -n "${NUM_FEWSHOT:-}" ]; then fewshot_lm_eval=(--num_fewshot "$NUM_FEWSHOT"); fewshot_patchbay=(--num-fewshot "$NUM_FEWSHOT"); fi
work="$(mktemp -d /tmp/check_lm_eval.XXXXXX)"
echo "work folder: $work (threads: $threads)"

"$build_dir/patchbay" export "$run" --format hf "$work/hf" >/dev/null

export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
repo="$PWD"
start=$(date +%s.%N)
(cd configs/tasks && /usr/bin/time -f "%U %S" -o "$work/lm_eval.time" "$venv/bin/lm_eval" --model hf \
  --model_args "pretrained=$work/hf,dtype=float32,trust_remote_code=False" --device cpu \
  --include_path "$repo/configs/tasks" --tasks "$tasks" --limit "$limit" --batch_size 32 "${fewshot_lm_eval[@]}" \
  --log_samples --output_path "$work/lm_eval" > "$work/lm_eval.log" 2>&1) || { tail -30 "$work/lm_eval.log"; exit 1; }
lm_eval_seconds=$(echo "$(date +%s.%N) - $start" | bc)

start=$(date +%s.%N)
/usr/bin/time -f "%U %S" -o "$work/patchbay.time" "$build_dir/patchbay" eval "$run" --tasks "$tasks" --limit "$limit" --batch-size 32 "${fewshot_patchbay[@]}" \
  --log-samples "$work/patchbay_samples.jsonl" --output "$work/patchbay.json" > "$work/patchbay.log"
patchbay_seconds=$(echo "$(date +%s.%N) - $start" | bc)

cpu_seconds() { awk '{ print $1 + $2 }' "$1"; }
per_token=()
if [ "${PER_TOKEN:-0}" = 1 ]; then per_token=(--per-token); fi
"$venv/bin/python" scripts/eval/compare_samples.py "$work/patchbay_samples.jsonl" "$work/patchbay.json" "$work/lm_eval" \
  --tokenizer "$work/hf" "${per_token[@]}" \
  --lm-eval-seconds "$lm_eval_seconds" --patchbay-seconds "$patchbay_seconds" \
  --lm-eval-cpu-seconds "$(cpu_seconds "$work/lm_eval.time")" --patchbay-cpu-seconds "$(cpu_seconds "$work/patchbay.time")"
