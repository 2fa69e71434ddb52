#!/usr/bin/env python3
"""Compare Patchbay on an imported GGUF model with transformers loading the same GGUF file.

transformers dequantises the file itself (gguf-py's numpy code) into a LlamaForCausalLM; Patchbay
imports it with `patchbay import FILE.gguf RUN/` (its own reader and dequantisation). For each
prompt: the tokenizer ids (`patchbay logits --text` vs transformers' tokenizer from the GGUF with
the pre-tokenizer that tokenizer.ggml.pre names restored: transformers' GGUF converter writes a
plain ByteLevel and drops SmolLM2's digit split, which llama.cpp and the original tokenizer.json
have; whether the unrestored ids differ is printed too), the logits on transformers' ids (max relative error = max over positions of max|P - H| / max|H|,
and max abs diff), then the greedy continuation of the first prompt (`patchbay generate
--temperature 0 --no-stop` vs generate(do_sample=False)) and, for show, a chat-formatted answer
(the GGUF's chat template rendered by transformers). Exit status 1 when a check fails.

  python check_gguf_logits.py --patchbay build/patchbay --gguf FILE.gguf --run RUN [--import]

Needs torch, transformers, gguf, safetensors (a venv under /work/.venvs; not part of CI).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.numpy import load_file
from tokenizers import pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer

LIMIT = 1e-4
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "In 1969, 3 astronauts flew to the Moon; the mission was called",
    "<|im_start|>user\nWhat does the word 'ephemeral' mean?<|im_end|>\n<|im_start|>assistant\n",
]


def patchbay_logits(patchbay, run, ids=None, text=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.safetensors")
        cmd = [patchbay, "logits", run, "--out", out]
        cmd += ["--ids", ",".join(map(str, ids))] if ids is not None else ["--text", text]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        t = load_file(out)
        return t["ids"].tolist(), torch.from_numpy(t["logits"].copy())


def patchbay_generate(patchbay, run, prompt, n, extra=()):
    r = subprocess.run([patchbay, "generate", run, "--prompt", prompt, "-n", str(n), "--temperature", "0",
                        *extra], check=True, capture_output=True)
    return r.stdout.decode("utf-8", errors="replace").rstrip("\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--patchbay", required=True)
    p.add_argument("--gguf", required=True)
    p.add_argument("--run", required=True, help="the imported run (created with --import)")
    p.add_argument("--import", dest="do_import", action="store_true", help="run `patchbay import` first")
    p.add_argument("--new-tokens", type=int, default=30)
    a = p.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "2"))))
    if a.do_import:
        subprocess.run([a.patchbay, "import", a.gguf, a.run, "--overwrite"], check=True)
    ok = True

    def report(name, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"{name}: {detail} {'OK' if passed else 'FAIL'}", flush=True)

    folder, name = os.path.split(os.path.abspath(a.gguf))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    reference = AutoTokenizer.from_pretrained(folder, gguf_file=name)  # llama.cpp's "smollm" split
    reference.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    cfg = model.config
    print(f"transformers {type(model).__name__} from {name}: {cfg.num_hidden_layers} layers, width "
          f"{cfg.hidden_size}, heads {cfg.num_attention_heads}/{cfg.num_key_value_heads} kv, vocab "
          f"{cfg.vocab_size}, rope_theta {getattr(cfg, 'rope_theta', None)}, "
          f"{sum(t.numel() for t in model.parameters())} parameters", flush=True)

    worst_rel = 0.0
    for i, prompt in enumerate(PROMPTS):
        # `patchbay logits --text` encodes special-token texts as ordinary text (allow_special 0):
        # compare with transformers doing the same; the logits then use transformers' usual ids.
        as_text = dict(add_special_tokens=False, split_special_tokens=True)
        hf_ids = reference(prompt, **as_text)["input_ids"]
        plain_ids = tok(prompt, **as_text)["input_ids"]
        pb_ids, _ = patchbay_logits(a.patchbay, a.run, text=prompt)
        report(f"prompt {i} tokenizer ids", pb_ids == hf_ids,
               f"{len(pb_ids)} Patchbay, {len(hf_ids)} transformers (digit split restored), "
               f"{'identical' if pb_ids == hf_ids else 'DIFFERENT ' + str(pb_ids) + ' vs ' + str(hf_ids)}"
               f"; transformers' GGUF tokenizer as converted: "
               f"{'identical' if plain_ids == pb_ids else 'differs (no digit split)'}")
        ids = reference(prompt, add_special_tokens=False)["input_ids"]
        _, pb = patchbay_logits(a.patchbay, a.run, ids=ids)
        with torch.no_grad():
            hf = model(torch.tensor([ids])).logits[0].float()
        rel = ((pb - hf).abs().amax(dim=-1) / hf.abs().amax(dim=-1)).max().item()
        worst_rel = max(worst_rel, rel)
        report(f"prompt {i} logits", rel <= LIMIT,
               f"max relative error {rel:.3e}, max abs diff {(pb - hf).abs().max().item():.3e} over "
               f"{list(pb.shape)} (logits range {hf.min().item():.2f}..{hf.max().item():.2f}); argmax "
               f"{'equal' if torch.equal(pb.argmax(-1), hf.argmax(-1)) else 'DIFFERS'}")
    print(f"max relative error over all prompts: {worst_rel:.3e} (limit {LIMIT:g})", flush=True)

    prompt = PROMPTS[0]
    ids = reference(prompt, add_special_tokens=False)["input_ids"]
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=a.new_tokens, do_sample=False)
    hf_text = tok.decode(out[0].tolist(), skip_special_tokens=False)
    pb_text = patchbay_generate(a.patchbay, a.run, prompt, a.new_tokens, ["--no-stop"])
    report(f"greedy {a.new_tokens} tokens", hf_text == pb_text,
           "identical" if hf_text == pb_text else f"DIFFERENT\n  transformers: {hf_text!r}")
    print(f"patchbay greedy continuation: {pb_text!r}", flush=True)

    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   tokenize=False, add_generation_prompt=True)
    pb_chat = patchbay_generate(a.patchbay, a.run, chat, 40, ["--no-stop"])
    print(f"patchbay chat-formatted greedy answer: {pb_chat!r}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
