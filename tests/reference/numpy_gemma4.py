# tests/reference/numpy_gemma4.py — an independent float64 numpy implementation of the
# Gemma 4 text model (Gemma4ForCausalLM, Gemma4ForConditionalGeneration's text part) and of
# its "-assistant" drafter (Gemma4AssistantForCausalLM), written from the equations in
# docs/architectures.md ("Gemma 4"), not from nextn's C++:
#   - x0 = embed[id] * sqrt(H), the scale cast to the embedding's dtype as Hugging Face's
#     Gemma4TextScaledWordEmbedding does (BF16 / F16 checkpoints; also sqrt(P) of the PLE
#     table); every RMSNorm is plain x̂·w; v normed without a weight
#   - sliding layers: key j visible from query i iff 0 <= i - j < window, head_dim, RoPE
#     theta 1e4 over the whole head; full layers: global_head_dim, "proportional" RoPE
#     (inv_freq_i = theta^(-2i/D) for i < partial*D/2, 0 beyond; pairs (i, i + D/2))
#   - attention scale 1.0; K=V full layers take v from the raw key projection
#   - h = x + post_attn(attn(in(x))); h += post_ff(down(gelu_tanh(gate) * up)(pre_ff(h)));
#     PLE h += post_ple(proj(gelu_tanh(gate(h)) * ple_i)); h *= layer_scalar
#   - PLE: ple = (norm(W_proj x0 / sqrt(H)) + E_ple[id] sqrt(P)) / sqrt(2), per layer slice
#   - the last num_kv_shared_layers layers read the K/V of the last non-shared layer of the
#     same type; logits = cap * tanh(embed · norm(h) / cap)
# Keys and values are kept for every position (no ring): the window is only a mask here.
#   - images (step(..., images=[(row, features [n, H])])): the features replace the rows'
#     embeddings without the sqrt(H) scale; per-layer embeddings take pad_token_id's row
#     there (the projection part comes from the features); 1-D positions. Under
#     use_bidirectional_attention "vision", sliding layers allow (k <= q or same image) and
#     q - k < window; full layers stay causal (docs/vision-models.md, "Gemma 4")
#
#   - 26B-A4B form (enable_moe_block): routed GeGLU experts beside the dense MLP
#
#   m = Model(dir, broken=None)         # broken: one deliberate bug (see BROKEN)
#   logits, hidden = m.forward(tokens)  # hidden: post final norm
#   a = Assistant(dir, m); a.draft(state, token, hidden, steps)  # the drafter's logits
import json
import math
import os

import numpy as np

import bf16_activations
import safetensors_reader  # noqa: E402
from stateful_decoding import StatefulDecoding  # noqa: E402

BROKEN = ("norm_plus_one", "no_softcap", "wrong_donor", "window_off_by_one",
          "global_rope_plain")
# deliberate MoE bugs (26B-A4B-style checkpoints only)
# (top-k renormalisation is unobservable here: post_feedforward_layernorm_2 removes a
# per-row scale of the routed sum)
BROKEN_MOE = ("per_expert_scale_missing", "router_input_normed_2", "gate_up_halves_swapped")
# deliberate image bugs: sqrt(H) applied to image rows, the image's bidirectional block on
# full layers too, a "vision" model run causally, a causal (null) model run with the
# "vision" rule, PLE from the image token's row
BROKEN_IMAGE = ("image_sqrt_h", "image_bidir_global", "image_causal", "image_bidir_on_causal", "image_ple_token")


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def text_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        top = json.load(f)
    c = dict(top)
    c.update({k: v for k, v in (top.get("text_config") or {}).items() if v is not None})
    return top, c


def scale_in(dtype, n):
    """sqrt(n) held in a safetensors dtype: Hugging Face computes it in float32 and casts
    it to the table's dtype before multiplying (39.19 -> 39.25 for n = 1536 in BF16)."""
    s = np.float32(math.sqrt(n))
    if dtype == "BF16":
        return float(bf16_activations.to_bf16(np.array([s]))[0])
    if dtype == "F16":
        return float(np.float16(s))
    return float(s)


class State:
    """Per-sequence K/V of every layer that owns KV (all positions), and the length."""

    def __init__(self):
        self.k, self.v = {}, {}
        self.length = 0
        self.block = np.zeros(0, dtype=np.int64)  # per position: image index, -1 for text
        self.images = 0


class Model(StatefulDecoding):
    def __init__(self, model_dir, broken=None):
        if broken is not None and broken not in BROKEN + BROKEN_MOE + BROKEN_IMAGE:
            raise ValueError(broken)
        self.broken = broken
        _, c = text_config(model_dir)
        self.cfg = c
        self.W = bf16_activations.read_checkpoint(model_dir)
        self.dtypes = safetensors_reader.tensor_dtypes(model_dir)
        self.prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in self.W \
            else "model."
        self.H, self.L, self.eps = c["hidden_size"], c["num_hidden_layers"], c["rms_norm_eps"]
        self.heads = c["num_attention_heads"]
        self.types = list(c["layer_types"])
        self.types[-1] = "full_attention"
        self.window = c["sliding_window"]
        self.bidir = (c.get("use_bidirectional_attention") == "vision" or broken == "image_bidir_on_causal") \
            and broken != "image_causal"
        self.pad_id = c.get("pad_token_id", 0)
        if broken == "window_off_by_one":
            self.window += 1
        self.k_eq_v = c.get("attention_k_eq_v", False)
        self.geo = {}
        for kind in ("sliding_attention", "full_attention"):
            full = kind == "full_attention"
            D = c["global_head_dim"] if full else c["head_dim"]
            kv = c["num_global_key_value_heads"] if (full and self.k_eq_v) else c["num_key_value_heads"]
            rp = c["rope_parameters"][kind]
            theta = rp["rope_theta"]
            inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)  # D/2 frequencies
            if rp.get("rope_type") == "proportional":
                pairs = int(rp["partial_rotary_factor"] * D / 2)
                if broken == "global_rope_plain":
                    # the common mistake: rotate the first partial*D dims, exponent over those
                    rot = 2 * pairs
                    inv = np.zeros(D // 2)
                    sub = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
                    self.geo[kind] = (D, kv, ("plain", rot, sub))
                    continue
                inv[pairs:] = 0.0
            self.geo[kind] = (D, kv, ("neox", D, inv))
        shared = c.get("num_kv_shared_layers", 0)
        self.first_shared = self.L - shared
        self.donor = {}
        for i in range(self.first_shared, self.L):
            same = [j for j in range(self.first_shared) if self.types[j] == self.types[i]]
            self.donor[i] = same[0] if broken == "wrong_donor" else same[-1]
        self.inter = [c["intermediate_size"] * (2 if (c.get("use_double_wide_mlp") and
                                                      i >= self.first_shared) else 1)
                      for i in range(self.L)]
        self.P = c.get("hidden_size_per_layer_input") or 0
        self.softcap = c.get("final_logit_softcapping")
        self.embed = self.W[self.prefix + "embed_tokens.weight"]

    def norm(self, x, name):
        w = self.W[name]
        return rms(x, 1.0 + w if self.broken == "norm_plus_one" else w, self.eps)

    def rope(self, x, positions, kind):
        """x [T, heads, D]."""
        D, _, (form, rot, inv) = self.geo[kind]
        half = rot // 2
        ang = np.outer(np.asarray(positions, dtype=np.float64), inv)
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        out = x.copy()
        a, b = x[..., :half], x[..., half:rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:rot] = b * cos + a * sin
        return out

    def attend(self, q, K, V, positions, kind, block=None):
        """q [T, Hq, D] at `positions`; K, V [N, kv, D] for positions 0..N-1; block [N]: the
        image each position belongs to (-1 text), for the bidirectional rule."""
        T, Hq, D = q.shape
        group = Hq // K.shape[1]
        out = np.zeros_like(q)
        both_ways = block is not None and self.bidir and (
            kind == "sliding_attention" or self.broken == "image_bidir_global")
        for t in range(T):
            i = positions[t]
            j = np.arange(K.shape[0])
            visible = j <= i
            if both_ways and block[i] >= 0:
                visible |= block == block[i]
            if kind == "sliding_attention":
                visible &= (i - j) < self.window
            for h in range(Hq):
                s = K[:, h // group, :] @ q[t, h]  # scale 1.0
                s = np.where(visible, s, -np.inf)
                out[t, h] = softmax(s) @ V[:, h // group, :]
        return out

    def attention(self, p, x, positions, kv_layer, own, kind, state):
        """own: compute and store K/V for kv_layer; else read kv_layer's stored K/V."""
        W = self.W
        D, kv, _ = self.geo[kind]
        T = x.shape[0]
        n = self.norm(x, p + "input_layernorm.weight")
        q = (n @ W[p + "self_attn.q_proj.weight"].T).reshape(T, self.heads, D)
        q = self.rope(self.norm(q, p + "self_attn.q_norm.weight"), positions, kind)
        if own:
            kr = (n @ W[p + "self_attn.k_proj.weight"].T).reshape(T, kv, D)
            vr = kr if p + "self_attn.v_proj.weight" not in W else \
                (n @ W[p + "self_attn.v_proj.weight"].T).reshape(T, kv, D)
            k = self.rope(self.norm(kr, p + "self_attn.k_norm.weight"), positions, kind)
            v = rms(vr, 1.0, self.eps)
            state.k[kv_layer] = np.concatenate([state.k.get(kv_layer, np.zeros((0, kv, D))), k])
            state.v[kv_layer] = np.concatenate([state.v.get(kv_layer, np.zeros((0, kv, D))), v])
        o = self.attend(q, state.k[kv_layer], state.v[kv_layer], positions, kind, state.block)
        return o.reshape(T, self.heads * D) @ W[p + "self_attn.o_proj.weight"].T

    def moe(self, p, h):
        """26B-A4B routed branch: router over RMSNorm(h) (no weight) * router.scale *
        H^-1/2, softmax over all experts, top-k renormalised, times per_expert_scale; GeGLU
        experts (fused gate_up_proj rows [gate | up]) on pre_feedforward_layernorm_2(h)."""
        W, c = self.W, self.cfg
        H, k = h.shape[-1], c["top_k_experts"]
        if self.broken == "router_input_normed_2":   # the experts' input scored instead
            z = self.norm(h, p + "pre_feedforward_layernorm_2.weight")
        else:
            z = rms(h, 1.0, self.eps)
        z = z * W[p + "router.scale"] * H ** -0.5
        prob = softmax(z @ W[p + "router.proj.weight"].T)
        x2 = self.norm(h, p + "pre_feedforward_layernorm_2.weight")
        gu, down = W[p + "experts.gate_up_proj"], W[p + "experts.down_proj"]
        inter = gu.shape[1] // 2
        y = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-prob[t], kind="stable")[:k]
            w = prob[t, top]
            w = w / np.sum(w)
            if self.broken != "per_expert_scale_missing":
                w = w * W[p + "router.per_expert_scale"][top]
            for e, we in zip(top, w):
                a = gu[e] @ x2[t]
                if self.broken == "gate_up_halves_swapped":
                    a = np.concatenate([a[inter:], a[:inter]])
                y[t] += we * (down[e] @ (gelu_tanh(a[:inter]) * a[inter:]))
        return self.norm(y, p + "post_feedforward_layernorm_2.weight")

    def mlp_and_rest(self, p, h, ple_i):
        W = self.W
        m = self.norm(h, p + "pre_feedforward_layernorm.weight")
        f = (gelu_tanh(m @ W[p + "mlp.gate_proj.weight"].T) * (m @ W[p + "mlp.up_proj.weight"].T)) \
            @ W[p + "mlp.down_proj.weight"].T
        if p + "router.proj.weight" in W:  # dense MLP in parallel with the routed experts
            f = self.norm(f, p + "post_feedforward_layernorm_1.weight") + self.moe(p, h)
        h = h + self.norm(f, p + "post_feedforward_layernorm.weight")
        if ple_i is not None:
            g = gelu_tanh(h @ W[p + "per_layer_input_gate.weight"].T) * ple_i
            h = h + self.norm(g @ W[p + "per_layer_projection.weight"].T,
                              p + "post_per_layer_input_norm.weight")
        return h * W[p + "layer_scalar"][0]

    def per_layer_inputs(self, tokens, x0):
        """[T, L, P]."""
        T, L, P, W, pre = len(tokens), self.L, self.P, self.W, self.prefix
        e = W[pre + "embed_tokens_per_layer.weight"][tokens].reshape(T, L, P) * \
            scale_in(self.dtypes[pre + "embed_tokens_per_layer.weight"], P)
        proj = (x0 @ W[pre + "per_layer_model_projection.weight"].T) / math.sqrt(self.H)
        proj = self.norm(proj.reshape(T, L, P), pre + "per_layer_projection_norm.weight")
        return (proj + e) / math.sqrt(2.0)

    def new_state(self):
        return State()

    def embed_scale(self):
        """sqrt(H) as the embedding's dtype holds it."""
        return scale_in(self.dtypes[self.prefix + "embed_tokens.weight"], self.H)

    def step(self, tokens, state, images=()):
        """Logits [T, V] and post-final-norm hidden [T, H] of tokens appended to state;
        images: (row, features [n, H]) whose features replace rows row..row+n-1."""
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = np.arange(state.length, state.length + len(tokens))
        x = self.embed[tokens] * self.embed_scale()
        block = np.full(len(tokens), -1, dtype=np.int64)
        ple_tokens = tokens.copy()
        for row, feats in images:
            n = len(feats)
            scale = self.embed_scale() if self.broken == "image_sqrt_h" else 1.0
            x[row:row + n] = np.asarray(feats, dtype=np.float64) * scale
            block[row:row + n] = state.images
            state.images += 1
            if self.broken != "image_ple_token":
                ple_tokens[row:row + n] = self.pad_id
        state.block = np.concatenate([state.block, block])
        ple = self.per_layer_inputs(ple_tokens, x) if self.P else None
        for i in range(self.L):
            p = f"{self.prefix}layers.{i}."
            own = i < self.first_shared
            kv_layer = i if own else self.donor[i]
            h = x + self.norm(self.attention(p, x, positions, kv_layer, own, self.types[i], state),
                              p + "post_attention_layernorm.weight")
            x = self.mlp_and_rest(p, h, ple[:, i, :] if ple is not None else None)
        state.length += len(tokens)
        hidden = self.norm(x, self.prefix + "norm.weight")
        logits = hidden @ self.embed.T
        if self.softcap and self.broken != "no_softcap":
            logits = self.softcap * np.tanh(logits / self.softcap)
        return logits, hidden

    def last_kv_layer(self, kind):
        """The last non-shared layer of this type (what the assistant reads)."""
        return [j for j in range(self.first_shared) if self.types[j] == kind][-1]


class Assistant:
    """The -assistant drafter over a target Model (docs/architectures.md): query-only layers reading the
    target's K/V of the last non-shared layer of each type, at the constant position p."""

    def __init__(self, model_dir, target):
        top, c = text_config(model_dir)
        self.t = target
        self.W = bf16_activations.read_checkpoint(model_dir)
        self.top = top
        self.Hd, self.L, self.eps = c["hidden_size"], c["num_hidden_layers"], c["rms_norm_eps"]
        self.heads = c["num_attention_heads"]
        self.types = list(c["layer_types"])
        self.ordered = top.get("use_ordered_embeddings", False)
        self.top_k = top.get("centroid_intermediate_top_k", 32)
        self.softcap = c.get("final_logit_softcapping")

    def norm(self, x, name):
        return rms(x, self.W[name], self.eps)

    def logits(self, n):
        """Full-vocabulary logits of the normed drafter state n [H_d]; centroid masking keeps
        the top_k centroids' tokens and puts every other token at min(selected) - 1."""
        E = self.W["model.embed_tokens.weight"]
        z = E @ n
        if self.ordered:
            cent = self.W["masked_embedding.centroids.weight"] @ n
            order = self.W["masked_embedding.token_ordering"].astype(np.int64)
            per = order.shape[0] // cent.shape[0]
            top = np.argsort(-cent, kind="stable")[:self.top_k]
            cand = order.reshape(cent.shape[0], per)[top].reshape(-1)
            masked = np.full_like(z, np.min(z[cand]) - 1.0)
            masked[cand] = z[cand]
            z = masked
        if self.softcap:
            z = self.softcap * np.tanh(z / self.softcap)
        return z

    def draft(self, state, token, hidden, steps):
        """Greedy drafting from `token` (sampled from the target at position p =
        state.length - 1) and the target's post-norm hidden at p: [steps, V] logits."""
        t, W = self.t, self.W
        p = state.length - 1
        out = []
        x, h = int(token), np.asarray(hidden, dtype=np.float64)
        for _ in range(steps):
            e = t.embed[x] * t.embed_scale()
            u = np.concatenate([e, h]) @ W["pre_projection.weight"].T
            u = u[None, :]
            for i in range(self.L):
                kind = self.types[i]
                pre = f"model.layers.{i}."
                D = t.geo[kind][0]
                n = self.norm(u, pre + "input_layernorm.weight")
                q = (n @ W[pre + "self_attn.q_proj.weight"].T).reshape(1, self.heads, D)
                q = t.rope(self.norm(q, pre + "self_attn.q_norm.weight"), [p], kind)
                kv = t.last_kv_layer(kind)
                a = t.attend(q, state.k[kv], state.v[kv], [p], kind)
                a = a.reshape(1, self.heads * D) @ W[pre + "self_attn.o_proj.weight"].T
                u = u + self.norm(a, pre + "post_attention_layernorm.weight")
                m = self.norm(u, pre + "pre_feedforward_layernorm.weight")
                f = (gelu_tanh(m @ W[pre + "mlp.gate_proj.weight"].T) *
                     (m @ W[pre + "mlp.up_proj.weight"].T)) @ W[pre + "mlp.down_proj.weight"].T
                u = (u + self.norm(f, pre + "post_feedforward_layernorm.weight")) * \
                    W[pre + "layer_scalar"][0]
            n = self.norm(u[0], "model.norm.weight")
            z = self.logits(n)
            out.append(z)
            x = int(np.argmax(z))
            h = W["post_projection.weight"] @ n
        return np.array(out)
