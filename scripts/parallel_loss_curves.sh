#!/usr/bin/env bash
# 100 quickstart steps in one process, then on 2 MPI ranks with each parallelism strategy
# (mpi_data, mpi_zero1, mpi_tensor), and the loss curves side by side (docs/BENCHMARKS.md).
# Not part of CI; needs a build (build/patchbay) and Open MPI (scripts/setup.sh installs it).
#   bash scripts/parallel_loss_curves.sh [STRATEGY ...]      # default: all three
# Runs go to $PATCHBAY_CURVES_DIR (default /tmp/patchbay_curves).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATCHBAY_CURVES_DIR="${PATCHBAY_CURVES_DIR:-/tmp/patchbay_curves}"
strategies=("$@")
[[ ${#strategies[@]} -gt 0 ]] || strategies=(mpi_data mpi_zero1 mpi_tensor)
steps=(--no-progress --overwrite --set train.max_steps=100 --set train.log_every=1
       --set train.eval_every=50 --set train.eval_batches=4 --set train.sample_tokens=0
       --set train.checkpoint_every=50)
# As root in a container Open MPI needs --allow-run-as-root; ranks waiting in a collective
# yield their core (mpi_yield_when_idle) so the rank still computing is not starved.
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1
     --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=1 build/patchbay train configs/quickstart.toml "${steps[@]}" \
  --set train.out_dir=\""$PATCHBAY_CURVES_DIR/single"\" | tail -1
for s in "${strategies[@]}"; do
  "${mpi[@]}" build/patchbay train configs/quickstart.toml "${steps[@]}" \
    --set parallelism.kind=\""$s"\" --set train.out_dir=\""$PATCHBAY_CURVES_DIR/$s"\" | tail -1
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${strategies[@]}" <<'PY'
import json, os, sys
root = os.environ["PATCHBAY_CURVES_DIR"]
def curves(run):
    train, val = {}, {}
    for line in open(os.path.join(root, run, "metrics.jsonl")):
        r = json.loads(line)
        if "val_loss" in r: val[r["step"]] = r["val_loss"]
        elif "loss" in r: train[r["step"]] = r["loss"]
    return train, val
one_train, one_val = curves("single")
for run in sys.argv[1:]:
    train, val = curves(run)
    worst = max(abs(train[i] - one_train[i]) / abs(one_train[i]) for i in one_train)
    print(f"{run}: largest relative train-loss difference from one process {worst:.2e}")
    for i in (1, 10, 20, 50, 75, 100):
        print(f"  step {i:3d}: one process {one_train[i]:.6f}  {run} {train[i]:.6f}")
    for i in sorted(val):
        print(f"  val @{i}: one process {one_val[i]:.6f}  {run} {val[i]:.6f}")
PY
