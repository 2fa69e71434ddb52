#!/usr/bin/env python3
"""PyTorch's figures for the shapes of kernels/cuda/tools/cuda_kernels_bench.cpp, on the same GPU
in the same run: torch.matmul (x @ w.T, bf16 and TF32) and scaled_dot_product_attention (causal,
forward and forward + backward, f32 and bf16). One JSON object per line, the same keys as the
Patchbay benchmark, "impl": "torch". Timing: CUDA events, warm-up first, median of the repeats,
random normal inputs. Usage: python3 torch_bench.py [--quick]
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def median_ms(function, warmup, repeats):
    for _ in range(warmup):
        function()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def bench_gemm(name, m, n, k, precision, quick):
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    ms = median_ms(lambda: torch.matmul(x, w.t()), 3, 5 if quick else 20)
    print(json.dumps({"op": "gemm", "impl": "torch", "name": name, "precision": precision,
                      "m": m, "n": n, "k": k, "ms": round(ms, 4),
                      "tflops": round(2.0 * m * n * k / (ms * 1e9), 2)}), flush=True)


def bench_attention(batch_heads, steps, dim, precision, quick):
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    shape = (1, batch_heads, steps, dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=dtype)
    repeats = 3 if quick or steps >= 8192 else 10

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward_backward():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(dout)

    try:
        forward_ms = median_ms(forward, 1, repeats)
        both_ms = median_ms(forward_backward, 1, repeats)
    except RuntimeError as error:  # e.g. out of memory for the f32 math path at long T
        print(json.dumps({"op": "attention", "impl": "torch", "precision": precision,
                          "batch_heads": batch_heads, "T": steps, "D": dim,
                          "error": str(error).splitlines()[0]}), flush=True)
        torch.cuda.empty_cache()
        return
    flops = 2.0 * batch_heads * steps * steps * dim
    print(json.dumps({"op": "attention", "impl": "torch", "precision": precision,
                      "batch_heads": batch_heads, "T": steps, "D": dim,
                      "forward_ms": round(forward_ms, 3), "forward_backward_ms": round(both_ms, 3),
                      "forward_tflops": round(flops / (forward_ms * 1e9), 2),
                      "forward_backward_tflops": round(3.5 * flops / (both_ms * 1e9), 2)}),
          flush=True)


def bench_misc(quick):
    """The indexing and linear-attention figures of cuda_kernels_bench, by the same names."""
    repeats = 5 if quick else 20
    logits = torch.randn(8, 50257, device="cuda")
    rows = [("topk50_8x50257", lambda: torch.topk(logits, 50, dim=-1)),
            ("sort_8x50257", lambda: torch.sort(logits, dim=-1, descending=True, stable=True))]
    tokens, routed, width = 8192, 16384, 768
    src = torch.randn(routed, width, device="cuda")
    index = torch.randint(0, tokens, (routed, 1), device="cuda").expand(routed, width).contiguous()
    target = torch.zeros(tokens, width, device="cuda")
    rows.append(("scatter_add_16384x768_into_8192", lambda: target.scatter_add(0, index, src)))
    rows.append(("gather_16384x768_from_8192", lambda: torch.gather(target, 0, index)))
    for name, run in rows:
        print(json.dumps({"op": "misc", "impl": "torch", "name": name,
                          "ms": round(median_ms(run, 2, repeats), 4)}), flush=True)


def main():
    quick = "--quick" in sys.argv
    torch.manual_seed(0)
    print(json.dumps({"environment": {"torch": torch.__version__, "cuda": torch.version.cuda,
                                      "device": torch.cuda.get_device_name(0)}}), flush=True)
    tokens = 8 * 1024
    for precision in ("bf16", "tf32"):
        bench_gemm("gpt2_qkv", tokens, 2304, 768, precision, quick)
        bench_gemm("gpt2_proj", tokens, 768, 768, precision, quick)
        bench_gemm("gpt2_fc", tokens, 3072, 768, precision, quick)
        bench_gemm("gpt2_fcproj", tokens, 768, 3072, precision, quick)
        bench_gemm("square8192", 8192, 8192, 8192, precision, quick)
    for dim in (64, 128):
        for steps in (1024, 4096, 16384):
            if quick and steps > 4096:
                continue
            for precision in ("f32", "bf16"):
                bench_attention(max(4, 65536 // steps), steps, dim, precision, quick)
    bench_misc(quick)


if __name__ == "__main__":
    main()
