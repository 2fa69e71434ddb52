#!/usr/bin/env bash
# Runs inside the fresh Debian 12 root that scripts/ci/fresh_root_check.sh creates (as root,
# sources in /src, nothing installed beyond debootstrap's minbase). Steps, each timed:
#   setup      bash scripts/setup.sh — the README's install step, alone
#   heal       the failure a new user met, replayed: the OpenCL library hidden, scripts/build.sh
#              must fail at its 'configure' step and leave CMakeCache.txt without build.ninja;
#              with the library back, the next scripts/build.sh must configure again by itself
#   build      that next scripts/build.sh: configures and builds the SDK header check, the char
#              tokenizer plugin and the CLI (PATCHBAY_BUILD_TARGETS)
#   smoke      the CLI runs and lists the plugin's component
# A failing step prints "fresh-root inside: FAILED at step '<name>'" and exits non-zero.
set -euo pipefail
cd /src
export DEBIAN_FRONTEND=noninteractive

step_start=$(date +%s)
step_done() {
  local now
  now=$(date +%s)
  echo "fresh-root inside: step '$1' passed in $((now - step_start)) s"
  step_start=$now
}
fail() {
  echo "fresh-root inside: FAILED at step '$1': $2"
  exit 1
}

bash scripts/setup.sh || fail setup "scripts/setup.sh failed on a fresh root"
step_done setup

# Optional compiler cache for repeat runs (see fresh_root_check.sh); after setup.sh, so setup
# ran on the bare root. It provides no header or library the build could find.
if [ "${PATCHBAY_FRESH_ROOT_CCACHE:-0}" = 1 ]; then
  apt-get install -y -qq --no-install-recommends ccache >/dev/null || fail ccache "apt-get install ccache failed"
  export CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=5G
  step_done ccache
fi

targets="patchbay_sdk_header_check tokenizer_char patchbay"
dpkg-query -W -f='${Status}' ocl-icd-opencl-dev 2>/dev/null | grep -q "install ok installed" ||
  fail setup "scripts/setup.sh did not install ocl-icd-opencl-dev, which oneDNN's CMake package needs (find_package(OpenCL REQUIRED))"
opencl="$(dpkg -L ocl-icd-opencl-dev | grep '/libOpenCL\.so$' | head -n 1)"
[ -n "$opencl" ] || fail heal "ocl-icd-opencl-dev has no libOpenCL.so to hide"
mv "$opencl" "$opencl.hidden"
if PATCHBAY_BUILD_TARGETS="$targets" bash scripts/build.sh >/tmp/heal.log 2>&1; then
  mv "$opencl.hidden" "$opencl"
  fail heal "scripts/build.sh succeeded without the OpenCL library; the replay proves nothing"
fi
mv "$opencl.hidden" "$opencl"
cat /tmp/heal.log
grep -q "step 'configure' failed" /tmp/heal.log || fail heal "build.sh did not name the failing step 'configure'"
if [ ! -f build/CMakeCache.txt ] || [ -f build/build.ninja ]; then
  fail heal "the failed configure did not leave CMakeCache.txt without build.ninja"
fi
step_done heal

status=0
PATCHBAY_BUILD_TARGETS="$targets" bash scripts/build.sh >/tmp/build.log 2>&1 || status=$?
grep -v '^\[[0-9]*/[0-9]*\] ' /tmp/build.log || true  # all but ninja's progress lines
[ "$status" -eq 0 ] || { tail -n 30 /tmp/build.log; fail build "scripts/build.sh failed"; }
grep -q "configuring again" /tmp/build.log || fail build "build.sh did not notice the missing build.ninja"
tail -n 1 /tmp/build.log
step_done build

build/patchbay --plugin-path build/plugins-out plugins list | tee /tmp/plugins.txt
grep -qw "char" /tmp/plugins.txt || fail smoke "the CLI does not list the char tokenizer"
step_done smoke
