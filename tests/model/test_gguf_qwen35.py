#!/usr/bin/python3
"""tests/model/test_gguf_qwen35.py — Qwen3.5 GGUF files (llama.cpp's `qwen35` layout) from
`nextn quantize`: a random tiny qwen3_5 checkpoint (Gated DeltaNet and gated attention
layers, Hv = 2 Hk, an MTP head, untied) to q8_0 and q4_k_m.

The file follows llama.cpp's converter as the independent reader (tests/reference/
ggml_quants.py) sees it: the qwen35.* / ssm.* metadata keys, the tensor names
(attn_qkv, attn_gate, ssm_*, post_attention_norm, blk.{n_layer}.nextn.*) in ggml order,
every RMSNorm scale but ssm_norm stored as 1 + w, ssm_a = -exp(A_log), the conv squeezed
to [K, channels] in ggml order, the value heads reordered from grouped-by-key-head to
tiled. The test undoes those rewrites itself (written from llama.cpp's converter layout as
docs/quantized-weights.md, "Qwen3.5 / Qwen3.6", states it, not from nextn's C++), runs the float64
reference (numpy_qwen3_5.py) on the dequantized weights and compares nextn's logits and
MTP logits on the GGUF with quantized_check.py's bound; greedy --mtp equals plain greedy
on the file; a file missing an ssm key is refused (exit 2) naming it.

test_gguf_qwen35_moe.py runs the same checks on qwen35moe through a subclass (ARCH,
GGUF_ARCH and the hooks hf_tensors / f32_file_tensors / check_layout)."""
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
import numpy_qwen3_5  # noqa: E402
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402
from quantized_check import PROMPT  # noqa: E402
from test_gguf_models import (BIN, check_greedy_mtp_equals_plain, metadata_items, quantize, run, step_bound,  # noqa: E402
                              tensors_of)

TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
TYPES = ["q8_0", "q4_k_m"]
# nextn rounds a quantized matmul's activations to int8 per 32 values (scale amax/127,
# round to nearest: kernels/quantize_rows.cc). Against the float64
# reference that is a few percent through these layers (measured 0.13 q8_0, 0.07 q4_k_m),
# so the reference applies the same rounding (Int8Activations): what is left is float32
# against float64. An activation within float32's reach of a rounding boundary may go
# either way (one step of one value moves these logits by percents): such ties are tried
# both ways (Ties).
BOUND = 2e-3
F32_BOUND = 1e-4  # test_qwen3_5_reference.py: float32 against float64, ~1e-5 measured

# llama.cpp's qwen35 tensor names (its gguf-py constants.py; docs/quantized-weights.md, "Qwen3.5 / Qwen3.6")
GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}
BLOCK = {"attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
         "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
         "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
         "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
         "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
         "ffn_down.weight": "mlp.down_proj.weight",
         "attn_qkv.weight": "linear_attn.in_proj_qkv.weight", "attn_gate.weight": "linear_attn.in_proj_z.weight",
         "ssm_beta.weight": "linear_attn.in_proj_b.weight", "ssm_alpha.weight": "linear_attn.in_proj_a.weight",
         "ssm_conv1d.weight": "linear_attn.conv1d.weight", "ssm_dt.bias": "linear_attn.dt_bias",
         "ssm_a": "linear_attn.A_log", "ssm_norm.weight": "linear_attn.norm.weight",
         "ssm_out.weight": "linear_attn.out_proj.weight"}
MTP = {"nextn.enorm.weight": "mtp.pre_fc_norm_embedding.weight", "nextn.hnorm.weight": "mtp.pre_fc_norm_hidden.weight",
       "nextn.eh_proj.weight": "mtp.fc.weight", "nextn.shared_head_norm.weight": "mtp.norm.weight"}


class Ties:
    """The activations whose int8 rounding float32 cannot decide: within TIE steps of
    a half-way point (nextn's float32 layers put x/step, up to 127, a few 1e-7 relative
    from its float64 value: 1.1e-5 seen, so it can round either way). A reference run lists them (found) and
    rounds the ones in `flip` the other way, so the test can try each resolution."""
    TIE = 1e-4

    def __init__(self):
        self.found, self.flip = [], set()

    def start(self, flip=()):
        self.found, self.flip = [], set(flip)

    def round(self, t):
        q = np.round(t)
        near = np.flatnonzero(np.abs(np.abs(t - np.floor(t)) - 0.5) < self.TIE)
        for i in near:
            # The value itself names the activation: one activation feeds several matmuls
            # (q/k/v, gate/up, every expert it is routed to), and nextn rounds it alike in all.
            key = float(t.flat[i])
            if key not in self.found:
                self.found.append(key)
            if key in self.flip:
                q.flat[i] = np.floor(t.flat[i]) if q.flat[i] > t.flat[i] else np.floor(t.flat[i]) + 1
        return q


TIES = Ties()


class Int8Activations:
    """Stands for w.T in the reference's `x @ w.T`: x rounded to int8 per 32 values first,
    the groups taken in `order` (the order the GGUF stores the columns in)."""
    __array_ufunc__ = None  # numpy defers `x @ self` to __rmatmul__

    def __init__(self, w, order):
        self.w, self.order = w, order

    def __rmatmul__(self, x):
        y = x[..., self.order].reshape(-1, 32)
        s = np.abs(y).max(axis=1, keepdims=True) / 127
        q = (TIES.round(y / np.where(s > 0, s, 1)) * s).reshape(x.shape)
        back = np.empty_like(q)
        back[..., self.order] = q
        return back @ self.w.T


class RoundedMatrix:
    def __init__(self, w, order):
        self.w, self.shape, self.order = w, w.shape, order

    @property
    def T(self):
        return Int8Activations(self.w, self.order)

    def __matmul__(self, x):  # w @ x (one vector, as the reference's experts use it) = x @ w.T
        return x @ self.T


class Qwen35Gguf(unittest.TestCase):
    ARCH, GGUF_ARCH = "qwen3_5", "qwen35"  # make_checkpoint.py --arch, general.architecture

    @classmethod
    def setUpClass(cls):
        cls.base = os.path.join(TMP, f"gguf-{cls.GGUF_ARCH}")
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--quiet", "--arch",
                        cls.ARCH, "--seed", "2", "--out", cls.base], check=True)
        cls.source = safetensors_reader.read_checkpoint(cls.base)
        cls.config = json.loads(pathlib.Path(cls.base, "config.json").read_text())
        c = cls.config
        cls.L, cls.Hk, cls.Hv = c["num_hidden_layers"], c["linear_num_key_heads"], c["linear_num_value_heads"]
        cls.dk, cls.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        cls.files = {t: quantize(cls.base, t, cls.base + f"-{t}.gguf") for t in TYPES}

    def untile(self, w, axis, unit, start=0):
        """llama.cpp's tiled value heads (position j·Hk + g) back to Hugging Face's grouped
        order (head g·r + j) along `axis`, from element `start` on."""
        w = np.moveaxis(w, axis, 0)
        head, v = w[:start], w[start:]
        r = self.Hv // self.Hk
        v = v.reshape(r, self.Hk, unit, *v.shape[1:]).swapaxes(0, 1).reshape(v.shape)
        return np.moveaxis(np.concatenate([head, v]), 0, axis)

    def hf_tensors(self, name, w):
        """[(Hugging Face name, array)] of one GGUF tensor (a subclass may split one)."""
        return [self.hf_tensor(name, w)]

    def hf_tensor(self, name, w):
        """(Hugging Face name, array in Hugging Face convention) of one GGUF tensor."""
        if name in GLOBAL:
            hf = GLOBAL[name]
        else:
            _, layer, rest = name.split(".", 2)
            layer = int(layer)
            if layer >= self.L:  # the MTP block
                hf = MTP.get(rest) or f"mtp.layers.{layer - self.L}.{BLOCK[rest]}"
            else:
                hf = f"model.layers.{layer}.{BLOCK[rest]}"
        qk = 2 * self.Hk * self.dk
        if name.endswith("norm.weight") and not name.endswith(".ssm_norm.weight"):
            w = w - 1.0  # stored 1 + w
        if name.endswith(".ssm_a"):
            w = np.log(-w)  # stored -exp(A_log)
        if self.Hv != self.Hk:
            if name.endswith(".attn_qkv.weight"):
                w = self.untile(w, 0, self.dv, qk)
            elif name.endswith(".attn_gate.weight"):
                w = self.untile(w, 0, self.dv)
            elif name.endswith((".ssm_beta.weight", ".ssm_alpha.weight", ".ssm_a", ".ssm_dt.bias")):
                w = self.untile(w, 0, 1)
            elif name.endswith(".ssm_conv1d.weight"):
                w = self.untile(w, 0, self.dv, qk)
            elif name.endswith(".ssm_out.weight"):
                w = self.untile(w, 1, self.dv)
        if name.endswith(".ssm_conv1d.weight"):
            w = w[:, None, :]  # squeezed [C, K] → [C, 1, K]
        return hf, w

    def check_layout(self, md, dims, types):
        """The dense MLP: feed_forward_length and ffn_{gate,up,down} in every block."""
        c, H = self.config, self.config["hidden_size"]
        self.assertEqual(md["qwen35.feed_forward_length"], c["intermediate_size"])
        for i in range(self.L + 1):
            self.assertEqual(dims[f"blk.{i}.ffn_gate.weight"], [H, c["intermediate_size"]])
            self.assertEqual(dims[f"blk.{i}.ffn_down.weight"], [c["intermediate_size"], H])

    def test_layout_and_metadata(self):
        c, L, a = self.config, self.L, self.GGUF_ARCH
        md, tensors, _, _, got = tensors_of(self.files["q8_0"])
        self.assertEqual(md["general.architecture"], a)
        self.assertEqual(md[f"{a}.block_count"], L + 1)
        self.assertEqual(md[f"{a}.nextn_predict_layers"], 1)
        self.assertEqual(md[f"{a}.embedding_length"], c["hidden_size"])
        self.assertEqual(md[f"{a}.attention.head_count"], c["num_attention_heads"])
        self.assertEqual(md[f"{a}.attention.head_count_kv"], c["num_key_value_heads"])
        self.assertEqual(md[f"{a}.attention.key_length"], c["head_dim"])
        self.assertEqual(md[f"{a}.rope.dimension_count"], int(c["head_dim"] * 0.25))
        self.assertEqual(md[f"{a}.ssm.conv_kernel"], c["linear_conv_kernel_dim"])
        self.assertEqual(md[f"{a}.ssm.state_size"], self.dk)
        self.assertEqual(md[f"{a}.ssm.group_count"], self.Hk)
        self.assertEqual(md[f"{a}.ssm.time_step_rank"], self.Hv)
        self.assertEqual(md[f"{a}.ssm.inner_size"], self.Hv * self.dv)
        self.assertEqual(md[f"{a}.full_attention_interval"], c["full_attention_interval"])
        self.assertEqual(list(md[f"{a}.rope.dimension_sections"]), [11, 11, 10, 0])
        dims = {t["name"]: t["dims"] for t in tensors}
        types = {t["name"]: got[t["name"]][1] for t in tensors}
        self.check_layout(md, dims, types)
        H, C, K = c["hidden_size"], 2 * self.Hk * self.dk + self.Hv * self.dv, c["linear_conv_kernel_dim"]
        for i, kind in enumerate(c["layer_types"]):
            p = f"blk.{i}."
            self.assertIn(p + "post_attention_norm.weight", dims)
            self.assertNotIn(p + "ffn_norm.weight", dims)
            if kind == "linear_attention":
                self.assertEqual(dims[p + "attn_qkv.weight"], [H, C])
                self.assertEqual(dims[p + "attn_gate.weight"], [H, self.Hv * self.dv])
                self.assertEqual(dims[p + "ssm_beta.weight"], [H, self.Hv])
                self.assertEqual(dims[p + "ssm_alpha.weight"], [H, self.Hv])
                self.assertEqual(dims[p + "ssm_conv1d.weight"], [K, C])
                self.assertEqual(types[p + "ssm_conv1d.weight"], "F32")
                for one in ("ssm_dt.bias", "ssm_a"):
                    self.assertEqual(dims[p + one], [self.Hv])
                    self.assertEqual(types[p + one], "F32")
                self.assertEqual(dims[p + "ssm_norm.weight"], [self.dv])
                self.assertEqual(dims[p + "ssm_out.weight"], [self.Hv * self.dv, H])
            else:
                self.assertEqual(dims[p + "attn_q.weight"], [H, 2 * c["num_attention_heads"] * c["head_dim"]])
                self.assertNotIn(p + "attn_qkv.weight", dims)
        m = f"blk.{L}."
        for name in ("nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"):
            self.assertEqual(dims[m + name], [H])
        self.assertEqual(dims[m + "nextn.eh_proj.weight"], [2 * H, H])
        self.assertIn(m + "attn_q.weight", dims)
        self.assertIn(m + "post_attention_norm.weight", dims)
        self.assertEqual(dims["output.weight"], [H, c["vocab_size"]])

    def test_rewrites_and_quantizer_step(self):
        # F32 tensors (norms, ssm_a, ssm_dt, conv) are the converter's rewrite of the
        # source, exactly in float32; matrices are within the quantizer's step of the source
        # once the value heads are put back. Spot-check the rewrites on their own too.
        _, _, _, _, got = tensors_of(self.files["q8_0"])
        norm = got["blk.0.attn_norm.weight"][0]
        np.testing.assert_array_equal(norm, (self.source["model.layers.0.input_layernorm.weight"]
                                             .astype(np.float32) + np.float32(1)))
        np.testing.assert_array_equal(got["blk.0.ssm_norm.weight"][0],
                                      self.source["model.layers.0.linear_attn.norm.weight"].astype(np.float32))
        a_log = self.source["model.layers.0.linear_attn.A_log"].astype(np.float32)
        r = self.Hv // self.Hk
        tiled = [g * r + j for j in range(r) for g in range(self.Hk)]
        np.testing.assert_allclose(got["blk.0.ssm_a"][0], -np.exp(a_log)[tiled], rtol=1e-6)
        self.assertNotEqual(tiled, list(range(self.Hv)))  # the tiny model does reorder
        for name, (w, wtype) in got.items():
            for hf, part in self.hf_tensors(name, w):
                src = self.source[hf]
                with self.subTest(tensor=hf):
                    self.assertEqual(part.shape, src.shape)
                    if wtype == "F32":
                        np.testing.assert_allclose(part, src.astype(np.float32), rtol=2e-6, atol=1e-7)
                    else:  # in GGUF order: the quantizer's blocks run along the stored rows
                        stored = self.tile(name, src)
                        self.assertTrue((np.abs(self.tile(name, part) - stored) <= step_bound(wtype, stored) + 1e-12).all())

    def tile(self, name, w):
        """A Hugging Face matrix in the converter's tiled value-head order."""
        if self.Hv == self.Hk:
            return w
        r, qk = self.Hv // self.Hk, 2 * self.Hk * self.dk

        def along(x, axis, unit, start=0):
            x = np.moveaxis(x, axis, 0)
            head, v = x[:start], x[start:]
            v = v.reshape(self.Hk, r, unit, *v.shape[1:]).swapaxes(0, 1).reshape(v.shape)
            return np.moveaxis(np.concatenate([head, v]), 0, axis)
        if name.endswith(".attn_qkv.weight"):
            return along(w, 0, self.dv, qk)
        if name.endswith(".attn_gate.weight"):
            return along(w, 0, self.dv)
        if name.endswith((".ssm_beta.weight", ".ssm_alpha.weight")):
            return along(w, 0, 1)
        if name.endswith(".ssm_out.weight"):
            return along(w, 1, self.dv)
        return w

    def reference(self, qtype, rounded=True):
        _, _, _, _, got = tensors_of(self.files[qtype])
        ref_dir = self.base + f"-{qtype}-ref"
        os.makedirs(ref_dir, exist_ok=True)
        tensors = dict(pair for name, (w, _) in got.items() for pair in self.hf_tensors(name, w))
        safetensors_writer.write_tensors(os.path.join(ref_dir, "model.safetensors"),
                                         {k: v.astype(np.float32) for k, v in tensors.items()})
        cfg = dict(self.config, rms_norm_eps=float(np.float32(self.config["rms_norm_eps"])))
        pathlib.Path(ref_dir, "config.json").write_text(json.dumps(cfg))
        ref = numpy_qwen3_5.Model(ref_dir)
        if not rounded:
            return ref
        # Every quantized matrix rounds its input as nextn does; ssm_out's columns are
        # stored tiled, so its groups of 32 are taken in that order.
        r = self.Hv // self.Hk
        tiled = np.array([(g * r + j) * self.dv + i for j in range(r) for g in range(self.Hk) for i in range(self.dv)])
        for name, (w, wtype) in got.items():
            for hf, part in self.hf_tensors(name, w):
                if wtype in ("F32", "F16") or part.ndim != 2 or "embed_tokens" in hf:
                    continue
                cols = ref.W[hf].shape[1]
                order = tiled if name.endswith(".ssm_out.weight") else np.arange(cols)
                ref.W[hf] = RoundedMatrix(ref.W[hf], order)
                if hf == "lm_head.weight":
                    ref.lm_head = ref.W[hf]
        return ref

    def f32_file_tensors(self, tensors, got):
        """(name, ggml dims, float32 array) of each tensor of the F32 rewrite."""
        return [(t["name"], t["dims"], got[t["name"]][0]) for t in tensors]

    def test_logits_against_reference(self):
        for qtype, path in self.files.items():
            with self.subTest(qtype=qtype):
                ref = self.reference(qtype)
                out = self.base + f"-{qtype}-out"
                run(["debug-logits", "--model", path, "--prompt-tokens", ",".join(map(str, PROMPT)), "--threads", "2",
                     "--mtp", "--out", out])
                got = np.load(out + ".prefill.npy")
                mtp_got = np.load(out + ".mtp.npy")

                def errors(flip):  # (logit error, MTP error, logits) of one resolution of the ties
                    TIES.start(flip)
                    logits, hidden = ref.forward(PROMPT)
                    mtp_ref = ref.mtp_logits(PROMPT, hidden)
                    n = min(len(mtp_ref), len(mtp_got))
                    return (np.max(np.abs(got - logits)) / np.max(np.abs(logits)),
                            np.max(np.abs(mtp_got[:n] - mtp_ref[:n])) / np.max(np.abs(mtp_ref[:n])), logits)

                # One step of one activation moves these tiny random models' logits by
                # percents, so each tie that nextn may have rounded the other way is
                # tried flipped, in the order met, and kept flipped when that brings the
                # reference closer (a wrong rounding costs percents, far above BOUND).
                err, merr, logits = errors(())
                ties, flip = list(TIES.found), []
                self.assertLessEqual(len(ties), 80, f"{qtype}: {len(ties)} activations at a rounding tie")
                for tie in ties:
                    e = errors(flip + [tie])
                    if max(e[0], e[1]) < max(err, merr):
                        (err, merr, logits), flip = e, flip + [tie]
                print(f"{self.GGUF_ARCH} {qtype}: relative logit error {err:.2e}, MTP {merr:.2e} (int8-rounding "
                      f"reference, {len(flip)} of {len(ties)} ties flipped)")
                self.assertLess(err, BOUND, qtype)
                self.assertLess(merr, BOUND, qtype)
                top2 = np.sort(logits, axis=-1)
                confident = (top2[:, -1] - top2[:, -2]) > 2 * err * np.max(np.abs(logits))
                np.testing.assert_array_equal(np.argmax(got, -1)[confident], np.argmax(logits, -1)[confident])

    def test_f32_gguf_matches_reference(self):
        # The q8_0 file's weights, dequantized and written back unquantized by the
        # independent writer (ggml_quants.write_gguf) with the same metadata: nextn then
        # computes in float32, so every name, order and rewrite must be read back exactly.
        md, tensors, _, _, got = tensors_of(self.files["q8_0"])
        meta = metadata_items(md)
        path = self.base + "-f32.gguf"
        Q.write_gguf(path, meta, [(name, dims, "F32", w.astype("<f4").tobytes())
                                  for name, dims, w in self.f32_file_tensors(tensors, got)])
        ref = self.reference("q8_0", rounded=False)
        out = self.base + "-f32-out"
        run(["debug-logits", "--model", path, "--prompt-tokens", ",".join(map(str, PROMPT)), "--threads", "2",
             "--mtp", "--out", out])
        logits, hidden = ref.forward(PROMPT)
        err = np.max(np.abs(np.load(out + ".prefill.npy") - logits)) / np.max(np.abs(logits))
        mtp_ref = ref.mtp_logits(PROMPT, hidden)
        mtp_got = np.load(out + ".mtp.npy")
        n = min(len(mtp_ref), len(mtp_got))
        merr = np.max(np.abs(mtp_got[:n] - mtp_ref[:n])) / np.max(np.abs(mtp_ref[:n]))
        print(f"{self.GGUF_ARCH} F32 GGUF: relative logit error {err:.2e}, MTP {merr:.2e}")
        self.assertLess(err, F32_BOUND)
        self.assertLess(merr, F32_BOUND)

    def test_greedy_mtp_equals_plain_greedy(self):
        check_greedy_mtp_equals_plain(self, self.files, ["--prompt-tokens", "3,17,42,99,5"], 30)

    def test_missing_ssm_key_is_refused(self):
        self.check_missing_key_is_refused(f"{self.GGUF_ARCH}.ssm.state_size")

    def check_missing_key_is_refused(self, key):
        # Rename the key in place (same length), so the file stays valid GGUF.
        data = pathlib.Path(self.files["q8_0"]).read_bytes()
        self.assertEqual(data.count(key.encode()), 1)
        renamed = key[:-4] + "_xyz"  # same length
        bad = pathlib.Path(self.base + f"-no-{key}.gguf")
        bad.write_bytes(data.replace(key.encode(), renamed.encode()))
        p = subprocess.run([BIN, "generate", "--model", str(bad), "--prompt-tokens", "1,2", "-n", "1", "--ids"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(key, p.stderr)

    def test_positive_ssm_a_is_refused(self):
        # ssm_a holds -exp(A_log) < 0; a file with A_log itself there (a converter that
        # skipped the rewrite) must not load as a model with growing state.
        _, _, tensors, start, data = Q.read_gguf(self.files["q8_0"])
        t = next(t for t in tensors if t["name"] == "blk.0.ssm_a")
        data = bytearray(data)
        at = start + t["offset"]
        data[at:at + 4] = np.float32(0.5).tobytes()
        bad = pathlib.Path(self.base + "-positive-ssm-a.gguf")
        bad.write_bytes(bytes(data))
        p = subprocess.run([BIN, "generate", "--model", str(bad), "--prompt-tokens", "1,2", "-n", "1", "--ids"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("blk.0.ssm_a", p.stderr)


if __name__ == "__main__":
    unittest.main()
