"""chat_self.py — has a chat model answer the training questions itself (through `nextn serve`,
T = 0) and writes those conversations as a chat set for `train_chat.py --distill-mtp`.

Why: at T = 0 the MTP head's drafts are accepted when they match the model's own next
choice on the model's own text. Distilling on the chat set teaches the head the backbone's
choices on the reference answers, a distribution the model never decodes; its own answers
are exactly what it decodes, so the head learns where it is used (as EAGLE and Medusa
distil on the target's generations).

Reads CHAT/train_prompts.jsonl (chat_data.py: each training conversation up to its first
answer), answers --count of them drawn with --seed (max_tokens --max-tokens; answers cut
off at that length are dropped, since an <|im_end|> after them would teach a token the
model did not choose), renders [prompt; answer] with the model's template, loss on the
answer and its <|im_end|>, and writes OUT/train_tokens.npy + train_mask.npy; the held-out
files (val_*) are copied from CHAT so validation stays comparable. OUT/self_stats.json
records the model, counts and tokens.

    /usr/bin/python3 tools/train/chat_self.py --nextn build/nextn --model RUN/final \
        --chat tools/train/work/chat --out tools/train/work/chat_self --count 5000
"""
import argparse
import json
import os
import random
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_data  # noqa: E402
from chat_eval import Server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nextn", default="build/nextn")
    ap.add_argument("--model", required=True, help="the exported chat model whose answers to collect")
    ap.add_argument("--chat", required=True, help="chat_data.py output dir (train_prompts.jsonl, val_*)")
    ap.add_argument("--tokenizer", default="", help="tokenizer dir (default: --model)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    with open(os.path.join(args.chat, "train_prompts.jsonl"), encoding="utf-8") as f:
        prompts = [json.loads(line) for line in f]
    random.Random(args.seed).shuffle(prompts)
    prompts = prompts[:args.count]
    ren = chat_data.Renderer(args.tokenizer or args.model)
    eot = ren.enc.added["<|endoftext|>"]
    os.makedirs(args.out, exist_ok=True)

    # --mtp only makes it faster: at T = 0 the output is the plain greedy output.
    srv = Server(args.nextn, args.model, ["--mtp"], args.threads)
    ids, mask = [], []
    kept = cut = 0
    start = time.time()
    try:
        for i, p in enumerate(prompts):
            r = srv.chat(p["messages"], max_tokens=args.max_tokens, temperature=0.0, seed=1)
            c = r["choices"][0]
            if c["finish_reason"] != "stop":
                cut += 1
                continue
            msgs = p["messages"] + [{"role": "assistant", "content": c["message"].get("content") or ""}]
            a, m = ren.conversation(msgs)
            ids += a + [eot]
            mask += m + [0]
            kept += 1
            if (i + 1) % 250 == 0:
                print(f"{i + 1}/{len(prompts)} answered, {sum(mask)} answer tokens, "
                      f"{time.time() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        srv.close()
    if not kept:
        raise SystemExit("chat_self: no answer ended before --max-tokens")
    np.save(os.path.join(args.out, "train_tokens.npy"), np.asarray(ids, dtype=np.uint16))
    np.save(os.path.join(args.out, "train_mask.npy"), np.asarray(mask, dtype=np.uint8))
    for name in ("val_tokens.npy", "val_mask.npy", "val_questions.jsonl"):
        shutil.copy(os.path.join(args.chat, name), os.path.join(args.out, name))
    stats = {"model": os.path.abspath(args.model), "prompts": len(prompts), "kept": kept,
             "cut_at_max_tokens": cut, "tokens": len(ids), "answer_tokens": int(sum(mask)),
             "max_tokens": args.max_tokens, "seed": args.seed, "seconds": round(time.time() - start, 1)}
    with open(os.path.join(args.out, "self_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
