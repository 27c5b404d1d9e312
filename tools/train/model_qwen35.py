"""model_qwen35.py — the Qwen3.5 hybrid text model in PyTorch, as nextn implements it
(docs/architectures.md, "Qwen3.5 / Qwen3.6"), with the exact Hugging Face tensor names nextn loads
(Qwen3_5ForCausalLM, `model.*` + `mtp.*`):

  - layers i with (i+1) % full_attention_interval == 0 are gated full attention, the others
    Gated DeltaNet ("3:1" for interval 4);
  - (1+w) RMSNorm (w stored, initialised at 0) for input/post-attention/final/q/k norms and
    every MTP norm; plain w for the DeltaNet output norm (initialised at 1);
  - gated attention: q_proj rows per head [q_h | gate_h], q/k norm per head, NeoX RoPE on the
    first rotary_dim = head_dim * partial_rotary_factor dims, o_proj(attn * sigmoid(gate));
  - Gated DeltaNet: causal depthwise conv (kernel 4, no bias) over q|k|v, silu, l2norm(q) *
    dk^-1/2, l2norm(k), beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), the delta
    rule (decay first, rank-1 update, output from the updated state), gated norm, out_proj;
    value head h reads key head h // (Hv / Hk);
  - MTP head (mtp.*): row p consumes the post-final-norm hidden h_p and the embedding of
    x_{p+1} (zeroed at position 0, as nextn and vLLM do): u = fc([norm_e(e); norm_h(h)]),
    one gated-attention decoder layer at position p, mtp.norm, the tied lm_head -> x_{p+2}.

The delta rule has two forms: `delta_rule_recurrent` (token by token, the definition) and
`delta_rule_chunked` (the chunked WY/UT form in docs/architectures.md, used for training); check_qwen35.py
checks that they agree and that the whole forward matches tests/reference/numpy_qwen3_5.py.
Works on torch 1.13 (CPU) and 2.x (CUDA).
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import MLP  # the SwiGLU MLP is the MiMo model's, unchanged


@dataclass
class Config:
    vocab_size: int = 8192
    hidden_size: int = 384
    intermediate_size: int = 1024
    num_hidden_layers: int = 8
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    head_dim: int = 64
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.25
    full_attention_interval: int = 4
    linear_num_key_heads: int = 6
    linear_num_value_heads: int = 6
    linear_key_head_dim: int = 64
    linear_value_head_dim: int = 64
    linear_conv_kernel_dim: int = 4
    mtp_num_hidden_layers: int = 1
    max_position_embeddings: int = 1024

    def to_dict(self):
        return asdict(self)

    def layer_types(self):
        n = self.full_attention_interval
        return ["full_attention" if (i + 1) % n == 0 else "linear_attention"
                for i in range(self.num_hidden_layers)]


class RMSNorm1p(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * (1 + w), in float32; w initialised at 0."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * (1.0 + self.weight.float())).to(dtype)


class GatedRMSNorm(nn.Module):
    """DeltaNet output norm: w * rmsnorm(o) * silu(z), plain w (initialised at 1)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, o, z):
        o = o.float()
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight.float() * o * F.silu(z.float())


def rope_tables(cfg, n, device):
    """cos/sin [n, rot/2] for positions 0..n-1 over the rotary dims."""
    rot = int(cfg.head_dim * cfg.partial_rotary_factor)
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, rot, 2, device=device, dtype=torch.float32) / rot))
    f = torch.outer(torch.arange(n, device=device, dtype=torch.float32), inv)
    return f.cos(), f.sin()


def apply_partial_rope(x, cos, sin):
    """x [B, heads, T, D]: NeoX rotation of dims [0, rot), pairs (j, j + rot/2); rest unchanged."""
    half = cos.shape[-1]
    a, b, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    xf_a, xf_b = a.float(), b.float()
    ra = xf_a * cos - xf_b * sin
    rb = xf_b * cos + xf_a * sin
    return torch.cat([ra.to(x.dtype), rb.to(x.dtype), rest], dim=-1)


class GatedAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, d, nh, nkv = cfg.hidden_size, cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
        self.q_proj = nn.Linear(h, nh * 2 * d, bias=False)  # rows per head: [q_h (d) | gate_h (d)]
        self.k_proj = nn.Linear(h, nkv * d, bias=False)
        self.v_proj = nn.Linear(h, nkv * d, bias=False)
        self.o_proj = nn.Linear(nh * d, h, bias=False)
        self.q_norm = RMSNorm1p(d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm1p(d, cfg.rms_norm_eps)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        c = self.cfg
        nh, nkv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        P = self.q_proj(x).view(B, T, nh, 2 * d)
        q, gate = P[..., :d], P[..., d:]
        k = self.k_proj(x).view(B, T, nkv, d)
        v = self.v_proj(x).view(B, T, nkv, d)
        q = self.q_norm(q).transpose(1, 2)
        k = self.k_norm(k).transpose(1, 2)
        v = v.transpose(1, 2)
        q = apply_partial_rope(q, cos, sin)
        k = apply_partial_rope(k, cos, sin)
        rep = nh // nkv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
            o = s.softmax(-1).to(v.dtype) @ v
        o = o.transpose(1, 2).reshape(B, T, nh * d)
        o = o * torch.sigmoid(gate.reshape(B, T, nh * d))
        return self.o_proj(o)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def delta_rule_recurrent(q, k, v, beta, g, S=None):
    """The definition, token by token. q, k [B, H, T, dk] (q already scaled), v [B, H, T, dv],
    beta, g [B, H, T]; S [B, H, dk, dv] or None. Returns (o [B, H, T, dv], S)."""
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    if S is None:
        S = torch.zeros(B, H, dk, dv, dtype=torch.float32, device=k.device)
    out = []
    for t in range(T):
        S = S * g[:, :, t, None, None].exp()                       # decay first
        m = torch.einsum("bhkv,bhk->bhv", S, k[:, :, t])
        delta = beta[:, :, t, None] * (v[:, :, t] - m)
        S = S + k[:, :, t, :, None] * delta[:, :, None, :]         # rank-1 update
        out.append(torch.einsum("bhkv,bhk->bhv", S, q[:, :, t]))  # from the updated state
    return torch.stack(out, dim=2), S


def delta_rule_chunked(q, k, v, beta, g, S=None, chunk=64):
    """The chunked WY/UT form (docs/architectures.md, "The chunked form"), same arguments and results as
    delta_rule_recurrent. Within a chunk: gamma = cumsum(g), Gamma_ij = exp(gamma_i - gamma_j)
    (j <= i, masked before exp), M = I + strict_lower((beta k) k^T * Gamma),
    U = M^-1 (beta v), W = M^-1 (beta k exp(gamma)); across chunks
    V' = U - W S, O = (q exp(gamma)) S + ((q k^T) * Gamma) V',
    S <- exp(gamma_last) S + (k exp(gamma_last - gamma))^T V'."""
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    pad = (-T) % chunk
    if pad:  # padded steps leave S unchanged: g = 0 (alpha 1), k = 0, beta = 0
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    N = (T + pad) // chunk
    q = q.reshape(B, H, N, chunk, dk)
    k = k.reshape(B, H, N, chunk, dk)
    v = v.reshape(B, H, N, chunk, dv)
    beta = beta.reshape(B, H, N, chunk)
    gamma = g.reshape(B, H, N, chunk).cumsum(-1)
    lower_incl = torch.ones(chunk, chunk, dtype=torch.bool, device=k.device).tril()
    diff = gamma[..., :, None] - gamma[..., None, :]
    Gamma = diff.masked_fill(~lower_incl, float("-inf")).exp()   # mask before exp
    kb = k * beta[..., None]
    L = ((kb @ k.transpose(-1, -2)) * Gamma).tril(-1)              # strictly lower
    M = L + torch.eye(chunk, dtype=L.dtype, device=L.device)
    rhs = torch.cat([v * beta[..., None], kb * gamma.exp()[..., None]], dim=-1)
    sol = torch.linalg.solve_triangular(M, rhs, upper=False, unitriangular=True)
    U, W = sol[..., :dv], sol[..., dv:]
    P = (q @ k.transpose(-1, -2)) * Gamma
    qd = q * gamma.exp()[..., None]
    last = gamma[..., -1]                                           # [B, H, N]
    kd = k * (last[..., None] - gamma).exp()[..., None]
    if S is None:
        S = torch.zeros(B, H, dk, dv, dtype=q.dtype, device=q.device)
    outs = []
    for n in range(N):
        Vn = U[:, :, n] - W[:, :, n] @ S
        outs.append(qd[:, :, n] @ S + P[:, :, n] @ Vn)
        S = last[:, :, n, None, None].exp() * S + kd[:, :, n].transpose(-1, -2) @ Vn
    o = torch.stack(outs, dim=2).reshape(B, H, N * chunk, dv)[:, :, :T]
    return o, S


def _autocast_off(device_type):
    try:
        return torch.autocast(device_type, enabled=False)
    except Exception:  # noqa: BLE001  (very old torch)
        import contextlib
        return contextlib.nullcontext()


class GatedDeltaNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.Hk, self.Hv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        self.dk, self.dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        self.key_dim, self.value_dim = self.Hk * self.dk, self.Hv * self.dv
        conv_dim = 2 * self.key_dim + self.value_dim
        K = cfg.linear_conv_kernel_dim
        self.in_proj_qkv = nn.Linear(h, conv_dim, bias=False)    # rows [q | k | v], head-major
        self.in_proj_z = nn.Linear(h, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(h, self.Hv, bias=False)       # -> beta
        self.in_proj_a = nn.Linear(h, self.Hv, bias=False)       # -> decay input
        # depthwise causal conv, weight [conv_dim, 1, K]; W[:, 0, K-1] multiplies the current row
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, K, groups=conv_dim, bias=False, padding=K - 1)
        self.A_log = nn.Parameter(torch.empty(self.Hv))           # A = exp(A_log) > 0
        self.dt_bias = nn.Parameter(torch.empty(self.Hv))
        self.norm = GatedRMSNorm(self.dv, cfg.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, h, bias=False)
        self.chunked = True  # False: token-by-token recurrence (checks)

    def forward(self, x):
        B, T, _ = x.shape
        u = self.in_proj_qkv(x)                                    # [B, T, C]
        c = F.silu(self.conv1d(u.transpose(1, 2))[..., :T]).transpose(1, 2)
        z = self.in_proj_z(x).view(B, T, self.Hv, self.dv)
        b = self.in_proj_b(x)
        a = self.in_proj_a(x)
        with _autocast_off(x.device.type):
            c = c.float()
            q = c[..., :self.key_dim].reshape(B, T, self.Hk, self.dk)
            k = c[..., self.key_dim:2 * self.key_dim].reshape(B, T, self.Hk, self.dk)
            v = c[..., 2 * self.key_dim:].reshape(B, T, self.Hv, self.dv)
            q = l2norm(q) * (self.dk ** -0.5)
            k = l2norm(k)
            r = self.Hv // self.Hk
            if r > 1:  # value head h reads key head h // r
                q = q.repeat_interleave(r, dim=2)
                k = k.repeat_interleave(r, dim=2)
            beta = torch.sigmoid(b.float())
            g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias.float())
            args = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                    beta.transpose(1, 2), g.transpose(1, 2))
            o, _ = delta_rule_chunked(*args) if self.chunked else delta_rule_recurrent(*args)
            y = self.norm(o.transpose(1, 2), z)                    # [B, T, Hv, dv]
        return self.out_proj(y.reshape(B, T, self.value_dim).to(x.dtype))


class DecoderLayer(nn.Module):
    def __init__(self, cfg, kind):
        super().__init__()
        self.kind = kind
        self.input_layernorm = RMSNorm1p(cfg.hidden_size, cfg.rms_norm_eps)
        if kind == "full_attention":
            self.self_attn = GatedAttention(cfg)
        else:
            self.linear_attn = GatedDeltaNet(cfg)
        self.post_attention_layernorm = RMSNorm1p(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        h = self.input_layernorm(x)
        if self.kind == "full_attention":
            x = x + self.self_attn(h, cos, sin)
        else:
            x = x + self.linear_attn(h)
        return x + self.mlp(self.post_attention_layernorm(x))


class TextModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg, t) for t in cfg.layer_types()])
        self.norm = RMSNorm1p(cfg.hidden_size, cfg.rms_norm_eps)


class MtpHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg.hidden_size
        self.pre_fc_norm_embedding = RMSNorm1p(h, cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = RMSNorm1p(h, cfg.rms_norm_eps)
        self.fc = nn.Linear(2 * h, h, bias=False)                  # input [embedding ; hidden]
        self.layers = nn.ModuleList([DecoderLayer(cfg, "full_attention")
                                     for _ in range(cfg.mtp_num_hidden_layers)])
        self.norm = RMSNorm1p(h, cfg.rms_norm_eps)


class Qwen35ForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = TextModel(cfg)
        self.mtp = MtpHead(cfg)
        self._init_weights()

    def _init_weights(self):
        std = 0.02
        out_std = std / math.sqrt(2 * self.cfg.num_hidden_layers)
        for name, p in self.named_parameters():
            if name.endswith("linear_attn.norm.weight"):
                nn.init.ones_(p)
            elif name.endswith("norm.weight") or name.endswith("layernorm.weight") or \
                    name.endswith("norm_embedding.weight") or name.endswith("norm_hidden.weight"):
                nn.init.zeros_(p)                                   # (1+w): 1 at start
            elif name.endswith("A_log"):  # A uniform in [1, 16] (as HF: log U(0, 16), clipped)
                with torch.no_grad():
                    p.copy_(torch.empty_like(p).uniform_(1, 16).log())
            elif name.endswith("dt_bias"):  # softplus^-1 of dt log-uniform in [1e-3, 1e-1]
                with torch.no_grad():
                    dt = torch.exp(torch.empty_like(p).uniform_(math.log(1e-3), math.log(1e-1)))
                    p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif name.endswith("conv1d.weight"):
                nn.init.normal_(p, 0.0, 1.0 / math.sqrt(p.shape[-1]))
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight") or \
                    name.endswith("out_proj.weight"):
                nn.init.normal_(p, 0.0, out_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def set_chunked(self, chunked):
        for m in self.modules():
            if isinstance(m, GatedDeltaNet):
                m.chunked = chunked

    def logits(self, h):
        return F.linear(h, self.model.embed_tokens.weight)          # tied

    def backbone(self, ids):
        """ids [B, T] -> post-final-norm hidden [B, T, H]."""
        cos, sin = rope_tables(self.cfg, ids.shape[1], ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def mtp_rows(self, h, ids, k=0):
        """MTP layer k rows p = 0..T-2 from (h_p, x_{p+1}); returns [B, T-1, H]."""
        T = ids.shape[1]
        e = self.model.embed_tokens(ids[:, 1:])
        keep = torch.ones(1, T - 1, 1, device=ids.device, dtype=e.dtype)
        keep[:, 0] = 0
        e = e * keep                                                 # zeroed at position 0
        u = self.mtp.fc(torch.cat([self.mtp.pre_fc_norm_embedding(e),
                                   self.mtp.pre_fc_norm_hidden(h[:, :-1])], dim=-1))
        cos, sin = rope_tables(self.cfg, T - 1, ids.device)
        return self.mtp.norm(self.mtp.layers[k](u, cos, sin))

    def forward(self, ids):
        h = self.backbone(ids)
        return h, self.mtp_rows(h, ids)


def hf_config(cfg, eos_id):
    """config.json for the exported directory (text-only Qwen3_5ForCausalLM, nextn's layout)."""
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "layer_types": cfg.layer_types(),
        "full_attention_interval": cfg.full_attention_interval,
        "linear_conv_kernel_dim": cfg.linear_conv_kernel_dim,
        "linear_key_head_dim": cfg.linear_key_head_dim,
        "linear_value_head_dim": cfg.linear_value_head_dim,
        "linear_num_key_heads": cfg.linear_num_key_heads,
        "linear_num_value_heads": cfg.linear_num_value_heads,
        "attn_output_gate": True,
        "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta,
                            "partial_rotary_factor": cfg.partial_rotary_factor},
        "tie_word_embeddings": True,
        "mtp_num_hidden_layers": cfg.mtp_num_hidden_layers,
        "mamba_ssm_dtype": "float32",
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "torch_dtype": "bfloat16",
    }


def config_from_hf(hc):
    rp = hc.get("rope_parameters") or {}
    kw = {k: hc[k] for k in Config.__dataclass_fields__ if k in hc}
    kw["rope_theta"] = rp.get("rope_theta", hc.get("rope_theta", 10000.0))
    kw["partial_rotary_factor"] = rp.get("partial_rotary_factor", hc.get("partial_rotary_factor", 0.25))
    return Config(**kw)


def load_exported(model_dir, device="cpu"):
    """A Qwen35ForCausalLM holding the weights of an exported directory (float32)."""
    import json
    import os

    import numpy as np
    import st
    with open(os.path.join(model_dir, "config.json")) as f:
        hc = json.load(f)
    m = Qwen35ForCausalLM(config_from_hf(hc))
    sd = {k: torch.from_numpy(np.array(st.to_numpy(v))) for k, v in st.read_dir(model_dir).items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise SystemExit(f"{model_dir}: missing {missing}, unexpected {unexpected}")
    return m.to(device).eval()
