#!/usr/bin/python3
"""tests/server/test_hostile_template.py — a model directory whose chat template is
hostile (a recursive macro, 10^10 loop iterations, a gigabyte string) costs the server
one 400 per chat request naming the limit it hit, never a crash, a hang or the memory of
the machine; completions keep working meanwhile; and SIGTERM during a long render ends
the server promptly (the render is cancelled)."""
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, checkpoint_with_template  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}
TEMPLATES = {
    "recursive": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "loops": "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "huge": "{{ 'x' * 1000000000 }}",
}


def model_with_template(name, template):
    return checkpoint_with_template(f"server-hostile-{name}", template)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0


class HostileTemplateTest(unittest.TestCase):
    def check_refused(self, name, limit):
        # The wall-time limit is lifted so that the limit under test is the one reached,
        # also in the (several times slower) sanitizer build.
        with Server("--template-timeout", "600", model=model_with_template(name, TEMPLATES[name])) as s:
            for _ in range(2):
                status, body = s.post("/v1/chat/completions", CHAT, timeout=60)
                self.assertEqual(status, 400, body)
                self.assertIn(limit, body["error"]["message"])
                self.assertEqual(body["error"]["code"], "template_error")
            status, body = s.post("/v1/completions", {"prompt": "hello", "max_tokens": 3}, timeout=60)
            self.assertEqual(status, 200, body)
            self.assertLess(rss_mb(s.proc.pid), 1024, "peak RSS")
            self.assertEqual(s.stop(), 0)

    def test_recursive_macro(self):
        self.check_refused("recursive", "max_depth")

    def test_huge_loops(self):
        self.check_refused("loops", "max_steps")

    def test_huge_string(self):
        self.check_refused("huge", "max_output_bytes")

    def test_sigterm_during_a_long_render(self):
        # Limits raised so that the render would run for a minute.
        with Server("--template-max-steps", "100000000000", "--template-timeout", "600",
                    model=model_with_template("loops", TEMPLATES["loops"])) as s:
            result = {}
            t = threading.Thread(target=lambda: result.update(r=s.post("/v1/chat/completions", CHAT, timeout=120)))
            t.start()
            time.sleep(1.0)
            t0 = time.time()
            s.proc.send_signal(signal.SIGTERM)
            code = s.proc.wait(30)
            self.assertLess(time.time() - t0, 10, "shutdown waited for the render")
            self.assertEqual(code, 0)
            t.join(30)
            status, body = result.get("r", (None, None))
            if status is not None:  # answered before the socket closed: the cancelled render
                self.assertEqual(status, 400, body)
                self.assertIn("cancelled", body["error"]["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
