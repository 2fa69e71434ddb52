#!/usr/bin/env python3
"""Check `patchbay export --format hf` of an encoder-decoder run against transformers' T5.

Trains a small T5-shaped encoder-decoder on the King James Bible with span corruption (or takes
--run), exports it (`patchbay export RUN --format hf DIR`), loads DIR with
T5ForConditionalGeneration, and compares on the same ids:
  - logits: `patchbay logits RUN --source-ids S --ids D` (D = <pad> then the target's ids) vs
    model(input_ids=S, decoder_input_ids=D).logits: max abs difference and max relative error
    (max over positions of max|P - H| / max|H|), limit 1e-4;
  - greedy decoding: `patchbay generate RUN --source TEXT -n N` vs generate(do_sample=False,
    max_new_tokens=N) decoded with the exported tokenizer.json: identical text;
  - the round trip: `patchbay import DIR` then the imported run's logits vs the run's (exactly
    equal when sqrt(d_head) is a power of two, as here with d_head 16);
  - import of a directory transformers wrote itself (save_pretrained of a freshly initialised
    T5ForConditionalGeneration of the same config, with the export's tokenizer files).
Exit status 1 when a check fails. Not part of CI (needs torch, transformers, tokenizers):

  /work/.venvs/torch/bin/python scripts/seq2seq/check_t5_export.py --patchbay build/patchbay \
      [--run RUN] [--work DIR] [--steps 300] [--activation relu|gelu|gelu_erf|swiglu|geglu] [--untied]
"""
import argparse
import os
import subprocess
import sys

import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer
from transformers import T5ForConditionalGeneration

LIMIT = 1e-4
# Logits are compared on span-corrupted pairs (T5's form: <extra_id_0> in the source where the
# span was, the decoder reading <pad> <extra_id_0> span); greedy decoding on the plain sources
# (`generate --source` encodes sentinel texts as characters).
PAIRS = [
    ("In the beginning God created the heaven and the earth.",
     "And the earth was without form, and void"),
    ("And God said, Let there be light: and there was light.",
     "And God saw the light, that it was good"),
    ("The LORD is my shepherd; I shall not want.", "He maketh me to lie down in green pastures"),
    ("Blessed are the meek: for they shall inherit the earth.", "Blessed are they which do hunger"),
]

CONFIG = """# written by scripts/seq2seq/check_t5_export.py
[run]
name = "t5-export-check"
seed = 3
[data]
corpus = "kjv"
validation_fraction = 0.1
seed = 1234
output_dir = "{data}"
[tokenizer]
kind = "char"
[model]
architecture = "encoder_decoder"
encoder_layers = 2
decoder_layers = 2
n_heads = 4
d_model = 64
d_ff = 128
norm = "rmsnorm"
positional = "t5_relative"
relative_attention_num_buckets = 32
relative_attention_max_distance = 128
context_length = 128
source_context_length = 128
shared_embeddings = true
tie_embeddings = {tied}
cross_attention = "dense"
dropout = 0.0
[model.attention]
kind = "dense"
bias = false
[model.feedforward]
kind = "mlp"
activation = "{activation}"
bias = false
[optimizer]
kind = "adamw"
[train]
objective = "span_corruption"
batch_size = 16
seq_len = 96
max_steps = {steps}
lr = 3e-3
warmup_steps = 20
eval_every = {steps}
eval_batches = 4
checkpoint_every = {steps}
log_every = 50
out_dir = "{run}"
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


def patchbay_logits(patchbay, run_dir, source, decoder_inputs, out):
    run([patchbay, "logits", run_dir, "--source-ids", ",".join(map(str, source)), "--ids",
         ",".join(map(str, decoder_inputs)), "--out", out])
    return torch.from_numpy(load_file(out)["logits"].copy())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--patchbay", required=True)
    p.add_argument("--run", help="an encoder-decoder run to take instead of training one")
    p.add_argument("--work", default="/tmp/t5_export_check")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--activation", default="relu")
    p.add_argument("--untied", action="store_true", help="train with an untied head")
    p.add_argument("--new-tokens", type=int, default=40)
    a = p.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "2"))))
    patchbay = os.path.abspath(a.patchbay)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    run_dir = a.run
    if run_dir is None:
        run_dir = os.path.join(work, "run")
        config = os.path.join(work, "t5_check.toml")
        with open(config, "w") as f:
            f.write(CONFIG.format(data=os.path.join(work, "data"), run=run_dir, steps=a.steps,
                                  activation=a.activation, tied="false" if a.untied else "true"))
        print(f"training {config} ({a.steps} steps)", flush=True)
        r = run([patchbay, "train", config, "--no-progress", "--overwrite"])
        print(r.stdout.decode().strip().splitlines()[-1], flush=True)
    hf_dir = os.path.join(work, "hf")
    r = run([patchbay, "export", run_dir, "--format", "hf", hf_dir])
    print(r.stdout.decode().strip(), flush=True)

    ok = True

    def report(name, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"{name}: {detail} {'OK' if passed else 'FAIL'}", flush=True)

    model = T5ForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
    cfg = model.config
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    pad = cfg.decoder_start_token_id
    print(f"transformers T5ForConditionalGeneration: {cfg.num_layers}+{cfg.num_decoder_layers} "
          f"blocks, d_model {cfg.d_model}, heads {cfg.num_heads} x d_kv {cfg.d_kv}, d_ff {cfg.d_ff}, "
          f"feed_forward_proj {cfg.feed_forward_proj}, vocab {cfg.vocab_size}, tied head "
          f"{getattr(cfg, 'scale_decoder_outputs', cfg.tie_word_embeddings)}, decoder start {pad}, "
          f"{sum(t.numel() for t in model.parameters())} parameters", flush=True)

    worst_rel, worst_abs = 0.0, 0.0
    out = os.path.join(work, "logits.safetensors")
    cases = []
    for i, (source_text, target_text) in enumerate(PAIRS):
        words = source_text.split(" ")
        sentinel = cfg.vocab_size - 1  # <extra_id_0>: the highest id, as T5 numbers them
        source = (tok.encode(" ".join(words[:3]) + " ").ids + [sentinel] +
                  tok.encode(" " + " ".join(words[4:])).ids)
        decoder_inputs = [pad, sentinel] + tok.encode(words[3] + " " + target_text).ids
        cases.append((source, decoder_inputs))
        pb = patchbay_logits(patchbay, run_dir, source, decoder_inputs, out)
        with torch.no_grad():
            hf = model(input_ids=torch.tensor([source]),
                       decoder_input_ids=torch.tensor([decoder_inputs])).logits[0].float()
        diff = (pb - hf).abs()
        rel = (diff.amax(dim=-1) / hf.abs().amax(dim=-1)).max().item()
        worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, diff.max().item())
        report(f"pair {i} logits", rel <= LIMIT and diff.max().item() <= LIMIT,
               f"max abs diff {diff.max().item():.3e}, max relative error {rel:.3e} over "
               f"{list(pb.shape)} (source {len(source)} ids; logits range "
               f"{hf.min().item():.2f}..{hf.max().item():.2f}); argmax "
               f"{'equal' if torch.equal(pb.argmax(-1), hf.argmax(-1)) else 'DIFFERS'}")
    print(f"worst over all pairs: max abs diff {worst_abs:.3e}, max relative error {worst_rel:.3e} "
          f"(limit {LIMIT:g})", flush=True)

    for i, (source_text, _) in enumerate(PAIRS):
        r = run([patchbay, "generate", run_dir, "--source", source_text, "-n", str(a.new_tokens)])
        pb_text = r.stdout.decode("utf-8", errors="replace").rstrip("\n")
        with torch.no_grad():
            ids = model.generate(torch.tensor([tok.encode(source_text).ids]), do_sample=False,
                                 max_new_tokens=a.new_tokens, num_beams=1)[0].tolist()
        ids = ids[1:]  # the decoder start
        if cfg.eos_token_id is not None and ids and ids[-1] == cfg.eos_token_id:
            ids = ids[:-1]
        hf_text = tok.decode(ids, skip_special_tokens=False)
        report(f"pair {i} greedy {a.new_tokens} tokens", hf_text == pb_text,
               f"identical {pb_text!r}" if hf_text == pb_text
               else f"DIFFERENT\n  patchbay:     {pb_text!r}\n  transformers: {hf_text!r}")

    imported = os.path.join(work, "imported")
    run([patchbay, "import", hf_dir, imported, "--overwrite"])
    worst_round = 0.0
    for source, decoder_inputs in cases:
        a_logits = patchbay_logits(patchbay, run_dir, source, decoder_inputs, out)
        b_logits = patchbay_logits(patchbay, imported, source, decoder_inputs, out)
        worst_round = max(worst_round, (a_logits - b_logits).abs().max().item())
    report("round trip export -> import", worst_round == 0.0,
           f"logits of the imported run vs the run: max abs diff {worst_round:.3e}")

    # Import of a directory transformers itself wrote: a freshly initialised
    # T5ForConditionalGeneration of the same config (save_pretrained), with the export's
    # tokenizer files; Patchbay's logits after `patchbay import` against transformers'.
    import shutil
    written = os.path.join(work, "hf_written")
    torch.manual_seed(0)
    fresh = T5ForConditionalGeneration(model.config).eval()
    fresh.save_pretrained(written)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(hf_dir, name), written)
    imported_fresh = os.path.join(work, "imported_written")
    run([patchbay, "import", written, imported_fresh, "--overwrite"])
    worst_fresh = 0.0
    for source, decoder_inputs in cases:
        pb = patchbay_logits(patchbay, imported_fresh, source, decoder_inputs, out)
        with torch.no_grad():
            hf = fresh(input_ids=torch.tensor([source]),
                       decoder_input_ids=torch.tensor([decoder_inputs])).logits[0].float()
        worst_fresh = max(worst_fresh, (pb - hf).abs().max().item())
    report("import of a transformers-written T5 directory", worst_fresh <= LIMIT,
           f"patchbay(imported) vs transformers: max abs diff {worst_fresh:.3e}")
    print("check_t5_export: " + ("all checks passed" if ok else "SOME CHECKS FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
