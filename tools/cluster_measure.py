#!/usr/bin/env python3
"""tools/cluster_measure.py — the cluster measurements of docs/cluster.md that `nextn bench`
does not make: what the balancer adds to each request, and the time to first token of a
conversation's second turn (which prefix affinity should make a prefix-cache hit).

  tools/cluster_measure.py latency --direct http://127.0.0.1:PORT --balanced http://127.0.0.1:8080 [-n 2000]
      p50/p90/p99 of GET /v1/models on one kept-alive connection, straight to a replica
      and through HAProxy, alternating in blocks of 100 so drift hits both alike.
  tools/cluster_measure.py ttft --url http://127.0.0.1:8080 [--conversations 12]
      Conversations one after another (a ~1000-token first turn, then a short question);
      prints the median time to the first streamed token of turn 1 and of turn 2.
"""
import argparse
import http.client
import json
import statistics
import sys
import time
import urllib.parse


def connect(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        sys.exit(f"cluster_measure: expected http://HOST:PORT, got {url!r}")
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=120)


def get_ms(conn, path):
    t0 = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"cluster_measure: GET {path}: HTTP {r.status}")
    return (time.perf_counter() - t0) * 1e3


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency(args):
    direct, balanced = connect(args.direct), connect(args.balanced)
    times = {"direct": [], "balanced": []}
    for _ in range(20):  # warm both connections (and HAProxy's to the replica)
        get_ms(direct, "/v1/models")
        get_ms(balanced, "/v1/models")
    for _ in range(max(1, args.n // 100)):
        for name, conn in (("direct", direct), ("balanced", balanced)):
            times[name] += [get_ms(conn, "/v1/models") for _ in range(100)]
    for name, xs in times.items():
        print(f"{name:9s} n={len(xs)} p50={pct(xs, .5):.3f} ms p90={pct(xs, .9):.3f} ms p99={pct(xs, .99):.3f} ms")
    print(f"added p50: {pct(times['balanced'], .5) - pct(times['direct'], .5):.3f} ms")


def first_token_ms(url, messages, max_tokens):
    """Streams one chat answer; returns (ms to the first content token, the answer, replica)."""
    conn = connect(url)
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        sys.exit(f"cluster_measure: HTTP {r.status}: {r.read()[:200]!r}")
    first, text = None, ""
    for line in r:
        line = line.decode().strip()
        if line == "data: [DONE]":
            break
        if line.startswith("data: "):
            for c in json.loads(line[6:]).get("choices", []):
                piece = (c.get("delta") or {}).get("content") or ""
                if piece and first is None:
                    first = (time.perf_counter() - t0) * 1e3
                text += piece
    conn.close()
    return first, text, r.getheader("X-Nextn-Replica")


def ttft(args):
    words = ("package archive mirror release stable testing kernel module service socket timer journal "
             "network bridge firewall volume partition filesystem user group shell script").split()
    turn1, turn2, same = [], [], 0
    for c in range(args.conversations):
        # A long first turn (its prefill is what the second turn can reuse), distinct per run.
        context = " ".join(words[(c * 7 + i * 3) % len(words)] for i in range(args.words))
        messages = [{"role": "system", "content": "You are a Debian administrator. Answer briefly."},
                    {"role": "user", "content": f"Run {time.time_ns()} conversation {c}. Notes: {context}\n"
                                                "Summarise the notes."}]
        t1, answer, r1 = first_token_ms(args.url, messages, args.max_tokens)
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Which word comes first?"}]
        t2, _, r2 = first_token_ms(args.url, messages, args.max_tokens)
        turn1.append(t1)
        turn2.append(t2)
        same += r1 == r2
    print(f"turn 1 TTFT median {statistics.median(turn1):.1f} ms; turn 2 TTFT median {statistics.median(turn2):.1f} ms "
          f"(min {min(turn2):.1f}, max {max(turn2):.1f}); turn 2 on turn 1's replica: {same}/{args.conversations}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("latency")
    a.add_argument("--direct", required=True)
    a.add_argument("--balanced", required=True)
    a.add_argument("-n", type=int, default=2000)
    b = sub.add_parser("ttft")
    b.add_argument("--url", required=True)
    b.add_argument("--conversations", type=int, default=12)
    b.add_argument("--words", type=int, default=800)
    b.add_argument("--max-tokens", type=int, default=16)
    args = p.parse_args()
    latency(args) if args.cmd == "latency" else ttft(args)


if __name__ == "__main__":
    main()
