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
