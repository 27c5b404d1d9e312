# tools/checkpoint/safetensors_reader.py — reads Hugging Face checkpoints (single-file or
# sharded safetensors) into numpy, independent of nextn's C++ loader. F32/F16/BF16, and
# U32 (MLX's packed quantized values) as uint32, I64 (integer buffers) as int64.
import json
import os
import struct

import numpy as np


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def decode(raw, st_dtype, shape):
    if st_dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4")
    elif st_dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif st_dtype == "BF16":
        a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
    elif st_dtype == "U32":
        return np.frombuffer(raw, dtype="<u4").reshape(shape)
    elif st_dtype == "I64":
        return np.frombuffer(raw, dtype="<i8").reshape(shape)
    elif st_dtype == "BOOL":
        return np.frombuffer(raw, dtype="u1").astype(bool).reshape(shape)
    else:
        raise ValueError(f"unsupported safetensors dtype {st_dtype}")
    return a.reshape(shape)


def read_file(path, dtype=np.float64, names=None):
    """name -> array (converted to `dtype`, or the raw float32 view when dtype is None)."""
    header, base = read_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or (names is not None and name not in names):
            continue
        b, e = info["data_offsets"]
        a = decode(mm[base + b:base + e].tobytes(), info["dtype"], info["shape"])
        out[name] = a if dtype is None or a.dtype == np.uint32 else a.astype(dtype)
    return out


def checkpoint_files(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return sorted(set(weight_map.values()))
    return ["model.safetensors"]


def read_checkpoint(model_dir, dtype=np.float64):
    out = {}
    for fname in checkpoint_files(model_dir):
        out.update(read_file(os.path.join(model_dir, fname), dtype))
    return out


def tensor_dtypes(model_dir):
    out = {}
    for fname in checkpoint_files(model_dir):
        header, _ = read_header(os.path.join(model_dir, fname))
        out.update({k: v["dtype"] for k, v in header.items() if k != "__metadata__"})
    return out
