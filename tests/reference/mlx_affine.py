"""tests/reference/mlx_affine.py — MLX affine dequantization in float64, written from
MLX's description (mlx.core.quantize docstring, backend/cpu/quantized.cpp `_qmm`): a
quantized module P stores P.weight as uint32 words, each holding 32/bits values with
element 0 in the least-significant bits; w = scale·q + bias with one scale and bias per
`group` consecutive inputs; group = in / scales.shape[1]."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "checkpoint"))
import safetensors_reader  # noqa: E402


def unpack(words, bits):
    """uint32 [out, W] → integer values [out, W·32/bits]."""
    words = np.asarray(words, dtype=np.uint64)
    per_word = 32 // bits
    cols = []
    for k in range(per_word):
        cols.append((words >> np.uint64(bits * k)) & np.uint64((1 << bits) - 1))
    return np.stack(cols, axis=-1).reshape(words.shape[0], -1)


def dequantize(words, scales, biases, bits):
    q = unpack(words, bits).astype(np.float64)
    out, cols = q.shape
    group = cols // scales.shape[1]
    g = q.reshape(out, -1, group)
    return (g * np.asarray(scales, np.float64)[..., None] + np.asarray(biases, np.float64)[..., None]).reshape(out, cols)


def read_checkpoint(model_dir):
    """The checkpoint's tensors in float64 with every quantized module dequantized (the
    .scales/.biases dropped), and the bits each module used (from its shapes)."""
    raw = safetensors_reader.read_checkpoint(model_dir, dtype=np.float64)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    q = config.get("quantization", {})
    out, bits_of = {}, {}
    for name, a in raw.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            continue
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is not None and module + ".scales" in raw:
            own = q.get(module, q)
            bits = own["bits"]
            assert a.dtype == np.uint32 and a.shape[1] * 32 // bits == raw[module + ".scales"].shape[1] * own[
                "group_size"], module
            out[name] = dequantize(a, raw[module + ".scales"], raw[module + ".biases"], bits)
            bits_of[module] = bits
        else:
            out[name] = a
    return out, bits_of
