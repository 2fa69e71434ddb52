"""Trains one Patchbay config twice — with `patchbay train` and in plain PyTorch eager — on the
same prepared data, and prints both runs' training tokens/s and validation loss in one table.

    python scripts/pytorch_reference/compare.py configs/quickstart.toml [--set k=v ...]

Both sides count tokens/s the same way: tokens of the training steps divided by the seconds
spent inside them (batch assembly, forward, loss, backward, clipping, optimizer), evaluations
excluded (Patchbay: metrics.jsonl `train_seconds`). Checkpoints and samples are off on the
Patchbay side. Both runs use --threads threads (OMP_NUM_THREADS / torch.set_num_threads) and
run one after the other. Writes OUT.csv (curves) and, when gnuplot is on the PATH, OUT.png.
See README.md beside this file.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import patchbay_side as pb  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="override, as for patchbay")
    ap.add_argument("--patchbay", default=os.environ.get("PATCHBAY_BIN", "build/patchbay"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nice", type=int, default=0, help="run both sides under nice -n N")
    ap.add_argument("--run-name", default="pytorch_reference_patchbay")
    ap.add_argument("--skip-patchbay", action="store_true",
                    help="reuse the Patchbay run already in runs/RUN_NAME (same config and --set)")
    ap.add_argument("--torch-vocab", choices=["full", "used"], default="full",
                    help="full: the tokenizer's vocabulary, as Patchbay; used: only the ids the data uses")
    ap.add_argument("--out", default="runs/pytorch_reference",
                    help="prefix of the CSV and PNG written (default under runs/, which git ignores)")
    args = ap.parse_args()

    if args.nice and os.nice(0) < args.nice:
        os.nice(args.nice - os.nice(0))
    import torch  # noqa: F401  (fail early, before the long Patchbay run)

    import torch_side

    cfg = pb.resolved_config(args.patchbay, args.config, args.sets + [f"run.name={args.run_name}"])
    if args.skip_patchbay:
        run_dir = os.path.join(cfg["run"]["output_dir"], args.run_name)
    else:
        run_dir = pb.train_patchbay(args.patchbay, args.config, args.sets, args.run_name, args.threads, 0)
    p_train, p_val = pb.read_metrics(run_dir)
    if not p_train or "train_seconds" not in p_train[-1]:
        raise SystemExit(f"{run_dir}/metrics.jsonl has no train_seconds (a Patchbay older than this script?)")
    train, val = pb.find_caches(cfg, run_dir)
    specials = pb.special_ids(cfg, run_dir)
    t = cfg["train"]
    p_tokens = p_train[-1]["tokens"]
    p_seconds = p_train[-1]["train_seconds"]

    print(f"+ pytorch eager, {args.threads} threads, vocab {args.torch_vocab}", flush=True)
    r = torch_side.train_torch(cfg, train, val, specials, args.torch_vocab, args.threads,
                               lambda m: print(m, flush=True))

    p_final = p_val[-1]["val_loss"]
    t_final = r["val"][-1][1]
    p_rate = p_tokens / p_seconds
    t_rate = r["tokens"] / r["train_seconds"]
    load = os.getloadavg()
    print()
    print(f"config {args.config} {' '.join('--set ' + s for s in args.sets)}")
    print(f"{t['max_steps']} steps of {t['batch_size']} x {t['seq_len']} tokens, {args.threads} threads, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"| run | vocab rows | train s | tokens/s | final val loss |")
    print(f"|---|---|---|---|---|")
    print(f"| patchbay | {train.vocab_size} | {p_seconds:.1f} | {p_rate:.0f} | {p_final:.4f} |")
    print(f"| pytorch {torch_side.torch.__version__} eager | {r['vocab']} | {r['train_seconds']:.1f} | "
          f"{t_rate:.0f} | {t_final:.4f} |")
    print(f"| patchbay / pytorch | | | {p_rate / t_rate:.2f}x | {100 * (p_final / t_final - 1):+.2f}% |")

    write_curves(args.out, p_train, p_val, r)


def write_curves(out, p_train, p_val, r):
    rows = {}
    for rec in p_train:
        rows.setdefault(rec["step"], {})["patchbay_train"] = rec["loss"]
    for rec in p_val:
        rows.setdefault(rec["step"], {})["patchbay_val"] = rec["val_loss"]
    for step, loss in r["train"]:
        rows.setdefault(step, {})["torch_train"] = loss
    for step, loss in r["val"]:
        rows.setdefault(step, {})["torch_val"] = loss
    cols = ["patchbay_train", "torch_train", "patchbay_val", "torch_val"]
    if os.path.dirname(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".csv", "w") as f:
        f.write("step," + ",".join(cols) + "\n")
        for step in sorted(rows):
            f.write(f"{step}," + ",".join(str(rows[step].get(c, "")) for c in cols) + "\n")
    print(f"curves: {out}.csv", end="")
    if shutil.which("gnuplot"):
        script = (
            f"set terminal pngcairo size 900,540; set output '{out}.png'; set datafile separator ',';"
            "set key top right; set xlabel 'step'; set ylabel 'loss (nats/token)'; set logscale y;"
            "set datafile missing '';"
            f"plot '{out}.csv' using 1:2 with lines lc 1 title 'patchbay train',"
            f" '' using 1:3 with lines lc 2 title 'pytorch train',"
            f" '' using 1:4 with linespoints lc 1 pt 7 title 'patchbay val',"
            f" '' using 1:5 with linespoints lc 2 pt 5 title 'pytorch val'"
        )
        if subprocess.run(["gnuplot", "-e", script]).returncode == 0:
            print(f", {out}.png", end="")
    print()


if __name__ == "__main__":
    main()
