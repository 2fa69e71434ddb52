#!/usr/bin/env bash
# Tensor parallelism through the CLI, 2 ranks under mpirun (ctest runs this):
#  1. `patchbay train --set parallelism.kind=mpi_tensor` trains a tiny model; a single process
#     evaluates its checkpoint (full tensors) and resumes it;
#  2. a layer without the tensor-parallel capability (attention "linear") stops the job at once
#     with a message naming the block, the component and the capability;
#  3. n_heads not divisible by the ranks stops the job with the layer's message.
# Usage: tp_cli_test.sh PATCHBAY MPIRUN [MPIRUN ARGS...]
set -euo pipefail
patchbay=$1; shift
mpirun=("$@")
tmp=$(mktemp -d /tmp/patchbay_tp_cli_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1

for i in $(seq 1 1600); do echo "the cat sat on the mat number $((i % 7)) and ran to the door."; done > "$tmp/corpus.txt"
cat > "$tmp/tiny.toml" <<TOML
[run]
name = "tp"
seed = 3
[data]
corpus = "$tmp/corpus.txt"
validation_fraction = 0.3
output_dir = "$tmp/data"
[tokenizer]
kind = "char"
[model]
context_length = 32
n_layers = 2
n_heads = 2
d_model = 32
[optimizer]
kind = "adamw"
[train]
batch_size = 4
seq_len = 16
max_steps = 4
lr = 0.01
warmup_steps = 0
eval_every = 2
eval_batches = 1
sample_tokens = 8
checkpoint_every = 2
log_every = 1
out_dir = "$tmp/run"
TOML

fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$tmp/out.txt" 2>/dev/null || true; exit 1; }
tp=(--set parallelism.kind=mpi_tensor)

# ---- 1. train on 2 ranks; evaluate and resume the checkpoint in one process ----
timeout 120 "${mpirun[@]}" -np 2 "$patchbay" train "$tmp/tiny.toml" "${tp[@]}" > "$tmp/out.txt" 2>&1 ||
  fail "2-rank tensor-parallel training failed"
grep -q "tensor parallel: 2 ranks" "$tmp/out.txt" || fail "rank 0 did not report the split"
[ "$(grep -c '"loss"' "$tmp/run/metrics.jsonl")" -eq 4 ] || fail "metrics.jsonl does not hold 4 steps (one writer)"
"$patchbay" eval "$tmp/run" --batches 1 > "$tmp/out.txt" 2>&1 || fail "one process cannot evaluate the 2-rank checkpoint"
# A copy of the run resumes in place (train --resume writes only into the checkpoint's run
# directory); its model_size.json is removed so the one-process resume must write its own.
cp -r "$tmp/run" "$tmp/resumed"
rm -f "$tmp/resumed/model_size.json"
"$patchbay" train "$tmp/tiny.toml" --set train.max_steps=6 \
  --resume "$tmp/resumed/checkpoints/step_2.safetensors" > "$tmp/out.txt" 2>&1 ||
  fail "one process cannot resume the 2-rank checkpoint"
# model_size.json counts the whole model on 2 ranks too (parameters and training FLOPs per token)
python3 - "$tmp/run/model_size.json" "$tmp/resumed/model_size.json" <<'PY' || fail "model_size.json of the 2-rank run differs from one process's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for key in ("parameters", "non_embedding_parameters", "flops_per_token"):
    assert a[key] == b[key], (key, a[key], b[key])
PY

# ---- 2. a layer that cannot split ----
set +e
timeout 60 "${mpirun[@]}" -np 2 "$patchbay" train "$tmp/tiny.toml" "${tp[@]}" --set model.attention.kind=linear \
  --set train.out_dir=\""$tmp/linear"\" > "$tmp/out.txt" 2>&1
status=$?
set -e
[ "$status" -ne 0 ] || fail "attention 'linear' trained under tensor parallelism"
[ "$status" -ne 124 ] || fail "the refusal hung (timeout)"
grep -q "block 0 attention 'linear'" "$tmp/out.txt" || fail "the message does not name the block and the component"
grep -q "cannot be split over tensor-parallel ranks" "$tmp/out.txt" || fail "the message does not say why"

# ---- 3. heads that do not divide ----
set +e
timeout 60 "${mpirun[@]}" -np 2 "$patchbay" train "$tmp/tiny.toml" "${tp[@]}" --set model.n_heads=1 \
  --set train.out_dir=\""$tmp/heads"\" > "$tmp/out.txt" 2>&1
status=$?
set -e
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "n_heads = 1 on 2 ranks did not stop with an error"
grep -q "n_heads 1 is not divisible by the 2 ranks" "$tmp/out.txt" || fail "no message about n_heads"

# ---- 4. resuming with another optimizer: the checkpoint's AdamW state is refused by name ----
set +e
timeout 60 "${mpirun[@]}" -np 2 "$patchbay" train "$tmp/tiny.toml" "${tp[@]}" --set optimizer.kind=sgd \
  --set train.out_dir=\""$tmp/other_optimizer"\" --resume "$tmp/run/checkpoints/step_2.safetensors" \
  > "$tmp/out.txt" 2>&1
status=$?
set -e
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "AdamW state was silently dropped on a resume with sgd"
grep -q "unexpected: exp_avg" "$tmp/out.txt" || fail "the refusal does not name the unexpected state"
echo "PASS"
