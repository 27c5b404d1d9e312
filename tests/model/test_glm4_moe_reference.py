#!/usr/bin/python3
"""tests/model/test_glm4_moe_reference.py — nextn's GLM-4.5 (glm4_moe: partial-rotary
biased GQA, a dense first layer, then sigmoid-routed experts with a correction bias, a
routed scaling factor and a shared expert; its nextn layer under --mtp) against the
independent float64 numpy reference (tests/reference/numpy_glm4_moe.py) on random
checkpoints from tools/make_checkpoint.py --arch glm4_moe (16 experts, top 4).

Prefill logits (whole, token by token, chunks of 3 / 50), post-norm hidden, 16 greedy
decode steps, the nextn layer's logits; relative error F32 <= 1e-4, BF16 <= 2e-2, identical
greedy tokens. Broken references (router bias ignored, bias in the weights, top-k not
renormalised, scaling factor missing, full instead of partial rotary) must miss by far
more than the tolerance. Bad configs exit 2 naming the key."""
import os
import sys

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
import numpy_glm4_moe as M  # noqa: E402
import architecture_check  # noqa: E402

PROMPT = architecture_check.MtpReferenceTestCase.PROMPT
LONG = [int((i * 53 + 7) % 380) for i in range(150)]

CASES = {
    "f32": ([], "f32", ["--mtp"], PROMPT),
    "f32_token_by_token": ([], "f32", ["--chunk", "1"], PROMPT),
    "f32_chunk3_seed4": (["--seed", "4"], "f32", ["--chunk", "3", "--mtp"], PROMPT),
    "bf16": (["--dtype", "bf16"], "bf16", ["--mtp"], PROMPT),
    "long150_chunk50": ([], "f32", ["--chunk", "50", "--mtp"], LONG),
}

RESULTS = []


# The base class is not imported by name: unittest would run its test on its own.
class Glm4MoeReferenceTest(architecture_check.MtpReferenceTestCase):
    RESULTS = RESULTS
    BROKEN = M.BROKEN
    ARCH = "glm4_moe"
    REFERENCE = M

    def test_group_limited_routing_is_refused(self):
        def edit(c):
            c["n_group"] = 8
            c["topk_group"] = 4
        self.bad_config("n-group", edit, "group-limited routing (n_group 8, topk_group 4) is not supported")

    def test_top_k_above_experts(self):
        def edit(c):
            c["num_experts_per_tok"] = 20
        self.bad_config("top-k", edit, "num_experts_per_tok (20) must be in 1..n_routed_experts (16)")

    def test_dense_layers_beyond_model(self):
        def edit(c):
            c["first_k_dense_replace"] = 9
        self.bad_config("first-dense", edit, "first_k_dense_replace (9)")

    def test_missing_expert(self):
        def edit(c):
            c["n_routed_experts"] = 17
            c["num_experts_per_tok"] = 4
        self.bad_config("experts", edit, "'model.layers.1.mlp.gate.weight' has shape [16, 64], expected [17, 64]")


architecture_check.add_cases(Glm4MoeReferenceTest, CASES)


if __name__ == "__main__":
    architecture_check.main("GLM-4.5 (glm4_moe)", RESULTS, width=24)
