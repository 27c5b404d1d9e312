"""model.py — a MiMo-architecture decoder in PyTorch: Qwen2 backbone (RMSNorm, RoPE,
GQA attention with q/k/v bias, SwiGLU MLP, tied embeddings) plus MTP layers laid out as
`model.mtp_layers.{i}.{hidden_layernorm,token_layernorm,input_proj,final_layernorm,...}`.

MTP layer 0 row p consumes the backbone's post-final-norm hidden h_p and the embedding
of token x_{p+1} (zeroed at position 0), u = input_proj([hidden_layernorm(h); token_layernorm(e)]),
runs a Qwen2 decoder block at position p, and final_layernorm's output feeds the shared
lm_head to predict x_{p+2}. Works on torch 1.13 (CPU) and 2.x (CUDA, SDPA).
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 8192
    hidden_size: int = 384
    intermediate_size: int = 1024
    num_hidden_layers: int = 6
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    head_dim: int = 64
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 1024
    num_nextn_predict_layers: int = 1

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_tables(cfg, n, device):
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device,
                                                  dtype=torch.float32) / cfg.head_dim))
    t = torch.arange(n, device=device, dtype=torch.float32)
    f = torch.outer(t, inv)
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):  # x [B, heads, T, D]
    return (x * cos + rotate_half(x) * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, d = cfg.hidden_size, cfg.head_dim
        self.q_proj = nn.Linear(h, cfg.num_attention_heads * d, bias=True)
        self.k_proj = nn.Linear(h, cfg.num_key_value_heads * d, bias=True)
        self.v_proj = nn.Linear(h, cfg.num_key_value_heads * d, bias=True)
        self.o_proj = nn.Linear(cfg.num_attention_heads * d, h, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(B, T, c.num_attention_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        rep = c.num_attention_heads // c.num_key_value_heads
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            s = s.float().masked_fill(mask, float("-inf"))
            o = (s.softmax(-1).to(v.dtype)) @ v
        o = o.transpose(1, 2).reshape(B, T, c.num_attention_heads * c.head_dim)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class MTPLayer(DecoderLayer):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.token_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hidden_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.input_proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.final_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward_mtp(self, h, e, cos, sin):
        u = self.input_proj(torch.cat([self.hidden_layernorm(h), self.token_layernorm(e)], dim=-1))
        return self.final_layernorm(DecoderLayer.forward(self, u, cos, sin))


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mtp_layers = nn.ModuleList([MTPLayer(cfg) for _ in range(cfg.num_nextn_predict_layers)])


class MiMoForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self._init_weights()

    def _init_weights(self):
        std = 0.02
        out_std = std / math.sqrt(2 * self.cfg.num_hidden_layers)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                nn.init.normal_(p, 0.0, out_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def logits(self, h):
        return F.linear(h, self.model.embed_tokens.weight)

    def backbone(self, ids):
        """ids [B, T] -> post-final-norm hidden [B, T, H]."""
        T = ids.shape[1]
        cos, sin = rope_tables(self.cfg, T, ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def mtp(self, h, ids, k=0):
        """MTP layer k rows p = 0..T-2 from (h_p, x_{p+1}); returns [B, T-1, H]."""
        T = ids.shape[1]
        e = self.model.embed_tokens(ids[:, 1:])
        pos0 = torch.ones(1, T - 1, 1, device=ids.device, dtype=e.dtype)
        pos0[:, 0] = 0
        e = e * pos0  # embedding zeroed at position 0
        cos, sin = rope_tables(self.cfg, T - 1, ids.device)
        return self.model.mtp_layers[k].forward_mtp(h[:, :-1], e, cos, sin)

    def forward(self, ids):
        h = self.backbone(ids)
        return h, self.mtp(h, ids)


def hf_config(cfg):
    """config.json for the exported Hugging Face directory."""
    return {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "mimo",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "max_position_embeddings": cfg.max_position_embeddings,
        "max_window_layers": cfg.num_hidden_layers,
        "use_sliding_window": False,
        "sliding_window": None,
        "attention_bias": True,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "num_nextn_predict_layers": cfg.num_nextn_predict_layers,
        "initializer_range": 0.02,
        "bos_token_id": None,
        "eos_token_id": cfg.vocab_size - 5,
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }
