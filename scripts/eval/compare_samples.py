#!/usr/bin/env python3
"""Compares `patchbay eval --log-samples` with lm-eval's --log_samples output, item by item.

For log-likelihood tasks: every choice's log-likelihood within --tolerance (default 1e-4),
the same is_greedy flags, the same argmax (acc) and per-length argmax (acc_norm); for rolling
tasks each whole document's log-likelihood within --relative-tolerance of its size (a sum of
thousands of float32 per-token terms: 1e-6 relative); then each aggregate metric both tools report, and the
wall time of both (given by check_lm_eval.sh). Exit status 1 on any mismatch.

With --tokenizer (the exported model's folder) each choice's difference is also divided by its
continuation's token count: a deep model's per-token float32 differences add up over a long
continuation (SmolLM2's 30 layers: ~2e-5 per token), so --per-token makes the tolerance apply
per continuation token instead of per item. Both figures are always printed.
"""
import argparse
import glob
import json
import math
import os
import sys


def lm_eval_samples(folder):
    out = {}
    for path in glob.glob(os.path.join(folder, "**", "samples_*.jsonl"), recursive=True):
        task = os.path.basename(path)[len("samples_"):].rsplit("_", 1)[0]
        with open(path) as f:
            out[task] = {s["doc_id"]: s for s in map(json.loads, f)}
    return out


def lm_eval_results(folder):
    paths = sorted(glob.glob(os.path.join(folder, "**", "results_*.json"), recursive=True))
    return json.load(open(paths[-1]))["results"] if paths else {}


def as_pair(resp):
    """lm-eval stores [ll, is_greedy] (numbers or strings, depending on the version)."""
    if isinstance(resp, (list, tuple)):
        ll = float(resp[0])
        greedy = resp[1] if len(resp) > 1 else None
        if isinstance(greedy, str):
            greedy = greedy == "True"
        return ll, greedy
    return float(resp), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("patchbay_samples")
    ap.add_argument("patchbay_results")
    ap.add_argument("lm_eval_folder")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--relative-tolerance", type=float, default=1e-6, help="rolling documents: |diff| / |ll|")
    ap.add_argument("--tokenizer", help="HF folder whose tokenizer counts continuation tokens")
    ap.add_argument("--per-token", action="store_true", help="the tolerance applies per continuation token")
    ap.add_argument("--lm-eval-seconds", type=float)
    ap.add_argument("--lm-eval-cpu-seconds", type=float)
    ap.add_argument("--patchbay-cpu-seconds", type=float)
    ap.add_argument("--patchbay-seconds", type=float)
    a = ap.parse_args()
    ours = {}
    for line in open(a.patchbay_samples):
        s = json.loads(line)
        ours.setdefault(s["task"], {})[s["doc_id"]] = s
    theirs = lm_eval_samples(a.lm_eval_folder)
    if a.per_token and not a.tokenizer:
        ap.error("--per-token needs --tokenizer")
    count_tokens = lambda text: 1  # noqa: E731
    if a.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(a.tokenizer)
        count_tokens = lambda text: max(1, len(tokenizer(text, add_special_tokens=False)["input_ids"]))  # noqa: E731
    failures = 0
    for task, items in ours.items():
        if task not in theirs:
            print(f"{task}: no lm-eval samples found")
            failures += 1
            continue
        worst, worst_relative, compared, pred_diff, greedy_diff, prompt_diff = 0.0, 0.0, 0, 0, 0, 0
        worst_per_token = 0.0
        for doc_id, s in items.items():
            t = theirs[task].get(doc_id)
            if t is None:
                print(f"{task} doc {doc_id}: missing in lm-eval's samples")
                failures += 1
                continue
            if "generation" in s:
                # generate_until: the greedy text (lm-eval's resps) and the filtered answer.
                theirs_text = t["resps"][0][0] if isinstance(t["resps"][0], list) else t["resps"][0]
                theirs_answer = t["filtered_resps"][0] if isinstance(t["filtered_resps"], list) else t["filtered_resps"]
                ours_answer = next(iter(s["filtered"].values()))
                compared += 1
                args = t.get("arguments")
                if isinstance(args, dict) and args.get("gen_args_0", {}).get("arg_0") != s["prompt"]:
                    prompt_diff += 1
                if s["generation"] != theirs_text or ours_answer != theirs_answer:
                    pred_diff += 1
                    print(f"{task} doc {doc_id}: generation {s['generation']!r} -> {ours_answer!r}, "
                          f"lm-eval {theirs_text!r} -> {theirs_answer!r}")
                continue
            pairs = [as_pair(r) for r in t.get("filtered_resps", t.get("resps"))]
            args = t.get("arguments")
            if isinstance(args, dict) and "prompt" in s:
                # The prompts (few-shot examples included) and continuations lm-eval built.
                theirs_args = [(v.get("arg_0"), v.get("arg_1")) for v in args.values()]
                if [c for c, _ in theirs_args] != [s["prompt"]] * len(theirs_args) or [x for _, x in theirs_args] != s["continuations"]:
                    prompt_diff += 1
            if "loglikelihoods" in s:
                mine = s["loglikelihoods"]
                theirs_ll = [p[0] for p in pairs]
                if len(mine) != len(theirs_ll):
                    print(f"{task} doc {doc_id}: {len(mine)} requests vs lm-eval's {len(theirs_ll)}")
                    failures += 1
                    continue
                for x, y, text in zip(mine, theirs_ll, s["continuations"]):
                    worst = max(worst, abs(x - y))
                    worst_per_token = max(worst_per_token, abs(x - y) / count_tokens(text))
                    compared += 1
                greedy_diff += sum(1 for g, p in zip(s["is_greedy"], pairs) if p[1] is not None and g != p[1])
                if "choices" in s:
                    if max(range(len(mine)), key=lambda i: (mine[i], -i)) != max(range(len(theirs_ll)), key=lambda i: (theirs_ll[i], -i)):
                        pred_diff += 1
            elif "loglikelihood" in s:
                # A rolling document's log-likelihood sums thousands of per-token terms, each
                # carrying float32 rounding: compare it relative to its size (per-token scale).
                diff = abs(s["loglikelihood"] - pairs[0][0])
                worst = max(worst, diff)
                worst_relative = max(worst_relative, diff / max(1.0, abs(pairs[0][0])))
                compared += 1
        rolling = worst_relative > 0
        item_figure = worst_per_token if a.per_token else worst
        ok = ((worst_relative <= a.relative_tolerance if rolling else item_figure <= a.tolerance) and pred_diff == 0
              and greedy_diff == 0 and prompt_diff == 0)
        failures += 0 if ok else 1
        kind = "generations" if any("generation" in s for s in items.values()) else "log-likelihoods"
        print(f"{task}: {len(items)} docs, {compared} {kind}, max |diff| {worst:.2e} "
              + (f"relative {worst_relative:.1e} (tolerance {a.relative_tolerance:g}: whole documents)" if rolling
                 else (f"= {worst_per_token:.2e} per continuation token " if a.tokenizer else "")
                 + f"(tolerance {a.tolerance:g}{' per token' if a.per_token else ''})")
              + f", prompt differences {prompt_diff}, prediction differences {pred_diff}, is_greedy differences {greedy_diff}: "
              f"{'OK' if ok else 'MISMATCH'}")
    results = lm_eval_results(a.lm_eval_folder)
    ours_results = {t["task"]: t["metrics"] for t in json.load(open(a.patchbay_results))["tasks"]}
    print("\nmetric                          patchbay     lm-eval")
    for task, metrics in ours_results.items():
        for name, value in metrics.items():
            if name.endswith("_stderr"):
                continue
            key = name if "," in name else name + ",none"
            other = results.get(task, {}).get(key)
            mark = "" if other is None or math.isclose(value, float(other), rel_tol=1e-4, abs_tol=1e-6) else "  <- differs"
            print(f"{task + ' ' + name:30s} {value:10.4f}  {'' if other is None else f'{float(other):10.4f}'}{mark}")
    if a.lm_eval_seconds and a.patchbay_seconds:
        print(f"\nwall time: lm-eval {a.lm_eval_seconds:.1f} s, patchbay {a.patchbay_seconds:.1f} s "
              f"({a.lm_eval_seconds / a.patchbay_seconds:.1f}x), same threads, same sitting")
    if a.lm_eval_cpu_seconds and a.patchbay_cpu_seconds:
        print(f"CPU time (user + system): lm-eval {a.lm_eval_cpu_seconds:.1f} s, patchbay {a.patchbay_cpu_seconds:.1f} s "
              f"({a.lm_eval_cpu_seconds / a.patchbay_cpu_seconds:.1f}x): steadier than wall time on a shared machine")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
