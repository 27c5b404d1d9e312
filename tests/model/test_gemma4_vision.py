#!/usr/bin/python3
"""tests/model/test_gemma4_vision.py — nextn's Gemma 4 image processor and vision tower
(src/vision/gemma4_processor.cc, gemma4_vision.cc, through `nextn debug-image --processor
gemma4`) against the float64 numpy reference tests/reference/numpy_gemma4_vision.py,
written from Hugging Face's Gemma4ImageProcessor / Gemma4VisionModel rules, on random
checkpoints from `tools/make_checkpoint.py --arch gemma4 --vision-language` (the real
tensor names at a tiny size: depth 2, width 32, 2 heads of 16, a 64-row position table).

- target sizes over a table of awkward sizes and aspect ratios, the th = 0 / tw = 0
  branches and docs/vision-models.md's worked examples;
- the resized pixels equal PIL's bicubic rules bit for bit; pixel_values equal x/255 in
  raster patch order with (py, px, ch) rows, to float32 rounding (checked element by
  element on an image that needs no resize as well);
- the tower's output at two non-square grids (9×12 and 18×6 patches) within 1e-4 relative
  error (max|nextn − ref| / max|ref|; float32 accumulation over 2 layers of width 32 stays
  near 1e-6), for a plain tower and one with clipped linears and standardize; the
  reference pads to the budget's max_patches the way Hugging Face does, so this also shows
  that not padding changes nothing;
- every deliberately wrong reference (x and y swapped, pooled rows transposed, Qwen's RoPE
  pairing, clamps ignored on the clipped tower) misses by more than the tolerance and 100×
  nextn's own error;
- a text-only Gemma 4 checkpoint exits 2 naming the problem."""
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
import numpy_gemma4_vision as G  # noqa: E402
import numpy_vision as V  # noqa: E402
import safetensors_reader  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, rel_err  # noqa: E402
from png_image import png_bytes  # noqa: E402

TOL = 1e-4
BUDGET = 16  # the tiny checkpoints' processor_config.json max_soft_tokens

# (height, width, budget): awkward sizes, extreme aspect ratios, both zero-side branches.
SIZES = [(750, 1000, 280), (100, 100, 280), (512, 512, 280), (1080, 1920, 280), (750, 1000, 1120),
         (1, 1, 280), (7, 7, 70), (37, 1001, 280), (999, 17, 140), (480, 640, 560), (333, 334, 280),
         (47, 49, 16), (10, 170, 16), (170, 10, 16), (10, 200, 16), (2, 700, 280), (3, 700, 280),
         (700, 3, 280), (2, 700, 280), (700, 2, 280), (4000, 3, 1120), (96, 144, 6), (1, 5000, 70), (5000, 1, 70)]

# tower cases: (checkpoint options, image height, width) → grids 9×12 (100×150) and 18×6 (150×60)
CKPTS = {"plain": ["--seed", "1"], "clipped_std": ["--seed", "2", "--vision-clipped", "--vision-standardize"]}
IMAGES = {"wide": (100, 150), "tall": (150, 60)}


def run(args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exited {r.returncode}: {r.stderr}")
    return r.stdout


class Gemma4VisionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="gemma4-vision-", dir=TMP_ROOT)
        tmp = cls.tmp = cls._tmp.name
        cls.paths, cls.images = {}, {}
        for name, (h, w) in IMAGES.items():
            img = np.random.default_rng(h * 7 + w).integers(0, 256, (h, w, 3), dtype=np.uint8)
            cls.images[name] = img
            cls.paths[name] = os.path.join(tmp, name + ".png")
            with open(cls.paths[name], "wb") as f:
                f.write(png_bytes(img))
        cls.models, cls.results = {}, {}
        for ck, opts in CKPTS.items():
            out = os.path.join(tmp, ck)
            subprocess.run([PY, GEN, "--arch", "gemma4", "--vision-language", "--dtype", "f32", *opts,
                            "--quiet", "--out", out], check=True)
            with open(os.path.join(out, "config.json")) as f:
                vcfg = json.load(f)["vision_config"]
            cls.models[ck] = (out, safetensors_reader.read_checkpoint(out, np.float64), vcfg)
            for name in IMAGES:
                prefix = os.path.join(tmp, f"{ck}_{name}")
                run(["debug-image", "--processor", "gemma4", "-m", out, cls.paths[name], "--threads", "2",
                     "--out", prefix])
                cls.results[(ck, name)] = {k: np.load(f"{prefix}.{k}.npy") for k in
                                           ("resized", "pixel_values", "grid_thw", "vision")}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_target_sizes(self):
        for h, w, budget in SIZES:
            out = run(["debug-image", "--processor", "gemma4", "--max-soft-tokens", str(budget),
                       "--smart-resize", f"{h}x{w}"])
            self.assertEqual(tuple(int(v) for v in out.split()), G.target_size(h, w, budget), (h, w, budget))
        # docs/vision-models.md's worked examples, and the zero-side branch's two arms
        self.assertEqual(G.target_size(750, 1000, 280), (672, 912))
        self.assertEqual(G.target_size(100, 100, 280), (768, 768))
        self.assertEqual(G.target_size(1080, 1920, 280), (576, 1056))
        self.assertEqual(G.target_size(750, 1000, 1120), (1344, 1824))
        # A zero side happens when short/long < 1/budget, so ⌊long/short⌋·48 always reaches
        # the cap budget·48; just above that ratio the floor formula still gives 48.
        self.assertEqual(G.target_size(10, 200, 16), (48, 768))
        self.assertEqual(G.target_size(2, 700, 280), (48, 13440))
        self.assertEqual(G.target_size(700, 2, 280), (13440, 48))
        self.assertEqual(G.target_size(3, 700, 280), (48, 12240))

    def test_pixels_and_patch_order(self):
        for name, img in self.images.items():
            res = self.results[("plain", name)]
            th, tw = G.target_size(img.shape[0], img.shape[1], BUDGET)
            np.testing.assert_array_equal(res["resized"], V.pil_bicubic(img, tw, th), name)
            pv, _, grid = G.patchify(res["resized"])
            self.assertEqual(tuple(res["grid_thw"]), (1, *grid), name)
            np.testing.assert_allclose(res["pixel_values"], pv, rtol=0, atol=1e-7, err_msg=name)
        self.assertEqual(tuple(self.results[("plain", "wide")]["grid_thw"]), (1, 9, 12))
        self.assertEqual(tuple(self.results[("plain", "tall")]["grid_thw"]), (1, 18, 6))
        # An image already at its target size (96×144 at budget 6) is not resized; row
        # r·gw + c, element (py·16 + px)·3 + ch is pixel (16r + py, 16c + px), channel ch.
        img = np.random.default_rng(9).integers(0, 256, (96, 144, 3), dtype=np.uint8)
        path, prefix = os.path.join(self.tmp, "exact.png"), os.path.join(self.tmp, "exact")
        with open(path, "wb") as f:
            f.write(png_bytes(img))
        run(["debug-image", "--processor", "gemma4", "--max-soft-tokens", "6", path, "--out", prefix])
        pv = np.load(prefix + ".pixel_values.npy")
        np.testing.assert_array_equal(np.load(prefix + ".resized.npy"), img)
        self.assertEqual(pv.shape, (6 * 9, 768))
        for r, c, py, px, ch in [(0, 0, 0, 0, 0), (0, 0, 0, 1, 0), (0, 0, 1, 0, 2), (1, 2, 5, 7, 1), (5, 8, 15, 15, 2)]:
            self.assertAlmostEqual(float(pv[r * 9 + c, (py * 16 + px) * 3 + ch]),
                                   img[16 * r + py, 16 * c + px, ch] / 255.0, places=6)

    def reference(self, ck, name, variant=None):
        _, W, vcfg = self.models[ck]
        res = self.results[(ck, name)]
        grid = tuple(int(v) for v in res["grid_thw"][1:])
        pv, pos, _ = G.patchify(res["resized"])
        return G.tower(W, vcfg, pv, pos, grid, pad_to=BUDGET * 9, variant=variant)

    def test_tower_matches_reference(self):
        for (ck, name), res in self.results.items():
            ref = self.reference(ck, name)
            self.assertEqual(res["vision"].shape, ref.shape, (ck, name))
            self.assertEqual(ref.shape[1], 64)  # the text model's hidden size
            err = rel_err(res["vision"], ref)
            print(f"  {ck}/{name}: relative error {err:.2e}", file=sys.stderr)
            self.assertLessEqual(err, TOL, f"{ck}/{name}: relative error {err:.3e}")

    def test_broken_references_miss(self):
        for variant in G.BROKEN_TOWER:
            cks = ("clipped_std",) if variant == "no_clamps" else tuple(CKPTS)
            keys = [(ck, name) for ck in cks for name in IMAGES]
            own = max(rel_err(self.results[k]["vision"], self.reference(*k)) for k in keys)
            errs = {k: rel_err(self.results[k]["vision"], self.reference(*k, variant)) for k in keys}
            print(f"  {variant}: {max(errs.values()):.2e} (nextn's own {own:.1e})", file=sys.stderr)
            self.assertGreater(max(errs.values()), max(TOL, 100 * own), f"variant {variant} is not detected: {errs}")

    def test_text_only_checkpoint_is_refused(self):
        out = os.path.join(self.tmp, "text_only")
        subprocess.run([PY, GEN, "--arch", "gemma4", "--quiet", "--out", out], check=True)
        r = subprocess.run([BIN, "debug-image", "--processor", "gemma4", "-m", out, self.paths["wide"],
                            "--out", os.path.join(self.tmp, "x")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no vision_config", r.stderr)


if __name__ == "__main__":
    unittest.main()
