#!/usr/bin/python3
"""tests/server/test_gemma4.py — a tiny random Gemma 4 checkpoint (sliding window 8, KV
sharing, per-layer embeddings) and its -assistant drafter served over HTTP with
--mtp-assistant-model: chat (streamed and whole) and text completions give the same greedy
text as the server without speculation; the drafts show in the response's timings and in
/metrics, and /health reports the attention KV (the sliding layers' ring included). The
model's size (bytes a decode row reads, /v1/models meta.size) counts one row of the
per-layer embedding table, not the table."""
import os
import sys
import unittest

SRC = os.environ.get("NEXTN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools", "checkpoint"))
import safetensors_reader  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, checkpoint, stream_text  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Tell me about sliding windows."}],
        "max_tokens": 40, "temperature": 0}
COMPLETION = {"prompt": "A ring buffer keeps only the newest keys", "max_tokens": 40, "temperature": 0}


def model():
    return checkpoint("server-gemma4", "--arch", "gemma4", "--seed", "8")


def assistant():
    return checkpoint("server-gemma4-assistant", "--assistant-of", model(), "--seed", "9")


class Gemma4ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Server(model=model()) as plain:
            cls.plain_chat = plain.post("/v1/chat/completions", CHAT)
            cls.plain_completion = plain.post("/v1/completions", COMPLETION)

    def test_size_counts_one_per_layer_embedding_row(self):
        header, _ = safetensors_reader.read_header(os.path.join(model(), "model.safetensors"))
        matrices = {k: v for k, v in header.items() if k != "__metadata__" and len(v["shape"]) == 2}
        size = lambda v: v["data_offsets"][1] - v["data_offsets"][0]  # noqa: E731
        table = matrices["model.embed_tokens_per_layer.weight"]
        want = sum(size(v) for v in matrices.values()) - size(table) + size(table) // table["shape"][0]
        with Server(model=model()) as s:
            status, models = s.get("/v1/models")
            self.assertEqual(status, 200, models)
            self.assertEqual(models["data"][0]["meta"]["size"], want)

    def test_assistant_serves_chat_and_completions(self):
        status, plain_chat = self.plain_chat
        self.assertEqual(status, 200, plain_chat)
        status, plain_completion = self.plain_completion
        self.assertEqual(status, 200, plain_completion)
        # A fixed depth: under `auto` the planner may decode plain where drafting does not pay.
        with Server("--mtp-assistant-model", assistant(), "--num-mtp-tokens", "2", model=model()) as s:
            status, chat = s.post("/v1/chat/completions", CHAT)
            self.assertEqual(status, 200, chat)
            self.assertEqual(chat["choices"][0]["message"]["content"],
                             plain_chat["choices"][0]["message"]["content"])
            self.assertEqual(chat["usage"]["completion_tokens"], plain_chat["usage"]["completion_tokens"])
            timings = chat["timings"]
            self.assertGreater(timings["draft_n"], 0, timings)
            self.assertIn("draft_n_accepted", timings)
            status, comp = s.post("/v1/completions", COMPLETION)
            self.assertEqual(status, 200, comp)
            self.assertEqual(comp["choices"][0]["text"], plain_completion["choices"][0]["text"])
            events = s.stream("/v1/chat/completions", dict(CHAT, stream=True))
            self.assertEqual(stream_text(events), plain_chat["choices"][0]["message"]["content"])

            status, health = s.get("/health")
            self.assertEqual(status, 200, health)
            self.assertGreater(health["sequence_state"]["attention_kv_bytes"], 0)
            status, metrics = s.get("/metrics")
            self.assertEqual(status, 200)
            text = metrics if isinstance(metrics, str) else metrics.decode()
            drafted = [line for line in text.splitlines()
                       if line.startswith("nextn:spec_decode_num_draft_tokens_total")]
            self.assertTrue(drafted, text)
            self.assertGreater(float(drafted[0].split()[-1]), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
