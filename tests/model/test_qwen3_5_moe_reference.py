#!/usr/bin/python3
"""tests/model/test_qwen3_5_moe_reference.py — nextn's Qwen3.5-MoE (qwen3_5_moe: the
Qwen3.5 hybrid with routed MLPs and a routed MTP layer) against the independent float64
numpy reference (tests/reference/numpy_qwen3_5.py, whose MoE block is written from the
equations: softmax router over all experts, top-k, renormalised, SwiGLU experts, sigmoid-
gated shared expert) on random checkpoints from tools/make_checkpoint.py --arch qwen3_5_moe
(16 experts, top 4).

Same measure as the dense test: prefill logits (whole, token by token, chunks of 3 / 50 / 64
rows: rows of a batch grouped by expert), post-norm hidden, 16 greedy decode steps, MTP
logits; relative error F32 <= 1e-4, BF16 <= 2e-2, identical greedy tokens; fused
(experts.gate_up_proj), per-expert and the released mix (trunk fused, MTP layer per
expert) tensor layouts; the vision-language layout. Broken
references (top-k weights not renormalised, shared-expert gate missing, a sharpened
router) must miss by far more than the tolerance. Bad MoE configs exit 2 naming the key."""
import os
import sys

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
import numpy_qwen3_5 as M  # noqa: E402
import architecture_check  # noqa: E402

PROMPT = architecture_check.MtpReferenceTestCase.PROMPT
LONG = [int((i * 53 + 7) % 380) for i in range(150)]

CASES = {
    "f32": ([], "f32", ["--mtp"], PROMPT),
    "f32_token_by_token": ([], "f32", ["--chunk", "1"], PROMPT),
    "f32_chunk3": ([], "f32", ["--chunk", "3", "--mtp"], PROMPT),
    "per_expert_seed2": (["--experts-layout", "per_expert", "--seed", "2"], "f32", ["--mtp"], PROMPT),
    # the released 35B-A3B / 122B-A10B layout: trunk experts fused, the MTP layer's one tensor each
    "released_layout_seed4": (["--experts-layout", "released", "--seed", "4"], "f32", ["--mtp"], PROMPT),
    "vision_language_f32": (["--vision-language", "--seed", "1"], "f32", ["--mtp"], PROMPT),
    "bf16": (["--dtype", "bf16"], "bf16", ["--mtp"], PROMPT),
    "long150_whole": ([], "f32", ["--mtp"], LONG),
    "long150_chunk50": ([], "f32", ["--chunk", "50"], LONG),
}

RESULTS = []


# The base class is not imported by name: unittest would run its test on its own.
class Qwen35MoeReferenceTest(architecture_check.MtpReferenceTestCase):
    RESULTS = RESULTS
    BROKEN = M.BROKEN_MOE
    ARCH = "qwen3_5_moe"
    REFERENCE = M

    def test_top_k_above_experts(self):
        def edit(c):
            c["num_experts_per_tok"] = 17
        self.bad_config("top-k", edit, "num_experts_per_tok (17) must be in 1..num_experts (16)")

    def test_missing_expert_width(self):
        def edit(c):
            del c["moe_intermediate_size"]
        self.bad_config("moe-width", edit, "moe_intermediate_size")

    def test_wrong_expert_count(self):
        def edit(c):
            c["num_experts"] = 12
        self.bad_config("experts", edit, "'model.layers.0.mlp.gate.weight' has shape [16, 64], expected [12, 64]")

    def test_bad_dense_layer_list(self):
        def edit(c):
            c["mlp_only_layers"] = [7]
        self.bad_config("mlp-only", edit, "mlp_only_layers names 7")


architecture_check.add_cases(Qwen35MoeReferenceTest, CASES)


if __name__ == "__main__":
    architecture_check.main("Qwen3.5-MoE", RESULTS, width=24)
