"""tests/model/architecture_check.py — what the per-architecture reference tests share
(test_qwen3_5_reference.py, test_gemma4_reference.py, test_gemma4_assistant.py): the
relative error they bound, random checkpoints from tools/make_checkpoint.py, the
`nextn debug-logits` outputs, the float64 reference models with their results kept on
disk (reference()), a test case holding a temporary folder and one checkpoint (with its
reference model) per set of generator arguments, and the bad-config
check: a copy of a good checkpoint with config.json edited must make `nextn debug-logits`
exit 2 with a message containing the expected text, and write no output. add_cases() and
main() are the tests' registration and their closing table of errors."""
import glob
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PY = "/usr/bin/python3"
GEN = os.path.join(SRC, "tools", "make_checkpoint.py")
BIN = os.environ.get("NEXTN_BIN")
TMP_ROOT = os.environ.get("NEXTN_TEST_TMP") or tempfile.gettempdir()

sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import bf16_activations  # noqa: E402

# The references round activations for BF16 matrices where nextn's target does.
if BIN:
    bf16_activations.ROUND = bf16_activations.target_rounds(BIN)


def rel_err(a, b):
    """max |a − b| / max |b|, in float64; the shapes must agree."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} != reference {b.shape}")
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def _files_digest(pattern):
    """SHA-256 over the names and bytes of the files matching `pattern`, in name order."""
    h = hashlib.sha256()
    for path in sorted(glob.glob(pattern)):
        if os.path.isfile(path):
            h.update(os.path.basename(path).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


class _KeptReference:
    """A float64 reference model whose results are kept on disk. scripts/test.sh runs these
    tests once per SIMD target; the reference is numpy, so its numbers are the same each
    time, and the reruns load what the first run computed. The key is everything a result
    depends on: the checkpoint's files, the reference sources (tests/reference/*.py), the
    model's arguments (a broken variant) and the call's arguments."""

    SOURCES = _files_digest(os.path.join(SRC, "tests", "reference", "*.py"))  # once per process

    def __init__(self, module, model_dir, **kwargs):
        self._module, self._dir, self._kwargs, self._model = module, model_dir, kwargs, None
        files = _files_digest(os.path.join(model_dir, "*"))
        rounding = repr(bf16_activations.ROUND)
        self._key = hashlib.sha256((self.SOURCES + files + repr(sorted(kwargs.items())) + rounding).encode()).hexdigest()
        self._store = os.path.join(TMP_ROOT, "reference-results")

    def _loaded(self):
        if self._model is None:
            self._model = self._module.Model(self._dir, **self._kwargs)
        return self._model

    def __getattr__(self, name):
        if not callable(getattr(self._module.Model, name, None)):
            return getattr(self._loaded(), name)

        def call(*args, **kwargs):
            key = hashlib.sha256((self._key + name).encode() + pickle.dumps((args, kwargs))).hexdigest()
            path = os.path.join(self._store, key[:40] + ".pkl")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    return pickle.load(f)
            result = getattr(self._loaded(), name)(*args, **kwargs)
            os.makedirs(self._store, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self._store, delete=False) as f:
                pickle.dump(result, f)
            os.replace(f.name, path)
            return result
        return call


def reference(module, model_dir, **kwargs):
    """module.Model(model_dir, **kwargs) with its results kept on disk (_KeptReference)."""
    return _KeptReference(module, model_dir, **kwargs)


def make_checkpoint(out, args):
    """A fresh random checkpoint at `out` from tools/make_checkpoint.py `args`."""
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([PY, GEN, "--quiet", "--out", out, *args], check=True)
    return out


def edited_copy(src, dst, edit):
    """A copy of checkpoint directory `src` at `dst` whose config.json went through edit(config)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        c = json.load(f)
    edit(c)
    with open(path, "w") as f:
        json.dump(c, f)
    return dst


def debug_logits(model_dir, prefix, extra, prompt, n_decode):
    """`nextn debug-logits` on `prompt` with `n_decode` greedy steps: the .npy parts it wrote."""
    cmd = [BIN, "debug-logits", "--model", model_dir, "--prompt-tokens", ",".join(map(str, prompt)),
           "--decode", str(n_decode), "--threads", "2", "--out", prefix, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return {part: np.load(f"{prefix}.{part}.npy") for part in
            ("prefill", "hidden", "decode", "tokens", "mtp") if os.path.exists(f"{prefix}.{part}.npy")}


class ArchitectureTestCase(unittest.TestCase):
    """Subclasses set ARCH (make_checkpoint's --arch) and REFERENCE (the numpy module
    whose Model(dir) is the float64 reference)."""
    ARCH = None
    REFERENCE = None

    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix=cls.ARCH + "-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        cls.models = {}

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            cls._tmp.cleanup()

    def model(self, gen_args):
        """(checkpoint dir, reference model) for these generator arguments, made once."""
        key = " ".join(gen_args)
        if key not in self.models:
            d = make_checkpoint(os.path.join(self.tmp, f"ckpt{len(self.models)}"), ["--arch", self.ARCH, *gen_args])
            self.models[key] = (d, reference(self.REFERENCE, d))
        return self.models[key]

    def bad_config(self, name, edit, expect):
        good, _ = self.model([])
        dst = edited_copy(good, os.path.join(self.tmp, "bad-" + name), edit)
        p = subprocess.run([BIN, "debug-logits", "--model", dst, "--prompt-tokens", "1,2,3", "--out",
                            os.path.join(dst, "out")], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, f"{name}: {p.stdout}{p.stderr}")
        self.assertIn(expect, p.stderr, name)
        self.assertFalse(os.path.exists(os.path.join(dst, "out.prefill.npy")), name)


class MtpReferenceTestCase(ArchitectureTestCase):
    """A reference comparison for models with an MTP head (Qwen3.5, Qwen3.5-MoE, GLM-4.5):
    check() bounds prefill logits, post-norm hidden, forced decode and (with --mtp) MTP
    logits by TOL[dtype] and wants the reference's greedy tokens; every bug of BROKEN
    must miss by 100 × TOL["f32"]. Subclasses also set RESULTS (the table's rows)."""
    TOL = {"f32": 1e-4, "bf16": 2e-2}
    N_DECODE = 16
    PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41]
    BROKEN = ()
    RESULTS = None

    def check(self, name, gen_args, dtype, extra, prompt):
        d, ref = self.model(gen_args)
        got = debug_logits(d, os.path.join(self.tmp, name), extra, prompt, self.N_DECODE)
        logits, hidden = ref.forward(prompt)
        row = {"case": name, "prefill": rel_err(got["prefill"], logits),
               "hidden": rel_err(got["hidden"], hidden)}
        ref_tokens, _ = ref.greedy(prompt, self.N_DECODE)
        toks = got["tokens"].astype(np.int64).reshape(-1)
        row["tokens"] = bool(np.array_equal(toks, ref_tokens))
        row["decode"] = rel_err(got["decode"], ref.forced_decode(prompt, toks))
        if "--mtp" in extra:
            row["mtp"] = rel_err(got["mtp"], ref.mtp_logits(prompt, hidden))
        self.RESULTS.append(row)
        for part in ("prefill", "hidden", "decode", "mtp"):
            if part in row:
                self.assertLessEqual(row[part], self.TOL[dtype], f"{name} {part}: {row}")
        self.assertTrue(row["tokens"], f"{name}: greedy tokens {toks.tolist()} vs reference "
                                       f"{ref_tokens.tolist()}")

    def test_broken_references_are_detected(self):
        d, ref = self.model([])
        got = debug_logits(d, os.path.join(self.tmp, "broken"), ["--mtp"], self.PROMPT, self.N_DECODE)
        logits, _ = ref.forward(self.PROMPT)
        self.assertLessEqual(rel_err(got["prefill"], logits), self.TOL["f32"])
        self.assertTrue(self.BROKEN, "no broken references to check")
        for bug in self.BROKEN:
            bad = reference(self.REFERENCE, d, broken=bug)
            b_logits, b_hidden = bad.forward(self.PROMPT)
            err = max(rel_err(got["prefill"], b_logits),
                      rel_err(got["mtp"], bad.mtp_logits(self.PROMPT, b_hidden)))
            print(f"broken reference {bug}: relative error {err:.3g}")
            self.assertGreater(err, 100 * self.TOL["f32"], f"broken reference '{bug}' went unnoticed")


def add_cases(test_class, cases):
    """One test_<name> per case {name: (gen_args, dtype, extra, prompt)}, each calling
    test_class.check(name, gen_args, dtype, extra, prompt)."""
    for name, (gen_args, dtype, extra, prompt) in cases.items():
        def test(self, name=name, gen_args=gen_args, dtype=dtype, extra=extra, prompt=prompt):
            self.check(name, gen_args, dtype, extra, prompt)
        setattr(test_class, f"test_{name}", test)


def main(title, results, width=24):
    """Runs the tests, then prints each case's errors (`results`: dicts with case, prefill,
    hidden, decode, optional mtp, tokens) and exits 1 if any test failed."""
    prog = unittest.main(verbosity=2, exit=False)
    if results:
        mtp = any("mtp" in r for r in results)
        print(f"\nnextn {title} vs float64 reference (relative error = max|d| / max|ref|)")
        print(f"{'case':{width}} {'prefill':>9} {'hidden':>9} {'decode':>9}" + (f" {'mtp':>9}" if mtp else "") + "  tokens")
        for r in results:
            m = (f" {r['mtp']:9.2e}" if "mtp" in r else f" {'-':>9}") if mtp else ""
            print(f"{r['case']:{width}} {r['prefill']:9.2e} {r['hidden']:9.2e} {r['decode']:9.2e}{m}"
                  f"  {'same' if r['tokens'] else 'DIFFER'}")
    sys.exit(0 if prog.result.wasSuccessful() else 1)
