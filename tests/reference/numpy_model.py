# tests/reference/numpy_model.py — an independent float64 numpy implementation of the
# Hugging Face decoder models nextn supports, written from the transformers modeling
# semantics (LlamaForCausalLM incl. llama3 rope scaling, Qwen2ForCausalLM with q/k/v bias,
# Qwen3ForCausalLM with per-head q_norm/k_norm before RoPE, MiMoForCausalLM = Qwen2 + MTP)
# plus the MTP layers in the MiMo and DeepSeek-V3 layouts and separate MTP assistants.
#
#   m = Model("/path/to/checkpoint")
#   logits, hidden = m.forward(tokens)          # [T, vocab], post-final-norm [T, hidden]
#   tokens, rows = m.greedy(prompt, n)          # greedy decode (full recompute per step)
#   mtp = m.mtp_logits(prompt, hidden)          # MTP layer 0 rows p = 0..T-2
#   S = m.residual_streams(tokens)              # [L+1, T, H]: S[l] the input of layer l
import json
import math
import os

import numpy as np

import bf16_activations


def rms_norm(x, w, eps):
    # HF LlamaRMSNorm / Qwen2RMSNorm: x * rsqrt(mean(x^2) + eps) * weight
    var = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(var + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def rope_inv_freq(head_dim, theta, scaling):
    """inv_freq of the default rope, with transformers' `_compute_llama3_parameters`."""
    inv_freq = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    if not scaling:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return inv_freq
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind != "llama3":
        raise ValueError(f"reference: unsupported rope_scaling {kind}")
    factor = scaling["factor"]
    low = scaling["low_freq_factor"]
    high = scaling["high_freq_factor"]
    old_ctx = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_ctx / low
    high_freq_wavelen = old_ctx / high
    wavelen = 2 * math.pi / inv_freq
    out = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, out)


def apply_rope(x, positions, inv_freq):
    """x [T, heads, head_dim]; HF rotate_half convention (pairs i and i + head_dim/2)."""
    freqs = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)  # [T, hd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos = np.cos(emb)[:, None, :]
    sin = np.sin(emb)[:, None, :]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rot * sin


class BlockShape:
    def __init__(self, heads, kv_heads, head_dim, eps, inv_freq):
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.eps, self.inv_freq = eps, inv_freq


class KvCache:
    """Per-layer lists of past keys/values (post-RoPE), keyed by block prefix."""

    def __init__(self):
        self.k, self.v = {}, {}

    def length(self, prefix):
        return 0 if prefix not in self.k else self.k[prefix].shape[0]

    def truncate(self, n):
        for p in self.k:
            self.k[p] = self.k[p][:n]
            self.v[p] = self.v[p][:n]


def linear(W, prefix, x):
    y = x @ W[prefix + ".weight"].T
    b = W.get(prefix + ".bias")
    return y if b is None else y + b


def decoder_block(W, prefix, x, positions, shape, cache=None):
    """One pre-norm decoder layer over new rows x [T, H] at `positions`; the rows attend to
    the cached rows (if any) and causally to each other."""
    s = shape
    T = x.shape[0]
    residual = x
    h = rms_norm(x, W[prefix + ".input_layernorm.weight"], s.eps)
    q = linear(W, prefix + ".self_attn.q_proj", h).reshape(T, s.heads, s.head_dim)
    k = linear(W, prefix + ".self_attn.k_proj", h).reshape(T, s.kv_heads, s.head_dim)
    v = linear(W, prefix + ".self_attn.v_proj", h).reshape(T, s.kv_heads, s.head_dim)
    if prefix + ".self_attn.q_norm.weight" in W:  # Qwen3: RMSNorm over head_dim, per head
        q = rms_norm(q, W[prefix + ".self_attn.q_norm.weight"], s.eps)
        k = rms_norm(k, W[prefix + ".self_attn.k_norm.weight"], s.eps)
    q = apply_rope(q, positions, s.inv_freq)
    k = apply_rope(k, positions, s.inv_freq)
    past = 0
    if cache is not None:
        past = cache.length(prefix)
        if past:
            k = np.concatenate([cache.k[prefix], k], axis=0)
            v = np.concatenate([cache.v[prefix], v], axis=0)
        cache.k[prefix], cache.v[prefix] = k, v
    S = k.shape[0]
    group = s.heads // s.kv_heads
    mask = np.arange(S)[None, :] <= (past + np.arange(T))[:, None]  # [T, S]
    out = np.empty((T, s.heads, s.head_dim))
    for hh in range(s.heads):
        kv = hh // group
        scores = q[:, hh, :] @ k[:, kv, :].T / math.sqrt(s.head_dim)
        scores = np.where(mask, scores, -np.inf)
        out[:, hh, :] = softmax(scores) @ v[:, kv, :]
    attn = linear(W, prefix + ".self_attn.o_proj", out.reshape(T, s.heads * s.head_dim))
    x = residual + attn
    residual = x
    h = rms_norm(x, W[prefix + ".post_attention_layernorm.weight"], s.eps)
    mlp = linear(W, prefix + ".mlp.down_proj",
                 silu(linear(W, prefix + ".mlp.gate_proj", h)) * linear(W, prefix + ".mlp.up_proj", h))
    return residual + mlp


def load_json(path):
    with open(path) as f:
        return json.load(f)


class MtpHead:
    """MTP layers (MiMo or DeepSeek layout) with their own KV cache semantics (rows attend
    causally to earlier MTP rows)."""

    def __init__(self, W, layout, prefixes, shape, eps):
        self.W, self.layout, self.prefixes, self.shape, self.eps = W, layout, prefixes, shape, eps

    def step(self, layer, h, e, positions, lm_head, cache=None):
        """h [T, H] hidden in, e [T, H] token embeddings (already masked); returns
        (logits [T, vocab], out [T, H] the recycled hidden)."""
        W, p, eps = self.W, self.prefixes[layer], self.eps
        if self.layout == "mimo":
            cat = np.concatenate([rms_norm(h, W[p + ".hidden_layernorm.weight"], eps),
                                  rms_norm(e, W[p + ".token_layernorm.weight"], eps)], axis=-1)
            u = cat @ W[p + ".input_proj.weight"].T
        else:
            cat = np.concatenate([rms_norm(e, W[p + ".enorm.weight"], eps),
                                  rms_norm(h, W[p + ".hnorm.weight"], eps)], axis=-1)
            u = cat @ W[p + ".eh_proj.weight"].T
        y = decoder_block(W, p, u, positions, self.shape, cache)
        if self.layout == "mimo":
            out = rms_norm(y, W[p + ".final_layernorm.weight"], eps)
            head = lm_head
        else:
            out = rms_norm(y, W[p + ".shared_head.norm.weight"], eps)
            head = W.get(p + ".shared_head.head.weight", lm_head)
        return out @ head.T, out


class Model:
    def __init__(self, model_dir, assistant_dir=None):
        self.cfg = c = load_json(os.path.join(model_dir, "config.json"))
        self.W = bf16_activations.read_checkpoint(model_dir)
        self.arch = c["architectures"][0]
        if self.arch not in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                             "MiMoForCausalLM"):
            raise ValueError(f"reference: unsupported architecture {self.arch}")
        self.H = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.V = c["vocab_size"]
        self.eps = c["rms_norm_eps"]
        head_dim = c.get("head_dim") or self.H // c["num_attention_heads"]
        inv = rope_inv_freq(head_dim, c.get("rope_theta", 10000.0), c.get("rope_scaling"))
        self.shape = BlockShape(c["num_attention_heads"], c.get("num_key_value_heads",
                                c["num_attention_heads"]), head_dim, self.eps, inv)
        self.embed = self.W["model.embed_tokens.weight"]
        self.lm_head = self.embed if c.get("tie_word_embeddings", False) else \
            self.W["lm_head.weight"]
        self.mtp = None
        if assistant_dir:
            self.mtp = self._load_assistant(assistant_dir)
        elif c.get("num_nextn_predict_layers", 0) > 0:
            n = c["num_nextn_predict_layers"]
            if any(k.startswith("model.mtp_layers.") for k in self.W):
                self.mtp = MtpHead(self.W, "mimo", [f"model.mtp_layers.{i}" for i in range(n)],
                                   self.shape, self.eps)
            else:
                self.mtp = MtpHead(self.W, "deepseek",
                                   [f"model.layers.{self.L + i}" for i in range(n)],
                                   self.shape, self.eps)

    def _load_assistant(self, d):
        ac = load_json(os.path.join(d, "config.json"))
        if ac.get("model_type") != "mtp_assistant":
            raise ValueError(f"{d}: not an MTP assistant checkpoint")
        if ac["hidden_size"] != self.H or ac["vocab_size"] != self.V:
            raise ValueError(f"{d}: hidden/vocab {ac['hidden_size']}/{ac['vocab_size']} do not "
                             f"match the target's {self.H}/{self.V}")
        W = bf16_activations.read_checkpoint(d)
        n = ac["num_nextn_predict_layers"]
        layout = ac["mtp_layout"]
        base = "model.mtp_layers" if layout == "mimo" else "model.layers"
        scaling = ac["rope_scaling"] if "rope_scaling" in ac else self.cfg.get("rope_scaling")
        inv = rope_inv_freq(ac["head_dim"], ac["rope_theta"], scaling)
        shape = BlockShape(ac["num_attention_heads"], ac["num_key_value_heads"], ac["head_dim"],
                           ac["rms_norm_eps"], inv)
        return MtpHead(W, layout, [f"{base}.{i}" for i in range(n)], shape, ac["rms_norm_eps"])

    # ---- backbone -------------------------------------------------------------------
    def forward(self, tokens, cache=None, start=0):
        """Logits [T, vocab] and post-final-norm hidden [T, H] of `tokens` at positions
        start..start+T-1 (attending to `cache` if given)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = np.arange(start, start + len(tokens))
        x = self.embed[tokens]
        for i in range(self.L):
            x = decoder_block(self.W, f"model.layers.{i}", x, positions, self.shape, cache)
        hidden = rms_norm(x, self.W["model.norm.weight"], self.eps)
        return hidden @ self.lm_head.T, hidden

    def residual_streams(self, tokens):
        """[L+1, T, H]: S[0] the embedding rows, S[l] the input of layer l (the output of
        layer l-1) before its norm, S[L] the final pre-norm output."""
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = np.arange(len(tokens))
        x = self.embed[tokens]
        streams = [np.asarray(x, dtype=np.float64)]
        for i in range(self.L):
            x = decoder_block(self.W, f"model.layers.{i}", x, positions, self.shape)
            streams.append(x)
        return np.stack(streams)

    def greedy(self, prompt, n):
        """n greedy decode steps by full recomputation; returns (tokens [n], logits [n, V])
        where token i = argmax of the row before it and row i = logits after feeding it."""
        seq = list(prompt)
        logits, _ = self.forward(seq)
        toks, rows = [], []
        nxt = int(np.argmax(logits[-1]))
        for _ in range(n):
            toks.append(nxt)
            seq.append(nxt)
            logits, _ = self.forward(seq)
            rows.append(logits[-1])
            nxt = int(np.argmax(logits[-1]))
        return np.array(toks, dtype=np.int64), np.array(rows)

    def forced_decode(self, prompt, fed):
        """Logits after each token of `fed` appended to the prompt (teacher forcing)."""
        logits, _ = self.forward(list(prompt) + list(fed))
        return logits[len(prompt):]

    # ---- MTP --------------------------------------------------------------------------
    def mtp_logits(self, tokens, hidden, layer=0):
        """MTP layer `layer` logits for rows p = 0..T-2, each consuming (hidden[p],
        tokens[p+1]) at position p; the embedding is zeroed at position 0."""
        if self.mtp is None:
            raise ValueError("checkpoint has no MTP layers")
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens) - 1
        positions = np.arange(T)
        e = self.embed[tokens[1:]].copy()
        e[positions == 0] = 0.0
        logits, _ = self.mtp.step(layer, hidden[:T], e, positions, self.lm_head)
        return logits

    def mtp_draft(self, tokens, hidden, n):
        """Recursive drafting after a prompt: catch-up over every prompt row, then n draft
        steps (layer = step mod layers), each feeding back the MTP output hidden and its
        own draft at the next position. Returns the drafted tokens."""
        cache = KvCache()
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens)
        # the last prompt row waits for the target's own next token
        next_tok = int(np.argmax(hidden[-1] @ self.lm_head.T))
        ids = np.concatenate([tokens[1:], [next_tok]])
        positions = np.arange(T)
        e = self.embed[ids].copy()
        e[positions == 0] = 0.0
        logits, out = self.mtp.step(0, hidden, e, positions, self.lm_head, cache)
        drafts = [int(np.argmax(logits[-1]))]
        h = out[-1:]
        nl = len(self.mtp.prefixes)
        for step in range(1, n):
            if nl > 1:
                raise NotImplementedError("multi-layer recursive drafting needs per-layer caches")
            e = self.embed[[drafts[-1]]]
            logits, h = self.mtp.step(step % nl, h, e, [T - 1 + step], self.lm_head, cache)
            drafts.append(int(np.argmax(logits[-1])))
        return drafts
