#!/usr/bin/env bash
# Faults in a 2-rank `patchbay train` under mpirun (ctest runs this):
#  1. rank 1 killed with SIGKILL mid-run: mpirun must end the whole job within seconds and
#     say which rank died and how; the last checkpoint rank 0 wrote stays loadable (eval).
#  2. rank 1 started with a different --set: the start-up agreement check makes the job end
#     at once with a message naming rank 1.
# Usage: fault_test.sh PATCHBAY MPIRUN [MPIRUN ARGS...]
set -euo pipefail
patchbay=$1; shift
mpirun=("$@")
tmp=$(mktemp -d /tmp/patchbay_fault_XXXXXX)
mpirun_pid=
cleanup() {
  if [ -n "$mpirun_pid" ] && kill -0 "$mpirun_pid" 2>/dev/null; then kill -9 "$mpirun_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1

# A corpus of simple sentences and a tiny model that trains for long enough to be killed.
for i in $(seq 1 1600); do echo "the cat sat on the mat number $((i % 7)) and ran to the door."; done > "$tmp/corpus.txt"
cat > "$tmp/tiny.toml" <<TOML
[run]
name = "fault"
seed = 3
[data]
corpus = "$tmp/corpus.txt"
validation_fraction = 0.3
output_dir = "$tmp/data"
[tokenizer]
kind = "char"
[model]
context_length = 32
n_layers = 1
n_heads = 2
d_model = 32
[optimizer]
kind = "sgd"
[train]
batch_size = 4
seq_len = 16
max_steps = 100000
lr = 0.01
warmup_steps = 0
eval_every = 0
sample_every = 0
sample_tokens = 0
checkpoint_every = 5
log_every = 1
out_dir = "$tmp/run"
[parallelism]
kind = "mpi_data"
TOML

fail() { echo "FAIL: $*"; echo "--- mpirun output ---"; cat "$tmp/out.txt" 2>/dev/null || true; exit 1; }

# ---- 1. a rank killed mid-run ----
"${mpirun[@]}" -np 2 "$patchbay" train "$tmp/tiny.toml" > "$tmp/out.txt" 2>&1 &
mpirun_pid=$!
for _ in $(seq 1 600); do  # up to 60 s for start-up and the first checkpoint (loaded machine)
  [ -f "$tmp/run/checkpoints/latest" ] && break
  kill -0 "$mpirun_pid" 2>/dev/null || fail "the job ended before its first checkpoint"
  sleep 0.1
done
[ -f "$tmp/run/checkpoints/latest" ] || fail "no checkpoint after 60 s"
rank1=
for pid in $(pgrep -P "$mpirun_pid"); do
  if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then rank1=$pid; fi
done
[ -n "$rank1" ] || fail "rank 1's process not found among mpirun's children"
killed_at=$(date +%s.%N)
kill -9 "$rank1"
set +e
wait "$mpirun_pid"
status=$?
set -e
mpirun_pid=
ended=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "job ended ${ended} s after rank 1 was killed (mpirun exit status $status)"
[ "$status" -ne 0 ] || fail "mpirun exited with status 0 after a rank was killed"
awk -v t="$ended" 'BEGIN { exit !(t < 20) }' || fail "the job took ${ended} s to end (limit 20 s)"
grep -q "rank 1" "$tmp/out.txt" || fail "the message does not name rank 1"
grep -qi "signal 9" "$tmp/out.txt" || fail "the message does not give the cause (signal 9)"
# The last checkpoint is complete: a single process evaluates it.
"$patchbay" eval "$tmp/run" --batches 1 > "$tmp/eval.txt" 2>&1 || { cat "$tmp/eval.txt"; fail "eval of the last checkpoint failed"; }

# ---- 2. a rank with a different config ----
set +e
timeout 60 "${mpirun[@]}" -np 1 "$patchbay" train "$tmp/tiny.toml" --set run.name=agree --set train.out_dir=\""$tmp/agree"\" \
  : -np 1 "$patchbay" train "$tmp/tiny.toml" --set run.name=agree --set train.out_dir=\""$tmp/agree"\" --set train.lr=0.02 \
  > "$tmp/out.txt" 2>&1
status=$?
set -e
[ "$status" -ne 0 ] || fail "ranks with different configs trained"
[ "$status" -ne 124 ] || fail "ranks with different configs hung (timeout)"
grep -q "rank 1 of 2 runs a different resolved config than rank 0" "$tmp/out.txt" || fail "no message naming rank 1"
echo "PASS"
