#!/usr/bin/python3
"""tests/model/test_vision_encoder.py — nextn's Qwen3.5 vision tower (src/vision/qwen_vision.cc,
through `nextn debug-image --model`) against the float64 numpy tower of
tests/reference/numpy_vision.py, on random checkpoints from
`tools/make_checkpoint.py --arch qwen3_5 --vision-language` (the real tensor names and
layouts at a tiny size: depth 2, width 32, 2 heads of 16, a 4×4 position table).

The reference takes nextn's own pixel_values (the processor is test_vision_processor.py's
subject), so this compares the tower alone: relative error max|nextn − ref| / max|ref|
<= 1e-4 in F32 (2e-2 for a BF16 checkpoint), on non-square grids whose size differs from the table's (6×10, 8×4, and
18×20, whose 360 patches take attention's query blocks twice) and on a grid equal to it (4×4). Every deliberately wrong reference (row/column swapped in
RoPE, half-pixel table sampling, raster positions, a causal mask, the tanh GELU in the
merger) must miss by more than the tolerance and 100× nextn's own error. A text-only checkpoint exits 2 naming the problem."""
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
import numpy_vision as V  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, rel_err  # noqa: E402
from png_image import png_bytes  # noqa: E402
import safetensors_reader  # noqa: E402

TOL = 1e-4

# name: (checkpoint seed, image height, width): grids (h/16, w/16) after smart_resize with
# min_pixels 1024 (96×160 → 6×10, 128×64 → 8×4, 64×64 → 4×4, 288×320 → 18×20).
CASES = {"grid6x10": (1, 100, 150), "grid8x4": (2, 130, 70), "grid4x4_table": (1, 64, 64),
         "grid18x20": (3, 288, 320),  # 360 patches: attention takes two blocks of queries
         "grid6x10_bf16": (-4, 100, 150)}  # a negative seed: a BF16 checkpoint (seed 4)
BF16_TOL = 2e-2  # where the matmul rounds activations to bf16 (AVX3_ZEN4), as llama.cpp does


class VisionEncoderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="vision-encoder-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        cls.models, cls.results = {}, {}
        for name, (seed, h, w) in CASES.items():
            ckpt = cls.checkpoint(seed)
            rng = np.random.default_rng(abs(seed) * 100 + h)
            img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            path = os.path.join(cls.tmp, name + ".png")
            with open(path, "wb") as f:
                f.write(png_bytes(img))
            prefix = os.path.join(cls.tmp, name)
            r = subprocess.run([BIN, "debug-image", "-m", ckpt, path, "--min-pixels", "1024", "--threads", "2",
                                "--out", prefix], capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError(f"{name}: debug-image exited {r.returncode}: {r.stderr}")
            cls.results[name] = {"ckpt": ckpt, **{k: np.load(f"{prefix}.{k}.npy") for k in
                                                  ("pixel_values", "grid_thw", "vision")}}

    @classmethod
    def checkpoint(cls, seed):
        if seed not in cls.models:
            out = os.path.join(cls.tmp, f"ckpt{seed}")
            dtype = ["--dtype", "bf16"] if seed < 0 else []
            subprocess.run([PY, GEN, "--arch", "qwen3_5", "--vision-language", "--seed",
                            str(abs(seed)), *dtype, "--quiet", "--out", out], check=True)
            import json
            with open(os.path.join(out, "config.json")) as f:
                vcfg = json.load(f)["vision_config"]
            cls.models[seed] = (out, safetensors_reader.read_checkpoint(out, np.float64), vcfg)
        return cls.models[seed][0]

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def reference(self, name, variant=None):
        res = self.results[name]
        _, W, vcfg = next(m for m in self.models.values() if m[0] == res["ckpt"])
        grid = tuple(int(v) for v in res["grid_thw"])
        return V.vision_tower(W, vcfg, res["pixel_values"].astype(np.float64), grid, variant)

    def test_grids(self):
        self.assertEqual(tuple(self.results["grid6x10"]["grid_thw"]), (1, 6, 10))
        self.assertEqual(tuple(self.results["grid8x4"]["grid_thw"]), (1, 8, 4))
        self.assertEqual(tuple(self.results["grid4x4_table"]["grid_thw"]), (1, 4, 4))
        self.assertEqual(tuple(self.results["grid18x20"]["grid_thw"]), (1, 18, 20))

    def test_tower_matches_reference(self):
        for name, res in self.results.items():
            ref = self.reference(name)
            self.assertEqual(res["vision"].shape, ref.shape, name)
            self.assertEqual(ref.shape[1], 64)  # the text model's hidden size
            err = rel_err(res["vision"], ref)
            print(f"  {name}: relative error {err:.2e}", file=sys.stderr)
            self.assertLessEqual(err, BF16_TOL if name.endswith("_bf16") else TOL, f"{name}: relative error {err:.3e}")

    def test_broken_references_miss(self):
        for variant in V.TOWER_BROKEN:
            # The 4×4 grid equals the table (interpolation is the identity there), so the
            # non-square grids carry the position variants.
            # The merger's two GELU forms differ by < 5e-4 anywhere, so that variant only
            # stands out against nextn's actual error: every variant must exceed both the
            # tolerance and 100× what nextn misses the correct reference by.
            names = ("grid6x10", "grid8x4")
            errs = {name: rel_err(self.results[name]["vision"], self.reference(name, variant)) for name in names}
            floor = max(TOL, 100 * max(rel_err(self.results[n]["vision"], self.reference(n)) for n in names))
            self.assertGreater(max(errs.values()), floor, f"variant {variant} is not detected: {errs}")

    def test_text_only_checkpoint_is_refused(self):
        out = os.path.join(self.tmp, "text_only")
        subprocess.run([PY, GEN, "--arch", "qwen3_5", "--quiet", "--out", out], check=True)
        r = subprocess.run([BIN, "debug-image", "-m", out, os.path.join(self.tmp, "grid4x4_table.png"),
                            "--out", os.path.join(self.tmp, "x")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no vision_config", r.stderr)


if __name__ == "__main__":
    unittest.main()
