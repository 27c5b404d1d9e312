#!/usr/bin/python3
"""tests/server/test_moe.py — tiny random Mixture-of-Experts checkpoints of each family
served over HTTP with their drafter: Qwen3.5-MoE (--mtp, routed MTP layer), GLM-4.5
(--mtp, its nextn layer) and Gemma 4 in the 26B-A4B form (--mtp-assistant-model). Chat
(whole and streamed) and text completions give the same greedy text as the same server
without speculation, with drafts made and counted in /metrics."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, checkpoint, stream_text  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Which experts did you ask?"}],
        "max_tokens": 24, "temperature": 0}
COMPLETION = {"prompt": "A router picks the experts of each token", "max_tokens": 24, "temperature": 0}


def models():
    qwen = checkpoint("server-qwen3_5_moe", "--arch", "qwen3_5_moe", "--seed", "6")
    glm = checkpoint("server-glm4_moe", "--arch", "glm4_moe", "--seed", "6")
    gemma = checkpoint("server-gemma4_moe", "--arch", "gemma4", "--moe", "--seed", "6")
    gemma_assistant = checkpoint("server-gemma4_moe-assistant", "--assistant-of", gemma, "--seed", "9")
    return {"qwen3_5_moe": (qwen, ["--mtp", "--num-mtp-tokens", "3"]),
            "glm4_moe": (glm, ["--mtp", "--num-mtp-tokens", "2"]),
            "gemma4_moe": (gemma, ["--mtp-assistant-model", gemma_assistant, "--num-mtp-tokens", "2"])}


class MoeServerTest(unittest.TestCase):
    def test_each_family_serves_chat_with_its_drafter(self):
        for family, (model, spec) in models().items():
            with self.subTest(family=family):
                with Server(model=model) as plain:
                    status, plain_chat = plain.post("/v1/chat/completions", CHAT)
                    self.assertEqual(status, 200, plain_chat)
                    status, plain_completion = plain.post("/v1/completions", COMPLETION)
                    self.assertEqual(status, 200, plain_completion)
                with Server(*spec, model=model) as s:
                    status, chat = s.post("/v1/chat/completions", CHAT)
                    self.assertEqual(status, 200, chat)
                    self.assertEqual(chat["choices"][0]["message"]["content"],
                                     plain_chat["choices"][0]["message"]["content"])
                    self.assertEqual(chat["usage"]["completion_tokens"], plain_chat["usage"]["completion_tokens"])
                    status, comp = s.post("/v1/completions", COMPLETION)
                    self.assertEqual(status, 200, comp)
                    self.assertEqual(comp["choices"][0]["text"], plain_completion["choices"][0]["text"])
                    events = s.stream("/v1/chat/completions", dict(CHAT, stream=True))
                    self.assertEqual(stream_text(events), plain_chat["choices"][0]["message"]["content"])
                    status, metrics = s.get("/metrics")
                    self.assertEqual(status, 200)
                    text = metrics if isinstance(metrics, str) else metrics.decode()
                    drafted = [line for line in text.splitlines()
                               if line.startswith("nextn:spec_decode_num_draft_tokens_total")
                               or line.startswith("spec_decode_num_draft_tokens_total")]
                    self.assertTrue(drafted, text)
                    self.assertGreater(float(drafted[0].split()[-1]), 0, drafted[0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
