#!/usr/bin/env bash
# Verse-aligned KJV -> World English Bible pairs for the encoder-decoder modernisation task
# (issue 37 item 6; docs/encoder_decoder.md "The KJV -> WEB task").
#
#   bash scripts/seq2seq/prepare_kjv_web.sh [OUT_DIR]        (default data/kjv_web)
#
# Reads the SWORD modules engKJV2006eb (package sword-text-kjv) and engWEB2015eb
# (sword-text-web) with diatheke (package diatheke), one whole book per call
# (`diatheke -b MODULE -f OSIS -k Genesis` prints every verse of the book, one per line, in
# about a second; 66 books x 2 modules take about two minutes). Writes, under OUT_DIR:
#   train.jsonl, validation.jsonl, test.jsonl   {"ref", "source" (KJV), "target" (WEB)}
#   corpus.txt                                  the training pairs' text (trains the tokenizer)
#   README.txt                                  counts, the split and the quirks handled
# Split by book (no verse of a test book is seen in training):
#   test       = Mark, Ruth, Titus
#   validation = Jonah, Joel, Philippians
#   train      = the other 60 books
#
# Quirks of the modules' text, and what is done with them:
#   - words run together where two Strong's-tagged words meet without a space: the WEB's
#     `<w>God</w><w>created</w>` is "Godcreated" in diatheke's plain output. We read the OSIS
#     output and put a space between adjacent <w> elements when a letter or digit ends the
#     first and begins the second (counted in README.txt as "joins split"); likewise
#     punctuation run into the next word ("Christ,the", "righteousness.”Then").
#   - headings printed before the reference on the same line (Psalm titles "A Psalm by
#     David, ...", the acrostic letters of Psalm 119 "ALEPH"): dropped, only the verse text
#     after "Book C:V: " is kept.
#   - the WEB's last verse (Revelation 22:21) has the module's glossary appended after a run of
#     spaces ("The following words used in the World English Bible ..."): cut there.
#   - the KJV's paragraph marks "¶" are removed; OSIS entities (&amp; &lt; &gt; &quot; &apos;)
#     decoded; whitespace runs become one space.
#   - verses empty in either module (the WEB and KJV number a few verses differently) are
#     left out and counted.
set -euo pipefail

OUT_DIR="${1:-data/kjv_web}"
KJV=engKJV2006eb
WEB=engWEB2015eb

missing=()
command -v diatheke >/dev/null 2>&1 || missing+=(diatheke)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -eq 0 ]; then
  modules="$(diatheke -b system -k modulelist 2>/dev/null || true)"
  grep -q "^$KJV " <<<"$modules" || missing+=(sword-text-kjv)
  grep -q "^$WEB " <<<"$modules" || missing+=(sword-text-web)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${PATCHBAY_NO_INSTALL:-0}" != 1 ]; then
    echo "installing ${missing[*]} (Debian packages; set PATCHBAY_NO_INSTALL=1 to refuse)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq diatheke sword-text-kjv sword-text-web python3 >&2
  else
    echo "prepare_kjv_web.sh: missing ${missing[*]}." >&2
    echo "  Install them (Debian 12): sudo apt-get install diatheke sword-text-kjv sword-text-web python3" >&2
    echo "  then check: diatheke -b system -k modulelist   lists $KJV and $WEB" >&2
    exit 1
  fi
fi

BOOKS=(Gen Exod Lev Num Deut Josh Judg Ruth 1Sam 2Sam 1Kgs 2Kgs 1Chr 2Chr Ezra Neh Esth Job Ps
  Prov Eccl Song Isa Jer Lam Ezek Dan Hos Joel Amos Obad Jonah Mic Nah Hab Zeph Hag Zech Mal
  Matt Mark Luke John Acts Rom 1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm Heb
  Jas 1Pet 2Pet 1John 2John 3John Jude Rev)

RAW="$(mktemp -d)"
trap 'rm -rf "$RAW"' EXIT
echo "reading ${#BOOKS[@]} books from $KJV and $WEB with diatheke ..." >&2
for book in "${BOOKS[@]}"; do
  for module in "$KJV" "$WEB"; do
    diatheke -b "$module" -f OSIS -k "$book" >"$RAW/$module.$book.osis"
  done
done

mkdir -p "$OUT_DIR"
python3 - "$RAW" "$OUT_DIR" "$KJV" "$WEB" "${BOOKS[@]}" <<'PY'
import html, json, re, sys

raw, out_dir, kjv, web, books = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
TEST, VALIDATION = {"Mark", "Ruth", "Titus"}, {"Jonah", "Joel", "Phil"}
# "Book C:V: " at a line start or after a heading printed on the same line.
KEY = re.compile(r"((?:I{1,3} )?[A-Z][a-z]+(?: of [A-Z][a-z]+)*) (\d+):(\d+): ")
JOIN = re.compile(r"(?<=[^\W_])</w><w>(?=[^\W_])")
# "Christ</w>,<w>the" and "righteousness</w>.”<w>Then": punctuation then a word, no space.
PUNCT_JOIN = re.compile(r"([,;:.!?][\u201d\u2019]*)<w>(?=[^\W_])")
GLOSSARY = "The following words used in the World English Bible"
stats = {"joins split": 0, "punctuation joins split": 0, "glossary cut": 0}

def clean(text):
    n = len(JOIN.findall(text))
    stats["joins split"] += n
    text = JOIN.sub("</w> <w>", text)
    stats["punctuation joins split"] += len(PUNCT_JOIN.findall(text))
    text = PUNCT_JOIN.sub(r"\1 <w>", text)
    cut = text.find(GLOSSARY)
    if cut >= 0:
        stats["glossary cut"] += 1
        text = text[:cut]
    text = re.sub(r"<[^>]*>", "", text)
    text = html.unescape(text).replace("\u00b6", " ")
    return " ".join(text.split())

def verses(path):
    """(chapter, verse) -> text for one book's OSIS dump (one line per verse)."""
    found = {}
    for line in open(path, encoding="utf-8"):
        keys = list(KEY.finditer(line))
        if not keys:
            continue  # the trailing "(module)" line
        key = keys[0]
        found[(int(key.group(2)), int(key.group(3)))] = clean(line[key.end():])
    return found

splits = {"train": [], "validation": [], "test": []}
dropped = 0
for book in books:
    a = verses(f"{raw}/{kjv}.{book}.osis")
    b = verses(f"{raw}/{web}.{book}.osis")
    split = "test" if book in TEST else "validation" if book in VALIDATION else "train"
    for cv in sorted(set(a) | set(b)):
        source, target = a.get(cv, ""), b.get(cv, "")
        if not source or not target:
            dropped += 1
            continue
        splits[split].append({"ref": f"{book} {cv[0]}:{cv[1]}", "source": source, "target": target})

for name, rows in splits.items():
    with open(f"{out_dir}/{name}.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
with open(f"{out_dir}/corpus.txt", "w", encoding="utf-8") as f:
    for row in splits["train"]:
        f.write(row["source"] + "\n" + row["target"] + "\n")
summary = (
    f"KJV ({kjv}) -> WEB ({web}) verse pairs, by prepare_kjv_web.sh\n"
    f"train {len(splits['train'])}, validation {len(splits['validation'])} (Jonah, Joel, "
    f"Philippians), test {len(splits['test'])} (Mark, Ruth, Titus)\n"
    f"verses missing or empty in one module, left out: {dropped}\n"
    f"run-together words split (</w><w> between letters): {stats['joins split']}\n"
    f"punctuation run into the next word, space added: {stats['punctuation joins split']}\n"
    f"glossary cut from a verse: {stats['glossary cut']}\n")
open(f"{out_dir}/README.txt", "w", encoding="utf-8").write(summary)
sys.stderr.write(summary)
PY
echo "wrote $OUT_DIR/{train,validation,test}.jsonl and corpus.txt" >&2
