#!/usr/bin/env python3
"""Builds the shipped KJV tasks (configs/tasks/data/kjv_*.jsonl) from a prepared KJV split.

The evaluated docs come from the validation split the quickstart holds out (data.seed 1234,
validation_fraction 0.1: `patchbay data prepare --val-fraction 0.1 --seed 1234`), so no
evaluated passage was trained on; few-shot examples come from the training split.

  kjv_cloze       LAMBADA-style last-word cloze: 2-3 consecutive verses as the corpus prints
                  them, cut before the last word of the last verse; the word (>= 4 letters, not
                  a stop word) also occurs earlier in the passage, so the passage is what makes
                  it predictable. Scored: acc = greedy decoding reproduces the word exactly.
  kjv_next_verse  4-way choice of the verse that follows two verses: the true next verse and
                  three verses drawn from other validation chapters, renumbered to the true
                  verse's number so the number gives nothing away; every candidate line has
                  at most 100 characters (it must fit a 128-token character model). Chance 25%.
  kjv_ppl         rolling perplexity of whole validation chapters (word/byte perplexity, bits
                  per byte: comparable with `patchbay eval`'s validation bits per byte).

Usage: build_kjv_tasks.py PREPARED_DIR OUT_DIR   (PREPARED_DIR holds train.txt and val.txt)
Deterministic: the same split gives byte-identical files.
"""
import json
import random
import re
import sys
from pathlib import Path

STOP = set("""that this with from unto them they their there were which shall have will your
when what then thee thou thy hath said also into upon these those been before after because
against among over shalt came come went every even him his her our out all and for not but""".split())


def chapters(text):
    """[(heading, [verse line, ...])] from the corpus form: heading, blank, '  N verse' lines."""
    out = []
    for line in text.split("\n"):
        if line and not line.startswith(" "):
            out.append((line, []))
        elif line.strip() and out:
            out[-1][1].append(line)
    return out


def cloze_items(chs, rng, count):
    items = []
    for _, verses in chs:
        for i in range(len(verses)):
            for span in (2, 3):
                if i + span > len(verses):
                    continue
                lines = verses[i:i + span]
                last = lines[-1].rstrip()
                m = re.search(r"([A-Za-z]+)[^A-Za-z]*$", last)
                if not m:
                    continue
                word = m.group(1)
                body = "\n".join(lines[:-1] + [last[:m.end(1)]])
                before = body[: len(body) - len(word)]
                if len(word) < 4 or word.lower() in STOP or not re.search(r"\b" + word + r"\b", before):
                    continue
                if len(body) > 400:
                    continue
                items.append({"text": body})
                break
    rng.shuffle(items)
    return items[:count]


def next_verse_items(chs, rng, count):
    # Candidate verse lines of at most 100 characters, so that every choice fits the
    # quickstart's 128-character context (a longer continuation cannot be scored at all).
    pool = [(h, v) for h, vs in chs for v in vs if len(v) <= 100]
    items = []
    for heading, verses in chs:
        for i in range(0, len(verses) - 2, 3):
            context, true = verses[i:i + 2], verses[i + 2]
            if len(true) > 100:
                continue
            number = re.match(r"^\s*\d+", true).group(0)
            choices = [true]
            while len(choices) < 4:
                h, v = rng.choice(pool)
                if h == heading:
                    continue
                renumbered = number + v[len(re.match(r"^\s*\d+", v).group(0)):]
                if renumbered not in choices:
                    choices.append(renumbered)
            rng.shuffle(choices)
            items.append({"context": "\n".join(context), "choices": choices, "label": choices.index(true)})
    rng.shuffle(items)
    return items[:count]


def ppl_items(chs, rng, count):
    docs = [{"chapter": h, "text": h + "\n\n" + "\n".join(v) + "\n"} for h, v in chs]
    rng.shuffle(docs)
    return sorted(docs[:count], key=lambda d: d["chapter"])


def write(path, items):
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"{path}: {len(items)} docs")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    prepared, out = Path(sys.argv[1]), Path(sys.argv[2])
    val = chapters((prepared / "val.txt").read_text(encoding="utf-8"))
    train = chapters((prepared / "train.txt").read_text(encoding="utf-8"))
    if len(val) < 50:
        sys.exit(f"{prepared}/val.txt has {len(val)} chapters; prepare with --val-fraction 0.1 --seed 1234")
    out.mkdir(parents=True, exist_ok=True)
    write(out / "kjv_cloze.jsonl", cloze_items(val, random.Random(1), 300))
    write(out / "kjv_cloze_train.jsonl", cloze_items(train, random.Random(2), 50))
    write(out / "kjv_next_verse.jsonl", next_verse_items(val, random.Random(3), 300))
    write(out / "kjv_next_verse_train.jsonl", next_verse_items(train, random.Random(4), 50))
    write(out / "kjv_ppl.jsonl", ppl_items(val, random.Random(5), 20))


if __name__ == "__main__":
    main()
