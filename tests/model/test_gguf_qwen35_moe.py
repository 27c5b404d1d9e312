#!/usr/bin/python3
"""tests/model/test_gguf_qwen35_moe.py — Qwen3.5/3.6-MoE GGUF files (llama.cpp's `qwen35moe`
layout) from `nextn quantize`: a random tiny qwen3_5_moe checkpoint (Gated DeltaNet and
gated attention layers, every layer routed: 16 experts top 4 stored fused as Qwen3.6 ships
them, experts.gate_up_proj [E, 2I, H], a sigmoid-gated shared expert, a routed MTP layer)
to q8_0 and q4_k_m.

Every check of test_gguf_qwen35.py (metadata, names, the converter's rewrites, logits and
MTP logits against the float64 reference numpy_qwen3_5.py with nextn's int8 activation
rounding applied, an F32 rewrite of the dequantized weights by the independent writer,
greedy --mtp = plain greedy, refusals) runs here through the subclass, plus what the MoE
layout adds, as llama.cpp's converter (Qwen2MoeModel / Qwen3_5MoeTextModel) and loader
(qwen35moe) define it:
- keys expert_count, expert_used_count, expert_feed_forward_length,
  expert_shared_feed_forward_length; no feed_forward_length (the config has no
  intermediate_size); the softmax router (expert_gating_func 1);
- the fused gate_up_proj split into ffn_gate_exps (rows [0, I) of each expert) and
  ffn_up_exps (rows [I, 2I)), ggml dims [H, I, E]; ffn_down_exps [I, H, E]; the router
  ffn_gate_inp [H, E] and the shared gate ffn_gate_inp_shexp [H, 1] kept F32; the
  singular shared expert ffn_{gate,up,down}_shexp; all of it in the MTP block too.
The test splits the fused source itself (the Hugging Face layout: gate rows first) to
compare each expert with its GGUF slice. The F32 rewrite also stores the shared gate 1-D
[H] (older converters squeezed it) and layer 1's experts fused as ffn_gate_up_exps (newer
converters may fuse them), which nextn must read alike. A file without expert_count is
refused (exit 2) naming the key; `nextn quantize` refuses (exit 2) a checkpoint whose
router qwen35moe cannot express (norm_topk_prob false, dense mlp_only_layers)."""
import json
import os
import subprocess
import sys

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
import test_gguf_qwen35 as q35  # noqa: E402  (not the class by name: unittest would run it here too)

# llama.cpp's qwen35moe MLP names (gguf-py constants.py MODEL_ARCH.QWEN35MOE), independent
# of io/gguf_names.cc
MOE = {"ffn_gate_inp.weight": "mlp.gate.weight", "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
       "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
       "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
       "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight"}
STACKED = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}


class Qwen35MoeGguf(q35.Qwen35Gguf):
    ARCH, GGUF_ARCH = "qwen3_5_moe", "qwen35moe"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The fused experts as one matrix per expert: gate_up_proj[e] rows [0, I) are the
        # gate, [I, 2I) the up projection.
        for name in [n for n in cls.source if n.endswith("mlp.experts.gate_up_proj")]:
            stem = name[:-len("gate_up_proj")]
            gate_up, down = cls.source.pop(name), cls.source.pop(stem + "down_proj")
            i = gate_up.shape[1] // 2
            for e in range(gate_up.shape[0]):
                cls.source[f"{stem}{e}.gate_proj.weight"] = gate_up[e, :i]
                cls.source[f"{stem}{e}.up_proj.weight"] = gate_up[e, i:]
                cls.source[f"{stem}{e}.down_proj.weight"] = down[e]

    def hf_tensors(self, name, w):
        if name in q35.GLOBAL:
            return super().hf_tensors(name, w)
        _, layer, rest = name.split(".", 2)
        prefix = f"model.layers.{layer}." if int(layer) < self.L else f"mtp.layers.{int(layer) - self.L}."
        if rest in STACKED:
            return [(f"{prefix}mlp.experts.{e}.{STACKED[rest]}.weight", w[e]) for e in range(w.shape[0])]
        if rest in MOE:
            return [(prefix + MOE[rest], w)]
        return super().hf_tensors(name, w)

    def check_layout(self, md, dims, types):
        c, a = self.config, self.GGUF_ARCH
        H, E, I, S = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        self.assertEqual(md[f"{a}.expert_count"], E)
        self.assertEqual(md[f"{a}.expert_used_count"], c["num_experts_per_tok"])
        self.assertEqual(md[f"{a}.expert_feed_forward_length"], I)
        self.assertEqual(md[f"{a}.expert_shared_feed_forward_length"], S)
        self.assertEqual(md[f"{a}.expert_gating_func"], 1)  # llama.cpp's ExpertGatingFuncType.SOFTMAX
        self.assertNotIn(f"{a}.feed_forward_length", md)
        for i in range(self.L + 1):  # every layer and the MTP block
            p = f"blk.{i}."
            self.assertEqual(dims[p + "ffn_gate_exps.weight"], [H, I, E])
            self.assertEqual(dims[p + "ffn_up_exps.weight"], [H, I, E])
            self.assertEqual(dims[p + "ffn_down_exps.weight"], [I, H, E])
            self.assertEqual(dims[p + "ffn_gate_inp.weight"], [H, E])
            self.assertEqual(types[p + "ffn_gate_inp.weight"], "F32")
            self.assertEqual(dims[p + "ffn_gate_inp_shexp.weight"], [H, 1])
            self.assertEqual(types[p + "ffn_gate_inp_shexp.weight"], "F32")
            self.assertEqual(dims[p + "ffn_gate_shexp.weight"], [H, S])
            self.assertEqual(dims[p + "ffn_up_shexp.weight"], [H, S])
            self.assertEqual(dims[p + "ffn_down_shexp.weight"], [S, H])
            for dense in ("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_gate_up_exps.weight"):
                self.assertNotIn(p + dense, dims)

    def f32_file_tensors(self, tensors, got):
        out = []
        for name, dims, w in super().f32_file_tensors(tensors, got):
            if name.endswith(".ffn_gate_inp_shexp.weight"):
                out.append((name, dims[:1], w.reshape(-1)))  # squeezed to [H]
            elif name == "blk.1.ffn_gate_exps.weight":
                fused = np.concatenate([w, got["blk.1.ffn_up_exps.weight"][0]], axis=1)  # [E, 2I, H]
                out.append(("blk.1.ffn_gate_up_exps.weight", [dims[0], 2 * dims[1], dims[2]], fused))
            elif name != "blk.1.ffn_up_exps.weight":
                out.append((name, dims, w))
        return out

    def test_missing_expert_key_is_refused(self):
        self.check_missing_key_is_refused(f"{self.GGUF_ARCH}.expert_count")
        self.check_missing_key_is_refused(f"{self.GGUF_ARCH}.expert_shared_feed_forward_length")

    def test_routers_without_a_gguf_form_are_refused(self):
        # llama.cpp's qwen35moe always renormalises the top-k weights and routes every
        # layer: a checkpoint that does otherwise must not be written as if it did.
        for key, value in (("norm_topk_prob", False), ("mlp_only_layers", [1])):
            with self.subTest(key=key):
                d = self.base + f"-{key}"
                os.makedirs(d, exist_ok=True)
                for name in os.listdir(self.base):
                    if name != "config.json" and not os.path.lexists(os.path.join(d, name)):
                        os.symlink(os.path.abspath(os.path.join(self.base, name)), os.path.join(d, name))
                with open(os.path.join(d, "config.json"), "w") as f:
                    json.dump(dict(self.config, **{key: value}), f)
                p = subprocess.run([q35.BIN, "quantize", d, "--type", "q8_0", "--out", d + ".gguf", "--no-progress"],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("qwen35moe GGUF", p.stderr)


if __name__ == "__main__":
    q35.unittest.main()
