"""tests/server/test_bad_flags.py — a flag value nextn cannot run with stops it at start.

Each value here was once accepted: the server started and then hung on the first request,
ignored SIGTERM, listened elsewhere than reported, or used a NaN. Now each exits 2 at once
with a message naming the flag, before anything loads (a timeout here means it started).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import BIN, check  # noqa: E402

SERVE = [
    ("--threads", "-1"), ("--threads", "0"), ("--temp", "-1"), ("--temp", "nan"), ("--top-p", "2"),
    ("--min-p", "nan"), ("--repeat-penalty", "0"), ("--queue-size", "-1"), ("--max-body-mb", "-1"),
    ("--shutdown-grace", "-1"), ("--draft-vocab", "-1"), ("--template-max-depth", "-1"),
    ("--template-timeout", "nan"), ("--spec-synthetic-accept", "nan"), ("--port", "70000"),
    ("--kv-group-size", "0"), ("--kv-group-size", "7"), ("--kv-group-size", "-64"), ("--turbo-after", "-1"),
    ("--turbo-keep-recent", "-1"), ("--ctx-size", "-5"), ("--parallel", "0"), ("--max-tokens", "0"),
    ("--grammar-max-stacks", "-1"), ("--schema-max-depth", "100000"), ("--prefill-size", "0"),
    ("--top-k", "-3"), ("--temp", "inf"), ("--top-p", "1e999"),
]
GENERATE = [("--temp", "nan"), ("--top-p", "-0.5"), ("--repeat-penalty", "0"), ("--presence-penalty", "nan"),
            ("--n-predict", "-2"), ("--repeat", "0"), ("--threads", "-1")]


def main():
    for command, cases in (("serve", SERVE), ("generate", GENERATE)):
        for flag, value in cases:
            extra = ["--port", "0"] if command == "serve" and flag != "--port" else []
            extra += ["--prompt", "x"] if command == "generate" else []
            try:
                p = subprocess.run([BIN, command, *extra, flag, value], capture_output=True, text=True, timeout=20)
            except subprocess.TimeoutExpired:
                check(False, f"{command} {flag} {value}: started instead of refusing the value")
            check(p.returncode == 2, f"{command} {flag} {value}: exit {p.returncode}, stderr {p.stderr[-300:]}")
            check(flag in p.stderr, f"{command} {flag} {value}: the message does not name the flag: {p.stderr[-300:]}")
    print(f"test_bad_flags: ok ({len(SERVE) + len(GENERATE)} values refused)")


if __name__ == "__main__":
    main()
