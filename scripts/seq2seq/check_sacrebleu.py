#!/usr/bin/env python3
"""Checks Patchbay's corpus BLEU and chrF (core/eval/mt_metrics.hpp) against the sacrebleu
package on the same outputs (issue 37; not run by CI).

    python3 -m venv /work/.venvs/sacrebleu && /work/.venvs/sacrebleu/bin/pip install sacrebleu
    /work/.venvs/sacrebleu/bin/python scripts/seq2seq/check_sacrebleu.py RUN TEST.jsonl \\
        [--patchbay build/patchbay] [--num-beams N] [--limit N] [--max-new-tokens N]

Runs `patchbay eval RUN --test TEST.jsonl --outputs FILE`, reads the BLEU and chrF it prints
for the model's decodes and for the copy-the-source baseline, computes both with
sacrebleu.corpus_bleu / corpus_chrf (defaults: 13a tokens, exp smoothing, chrF char order 6,
word order 0, beta 2) on the same decodes, sources and targets. Exits 1 when any figure differs by more than 0.01 (the printed
precision) or an n-gram precision by more than 0.1.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile

import sacrebleu

LINE = re.compile(
    r"BLEU = ([\d.]+) ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) \(BP = ([\d.]+) ratio = ([\d.]+) "
    r"hyp_len = (\d+) ref_len = (\d+)\); chrF2 = ([\d.]+)")


def parse(line):
    m = LINE.search(line)
    if not m:
        sys.exit(f"could not read BLEU/chrF from: {line!r}")
    g = m.groups()
    return {"bleu": float(g[0]), "precisions": [float(x) for x in g[1:5]], "bp": float(g[5]),
            "sys_len": int(g[7]), "ref_len": int(g[8]), "chrf": float(g[9])}


def compare(name, ours, hyps, refs):
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    chrf = sacrebleu.corpus_chrf(hyps, [refs])
    theirs = {"bleu": bleu.score, "precisions": bleu.precisions, "bp": bleu.bp,
              "sys_len": bleu.sys_len, "ref_len": bleu.ref_len, "chrf": chrf.score}
    ok = (abs(ours["bleu"] - theirs["bleu"]) <= 0.01 and abs(ours["chrf"] - theirs["chrf"]) <= 0.01
          and all(abs(a - b) <= 0.1 for a, b in zip(ours["precisions"], theirs["precisions"]))
          and ours["sys_len"] == theirs["sys_len"] and ours["ref_len"] == theirs["ref_len"])
    print(f"{name}:\n  patchbay  BLEU {ours['bleu']:.2f} {ours['precisions']} "
          f"hyp_len {ours['sys_len']} ref_len {ours['ref_len']}; chrF2 {ours['chrf']:.2f}\n"
          f"  sacrebleu {bleu}; {chrf}\n  {'agree' if ok else 'DIFFER'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("test")
    parser.add_argument("--patchbay", default="build/patchbay")
    parser.add_argument("--num-beams", type=int, default=1)
    parser.add_argument("--limit", type=int, default=-1)
    parser.add_argument("--max-new-tokens", type=int, default=0)
    args = parser.parse_args()
    pairs = [json.loads(line) for line in open(args.test, encoding="utf-8") if line.strip()]
    if args.limit >= 0:
        pairs = pairs[:args.limit]
    with tempfile.NamedTemporaryFile("r", suffix=".txt", encoding="utf-8") as outputs:
        command = [args.patchbay, "eval", args.run, "--test", args.test, "--outputs",
                   outputs.name, "--num-beams", str(args.num_beams), "--samples", "0"]
        if args.limit >= 0:
            command += ["--limit", str(args.limit)]
        if args.max_new_tokens > 0:
            command += ["--max-new-tokens", str(args.max_new_tokens)]
        printed = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        hyps = outputs.read().split("\n")[:len(pairs)]
    print(printed)
    model = next(l for l in printed.splitlines() if l.startswith("model ("))
    copy = next(l for l in printed.splitlines() if l.startswith("copy-the-source baseline"))
    refs = [p["target"] for p in pairs]
    ok = compare("model decodes", parse(model), hyps, refs)
    ok = compare("copy-the-source baseline", parse(copy), [p["source"] for p in pairs], refs) and ok
    print("all agree" if ok else "some figures differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
