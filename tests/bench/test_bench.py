"""nextn bench end to end on a tiny generated checkpoint (CI-sized).

1. Managed mode: `nextn bench` boots `nextn serve` per configuration; the report
   files must be well-formed and every measurement must carry real token counts.
2. --url mode: against a separately started `nextn serve`; the tokens the bench
   counted (usage of every request, warm-up included) must equal the server's own
   Prometheus counters.
3. A configuration whose server cannot start is reported as FAIL, not dropped.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
import xml.etree.ElementTree as ET

BIN = os.environ.get("NEXTN_BIN", "build/nextn")
SRC = os.environ.get("NEXTN_SOURCE_DIR", ".")
TMP = os.environ.get("NEXTN_TEST_TMP", tempfile.gettempdir())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(out):
    if not os.path.exists(os.path.join(out, "config.json")):
        subprocess.run([sys.executable, os.path.join(SRC, "tools/make_checkpoint.py"), "--arch", "qwen3", "--mtp",
                        "deepseek", "--seed", "7", "--quiet", "--out", out], check=True)
    return out


def http_get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def prometheus_value(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name} not found")


class BenchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        cls.work = tempfile.mkdtemp(dir=TMP, prefix="bench-")
        cls.model = make_model(os.path.join(TMP, "bench-model-qwen3-mtp"))

    def run_bench(self, *args):
        out = os.path.join(self.work, f"r{time.monotonic_ns()}")
        if "--contexts" not in args:
            args = ("--contexts", "48,160", *args)
        cmd = [BIN, "bench", "--max-tokens", "8", "--no-progress", "--threads", "2",
               "--json", out + ".json", "--out", out + ".md", "--svg", out + ".svg",
               "--server-log", out + ".log", *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        with open(out + ".json") as f:
            report = json.load(f)
        return p, report, out

    def test_managed_mode_reports(self):
        p, report, out = self.run_bench("--model", self.model, "--configs", "vanilla,mtp", "--num-mtp-tokens", "2",
                                        "--prompts", "prose,apple", "--port", str(free_port()))
        # Console: the mtp_bench table layout plus Accept and Mean-len.
        self.assertIn("Context    | Configuration                    |     TPS |   TTFT |", p.stdout)
        self.assertIn("Accept | Mean-len", p.stdout)
        ms = report["measurements"]
        self.assertEqual(len(ms), 2 * 2 * 2)  # configs x prompts x contexts
        for m in ms:
            self.assertEqual(m["status"], "ok", m)
            self.assertTrue(1 <= m["completion_tokens"] <= 8, m)
            self.assertGreater(m["tps"], 0)
            self.assertGreater(m["ttft_s"], 0)
            self.assertLessEqual(m["ttft_s"], m["total_s"])
            # TPS is computed from the real token count, not from SSE chunks.
            if m["tps_from_server_timings"]:
                self.assertEqual(m["tps"], m["server_predicted_per_second"])
            else:
                expect = (m["completion_tokens"] - 1) / (m["total_s"] - m["ttft_s"])
                self.assertAlmostEqual(m["tps"], expect, delta=1e-6 * max(1, expect))
            # Prompts are sized to the context (template overhead aside); "apple "
            # is mtp_bench's fixed word count, whatever the tokenizer makes of it.
            if m["prompt"] != "apple":
                self.assertGreater(m["prompt_tokens"], 0.5 * m["context"], m)
                self.assertLess(m["prompt_tokens"], 1.6 * m["context"] + 40, m)
            self.assertGreater(m["kv_bytes"], 0, m)
            self.assertGreater(m["peak_rss_mb"], 1)
            if m["config"] == "mtp":
                self.assertGreater(m["draft_n"], 0, m)
                self.assertLessEqual(m["draft_n_accepted"], m["draft_n"])
                self.assertGreaterEqual(m["mean_accepted_length"], 1.0)
                self.assertEqual(len(m["accept_per_pos"]), 2)  # --num-mtp-tokens 2
                self.assertTrue(all(0 <= a <= 1 for a in m["accept_per_pos"]), m)
            else:
                self.assertEqual(m["draft_n"], 0)
        self.assertEqual(len(report["summary"]), 8)
        self.assertEqual(report["machine"]["logical_cpus"], os.cpu_count())
        with open(out + ".md") as f:
            md = f.read()
        self.assertIn("| Configuration | Context |", md)
        self.assertIn("#### Prompt: prose", md)
        svg = ET.parse(out + ".svg").getroot()
        self.assertTrue(svg.tag.endswith("svg"))
        bars = [e for e in svg.iter() if e.tag.endswith("rect") and e.find("{http://www.w3.org/2000/svg}title") is not None]
        self.assertEqual(len(bars), 8)

    def test_url_mode_matches_server_counters(self):
        port = free_port()
        server = subprocess.Popen([BIN, "serve", "--model", self.model, "--port", str(port), "--threads", "2"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    if json.loads(http_get(base + "/health")).get("status") in ("ok", "ready"):
                        break
                except Exception:
                    pass
                time.sleep(0.1)
            p, report, _ = self.run_bench("--url", base, "--server-pid", str(server.pid), "--prompts", "code")
            ms = report["measurements"]
            self.assertEqual(len(ms), 2)
            self.assertTrue(all(m["status"] == "ok" for m in ms), ms)
            metrics = http_get(base + "/metrics")
            warm = report["warmups"][0]["usage"]
            counted_gen = sum(m["completion_tokens"] for m in ms) + warm["completion_tokens"]
            counted_prompt = sum(m["prompt_tokens"] for m in ms) + warm["prompt_tokens"]
            self.assertEqual(prometheus_value(metrics, "nextn:generation_tokens_total"), counted_gen)
            self.assertEqual(prometheus_value(metrics, "nextn:requests_total"), 3)
            served_prompt = prometheus_value(metrics, "nextn:prompt_tokens_total")
            self.assertLessEqual(served_prompt, counted_prompt)  # prefix-cache hits are not re-processed
            self.assertTrue(all(m["peak_rss_mb"] > 1 for m in ms))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)

    def test_failing_configuration_is_reported(self):
        p, report, _ = self.run_bench("--model", self.model, "--configs", "vanilla,broken=--no-such-flag",
                                      "--prompts", "apple", "--port", str(free_port()), "--contexts", "48")
        status = {m["config"]: m["status"] for m in report["measurements"]}
        self.assertEqual(status["vanilla"], "ok")
        self.assertEqual(status["broken"], "FAIL")
        self.assertRegex(p.stdout, re.compile(r"48\s+\| broken\s+\|\s+FAIL"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
