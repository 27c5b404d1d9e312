"""tests/server/image_chat.py — the chat requests the image server tests send: a random
40×30 PNG per seed as an image_url part, a first turn asking about it, a second turn after
the answer, greedy bodies with logprobs, and readers of the response."""
import base64
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from png_image import png_bytes  # noqa: E402


def image_part(seed):
    rgb = np.random.default_rng(seed).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode()}}


def first_turn(seed=1):
    return [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, image_part(seed)]}]


def second_turn(answer, seed=1):
    return first_turn(seed) + [{"role": "assistant", "content": answer},
                               {"role": "user", "content": "And the colours?"}]


def body(messages, **extra):
    return dict({"messages": messages, "max_tokens": 8, "temperature": 0, "logprobs": True}, **extra)


def logprobs(resp):
    return [t["logprob"] for t in resp["choices"][0]["logprobs"]["content"]]
