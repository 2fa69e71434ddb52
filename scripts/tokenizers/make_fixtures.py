#!/usr/bin/env python3
"""Writes the small published-format BPE fixtures under tests/tokenizers/fixtures/published/.

One made-up byte-level BPE vocabulary (GPT-2's byte order for ids 0..255, 17 merges, token ids
deliberately NOT 256 + rank, one merge result spelled by two merges, a multi-byte UTF-8
token, `<|endoftext|>`) in both published formats:
  encoder.json + vocab.bpe   GPT-2's two files (OpenAI's layout)
  tokenizer.json             Hugging Face's single file, written by `tokenizers` itself (run
                             this with an interpreter that has it, e.g. /work/.venvs/torch).
The fixtures are committed; rerun this only to change them:
  VENV/bin/python scripts/tokenizers/make_fixtures.py [--out DIR]
"""
import argparse
import json
import os


def bytes_to_unicode():
    """GPT-2's byte -> character table (openai/gpt-2 src/encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def mapped(text):
    table = bytes_to_unicode()
    return "".join(table[b] for b in text.encode("utf-8"))


# Merges in rank order, as byte strings of (left, right).
MERGES = [
    (" ", "t"), ("h", "e"), ("l", "l"), ("o", "r"), (" t", "he"), ("he", "ll"), ("hell", "o"),
    (" ", "w"), (" w", "or"), (" wor", "l"), (" worl", "d"), ("0", "0"), ("00", "00"),
    ("\xc3", "\xa9"),  # the two bytes of 'é' (written below via latin-1 to keep them raw)
    ("e", "l"), ("h", "el"), ("he", "l"),  # the last two both spell "hel": one id
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "tokenizers", "fixtures", "published"))
    args = parser.parse_args()
    table = bytes_to_unicode()
    def m(s):  # str of code points < 256 standing for raw bytes -> mapped text
        return "".join(table[ord(c)] for c in s)
    vocab = {}
    for b in table:  # GPT-2's byte order: printable bytes first, as in its encoder.json
        vocab[table[b]] = len(vocab)
    results = []
    for left, right in MERGES:
        if m(left + right) not in results:
            results.append(m(left + right))
    # Ids of merge results in reverse creation order: a loader that assumes 256 + rank fails.
    for text in reversed(results):
        vocab[text] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "encoder.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args.out, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for left, right in MERGES:
            f.write(m(left) + " " + m(right) + "\n")
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE
    tok = Tokenizer(BPE.from_file(os.path.join(args.out, "encoder.json"), os.path.join(args.out, "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(os.path.join(args.out, "tokenizer.json"))
    # Known answers the C++ test checks, from Hugging Face on these files.
    for text in ["hello world", " the", "the", "hel", "héllo wörld", "00000", "hello<|endoftext|> world"]:
        print(json.dumps(text, ensure_ascii=False), tok.encode(text).ids)


if __name__ == "__main__":
    main()
