#!/usr/bin/python3
"""tests/model/test_vision_processor.py — nextn's Qwen3.5 image processor
(src/vision/qwen_processor.cc, through `nextn debug-image`) against the numpy reference
tests/reference/numpy_vision.py, written from Hugging Face's Qwen2VLImageProcessor rules.

- smart_resize targets for a table of awkward sizes (half-way rounding, the min- and
  max-pixel branches, aspect ratios near 200:1) and the worked examples of docs/vision-models.md;
- PNGs written here with zlib + struct: the decoded pixels equal what was written, the
  bicubic resize equals PIL's rules bit for bit (upscale, downscale, one axis only), the
  normalized patches in merge-window order equal the reference to float32 rounding, the
  grid (t, h, w) matches;
- every deliberately wrong reference variant (CLIP mean/std, transposed merge window,
  raster rows, channel-last rows, C's round-half-up, no antialias) misses nextn;
- images the processor refuses (a side under 10, over 200:1) exit 2 with a message.
When PIL is importable its Image.resize(BICUBIC) is checked against the reference too."""
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
import numpy_vision as V  # noqa: E402
from png_image import png_bytes  # noqa: E402

BIN = os.environ.get("NEXTN_BIN")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()


def test_image(h, w, seed):
    """Smooth structure plus noise: neither constant (hides resampling) nor pure noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 7 + y * 3) % 256, (x * y) % 256, (255 - x * 5 + y * 11) % 256], axis=-1)
    return np.clip(base + rng.integers(-20, 21, (h, w, 3)), 0, 255).astype(np.uint8)


# (height, width, extra flags): the resize kinds the reference distinguishes.
IMAGES = {
    "upscale_min_pixels": (60, 100, []),                               # -> 192x320 (min-pixel branch)
    "downscale_max_pixels": (300, 200, ["--min-pixels", "1024", "--max-pixels", "20000"]),     # shrink: antialiased kernel
    "height_only": (45, 64, ["--min-pixels", "1024"]),                 # width kept: one pass
    "tall_thin": (413, 37, ["--min-pixels", "1024", "--max-pixels", "40000"]),
    "half_way_rounding": (80, 112, ["--min-pixels", "1024"]),           # 80/32 = 2.5 -> 64, 112/32 = 3.5 -> 128
}

# (height, width, min_pixels, max_pixels)
SIZES = [(h, w, 65536, 16777216) for h, w in [
    (100, 100), (80, 400), (750, 1000), (1080, 1920), (4000, 6000), (10, 10), (10, 2000), (2000, 10),
    (48, 48), (80, 80), (112, 112), (16, 16 * 199), (11, 2199), (333, 777), (1023, 1025), (4096, 4096),
    (4097, 4095), (12345, 321)]] + [
    (80, 48, 1024, 16777216), (80, 112, 1024, 16777216), (48, 80, 1024, 16777216), (144, 208, 1024, 16777216),
    (999, 999, 1024, 50000), (5000, 40, 1024, 100000), (64, 64, 4096, 4096), (17, 3333, 1024, 1 << 20)]

# docs/vision-models.md's worked examples: (w, h) -> (w̄, h̄)
DOC_EXAMPLES = {(100, 100): (256, 256), (400, 80): (576, 128), (1000, 750): (992, 736),
                (1920, 1080): (1920, 1088), (6000, 4000): (4992, 3328)}


class VisionProcessorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="vision-processor-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        cls.outputs = {}
        for name, (h, w, flags) in IMAGES.items():
            img = test_image(h, w, len(cls.outputs))
            path = os.path.join(cls.tmp, name + ".png")
            with open(path, "wb") as f:
                f.write(png_bytes(img))
            prefix = os.path.join(cls.tmp, name)
            r = subprocess.run([BIN, "debug-image", "--processor", "qwen3_5", path, "--out", prefix] + flags,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError(f"{name}: debug-image exited {r.returncode}: {r.stderr}")
            cfg = dict(V.QWEN35)
            for flag, key in (("--min-pixels", "min_pixels"), ("--max-pixels", "max_pixels")):
                if flag in flags:
                    cfg[key] = int(flags[flags.index(flag) + 1])
            cls.outputs[name] = {"img": img, "cfg": cfg,
                                 **{k: np.load(f"{prefix}.{k}.npy") for k in
                                    ("decoded", "resized", "pixel_values", "grid_thw")}}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def smart_resize(self, sizes):
        out = []
        for h, w, lo, hi in sizes:
            r = subprocess.run([BIN, "debug-image", "--smart-resize", f"{h}x{w}", "--min-pixels", str(lo),
                                "--max-pixels", str(hi)], capture_output=True, text=True, check=True)
            out.append(tuple(int(v) for v in r.stdout.split()))
        return out

    def test_smart_resize_table(self):
        got = self.smart_resize(SIZES)
        for (h, w, lo, hi), g in zip(SIZES, got):
            want = V.smart_resize(h, w, 32, lo, hi)
            self.assertEqual(g, want, f"{h}x{w} min {lo} max {hi}")
            self.assertEqual((g[0] % 32, g[1] % 32), (0, 0))
        # The table reaches every branch, and C's round-half-up differs from it somewhere.
        self.assertTrue(any(V.smart_resize(h, w, 32, lo, hi, V.round_half_up) != g
                            for (h, w, lo, hi), g in zip(SIZES, got)))

    def test_doc_examples(self):
        sizes = [(h, w, 65536, 16777216) for (w, h) in DOC_EXAMPLES]
        for (w, h), got in zip(DOC_EXAMPLES, self.smart_resize(sizes)):
            self.assertEqual((got[1], got[0]), DOC_EXAMPLES[(w, h)], f"{w}x{h}")

    def test_decoded_pixels(self):
        for name, o in self.outputs.items():
            np.testing.assert_array_equal(o["decoded"], o["img"], err_msg=name)

    def test_resize_is_pils_bicubic(self):
        for name, o in self.outputs.items():
            h, w = V.smart_resize(*o["img"].shape[:2], 32, o["cfg"]["min_pixels"], o["cfg"]["max_pixels"])
            self.assertEqual(o["resized"].shape, (h, w, 3), name)
            ref = V.pil_bicubic(o["img"], w, h)
            diff = np.abs(o["resized"].astype(int) - ref.astype(int)).max()
            self.assertEqual(diff, 0, f"{name}: resized differs from PIL's bicubic by up to {diff}")

    def test_reference_resize_matches_pil_when_available(self):
        try:
            from PIL import Image
        except ImportError:
            raise unittest.SkipTest("PIL is not installed (optional cross-check of the reference)")
        for name, o in self.outputs.items():
            h, w = o["resized"].shape[:2]
            pil = np.asarray(Image.fromarray(o["img"]).resize((w, h), Image.BICUBIC))
            np.testing.assert_array_equal(V.pil_bicubic(o["img"], w, h), pil, err_msg=name)

    def test_pixel_values_and_grid(self):
        for name, o in self.outputs.items():
            pv, grid, _ = V.process(o["img"], o["cfg"])
            self.assertEqual(tuple(o["grid_thw"]), grid, name)
            self.assertEqual(o["pixel_values"].shape, pv.shape, name)
            self.assertEqual(o["pixel_values"].dtype, np.float32)
            err = np.abs(o["pixel_values"] - pv).max()
            self.assertLessEqual(err, 1e-6, f"{name}: pixel_values differ by {err}")
            self.assertEqual(pv.shape[0] // 4, (grid[1] // 2) * (grid[2] // 2))

    def test_patch_order_from_patch_index(self):
        # Each 16x16 patch of a 64x64 image holds its raster index: row r of pixel_values
        # must come from patch 0,1,4,5, 2,3,6,7, 8,9,12,13, 10,11,14,15 (docs/vision-models.md).
        img = np.zeros((64, 64, 3), dtype=np.uint8)
        for pr in range(4):
            for pc in range(4):
                img[pr * 16:(pr + 1) * 16, pc * 16:(pc + 1) * 16] = (pr * 4 + pc) * 10
        path = os.path.join(self.tmp, "patch_index.png")
        with open(path, "wb") as f:
            f.write(png_bytes(img))
        prefix = os.path.join(self.tmp, "patch_index")
        # 64x64 = 4096 pixels: keep it (no resize) by lowering min_pixels.
        subprocess.run([BIN, "debug-image", path, "--out", prefix, "--min-pixels", "1024"], check=True,
                       capture_output=True)
        pv = np.load(prefix + ".pixel_values.npy")
        order = [int(round((row[0] + 1) * 127.5)) // 10 for row in pv]
        self.assertEqual(order, [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15])
        self.assertTrue(np.all(pv == pv[:, :1]))  # every value of a row: its patch's one value

    def test_broken_variants_are_detected(self):
        o = self.outputs["upscale_min_pixels"]
        o2 = self.outputs["downscale_max_pixels"]
        for variant in V.BROKEN:
            misses = []
            for name, out in (("upscale_min_pixels", o), ("downscale_max_pixels", o2), ("half_way_rounding",
                                                                                      self.outputs["half_way_rounding"])):
                pv, grid, _ = V.process(out["img"], out["cfg"], variant)
                misses.append(pv.shape != out["pixel_values"].shape or
                              np.abs(out["pixel_values"] - pv).max() > 1e-3)
            self.assertTrue(any(misses), f"variant {variant} is not detected")

    def test_refused_sizes_exit_2(self):
        for h, w, fragment in [(5, 100, "at least 10"), (10, 2100, "200:1")]:
            path = os.path.join(self.tmp, f"bad{h}x{w}.png")
            with open(path, "wb") as f:
                f.write(png_bytes(test_image(h, w, 0)))
            r = subprocess.run([BIN, "debug-image", path, "--out", os.path.join(self.tmp, "bad")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(fragment, r.stderr)


if __name__ == "__main__":
    unittest.main()
