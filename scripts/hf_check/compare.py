#!/usr/bin/env python3
"""Compare a Patchbay run, its Hugging Face export and its re-import (scripts/hf_check/hf_check.sh).

For one model: the tokenizer ids of a prompt (Patchbay vs the exported tokenizer.json through
transformers' AutoTokenizer), the logits on the same ids (transformers' AutoModelForCausalLM on
the export vs `patchbay logits` on the run and on the re-imported run; max abs difference, f32),
and the greedy continuation (`patchbay generate --temperature 0 --no-stop` vs transformers'
generate(do_sample=False) with no end-of-sequence stop). Exit status 1 when a check fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import tomllib

import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

LIMIT = 1e-4


def patchbay_logits(patchbay, run, ids=None, text=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.safetensors")
        cmd = [patchbay, "logits", run, "--out", out]
        cmd += ["--ids", ",".join(map(str, ids))] if ids is not None else ["--text", text]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        tensors = load_file(out)
        return tensors["ids"].tolist(), torch.from_numpy(tensors["logits"].copy())


def patchbay_encode(patchbay, run, text):
    with open(os.path.join(run, "config.toml"), "rb") as f:
        kind = tomllib.load(f)["tokenizer"]["kind"]
    r = subprocess.run([patchbay, "tokenizer", "encode", "--kind", kind, "--tokenizer", os.path.join(run, "tokenizer.txt"),
                        "--text", text], check=True, capture_output=True)
    return [int(x) for x in r.stdout.split()]


def patchbay_greedy(patchbay, run, prompt, n):
    r = subprocess.run([patchbay, "generate", run, "--prompt", prompt, "-n", str(n), "--temperature", "0",
                        "--no-stop"], check=True, capture_output=True)
    return r.stdout.decode("utf-8", errors="replace").rstrip("\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--patchbay", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--hf", required=True)
    p.add_argument("--imported", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--text", required=True, help="text whose ids the logits are compared on")
    p.add_argument("--new-tokens", type=int, default=100)
    a = p.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    ok = True

    def report(name, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"[{a.label}] {name}: {detail} {'OK' if passed else 'FAIL'}", flush=True)

    tok = AutoTokenizer.from_pretrained(a.hf)
    model = AutoModelForCausalLM.from_pretrained(a.hf, dtype=torch.float32).eval()
    cfg = model.config
    print(f"[{a.label}] transformers {type(model).__name__}: {cfg.num_hidden_layers} layers, width "
          f"{cfg.hidden_size}, heads {cfg.num_attention_heads}, vocab {cfg.vocab_size}, "
          f"{sum(t.numel() for t in model.parameters())} parameters", flush=True)

    for name, text in (("prompt", a.prompt), ("text", a.text)):
        pb_ids = patchbay_encode(a.patchbay, a.run, text)
        hf_ids = tok(text, add_special_tokens=False)["input_ids"]
        report(f"tokenizer ids of the {name} ({len(text)} chars)", pb_ids == hf_ids,
               f"{len(pb_ids)} Patchbay ids, {len(hf_ids)} transformers ids, "
               f"{'identical' if pb_ids == hf_ids else 'DIFFERENT'}")

    context = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions")
    ids = patchbay_encode(a.patchbay, a.run, a.text)[:context]
    _, pb = patchbay_logits(a.patchbay, a.run, ids=ids)
    with torch.no_grad():
        hf = model(torch.tensor([ids])).logits[0].float()
    diff = (hf - pb).abs().max().item()
    report("logits transformers(export) vs patchbay(run)", diff <= LIMIT,
           f"max abs diff {diff:.3e} over {list(pb.shape)} (limit {LIMIT:g}; logits range "
           f"{pb.min().item():.2f}..{pb.max().item():.2f})")
    _, pb_imported = patchbay_logits(a.patchbay, a.imported, ids=ids)
    diff_import = (pb_imported - pb).abs().max().item()
    report("logits patchbay(imported) vs patchbay(run)", diff_import <= LIMIT, f"max abs diff {diff_import:.3e}")
    diff_import_hf = (pb_imported - hf).abs().max().item()
    report("logits patchbay(imported) vs transformers(export)", diff_import_hf <= LIMIT,
           f"max abs diff {diff_import_hf:.3e}")

    prompt_ids = tok(a.prompt, add_special_tokens=False)["input_ids"]
    model.generation_config.eos_token_id = None  # as --no-stop: exactly new-tokens tokens
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=a.new_tokens, do_sample=False)
    hf_text = tok.decode(out[0].tolist(), skip_special_tokens=False)
    pb_text = patchbay_greedy(a.patchbay, a.run, a.prompt, a.new_tokens)
    same = hf_text == pb_text
    report(f"greedy {a.new_tokens} tokens patchbay generate(run) vs transformers generate(export)", same,
           "identical" if same else f"DIFFERENT\n  patchbay:     {pb_text!r}\n  transformers: {hf_text!r}")
    pb_text_imported = patchbay_greedy(a.patchbay, a.imported, a.prompt, a.new_tokens)
    report("greedy patchbay generate(imported) vs patchbay generate(run)", pb_text_imported == pb_text,
           "identical" if pb_text_imported == pb_text else "DIFFERENT")
    print(f"[{a.label}] continuation: {pb_text!r}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
