#!/usr/bin/env python3
"""Training tokens/s of a T5-small-shaped encoder-decoder: Patchbay beside transformers' T5.

Both train the same model shape (d_model 512, 6 + 6 blocks, 8 heads, d_ff 2048, ReLU mlp
without biases, T5 relative position bias 32 buckets / distance 128, shared embeddings, tied
head, dropout 0) on the same JSON Lines pairs (every source S characters, every target T - 1
characters + </s>: fixed shapes [B, S] and [B, T]), with AdamW (lr 1e-3 constant, betas 0.9 /
0.999, eps 1e-8, weight decay 0), gradient clipping at 1.0, f32, and the same thread count.
The vocabulary is the character tokenizer's (~30 ids + <pad>, </s>), so the head is small and
the time is the blocks'. transformers runs in PyTorch eager, starting from Patchbay's exported
weights (`patchbay export --format hf`, which also gives the tokenizer that encodes the pairs),
with model(input_ids, attention_mask, labels) -> loss.backward() -> clip -> AdamW step.

The two alternate (--rounds times: Patchbay then PyTorch) in one sitting, so the ratio of each
round is taken on the same machine state; the machine is shared, so report same-round ratios.
Tokens/s counts source + target tokens: B * (S + T) per step; the first --warmup steps of each
measurement are left out. Each round also takes CPU time per step (user + system; Patchbay: a
run of --steps steps minus one of --warmup steps, PyTorch: process_time over the timed steps),
which the other processes of a shared machine disturb less than wall time. Not part of CI.

  OMP_NUM_THREADS=2 /work/.venvs/torch/bin/python scripts/seq2seq/bench_t5_speed.py \
      --patchbay build/patchbay [--batch 8] [--source-len 128] [--target-len 32] [--steps 6]
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

import torch
from tokenizers import Tokenizer
from transformers import T5ForConditionalGeneration

CONFIG = """# written by scripts/seq2seq/bench_t5_speed.py
[run]
name = "t5-small-speed"
seed = 1
[data]
corpus = "{corpus}"
validation_fraction = 0.1
output_dir = "{work}/data"
[tokenizer]
kind = "char"
[model]
architecture = "encoder_decoder"
encoder_layers = {layers}
decoder_layers = {layers}
n_heads = 8
d_model = {d_model}
d_ff = {d_ff}
norm = "rmsnorm"
norm_eps = 1e-6
positional = "{positional}"
relative_attention_num_buckets = 32
relative_attention_max_distance = 128
context_length = {target_len}
source_context_length = {source_len}
shared_embeddings = true
tie_embeddings = true
cross_attention = "dense"
dropout = 0.0
[model.attention]
kind = "dense"
bias = false
[model.feedforward]
kind = "mlp"
activation = "relu"
bias = false
[optimizer]
kind = "adamw"
[optimizer.adamw]
beta1 = 0.9
beta2 = 0.999
eps = 1e-8
weight_decay = 0.0
[train]
objective = "seq2seq"
batch_size = {batch}
seq_len = {target_len}
max_steps = {steps}
lr = 1e-3
min_lr = 1e-3
warmup_steps = 0
schedule = "constant"
grad_clip = 1.0
eval_every = 100000
eval_batches = 1
checkpoint_every = {steps}
log_every = 1
sample_tokens = 0
out_dir = "{run}"
[train.seq2seq]
train_file = "{pairs}"
validation_file = "{pairs}"
"""

ALPHABET = "abcdefghijklmnopqrstuvwxyz "


def write_pairs(work, n, source_len, target_len, seed=0):
    rng = random.Random(seed)
    pairs = os.path.join(work, "pairs.jsonl")
    corpus = os.path.join(work, "corpus.txt")
    rows = []
    for _ in range(n):
        source = "".join(rng.choice(ALPHABET) for _ in range(source_len))
        rows.append({"source": source, "target": source[: target_len - 1][::-1]})
    with open(pairs, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(corpus, "w") as f:  # trains the char tokenizer (every letter appears): the pairs
        for r in rows:
            f.write(r["source"] + "\n" + r["target"] + "\n")
    return pairs, corpus, rows


def patchbay_round(a, config, run_dir, env):
    """Trains a.steps steps; returns the per-step seconds after the warmup (metrics.jsonl)."""
    if os.path.exists(run_dir):
        subprocess.run(["rm", "-rf", run_dir], check=True)
    subprocess.run([a.patchbay, "train", config, "--no-progress", "--overwrite"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    step_seconds = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "tokens_per_second" in r and r["step"] > a.warmup and r["tokens_per_second"] > 0:
                step_seconds.append(a.batch * a.target_len / r["tokens_per_second"])
    return step_seconds


def patchbay_cpu_per_step(a, config_short, config, run_short, run_dir, env):
    """CPU seconds (user + system) per step: a run of a.steps steps minus one of a.warmup steps
    (the same start-up, data and final checkpoint), over the steps between. Less disturbed by
    the other processes of a shared machine than wall time."""
    def cpu_of(cfg, out):
        if os.path.exists(out):
            subprocess.run(["rm", "-rf", out], check=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([a.patchbay, "train", cfg, "--no-progress", "--overwrite"], check=True,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    return (cpu_of(config, run_dir) - cpu_of(config_short, run_short)) / (a.steps - a.warmup)


def torch_round(a, model, batches):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    step_seconds, cpu_start = [], 0.0
    for i, (source, labels) in enumerate(batches):
        if i == a.warmup:
            cpu_start = time.process_time()
        start = time.perf_counter()
        loss = model(input_ids=source, attention_mask=torch.ones_like(source), labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= a.warmup:
            step_seconds.append(time.perf_counter() - start)
    return step_seconds, (time.process_time() - cpu_start) / (len(batches) - a.warmup)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--patchbay", required=True)
    p.add_argument("--work", default="/tmp/t5_speed")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--source-len", type=int, default=128)
    p.add_argument("--target-len", type=int, default=32)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--bias-share", action="store_true",
                   help="also time Patchbay without the relative bias (positional = \"none\") "
                        "each round: the difference is the bias's cost")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    a = p.parse_args()
    a.patchbay = os.path.abspath(a.patchbay)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(a.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    subprocess.run(["rm", "-rf", os.path.join(work, "data")], check=True)  # prepared for other pairs
    pairs, corpus, rows = write_pairs(work, 256, a.source_len, a.target_len)
    run_dir = os.path.join(work, "run")
    config = os.path.join(work, "t5_small_speed.toml")
    def write_config(path, positional, out, steps=a.steps):
        with open(path, "w") as f:
            f.write(CONFIG.format(corpus=corpus, work=work, layers=a.layers, d_model=a.d_model,
                                  d_ff=a.d_ff, target_len=a.target_len, source_len=a.source_len,
                                  batch=a.batch, steps=steps, run=out, pairs=pairs,
                                  positional=positional))

    config_short, run_short = os.path.join(work, "t5_small_speed_short.toml"), run_dir + "-short"
    write_config(config_short, "t5_relative", run_short, steps=a.warmup)

    write_config(config, "t5_relative", run_dir)
    config_none, run_none = os.path.join(work, "t5_small_speed_nobias.toml"), run_dir + "-nobias"
    write_config(config_none, "none", run_none)
    tokens_per_step = a.batch * (a.source_len + a.target_len)
    print(f"shape: batch {a.batch}, source {a.source_len}, target {a.target_len} "
          f"({tokens_per_step} tokens/step), d_model {a.d_model}, {a.layers}+{a.layers} blocks, "
          f"8 heads, d_ff {a.d_ff}; threads {a.threads}; {a.steps} steps per round, first "
          f"{a.warmup} left out; torch {torch.__version__}", flush=True)

    results, cpu_results = [], []
    model = None
    for r in range(a.rounds):
        pb = patchbay_round(a, config, run_dir, env)
        if model is None:  # transformers starts from Patchbay's weights and tokenizer
            hf_dir = os.path.join(work, "hf")
            subprocess.run([a.patchbay, "export", run_dir, "--format", "hf", hf_dir], check=True,
                           stdout=subprocess.DEVNULL)
            model = T5ForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32)
            model.config.use_cache = False
            tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
            eos = model.config.eos_token_id
            print(f"transformers T5ForConditionalGeneration: "
                  f"{sum(t.numel() for t in model.parameters())} parameters, vocab "
                  f"{model.config.vocab_size}", flush=True)
            rng = random.Random(1)
            batches = []
            for _ in range(a.steps):
                chosen = [rows[rng.randrange(len(rows))] for _ in range(a.batch)]
                batches.append((torch.tensor([tok.encode(c["source"]).ids for c in chosen]),
                                torch.tensor([tok.encode(c["target"]).ids + [eos] for c in chosen])))
            assert batches[0][0].shape == (a.batch, a.source_len), batches[0][0].shape
            assert batches[0][1].shape == (a.batch, a.target_len), batches[0][1].shape
        th, th_cpu = torch_round(a, model, batches)
        pb_cpu = patchbay_cpu_per_step(a, config_short, config, run_short, run_dir, env)
        pb_s, th_s = statistics.median(pb), statistics.median(th)
        cpu_results.append((pb_cpu, th_cpu))
        print(f"round {r + 1}: CPU time per step: Patchbay {pb_cpu:.3f} s, PyTorch eager "
              f"{th_cpu:.3f} s; ratio {th_cpu / pb_cpu:.2f}x", flush=True)
        if a.bias_share:
            none_s = statistics.median(patchbay_round(a, config_none, run_none, env))
            print(f"round {r + 1}: Patchbay without the relative bias {none_s:.3f} s/step: the "
                  f"bias costs {pb_s - none_s:+.3f} s/step ({(pb_s - none_s) / pb_s:+.1%} of the "
                  f"step)", flush=True)
        results.append((pb_s, th_s))
        print(f"round {r + 1}: Patchbay {pb_s:.3f} s/step = {tokens_per_step / pb_s:.0f} tok/s; "
              f"PyTorch eager {th_s:.3f} s/step = {tokens_per_step / th_s:.0f} tok/s; "
              f"ratio {th_s / pb_s:.2f}x  (steps: Patchbay {[round(x, 3) for x in pb]}, "
              f"PyTorch {[round(x, 3) for x in th]})", flush=True)
    ratios = [th / pb for pb, th in results]
    print(f"Patchbay / PyTorch tokens/s per round (wall time): {[round(x, 2) for x in ratios]}; "
          f"median {statistics.median(ratios):.2f}x (target >= 2x)", flush=True)
    cpu_ratios = [th / pb for pb, th in cpu_results]
    print(f"Patchbay / PyTorch per round (CPU time per step): {[round(x, 2) for x in cpu_ratios]}; "
          f"median {statistics.median(cpu_ratios):.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
