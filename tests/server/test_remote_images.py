#!/usr/bin/python3
"""tests/server/test_remote_images.py — http(s) image URLs, fetched only by a server started
with --allow-remote-images (server/image_fetch.cc), against a real HTTP server in this
process (Python's http.server) that misbehaves in the ways a remote host can:

- a PNG answers as a data: URL of the same picture does (the same prompt token count and
  greedy answer), also under a generic Content-Type (the bytes' magic number decides) and
  through a redirect on the same host;
- a redirect to another host, a body over --image-max-bytes (declared, or only found while
  reading a chunked body), a host slower than --remote-image-timeout, a 404 and a
  non-image body are each a 400 naming the problem, and the server goes on answering;
- without the flag the same URL is a 400 `remote_image_url` and nothing is fetched."""
import base64
import http.server
import os
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, checkpoint  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from png_image import png_bytes  # noqa: E402

PNG = png_bytes(np.random.default_rng(5).integers(0, 256, (30, 40, 3), dtype=np.uint8))
LIMIT = 64 * 1024
REQUESTS = []  # paths the fake host was asked for


class Host(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="image/png", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        REQUESTS.append(self.path)
        port = self.server.server_address[1]
        if self.path == "/ok.png":
            self.send(200, PNG)
        elif self.path == "/octet":
            self.send(200, PNG, "application/octet-stream")
        elif self.path == "/same-host":
            self.send(302, b"", "text/plain", [("Location", "/ok.png")])
        elif self.path == "/other-host":
            self.send(302, b"", "text/plain", [("Location", f"http://localhost:{port}/ok.png")])
        elif self.path == "/big":
            self.send(200, b"\x89PNG" + bytes(LIMIT + 10))
        elif self.path == "/chunked-big":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = bytes(8192)
            for _ in range(LIMIT // 8192 + 4):
                self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/slow":
            time.sleep(3)
            self.send(200, PNG)
        elif self.path == "/text":
            self.send(200, b"<html>not a picture</html>", "text/html")
        else:
            self.send(404, b"not here", "text/plain")


def model():
    return checkpoint("server-qwen3_5-vl", "--arch", "qwen3_5", "--vision-language", "--seed", "7")


def request(url):
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                                      {"type": "image_url", "image_url": {"url": url}}]}],
            "max_tokens": 6, "temperature": 0}


class RemoteImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Host)
        cls.thread = threading.Thread(target=cls.host.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = f"http://127.0.0.1:{cls.host.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.host.shutdown()

    def test_fetched_and_refused(self):
        inline = "data:image/png;base64," + base64.b64encode(PNG).decode()
        with Server("--ctx-size", "1024", "--allow-remote-images", "--image-max-bytes", str(LIMIT),
                    "--remote-image-timeout", "1", model=model()) as s:
            st, ref = s.post("/v1/chat/completions", request(inline))
            self.assertEqual(st, 200, ref)
            for path in ("/ok.png", "/octet", "/same-host"):
                st, r = s.post("/v1/chat/completions", request(self.base + path))
                self.assertEqual(st, 200, (path, r))
                self.assertEqual(r["usage"]["prompt_tokens"], ref["usage"]["prompt_tokens"], path)
                self.assertEqual(r["choices"][0]["message"]["content"], ref["choices"][0]["message"]["content"], path)
            for path, words in (("/other-host", "another host"), ("/big", f"over {LIMIT} bytes"),
                                ("/chunked-big", f"over {LIMIT} bytes"), ("/slow", "within 1 s"),
                                ("/missing", "HTTP 404"), ("/text", "not a PNG")):
                started = time.monotonic()
                st, r = s.post("/v1/chat/completions", request(self.base + path))
                self.assertEqual(st, 400, (path, r))
                self.assertIn(words, r["error"]["message"], path)
                self.assertIn("image_url", r["error"]["param"], path)
                self.assertLess(time.monotonic() - started, 2.5, path)  # the timeout bounds the whole fetch
            st, r = s.post("/v1/chat/completions", request(self.base + "/ok.png"))
            self.assertEqual(st, 200, r)  # still serving

    def test_not_fetched_without_the_flag(self):
        before = len(REQUESTS)
        with Server("--ctx-size", "1024", model=model()) as s:
            st, r = s.post("/v1/chat/completions", request(self.base + "/ok.png"))
        self.assertEqual(st, 400, r)
        self.assertEqual(r["error"]["code"], "remote_image_url")
        self.assertIn("--allow-remote-images", r["error"]["message"])
        self.assertEqual(len(REQUESTS), before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
