#!/usr/bin/env python3
"""Assembles a multi-source text corpus from what this machine ships (issue 35, item 6).

Walks the given roots in sorted order and copies every text file (no NUL byte in its first
8 KiB, valid UTF-8; `.gz` files — man pages, changelogs — decompressed first) into
OUT/<source>/<flattened path>, each real path once (symlinks and hard links to a file already
taken are skipped: deduplicated by path), until a source reaches its byte budget or its roots
are exhausted. Sources (each a folder of OUT, one `--source` of `patchbay data prepare`):

  doc      /usr/share/doc, /usr/share/man, /usr/share/info   (documentation, man pages)
  include  /usr/include, /usr/local/cuda*/include, /usr/lib/gcc   (C/C++ headers)
  code     /usr/lib/python3*, /usr/share/perl*, /usr/lib/x86_64-linux-gnu/perl*, /work/.venvs
           (Python/Perl sources: Debian's, and the packages pip put in this machine's venvs)
  misc     /usr/share (the rest: dictionaries, data files, scripts), /usr/src, /etc, /var/lib/dpkg

  assemble_corpus.py OUT [--max-gb 2.2]

Prints per source its files and bytes, and writes OUT/files.txt (one path per line, for the
Hugging Face side) and OUT/sources.json.
"""
import gzip
import json
import os
import re
import sys

SOURCES = [
    ("doc", ["/usr/share/doc", "/usr/share/man", "/usr/share/info"]),
    ("include", ["/usr/include", "/usr/local/cuda/include", "/usr/local/cuda/targets", "/usr/lib/gcc"]),
    ("code", ["/usr/lib/python3", "/usr/lib/python3.11", "/usr/share/perl", "/usr/share/perl5",
              "/usr/lib/x86_64-linux-gnu/perl", "/usr/lib/x86_64-linux-gnu/perl-base", "/work/.venvs"]),
    ("misc", ["/usr/share", "/usr/src", "/usr/lib", "/etc", "/var/lib/dpkg"]),
]
MAX_FILE = 64 << 20


def text_of(path):
    """The file's bytes when it is UTF-8 text (decompressed if .gz), else None."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(MAX_FILE + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE + 1)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if not data or len(data) > MAX_FILE or b"\0" in data[:8192]:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return data


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    max_bytes = int(float(sys.argv[sys.argv.index("--max-gb") + 1]) * 1e9) if "--max-gb" in sys.argv else int(2.2e9)
    seen = set()  # (device, inode) of every file taken
    files, summary, total = [], {}, 0
    budget = max_bytes // len(SOURCES)
    for index, (name, roots) in enumerate(SOURCES):
        # A source gets an equal share plus whatever earlier sources left unused.
        budget_here = budget * (index + 1) - total if index + 1 < len(SOURCES) else max_bytes - total
        taken = count = 0
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        for root in roots:
            for directory, dirs, names in os.walk(root):
                dirs.sort()
                if directory.startswith(out) or "/__pycache__" in directory:
                    dirs.clear()
                    continue
                for file_name in sorted(names):
                    if taken >= budget_here:
                        break
                    path = os.path.join(directory, file_name)
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if not os.path.isfile(path) or os.path.islink(path) or (st.st_dev, st.st_ino) in seen:
                        continue
                    data = text_of(path)
                    if data is None:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                    flat = path.strip("/").replace("/", "__")
                    if flat.endswith(".gz"):
                        flat = flat[:-3]
                    # Plain names: `datasets` reads '::' as a protocol chain and [*? as globs.
                    flat = re.sub(r"[^A-Za-z0-9._+-]", "_", flat)
                    target = os.path.join(folder, flat)
                    if os.path.exists(target):  # two paths flattening alike (a/b__c, a__b/c; x.gz beside x)
                        continue
                    with open(target, "wb") as f:
                        f.write(data)
                    files.append(target)
                    taken += len(data)
                    count += 1
        summary[name] = {"files": count, "bytes": taken}
        total += taken
        print(f"{name}: {count} files, {taken / 1e6:.1f} MB", flush=True)
    with open(os.path.join(out, "files.txt"), "w") as f:
        f.write("\n".join(files) + "\n")
    with open(os.path.join(out, "sources.json"), "w") as f:
        json.dump({"sources": summary, "total_bytes": total}, f, indent=1)
    print(f"total: {len(files)} files, {total / 1e9:.3f} GB in {out}")


if __name__ == "__main__":
    main()
