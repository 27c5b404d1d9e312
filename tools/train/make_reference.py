"""make_reference.py — reference outputs of the training framework for nextn's tests
(tests/train/): computed with PyTorch in float32 from the *exported* BF16 weights
(export round trip), so the tests themselves need only numpy.

Writes into --out (default tests/train/data):
  val_texts.jsonl        {"name", "text", "ids"}: held-out texts and bpe.py's ids
  ref_<name>.tokens.npy  int32 [n] prompt ids
  ref_<name>.prefill.npy float16 [n, V] logits of every prompt row
  ref_<name>.hidden.npy  float32 [n, H] post-final-norm hidden states
  ref_<name>.mtp.npy     float16 [n-1, V] MTP layer 0 logits, rows p consume (h_p, x_{p+1})
  ref_<name>.decode.npy  float16 [N, V] logits of N greedy steps (step 0 feeds argmax of the last row)
  ref_<name>.greedy.npy  int32 [N] tokens fed at each greedy step
(the layout of `nextn debug-logits`, contract 2; logits stored as float16 to keep them small).

    /usr/bin/python3 tools/train/make_reference.py --model models/nextn-tiny --work tools/train/work
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import evaluate  # noqa: E402

PROMPTS = {
    "prose": "And the LORD spake unto Moses, saying, Speak unto the children",
    "code": "def fib(n):\n    if n < 2:\n        return n\n    return",
}
# the chat model (Qwen3.5 hybrid): prompts rendered with its chat template; the second one
# is longer than a 64-token DeltaNet chunk and has an earlier assistant turn
CHAT_PROMPTS = {
    "chat": [{"role": "user", "content": "What does the ls command do?"}],
    "chat2": [{"role": "system", "content": "You are a helpful assistant."},
              {"role": "user", "content": "What is a hacker?"},
              {"role": "assistant", "content": "hacker (n.): A person who enjoys exploring the details "
                                               "of programmable systems and how to stretch their capabilities."},
              {"role": "user", "content": "What does `os.path.join()` do in Python?"}],
}


@torch.no_grad()
def reference(model, ids, n_decode):
    x = torch.tensor([ids], dtype=torch.long)
    h = model.backbone(x)
    prefill = model.logits(h)[0]
    mtp_rows = model.mtp_rows if hasattr(model, "mtp_rows") else model.mtp
    mtp = model.logits(mtp_rows(h, x))[0]
    fed, dec = [], []
    nxt = int(prefill[-1].argmax())
    seq = list(ids)
    for _ in range(n_decode):
        fed.append(nxt)
        seq.append(nxt)
        logits = model.logits(model.backbone(torch.tensor([seq], dtype=torch.long)))[0, -1]
        dec.append(logits)
        nxt = int(logits.argmax())
    return {"tokens": np.asarray(ids, np.int32), "prefill": prefill.numpy().astype(np.float16),
            "hidden": h[0].numpy().astype(np.float32), "mtp": mtp.numpy().astype(np.float16),
            "decode": torch.stack(dec).numpy().astype(np.float16),
            "greedy": np.asarray(fed, np.int32)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", default="", help="corpus work dir with docs_val.jsonl (not with --chat)")
    ap.add_argument("--out", default="tests/train/data")
    ap.add_argument("--every", type=int, default=5, help="take every k-th held-out document")
    ap.add_argument("--chars", type=int, default=3000)
    ap.add_argument("--decode", type=int, default=8)
    ap.add_argument("--chat", action="store_true",
                    help="the Qwen3.5 chat model: chat prompts, no val_texts.jsonl (same tokenizer)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    enc = bpe.load(args.model)
    if args.chat:
        import chat_data
        import model_qwen35
        ren = chat_data.Renderer(args.model)
        model = model_qwen35.load_exported(args.model).float().eval()
        for name, msgs in CHAT_PROMPTS.items():
            ids = ren.encode(ren.render(msgs, add_generation_prompt=True))
            ref = reference(model, ids, args.decode)
            for k, v in ref.items():
                np.save(os.path.join(args.out, f"ref_{name}.{k}.npy"), v)
            print(f"ref_{name}: {len(ids)} prompt tokens, greedy {ref['greedy'].tolist()} -> "
                  f"{enc.decode(ref['greedy'].tolist())!r}")
        return
    with open(os.path.join(args.work, "docs_val.jsonl"), encoding="utf-8") as f, \
            open(os.path.join(args.out, "val_texts.jsonl"), "w", encoding="utf-8") as g:
        n = ntok = 0
        for i, line in enumerate(f):
            if i % args.every:
                continue
            d = json.loads(line)
            text = d["text"][:args.chars]
            ids = enc.encode(text)
            g.write(json.dumps({"name": d["name"], "text": text, "ids": ids}, ensure_ascii=False) + "\n")
            n += 1
            ntok += len(ids)
    print(f"val_texts.jsonl: {n} texts, {ntok} tokens")
    model = evaluate.load_exported(args.model, torch.device("cpu")).float().eval()
    for name, text in PROMPTS.items():
        ids = enc.encode(text)
        ref = reference(model, ids, args.decode)
        for k, v in ref.items():
            np.save(os.path.join(args.out, f"ref_{name}.{k}.npy"), v)
        print(f"ref_{name}: {len(ids)} prompt tokens, greedy {ref['greedy'].tolist()} -> "
              f"{enc.decode(ref['greedy'].tolist())!r}")


if __name__ == "__main__":
    main()
