# tools/checkpoint/safetensors_writer.py — streams tensors into .safetensors files
# (8-byte little-endian header length, JSON header with dtype/shape/data_offsets and
# __metadata__, then the raw little-endian data) without holding a whole model in memory.
import json
import struct

import numpy as np

DTYPE_NAMES = {"f32": "F32", "bf16": "BF16", "f16": "F16"}
DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "U32": 4, "I64": 8, "F8_E4M3": 1, "BOOL": 1}


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even (NaN kept quiet)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32)
    t = u >> np.uint32(16)
    t &= np.uint32(1)
    t += np.uint32(0x7FFF)
    t += u
    t >>= np.uint32(16)
    out = t.astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out


def encode(a, st_dtype):
    """float32 numpy array -> bytes-like array in the safetensors dtype st_dtype."""
    if st_dtype == "F32":
        return np.ascontiguousarray(a, dtype="<f4")
    if st_dtype == "BF16":
        return f32_to_bf16_bits(a).astype("<u2", copy=False)
    if st_dtype == "F16":
        return np.ascontiguousarray(a, dtype="<f2")
    if st_dtype == "U32":  # packed integer values (MLX quantized weights), passed as uint32
        return np.ascontiguousarray(a, dtype="<u4")
    if st_dtype == "F8_E4M3":  # e4m3fn bit patterns (fp8.py), passed as uint8
        return np.ascontiguousarray(a, dtype="u1")
    if st_dtype == "I64":  # integer buffers (the Gemma 4 assistant's token_ordering, EAGLE-3's d2t)
        return np.ascontiguousarray(a, dtype="<i8")
    if st_dtype == "BOOL":  # masks (EAGLE-3's t2d), one byte each
        return np.ascontiguousarray(a, dtype="u1")
    raise ValueError(f"unsupported dtype {st_dtype}")


class TensorSpec:
    """One tensor to write: name, shape, safetensors dtype and a chunk generator.

    `chunks()` yields float32 arrays whose concatenation (row-major) is the tensor."""

    def __init__(self, name, shape, st_dtype, chunks):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.st_dtype = st_dtype
        self.chunks = chunks

    @property
    def nbytes(self):
        n = DTYPE_BYTES[self.st_dtype]
        for d in self.shape:
            n *= d
        return n


def build_header(specs, metadata=None):
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    for s in specs:
        header[s.name] = {"dtype": s.st_dtype, "shape": list(s.shape),
                          "data_offsets": [offset, offset + s.nbytes]}
        offset += s.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * ((8 - len(raw) % 8) % 8)  # data starts 8-byte aligned
    return raw, offset


def write_file(path, specs, metadata=None):
    """Writes every TensorSpec in order; returns the data size in bytes."""
    raw, total = build_header(specs, metadata)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for s in specs:
            written = 0
            for chunk in s.chunks():
                data = encode(chunk, s.st_dtype)
                f.write(data.tobytes())
                written += data.nbytes
            if written != s.nbytes:
                raise RuntimeError(f"{s.name}: wrote {written} bytes, expected {s.nbytes}")
    return total


def write_tensors(path, tensors, st_dtype="F32", metadata=None):
    """Convenience: write a dict name -> float array (all in one dtype)."""
    specs = []
    for name, arr in tensors.items():
        arr = np.asarray(arr, dtype=np.float32)
        specs.append(TensorSpec(name, arr.shape, st_dtype, lambda a=arr: iter([a])))
    return write_file(path, specs, metadata)
