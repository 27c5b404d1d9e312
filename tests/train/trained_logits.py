"""tests/train/trained_logits.py — the check the shipped-model tests share: nextn's
prefill, hidden, MTP and decode outputs for a stored prompt against the PyTorch forward's
references (tests/train/data*/ref_NAME.*.npy, made by tools/train/make_reference.py),
and the reference's greedy tokens."""
import os

import numpy as np


def check(test, run, model, data, out_prefix, name):
    """`run(*args)` runs nextn and returns its stdout; failures go to `test`."""
    ref = {k: np.load(os.path.join(data, f"ref_{name}.{k}.npy"))
           for k in ("tokens", "prefill", "hidden", "mtp", "decode", "greedy")}
    n_dec = len(ref["greedy"])
    os.makedirs(os.path.dirname(out_prefix), exist_ok=True)
    run("debug-logits", "--model", model, "--prompt-tokens", ",".join(map(str, ref["tokens"])),
        "--decode", str(n_dec), "--mtp", "--out", out_prefix)
    got = {k: np.load(f"{out_prefix}.{k}.npy") for k in ("prefill", "hidden", "mtp", "decode", "tokens")}
    for k in ("prefill", "mtp", "decode"):
        r = ref[k].astype(np.float32)
        g = got[k].astype(np.float32)
        test.assertEqual(g.shape, r.shape, k)
        # BF16 weights, float32 math on both sides; float16 storage of the reference
        tol = 0.02 * np.abs(r).max(axis=1) + 0.02
        err = np.abs(g - r).max(axis=1)
        test.assertTrue(np.all(err <= tol), f"{name}.{k}: max err {err.max():.4f} (row tol {tol.min():.4f})")
        # top-1 must agree wherever the reference's top-2 margin exceeds the tolerance
        top2 = np.sort(r, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > 2 * tol
        test.assertTrue(np.array_equal(g.argmax(1)[clear], r.argmax(1)[clear]), f"{name}.{k} argmax")
    h_ref, h = ref["hidden"], got["hidden"]
    test.assertEqual(h.shape, h_ref.shape)
    test.assertLessEqual(np.abs(h - h_ref).max(), 0.02 * np.abs(h_ref).max() + 0.02, f"{name}.hidden")
    test.assertEqual(got["tokens"].tolist(), ref["greedy"].tolist(), f"{name} greedy tokens")
