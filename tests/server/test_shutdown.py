"""tests/server/test_shutdown.py — graceful shutdown of `nextn serve`.

SIGTERM while a stream is in flight: the server stops accepting connections, the
stream still ends cleanly (a final chunk with finish_reason, then [DONE]) and the
process exits 0. An idle server also exits 0 on SIGINT. A client that holds a half-sent
request head or body does not hold the process: it exits 0 within the grace (the read
timeout, 30 s, does not apply).
"""
import json
import os
import re
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, check  # noqa: E402


def main():
    with Server("--shutdown-grace", "1") as s:
        body = {"messages": [{"role": "user", "content": "Count forever"}], "max_tokens": 3000, "temperature": 0,
                "ignore_eos": True, "stream": True}
        data = json.dumps(body).encode()
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        buf = b""
        while buf.count(b"data: ") < 3:
            buf += sock.recv(4096)
        s.proc.send_signal(signal.SIGTERM)
        # Read the rest of the stream until the server closes the connection.
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        sock.close()
        text = buf.decode("utf-8", "replace")
        check("data: [DONE]" in text, f"stream not ended cleanly: ...{text[-300:]!r}")
        frames = re.findall(r"data: (\{[^\r\n]*\})", text)
        last = json.loads(frames[-1])
        check(last["choices"][0]["finish_reason"] in ("length", "stop"), last)
        check(s.proc.wait(60) == 0, f"exit code {s.proc.returncode}")
        # The listening socket is closed.
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
            refused = False
        except OSError:
            refused = True
        check(refused, "server still accepts connections after exit")
        check("received SIGTERM" in s.read_log(), "no shutdown log line")

    for partial in (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le",
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess",
                    b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nab"):
        with Server("--shutdown-grace", "1") as s:
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
            sock.sendall(partial)
            time.sleep(0.3)
            t0 = time.time()
            s.proc.send_signal(signal.SIGTERM)
            code = s.proc.wait(60)
            waited = time.time() - t0
            sock.close()
            check(code == 0, f"exit code {code} with a half-sent request {partial[-20:]!r}")
            # 1 s of grace + 1 s promised; 5 s leaves room for a loaded machine (it was 30 s).
            check(waited < 5, f"exit took {waited:.1f} s with a half-sent request {partial[-20:]!r}")

    with Server() as s:
        status, _ = s.get("/health")
        check(status == 200, status)
        s.proc.send_signal(signal.SIGINT)
        check(s.proc.wait(60) == 0, f"SIGINT exit code {s.proc.returncode}")
    print("test_shutdown: ok")


if __name__ == "__main__":
    main()
