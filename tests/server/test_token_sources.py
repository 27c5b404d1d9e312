"""tests/server/test_token_sources.py — the per-token sources a streamed answer carries
(`nextn.token_sources`) agree with its timings: the entries marked "draft" are exactly
`timings.draft_n_accepted`, also when the answer ends inside a speculative step (the end
token, a stop string or max_tokens with accepted drafts after it), on the embedded chat
model with its MTP head.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import SRC, Server, check  # noqa: E402

MODEL = os.path.join(SRC, "models", "nextn-tiny-chat")


def main():
    ended_inside = 0
    with Server("--mtp", "--num-mtp-tokens", "3", model=MODEL) as s:
        for question in ("What is a compiler?", "How do I list files?", "What is Debian?"):
            for extra in ({}, {"stop": ["the"]}, {"stop": ["."]}, {"max_tokens": 7}):
                body = dict({"messages": [{"role": "user", "content": question}], "max_tokens": 200, "temperature": 0,
                             "stream": True, "nextn": {"token_sources": True}}, **extra)
                events = [e for e in s.stream("/v1/chat/completions", body) if isinstance(e, dict)]
                entries = [t for e in events for t in (e.get("choices") or [{}])[0].get("nextn", {}).get("tokens", [])]
                timings = [e for e in events if "timings" in e][-1]["timings"]
                drafted = sum(1 for t in entries if t.get("source") == "draft")
                check(drafted == timings.get("draft_n_accepted", 0),
                      f"{question} {extra}: {drafted} draft entries, draft_n_accepted {timings.get('draft_n_accepted')}")
                check(timings.get("draft_n", 0) > 0, f"{question} {extra}: nothing drafted: {timings}")
                # Per-position counts add up to the total.
                check(sum(timings["draft_accepted_per_pos"]) == timings["draft_n_accepted"], timings)
                ended_inside += int(len(entries) < timings["predicted_n"] or "stop" in extra)
    check(ended_inside > 0, "no answer ended inside a step: the test did not exercise the trimming")
    print("test_token_sources: ok")


if __name__ == "__main__":
    main()
