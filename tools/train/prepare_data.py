"""prepare_data.py — trains the BPE tokenizer and pre-tokenizes the corpus.

Reads WORK/docs_{train,val}.jsonl (corpus.py), writes:
  WORK/tokenizer/{tokenizer.json,tokenizer_config.json}
  WORK/train_tokens.npy   uint16, all training documents, each followed by <|endoftext|>
  WORK/val_prose.npy, WORK/val_code.npy   uint16, validation documents by kind
  WORK/data_stats.json    bytes/tokens per split, bytes per token

    /usr/bin/python3 tools/train/prepare_data.py --work tools/train/work [--vocab 8192]
"""
import argparse
import collections
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--vocab", type=int, default=8192, help="total vocab incl. 5 added tokens")
    ap.add_argument("--sample-chars", type=int, default=4000,
                    help="characters taken from the start of each training doc for BPE training")
    ap.add_argument("--max-len", type=int, default=1024)
    args = ap.parse_args()
    t0 = time.time()
    n_added = len(bpe.SPECIAL_TOKENS) + len(bpe.EXTRA_ADDED_TOKENS)
    counts = collections.Counter()
    for d in read_docs(os.path.join(args.work, "docs_train.jsonl")):
        counts.update(bpe.pretokenize(bpe.normalize(d["text"][:args.sample_chars])))
    log(f"tokenizer: {len(counts)} distinct pre-tokens ({time.time()-t0:.1f}s)")
    vocab, merges = bpe.train(counts, args.vocab - n_added, log=log)
    tok_dir = os.path.join(args.work, "tokenizer")
    bpe.save(tok_dir, vocab, merges, args.max_len)
    log(f"tokenizer: {len(vocab)} BPE ids, {len(merges)} merges ({time.time()-t0:.1f}s)")

    enc = bpe.load(tok_dir)
    eot = enc.added["<|endoftext|>"]
    stats = {}
    for split in ("train", "val"):
        chunks = {"prose": [], "code": []}
        nbytes = {"prose": 0, "code": 0}
        for d in read_docs(os.path.join(args.work, f"docs_{split}.jsonl")):
            ids = enc.encode(d["text"])
            ids.append(eot)
            chunks[d["kind"]].append(np.asarray(ids, dtype=np.uint16))
            nbytes[d["kind"]] += len(bpe.normalize(d["text"]).encode("utf-8"))
        for kind in ("prose", "code"):
            n = int(sum(len(c) for c in chunks[kind]))
            stats[f"{split}_{kind}"] = {"bytes": nbytes[kind], "tokens": n,
                                        "bytes_per_token": nbytes[kind] / max(n, 1)}
            log(f"{split} {kind}: {nbytes[kind]/1e6:.2f} MB -> {n/1e6:.2f} M tokens "
                f"({nbytes[kind]/max(n,1):.2f} bytes/token) ({time.time()-t0:.1f}s)")
        if split == "train":
            # interleave prose and code documents deterministically so windows mix both
            docs = chunks["prose"] + chunks["code"]
            order = np.random.default_rng(1234).permutation(len(docs))
            arr = np.concatenate([docs[i] for i in order])
            np.save(os.path.join(args.work, "train_tokens.npy"), arr)
        else:
            for kind in ("prose", "code"):
                np.save(os.path.join(args.work, f"val_{kind}.npy"), np.concatenate(chunks[kind]))
    with open(os.path.join(args.work, "data_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)


if __name__ == "__main__":
    main()
