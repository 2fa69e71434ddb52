#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang-14, ASan + UBSan, in build-fuzz/) and runs
# each one: first over its regression inputs (tests/fuzz/regressions/<target>/, every crash
# found so far: each must now pass), then fuzzing for SECONDS from its seed corpus
# (tests/fuzz/corpus/<target>/, read only; new inputs go to a scratch folder).
#   bash scripts/fuzz.sh            # 600 s per target (a long local run)
#   bash scripts/fuzz.sh 25         # CI: 25 s per target
#   bash scripts/fuzz.sh 60 fuzz_gbnf fuzz_regex   # some targets only
# A crash stops the script with exit 1; libFuzzer leaves the input as crash-* in the scratch
# folder (printed): minimise it (-minimize_crash=1), fix the bug, add the input under
# regressions/<target>/. Environment: PATCHBAY_FUZZ_BUILD_DIR (default build-fuzz/).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-600}"
shift || true
build="${PATCHBAY_FUZZ_BUILD_DIR:-$root/build-fuzz}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors fuzz_config fuzz_gbnf fuzz_regex fuzz_plugin_metadata
                                     fuzz_tokenizer_files fuzz_metrics_jsonl fuzz_gguf fuzz_task_files fuzz_chat_template)

bash "$root/scripts/setup.sh"
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; echo "patchbay fuzz: configure failed" >&2; exit 1; }
fi
cmake --build "$build" --target "${targets[@]}"

scratch="$(mktemp -d "${TMPDIR:-/tmp}/patchbay_fuzz.XXXXXX")"
# UBSan findings abort (-fno-sanitize-recover); leaks are reported by ASan at exit.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
for target in "${targets[@]}"; do
  corpus="$root/tests/fuzz/corpus/$target"
  regressions="$root/tests/fuzz/regressions/$target"
  work="$scratch/$target"
  mkdir -p "$work/new" "$work/artifacts"
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    "$build/$target" -runs=1 "$regressions"/* >"$work/regressions.log" 2>&1 ||
      { tail -40 "$work/regressions.log" >&2; echo "patchbay fuzz: $target fails a regression input" >&2; exit 1; }
  fi
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: an input using 2 GB is a bug.
  if ! "$build/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/new" "$corpus" >"$work/fuzz.log" 2>&1; then
    tail -60 "$work/fuzz.log" >&2
    echo "patchbay fuzz: $target found a crash; inputs in $work/artifacts" >&2
    exit 1
  fi
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")"
  echo "patchbay fuzz: $target: ${runs:-?} executions in ${seconds} s, no crash"
done
rm -rf "$scratch"
