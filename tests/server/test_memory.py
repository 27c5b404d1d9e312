#!/usr/bin/python3
"""tests/server/test_memory.py — large requests do not ratchet the server's memory up:
after eight 9 MB /tokenize requests (which land on different HTTP threads) the resident
set stays within 64 MB of what it was after the first one. Before the allocator was
configured for serving, each such request kept ~54 MB (820 MB after 22 requests)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server  # noqa: E402


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class MemoryTest(unittest.TestCase):
    def test_large_tokenize_requests_do_not_accumulate(self):
        text = ("The quick brown fox jumps over the lazy dog. " * 200000)[:9_000_000]
        with Server("--max-body-mb", "32") as s:
            sizes = []
            for _ in range(8):
                status, body = s.post("/tokenize", {"content": text}, timeout=300)
                self.assertEqual(status, 200, str(body)[:200])
                self.assertGreater(len(body["tokens"]), 1_000_000)
                sizes.append(rss_mb(s.proc.pid))
            self.assertLess(sizes[-1] - sizes[0], 64, f"RSS after each request (MB): {sizes}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
