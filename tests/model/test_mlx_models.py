#!/usr/bin/python3
"""tests/model/test_mlx_models.py — MLX affine-quantized checkpoints (mlx-lm's layout,
written by tools/mlx_quantize.py), end to end.

1. Random qwen3 / llama / mimo (MTP) checkpoints at 4 and 8 bits, groups 32/64/128, scales
   in bf16, f16 and f32, one module overridden to other settings: nextn's logits (and
   MTP logits) against the float64 numpy reference (tests/reference/numpy_model.py) run
   on the weights tests/reference/mlx_affine.py dequantizes, within the bound
   tests/model/quantized_check.py explains (nextn rounds activations to int8).
   A wrongly unpacked weight (nibble order, word order, scale/bias of another group)
   changes random-weight logits by about their own size.
2. The embedded tiny model at 4 bits: greedy --mtp output equals plain greedy output; it
   serves chat over HTTP with MTP drafting.
3. Damaged or unsupported MLX checkpoints (2-bit values, a non-affine mode, a GPTQ
   config, scales of the wrong shape, a config disagreeing with the shapes) exit 2 with
   one error line naming the problem.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or str(pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
sys.path.insert(0, os.path.join(SRC, "tests", "server"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
import mlx_affine  # noqa: E402
import numpy_model as M  # noqa: E402
import quantized_check  # noqa: E402
import safetensors_writer  # noqa: E402

BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
os.environ.setdefault("NEXTN_BIN", BIN)  # for serverlib (quantized_check.check_serves_chat_with_mtp)

TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
TINY = os.path.join(SRC, "models", "nextn-tiny")
PY = "/usr/bin/python3"


def run(args, check=True):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"nextn {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def mlx_quantize(src, out, *args):
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([PY, os.path.join(SRC, "tools", "mlx_quantize.py"), src, "--out", out, *args], check=True)
    return out


def random_checkpoint(name, *args):
    out = os.path.join(TMP, f"mlx-src-{name}")
    if not os.path.exists(os.path.join(out, "config.json")):
        subprocess.run([PY, os.path.join(SRC, "tools", "make_checkpoint.py"), "--quiet", "--out", out, *args],
                       check=True)
    return out


def dequantized_checkpoint(mlx_dir, out_dir):
    """The MLX checkpoint's weights as the reference dequantizes them, in an F32 checkpoint."""
    tensors, bits_of = mlx_affine.read_checkpoint(mlx_dir)
    os.makedirs(out_dir, exist_ok=True)
    safetensors_writer.write_tensors(os.path.join(out_dir, "model.safetensors"),
                                     {k: v.astype(np.float32) for k, v in tensors.items()})
    cfg = json.loads(pathlib.Path(mlx_dir, "config.json").read_text())
    cfg.pop("quantization")
    cfg.pop("quantization_config")
    pathlib.Path(out_dir, "config.json").write_text(json.dumps(cfg))
    return out_dir, bits_of


class RandomModelsAgainstReference(unittest.TestCase):
    PROMPT = quantized_check.PROMPT

    def check(self, name, gen_args, quant_args, mtp, expect_bits):
        base = random_checkpoint(name, *gen_args)
        mlx = mlx_quantize(base, os.path.join(TMP, f"mlx-{name}"), *quant_args)
        ref_dir, bits_of = dequantized_checkpoint(mlx, os.path.join(TMP, f"mlx-{name}-ref"))
        self.assertEqual(set(bits_of.values()), expect_bits)
        return quantized_check.check_logits(self, BIN, mlx, ref_dir, os.path.join(TMP, f"mlx-{name}-out"), mtp, name)

    def test_qwen3_4bit_group64_bf16_scales(self):
        self.check("qwen3", ["--arch", "qwen3", "--dtype", "bf16"], ["--bits", "4", "--group", "64"], False, {4})

    def test_llama_8bit_group32_f16_scales(self):
        self.check("llama", ["--arch", "llama", "--rope-scaling", "none"],
                   ["--bits", "8", "--group", "32", "--scale-dtype", "f16"], False, {8})

    def test_mimo_mtp_4bit_group128_with_an_8bit_override(self):
        self.check("mimo", ["--arch", "mimo"],
                   ["--bits", "4", "--group", "128", "--scale-dtype", "f32",
                    "--override", "model.layers.0.mlp.down_proj=8:64"], True, {4, 8})

    def test_broken_unpacking_is_detected(self):
        """The reference's comparison is sharp enough: nextn's logits on a checkpoint whose
        packed words are reversed within each group differ far beyond the bound."""
        base = random_checkpoint("qwen3", "--arch", "qwen3", "--dtype", "bf16")
        mlx = mlx_quantize(base, os.path.join(TMP, "mlx-qwen3-broken"), "--bits", "4", "--group", "64")
        ref_dir, _ = dequantized_checkpoint(mlx, os.path.join(TMP, "mlx-qwen3-broken-ref"))
        path = os.path.join(mlx, "model.safetensors")
        import safetensors_reader
        tensors = safetensors_reader.read_file(path, dtype=None)
        header, _ = safetensors_reader.read_header(path)
        specs = []
        for name in sorted(tensors):
            a = tensors[name]
            if a.dtype == np.uint32:  # nibbles in the wrong order inside every word
                a = np.zeros_like(a) + sum(((a >> np.uint32(4 * k)) & np.uint32(15)) << np.uint32(4 * (7 - k))
                                           for k in range(8))
            specs.append(safetensors_writer.TensorSpec(name, a.shape, header[name]["dtype"], lambda a=a: iter([a])))
        safetensors_writer.write_file(path, specs)
        prefix = os.path.join(TMP, "mlx-qwen3-broken-out")
        run(["debug-logits", "--model", mlx, "--prompt-tokens", ",".join(map(str, self.PROMPT)), "--threads", "2",
             "--out", prefix])
        logits, _ = M.Model(ref_dir).forward(self.PROMPT)
        err = np.max(np.abs(np.load(prefix + ".prefill.npy") - logits)) / np.max(np.abs(logits))
        self.assertGreater(err, 0.2)


class TinyModelMlx(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = mlx_quantize(TINY, os.path.join(TMP, "mlx-tiny-4bit"), "--bits", "4", "--group", "64")

    def test_greedy_mtp_equals_plain_greedy(self):
        prompt = "def parse_args(argv):\n    parser = argparse."
        plain = run(["generate", "--model", self.dir, "--prompt", prompt, "-n", "40", "--ids", "--ignore-eos"]).stdout
        for depth in ("1", "3"):
            mtp = run(["generate", "--model", self.dir, "--prompt", prompt, "-n", "40", "--ids", "--ignore-eos",
                       "--mtp", "--num-mtp-tokens", depth]).stdout
            self.assertEqual(plain.splitlines()[0], mtp.splitlines()[0], f"depth {depth}")

    def test_serves_chat_with_mtp(self):
        quantized_check.check_serves_chat_with_mtp(self, self.dir)


class BadMlxCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = random_checkpoint("qwen3", "--arch", "qwen3", "--dtype", "bf16")
        cls.good = mlx_quantize(base, os.path.join(TMP, "mlx-bad-base"), "--bits", "4", "--group", "64")
        cls.base = base

    def fails(self, model_dir, *needles):
        p = run(["debug-logits", "--model", model_dir, "--prompt-tokens", "1,2,3", "--out",
                 os.path.join(TMP, "mlx-bad-out")], check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, p.stderr)
        for n in needles:
            self.assertIn(n, lines[0])

    def variant(self, name, edit_config=None):
        d = os.path.join(TMP, f"mlx-bad-{name}")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.good, d)
        if edit_config:
            cfg = json.loads(pathlib.Path(d, "config.json").read_text())
            edit_config(cfg)
            pathlib.Path(d, "config.json").write_text(json.dumps(cfg))
        return d

    def test_two_bit_values_are_refused(self):
        d = mlx_quantize(self.base, os.path.join(TMP, "mlx-bad-2bit"), "--bits", "2", "--group", "64")
        self.fails(d, "2-bit", "4- and 8-bit")

    def test_other_modes_are_refused(self):
        d = self.variant("mode", lambda c: c["quantization"].update(mode="mxfp4"))
        self.fails(d, "mxfp4", "affine")

    def test_gptq_config_is_refused(self):
        d = self.variant("gptq", lambda c: c.update(quantization_config={"quant_method": "gptq", "bits": 4}))
        self.fails(d, "quant_method", "gptq")

    def test_config_disagreeing_with_the_shapes(self):
        d = self.variant("disagree", lambda c: c["quantization"].update(bits=8))
        self.fails(d, "4-bit", "bits 8")

    def test_scales_of_the_wrong_shape(self):
        d = self.variant("scales")
        path = os.path.join(d, "model.safetensors")
        import safetensors_reader
        tensors = safetensors_reader.read_file(path, dtype=None)
        header, _ = safetensors_reader.read_header(path)
        victim = "model.layers.0.mlp.up_proj.scales"
        specs = []
        for name in sorted(tensors):
            a = tensors[name]
            if name == victim:
                a = a[:, :-1]
            specs.append(safetensors_writer.TensorSpec(name, a.shape, header[name]["dtype"],
                                                       lambda a=np.ascontiguousarray(a): iter([a])))
        safetensors_writer.write_file(path, specs)
        self.fails(d, victim)


if __name__ == "__main__":
    unittest.main()
