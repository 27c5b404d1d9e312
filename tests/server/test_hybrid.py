#!/usr/bin/python3
"""tests/server/test_hybrid.py — a tiny random Qwen3.5 hybrid checkpoint (Gated DeltaNet +
gated attention, with its MTP layer) served over HTTP with --mtp: chat and text
completions, streamed and whole, give the same greedy text as the server without
speculation, and /health and /metrics report the recurrent state and its snapshots
beside the attention KV."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, checkpoint, stream_text  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Tell me about delta rules."}],
        "max_tokens": 24, "temperature": 0}
COMPLETION = {"prompt": "The recurrent state of a linear attention layer", "max_tokens": 24,
              "temperature": 0}


def model():
    return checkpoint("server-qwen3_5", "--arch", "qwen3_5", "--seed", "6")


class HybridServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Server(model=model()) as plain:
            cls.plain_chat = plain.post("/v1/chat/completions", CHAT)
            cls.plain_completion = plain.post("/v1/completions", COMPLETION)

    def test_mtp_serves_chat_and_completions(self):
        status, plain_chat = self.plain_chat
        self.assertEqual(status, 200, plain_chat)
        status, plain_completion = self.plain_completion
        self.assertEqual(status, 200, plain_completion)
        with Server("--mtp", "--num-mtp-tokens", "3", model=model()) as s:
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

            status, health = s.get("/health")
            self.assertEqual(status, 200, health)
            st = health["sequence_state"]
            self.assertGreater(st["recurrent_bytes"], 0)
            self.assertGreater(st["snapshot_bytes"], 0)  # verify rows were snapshotted
            self.assertGreater(st["attention_kv_bytes"], 0)
            self.assertEqual(st["total_bytes"],
                             st["attention_kv_bytes"] + st["recurrent_bytes"] + st["snapshot_bytes"])
            status, metrics = s.get("/metrics")
            self.assertEqual(status, 200)
            text = metrics if isinstance(metrics, str) else metrics.decode()
            for name in ("recurrent_state_bytes", "recurrent_snapshot_bytes", "sequence_state_bytes_max"):
                self.assertIn(name, text)
            self.assertIn("spec_decode_num_draft_tokens_total", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
