#!/usr/bin/env bash
# Rebuilds the shipped task data (configs/tasks/data/*.jsonl, committed: ~0.5 MB) from Debian
# packages, offline: the KJV split the quickstart uses (bible-kjv, through `patchbay data
# prepare --val-fraction 0.1 --seed 1234`) and WordNet 3.0 (wordnet-base). Needs python3 and a
# built `patchbay` (PATCHBAY_BUILD_DIR, default build/). Deterministic: rerunning it changes
# nothing unless the packages' data changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir="${PATCHBAY_BUILD_DIR:-build}"
prepared="$(mktemp -d)"
trap 'rm -rf "$prepared"' EXIT
"$build_dir/patchbay" data prepare --corpus kjv --val-fraction 0.1 --seed 1234 --out "$prepared" >/dev/null
python3 scripts/tasks/build_kjv_tasks.py "$prepared" configs/tasks/data
if [ -d /usr/share/wordnet ]; then
  python3 scripts/tasks/build_wordnet_task.py configs/tasks/data "$prepared/train.txt"
else
  echo "wordnet-base is not installed (sudo apt-get install wordnet-base): wordnet_definitions kept as committed" >&2
fi
