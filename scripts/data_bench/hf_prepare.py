#!/usr/bin/env python3
"""The Hugging Face side of the data-preparation benchmark (scripts/bench_data_prepare.sh).

Reads the files listed in FILES (one path a line) with `datasets`' text builder, one document
per file (sample_by="document", as `patchbay data prepare` takes a text file as one document),
and tokenizes them with `tokenizers` from TOKENIZER_JSON (GPT-2's encoder.json and vocab.bpe
as a tokenizer.json, <|endoftext|> a special token: the very file `patchbay data prepare`
loads) through `Dataset.map(batched=True, num_proc=N)`, appending the <|endoftext|> id to
every document. The tokenized dataset
is written to OUT with save_to_disk (Arrow files), as `data prepare` writes its shards.
Prints one JSON line: files, bytes, tokens, seconds (load, map, save, total) and MB/s.

  hf_prepare.py FILES TOKENIZER_JSON OUT NUM_PROC
"""
import json
import os
import sys
import time


def main():
    files_list, tokenizer_json, out, num_proc = sys.argv[1:5]
    num_proc = int(num_proc)
    os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(out, "cache"))
    import datasets
    from tokenizers import Tokenizer

    datasets.disable_progress_bars()
    files = [line.strip() for line in open(files_list) if line.strip()]
    total_bytes = sum(os.path.getsize(f) for f in files)
    start = time.time()
    ds = datasets.load_dataset("text", data_files=files, sample_by="document", split="train",
                               cache_dir=os.path.join(out, "cache"), num_proc=num_proc)
    loaded = time.time()
    tokenizer = Tokenizer.from_file(tokenizer_json)
    eot = tokenizer.token_to_id("<|endoftext|>")

    def encode(batch):
        encodings = tokenizer.encode_batch(batch["text"], add_special_tokens=False)
        return {"ids": [e.ids + [eot] for e in encodings]}

    tokenized = ds.map(encode, batched=True, num_proc=num_proc, remove_columns=["text"])
    mapped = time.time()
    tokenized.save_to_disk(os.path.join(out, "tokenized"), num_proc=num_proc)
    saved = time.time()
    # Counting tokens without materialising them all: the Arrow list lengths.
    import pyarrow.compute as pc
    tokens = int(pc.sum(pc.list_value_length(tokenized.data.column("ids"))).as_py())
    seconds = saved - start
    print(json.dumps({"files": len(files), "documents": len(ds), "bytes": total_bytes, "tokens": tokens,
                      "load_s": round(loaded - start, 2), "map_s": round(mapped - loaded, 2),
                      "save_s": round(saved - mapped, 2), "seconds": round(seconds, 2),
                      "mb_per_s": round(total_bytes / 1e6 / seconds, 2),
                      "datasets": datasets.__version__, "num_proc": num_proc}))


if __name__ == "__main__":
    main()
