#!/usr/bin/env python3
"""Prints Patchbay's kernels/cuda figures beside PyTorch's from the same GPU and run.
Usage: compare_bench.py PATCHBAY_JSONL TORCH_JSONL  (the outputs of cuda_kernels_bench and
torch_bench.py). Needs only the Python standard library."""
import json
import sys


def read(path):
    rows = []
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def main():
    ours, theirs = read(sys.argv[1]), read(sys.argv[2])
    for row in theirs:
        if "environment" in row:
            print("torch environment:", row["environment"])
    print("\nGEMM (x @ W^T), TFLOP/s")
    print(f"{'shape':<14}{'precision':<10}{'m x n x k':<22}{'patchbay':>10}{'torch':>10}{'ratio':>8}")
    torch_gemm = {(r["name"], r["precision"]): r for r in theirs if r.get("op") == "gemm"}
    for row in (r for r in ours if r.get("op") == "gemm"):
        other = torch_gemm.get((row["name"], row["precision"]), {})
        ratio = row["tflops"] / other["tflops"] if other.get("tflops") else float("nan")
        print(f"{row['name']:<14}{row['precision']:<10}{row['m']}x{row['n']}x{row['k']:<12}"
              f"{row['tflops']:>10.1f}{other.get('tflops', float('nan')):>10.1f}{ratio:>8.2f}")
    print("\nCausal attention, forward+backward TFLOP/s (forward in brackets)")
    print(f"{'T':>6}{'D':>5}{'B*H':>6}{'patchbay f32':>18}{'torch f32':>18}"
          f"{'patchbay bf16':>18}{'torch bf16':>18}{'bf16 ratio':>11}")
    torch_attention = {(r["T"], r["D"], r["precision"]): r for r in theirs if r.get("op") == "attention"}

    def cell(row):
        if not row:
            return f"{'-':>18}"
        if "error" in row:
            return f"{'error':>18}"
        return f"{row['forward_backward_tflops']:>9.1f} ({row['forward_tflops']:>5.1f})"

    ours_attention = {(r["T"], r["D"], r.get("precision", "f32")): r
                      for r in ours if r.get("op") == "attention"}
    for (steps, dim, precision), row in ours_attention.items():
        if precision != "f32":
            continue
        key = (steps, dim)
        bf16_ours = ours_attention.get(key + ("bf16",))
        bf16_torch = torch_attention.get(key + ("bf16",))
        ratio = (bf16_ours["forward_backward_tflops"] / bf16_torch["forward_backward_tflops"]
                 if bf16_ours and bf16_torch and bf16_torch.get("forward_backward_tflops")
                 else float("nan"))
        print(f"{steps:>6}{dim:>5}{row['batch_heads']:>6}{cell(row)}"
              f"{cell(torch_attention.get(key + ('f32',)))}{cell(bf16_ours)}{cell(bf16_torch)}"
              f"{ratio:>11.2f}")

    misc = [r for r in ours if r.get("op") == "misc"]
    if misc:
        print("\nIndexing and linear attention, ms (lower is better; torch has no linear attention)")
        print(f"{'name':<38}{'patchbay':>10}{'torch':>10}{'ratio':>8}")
        torch_misc = {r["name"]: r for r in theirs if r.get("op") == "misc"}
        for row in misc:
            other = torch_misc.get(row["name"], {}).get("ms")
            ratio = row["ms"] / other if other else float("nan")
            print(f"{row['name']:<38}{row['ms']:>10.3f}"
                  f"{other if other else float('nan'):>10.3f}{ratio:>8.2f}")


if __name__ == "__main__":
    main()
