#!/usr/bin/python3
"""tests/server/test_gemma4_images.py — a chat request with an image answered by a tiny random
Gemma 4 vision-language checkpoint (tools/make_checkpoint.py --arch gemma4 --vision-language
--bidirectional-vision: a real-layout tower, <|image> <|image|> <image|>, a template that
writes <|image|> for an image item, an image budget of 16 tokens, sliding window 8, and the
26B/31B attention rule under which an image's tokens see each other in sliding layers).

- 200 with an answer; two runs give the same text and logprobs; `usage.prompt_tokens`
  counts the image's 12 soft tokens plus <|image> and <image|> (40×30 px → 192×144 px →
  12×9 patches → 4×3 tokens).
- Prefill chunks of 5 tokens (--prefill-size 5, shorter than the image, which must not be
  split) score as the default chunking does.
- A second turn about the same image reuses the first turn's prefix (`timings.cache_n` > 0)
  and scores its tokens as a fresh server does (logprobs within 1e-4).
- Greedy with a Gemma 4 assistant drafter (--mtp-assistant-model) equals plain greedy with
  the image in context."""
import unittest

import numpy as np

from serverlib import Server, checkpoint
from image_chat import body, first_turn, logprobs, second_turn


def model():
    return checkpoint("server-gemma4-vl", "--arch", "gemma4", "--vision-language", "--bidirectional-vision",
                      "--vision-clipped", "--seed", "7")


def assistant():
    return checkpoint("server-gemma4-vl-assistant", "--assistant-of", model(), "--seed", "9")


def text(resp):
    return resp["choices"][0]["message"]["content"]


class Gemma4ImageAnswerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Server("--ctx-size", "1024", model=model()) as s:
            cls.runs = [s.post("/v1/chat/completions", body(first_turn())) for _ in range(2)]
            cls.text_only = s.post("/v1/chat/completions",
                                   body([{"role": "user", "content": "What is in this picture?"}]))[1]
            cls.answer = text(cls.runs[0][1])
            s.post("/v1/chat/completions", body(first_turn(), max_tokens=1))
            cls.second = s.post("/v1/chat/completions", body(second_turn(cls.answer)))
        with Server("--ctx-size", "1024", model=model()) as fresh:
            cls.fresh_second = fresh.post("/v1/chat/completions", body(second_turn(cls.answer)))
        with Server("--ctx-size", "1024", "--prefill-size", "5", model=model()) as s:
            cls.chunked = s.post("/v1/chat/completions", body(first_turn()))

    def test_answer_and_repeatable(self):
        (st1, r1), (st2, r2) = self.runs
        self.assertEqual(st1, 200, r1)
        self.assertEqual(st2, 200, r2)
        self.assertTrue(text(r1))
        self.assertEqual(text(r1), text(r2))
        np.testing.assert_allclose(logprobs(r1), logprobs(r2), atol=1e-5)
        self.assertEqual(r1["usage"]["prompt_tokens"], self.text_only["usage"]["prompt_tokens"] + 14)

    def test_small_prefill_chunks_keep_the_image_whole(self):
        st, r = self.chunked
        self.assertEqual(st, 200, r)
        self.assertEqual(text(r), text(self.runs[0][1]))
        np.testing.assert_allclose(logprobs(r), logprobs(self.runs[0][1]), atol=1e-4)

    def test_second_turn_reuses_prefix_with_same_scores(self):
        st, r = self.second
        self.assertEqual(st, 200, r)
        st, fresh = self.fresh_second
        self.assertEqual(st, 200, fresh)
        self.assertGreater(r["timings"]["cache_n"], 0, r["timings"])
        self.assertEqual(fresh["timings"]["cache_n"], 0, fresh["timings"])
        self.assertEqual(text(r), text(fresh))
        np.testing.assert_allclose(logprobs(r), logprobs(fresh), atol=1e-4)

    def test_assistant_greedy_equals_plain(self):
        with Server("--ctx-size", "1024", "--mtp-assistant-model", assistant(), "--num-mtp-tokens", "2",
                    model=model()) as s:
            st, r = s.post("/v1/chat/completions", body(first_turn(), max_tokens=16))
            self.assertEqual(st, 200, r)
        with Server("--ctx-size", "1024", model=model()) as s:
            st, plain = s.post("/v1/chat/completions", body(first_turn(), max_tokens=16))
        self.assertEqual(text(r), text(plain))
        self.assertGreater(r["timings"].get("draft_n", 0), 0, r["timings"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
