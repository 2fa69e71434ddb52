"""The PyTorch side of the reference: the GPT a Patchbay config describes, built and trained in
plain PyTorch eager with Patchbay's rules, so the two runs differ only in the engine.

Rules copied from Patchbay (file named beside each):
- init (core/model/model_build.cpp, plugins/attention_dense, plugins/ffn_mlp): normal(0,
  init_std) for wte, wpe, qkv and fc; normal(0, init_std / sqrt(2 * n_layers)) for the two
  residual projections; biases 0, norm gains 1;
- parameter groups (core/train/param_groups.hpp): no weight decay for tensors of fewer than 2
  dims, names ending in ".bias" or containing "norm";
- learning rate (core/train/lr_schedule.cpp): step s (0-based) gets lr * s / warmup during
  warmup, then cosine / linear / constant / wsd to min_lr;
- global-norm clipping (core/train/grad_clip.cpp): scale by max / (norm + 1e-6) when norm > max;
- AdamW: torch.optim.AdamW has the same update (decoupled decay p *= 1 - lr * wd).
Only what the quickstart family uses is supported; anything else is refused by name.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def refuse(what):
    raise SystemExit(f"pytorch reference: {what} is not supported by this script (see its README)")


class Block(nn.Module):
    def __init__(self, c, heads, d_ff, act, norm_cls, eps):
        super().__init__()
        self.heads = heads
        self.norm1 = norm_cls(c, eps=eps)
        self.qkv = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.norm2 = norm_cls(c, eps=eps)
        self.act = act
        self.fc = nn.Linear(c, d_ff)
        self.gate = nn.Linear(c, d_ff) if act == "swiglu" else None
        self.mlp_proj = nn.Linear(d_ff, c)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(o.transpose(1, 2).reshape(b, t, c))

    def mlp(self, x):
        h = self.fc(x)
        if self.act == "gelu":
            h = F.gelu(h, approximate="tanh")
        elif self.act == "gelu_erf":
            h = F.gelu(h)
        elif self.act == "relu":
            h = F.relu(h)
        else:
            h = F.silu(self.gate(x)) * h
        return self.mlp_proj(h)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, cfg, vocab_size):
        super().__init__()
        m = cfg["model"]
        checks = {
            "model.positional": (m["positional"], "learned"),
            "model.norm_position": (m["norm_position"], "pre"),
            "model.residual": (m["residual"], "standard"),
            "model.attention.kind": (m["attention"]["kind"], "dense"),
            "model.feedforward.kind": (m["feedforward"]["kind"], "mlp"),
        }
        for key, (found, wanted) in checks.items():
            if found != wanted:
                refuse(f"{key} = {found!r} (only {wanted!r})")
        dense = m["attention"].get("dense", {})
        if dense.get("window", 0) or not dense.get("causal", True) or m["attention"].get("pattern"):
            refuse("a dense attention with a window, non-causal or a per-layer pattern")
        mlp = m["feedforward"].get("mlp", {})
        if not mlp.get("bias", True) or m["feedforward"].get("pattern"):
            refuse("an MLP without biases or a per-layer pattern")
        if m["dropout"] > 0 or dense.get("dropout", 0) > 0 or mlp.get("dropout", 0) > 0:
            refuse("dropout")
        if m.get("embedding_scale", "auto") not in ("auto", 1, 1.0):
            refuse("model.embedding_scale other than auto/1")
        c, layers = m["d_model"], m["n_layers"]
        d_ff = m["d_ff"] or 4 * c
        norm_cls = nn.LayerNorm if m["norm"] == "layernorm" else nn.RMSNorm
        self.tied = m["tie_embeddings"]
        self.wte = nn.Embedding(vocab_size, c)
        self.wpe = nn.Embedding(m["context_length"], c)
        self.blocks = nn.ModuleList(
            Block(c, m["n_heads"], d_ff, mlp.get("activation", "gelu"), norm_cls, m["norm_eps"]) for _ in range(layers)
        )
        self.norm_f = norm_cls(c, eps=m["norm_eps"])
        self.head = None if self.tied else nn.Linear(c, vocab_size, bias=False)
        std = m["init_std"]
        residual_std = std / math.sqrt(2.0 * layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            elif name.endswith("attn_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, residual_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe.weight[:t]
        for block in self.blocks:
            x = block(x)
        x = self.norm_f(x)
        return F.linear(x, self.wte.weight if self.tied else self.head.weight)


def learning_rate(t, s):
    """core/train/lr_schedule.cpp learning_rate, for train config t at step s."""
    lr, min_lr, warmup, total = t["lr"], t["min_lr"], t["warmup_steps"], t["max_steps"]
    if s < warmup:
        return lr * s / warmup
    kind = t["schedule"]
    if kind == "constant":
        return lr
    if kind not in ("cosine", "linear"):
        refuse(f"train.schedule = {kind!r}")
    if s >= total:
        return min_lr
    r = (s - warmup) / (total - warmup)
    f = 0.5 * (1.0 + math.cos(math.pi * r)) if kind == "cosine" else 1.0 - r
    return min_lr + (lr - min_lr) * f


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or name.endswith(".bias") or "norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@torch.no_grad()
def evaluate(model, val, t, specials, id_map):
    total, count = 0.0, 0
    for b in range(t["eval_batches"]):
        x, y = val.validation_batch(b, t["eval_batches"], t["batch_size"], t["seq_len"])
        x, y = id_map[x], id_map[y]
        y = np.where(np.isin(y, specials), -100, y)
        logits = model(torch.from_numpy(x))
        target = torch.from_numpy(y)
        total += F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1), reduction="sum",
                                 ignore_index=-100).item()
        count += int((target != -100).sum())
    return total / count


def train_torch(cfg, train, val, specials, vocab_mode, threads, log):
    """Trains the config's model; returns dict(train=[(step, loss)], val=[(step, loss)],
    train_seconds, tokens, vocab)."""
    torch.set_num_threads(threads)
    torch.manual_seed(cfg["model"]["seed"])
    t, opt_cfg = cfg["train"], cfg["optimizer"]
    if opt_cfg["kind"] != "adamw" or opt_cfg["adamw"].get("amsgrad"):
        refuse(f"optimizer {opt_cfg['kind']!r} (only adamw without amsgrad)")
    if t.get("grad_accum_steps", 1) != 1:
        refuse("train.grad_accum_steps > 1")
    vocab = int(train.vocab_size)
    id_map = np.arange(vocab, dtype=np.int64)
    if vocab_mode == "used":  # compact the embedding to the ids the splits use
        used = np.union1d(np.unique(np.asarray(train.ids)), np.unique(np.asarray(val.ids)))
        id_map = np.full(vocab, -1, dtype=np.int64)
        id_map[used] = np.arange(len(used))
        specials = [int(id_map[s]) for s in specials if id_map[s] >= 0]
        vocab = len(used)
    model = GPT(cfg, vocab)
    a = opt_cfg["adamw"]
    opt = torch.optim.AdamW(param_groups(model, a["weight_decay"]), lr=t["lr"], betas=(a["beta1"], a["beta2"]),
                            eps=a["eps"])
    seed, rows, seq_len, clip = cfg["run"]["seed"], t["batch_size"], t["seq_len"], t["grad_clip"]
    result = {"train": [], "val": [], "train_seconds": 0.0, "tokens": 0, "vocab": vocab}
    for step in range(t["max_steps"]):
        start = time.perf_counter()
        x, y = train.training_batch(seed, step, rows, seq_len)
        x, y = torch.from_numpy(id_map[x]), torch.from_numpy(id_map[y])
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        lr = learning_rate(t, step)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_value = loss.item()
        result["train_seconds"] += time.perf_counter() - start
        result["tokens"] += rows * seq_len
        done = step + 1
        if done % t["log_every"] == 0 or done == t["max_steps"]:
            result["train"].append((done, loss_value))
        if (t["eval_every"] > 0 and done % t["eval_every"] == 0) or done == t["max_steps"]:
            model.eval()
            v = evaluate(model, val, t, specials, id_map)
            model.train()
            result["val"].append((done, v))
            log(f"torch step {done}: val loss {v:.4f} ({result['tokens'] / result['train_seconds']:.0f} tokens/s)")
    return result
