"""GPT-2 124M training throughput in plain PyTorch eager, f32 and bf16 autocast, one after the
other in one process: the PyTorch side of `patchbay bench train configs/gpt2-124m.toml
--batch-size 4 --seq-len 64 --random-tokens --precision f32,bf16`.

    /work/.venvs/torch/bin/python scripts/pytorch_reference/gpt2_bf16_bench.py \
        [--threads 2] [--steps 5] [--warmup 1] [--batch-size 4] [--seq-len 64]

Not part of CI. Needs torch (any venv: pass its python, or create one with
`python3 -m venv V && V/bin/pip install torch`).

The model matches the Patchbay config: 12 layers, width 768, 12 heads, d_ff 3072, learned
positions, pre-LayerNorm, tanh-GELU MLP, tied embeddings, vocabulary 50257, no dropout;
AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices), gradient clipping at 1.0.
A timed step is what `bench train` times: forward + loss, backward, clipping, optimizer.
bf16 runs the forward and loss under torch.autocast("cpu", dtype=torch.bfloat16), with f32
master weights and optimizer state (PyTorch's standard CPU mixed precision).
Random token ids, as `bench train --random-tokens`.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        for lin in (self.proj, self.down):  # GPT-2: residual projections scaled by 1/sqrt(2 L)
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * n_layers))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)  # noqa: E731
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50257, context=1024, n_layers=12, d_model=768, n_heads=12, d_ff=3072):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff, n_layers) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        for m in self.modules():
            if isinstance(m, nn.Linear) and m not in [b.proj for b in self.blocks] + [b.down for b in self.blocks]:
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, targets):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied embedding
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def time_steps(model, optimizer, args, precision, generator):
    seconds = 0.0
    for step in range(args.warmup + args.steps):
        ids = torch.randint(0, 50257, (args.batch_size, args.seq_len + 1), generator=generator)
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(ids[:, :-1], ids[:, 1:])
        loss.item()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= args.warmup:
            seconds += time.perf_counter() - start
    return args.steps * args.batch_size * args.seq_len / seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--precision", default="f32,bf16", help="f32, bf16 or f32,bf16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), foreach=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, {args.threads} threads, {params} parameters, "
          f"batch {args.batch_size} x {args.seq_len}, mkldnn bf16 {torch.ops.mkldnn._is_mkldnn_bf16_supported()}")
    generator = torch.Generator().manual_seed(1)
    rates = {}
    for precision in args.precision.split(","):
        rates[precision] = time_steps(model, optimizer, args, precision, generator)
        print(f"{precision}: {rates[precision]:.1f} tokens/s ({args.steps} timed steps)")
    if "f32" in rates and "bf16" in rates:
        print(f"bf16 autocast / f32: {rates['bf16'] / rates['f32']:.2f}x")


if __name__ == "__main__":
    main()
