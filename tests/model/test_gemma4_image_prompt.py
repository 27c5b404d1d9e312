#!/usr/bin/python3
"""tests/model/test_gemma4_image_prompt.py — Gemma 4's language model over a prompt that holds
an image: `nextn debug-logits --image` (each image_token_id expanded to <|image>
<|image|>×N <image|>, the soft-token rows replaced by the vision tower's output without
the √H text scale, per-layer embeddings from pad_token_id there, 1-D positions) against
the float64 references (tests/reference/numpy_gemma4_vision.py for the tower,
tests/reference/numpy_gemma4.py for the language model with the rows in place), on random
checkpoints from `tools/make_checkpoint.py --arch gemma4 --vision-language` (7 layers
S,S,S,F,S,S,F, sliding window 8, per-layer embeddings; images of 12 soft tokens, longer
than the window).

Two attention rules: the E2B/E4B form (use_bidirectional_attention null: causal
everywhere) and the 26B/31B form ("vision": in sliding layers an image's tokens see each
other, the window still bounding the past; full layers causal). Relative error
max|nextn − ref| / max|ref| ≤ 1e-4 in F32 over every prompt row and 4 decode steps,
identical greedy tokens; two images in one prompt; an image across the ring-sized pieces
a forward call is cut into (kept whole); prefill chunks ending inside an image change
nothing on the causal model and are refused on the "vision" one, as is an image longer
than one piece. Each deliberately
broken reference (√H on image rows, per-layer embeddings of the image token, the image
block on full layers too, a "vision" model run causally, a causal model run
bidirectionally) misses by more than the tolerance and 100× nextn's own error."""
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
import numpy_gemma4 as M  # noqa: E402
import numpy_gemma4_vision as G  # noqa: E402
import safetensors_reader  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, rel_err  # noqa: E402
from png_image import png_bytes  # noqa: E402

TOL = 1e-4
DECODE = 4
BUDGET = 16

# 100×150 → 144×192 → 9×12 patches → 3×4 = 12 tokens; 150×60 → 288×96 → 18×6 → 6×2 = 12.
IMAGES = {"wide": (100, 150), "tall": (150, 60)}
CKPTS = {"causal": ["--seed", "3"], "vision": ["--seed", "4", "--bidirectional-vision", "--vision-clipped"]}
# case: (checkpoint, images, debug-logits extra args)
CASES = {
    "causal_wide": ("causal", ["wide"], []),
    "causal_two": ("causal", ["wide", "tall"], []),
    "causal_wide_chunk5": ("causal", ["wide"], ["--chunk", "5"]),
    "vision_wide": ("vision", ["wide"], []),
    "vision_two": ("vision", ["tall", "wide"], []),
    # 24 more text rows first: the image spans rows 28..39, across the 32-row pieces a
    # forward call is cut into for the window's ring; the piece ends before the image.
    "vision_piece": ("vision", ["wide"], []),
}
LONG_PREFIX = list(range(120, 144))


class Gemma4ImagePromptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="gemma4-image-", dir=TMP_ROOT)
        tmp = cls.tmp = cls._tmp.name
        cls.paths = {}
        for name, (h, w) in IMAGES.items():
            rng = np.random.default_rng(h * 1000 + w)
            cls.paths[name] = os.path.join(tmp, name + ".png")
            with open(cls.paths[name], "wb") as f:
                f.write(png_bytes(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)))
        cls.ckpts, cls.configs, cls.features = {}, {}, {}
        for ck, opts in CKPTS.items():
            out = cls.ckpts[ck] = os.path.join(tmp, ck)
            subprocess.run([PY, GEN, "--arch", "gemma4", "--vision-language", "--dtype", "f32", *opts,
                            "--quiet", "--out", out], check=True)
            with open(os.path.join(out, "config.json")) as f:
                cls.configs[ck] = json.load(f)
            W = safetensors_reader.read_checkpoint(out, np.float64)
            for name in IMAGES:
                prefix = os.path.join(tmp, f"{ck}_{name}")
                r = subprocess.run([BIN, "debug-image", "--processor", "gemma4", "-m", out, cls.paths[name],
                                    "--threads", "2", "--out", prefix], capture_output=True, text=True)
                if r.returncode != 0:
                    raise AssertionError(f"{ck}/{name}: debug-image exited {r.returncode}: {r.stderr}")
                resized = np.load(prefix + ".resized.npy")
                pv, pos, grid = G.patchify(resized)
                cls.features[(ck, name)] = G.tower(W, cls.configs[ck]["vision_config"], pv, pos, grid)
        cls.results, cls._refs = {}, {}
        for case, (ck, images, extra) in CASES.items():
            r = cls.debug_logits(case, ck, images, extra)
            if r.returncode != 0:
                raise AssertionError(f"{case}: debug-logits exited {r.returncode}: {r.stderr}")
            prefix = os.path.join(tmp, case)
            cls.results[case] = {k: np.load(f"{prefix}.{k}.npy") for k in ("prefill", "decode", "tokens")}

    @classmethod
    def debug_logits(cls, case, ck, images, extra):
        args = [BIN, "debug-logits", "-m", cls.ckpts[ck], "--prompt-tokens", ",".join(map(str, cls.prompt(ck, images, case))),
                "--decode", str(DECODE), "--threads", "2", "--out", os.path.join(cls.tmp, case), *extra]
        for im in images:
            args += ["--image", cls.paths[im]]
        return subprocess.run(args, capture_output=True, text=True)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    @classmethod
    def prompt(cls, ck, images, case=None):
        out = [11, 42, 7] + (LONG_PREFIX if case == "vision_piece" else [])
        for i, _ in enumerate(images):
            out += [cls.configs[ck]["image_token_id"], 100 + i, 23]
        return out + [5, 77]

    def reference(self, case, broken=None, models={}):
        """Prefill logits [n, V] and decode logits [DECODE, V] (fed nextn's own greedy tokens)."""
        ck, images, _ = CASES[case]
        key = (ck, broken)
        if key not in models:
            models[key] = M.Model(self.ckpts[ck], broken)
        m = models[key]
        c = self.configs[ck]
        tokens, places, it = [], [], iter(images)
        for t in self.prompt(ck, images, case):
            if t != c["image_token_id"]:
                tokens.append(t)
                continue
            feats = self.features[(ck, next(it))]
            tokens.append(c["boi_token_id"])
            places.append((len(tokens), feats))
            tokens += [c["image_token_id"]] * len(feats)
            tokens.append(c["eoi_token_id"])
        state = m.new_state()
        prefill, _ = m.step(tokens, state, places)
        decode = [m.step([int(t)], state)[0][0] for t in self.results[case]["tokens"]]
        return prefill, np.array(decode)

    def refs(self, case):
        if case not in self._refs:
            self._refs[case] = self.reference(case)
        return self._refs[case]

    def test_logits_match_reference(self):
        for case in CASES:
            prefill, decode = self.refs(case)
            res = self.results[case]
            self.assertEqual(res["prefill"].shape, prefill.shape, case)
            err_p, err_d = rel_err(res["prefill"], prefill), rel_err(res["decode"], decode)
            print(f"  {case}: prefill {err_p:.2e}, decode {err_d:.2e}", file=sys.stderr)
            self.assertLessEqual(err_p, TOL, f"{case}: prefill relative error {err_p:.3e}")
            self.assertLessEqual(err_d, TOL, f"{case}: decode relative error {err_d:.3e}")
            greedy = [int(np.argmax(prefill[-1]))] + [int(np.argmax(r)) for r in decode[:-1]]
            self.assertEqual(list(res["tokens"]), greedy, case)

    def test_chunking(self):
        a, b = self.results["causal_wide"]["prefill"], self.results["causal_wide_chunk5"]["prefill"]
        self.assertLessEqual(rel_err(b, a), 1e-5)
        r = self.debug_logits("vision_chunk5", "vision", ["wide"], ["--chunk", "5"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("splits image", r.stderr)

    def test_image_longer_than_a_forward_piece_is_refused(self):
        # budget 40: 100×150 → 240×336 → 5×7 = 35 tokens, more than the 32 rows the window-8
        # ring takes in one forward call
        r = self.debug_logits("vision_big", "vision", ["wide"], ["--image-max-tokens", "40"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("image of 35 tokens is longer than the 32 rows", r.stderr)

    def test_broken_references_miss(self):
        variants = {"causal": ("image_sqrt_h", "image_ple_token", "image_bidir_on_causal"),
                    "vision": ("image_sqrt_h", "image_bidir_global", "image_causal")}
        for ck, names in variants.items():
            cases = [c for c, (k, _, _) in CASES.items() if k == ck and not c.endswith("chunk5")]
            own = max(rel_err(self.results[c]["prefill"], self.refs(c)[0]) for c in cases)
            for broken in names:
                errs = {c: rel_err(self.results[c]["prefill"], self.reference(c, broken)[0]) for c in cases}
                print(f"  {ck}/{broken}: {max(errs.values()):.2e} (nextn's own {own:.1e})", file=sys.stderr)
                self.assertGreater(max(errs.values()), max(TOL, 100 * own), f"{ck}: {broken} is not detected: {errs}")


if __name__ == "__main__":
    unittest.main()
