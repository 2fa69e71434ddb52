#!/usr/bin/env bash
# CPU-vs-GPU training parity (issue 34), the device check's `parity` stage:
#   bash scripts/gpu/parity.sh OUTDIR
# Trains the quickstart model (configs/quickstart.toml: 4 layers, d 128, 4 heads of 32, learned
# positions, dense attention, GELU MLP, AdamW, clipping at 1.0) for PARITY_STEPS steps (default
# 20) on the CPU and on cuda:0 from the same seed, on a corpus made from this repository's
# documentation (the GPU machine has no network and no Debian corpus), then compares the loss
# of every step. Both runs start from the same weights and batches, so step 1's loss may differ
# only by summation order (relative 1e-4 allowed); later steps drift through f32 rounding in
# the updates (relative 2e-2 allowed by step 20). Writes OUTDIR/parity.txt (the table) and
# exits 1 when a bound is exceeded.
# Environment: PB_BUNDLE (the bundle with bin/patchbay and plugins/; set by device_check.sh),
# PARITY_STEPS, PATCHBAY (a patchbay binary to use instead of the bundle's), PARITY_DEVICES
# (default "cpu cuda": the reference, then the device compared; "cpu cpu" dry-runs the script on
# a machine without a GPU), PARITY_SET (extra --set overrides for both runs, separated by
# spaces, e.g. 'model.attention.kind="performer"': the same comparison for another component).
set -uo pipefail

out="$(mkdir -p "${1:?usage: parity.sh OUTDIR}" && cd "$1" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="${PB_BUNDLE:-$root/gpu-bundle}"
patchbay="${PATCHBAY:-$bundle/bin/patchbay}"
steps="${PARITY_STEPS:-20}"
if [ ! -x "$patchbay" ]; then
  echo "parity: no patchbay binary at $patchbay (bash scripts/gpu/bundle.sh ships one)" >&2
  exit 1
fi
export PATCHBAY_PLUGIN_PATH="$bundle/plugins${PATCHBAY_PLUGIN_PATH:+:$PATCHBAY_PLUGIN_PATH}"
run_patchbay() {
  if declare -F with_libraries >/dev/null; then with_libraries "$patchbay" "$@"; else "$patchbay" "$@"; fi
}

corpus="$out/corpus.txt"
cat "$root"/docs/*.md "$root"/README.md > "$corpus"

read -r -a devices <<< "${PARITY_DEVICES:-cpu cuda}"
extra=()
for override in ${PARITY_SET:-}; do extra+=(--set "$override"); done
for index in 0 1; do
  device="${devices[$index]}"
  echo "== $device: $steps steps"
  run_patchbay train "$root/configs/quickstart.toml" --device "$device" --no-progress --overwrite \
    --set "data.corpus=\"$corpus\"" --set "data.output_dir=\"$out/data\"" \
    --set "run.name=\"parity_$index\"" --set "train.out_dir=\"$out/run_$index\"" \
    --set "train.max_steps=$steps" --set train.log_every=1 --set train.eval_every=0 \
    --set train.checkpoint_every=0 --set train.sample_tokens=0 --set train.warmup_steps=0 \
    "${extra[@]}" > "$out/train_$index.log" 2>&1
  status=$?
  tail -3 "$out/train_$index.log"
  if [ "$status" != 0 ]; then
    echo "parity: training on $device failed (exit $status); see $out/train_$index.log" >&2
    exit 1
  fi
done

python3 - "$out/run_0/metrics.jsonl" "$out/run_1/metrics.jsonl" "$steps" "${devices[0]}" "${devices[1]}" <<'EOF' | tee "$out/parity.txt"
import json, sys
def losses(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return {r["step"]: r for r in rows if "loss" in r and "step" in r}
cpu, gpu, steps = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3])
ref, dev = sys.argv[4], sys.argv[5]
failed = False
print(f"{'step':>5} {ref + ' loss':>12} {dev + ' loss':>12} {'rel diff':>10} {'bound':>8}  {dev} tok/s")
for step in sorted(cpu):
    if step not in gpu:
        print(f"{step:>5} missing on {dev}"); failed = True; continue
    c, g = cpu[step]["loss"], gpu[step]["loss"]
    rel = abs(g - c) / max(abs(c), 1e-12)
    bound = 1e-4 if step == 1 else 2e-2 * min(step, steps) / steps + 1e-4
    ok = rel <= bound
    failed |= not ok
    print(f"{step:>5} {c:12.6f} {g:12.6f} {rel:10.2e} {bound:8.1e}  "
          f"{gpu[step].get('tokens_per_second', 0):.0f}{'' if ok else '  <-- over'}")
print("parity:", "FAILED" if failed else "ok")
sys.exit(1 if failed else 0)
EOF
