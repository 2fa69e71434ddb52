#!/usr/bin/env bash
# Packs into one git-ignored folder (default gpu-bundle/, at most 64 MiB: what the `run` tool
# carries to the GPU machine) the build outputs that machine lacks:
#   bin/cuda_kernels_gpu_tests, bin/cuda_kernels_bench   the kernels/cuda GPU tests and benchmark
#   bin/patchbay_device_cuda_*_tests                     the engine's CUDA backend and op entries
#   bin/patchbay, plugins/*.so                           the CLI and plugins, rebuilt here (the
#                                                        engine's CUDA path; parallel_mpi left out)
#   lib/                                                 the shared libraries they load that are
#                                                        not glibc's nor CUDA's (ldd): oneDNN,
#                                                        Boost, spdlog, ... (Debian 12's); those
#                                                        over 4 MiB xz-compressed (*.xz)
#   MANIFEST.txt                                         commit, build flags, sizes, ldd output
# Never shipped: cuBLAS, cuDNN, NCCL, cudart (the GPU machine has them in Python's nvidia-*
# packages; cudart is linked statically). The working tree (configs, scripts) travels anyway.
#   bash scripts/gpu/bundle.sh [OUTDIR]
# Environment: PATCHBAY_BUILD_DIR (default build/; configured and built here if needed),
# BUNDLE_ENGINE=0 to leave out the CLI and plugins.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${PATCHBAY_BUILD_DIR:-$root/build}"
bundle="${1:-$root/gpu-bundle}"
limit_bytes=$((64 * 1024 * 1024))

fail() {
  echo "bundle: $*" >&2
  exit 1
}

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "bundle: no build at $build; configuring (scripts/build.sh builds everything; here only the GPU targets)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null ||
    fail "cmake could not configure $build"
fi
grep -q '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" ||
  fail "$build was configured without CUDA (no nvcc found?); configure with -DPATCHBAY_CUDA=ON"
cmake --build "$build" --target cuda_kernels_gpu_tests cuda_kernels_bench \
  patchbay_device_cuda_backend_tests patchbay_device_cuda_ops_tests ||
  fail "building the GPU test targets failed (errors above)"
# The CLI and the plugins the parity and speed stages load, rebuilt so that a stale binary from
# an earlier build is never shipped (the bundle's engine must be this commit's).
if [ "${BUNDLE_ENGINE:-1}" = 1 ]; then
  cmake --build "$build" --target patchbay tokenizer_char tokenizer_bpe attention_dense ffn_mlp \
    optimizers_basic attention_linear attention_performer ffn_moe ||
    fail "building the CLI and plugins failed (errors above); BUNDLE_ENGINE=0 ships the tests only"
fi

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/tests/cuda/cuda_kernels_gpu_tests" "$build/kernels/cuda/cuda_kernels_bench" "$bundle/bin/"
cp "$build/tests/device/patchbay_device_cuda_backend_tests" \
   "$build/tests/device/patchbay_device_cuda_ops_tests" "$bundle/bin/"

# The CLI sits at the build folder's top (older layouts: core/cli/).
cli=""
for candidate in "$build/patchbay" "$build/core/cli/patchbay"; do
  [ -x "$candidate" ] && [ -f "$candidate" ] && { cli="$candidate"; break; }
done
if [ "${BUNDLE_ENGINE:-1}" = 1 ] && [ -n "$cli" ]; then
  cp "$cli" "$bundle/bin/"
  mkdir -p "$bundle/plugins"
  for plugin in "$build"/plugins-out/*.so; do
    [ -f "$plugin" ] || continue
    case "$(basename "$plugin")" in parallel_mpi.so) continue ;; esac  # MPI: not on one GPU
    cp "$plugin" "$bundle/plugins/"
  done
fi
# Symbols are not needed there (a crash is reported by the test's own message): the whole
# bundle must fit the run tool's 64 MiB.
strip --strip-unneeded "$bundle"/bin/* "$bundle"/plugins/*.so 2>/dev/null || true

# Libraries the GPU machine is assumed to have: glibc's, the C++ runtime (newer there, and the one
# torch loads) and CUDA's.
is_provided() {
  case "$1" in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
      libresolv.so* | libutil.so* | libstdc++.so* | libgcc_s.so* | libcuda.so* | libcudart* | libcublas* | libcudnn* | \
      libnccl* | libnvrtc* | libnvJitLink* | libcufft* | libcurand* | libcusparse* | libcusolver*)
      return 0 ;;
  esac
  return 1
}

elves=("$bundle"/bin/*)
[ -d "$bundle/plugins" ] && elves+=("$bundle"/plugins/*.so)
for elf in "${elves[@]}"; do
  [ -f "$elf" ] || continue
  while read -r name _ path _; do
    [ -n "${path:-}" ] && [ -f "$path" ] || continue
    is_provided "$name" && continue
    [ -f "$bundle/lib/$name" ] || cp -L "$path" "$bundle/lib/$name"
  done < <(ldd "$elf" | grep '=> /')
done
# Plugins are found through the bundle's plugins/ folder (PATCHBAY_PLUGIN_PATH), not the lib path.
strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null || true

{
  echo "Patchbay GPU bundle, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit $(git -C "$root" rev-parse HEAD 2>/dev/null)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  grep -E '^(CMAKE_CUDA_ARCHITECTURES|CMAKE_BUILD_TYPE|CMAKE_CUDA_COMPILER):' "$build/CMakeCache.txt"
  echo "glibc needed (newest symbol version): $(objdump -T "$bundle"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  echo
  du -ab "$bundle" | sort -n | tail -40
  echo
  for elf in "${elves[@]}"; do [ -f "$elf" ] && { echo "-- ldd $elf"; ldd "$elf"; }; done
} >"$bundle/MANIFEST.txt"

# Libraries over 4 MiB (oneDNN's 40) travel xz-compressed: device_check.sh unpacks lib/*.xz
# with Python's lzma before the first binary runs (the GPU machine may lack the xz tool).
for library in "$bundle"/lib/*; do
  [ -f "$library" ] && [ "$(stat -c %s "$library")" -gt $((4 * 1024 * 1024)) ] || continue
  xz -T0 -6 "$library"
done

size=$(du -sb "$bundle" | cut -f1)
echo "bundle: $bundle, $((size / 1024 / 1024)) MiB ($(ls "$bundle/bin" | tr '\n' ' '); $(ls "$bundle/lib" | wc -l) libraries)"
if [ "$size" -gt "$limit_bytes" ]; then
  fail "the bundle is $((size / 1024 / 1024)) MiB, over the 64 MiB the GPU machine is given; \
run with BUNDLE_ENGINE=0 (kernel tests only), or leave out plugins the check does not use"
fi
echo "carry it with the run tool: carry [\"$(realpath --relative-to="$root" "$bundle")\"]"
