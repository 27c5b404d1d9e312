# tests/reference/numpy_eagle3.py — an independent float64 numpy EAGLE-3 drafter, written
# from the EAGLE-3 equations (Li et al. 2025, the SafeAILab reference and the layouts
# vLLM and the speculators library load), over a numpy_model.Model target:
#
#   f_p = [S[a]_p ; S[b]_p ; S[c]_p]       S[l] = the input of target layer l (S[0] the
#                                          embedding, S[L] the final pre-norm output)
#   g_p = fc(f_p)                          (fc(RMS(f_p; input_norm)) with norm_before_fc)
#   row at position p, token x:            u = [RMS(E[x]; input_layernorm) ; RMS(g; hidden_norm)]
#                                          h1 = g + o_proj(causal attention(q, k, v of u)), RoPE at p
#                                          (residual RMS(g) with norm_before_residual)
#                                          out = h1 + MLP(RMS(h1; post_attention_layernorm))
#                                          z = lm_head(RMS(out; norm)) over the draft vocabulary
#   draft column i = target token i + d2t[i];  the next step's g is `out` (pre-norm).
#
#   e = Eagle3(target_dir, drafter_dir)
#   rows = e.draft_logits(prompt, steps)   # [len(prompt) + steps - 1, V_d]: the prompt
#                                          # rows (row p pairs g_p with x_{p+1}, the last
#                                          # with the target's greedy next token), then
#                                          # steps - 1 chained greedy steps
# `bug` builds a deliberately wrong drafter (see BUGS) for the tests to tell apart.
import json
import math
import os

import numpy as np

import bf16_activations
import numpy_model as M

BUGS = ("concat_g_e", "normed_residual", "layer_outputs", "post_norm_feedback", "d2t_absolute")


class Eagle3:
    def __init__(self, target_dir, drafter_dir, bug=None):
        assert bug in (None,) + BUGS
        self.bug = bug
        self.t = M.Model(target_dir)
        with open(os.path.join(drafter_dir, "config.json")) as f:
            c = json.load(f)
        c = dict(c.get("transformer_layer_config", {}), **{k: v for k, v in c.items()
                                                         if k != "transformer_layer_config"})
        self.c = c
        self.W = bf16_activations.read_checkpoint(drafter_dir)
        W = self.W
        self.p = "midlayer" if "midlayer.input_layernorm.weight" in W else "layers.0"
        self.H = c["hidden_size"]
        self.eps = c["rms_norm_eps"]
        hd = c.get("head_dim") or self.H // c["num_attention_heads"]
        self.heads, self.kv_heads, self.hd = c["num_attention_heads"], c["num_key_value_heads"], hd
        self.inv_freq = M.rope_inv_freq(hd, c.get("rope_theta", 10000.0), c.get("rope_scaling"))
        L = self.t.L
        ids = c.get("eagle_aux_hidden_state_layer_ids") or \
            c.get("eagle_config", {}).get("eagle_aux_hidden_state_layer_ids") or [2, L // 2, L - 3]
        self.ids = [i + 1 for i in ids] if bug == "layer_outputs" else list(ids)
        dv = c.get("draft_vocab_size", c["vocab_size"])
        d2t = W["d2t"].astype(np.int64) if "d2t" in W else np.zeros(dv, dtype=np.int64)
        self.to_target = d2t if bug == "d2t_absolute" else np.arange(dv) + d2t
        self.embed = W.get("embed_tokens.weight", self.t.embed)

    def streams(self, tokens):
        """S[l] for every l = 0..L: [L + 1, T, H_t]."""
        t = self.t
        x = t.embed[np.asarray(tokens, dtype=np.int64)]
        positions = np.arange(len(tokens))
        out = [x]
        cache = M.KvCache()
        for i in range(t.L):
            x = M.decoder_block(t.W, f"model.layers.{i}", x, positions, t.shape, cache)
            out.append(x)
        return np.stack(out)

    def g(self, streams):
        f = np.concatenate([streams[i] for i in self.ids], axis=-1)
        if self.c.get("norm_before_fc"):
            f = M.rms_norm(f, self.W["input_norm.weight"], self.eps)
        return f @ self.W["fc.weight"].T

    def _row(self, g, token, pos, cache):
        """One drafter row: (pre-norm out [H], draft-vocabulary logits)."""
        W, p, eps = self.W, self.p, self.eps
        e = M.rms_norm(self.embed[token], W[p + ".input_layernorm.weight"], eps)
        gn = M.rms_norm(g, W[p + ".hidden_norm.weight"], eps)
        u = np.concatenate([gn, e] if self.bug == "concat_g_e" else [e, gn])
        normed = self.c.get("norm_before_residual", False) != (self.bug == "normed_residual")
        r = gn if normed else g
        q = (u @ W[p + ".self_attn.q_proj.weight"].T).reshape(1, self.heads, self.hd)
        k = (u @ W[p + ".self_attn.k_proj.weight"].T).reshape(1, self.kv_heads, self.hd)
        v = (u @ W[p + ".self_attn.v_proj.weight"].T).reshape(1, self.kv_heads, self.hd)
        q = M.apply_rope(q, [pos], self.inv_freq)[0]
        k = M.apply_rope(k, [pos], self.inv_freq)[0]
        cache["k"].append(k)
        cache["v"].append(v[0])
        K, V = np.stack(cache["k"]), np.stack(cache["v"])  # [S, kv, hd]: every earlier row (causal)
        group = self.heads // self.kv_heads
        a = np.empty((self.heads, self.hd))
        for h in range(self.heads):
            s = K[:, h // group, :] @ q[h] / math.sqrt(self.hd)
            a[h] = M.softmax(s) @ V[:, h // group, :]
        h1 = r + a.reshape(-1) @ W[p + ".self_attn.o_proj.weight"].T
        n = M.rms_norm(h1, W[p + ".post_attention_layernorm.weight"], eps)
        mlp = (M.silu(n @ W[p + ".mlp.gate_proj.weight"].T) * (n @ W[p + ".mlp.up_proj.weight"].T)) \
            @ W[p + ".mlp.down_proj.weight"].T
        out = h1 + mlp
        normed_out = M.rms_norm(out, W["norm.weight"], eps)
        return (normed_out if self.bug == "post_norm_feedback" else out), normed_out @ W["lm_head.weight"].T

    def draft_logits(self, prompt, steps):
        S = self.streams(prompt)
        logits, _ = self.t.forward(prompt)
        nxt = list(prompt[1:]) + [int(np.argmax(logits[-1]))]
        g = self.g(S)
        cache = {"k": [], "v": []}
        rows, out = [], None
        for pos, token in enumerate(nxt):
            out, z = self._row(g[pos], token, pos, cache)
            rows.append(z)
        pos = len(prompt)
        for _ in range(steps - 1):
            token = int(self.to_target[int(np.argmax(rows[-1]))])
            out, z = self._row(out, token, pos, cache)
            rows.append(z)
            pos += 1
        return np.array(rows)
