#!/usr/bin/python3
"""tests/model/test_qwen3_5_image_prompt.py — Qwen3.5's language model over a prompt that holds
images: `nextn debug-logits --image` (each image_token_id expanded to the image's merged
grid, those rows replaced by the vision tower's output, M-RoPE positions, decode at
rope_delta) against the float64 references (tests/reference/numpy_vision.py for the tower
on nextn's own pixel_values, tests/reference/numpy_qwen3_5.py for the language model with
the rows in place and M-RoPE), on random checkpoints from
`tools/make_checkpoint.py --arch qwen3_5 --vision-language`.

Relative error max|nextn − ref| / max|ref| ≤ 1e-4 in F32 over every prompt row and 6 decode
steps, identical greedy tokens, at two image sizes (LM grids 3×5 and 4×2), one prompt with
two images, and prefill chunks that end inside an image. The M-RoPE positions equal the
reference's (the worked example of docs/vision-models.md too). Each deliberately broken reference
(text after the image one position late; the h and w axes swapped) must miss by more than
the tolerance and 100× nextn's own error."""
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
import numpy_qwen3_5 as M  # noqa: E402
import numpy_vision as V  # noqa: E402
import safetensors_reader  # noqa: E402
from png_image import png_bytes  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, rel_err  # noqa: E402

TOL = 1e-4
DECODE = 6

# image name: (height, width) → patch grid after smart_resize with min_pixels 1024
# (100×150 → 6×10, LM grid 3×5; 130×70 → 8×4, LM grid 4×2).
IMAGES = {"wide": (100, 150), "tall": (130, 70)}
# case: (images in order, prompt text before / between / after, debug-logits extra args)
CASES = {
    "wide": (["wide"], ["--chunk", "0"]),
    "tall": (["tall"], ["--chunk", "0"]),
    "wide_chunk4": (["wide"], ["--chunk", "4"]),  # chunks end inside the image
    "two_images_chunk7": (["wide", "tall"], ["--chunk", "7"]),
}


class Qwen35ImagePromptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="qwen35-image-", dir=TMP_ROOT)
        tmp = cls.tmp = cls._tmp.name
        cls.ckpt = os.path.join(tmp, "ckpt")
        subprocess.run([PY, GEN, "--arch", "qwen3_5", "--vision-language", "--seed", "5",
                        "--quiet", "--out", cls.ckpt], check=True)
        with open(os.path.join(cls.ckpt, "config.json")) as f:
            cls.config = json.load(f)
        W = safetensors_reader.read_checkpoint(cls.ckpt, np.float64)
        cls.features, cls.grids, cls.paths = {}, {}, {}
        for name, (h, w) in IMAGES.items():
            rng = np.random.default_rng(h * 1000 + w)
            path = cls.paths[name] = os.path.join(tmp, name + ".png")
            with open(path, "wb") as f:
                f.write(png_bytes(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)))
            prefix = os.path.join(tmp, name)
            r = subprocess.run([BIN, "debug-image", "-m", cls.ckpt, path, "--min-pixels", "1024", "--threads", "2",
                                "--out", prefix], capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError(f"{name}: debug-image exited {r.returncode}: {r.stderr}")
            grid = tuple(int(v) for v in np.load(prefix + ".grid_thw.npy"))
            pv = np.load(prefix + ".pixel_values.npy").astype(np.float64)
            cls.features[name] = V.vision_tower(W, cls.config["vision_config"], pv, grid)
            cls.grids[name] = (grid[1] // 2, grid[2] // 2)
        cls._refs = {}
        cls.results = {}
        for case, (images, extra) in CASES.items():
            prompt = cls.prompt(images)
            prefix = os.path.join(tmp, case)
            args = [BIN, "debug-logits", "-m", cls.ckpt, "--prompt-tokens", ",".join(map(str, prompt)),
                    "--decode", str(DECODE), "--image-min-tokens", "1", "--threads", "2", "--out", prefix, *extra]
            for im in images:
                args += ["--image", cls.paths[im]]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError(f"{case}: debug-logits exited {r.returncode}: {r.stderr}")
            cls.results[case] = {k: np.load(f"{prefix}.{k}.npy") for k in ("prefill", "decode", "tokens",
                                                                             "positions")}

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    @classmethod
    def prompt(cls, images):
        c = cls.config
        start, pad, end = c["vision_start_token_id"], c["image_token_id"], c["vision_end_token_id"]
        out = [11, 42, 7]
        for i, _ in enumerate(images):
            out += [start, pad, end, 100 + i, 23]
        return out + [5, 77]

    def reference(self, case, broken=None, model={}):
        """Prefill logits [n, V], decode logits [DECODE, V] (fed nextn's own greedy tokens),
        positions [n, 3] of the reference (with one deliberate bug when `broken`)."""
        if broken not in model:
            model[broken] = M.Model(self.ckpt, broken)
        m = model[broken]
        images, _ = CASES[case]
        pad = self.config["image_token_id"]
        tokens, embeds, places, it = [], {}, [], iter(images)
        for t in self.prompt(images):
            if t != pad:
                tokens.append(t)
                continue
            name = next(it)
            gh, gw = self.grids[name]
            places.append((len(tokens), gh, gw))
            for i, row in enumerate(self.features[name]):
                embeds[len(tokens) + i] = row
            tokens += [pad] * (gh * gw)
        positions, delta = m.mrope_positions(len(tokens), places)
        state = m.new_state()
        prefill, _ = m.step(tokens, state, embeds, positions)
        decode = []
        for t in self.results[case]["tokens"]:
            n = state.length
            logits, _ = m.step([int(t)], state, None, np.array([[n + delta] * 3]))
            decode.append(logits[0])
        return prefill, np.array(decode), positions

    def refs(self, case):
        if case not in self._refs:
            self._refs[case] = self.reference(case)
        return self._refs[case]

    def test_positions(self):
        for case in CASES:
            _, _, positions = self.refs(case)
            np.testing.assert_array_equal(self.results[case]["positions"], positions, case)
        # docs/vision-models.md's worked example: an LM grid of 23×31 at position 10 (after 10 text rows).
        m = M.Model.__new__(M.Model)
        m.broken = None
        pos, delta = m.mrope_positions(10 + 713 + 2, [(10, 23, 31)])
        self.assertEqual(tuple(pos[10]), (10, 10, 10))
        self.assertEqual(tuple(pos[10 + 712]), (10, 32, 40))
        self.assertEqual(tuple(pos[10 + 713]), (41, 41, 41))
        self.assertEqual(delta, 43 - 725)

    def test_logits_match_reference(self):
        for case in CASES:
            prefill, decode, _ = self.refs(case)
            res = self.results[case]
            self.assertEqual(res["prefill"].shape, prefill.shape, case)
            err_p = rel_err(res["prefill"], prefill)
            err_d = rel_err(res["decode"], decode)
            print(f"  {case}: prefill {err_p:.2e}, decode {err_d:.2e}", file=sys.stderr)
            self.assertLessEqual(err_p, TOL, f"{case}: prefill relative error {err_p:.3e}")
            self.assertLessEqual(err_d, TOL, f"{case}: decode relative error {err_d:.3e}")
            # token i is the argmax after the prompt (i = 0) or after decode step i − 1
            greedy = [int(np.argmax(prefill[-1]))] + [int(np.argmax(r)) for r in decode[:-1]]
            self.assertEqual(list(res["tokens"]), greedy, case)

    def test_chunking_does_not_change_logits(self):
        a, b = self.results["wide"]["prefill"], self.results["wide_chunk4"]["prefill"]
        self.assertLessEqual(rel_err(b, a), 1e-5)

    def test_broken_references_miss(self):
        cases = ("wide", "tall")
        own = max(rel_err(self.results[c]["prefill"], self.refs(c)[0]) for c in cases)
        floor = max(TOL, 100 * own)
        for broken in M.BROKEN_MROPE:
            errs = {c: rel_err(self.results[c]["prefill"], self.reference(c, broken)[0]) for c in cases}
            print(f"  {broken}: {errs} (nextn's own {own:.1e})", file=sys.stderr)
            self.assertGreater(max(errs.values()), floor, f"variant {broken} is not detected: {errs}")


if __name__ == "__main__":
    unittest.main()
