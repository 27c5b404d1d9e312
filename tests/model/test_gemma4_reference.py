#!/usr/bin/python3
"""tests/model/test_gemma4_reference.py — nextn's Gemma 4 text model against the independent
float64 numpy reference (tests/reference/numpy_gemma4.py) on random checkpoints from
tools/make_checkpoint.py --arch gemma4: 7 layers S,S,S,F,S,S,F with window 8 (the KV ring
holds 8 + 32 positions and wraps on the long prompts), per-layer embeddings, the last 3
layers reading donors 2 and 3, double-wide MLPs, proportional global RoPE, softcap.

`$NEXTN_BIN debug-logits` gives prefill logits (several prefill chunk sizes, all crossing
the window; 150-token prompts run in ring-sized pieces), post-norm hidden states and 16
greedy decode steps (past the window). Relative error = max|nextn - ref| / max|ref|:
F32 <= 1e-4, BF16 <= 2e-2, identical greedy tokens. Each deliberately broken reference
(norm +1, softcap missing, wrong donor layer, window off by one, global RoPE as plain
partial RoPE) must miss nextn by far more than the tolerance. The 26B-A4B form (--moe:
16 routed GeGLU experts, top 4, beside every dense MLP) is checked the same way, with its
own broken references (per-expert scale missing, router scoring the experts' normed input,
gate/up halves swapped). Bad configs exit 2 naming the problem."""
import os
import sys

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
import numpy_gemma4 as M  # noqa: E402
from architecture_check import ArchitectureTestCase, rel_err  # noqa: E402
import architecture_check  # noqa: E402

PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41, 9, 17]
LONG = [int((i * 53 + 7) % 380) for i in range(150)]
N_DECODE = 16
TOL = {"f32": 1e-4, "bf16": 2e-2}

# name: (generator args, dtype, debug-logits args, prompt)
CASES = {
    "f32": ([], "f32", [], PROMPT),
    "f32_token_by_token": ([], "f32", ["--chunk", "1"], PROMPT),
    "f32_chunk5": ([], "f32", ["--chunk", "5"], PROMPT),
    "f32_seed3": (["--seed", "3"], "f32", [], PROMPT),
    "multimodal_k_eq_v_f32": (["--vision-language", "--k-eq-v", "--seed", "1"], "f32", [], PROMPT),
    "bf16": (["--dtype", "bf16"], "bf16", [], PROMPT),
    "long150_whole": ([], "f32", [], LONG),
    "long150_chunk13": ([], "f32", ["--chunk", "13"], LONG),
    "long150_chunk50": ([], "f32", ["--chunk", "50"], LONG),
    "long150_k_eq_v_chunk33": (["--k-eq-v"], "f32", ["--chunk", "33"], LONG),
    "moe_f32": (["--moe"], "f32", [], PROMPT),
    "moe_f32_chunk5_seed2": (["--moe", "--seed", "2"], "f32", ["--chunk", "5"], PROMPT),
    "moe_bf16": (["--moe", "--dtype", "bf16"], "bf16", [], PROMPT),
    "moe_long150_k_eq_v_chunk50": (["--moe", "--k-eq-v"], "f32", ["--chunk", "50"], LONG),
}

RESULTS = []


def debug_logits(model_dir, prefix, extra, prompt):
    return architecture_check.debug_logits(model_dir, prefix, extra, prompt, N_DECODE)


class Gemma4ReferenceTest(ArchitectureTestCase):
    ARCH = "gemma4"
    REFERENCE = M

    def check(self, name, gen_args, dtype, extra, prompt):
        d, ref = self.model(gen_args)
        got = debug_logits(d, os.path.join(self.tmp, name), extra, prompt)
        logits, hidden = ref.forward(prompt)
        row = {"case": name,
               "prefill": rel_err(got["prefill"], logits),
               "hidden": rel_err(got["hidden"], hidden)}
        ref_tokens, _ = ref.greedy(prompt, N_DECODE)
        toks = got["tokens"].astype(np.int64).reshape(-1)
        row["tokens"] = bool(np.array_equal(toks, ref_tokens))
        row["decode"] = rel_err(got["decode"], ref.forced_decode(prompt, toks))
        RESULTS.append(row)
        for part in ("prefill", "hidden", "decode"):
            self.assertLessEqual(row[part], TOL[dtype], f"{name} {part}: {row}")
        self.assertTrue(row["tokens"], f"{name}: greedy tokens {toks.tolist()} vs reference "
                                       f"{ref_tokens.tolist()}")

    def test_broken_references_are_detected(self):
        d, ref = self.model([])
        got = debug_logits(d, os.path.join(self.tmp, "broken"), [], LONG[:40])
        logits, _ = ref.forward(LONG[:40])
        self.assertLessEqual(rel_err(got["prefill"], logits), TOL["f32"])
        for bug in M.BROKEN:
            b_logits, _ = architecture_check.reference(M, d, broken=bug).forward(LONG[:40])
            err = rel_err(got["prefill"], b_logits)
            print(f"broken reference {bug}: relative error {err:.3g}")
            self.assertGreater(err, 100 * TOL["f32"], f"broken reference '{bug}' went unnoticed")

    # ---- bad configs (ArchitectureTestCase.bad_config) ----------------------------------
    def test_unknown_layer_type(self):
        def edit(c):
            c["layer_types"][1] = "chunked_attention"
        self.bad_config("layer-type", edit, "unknown layer type 'chunked_attention' at layer 1")

    def test_layer_types_length(self):
        def edit(c):
            c["layer_types"] = c["layer_types"][:3]
        self.bad_config("layer-types-length", edit, "layer_types lists 3 layers")

    def test_bad_window(self):
        def edit(c):
            c["sliding_window"] = 0
        self.bad_config("window", edit, "sliding_window must be positive")

    def test_too_many_shared_layers(self):
        def edit(c):
            c["num_kv_shared_layers"] = 7
        self.bad_config("shared", edit, "num_kv_shared_layers (7) must be in 0..6")

    def test_shared_layer_without_donor(self):
        def edit(c):  # layers 4..6 shared, but no full layer before layer 4
            c["layer_types"][3] = "sliding_attention"
        self.bad_config("donor", edit, "no earlier non-shared full_attention layer")

    def test_unknown_rope_type(self):
        def edit(c):
            c["rope_parameters"]["full_attention"]["rope_type"] = "yarn"
        self.bad_config("rope", edit, "rope_type 'yarn' is not supported")

    def test_unknown_activation(self):
        def edit(c):
            c["hidden_activation"] = "relu"
        self.bad_config("act", edit, "hidden_activation 'relu' is not supported")

    def test_missing_tensor(self):
        def edit(c):
            c["num_hidden_layers"] = 8
            c["layer_types"] = c["layer_types"] + ["full_attention"]
        self.bad_config("missing", edit, "model.layers.")

    def test_moe_broken_references_are_detected(self):
        d, ref = self.model(["--moe"])
        got = debug_logits(d, os.path.join(self.tmp, "moe-broken"), [], PROMPT)
        self.assertLessEqual(rel_err(got["prefill"], ref.forward(PROMPT)[0]), TOL["f32"])
        for bug in M.BROKEN_MOE:
            err = rel_err(got["prefill"], architecture_check.reference(M, d, broken=bug).forward(PROMPT)[0])
            print(f"broken MoE reference {bug}: relative error {err:.3g}")
            self.assertGreater(err, 100 * TOL["f32"], f"broken reference '{bug}' went unnoticed")

    def test_experts_without_moe_block(self):
        def edit(c):
            c["num_experts"] = 4
        self.bad_config("moe-flag", edit, "num_experts is set but enable_moe_block is not")

    def test_moe_top_k_above_experts(self):
        def edit(c):
            c.update(enable_moe_block=True, num_experts=4, top_k_experts=8, moe_intermediate_size=8)
        self.bad_config("moe-top-k", edit, "top_k_experts (8) must be in 1..num_experts (4)")

    def test_moe_tensors_missing(self):
        def edit(c):
            c.update(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=8)
        self.bad_config("moe-tensors", edit, "router.proj.weight")


architecture_check.add_cases(Gemma4ReferenceTest, CASES)


if __name__ == "__main__":
    architecture_check.main("Gemma 4", RESULTS, width=26)
