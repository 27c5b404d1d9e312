"""tests/train/test_chat_model.py — the shipped models/nextn-tiny-chat (Qwen3.5 hybrid with an
MTP head, tuned on chat) against its training framework: nextn's logits (prefill, hidden,
MTP, greedy decode) on two chat prompts match PyTorch's float32 forward on the exported BF16
weights (tests/train/data_chat, written by tools/train/make_reference.py --chat), greedy
decoding with --mtp N = 1..3 gives the same tokens as plain greedy decoding, and the chat
template renders as the trainer rendered it. numpy only.
"""
import json
import os
import struct
import subprocess
import sys
import unittest

import numpy as np

import trained_logits

SRC = os.environ.get("NEXTN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NEXTN_BIN", "")
TMP = os.environ.get("NEXTN_TEST_TMP", "/tmp")
MODEL = os.path.join(SRC, "models", "nextn-tiny-chat")
DATA = os.path.join(SRC, "tests", "train", "data_chat")


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"nextn {' '.join(args[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


class ShippedChatModel(unittest.TestCase):
    def test_directory_layout_and_size(self):
        total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(MODEL) for fn in fns)
        self.assertLessEqual(total, 45_000_000, "models/nextn-tiny-chat must stay <= 45 MB")
        with open(os.path.join(MODEL, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["architectures"], ["Qwen3_5ForCausalLM"])
        self.assertEqual(cfg["mtp_num_hidden_layers"], 1)
        self.assertTrue(cfg["tie_word_embeddings"])
        L = cfg["num_hidden_layers"]
        kinds = cfg["layer_types"]
        self.assertEqual(kinds, ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)])
        hdr = safetensors_header(os.path.join(MODEL, "model.safetensors"))
        hdr.pop("__metadata__", None)
        self.assertTrue(all(v["dtype"] == "BF16" for v in hdr.values()))
        self.assertNotIn("lm_head.weight", hdr)
        H = cfg["hidden_size"]
        self.assertEqual(hdr["mtp.fc.weight"]["shape"], [H, 2 * H])
        nh, d = cfg["num_attention_heads"], cfg["head_dim"]
        self.assertEqual(hdr["model.layers.3.self_attn.q_proj.weight"]["shape"], [2 * nh * d, H])
        conv = 2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"] + \
            cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
        self.assertEqual(hdr["model.layers.0.linear_attn.conv1d.weight"]["shape"],
                         [conv, 1, cfg["linear_conv_kernel_dim"]])


@unittest.skipUnless(BIN and os.path.exists(BIN), "NEXTN_BIN not set")
class ChatTemplate(unittest.TestCase):
    def test_prompt_tokens_are_the_trainers(self):
        """nextn's rendering (= Jinja2's) and tokenization of the chat prompt give the ids the
        trainer rendered for it (ref_chat.tokens.npy), the reference logits' input."""
        messages = [{"role": "user", "content": "What does the ls command do?"}]
        path = os.path.join(TMP, "train_chat_messages.json")
        os.makedirs(TMP, exist_ok=True)
        with open(path, "w") as f:
            json.dump(messages, f)
        text = run("chat-template", "--model", MODEL, "--messages", path)
        try:
            import jinja2
            with open(os.path.join(MODEL, "tokenizer_config.json")) as f:
                tmpl = json.load(f)["chat_template"]
            want = jinja2.Environment().from_string(tmpl).render(messages=messages, add_generation_prompt=True)
            self.assertEqual(text, want)
        except ImportError:
            pass
        self.assertTrue(text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), text)
        ids = run("tokenize", "--model", MODEL, "--ids", text)
        self.assertEqual([int(t) for t in ids.split()],
                         np.load(os.path.join(DATA, "ref_chat.tokens.npy")).tolist())


@unittest.skipUnless(BIN and os.path.exists(BIN), "NEXTN_BIN not set")
class Logits(unittest.TestCase):
    def check(self, name):
        trained_logits.check(self, run, MODEL, DATA, os.path.join(TMP, f"train_chat_{name}"), name)

    def test_single_turn_prompt(self):
        self.check("chat")

    def test_multi_turn_prompt(self):
        self.check("chat2")


@unittest.skipUnless(BIN and os.path.exists(BIN), "NEXTN_BIN not set")
class GreedyMtp(unittest.TestCase):
    def test_greedy_mtp_equals_plain_greedy(self):
        q = "What does the grep command do?"
        plain = run("generate", "--model", MODEL, "--chat", q, "-n", "48", "--ids", "--ignore-eos")
        for depth in ("1", "2", "3"):
            mtp = run("generate", "--model", MODEL, "--chat", q, "-n", "48", "--ids", "--ignore-eos",
                      "--mtp", "--num-mtp-tokens", depth)
            self.assertEqual(plain.splitlines()[0], mtp.splitlines()[0], f"--mtp {depth}")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
