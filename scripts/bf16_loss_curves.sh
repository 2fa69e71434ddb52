#!/usr/bin/env bash
# bf16 mixed precision against f32 on the quickstart, 300 steps, several initialisation seeds,
# with a control: the same f32 run on 1 OpenMP thread instead of 2, whose only difference is
# the order of floating-point sums (GEMM blocking, attention's dq reduction). If bf16's
# distance from f32 is of the size of that control's, the differences are the chaotic growth
# of rounding differences, not a bias of bf16. Not part of CI; needs build/patchbay.
#   bash scripts/bf16_loss_curves.sh [SEED ...]          # default seeds 1 2 3 4 5
# Runs go to $PATCHBAY_CURVES_DIR (default /tmp/patchbay_bf16_curves); prints a table per
# evaluation step and the seed-averaged curves (docs/BENCHMARKS.md records one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATCHBAY_CURVES_DIR="${PATCHBAY_CURVES_DIR:-/tmp/patchbay_bf16_curves}"
seeds=("$@")
[[ ${#seeds[@]} -gt 0 ]] || seeds=(1 2 3 4 5)
common=(--no-progress --overwrite --set train.max_steps=300 --set train.eval_every=50
        --set train.eval_batches=20 --set train.sample_tokens=0 --set train.checkpoint_every=0)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for s in "${seeds[@]}"; do
  for run in f32 bf16 f32_1thread; do
    threads=2; precision=${run%%_*}
    [[ $run == f32_1thread ]] && threads=1
    OMP_NUM_THREADS=$threads build/patchbay train configs/quickstart.toml "${common[@]}" \
      --set model.seed="$s" --set train.precision=\""$precision"\" \
      --set train.out_dir=\""$PATCHBAY_CURVES_DIR/seed$s-$run"\" | tail -1
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${seeds[@]}" <<'PY'
import json, os, statistics, sys
root = os.environ["PATCHBAY_CURVES_DIR"]
seeds = sys.argv[1:]
def val(run):
    out = {}
    for line in open(os.path.join(root, run, "metrics.jsonl")):
        r = json.loads(line)
        if "val_loss" in r: out[r["step"]] = r["val_loss"]
    return out
runs = {(s, k): val(f"seed{s}-{k}") for s in seeds for k in ("f32", "bf16", "f32_1thread")}
steps = sorted(runs[(seeds[0], "f32")])
rel = lambda a, b: 100.0 * (a - b) / b
print("validation loss at the last step, per seed (difference from f32 on 2 threads):")
print("seed   f32       bf16      (diff)    f32 1 thread (diff)")
for s in seeds:
    f, b, c = (runs[(s, k)][steps[-1]] for k in ("f32", "bf16", "f32_1thread"))
    print(f"{s:>4} {f:9.4f} {b:9.4f} {rel(b, f):+7.2f}% {c:9.4f} {rel(c, f):+7.2f}%")
def spread(kind):
    return statistics.mean(abs(rel(runs[(s, kind)][steps[-1]], runs[(s, 'f32')][steps[-1]])) for s in seeds)
print(f"mean |difference| at step {steps[-1]}: bf16 {spread('bf16'):.2f}%, f32 on 1 thread {spread('f32_1thread'):.2f}%")
print("seed-averaged validation curves:")
print("step   f32 mean  bf16 mean (diff)   f32 1-thread mean (diff)")
for i in steps:
    m = {k: statistics.mean(runs[(s, k)][i] for s in seeds) for k in ("f32", "bf16", "f32_1thread")}
    print(f"{i:>4} {m['f32']:9.4f} {m['bf16']:9.4f} {rel(m['bf16'], m['f32']):+6.2f}% {m['f32_1thread']:9.4f} {rel(m['f32_1thread'], m['f32']):+6.2f}%")
PY
