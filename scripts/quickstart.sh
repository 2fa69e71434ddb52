#!/usr/bin/env bash
# The README's main command. Installs what is missing, builds, prepares the default corpus
# (the King James Bible) and runs the tokenizer demo: trains a byte-level BPE tokenizer,
# encodes the validation split, decodes it back and checks the round trip.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
build="${PATCHBAY_BUILD_DIR:-$root/build}"
cd "$root"
pb="$build/patchbay"
"$pb" plugins list
"$pb" data prepare --corpus kjv --out data/kjv
"$pb" tokenizer train --kind bpe --vocab-size 4096 --input data/kjv/train.txt --out data/kjv/bpe4096.tok
"$pb" tokenizer encode --kind bpe --tokenizer data/kjv/bpe4096.tok --input data/kjv/val.txt --stats
