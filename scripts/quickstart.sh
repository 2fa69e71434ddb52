#!/usr/bin/env bash
# The README's main command. Installs what is missing, builds what the quickstart runs (the
# `patchbay` CLI and the built-in plugins: target patchbay_cli_plugins, no test binaries;
# scripts/test.sh builds everything), then runs the quickstart:
# prepares the default corpus (the King James Bible), trains a small character-level GPT
# (configs/quickstart.toml: the char tokenizer is trained and the splits encoded on the way),
# evaluates the final checkpoint and prints samples.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PATCHBAY_BUILD_TARGETS="${PATCHBAY_BUILD_TARGETS:-patchbay_cli_plugins}" bash "$root/scripts/build.sh"
build="${PATCHBAY_BUILD_DIR:-$root/build}"
cd "$root"
pb="$build/patchbay"
"$pb" plugins list
"$pb" data prepare --corpus kjv --out data/kjv --val-fraction 0.1 --seed 1234
"$pb" train configs/quickstart.toml --overwrite "$@"   # a fresh run each time
"$pb" eval runs/quickstart
echo "samples: runs/quickstart/samples.txt; metrics: runs/quickstart/metrics.jsonl"
