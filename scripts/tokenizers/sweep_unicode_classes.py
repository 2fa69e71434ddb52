#!/usr/bin/env python3
"""Sweeps every Unicode code point (BMP and beyond) through Hugging Face `tokenizers` and
Patchbay's pre-tokenizers and counts where they split differently.

1. Classes: `tokenizers`' \\p{L}, \\p{N} and \\s (a Split on a string of every code point)
   against the table Patchbay ships (plugins/tokenizer_bpe/unicode_categories_data.cpp, parsed
   here) and Patchbay's White_Space set.
2. Pieces: every code point except surrogates in CONTEXTS, pre-tokenized by `tokenizers` with
   GPT-2's ByteLevel regex, LLaMA 3's Split and SmolLM2's Digits + ByteLevel; the byte lengths
   of the pieces go to a file that the CI test binary compares against Patchbay's pieces (its
   test case "sweep" runs when PATCHBAY_UNICODE_SWEEP names the file; otherwise it is skipped).

  /work/.venvs/torch/bin/python scripts/tokenizers/sweep_unicode_classes.py \\
      [--test-binary build/tests/tokenizers/tokenizer_bpe_unicode_test] [--workdir build/unicode-sweep]
      [--reuse]   # keep the pieces file of an earlier run (it takes ~7 minutes to write)

Exit status 0 when nothing differs. Not run in CI (needs `tokenizers`; ~1-2 minutes).
"""
import argparse
import os
import re
import struct
import subprocess
import sys

from tokenizers import Regex, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "plugins", "tokenizer_bpe", "unicode_categories_data.cpp")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
WHITE_SPACE = set(range(0x9, 0xE)) | {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} | set(
    range(0x2000, 0x200B))
# {c} is the swept character. Each context puts it next to a letter, a digit, punctuation, a
# space, a contraction and itself, so a different class changes the pieces.
CONTEXTS = ["a{c}b", " {c}1", "{c}{c}'s", "1{c}2", "!{c}?", "{c} {c}", "\n{c}\n"]
CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def table_classes():
    """Patchbay's \\p{L} and \\p{N} from the generated runs."""
    runs = [(int(cp, 16), cat) for cp, cat in re.findall(r"\{0x([0-9A-F]+), (\w\w)\}", open(DATA).read())]
    letters, numbers = set(), set()
    for i, (first, cat) in enumerate(runs):
        last = runs[i + 1][0] - 1 if i + 1 < len(runs) else 0x10FFFF
        if cat[0] == "L":
            letters.update(range(first, last + 1))
        elif cat[0] == "N":
            numbers.update(range(first, last + 1))
    return letters, numbers


def hf_class(pattern):
    text = "".join(map(chr, CODE_POINTS))
    gaps = pre_tokenizers.Split(Regex(pattern), "removed").pre_tokenize_str(text)
    rest = set()
    for piece, _ in gaps:
        rest.update(map(ord, piece))
    return set(CODE_POINTS) - rest


def check_classes():
    letters, numbers = table_classes()
    bad = 0
    for name, hf, ours in [("\\p{L}", hf_class(r"\p{L}"), letters), ("\\p{N}", hf_class(r"\p{N}"), numbers),
                           ("\\s", hf_class(r"\s"), WHITE_SPACE)]:
        ours = {cp for cp in ours if not 0xD800 <= cp <= 0xDFFF}
        diff = sorted(hf ^ ours)
        bad += len(diff)
        print(f"  {name}: tokenizers {len(hf)} code points, Patchbay {len(ours)}, differing {len(diff)}"
              + (" e.g. " + " ".join(f"U+{cp:04X}" for cp in diff[:10]) if diff else ""))
    return bad


def write_pieces(path):
    """Records: kind (u8: 0 GPT-2, 1 LLaMA 3, 2 Digits), text (u32 length + UTF-8), pieces (u32
    count + u32 byte lengths). One record per pre-tokenizer per chunk of 4096 code points."""
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    llama3 = pre_tokenizers.Split(Regex(LLAMA3), "isolated")
    digits = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                      pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    records = 0
    with open(path, "wb") as f:
        for start in range(0, len(CODE_POINTS), 4096):
            text = "".join(ctx.format(c=chr(cp)) + "\n" for cp in CODE_POINTS[start:start + 4096] for ctx in CONTEXTS)
            data = text.encode("utf-8")
            for kind, pre, byte_level in [(0, gpt2, True), (1, llama3, False), (2, digits, True)]:
                pieces = pre.pre_tokenize_str(text)
                lengths = [len(p) if byte_level else len(p.encode("utf-8")) for p, _ in pieces]
                assert sum(lengths) == len(data), (kind, start)
                f.write(struct.pack("<BI", kind, len(data)) + data + struct.pack(f"<I{len(lengths)}I", len(lengths), *lengths))
                records += 1
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test-binary", default=os.path.join(ROOT, "build", "tests", "tokenizers",
                                                              "tokenizer_bpe_unicode_test"))
    parser.add_argument("--reuse", action="store_true", help="keep the pieces file of an earlier run")
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "unicode-sweep"))
    args = parser.parse_args()
    import tokenizers
    print(f"tokenizers {tokenizers.__version__}; {len(CODE_POINTS)} code points (all but surrogates)")
    print("1. classes")
    bad = check_classes()
    print("2. pieces in contexts " + " ".join(repr(c) for c in CONTEXTS))
    os.makedirs(args.workdir, exist_ok=True)
    path = os.path.join(args.workdir, "hf_pieces.bin")
    if not (args.reuse and os.path.exists(path)):
        records = write_pieces(path)
        print(f"  {records} records written to {path}", flush=True)
    print(f"  comparing with {args.test_binary}", flush=True)
    env = dict(os.environ, PATCHBAY_UNICODE_SWEEP=path)
    rc = subprocess.call([args.test_binary, "--test-case=*sweep*", "--success=false"], env=env)
    print("RESULT:", "no difference" if bad == 0 and rc == 0 else "DIFFERENCES (see above)")
    sys.exit(0 if bad == 0 and rc == 0 else 1)


if __name__ == "__main__":
    main()
