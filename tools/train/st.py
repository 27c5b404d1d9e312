"""st.py — minimal safetensors reader/writer (numpy only; BF16 stored as uint16 bits).

write(path, {name: (dtype_str, shape, bytes)}), read(path) -> {name: (dtype_str, shape, bytes)},
plus BF16 <-> float32 helpers and sharded directory writing/reading (HF index format).
"""
import json
import os
import struct

import numpy as np


def f32_to_bf16_bits(a):
    """float32 array -> uint16 BF16 bits, round to nearest even."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def write(path, tensors, metadata=None):
    header = {}
    off = 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in sorted(tensors):
            f.write(tensors[name][2])


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            f.seek(base + a)
            out[name] = (info["dtype"], tuple(info["shape"]), f.read(b - a))
    return out


def to_numpy(entry):
    dtype, shape, data = entry
    if dtype == "BF16":
        return bf16_bits_to_f32(np.frombuffer(data, dtype=np.uint16)).reshape(shape)
    if dtype == "F32":
        return np.frombuffer(data, dtype=np.float32).reshape(shape).copy()
    raise ValueError(f"unsupported dtype {dtype}")


def write_dir(directory, tensors, max_shard_bytes=None):
    """model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json."""
    names = sorted(tensors)
    total = sum(len(tensors[n][2]) for n in names)
    if not max_shard_bytes or total <= max_shard_bytes:
        write(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
        return
    shards, cur, size = [], [], 0
    for n in names:
        nb = len(tensors[n][2])
        if cur and size + nb > max_shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(n)
        size += nb
    shards.append(cur)
    weight_map = {}
    for k, group in enumerate(shards):
        fname = f"model-{k+1:05d}-of-{len(shards):05d}.safetensors"
        write(os.path.join(directory, fname), {n: tensors[n] for n in group}, {"format": "pt"})
        for n in group:
            weight_map[n] = fname
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def read_dir(directory):
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        return read(single)
    with open(os.path.join(directory, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for fn in files:
        out.update(read(os.path.join(directory, fn)))
    return out
