#!/usr/bin/env python3
"""Builds a small instruction set from WordNet's definitions (Debian's `wordnet` data).

Each example is one JSON line {"prompt": "What does \\"WORD\\" mean?", "response": "..."} where
the response is "WORD (POS): GLOSS." with the gloss's definition part (WordNet writes usage
examples after it, in quotes, after a ';'; they are left out). Only single-word lemmas of
letters, and their first sense in the data file's order, are used. A seeded shuffle picks
--count words; the last --val-count go to the validation file.

    python3 scripts/finetune/wordnet_instructions.py [--wordnet /usr/share/wordnet] \\
        [--out data/wordnet] [--count 2000] [--val-count 200] [--seed 1]

Writes OUT/train.jsonl and OUT/val.jsonl (git-ignored data/). Needs the `wordnet-base` package
(data.noun, data.verb, data.adj, data.adv under /usr/share/wordnet); only the Python standard
library. Used by configs/finetune/smollm2_wordnet.toml (docs/finetuning.md); not run by CI.
"""
import argparse
import json
import os
import random
import re
import sys

PARTS = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}


def read_senses(path, part):
    """(word, part, gloss) for the first sense of each single-word lemma in a data.* file."""
    seen = set()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("  "):  # the licence header
                continue
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            if len(fields) < 5:
                continue
            word_count = int(fields[3], 16)
            words = [fields[4 + 2 * i] for i in range(word_count)]
            definition = gloss.split(";")[0].strip()
            if not definition or definition.startswith('"'):
                continue
            for word in words:
                word = re.sub(r"\(.*\)$", "", word)  # adjective markers: "big(a)"
                if not re.fullmatch(r"[a-z]{3,}", word) or word in seen:
                    continue
                seen.add(word)
                yield word, PARTS[part], definition


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wordnet", default="/usr/share/wordnet")
    parser.add_argument("--out", default="data/wordnet")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--val-count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    senses = {}
    for part in PARTS:
        path = os.path.join(args.wordnet, "data." + part)
        if not os.path.isfile(path):
            sys.exit(f"{path} is missing: install Debian's wordnet-base package (apt-get install wordnet-base)")
        for word, name, definition in read_senses(path, part):
            senses.setdefault(word, (name, definition))  # nouns first: the commonest reading
    words = sorted(senses)
    random.Random(args.seed).shuffle(words)
    words = words[:args.count]
    if len(words) <= args.val_count:
        sys.exit(f"only {len(words)} words: lower --val-count")
    os.makedirs(args.out, exist_ok=True)
    splits = {"train": words[:-args.val_count], "val": words[-args.val_count:]}
    for split, chosen in splits.items():
        with open(os.path.join(args.out, split + ".jsonl"), "w", encoding="utf-8") as f:
            for word in chosen:
                name, definition = senses[word]
                f.write(json.dumps({"prompt": f'What does "{word}" mean?',
                                    "response": f"{word} ({name}): {definition}."}) + "\n")
    print(f"{len(splits['train'])} training and {len(splits['val'])} validation examples in {args.out}/")


if __name__ == "__main__":
    main()
