#!/usr/bin/python3
"""tests/model/test_reference_tools.py — checks the test-checkpoint generator
(tools/make_checkpoint.py) and the float64 numpy reference (tests/reference/) on their own,
without the nextn binary: safetensors round trips, BF16 rounding, HF layout and naming,
determinism, sharding, tokenizer validity, MTP assistants, and reference self-consistency."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import numpy_model as M  # noqa: E402
import safetensors_reader as R  # noqa: E402
import safetensors_writer as W  # noqa: E402
import tokenizer_files as T  # noqa: E402

PY = "/usr/bin/python3"
GEN = os.path.join(SRC, "tools", "make_checkpoint.py")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()


def make(out, *args):
    subprocess.run([PY, GEN, "--quiet", "--out", out, *args], check=True)
    return out


class Tmp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="reftools-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()


class SafetensorsTest(Tmp):
    def test_bf16_rounding_is_nearest_even(self):
        vals = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20,
                         -2.5, 0.0, 65504.0, 1e-40], dtype=np.float32)
        bits = W.f32_to_bf16_bits(vals)
        back = (bits.astype(np.uint32) << 16).view(np.float32)
        expect = np.array([1.0, 1.0, 1.0 + 4 * 2 ** -8, 1.0 + 2 * 2 ** -8, -2.5, 0.0, 65536.0,
                           back[7]], dtype=np.float32)
        np.testing.assert_array_equal(back[:7], expect[:7])
        self.assertTrue(abs(back[7] - 1e-40) < 1e-41)  # denormals survive
        self.assertTrue(np.isnan((W.f32_to_bf16_bits(np.array([np.nan], np.float32))
                                  .astype(np.uint32) << 16).view(np.float32)[0]))

    def test_round_trip_all_dtypes(self):
        rng = np.random.default_rng(3)
        tensors = {"a": rng.standard_normal((3, 5)).astype(np.float32),
                   "b.weight": rng.standard_normal(7).astype(np.float32),
                   "c": rng.standard_normal((2, 3, 4)).astype(np.float32)}
        for dt in ("F32", "BF16", "F16"):
            path = os.path.join(self.tmp, f"rt-{dt}.safetensors")
            W.write_tensors(path, tensors, dt)
            back = R.read_file(path, None)
            header, base = R.read_header(path)
            self.assertEqual(base % 8, 0)
            end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
            self.assertEqual(os.path.getsize(path), base + end)
            tol = {"F32": 0, "BF16": 2 ** -8, "F16": 2 ** -11}[dt]
            for k, v in tensors.items():
                self.assertEqual(back[k].shape, v.shape)
                self.assertEqual(header[k]["dtype"], dt)
                np.testing.assert_allclose(back[k], v, rtol=tol, atol=1e-30)


class GeneratorTest(Tmp):
    def test_layout_and_names(self):
        for arch, tied in (("llama", False), ("qwen2", True), ("qwen3", True), ("mimo", False)):
            d = make(os.path.join(self.tmp, f"lay-{arch}"), "--arch", arch)
            cfg = json.load(open(os.path.join(d, "config.json")))
            names = set(R.tensor_dtypes(d))
            self.assertEqual(cfg["tie_word_embeddings"], tied)
            self.assertEqual("lm_head.weight" in names, not tied)
            self.assertIn("model.layers.0.self_attn.q_proj.weight", names)
            self.assertEqual("model.layers.0.self_attn.q_proj.bias" in names,
                             arch in ("qwen2", "mimo"))
            self.assertEqual("model.layers.0.self_attn.q_norm.weight" in names, arch == "qwen3")
            self.assertEqual("model.mtp_layers.0.input_proj.weight" in names, arch == "mimo")
            self.assertEqual(cfg.get("num_nextn_predict_layers", 0), 1 if arch == "mimo" else 0)
            self.assertGreaterEqual(cfg["vocab_size"], 259)
            for f in ("generation_config.json", "tokenizer.json", "tokenizer_config.json",
                      "model.safetensors"):
                self.assertTrue(os.path.exists(os.path.join(d, f)), f)
            w = R.read_checkpoint(d)
            hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
            self.assertEqual(w["model.layers.0.self_attn.k_proj.weight"].shape,
                             (cfg["num_key_value_heads"] * hd, cfg["hidden_size"]))

    def test_deepseek_layout(self):
        d = make(os.path.join(self.tmp, "ds"), "--arch", "qwen3", "--mtp", "deepseek",
                 "--mtp-layers", "2", "--shared-head", "random")
        cfg = json.load(open(os.path.join(d, "config.json")))
        L = cfg["num_hidden_layers"]
        names = set(R.tensor_dtypes(d))
        self.assertEqual(cfg["num_nextn_predict_layers"], 2)
        for i in (L, L + 1):
            for t in ("enorm", "hnorm", "eh_proj", "shared_head.norm", "shared_head.head",
                      "self_attn.q_norm", "mlp.down_proj"):
                self.assertIn(f"model.layers.{i}.{t}.weight", names)
        self.assertNotIn(f"model.layers.{L + 2}.enorm.weight", names)

    def test_deterministic_sharded_dtype_and_mtp_independent(self):
        a = make(os.path.join(self.tmp, "det-a"), "--arch", "qwen2", "--seed", "7")
        b = make(os.path.join(self.tmp, "det-b"), "--arch", "qwen2", "--seed", "7")
        c = make(os.path.join(self.tmp, "det-c"), "--arch", "qwen2", "--seed", "7",
                 "--shards", "3", "--dtype", "bf16", "--mtp", "deepseek")
        e = make(os.path.join(self.tmp, "det-e"), "--arch", "qwen2", "--seed", "8")
        with open(os.path.join(a, "model.safetensors"), "rb") as fa, \
                open(os.path.join(b, "model.safetensors"), "rb") as fb:
            self.assertEqual(fa.read(), fb.read())
        index = json.load(open(os.path.join(c, "model.safetensors.index.json")))
        files = sorted(set(index["weight_map"].values()))
        self.assertEqual(files, [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)])
        total = 0
        for f in files:
            header, _ = R.read_header(os.path.join(c, f))
            total += sum(v["data_offsets"][1] - v["data_offsets"][0]
                         for k, v in header.items() if k != "__metadata__")
            for k in header:
                if k != "__metadata__":
                    self.assertEqual(index["weight_map"][k], f)
        self.assertEqual(index["metadata"]["total_size"], total)
        wa = R.read_checkpoint(a, None)
        wc = R.read_checkpoint(c, None)
        we = R.read_checkpoint(e, None)
        self.assertTrue(set(wa) < set(wc))
        for k, v in wa.items():
            bf = (W.f32_to_bf16_bits(v).astype(np.uint32) << 16).view(np.float32)
            np.testing.assert_array_equal(wc[k], bf.reshape(v.shape), k)
        self.assertFalse(np.array_equal(wa["model.embed_tokens.weight"],
                                        we["model.embed_tokens.weight"]))

    def test_weights_are_sane(self):
        d = make(os.path.join(self.tmp, "sane"), "--arch", "llama")
        w = R.read_checkpoint(d)
        self.assertTrue(all(np.isfinite(v).all() for v in w.values()))
        n = w["model.norm.weight"]
        self.assertTrue(0.7 < n.min() and n.max() < 1.3 and n.std() > 0.01)
        self.assertLess(np.abs(w["model.layers.0.mlp.up_proj.weight"]).max(), 1.0)

    def test_tokenizer_is_valid_hf_bpe(self):
        d = make(os.path.join(self.tmp, "tok"), "--arch", "qwen3", "--vocab", "400")
        tok = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
        tc = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
        cfg = json.load(open(os.path.join(d, "config.json")))
        gen = json.load(open(os.path.join(d, "generation_config.json")))
        model = tok["model"]
        self.assertEqual(model["type"], "BPE")
        vocab = model["vocab"]
        order = [ch for _, ch in T.bytes_to_unicode()]
        self.assertEqual(len(set(order)), 256)
        for i, ch in enumerate(order):
            self.assertEqual(vocab[ch], i)
        self.assertEqual(vocab["!"], 0)
        self.assertEqual(vocab["\u0120"], 220)  # GPT-2's "Ġ" (space)
        for k, (a, b) in enumerate(model["merges"]):
            self.assertIn(a, vocab)
            self.assertIn(b, vocab)
            self.assertEqual(vocab[a + b], 256 + k)
            self.assertLess(vocab[a], 256 + k)
            self.assertLess(vocab[b], 256 + k)
        self.assertEqual(sorted(vocab.values()), list(range(len(vocab))))
        added = {t["content"]: t["id"] for t in tok["added_tokens"]}
        self.assertEqual(sorted(added.values()), list(range(len(vocab), len(vocab) + 3)))
        self.assertTrue(all(t["special"] for t in tok["added_tokens"]))
        self.assertLessEqual(len(vocab) + 3, cfg["vocab_size"])
        self.assertEqual(gen["eos_token_id"], [added["<|im_end|>"], added["<|endoftext|>"]])
        self.assertEqual(tok["decoder"]["type"], "ByteLevel")
        self.assertEqual(tok["pre_tokenizer"]["pretokenizers"][1]["type"], "ByteLevel")
        self.assertEqual(tc["eos_token"], "<|im_end|>")
        import jinja2
        text = jinja2.Environment().from_string(tc["chat_template"]).render(
            messages=[{"role": "user", "content": "hi"}], add_generation_prompt=True)
        self.assertEqual(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
        # a simple merge-rank BPE over one pre-token gives a round trip through the vocab
        ranks = {(a, b): k for k, (a, b) in enumerate(model["merges"])}
        byte_map = dict(T.bytes_to_unicode())
        inv = {v: k for k, v in byte_map.items()}
        word = "".join(byte_map[b] for b in " the".encode())
        parts = list(word)
        while True:
            pairs = [(ranks.get((parts[i], parts[i + 1]), 1 << 30), i) for i in range(len(parts) - 1)]
            if not pairs or min(pairs)[0] == 1 << 30:
                break
            _, i = min(pairs)
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        self.assertLessEqual(len(parts), 2, parts)  # merges apply ("the" at least)
        self.assertTrue(all(p in vocab for p in parts))
        self.assertEqual(bytes(inv[c] for p in parts for c in p).decode(), " the")


NODE_SCRIPT = r"""
const [lib, dir] = process.argv.slice(1);
const { pathToFileURL } = await import("url");
const fs = await import("fs");
const { TokenizerLoader } = await import(pathToFileURL(lib).href);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8")),
});
const texts = JSON.parse(fs.readFileSync(0, "utf8"));
const out = texts.map(t => {
  const ids = tok.encode(t, {add_special_tokens: false});
  return {ids, decode: tok.decode(ids)};
});
console.log(JSON.stringify(out));
"""


class TokenizerWithTransformersJsTest(Tmp):
    """The generated tokenizer loads in @lenml/tokenizers (a transformers.js fork, installed
    for the tokenizer tests) and round-trips text, with the specials as single ids."""

    def test_loads_and_round_trips(self):
        import shutil
        lib = os.path.join(SRC, "tests", "node_modules", "@lenml", "tokenizers", "dist", "main.mjs")
        if not shutil.which("node") or not os.path.exists(lib):
            self.skipTest("node or tests/node_modules/@lenml/tokenizers not installed")
        d = make(os.path.join(self.tmp, "tokjs"), "--arch", "llama")
        tok = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
        added = {t["content"]: t["id"] for t in tok["added_tokens"]}
        texts = ["Hello, the world!", "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
                 "  spaces\tand\nnewlines 123 caf\u00e9 \u4e2d\u6587 \U0001F600",
                 "def forward(self, x):\n    return x"]
        p = subprocess.run(["node", "--input-type=module", "-e", NODE_SCRIPT, lib, d],
                           input=json.dumps(texts), capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        for t, r in zip(texts, out):
            self.assertEqual(r["decode"], t)
            self.assertTrue(all(0 <= i < len(tok["model"]["vocab"]) + 3 for i in r["ids"]))
        self.assertLess(len(out[0]["ids"]), len(texts[0].encode()))  # merges applied
        self.assertEqual([i for i in out[1]["ids"] if i in added.values()],
                         [added["<|im_start|>"], added["<|im_end|>"], added["<|endoftext|>"]])


class AssistantTest(Tmp):
    def test_assistant_matches_in_checkpoint_head(self):
        for arch, mtp in (("mimo", "mimo"), ("qwen3", "deepseek"), ("llama", "deepseek")):
            tgt = make(os.path.join(self.tmp, f"t-{arch}"), "--arch", arch, "--mtp", mtp,
                       "--dtype", "bf16", "--seed", "5")
            base = make(os.path.join(self.tmp, f"b-{arch}"), "--arch", arch, "--mtp", "none",
                        "--dtype", "bf16", "--seed", "5")
            asst = make(os.path.join(self.tmp, f"a-{arch}"), "--assistant-of", tgt)
            cfg = json.load(open(os.path.join(asst, "config.json")))
            self.assertEqual(cfg["architectures"], ["NextnMTPAssistant"])
            self.assertEqual(cfg["model_type"], "mtp_assistant")
            self.assertEqual(cfg["mtp_layout"], mtp)
            names = set(R.tensor_dtypes(asst))
            self.assertNotIn("model.embed_tokens.weight", names)
            pre = "model.mtp_layers.0." if mtp == "mimo" else "model.layers.0."
            self.assertTrue(all(n.startswith(pre) for n in names), names)
            prompt = [3, 141, 59, 26, 53, 58, 97]
            m1 = M.Model(tgt)
            m2 = M.Model(base, assistant_dir=asst)
            _, h1 = m1.forward(prompt)
            _, h2 = m2.forward(prompt)
            np.testing.assert_array_equal(h1, h2)
            np.testing.assert_array_equal(m1.mtp_logits(prompt, h1), m2.mtp_logits(prompt, h2))

    def test_random_assistant_for_plain_target(self):
        tgt = make(os.path.join(self.tmp, "plain"), "--arch", "qwen2")
        asst = make(os.path.join(self.tmp, "plain-a"), "--assistant-of", tgt, "--mtp", "mimo",
                    "--mtp-layers", "2")
        cfg = json.load(open(os.path.join(asst, "config.json")))
        self.assertEqual((cfg["mtp_layout"], cfg["num_nextn_predict_layers"]), ("mimo", 2))
        self.assertTrue(cfg["attention_bias"])
        m = M.Model(tgt, assistant_dir=asst)
        _, h = m.forward([1, 2, 3, 4])
        self.assertEqual(m.mtp_logits([1, 2, 3, 4], h, layer=1).shape, (3, m.V))


class ReferenceSelfTest(Tmp):
    def test_llama3_rope_bands(self):
        sc = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=32)
        base = M.rope_inv_freq(16, 10000.0, None)
        inv = M.rope_inv_freq(16, 10000.0, sc)
        wl = 2 * np.pi / base
        self.assertTrue((wl < 8).any() and ((wl >= 8) & (wl <= 32)).any() and (wl > 32).any())
        np.testing.assert_allclose(inv[wl < 8], base[wl < 8])
        np.testing.assert_allclose(inv[wl > 32], base[wl > 32] / 8)
        mid = (wl >= 8) & (wl <= 32)
        s = (32 / wl[mid] - 1) / 3
        np.testing.assert_allclose(inv[mid], (1 - s) * base[mid] / 8 + s * base[mid])

    def test_cache_chunks_truncation_and_greedy(self):
        for arch in ("llama", "qwen2", "qwen3", "mimo"):
            m = M.Model(make(os.path.join(self.tmp, f"self-{arch}"), "--arch", arch))
            prompt = [5, 17, 200, 42, 7, 99, 3, 250]
            full, hidden = m.forward(prompt)
            self.assertTrue(np.isfinite(full).all())
            self.assertGreater(full.std(), 0.5)
            c = M.KvCache()
            rows = [m.forward(prompt[i:i + 3], c, i)[0] for i in range(0, len(prompt), 3)]
            np.testing.assert_allclose(np.concatenate(rows), full, rtol=0, atol=1e-10)
            c.truncate(4)
            np.testing.assert_allclose(m.forward(prompt[4:], c, 4)[0], full[4:], atol=1e-10)
            toks, dec = m.greedy(prompt, 8)
            self.assertEqual(toks[0], np.argmax(full[-1]))
            np.testing.assert_array_equal(toks[1:], np.argmax(dec[:-1], axis=1))
            np.testing.assert_allclose(m.forced_decode(prompt, toks), dec, atol=1e-10)
            self.assertGreater(len(set(toks.tolist())), 2, f"{arch}: greedy collapsed")
            if arch == "mimo":
                mtp = m.mtp_logits(prompt, hidden)
                self.assertEqual(mtp.shape, (len(prompt) - 1, m.V))
                # position-0 masking: row 0 does not depend on token 1
                other = list(prompt)
                other[1] = 11
                np.testing.assert_allclose(m.mtp_logits(other, hidden)[0], mtp[0], atol=1e-12)


if __name__ == "__main__":
    unittest.main(verbosity=2)
