"""tests/server/bench_overhead.py — server overhead and concurrency benchmark (not a test).

  /usr/bin/python3 tests/server/bench_overhead.py [--model DIR] [--tokens N] [--threads T] [--repeat R]

1. Decode tok/s of `nextn generate` vs the same prompt through `nextn serve`
   (one streaming client; server-side timings.predicted_per_second and the client's
   own clock: tokens after the first / time after the first token).
2. CPU seconds per decoded token (robust to a busy machine): `nextn generate`
   (rusage of the child) vs the server process (/proc/PID/stat) for one streaming
   client, each as (cpu(N tokens) - cpu(1 token)) / (N - 1), so loading and prefill
   cancel out; the difference is the HTTP/SSE/JSON/detokenization cost per token.
3. Aggregate tok/s with 1, 2, 4, 8 concurrent streaming clients (--parallel 8):
   all completion tokens / wall time from first request to last [DONE].
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import BIN, SRC, Server, checkpoint  # noqa: E402

PROMPT = "The history of the printing press begins"


def generate_tps(model, tokens, threads):
    out = subprocess.run([BIN, "generate", "--model", model, "--prompt", PROMPT, "-n", str(tokens), "--ignore-eos",
                          "--threads", str(threads), "-q"], capture_output=True, text=True, check=True)
    m = re.search(r"decode: (\d+) tokens, ([\d.]+) tok/s", out.stdout + out.stderr)
    return float(m.group(2))


def generate_cpu(model, tokens, threads):
    proc = subprocess.Popen([BIN, "generate", "--model", model, "--prompt", PROMPT, "-n", str(tokens), "--ignore-eos",
                             "--threads", str(threads), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def process_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """CPU seconds per thread of a process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return out


def http_share(model, tokens, repeat):
    """CPU of every server thread but the busiest (the engine thread, 1 compute thread)
    as a fraction of the engine thread's CPU, over `repeat` single-client streams."""
    with Server("--threads", "1", "--ctx-size", str(tokens + 64), model=model) as s:
        stream_once(s.url, 8)
        before = thread_cpu(s.proc.pid)
        for _ in range(repeat):
            stream_once(s.url, tokens)
        after = thread_cpu(s.proc.pid)
    delta = {t: after[t] - before.get(t, 0.0) for t in after}
    engine = max(delta.values())
    return (sum(delta.values()) - engine) / engine, engine


def cpu_per_token(model, tokens, threads, repeat):
    """(generate, serve) CPU seconds per decoded token, medians over `repeat`."""
    gen, srv = [], []
    with Server("--threads", str(threads), "--ctx-size", str(tokens + 64), model=model) as s:
        stream_once(s.url, 8)
        for _ in range(repeat):
            g_n, g_1 = generate_cpu(model, tokens, threads), generate_cpu(model, 1, threads)
            gen.append((g_n - g_1) / (tokens - 1))
            c0 = process_cpu(s.proc.pid)
            stream_once(s.url, tokens)
            c1 = process_cpu(s.proc.pid)
            stream_once(s.url, 1)
            c2 = process_cpu(s.proc.pid)
            srv.append(((c1 - c0) - (c2 - c1)) / (tokens - 1))
    return statistics.median(gen), statistics.median(srv)


def stream_once(url, tokens):
    body = {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = last = None
    timings = usage = None
    with urllib.request.urlopen(req, timeout=600) as r:
        buf = b""
        for chunk in iter(lambda: r.read1(65536), b""):
            buf += chunk
            while b"\n\n" in buf:
                frame, buf = buf.split(b"\n\n", 1)
                if not frame.startswith(b"data: {"):
                    continue
                e = json.loads(frame[6:])
                now = time.perf_counter()
                if e.get("choices") and e["choices"][0].get("text"):
                    first = first or now
                    last = now
                if "timings" in e:
                    timings = e["timings"]
                if e.get("usage"):
                    usage = e["usage"]
    n = usage["completion_tokens"]
    client_tps = (n - 1) / (last - first) if last and first and last > first else 0.0
    return {"server_tps": timings["predicted_per_second"], "client_tps": client_tps, "tokens": n,
            "t0": t0, "t_end": time.perf_counter()}


def main():
    ap = argparse.ArgumentParser()
    default_model = os.path.join(SRC, "models", "nextn-tiny")
    ap.add_argument("--model", default=default_model if os.path.exists(default_model) else None)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    model = a.model or checkpoint()
    print(f"model {model}, {a.tokens} tokens, {a.threads} threads, median of {a.repeat}")

    with Server("--parallel", "8", "--threads", str(a.threads), "--ctx-size", str(a.tokens + 64), model=model) as s:
        stream_once(s.url, 8)  # warm-up
        gen, single = [], []
        for _ in range(a.repeat):  # interleaved, so load drift hits both alike
            gen.append(generate_tps(model, a.tokens, a.threads))
            single.append(stream_once(s.url, a.tokens))
        g = statistics.median(gen)
        srv = statistics.median(r["server_tps"] for r in single)
        cli = statistics.median(r["client_tps"] for r in single)
        print(f"nextn generate      : {g:8.1f} tok/s")
        print(f"serve (server clock): {srv:8.1f} tok/s  ({100 * (srv / g - 1):+.1f}%)")
        print(f"serve (client clock): {cli:8.1f} tok/s  ({100 * (cli / g - 1):+.1f}%)")
        print("clients | aggregate tok/s | per-client tok/s (server)")  # noqa
        for k in (1, 2, 4, 8):
            results = [None] * k

            def run(i):
                results[i] = stream_once(s.url, a.tokens)

            threads = [threading.Thread(target=run, args=(i,)) for i in range(k)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            total = sum(r["tokens"] for r in results)
            per = statistics.mean(r["server_tps"] for r in results)
            print(f"{k:7d} | {total / wall:15.1f} | {per:8.1f}")
    cpu_section(model, a.tokens, a.repeat)


def cpu_section(model, tokens, repeat):
    g, v = cpu_per_token(model, tokens, 1, repeat)
    print(f"CPU per token, 1 thread: generate {g * 1e3:.3f} ms, serve {v * 1e3:.3f} ms ({100 * (v / g - 1):+.1f}%)")
    share, engine = http_share(model, tokens, repeat)
    print(f"HTTP-side CPU (all server threads but the engine's) = {100 * share:.2f}% of the engine thread's "
          f"{engine:.2f} s over {repeat} x {tokens} streamed tokens")


if __name__ == "__main__":
    main()
