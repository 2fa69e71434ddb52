#!/usr/bin/env bash
# The prepared device check of issue 34: run it first on the GPU machine, from the repository root.
#   bash scripts/gpu/device_check.sh OUTDIR
# Stages, each under `timeout`, each writing OUTDIR/<nn>-<stage>.log; a table is printed last
# (and saved as OUTDIR/summary.txt):
#   env         what is there: GPU, driver, toolkit, torch, the nvidia-* Python libraries, and what
#               the shipped binaries lack (ldd)
#   binaries    the GPU test and benchmark binaries: the shipped ones (gpu-bundle/, built on the
#               CPU machines by scripts/gpu/bundle.sh) when they load, else built here from
#               scripts/gpu/standalone with this machine's nvcc (about a minute on 16 cores)
#   smoke       a few kernels and a GEMM; when it fails the script stops early
#   kernels     every kernel and gradient against its CPU twin (fresh seed, poisoned outputs)
#   engine_ops  the engine's ops through their CUDA dispatch entries against the CPU kernels,
#               forward and backward (bin/patchbay_device_cuda_*_tests from the bundle): every
#               op incl. gather / scatter_add / sort / topk (bit for bit), causal linear
#               attention, attention with packed segment ids (tiled and general kernels),
#               attention under a bf16 autocast (the bf16 tensor-core kernels), and bad indices
#               (cross-entropy targets, embedding ids, gather / scatter_add) recorded on the
#               device and raised at the next read with the CPU's words
#   parity      CPU-vs-GPU loss per step (quickstart 20 steps, GPT-2 124M shape 3 steps; the
#               quickstart with attention_performer, then with the moe feed-forward, 5 steps each)
#   gpt2_speed  GPT-2 124M bf16 tokens/s and MFU beside a plain PyTorch GPT-2 (torch_gpt2.py,
#               eager; PB_TORCH_COMPILE=1 adds torch.compile)
#   bench       GEMM and attention speed beside torch.matmul and scaled_dot_product_attention,
#               same GPU, same call (attention f32 and bf16, T = 1K, 4K, 16K, D = 64, 128)
#   sanitizer   compute-sanitizer memcheck over the norm, softmax, attention, embedding, gather /
#               scatter-add, sort / top-k, causal linear attention and index check tests
#   racecheck   compute-sanitizer racecheck (shared-memory hazards) over the kernels that share
#               tiles between threads: sort / top-k's bitonic tiles, causal linear attention, the
#               bf16 tensor-core attention (K/V tiles shared by 4 warps, per-warp score slices)
# parity and gpt2_speed run scripts/gpu/parity.sh and scripts/gpu/gpt2_speed.sh (OUTDIR as
# argument) when they exist; until the engine trains on CUDA they report "not available yet".
# Environment: STAGES="env smoke kernels" reruns a subset (in the order above; `binaries` is
# resolved whenever a stage needs it); BUNDLE (default gpu-bundle); TOTAL_BUDGET_S (default 480:
# a stage that would run past it is shortened, or not run when under 20 s remain).
# Exit status: 0 when every stage run passed (or is not available yet), 1 otherwise.
set -uo pipefail

if [ $# -lt 1 ]; then
  echo "usage: bash scripts/gpu/device_check.sh OUTDIR   (STAGES=\"env smoke ...\" for a subset)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
bundle="${BUNDLE:-$root/gpu-bundle}"
all_stages="env binaries smoke kernels engine_ops parity gpt2_speed bench sanitizer racecheck"
stages="${STAGES:-$all_stages}"
budget="${TOTAL_BUDGET_S:-480}"
started=$(date +%s)
export PB_ROOT="$root" PB_OUT="$out" PB_BUNDLE="$bundle"
export PB_BUILD="${PB_BUILD:-/tmp/patchbay-cuda-standalone}"

declare -A timeouts=([env]=60 [binaries]=300 [smoke]=60 [kernels]=240 [engine_ops]=120 [parity]=360
                     [gpt2_speed]=300 [bench]=240 [sanitizer]=150 [racecheck]=90)

# ---- helpers, exported to the stages (each runs in `timeout ... bash -c`) ----

# The lib folders of Python's nvidia-* packages (cuBLAS, cuDNN, NCCL for CUDA 13 live there on
# the GPU machine), then the toolkit's, joined with ':'.
nvidia_library_path() {
  local dirs
  dirs="$(python3 - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
found = set()
for root in roots:
    for pattern in ("libcublasLt.so*", "libcudnn.so*", "libnccl.so*", "libcublas.so*"):
        for path in glob.glob(os.path.join(root, "**", pattern), recursive=True):
            found.add(os.path.dirname(path))
print(":".join(sorted(found)))
EOF
)"
  for extra in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [ -d "$extra" ] && dirs="${dirs:+$dirs:}$extra"
  done
  echo "$dirs"
}
export -f nvidia_library_path

# Runs a binary of ours with the CUDA libraries and the bundle's libraries on the path (never
# exported to python3: torch brings its own).
# The bundle's compressed libraries (bundle.sh xz-compresses those over 4 MiB), unpacked in
# place once, with Python's lzma (the machine may lack the xz tool).
unpack_bundle_libraries() {
  local packed
  for packed in "$PB_BUNDLE"/lib/*.xz; do
    [ -f "$packed" ] || continue
    python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[1][:-3], "wb") as dst: shutil.copyfileobj(src, dst)' \
      "$packed" && rm -f "$packed"
  done
}
unpack_bundle_libraries

with_libraries() {
  local extra="" 
  [ -d "$PB_BUNDLE/lib" ] && extra="$PB_BUNDLE/lib"
  LD_LIBRARY_PATH="$(nvidia_library_path)${extra:+:$extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}
export -f with_libraries

# Prints the folder holding cuda_kernels_gpu_tests and cuda_kernels_bench that run here.
binaries_folder() {
  cat "$PB_OUT/.binaries" 2>/dev/null
}
export -f binaries_folder

# ---- stages ----

stage_env() {
  echo "== date"; date -u
  echo "== git"; git -C "$PB_ROOT" log -1 --format='%H %s' 2>/dev/null || echo "(no git)"
  echo "== nvidia-smi"; nvidia-smi || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv || true
  echo "== toolkit"; nvcc --version 2>&1 | tail -2 || echo "no nvcc"
  cmake --version | head -1 || echo "no cmake"; ninja --version || echo "no ninja"
  g++ --version | head -1 || echo "no g++"; ldd --version | head -1
  command -v compute-sanitizer || echo "no compute-sanitizer"
  echo "== python"; python3 - <<'EOF'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
EOF
  pip list 2>/dev/null | grep -i -E "^nvidia|^torch" || true
  echo "== CUDA library path for our binaries"; nvidia_library_path | tr ':' '\n'
  echo "== bundle"; if [ -d "$PB_BUNDLE" ]; then du -sh "$PB_BUNDLE"; cat "$PB_BUNDLE/MANIFEST.txt" 2>/dev/null | head -40
  else echo "no bundle at $PB_BUNDLE (binaries will be built here)"; fi
  echo "== ldd of the shipped binaries"
  local missing=0
  for binary in "$PB_BUNDLE"/bin/*; do
    [ -f "$binary" ] || continue
    echo "-- $binary"; with_libraries ldd "$binary" 2>&1
    with_libraries ldd "$binary" 2>&1 | grep -q "not found" && missing=1
  done
  [ "$missing" = 1 ] && echo "SOME LIBRARIES ARE MISSING (above): the binaries stage builds here instead"
  return 0
}

stage_binaries() {
  local shipped="$PB_BUNDLE/bin"
  if [ -x "$shipped/cuda_kernels_gpu_tests" ] && [ -x "$shipped/cuda_kernels_bench" ] &&
     with_libraries "$shipped/cuda_kernels_gpu_tests" --list >/dev/null 2>&1; then
    echo "the shipped binaries load: $shipped"
    echo "$shipped" > "$PB_OUT/.binaries"
    return 0
  fi
  echo "the shipped binaries are missing or do not load here; building scripts/gpu/standalone"
  [ -x "$shipped/cuda_kernels_gpu_tests" ] && with_libraries "$shipped/cuda_kernels_gpu_tests" --list 2>&1 | head -5
  local generator=() cublas_dir="" dir
  command -v ninja >/dev/null && generator=(-G Ninja)
  # cuBLASLt from Python's nvidia-cublas when the toolkit has none (its lib folder).
  for dir in $(nvidia_library_path | tr ':' ' '); do
    if ls "$dir"/libcublasLt.so* >/dev/null 2>&1 && [ -f "$dir/../include/cublasLt.h" ]; then
      cublas_dir="$dir"; break
    fi
  done
  if [ ! -f /usr/local/cuda/include/cublasLt.h ] && [ -n "$cublas_dir" ]; then
    echo "cuBLASLt from $cublas_dir"
  else
    cublas_dir=""
  fi
  cmake -S "$PB_ROOT/scripts/gpu/standalone" -B "$PB_BUILD" "${generator[@]}" \
        -DCMAKE_BUILD_TYPE=Release ${cublas_dir:+-DPATCHBAY_CUBLASLT_DIR="$cublas_dir"} || return 1
  cmake --build "$PB_BUILD" -j "$(nproc)" --target cuda_kernels_gpu_tests cuda_kernels_bench || return 1
  mkdir -p "$PB_BUILD/bin"
  cp "$PB_BUILD/tests_cuda/cuda_kernels_gpu_tests" "$PB_BUILD/kernels_cuda/cuda_kernels_bench" "$PB_BUILD/bin/"
  echo "$PB_BUILD/bin" > "$PB_OUT/.binaries"
  echo "built: $PB_BUILD/bin"
}

stage_smoke() {
  local bin; bin="$(binaries_folder)" || return 1
  with_libraries "$bin/cuda_kernels_gpu_tests" --filter elementwise_add &&
    with_libraries "$bin/cuda_kernels_gpu_tests" --filter gemm_f32 &&
    with_libraries "$bin/cuda_kernels_gpu_tests" --filter layer_norm
}

stage_kernels() {
  local bin; bin="$(binaries_folder)" || return 1
  with_libraries "$bin/cuda_kernels_gpu_tests"
}

# The engine's CUDA dispatch entries: built on the CPU machines only (they link the whole
# engine), so they come from the bundle or not at all.
stage_engine_ops() {
  local status=0 found=0 test
  for test in patchbay_device_cuda_backend_tests patchbay_device_cuda_ops_tests; do
    [ -x "$PB_BUNDLE/bin/$test" ] || continue
    found=1
    echo "== $test"
    with_libraries "$PB_BUNDLE/bin/$test" || status=1
  done
  if [ "$found" = 0 ]; then
    echo "not available: the bundle has no engine test binaries (bash scripts/gpu/bundle.sh)"
    return 78
  fi
  return $status
}

# parity and gpt2_speed: the engine side's scripts when present.
engine_stage() {
  local script="$PB_ROOT/scripts/gpu/$1.sh"
  if [ -f "$script" ]; then
    bash "$script" "$PB_OUT/$1"
  else
    echo "not available yet: the engine does not train on CUDA in this build ($script is absent)"
    return 78
  fi
}
# The quickstart as configured (dense attention), then with attention_performer and with the moe
# feed-forward (5 steps each: the plugins' device paths of issue 34; moe's fixed-capacity
# dispatch is not bit-identical to the host plan even on a CPU, so its bound is the same f32 drift).
stage_parity() {
  engine_stage parity
  local status=$?
  [ "$status" = 78 ] && return 78
  echo "== performer attention (PARITY_SET)"
  PARITY_STEPS=5 PARITY_SET='model.attention.kind="performer"' \
    bash "$PB_ROOT/scripts/gpu/parity.sh" "$PB_OUT/parity_performer" || status=1
  echo "== moe feed-forward, top-2 of 8 experts (PARITY_SET)"
  PARITY_STEPS=5 PARITY_SET='model.feedforward.kind="moe"' \
    bash "$PB_ROOT/scripts/gpu/parity.sh" "$PB_OUT/parity_moe" || status=1
  return $status
}
# The PyTorch half (a plain GPT-2 124M, bf16, batch 8 x 1024, random tokens) runs in any case,
# so every visit records the bar; PB_TORCH_COMPILE=1 adds torch.compile (a minute or two more).
stage_gpt2_speed() {
  echo "== torch GPT-2 124M, same GPU"
  local compile=""; [ "${PB_TORCH_COMPILE:-0}" = 1 ] && compile="--compile"
  python3 "$PB_ROOT/scripts/gpu/torch_gpt2.py" $compile | tee "$PB_OUT/gpt2_torch.jsonl"
  local torch_status=${PIPESTATUS[0]}
  echo "== patchbay GPT-2 124M"
  engine_stage gpt2_speed
  local engine_status=$?
  if [ "$torch_status" != 0 ]; then return 1; fi
  return $engine_status
}

stage_bench() {
  local bin; bin="$(binaries_folder)" || return 1
  local quick=""; [ "${PB_STAGE_TIMEOUT:-240}" -lt 150 ] && quick="--quick"
  echo "== patchbay kernels/cuda ($quick)"
  with_libraries "$bin/cuda_kernels_bench" $quick | tee "$PB_OUT/bench_patchbay.jsonl"
  local ours=${PIPESTATUS[0]}
  echo "== torch, same GPU, same call"
  python3 "$PB_ROOT/scripts/gpu/torch_bench.py" $quick | tee "$PB_OUT/bench_torch.jsonl"
  local theirs=${PIPESTATUS[0]}
  echo "== side by side"
  python3 "$PB_ROOT/scripts/gpu/compare_bench.py" "$PB_OUT/bench_patchbay.jsonl" \
          "$PB_OUT/bench_torch.jsonl" | tee "$PB_OUT/bench_table.txt"
  [ "$ours" = 0 ] && [ "$theirs" = 0 ]
}

stage_sanitizer() {
  local bin; bin="$(binaries_folder)" || return 1
  if ! command -v compute-sanitizer >/dev/null; then echo "no compute-sanitizer on PATH"; return 77; fi
  local filter status=0
  for filter in layer_norm softmax_forward causal_attention embedding gather_scatter \
                sort_and_topk selection_backward causal_linear_attention index_check; do
    with_libraries compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$bin/cuda_kernels_gpu_tests" --filter "$filter" || status=1
  done
  return $status
}

# Shared-memory races in the kernels whose threads exchange tiles through shared memory.
stage_racecheck() {
  local bin; bin="$(binaries_folder)" || return 1
  if ! command -v compute-sanitizer >/dev/null; then echo "no compute-sanitizer on PATH"; return 77; fi
  local filter status=0
  for filter in sort_tiles causal_linear_attention attention_bf16_race_small; do
    with_libraries compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 \
        "$bin/cuda_kernels_gpu_tests" --filter "$filter" || status=1
  done
  return $status
}
export -f stage_env stage_binaries stage_smoke stage_kernels stage_engine_ops engine_stage stage_parity \
          stage_gpt2_speed stage_bench stage_sanitizer stage_racecheck

# ---- driver ----

declare -A status_of seconds_of
order=()
number=0
stop_reason=""
needs_binaries() { case "$1" in smoke | kernels | bench | sanitizer | racecheck) return 0 ;; esac; return 1; }

run_stage() {  # name
  local name="$1"
  number=$((number + 1))
  local log; log="$out/$(printf '%02d' "$number")-$name.log"
  order+=("$name")
  if [ -n "$stop_reason" ]; then
    status_of[$name]="NOT RUN ($stop_reason)"; seconds_of[$name]=0; return
  fi
  local elapsed=$(( $(date +%s) - started ))
  local limit=${timeouts[$name]}
  local left=$(( budget - elapsed ))
  if [ "$left" -lt 20 ]; then
    status_of[$name]="NOT RUN (time budget)"; seconds_of[$name]=0; return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo ">>> stage $name (timeout ${limit}s) -> $log"
  local t0; t0=$(date +%s)
  PB_STAGE_TIMEOUT=$limit timeout --kill-after=10 "$limit" bash -c "stage_$name" >"$log" 2>&1
  local rc=$?
  seconds_of[$name]=$(( $(date +%s) - t0 ))
  case $rc in
    0) status_of[$name]="PASS" ;;
    77) status_of[$name]="SKIP" ;;
    78) status_of[$name]="NOT AVAILABLE YET" ;;
    124 | 137) status_of[$name]="TIMEOUT" ;;
    *) status_of[$name]="FAIL (exit $rc)" ;;
  esac
  tail -n 3 "$log" | sed 's/^/    /'
}

rm -f "$out/.binaries"
for stage in $all_stages; do
  case " $stages " in *" $stage "*) ;; *) continue ;; esac
  if [ "$stage" = binaries ] || needs_binaries "$stage"; then
    if [ -z "${status_of[binaries]:-}" ]; then
      run_stage binaries
      [ "${status_of[binaries]}" = PASS ] || stop_reason="no binaries"
    fi
    [ "$stage" = binaries ] && continue
  fi
  run_stage "$stage"
  if [ "$stage" = smoke ] && [ "${status_of[smoke]}" != PASS ]; then
    stop_reason="smoke: ${status_of[smoke]}"
  fi
done

{
  echo
  echo "device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  printf '%-12s %-34s %8s  %s\n' stage status seconds log
  number=0
  for name in "${order[@]}"; do
    number=$((number + 1))
    printf '%-12s %-34s %8s  %s\n' "$name" "${status_of[$name]}" "${seconds_of[$name]}" \
           "$(printf '%02d' "$number")-$name.log"
  done
  echo "total $(( $(date +%s) - started )) s; logs in $out"
} | tee "$out/summary.txt"

for name in "${order[@]}"; do
  case "${status_of[$name]}" in PASS | SKIP | "NOT AVAILABLE YET") ;; *) exit 1 ;; esac
done
exit 0
