#!/usr/bin/env bash
# Configures and builds Patchbay into build/ (Release, Ninja), in three named steps:
#   setup      scripts/setup.sh installs the Debian packages that are missing
#   configure  cmake, whenever the build folder has no usable build files: no cache, or a
#              cache without the generator's build file (a configure that failed or was
#              interrupted leaves CMakeCache.txt but no build.ninja). A configure that fails
#              on an existing cache is retried once from an empty cache, so a stale or broken
#              cache heals itself too. Output: <build>/configure.log.
#   build      cmake --build (ninja re-runs cmake by itself when a CMakeLists.txt changed)
# A failing step stops the script with a message naming the step and what to do.
# Environment: PATCHBAY_BUILD_DIR (default build/), PATCHBAY_BUILD_TARGETS (space-separated
# targets to build instead of all; the fresh-root check uses it), PATCHBAY_BUILD_JOBS
# (default nproc). When ccache is on PATH it becomes the compiler launcher of a new
# configure (an optional speed-up; nothing needs it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PATCHBAY_BUILD_DIR:-$root/build}"
jobs="${PATCHBAY_BUILD_JOBS:-$(nproc)}"

fail() {  # step, what to do
  echo "patchbay: step '$1' failed. $2" >&2
  exit 1
}

bash "$root/scripts/setup.sh" ||
  fail setup "scripts/setup.sh could not install the packages above (it needs root or sudo and \
Debian 12's apt sources). Fix that, then run this command again."

# The build file the cache's generator writes last; empty when there is no cache.
generator_file() {
  local generator
  generator="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)"
  case "$generator" in
    Ninja | "Ninja Multi-Config") echo build.ninja ;;
    *Makefiles) echo Makefile ;;
    "") echo "" ;;
    *) echo "CMakeCache.txt" ;;  # another generator: trust its cache
  esac
}

configure() {
  local args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release)
  [ -f "$build/CMakeCache.txt" ] || args+=(-G Ninja)
  if command -v ccache >/dev/null && ! grep -q '^CMAKE_CXX_COMPILER_LAUNCHER' "$build/CMakeCache.txt" 2>/dev/null; then
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  mkdir -p "$build"
  cmake "${args[@]}" >"$build/configure.log" 2>&1
}

usable="$(generator_file)"
if [ -z "$usable" ] || [ ! -f "$build/$usable" ]; then
  if [ -n "$usable" ]; then
    echo "patchbay: $build has a CMake cache but no $usable (an earlier configure failed or was interrupted); configuring again"
  fi
  had_cache=0
  [ -f "$build/CMakeCache.txt" ] && had_cache=1
  if ! configure; then
    if [ "$had_cache" = 1 ]; then
      echo "patchbay: configure failed on the existing cache; retrying from an empty cache"
      rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
      configure || true
    fi
    usable="$(generator_file)"
    if [ -z "$usable" ] || [ ! -f "$build/$usable" ]; then
      tail -n 25 "$build/configure.log" >&2
      fail configure "cmake could not configure $build (last lines above; full log: \
$build/configure.log). A 'Could NOT find' line names a missing package: add it to \
scripts/setup.sh's list (or install it), then run this command again; the next run configures \
again by itself."
    fi
  fi
fi

# shellcheck disable=SC2086  # PATCHBAY_BUILD_TARGETS is a word list on purpose
targets=()
for t in ${PATCHBAY_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j"$jobs" "${targets[@]}" ||
  fail build "the compiler or linker stopped (errors above). Run this command again after \
fixing them; to start the build folder from scratch, delete $build."
