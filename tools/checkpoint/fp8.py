# tools/checkpoint/fp8.py — block-scaled FP8 weights as the official FP8 releases store
# them (DeepSeek-V3, Qwen3.5/3.6 "-FP8"): W8 = e4m3fn(W / s) with one scale per
# block × block tile, s = amax(tile) / 448, saved as `<name>_scale_inv` [ceil(rows/block),
# ceil(cols/block)] (multiplied back: W ≈ fp8(W8) · scale_inv), F32 (DeepSeek) or BF16
# (Qwen). quantization_config names the scheme.
import numpy as np

E4M3_MAX = 448.0


def e4m3_values():
    """The float value of every e4m3fn byte (NaN for 0x7F / 0xFF)."""
    b = np.arange(256)
    sign = np.where(b >> 7, -1.0, 1.0)
    e, m = (b >> 3) & 15, b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    v = sign * v
    v[(e == 15) & (m == 7)] = np.nan
    return v


def to_e4m3(x):
    """Nearest e4m3fn byte of each value of x (|x| <= 448; ties to the even code)."""
    vals = e4m3_values()
    pos = np.arange(0, 0x7F)  # 0 .. 448, increasing
    pv = vals[pos]
    a = np.abs(x)
    i = np.clip(np.searchsorted(pv, a), 1, len(pv) - 1)
    lo, hi = pv[i - 1], pv[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    code = np.where(pick_hi, i, i - 1).astype(np.uint8)
    return np.where(x < 0, code | 0x80, code).astype(np.uint8)


def quantize(w, block):
    """(e4m3 bytes [R, C], scale_inv float32 [ceil(R/b), ceil(C/b)]) of a float matrix;
    stacked matrices [..., R, C] each with their own grid."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim > 2:
        parts = [quantize(m, block) for m in w.reshape(-1, *w.shape[-2:])]
        return (np.stack([q for q, _ in parts]).reshape(w.shape),
                np.stack([s for _, s in parts]).reshape(*w.shape[:-2], *parts[0][1].shape))
    R, C = w.shape
    sr, sc = -(-R // block), -(-C // block)
    scale = np.zeros((sr, sc))
    q = np.zeros((R, C), dtype=np.uint8)
    for i in range(sr):
        for j in range(sc):
            tile = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            s = np.abs(tile).max() / E4M3_MAX or 1.0
            scale[i, j] = s
            q[i * block:(i + 1) * block, j * block:(j + 1) * block] = to_e4m3(tile / s)
    return q, scale.astype(np.float32)


def dequantize(q, scale_inv, block):
    """float64 W = fp8(q) · scale_inv per tile (the official fp8_cast_bf16 then rounds to BF16)."""
    if q.ndim > 2:
        s = np.asarray(scale_inv).reshape(-1, *np.shape(scale_inv)[-2:])
        return np.stack([dequantize(m, s[i], block) for i, m in enumerate(q.reshape(-1, *q.shape[-2:]))]
                        ).reshape(q.shape)
    R, C = q.shape
    s = np.repeat(np.repeat(np.asarray(scale_inv, dtype=np.float64), block, 0), block, 1)[:R, :C]
    return e4m3_values()[q] * s


def converts(name, shape):
    """Whether the FP8 releases store this tensor FP8: the linear layers' weights (and
    fused experts, stacked); not embeddings, the output head, norms, routers or the conv."""
    skip = ("embed", "lm_head", "norm", "mlp.gate.weight", "shared_expert_gate", "router", "conv1d")
    fused = len(shape) == 3 and name.endswith(("experts.gate_up_proj", "experts.down_proj"))
    return fused or len(shape) == 2 and name.endswith(".weight") and not any(k in name for k in skip)


def config(block):
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
            "weight_block_size": [block, block]}
