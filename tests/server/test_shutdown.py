"""tests/server/test_shutdown.py — graceful shutdown of `nextn serve`.

SIGTERM while a stream is in flight: the server stops accepting connections, the
stream still ends cleanly (a final chunk with finish_reason, then [DONE]) and the
process exits 0. An idle server also exits 0 on SIGINT.
"""
import json
import os
import re
import signal
import socket
import sys

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

    with Server() as s:
        status, _ = s.get("/health")
        check(status == 200, status)
        s.proc.send_signal(signal.SIGINT)
        check(s.proc.wait(60) == 0, f"SIGINT exit code {s.proc.returncode}")
    print("test_shutdown: ok")


if __name__ == "__main__":
    main()
