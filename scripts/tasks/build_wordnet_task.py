#!/usr/bin/env python3
"""Builds configs/tasks/data/wordnet_definitions*.jsonl from Debian's WordNet 3.0 database
(package wordnet-base: /usr/share/wordnet) — a four-way choice of a noun's definition.

For each noun lemma that is a single alphabetic word, has a sense-tagged frequency in
index.noun (tagsense_cnt >= 1) and, when a KJV text is given, occurs in the KJV (so the
quickstart's model has seen the word), the item is its most frequent sense's gloss (up to the
first ';', examples dropped) against the glosses of three other such lemmas drawn at random.
Chance level: 25%. Evaluated items and few-shot items use disjoint lemmas.

Usage: build_wordnet_task.py OUT_DIR [KJV_TEXT]   (KJV_TEXT: e.g. data/kjv/train.txt)
Deterministic for a given WordNet and KJV text.
"""
import json
import random
import re
import sys
from pathlib import Path

WORDNET = Path("/usr/share/wordnet")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    if not (WORDNET / "index.noun").exists():
        sys.exit("WordNet is not installed: sudo apt-get install wordnet-base")
    out = Path(sys.argv[1])
    kjv_words = None
    if len(sys.argv) == 3:
        kjv_words = set(re.findall(r"[a-z]+", Path(sys.argv[2]).read_text(encoding="utf-8").lower()))
    glosses = {}
    for line in open(WORDNET / "data.noun", encoding="latin-1"):
        if line.startswith(" "):
            continue  # licence header
        offset, _, gloss = line.partition("|")
        glosses[offset.split()[0]] = gloss.strip()
    entries = []
    for line in open(WORDNET / "index.noun", encoding="latin-1"):
        if line.startswith(" "):
            continue
        f = line.split()
        lemma, synset_cnt, p_cnt = f[0], int(f[2]), int(f[3])
        tagsense_cnt = int(f[5 + p_cnt])
        first_offset = f[6 + p_cnt]
        if not lemma.isalpha() or len(lemma) < 3 or tagsense_cnt < 1:
            continue
        if kjv_words is not None and lemma not in kjv_words:
            continue
        gloss = glosses[first_offset].split(";")[0].strip().strip('"').strip()
        if 8 <= len(gloss) <= 120:
            entries.append((lemma, gloss))
    rng = random.Random(38)
    rng.shuffle(entries)
    evaluated, fewshot = entries[:300], entries[300:350]
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("wordnet_definitions.jsonl", evaluated), ("wordnet_definitions_train.jsonl", fewshot)):
        with open(out / name, "w", encoding="utf-8") as fh:
            for lemma, gloss in part:
                distractors = set()
                while len(distractors) < 3:
                    other = rng.choice(entries)
                    if other[0] != lemma and other[1] != gloss:
                        distractors.add(other[1])
                choices = [gloss] + sorted(distractors)
                rng.shuffle(choices)
                fh.write(json.dumps({"word": lemma, "choices": choices, "label": choices.index(gloss)}) + "\n")
        print(f"{out / name}: {len(part)} docs (of {len(entries)} eligible lemmas)")


if __name__ == "__main__":
    main()
