#!/usr/bin/env python3
"""LoRA fine-tuning of SmolLM2-135M-Instruct, Patchbay against PyTorch + PEFT, side by side.

Issue 36 item 7: the same model, sequence length, batch, threads, LoRA rank / alpha / targets,
optimizer (AdamW: lr, warmup, betas, eps, weight decay; no clipping), LoRA dropout (--dropout,
default 0) and the very same batches — token ids, loss masks, order — for --steps steps on both
sides, then tokens/s of both (and their ratio) and the two loss curves (the largest relative
difference of a step). With --dropout > 0 the two sides draw different masks, so the loss curves
are printed but not held to --loss-tolerance (the exit status ignores them).

How the two sides are made identical:
  - weights: `patchbay import GGUF WORK/smollm2` (f32, dequantised once), then
    `patchbay export WORK/smollm2 --format hf WORK/hf`: transformers loads the same f32 values;
  - batches: Patchbay trains with train.objective = "sft" on WordNet instructions
    (wordnet_instructions.py) and `patchbay train --record-batches` writes every micro-batch it
    trains on (inputs, targets with -100 where no loss is taken); the PyTorch side reads that
    file and trains on exactly those tensors, with the loss computed as Patchbay's: mean
    cross-entropy over the targets other than -100;
  - adapters: `patchbay train --checkpoint-at-start` writes the initial adapters (A drawn, B = 0)
    to checkpoints/step_0.safetensors and PEFT's lora_A / lora_B are set to them;
  - optimizer: torch.optim.AdamW with the same lr, betas, eps and weight decay, the learning rate
    of each update set as Patchbay's schedule gives it (linear warmup from 0, then constant).
The sides are interleaved: Patchbay trains --chunks pieces of the run (a fresh run, then
`train --resume` with a larger train.max_steps; a LoRA resume is bit-identical, and a constant
schedule after warmup does not depend on max_steps), and after each piece PyTorch trains the same
steps, so load on a shared machine falls on both alike. Tokens/s counts batch x seq_len per step
(padding included: both sides compute on the same [batch, seq_len] tensor), timed per step —
Patchbay's from metrics.jsonl (log_every = 1: forward, backward, update), PyTorch's around
forward, backward, update — leaving out the first --skip steps of each piece (warm-up; for
Patchbay each piece is a new process).

    /work/.venvs/torch/bin/python scripts/finetune/bench_lora_peft.py --patchbay build/patchbay \\
        --gguf /work/.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf [--work data/bench_lora_peft]

Writes WORK/result.json (figures, per-step losses and times) and prints a summary; exit status
1 when the loss curves differ by more than --loss-tolerance. Needs torch, transformers, peft,
safetensors (a venv under /work/.venvs; not part of CI). bench_lora_peft.sh wraps it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# Hugging Face module name -> Patchbay [train.lora] target, and the adapter's checkpoint name.
TARGETS = {
    "q_proj": ("attention.q", "attn.qkv.weight/q", "self_attn"),
    "k_proj": ("attention.k", "attn.qkv.weight/k", "self_attn"),
    "v_proj": ("attention.v", "attn.qkv.weight/v", "self_attn"),
    "o_proj": ("attention.o", "attn.proj.weight/all", "self_attn"),
    "gate_proj": ("mlp.gate", "ffn.gate.weight/all", "mlp"),
    "up_proj": ("mlp.up", "ffn.fc.weight/all", "mlp"),
    "down_proj": ("mlp.down", "ffn.proj.weight/all", "mlp"),
}

CONFIG = """# Written by scripts/finetune/bench_lora_peft.py.
include = ["{base}/config.toml"]
[run]
name = "lora"
output_dir = "{work}/runs"
[data]
corpus = "{data}/train.jsonl"
output_dir = "{work}/prepared"
[train]
init_from = "{base}"
out_dir = "{work}/runs/lora"
objective = "sft"
seq_len = {seq_len}
batch_size = {batch}
grad_accum_steps = 1
max_steps = {steps}
lr = {lr}
schedule = "constant"
warmup_steps = {warmup}
min_lr = 0.0
grad_clip = 0.0
eval_every = 0
eval_batches = 1
checkpoint_every = 0
log_every = 1
sample_tokens = 0
precision = "f32"
[optimizer]
kind = "adamw"
[optimizer.adamw]
beta1 = {beta1}
beta2 = {beta2}
eps = {eps}
weight_decay = {weight_decay}
[train.sft]
data = "{data}/train.jsonl"
validation_data = "{data}/val.jsonl"
template = "auto"
overlong = "truncate"
[train.lora]
rank = {rank}
alpha = {alpha}
dropout = {dropout}
targets = [{targets}]
"""


def run(cmd, env=None, quiet=True):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL if quiet else None)


def learning_rate(args, step):
    """Patchbay's constant schedule with linear warmup (core/train/lr_schedule.hpp): update
    number step + 1 (step = updates already done)."""
    if args.warmup > 0 and step < args.warmup:
        return args.lr * step / args.warmup
    return args.lr


def prepare(args, patchbay):
    base, hf, data = (os.path.join(args.work, name) for name in ("smollm2", "hf", "wordnet"))
    if not os.path.exists(os.path.join(base, "checkpoints", "latest")):
        run([patchbay, "import", args.gguf, base])
    if not os.path.exists(os.path.join(hf, "model.safetensors")):
        run([patchbay, "export", base, "--format", "hf", hf])
    if not os.path.exists(os.path.join(data, "train.jsonl")):
        here = os.path.dirname(os.path.abspath(__file__))
        run([sys.executable, os.path.join(here, "wordnet_instructions.py"), "--out", data])
    targets = ", ".join(f'"{TARGETS[t][0]}"' for t in args.targets)
    config = os.path.join(args.work, "lora.toml")
    with open(config, "w") as f:
        f.write(CONFIG.format(base=base, work=args.work, data=data, seq_len=args.seq_len,
                              batch=args.batch, steps=args.steps, lr=args.lr, warmup=args.warmup,
                              beta1=args.betas[0], beta2=args.betas[1], eps=args.eps,
                              weight_decay=args.weight_decay, rank=args.rank, alpha=args.alpha,
                              dropout=args.dropout, targets=targets))
    return hf, config


def patchbay_piece(args, patchbay, config, end, first):
    """Trains Patchbay up to step `end` (a fresh run, or a resume of the last piece)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    tokenizer = os.path.join(args.work, "smollm2", "tokenizer.txt")
    cmd = [patchbay, "train", config, "--no-progress", "--set", f"train.max_steps={end}",
           "--set", f'tokenizer.file="{tokenizer}"',
           "--record-batches", os.path.join(args.work, "batches.jsonl")]
    cmd += ["--checkpoint-at-start", "--overwrite"] if first else [
        "--resume", os.path.join(args.work, "runs", "lora")]
    run(cmd, env=env)


def patchbay_steps(args):
    """{step (1-based): (loss, seconds)} from the run's metrics.jsonl."""
    tokens = args.batch * args.seq_len
    steps = {}
    with open(os.path.join(args.work, "runs", "lora", "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record and "tokens_per_second" in record:
                steps[record["step"]] = (record["loss"], tokens / record["tokens_per_second"])
    return steps


def read_batches(path):
    import torch
    batches = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            assert record["micro"] == 0, "grad_accum_steps = 1 here"
            batches[record["step"]] = (torch.tensor(record["inputs"], dtype=torch.long),
                                       torch.tensor(record["targets"], dtype=torch.long))
    return batches


def peft_model(args, hf):
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    model.config.use_cache = False
    config = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=args.dropout, bias="none",
                        target_modules=list(args.targets))
    model = get_peft_model(model, config)
    start = load_file(os.path.join(args.work, "runs", "lora", "checkpoints", "step_0.safetensors"))
    layers = model.base_model.model.model.layers
    set_count = 0
    for i, layer in enumerate(layers):
        for target in args.targets:
            _, name, block = TARGETS[target]
            module = getattr(getattr(layer, block), target)
            prefix = f"lora/blocks.{i}.{name}/"
            with torch.no_grad():
                module.lora_A["default"].weight.copy_(torch.from_numpy(start[prefix + "A"].copy()))
                module.lora_B["default"].weight.copy_(torch.from_numpy(start[prefix + "B"].copy()))
            set_count += 1
    assert set_count == len(layers) * len(args.targets)
    model.train()
    trained = [p for p in model.parameters() if p.requires_grad]
    print(f"PEFT: {set_count} adapters set from Patchbay's step_0 checkpoint, "
          f"{sum(p.numel() for p in trained)} trained values", flush=True)
    optimizer = torch.optim.AdamW(trained, lr=args.lr, betas=tuple(args.betas), eps=args.eps,
                                  weight_decay=args.weight_decay)
    return model, optimizer


def torch_piece(args, model, optimizer, batches, begin, end, out):
    import torch
    import torch.nn.functional as F
    for step in range(begin, end):
        inputs, targets = batches[step]
        start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(args, step)
        logits = model(input_ids=inputs, use_cache=False).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=-100)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        out[step + 1] = (loss.item(), time.perf_counter() - start)


def summarize(args, torch_steps, timed, done, final):
    """Figures over steps 1..done (both sides), written to WORK/result.json after every piece
    (so a sitting cut short still leaves its figures) and printed."""
    import torch
    pb_steps = patchbay_steps(args)
    tokens = args.batch * args.seq_len
    steps = list(range(1, done + 1))
    timed = sorted(s for s in timed if s <= done)
    rel = [abs(pb_steps[s][0] - torch_steps[s][0]) / abs(torch_steps[s][0]) for s in steps]
    worst = max(range(len(steps)), key=lambda i: rel[i])
    pb_time = sum(pb_steps[s][1] for s in timed)
    pt_time = sum(torch_steps[s][1] for s in timed)
    pb_tps, pt_tps = tokens * len(timed) / pb_time, tokens * len(timed) / pt_time
    pb_median = tokens / statistics.median(pb_steps[s][1] for s in timed)
    pt_median = tokens / statistics.median(torch_steps[s][1] for s in timed)
    batches = read_batches(os.path.join(args.work, "batches.jsonl"))
    loss_targets = sum(int((batches[s - 1][1] != -100).sum()) for s in steps)
    result = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to f32)",
        "steps": done, "planned_steps": args.steps, "batch": args.batch,
        "seq_len": args.seq_len, "threads": args.threads, "rank": args.rank,
        "alpha": args.alpha, "dropout": args.dropout, "targets": args.targets, "lr": args.lr, "warmup": args.warmup,
        "betas": args.betas, "eps": args.eps, "weight_decay": args.weight_decay,
        "chunks": args.chunks, "timed_steps": len(timed), "loss_targets": loss_targets,
        "omp_wait_policy": args.omp_wait_policy,
        "torch": torch.__version__,
        "patchbay_tokens_per_second": pb_tps, "torch_tokens_per_second": pt_tps,
        "ratio": pb_tps / pt_tps,
        "patchbay_median_tokens_per_second": pb_median,
        "torch_median_tokens_per_second": pt_median,
        "max_relative_loss_difference": rel[worst], "at_step": steps[worst],
        "patchbay": {s: pb_steps[s] for s in steps}, "pytorch": {s: torch_steps[s] for s in steps},
    }
    with open(os.path.join(args.work, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"{'' if final else '(so far) '}{done} steps of {args.batch} x {args.seq_len} tokens, "
          f"{args.threads} threads, LoRA rank {args.rank} alpha {args.alpha} dropout "
          f"{args.dropout:g} on "
          f"{'/'.join(args.targets)}, {loss_targets} loss targets in all; timed {len(timed)} "
          f"steps ({args.chunks} interleaved pieces, first {args.skip} of each untimed)")
    if final:
        print("step   patchbay loss   pytorch loss   rel diff")
        for s in sorted(set([1, 2, 5, 10] + list(range(20, done + 1, 20)) + [done])):
            print(f"{s:4d}   {pb_steps[s][0]:13.6f}   {torch_steps[s][0]:12.6f}   {rel[s - 1]:.2e}")
    ok = rel[worst] <= args.loss_tolerance
    verdict = ("not compared: dropout masks differ between the sides" if args.dropout > 0
               else ("within " if ok else "OVER ") + f"{args.loss_tolerance:g}")
    print(f"loss curves: max relative difference {rel[worst]:.3e} at step {steps[worst]} "
          f"({verdict})")
    print(f"tokens/s: Patchbay {pb_tps:.1f} (median step {pb_median:.1f}), PyTorch + PEFT "
          f"{pt_tps:.1f} (median step {pt_median:.1f}); ratio {pb_tps / pt_tps:.2f}x", flush=True)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--patchbay", required=True)
    p.add_argument("--gguf", default="/work/.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--work", default="data/bench_lora_peft")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--chunks", type=int, default=4, help="interleaved pieces of the run")
    p.add_argument("--skip", type=int, default=2, help="untimed warm-up steps of each piece")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=96)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--targets", nargs="+", default=["q_proj", "v_proj"], choices=sorted(TARGETS))
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--betas", type=float, nargs=2, default=[0.9, 0.999])
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--dropout", type=float, default=0.0,
                   help="LoRA dropout on both sides ([train.lora] dropout, PEFT lora_dropout)")
    p.add_argument("--loss-tolerance", type=float, default=0.01)
    p.add_argument("--omp-wait-policy", choices=["default", "passive", "active"], default="default",
                   help="OMP_WAIT_POLICY of both sides (both use GNU libgomp): on a machine shared "
                   "with other jobs, spinning threads waste their turns, so 'passive' there")
    args = p.parse_args()
    if args.omp_wait_policy != "default":  # before torch loads libgomp; inherited by Patchbay
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    patchbay = os.path.abspath(args.patchbay)

    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    hf, config = prepare(args, patchbay)
    bounds = [round(args.steps * c / args.chunks) for c in range(args.chunks + 1)]
    model = optimizer = None
    torch_steps = {}
    timed = set()
    for c in range(args.chunks):
        begin, end = bounds[c], bounds[c + 1]
        patchbay_piece(args, patchbay, config, end, first=c == 0)
        if model is None:
            model, optimizer = peft_model(args, hf)
        batches = read_batches(os.path.join(args.work, "batches.jsonl"))
        torch_piece(args, model, optimizer, batches, begin, end, torch_steps)
        timed.update(range(begin + 1 + args.skip, end + 1))
        print(f"piece {c + 1}/{args.chunks}: steps {begin + 1}..{end}", flush=True)
        summary = summarize(args, torch_steps, timed, end, final=c + 1 == args.chunks)
    if args.dropout > 0:
        return 0
    return 0 if summary["max_relative_loss_difference"] <= args.loss_tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
