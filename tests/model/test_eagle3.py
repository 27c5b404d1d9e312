#!/usr/bin/python3
"""tests/model/test_eagle3.py — EAGLE-3 drafters (tools/make_checkpoint.py --eagle3-of) against
the float64 reference (tests/reference/numpy_eagle3.py): the target layer inputs the drafter
reads, and its logits over the prompt rows and three chained greedy steps (relative error
<= 1e-4 in F32), in the official layout (LlamaForCausalLMEagle3, a reduced draft vocabulary
with d2t, the default layers 2, N/2, N-3 of an 8-layer llama3-scaled target) and the
speculators layout (Eagle3Speculator: norm_before_fc, norm_before_residual, its own
embedding, named layers of a Qwen3 target). Deliberately wrong drafters (numpy_eagle3.BUGS:
[g; e] order, RMS(g) residual, layer outputs instead of inputs, post-norm feedback, d2t
read as absolute ids) miss by far more. Damaged drafters are refused naming the file and
the problem; `nextn generate --draft-model <eagle3>` gives the plain greedy tokens."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
import ggml_quants as Q  # noqa: E402
import numpy_eagle3 as E  # noqa: E402
import safetensors_reader  # noqa: E402
from architecture_check import BIN, TMP_ROOT, edited_copy, make_checkpoint, rel_err  # noqa: E402
from test_gguf_models import metadata_items  # noqa: E402

PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41, 9, 17]
STEPS = 4
TOL = 1e-4


def llama_cpp_permute(w, heads):
    """Q/K rows as llama.cpp's llama converter stores them: within each head, row
    s·head_dim/2 + j goes to row 2j + s (interleaved halves, for ggml's RoPE)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def eagle3_gguf(drafter, out):
    """The drafter as llama.cpp's eagle3 GGUF (F32): its names, permuted Q/K rows, d2t as
    absolute target ids, the eagle3.* metadata."""
    with open(os.path.join(drafter, "config.json")) as f:
        c = json.load(f)
    layer = c.get("transformer_layer_config", c)
    W = safetensors_reader.read_file(os.path.join(drafter, "model.safetensors"), None)
    p = "midlayer." if "midlayer.input_layernorm.weight" in W else "layers.0."
    names = {"fc.weight": "fc.weight", "input_norm.weight": "enc.output_norm.weight", "norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight", "embed_tokens.weight": "token_embd.weight",
             p + "input_layernorm.weight": "blk.0.attn_norm.weight", p + "hidden_norm.weight": "blk.0.attn_norm_2.weight",
             p + "self_attn.q_proj.weight": "blk.0.attn_q.weight", p + "self_attn.k_proj.weight": "blk.0.attn_k.weight",
             p + "self_attn.v_proj.weight": "blk.0.attn_v.weight", p + "self_attn.o_proj.weight": "blk.0.attn_output.weight",
             p + "post_attention_layernorm.weight": "blk.0.ffn_norm.weight",
             p + "mlp.gate_proj.weight": "blk.0.ffn_gate.weight", p + "mlp.up_proj.weight": "blk.0.ffn_up.weight",
             p + "mlp.down_proj.weight": "blk.0.ffn_down.weight"}
    tensors = []
    for hf, g in names.items():
        if hf not in W:
            continue
        w = np.asarray(W[hf], dtype=np.float32)
        if g == "blk.0.attn_q.weight":
            w = llama_cpp_permute(w, layer["num_attention_heads"])
        if g == "blk.0.attn_k.weight":
            w = llama_cpp_permute(w, layer["num_key_value_heads"])
        w = np.ascontiguousarray(w)
        tensors.append((g, list(reversed(w.shape)), "F32", w.tobytes()))
    d2t = np.asarray(W["d2t"], dtype=np.int64)
    tensors.append(("d2t", [len(d2t)], "I64", (np.arange(len(d2t)) + d2t).astype("<i8").tobytes()))
    a = "eagle3."
    md = {"general.architecture": "eagle3", a + "block_count": 1, a + "embedding_length": layer["hidden_size"],
          a + "feed_forward_length": layer["intermediate_size"],
          a + "attention.head_count": layer["num_attention_heads"],
          a + "attention.head_count_kv": layer["num_key_value_heads"], a + "attention.key_length": layer["head_dim"],
          a + "attention.layer_norm_rms_epsilon": float(layer["rms_norm_eps"]),
          a + "rope.freq_base": float(layer["rope_theta"]), a + "vocab_size": layer["vocab_size"],
          a + "norm_before_residual": bool(c.get("norm_before_residual", False)),
          a + "norm_before_fc": bool(c.get("norm_before_fc", False))}
    ids = c.get("eagle_aux_hidden_state_layer_ids") or c.get("eagle_config", {}).get("eagle_aux_hidden_state_layer_ids")
    if ids:
        md[a + "target_layers"] = list(ids)
    if "target_hidden_size" in c:
        md[a + "target_hidden_size"] = c["target_hidden_size"]
    Q.write_gguf(out, metadata_items(md), tensors)
    return out


class Eagle3Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="eagle3-", dir=TMP_ROOT)
        t = cls._tmp.name
        cls.llama = make_checkpoint(os.path.join(t, "llama"), ["--arch", "llama", "--layers", "8", "--seed", "4"])
        cls.official = make_checkpoint(os.path.join(t, "official"),
                                       ["--eagle3-of", cls.llama, "--draft-vocab", "200", "--seed", "5"])
        cls.qwen3 = make_checkpoint(os.path.join(t, "qwen3"), ["--arch", "qwen3", "--seed", "6"])
        cls.speculators = make_checkpoint(os.path.join(t, "speculators"),
                                          ["--eagle3-of", cls.qwen3, "--eagle3-form", "speculators", "--norm-before-fc",
                                           "--norm-before-residual", "--own-embedding", "--seed", "7"])

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            cls._tmp.cleanup()

    def nextn_drafts(self, target, drafter, name):
        prefix = os.path.join(self._tmp.name, name)
        p = subprocess.run([BIN, "debug-logits", "--model", target, "--eagle3", drafter, "--prompt-tokens",
                            ",".join(map(str, PROMPT)), "--assistant-steps", str(STEPS), "--threads", "2",
                            "--out", prefix], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return np.load(prefix + ".eagle3.npy"), np.load(prefix + ".streams.npy")

    def check(self, target, drafter, name):
        got, streams = self.nextn_drafts(target, drafter, name)
        ref = E.Eagle3(target, drafter)
        S = ref.streams(PROMPT)
        want_streams = np.concatenate([S[i] for i in ref.ids], axis=-1)
        self.assertLessEqual(rel_err(streams, want_streams), TOL, f"{name}: target layer inputs")
        want = ref.draft_logits(PROMPT, STEPS)
        err = rel_err(got, want)
        print(f"{name}: layers {ref.ids}, relative error {err:.2e}, drafts {np.argmax(got, -1).tolist()}")
        self.assertLessEqual(err, TOL, name)
        self.assertEqual(np.argmax(got, -1).tolist(), np.argmax(want, -1).tolist())
        return got

    def test_official_layout_with_reduced_vocabulary(self):
        got = self.check(self.llama, self.official, "official")
        self.assertEqual(got.shape, (len(PROMPT) + STEPS - 1, 200))

    def test_speculators_layout(self):
        self.check(self.qwen3, self.speculators, "speculators")

    def test_llama_cpp_gguf_equals_safetensors(self):
        """llama.cpp's eagle3 GGUF of the same weights drafts as the safetensors form."""
        # (The official drafter of the llama3-scaled target has no GGUF form nextn reads:
        # llama.cpp writes that scaling as a rope_freqs tensor.)
        official = make_checkpoint(os.path.join(self._tmp.name, "official-qwen3"),
                                   ["--eagle3-of", self.qwen3, "--draft-vocab", "300", "--seed", "9"])
        for name, target, drafter in (("speculators", self.qwen3, self.speculators),
                                      ("official", self.qwen3, official)):
            gguf = eagle3_gguf(drafter, os.path.join(self._tmp.name, f"eagle3-{name}.gguf"))
            want, _ = self.nextn_drafts(target, drafter, name + "-st")
            got, _ = self.nextn_drafts(target, gguf, name + "-gguf")
            self.assertLessEqual(rel_err(got, want), 1e-6, name)

    def test_wrong_drafters_miss(self):
        got, _ = self.nextn_drafts(self.llama, self.official, "official-bugs")
        for bug in E.BUGS:
            err = rel_err(got, E.Eagle3(self.llama, self.official, bug=bug).draft_logits(PROMPT, STEPS))
            print(f"bug {bug}: relative error {err:.2e}")
            self.assertGreater(err, 100 * TOL, bug)

    def generate(self, *args):
        return subprocess.run([BIN, "generate", "--model", self.llama, "--prompt-tokens", ",".join(map(str, PROMPT)),
                               "-n", "48", "--ids", "--ignore-eos", "--threads", "2", *args],
                              capture_output=True, text=True, timeout=300)

    def test_greedy_output_equals_plain(self):
        plain = self.generate()
        self.assertEqual(plain.returncode, 0, plain.stderr)
        for depth in ("3", "auto"):
            p = self.generate("--draft-model", self.official, "--num-draft-tokens", depth)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.splitlines()[0], plain.stdout.splitlines()[0], depth)
            self.assertIn("(eagle3)", p.stdout + p.stderr)

    def test_damaged_drafters_are_refused(self):
        t = self._tmp.name
        cases = {
            "vocab": (lambda c: c.update(vocab_size=500), "vocab_size 500 does not match"),
            "layers": (lambda c: c.update(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 4, 99]}),
                       "99 is not a layer of the target"),
            "draft_vocab": (lambda c: c.update(draft_vocab_size=199), "lm_head.weight"),
            "hidden": (lambda c: c.update(hidden_size=96), "input_layernorm.weight"),
            "two_layers": (lambda c: c.update(num_hidden_layers=2), "2 layers are not supported"),
        }
        for name, (edit, message) in cases.items():
            bad = edited_copy(self.official, os.path.join(t, "bad-" + name), edit)
            p = self.generate("--draft-model", bad)
            self.assertNotEqual(p.returncode, 0, name)
            self.assertIn(message, p.stderr, name)
            self.assertIn("bad-" + name, p.stderr, name)
        # A truncated weights file.
        bad = edited_copy(self.official, os.path.join(t, "bad-truncated"), lambda c: None)
        path = os.path.join(bad, "model.safetensors")
        os.truncate(path, os.path.getsize(path) // 2)
        p = self.generate("--draft-model", bad)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("model.safetensors", p.stderr)


if __name__ == "__main__":
    unittest.main()
