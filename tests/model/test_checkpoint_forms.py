#!/usr/bin/python3
"""tests/model/test_checkpoint_forms.py — checkpoint details real releases use that nextn
once misread, each in its old and its new form, against the float64 references
(tests/reference/numpy_*.py) on random checkpoints from tools/make_checkpoint.py:
  - GLM-4.5 / 4.6 saved by newer transformers: rope_theta and partial_rotary_factor inside
    rope_parameters (nextn fell back to θ = 10000 silently); both forms match the
    reference, which the θ = 10000 fallback misses by far;
  - Gemma 4's per_layer_config form (the full layers' head dim and key/value heads as a
    per-layer override, no global_head_dim): matches the reference of the flat form, K=V
    too; overrides nextn cannot honour exit 2 naming them;
  - use_bidirectional_attention: null and "vision" compute the same causal text model,
    "all" exits 2; legacy layer_types names (global, local_sliding; Qwen3.5 attention)
    give the same logits as the current names, an unknown name exits 2 even on the last
    layer (which Gemma forces to full attention);
  - Qwen3.5's MTP head stored as model.mtp.*: the same MTP logits as mtp.*; no MTP
    tensors, or mtp_use_dedicated_embeddings true: --mtp exits 2 saying why, plain
    decoding still runs;
  - official FP8 checkpoints (F8_E4M3 weights, weight_scale_inv per 16 × 16 tile; F32
    scales as DeepSeek / GLM, BF16 as Qwen; fused experts with a grid per expert): the logits of the same weights dequantized
    here (fp8 · scale, rounded to BF16 as the official fp8_cast_bf16 does) exactly, the
    reference within its tolerance, and the conversion named in the log;
  - Gemma's embedding scale √H (and the per-layer table's √P) cast to the table's dtype
    as Hugging Face does: an F16 checkpoint with H = 112 (√112 = 10.583 → 10.586 in F16)
    matches the reference that rounds, and misses the one that does not."""
import json
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
import architecture_check  # noqa: E402
from architecture_check import BIN, ArchitectureTestCase, make_checkpoint, reference, rel_err  # noqa: E402
import fp8  # noqa: E402
import numpy_gemma4  # noqa: E402
import numpy_glm4_moe  # noqa: E402
import numpy_qwen3_5  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402

PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41]
TOL = 1e-4  # F32 against float64 (the per-architecture reference tests' bound)
BF16_TOL = 2e-2


class CheckpointForms(ArchitectureTestCase):
    ARCH = "forms"

    def made(self, name, *args):
        d = os.path.join(self.tmp, name)
        if not os.path.exists(d):
            make_checkpoint(d, list(args))
        return d

    def logits(self, d, name, extra=()):
        return architecture_check.debug_logits(d, os.path.join(self.tmp, name), list(extra), PROMPT, 4)

    def edited(self, src, name, edit):
        return architecture_check.edited_copy(src, os.path.join(self.tmp, name), edit)

    def nextn(self, *args):
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)

    def refused(self, d, expect, extra=()):
        p = self.nextn("debug-logits", "--model", d, "--prompt-tokens", "1,2,3", "--out", os.path.join(d, "out"),
                       *extra)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(expect, p.stderr)

    # --- GLM-4.5 / 4.6: RoPE keys inside rope_parameters ---

    def test_glm_rope_parameters_both_forms(self):
        def partial(c):  # a partial factor other than the default, so reading it shows
            c["partial_rotary_factor"] = 0.25
        flat = self.edited(self.made("glm-flat", "--arch", "glm4_moe"), "glm-flat-quarter", partial)

        def nest(c):
            c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.pop("rope_theta"),
                                    "partial_rotary_factor": c.pop("partial_rotary_factor")}
            c.pop("rope_scaling", None)
        nested = self.edited(flat, "glm-nested-quarter", nest)
        ref_logits, hidden = reference(numpy_glm4_moe, flat).forward(PROMPT)
        for name, d in (("flat", flat), ("nested", nested)):
            got = self.logits(d, f"glm-{name}", ["--mtp"])
            self.assertLessEqual(rel_err(got["prefill"], ref_logits), TOL, name)
            self.assertLessEqual(rel_err(got["mtp"], reference(numpy_glm4_moe, flat).mtp_logits(PROMPT, hidden)),
                                 TOL, name)
        # The old misreading (θ = 10000, the default factor) is far from it.
        wrong = self.edited(flat, "glm-default-rope", lambda c: (c.update(rope_theta=10000.0),
                                                                 c.update(partial_rotary_factor=0.5)))
        wrong_logits, _ = reference(numpy_glm4_moe, wrong).forward(PROMPT)
        self.assertGreater(rel_err(wrong_logits, ref_logits), 100 * TOL)
        # The generator's nested form is what newer transformers write.
        gen = self.made("glm-gen-nested", "--arch", "glm4_moe", "--config-form", "nested")
        with open(os.path.join(gen, "config.json")) as f:
            self.assertIn("rope_theta", json.load(f)["rope_parameters"])
        got = self.logits(gen, "glm-gen-nested")
        ref_gen, _ = reference(numpy_glm4_moe, self.made("glm-flat", "--arch", "glm4_moe")).forward(PROMPT)
        self.assertLessEqual(rel_err(got["prefill"], ref_gen), TOL)

    def test_flat_family_rope_parameters(self):
        # qwen3 with rope_theta inside rope_parameters: the same logits as at the top level.
        flat = self.made("qwen3-flat", "--arch", "qwen3", "--mtp", "none")
        nested = self.made("qwen3-nested", "--arch", "qwen3", "--mtp", "none", "--config-form", "nested")
        with open(os.path.join(nested, "config.json")) as f:
            c = json.load(f)
        self.assertNotIn("rope_theta", c)
        self.assertNotEqual(c["rope_parameters"]["rope_theta"], 10000.0)
        np.testing.assert_array_equal(self.logits(flat, "q3f")["prefill"], self.logits(nested, "q3n")["prefill"])

    # --- Gemma 4: per_layer_config, use_bidirectional_attention, layer_types names ---

    def test_gemma4_per_layer_config(self):
        for k_eq_v in ((), ("--k-eq-v",)):
            with self.subTest(k_eq_v=bool(k_eq_v)):
                tag = "keqv" if k_eq_v else "plain"
                flat = self.made(f"g4-flat-{tag}", "--arch", "gemma4", *k_eq_v)
                nested = self.made(f"g4-nested-{tag}", "--arch", "gemma4", "--config-form", "nested", *k_eq_v)
                with open(os.path.join(nested, "config.json")) as f:
                    c = json.load(f)
                self.assertNotIn("global_head_dim", c)
                self.assertIn("per_layer_config", c)
                logits, _ = reference(numpy_gemma4, flat).forward(PROMPT)
                self.assertLessEqual(rel_err(self.logits(nested, f"g4n-{tag}")["prefill"], logits), TOL)

    def test_gemma4_per_layer_config_overrides_it_cannot_honour(self):
        nested = self.made("g4-nested-plain", "--arch", "gemma4", "--config-form", "nested")

        def sliding_head(c):  # a sliding layer with its own head dim
            c["per_layer_config"]["0"] = {"head_dim": 8}
        self.refused(self.edited(nested, "g4-bad-sliding", sliding_head), "per_layer_config.0.head_dim")

        def full_widths(c):  # full layers of two head dims
            c["per_layer_config"]["3"]["head_dim"] = 64
        self.refused(self.edited(nested, "g4-bad-full", full_widths), "different head dims")

    def test_gemma4_bidirectional_attention(self):
        flat = self.made("g4-flat-plain", "--arch", "gemma4")
        base = self.logits(flat, "g4-causal")["prefill"]
        vision = self.edited(flat, "g4-vision", lambda c: c.update(use_bidirectional_attention="vision"))
        np.testing.assert_array_equal(self.logits(vision, "g4-vision")["prefill"], base)
        self.refused(self.edited(flat, "g4-all", lambda c: c.update(use_bidirectional_attention="all")),
                     "use_bidirectional_attention \"all\" is not supported")

    def test_gemma4_legacy_layer_types(self):
        flat = self.made("g4-flat-plain", "--arch", "gemma4")
        base = self.logits(flat, "g4-names")["prefill"]
        legacy = {"sliding_attention": "local_sliding", "full_attention": "global"}
        old = self.edited(flat, "g4-legacy", lambda c: c.update(layer_types=[legacy[t] for t in c["layer_types"]]))
        np.testing.assert_array_equal(self.logits(old, "g4-legacy")["prefill"], base)

        def bad_last(c):  # Gemma forces the last layer to full attention; a bad name there is still an error
            c["layer_types"][-1] = "linear_attention"
        self.refused(self.edited(flat, "g4-bad-last", bad_last), "unknown layer type 'linear_attention' at layer 6")

    # --- Qwen3.5: the MTP head's names and keys ---

    def test_qwen35_legacy_layer_types(self):
        d = self.made("q35", "--arch", "qwen3_5")
        base = self.logits(d, "q35-names")["prefill"]
        old = self.edited(d, "q35-legacy", lambda c: c.update(
            layer_types=["attention" if t == "full_attention" else t for t in c["layer_types"]]))
        np.testing.assert_array_equal(self.logits(old, "q35-legacy")["prefill"], base)
        self.refused(self.edited(d, "q35-bad", lambda c: c["layer_types"].__setitem__(0, "mamba")),
                     "unknown layer type 'mamba' at layer 0")

    def renamed(self, src, name, rename):
        """A copy of src with its tensors renamed by `rename` (None drops a tensor)."""
        dst = os.path.join(self.tmp, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        W = safetensors_reader.read_checkpoint(src, dtype=None)
        specs = [safetensors_writer.TensorSpec(rename(k), np.shape(v), "F32",
                                               lambda v=v: iter([np.asarray(v, np.float32)]))
                 for k, v in sorted(W.items()) if rename(k)]
        safetensors_writer.write_file(os.path.join(dst, "model.safetensors"), specs)
        return dst

    def test_qwen35_mtp_under_model_prefix(self):
        d = self.made("q35", "--arch", "qwen3_5")
        moved = self.renamed(d, "q35-model-mtp", lambda k: "model." + k if k.startswith("mtp.") else k)
        base = self.logits(d, "q35-mtp", ["--mtp"])
        got = self.logits(moved, "q35-model-mtp", ["--mtp"])
        np.testing.assert_array_equal(got["mtp"], base["mtp"])
        ref = reference(numpy_qwen3_5, d)
        _, hidden = ref.forward(PROMPT)
        self.assertLessEqual(rel_err(got["mtp"], ref.mtp_logits(PROMPT, hidden)), TOL)

    def test_qwen35_mtp_that_cannot_be_used_is_named(self):
        d = self.made("q35", "--arch", "qwen3_5")
        none = self.renamed(d, "q35-no-mtp", lambda k: None if k.startswith("mtp.") else k)
        self.refused(none, "no MTP tensors", ["--mtp"])
        dedicated = self.edited(d, "q35-dedicated", lambda c: c.update(mtp_use_dedicated_embeddings=True))
        self.refused(dedicated, "mtp_use_dedicated_embeddings = true", ["--mtp"])
        # The trunk still runs, and false is the released form.
        np.testing.assert_array_equal(self.logits(dedicated, "q35-dedicated")["prefill"],
                                      self.logits(d, "q35-plain")["prefill"])
        released = self.edited(d, "q35-shared", lambda c: c.update(mtp_use_dedicated_embeddings=False))
        self.assertIn("mtp", self.logits(released, "q35-shared", ["--mtp"]))

    # --- official FP8 checkpoints ---

    def dequantized(self, src, name, block):
        """src with every FP8 weight replaced by fp8 · scale_inv rounded to BF16 (the
        official fp8_cast_bf16), stored BF16; the scales and quantization_config dropped."""
        dst = os.path.join(self.tmp, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        dtypes = safetensors_reader.tensor_dtypes(src)
        header, base = safetensors_reader.read_header(os.path.join(src, "model.safetensors"))
        raw = np.memmap(os.path.join(src, "model.safetensors"), dtype=np.uint8, mode="r")
        specs = []
        for n, meta in sorted((k, v) for k, v in header.items() if k != "__metadata__"):
            if n.endswith("_scale_inv"):
                continue
            a, b = meta["data_offsets"]
            data = raw[base + a:base + b]
            if dtypes[n] == "F8_E4M3":
                sm = header[n + "_scale_inv"]
                sa, sb = sm["data_offsets"]
                scale = safetensors_reader.decode(bytes(raw[base + sa:base + sb]), sm["dtype"], sm["shape"])
                w = fp8.dequantize(np.asarray(data).reshape(meta["shape"]), scale, block).astype(np.float32)
                specs.append(safetensors_writer.TensorSpec(n, meta["shape"], "BF16", lambda w=w: iter([w])))
            else:
                w = safetensors_reader.decode(bytes(data), meta["dtype"], meta["shape"]).astype(np.float32)
                specs.append(safetensors_writer.TensorSpec(n, meta["shape"], "F32", lambda w=w: iter([w])))
        safetensors_writer.write_file(os.path.join(dst, "model.safetensors"), specs)
        path = os.path.join(dst, "config.json")
        with open(path) as f:
            c = json.load(f)
        c.pop("quantization_config")
        with open(path, "w") as f:
            json.dump(c, f)
        return dst

    def check_fp8(self, name, arch, module, mtp):
        d = self.made(f"{name}-fp8", "--arch", arch, "--fp8", "16")
        self.assertIn("F8_E4M3", safetensors_reader.tensor_dtypes(d).values())
        plain = self.dequantized(d, f"{name}-dequantized", 16)
        extra = ["--mtp"] if mtp else []
        p = self.nextn("debug-logits", "--model", d, "--prompt-tokens", "1,2,3", "--out", os.path.join(d, "log"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, r"converted \d+ FP8 weights \(E4M3 with 16×16 block scales, weight_scale_inv\) "
                                   r"to BF16")
        got = self.logits(d, f"{name}-fp8", extra)
        same = self.logits(plain, f"{name}-dequantized", extra)
        for part in got:
            np.testing.assert_array_equal(got[part], same[part], part)
        ref = reference(module, plain)
        logits, hidden = ref.forward(PROMPT)
        self.assertLessEqual(rel_err(got["prefill"], logits), BF16_TOL)
        if mtp:
            self.assertLessEqual(rel_err(got["mtp"], ref.mtp_logits(PROMPT, hidden)), BF16_TOL)
        # Dividing by the scale (its name's reading) would be far off.
        self.assertGreater(rel_err(fp8.dequantize(np.array([[0x38]], np.uint8), np.array([[4.0]]), 16),
                                   np.array([[0.25]])), 1.0)

    def test_fp8_deepseek_style_f32_scales(self):
        self.check_fp8("glm", "glm4_moe", numpy_glm4_moe, True)

    def test_fp8_qwen_style_bf16_scales(self):
        self.check_fp8("q35", "qwen3_5", numpy_qwen3_5, True)

    def test_fp8_fused_experts(self):
        # qwen3_5_moe's fused experts [E, 2I, H] stored FP8 with a scale grid per expert.
        self.check_fp8("q35moe", "qwen3_5_moe", numpy_qwen3_5, True)

    def test_fp8_block_scale_of_wrong_shape_is_refused(self):
        d = self.made("glm-fp8", "--arch", "glm4_moe", "--fp8", "16")
        bad = self.edited(d, "glm-fp8-block", lambda c: c["quantization_config"].update(weight_block_size=[32, 32]))
        self.refused(bad, "weight_scale_inv' has shape")

    # --- Gemma's embedding scale in the table's dtype ---

    def test_gemma4_embedding_scale_in_table_dtype(self):
        d = self.made("g4-f16-h112", "--arch", "gemma4", "--hidden", "112", "--dtype", "f16")
        got = self.logits(d, "g4-f16")
        ref = reference(numpy_gemma4, d)
        logits, _ = ref.forward(PROMPT)
        err = rel_err(got["prefill"], logits)
        self.assertLessEqual(err, TOL)
        # The same weights as F32: the reference with √H unrounded; nextn's F16 run is not that.
        f32 = self.renamed(d, "g4-f32-h112", lambda k: k)
        exact, _ = reference(numpy_gemma4, f32).forward(PROMPT)
        print(f"F16 embedding scale: error {err:.3g} against the rounding reference, "
              f"{rel_err(got['prefill'], exact):.3g} against √H unrounded")
        self.assertGreater(rel_err(got["prefill"], exact), 10 * err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
