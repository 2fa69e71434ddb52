#!/usr/bin/env bash
# Installs the Debian 12 packages Patchbay needs, only those missing. Idempotent and quiet
# when everything is present. Needs root (or sudo) only when something must be installed.
# Every package the configure and build need is named here: installs use
# --no-install-recommends, so nothing may rely on a package that another one only recommends.
# scripts/ci/fresh_root_check.sh proves the list complete on a minimal Debian 12 root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libtomlplusplus-dev libdnnl-dev libspdlog-dev doctest-dev
  ocl-icd-opencl-dev      # oneDNN's CMake package calls find_package(OpenCL REQUIRED); libdnnl-dev only recommends it
  nlohmann-json3-dev      # safetensors headers, manifests, metrics (JSON)
  libpcre2-dev            # GPT-2 pre-tokenisation regex (Unicode classes, JIT)
  bible-kjv               # the default corpus
  libnlopt-cxx-dev        # L-BFGS (LD_LBFGS) for the Chinchilla scaling-law fit (patchbay scaling fit)
  libnlopt-dev            # NLopt C headers and library (libnlopt-cxx-dev depends on it; named so setup is explicit)
  gnuplot-nox             # PNG/SVG plots of patchbay compare and patchbay scaling fit
  openmpi-bin             # mpirun for multi-process training (parallel_mpi plugin) and its tests
  libopenmpi-dev          # MPI headers and library the parallel_mpi plugin builds against (CMake FindMPI)
  libyaml-cpp-dev         # lm-evaluation-harness task files (YAML) for patchbay eval --tasks (core/eval)
  zlib1g-dev              # gzip-compressed sources of patchbay data prepare (core/data/input_stream)
  libzstd-dev             # zstd-compressed sources of patchbay data prepare (core/data/input_stream)
  clang-14                # libFuzzer targets of tests/fuzz (scripts/fuzz.sh, CI's sanitizer stage)
  libclang-rt-14-dev      # clang's fuzzer, ASan and UBSan runtimes for those targets
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "patchbay setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "patchbay setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "patchbay setup: done"
