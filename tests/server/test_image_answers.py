#!/usr/bin/python3
"""tests/server/test_image_answers.py — a chat request with an image answered by a tiny random
Qwen3.5 vision-language checkpoint (tools/make_checkpoint.py --arch qwen3_5 --vision-language:
a real-layout tower, the three vision specials, a template that renders image items).

- 200 with an answer; two runs give the same text and logprobs; `usage.prompt_tokens` counts
  the image's 64 placeholder rows (a small image is resized up to 256×256 px: 8×8 merged).
- A second turn about the same image reuses the first turn's prefix (`timings.cache_n` > 0)
  and scores its tokens as a fresh server does (logprobs within 1e-4); a picture sent again
  is not encoded again (`timings.image_cached_n`).
- The same second turn with a different picture never reuses a prefix past the text before
  the image, and scores as a fresh server does.
- Greedy with --mtp equals plain greedy with the image in context.
- llama.cpp's split files: the checkpoint as a text GGUF (`nextn quantize`) served with
  `--mmproj` (its tower in the converter's projector layout, F16) answers the same request
  with the same image token count, and greedy with --mtp equals plain there too."""
import os
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import BIN, Server, checkpoint  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from image_chat import body, first_turn, logprobs, second_turn  # noqa: E402
from test_mmproj_gguf import mmproj_gguf  # noqa: E402


def model():
    return checkpoint("server-qwen3_5-vl", "--arch", "qwen3_5", "--vision-language", "--seed", "7")


class ImageAnswerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Server("--ctx-size", "1024", model=model()) as s:
            cls.models = s.get("/v1/models")
            cls.runs = [s.post("/v1/chat/completions", body(first_turn())) for _ in range(2)]
            st, text_only = s.post("/v1/chat/completions",
                                   body([{"role": "user", "content": "What is in this picture?"}]))
            cls.text_only = text_only
            answer = cls.runs[0][1]["choices"][0]["message"]["content"]
            cls.answer = answer
            # With max_tokens 1 the slot's state holds exactly the first turn's prompt, the
            # length a hybrid (recurrent) state can be reused at.
            s.post("/v1/chat/completions", body(first_turn(), max_tokens=1))
            cls.second = s.post("/v1/chat/completions", body(second_turn(answer)))
            s.post("/v1/chat/completions", body(first_turn(), max_tokens=1))
            cls.other = s.post("/v1/chat/completions", body(second_turn(answer, seed=2)))
        with Server("--ctx-size", "1024", model=model()) as fresh:
            cls.fresh_second = fresh.post("/v1/chat/completions", body(second_turn(answer)))
            cls.fresh_other = fresh.post("/v1/chat/completions", body(second_turn(answer, seed=2)))

    def test_answer_and_repeatable(self):
        (st1, r1), (st2, r2) = self.runs
        self.assertEqual(st1, 200, r1)
        self.assertEqual(st2, 200, r2)
        self.assertTrue(r1["choices"][0]["message"]["content"])
        self.assertEqual(r1["choices"][0]["message"]["content"], r2["choices"][0]["message"]["content"])
        np.testing.assert_allclose(logprobs(r1), logprobs(r2), atol=1e-5)
        # 40×30 px → smart_resize 320×224 → 20×14 patches → 10×7 = 70 rows, plus
        # <|vision_start|> and <|vision_end|>.
        self.assertEqual(r1["usage"]["prompt_tokens"], self.text_only["usage"]["prompt_tokens"] + 72)
        # The second request's picture comes from the engine's picture cache: not encoded again.
        self.assertEqual((r1["timings"]["image_n"], r1["timings"]["image_cached_n"]), (1, 0), r1["timings"])
        self.assertEqual((r2["timings"]["image_n"], r2["timings"]["image_cached_n"]), (1, 1), r2["timings"])
        self.assertNotIn("image_n", self.text_only["timings"])

    def test_models_says_vision(self):
        st, models = self.models
        self.assertEqual(st, 200, models)
        self.assertIs(models["data"][0]["meta"]["vision"], True)

    def test_second_turn_reuses_prefix_with_same_scores(self):
        st, r = self.second
        self.assertEqual(st, 200, r)
        st, fresh = self.fresh_second
        self.assertEqual(st, 200, fresh)
        self.assertGreater(r["timings"]["cache_n"], 0, r["timings"])
        self.assertEqual(fresh["timings"]["cache_n"], 0, fresh["timings"])
        self.assertEqual(r["choices"][0]["message"]["content"], fresh["choices"][0]["message"]["content"])
        np.testing.assert_allclose(logprobs(r), logprobs(fresh), atol=1e-4)

    def test_other_picture_never_shares_the_image_rows(self):
        st, r = self.other
        self.assertEqual(st, 200, r)
        st, fresh = self.fresh_other
        self.assertEqual(st, 200, fresh)
        # Only text before the image could be shared (the text-only prompt is 32 tokens with
        # its generation prompt); the image's rows never are, so the scores are a fresh run's.
        self.assertLess(r["timings"]["cache_n"], 28, r["timings"])
        self.assertEqual(r["timings"]["image_cached_n"], 0, r["timings"])  # a new picture is encoded
        self.assertEqual(r["choices"][0]["message"]["content"], fresh["choices"][0]["message"]["content"])
        np.testing.assert_allclose(logprobs(r), logprobs(fresh), atol=1e-4)
        self.assertNotEqual(logprobs(r), logprobs(self.second[1]))

    def test_mtp_greedy_equals_plain(self):
        with Server("--ctx-size", "1024", "--mtp", "--num-mtp-tokens", "3", model=model()) as s:
            st, r = s.post("/v1/chat/completions", body(first_turn(), max_tokens=16))
            self.assertEqual(st, 200, r)
        with Server("--ctx-size", "1024", model=model()) as s:
            st, plain = s.post("/v1/chat/completions", body(first_turn(), max_tokens=16))
        self.assertEqual(r["choices"][0]["message"]["content"], plain["choices"][0]["message"]["content"])

    def test_text_gguf_with_mmproj(self):
        base = model()
        text, mmproj = base + "-text-q8_0.gguf", base + "-mmproj-f16.gguf"
        if not os.path.exists(text):
            subprocess.run([BIN, "quantize", base, "--type", "q8_0", "--out", text + ".part.gguf",
                            "--no-progress"], check=True, capture_output=True)
            os.replace(text + ".part.gguf", text)
        if not os.path.exists(mmproj):
            os.replace(mmproj_gguf(base, mmproj + ".part.gguf", dtype="F16"), mmproj)
        answers = {}
        for flags in ((), ("--mtp", "--num-mtp-tokens", "3")):
            with Server("--ctx-size", "1024", "--mmproj", mmproj, *flags, model=text) as s:
                st, r = s.post("/v1/chat/completions", body(first_turn(), max_tokens=16))
                self.assertEqual(st, 200, r)
                answers[flags] = r["choices"][0]["message"]["content"]
                self.assertEqual(r["usage"]["prompt_tokens"], self.runs[0][1]["usage"]["prompt_tokens"])
        self.assertTrue(answers[()])
        self.assertEqual(answers[()], answers[("--mtp", "--num-mtp-tokens", "3")])


if __name__ == "__main__":
    unittest.main(verbosity=2)
