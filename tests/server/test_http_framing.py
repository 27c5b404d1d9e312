#!/usr/bin/python3
"""tests/server/test_http_framing.py — HTTP/1.1 connection handling over raw sockets:
pipelined requests on one keep-alive connection all get answers, in order; a client
that half-closes after a complete request still gets its answer (streamed or not);
ambiguous framing (two Content-Length headers, Content-Length with Transfer-Encoding,
unknown codings, folded or malformed header lines, bare LF) is refused with a 400/501
JSON error and the connection closed, since a proxy in front could read such a request
differently (request smuggling); so is a malformed chunked body, and nothing after it is
read as a request; a chunked body past the body limit is a 413 while it is read; a POST
without a length has an empty body at once (no wait for the read timeout); a GET's body
is read and dropped, so a request pipelined after it is answered; a non-streamed request
whose client has gone frees its slot, and the server still answers correctly afterwards."""
import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 6, "temperature": 0,
        "ignore_eos": True}


def post(path, body, extra_headers="", close=False):
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{extra_headers}" + ("Connection: close\r\n" if close else "") + "\r\n")
    return head.encode() + data


def get(path, close=False):
    return (f"GET {path} HTTP/1.1\r\nHost: x\r\n" + ("Connection: close\r\n" if close else "") + "\r\n").encode()


def exchange(port, data, half_close=False, timeout=60):
    """Sends raw bytes and reads until the server closes; returns everything received."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            buf += chunk
        return buf
    finally:
        s.close()


def parse_responses(buf):
    """Splits a byte stream into (status, headers, body) responses; interim 1xx kept."""
    out = []
    while buf:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if not sep:
            raise AssertionError(f"incomplete response head: {buf[:200]!r}")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if status < 200:
            out.append((status, headers, b""))
            buf = rest
            continue
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                body += rest[:size]
                rest = rest[size + 2:]
                if size == 0:
                    break
        else:
            n = int(headers.get("content-length", "0"))
            body, rest = rest[:n], rest[n:]
        out.append((status, headers, body))
        buf = rest
    return out


class HttpFramingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--parallel", "1", "--max-body-mb", "1")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def final(self, responses):
        return [r for r in responses if r[0] >= 200]

    def test_pipelined_requests_are_all_answered_in_order(self):
        data = (get("/health") + post("/tokenize", {"content": "hello world"}) + get("/v1/models") +
                post("/v1/chat/completions", CHAT) + get("/health", close=True))
        rs = self.final(parse_responses(exchange(self.server.port, data)))
        self.assertEqual([r[0] for r in rs], [200, 200, 200, 200, 200])
        self.assertIn("tokens", json.loads(rs[1][2]))
        self.assertEqual(json.loads(rs[2][2])["object"], "list")
        self.assertEqual(json.loads(rs[3][2])["object"], "chat.completion")
        self.assertEqual(rs[4][1].get("connection"), "close")

    def test_half_closed_client_gets_its_answer(self):
        rs = parse_responses(exchange(self.server.port, post("/v1/chat/completions", CHAT), half_close=True))
        final = self.final(rs)
        self.assertEqual(len(final), 1, rs)
        self.assertEqual(final[0][0], 200)
        body = json.loads(final[0][2])
        self.assertEqual(body["usage"]["completion_tokens"], 6)
        # Only an interim 102 may precede it.
        self.assertTrue(all(r[0] == 102 for r in rs[:-1]), rs)

    def test_half_closed_client_gets_its_stream(self):
        rs = self.final(parse_responses(exchange(self.server.port, post("/v1/chat/completions", dict(CHAT, stream=True)),
                                                 half_close=True)))
        self.assertEqual(rs[0][0], 200)
        self.assertTrue(rs[0][2].rstrip().endswith(b"data: [DONE]"), rs[0][2][-200:])

    def refused(self, raw, status=400, fragment=""):
        buf = exchange(self.server.port, raw)
        rs = parse_responses(buf)
        self.assertEqual(len(rs), 1, buf[:400])  # answered once, then closed: nothing smuggled through
        self.assertEqual(rs[0][0], status, buf[:400])
        self.assertEqual(rs[0][1].get("connection"), "close")
        err = json.loads(rs[0][2])["error"]
        self.assertIn(fragment, err["message"])
        return err

    def test_conflicting_content_lengths_are_refused(self):
        body = b'{"content": "hi"}'
        smuggled = get("/v1/models")
        for lengths in ((len(body), len(body) + len(smuggled)), (len(body), len(body))):
            raw = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" +
                   b"".join(b"Content-Length: %d\r\n" % n for n in lengths) + b"\r\n" + body + smuggled)
            self.refused(raw, 400, "Content-Length")
        self.refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello", 400, "Content-Length")
        self.refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length")

    def test_length_with_transfer_encoding_is_refused(self):
        raw = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"0\r\n\r\n")
        self.refused(raw, 400, "Transfer-Encoding")
        raw = b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
        self.refused(raw, 501, "gzip")
        raw = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"0\r\n\r\n")
        self.refused(raw, 400, "Transfer-Encoding")

    def test_malformed_header_lines_are_refused(self):
        self.refused(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n", 400, "before ':'")
        self.refused(b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", 400, "fold")
        self.refused(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\nX: y\r\n\r\n", 400, "bare")
        self.refused(b"GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, "':'")

    def test_chunked_request_body_is_accepted(self):
        body = json.dumps({"content": "hello world"}).encode()
        raw = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: close\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        rs = self.final(parse_responses(exchange(self.server.port, raw)))
        self.assertEqual(rs[0][0], 200)
        self.assertIn("tokens", json.loads(rs[0][2]))

    def test_bad_chunk_framing_closes_the_connection(self):
        smuggled = get("/v1/models")
        for framing in (b"zz\r\nhello\r\n0\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n", b"-5\r\nhello\r\n0\r\n\r\n",
                        b"ffffffffffffffffff\r\n"):
            raw = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + framing + smuggled)
            err = self.refused(raw, 400, "chunk")
            self.assertEqual(err["code"], "bad_http_framing")

    def test_chunked_body_past_the_limit_is_refused_while_reading(self):
        # --max-body-mb 1 (setUpClass): 3 chunks of 512 KiB; the 413 comes after the second
        # while the client is still sending, and the connection closes.
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        try:
            s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % (512 * 1024) + b"a" * (512 * 1024) + b"\r\n"
            buf = b""
            try:
                for _ in range(3):
                    s.sendall(chunk)
                while True:
                    got = s.recv(65536)
                    if not got:
                        break
                    buf += got
            except (ConnectionResetError, BrokenPipeError):
                pass
        finally:
            s.close()
        rs = parse_responses(buf)
        self.assertEqual([r[0] for r in rs], [413], buf[:300])
        self.assertIn("larger than", json.loads(rs[0][2])["error"]["message"])

    def test_post_without_length_is_answered_at_once(self):
        # No Content-Length, no Transfer-Encoding: the body is empty (RFC 9112 6.3), so the
        # answer (a 400: no JSON) comes without waiting for more bytes.
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        try:
            s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n\r\n")
            t0 = time.time()
            head = s.recv(65536)
            self.assertLess(time.time() - t0, 5)
            self.assertTrue(head.startswith(b"HTTP/1.1 400"), head[:200])
        finally:
            s.close()

    def test_get_with_body_then_pipelined_get(self):
        raw = b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" + get("/v1/models", close=True)
        rs = self.final(parse_responses(exchange(self.server.port, raw)))
        self.assertEqual([r[0] for r in rs], [200, 200])
        self.assertEqual(json.loads(rs[1][2])["object"], "list")
        raw = (b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
               get("/v1/models", close=True))
        rs = self.final(parse_responses(exchange(self.server.port, raw)))
        self.assertEqual([r[0] for r in rs], [200, 200])

    def test_body_arriving_late_after_a_large_pipelined_request(self):
        # The first request is > 64 KiB, so the connection's buffer moves its contents down
        # while the second one's body is still on its way.
        first = post("/tokenize", {"content": "word " * 30000})
        body = json.dumps({"content": "hello world"}).encode()
        second_head = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        try:
            s.sendall(first + second_head + body[:5])
            time.sleep(0.3)
            s.sendall(body[5:])
            buf = b""
            while True:
                got = s.recv(65536)
                if not got:
                    break
                buf += got
        finally:
            s.close()
        rs = self.final(parse_responses(buf))
        self.assertEqual([r[0] for r in rs], [200, 200], buf[:300])
        self.assertEqual(len(json.loads(rs[1][2])["tokens"]), len(self.server.post("/tokenize", {"content": "hello world"})[1]["tokens"]))

    def test_short_body_then_half_close_is_answered_at_once(self):
        t0 = time.time()
        raw = b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"content\":"
        rs = parse_responses(exchange(self.server.port, raw, half_close=True, timeout=10))
        self.assertLess(time.time() - t0, 5)  # not the 30 s read timeout
        self.assertEqual([r[0] for r in rs], [400], rs)
        self.assertIn("Content-Length", json.loads(rs[0][2])["error"]["message"])

    def test_gone_client_frees_its_non_streamed_slot(self):
        long_chat = dict(CHAT, max_tokens=100000)
        long_chat["messages"] = [{"role": "user", "content": "a long answer please"}]
        _, before = self.server.get("/health")
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        s.sendall(post("/v1/chat/completions", long_chat))
        time.sleep(0.5)
        s.close()  # gone without reading a byte
        # With one slot, this only completes once the abandoned generation let go of it.
        t0 = time.time()
        status, body = self.server.post("/v1/chat/completions", CHAT, timeout=60)
        self.assertEqual(status, 200, body)
        self.assertLess(time.time() - t0, 30)
        _, after = self.server.get("/health")
        self.assertEqual(after["requests"]["cancelled"], before["requests"]["cancelled"] + 1, after)


if __name__ == "__main__":
    unittest.main(verbosity=2)
