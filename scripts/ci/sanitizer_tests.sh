#!/usr/bin/env bash
# The sanitizer stage of CI (issue 39): the tests of every parser of untrusted input, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (GCC) in their own build folder (build-asan/),
# then the libFuzzer targets for a bounded time each (scripts/fuzz.sh, clang).
#
# Bounded subset: the full suite under ASan would rebuild oneDNN-backed engine code and run
# every training test several times slower; the targets below are the readers of files and
# text a user hands Patchbay (safetensors, metrics, run directories, config loading and
# validation, GBNF/regex grammars, tokenizer files). Environment: PATCHBAY_ASAN_BUILD_DIR
# (default build-asan/), PATCHBAY_FUZZ_SECONDS (default 25 per target).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${PATCHBAY_ASAN_BUILD_DIR:-$root/build-asan}"
targets=(run_tests config_tests sampler_grammar_test tokenizer_bpe_algorithm_test
         tokenizer_char_algorithm_test tokenizer_bpe_published_test)
# -Wno-maybe-uninitialized: with ASan, GCC 12 reports false maybe-uninitialized warnings inside
# libstdc++'s <regex> (the grammar tests' oracle); warnings stay errors otherwise.
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wno-maybe-uninitialized"

bash "$root/scripts/setup.sh"
start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >"$build/configure.log" 2>&1 ||
    { tail -30 "$build/configure.log" >&2; echo "patchbay sanitizers: configure failed" >&2; exit 1; }
fi
cmake --build "$build" --target "${targets[@]}"
built=$(date +%s)
regex="^($(IFS='|'; echo "${targets[*]}"))\$"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$build" && OMP_NUM_THREADS=1 ctest --output-on-failure -R "$regex")
tested=$(date +%s)
echo "patchbay sanitizers: build $((built - start)) s, tests $((tested - built)) s"

bash "$root/scripts/fuzz.sh" "${PATCHBAY_FUZZ_SECONDS:-25}"
echo "patchbay sanitizers: fuzzing $(( $(date +%s) - tested )) s"
