#!/usr/bin/python3
"""tests/server/test_drafters.py — drafters that read more than the target's last hidden
state, served over HTTP: an EAGLE-3 drafter (tools/make_checkpoint.py --eagle3-of, reading
three target layer inputs; passed as --draft-model) on a dense Qwen3 target and on a
Qwen3.5 hybrid target, and suffix decoding chained after it; a DFlash drafter (--dflash-of,
one block forward per step, its depth left to the planner). Chat completions, streamed
and whole, give the plain server's greedy text, and /metrics counts the drafts (a chain:
per part, in /metrics and in the response's timings)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, checkpoint, stream_text  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Say the alphabet twice, then count to twenty."}],
        "max_tokens": 40, "temperature": 0}


def eagle3_of(target, name):
    return checkpoint(name, "--eagle3-of", target, "--draft-vocab", "300", "--seed", "8")


class DrafterServerTest(unittest.TestCase):
    def check(self, target, *flags, parts=()):
        with Server(model=target) as plain:
            status, want = plain.post("/v1/chat/completions", CHAT)
            self.assertEqual(status, 200, want)
        with Server(*flags, model=target) as s:
            status, chat = s.post("/v1/chat/completions", CHAT)
            self.assertEqual(status, 200, chat)
            text = want["choices"][0]["message"]["content"]
            self.assertEqual(chat["choices"][0]["message"]["content"], text)
            self.assertEqual(stream_text(s.stream("/v1/chat/completions", dict(CHAT, stream=True))), text)
            status, metrics = s.get("/metrics")
            self.assertEqual(status, 200)
            text = metrics if isinstance(metrics, str) else metrics.decode()
            drafted = [line for line in text.splitlines()
                       if line.startswith("nextn:spec_decode_num_draft_tokens_total")]
            self.assertTrue(drafted and float(drafted[0].split()[-1]) > 0, drafted)
            if parts:
                # A chain counts each part: in the response's timings and in /metrics.
                timing = chat["timings"]
                self.assertTrue(set(timing["drafters"]) <= set(parts), timing)
                self.assertEqual(sum(p["draft_n"] for p in timing["drafters"].values()), timing["draft_n"])
                by_part = [line for line in text.splitlines()
                           if line.startswith("nextn:spec_decode_num_draft_tokens_by_drafter_total{")]
                self.assertTrue(by_part, text)
                for line in by_part:
                    self.assertIn(line.split('"')[1], parts)

    def test_eagle3_on_dense_target(self):
        target = checkpoint("server-qwen3")
        self.check(target, "--draft-model", eagle3_of(target, "server-qwen3-eagle3"), "--num-draft-tokens", "3")

    def test_dflash_on_dense_target(self):
        target = checkpoint("server-qwen3")
        dflash = checkpoint("server-qwen3-dflash", "--dflash-of", target, "--dflash-layers", "2", "--block-size", "8",
                            "--seed", "9")
        self.check(target, "--draft-model", dflash)

    def test_eagle3_on_hybrid_target_chained_with_suffix(self):
        target = checkpoint("server-qwen3_5", "--arch", "qwen3_5", "--seed", "6")
        self.check(target, "--draft-model", eagle3_of(target, "server-qwen3_5-eagle3"), "--spec-type", "suffix",
                   "--num-draft-tokens", "4", parts=("eagle3", "suffix"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
