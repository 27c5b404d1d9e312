"""tests/train/test_tiny_model.py — the shipped models/nextn-tiny against its training
framework: nextn's tokenizer reproduces the trainer's ids on held-out text, and nextn's
logits (prefill, hidden, MTP, greedy decode) match PyTorch's float32 forward on the exported
BF16 weights (tests/train/data, written by tools/train/make_reference.py). numpy only.
"""
import json
import os
import struct
import subprocess
import sys
import unicodedata
import unittest

import trained_logits

SRC = os.environ.get("NEXTN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NEXTN_BIN", "")
TMP = os.environ.get("NEXTN_TEST_TMP", "/tmp")
MODEL = os.path.join(SRC, "models", "nextn-tiny")
DATA = os.path.join(SRC, "tests", "train", "data")


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"nextn {' '.join(args[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


class ShippedModel(unittest.TestCase):
    def test_directory_layout_and_size(self):
        total = sum(os.path.getsize(os.path.join(dp, fn))
                    for dp, _, fns in os.walk(MODEL) for fn in fns)
        self.assertLessEqual(total, 30_000_000, "models/nextn-tiny must stay <= 30 MB")
        with open(os.path.join(MODEL, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["architectures"], ["MiMoForCausalLM"])
        self.assertEqual(cfg["model_type"], "mimo")
        self.assertEqual(cfg["num_nextn_predict_layers"], 1)
        self.assertTrue(cfg["attention_bias"])
        self.assertTrue(cfg["tie_word_embeddings"])
        hdr = safetensors_header(os.path.join(MODEL, "model.safetensors"))
        hdr.pop("__metadata__", None)
        self.assertTrue(all(v["dtype"] == "BF16" for v in hdr.values()))
        mtp = sorted(k for k in hdr if k.startswith("model.mtp_layers.0."))
        self.assertEqual(len(mtp), 16, mtp)  # the MiMo-7B tensor set
        for k in ("hidden_layernorm", "token_layernorm", "final_layernorm"):
            self.assertEqual(hdr[f"model.mtp_layers.0.{k}.weight"]["shape"], [cfg["hidden_size"]])
        self.assertEqual(hdr["model.mtp_layers.0.input_proj.weight"]["shape"],
                         [cfg["hidden_size"], 2 * cfg["hidden_size"]])
        self.assertEqual(hdr["model.embed_tokens.weight"]["shape"], [cfg["vocab_size"], cfg["hidden_size"]])
        self.assertNotIn("lm_head.weight", hdr)
        self.assertEqual(len([k for k in hdr if k.startswith(f"model.layers.{cfg['num_hidden_layers']-1}.")]), 12)


@unittest.skipUnless(BIN and os.path.exists(BIN), "NEXTN_BIN not set")
class Tokenizer(unittest.TestCase):
    def test_trainer_ids_on_validation_text(self):
        with open(os.path.join(DATA, "val_texts.jsonl"), encoding="utf-8") as f:
            docs = [json.loads(line) for line in f]
        self.assertGreater(len(docs), 40)
        os.makedirs(TMP, exist_ok=True)
        batch = os.path.join(TMP, "train_val_texts.jsonl")
        with open(batch, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"text": d["text"]}) + "\n")
        out = run("tokenize", "--model", MODEL, "--no-special", "--batch", batch).splitlines()
        self.assertEqual(len(out), len(docs))
        for d, line in zip(docs, out):
            got = json.loads(line)
            self.assertEqual(got["ids"], d["ids"], d["name"])
            self.assertEqual(got["decode"], unicodedata.normalize("NFC", d["text"]), d["name"])

    def test_special_tokens(self):
        # ids as Hugging Face `tokenizers` 0.23 produced them for this tokenizer.json (checks.txt)
        text = "<|im_start|>user\nhi<|im_end|><think>x</think><|endoftext|>"
        out = run("tokenize", "--model", MODEL, "--no-special", "--ids", text)
        self.assertEqual([int(t) for t in out.split()], [8188, 2584, 198, 71, 72, 8189, 8190, 87, 8191, 8187])


@unittest.skipUnless(BIN and os.path.exists(BIN), "NEXTN_BIN not set")
class Logits(unittest.TestCase):
    def check(self, name):
        trained_logits.check(self, run, MODEL, DATA, os.path.join(TMP, f"train_{name}"), name)

    def test_prose_prompt(self):
        self.check("prose")

    def test_code_prompt(self):
        self.check("code")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
