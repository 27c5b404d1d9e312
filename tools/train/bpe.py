"""bpe.py — byte-level BPE: training, encoding, and Hugging Face tokenizer.json export.

The tokenizer follows the Qwen2 design: NFC normalizer, a regex Split pre-tokenizer
(isolated), ByteLevel mapping (GPT-2's bytes_to_unicode order for the first 256 ids),
BPE merges where merge k creates id 256 + (number of distinct tokens so far), and the
special tokens only as `added_tokens` after the BPE ids.

Encoding here is the reference algorithm used to produce training ids: within each
pre-token, repeatedly merge the adjacent pair with the lowest merge rank (leftmost
occurrences first, non-overlapping), exactly as Hugging Face's BPE model does.
"""
import heapq
import json
import unicodedata

import regex

# Qwen2 / Qwen3 pre-tokenizer pattern (single digits, contractions, letters with one
# leading non-letter, punctuation runs, newline runs, whitespace).
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_SPLIT_RE = regex.compile(SPLIT_PATTERN)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added tokens that are not "special" (they are printed when decoding), as in Qwen3.
EXTRA_ADDED_TOKENS = ["<think>", "</think>"]

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table (order defines ids 0..255)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def normalize(text):
    return unicodedata.normalize("NFC", text)


def pretokenize(text):
    """Normalized text -> list of pre-token strings (covers the whole text)."""
    out = []
    pos = 0
    for m in _SPLIT_RE.finditer(text):
        if m.start() > pos:  # the pattern covers every character; keep gaps just in case
            out.append(text[pos:m.start()])
        out.append(m.group())
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def to_byte_chars(piece):
    return "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def train(word_counts, vocab_size, log=None):
    """Learn merges from {pre-token string: count} until the BPE vocab has vocab_size ids.

    Returns (vocab: {token string: id}, merges: [(a, b)]). Ties between equally frequent
    pairs go to the lexicographically smallest pair of token strings (deterministic).
    """
    # ids 0..255 follow bytes_to_unicode's insertion order
    vocab = {c: i for i, c in enumerate(BYTE_TO_CHAR.values())}
    id_to_str = list(vocab.keys())
    words = []
    counts = []
    for w, c in word_counts.items():
        bc = to_byte_chars(w)
        if len(bc) < 2:
            continue
        words.append([vocab[ch] for ch in bc])
        counts.append(c)
    pair_count = {}
    pair_where = {}
    for wi, syms in enumerate(words):
        c = counts[wi]
        for a, b in zip(syms, syms[1:]):
            p = (a, b)
            pair_count[p] = pair_count.get(p, 0) + c
            pair_where.setdefault(p, set()).add(wi)

    def key(p):
        return (-pair_count[p], id_to_str[p[0]], id_to_str[p[1]])

    heap = [(key(p), p) for p in pair_count]
    heapq.heapify(heap)
    merges = []
    while len(vocab) < vocab_size and heap:
        k, p = heapq.heappop(heap)
        if p not in pair_count or pair_count[p] <= 0:
            continue
        if k != key(p):  # stale entry: re-push with the current count
            heapq.heappush(heap, (key(p), p))
            continue
        a, b = p
        new_str = id_to_str[a] + id_to_str[b]
        if new_str in vocab:
            new_id = vocab[new_str]
        else:
            new_id = len(id_to_str)
            vocab[new_str] = new_id
            id_to_str.append(new_str)
        merges.append((id_to_str[a], id_to_str[b]))
        touched = set()
        for wi in list(pair_where.get(p, ())):
            syms = words[wi]
            c = counts[wi]
            # remove this word's old pairs
            for x, y in zip(syms, syms[1:]):
                q = (x, y)
                pair_count[q] -= c
                pair_where[q].discard(wi)
                touched.add(q)
            out = []
            i = 0
            n = len(syms)
            while i < n:
                if i + 1 < n and syms[i] == a and syms[i + 1] == b:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[wi] = out
            for x, y in zip(out, out[1:]):
                q = (x, y)
                pair_count[q] = pair_count.get(q, 0) + c
                pair_where.setdefault(q, set()).add(wi)
                touched.add(q)
        pair_count.pop(p, None)
        pair_where.pop(p, None)
        for q in touched:
            if q in pair_count:
                if pair_count[q] > 0:
                    heapq.heappush(heap, (key(q), q))
                else:
                    del pair_count[q]
                    pair_where.pop(q, None)
        if log and len(merges) % 1000 == 0:
            log(f"bpe: {len(merges)} merges, vocab {len(vocab)}")
    return vocab, merges


class Encoder:
    """Reference BPE encoder (Hugging Face semantics) with a per-pre-token cache."""

    def __init__(self, vocab, merges, added_tokens=()):
        self.vocab = vocab
        self.ranks = {tuple(m): i for i, m in enumerate(merges)}
        self.cache = {}
        self.added = {t: i for t, i in added_tokens}
        self.id_to_str = {i: s for s, i in vocab.items()}
        self.id_to_str.update({i: t for t, i in added_tokens})

    def encode_piece(self, piece):
        ids = self.cache.get(piece)
        if ids is not None:
            return ids
        syms = list(to_byte_chars(piece))
        ranks = self.ranks
        while len(syms) > 1:
            # merge the single leftmost occurrence of the lowest-ranked pair, then rescan
            best_i = -1
            best_rank = None
            for i in range(len(syms) - 1):
                r = ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank = r
                    best_i = i
            if best_i < 0:
                break
            syms[best_i:best_i + 2] = [syms[best_i] + syms[best_i + 1]]
        ids = [self.vocab[s] for s in syms]
        if len(self.cache) < 2_000_000:
            self.cache[piece] = ids
        return ids

    def encode(self, text):
        """Plain text (no special-token parsing) -> ids."""
        ids = []
        for piece in pretokenize(normalize(text)):
            ids.extend(self.encode_piece(piece))
        return ids

    def decode(self, ids):
        out = []
        for i in ids:
            s = self.id_to_str[int(i)]
            if int(i) in self.added.values():
                out.append(s.encode("utf-8"))
            else:
                out.append(bytes(CHAR_TO_BYTE[c] for c in s))
        return b"".join(out).decode("utf-8", errors="replace")


def added_token_ids(bpe_vocab_size):
    toks = SPECIAL_TOKENS + EXTRA_ADDED_TOKENS
    return [(t, bpe_vocab_size + i) for i, t in enumerate(toks)]


def tokenizer_json(vocab, merges):
    added = []
    for t, i in added_token_ids(len(vocab)):
        added.append({"id": i, "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": t in SPECIAL_TOKENS})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }


def tokenizer_config_json(bpe_vocab_size, max_len):
    decoder = {}
    for t, i in added_token_ids(bpe_vocab_size):
        decoder[str(i)] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                           "single_word": False, "special": t in SPECIAL_TOKENS}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def save(directory, vocab, merges, max_len):
    import os
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config_json(len(vocab), max_len), f, ensure_ascii=False, indent=2)


def load(directory):
    import os
    with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    merges = [tuple(m) for m in tj["model"]["merges"]]
    added = [(t["content"], t["id"]) for t in tj["added_tokens"]]
    return Encoder(vocab, merges, added)
