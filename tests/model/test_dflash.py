#!/usr/bin/python3
"""tests/model/test_dflash.py — the DFlash block-diffusion drafter (DFlashDraftModel from
tools/make_checkpoint.py --dflash-of <qwen3 target>) against the float64 reference
(tests/reference/numpy_dflash.py): the block logits of slots 1..B-1 after a prompt
prefilled in chunks (the context built from the target's residual streams chunk by chunk),
at two block sizes and with a sliding layer, relative error <= 1e-4 in F32. Deliberately
wrong drafters (a causal block, taps read at layer inputs instead of outputs, context keys
without k_norm, fc without hidden_norm) must miss by far more. llama.cpp's `dflash` GGUF
of the same weights (names, metadata, taps stored as ids + 1) gives the same logits.
Damaged drafter files (hidden size, vocabulary, target layer count, a tap id out of range,
a tap count that does not fit fc, a missing tensor, a mask id outside the vocabulary) exit
2 naming the file and the problem. `nextn generate --draft-model <dflash>` gives exactly
the plain greedy output, in both forms, at a fixed depth and at `auto`, and chained with
suffix decoding."""
import json
import os
import re
import shutil
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
import numpy_dflash as D  # noqa: E402
import numpy_model as M  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, edited_copy, rel_err  # noqa: E402

PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41, 9, 17, 300, 5, 77, 120]
TOL = 1e-4
BLOCK = 8  # the drafter's block_size


def dflash_gguf(drafter, out, drop=()):
    """The drafter as llama.cpp's converter (DFlashModel) writes it, F32 tensors."""
    from test_gguf_models import metadata_items
    with open(os.path.join(drafter, "config.json")) as f:
        c = json.load(f)
    W = safetensors_reader.read_checkpoint(drafter)
    a = "dflash."
    md = {"general.architecture": "dflash", a + "block_count": c["num_hidden_layers"],
          a + "embedding_length": c["hidden_size"], a + "feed_forward_length": c["intermediate_size"],
          a + "attention.head_count": c["num_attention_heads"],
          a + "attention.head_count_kv": c["num_key_value_heads"], a + "attention.key_length": c["head_dim"],
          a + "attention.value_length": c["head_dim"], a + "rope.freq_base": float(c["rope_theta"]),
          a + "attention.layer_norm_rms_epsilon": float(c["rms_norm_eps"]), a + "block_size": c["block_size"],
          a + "target_layers": [i + 1 for i in c["dflash_config"]["target_layer_ids"]],
          "tokenizer.ggml.mask_token_id": c["dflash_config"]["mask_token_id"]}
    block = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    names = {"fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight",
             "norm.weight": "output_norm.weight"}
    tensors = []
    for hf, w in sorted(W.items()):
        if hf.startswith("layers."):
            _, i, rest = hf.split(".", 2)
            g = f"blk.{i}.{block[rest.rsplit('.', 1)[0]]}.weight"
        else:
            g = names[hf]
        if g in drop:
            continue
        w = np.asarray(w, dtype=np.float32)
        tensors.append((g, list(reversed(w.shape)), "F32", w.tobytes()))
    Q.write_gguf(out, metadata_items(md), tensors)
    return out


class DFlashTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="dflash-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        cls.target = os.path.join(cls.tmp, "target")
        cls.drafter = os.path.join(cls.tmp, "drafter")
        # 6 target layers: two drafter layers tap layers 1 and 3 (streams 2 and 4)
        subprocess.run([PY, GEN, "--quiet", "--arch", "qwen3", "--layers", "6", "--seed", "4", "--out", cls.target],
                       check=True)
        subprocess.run([PY, GEN, "--quiet", "--dflash-of", cls.target, "--dflash-layers", "2", "--block-size",
                        str(BLOCK), "--seed", "5", "--out", cls.drafter], check=True)
        cls.ref = M.Model(cls.target)
        cls.last = int(np.argmax(cls.ref.forward(PROMPT)[0][-1]))

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            cls._tmp.cleanup()

    def debug(self, name, drafter, block, extra=()):
        prefix = os.path.join(self.tmp, name)
        cmd = [BIN, "debug-logits", "--model", self.target, "--prompt-tokens", ",".join(map(str, PROMPT)),
               "--threads", "2", "--chunk", "5", "--dflash", drafter, "--dflash-block", str(block), "--out", prefix,
               *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300), prefix

    def block_logits(self, name, drafter, block):
        p, prefix = self.debug(name, drafter, block)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return np.load(prefix + ".dflash.npy")

    def test_block_logits_match_the_reference(self):
        for block in (BLOCK, 3):
            got = self.block_logits(f"b{block}", self.drafter, block)
            want = D.DFlash(self.drafter, self.ref).block_logits(PROMPT, self.last, block)
            err = rel_err(got, want)
            print(f"block {block}: relative error {err:.2e}, drafts {np.argmax(got, -1).tolist()}")
            self.assertLessEqual(err, TOL)
            self.assertEqual(np.argmax(got, -1).tolist(), np.argmax(want, -1).tolist())

    def test_sliding_layers_see_the_newest_context_rows(self):
        def edit(c):
            c.update(layer_types=["sliding_attention", "full_attention"], sliding_window=5)
        d = self.edited("sliding", edit)
        got = self.block_logits("sliding", d, BLOCK)
        want = D.DFlash(d, self.ref).block_logits(PROMPT, self.last, BLOCK)
        full = D.DFlash(self.drafter, self.ref).block_logits(PROMPT, self.last, BLOCK)
        print(f"sliding: relative error {rel_err(got, want):.2e}, vs all context rows {rel_err(got, full):.3g}")
        self.assertLessEqual(rel_err(got, want), TOL)
        self.assertGreater(rel_err(got, full), 100 * TOL)

    def test_wrong_drafters_are_detected(self):
        got = self.block_logits("wrong", self.drafter, BLOCK)
        for bug in ("causal", "unshifted", "no_k_norm", "no_hidden_norm"):
            bad = D.DFlash(self.drafter, self.ref, bug).block_logits(PROMPT, self.last, BLOCK)
            err = rel_err(got, bad)
            print(f"wrong drafter {bug}: relative error {err:.3g}")
            self.assertGreater(err, 100 * TOL, f"wrong drafter '{bug}' went unnoticed")

    def test_gguf_gives_the_same_logits(self):
        gguf = dflash_gguf(self.drafter, os.path.join(self.tmp, "drafter.gguf"))
        st = self.block_logits("st", self.drafter, BLOCK)
        gg = self.block_logits("gguf", gguf, BLOCK)
        self.assertLessEqual(rel_err(gg, st), 1e-6)

    # --- damaged files ---

    def refused(self, name, drafter, *expect):
        p, prefix = self.debug(name, drafter, 4)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for e in expect:
            self.assertIn(e, p.stderr)
        self.assertFalse(os.path.exists(prefix + ".prefill.npy"))
        g = subprocess.run([BIN, "generate", "--model", self.target, "--prompt", "hi", "-n", "2", "--draft-model",
                            drafter], capture_output=True, text=True, timeout=120)
        self.assertEqual(g.returncode, 2, g.stdout + g.stderr)
        for e in expect:
            self.assertIn(e, g.stderr)

    def edited(self, name, edit):
        return edited_copy(self.drafter, os.path.join(self.tmp, name), edit)

    def test_damaged_configs_are_refused(self):
        cases = {
            "vocab": (lambda c: c.update(vocab_size=500), ["vocab_size 500", "vocab_size 448"]),
            "layers": (lambda c: c.update(num_target_layers=8), ["num_target_layers 8", "6 layers"]),
            "tap": (lambda c: c["dflash_config"].update(target_layer_ids=[1, 6]), ["target_layer_id 6", "0..5"]),
            "taps": (lambda c: c["dflash_config"].update(target_layer_ids=[1, 2, 3]), ["fc.weight", "3 target streams"]),
            "mask": (lambda c: c["dflash_config"].update(mask_token_id=448), ["mask_token_id 448", "vocab_size 448"]),
        }
        for name, (edit, expect) in cases.items():
            with self.subTest(name):
                d = self.edited("bad-" + name, edit)
                self.refused(name, d, os.path.join(d, "config.json"), *expect)

    def test_other_hidden_size_is_refused(self):
        d = os.path.join(self.tmp, "bad-hidden")
        subprocess.run([PY, GEN, "--quiet", "--dflash-of", self.target, "--hidden", "96", "--out", d], check=True)
        self.refused("hidden", d, "hidden_size 96", "hidden_size 64")

    def test_missing_tensor_is_refused(self):
        d = os.path.join(self.tmp, "bad-tensor")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.drafter, d)
        W = safetensors_reader.read_checkpoint(self.drafter, np.float32)
        specs = [safetensors_writer.TensorSpec(n, w.shape, "F32", lambda w=w: iter([w]))
                 for n, w in sorted(W.items()) if n != "layers.1.self_attn.k_norm.weight"]
        safetensors_writer.write_file(os.path.join(d, "model.safetensors"), specs)
        self.refused("tensor", d, "layers.1.self_attn.k_norm.weight")
        gguf = dflash_gguf(self.drafter, os.path.join(self.tmp, "bad.gguf"), drop={"blk.0.attn_q_norm.weight"})
        self.refused("gguf-tensor", gguf, "layers.0.self_attn.q_norm.weight")

    # --- generation ---

    def generate(self, *extra):
        cmd = [BIN, "generate", "--model", self.target, "--prompt-tokens", ",".join(map(str, PROMPT)), "-n", "24",
               "--ids", "--ignore-eos", "--threads", "2", *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        m = re.search(r"draft acceptance (\d+/\d+)", p.stdout)
        return p.stdout.splitlines()[0], m.group(1) if m else None

    def test_generate_equals_plain_greedy(self):
        plain, _ = self.generate()
        gguf = dflash_gguf(self.drafter, os.path.join(self.tmp, "gen.gguf"))
        for drafter, depth, extra in ((self.drafter, "3", ()), (self.drafter, "auto", ()), (gguf, "7", ()),
                                      (self.drafter, "4", ("--spec-type", "suffix"))):
            with self.subTest(drafter=drafter, depth=depth, extra=extra):
                out, acceptance = self.generate("--draft-model", drafter, "--num-draft-tokens", depth, *extra)
                self.assertEqual(out, plain)
                if depth != "auto":
                    self.assertIsNotNone(acceptance)


if __name__ == "__main__":
    unittest.main(verbosity=2)
