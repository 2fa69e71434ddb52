#!/usr/bin/env python3
"""Check Patchbay's LoRA ([train.lora], docs/finetuning.md) against Hugging Face PEFT on one tiny model.

Builds everything in a work folder (no download): a tiny LLaMA-shaped Patchbay model (RMSNorm,
rotary, SwiGLU, grouped-query attention) trained a few steps on generated text, then a LoRA run
on top of it (train.init_from, targets attention.* and mlp.*), then
  - `patchbay export BASE --format hf` -> transformers' LlamaForCausalLM,
  - PEFT's LoraConfig(r, lora_alpha, q/k/v/o/gate/up/down_proj, lora_dropout=0) on that model,
    its lora_A / lora_B set to the adapters of Patchbay's checkpoint (lora/<param>/<q|k|v|all>/A|B),
  - `patchbay export LORA --merge-lora MERGED`,
and compares logits on the same ids: Patchbay's merged run vs PEFT's adapted model, and vs PEFT's
merge_and_unload(). A mismatch means a different scaling (alpha / rank), A/B orientation or
q/k/v row mapping. Exit status 1 when a check fails.

  python compare_lora_peft.py --patchbay build/patchbay [--work /tmp/lora_peft]

Needs torch, transformers, peft, safetensors (a venv under /work/.venvs; not part of CI).
"""
import argparse
import os
import shutil
import subprocess
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM

LIMIT = 1e-4
RANK, ALPHA = 4, 8.0

BASE = """[run]
name = "base"
seed = 3
output_dir = "{work}/runs"
[data]
corpus = "{work}/corpus.txt"
validation_fraction = 0.3
output_dir = "{work}/data"
[tokenizer]
kind = "char"
[model]
context_length = 64
n_layers = 2
n_heads = 4
d_model = 32
d_ff = 48
norm = "rmsnorm"
positional = "rotary"
tie_embeddings = false
[model.attention]
kind = "dense"
n_kv_heads = 2
[model.feedforward]
kind = "mlp"
activation = "swiglu"
bias = false
[train]
batch_size = 8
seq_len = 32
max_steps = 40
lr = 0.01
eval_every = 40
sample_tokens = 0
"""

LORA = """include = ["base.toml"]
[run]
name = "lora"
[train]
init_from = "{work}/runs/base"
lr = 0.03
max_steps = 30
[train.lora]
rank = {rank}
alpha = {alpha}
targets = ["attention.*", "mlp.*"]
"""

# Patchbay adapter (parameter suffix, part) -> PEFT module path inside a LLaMA layer.
MODULES = {
    ("attn.qkv.weight", "q"): "self_attn.q_proj",
    ("attn.qkv.weight", "k"): "self_attn.k_proj",
    ("attn.qkv.weight", "v"): "self_attn.v_proj",
    ("attn.proj.weight", "all"): "self_attn.o_proj",
    ("ffn.gate.weight", "all"): "mlp.gate_proj",
    ("ffn.fc.weight", "all"): "mlp.up_proj",
    ("ffn.proj.weight", "all"): "mlp.down_proj",
}


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def patchbay_logits(patchbay, run_dir, ids, out):
    run([patchbay, "logits", run_dir, "--ids", ",".join(map(str, ids)), "--out", out])
    return torch.from_numpy(load_file(out)["logits"].copy())


def latest_checkpoint(run_dir):
    folder = os.path.join(run_dir, "checkpoints")
    with open(os.path.join(folder, "latest")) as f:
        return os.path.join(folder, f.read().strip())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--patchbay", required=True)
    p.add_argument("--work", default="/tmp/patchbay_lora_peft")
    a = p.parse_args()
    patchbay = os.path.abspath(a.patchbay)
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    words = ["the cat", "a dog", "the bird", "my fish", "sat on", "ran to", "the mat.", "a tree."]
    with open(os.path.join(work, "corpus.txt"), "w") as f:
        for i in range(3000):
            f.write(f"{words[i % 4]} {words[4 + (i // 4) % 2]} {words[6 + (i // 8) % 2]}\n")
    with open(os.path.join(work, "base.toml"), "w") as f:
        f.write(BASE.format(work=work))
    with open(os.path.join(work, "lora.toml"), "w") as f:
        f.write(LORA.format(work=work, rank=RANK, alpha=ALPHA))
    os.chdir(work)
    run([patchbay, "train", "base.toml", "--no-progress"])
    run([patchbay, "train", "lora.toml", "--no-progress"])
    run([patchbay, "export", "runs/base", "--format", "hf", "hf_base"])
    run([patchbay, "export", "runs/lora", "--merge-lora", "merged"])

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained("hf_base", dtype=torch.float32).eval()
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, bias="none",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                        "down_proj"])
    peft_model = get_peft_model(model, config).eval()
    adapters = load_file(latest_checkpoint("runs/lora"))
    layers = peft_model.base_model.model.model.layers
    loaded = 0
    for name, value in adapters.items():
        if not name.startswith("lora/") or not name.endswith("/A"):
            continue
        _, parameter, part, _ = name.split("/")
        block, suffix = parameter.split(".", 2)[1:]
        module = layers[int(block)]
        for attribute in MODULES[(suffix, part)].split("."):
            module = getattr(module, attribute)
        b = adapters[name[:-1] + "B"]
        with torch.no_grad():
            module.lora_A["default"].weight.copy_(torch.from_numpy(value.copy()))
            module.lora_B["default"].weight.copy_(torch.from_numpy(b.copy()))
        loaded += 1
    expected = 7 * len(layers)
    print(f"PEFT: {loaded} adapters set from Patchbay's checkpoint (expected {expected}); scaling "
          f"{ALPHA / RANK}", flush=True)
    ok = loaded == expected

    ids = [(7 * i + 3) % model.config.vocab_size for i in range(48)]
    pb = patchbay_logits(patchbay, "merged", ids, os.path.join(work, "merged_logits.safetensors"))
    pb_base = patchbay_logits(patchbay, "runs/base", ids, os.path.join(work, "base_logits.safetensors"))
    with torch.no_grad():
        adapted = peft_model(torch.tensor([ids])).logits[0]
        merged = peft_model.merge_and_unload()(torch.tensor([ids])).logits[0]
    moved = (pb - pb_base).abs().max().item()
    print(f"adapters move the logits by up to {moved:.3e} (the comparison below is not of two base models)")
    ok = ok and moved > 1e-3
    for label, hf in (("PEFT adapted", adapted), ("PEFT merge_and_unload", merged)):
        rel = ((pb - hf).abs().amax(dim=-1) / hf.abs().amax(dim=-1)).max().item()
        passed = rel <= LIMIT
        ok = ok and passed
        print(f"Patchbay merged vs {label}: max relative error {rel:.3e}, max abs diff "
              f"{(pb - hf).abs().max().item():.3e} over {list(pb.shape)} "
              f"{'OK' if passed else 'FAIL'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
