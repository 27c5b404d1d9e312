"""chat_data.py — builds the chat tuning set from chat_sources.py and renders it with the
model's chat template (Jinja2, the template nextn serves), loss on assistant turns only.

Conversations: one question -> answer per entry (small sources repeated with other
phrasings), some with a system message, some with a second turn (a follow-up about the same
subject, e.g. a command's usage, or "And what about X?"), plus a few greetings. An entry is
held out when the SHA-1 of "source/subject" (or of its question) falls in the lowest
--val-percent; held-out entries never appear in training and give the evaluation questions.

Writes WORK/chat/:
  train_tokens.npy  uint16 stream: conversations, each followed by <|endoftext|>
  train_mask.npy    uint8, 1 where the token is an assistant answer token or its <|im_end|>
  val_questions.jsonl  {"source","subject","messages","reference"} (single turn)
  train_prompts.jsonl  {"source","messages"}: each training conversation up to its first
                    answer (chat_self.py has the model answer them itself)
  val_tokens.npy / val_mask.npy  the held-out conversations, rendered the same way
  chat_stats.json   conversations/tokens per source, packages and licences

    /usr/bin/python3 tools/train/chat_data.py --tokenizer models/nextn-tiny --work tools/train/work
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import chat_sources  # noqa: E402

# ChatML with Qwen3.5's <think> handling. The generation prompt opens and closes an empty
# think block unless enable_thinking is true (this model was never taught to reason);
# earlier assistant turns are rendered the same way with any reasoning dropped, so the
# prompt of turn n+1 extends the rendering of turn n (prefix reuse across chat turns).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- set content = message['content'] %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking %}{{- '<think>\\n' }}"
    "{%- else %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}")

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are nextn-tiny-chat, a small assistant that explains commands, Python and words.",
    "Answer briefly.",
    "You are a helpful assistant. Keep answers short.",
]

GREETINGS = [
    ("Hello", "Hello! Ask me what a command does, what a Python function does, or what a word means."),
    ("Hi!", "Hi! I can explain shell commands, Python functions and dictionary words."),
    ("Hello, who are you?", "I am nextn-tiny-chat, a tiny model trained by nextn. I answer short questions about commands, Python and words."),
    ("What can you do?", "I can tell you what a command does (from its man page), what a Python function does (from the Python documentation), and what a word means (from the Devil's Dictionary and the Jargon File)."),
    ("Thanks!", "You are welcome."),
    ("Thank you.", "You are welcome. Ask me anything else about commands, Python or words."),
    ("Good morning", "Good morning! What would you like to know?"),
    ("Who made you?", "I was trained by nextn's training pipeline on text from Debian packages."),
]

FOLLOW_TEMPLATES = ["And what about {q}", "What about {s}?", "And {s}?", "{q}"]

UPSAMPLE = {"devil": 3, "jargon": 2, "python-glossary": 3, "python-faq": 3, "man": 2, "python": 1}


def held_out(key, percent):
    h = int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16)
    return (h % 10000) < percent * 100


def entry_key(e):
    return f"{e.source}/{e.subject or e.questions[0]}"


class Renderer:
    def __init__(self, tokenizer_dir):
        import jinja2
        self.enc = bpe.load(tokenizer_dir)
        env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
        self.template = env.from_string(CHAT_TEMPLATE)
        names = sorted(self.enc.added, key=len, reverse=True)
        self.split = re.compile("(" + "|".join(re.escape(t) for t in names) + ")")

    def render(self, messages, add_generation_prompt=False):
        return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt)

    def encode(self, text):
        """Text with added tokens (<|im_start|>, <think>, ...) -> ids, as nextn tokenizes."""
        ids = []
        for part in self.split.split(text):
            if not part:
                continue
            if part in self.enc.added:
                ids.append(self.enc.added[part])
            else:
                ids.extend(self.enc.encode(part))
        return ids

    def conversation(self, messages):
        """(ids, mask): mask 1 on each assistant answer and its <|im_end|>."""
        ids, mask, done = [], [], ""
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            prompt = self.render(messages[:i], add_generation_prompt=True)
            full = self.render(messages[:i + 1])
            assert prompt.startswith(done) and full.startswith(prompt), "template is not incremental"
            p = self.encode(prompt[len(done):])
            answer = full[len(prompt):]
            assert answer == m["content"] + "<|im_end|>\n", answer
            a = self.encode(m["content"]) + [self.enc.added["<|im_end|>"]]
            nl = self.encode("\n")
            ids += p + a + nl
            mask += [0] * len(p) + [1] * len(a) + [0] * len(nl)
            done = full
        return ids, mask


def conversations(entries, rng, greetings=True):
    by_source = {}
    for e in entries:
        by_source.setdefault(e.source, []).append(e)
    out = []
    for e in entries:
        for rep in range(UPSAMPLE.get(e.source, 1)):
            msgs = []
            if rng.random() < 0.25:
                msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
            msgs += [{"role": "user", "content": rng.choice(e.questions)},
                     {"role": "assistant", "content": e.answer}]
            r = rng.random()
            if e.followups and r < 0.3:
                q, a = rng.choice(e.followups)
                msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            elif r < 0.2 and e.subject:
                o = rng.choice(by_source[e.source])
                if o.subject and o is not e:
                    q = rng.choice(o.questions)
                    t = rng.choice(FOLLOW_TEMPLATES)
                    q = t.format(q=q[0].lower() + q[1:], s=o.subject) if "{q}" in t and t != "{q}" \
                        else t.format(q=q, s=o.subject)
                    msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": o.answer}]
            out.append((e.source, msgs))
    if greetings:
        for _ in range(max(40, len(out) // 100)):
            q, a = rng.choice(GREETINGS)
            msgs = [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)}] if rng.random() < 0.3 else []
            out.append(("greeting", msgs + [{"role": "user", "content": q},
                                            {"role": "assistant", "content": a}]))
    rng.shuffle(out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default="models/nextn-tiny")
    ap.add_argument("--work", default="tools/train/work")
    ap.add_argument("--val-percent", type=float, default=4.0)
    ap.add_argument("--val-questions", type=int, default=50, help="held-out questions per source")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    out_dir = os.path.join(args.work, "chat")
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(args.seed)
    ren = Renderer(args.tokenizer)
    train, val = [], []
    stats = {}
    packages = {}
    for name, (fn, pkg, lic) in chat_sources.SOURCES.items():
        n = 0
        for e in fn():
            (val if held_out(entry_key(e), args.val_percent) else train).append(e)
            n += 1
            if name == "man" and e.package:
                packages.setdefault(e.package, [chat_sources.package_licence(e.package), 0])[1] += 1
        stats[name] = {"package": pkg, "license": lic, "entries": n}
        print(f"{name}: {n} entries", file=sys.stderr)
    eot = ren.enc.added["<|endoftext|>"]
    for split, entries in (("train", train), ("val", val)):
        ids, mask = [], []
        per = {}
        convs = conversations(entries, rng, greetings=(split == "train"))
        if split == "train":
            with open(os.path.join(out_dir, "train_prompts.jsonl"), "w", encoding="utf-8") as f:
                for src, msgs in convs:
                    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
                    f.write(json.dumps({"source": src, "messages": msgs[:first]}, ensure_ascii=False) + "\n")
        for src, msgs in convs:
            a, m = ren.conversation(msgs)
            ids += a + [eot]
            mask += m + [0]
            s = per.setdefault(src, {"conversations": 0, "tokens": 0, "answer_tokens": 0})
            s["conversations"] += 1
            s["tokens"] += len(a) + 1
            s["answer_tokens"] += sum(m)
        np.save(os.path.join(out_dir, f"{split}_tokens.npy"), np.asarray(ids, dtype=np.uint16))
        np.save(os.path.join(out_dir, f"{split}_mask.npy"), np.asarray(mask, dtype=np.uint8))
        for src, s in per.items():
            stats.setdefault(src, {})[split] = s
        print(f"{split}: {len(ids)} tokens, {sum(mask)} answer tokens", file=sys.stderr)
    by_src = {}
    for e in val:
        if e.subject:
            by_src.setdefault(e.source, []).append(e)
    with open(os.path.join(out_dir, "val_questions.jsonl"), "w", encoding="utf-8") as f:
        for src in sorted(by_src):
            es = sorted(by_src[src], key=entry_key)
            random.Random(args.seed).shuffle(es)
            for e in es[:args.val_questions]:
                q = random.Random(entry_key(e)).choice(e.questions)
                f.write(json.dumps({"source": src, "subject": e.subject,
                                    "messages": [{"role": "user", "content": q}],
                                    "reference": e.answer}, ensure_ascii=False) + "\n")
    stats["_man_packages"] = {k: {"license": v[0], "pages": v[1]} for k, v in sorted(packages.items())}
    stats["_chat_template"] = CHAT_TEMPLATE
    with open(os.path.join(out_dir, "chat_stats.json"), "w") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False)


if __name__ == "__main__":
    main()
