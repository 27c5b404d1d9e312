#!/usr/bin/python3
"""Assembles the tokenizer differential-test corpus (JSON lines) from Debian-packaged text.

Sources, in order (each file split into chunks of at most CHUNK bytes at line breaks):
  prose  /usr/share/common-licenses/*, /usr/share/doc/*/copyright, man pages (*.gz, raw roff)
  code   /usr/lib/python3.11/*.py (stdlib), /usr/include/**/*.h (C/C++ headers)
plus generated edge cases (CJK, emoji/ZWJ, combining marks, RTL, control characters, long
whitespace and digit runs, special-token look-alikes, invalid UTF-8 as {"hex": ...}).
Deterministic: sorted file lists, fixed quotas, fixed random seed. Files that are not UTF-8
are skipped. Every line is {"src": where, "text": s} or {"src": where, "hex": bytes}.

usage: make_corpus.py OUT.jsonl [--mb 5.5] [--edge-only]
Debian packages it reads (installed by scripts/setup.sh --tests or the base system):
base-files, libc6-dev, libstdc++-dev (via build-essential), libpython3.11-stdlib, man pages.
"""
import argparse
import glob
import gzip
import json
import os
import random
import sys

CHUNK = 6000


def chunks(text, limit=CHUNK):
    out, cur, size = [], [], 0
    for line in text.splitlines(keepends=True):
        b = len(line.encode())
        if cur and size + b > limit:
            out.append("".join(cur))
            cur, size = [], 0
        # Very long single lines are cut at a character boundary.
        while b > limit:
            cut = line[: limit // 4]
            out.append(cut)
            line = line[len(cut):]
            b = len(line.encode())
        cur.append(line)
        size += b
    if cur:
        out.append("".join(cur))
    return out


def read_text(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None


def take(paths, quota, tag, out):
    used = 0
    for p in paths:
        if used >= quota:
            break
        t = read_text(p)
        if not t or "\x00" in t:
            continue
        # U+FEFF: transformers.js' regex \s includes it, HF's Rust regex (and PCRE2) do not;
        # U+0085 the other way round. Known divergences of the JS reference, so the corpus
        # avoids them (tests/tokenizer/tokenizer_test.cc checks HF's behaviour instead).
        t = t.replace("\ufeff", "").replace("\x85", "")
        for c in chunks(t):
            out.append({"src": f"{tag}:{p}", "text": c})
            used += len(c.encode())
            if used >= quota:
                break
    return used


def edge_cases():
    rng = random.Random(1234)
    out = []

    def add(tag, text):
        out.append({"src": f"edge:{tag}", "text": text})

    cjk = "我们今天去公园散步吧。天气很好，阳光明媚！日本語のテキストも混ぜます、カタカナとひらがな。한국어 문장도 있습니다. 漢字仮名交じり文"
    for i in range(40):
        a = rng.randrange(len(cjk))
        add("cjk", cjk[a:] + " " + cjk[: a] + f" {i}")
    emoji = ["👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "😀", "🙈🙉🙊", "☕", "🐍", "#️⃣", "1️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
    for i in range(40):
        add("emoji", " ".join(rng.choice(emoji) + rng.choice(["", "word", " ", "!", "\n"]) for _ in range(12)))
    combining = ["e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "\u1100\u1161\u11a8", "Z\u0351\u0352\u0357\u0358\u035b",
                 "\u0915\u094d\u0937", "A\u030a", "\u212b", "\ufb01", "\u2460", "\uff21\uff22", "x\u20d7", "ﬃ", "Å"]
    for i in range(40):
        add("combining", "".join(rng.choice(combining) + rng.choice(["", " ", "s", "."]) for _ in range(20)))
    rtl = ["مرحبا بالعالم", "שלום עולם", "\u202bembedded\u202c", "\u200fRLM\u200e", "العربية 123 English", "עִבְרִית"]
    for i in range(30):
        add("rtl", " ".join(rng.choice(rtl) for _ in range(6)))
    controls = [chr(c) for c in list(range(0, 32)) + [0x7F, 0xA0, 0x2028, 0x2029, 0x200B, 0x200D, 0x2060, 0x3000]]
    for i in range(40):
        add("control", "".join(rng.choice(controls) + rng.choice(["a", "word", " ", "", "1"]) for _ in range(30)))
    for n in [1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, 33, 64, 100, 257, 1000]:
        add("spaces", "x" + " " * n + "y")
        add("spaces-end", "x" + " " * n)
        add("tabs", "\t" * n + "code")
        add("newlines", "a" + "\n" * n + "b")
        add("mixed-ws", (" \t\n\r " * n)[: n * 2] + "z")
        add("digits", "".join(str(rng.randrange(10)) for _ in range(n)))
        add("digits-words", "v" + "1234567890" * (n // 10 + 1) + " 3.14159e-10 0x" + "ff" * (n % 9))
    looks = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "im_start|>", "< |im_start|>",
             "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|reserved_special_token_5|>",
             "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<|User|>", "<｜tool▁call▁begin｜>",
             "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<unused7>", "<pad>", "<mask>", "[multimodal]",
             "<0x41>", "<0xZZ>", "</s>", "<s>", "<unk>", "<think>", "</think>", "<tool_call>", "▁▁", "▁", "<table>", "</td>",
             "<|fim_prefix|>", "<|vision_pad|>", "<start_of_image>"]
    for i in range(80):
        parts = []
        for _ in range(8):
            t = rng.choice(looks)
            r = rng.random()
            if r < 0.2:
                t = t[:-1]
            elif r < 0.3:
                t = t.upper()
            parts.append(t + rng.choice(["", " ", "\n", "text", "  ", "\t"]))
        add("special-lookalike", "".join(parts))
    # Mixed scripts and oddities.
    misc = ["naïve café", "ǅungla", "İstanbul", "straße", "ΣΊΣΥΦΟΣ", "Ωmega", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟙𝟚𝟛", "ⅻ", "½", "™", "…", "—", "„quotes“",
            "it's", "IT'S", "they'll", "we'RE", "don't", "x'd", "'''", "https://example.com/a?b=c&d=e#f", "foo_bar.baz()",
            "C++", "a\u00adb", "\U0001F600\u200d", "\ud7a3", "\u4e00\u9fa5\u3041\u30ff", "ｶﾀｶﾅ", "①②③"]
    for i in range(60):
        add("misc", " ".join(rng.choice(misc) for _ in range(15)))
    # Invalid UTF-8 in byte input.
    bad = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xf5\x80\x80\x80",
           b"\xff", b"\xfe\xff", b"\xe0\x80\x80", b"\xf4\x90\x80\x80", b"\xc3\x28", b"\xe2\x28\xa1"]
    for i in range(60):
        data = b""
        for _ in range(10):
            data += rng.choice([b"abc", " ".encode(), "é".encode(), "日本".encode(), "😀".encode(), b"\n"])
            data += rng.choice(bad)
        out.append({"src": "edge:invalid-utf8", "hex": data.hex()})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=5.5)
    ap.add_argument("--edge-only", action="store_true")
    args = ap.parse_args()
    lines = edge_cases()
    total = sum(len(l.get("text", "").encode()) + len(l.get("hex", "")) // 2 for l in lines)
    if not args.edge_only:
        budget = int(args.mb * 1e6) - total
        prose = sorted(glob.glob("/usr/share/common-licenses/*")) + \
            sorted(glob.glob("/usr/share/doc/*/copyright")) + \
            sorted(glob.glob("/usr/share/man/man1/*.gz")) + sorted(glob.glob("/usr/share/man/man3/*.gz"))
        py = sorted(glob.glob("/usr/lib/python3.11/*.py"))
        headers = sorted(glob.glob("/usr/include/**/*.h", recursive=True))
        total += take(prose, budget * 4 // 10, "prose", lines)
        total += take(py, budget * 3 // 10, "python", lines)
        total += take(headers, int(args.mb * 1e6) - total, "c", lines)
        if total < 5_000_000:
            sys.exit(f"make_corpus: only {total} bytes of text found (need >= 5 MB)")
    with open(args.out, "w", encoding="utf-8") as f:
        for l in lines:
            f.write(json.dumps(l, ensure_ascii=False) + "\n")
    print(f"make_corpus: {len(lines)} lines, {total} bytes -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
