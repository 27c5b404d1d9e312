# tests/reference/numpy_qwen3_5.py — an independent float64 numpy implementation of the
# Qwen3.5 / Qwen3.6 dense text model (Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration's
# text part) and its MTP head, written from the equations (docs/architectures.md,
# "Qwen3.5 / Qwen3.6", and the transformers modeling semantics), not from nextn's C++:
#   - (1+w) RMSNorm for input/post-attention/final/q/k and all MTP norms; plain w for the
#     Gated DeltaNet output norm
#   - gated attention: q_proj rows per head [q_h | gate_h], q/k norm, NeoX RoPE on the first
#     rotary_dim dims, o_proj(attn * sigmoid(gate))
#   - Gated DeltaNet: causal depthwise conv over q|k|v with state, silu, l2norm(q)*dk^-1/2,
#     l2norm(k), beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), and the delta
#     rule token by token (decay first, then the rank-1 update, output from the new state)
#
#   - qwen3_5_moe: routed MLP (softmax router, top-k renormalised, SwiGLU experts stored
#     fused or per expert, sigmoid-gated shared expert), in the MTP layer too
#
#   - images (Qwen3_5ForConditionalGeneration): the rows at the image placeholders take the
#     vision tower's rows instead of the token embedding, and attention rotates by M-RoPE
#     (t, h, w) positions (mrope_positions below; mrope_section interleaved: frequency slot
#     j is h when j % 3 == 1 and j < 3·section[1], w when j % 3 == 2 and j < 3·section[2],
#     t otherwise); the causal mask stays in sequence order
#
#   m = Model(dir, broken=None)       # broken: one deliberate bug (see BROKEN) to show the
#   logits, hidden = m.forward(tokens)  # tests detect it
#   state = m.new_state(); m.step(tokens, state)  # incremental
import json
import math
import os

import numpy as np

import bf16_activations
from stateful_decoding import StatefulDecoding  # noqa: E402

BROKEN = ("no_plus_one", "plus_one_twice", "gate_query_halves", "conv_not_shifted",
          "value_heads_tiled")
# deliberate M-RoPE bugs (prompts with images)
BROKEN_MROPE = ("mrope_after_image_off_by_one", "mrope_axes_swapped")
# deliberate MoE bugs (qwen3_5_moe checkpoints only)
BROKEN_MOE = ("topk_not_renormalized", "shared_gate_missing", "router_softmax_over_topk_only_x2")


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.log1p(np.exp(x))


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


class State:
    """Per-sequence state: attention K/V per layer, conv window and S per DeltaNet layer."""

    def __init__(self):
        self.k, self.v, self.conv, self.S = {}, {}, {}, {}
        self.length = 0


class Model(StatefulDecoding):
    def __init__(self, model_dir, broken=None):
        if broken is not None and broken not in BROKEN + BROKEN_MOE + BROKEN_MROPE:
            raise ValueError(broken)
        self.broken = broken
        with open(os.path.join(model_dir, "config.json")) as f:
            top = json.load(f)
        c = dict(top)
        c.update(top.get("text_config") or {})
        self.cfg = c
        self.W = bf16_activations.read_checkpoint(model_dir)
        self.prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in self.W \
            else "model."
        self.H, self.L, self.eps = c["hidden_size"], c["num_hidden_layers"], c["rms_norm_eps"]
        self.heads, self.kv_heads, self.D = c["num_attention_heads"], c["num_key_value_heads"], \
            c["head_dim"]
        rp = c.get("rope_parameters") or {}
        theta = rp.get("rope_theta", c.get("rope_theta", 1e7))
        partial = rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.25))
        self.rot = int(self.D * partial)
        self.inv_freq = 1.0 / theta ** (np.arange(0, self.rot, 2, dtype=np.float64) / self.rot)
        section = rp.get("mrope_section") or (c.get("rope_scaling") or {}).get("mrope_section")
        self.axis = np.zeros(self.rot // 2, dtype=np.int64)  # t everywhere: 1-D RoPE
        if section:
            for j in range(self.rot // 2):
                if j % 3 == 1 and j < 3 * section[1]:
                    self.axis[j] = 1
                elif j % 3 == 2 and j < 3 * section[2]:
                    self.axis[j] = 2
            if broken == "mrope_axes_swapped":
                self.axis = np.where(self.axis == 0, 0, 3 - self.axis)
        self.image_token_id = top.get("image_token_id")
        self.Hk, self.Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        self.K = c["linear_conv_kernel_dim"]
        types = c.get("layer_types")
        if types is None:
            n = c.get("full_attention_interval", 4)
            types = ["full_attention" if (i + 1) % n == 0 else "linear_attention"
                     for i in range(self.L)]
        self.types = types
        self.embed = self.W[self.prefix + "embed_tokens.weight"]
        tied = c.get("tie_word_embeddings", top.get("tie_word_embeddings", False))
        self.lm_head = self.embed if tied else self.W["lm_head.weight"]
        self.n_mtp = c.get("mtp_num_hidden_layers", 0) if "mtp.fc.weight" in self.W else 0
        # qwen3_5_moe: routed MLPs in every layer not listed in mlp_only_layers
        self.experts = c.get("num_experts", 0)
        self.top_k = c.get("num_experts_per_tok", 0)
        self.norm_topk = c.get("norm_topk_prob", True)
        self.dense_layers = set(c.get("mlp_only_layers", []))

    # ---- norms ----------------------------------------------------------------------
    def norm1p(self, x, name):
        w = self.W[name]
        if self.broken == "no_plus_one":
            return rms(x, w, self.eps)
        if self.broken == "plus_one_twice":
            return rms(x, 2.0 + w, self.eps)
        return rms(x, 1.0 + w, self.eps)

    # ---- layers ---------------------------------------------------------------------
    def rope(self, x, positions):
        """x [T, heads, D]: NeoX rotation of dims [0, rot), pairs (j, j + rot/2)."""
        half = self.rot // 2
        positions = np.asarray(positions, dtype=np.float64)
        if positions.ndim == 2:  # M-RoPE: [T, 3] (t, h, w), each slot from its axis
            ang = positions[:, self.axis] * self.inv_freq[None, :]
        else:
            ang = np.outer(positions, self.inv_freq)  # [T, half]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., :half], x[..., half:self.rot]
        out = x.copy()
        out[..., :half] = a * cos - b * sin
        out[..., half:self.rot] = b * cos + a * sin
        return out

    def attention(self, p, x, positions, state, key):
        T, D, nh, nkv = x.shape[0], self.D, self.heads, self.kv_heads
        W = self.W
        P = x @ W[p + "self_attn.q_proj.weight"].T
        if self.broken == "gate_query_halves":
            q, gate = P[:, :nh * D].reshape(T, nh, D), P[:, nh * D:].reshape(T, nh, D)
        else:
            P = P.reshape(T, nh, 2 * D)
            q, gate = P[..., :D], P[..., D:]
        k = (x @ W[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, D)
        v = (x @ W[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, D)
        q = self.norm1p(q, p + "self_attn.q_norm.weight")
        k = self.norm1p(k, p + "self_attn.k_norm.weight")
        q, k = self.rope(q, positions), self.rope(k, positions)
        past = 0
        if key in state.k:
            past = state.k[key].shape[0]
            k = np.concatenate([state.k[key], k])
            v = np.concatenate([state.v[key], v])
        state.k[key], state.v[key] = k, v
        S = k.shape[0]
        mask = np.arange(S)[None, :] <= (past + np.arange(T))[:, None]
        out = np.empty((T, nh, D))
        g = nh // nkv
        for h in range(nh):
            s = q[:, h] @ k[:, h // g].T / math.sqrt(D)
            out[:, h] = softmax(np.where(mask, s, -np.inf)) @ v[:, h // g]
        o = out.reshape(T, nh * D) * sigmoid(gate.reshape(T, nh * D))
        return o @ W[p + "self_attn.o_proj.weight"].T

    def delta_net(self, p, x, state, key):
        W = self.W
        T = x.shape[0]
        Hk, Hv, dk, dv, K = self.Hk, self.Hv, self.dk, self.dv, self.K
        a_ = p + "linear_attn."
        u = x @ W[a_ + "in_proj_qkv.weight"].T                     # [T, C]
        z = (x @ W[a_ + "in_proj_z.weight"].T).reshape(T, Hv, dv)
        beta = sigmoid(x @ W[a_ + "in_proj_b.weight"].T)          # [T, Hv]
        g = -np.exp(W[a_ + "A_log"]) * softplus(x @ W[a_ + "in_proj_a.weight"].T + W[a_ + "dt_bias"])
        conv_w = W[a_ + "conv1d.weight"][:, 0, :]                 # [C, K]
        C = u.shape[1]
        window = state.conv.get(key, np.zeros((K - 1, C)))
        S = state.S.get(key, np.zeros((Hv, dk, dv)))
        out = np.empty((T, Hv, dv))
        r = Hv // Hk
        for t in range(T):
            full = np.concatenate([window, u[t:t + 1]])           # [K, C], oldest first
            c = silu(np.sum(full * conv_w.T, axis=0))              # W[:, K-1] * current row
            if self.broken != "conv_not_shifted":
                window = full[1:]
            q = c[:Hk * dk].reshape(Hk, dk)
            k = c[Hk * dk:2 * Hk * dk].reshape(Hk, dk)
            v = c[2 * Hk * dk:].reshape(Hv, dv)
            q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + 1e-6) / math.sqrt(dk)
            k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + 1e-6)
            for h in range(Hv):
                kh = h % Hk if self.broken == "value_heads_tiled" else h // r
                S[h] = math.exp(g[t, h]) * S[h]                      # decay first
                m = S[h].T @ k[kh]
                S[h] = S[h] + np.outer(k[kh], beta[t, h] * (v[h] - m))
                out[t, h] = S[h].T @ q[kh]
        state.conv[key], state.S[key] = window, S
        y = rms(out, W[a_ + "norm.weight"], self.eps) * silu(z)  # plain w: no +1
        return y.reshape(T, Hv * dv) @ W[a_ + "out_proj.weight"].T

    def layer(self, p, x, positions, state, key, kind):
        h = self.norm1p(x, p + "input_layernorm.weight")
        if kind == "full_attention":
            x = x + self.attention(p, h, positions, state, key)
        else:
            x = x + self.delta_net(p, h, state, key)
        n = self.norm1p(x, p + "post_attention_layernorm.weight")
        W = self.W
        if p + "mlp.gate.weight" in W:
            return x + self.moe(p + "mlp.", n)
        mlp = (silu(n @ W[p + "mlp.gate_proj.weight"].T) * (n @ W[p + "mlp.up_proj.weight"].T)) \
            @ W[p + "mlp.down_proj.weight"].T
        return x + mlp

    def expert(self, m, e):
        """(gate [I, H], up [I, H], down [H, I]) of routed expert e: fused or per expert."""
        W = self.W
        if m + "experts.gate_up_proj" in W:
            gu = W[m + "experts.gate_up_proj"][e]
            i = gu.shape[0] // 2
            return gu[:i], gu[i:], W[m + "experts.down_proj"][e]
        q = f"{m}experts.{e}."
        return W[q + "gate_proj.weight"], W[q + "up_proj.weight"], W[q + "down_proj.weight"]

    def moe(self, m, n):
        """Sparse MoE block: p = softmax(router(n)) over all experts, the top_k by p, weights
        p_top / sum(p_top) (norm_topk_prob), y = sum_e w_e SwiGLU_e(n)
        + sigmoid(shared_expert_gate(n)) SwiGLU_shared(n)."""
        W = self.W
        p = softmax(n @ W[m + "gate.weight"].T)                   # [T, E]
        y = np.zeros_like(n)
        for t in range(n.shape[0]):
            top = np.argsort(-p[t], kind="stable")[:self.top_k]
            w = p[t, top]
            if self.broken == "router_softmax_over_topk_only_x2":
                w = softmax(np.log(w) * 2.0)                      # a wrongly sharpened router
            elif self.norm_topk and self.broken != "topk_not_renormalized":
                w = w / np.sum(w)
            for e, we in zip(top, w):
                g, u, d = self.expert(m, e)
                y[t] += we * ((silu(g @ n[t]) * (u @ n[t])) @ d.T)
        s = m + "shared_expert."
        shared = (silu(n @ W[s + "gate_proj.weight"].T) * (n @ W[s + "up_proj.weight"].T)) \
            @ W[s + "down_proj.weight"].T
        if self.broken != "shared_gate_missing":
            shared = shared * sigmoid(n @ W[m + "shared_expert_gate.weight"].T)
        return y + shared

    # ---- model ----------------------------------------------------------------------
    def new_state(self):
        return State()

    def mrope_positions(self, n, images):
        """(t, h, w) of rows 0..n-1: images = [(first row, merged grid_h, grid_w)], text rows
        at a running position, image row r·gw + c at (p0, p0 + r, p0 + c), then the running
        position advances by max(gh, gw). Returns ([n, 3], rope_delta)."""
        out = np.zeros((n, 3), dtype=np.int64)
        row = cur = 0
        for first, gh, gw in images:
            while row < first:
                out[row] = cur
                row, cur = row + 1, cur + 1
            for i in range(gh * gw):
                out[row + i] = (cur, cur + i // gw, cur + i % gw)
            row += gh * gw
            cur += max(gh, gw) + (1 if self.broken == "mrope_after_image_off_by_one" else 0)
        while row < n:
            out[row] = cur
            row, cur = row + 1, cur + 1
        return out, int(out.max()) + 1 - n

    def step(self, tokens, state, embeds=None, positions=None):
        """Logits [T, V] and post-final-norm hidden [T, H] of tokens appended to state.
        embeds: {row: [H]} rows that replace the token embedding (an image's rows);
        positions: [T, 3] M-RoPE positions, or [T] (default: state.length + i)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        if positions is None:
            positions = np.arange(state.length, state.length + len(tokens))
        x = self.embed[np.where(tokens < self.embed.shape[0], tokens, 0)]
        for row, e in (embeds or {}).items():
            x[row] = e
        for i in range(self.L):
            x = self.layer(f"{self.prefix}layers.{i}.", x, positions, state, i, self.types[i])
        state.length += len(tokens)
        hidden = self.norm1p(x, self.prefix + "norm.weight")
        return hidden @ self.lm_head.T, hidden

    # ---- MTP ------------------------------------------------------------------------
    def mtp_logits(self, tokens, hidden, layer=0):
        """MTP rows p = 0..T-2: (hidden[p], tokens[p+1]) at position p, embedding zeroed at
        position 0; u = fc([norm(e); norm(h)]), one gated attention layer, mtp.norm, lm_head."""
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens) - 1
        e = self.embed[tokens[1:]].copy()
        e[0] = 0.0
        cat = np.concatenate([self.norm1p(e, "mtp.pre_fc_norm_embedding.weight"),
                              self.norm1p(hidden[:T], "mtp.pre_fc_norm_hidden.weight")], axis=-1)
        u = cat @ self.W["mtp.fc.weight"].T
        y = self.layer(f"mtp.layers.{layer}.", u, np.arange(T), State(), "mtp", "full_attention")
        return self.norm1p(y, "mtp.norm.weight") @ self.lm_head.T
