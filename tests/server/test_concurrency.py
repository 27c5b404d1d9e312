"""tests/server/test_concurrency.py — continuous batching seen from clients.

8 parallel streaming clients get exactly the greedy outputs they get one by one; a
client that disconnects mid-stream has its generation cancelled (the engine stops
generating for it and frees the slot); a full queue answers 503.
"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import Server, check, checkpoint, stream_text  # noqa: E402

PROMPTS = ["The quick brown fox", "Once upon a time", "def main():", "SELECT * FROM",
           "In the beginning", "Dear Sir,", "1, 2, 3,", "Hello"]


def body(i, **extra):
    return {"messages": [{"role": "user", "content": PROMPTS[i]}], "max_tokens": 20 + 3 * i, "temperature": 0,
            "ignore_eos": True, "stream": True, **extra}


def wait_for(fn, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    check(False, f"timed out waiting for {what}")


def open_stream(port, payload):
    """Raw socket streaming request; returns the socket after the headers were read."""
    data = json.dumps(payload).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


def read_some(sock, n_frames):
    buf = b""
    while buf.count(b"data: ") < n_frames:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def main():
    with Server("--parallel", "8", "--ctx-size", "512") as s:
        serial = []
        for i in range(8):
            ev = s.stream("/v1/chat/completions", body(i))
            check(ev[-1] == "[DONE]", ev[-2:])
            serial.append(stream_text(ev))
        check(any(serial), "all outputs empty")

        results = [None] * 8
        errors = []

        def worker(i):
            try:
                results[i] = stream_text(s.stream("/v1/chat/completions", body(i)))
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(not errors, errors)
        for i in range(8):
            check(results[i] == serial[i], f"client {i}: parallel {results[i]!r} != serial {serial[i]!r}")

    # With MTP drafting: 4 parallel streams equal the non-speculative greedy outputs,
    # and the timings carry the draft statistics.
    mimo = checkpoint("server-mimo", "--arch", "mimo")
    with Server("--parallel", "4", model=mimo) as s:
        plain = [stream_text(s.stream("/v1/chat/completions", body(i))) for i in range(4)]
    with Server("--parallel", "4", "--mtp", "--num-mtp-tokens", "2", model=mimo) as s:
        spec = [None] * 4
        threads = [threading.Thread(target=lambda i=i: spec.__setitem__(i, s.stream("/v1/chat/completions", body(i))))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(4):
            check(stream_text(spec[i]) == plain[i], f"MTP client {i}: {stream_text(spec[i])!r} != {plain[i]!r}")
            timings = [e["timings"] for e in spec[i] if isinstance(e, dict) and "timings" in e][0]
            check(timings.get("draft_n", 0) > 0 and len(timings["draft_acceptance_per_pos"]) == 2, timings)
        _, metrics = s.get("/metrics")
        check('nextn:spec_decode_num_accepted_tokens_per_pos_total{position="1"}' in metrics, metrics)

    # A long-running request (tens of thousands of tokens) keeps the single slot busy
    # for far longer than the checks below take, whatever the machine's speed.
    with Server("--parallel", "1", "--queue-size", "1", "--ctx-size", "32768") as s:
        long = body(1, max_tokens=30000)

        # Disconnect mid-stream: the generation stops long before max_tokens.
        _, h0 = s.get("/health")
        sock = open_stream(s.port, long)
        read_some(sock, 4)
        sock.close()
        wait_for(lambda: s.get("/health")[1]["requests"]["active"] == 0, "the cancelled request to finish")
        _, h1 = s.get("/health")
        generated = h1["tokens"]["generated_total"] - h0["tokens"]["generated_total"]
        check(generated < 30000, f"disconnected stream still generated {generated} tokens")
        check(h1["requests"]["cancelled"] >= 1, h1["requests"])

        # Bounded queue: 1 slot, 1 waiting place → the third concurrent request gets 503.
        a = open_stream(s.port, long)
        read_some(a, 2)  # A is decoding in the slot
        b = open_stream(s.port, long)
        wait_for(lambda: s.get("/health")[1]["requests"]["queued"] == 1, "B to be queued")
        status, err = s.post("/v1/chat/completions", {**long, "stream": False})
        check(status == 503 and err["error"]["type"] == "unavailable_error", (status, err))
        a.close()
        b.close()
        wait_for(lambda: s.get("/health")[1]["requests"]["active"] == 0 and
                 s.get("/health")[1]["requests"]["queued"] == 0, "A and B to be cancelled")
        status, ok = s.post("/v1/chat/completions", {**body(2), "stream": False})
        check(status == 200, ok)
    print("test_concurrency: ok")


if __name__ == "__main__":
    main()
