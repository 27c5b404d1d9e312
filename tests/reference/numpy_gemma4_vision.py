# tests/reference/numpy_gemma4_vision.py — an independent float64 numpy implementation of
# the Gemma 4 image processor (Hugging Face's Gemma4ImageProcessor) and vision tower
# (Gemma4VisionModel + Gemma4MultimodalEmbedder), written from the reference's rules:
#
#   target_size(h, w, budget)   get_aspect_ratio_preserving_size: fill max_patches = budget·k²,
#                               sides ⌊f·side/48⌋·48, the th = 0 / tw = 0 branches
#   process(img, budget)        PIL bicubic to that size (numpy_vision.pil_bicubic), x/255,
#                               raster patches with rows (py, px, ch), positions (x=col, y=row)
#   tower(W, cfg, pv, grid)     padded to Pmax rows the way HF pads (zeros, position (−1, −1)),
#                               padding keys masked, zeroed before pooling, pooled rows stripped:
#                               input_proj(2(x−0.5)) + TBL[0][x] + TBL[1][y]; sandwich-RMS layers,
#                               q/k norms, weightless v norm, 2-D RoPE (x half first, pairs
#                               (j, j+d/4), θ=100), scale 1, clipped linears; k×k pooling by
#                               kidx = ⌊x/k⌋ + (W/k)⌊y/k⌋, ×√D; standardize; RMS₀ then projection
#
# BROKEN_TOWER holds deliberately wrong variants (x/y swapped in positions and RoPE,
# pooling order transposed, Qwen's RoPE pairing (j, j+d/2), clamps ignored) that the tests
# must tell apart from nextn.
import math

import numpy as np

from numpy_vision import pil_bicubic

BROKEN_TOWER = ("swap_xy", "pool_transposed", "rope_pairs_half", "no_clamps")


def target_size(height, width, budget=280, p=16, k=3):
    max_patches = budget * k * k
    target_px = max_patches * p * p
    factor = math.sqrt(target_px / (height * width))
    side = k * p
    th = int(math.floor(factor * height / side)) * side
    tw = int(math.floor(factor * width / side)) * side
    if th == 0 and tw == 0:
        raise ValueError("no patch fits")
    max_side = (max_patches // (k * k)) * side
    if th == 0:
        th = side
        tw = min(int(math.floor(width / height)) * side, max_side)
    elif tw == 0:
        tw = side
        th = min(int(math.floor(height / width)) * side, max_side)
    return th, tw


def patchify(resized, p=16):
    """uint8 [H, W, 3] -> (pixel_values [gh*gw, p*p*3] float64 x/255, positions [gh*gw, 2] (x, y), (gh, gw))."""
    h, w, _ = resized.shape
    gh, gw = h // p, w // p
    x = resized.astype(np.float64) / 255.0
    pv = x.reshape(gh, p, gw, p, 3).transpose(0, 2, 1, 3, 4).reshape(gh * gw, p * p * 3)
    rows, cols = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
    pos = np.stack([cols.reshape(-1), rows.reshape(-1)], axis=1)
    return pv, pos, (gh, gw)


def process(img, budget=280, p=16, k=3):
    th, tw = target_size(img.shape[0], img.shape[1], budget, p, k)
    resized = img if (th, tw) == img.shape[:2] else pil_bicubic(img, tw, th)
    return (*patchify(resized, p), resized)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope_half(x, pos, theta, pairs_half=False):
    """x [P, heads, n] rotated by pos [P]: NeoX pairs (j, j + n/2), freq θ^(−2j/n)."""
    n = x.shape[-1]
    q = n // 2
    inv = theta ** (-2.0 * np.arange(q) / n)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :q], x[..., q:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def rope_2d(x, pos, theta, variant=None):
    """x [P, heads, d]; pos [P, 2] (x, y) clamped at 0 for padding."""
    d = x.shape[-1]
    px, py = np.maximum(pos[:, 0], 0), np.maximum(pos[:, 1], 0)
    if variant == "swap_xy":
        px, py = py, px
    if variant == "rope_pairs_half":  # Qwen's pairing over the whole head, x angles then y angles
        q = d // 4
        inv = theta ** (-2.0 * np.arange(q) / (d // 2))
        ang = np.concatenate([px[:, None] * inv, py[:, None] * inv], axis=1)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., :d // 2], x[..., d // 2:]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    return np.concatenate([rope_half(x[..., :d // 2], px, theta), rope_half(x[..., d // 2:], py, theta)], axis=-1)


def tower(W, vcfg, pv, pos, grid, pad_to=None, variant=None):
    """W: name -> float64 array; pv [P, 3p²]; pos [P, 2] (x, y); grid (gh, gw) -> [tokens, text hidden]."""
    D, nh, d = vcfg["hidden_size"], vcfg["num_attention_heads"], vcfg["head_dim"]
    k, eps = vcfg["pooling_kernel_size"], vcfg["rms_norm_eps"]
    theta = vcfg.get("rope_parameters", {}).get("rope_theta", 100.0)
    P = pv.shape[0]
    Pmax = pad_to or P
    pv = np.concatenate([pv, np.zeros((Pmax - P, pv.shape[1]))])
    pos = np.concatenate([pos, -np.ones((Pmax - P, 2), dtype=np.int64)])
    real = pos[:, 0] >= 0
    tw = "model.vision_tower."

    def lin(name, x):
        w = W[name + ".linear.weight"]
        clip = variant != "no_clamps" and name + ".input_min" in W
        if clip:
            x = np.clip(x, W[name + ".input_min"].reshape(()), W[name + ".input_max"].reshape(()))
        y = x @ w.T
        if clip:
            y = np.clip(y, W[name + ".output_min"].reshape(()), W[name + ".output_max"].reshape(()))
        return y

    h = (2.0 * (pv - 0.5)) @ W[tw + "patch_embedder.input_proj.weight"].T
    table = W[tw + "patch_embedder.position_embedding_table"]
    xs, ys = pos[:, 0], pos[:, 1]
    if variant == "swap_xy":
        xs, ys = ys, xs
    pe = table[0][np.maximum(xs, 0)] + table[1][np.maximum(ys, 0)]
    h = h + np.where(real[:, None], pe, 0.0)
    mask = np.where(real[None, :], 0.0, -np.inf)  # padding keys unseen; every real key visible
    for i in range(vcfg["num_hidden_layers"]):
        b = f"{tw}encoder.layers.{i}."
        u = rms(h, W[b + "input_layernorm.weight"], eps)
        q = rms(lin(b + "self_attn.q_proj", u).reshape(Pmax, nh, d), W[b + "self_attn.q_norm.weight"], eps)
        kk = rms(lin(b + "self_attn.k_proj", u).reshape(Pmax, nh, d), W[b + "self_attn.k_norm.weight"], eps)
        v = rms(lin(b + "self_attn.v_proj", u).reshape(Pmax, nh, d), 1.0, eps)
        q, kk = rope_2d(q, pos, theta, variant), rope_2d(kk, pos, theta, variant)
        o = np.zeros((Pmax, nh, d))
        for hd in range(nh):
            s = q[:, hd] @ kk[:, hd].T + mask  # scale 1.0
            s = np.exp(s - s.max(axis=1, keepdims=True))
            o[:, hd] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hd]
        h = h + rms(lin(b + "self_attn.o_proj", o.reshape(Pmax, nh * d)), W[b + "post_attention_layernorm.weight"], eps)
        u = rms(h, W[b + "pre_feedforward_layernorm.weight"], eps)
        f = lin(b + "mlp.down_proj", gelu_tanh(lin(b + "mlp.gate_proj", u)) * lin(b + "mlp.up_proj", u))
        h = h + rms(f, W[b + "post_feedforward_layernorm.weight"], eps)
    # Pooling: padding zeroed, one-hot over kidx; W = patch columns.
    h = np.where(real[:, None], h, 0.0)
    gh, gw = grid
    n_out = (gh // k) * (gw // k)
    if variant == "pool_transposed":
        kidx = ys // k + (gh // k) * (xs // k)
    else:
        kidx = xs // k + (gw // k) * (ys // k)
    onehot = np.zeros((Pmax, max(n_out, Pmax // (k * k), int(kidx[real].max()) + 1)))
    onehot[np.nonzero(real)[0], kidx[real]] = 1.0 / (k * k)
    s = (onehot.T @ h)[:n_out] * math.sqrt(D)
    if vcfg.get("standardize"):
        s = (s - W[tw + "std_bias"]) * W[tw + "std_scale"]
    return rms(s, 1.0, eps) @ W["model.embed_vision.embedding_projection.weight"].T
