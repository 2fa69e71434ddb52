#!/usr/bin/env python3
"""Writes tests/tokenizers/fixtures/unicode16/: Hugging Face `tokenizers`' answers on text with
letters and digits added in Unicode 15-16, for the CI test tests/tokenizers/bpe_unicode_test.cpp.

  tokenizer.json   a byte-level BPE trained by `tokenizers` itself (GPT-2's ByteLevel
                   pre-tokenizer, 600 tokens) on text built from those characters, so that its
                   merges join them with their neighbours: a character classified differently
                   splits differently and so gets other ids
  expected.json    for each test string: the pieces and ids of that tokenizer with GPT-2's
                   pre-tokenizer, with LLaMA 3's Split (+ ByteLevel without regex), and the
                   pieces of SmolLM2's Digits (+ GPT-2's ByteLevel), all from `tokenizers`

Before the plugin classified by Unicode 16 (Debian 12's PCRE2 has Unicode 14 tables) these
characters were "other" ([^\\s\\p{L}\\p{N}]) to Patchbay and letters or digits to `tokenizers`.
Two Unicode 17 numeric ranges are included too: `tokenizers`' Digits (Rust's char::is_numeric)
isolates them while its regexes (Oniguruma, Unicode 16) do not know them.
Not run in CI; rerun only to change the fixtures (any venv with `tokenizers`):
  /work/.venvs/torch/bin/python scripts/tokenizers/make_unicode16_fixtures.py
"""
import argparse
import json
import os
import random

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "tokenizers", "fixtures", "unicode16")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# The list: (name, first, last) of letters (L) and digits/numbers (N) new in 15.0-16.0.
NEW = [
    ("Kawi letters", 0x11F04, 0x11F10, "L"), ("Kawi digits", 0x11F50, 0x11F59, "N"),
    ("Nag Mundari letters", 0x1E4D0, 0x1E4EB, "L"), ("Nag Mundari digits", 0x1E4F0, 0x1E4F9, "N"),
    ("Garay letters", 0x10D4A, 0x10D65, "L"), ("Garay digits", 0x10D40, 0x10D49, "N"),
    ("CJK Extension H", 0x31350, 0x323AF, "L"), ("CJK Extension I", 0x2EBF0, 0x2EE5D, "L"),
    ("Kaktovik numerals", 0x1D2C0, 0x1D2D3, "N"), ("Cyrillic TJE", 0x1C89, 0x1C8A, "L"),
    ("Latin U+A7CB-A7CD", 0xA7CB, 0xA7CD, "L"), ("Latin U+A7DA-A7DC", 0xA7DA, 0xA7DC, "L"),
    # Unicode 17.0: unassigned to Oniguruma's \p{N} (16.0), numeric to Digits (Rust's 17.0).
    ("Tolong Siki digits (Unicode 17)", 0x11DE0, 0x11DE9, "N"), ("U+16FF4-16FF6 (Unicode 17)", 0x16FF4, 0x16FF6, "N"),
]


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def contexts(c, d):
    """Strings where a letter/digit/other classification changes the split."""
    return [f"a{c}{c}b", f" {c}1", f"{c}{c}'s", f"1{c}2", f"x {c}{c}.", f"{d}{d}{d}{d}a", f"!{c}?",
            f"{c} {d}", f"hello{c}world 12{d}34"]


def training_text(rng):
    lines = []
    for _ in range(3000):
        _, first, last, _ = rng.choice(NEW)
        c = chr(rng.randint(first, min(last, first + 3)))
        lines.append(rng.choice(["a{c}{c}b", " {c}1", "{c}{c}'s", "1{c}2", "x {c}{c}.", "!{c}?", "hello{c}world"])
                     .format(c=c))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(39)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator(training_text(rng), trainer)
    path = os.path.join(args.out, "tokenizer.json")
    tok.save(path)

    llama = Tokenizer.from_file(path)
    llama.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    digits = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                      pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    decode = byte_decoder()

    def pieces(pre, text):
        return [bytes(decode[ch] for ch in piece).decode("utf-8") for piece, _ in pre.pre_tokenize_str(text)]

    cases = []
    for name, first, last, kind in NEW:
        for cp in sorted({first, last}):
            c = chr(cp)
            d = c if kind == "N" else chr(NEW[1][1])  # a new digit beside a new letter
            for text in contexts(c, d):
                cases.append({
                    "what": f"{name} U+{cp:04X}", "text": text,
                    "gpt2_pieces": pieces(tok.pre_tokenizer, text), "gpt2_ids": tok.encode(text).ids,
                    "llama3_pieces": pieces(llama.pre_tokenizer, text), "llama3_ids": llama.encode(text).ids,
                    "digits_pieces": pieces(digits, text)})
    import tokenizers
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump({"source": f"tokenizers {tokenizers.__version__}, scripts/tokenizers/make_unicode16_fixtures.py",
                   "llama3_pattern": LLAMA3, "cases": cases}, f, indent=1, ensure_ascii=True)
    print(f"wrote {args.out}: {len(tok.get_vocab())} tokens, {len(cases)} cases")


if __name__ == "__main__":
    main()
