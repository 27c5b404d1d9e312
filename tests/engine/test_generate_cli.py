#!/usr/bin/env python3
"""nextn generate: ids and the timing line, greedy equality through the
CLI for --mtp / --spec-type ngram / --draft-model, acceptance per position, bad flags."""
import os
import re
import subprocess
import sys

BIN = os.environ["NEXTN_BIN"]
SRC = os.environ["NEXTN_SOURCE_DIR"]
TMP = os.path.join(os.environ.get("NEXTN_TEST_TMP", "/tmp"), "generate_cli")


def checkpoint(name, *args):
    out = os.path.join(TMP, name)
    if not os.path.exists(os.path.join(out, "config.json")):
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools/make_checkpoint.py"), *args,
                        "--out", out, "--quiet"], check=True)
    return out


def generate(model, *args, expect_rc=0):
    p = subprocess.run([BIN, "generate", "--model", model, "--threads", "1", *args],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == expect_rc, (args, p.returncode, p.stdout, p.stderr)
    return p


TIMING = re.compile(r"^prompt: (\d+) tokens, [\d.]+ tok/s \| decode: (\d+) tokens, [\d.]+ tok/s"
                    r"(?: \| draft acceptance (\d+)/(\d+) \(([\d.]+)%\))?")


def parse(p):
    lines = p.stdout.strip().splitlines()
    ids = [int(x) for x in lines[0].split()]
    m = TIMING.match(lines[1])
    assert m, lines
    return ids, m, lines


def main():
    model = checkpoint("mimo", "--arch", "mimo", "--seed", "1")
    prompt = "3,17,42,99,5,17,42,99,5,17,42"
    ids, m, _ = parse(generate(model, "--prompt-tokens", prompt, "-n", "24", "--ignore-eos"))
    assert len(ids) == 24 and m.group(1) == "11" and m.group(2) == "24" and m.group(3) is None, (ids, m.groups())
    for flags in (["--mtp", "--num-mtp-tokens", "2"], ["--mtp", "--num-mtp-tokens", "auto"],
                  ["--spec-type", "ngram"], ["--draft-model", model, "--num-draft-tokens", "3"]):
        sids, sm, lines = parse(generate(model, "--prompt-tokens", prompt, "-n", "24", "--ignore-eos", *flags))
        assert sids == ids, (flags, sids, ids)
        assert sm.group(3) is not None, lines
        assert lines[2].startswith("acceptance per position: pos1 "), lines
    # self-draft accepts everything
    _, sm, _ = parse(generate(model, "--prompt-tokens", prompt, "-n", "24", "--ignore-eos", "--draft-model", model))
    assert sm.group(3) == sm.group(4) and float(sm.group(5)) == 100.0, sm.groups()
    # synthetic acceptance is stamped
    p = generate(model, "--prompt-tokens", prompt, "-n", "8", "--mtp", "--spec-synthetic-accept", "1")
    assert "SYNTHETIC" in p.stdout, p.stdout
    # text prompt prints text, not ids
    p = generate(model, "--prompt", "Hello", "-n", "4", "--mtp")
    assert p.stdout.startswith("Hello"), p.stdout
    # bad input: exit code 2 with a message
    for bad in (["--prompt-tokens", "1,x"], ["--prompt-tokens", "1", "--spec-type", "bogus"],
                ["--prompt-tokens", "1", "--mtp", "--num-mtp-tokens", "many"], ["-n", "3"]):
        p = generate(model, *bad, expect_rc=2)
        assert "error" in p.stderr, p.stderr
    print("generate CLI: OK")


if __name__ == "__main__":
    sys.exit(main())
