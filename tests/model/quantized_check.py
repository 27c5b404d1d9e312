"""tests/model/quantized_check.py — the comparison the quantized-weight tests share:
nextn's logits (and MTP logits) on a quantized checkpoint against the float64 numpy
reference (tests/reference/numpy_model.py) run on the weights an independent reader
dequantized. nextn rounds activations to int8 per 32 values (|Δx| ≤ amax/254); through a
few layers of 64-wide random matmuls that gives relative logit errors of a few percent,
so the bound is 0.1 of the largest logit, with identical greedy tokens wherever the
reference's top-2 gap exceeds that error."""
import subprocess

import numpy as np

import numpy_model as M

PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41]


def check_logits(test, bin_path, model, ref_dir, out_prefix, mtp, label, reference=M):
    """Runs `nextn debug-logits` on `model` and asserts it is within the bound of the
    reference (the module `reference`: numpy_model or an architecture's own) on `ref_dir`;
    returns the relative logit error."""
    cmd = [bin_path, "debug-logits", "--model", model, "--prompt-tokens", ",".join(map(str, PROMPT)), "--decode", "8",
           "--threads", "2", "--out", out_prefix] + (["--mtp"] if mtp else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    test.assertEqual(p.returncode, 0, p.stderr)
    ref = reference.Model(ref_dir)
    logits, hidden = ref.forward(PROMPT)
    got = np.load(out_prefix + ".prefill.npy")
    err = np.max(np.abs(got - logits)) / np.max(np.abs(logits))
    test.assertLess(err, 0.1, f"{label}: relative logit error {err:.4f}")
    top2 = np.sort(logits, axis=-1)
    confident = (top2[:, -1] - top2[:, -2]) > 2 * err * np.max(np.abs(logits))
    np.testing.assert_array_equal(np.argmax(got, -1)[confident], np.argmax(logits, -1)[confident])
    if mtp:
        mtp_ref = ref.mtp_logits(PROMPT, hidden)
        mtp_got = np.load(out_prefix + ".mtp.npy")
        n = min(len(mtp_ref), len(mtp_got))
        merr = np.max(np.abs(mtp_got[:n] - mtp_ref[:n])) / np.max(np.abs(mtp_ref[:n]))
        test.assertLess(merr, 0.1, f"{label}: relative MTP logit error {merr:.4f}")
    return err


def check_serves_chat_with_mtp(test, model):
    """`nextn serve --mtp` on `model` answers a chat request with text, drafting on the way,
    and reports itself healthy."""
    import serverlib  # tests/server, on the callers' path
    with serverlib.Server("--mtp", "--num-mtp-tokens", "2", model=model) as s:
        status, body = s.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "What is a compiler?"}], "max_tokens": 24,
            "temperature": 0})
        test.assertEqual(status, 200, body)
        test.assertTrue(body["choices"][0]["message"]["content"])
        test.assertGreater(body["timings"]["draft_n"], 0)
        status, health = s.get("/health")
        test.assertEqual(status, 200)
