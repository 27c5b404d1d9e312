# tests/reference/numpy_dflash.py — a float64 numpy DFlash drafter (DFlashDraftModel) over
# a numpy_model.Model target, written from the drafter's equations:
#   c_j = [S[l_1+1]_j ; … ; S[l_K+1]_j]   (target residual streams after layers l_i)
#   g_j = RMS(W_fc c_j; hidden_norm);  per layer Kc_j = RoPE_j(k_norm(W_k g_j)), Vc_j = W_v g_j
#   block rows at P..P+B-1 = [last, M, …]: x = E_target[b]; per layer n = RMS(x; input_layernorm),
#   Q = RoPE(q_norm(W_q n)), Kb = RoPE(k_norm(W_k n)), Vb = W_v n, every row attends over all
#   context rows and all block rows; x += W_o A; x += MLP(RMS(x; post_attention_layernorm))
#   logits = target lm_head · RMS(x; norm) for slots 1..B-1. A sliding_attention layer
#   (layer_types) sees only the newest sliding_window context rows.
# `bug` makes one deliberate mistake (the ones a random-weight test must rule out):
#   "causal"        a causal mask inside the block
#   "unshifted"     streams S[l_i] (layer inputs) instead of S[l_i + 1]
#   "no_k_norm"     context keys without k_norm
#   "no_hidden_norm" g = W_fc c without hidden_norm
#
#   d = DFlash(drafter_dir, target)
#   logits = d.block_logits(prompt, last, B)     # [B-1, vocab]
import json
import math
import os

import numpy as np

import bf16_activations
from numpy_model import apply_rope, rms_norm, rope_inv_freq, silu, softmax


def default_layer_ids(n_target, n_draft):
    if n_draft == 1:
        return [n_target // 2]
    return [int(round(1 + i * (n_target - 4) / (n_draft - 1))) for i in range(n_draft)]


class DFlash:
    def __init__(self, model_dir, target, bug=None):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.t, self.bug = target, bug
        self.W = bf16_activations.read_checkpoint(model_dir)
        self.L = c["num_hidden_layers"]
        self.H = c["hidden_size"]
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or self.H // self.heads
        self.eps = c["rms_norm_eps"]
        self.inv = rope_inv_freq(self.hd, c["rope_theta"], None)
        dc = c["dflash_config"]
        self.mask = dc["mask_token_id"]
        self.ids = dc.get("target_layer_ids") or default_layer_ids(target.L, self.L)
        # sliding layers see the newest `sliding_window` context rows (all block rows)
        types = c.get("layer_types") or ["full_attention"] * self.L
        self.windows = [c["sliding_window"] if t == "sliding_attention" else 0 for t in types]

    def lin(self, name, x):
        return x @ self.W[name].T

    def context(self, tokens):
        """Per layer (Kc [T, kvh, hd], Vc [T, kvh, hd]) of the committed rows `tokens`."""
        S = self.t.residual_streams(tokens)
        shift = 0 if self.bug == "unshifted" else 1
        c = np.concatenate([S[i + shift] for i in self.ids], axis=-1)
        g = self.lin("fc.weight", c)
        if self.bug != "no_hidden_norm":
            g = rms_norm(g, self.W["hidden_norm.weight"], self.eps)
        T = len(tokens)
        out = []
        for l in range(self.L):
            p = f"layers.{l}.self_attn."
            k = self.lin(p + "k_proj.weight", g).reshape(T, self.kv_heads, self.hd)
            if self.bug != "no_k_norm":
                k = rms_norm(k, self.W[p + "k_norm.weight"], self.eps)
            k = apply_rope(k, np.arange(T), self.inv)
            v = self.lin(p + "v_proj.weight", g).reshape(T, self.kv_heads, self.hd)
            out.append((k, v))
        return out

    def block_logits(self, prompt, last, B):
        ctx = self.context(prompt)
        P = len(prompt)
        pos = np.arange(P, P + B)
        x = np.asarray(self.t.embed[np.array([last] + [self.mask] * (B - 1))], dtype=np.float64)
        group = self.heads // self.kv_heads
        for l in range(self.L):
            p = f"layers.{l}."
            n = rms_norm(x, self.W[p + "input_layernorm.weight"], self.eps)
            q = self.lin(p + "self_attn.q_proj.weight", n).reshape(B, self.heads, self.hd)
            k = self.lin(p + "self_attn.k_proj.weight", n).reshape(B, self.kv_heads, self.hd)
            v = self.lin(p + "self_attn.v_proj.weight", n).reshape(B, self.kv_heads, self.hd)
            q = apply_rope(rms_norm(q, self.W[p + "self_attn.q_norm.weight"], self.eps), pos, self.inv)
            k = apply_rope(rms_norm(k, self.W[p + "self_attn.k_norm.weight"], self.eps), pos, self.inv)
            K = np.concatenate([ctx[l][0], k], axis=0)
            V = np.concatenate([ctx[l][1], v], axis=0)
            visible = np.ones((B, P + B), dtype=bool)
            if self.windows[l] > 0:
                visible[:, :max(0, P - self.windows[l])] = False
            if self.bug == "causal":
                visible[:, P:] = np.tril(np.ones((B, B), dtype=bool))
            A = np.empty((B, self.heads, self.hd))
            for h in range(self.heads):
                s = q[:, h, :] @ K[:, h // group, :].T / math.sqrt(self.hd)
                A[:, h, :] = softmax(np.where(visible, s, -np.inf)) @ V[:, h // group, :]
            x = x + self.lin(p + "self_attn.o_proj.weight", A.reshape(B, -1))
            n = rms_norm(x, self.W[p + "post_attention_layernorm.weight"], self.eps)
            x = x + self.lin(p + "mlp.down_proj.weight",
                             silu(self.lin(p + "mlp.gate_proj.weight", n)) * self.lin(p + "mlp.up_proj.weight", n))
        y = rms_norm(x[1:], self.W["norm.weight"], self.eps)
        return y @ self.t.lm_head.T
