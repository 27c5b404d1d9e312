# tools/checkpoint/tokenizer_files.py — a small, valid Hugging Face byte-level BPE tokenizer
# (tokenizer.json + tokenizer_config.json) for generated checkpoints: 256 byte symbols in
# GPT-2 bytes_to_unicode order, merges learned from a built-in text (merge k -> id 256+k),
# the Qwen2 pre-tokenizer (regex Split + ByteLevel), ByteLevel decoder, ChatML specials.
import json
import re
from collections import Counter

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Qwen3.5 vision-language checkpoints add these (their ids in config.json).
VISION_SPECIAL_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]

# The ChatML template, with Qwen3.5's rule for content lists: an image item (type "image",
# or an "image" / "image_url" key) renders <|vision_start|><|image_pad|><|vision_end|>,
# a text item its text.
VISION_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or 'image' in item or 'image_url' in item %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Gemma 4's image tokens: begin <|image>, soft token <|image|>, end <image|>.
GEMMA4_VISION_SPECIAL_TOKENS = ["<|image>", "<|image|>", "<image|>"]

# ChatML with Gemma 4's rule for image items: the template writes the soft token
# <|image|> alone; the server adds <|image> / <image|> around its expansion.
GEMMA4_VISION_CHAT_TEMPLATE = VISION_CHAT_TEMPLATE.replace(
    "<|vision_start|><|image_pad|><|vision_end|>", "<|image|>")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# The Qwen2 / Qwen3 pre-tokenizer regex (as it appears in their tokenizer.json).
QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                     r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# ASCII approximation of the regex above, used only to learn merges (any merge list is
# valid; this just makes the merges look like real ones).
_TRAIN_SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d|[^\r\n A-Za-z0-9]?[A-Za-z]+|[0-9]"
                          r"| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. A small model is trained on a little text,
and then it writes a little text of its own. The engine reads the weights from the disk,
maps them into memory, and runs the layers one after another. Each layer has an attention
block and a feed forward block, and each block is wrapped in a residual connection.
When the model is asked a question, it answers one token at a time. The answer is the
most likely token under greedy decoding, or a sampled token when the temperature is above
zero. Speculative decoding drafts a few tokens with a cheap model and checks them with
the large model in a single pass; the tokens that agree are kept and the rest are thrown
away. This makes the output identical to what the large model would have written alone.
There were three of them in the kitchen: the cook, the baker and the man who sold the
bread in the market on Monday, Tuesday and Friday. They talked about the weather, the
price of flour and the new road that was being built between the town and the river.
In the morning the sun rose over the hills and the light came through the window.

def forward(self, tokens, positions):
    hidden = self.embed(tokens)
    for layer in self.layers:
        hidden = layer(hidden, positions)
    return self.norm(hidden)

for (int i = 0; i < n; ++i) {
    sum += a[i] * b[i];
}
return sum;

import numpy as np
x = np.zeros((4, 8), dtype=np.float32)
print("hello, world", x.shape)
if value is None or len(value) == 0:
    raise ValueError("the value must not be empty")
"""


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode map, in its canonical order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def learn_merges(max_merges, text=TRAINING_TEXT):
    """Plain BPE over pre-tokenized words; each merge creates a new, unique string."""
    byte_map = dict(bytes_to_unicode())
    words = Counter()
    for piece in _TRAIN_SPLIT.findall(text):
        words["".join(byte_map[b] for b in piece.encode("utf-8"))] += 1
    seqs = {w: list(w) for w in words}
    known = set(ch for _, ch in bytes_to_unicode())
    merges = []
    while len(merges) < max_merges:
        pairs = Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        best = None
        for pair, n in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0])):
            if pair[0] + pair[1] not in known:
                best = pair
                break
        if best is None:
            break
        a, b = best
        merges.append(best)
        known.add(a + b)
        for w in words:
            s = seqs[w]
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


def tokenizer_size(vocab_size):
    """Number of ids the tokenizer uses for a model vocabulary (BPE + specials)."""
    return 256 + len(learn_merges(max(0, min(vocab_size, 1024) - 256 - len(SPECIAL_TOKENS)))) \
        + len(SPECIAL_TOKENS)


def build_tokenizer(vocab_size, extra_specials=()):
    """Returns (tokenizer_json_dict, special_token_ids: dict content -> id)."""
    budget = min(vocab_size, 1024) - 256 - len(SPECIAL_TOKENS) - len(extra_specials)
    if budget < 0:
        raise ValueError(f"vocab_size {vocab_size} is smaller than the 259 ids the tokenizer needs")
    merges = learn_merges(budget)
    vocab = {}
    for i, (_, ch) in enumerate(bytes_to_unicode()):
        vocab[ch] = i
    for k, (a, b) in enumerate(merges):
        vocab[a + b] = 256 + k
    next_id = 256 + len(merges)
    specials = {}
    added = []
    for content in SPECIAL_TOKENS + list(extra_specials):
        specials[content] = next_id
        added.append({"id": next_id, "content": content, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        next_id += 1
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            dict(byte_level)]},
        "post_processor": dict(byte_level),
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    return tok, specials


def tokenizer_config(specials, max_len, chat_template=CHAT_TEMPLATE):
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True} for c, i in specials.items()},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": chat_template,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def write_tokenizer(out_dir, vocab_size, max_len, vision=False):
    """Writes tokenizer.json + tokenizer_config.json; returns the special-token ids.
    vision: True or "qwen3_5" for Qwen3.5's vision specials and the template that renders
    image items; "gemma4" for Gemma 4's."""
    import os
    extra, template = (), CHAT_TEMPLATE
    if vision == "gemma4":
        extra, template = GEMMA4_VISION_SPECIAL_TOKENS, GEMMA4_VISION_CHAT_TEMPLATE
    elif vision:
        extra, template = VISION_SPECIAL_TOKENS, VISION_CHAT_TEMPLATE
    tok, specials = build_tokenizer(vocab_size, extra)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(specials, max_len, template), f, ensure_ascii=False, indent=2)
    return specials
