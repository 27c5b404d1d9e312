"""check_reference.py — cross-checks the pipeline against Hugging Face libraries when they
are installed (they are optional; the training pipeline never needs them):
  1. `tokenizers` loads our tokenizer.json and reproduces bpe.py's ids on every held-out doc;
  2. `transformers` Qwen2ForCausalLM, loaded with the exported backbone tensors, reproduces
     model.py's backbone logits (float32), which pins RoPE/attention/norm conventions.

    python3 tools/train/check_reference.py --data DIR_WITH_docs_val.jsonl_AND_tokenizer --model EXPORT_DIR
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


def check_tokenizer(data):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("tokenizers: not installed, skipped")
        return
    tok = Tokenizer.from_file(os.path.join(data, "tokenizer", "tokenizer.json"))
    enc = bpe.load(os.path.join(data, "tokenizer"))
    n = bad = ntok = 0
    with open(os.path.join(data, "docs_val.jsonl"), encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            a = tok.encode(text, add_special_tokens=False).ids
            b = enc.encode(text)
            n += 1
            ntok += len(b)
            if a != b:
                bad += 1
                if bad <= 3:
                    i = next(k for k in range(min(len(a), len(b))) if a[k] != b[k]) if a[:len(b)] != b[:len(a)] else min(len(a), len(b))
                    print(f"tokenizers MISMATCH doc {n}: at {i}: hf {a[i:i+8]} ours {b[i:i+8]}")
    special = tok.encode("<|im_start|>user\nhi<|im_end|><think>x</think><|endoftext|>",
                         add_special_tokens=False).ids
    print(f"tokenizers: {n - bad}/{n} held-out docs identical ({ntok} tokens); specials -> {special}")


def check_transformers(model_dir):
    try:
        import transformers
        from transformers import Qwen2Config, Qwen2ForCausalLM
    except Exception as e:  # noqa: BLE001
        print(f"transformers: unavailable ({e}), skipped")
        return
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    qc = Qwen2Config(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                     intermediate_size=c["intermediate_size"], num_hidden_layers=c["num_hidden_layers"],
                     num_attention_heads=c["num_attention_heads"],
                     num_key_value_heads=c["num_key_value_heads"], rms_norm_eps=c["rms_norm_eps"],
                     rope_theta=c["rope_theta"], max_position_embeddings=c["max_position_embeddings"],
                     tie_word_embeddings=True, use_sliding_window=False)
    hf = Qwen2ForCausalLM(qc).float().eval()
    ours = evaluate.load_exported(model_dir, torch.device("cpu")).float().eval()
    sd = {k: v for k, v in ours.state_dict().items() if "mtp_layers" not in k}
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    missing = [m for m in missing if "rotary" not in m]
    ids = torch.from_numpy(np.arange(1, 200, dtype=np.int64) * 37 % c["vocab_size"])[None, :]
    with torch.no_grad():
        a = hf(ids).logits[0]
        b = ours.logits(ours.backbone(ids))[0]
    d = (a - b).abs().max().item()
    print(f"transformers {transformers.__version__} Qwen2ForCausalLM vs model.py backbone logits: "
          f"max |diff| {d:.3e} (scale {b.abs().max().item():.2f}); missing {missing}, unexpected {list(unexpected)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    torch.set_num_threads(4)
    for fn in (lambda: check_tokenizer(args.data), lambda: check_transformers(args.model)):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            print(f"check failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
