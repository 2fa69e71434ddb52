#!/usr/bin/env python3
"""Generates plugins/tokenizer_bpe/unicode_categories_data.cpp: the Unicode general category of
every code point, as runs (first code point of each run of equal category), from the Unicode
version Hugging Face `tokenizers` uses.

Why: pre-tokenizer patterns (GPT-2's, LLaMA 3's ...) classify characters with \\p{L}, \\p{N}, ...
Debian 12's PCRE2 (10.42) has Unicode 14 tables; `tokenizers` 0.23.3 (Oniguruma) has Unicode
16.0, so letters and digits added in Unicode 15-16 split differently and give other ids. The
plugin writes those classes out as explicit ranges from this table instead (see
unicode_categories.hpp). Measured on 2026-11-27: `tokenizers` 0.23.3's \\p{L} and \\p{N} over
every code point equal unicodedata2 16.0.0's L* and N* exactly (Unicode 14, 15.x and 18 differ);
scripts/tokenizers/sweep_unicode_classes.py repeats that check.

Also written: the code points whose category changed since the baseline Unicode 14.0.0 (the
tables of Debian 12's PCRE2 10.42; taken from Python 3.11's built-in `unicodedata`, which is
14.0.0): newly assigned ones and the one re-categorized (U+1171E, Mn -> Mc in Unicode 16). With
them the plugin writes \p{L} as [\p{L}<ranges added since 14.0>], which keeps PCRE2's fast
property test for the old letters (measured: a full explicit \p{L} class, 677 ranges, made
PCRE2's JIT ~10x slower on non-ASCII text). Checked on 2026-11-27 with unicodedata2 15.0.0 and
15.1.0: against 16.0.0 they differ from 14.0.0 only in new assignments and the same U+1171E, so
the same additions are exact for a PCRE2 with 14.0, 15.0, 15.1 or 16.0 tables (the plugin writes
every range out explicitly for any other PCRE2 Unicode version).

Hugging Face's Digits pre-tokenizer is not a regex: it asks Rust's `char::is_numeric`, whose
tables are the Rust toolchain's (Unicode 17.0 in `tokenizers` 0.23.3: its Digits isolate exactly
Unicode 17.0's Nd|Nl|No, measured on every code point, 13 more than Unicode 16.0). So the
generator also writes the numeric code points of --digits-python's unicodedata2 (17.0.x) that
Unicode 16.0 lacks; the plugin's Digits step is [\p{N}<those>].

Not run in CI. To regenerate (e.g. when `tokenizers` moves to a newer Unicode):
  python3 -m venv /work/.venvs/unicode16          # a Python 3.11 (unicodedata 14.0.0)
  /work/.venvs/unicode16/bin/pip install unicodedata2==16.0.0
  python3 -m venv /work/.venvs/ucd-17 && /work/.venvs/ucd-17/bin/pip install unicodedata2==17.0.1
  /work/.venvs/unicode16/bin/python scripts/tokenizers/gen_unicode_categories.py \
      --digits-python /work/.venvs/ucd-17/bin/python
then run the sweep against `tokenizers` and the tokenizer tests.
"""
import argparse
import json
import os
import subprocess
import sys
import unicodedata as baseline_ucd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "plugins", "tokenizer_bpe", "unicode_categories_data.cpp")

# Order of the GeneralCategory enum in unicode_categories.hpp.
BASELINE = "14.0.0"
CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
              "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"]


def category_runs(ucd):
    runs, previous = [], None
    for cp in range(0x110000):
        category = ucd.category(chr(cp))
        if category != previous:
            runs.append((cp, category))
            previous = category
    return runs


def changed_ranges(old, new):
    """[first, last, new category, old category] for runs of code points whose category differs."""
    out = []
    for cp in range(0x110000):
        before, now = old.category(chr(cp)), new.category(chr(cp))
        if before == now:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == now and out[-1][3] == before:
            out[-1][1] = cp
        else:
            out.append([cp, cp, now, before])
    return out


def numeric_additions(python, ucd):
    """(version, ranges) of code points numeric in `python`'s unicodedata2 but not in ucd's."""
    script = ("import json, unicodedata2 as u; print(json.dumps([u.unidata_version, [c for c in range(0x110000) "
              "if u.category(chr(c))[0] == 'N']]))")
    version, numeric = json.loads(subprocess.check_output([python, "-c", script]))
    ours = {cp for cp in range(0x110000) if ucd.category(chr(cp))[0] == "N"}
    missing = ours - set(numeric)
    if missing:
        sys.exit(f"Unicode {version} lacks numeric code points of {ucd.unidata_version}: {sorted(missing)[:5]}")
    ranges = []
    for cp in sorted(set(numeric) - ours):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return version, ranges


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect-version", default="16.0.0",
                        help="refuse to generate from another Unicode version (default 16.0.0)")
    parser.add_argument("--digits-python", required=True,
                        help="a Python whose unicodedata2 has the Unicode version of Rust's char::is_numeric "
                             "in the `tokenizers` build compared against (17.0.x for 0.23.3)")
    parser.add_argument("--expect-digits-version", default="17.0.0")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    try:
        import unicodedata2 as ucd
    except ImportError:
        sys.exit("needs the PyPI package unicodedata2 (pip install unicodedata2==16.0.0)")
    if ucd.unidata_version != args.expect_version:
        sys.exit(f"unicodedata2 has Unicode {ucd.unidata_version}, expected {args.expect_version} "
                 "(pip install unicodedata2==16.0.0, or pass --expect-version)")
    if baseline_ucd.unidata_version != BASELINE:
        sys.exit(f"the built-in unicodedata has Unicode {baseline_ucd.unidata_version}; the baseline "
                 f"(Debian 12's PCRE2 tables) is {BASELINE}: run under Python 3.11")
    runs = category_runs(ucd)
    digits_version, digits_added = numeric_additions(args.digits_python, ucd)
    if digits_version != args.expect_digits_version:
        sys.exit(f"--digits-python has Unicode {digits_version}, expected {args.expect_digits_version}")
    changed = changed_ranges(baseline_ucd, ucd)
    for _, category in runs:
        assert category in CATEGORIES, category
    lines = [
        "// GENERATED by scripts/tokenizers/gen_unicode_categories.py -- do not edit.",
        f"// Unicode {ucd.unidata_version} general categories (PyPI unicodedata2 {ucd.unidata_version}), as runs:",
        "// entry i says code points [first_i, first_{i+1}) have category_i; the last run ends at",
        "// U+10FFFF. Regenerate with the command in the script's docstring.",
        '#include "unicode_categories.hpp"',
        "",
        "namespace patchbay_bpe::unicode {",
        "",
        "// clang-format off",
        f'const char* const kUnicodeVersion = "{ucd.unidata_version}";',
        "",
        "namespace {",
        "using enum GeneralCategory;",
        "}  // namespace",
        "",
        f"const CategoryRun kCategoryRuns[{len(runs)}] = {{",
    ]
    per_line = 5
    for i in range(0, len(runs), per_line):
        chunk = runs[i:i + per_line]
        lines.append("    " + " ".join(f"{{0x{cp:05X}, {cat}}}," for cp, cat in chunk))
    lines += ["};", f"const size_t kCategoryRunCount = {len(runs)};", ""]
    lines += [f'const char* const kBaselineUnicodeVersion = "{BASELINE}";',
              f"// Code points whose category differs between Unicode {BASELINE} and {ucd.unidata_version}.",
              f"const ChangedRange kChangedSinceBaseline[{len(changed)}] = {{"]
    for first, last, now, before in changed:
        lines.append(f"    {{0x{first:05X}, 0x{last:05X}, {now}, {before}}},")
    lines += ["};", f"const size_t kChangedSinceBaselineCount = {len(changed)};", ""]
    lines += [f'const char* const kDigitsUnicodeVersion = "{digits_version}";',
              f"// Numeric (Nd|Nl|No) in Unicode {digits_version}, not in {ucd.unidata_version}.",
              f"const CodePointRange kDigitsAdditions[{len(digits_added)}] = {{"]
    lines += [f"    {{0x{a:05X}, 0x{b:05X}}}," for a, b in digits_added]
    lines += ["};", f"const size_t kDigitsAdditionsCount = {len(digits_added)};", "",
              "// clang-format on", "", "}  // namespace patchbay_bpe::unicode", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.out}: {len(runs)} runs, Unicode {ucd.unidata_version}; "
          f"{len(changed)} ranges changed since {BASELINE}")


if __name__ == "__main__":
    main()
