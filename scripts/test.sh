#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the whole suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
build="${PATCHBAY_BUILD_DIR:-$root/build}"
cd "$build"
# ctest runs nproc tests at once; one OpenMP thread each keeps them from oversubscribing the
# cores (spinning OpenMP threads made tiny-model tests ~10x slower on a busy 2-core machine).
# Tests that check thread-count independence set their own thread counts.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
ctest --output-on-failure -j"$(nproc)" "$@"
