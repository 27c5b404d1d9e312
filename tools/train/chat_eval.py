"""chat_eval.py — measures a model's chat answers and its drafting through `nextn serve`.

  answers:   every held-out question of chat_data.py (val_questions.jsonl) through
             /v1/chat/completions at T = 0, max_tokens 128. An answer passes when it ends
             with an end-of-turn token before max_tokens (finish_reason "stop": the model's
             eos ids, <|im_end|> / <|endoftext|>) and mentions the question's subject
             (case-insensitive substring; for dotted Python names the last component).
  acceptance: the same questions with --mtp, per draft position, from each response's
             timings (draft_accepted_per_pos / draft_drafted_per_pos) at T = 0 and T = 0.7.
  speed:     decode tok/s (timings.predicted_per_second over all tokens) on the demo
             prompts, vanilla vs --mtp N = 1..3 (one server, per-request num_draft_tokens /
             speculative: false) vs ngram (its own server), interleaved over --rounds.

    /usr/bin/python3 tools/train/chat_eval.py --nextn build/nextn --model models/nextn-tiny-chat \
        --questions tools/train/work/chat/val_questions.jsonl --out eval_chat.json [--what answers,acceptance,speed]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

DEMO_PROMPTS = [
    "What does the ls command do?",
    "What does `os.path.join()` do in Python?",
    "What is a hacker?",
    "Define dictionary.",
    "What does the grep command do?",
    "How do I use json.dumps() in Python?",
]


class Server:
    def __init__(self, nextn, model, extra, threads):
        cmd = [nextn, "serve", "--model", model, "--port", "0", "--no-webui", "--threads", str(threads)] + extra
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        try:
            self.url = json.loads(line)["url"]
        except (ValueError, KeyError):
            self.p.kill()
            raise SystemExit(f"nextn serve did not start: {line!r}")
        for _ in range(600):
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:  # noqa: BLE001  (503 while loading)
                time.sleep(0.1)

    def chat(self, messages, **kw):
        body = json.dumps({"messages": messages, **kw}).encode()
        req = urllib.request.Request(self.url + "/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()


def mentions(subject, text):
    t = text.lower()
    s = subject.lower()
    if s in t:
        return True
    last = s.rsplit(".", 1)[-1]
    return "." in s and len(last) >= 3 and last in t


def answers(srv, questions, max_tokens=128, temperature=0.0, extra=None):
    rows = []
    for q in questions:
        r = srv.chat(q["messages"], max_tokens=max_tokens, temperature=temperature, seed=1, **(extra or {}))
        c = r["choices"][0]
        content = c["message"].get("content") or ""
        ended = c["finish_reason"] == "stop"
        rows.append({"source": q["source"], "subject": q["subject"], "question": q["messages"][-1]["content"],
                     "answer": content, "ended": ended, "mentions": mentions(q["subject"], content),
                     "tokens": r["usage"]["completion_tokens"], "timings": r.get("timings", {})})
    return rows


def summarize_answers(rows):
    by = {}
    for r in rows:
        for k in (r["source"], "all"):
            s = by.setdefault(k, {"n": 0, "ended": 0, "mentions": 0, "pass": 0})
            s["n"] += 1
            s["ended"] += r["ended"]
            s["mentions"] += r["mentions"]
            s["pass"] += r["ended"] and r["mentions"]
    return by


def acceptance(rows):
    acc, dr = {}, {}
    tokens = ms = 0
    for r in rows:
        t = r["timings"]
        for i, (a, d) in enumerate(zip(t.get("draft_accepted_per_pos", []), t.get("draft_drafted_per_pos", []))):
            acc[i + 1] = acc.get(i + 1, 0) + a
            dr[i + 1] = dr.get(i + 1, 0) + d
        tokens += t.get("predicted_n", 0)
        ms += t.get("predicted_ms", 0)
    return {"per_pos": {k: {"accepted": acc[k], "drafted": dr[k], "rate": acc[k] / max(dr[k], 1)} for k in sorted(acc)},
            "decode_tok_s": tokens / max(ms / 1000, 1e-9), "tokens": tokens}


def speed(nextn, model, threads, rounds, prompts, n_tokens=128):
    """Decode tok/s per configuration, rounds interleaved; each row = total tokens / total ms."""
    confs = {"vanilla": {"speculative": False}, "mtp1": {"num_draft_tokens": 1},
             "mtp2": {"num_draft_tokens": 2}, "mtp3": {"num_draft_tokens": 3}}
    res = {k: {"tokens": 0, "ms": 0.0, "per_round": []} for k in list(confs) + ["ngram"]}

    demo = []

    def run(srv, name, kw):
        tok = ms = 0
        for p in prompts:
            r = srv.chat([{"role": "user", "content": p}], max_tokens=n_tokens, temperature=0.0, **kw)
            if name == "mtp3" and len(demo) < len(prompts):
                t = r["timings"]
                demo.append({"question": p, "answer": r["choices"][0]["message"].get("content") or "",
                             "finish_reason": r["choices"][0]["finish_reason"],
                             "accepted_per_pos": t.get("draft_accepted_per_pos"),
                             "drafted_per_pos": t.get("draft_drafted_per_pos")})
            tok += r["timings"]["predicted_n"]
            ms += r["timings"]["predicted_ms"]
        res[name]["tokens"] += tok
        res[name]["ms"] += ms
        res[name]["per_round"].append(tok / (ms / 1000))

    for _ in range(rounds):
        srv = Server(nextn, model, ["--mtp", "--num-mtp-tokens", "3"], threads)
        try:
            srv.chat([{"role": "user", "content": prompts[0]}], max_tokens=16)  # warm-up, not counted
            for name, kw in confs.items():
                run(srv, name, kw)
        finally:
            srv.close()
        srv = Server(nextn, model, ["--spec-type", "ngram"], threads)
        try:
            run(srv, "ngram", {})
        finally:
            srv.close()
    for k, v in res.items():
        v["tok_s"] = v["tokens"] / (v["ms"] / 1000) if v["ms"] else 0.0
    base = res["vanilla"]["tok_s"]
    for k, v in res.items():
        v["ratio_vs_vanilla"] = v["tok_s"] / base if base else 0.0
    return res, demo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nextn", default="build/nextn")
    ap.add_argument("--model", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--what", default="answers,acceptance,speed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    qs = [json.loads(line) for line in open(args.questions, encoding="utf-8")]
    if args.limit:
        qs = qs[:args.limit]
    what = set(args.what.split(","))
    simd = os.environ.get("NEXTN_SIMD") or subprocess.run(
        [args.nextn, "perf", "--simd-targets"], capture_output=True, text=True).stdout.split()[0]
    out = {"model": args.model, "questions": len(qs), "load_before": os.getloadavg()[0],
           "threads": args.threads, "simd": f"SIMD target {simd}"}
    if "answers" in what:
        srv = Server(args.nextn, args.model, [], args.threads)
        try:
            rows = answers(srv, qs)
        finally:
            srv.close()
        out["answers"] = summarize_answers(rows)
        out["answer_rows"] = rows
        a = out["answers"]["all"]
        print(f"answers: {a['pass']}/{a['n']} pass ({a['ended']} ended, {a['mentions']} mention the subject)")
    if "acceptance" in what:
        out["acceptance"] = {}
        srv = Server(args.nextn, args.model, ["--mtp", "--num-mtp-tokens", "3"], args.threads)
        try:
            for temp in (0.0, 0.7):
                rows = answers(srv, qs, temperature=temp)
                if temp == 0.0 and "answers" not in what:
                    # greedy --mtp decodes the plain greedy tokens (tests/train/test_chat_model.py),
                    # so this pass also gives the answers
                    out["answers"] = summarize_answers(rows)
                    out["answer_rows"] = rows
                    out["answers_from"] = "the T = 0 --mtp pass (greedy --mtp = plain greedy)"
                acc = acceptance(rows)
                acc["answers"] = summarize_answers(rows)["all"]
                out["acceptance"][f"T={temp}"] = acc
                print(f"acceptance T={temp}: " + ", ".join(
                    f"pos{k} {v['accepted']}/{v['drafted']} ({100*v['rate']:.1f} %)" for k, v in acc["per_pos"].items()))
        finally:
            srv.close()
    if "speed" in what:
        out["speed"], out["demo_answers"] = speed(args.nextn, args.model, args.threads, args.rounds, DEMO_PROMPTS)
        out["demo_prompts"] = DEMO_PROMPTS
        print("speed: " + ", ".join(f"{k} {v['tok_s']:.1f} tok/s (x{v['ratio_vs_vanilla']:.2f})"
                                    for k, v in out["speed"].items()))
    out["load_after"] = os.getloadavg()[0]
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)


if __name__ == "__main__":
    main()
