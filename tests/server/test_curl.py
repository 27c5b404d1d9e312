"""tests/server/test_curl.py — `nextn serve` checked with curl.

Covers /health, /v1/models, /tokenize + /detokenize, chat and completions (plain and
SSE with include_usage), usage vs. /tokenize counts, stop strings against the
unstopped greedy text, per-request seeds, logprobs, kv_bits/speculative fields,
/metrics consistency, API key, CORS, 404/413 and context overflow errors.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import BIN, Server, check, checkpoint  # noqa: E402


def curl(url, *args, data=None):
    """Runs curl; returns (status, body text)."""
    cmd = ["curl", "-sS", "-w", "\n%{http_code}", url, *args]
    if data is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    r = subprocess.run(cmd, input=(json.dumps(data) if not isinstance(data, str) else data) if data is not None else None,
                       capture_output=True, text=True, timeout=120)
    body, _, status = r.stdout.rpartition("\n")
    return int(status), body


def curl_json(url, *args, data=None):
    status, body = curl(url, *args, data=data)
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


def sse_events(body):
    frames = body.split("\n\n")
    check(frames[-1] == "", f"SSE body must end with a blank line: {body[-50:]!r}")
    events = []
    for f in frames[:-1]:
        if f.startswith(":"):
            continue
        check(f.startswith("data: "), f"bad SSE frame {f!r}")
        payload = f[6:]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def error_check(status, body, want_status, param=None):
    check(status == want_status, f"want {want_status}, got {status}: {body}")
    check(isinstance(body, dict) and "error" in body, f"no error object: {body}")
    e = body["error"]
    for k in ("message", "type", "param", "code"):
        check(k in e, f"error object lacks {k}: {e}")
    if param is not None:
        check(e["param"] == param, f"error param {e['param']} != {param}")


def main():
    # Benchmark-only synthetic acceptance is refused without --benchmark-mode.
    r = subprocess.run([BIN, "serve", "--model", checkpoint(), "--port", "0", "--spec-synthetic-accept", "0.5"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--benchmark-mode" in r.stderr, (r.returncode, r.stderr))

    with Server("--ctx-size", "256", "--parallel", "2", "--max-body-mb", "1") as s:
        u = s.url
        check(s.ready["event"] == "ready" and s.ready["port"] == s.port, s.ready)
        check(s.url in s.human_line, f"human line lacks the URL: {s.human_line!r}")

        status, h = curl_json(u + "/health")
        check(status == 200 and h["status"] == "ready", h)
        check(h["memory"]["rss_bytes"] > 0 and h["memory"]["peak_rss_bytes"] >= h["memory"]["rss_bytes"], h)
        for k in ("type", "bytes_used", "compression_ratio"):
            check(k in h["kv_cache"], f"kv_cache.{k} missing: {h}")

        status, models = curl_json(u + "/v1/models")
        check(status == 200 and models["object"] == "list", models)
        model_id = models["data"][0]["id"]
        check(model_id == s.ready["model"], models)

        # Tokenize / detokenize round trip.
        text = "Hello, world! 123"
        status, tk = curl_json(u + "/tokenize", "-X", "POST", data={"content": text})
        check(status == 200 and len(tk["tokens"]) > 0, tk)
        status, dt = curl_json(u + "/detokenize", "-X", "POST", data={"tokens": tk["tokens"]})
        check(status == 200 and dt["content"] == text, dt)

        # Completions: usage.prompt_tokens equals the tokenizer's count; completion_tokens the timings'.
        body = {"model": model_id, "prompt": text, "max_tokens": 24, "temperature": 0, "ignore_eos": True}
        status, c = curl_json(u + "/v1/completions", data=body)
        check(status == 200 and c["object"] == "text_completion", c)
        status, tk_special = curl_json(u + "/tokenize", data={"content": text, "add_special": True})
        check(c["usage"]["prompt_tokens"] == len(tk_special["tokens"]), (c["usage"], tk_special))
        check(c["usage"]["completion_tokens"] == 24 and c["choices"][0]["finish_reason"] == "length", c)
        check(c["timings"]["predicted_n"] == 24, c["timings"])
        reference = c["choices"][0]["text"]

        # Same request streamed: identical text, usage chunk with choices [] right before [DONE].
        status, raw = curl(u + "/v1/completions", "-N", data={**body, "stream": True,
                                                             "stream_options": {"include_usage": True}})
        check(status == 200, raw)
        ev = sse_events(raw)
        check(ev[-1] == "[DONE]", ev[-3:])
        check(ev[-2]["choices"] == [] and ev[-2]["usage"]["completion_tokens"] == 24, ev[-2])
        streamed = "".join(e["choices"][0]["text"] for e in ev[:-2] if e["choices"])
        check(streamed == reference, f"stream {streamed!r} != {reference!r}")
        check("timings" in ev[-3] and ev[-3]["choices"][0]["finish_reason"] == "length", ev[-3])

        # Token-id prompts give the same continuation as the text prompt.
        status, c2 = curl_json(u + "/v1/completions", data={**body, "prompt": tk_special["tokens"]})
        check(status == 200 and c2["choices"][0]["text"] == reference, c2)

        # Stop strings: cut at the first occurrence, never emitted, finish_reason stop.
        stop = reference[len(reference) // 2: len(reference) // 2 + 2]
        if stop.strip() and len(stop) == 2:
            status, c3 = curl_json(u + "/v1/completions", data={**body, "stop": [stop]})
            want = reference[: reference.index(stop)]
            check(c3["choices"][0]["text"] == want, f"stop {stop!r}: {c3['choices'][0]['text']!r} != {want!r}")
            check(c3["choices"][0]["finish_reason"] == "stop", c3)

        # Chat (non-stream and stream agree), usage counts.
        chat = {"model": model_id, "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": [{"type": "text", "text": "Hi there"}]}],
                "max_tokens": 16, "temperature": 0, "ignore_eos": True}
        status, r = curl_json(u + "/v1/chat/completions", data=chat)
        check(status == 200 and r["object"] == "chat.completion", r)
        msg = r["choices"][0]["message"]
        check(msg["role"] == "assistant" and isinstance(msg["content"], str), msg)
        check(r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"], r)
        check(r["usage"]["completion_tokens"] == 16, r["usage"])
        status, raw = curl(u + "/v1/chat/completions", "-N", data={**chat, "stream": True})
        ev = sse_events(raw)
        check(ev[0]["choices"][0]["delta"].get("role") == "assistant", ev[0])
        check(ev[-1] == "[DONE]" and ev[-2]["choices"][0]["finish_reason"] == "length", ev[-2:])
        text_stream = "".join(e["choices"][0]["delta"].get("content") or ""
                              for e in ev[:-1] if e["choices"])
        check(text_stream == (msg["content"] or ""), f"{text_stream!r} vs {msg!r}")

        # Seeded sampling is reproducible per request.
        sampled = {**chat, "temperature": 1.0, "seed": 1234}
        a = curl_json(u + "/v1/chat/completions", data=sampled)[1]
        b = curl_json(u + "/v1/chat/completions", data=sampled)[1]
        check(a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"], (a, b))

        # Logprobs: greedy token is the top alternative.
        status, lp = curl_json(u + "/v1/chat/completions", data={**chat, "max_tokens": 4, "logprobs": True,
                                                                  "top_logprobs": 3})
        check(status == 200, lp)
        content = lp["choices"][0]["logprobs"]["content"]
        check(len(content) == 4, content)
        for entry in content:
            check(entry["logprob"] <= 0 and len(entry["top_logprobs"]) == 3, entry)
            check(abs(entry["top_logprobs"][0]["logprob"] - entry["logprob"]) < 1e-4, entry)

        # nextn extensions.
        status, r = curl_json(u + "/v1/chat/completions", data={**chat, "speculative": False, "num_draft_tokens": 0})
        check(status == 200, r)
        status, r = curl_json(u + "/v1/chat/completions", data={**chat, "kv_bits": 8})
        check(status == 200 and r["timings"].get("kv_type", "q8") == "q8", r)
        error_check(*curl_json(u + "/v1/chat/completions", data={**chat, "kv_bits": 3}), 400, "kv_bits")
        error_check(*curl_json(u + "/v1/chat/completions", data={**chat, "kv_bits": 4, "kv_group_size": 7}), 400,
                    "kv_group_size")
        error_check(*curl_json(u + "/v1/chat/completions", data={**chat, "n": 2}), 400, "n")
        error_check(*curl_json(u + "/v1/chat/completions", data={**chat, "temperature": "warm"}), 400, "temperature")

        # Errors: unknown route / model, oversize body, context overflow.
        error_check(*curl_json(u + "/v1/nothing"), 404)
        error_check(*curl_json(u + "/v1/chat/completions", data={**chat, "model": "no-such-model"}), 404, "model")
        big = json.dumps({"prompt": "x" * (2 << 20)})
        error_check(*curl_json(u + "/v1/completions", data=big), 413)
        status, e = curl_json(u + "/v1/completions", data={"prompt": "word " * 400, "max_tokens": 4})
        error_check(status, e, 400)
        check(e["error"]["n_ctx"] == 256 and e["error"]["n_prompt_tokens"] > 256, e)

        # /metrics agrees with what we generated.
        status, metrics = curl(u + "/metrics")
        check(status == 200, metrics)
        values = {}
        for line in metrics.splitlines():
            if line and not line.startswith("#"):
                name, _, v = line.rpartition(" ")
                values[name] = float(v)
        status, h = curl_json(u + "/health")
        for name in ("nextn:spec_decode_num_drafts_total", "nextn:spec_decode_num_draft_tokens_total",
                     "nextn:spec_decode_num_accepted_tokens_total", "nextn:requests_waiting",
                     "nextn:process_resident_memory_bytes", "nextn:kv_cache_bytes",
                     "nextn:kv_cache_compression_ratio", "nextn:prompt_tokens_total"):
            check(name in values, f"{name} missing from /metrics")
        check(values["nextn:generation_tokens_total"] == h["tokens"]["generated_total"], (values, h))
        check(values["nextn:generation_tokens_total"] >= 24 * 3 + 16 * 3, values)

    # API key: generation needs it, /health and /metrics stay open. CORS preflight.
    with Server("--api-key", "sekret", "--cors", "*") as s:
        u = s.url
        body = {"prompt": "hi", "max_tokens": 2}
        error_check(*curl_json(u + "/v1/completions", data=body), 401)
        error_check(*curl_json(u + "/v1/completions", "-H", "Authorization: Bearer wrong", data=body), 401)
        status, r = curl_json(u + "/v1/completions", "-H", "Authorization: Bearer sekret", data=body)
        check(status == 200, r)
        check(curl(u + "/health")[0] == 200 and curl(u + "/metrics")[0] == 200, "health/metrics must stay open")
        r = subprocess.run(["curl", "-sS", "-i", "-X", "OPTIONS", u + "/v1/chat/completions",
                            "-H", "Origin: http://example.com", "-H", "Access-Control-Request-Method: POST"],
                           capture_output=True, text=True)
        check(r.stdout.startswith("HTTP/1.1 204"), r.stdout)
        check("Access-Control-Allow-Origin: *" in r.stdout, r.stdout)
        code = s.stop()
        check(code == 0, f"exit code {code} after SIGTERM")
    print("test_curl: ok")


if __name__ == "__main__":
    main()
