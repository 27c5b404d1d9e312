#!/usr/bin/python3
"""tools/mlx_quantize.py — writes a Hugging Face checkpoint in the layout of mlx-lm's
`convert -q` (MLX affine quantization), without MLX: for test checkpoints, and for users
who want an MLX-layout model on a machine without Apple silicon.

    tools/mlx_quantize.py SRC --out DIR [--bits 4|8] [--group 32|64|128]
                          [--override MODULE=BITS:GROUP ...] [--scale-dtype bf16|f16|f32]

Every 2-D `*.weight` (Linear and Embedding modules, as nn.quantize does) whose input size
is a multiple of the group becomes `P.weight` uint32 [out, in·bits/32] (values least-
significant bits first), `P.scales` and `P.biases` [out, in/group]; 1-D tensors (norms,
biases) are copied. Per group (mlx/ops.cpp affine_quantize): n = 2^bits − 1,
s = max((max − min)/n, 1e-7); the edge of larger magnitude (min; or max, negating s) is
made exact: q0 = round(edge/s), and if q0 ≠ 0 then s = edge/q0, bias = edge, else bias
= 0; q = clip(round((w − bias)/s), 0, n). Scales and biases are rounded to the scale
dtype (the model's dtype by default, as MLX stores them) before q is computed.
config.json gains "quantization" (and its copy "quantization_config") with the
overrides keyed by module path. Other files of SRC (tokenizer, templates) are copied.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint"))
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402


def round_to(a, st_dtype):
    """float32 values as `st_dtype` would store them, back in float32."""
    if st_dtype == "F32":
        return a.astype(np.float32)
    if st_dtype == "F16":
        return a.astype(np.float16).astype(np.float32)
    bits = safetensors_writer.f32_to_bf16_bits(a).astype(np.uint32) << np.uint32(16)
    return bits.view(np.float32)


def quantize(w, bits, group, st_dtype):
    """w [out, in] float32 → (uint32 words [out, in·bits/32], scales, biases [out, in/group])."""
    out, cols = w.shape
    n = float(2 ** bits - 1)
    g = w.reshape(out, cols // group, group).astype(np.float32)
    lo, hi = g.min(axis=2), g.max(axis=2)
    s = np.maximum((hi - lo) / np.float32(n), np.float32(1e-7))
    lo_edge = np.abs(lo) > np.abs(hi)
    s = np.where(lo_edge, s, -s)
    edge = np.where(lo_edge, lo, hi)
    q0 = np.rint(edge / s)
    nonzero = q0 != 0
    s = np.where(nonzero, edge / np.where(nonzero, q0, 1), s).astype(np.float32)
    bias = np.where(nonzero, edge, 0).astype(np.float32)
    s, bias = round_to(s, st_dtype), round_to(bias, st_dtype)
    safe = np.where(s == 0, np.float32(1), s)
    q = np.clip(np.rint((g - bias[..., None]) / safe[..., None]), 0, n).astype(np.uint32)
    per_word = 32 // bits
    q = q.reshape(out, cols // per_word, per_word)
    shifts = (np.arange(per_word, dtype=np.uint32) * np.uint32(bits))[None, None, :]
    words = np.bitwise_or.reduce(q << shifts, axis=2).astype(np.uint32)
    return words, s, bias


def parse_override(text):
    try:
        module, spec = text.split("=")
        b, g = spec.split(":")
        return module, int(b), int(g)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--override takes MODULE=BITS:GROUP, got {text!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--override", type=parse_override, action="append", default=[])
    ap.add_argument("--scale-dtype", choices=["bf16", "f16", "f32"])
    args = ap.parse_args()

    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    stored = safetensors_reader.tensor_dtypes(args.src)
    tensors = safetensors_reader.read_checkpoint(args.src, dtype=np.float32)
    overrides = {m: (b, g) for m, b, g in args.override}
    os.makedirs(args.out, exist_ok=True)
    specs = []
    for name in sorted(tensors):
        a = tensors[name]
        src_dtype = stored[name]
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        bits, group = overrides.get(module, (args.bits, args.group))
        if module is None or a.ndim != 2 or a.shape[1] % group != 0:
            specs.append(safetensors_writer.TensorSpec(name, a.shape, src_dtype, lambda a=a: iter([a])))
            continue
        st = {"bf16": "BF16", "f16": "F16", "f32": "F32"}[args.scale_dtype] if args.scale_dtype else src_dtype
        words, s, b = quantize(a, bits, group, st)
        specs.append(safetensors_writer.TensorSpec(name, words.shape, "U32", lambda x=words: iter([x])))
        specs.append(safetensors_writer.TensorSpec(module + ".scales", s.shape, st, lambda x=s: iter([x])))
        specs.append(safetensors_writer.TensorSpec(module + ".biases", b.shape, st, lambda x=b: iter([x])))
    safetensors_writer.write_file(os.path.join(args.out, "model.safetensors"), specs, {"format": "mlx"})

    q = {"group_size": args.group, "bits": args.bits, "mode": "affine"}
    for module, (b, g) in overrides.items():
        q[module] = {"group_size": g, "bits": b}
    config["quantization"] = q
    config["quantization_config"] = dict(q)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for entry in os.listdir(args.src):
        path = os.path.join(args.src, entry)
        if entry in ("config.json", "model.safetensors", "model.safetensors.index.json") or entry.endswith(
                ".safetensors") or not os.path.isfile(path):
            continue
        shutil.copy(path, os.path.join(args.out, entry))


if __name__ == "__main__":
    main()
