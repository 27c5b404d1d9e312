#!/usr/bin/python3
"""tests/model/test_qwen3_5_reference.py — nextn's Qwen3.5 hybrid (Gated DeltaNet + gated
attention, with its MTP head) against the independent float64 numpy reference
(tests/reference/numpy_qwen3_5.py, the delta rule written token by token from the
equations) on random checkpoints from tools/make_checkpoint.py --arch qwen3_5.

`$NEXTN_BIN debug-logits` gives prefill logits (chunked form, several prefill chunk
sizes, including prompts of 150 tokens whose chunks end inside and across 64-row
blocks), post-norm hidden states, 16 greedy decode steps (per-token recurrence) and the
MTP logits. Relative error = max|nextn - ref| / max|ref|: F32 <= 1e-4, BF16 <= 2e-2,
identical greedy tokens. Each deliberately broken reference (no +1 on the norms, +1
twice, gate/query as two halves, conv state not shifted, value heads tiled onto key
heads) must miss nextn by far more than the tolerance. Bad configs exit 2 naming the
problem; Qwen3-Next is refused (qwen3_5_moe: test_qwen3_5_moe_reference.py)."""
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

# name: (generator args, dtype, debug-logits args, prompt)
CASES = {
    "f32": ([], "f32", ["--mtp"], PROMPT),
    "f32_token_by_token": ([], "f32", ["--chunk", "1"], PROMPT),
    "f32_chunk3": ([], "f32", ["--chunk", "3", "--mtp"], PROMPT),
    "f32_tied_seed3": (["--tied", "--seed", "3"], "f32", ["--mtp"], PROMPT),
    "vision_language_f32": (["--vision-language", "--seed", "1"], "f32", ["--mtp"], PROMPT),
    "bf16": (["--dtype", "bf16"], "bf16", ["--mtp"], PROMPT),
    "long150_whole": ([], "f32", [], LONG),
    "long150_chunk50": ([], "f32", ["--chunk", "50"], LONG),
    "long150_chunk64": ([], "f32", ["--chunk", "64"], LONG),
    "long150_chunk97": ([], "f32", ["--chunk", "97"], LONG),
}

RESULTS = []


# The base class is not imported by name: unittest would run its test on its own.
class Qwen35ReferenceTest(architecture_check.MtpReferenceTestCase):
    RESULTS = RESULTS
    BROKEN = M.BROKEN
    ARCH = "qwen3_5"
    REFERENCE = M

    def test_unknown_layer_type(self):
        def edit(c):
            c["layer_types"][1] = "mamba"
        self.bad_config("layer-type", edit, "unknown layer type 'mamba' at layer 1")

    def test_layer_types_length(self):
        def edit(c):
            c["layer_types"] = c["layer_types"][:3]
        self.bad_config("layer-types-length", edit, "layer_types lists 3 layers")

    def test_inconsistent_linear_heads(self):
        def edit(c):
            c["linear_num_value_heads"] = 3
        self.bad_config("heads", edit, "must be a positive multiple of linear_num_key_heads")

    def test_inconsistent_attention_heads(self):
        def edit(c):
            c["num_key_value_heads"] = 3
        self.bad_config("attn-heads", edit, "not a multiple of num_key_value_heads")

    def test_missing_tensor(self):
        def edit(c):
            c["num_hidden_layers"] = 5
            c["layer_types"] = c["layer_types"] + ["linear_attention"]
        self.bad_config("missing", edit, "model.layers.4.")

    def test_qwen3_next_is_refused(self):
        def edit(c):
            c["architectures"] = ["Qwen3NextForCausalLM"]
            c["model_type"] = "qwen3_next"
        self.bad_config("qwen3-next", edit, "grouped Gated DeltaNet projections are not supported yet")


architecture_check.add_cases(Qwen35ReferenceTest, CASES)


if __name__ == "__main__":
    architecture_check.main("Qwen3.5", RESULTS, width=24)
