# tests/reference/numpy_glm4_moe.py — an independent float64 numpy implementation of
# GLM-4.5 (Glm4MoeForCausalLM, model_type glm4_moe) and its nextn (MTP) layer, written
# from the equations (docs/architectures.md, "GLM-4.5" and "MTP heads"; the Glm4Moe
# modeling semantics), not from
# nextn's C++:
#   - plain-w RMSNorm; GQA attention with q/k/v bias, scale 1/sqrt(D), RoPE on the first
#     partial_rotary_factor * D dims of each head (NeoX pairs (j, j + rot/2)), the rest kept
#   - layers < first_k_dense_replace: SwiGLU MLP; the others a routed MLP:
#       s = sigmoid(router(x)); top-k experts by s + e_score_correction_bias (the bias only
#       chooses); w = s[top] / sum(s[top]) (norm_topk_prob) * routed_scaling_factor;
#       y = sum_e w_e SwiGLU_e(x) + SwiGLU_shared(x)
#   - nextn layer model.layers.{L}: u = eh_proj([enorm(E[x_{p+1}]); hnorm(h_p)]) (embedding
#     zeroed at position 0), the decoder layer, shared_head.norm, shared_head.head
#
#   m = Model(dir, broken=None)         # broken: one deliberate bug (BROKEN)
#   logits, hidden = m.forward(tokens)
import json
import math
import os

import numpy as np

import bf16_activations
from stateful_decoding import StatefulDecoding  # noqa: E402

BROKEN = ("router_bias_ignored", "router_bias_in_weights", "topk_not_renormalized",
          "routed_scale_missing", "full_rotary")


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


class State:
    def __init__(self):
        self.k, self.v = {}, {}
        self.length = 0


class Model(StatefulDecoding):
    def __init__(self, model_dir, broken=None):
        if broken is not None and broken not in BROKEN:
            raise ValueError(broken)
        self.broken = broken
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.cfg = c
        self.W = bf16_activations.read_checkpoint(model_dir)
        self.H, self.L, self.eps = c["hidden_size"], c["num_hidden_layers"], c["rms_norm_eps"]
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.D = c.get("head_dim") or self.H // self.heads
        self.rot = self.D if broken == "full_rotary" else int(self.D * c.get("partial_rotary_factor", 0.5))
        theta = c.get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / theta ** (np.arange(0, self.rot, 2, dtype=np.float64) / self.rot)
        self.top_k = c["num_experts_per_tok"]
        self.first_dense = c.get("first_k_dense_replace", 1)
        self.scale = c.get("routed_scaling_factor", 1.0)
        self.norm_topk = c.get("norm_topk_prob", True)
        self.embed = self.W["model.embed_tokens.weight"]
        self.lm_head = self.embed if c.get("tie_word_embeddings") else self.W["lm_head.weight"]
        self.n_mtp = c.get("num_nextn_predict_layers", 0)
        # per routed-layer call: each row's gap between the k-th and (k+1)-th choice score
        # (how far the routing is from a tie; quantized tests compare only clear rows)
        self.route_margins = []

    def rope(self, x, positions):
        half = self.rot // 2
        ang = np.outer(np.asarray(positions, dtype=np.float64), self.inv_freq)
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., :half], x[..., half:self.rot]
        out = x.copy()
        out[..., :half] = a * cos - b * sin
        out[..., half:self.rot] = b * cos + a * sin
        return out

    def attention(self, p, x, positions, state, key):
        W, T, D, nh, nkv = self.W, x.shape[0], self.D, self.heads, self.kv_heads

        def proj(n):
            return x @ W[f"{p}self_attn.{n}.weight"].T + W[f"{p}self_attn.{n}.bias"]
        q = self.rope(proj("q_proj").reshape(T, nh, D), positions)
        k = self.rope(proj("k_proj").reshape(T, nkv, D), positions)
        v = proj("v_proj").reshape(T, nkv, D)
        past = 0
        if key in state.k:
            past = state.k[key].shape[0]
            k = np.concatenate([state.k[key], k])
            v = np.concatenate([state.v[key], v])
        state.k[key], state.v[key] = k, v
        mask = np.arange(k.shape[0])[None, :] <= (past + np.arange(T))[:, None]
        out = np.empty((T, nh, D))
        g = nh // nkv
        for h in range(nh):
            s = q[:, h] @ k[:, h // g].T / math.sqrt(D)
            out[:, h] = softmax(np.where(mask, s, -np.inf)) @ v[:, h // g]
        return out.reshape(T, nh * D) @ W[p + "self_attn.o_proj.weight"].T

    @staticmethod
    def swiglu(W, q, x):
        return (silu(x @ W[q + "gate_proj.weight"].T) * (x @ W[q + "up_proj.weight"].T)) \
            @ W[q + "down_proj.weight"].T

    def moe(self, m, x):
        W = self.W
        s = sigmoid(x @ W[m + "gate.weight"].T)                       # [T, E]
        bias = W[m + "gate.e_score_correction_bias"]
        y = np.zeros_like(x)
        ranked = -np.sort(-(s + bias), axis=-1)
        self.route_margins.append(ranked[:, self.top_k - 1] - ranked[:, self.top_k])
        for t in range(x.shape[0]):
            choice = s[t] if self.broken == "router_bias_ignored" else s[t] + bias
            top = np.argsort(-choice, kind="stable")[:self.top_k]
            w = choice[top] if self.broken == "router_bias_in_weights" else s[t, top]
            if self.norm_topk and self.broken != "topk_not_renormalized":
                w = w / (np.sum(w) + 1e-20)
            if self.broken != "routed_scale_missing":
                w = w * self.scale
            for e, we in zip(top, w):
                y[t] += we * self.swiglu(W, f"{m}experts.{e}.", x[t:t + 1])[0]
        return y + self.swiglu(W, m + "shared_experts.", x)

    def layer(self, i, x, positions, state, key):
        p = f"model.layers.{i}."
        W = self.W
        x = x + self.attention(p, rms(x, W[p + "input_layernorm.weight"], self.eps), positions, state, key)
        n = rms(x, W[p + "post_attention_layernorm.weight"], self.eps)
        if i < self.first_dense:
            return x + self.swiglu(W, p + "mlp.", n)
        return x + self.moe(p + "mlp.", n)

    def new_state(self):
        return State()

    def step(self, tokens, state):
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = np.arange(state.length, state.length + len(tokens))
        x = self.embed[tokens]
        for i in range(self.L):
            x = self.layer(i, x, positions, state, i)
        state.length += len(tokens)
        hidden = rms(x, self.W["model.norm.weight"], self.eps)
        return hidden @ self.lm_head.T, hidden

    def mtp_logits(self, tokens, hidden, layer=0):
        """nextn rows p = 0..T-2: (hidden[p], tokens[p+1]) at position p."""
        W, L = self.W, self.L + layer
        p = f"model.layers.{L}."
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens) - 1
        e = self.embed[tokens[1:]].copy()
        e[0] = 0.0
        cat = np.concatenate([rms(e, W[p + "enorm.weight"], self.eps),
                              rms(hidden[:T], W[p + "hnorm.weight"], self.eps)], axis=-1)
        u = cat @ W[p + "eh_proj.weight"].T
        y = self.layer(L, u, np.arange(T), State(), "mtp")
        head = W.get(p + "shared_head.head.weight", self.lm_head)
        return rms(y, W[p + "shared_head.norm.weight"], self.eps) @ head.T
