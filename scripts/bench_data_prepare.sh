#!/usr/bin/env bash
# Issue 35, item 6: `patchbay data prepare` against Hugging Face `datasets` + `tokenizers` on
# the same multi-source corpus, the same GPT-2 tokenizer file, in the same sitting; peak memory
# of prepare on a corpus twice that size; training tokens/s from prepared shards against the
# single-corpus token file (same config). Not part of CI: it needs minutes and gigabytes.
#
#   scripts/bench_data_prepare.sh [--work DIR] [--python PY] [--patchbay BIN] [--steps N]
#                                 [--every N] [--skip-patchbay] [--skip-hf] [--skip-4gb] [--skip-train]
#                                 [--clean]
#
# DIR (default /work/data-bench): corpus/ (scripts/data_bench/assemble_corpus.py: ~2.2 GB of text
# this machine ships, four sources), gpt2/ (scripts/tokenizers/fetch_gpt2.sh), the outputs and
# logs; results.jsonl gets one JSON line per measurement. PY: an interpreter with `datasets`
# and `tokenizers` (e.g. a venv under /work/.venvs/). --clean removes the corpus and outputs
# at the end (the figures stay in results.jsonl and the logs). --every N: the comparison on
# every N-th file of the corpus only (hard links in corpus-everyN/, same four sources), for a
# Hugging Face run that must fit in the time at hand; the figures are named "..._everyN". BIN (default build/patchbay): to
# keep working in the tree while this runs, install a copy (BIN in some bin/, its plugins in
# ../lib/patchbay/plugins beside it, which it then uses alone).
# Peak memory is /usr/bin/time -v's "Maximum resident set size": for the Hugging Face run,
# whose map forks num_proc workers, that is the largest single process, not their sum.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
work=/work/data-bench
python=/work/.venvs/data-bench/bin/python
steps=60
every=1
patchbay="$root/build/patchbay"
skip_patchbay=0 skip_hf=0 skip_4gb=0 skip_train=0 clean=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --patchbay) patchbay="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --every) every="$2"; shift 2 ;;
    --skip-patchbay) skip_patchbay=1; shift ;;
    --skip-hf) skip_hf=1; shift ;;
    --skip-4gb) skip_4gb=1; shift ;;
    --skip-train) skip_train=1; shift ;;
    --clean) clean=1; shift ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "bench_data_prepare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$patchbay" ]] || { echo "build patchbay first (scripts/build.sh)" >&2; exit 1; }
cores=$(nproc)
mkdir -p "$work"
results="$work/results.jsonl"
corpus="$work/corpus"
sources=(doc include code misc)

# Runs a command under /usr/bin/time -v; appends {name, wall_s, peak_rss_mb, ...extra} to results.
timed() {
  local name="$1" extra="$2"; shift 2
  local log="$work/$name.log"
  /usr/bin/time -v "$@" > "$log" 2> "$log.time" || { echo "$name failed, see $log(.time)" >&2; tail -5 "$log.time" >&2; exit 1; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$log.time")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2/1024}' "$log.time")
  echo "{\"name\": \"$name\", \"wall_s\": $wall, \"peak_rss_mb\": $rss, \"cores\": $cores, \"load_before\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"$extra}" | tee -a "$results"
}

if [[ ! -f "$corpus/sources.json" ]]; then
  python3 "$here/data_bench/assemble_corpus.py" "$corpus" --max-gb 2.2
fi
suffix=""
if [[ $every -gt 1 ]]; then  # every N-th file, hard-linked: the same bytes, a smaller corpus
  subset="$work/corpus-every$every"
  if [[ ! -f "$subset/sources.json" ]]; then
    python3 - "$corpus" "$subset" "$every" <<'PY'
import json, os, sys
corpus, subset, every = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [l.strip() for l in open(corpus + "/files.txt") if l.strip()][::every]
out, sources = [], {}
for f in files:
    rel = os.path.relpath(f, corpus)
    target = os.path.join(subset, rel)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.link(f, target)
    out.append(target)
    s = sources.setdefault(rel.split("/")[0], {"files": 0, "bytes": 0})
    s["files"] += 1
    s["bytes"] += os.path.getsize(f)
open(subset + "/files.txt", "w").write("\n".join(out) + "\n")
json.dump({"sources": sources, "total_bytes": sum(s["bytes"] for s in sources.values())},
          open(subset + "/sources.json", "w"), indent=1)
PY
  fi
  corpus="$subset"
  suffix="_every$every"
fi
corpus_bytes=$(python3 -c "import json; print(json.load(open('$corpus/sources.json'))['total_bytes'])")
bash "$here/tokenizers/fetch_gpt2.sh" --dest "$work/gpt2" --python "$python"
tokenizer="$work/gpt2/gpt2-tokenizer.json"
"$python" - "$work/gpt2" "$tokenizer" <<'PY'
import sys
from tokenizers import ByteLevelBPETokenizer
folder, out = sys.argv[1], sys.argv[2]
t = ByteLevelBPETokenizer(folder + "/encoder.json", folder + "/vocab.bpe")  # GPT-2: no prefix space
t.add_special_tokens(["<|endoftext|>"])  # id 50256, already in the vocabulary
t.save(out)
PY

source_args=()
for s in "${sources[@]}"; do source_args+=(--source "$corpus/$s"); done
prepare=("$patchbay" data prepare "${source_args[@]}" --tokenizer "$tokenizer" --kind bpe
         --val-fraction 0 --no-progress --overwrite)

# 1. The 2 GB corpus: patchbay, then Hugging Face, back to back.
if [[ $skip_patchbay == 0 ]]; then
rm -rf "$work/out-patchbay"
timed "prepare_patchbay$suffix" ", \"bytes\": $corpus_bytes" "${prepare[@]}" --out "$work/out-patchbay"
tail -3 "$work/prepare_patchbay$suffix.log"
rm -rf "$work/out-patchbay"
fi
if [[ $skip_hf == 0 ]]; then
  rm -rf "$work/out-hf"
  timed "prepare_hf$suffix" ", \"bytes\": $corpus_bytes" "$python" "$here/data_bench/hf_prepare.py" "$corpus/files.txt" "$tokenizer" "$work/out-hf" "$cores"
  tail -1 "$work/prepare_hf$suffix.log"
  rm -rf "$work/out-hf"
fi

# 2. Twice the corpus (a hard-linked copy, no extra disk) for prepare's peak memory.
if [[ $skip_4gb == 0 ]]; then
  [[ -d "$work/corpus2" ]] || cp -al "$corpus" "$work/corpus2"
  double_args=("${source_args[@]}")
  for s in "${sources[@]}"; do double_args+=(--source "$work/corpus2/$s"); done
  rm -rf "$work/out-4gb"
  timed prepare_patchbay_4gb ", \"bytes\": $((2 * corpus_bytes))" "$patchbay" data prepare "${double_args[@]}" \
    --tokenizer "$tokenizer" --kind bpe --val-fraction 0 --no-progress --overwrite --out "$work/out-4gb"
  rm -rf "$work/out-4gb" "$work/corpus2"
fi

# 3. Training tokens/s: the same config on the single-corpus token file and on prepared shards
#    of the same text, alternated (A B A B) so the machine's load falls on both alike.
if [[ $skip_train == 0 ]]; then
  train_dir="$work/train"
  rm -rf "$train_dir"; mkdir -p "$train_dir"
  # ~30 MB of documentation (the reader stops early: the writer's SIGPIPE is expected)
  { find "$corpus/doc" -type f | sort | xargs cat 2> /dev/null || true; } | head -c 30000000 > "$train_dir/text.txt"
  cat > "$train_dir/bench.toml" <<TOML
[run]
name = "bench"
seed = 1
[data]
corpus = "$train_dir/text.txt"
output_dir = "$train_dir/data"
validation_fraction = 0.01
[tokenizer]
kind = "char"
[model]
context_length = 256
n_layers = 2
n_heads = 4
d_model = 128
[train]
batch_size = 16
seq_len = 256
max_steps = $steps
warmup_steps = 5
eval_every = 100000
checkpoint_every = 100000
log_every = 10
sample_every = 0
TOML
  run_train() {  # $1: name, rest: --set overrides
    local name="$1"; shift
    "$patchbay" train "$train_dir/bench.toml" --no-progress --set "train.out_dir=\"$train_dir/$name\"" "$@" \
      > "$train_dir/$name.log" 2>&1
    python3 - "$train_dir/$name/metrics.jsonl" "$name" <<'PY' | tee -a "$results"
import json, statistics, sys
rates = [r["tokens_per_second"] for r in map(json.loads, open(sys.argv[1])) if "tokens_per_second" in r and r["step"] > 10]
print(json.dumps({"name": sys.argv[2], "tokens_per_second_median": statistics.median(rates), "windows": len(rates)}))
PY
  }
  run_train token_file_warmup  # prepares the split, the char tokenizer and the token file
  "$patchbay" data prepare --source "$train_dir/text.txt" --block-kb 16 --tokenizer "$train_dir/token_file_warmup/tokenizer.txt" \
    --kind char --out "$train_dir/shards" --val-fraction 0.01 --shard-mb 4 --no-progress > "$train_dir/prepare.log" 2>&1
  for round in 1 2; do
    run_train "token_file_$round" --set train.max_steps=$steps
    run_train "shards_$round" --set "data.prepared=\"$train_dir/shards\"" --set 'data.sampling="epochs"'
  done
  rm -rf "$train_dir"
fi
if [[ $clean == 1 ]]; then rm -rf "$corpus" "$work/corpus2"; fi
echo "results: $results"
