#!/usr/bin/env python3
"""The PyTorch side of the GPT-2 124M speed comparison (issue 34): a plain GPT-2 (12 layers,
12 heads, 768 wide, vocabulary 50257, T = 1024, tied embeddings, GELU tanh, pre-norm), trained
on random tokens in bf16 autocast with fused AdamW, eager and optionally torch.compile.
Prints one JSON line per mode: tokens/s (median over the timed steps) and MFU against the
card's dense bf16 peak. Same shape as Patchbay's GPT-2 124M config, so the two figures sit side
by side (scripts/gpu/device_check.sh, stage gpt2_speed).
Usage: torch_gpt2.py [--batch 8] [--steps 10] [--compile]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Dense bf16 tensor-core peaks (TFLOP/s), for MFU.
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.fc_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        batch, steps, width = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(batch, steps, width))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, steps=1024, layers=12, heads=12, width=768):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(steps, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.token.weight  # tied, as GPT-2

    def forward(self, ids, targets):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.token(ids) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def run(mode, batch, steps, warmup):
    torch.manual_seed(0)
    model = GPT2().cuda()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    step_function = model
    if mode == "compile":
        step_function = torch.compile(model)
    ids = torch.randint(0, 50257, (batch, 1024), device="cuda")
    targets = torch.randint(0, 50257, (batch, 1024), device="cuda")
    times, losses = [], []
    for step in range(warmup + steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_function(ids, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())  # synchronises
        if step >= warmup:
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    tokens_per_second = batch * 1024 / seconds
    # Training FLOPs per token: 6 N for the weights plus the attention scores
    # (12 * layers * T * width, PaLM appendix B, causal masking not discounted).
    flops_per_token = 6 * parameters + 12 * 12 * 1024 * 768
    name = torch.cuda.get_device_name(0)
    peak = next((value for key, value in PEAK_BF16_TFLOPS.items() if key in name), float("nan"))
    print(json.dumps({"op": "gpt2_124m_train", "impl": f"torch_{mode}", "device": name,
                      "batch": batch, "T": 1024, "parameters": parameters,
                      "step_ms": round(seconds * 1e3, 2),
                      "tokens_per_second": round(tokens_per_second),
                      "mfu": round(flops_per_token * tokens_per_second / (peak * 1e12), 4),
                      "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4),
                      "expected_initial_loss": round(math.log(50257), 4)}), flush=True)
    del model, optimizer, step_function
    torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--compile", action="store_true")
    arguments = parser.parse_args()
    run("eager", arguments.batch, arguments.steps, arguments.warmup)
    if arguments.compile:
        run("compile", arguments.batch, arguments.steps, arguments.warmup)


if __name__ == "__main__":
    main()
