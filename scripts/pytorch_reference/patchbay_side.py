"""The Patchbay side of the PyTorch reference: the resolved config, a Patchbay training run,
its metrics, and the prepared data read exactly as the trainer reads it.

Everything here mirrors a C++ rule, named beside each function:
- token caches: core/data/token_cache.hpp (64-byte header, then uint16/uint32 ids);
- training windows: core/train/batches.cpp, splitmix64(seed, step, micro_step, row) %
  (count - seq_len), the same windows in the same order as `patchbay train`;
- validation windows: evenly spaced starts floor(i * last_start / (n - 1));
- special-token targets are left out of the validation loss (core/train/evaluator.cpp).
"""
import glob
import json
import os
import struct
import subprocess
import tomllib

import numpy as np

MASK64 = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    """core/data/split.cpp fnv1a64."""
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & MASK64
    return h


def splitmix64(x: int) -> int:
    """core/data/split.cpp splitmix64."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def training_window_start(seed, step, micro_step, row, count, seq_len):
    """core/train/batches.cpp training_window_start."""
    h = splitmix64(seed ^ 0x747261696E626174)  # "trainbat"
    h = splitmix64(h ^ step)
    h = splitmix64(h ^ micro_step)
    h = splitmix64(h ^ row)
    return h % (count - seq_len)


def validation_window_start(index, window_count, count, seq_len):
    """core/train/batches.cpp validation_window_start (exact integer arithmetic)."""
    if window_count <= 1:
        return 0
    last_start = count - seq_len - 1
    return index * last_start // (window_count - 1)


class TokenCache:
    """A token cache file (core/data/token_cache.hpp) as a numpy array of ids."""

    def __init__(self, path):
        with open(path, "rb") as f:
            header = f.read(64)
        if header[:8] != b"PBTOKENS":
            raise SystemExit(f"{path}: not a Patchbay token cache (magic {header[:8]!r})")
        version, bytes_per_id, count, vocab, tok_hash, src_hash = struct.unpack("<IIQQQQ", header[8:48])
        if version != 1 or bytes_per_id not in (2, 4):
            raise SystemExit(f"{path}: token cache version {version} / {bytes_per_id} bytes per id not understood")
        dtype = np.uint16 if bytes_per_id == 2 else np.uint32
        self.ids = np.memmap(path, dtype=dtype, mode="r", offset=64, shape=(count,))
        self.count = count
        self.vocab_size = vocab
        self.tokenizer_hash = tok_hash
        self.path = path

    def windows(self, starts, seq_len):
        """(inputs, targets) int64 arrays [rows, seq_len] for the given window starts."""
        rows = np.stack([np.asarray(self.ids[s : s + seq_len + 1], dtype=np.int64) for s in starts])
        return rows[:, :-1], rows[:, 1:]

    def training_batch(self, seed, step, rows, seq_len, micro_step=0):
        starts = [training_window_start(seed, step, micro_step, r, self.count, seq_len) for r in range(rows)]
        return self.windows(starts, seq_len)

    def validation_batch(self, batch_index, batch_count, rows, seq_len):
        starts = [
            validation_window_start(batch_index * rows + r, batch_count * rows, self.count, seq_len)
            for r in range(rows)
        ]
        return self.windows(starts, seq_len)


def resolved_config(patchbay, config, sets):
    """The fully resolved config as a dict (`patchbay config show`)."""
    cmd = [patchbay, "config", "show", config] + [a for s in sets for a in ("--set", s)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return tomllib.loads(text)


def special_ids(cfg, run_dir):
    """Ids of special tokens (left out of the validation loss), from the run's tokenizer file.
    Char tokenizer ids: characters, then 256 byte tokens, then the specials (char_tokenizer.hpp)."""
    kind = cfg["tokenizer"]["kind"]
    path = os.path.join(run_dir, "tokenizer.txt")
    if kind != "char" or not os.path.exists(path):
        return []
    n_chars = n_specials = None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0] == "characters":
                n_chars = int(parts[1])
            if len(parts) == 2 and parts[0] == "specials":
                n_specials = int(parts[1])
    if n_chars is None or n_specials is None:
        return []
    return list(range(n_chars + 256, n_chars + 256 + n_specials))


def find_caches(cfg, run_dir):
    """The train and validation token caches of the run: the ones encoded with the run's
    tokenizer (header tokenizer_hash = fnv1a64 of the run's tokenizer.txt)."""
    prepared = cfg["data"]["output_dir"]
    with open(os.path.join(run_dir, "tokenizer.txt"), "rb") as f:
        wanted = fnv1a64(f.read())
    found = {}
    for split in ("train", "val"):
        for path in sorted(glob.glob(os.path.join(prepared, f"{split}-*.tokens"))):
            cache = TokenCache(path)
            if cache.tokenizer_hash == wanted:
                found[split] = cache
    if len(found) != 2:
        raise SystemExit(
            f"no train/val token caches in {prepared} match {run_dir}/tokenizer.txt; "
            "run the Patchbay side first (it prepares the data)"
        )
    return found["train"], found["val"]


def train_patchbay(patchbay, config, sets, run_name, threads, nice):
    """Runs `patchbay train` without checkpoints or samples; returns the run folder."""
    cmd = [patchbay, "train", config, "--overwrite"]
    for s in list(sets) + [f"run.name={run_name}", "train.checkpoint_every=0", "train.sample_tokens=0"]:
        cmd += ["--set", s]
    if nice:
        cmd = ["nice", "-n", str(nice)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)
    cfg = resolved_config(patchbay, config, list(sets) + [f"run.name={run_name}"])
    return os.path.join(cfg["run"]["output_dir"], run_name)


def read_metrics(run_dir):
    """(train records, val records) of metrics.jsonl."""
    train, val = [], []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "val_loss" in r:
                val.append(r)
            elif "loss" in r:
                train.append(r)
    return train, val
