#!/usr/bin/python3
"""tests/model/test_gguf_models.py — GGUF files from `nextn quantize`, end to end.

1. The embedded tiny model (MiMo layout, one MTP layer) quantized to q8_0 / q4_0 / q4_k_m
   / q6_k: each file follows the GGUF spec as the independent reader sees it (v3, aligned
   and non-overlapping data, sizes = shape × type, 1-D tensors F32, MTP as
   blk.{n_layer}.nextn.*, llama.cpp's fallbacks for rows not a multiple of 256); each
   dequantized matrix is within its quantizer's step of the BF16 source; greedy output
   with --mtp equals plain greedy output; the GGUF tokenizer gives the ids of
   tokenizer.json on a corpus sample.
2. Random llama (Q/K row permutation), qwen2, qwen3 and mimo (MTP) checkpoints: nextn's
   logits on the q8_0 / q4_k_m GGUF against the float64 numpy reference
   (tests/reference/numpy_model.py) run on the weights the independent reader dequantizes.
   nextn rounds activations to int8 per 32 values (|Δx| ≤ amax/254); through a few layers
   of 64-wide random matmuls that gives relative logit errors of a few percent, so the
   bound is 0.1 of the largest logit, with identical greedy tokens wherever the
   reference's top-2 gap exceeds that error.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or str(pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
sys.path.insert(0, os.path.join(SRC, "tests", "server"))
import ggml_quants as Q  # noqa: E402
import quantized_check  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402

BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
TINY = os.path.join(SRC, "models", "nextn-tiny")
TYPES = ["q8_0", "q4_0", "q4_k_m", "q6_k"]

# GGUF → Hugging Face names, written from llama.cpp's tensor-name table (independent of
# nextn's io/gguf_names.cc).
GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}
BLOCK = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
         "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
         "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
         "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj", "nextn.eh_proj": "eh_proj", "nextn.enorm": "enorm",
         "nextn.hnorm": "hnorm", "nextn.shared_head_norm": "shared_head.norm",
         "nextn.shared_head_head": "shared_head.head"}


def hf_name(name):
    if name in GLOBAL:
        return GLOBAL[name]
    _, layer, rest = name.split(".", 2)
    stem, kind = rest.rsplit(".", 1)
    return f"model.layers.{layer}.{BLOCK[stem]}.{kind}"


def run(args, **kw):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300, **kw)
    if p.returncode != 0:
        raise AssertionError(f"nextn {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout


def check_greedy_mtp_equals_plain(test, files, prompt_args, n):
    """For each {qtype: path}: greedy --mtp at depths 1 and 3 gives plain greedy's ids."""
    for qtype, path in files.items():
        with test.subTest(qtype=qtype):
            args = ["generate", "--model", path, *prompt_args, "-n", str(n), "--ids", "--ignore-eos"]
            plain = run(args)
            for depth in ("1", "3"):
                mtp = run(args + ["--mtp", "--num-mtp-tokens", depth])
                test.assertEqual(plain.splitlines()[0], mtp.splitlines()[0], f"depth {depth}")


def quantize(src, qtype, out):
    run(["quantize", src, "--type", qtype, "--out", out, "--no-progress"])
    return out


def tensors_of(path):
    """name → (float64 array in PyTorch shape, type name), via the reference reader."""
    _, md, tensors, start, data = Q.read_gguf(path)
    out = {}
    for t in tensors:
        raw = data[start + t["offset"]:start + t["offset"] + t["nbytes"]]
        n = int(np.prod(t["dims"]))
        out[t["name"]] = (Q.dequantize(t["type"], raw, n).reshape(list(reversed(t["dims"]))), t["type"])
    return md, tensors, start, len(data), out


def metadata_items(md):
    """A file's metadata (as the reference reader returns it) as ggml_quants.write_gguf's
    items: booleans, integers as u32 (i32 in arrays), floats f32, strings."""
    items = []
    for key, v in md.items():
        if isinstance(v, bool):
            items.append((key, 7, v))
        elif isinstance(v, int):
            items.append((key, 4, v))
        elif isinstance(v, float):
            items.append((key, 6, v))
        elif isinstance(v, str):
            items.append((key, 8, v))
        elif isinstance(v, list) and v:
            et = 8 if isinstance(v[0], str) else 7 if isinstance(v[0], bool) else 6 if isinstance(v[0], float) else 5
            items.append((key, 9, v, et))
    return items


def step_bound(qtype, w):
    """Largest error nextn's quantizer may leave per element, from each block's range."""
    rows = w.reshape(-1, 256 if qtype in ("Q4_K", "Q5_K", "Q6_K") else 32)
    amax = np.abs(rows).max(axis=1, keepdims=True)
    rng = rows.max(axis=1, keepdims=True) - np.minimum(rows.min(axis=1, keepdims=True), 0)
    per = {"Q8_0": amax / 127, "Q4_0": amax / 8, "Q5_0": amax / 16, "Q6_K": amax / 31,
           "Q4_K": rng / 15 + amax / 63, "Q5_K": rng / 31 + amax / 63, "F16": amax * 2.0 ** -10}[qtype]
    return np.broadcast_to(per * (1 + 2.0 ** -9), rows.shape).reshape(w.shape)


class TinyModelGguf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = {t: quantize(TINY, t, os.path.join(TMP, f"tiny-{t}.gguf")) for t in TYPES}
        cls.source = safetensors_reader.read_checkpoint(TINY)
        cls.config = json.loads(pathlib.Path(TINY, "config.json").read_text())

    def test_files_follow_the_spec(self):
        L = self.config["num_hidden_layers"]
        for qtype, path in self.files.items():
            with self.subTest(qtype=qtype):
                md, tensors, start, size, _ = tensors_of(path)
                version = Q.read_gguf(path)[0]
                self.assertEqual(version, 3)
                self.assertEqual(md["general.architecture"], "qwen2")
                self.assertEqual(md["general.quantization_version"], 2)
                self.assertEqual(md["qwen2.block_count"], L + 1)
                self.assertEqual(md["qwen2.nextn_predict_layers"], 1)
                self.assertEqual(start % 32, 0)
                spans = sorted((t["offset"], t["offset"] + t["nbytes"], t["name"]) for t in tensors)
                for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
                    self.assertLessEqual(e0, b1, f"{n0} overlaps {n1}")
                for t in tensors:
                    self.assertEqual(t["offset"] % 32, 0, t["name"])
                    self.assertLessEqual(start + t["offset"] + t["nbytes"], size, t["name"])
                    if len(t["dims"]) == 1:
                        self.assertEqual(t["type"], "F32", t["name"])
                    elif t["type"] in ("Q4_K", "Q5_K", "Q6_K"):
                        self.assertEqual(t["dims"][0] % 256, 0, t["name"])
                names = {t["name"] for t in tensors}
                for n in ("token_embd.weight", "output_norm.weight", f"blk.{L}.nextn.eh_proj.weight",
                          f"blk.{L}.nextn.enorm.weight", f"blk.{L}.nextn.hnorm.weight",
                          f"blk.{L}.nextn.shared_head_norm.weight", f"blk.{L}.attn_q.weight"):
                    self.assertIn(n, names)

    def test_weights_are_within_the_quantizer_step(self):
        L = self.config["num_hidden_layers"]
        mtp = {"enorm": "token_layernorm", "hnorm": "hidden_layernorm", "eh_proj": "input_proj",
               "shared_head.norm": "final_layernorm"}
        for qtype, path in self.files.items():
            _, _, _, _, got = tensors_of(path)
            for name, (w, wtype) in got.items():
                hf = hf_name(name)
                if hf.startswith(f"model.layers.{L}."):
                    rest = hf[len(f"model.layers.{L}."):]
                    stem = rest.rsplit(".", 1)[0]
                    hf = "model.mtp_layers.0." + (mtp[stem] + ".weight" if stem in mtp else rest)
                src = self.source[hf]
                if name.endswith("nextn.eh_proj.weight"):  # MiMo [h; e] → nextn [e; h]
                    h = src.shape[1] // 2
                    src = np.concatenate([src[:, h:], src[:, :h]], axis=1)
                with self.subTest(qtype=qtype, tensor=name):
                    self.assertEqual(w.shape, src.shape)
                    if wtype == "F32":
                        np.testing.assert_array_equal(w, src.astype(np.float32))
                    else:
                        err = np.abs(w - src)
                        self.assertTrue((err <= step_bound(wtype, src) + 1e-12).all(),
                                        f"max err {err.max()}")

    def test_greedy_mtp_equals_plain_greedy(self):
        prompt = "def parse_args(argv):\n    parser = argparse."
        check_greedy_mtp_equals_plain(self, self.files, ["--prompt", prompt], 40)

    def test_serves_chat_with_mtp(self):
        # The file alone: tokenizer, chat template and MTP layer from its metadata and tensors.
        quantized_check.check_serves_chat_with_mtp(self, self.files["q4_k_m"])

    def test_tokenizer_from_gguf_matches_tokenizer_json(self):
        corpus = os.path.join(TMP, "tokenizer-corpus.jsonl")  # the tokenizer tests' corpus (same path)
        if not os.path.exists(corpus):
            subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "corpus", "make_corpus.py"), corpus],
                           check=True, capture_output=True)
        want = run(["tokenize", "--model", TINY, "--batch", corpus])
        got = run(["tokenize", "--model", self.files["q8_0"], "--batch", corpus])
        self.assertEqual(len(want.splitlines()), len(got.splitlines()))
        for i, (a, b) in enumerate(zip(want.splitlines(), got.splitlines())):
            self.assertEqual(a, b, f"corpus line {i} (ids and decoded text)")

    def test_chat_template_from_gguf(self):
        conv = os.path.join(TMP, "gguf-conv.json")
        pathlib.Path(conv).write_text(json.dumps([{"role": "user", "content": "Hi"}]))
        want = run(["chat-template", "--model", TINY, "--messages", conv])
        got = run(["chat-template", "--model", self.files["q4_0"], "--messages", conv])
        self.assertEqual(want, got)


def dequantized_checkpoint(gguf, src_dir, out_dir):
    """The GGUF's weights (dequantized by the reference) as an F32 Hugging Face checkpoint
    in the DeepSeek MTP layout, with llama's Q/K rows put back in Hugging Face order."""
    md, _, _, _, got = tensors_of(gguf)
    arch = md["general.architecture"]
    cfg = json.loads(pathlib.Path(src_dir, "config.json").read_text())
    heads, kv_heads = md[f"{arch}.attention.head_count"], md[f"{arch}.attention.head_count_kv"]
    tensors = {}
    for name, (w, _) in got.items():
        if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            h = heads if ".attn_q." in name else kv_heads
            # GGUF row 2j + s of a head holds Hugging Face row s·d/2 + j.
            w = w.reshape(h, -1, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
        tensors[hf_name(name)] = w.astype(np.float32)
    os.makedirs(out_dir, exist_ok=True)
    safetensors_writer.write_tensors(os.path.join(out_dir, "model.safetensors"), tensors)
    n_mtp = md.get(f"{arch}.nextn_predict_layers", 0)
    cfg.pop("num_nextn_predict_layers", None)
    if n_mtp:
        cfg["num_nextn_predict_layers"] = n_mtp
    cfg["architectures"] = [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                             "qwen3": "Qwen3ForCausalLM"}[arch]]
    cfg["model_type"] = arch
    cfg["tie_word_embeddings"] = "output.weight" not in got
    cfg["rms_norm_eps"] = float(np.float32(cfg.get("rms_norm_eps", 1e-6)))
    pathlib.Path(out_dir, "config.json").write_text(json.dumps(cfg))
    return out_dir


class RandomModelsAgainstReference(unittest.TestCase):
    def check(self, name, gen_args, qtype, mtp):
        base = os.path.join(TMP, f"gguf-ref-{name}")
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--quiet", "--out",
                        base, *gen_args], check=True)
        gguf = quantize(base, qtype, base + f"-{qtype}.gguf")
        ref_dir = dequantized_checkpoint(gguf, base, base + f"-{qtype}-ref")
        return quantized_check.check_logits(self, BIN, gguf, ref_dir, base + "-out", mtp, f"{name} {qtype}")

    def test_llama_permuted_qk(self):
        self.check("llama", ["--arch", "llama", "--rope-scaling", "none"], "q8_0", False)

    def test_qwen2(self):
        self.check("qwen2", ["--arch", "qwen2"], "q4_k_m", False)

    def test_qwen3(self):
        self.check("qwen3", ["--arch", "qwen3"], "q8_0", False)

    def test_mimo_mtp(self):
        self.check("mimo", ["--arch", "mimo"], "q8_0", True)

    def test_deepseek_layout_mtp(self):
        self.check("qwen3ds", ["--arch", "qwen3", "--mtp", "deepseek", "--shared-head", "random"], "q6_k", True)


if __name__ == "__main__":
    unittest.main()
