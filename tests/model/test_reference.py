#!/usr/bin/python3
"""tests/model/test_reference.py — nextn's forward pass against the independent float64 numpy
reference (tests/reference/numpy_model.py) on random checkpoints from tools/make_checkpoint.py.

For every architecture (llama with llama3 rope scaling, qwen2, qwen3, mimo with its MTP layer,
DeepSeek-layout MTP on qwen3/llama backbones), F32 single-file and sharded, and BF16, it runs
`$NEXTN_BIN debug-logits` and compares prefill logits, post-norm hidden states, 16 greedy
decode steps and MTP logits. Relative error = max|nextn - ref| / max|ref| over the array.
F32: <= 1e-4 and identical greedy tokens; BF16: <= 2e-2 and identical greedy tokens (the
reference rounds activations to bf16 where nextn's target does: tests/reference/bf16_activations.py).
Also: chunked and token-by-token prefill, and an MTP assistant checkpoint loaded separately
(when debug-logits offers an option for it)."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import numpy_model as M  # noqa: E402
import bf16_activations  # noqa: E402

PY = "/usr/bin/python3"
GEN = os.path.join(SRC, "tools", "make_checkpoint.py")
BIN = os.environ.get("NEXTN_BIN")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()
PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41]
N_DECODE = 16
TOL = {"f32": 1e-4, "bf16": 2e-2}

# name: (generator args, dtype, debug-logits extra args)
CASES = {
    "llama_f32": (["--arch", "llama"], "f32", []),
    "llama_f32_sharded": (["--arch", "llama", "--shards", "3"], "f32", []),
    "llama_bf16": (["--arch", "llama", "--dtype", "bf16"], "bf16", []),
    "llama_tied_noscaling_f32": (["--arch", "llama", "--tied", "--rope-scaling", "none",
                                  "--seed", "3"], "f32", []),
    "qwen2_f32": (["--arch", "qwen2"], "f32", []),
    "qwen2_f32_sharded": (["--arch", "qwen2", "--shards", "2"], "f32", []),
    "qwen2_bf16": (["--arch", "qwen2", "--dtype", "bf16"], "bf16", []),
    "qwen3_f32": (["--arch", "qwen3"], "f32", []),
    "qwen3_f32_sharded": (["--arch", "qwen3", "--shards", "4"], "f32", []),
    "qwen3_bf16": (["--arch", "qwen3", "--dtype", "bf16"], "bf16", []),
    "qwen3_f32_chunk3": (["--arch", "qwen3"], "f32", ["--chunk", "3"]),
    "qwen3_f32_chunk1": (["--arch", "qwen3"], "f32", ["--chunk", "1"]),
    "mimo_f32": (["--arch", "mimo"], "f32", ["--mtp"]),
    "mimo_f32_sharded": (["--arch", "mimo", "--shards", "3", "--mtp-layers", "2"], "f32",
                         ["--mtp"]),
    "mimo_bf16": (["--arch", "mimo", "--dtype", "bf16"], "bf16", ["--mtp"]),
    "qwen3_deepseek_f32": (["--arch", "qwen3", "--mtp", "deepseek", "--shared-head", "random"],
                           "f32", ["--mtp"]),
    "qwen3_deepseek_bf16_sharded": (["--arch", "qwen3", "--mtp", "deepseek", "--dtype", "bf16",
                                     "--shards", "2"], "bf16", ["--mtp"]),
    "llama_deepseek_f32": (["--arch", "llama", "--mtp", "deepseek", "--shared-head", "none"],
                           "f32", ["--mtp"]),
    "qwen2_deepseek_f32_chunk4": (["--arch", "qwen2", "--mtp", "deepseek", "--seed", "2"], "f32",
                                  ["--mtp", "--chunk", "4"]),
}

RESULTS = []


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} != reference {b.shape}")
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def top2_gap(row):
    s = np.sort(row)
    return float(s[-1] - s[-2])


def make(out, args):
    subprocess.run([PY, GEN, "--quiet", "--out", out, *args], check=True)
    return out


def debug_logits(model_dir, prefix, extra):
    cmd = [BIN, "debug-logits", "--model", model_dir, "--prompt-tokens",
           ",".join(map(str, PROMPT)), "--decode", str(N_DECODE), "--threads", "2",
           "--out", prefix, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    out = {}
    for part in ("prefill", "hidden", "decode", "tokens", "mtp"):
        path = f"{prefix}.{part}.npy"
        if os.path.exists(path):
            out[part] = np.load(path)
    return out


def debug_logits_help():
    if not BIN:
        return None
    p = subprocess.run([BIN, "debug-logits", "--help"], capture_output=True, text=True)
    return p.stdout + p.stderr if p.returncode == 0 else None


HELP = debug_logits_help()


def assistant_flag():
    """debug-logits' option for a separately loaded MTP assistant, if it has one."""
    if not HELP:
        return None
    for flag in ("--mtp-assistant-model", "--mtp-assistant", "--assistant"):
        if flag in HELP:
            return flag
    return None


class ReferenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        if HELP is None:
            raise AssertionError(f"{BIN} debug-logits is not available (the reference comparison needs it)")
        # The reference rounds activations for BF16 matrices where nextn's target does.
        bf16_activations.ROUND = bf16_activations.target_rounds(BIN)
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="reference-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            cls._tmp.cleanup()

    def check(self, name, model_dir, dtype, extra, ref=None, ref_mtp=None):
        got = debug_logits(model_dir, os.path.join(self.tmp, name), extra)
        ref = ref or M.Model(model_dir)
        tol = TOL[dtype]
        row = {"case": name}
        logits, hidden = ref.forward(PROMPT)
        for part in ("prefill", "hidden", "decode", "tokens"):
            self.assertIn(part, got, f"{name}: debug-logits wrote no {part}.npy")
        row["prefill"] = rel_err(got["prefill"], logits)
        row["hidden"] = rel_err(got["hidden"], hidden)
        ref_tokens, ref_decode = ref.greedy(PROMPT, N_DECODE)
        toks = got["tokens"].astype(np.int64).reshape(-1)
        row["tokens"] = bool(np.array_equal(toks, ref_tokens))
        # decode logits compared along nextn's own tokens (identical to the reference's when
        # row["tokens"] holds), so a token mismatch does not hide the logit error
        forced = ref.forced_decode(PROMPT, toks) if len(toks) == N_DECODE else ref_decode
        row["decode"] = rel_err(got["decode"], forced)
        if "--mtp" in extra:
            self.assertIn("mtp", got, f"{name}: --mtp but no mtp.npy")
            row["mtp"] = rel_err(got["mtp"], (ref_mtp or ref).mtp_logits(PROMPT, hidden))
        RESULTS.append(row)
        msg = f"{name}: {row}"
        self.assertLessEqual(row["prefill"], tol, msg)
        self.assertLessEqual(row["hidden"], tol, msg)
        self.assertLessEqual(row["decode"], tol, msg)
        if "mtp" in row:
            self.assertLessEqual(row["mtp"], tol, msg)
        if not row["tokens"]:
            i = int(np.argmax(toks != ref_tokens)) if len(toks) == N_DECODE else 0
            rows = [logits[-1]] + list(ref_decode)
            self.fail(f"{msg}\n  greedy tokens differ at step {i}: nextn {toks.tolist()} vs "
                      f"reference {ref_tokens.tolist()} (reference top-2 gap there "
                      f"{top2_gap(rows[i]):.3g})")

    def test_assistant_checkpoint(self):
        flag = assistant_flag()
        if flag is None:
            self.skipTest("debug-logits has no MTP-assistant option")
        for arch, mtp in (("qwen3", "deepseek"), ("mimo", "mimo")):
            tgt = make(os.path.join(self.tmp, f"asst-t-{arch}"), ["--arch", arch, "--mtp", mtp])
            base = make(os.path.join(self.tmp, f"asst-b-{arch}"),
                        ["--arch", arch, "--mtp", "none"])
            asst = make(os.path.join(self.tmp, f"asst-a-{arch}"), ["--assistant-of", tgt])
            # in-checkpoint head on the target == the same head loaded as an assistant
            self.check(f"assistant_{arch}", base, "f32", ["--mtp", flag, asst],
                       ref=M.Model(base, assistant_dir=asst), ref_mtp=M.Model(tgt))


def add_case(name, gen_args, dtype, extra):
    def test(self):
        d = os.path.join(self.tmp, name + ".ckpt")
        make(d, gen_args)
        self.check(name, d, dtype, extra)
    setattr(ReferenceTest, f"test_{name}", test)


for _name, (_args, _dtype, _extra) in CASES.items():
    add_case(_name, _args, _dtype, _extra)


def print_summary():
    if not RESULTS:
        return
    print("\nnextn vs float64 reference (relative error = max|d| / max|ref|)")
    print(f"{'case':34} {'prefill':>9} {'hidden':>9} {'decode':>9} {'mtp':>9}  tokens")
    for r in RESULTS:
        mtp = f"{r['mtp']:9.2e}" if "mtp" in r else f"{'-':>9}"
        print(f"{r['case']:34} {r['prefill']:9.2e} {r['hidden']:9.2e} {r['decode']:9.2e} {mtp}"
              f"  {'same' if r['tokens'] else 'DIFFER'}")


if __name__ == "__main__":
    prog = unittest.main(verbosity=2, exit=False)
    print_summary()
    sys.exit(0 if prog.result.wasSuccessful() else 1)
