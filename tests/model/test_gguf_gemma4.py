#!/usr/bin/python3
"""tests/model/test_gguf_gemma4.py — Gemma 4 GGUF files (llama.cpp's `gemma4` layout) from
`nextn quantize`: random tiny Gemma 4 checkpoints (sliding and full layers of different
head dims, per-layer embeddings, KV-sharing double-wide layers, softcap; the K=V
multimodal form; the 26B-A4B MoE form) to q8_0 and q4_k_m.

The file must follow llama.cpp's converter (Gemma4Model, a Gemma3Model whose norm shift
is 0) as the independent reader (tests/reference/ggml_quants.py) sees it, written here
from the converter's description, not from nextn's C++: the tensor names below; norms
stored as w (not 1 + w); layer_scalar as blk.N.layer_output_scale.weight; key_length /
value_length the full layers' head dim and *_swa the sliding ones'; one boolean per
layer in attention.sliding_window_pattern; feed_forward_length per layer when the
KV-sharing layers are double wide; head_count_kv per layer when
num_global_key_value_heads is set; rope.dimension_count = global head dim with
rope_freqs = [1] * rotated pairs + [1e30] * the rest. Then:
- the q8_0 files' weights written back as F32 by the independent writer, same
  metadata: within 1e-4 of the float64 reference (numpy_gemma4.py) on those weights, so
  every name, key and layout is read exactly, for all three forms;
- nextn's logits on the dense model's q8_0 / q4_k_m files against the reference on the
  weights the reader dequantizes, within quantized_check.py's bound (nextn rounds
  activations to int8); a reference with Gemma 3's 1 + w norms misses by far more. (The
  MoE form is left to the F32 check: int8-rounded activations move its top-k routing,
  a discontinuous change no smooth bound covers; test_gguf_qwen35_moe.py shows what
  it takes to model that rounding in the reference.)
- greedy output with a Gemma 4 assistant on the q8_0 file equals plain greedy;
- files with a missing per-layer key or foreign rope_freqs factors exit 2 naming them."""
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
import ggml_quants as Q  # noqa: E402
import numpy_gemma4  # noqa: E402
import quantized_check  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402
from quantized_check import PROMPT  # noqa: E402
from test_gguf_models import BIN, metadata_items, quantize, run, tensors_of  # noqa: E402

TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
F32_BOUND = 1e-4  # test_gemma4_reference.py: float32 against float64, ~1e-5 measured

# llama.cpp's gemma4 names (gguf-py constants.py TENSOR_NAMES; the converter's
# tensor map for Gemma 3 / 3n / 4): GGUF → Hugging Face, after the model prefix.
GLOBAL = {"token_embd.weight": "embed_tokens.weight", "output_norm.weight": "norm.weight",
          "per_layer_token_embd.weight": "embed_tokens_per_layer.weight",
          "per_layer_model_proj.weight": "per_layer_model_projection.weight",
          "per_layer_proj_norm.weight": "per_layer_projection_norm.weight"}
BLOCK = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
         "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
         "attn_output.weight": "self_attn.o_proj.weight", "attn_q_norm.weight": "self_attn.q_norm.weight",
         "attn_k_norm.weight": "self_attn.k_norm.weight",
         "post_attention_norm.weight": "post_attention_layernorm.weight",
         "ffn_norm.weight": "pre_feedforward_layernorm.weight",
         "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
         "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
         "ffn_down.weight": "mlp.down_proj.weight", "layer_output_scale.weight": "layer_scalar",
         "inp_gate.weight": "per_layer_input_gate.weight", "proj.weight": "per_layer_projection.weight",
         "post_norm.weight": "post_per_layer_input_norm.weight",
         "post_ffw_norm_1.weight": "post_feedforward_layernorm_1.weight",
         "pre_ffw_norm_2.weight": "pre_feedforward_layernorm_2.weight",
         "post_ffw_norm_2.weight": "post_feedforward_layernorm_2.weight",
         "ffn_gate_inp.weight": "router.proj.weight", "ffn_gate_inp.scale": "router.scale",
         "ffn_down_exps.scale": "router.per_expert_scale", "ffn_gate_up_exps.weight": "experts.gate_up_proj",
         "ffn_down_exps.weight": "experts.down_proj"}

MODELS = {  # name: (make_checkpoint.py arguments, quantization types)
    "dense": (["--seed", "4"], ["q8_0", "q4_k_m"]),
    "k_eq_v_multimodal": (["--seed", "5", "--k-eq-v", "--vision-language"], ["q8_0"]),
    "moe": (["--seed", "6", "--moe"], ["q8_0"]),
}
QUANTIZED_LOGITS = {"dense"}  # the models whose quantized files are compared with the reference (see above)


def hf_name(gguf_name, prefix):
    if gguf_name in GLOBAL:
        return prefix + GLOBAL[gguf_name]
    _, layer, rest = gguf_name.split(".", 2)
    return f"{prefix}layers.{layer}.{BLOCK[rest]}"


class Gemma4Gguf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = {}
        for name, (args, types) in MODELS.items():
            base = os.path.join(TMP, f"gguf-gemma4-{name}")
            subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--quiet", "--arch",
                            "gemma4", "--out", base, *args], check=True)
            top = json.loads(pathlib.Path(base, "config.json").read_text())
            source = safetensors_reader.read_checkpoint(base)
            prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in source else "model."
            files = {t: quantize(base, t, base + f"-{t}.gguf") for t in types}
            cls.models[name] = dict(base=base, config=numpy_gemma4.text_config(base)[1], top=top, source=source,
                                    prefix=prefix, files=files)

    def test_layout_and_metadata(self):
        for name, m in self.models.items():
            c, prefix = m["config"], m["prefix"]
            L, shared = c["num_hidden_layers"], c["num_kv_shared_layers"]
            sliding = [t == "sliding_attention" for t in c["layer_types"]]
            for qtype, path in m["files"].items():
                with self.subTest(model=name, qtype=qtype):
                    md, tensors, _, _, got = tensors_of(path)
                    self.assertEqual(md["general.architecture"], "gemma4")
                    a = "gemma4."
                    self.assertEqual(md[a + "block_count"], L)
                    self.assertEqual(md[a + "embedding_length"], c["hidden_size"])
                    self.assertEqual(md[a + "attention.head_count"], c["num_attention_heads"])
                    self.assertEqual(md[a + "attention.key_length"], c["global_head_dim"])
                    self.assertEqual(md[a + "attention.value_length"], c["global_head_dim"])
                    self.assertEqual(md[a + "attention.key_length_swa"], c["head_dim"])
                    self.assertEqual(md[a + "attention.value_length_swa"], c["head_dim"])
                    self.assertEqual(md[a + "attention.sliding_window"], c["sliding_window"])
                    self.assertEqual(md[a + "attention.sliding_window_pattern"], sliding)
                    self.assertEqual(md[a + "attention.shared_kv_layers"], shared)
                    self.assertEqual(md[a + "embedding_length_per_layer_input"], c["hidden_size_per_layer_input"])
                    self.assertAlmostEqual(md[a + "final_logit_softcapping"], c["final_logit_softcapping"], places=5)
                    rp = c["rope_parameters"]
                    self.assertEqual(md[a + "rope.freq_base"], rp["full_attention"]["rope_theta"])
                    self.assertEqual(md[a + "rope.freq_base_swa"], rp["sliding_attention"]["rope_theta"])
                    self.assertEqual(md[a + "rope.dimension_count"], c["global_head_dim"])
                    self.assertEqual(md[a + "rope.dimension_count_swa"], c["head_dim"])
                    ff = c["intermediate_size"]
                    if c.get("use_double_wide_mlp"):
                        self.assertEqual(md[a + "feed_forward_length"], [ff * (2 if i >= L - shared else 1)
                                                                       for i in range(L)])
                    else:
                        self.assertEqual(md[a + "feed_forward_length"], ff)
                    if c.get("num_global_key_value_heads") is not None:
                        self.assertEqual(md[a + "attention.head_count_kv"],
                                         [c["num_key_value_heads"] if s else c["num_global_key_value_heads"]
                                          for s in sliding])
                    else:
                        self.assertEqual(md[a + "attention.head_count_kv"], c["num_key_value_heads"])
                    if c.get("enable_moe_block"):
                        self.assertEqual(md[a + "expert_count"], c["num_experts"])
                        self.assertEqual(md[a + "expert_used_count"], c["top_k_experts"])
                        self.assertEqual(md[a + "expert_feed_forward_length"], c["moe_intermediate_size"])
                    # rope_freqs: the proportional RoPE of the full layers as divisors.
                    half = c["global_head_dim"] // 2
                    pairs = int(c["global_head_dim"] * rp["full_attention"]["partial_rotary_factor"] / 2)
                    np.testing.assert_array_equal(got["rope_freqs.weight"][0],
                                                  np.float32([1.0] * pairs + [1e30] * (half - pairs)))
                    # Every text tensor of the checkpoint under its llama.cpp name, nothing else.
                    want = {n for n in m["source"] if n.startswith(prefix) and "vision" not in n}
                    names = {t["name"] for t in tensors} - {"rope_freqs.weight"}
                    self.assertEqual({hf_name(n, prefix) for n in names}, want)
                    for t in tensors:
                        if len(t["dims"]) == 1:
                            self.assertEqual(t["type"], "F32", t["name"])
                    # Norms, the layer scalar and the router scales as stored: w itself.
                    for n in names:
                        if n.endswith(("norm.weight", "layer_output_scale.weight", ".scale")):
                            np.testing.assert_array_equal(got[n][0], m["source"][hf_name(n, prefix)], err_msg=n)
                    self.assertIn(got["token_embd.weight"][1], ("Q8_0", "Q6_K"))  # the tied head
                    if c.get("enable_moe_block"):
                        E, mi, H = c["num_experts"], c["moe_intermediate_size"], c["hidden_size"]
                        self.assertEqual(got["blk.0.ffn_gate_up_exps.weight"][0].shape, (E, 2 * mi, H))
                        self.assertEqual(got["blk.0.ffn_down_exps.weight"][0].shape, (E, H, mi))

    def reference_dir(self, m, qtype):
        """The GGUF's weights, dequantized by the reader, as an F32 checkpoint with the
        source's names and config."""
        _, _, _, _, got = tensors_of(m["files"][qtype])
        out = m["base"] + f"-{qtype}-ref"
        os.makedirs(out, exist_ok=True)
        tensors = {hf_name(n, m["prefix"]): w.astype(np.float32) for n, (w, _) in got.items() if n != "rope_freqs.weight"}
        safetensors_writer.write_tensors(os.path.join(out, "model.safetensors"), tensors)
        pathlib.Path(out, "config.json").write_text(json.dumps(m["top"]))
        return out

    def test_logits_against_reference(self):
        for name in QUANTIZED_LOGITS:
            m = self.models[name]
            for qtype, path in m["files"].items():
                with self.subTest(model=name, qtype=qtype):
                    ref_dir = self.reference_dir(m, qtype)
                    err = quantized_check.check_logits(self, BIN, path, ref_dir, ref_dir + "-out", False,
                                                       f"gemma4 {name} {qtype}", reference=numpy_gemma4)
                    print(f"gemma4 {name} {qtype}: relative logit error {err:.4f}")
                    if qtype == "q8_0":
                        # Gemma 3's converter stores norms as 1 + w; read that way, the model is another one.
                        shifted = numpy_gemma4.Model(ref_dir, broken="norm_plus_one").forward(PROMPT)[0]
                        got = np.load(ref_dir + "-out.prefill.npy")
                        miss = np.max(np.abs(got - shifted)) / np.max(np.abs(shifted))
                        print(f"gemma4 {name} {qtype}: a 1 + w norm reading misses by {miss:.2f}")
                        self.assertGreater(miss, 3 * 0.1, "a 1 + w norm reading must not pass the bound")

    def test_f32_gguf_matches_reference(self):
        # The q8_0 files' weights, dequantized and written back unquantized by the
        # independent writer with the same metadata: nextn computes in float32, so every
        # name, key and layout must be read back exactly.
        for name, m in self.models.items():
            with self.subTest(model=name):
                md, tensors, _, _, got = tensors_of(m["files"]["q8_0"])
                meta = metadata_items(md)
                path = m["base"] + "-f32.gguf"
                Q.write_gguf(path, meta, [(t["name"], t["dims"], "F32", got[t["name"]][0].astype("<f4").tobytes())
                                          for t in tensors])
                ref = numpy_gemma4.Model(self.reference_dir(m, "q8_0"))
                out = m["base"] + "-f32-out"
                run(["debug-logits", "--model", path, "--prompt-tokens", ",".join(map(str, PROMPT)), "--threads", "2",
                     "--out", out])
                logits, _ = ref.forward(PROMPT)
                err = np.max(np.abs(np.load(out + ".prefill.npy") - logits)) / np.max(np.abs(logits))
                print(f"gemma4 {name} F32 GGUF: relative logit error {err:.2e}")
                self.assertLess(err, F32_BOUND)

    def test_assistant_on_gguf_target_equals_plain_greedy(self):
        # The "-assistant" drafter reads the GGUF target's (quantized) embedding and KV.
        m = self.models["dense"]
        assistant = m["base"] + "-assistant"
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--quiet",
                        "--assistant-of", m["base"], "--out", assistant], check=True)
        args = ["generate", "--model", m["files"]["q8_0"], "--prompt-tokens", "3,17,42,99,5", "-n", "30", "--ids",
                "--ignore-eos"]
        plain = run(args).splitlines()[0]
        self.assertEqual(run(args + ["--mtp-assistant-model", assistant]).splitlines()[0], plain)

    def refused(self, data, label):
        bad = pathlib.Path(self.models["dense"]["base"] + f"-{label}.gguf")
        bad.write_bytes(data)
        p = subprocess.run([BIN, "generate", "--model", str(bad), "--prompt-tokens", "1,2", "-n", "1", "--ids"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        return p.stderr

    def test_missing_pattern_is_refused(self):
        key = "gemma4.attention.sliding_window_pattern"
        data = pathlib.Path(self.models["dense"]["files"]["q8_0"]).read_bytes()
        self.assertEqual(data.count(key.encode()), 1)
        stderr = self.refused(data.replace(key.encode(), (key[:-4] + "_xyz").encode()), "no-pattern")
        self.assertIn(key, stderr)

    def test_foreign_rope_freqs_are_refused(self):
        # Llama 3-style per-frequency factors are not Gemma's proportional RoPE.
        _, _, tensors, start, data = Q.read_gguf(self.models["dense"]["files"]["q8_0"])
        t = next(t for t in tensors if t["name"] == "rope_freqs.weight")
        data = bytearray(data)
        at = start + t["offset"] + 4 * (t["dims"][0] - 1)
        data[at:at + 4] = np.float32(0.5).tobytes()
        self.assertIn("rope_freqs", self.refused(bytes(data), "rope-freqs"))


if __name__ == "__main__":
    unittest.main()
