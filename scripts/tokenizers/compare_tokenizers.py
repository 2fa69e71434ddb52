#!/usr/bin/env python3
"""Compares Patchbay's bpe plugin on GPT-2's published vocabulary with the reference
implementations, on a large varied text (default ~24 MB).

References:
  hf       Hugging Face `tokenizers` (Rust): BPE.from_file(encoder.json, vocab.bpe), ByteLevel
           pre-tokenizer (add_prefix_space=False), <|endoftext|> added as a special token,
           i.e. what transformers' GPT2TokenizerFast builds from the same two files.
  encoder  GPT-2's published algorithm (openai/gpt-2 src/encoder.py): the `regex` module with
           the same pattern, bytes_to_unicode, lowest-rank bigram merged (all occurrences) until
           none is left; re-implemented here from the published description. encoder.py knows
           no special tokens, so the text is split at <|endoftext|> first (id 50256).
Patchbay runs through the real CLI and plugin: `patchbay tokenizer encode` with --vocab-file
/--merges-file (GPT-2's two files) and with --tokenizer on the tokenizer.json that `tokenizers`
wrote (the Hugging Face file format).

The text: the KJV (Debian bible-kjv, when `bible` exists), Python and C sources of this
machine, generated text in 20+ scripts with emoji (ZWJ sequences, flags, skin tones),
combining marks and non-ASCII digits, every Unicode whitespace and control character in
mixed runs, a sweep over every BMP code point (and every 16th astral one) in several
contexts, contractions, long runs, and <|endoftext|> markers. Part A compares all of it as
valid UTF-8; invalid bytes are replaced by U+FFFD there (the references accept only valid
Unicode strings). Part B encodes the raw bytes with invalid UTF-8 (only Patchbay accepts
them) and checks the byte-exact round trip; it also counts where GPT-2's encoder.py, run on
the text decoded with errors='surrogateescape' (the one lossless way to give it such bytes),
would split differently. See docs/interop_tokenizers.md.

  python3 scripts/tokenizers/compare_tokenizers.py [--mb 24] [--patchbay build/patchbay]
      [--gpt2-dir DIR] [--workdir build/tokenizer-compare] [--venv DIR] [--skip-encoder-py]

--venv DIR: run under that virtual environment, creating it and installing `tokenizers` and
`regex` from PyPI when it does not exist (otherwise the current interpreter must have them).
Exit status 0 when part A has no mismatch and part B round-trips.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def ensure_venv(venv):
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        print("creating virtual environment", venv, flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", venv])
        subprocess.check_call([python, "-m", "pip", "install", "--quiet", "tokenizers", "regex"])
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(python, [python] + sys.argv)


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


# ---- the text ---------------------------------------------------------------------------

SCRIPTS = {  # (first, last) code point ranges of letters, by script
    "cyrillic": (0x410, 0x44F), "greek": (0x391, 0x3C9), "arabic": (0x627, 0x64A), "hebrew": (0x5D0, 0x5EA),
    "devanagari": (0x905, 0x939), "bengali": (0x985, 0x9B9), "thai": (0xE01, 0xE2E), "georgian": (0x10D0, 0x10FA),
    "armenian": (0x531, 0x556), "hangul": (0xAC00, 0xD7A3), "hiragana": (0x3041, 0x3096), "katakana": (0x30A1, 0x30FA),
    "cjk": (0x4E00, 0x9FFF), "ethiopic": (0x1200, 0x1248), "tamil": (0xB85, 0xBB9), "latin-ext": (0x100, 0x24F),
    "ipa": (0x250, 0x2AF), "cherokee": (0x13A0, 0x13F4), "runic": (0x16A0, 0x16EA), "math-alnum": (0x1D400, 0x1D6A5),
    "cjk-ext-b": (0x20000, 0x2A6DF), "gothic": (0x10330, 0x1034A),
}
DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "０１２３４５６７８９", "ⅠⅡⅢⅣⅤ", "①②③④", "½¾²³"]
EMOJI = ["😀", "😂", "🥲", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "✨", "🚀", "🧑🏿‍💻", "🫠", "©", "™",
         "☃", "⌛", "🀄", "🎉🎉🎉"]
PUNCT = [".", ",", "!", "?", ";", ":", "…", "—", "–", "«", "»", "“", "”", "‘", "’", "„", "¿", "¡", "、", "。", "「", "」",
         "（", "）", "،", "؟", "।", "#", "$", "%", "&", "*", "(", ")", "[", "]", "{", "}", "@", "~", "`", "^", "|", "\\",
         "/", "+", "=", "<", ">", "_", "-", "'", '"']
SPACES = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u2009", "\u3000", "\u202f", "\u2028", "\u0085", "\u000b",
          "\u000c", "\u001c", "\u001f", "\u200b", "\ufeff", "\u1680", "\u205f", " \n ", "\u2003\u2003"]
COMBINING = ["\u0301", "\u0308", "\u0327", "\u0303", "\u064b", "\u093c", "\u0e31", "\u200d", "\ufe0f", "\u20dd"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'T", "n't", "'tis", "''s", "' s", "’s"]


def random_word(rng):
    name = rng.choice(list(SCRIPTS))
    lo, hi = SCRIPTS[name]
    w = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 9)))
    if rng.random() < 0.1:
        w += rng.choice(COMBINING)
    return w


def synthetic_multilingual(rng, size):
    out, n = [], 0
    while n < size:
        r = rng.random()
        if r < 0.45:
            piece = random_word(rng)
        elif r < 0.55:
            piece = "".join(rng.choice(rng.choice(DIGITS)) for _ in range(rng.randint(1, 12)))
        elif r < 0.65:
            piece = rng.choice(EMOJI)
        elif r < 0.8:
            piece = rng.choice(PUNCT) * rng.randint(1, 3)
        elif r < 0.9:
            piece = rng.choice(CONTRACTIONS)
        else:
            piece = rng.choice(["hello", "World", "the", "GPT", "naïve", "café", "Straße", "ǅemal", "İstanbul", "ﬁne"])
        sep = " " if rng.random() < 0.7 else rng.choice(SPACES + PUNCT + [""])
        out.append(piece + sep)
        n += len(out[-1])
    return "".join(out)


def whitespace_torture(rng, size):
    controls = [chr(c) for c in list(range(0, 32)) + [0x7F, 0x85, 0xA0, 0xAD, 0x1680, 0x180E] + list(range(0x2000, 0x200F))
                + [0x2028, 0x2029, 0x202F, 0x205F, 0x2060, 0x3000, 0xFEFF]]
    out, n = [], 0
    while n < size:
        parts = [rng.choice(controls) * rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
        parts.append(rng.choice(["a", "B", "7", "!", "'s", " x", "é", "中", "😀", ""]))
        out.append("".join(parts))
        n += len(out[-1])
    return "".join(out)


def codepoint_sweep():
    out = []
    cps = list(range(1, 0x10000)) + list(range(0x10000, 0x110000, 16))
    for cp in cps:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        out.append(f"a{c} {c}1 '{c}{c}s {c}{c}\n")
    return "".join(out)


def long_runs():
    parts = ["a" * 2000, " " * 1500 + "x", "1" * 1000, "!" * 800, "\n" * 300 + "y", "ab" * 700, "🎉" * 300,
             "中" * 600, "'s" * 200, " " * 10, "\t \t" * 100 + "z", "0" * 64]
    return "\n".join(parts)


def read_files(paths, limit):
    out, n = [], 0
    for p in paths:
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            continue
        out.append(data)
        n += len(data)
        if n >= limit:
            break
    return b"\n".join(out)[:limit]


def source_files(roots, suffixes):
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(suffixes):
                    found.append(os.path.join(dirpath, name))
    return found


def invalid_bytes_section(rng, size):
    """Raw bytes: valid text with invalid UTF-8 mixed in (lone continuation bytes, truncated
    sequences, overlongs, surrogates encoded as UTF-8, 0xFE/0xFF, Latin-1 text)."""
    bad = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc0\xaf", b"\xed\xa0\x80",
           b"\xf8\x88\x80\x80\x80", b"caf\xe9", b"na\xefve", b"\xe9t\xe9", b"\x00"]
    good = ["hello", " world", " the", "!", "'s", " ", "\n", "中文", "😀", "é", "123", "..."]
    out, n = [], 0
    while n < size:
        piece = rng.choice(bad) if rng.random() < 0.35 else rng.choice(good).encode("utf-8")
        out.append(piece)
        n += len(piece)
    return b"".join(out)


def build_text(mb, seed):
    rng = random.Random(seed)
    target = int(mb * 1e6)
    sections = []  # (name, bytes)
    try:
        kjv = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], capture_output=True, check=True).stdout
        sections.append(("KJV prose", kjv))
    except (OSError, subprocess.CalledProcessError):
        print("note: `bible` (Debian bible-kjv) not found; no KJV section", flush=True)
    py_root = os.path.dirname(os.__file__)
    sections.append(("Python sources", read_files(source_files([py_root], (".py",)), int(target * 0.30))))
    sections.append(("C/C++ headers", read_files(source_files(["/usr/include"], (".h", ".hpp")), int(target * 0.12))))
    sections.append(("multilingual + emoji", synthetic_multilingual(rng, int(target * 0.12)).encode("utf-8")))
    sections.append(("whitespace and controls", whitespace_torture(rng, int(target * 0.03)).encode("utf-8")))
    sections.append(("code point sweep", codepoint_sweep().encode("utf-8")))
    sections.append(("long runs", long_runs().encode("utf-8")))
    have = sum(len(s) for _, s in sections)
    if have < target:  # top up with more multilingual text
        sections.append(("multilingual (top-up)", synthetic_multilingual(rng, target - have).encode("utf-8")))
    raw_invalid = invalid_bytes_section(rng, 1_000_000)
    # Sprinkle <|endoftext|> between sections, as document separators.
    valid_parts = []
    for name, data in sections:
        valid_parts.append(data.decode("utf-8", errors="replace").encode("utf-8"))
    valid_parts.append(raw_invalid.decode("utf-8", errors="replace").encode("utf-8"))
    valid = (EOT.encode() + b"\n").join(valid_parts)
    return valid, raw_invalid, [(n, len(d)) for n, d in sections] + [("invalid bytes (as U+FFFD in part A)", len(raw_invalid))]


# ---- encoders -----------------------------------------------------------------------------

def patchbay_ids(patchbay, args, text_file, allow_special=True):
    cmd = [patchbay, "tokenizer", "encode"] + args + ["--input", text_file]
    if allow_special:
        cmd.append("--allow-special")
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, check=True)
    seconds = time.time() - start
    return [int(x) for x in out.stdout.split()], seconds


def hf_tokenizer(gpt2_dir):
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    tok = Tokenizer(BPE.from_file(os.path.join(gpt2_dir, "encoder.json"), os.path.join(gpt2_dir, "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOT])
    return tok


def safe_chunks(text, size):
    """Cuts at ' ' + ASCII letter/digit, where the GPT-2 pattern always has a piece boundary,
    so encoding the chunks separately gives the ids of the whole text."""
    chunks, begin = [], 0
    while begin < len(text):
        end = begin + size
        while end < len(text) and not (text[end] == " " and end + 1 < len(text) and text[end + 1].isascii()
                                       and text[end + 1].isalnum()):
            end += 1
        chunks.append(text[begin:end])
        begin = end
    return chunks


def hf_ids(tok, text):
    start = time.time()
    ids = []
    for enc in tok.encode_batch(safe_chunks(text, 1_000_000), add_special_tokens=False):
        ids.extend(enc.ids)
    return ids, time.time() - start


class Gpt2EncoderPy:
    """GPT-2's published encoder algorithm (src/encoder.py), written from its description."""

    def __init__(self, gpt2_dir):
        import regex
        with open(os.path.join(gpt2_dir, "encoder.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
            lines = f.read().split("\n")[1:-1]
        self.ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
        self.byte_encoder = bytes_to_unicode()
        self.pattern = regex.compile(PATTERN)
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            first, second = best
            merged, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = tuple(merged)
        self.cache[token] = word
        return word

    def encode(self, text, errors="strict"):
        ids = []
        for piece in self.pattern.findall(text):
            mapped = "".join(self.byte_encoder[b] for b in piece.encode("utf-8", errors=errors))
            ids.extend(self.encoder[t] for t in self.bpe(mapped))
        return ids

    def encode_with_specials(self, text, errors="strict"):
        ids = []
        for i, part in enumerate(text.split(EOT)):
            if i > 0:
                ids.append(self.encoder[EOT])
            ids.extend(self.encode(part, errors))
        return ids


def token_lengths(gpt2_dir):
    decoder = {c: b for b, c in bytes_to_unicode().items()}
    with open(os.path.join(gpt2_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    lengths = [0] * len(encoder)
    for token, i in encoder.items():
        lengths[i] = len(EOT.encode()) if token == EOT else len(token)
        assert token == EOT or all(c in decoder for c in token)
    return lengths


def mismatch_regions(a, b, lengths):
    """Regions between common token boundaries (byte offsets) where the id sequences differ:
    (start byte, end byte, ids of a, ids of b)."""
    regions, i, j, pa, pb = [], 0, 0, 0, 0
    while i < len(a) or j < len(b):
        if i < len(a) and j < len(b) and a[i] == b[j]:  # pa == pb here
            pa += lengths[a[i]]
            pb = pa
            i += 1
            j += 1
            continue
        start, si, sj = pa, i, j
        while True:  # advance the side that is behind until the boundaries meet again
            if i < len(a) and (pa <= pb or j >= len(b)):
                pa += lengths[a[i]]
                i += 1
            elif j < len(b):
                pb += lengths[b[j]]
                j += 1
            else:
                break
            if pa == pb:
                break
        regions.append((start, max(pa, pb), a[si:i], b[sj:j]))
        pb = pa = max(pa, pb)
    return regions


def report(name_a, name_b, a, b, lengths, data):
    regions = mismatch_regions(a, b, lengths) if a != b else []
    status = "identical" if not regions else f"{len(regions)} mismatching region(s)"
    print(f"  {name_a} vs {name_b}: {len(a)} vs {len(b)} ids, {status}", flush=True)
    for start, end, ra, rb in regions[:5]:
        print(f"    bytes [{start}, {end}) {data[max(0, start - 10):end + 10]!r}: {ra[:12]} vs {rb[:12]}")
    return len(regions)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=24.0, help="size of the valid text (default 24 MB)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--patchbay", default=os.path.join(ROOT, "build", "patchbay"))
    parser.add_argument("--gpt2-dir", default=os.environ.get("PATCHBAY_GPT2_TOKENIZER_DIR")
                        or os.path.join(ROOT, "build", "third_party", "gpt2-tokenizer"))
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "tokenizer-compare"))
    parser.add_argument("--venv", help="virtual environment to run in (created with tokenizers + regex if absent)")
    parser.add_argument("--skip-encoder-py", action="store_true", help="skip the slow pure-Python GPT-2 encoder")
    args = parser.parse_args()
    if args.venv:
        ensure_venv(os.path.abspath(args.venv))
    for name in ("encoder.json", "vocab.bpe"):
        if not os.path.exists(os.path.join(args.gpt2_dir, name)):
            sys.exit(f"{name} not found in {args.gpt2_dir}: run scripts/tokenizers/fetch_gpt2.sh first")
    import tokenizers
    os.makedirs(args.workdir, exist_ok=True)
    valid, raw_invalid, sections = build_text(args.mb, args.seed)
    valid_file = os.path.join(args.workdir, "valid.txt")
    invalid_file = os.path.join(args.workdir, "invalid.bin")
    with open(valid_file, "wb") as f:
        f.write(valid)
    with open(invalid_file, "wb") as f:
        f.write(raw_invalid)
    print(f"text: {len(valid) / 1e6:.1f} MB valid UTF-8 ({valid_file}); sections:")
    for name, size in sections:
        print(f"  {name:40s} {size / 1e6:7.2f} MB")
    print(f"tokenizers {tokenizers.__version__}, Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}")
    lengths = token_lengths(args.gpt2_dir)
    tok = hf_tokenizer(args.gpt2_dir)
    hf_json = os.path.join(args.workdir, "gpt2-tokenizer.json")
    tok.save(hf_json)
    gpt2_files = ["--vocab-file", os.path.join(args.gpt2_dir, "encoder.json"),
                  "--merges-file", os.path.join(args.gpt2_dir, "vocab.bpe")]
    mismatches = 0
    text = valid.decode("utf-8")

    print("\nA. valid UTF-8, <|endoftext|> allowed as a special token")
    pb_files, t_files = patchbay_ids(args.patchbay, gpt2_files, valid_file)
    pb_json, t_json = patchbay_ids(args.patchbay, ["--tokenizer", hf_json, "--kind", "bpe"], valid_file)
    hf, t_hf = hf_ids(tok, text)
    print(f"  wall time (incl. process start and I/O): patchbay GPT-2 files {t_files:.1f} s, patchbay tokenizer.json "
          f"{t_json:.1f} s, tokenizers {t_hf:.1f} s")
    mismatches += report("patchbay(GPT-2 files)", "tokenizers", pb_files, hf, lengths, valid)
    mismatches += report("patchbay(tokenizer.json)", "tokenizers", pb_json, hf, lengths, valid)
    if not args.skip_encoder_py:
        start = time.time()
        ref = Gpt2EncoderPy(args.gpt2_dir).encode_with_specials(text)
        print(f"  GPT-2 encoder.py algorithm: {time.time() - start:.1f} s")
        mismatches += report("patchbay(GPT-2 files)", "encoder.py", pb_files, ref, lengths, valid)

    print("\nB. raw bytes with invalid UTF-8 (Patchbay only; references take valid strings)")
    pb_raw, _ = patchbay_ids(args.patchbay, gpt2_files, invalid_file)
    decoder = {c: b for b, c in bytes_to_unicode().items()}
    with open(os.path.join(args.gpt2_dir, "encoder.json"), encoding="utf-8") as f:
        id_bytes = {i: (EOT.encode() if t == EOT else bytes(decoder[c] for c in t)) for t, i in json.load(f).items()}
    round_trip = b"".join(id_bytes[i] for i in pb_raw) == raw_invalid
    print(f"  {len(raw_invalid)} bytes -> {len(pb_raw)} ids; byte-exact round trip: {'yes' if round_trip else 'NO'}")
    try:
        tok.encode(raw_invalid.decode("utf-8", errors="surrogateescape"))
        print("  tokenizers accepted a string with lone surrogates")
    except Exception as e:  # noqa: BLE001 - report whatever the binding raises
        print(f"  tokenizers on the surrogateescape-decoded text: refused ({type(e).__name__})")
    if not args.skip_encoder_py:
        variant = Gpt2EncoderPy(args.gpt2_dir).encode_with_specials(
            raw_invalid.decode("utf-8", errors="surrogateescape"), errors="surrogateescape")
        report("patchbay(raw bytes)", "encoder.py+surrogateescape", pb_raw, variant, lengths, raw_invalid)
        print("  (expected to differ: see docs/interop_tokenizers.md, 'Invalid UTF-8')")
    ok = mismatches == 0 and round_trip
    print("\nRESULT:", "clean (part A identical, part B round-trips)" if ok else "MISMATCHES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
