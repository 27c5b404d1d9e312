#!/usr/bin/python3
"""tests/model/test_mmproj_gguf.py — llama.cpp's split vision files for Qwen3.5 and Gemma 4: a text GGUF
(written by `nextn quantize`) beside a vision projector GGUF (mmproj) in the layout
llama.cpp's converter writes (general.architecture "clip", clip.projector_type
"qwen3vl_merger", v.* / mm.* names, the Conv3d patch embedding split along time into
v.patch_embd.weight and .weight.1), written here from the Hugging Face checkpoint by an
independent writer (tests/reference/ggml_quants.py).

- The mmproj tower (F32) gives the Hugging Face tower's rows to 1e-6 (`debug-image -m`):
  names, the frame join and the metadata read back exactly; the F16 file within F16's
  rounding. A file whose second frame is zero misses by far more.
- The text GGUF gives the image prompt the Hugging Face checkpoint's M-RoPE positions
  (the sections and image token ids come back from its metadata and vocabulary), and its
  logits with the mmproj tower equal its logits with the Hugging Face tower (`--mmproj`
  takes either).
- Damaged files exit 2 naming the problem: an unknown projector type, a missing frame,
  DeepStack layers.
- Gemma 4 (clip.vision.projector_type "gemma4v": the patch embedding stored as a Conv2d
  [D, 3, p, p], clipped linears' scalars as 1-element tensors, standardize's std_bias /
  std_scale, embed_vision as mm.input_projection): the F32 mmproj tower equals the Hugging
  Face tower to 1e-6; the text GGUF finds its image tokens in its vocabulary, and its
  logits with the mmproj tower equal those with the Hugging Face tower."""
import json
import os
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
import safetensors_reader  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, rel_err  # noqa: E402
from png_image import png_bytes  # noqa: E402
from test_gguf_models import metadata_items  # noqa: E402

BLOCK = {"norm1": "ln1", "norm2": "ln2", "attn.qkv": "attn_qkv", "attn.proj": "attn_out",
         "mlp.linear_fc1": "ffn_up", "mlp.linear_fc2": "ffn_down"}
FIXED = {"patch_embed.proj.bias": "v.patch_embd.bias", "pos_embed.weight": "v.position_embd.weight",
         "merger.norm.weight": "v.post_ln.weight", "merger.norm.bias": "v.post_ln.bias",
         "merger.linear_fc1.weight": "mm.0.weight", "merger.linear_fc1.bias": "mm.0.bias",
         "merger.linear_fc2.weight": "mm.2.weight", "merger.linear_fc2.bias": "mm.2.bias"}


def mmproj_gguf(ckpt, out, dtype="F32", zero_frame=False, drop=(), projector="qwen3vl_merger", deepstack=False):
    """The checkpoint's model.visual.* as llama.cpp's converter writes an mmproj file:
    matrices in `dtype`, vectors and the position table F32."""
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    v = cfg["vision_config"]
    W = safetensors_reader.read_checkpoint(ckpt, np.float32)
    tensors = []

    def put(name, w):
        if name in drop:
            return
        w = np.ascontiguousarray(w)
        t = dtype if w.ndim >= 2 and name != "v.position_embd.weight" else "F32"
        raw = w.astype("<f2" if t == "F16" else "<f4").tobytes()
        tensors.append((name, list(reversed(w.shape)), t, raw))

    conv = W["model.visual.patch_embed.proj.weight"]  # [D, 3, 2, p, p]
    put("v.patch_embd.weight", conv[:, :, 0])
    put("v.patch_embd.weight.1", conv[:, :, 1] * (0 if zero_frame else 1))
    for hf, g in FIXED.items():
        put(g, W["model.visual." + hf])
    for i in range(v["depth"]):
        for hf, g in BLOCK.items():
            for kind in ("weight", "bias"):
                put(f"v.blk.{i}.{g}.{kind}", W[f"model.visual.blocks.{i}.{hf}.{kind}"])
    c = "clip.vision."
    md = {"general.architecture": "clip", "general.type": "mmproj", "clip.has_vision_encoder": True,
          "clip.projector_type": projector, "clip.use_gelu": True,
          c + "image_size": int(round(v["num_position_embeddings"] ** 0.5)) * v["patch_size"],
          c + "patch_size": v["patch_size"], c + "embedding_length": v["hidden_size"],
          c + "feed_forward_length": v["intermediate_size"], c + "block_count": v["depth"],
          c + "attention.head_count": v["num_heads"], c + "projection_dim": v["out_hidden_size"],
          c + "spatial_merge_size": v.get("spatial_merge_size", 2),
          c + "attention.layer_norm_epsilon": 1e-6, c + "image_mean": [0.5, 0.5, 0.5], c + "image_std": [0.5, 0.5, 0.5]}
    if deepstack:
        md[c + "is_deepstack_layers"] = [i == 0 for i in range(v["depth"])]
    Q.write_gguf(out, metadata_items(md), tensors)
    return out


GEMMA_BLOCK = {"input_layernorm.weight": "ln1.weight", "post_attention_layernorm.weight": "attn_post_norm.weight",
               "pre_feedforward_layernorm.weight": "ln2.weight",
               "post_feedforward_layernorm.weight": "ffn_post_norm.weight",
               "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight"}
GEMMA_LINEAR = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                "self_attn.o_proj": "attn_out", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                "mlp.down_proj": "ffn_down"}


def gemma4_mmproj_gguf(ckpt, out):
    """A Gemma 4 checkpoint's vision tower as llama.cpp's converter writes its mmproj (F32)."""
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    v = cfg["vision_config"]
    W = safetensors_reader.read_checkpoint(ckpt, np.float32)
    tensors = []

    def put(name, w):
        w = np.ascontiguousarray(np.asarray(w, dtype=np.float32).reshape(np.shape(w) or (1,)))
        tensors.append((name, list(reversed(w.shape)), "F32", w.astype("<f4").tobytes()))

    t = "model.vision_tower."
    proj = W[t + "patch_embedder.input_proj.weight"]  # [D, p·p·3], (y, x, channel)
    p = v["patch_size"]
    put("v.patch_embd.weight", proj.reshape(-1, p, p, 3).transpose(0, 3, 1, 2))
    put("v.position_embd.weight", W[t + "patch_embedder.position_embedding_table"])
    for i in range(v["num_hidden_layers"]):
        b = f"{t}encoder.layers.{i}."
        for hf, g in GEMMA_BLOCK.items():
            put(f"v.blk.{i}.{g}", W[b + hf])
        for hf, g in GEMMA_LINEAR.items():
            put(f"v.blk.{i}.{g}.weight", W[b + hf + ".linear.weight"])
            for k in ("input_min", "input_max", "output_min", "output_max"):
                if b + hf + "." + k in W:
                    put(f"v.blk.{i}.{g}.{k}", W[b + hf + "." + k])
    for k in ("std_bias", "std_scale"):
        if t + k in W:
            put("v." + k, W[t + k])
    put("mm.input_projection.weight", W["model.embed_vision.embedding_projection.weight"])
    c = "clip.vision."
    md = {"general.architecture": "clip", "general.type": "mmproj", "clip.has_vision_encoder": True,
          "clip.vision.projector_type": "gemma4v", c + "image_size": 224, c + "patch_size": p,
          c + "embedding_length": v["hidden_size"], c + "feed_forward_length": v["intermediate_size"],
          c + "block_count": v["num_hidden_layers"], c + "attention.head_count": v["num_attention_heads"],
          c + "projection_dim": cfg["text_config"]["hidden_size"], c + "attention.layer_norm_epsilon": 1e-6,
          c + "image_mean": [0.0, 0.0, 0.0], c + "image_std": [1.0, 1.0, 1.0]}
    Q.write_gguf(out, metadata_items(md), tensors)
    return out


def run(args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args[:2])} exited {r.returncode}: {r.stderr}")
    return r


def split_files(cls, prefix, checkpoint_args, image_shape, seed):
    """On `cls`: a temporary folder, a random vision-language checkpoint (`ckpt`, its
    `config`), a random PNG (`image`) and the checkpoint's q8_0 text GGUF (`text`)."""
    os.makedirs(TMP_ROOT, exist_ok=True)
    cls._tmp = tempfile.TemporaryDirectory(prefix=prefix, dir=TMP_ROOT)
    cls.tmp = cls._tmp.name
    cls.ckpt = os.path.join(cls.tmp, "hf")
    subprocess.run([PY, GEN, "--vision-language", *checkpoint_args, "--quiet", "--out", cls.ckpt], check=True)
    with open(os.path.join(cls.ckpt, "config.json")) as f:
        cls.config = json.load(f)
    cls.image = os.path.join(cls.tmp, "image.png")
    with open(cls.image, "wb") as f:
        f.write(png_bytes(np.random.default_rng(seed).integers(0, 256, (*image_shape, 3), dtype=np.uint8)))
    cls.text = os.path.join(cls.tmp, "text-q8_0.gguf")
    run(["quantize", cls.ckpt, "--type", "q8_0", "--out", cls.text, "--no-progress"])


class MmprojTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        split_files(cls, "mmproj-", ["--arch", "qwen3_5", "--seed", "11"], (100, 150), 3)
        cls.f32 = mmproj_gguf(cls.ckpt, os.path.join(cls.tmp, "mmproj-f32.gguf"))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def tower(self, model, name):
        prefix = os.path.join(self.tmp, name)
        run(["debug-image", "-m", model, self.image, "--min-pixels", "1024", "--threads", "2", "--out", prefix])
        return np.load(prefix + ".vision.npy").astype(np.float64)

    def logits(self, model, mmproj, name):
        c = self.config
        prompt = [11, 42, c["vision_start_token_id"], c["image_token_id"], c["vision_end_token_id"], 5, 77]
        prefix = os.path.join(self.tmp, name)
        args = ["debug-logits", "-m", model, "--prompt-tokens", ",".join(map(str, prompt)), "--image", self.image,
                "--image-min-tokens", "1", "--threads", "2", "--out", prefix]
        run(args + (["--mmproj", mmproj] if mmproj else []))
        return np.load(prefix + ".prefill.npy").astype(np.float64), np.load(prefix + ".positions.npy")

    def refused(self, path, *expected):
        p = subprocess.run([BIN, "debug-image", "-m", path, self.image, "--out", os.path.join(self.tmp, "bad")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        for e in expected:
            self.assertIn(e, p.stderr)

    def test_f32_mmproj_tower_equals_hugging_face_tower(self):
        ref = self.tower(self.ckpt, "hf")
        got = self.tower(self.f32, "f32")
        self.assertEqual(got.shape, ref.shape)
        err = rel_err(got, ref)
        print(f"mmproj F32 tower vs Hugging Face: relative error {err:.1e}")
        self.assertLess(err, 1e-6)
        # A still picture fills both time frames with itself, so the tower adds the two
        # frames' weights: a file whose second frame is zero must miss.
        zeroed = mmproj_gguf(self.ckpt, os.path.join(self.tmp, "mmproj-zeroed.gguf"), zero_frame=True)
        miss = rel_err(self.tower(zeroed, "zeroed"), ref)
        print(f"second frame zeroed: {miss:.1e}")
        self.assertGreater(miss, 1e-2)

    def test_f16_mmproj_within_f16_rounding(self):
        f16 = mmproj_gguf(self.ckpt, os.path.join(self.tmp, "mmproj-f16.gguf"), dtype="F16")
        err = rel_err(self.tower(f16, "f16"), self.tower(self.ckpt, "hf16"))
        print(f"mmproj F16 tower vs Hugging Face F32: relative error {err:.1e}")
        # F16 keeps 11 significant bits (2^-11 ≈ 4.9e-4 per weight); through two blocks and
        # the merger the output's relative error stays within a few times that.
        self.assertLess(err, 1e-2)

    def test_text_gguf_with_mmproj_answers_the_image_prompt(self):
        _, hf_positions = self.logits(self.ckpt, None, "lm-hf")
        with_hf_tower, positions = self.logits(self.text, self.ckpt, "lm-gguf-hf-tower")
        with_mmproj, positions2 = self.logits(self.text, self.f32, "lm-gguf-mmproj")
        # The image rows and M-RoPE positions come back from the text GGUF's metadata.
        np.testing.assert_array_equal(positions, hf_positions)
        np.testing.assert_array_equal(positions2, hf_positions)
        self.assertGreater(int(hf_positions[-1, 0]) + 1, 0)
        self.assertLess(int(hf_positions[-1, 0]) + 1, len(hf_positions))  # the image advanced positions by max(h, w)
        err = rel_err(with_mmproj, with_hf_tower)
        print(f"text GGUF + mmproj vs text GGUF + Hugging Face tower: logits relative error {err:.1e}")
        self.assertLess(err, 1e-5)

    def test_damaged_files_are_refused(self):
        t = self.tmp
        self.refused(mmproj_gguf(self.ckpt, os.path.join(t, "unknown.gguf"), projector="llava_next"),
                     "clip", "llava_next")
        self.refused(mmproj_gguf(self.ckpt, os.path.join(t, "no-frame.gguf"), drop=("v.patch_embd.weight.1",)),
                     "v.patch_embd.weight.1")
        self.refused(mmproj_gguf(self.ckpt, os.path.join(t, "deepstack.gguf"), deepstack=True), "DeepStack")
        # The server's and generate's --mmproj refuse it the same way, before serving.
        p = subprocess.run([BIN, "generate", "-m", self.text, "--mmproj", os.path.join(t, "unknown.gguf"),
                            "--prompt-tokens", "1,2", "-n", "1", "--ids"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("llava_next", p.stderr)


class Gemma4MmprojTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        split_files(cls, "mmproj-gemma4-", ["--arch", "gemma4", "--dtype", "f32", "--seed", "2", "--vision-clipped",
                                             "--vision-standardize"], (90, 140), 4)
        cls.mmproj = gemma4_mmproj_gguf(cls.ckpt, os.path.join(cls.tmp, "mmproj-f32.gguf"))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def tower(self, model, name):
        prefix = os.path.join(self.tmp, name)
        run(["debug-image", "--processor", "gemma4", "--max-soft-tokens", "16", "-m", model, self.image,
             "--threads", "2", "--out", prefix])
        return np.load(prefix + ".vision.npy").astype(np.float64)

    def test_tower_equals_hugging_face_tower(self):
        ref = self.tower(self.ckpt, "hf")
        got = self.tower(self.mmproj, "gguf")
        self.assertEqual(got.shape, ref.shape)
        err = rel_err(got, ref)
        print(f"Gemma 4 mmproj F32 tower vs Hugging Face: relative error {err:.1e}")
        self.assertLess(err, 1e-6)

    def test_text_gguf_with_mmproj(self):
        c = self.config
        prompt = [11, 42, c["image_token_id"], 5, 77]
        out = {}
        for name, tower in (("hf-tower", self.ckpt), ("mmproj", self.mmproj)):
            prefix = os.path.join(self.tmp, name)
            run(["debug-logits", "-m", self.text, "--mmproj", tower, "--prompt-tokens", ",".join(map(str, prompt)),
                 "--image", self.image, "--image-max-tokens", "16", "--threads", "2", "--out", prefix])
            out[name] = np.load(prefix + ".prefill.npy").astype(np.float64)
        # The one <|image|> became <|image>, the image's soft tokens and <image|>: the text
        # GGUF found the begin/end ids in its vocabulary.
        self.assertGreater(len(out["mmproj"]), len(prompt) + 2)
        err = rel_err(out["mmproj"], out["hf-tower"])
        print(f"Gemma 4 text GGUF + mmproj vs + Hugging Face tower: logits relative error {err:.1e}")
        self.assertLess(err, 1e-5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
