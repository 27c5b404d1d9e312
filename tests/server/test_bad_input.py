"""tests/server/test_bad_input.py — no input may crash or hang `nextn serve`.

Sends well over 100 malformed requests (truncated bodies, wrong types, huge numbers,
invalid UTF-8, deep nesting, oversize bodies, garbage HTTP, unknown routes/methods)
and checks each gets a 4xx OpenAI error object; then checks the server still gives
the same greedy answer as before the abuse.
"""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, check  # noqa: E402

GOOD = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 12, "temperature": 0,
        "ignore_eos": True}


def raw_http(port, data, timeout=10):
    """Sends raw bytes; returns the status code (0 if the server just closed the connection)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    if not buf.startswith(b"HTTP/1.1 "):
        return 0
    return int(buf[9:12])


def bodies():
    """(description, raw body bytes) pairs that are all invalid for /v1/chat/completions."""
    good = json.dumps(GOOD).encode()
    out = []
    for cut in range(1, len(good) - 1, max(1, len(good) // 30)):  # ~30 truncations
        out.append((f"truncated at {cut}", good[:cut]))
    wrong_types = {
        "messages": ["x", 1, {}, [1], [{"role": 1, "content": "x"}], [{"role": "user", "content": 5}],
                     [{"role": "user", "content": [{"type": "text"}]}], [{"role": "user", "content": [1]}],
                     [{"content": "x"}], None],
        "max_tokens": ["10", -1, 0, 1e300, 2.5, True, [1], 99999999999999999999],
        "max_completion_tokens": [-5, "x"],
        "logit_bias": ["x", [1], {"a": 1}, {"-1": 1}, {"1": 101}, {"1": "x"}, {"99999999": -100}],
        "temperature": ["hot", -0.1, 1e309 if False else 1e300, [0], {"a": 1}],
        "top_p": [0, 1.5, "x"],
        "top_k": ["x", 1.5, -2],
        "min_p": [2, -1],
        "repetition_penalty": [0, -1, "x"],
        "presence_penalty": [5, "x"],
        "frequency_penalty": [-5],
        "stop": [5, [1], {"a": "b"}, ["x"] * 100],
        "seed": ["x", 1.5, 1e30],
        "n": [2, 0, "1"],
        "stream": ["yes", 1],
        "stream_options": ["x", {"include_usage": "yes"}],
        "logprobs": ["x"],
        "top_logprobs": [50, -1, "x"],
        "tools": ["x", [1], [{"type": "function"}], [{"type": "function", "function": {"name": 5}}]],
        "tool_choice": ["maybe", 5, {"type": "function", "function": {}}],
        "chat_template_kwargs": ["x", [1]],
        "kv_bits": [3, 16, "8", 0],
        "kv_group_size": [7, "64"],
        "num_draft_tokens": [-1, 100, "x"],
        "speculative": ["no"],
        "model": [5, "no-such-model"],
    }
    for field, values in wrong_types.items():
        for v in values:
            b = dict(GOOD)
            if field == "kv_group_size":
                b["kv_bits"] = 8
            b[field] = v
            out.append((f"{field}={json.dumps(v)[:40]}", json.dumps(b).encode()))
    out += [
        ("empty", b""),
        ("null", b"null"),
        ("array", b"[1,2,3]"),
        ("string", b"\"hello\""),
        ("number", b"12"),
        ("invalid utf-8 in string", b'{"messages":[{"role":"user","content":"\xff\xfe\xfd"}]}'),
        ("invalid utf-8 raw", b"\xc3\x28\xa0\xa1"),
        ("deep arrays", b"[" * 100000 + b"]" * 100000),
        ("deep objects", b'{"a":' * 5000 + b"1" + b"}" * 5000),
        ("deep in messages", b'{"messages":' + b"[" * 3000 + b"]" * 3000 + b"}"),
        ("huge number", b'{"messages":[{"role":"user","content":"x"}],"max_tokens":1' + b"0" * 5000 + b"}"),
        ("nan", b'{"messages":[{"role":"user","content":"x"}],"temperature":NaN}'),
        ("trailing garbage", json.dumps(GOOD).encode() + b"xyz"),
        ("binary", bytes(range(256))),
        ("nul bytes", b"\x00" * 100),
        ("lone surrogate escape", b'{"messages":[{"role":"user","content":"\\ud800"}]}'),
        ("duplicate garbage keys", b'{"messages":1,"messages":2}'),
        ("prompt overflow", json.dumps({"messages": [{"role": "user", "content": "word " * 2000}]}).encode()),
    ]
    return out


def main():
    with Server("--ctx-size", "512", "--max-body-mb", "1") as s:
        status, before = s.post("/v1/chat/completions", GOOD)
        check(status == 200, before)
        reference = before["choices"][0]["message"]["content"]

        n = 0
        for desc, raw in bodies():
            status, resp = s.request("POST", "/v1/chat/completions", raw=raw)
            n += 1
            check(status in (400, 404, 413), f"{desc}: status {status} {str(resp)[:200]}")
            check(isinstance(resp, dict) and "message" in resp.get("error", {}), f"{desc}: no error object: {resp}")
            check(s.proc.poll() is None, f"server died after {desc}")

        # logit_bias -100 bans the greedy answer's first token, in chat too.
        status, toks = s.post("/tokenize", {"content": reference})
        check(status == 200 and toks["tokens"], toks)
        first = toks["tokens"][0]
        status, banned = s.post("/v1/chat/completions", dict(GOOD, logit_bias={str(first): -100}))
        check(status == 200, banned)
        status, btoks = s.post("/tokenize", {"content": banned["choices"][0]["message"]["content"]})
        check(not btoks["tokens"] or btoks["tokens"][0] != first, f"banned token {first} still first: {banned}")

        # A field inside messages[i] is named with its path.
        for field in ("name", "tool_call_id"):
            status, resp = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi", field: 5}]})
            n += 1
            check(status == 400 and resp["error"]["param"] == f"messages[0].{field}", f"{field}: {status} {resp}")

        # Completions-specific garbage.
        for p in [None, 5, [], [[]], [1, "a"], [-1], [10 ** 12], ["a", "b"], {"x": 1}, [[1], [2]]]:
            status, resp = s.post("/v1/completions", {"prompt": p, "max_tokens": 2})
            n += 1
            check(status == 400 and resp["error"]["param"] is not None, f"prompt={p}: {status} {resp}")

        # Other endpoints and methods.
        for method, path, raw in [("POST", "/tokenize", b"{}"), ("POST", "/tokenize", b'{"content":5}'),
                                  ("POST", "/detokenize", b'{"tokens":[-1]}'),
                                  ("POST", "/detokenize", b'{"tokens":[99999999]}'),
                                  ("POST", "/detokenize", b'{"tokens":"x"}'),
                                  ("GET", "/v1/chat/completions", None), ("DELETE", "/v1/models", None),
                                  ("GET", "/../../etc/passwd", None), ("GET", "/v1/" + "a" * 5000, None),
                                  ("PUT", "/v1/completions", b"{}")]:
            status, resp = s.request(method, path, raw=raw)
            n += 1
            check(400 <= status < 500, f"{method} {path}: {status} {resp}")

        # Oversize body (limit 1 MiB) and garbage at the HTTP level.
        status, resp = s.request("POST", "/v1/chat/completions", raw=b"{" + b" " * (3 << 20) + b"}")
        n += 1
        check(status == 413 and resp["error"]["code"] == "payload_too_large", (status, resp))
        for raw in [b"GARBAGE\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n{",
                    b"POST /v1/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"prompt\":",  # short body
                    b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 20000 + b"\r\n\r\n",
                    b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"]:  # a TLS hello
            status = raw_http(s.port, raw)
            n += 1
            check(status == 0 or 400 <= status < 500, f"raw {raw[:40]!r}: status {status}")
            check(s.proc.poll() is None, f"server died after raw {raw[:40]!r}")

        check(n >= 100, f"only {n} malformed requests sent")
        status, after = s.post("/v1/chat/completions", GOOD)
        check(status == 200 and after["choices"][0]["message"]["content"] == reference, after)
        status, h = s.get("/health")
        check(status == 200 and h["requests"]["active"] == 0, h)
        code = s.stop()
        check(code == 0, f"exit code {code}")
        print(f"test_bad_input: ok ({n} malformed requests)")


if __name__ == "__main__":
    main()
