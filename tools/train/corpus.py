"""corpus.py — assembles the training corpus from Debian-packaged prose and code.

Every document gets a stable name; ~3 % of documents (by a SHA-1 hash of the name) are
held out for validation. Writes WORK/docs_train.jsonl, WORK/docs_val.jsonl
({"name","kind","source","text"} per line) and WORK/sources.json (bytes per source,
package, licence) for the model card.

    /usr/bin/python3 tools/train/corpus.py --work tools/train/work
"""
import argparse
import glob
import gzip
import hashlib
import json
import os
import subprocess
import sys

SPECIAL_STRINGS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
MAX_DOC_BYTES = 200_000

# name, kind, Debian package, licence
SOURCES = [
    ("kjv", "prose", "bible-kjv, bible-kjv-text", "public domain"),
    ("jargon", "prose", "dict-jargon", "public domain"),
    ("devil", "prose", "dict-devil", "public domain"),
    ("python-docs", "prose", "python3.11-doc", "PSF-2.0"),
    ("linux-docs", "prose", "linux-doc-6.1", "GPL-2.0"),
    ("python-stdlib", "code", "libpython3.11-stdlib, libpython3.11-minimal", "PSF-2.0"),
    ("libstdc++-headers", "code", "libstdc++-12-dev", "GPL-3.0 WITH GCC-exception-3.1"),
    ("glibc-headers", "code", "libc6-dev", "LGPL-2.1+"),
    ("linux-uapi-headers", "code", "linux-libc-dev", "GPL-2.0 WITH Linux-syscall-note"),
]


def clean(text):
    for s in SPECIAL_STRINGS:
        text = text.replace(s, "")
    return text


def read_text(path):
    opener = gzip.open if path.endswith(".gz") or path.endswith(".dz") else open
    with opener(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def kjv_docs():
    out = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, text=True,
                         check=True).stdout
    chapters = []
    title = None
    verses = []
    prev_blank = True
    for line in out.split("\n"):
        if not line.strip():
            prev_blank = True
            continue
        if prev_blank and not line.startswith(" "):
            if title:
                chapters.append((title, verses))
            title, verses = line.strip(), []
        elif line.startswith("  "):
            verses.append(line.strip())
        elif verses:
            verses[-1] += " " + line.strip()
        prev_blank = False
    if title:
        chapters.append((title, verses))
    for t, vs in chapters:
        yield "kjv/" + t, t + "\n\n" + "\n".join(vs) + "\n"


def dict_docs(name, path):
    text = read_text(path)
    paras = text.split("\n\n")
    chunk, n = [], 0
    size = 0
    for p in paras:
        chunk.append(p)
        size += len(p)
        if size > 4000:
            yield f"{name}/{n}", "\n\n".join(chunk).strip() + "\n"
            chunk, size, n = [], 0, n + 1
    if chunk:
        yield f"{name}/{n}", "\n\n".join(chunk).strip() + "\n"


def file_docs(name, paths, root):
    for p in sorted(paths):
        if not os.path.isfile(p) or os.path.islink(p):
            continue
        if os.path.getsize(p) > MAX_DOC_BYTES * 4:
            continue
        text = read_text(p)
        if text is None or not text.strip():
            continue
        text = text[:MAX_DOC_BYTES]
        yield name + "/" + os.path.relpath(p, root), text


def linux_doc_paths():
    root = "/usr/share/doc/linux-doc-6.1/Documentation"
    skip = ("translations/", "ABI/", "devicetree/", "output/", "sphinx")
    out = []
    for p in glob.glob(root + "/**/*", recursive=True):
        rel = os.path.relpath(p, root)
        if any(rel.startswith(s) for s in skip):
            continue
        if p.endswith((".rst.gz", ".txt.gz", ".rst", ".txt")):
            out.append(p)
    return root, out


def python_stdlib_paths():
    root = "/usr/lib/python3.11"
    out = []
    for p in glob.glob(root + "/**/*.py", recursive=True):
        rel = os.path.relpath(p, root)
        if rel.startswith(("site-packages", "dist-packages", "lib2to3/tests/data", "test/")):
            continue
        out.append(p)
    return root, out


def all_docs():
    yield from (("kjv", n, t) for n, t in kjv_docs())
    yield from (("jargon", n, t) for n, t in dict_docs("jargon", "/usr/share/dictd/jargon.dict.dz"))
    yield from (("devil", n, t) for n, t in dict_docs("devil", "/usr/share/dictd/devil.dict.dz"))
    root = "/usr/share/doc/python3.11/html/_sources"
    yield from (("python-docs", n, t) for n, t in
                file_docs("python-docs", glob.glob(root + "/**/*.rst.txt", recursive=True), root))
    root, paths = linux_doc_paths()
    yield from (("linux-docs", n, t) for n, t in file_docs("linux-docs", paths, root))
    root, paths = python_stdlib_paths()
    yield from (("python-stdlib", n, t) for n, t in file_docs("python-stdlib", paths, root))
    root = "/usr/include/c++/12"
    yield from (("libstdc++-headers", n, t) for n, t in
                file_docs("libstdc++-headers", glob.glob(root + "/**/*", recursive=True), root))
    root = "/usr/include"
    glibc = glob.glob(root + "/*.h") + glob.glob(root + "/x86_64-linux-gnu/**/*.h", recursive=True)
    glibc += glob.glob(root + "/sys/**/*.h", recursive=True) + glob.glob(root + "/bits/**/*.h", recursive=True)
    glibc = [p for p in glibc if "/linux/" not in p and "/asm" not in p]
    yield from (("glibc-headers", n, t) for n, t in file_docs("glibc-headers", set(glibc), root))
    uapi = glob.glob(root + "/linux/**/*.h", recursive=True) + glob.glob(root + "/asm-generic/*.h")
    yield from (("linux-uapi-headers", n, t) for n, t in file_docs("linux-uapi-headers", uapi, root))


def is_val(name, percent=3.0):
    h = int(hashlib.sha1(name.encode("utf-8")).hexdigest()[:8], 16)
    return (h % 10000) < percent * 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--val-percent", type=float, default=3.0)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    kinds = {s[0]: s[1] for s in SOURCES}
    stats = {s[0]: {"kind": s[1], "package": s[2], "license": s[3], "docs": 0, "bytes": 0,
                    "val_docs": 0, "val_bytes": 0} for s in SOURCES}
    with open(os.path.join(args.work, "docs_train.jsonl"), "w", encoding="utf-8") as ft, \
            open(os.path.join(args.work, "docs_val.jsonl"), "w", encoding="utf-8") as fv:
        for src, name, text in all_docs():
            text = clean(text)
            if not text.strip():
                continue
            val = is_val(name, args.val_percent)
            rec = {"name": name, "kind": kinds[src], "source": src, "text": text}
            (fv if val else ft).write(json.dumps(rec, ensure_ascii=False) + "\n")
            st = stats[src]
            nbytes = len(text.encode("utf-8"))
            st["docs"] += 1
            st["bytes"] += nbytes
            if val:
                st["val_docs"] += 1
                st["val_bytes"] += nbytes
    with open(os.path.join(args.work, "sources.json"), "w") as f:
        json.dump(stats, f, indent=2)
    for k, v in stats.items():
        print(f"{k:20s} {v['kind']:5s} docs {v['docs']:6d} bytes {v['bytes']/1e6:7.2f} MB "
              f"(val {v['val_docs']} docs, {v['val_bytes']/1e6:.2f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
