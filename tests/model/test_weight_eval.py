#!/usr/bin/python3
"""tests/model/test_weight_eval.py — `nextn weight-eval` reports what its header says.

Its KL(reference ‖ candidate), perplexity and top-1 agreement on a text are recomputed
in float64 numpy from the logits `nextn debug-logits` writes for the same token ids
(same chunking, F32 KV: the same arithmetic), for the tiny model against its Q8_0 and
Q4_0 GGUFs; the reference against itself gives KL 0 and 100 % agreement; Q8_0 sits
closer to the reference than Q4_0; a candidate with another vocabulary exits 2.
"""
import json
import os
import pathlib
import subprocess
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or str(pathlib.Path(__file__).resolve().parents[2])
BIN = os.environ.get("NEXTN_BIN", os.path.join(SRC, "build", "nextn"))
TMP = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
TINY = os.path.join(SRC, "models", "nextn-tiny")


def run(args, check=True):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"nextn {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


class WeightEval(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = os.path.join(TMP, "weight-eval.txt")
        prose = pathlib.Path(SRC, "data", "bench", "prose.txt").read_text()[:1500]
        pathlib.Path(cls.text).write_text(prose)
        cls.files = {}
        for t in ("q8_0", "q4_0"):
            cls.files[t] = os.path.join(TMP, f"weight-eval-{t}.gguf")
            run(["quantize", TINY, "--type", t, "--out", cls.files[t], "--no-progress"])
        cls.json = os.path.join(TMP, "weight-eval.json")
        run(["weight-eval", "-m", TINY, cls.files["q8_0"], cls.files["q4_0"], "--text", cls.text, "--ctx", "200",
             "--chunk", "64", "--threads", "2", "--json", cls.json])
        cls.report = {r["model"]: r for r in json.loads(pathlib.Path(cls.json).read_text())}
        ids = run(["tokenize", "--model", TINY, "--ids", "--no-special", prose]).stdout.split()
        cls.tokens = [int(i) for i in ids][:200]

    def logits(self, model, name):
        prefix = os.path.join(TMP, f"weight-eval-{name}")
        run(["debug-logits", "--model", model, "--prompt-tokens", ",".join(map(str, self.tokens)), "--chunk", "64",
             "--kv-type", "f32", "--threads", "2", "--out", prefix])
        return np.load(prefix + ".prefill.npy")

    def test_figures_match_numpy_on_the_same_logits(self):
        ref = self.logits(TINY, "ref")
        lp_ref = log_softmax(ref)
        nxt = np.array(self.tokens[1:])
        for t, path in self.files.items():
            with self.subTest(type=t):
                got = self.report[path]
                self.assertEqual(got["tokens"], len(self.tokens))
                lp = log_softmax(self.logits(path, t))
                kl = (np.exp(lp_ref) * (lp_ref - lp)).sum(axis=-1).clip(min=0).mean()
                ppl = np.exp(-lp[np.arange(len(nxt)), nxt].mean())
                top1 = (lp.argmax(-1) == lp_ref.argmax(-1)).mean()
                self.assertAlmostEqual(got["mean_kl"], kl, delta=1e-6 + 1e-4 * kl)
                self.assertAlmostEqual(got["ppl"], ppl, delta=1e-5 * ppl)
                self.assertAlmostEqual(got["top1_agree"], top1, delta=1e-9)
                self.assertGreater(kl, 0)
        ref_row = self.report[TINY + " (reference)"]
        self.assertEqual(ref_row["mean_kl"], 0)
        self.assertEqual(ref_row["top1_agree"], 1)
        self.assertAlmostEqual(ref_row["ppl"], np.exp(-lp_ref[np.arange(len(nxt)), nxt].mean()), delta=1e-5 * 50)

    def test_more_bits_stay_closer(self):
        self.assertLess(self.report[self.files["q8_0"]]["mean_kl"], self.report[self.files["q4_0"]]["mean_kl"])
        self.assertLess(self.report[self.files["q4_0"]]["weight_bytes"], self.report[self.files["q8_0"]]["weight_bytes"])

    def test_other_vocabulary_is_refused(self):
        other = os.path.join(TMP, "weight-eval-other")
        if not os.path.exists(os.path.join(other, "config.json")):
            subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "make_checkpoint.py"), "--arch", "qwen3",
                            "--quiet", "--out", other], check=True)
        p = run(["weight-eval", "-m", TINY, other, "--text", self.text, "--ctx", "50"], check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("vocabulary", p.stderr)


if __name__ == "__main__":
    unittest.main()
