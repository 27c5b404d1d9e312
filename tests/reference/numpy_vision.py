# tests/reference/numpy_vision.py — an independent numpy implementation of the Qwen3.5
# image processor (Hugging Face's Qwen2VLImageProcessor, the class the Qwen3.5
# checkpoints' preprocessor_config.json names), written from the reference's rules:
#
#   smart_resize(h, w)          Qwen2-VL's smart_resize with Python's round (half to even)
#   pil_bicubic(img, w, h)      PIL's Image.resize(BICUBIC) on uint8 RGB: Keys cubic, a = -0.5,
#                               support x max(scale, 1), per-pixel normalized weights in
#                               22-bit fixed point, horizontal pass then vertical, each
#                               rounded to uint8 (the slow HF processor resizes through PIL)
#   normalize(img)              x / 255 then (x - mean) / std, float64
#   patchify(x)                 HF's reshape/transpose into merge-window rows:
#                               (gt, T, C, gh/m, m, p, gw/m, m, p) -> (gt, gh/m, gw/m, m, m, C, T, p, p)
#   process(img)                all four, returning (pixel_values, (t, h, w), resized)
#
# BROKEN holds deliberately wrong variants (CLIP mean/std, transposed merge window,
# raster row order, channel-last rows, C's round-half-up, no antialias on shrink) that
# the tests must tell apart from nextn.
import math

import numpy as np

QWEN35 = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 65536,
          "max_pixels": 16777216, "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def smart_resize(height, width, factor=32, min_pixels=65536, max_pixels=16777216, round_fn=round):
    if height < 10 or width < 10:
        raise ValueError(f"height {height} or width {width} under 10")
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio over 200")
    h_bar = round_fn(height / factor) * factor
    w_bar = round_fn(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def round_half_up(v):
    return math.floor(v + 0.5)


def _cubic(x, a=-0.5):
    x = np.abs(x)
    return np.where(x < 1.0, ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
                    np.where(x < 2.0, (((x - 5.0) * x + 8.0) * x - 4.0) * a, 0.0))


def _axis(in_size, out_size, antialias=True):
    """Fixed-point weights [out, k] and first input index [out] of one resize axis."""
    scale = in_size / out_size
    filter_scale = max(scale, 1.0) if antialias else 1.0
    support = 2.0 * filter_scale
    ksize = int(math.ceil(support)) * 2 + 1
    first = np.zeros(out_size, dtype=np.int64)
    weights = np.zeros((out_size, ksize), dtype=np.int64)
    for i in range(out_size):
        center = (i + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        taps = np.arange(lo, hi)
        k = _cubic((taps - center + 0.5) * (1.0 / filter_scale))
        total = k.sum()
        if total != 0.0:
            k = k / total
        fixed = np.where(k < 0, np.trunc(-0.5 + k * (1 << 22)), np.trunc(0.5 + k * (1 << 22)))
        weights[i, :len(taps)] = fixed.astype(np.int64)
        first[i] = lo
    return weights, first


def _pass(img, out_size, axis, antialias):
    """img uint8 [H, W, 3]; resample along axis 1 (horizontal) or 0 (vertical)."""
    in_size = img.shape[axis]
    weights, first = _axis(in_size, out_size, antialias)
    idx = np.minimum(first[:, None] + np.arange(weights.shape[1])[None, :], in_size - 1)  # zero weights past the end
    src = np.moveaxis(img.astype(np.int64), axis, 0)             # [in, other, 3]
    acc = np.einsum("ok,okxc->oxc", weights, src[idx])            # [out, other, 3]
    out = np.clip((acc + (1 << 21)) >> 22, 0, 255).astype(np.uint8)
    return np.moveaxis(out, 0, axis)


def pil_bicubic(img, width, height, antialias=True):
    out = img
    if width != img.shape[1]:
        out = _pass(out, width, 1, antialias)
    if height != img.shape[0]:
        out = _pass(out, height, 0, antialias)
    return out


def normalize(img, mean, std, rescale=1.0 / 255.0):
    x = img.astype(np.float64) * rescale
    return (x - np.asarray(mean, dtype=np.float64)) / np.asarray(std, dtype=np.float64)


def patchify(x, p=16, t=2, m=2):
    """x float [H, W, 3] -> pixel_values [gh*gw, 3*t*p*p], grid (1, gh, gw)."""
    h, w, c = x.shape
    gh, gw = h // p, w // p
    chw = x.transpose(2, 0, 1)
    frames = np.stack([chw] * t)                                  # the still image repeated in time
    y = frames.reshape(1, t, c, gh // m, m, p, gw // m, m, p)
    y = y.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return y.reshape(gh * gw, c * t * p * p), (1, gh, gw)


def process(img, cfg=QWEN35, variant=None):
    """img uint8 [h, w, 3] -> (pixel_values, grid, resized) as HF computes them."""
    p, t, m = cfg["patch_size"], cfg["temporal_patch_size"], cfg["merge_size"]
    h, w = img.shape[:2]
    round_fn = round_half_up if variant == "round_half_up" else round
    hb, wb = smart_resize(h, w, p * m, cfg["min_pixels"], cfg["max_pixels"], round_fn)
    resized = pil_bicubic(img, wb, hb, antialias=variant != "no_antialias")
    return (*patchify_variant(resized, cfg, variant), resized)


def patchify_variant(resized, cfg=QWEN35, variant=None):
    p, t, m = cfg["patch_size"], cfg["temporal_patch_size"], cfg["merge_size"]
    mean, std = (CLIP_MEAN, CLIP_STD) if variant == "clip_mean_std" else (cfg["mean"], cfg["std"])
    x = normalize(resized, mean, std)
    pv, grid = patchify(x, p, t, m)
    gh, gw = grid[1], grid[2]
    if variant == "transposed_merge":   # (iw, ih) inside each window
        pv = pv.reshape(gh // m, gw // m, m, m, -1).transpose(0, 1, 3, 2, 4).reshape(gh * gw, -1)
    elif variant == "raster_order":     # rows in plain raster order over patches
        y = np.stack([x.transpose(2, 0, 1)] * t).reshape(t, 3, gh, p, gw, p)
        pv = y.transpose(2, 4, 1, 0, 3, 5).reshape(gh * gw, -1)
    elif variant == "channel_last":     # rows as (t, py, px, channel)
        pv = pv.reshape(gh * gw, 3, t, p, p).transpose(0, 2, 3, 4, 1).reshape(gh * gw, -1)
    return pv, grid


BROKEN = ["clip_mean_std", "transposed_merge", "raster_order", "channel_last", "round_half_up", "no_antialias"]


# ---- The Qwen3.5 vision tower (Qwen3-VL's ViT without DeepStack), float64, written from the
# Hugging Face modeling rules: Qwen3_5VisionPatchEmbed (Conv3d, kernel = stride), the
# learned position table interpolated bilinearly with align_corners, the axial 2-D rotary
# embedding (rows then columns, rotate-half over the whole head), pre-LN blocks with
# LayerNorm + bias, fused qkv, full attention, GELU-tanh MLP, and the patch merger
# (LayerNorm, 2x2 windows concatenated, Linear, exact GELU, Linear).
#
# TOWER_BROKEN: variants a correct tower must miss (row/column swapped in RoPE, the table
# sampled half-pixel instead of align_corners, positions in raster instead of window
# order, a causal mask, the tanh GELU in the merger).
from math import erf as _erf  # noqa: E402

TOWER_BROKEN = ["rope_hw_swapped", "pos_half_pixel", "pos_raster", "causal", "merger_gelu_tanh"]


def layer_norm(x, w, b, eps=1e-6):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(_erf)(x / math.sqrt(2.0)))


def window_positions(gh, gw, m=2):
    """(row, col) of each pixel_values row, in merge-window order."""
    return [(bh * m + ih, bw * m + iw) for bh in range(gh // m) for bw in range(gw // m)
            for ih in range(m) for iw in range(m)]


def interpolated_pos_embed(table, gh, gw, positions, half_pixel=False):
    side = int(round(math.sqrt(table.shape[0])))
    t = table.reshape(side, side, -1)

    def coord(i, n):
        if half_pixel:  # the wrong convention: pixel centres, clamped
            return min(max((i + 0.5) * side / n - 0.5, 0.0), side - 1)
        return i * (side - 1) / max(n - 1, 1)
    out = []
    for r, c in positions:
        y, x = coord(r, gh), coord(c, gw)
        y0, x0 = int(math.floor(y)), int(math.floor(x))
        y1, x1 = min(y0 + 1, side - 1), min(x0 + 1, side - 1)
        dy, dx = y - y0, x - x0
        out.append((1 - dy) * (1 - dx) * t[y0, x0] + (1 - dy) * dx * t[y0, x1] +
                   dy * (1 - dx) * t[y1, x0] + dy * dx * t[y1, x1])
    return np.array(out)


def rope_2d(x, positions, theta=10000.0, swap=False):
    """x [P, heads, d]; the first d/4 angles of each half take the row, the next d/4 the column."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d // 2, 2) / (d // 2))   # d/4 frequencies
    rows = np.array([p[1] if swap else p[0] for p in positions], dtype=np.float64)
    cols = np.array([p[0] if swap else p[1] for p in positions], dtype=np.float64)
    ang = np.concatenate([rows[:, None] * inv, cols[:, None] * inv], axis=1)   # [P, d/2]
    ang = np.concatenate([ang, ang], axis=1)[:, None, :]                        # [P, 1, d]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * np.cos(ang) + rot * np.sin(ang)


def vision_tower(W, vcfg, pixel_values, grid, variant=None, prefix="model.visual."):
    """W: name -> float64 array; pixel_values [P, 3*t*p*p]; grid (1, gh, gw) -> [P/4, out]."""
    D, heads, m = vcfg["hidden_size"], vcfg["num_heads"], vcfg["spatial_merge_size"]
    d = D // heads
    _, gh, gw = grid
    P = pixel_values.shape[0]
    w = W[prefix + "patch_embed.proj.weight"].reshape(D, -1)
    h = pixel_values @ w.T + W[prefix + "patch_embed.proj.bias"]
    positions = window_positions(gh, gw, m)
    pos_for_table = [(i // gw, i % gw) for i in range(P)] if variant == "pos_raster" else positions
    h = h + interpolated_pos_embed(W[prefix + "pos_embed.weight"], gh, gw, pos_for_table,
                                   half_pixel=variant == "pos_half_pixel")
    mask = np.triu(np.full((P, P), -np.inf), 1) if variant == "causal" else np.zeros((P, P))
    for i in range(vcfg["depth"]):
        b = f"{prefix}blocks.{i}."
        u = layer_norm(h, W[b + "norm1.weight"], W[b + "norm1.bias"])
        qkv = (u @ W[b + "attn.qkv.weight"].T + W[b + "attn.qkv.bias"]).reshape(P, 3, heads, d)
        q = rope_2d(qkv[:, 0], positions, swap=variant == "rope_hw_swapped")
        k = rope_2d(qkv[:, 1], positions, swap=variant == "rope_hw_swapped")
        v = qkv[:, 2]
        s = np.einsum("phd,qhd->hpq", q, k) / math.sqrt(d) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hpq,qhd->phd", s, v).reshape(P, D)
        h = h + o @ W[b + "attn.proj.weight"].T + W[b + "attn.proj.bias"]
        u = layer_norm(h, W[b + "norm2.weight"], W[b + "norm2.bias"])
        f = gelu_tanh(u @ W[b + "mlp.linear_fc1.weight"].T + W[b + "mlp.linear_fc1.bias"])
        h = h + f @ W[b + "mlp.linear_fc2.weight"].T + W[b + "mlp.linear_fc2.bias"]
    z = layer_norm(h, W[prefix + "merger.norm.weight"], W[prefix + "merger.norm.bias"]).reshape(P // (m * m), -1)
    g = z @ W[prefix + "merger.linear_fc1.weight"].T + W[prefix + "merger.linear_fc1.bias"]
    g = gelu_tanh(g) if variant == "merger_gelu_tanh" else gelu_erf(g)
    return g @ W[prefix + "merger.linear_fc2.weight"].T + W[prefix + "merger.linear_fc2.bias"]
