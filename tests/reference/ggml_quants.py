"""tests/reference/ggml_quants.py — independent float64 reference for GGUF files and
ggml block types, written from the format description (the GGUF specification, docs/gguf.md
in the ggml repository, and ggml's block layouts as listed below), not from nextn's C++.

- dequantize(type_name, raw_bytes, n) -> float64 array of n elements
- read_gguf(path) -> (version, metadata dict, tensors list, data_start)
- write_gguf(path, metadata, tensors): a minimal v3 writer (for building test files)

Block layouts (all little-endian, fp16 = IEEE half):
  Q8_0  34 B / 32: d, int8 q[32]               x = d*q
  Q4_0  18 B / 32: d, u8 qs[16]                x = d*(nib-8); byte j: elem j low, j+16 high
  Q4_1  20 B / 32: d, m, qs[16]                x = d*nib + m
  Q5_0  22 B / 32: d, u32 qh, qs[16]           q = nib | bit_e(qh)<<4; x = d*(q-16)
  Q5_1  24 B / 32: d, m, u32 qh, qs[16]        x = d*q + m
  Q4_K 144 B / 256: d, dmin, scales[12], qs[128]        x = d*sc_j*q - dmin*m_j
  Q5_K 176 B / 256: d, dmin, scales[12], qh[32], qs[128]
  Q6_K 210 B / 256: ql[128], qh[64], int8 sc[16], d      x = d*sc*(q-32)
"""
import pathlib
import struct

import numpy as np

BLOCKS = {  # name: (ggml type id, elements per block, bytes per block)
    "F32": (0, 1, 4), "F16": (1, 1, 2), "BF16": (30, 1, 2),
    "Q8_0": (8, 32, 34), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
    "I64": (27, 1, 8),  # index tensors (EAGLE-3's d2t)
}
TYPE_BY_ID = {v[0]: k for k, v in BLOCKS.items()}


def _f16(b):
    return np.frombuffer(bytes(b), dtype="<f2").astype(np.float64)


def _scale_min_k4(s):
    """The 8 (scale, min) pairs of 6 bits from the 12 packed bytes."""
    sc, mn = [0] * 8, [0] * 8
    for j in range(8):
        if j < 4:
            sc[j] = s[j] & 63
            mn[j] = s[j + 4] & 63
        else:
            sc[j] = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4)
            mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
    return sc, mn


def _legacy_nibbles(qs):
    """Element j (0..31) of a 32-element block from its 16 bytes."""
    qs = np.frombuffer(bytes(qs), dtype=np.uint8).astype(np.int64)
    return np.concatenate([qs & 0x0F, qs >> 4])


def _fifth_bits(qh4):
    bits = struct.unpack("<I", bytes(qh4))[0]
    return np.array([(bits >> e) & 1 for e in range(32)], dtype=np.int64)


def _block(name, b):
    if name == "Q8_0":
        return _f16(b[0:2])[0] * np.frombuffer(bytes(b[2:34]), dtype=np.int8).astype(np.float64)
    if name == "Q4_0":
        return _f16(b[0:2])[0] * (_legacy_nibbles(b[2:18]) - 8)
    if name == "Q4_1":
        d, m = _f16(b[0:4])
        return d * _legacy_nibbles(b[4:20]) + m
    if name == "Q5_0":
        q = _legacy_nibbles(b[6:22]) | (_fifth_bits(b[2:6]) << 4)
        return _f16(b[0:2])[0] * (q - 16)
    if name == "Q5_1":
        d, m = _f16(b[0:4])
        q = _legacy_nibbles(b[8:24]) | (_fifth_bits(b[4:8]) << 4)
        return d * q + m
    if name in ("Q4_K", "Q5_K"):
        d, dmin = _f16(b[0:4])
        sc, mn = _scale_min_k4(b[4:16])
        qh = b[16:48] if name == "Q5_K" else None
        qs = b[48:176] if name == "Q5_K" else b[16:144]
        y = np.zeros(256)
        for c in range(4):  # 64 elements per chunk of 32 bytes
            for l in range(32):
                byte = qs[32 * c + l]
                lo, hi = byte & 0x0F, byte >> 4
                if qh is not None:
                    lo += 16 * ((qh[l] >> (2 * c)) & 1)
                    hi += 16 * ((qh[l] >> (2 * c + 1)) & 1)
                y[64 * c + l] = d * sc[2 * c] * lo - dmin * mn[2 * c]
                y[64 * c + 32 + l] = d * sc[2 * c + 1] * hi - dmin * mn[2 * c + 1]
        return y
    if name == "Q6_K":
        ql, qh = b[0:128], b[128:192]
        sc = np.frombuffer(bytes(b[192:208]), dtype=np.int8).astype(np.int64)
        d = _f16(b[208:210])[0]
        y = np.zeros(256)
        for half in range(2):
            L, H, S = ql[64 * half:], qh[32 * half:], sc[8 * half:]
            for l in range(32):
                q1 = (L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)
                q2 = (L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)
                q3 = (L[l] >> 4) | (((H[l] >> 4) & 3) << 4)
                q4 = (L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)
                base = 128 * half
                y[base + l] = d * S[l // 16] * (q1 - 32)
                y[base + l + 32] = d * S[l // 16 + 2] * (q2 - 32)
                y[base + l + 64] = d * S[l // 16 + 4] * (q3 - 32)
                y[base + l + 96] = d * S[l // 16 + 6] * (q4 - 32)
        return y
    raise ValueError(name)


def dequantize(name, raw, n):
    """float64 values of n elements stored as `name` in `raw` (bytes)."""
    if name == "F32":
        return np.frombuffer(raw, dtype="<f4", count=n).astype(np.float64)
    if name == "F16":
        return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float64)
    if name == "BF16":
        u = np.frombuffer(raw, dtype="<u2", count=n).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    _, elems, size = BLOCKS[name]
    out = [_block(name, raw[i * size:(i + 1) * size]) for i in range(n // elems)]
    return np.concatenate(out) if out else np.zeros(0)


# --- GGUF container ---------------------------------------------------------------
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("truncated string")
        self.pos += n
        return s.decode("utf-8")

    def value(self, t):
        if t in _SCALARS:
            return self.take(_SCALARS[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"unknown value type {t}")


def read_gguf(path):
    """Parses a GGUF file; returns (version, metadata, tensors, data_start, raw bytes).
    Each tensor is a dict: name, dims (innermost first), type (name), offset, nbytes."""
    data = pathlib.Path(path).read_bytes()
    r = _Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("bad magic")
    r.pos = 4
    version = r.take("<I")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    md = {}
    for _ in range(n_kv):
        key = r.string()
        md[key] = r.value(r.take("<I"))
    alignment = md.get("general.alignment", 32)
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        dims = [r.take("<Q") for _ in range(n_dims)]
        type_id, offset = r.take("<I"), r.take("<Q")
        tname = TYPE_BY_ID[type_id]
        _, elems, size = BLOCKS[tname]
        numel = int(np.prod(dims))
        tensors.append({"name": name, "dims": dims, "type": tname, "offset": offset,
                        "nbytes": numel // elems * size})
    data_start = (r.pos + alignment - 1) // alignment * alignment
    return version, md, tensors, data_start, data


def write_gguf(path, metadata, tensors, alignment=32):
    """metadata: list of (key, value_type, value[, elem_type]); tensors: list of
    (name, dims innermost first, type name, raw bytes)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))

    def put_string(s):
        b = s if isinstance(s, bytes) else s.encode("utf-8")  # bytes: any content, valid UTF-8 or not
        out.extend(struct.pack("<Q", len(b)) + b)

    def put_value(t, v, et=None):
        if t in _SCALARS:
            out.extend(struct.pack(_SCALARS[t], v))
        elif t == 8:
            put_string(v)
        elif t == 9:
            out.extend(struct.pack("<IQ", et, len(v)))
            for x in v:
                put_value(et, x)

    for item in metadata:
        put_string(item[0])
        out.extend(struct.pack("<I", item[1]))
        put_value(item[1], item[2], item[3] if len(item) > 3 else None)
    offset = 0
    offsets = []
    for name, dims, tname, raw in tensors:
        put_string(name)
        out.extend(struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims))
        out.extend(struct.pack("<IQ", BLOCKS[tname][0], offset))
        offsets.append(offset)
        offset += (len(raw) + alignment - 1) // alignment * alignment
    out.extend(b"\0" * ((alignment - len(out) % alignment) % alignment))
    for (_, _, _, raw), off in zip(tensors, offsets):
        out.extend(raw)
        out.extend(b"\0" * ((alignment - len(raw) % alignment) % alignment))
    pathlib.Path(path).write_bytes(bytes(out))
