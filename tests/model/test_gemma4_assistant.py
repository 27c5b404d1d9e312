#!/usr/bin/python3
"""tests/model/test_gemma4_assistant.py — the Gemma 4 "-assistant" drafter
(Gemma4AssistantForCausalLM from tools/make_checkpoint.py --assistant-of <gemma4 target>)
against the float64 reference (tests/reference/numpy_gemma4.py, Assistant): greedy draft
logits of 4 chained steps at the target's last position, over the target's KV of its
donor layers (sliding ring and full), with centroid masking, right after the prompt and
after 16 decode steps (past the window). Relative error <= 1e-4 in F32. Deliberately
wrong drafters (advancing the draft position, the drafter's own embedding as input,
[h; e] concatenation order) must miss by far more. A mismatched target/assistant pair is
refused at startup (exit 2) naming both values. `nextn generate` with the assistant gives
the plain greedy text, its depth chosen per step up to num_assistant_tokens (4 when the
checkpoint does not say) unless --num-mtp-tokens fixes it."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "model"))
import numpy_gemma4 as M  # noqa: E402
from architecture_check import BIN, GEN, PY, TMP_ROOT, edited_copy, rel_err  # noqa: E402

PROMPT = [1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41, 9, 17]
LONG = [int((i * 53 + 7) % 380) for i in range(90)]
N_DECODE = 16
STEPS = 4
TOL = 1e-4


class WrongAssistant(M.Assistant):
    """One deliberate drafter bug (docs/architectures.md, "The Gemma 4 assistant": the mistakes
    that still give plausible drafts)."""

    def __init__(self, model_dir, target, bug):
        super().__init__(model_dir, target)
        self.bug = bug
        if bug == "own_embedding":  # the drafter's table, padded to the backbone width
            E = self.W["model.embed_tokens.weight"]
            self.t = _TargetView(target, np.tile(E, (1, target.H // E.shape[1])))
        if bug == "concat_h_e":
            W = self.W["pre_projection.weight"]
            H = target.H
            self.W = dict(self.W)
            self.W["pre_projection.weight"] = np.concatenate([W[:, H:], W[:, :H]], axis=1)

    def draft(self, state, token, hidden, steps):
        if self.bug != "advancing_position":
            return super().draft(state, token, hidden, steps)
        out = []
        for s in range(steps):  # position p + s instead of the constant p
            state.length += s
            z = super().draft(state, token, hidden, 1)[0]
            state.length -= s
            out.append(z)
            hidden = self.W["post_projection.weight"] @ self._last_n
            token = int(np.argmax(z))
        return np.array(out)

    def logits(self, n):
        self._last_n = n
        return super().logits(n)


class _TargetView:
    """The target with another embedding table (for the own_embedding bug)."""

    def __init__(self, target, embed):
        self.__dict__.update(target.__dict__)
        self._target = target
        self.embed = embed

    def __getattr__(self, name):
        return getattr(self._target, name)


class Gemma4AssistantTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN:
            raise unittest.SkipTest("NEXTN_BIN is not set")
        os.makedirs(TMP_ROOT, exist_ok=True)
        cls._tmp = tempfile.TemporaryDirectory(prefix="gemma4-assistant-", dir=TMP_ROOT)
        cls.tmp = cls._tmp.name
        cls.target = os.path.join(cls.tmp, "target")
        cls.assistant = os.path.join(cls.tmp, "assistant")
        subprocess.run([PY, GEN, "--quiet", "--arch", "gemma4", "--seed", "2", "--out", cls.target], check=True)
        subprocess.run([PY, GEN, "--quiet", "--assistant-of", cls.target, "--seed", "3", "--out",
                        cls.assistant], check=True)
        cls.ref = M.Model(cls.target)

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            cls._tmp.cleanup()

    def run_debug(self, name, prompt, assistant=None, extra=()):
        prefix = os.path.join(self.tmp, name)
        cmd = [BIN, "debug-logits", "--model", self.target, "--prompt-tokens", ",".join(map(str, prompt)),
               "--decode", str(N_DECODE), "--threads", "2", "--out", prefix,
               "--mtp-assistant-model", assistant or self.assistant, "--assistant-steps", str(STEPS),
               *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300), prefix

    def reference_drafts(self, assistant, prompt, decoded):
        """Reference drafts after the prompt and after the prompt + decoded tokens."""
        out = []
        for fed in (list(prompt), list(prompt) + list(decoded)):
            state = self.ref.new_state()
            logits, hidden = self.ref.step(fed, state)
            out.append(assistant.draft(state, int(np.argmax(logits[-1])), hidden[-1], STEPS))
        return out

    def check(self, name, prompt, extra=()):
        p, prefix = self.run_debug(name, prompt, extra=extra)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        got = [np.load(prefix + ".assistant.npy"), np.load(prefix + ".assistant_end.npy")]
        decoded = np.load(prefix + ".tokens.npy").astype(np.int64)
        want = self.reference_drafts(M.Assistant(self.assistant, self.ref), prompt, decoded)
        for where, g, w in zip(("prompt end", "after decode"), got, want):
            err = rel_err(g, w)
            print(f"{name} {where}: relative error {err:.2e}, drafts {np.argmax(g, -1).tolist()}")
            self.assertLessEqual(err, TOL, f"{name} {where}")
            self.assertEqual(np.argmax(g, -1).tolist(), np.argmax(w, -1).tolist())
            # centroid masking: all but top_k * V / C tokens sit at one floor value
            floor = (g == g.min(axis=-1, keepdims=True)).sum(axis=-1)
            self.assertTrue(np.all(floor >= 384 - 4 * 24), floor)
        return got, decoded

    def test_drafts_after_short_prompt(self):
        self.check("short", PROMPT)

    def test_drafts_after_long_prompt_in_chunks(self):
        self.check("long", LONG, ["--chunk", "13"])

    def test_wrong_drafters_are_detected(self):
        got, decoded = self.check("wrong", LONG)
        for bug in ("advancing_position", "own_embedding", "concat_h_e"):
            bad = self.reference_drafts(WrongAssistant(self.assistant, self.ref, bug), LONG, decoded)
            err = max(rel_err(g, b) for g, b in zip(got, bad))
            print(f"wrong drafter {bug}: relative error {err:.3g}")
            self.assertGreater(err, 100 * TOL, f"wrong drafter '{bug}' went unnoticed")

    def generate(self, assistant, *extra):
        cmd = [BIN, "generate", "--model", self.target, "--prompt", "hello there", "-n", "12",
               "--threads", "2", *(["--mtp-assistant-model", assistant] if assistant else []), *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout.split("\nprompt: ")[0], p.stdout + p.stderr  # the text, then the statistics

    def deepest(self, log):
        """The deepest step of the `depths: k:steps ...` line (what the planner chose)."""
        line = re.search(r"^depths: (.*)$", log, re.M)
        self.assertIsNotNone(line, log)
        return max(int(item.split(":")[0]) for item in line.group(1).split())

    def test_generate_depth_is_bounded_by_num_assistant_tokens(self):
        # Without --num-mtp-tokens the depth is `auto`, at most num_assistant_tokens.
        plain, _ = self.generate(None)
        text, log = self.generate(self.assistant)  # num_assistant_tokens 3 in the tiny config
        self.assertEqual(text, plain)
        self.assertLessEqual(self.deepest(log), 3)
        self.assertNotIn("pos4", log)
        _, log = self.generate(self.assistant, "--num-mtp-tokens", "2")  # a number fixes it
        self.assertIn("pos2", log)
        self.assertNotIn("pos3", log)
        self.assertEqual(self.deepest(log), 2)

        def edit(c):
            del c["num_assistant_tokens"]
        text, log = self.generate(self.edited_assistant("a-no-depth", edit), "--num-mtp-tokens", "auto")  # then 4
        self.assertEqual(text, plain)
        self.assertLessEqual(self.deepest(log), 4)
        self.assertNotIn("pos5", log)

    def refused(self, name, assistant, expect):
        p, prefix = self.run_debug(name, PROMPT, assistant)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for e in expect:
            self.assertIn(e, p.stderr)
        self.assertFalse(os.path.exists(prefix + ".prefill.npy"))

    def edited_assistant(self, name, edit):
        return edited_copy(self.assistant, os.path.join(self.tmp, name), edit)

    def test_mismatched_hidden_size_is_refused(self):
        def edit(c):
            c["backbone_hidden_size"] = 96
        self.refused("hidden", self.edited_assistant("a-hidden", edit),
                     ["backbone_hidden_size 96", "hidden_size 64"])

    def test_mismatched_vocabulary_is_refused(self):
        def edit(c):
            c["text_config"]["vocab_size"] = 448
        self.refused("vocab", self.edited_assistant("a-vocab", edit), ["vocab_size 448", "vocab_size 384"])

    def test_mismatched_layer_geometry_is_refused(self):
        def edit(c):
            c["text_config"]["global_head_dim"] = 64
        self.refused("geometry", self.edited_assistant("a-geo", edit), ["head dim 64", "target's 32"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
