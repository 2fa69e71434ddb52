#!/usr/bin/env bash
# The fresh-machine check .ci/run runs after the test suite: proves that scripts/setup.sh
# names every package the configure and build need, so a machine where packages were once
# installed by hand cannot hide a missing install step.
#
#   1. base     a minimal Debian 12 root (debootstrap --variant=minbase bookworm), cached as
#               a tarball in $PATCHBAY_FRESH_ROOT_CACHE (default /var/cache/patchbay/fresh-root,
#               outside the clone), one per month so security updates reach it
#   2. unpack   the tarball into a scratch folder under /var/tmp, the clone's files in /src
#               (git ls-files: tracked and untracked-but-not-ignored; no build folder)
#   3. inside   chroot (in a private mount namespace: /proc, /dev and the caches mounted there
#               vanish when it ends, and a trap unmounts them as well), scripts/ci/fresh_root_inside.sh:
#               scripts/setup.sh, a replay of a failed configure healing itself, then
#               scripts/build.sh configures and builds the SDK header check, the char
#               tokenizer plugin and the CLI with only what setup installed, and the CLI
#               lists the plugin.
# Downloaded .deb files are kept in the cache too (setup.sh still installs each one), and so
# is a ccache folder: ccache (installed in the root after setup.sh, by this check) only
# caches compiler output, which a missing header or library cannot pass, so it speeds
# repeat runs without hiding anything. PATCHBAY_FRESH_ROOT_CCACHE=0 turns it off;
# PATCHBAY_FRESH_ROOT_CCACHE_DIR picks another cache folder (e.g. the developers' shared one).
#
# Needs: root (chroot, mounts), network access to deb.debian.org, and the Debian packages
# debootstrap (installed here when missing), util-linux (unshare, flock) and coreutils.
# A failure exits non-zero with the log's last lines; the whole log is in
# <build>/fresh-root-check.log. PATCHBAY_FRESH_ROOT_KEEP=1 keeps the scratch root.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${PATCHBAY_FRESH_ROOT_CACHE:-/var/cache/patchbay/fresh-root}"
mirror="${PATCHBAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite=bookworm
build="${PATCHBAY_BUILD_DIR:-$repo/build}"
log="$build/fresh-root-check.log"
ccache_dir="${PATCHBAY_FRESH_ROOT_CCACHE_DIR:-$cache/ccache}"
mkdir -p "$build" "$cache/apt-archives/partial" "$ccache_dir"
: >"$log"

say() { echo "fresh-root: $*" | tee -a "$log"; }
fail() {
  echo "---- last lines of $log ----" >&2
  tail -n 40 "$log" >&2
  echo "fresh-root: FAILED at step '$1'. $2" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail prerequisites "this check needs root (debootstrap, chroot and mounts); \
run it as root or in a CI job that has root."
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >>"$log" 2>&1 ||
    { apt-get update -qq >>"$log" 2>&1 && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends debootstrap >>"$log" 2>&1; } ||
    fail prerequisites "apt-get could not install debootstrap."
fi
for tool in unshare flock chroot tar; do
  command -v "$tool" >/dev/null || fail prerequisites "'$tool' is missing (Debian packages util-linux, coreutils, tar)."
done

# One check at a time per machine: they share the caches.
exec 9>"$cache/lock"
flock 9

started=$(date +%s)
step_start=$started
step_done() {  # name
  local now
  now=$(date +%s)
  say "step '$1' took $((now - step_start)) s"
  step_start=$now
}

# ---- 1. base ----
key="$suite-minbase-$(date +%Y-%m)"
tarball="$cache/$key.tar.gz"
if [ ! -f "$tarball" ]; then
  say "creating the base system $key with debootstrap (cached in $cache)"
  staging="$(mktemp -d /var/tmp/patchbay-debootstrap.XXXXXX)"
  if ! debootstrap --variant=minbase "$suite" "$staging" "$mirror" >>"$log" 2>&1; then
    rm -rf --one-file-system "$staging"
    fail base "debootstrap could not create a $suite root from $mirror."
  fi
  rm -rf "$staging/var/cache/apt/archives/"*.deb
  tar --numeric-owner -C "$staging" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf --one-file-system "$staging"
  find "$cache" -maxdepth 1 -name "$suite-minbase-*.tar.gz" ! -name "$key.tar.gz" -delete
else
  say "using the cached base system $tarball"
fi
step_done base

# ---- 2. unpack ----
scratch="$(mktemp -d /var/tmp/patchbay-fresh-root.XXXXXX)"
root="$scratch/root"
cleanup() {
  # Mounts live in the private namespace of step 3 and end with it; refuse to delete
  # anything that is still a mount point, whatever happened.
  if grep -q " $scratch/" /proc/self/mounts; then
    echo "fresh-root: mounts remain under $scratch; not deleting it" >&2
  elif [ "${PATCHBAY_FRESH_ROOT_KEEP:-0}" = 1 ]; then
    echo "fresh-root: root kept in $root" >&2
  else
    rm -rf --one-file-system "$scratch"
  fi
}
trap cleanup EXIT
mkdir -p "$root"
tar --numeric-owner -C "$root" -xzf "$tarball"
mkdir -p "$root/src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -C "$root/src" -xf -
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The apt sources of a standard Debian 12 install: main, updates and security.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
EOF
step_done unpack

# ---- 3. inside ----
use_ccache="${PATCHBAY_FRESH_ROOT_CCACHE:-1}"
say "running scripts/setup.sh and scripts/build.sh inside $root"
status=0
# shellcheck disable=SC2016  # the script below expands its own positional arguments
unshare --mount --propagation private -- bash -c '
  set -euo pipefail
  root="$1" cache="$2" use_ccache="$3" ccache_dir="$4"
  trap "umount -R \"\$root/proc\" \"\$root/dev\" \"\$root/var/cache/apt/archives\" 2>/dev/null || true
        umount \"\$root/var/cache/ccache\" 2>/dev/null || true" EXIT
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
  mkdir -p "$root/var/cache/ccache"
  mount --bind "$ccache_dir" "$root/var/cache/ccache"
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PATCHBAY_FRESH_ROOT_CCACHE="$use_ccache" CCACHE_DIR=/var/cache/ccache \
    bash /src/scripts/ci/fresh_root_inside.sh
' fresh-root "$root" "$cache" "$use_ccache" "$ccache_dir" >>"$log" 2>&1 || status=$?
step_done inside
if [ "$status" -ne 0 ]; then
  failed_step="$(sed -n "s/^fresh-root inside: FAILED at step '\([a-z]*\)'.*/\1/p" "$log" | tail -n 1)"
  fail "${failed_step:-inside}" "A package may be missing from scripts/setup.sh (a 'Could NOT find' or \
'No such file' line above names it), or the network to $mirror failed."
fi
say "passed in $(($(date +%s) - started)) s (log: $log)"
