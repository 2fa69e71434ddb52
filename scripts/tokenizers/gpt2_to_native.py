#!/usr/bin/env python3
"""Rewrites GPT-2's encoder.json + vocab.bpe in Patchbay's own bpe format ("patchbay-bpe 1":
bytes are ids 0..255, merge r creates id 256 + r, then the special tokens).

The merges and their ranks are GPT-2's, so encoding splits text exactly as GPT-2 does; only
the ids are renumbered. Its use: `patchbay bench tokenizer --native-file OUT --gpt2-dir DIR`
times the native path and the published path on the same merges in one run.

  python3 scripts/tokenizers/gpt2_to_native.py --gpt2-dir DIR --out FILE
"""
import argparse
import json
import os


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpt2-dir", required=True, help="folder with encoder.json and vocab.bpe")
    parser.add_argument("--out", required=True, help="Patchbay bpe file to write")
    parser.add_argument("--special", action="append", default=None, help="special token (default <|endoftext|>)")
    args = parser.parse_args()
    decode = {c: b for b, c in bytes_to_unicode().items()}
    with open(os.path.join(args.gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")[1:-1]
    native = {bytes([b]): b for b in range(256)}
    out = ["patchbay-bpe 1", "pretokenizer gpt2", "merges %d" % len(lines)]
    for rank, line in enumerate(lines):
        left, right = (bytes(decode[c] for c in part) for part in line.split(" "))
        if left + right in native:
            raise SystemExit("merge %d spells an existing token; cannot renumber as 256 + rank" % rank)
        native[left + right] = 256 + rank
        out.append("%d %d %s" % (native[left], native[right], (left + right).hex()))
    specials = args.special or ["<|endoftext|>"]
    out.append("specials %d" % len(specials))
    out.extend(s.encode("utf-8").hex() for s in specials)
    out.append("end")
    with open(args.out, "w", encoding="ascii") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: %d merges, %d specials" % (args.out, len(lines), len(specials)))


if __name__ == "__main__":
    main()
