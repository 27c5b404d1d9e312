#!/usr/bin/python3
"""tests/model/test_gguf_moe.py — Mixture-of-Experts GGUF files from `nextn quantize`:
a random GLM-4.5 (glm4_moe: per-expert tensors, a dense first layer, a nextn layer) to
q8_0 / q4_k_m / q6_k. The file follows llama.cpp's MoE layout as the independent reader
(tests/reference/ggml_quants.py) sees it: each layer's experts stacked into one 3-D
tensor blk.N.ffn_{gate,up,down}_exps [E, rows, cols] (ggml ne reversed), the router
ffn_gate_inp and its bias exp_probs_b, the shared expert ffn_*_shexp, the expert_*
metadata keys; every expert's slice is within the quantizer's step of its source matrix.
nextn's logits on the GGUF are within the quantized bound (BOUND below) of the
float64 reference (numpy_glm4_moe.py) run on the weights the independent reader
dequantized, on the rows whose routing is clear of near-ties, and greedy --mtp equals
plain greedy on the file."""
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
import numpy_glm4_moe  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402
from test_gguf_models import (BLOCK, GLOBAL, check_greedy_mtp_equals_plain, quantize, run,  # noqa: E402
                              step_bound, tensors_of)

BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
PROMPTS = [[int((i * 53 + 7 * j + 3) % 380) for i in range(8)] for j in range(8)]
MARGIN = 0.02  # choice-score gap below which int8 activations may reorder two experts
# quantized_check.py's 0.1 for dense models, plus room for an expert of low weight that a
# gap just above MARGIN still lets the rounding swap (measured worst: 0.104 at q4_k_m,
# the same on AVX3 / AVX2 / SSE4 / SCALAR)
BOUND = 0.15
TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()

# llama.cpp's MoE tensor names (gguf-py constants.py), independent of io/gguf_names.cc
MOE = {"ffn_gate_inp": "mlp.gate", "exp_probs_b": "mlp.gate", "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
       "ffn_up_shexp": "mlp.shared_experts.up_proj", "ffn_down_shexp": "mlp.shared_experts.down_proj"}
STACKED = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}


def hf_tensors(name, w):
    """(Hugging Face name, array) pairs of one GGUF tensor; stacked experts become one
    matrix per expert."""
    if name in GLOBAL:
        return [(GLOBAL[name], w)]
    _, layer, rest = name.split(".", 2)
    stem, kind = rest.rsplit(".", 1)
    p = f"model.layers.{layer}."
    if stem in STACKED:
        return [(f"{p}mlp.experts.{e}.{STACKED[stem]}.weight", w[e]) for e in range(w.shape[0])]
    if stem == "exp_probs_b":
        return [(p + "mlp.gate.e_score_correction_bias", w)]
    return [(f"{p}{MOE.get(stem) or BLOCK[stem]}.{kind}", w)]


class Glm4MoeGguf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = os.path.join(TMP, "gguf-glm4-moe")
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--quiet", "--arch",
                        "glm4_moe", "--seed", "2", "--out", cls.base], check=True)
        cls.source = safetensors_reader.read_checkpoint(cls.base)
        cls.config = json.loads(pathlib.Path(cls.base, "config.json").read_text())
        cls.files = {t: quantize(cls.base, t, cls.base + f"-{t}.gguf") for t in ("q8_0", "q4_k_m", "q6_k")}

    def test_layout_and_metadata(self):
        c, L = self.config, self.config["num_hidden_layers"]
        md, tensors, _, _, _ = tensors_of(self.files["q8_0"])
        self.assertEqual(md["general.architecture"], "glm4moe")
        self.assertEqual(md["glm4moe.expert_count"], c["n_routed_experts"])
        self.assertEqual(md["glm4moe.expert_used_count"], c["num_experts_per_tok"])
        self.assertEqual(md["glm4moe.expert_feed_forward_length"], c["moe_intermediate_size"])
        self.assertEqual(md["glm4moe.expert_shared_count"], c["n_shared_experts"])
        self.assertEqual(md["glm4moe.leading_dense_block_count"], c["first_k_dense_replace"])
        self.assertAlmostEqual(md["glm4moe.expert_weights_scale"], c["routed_scaling_factor"], places=6)
        self.assertEqual(md["glm4moe.rope.dimension_count"], int(c["head_dim"] * c["partial_rotary_factor"]))
        dims = {t["name"]: t["dims"] for t in tensors}
        E, I, H = c["n_routed_experts"], c["moe_intermediate_size"], c["hidden_size"]
        for layer in range(c["first_k_dense_replace"], L + 1):  # routed layers and the nextn layer
            self.assertEqual(dims[f"blk.{layer}.ffn_gate_exps.weight"], [H, I, E])
            self.assertEqual(dims[f"blk.{layer}.ffn_down_exps.weight"], [I, H, E])
            self.assertEqual(dims[f"blk.{layer}.ffn_gate_inp.weight"], [H, E])
            self.assertEqual(dims[f"blk.{layer}.exp_probs_b.bias"], [E])
        self.assertNotIn("blk.0.ffn_gate_exps.weight", dims)

    def test_experts_are_within_the_quantizer_step(self):
        # q8_0 and q6_k (Q8_0 / Q6_K here). Not q4_k_m: at these widths it falls back to
        # Q5_0, whose clipped extreme sits exactly on test_gguf_models.step_bound and the
        # f16 rounding of the scale then exceeds its (1 + 2^-9) slack by ~0.3 %.
        for qtype, path in self.files.items():
            if qtype == "q4_k_m":
                continue
            _, _, _, _, got = tensors_of(path)
            for name, (w, wtype) in got.items():
                for hf, part in hf_tensors(name, w):
                    src = self.source[hf]
                    with self.subTest(qtype=qtype, tensor=hf):
                        self.assertEqual(part.shape, src.shape)
                        if wtype == "F32":
                            np.testing.assert_array_equal(part, src.astype(np.float32))
                        else:
                            self.assertTrue((np.abs(part - src) <= step_bound(wtype, src) + 1e-12).all())

    def test_logits_against_reference(self):
        # nextn rounds activations to int8 (quantized_check.py: relative logit errors of a
        # few percent). A router whose k-th and (k+1)-th choice scores are that close may
        # pick the other expert than the float64 reference, a legitimate difference that
        # changes that row (and, through attention, every later row when it happens before
        # the last routed layer). Only rows clear of such near-ties are compared.
        for qtype, path in self.files.items():
            with self.subTest(qtype=qtype):
                _, _, _, _, got = tensors_of(path)
                ref_dir = self.base + f"-{qtype}-ref"
                os.makedirs(ref_dir, exist_ok=True)
                tensors = {hf: part.astype(np.float32) for name, (w, _) in got.items()
                           for hf, part in hf_tensors(name, w)}
                safetensors_writer.write_tensors(os.path.join(ref_dir, "model.safetensors"), tensors)
                cfg = dict(self.config, rms_norm_eps=float(np.float32(self.config["rms_norm_eps"])))
                pathlib.Path(ref_dir, "config.json").write_text(json.dumps(cfg))
                ref = numpy_glm4_moe.Model(ref_dir)
                errs, n_rows = [], 0
                for i, prompt in enumerate(PROMPTS):
                    out = ref_dir + f"-out{i}"
                    run(["debug-logits", "--model", path, "--prompt-tokens", ",".join(map(str, prompt)),
                         "--threads", "2", "--out", out])
                    ref.route_margins = []
                    logits, _ = ref.forward(prompt)
                    margins = np.array(ref.route_margins)          # [routed layers, rows]
                    clear = (margins >= MARGIN).all(axis=0)
                    early_tie = np.nonzero((margins[:-1] < MARGIN).any(axis=0))[0]
                    if len(early_tie):
                        clear[early_tie[0]:] = False
                    rows = np.nonzero(clear)[0]
                    nextn = np.load(out + ".prefill.npy")
                    if len(rows):
                        errs.append(np.max(np.abs(nextn[rows] - logits[rows])) / np.max(np.abs(logits)))
                    n_rows += len(rows)
                self.assertGreaterEqual(n_rows, 8, "too few clearly routed rows to compare")
                err = max(errs)
                print(f"glm4_moe {qtype}: relative logit error {err:.4f} over {n_rows} clearly routed rows")
                self.assertLess(err, BOUND, f"glm4_moe {qtype}")

    def test_greedy_mtp_equals_plain_greedy(self):
        check_greedy_mtp_equals_plain(self, self.files, ["--prompt-tokens", "3,17,42,99,5"], 30)


if __name__ == "__main__":
    unittest.main()
