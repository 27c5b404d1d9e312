"""warm_start.py — initialises the Qwen3.5 hybrid from the trained MiMo model (models/nextn-tiny)
where the shapes allow, so the chat tuning does not start from nothing:

  - embeddings (tied lm_head) copied;
  - every MiMo layer's MLP and norms go to one hybrid layer: MiMo 0,1 -> hybrid 0,1; MiMo 2 ->
    hybrid 3 (full attention); MiMo 3,4 -> hybrid 4,5; MiMo 5 -> hybrid 7 (full attention);
    hybrid layers 2 and 6 are new and start as the identity (MLP down_proj = 0);
  - the two full-attention layers take MiMo 2's and 5's q/k/v/o (biases dropped); the output
    gate rows start at 0 (sigmoid = 1/2) and o_proj is doubled to compensate; q/k norms start at 1;
  - DeltaNet layers are new; their out_proj starts at 0 so they begin as the identity;
  - norms: MiMo's plain w becomes the stored w - 1 of the (1+w) form;
  - MTP head: fc = MiMo input_proj with its column halves swapped (MiMo's input is
    [hidden; embedding], Qwen3.5's is [embedding; hidden]); pre_fc_norm_embedding/hidden
    and mtp.norm from token/hidden/final_layernorm; the MTP layer from MiMo's MTP layer.
The attention is still a different function (no biases, q/k norms, partial RoPE): the
warm start carries the embeddings, MLPs and MTP head, and training adapts the rest.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

LAYER_MAP = {0: 0, 1: 1, 3: 2, 4: 3, 5: 4, 7: 5}   # hybrid layer -> MiMo layer


def load_mimo(model_dir):
    return {k: torch.from_numpy(st.to_numpy(v).copy()) for k, v in st.read_dir(model_dir).items()}


def copy_attention(sd, dst, src, W, nh, d):
    """MiMo attention src.* -> Qwen3.5 gated attention dst.* (q rows per head [q_h | gate_h])."""
    q = W[src + "q_proj.weight"]                                  # [nh*d, H]
    H = q.shape[1]
    qg = torch.zeros(nh, 2 * d, H)
    qg[:, :d] = q.view(nh, d, H)
    sd[dst + "q_proj.weight"] = qg.reshape(nh * 2 * d, H)
    sd[dst + "k_proj.weight"] = W[src + "k_proj.weight"].clone()
    sd[dst + "v_proj.weight"] = W[src + "v_proj.weight"].clone()
    sd[dst + "o_proj.weight"] = 2.0 * W[src + "o_proj.weight"]   # sigmoid(0) = 1/2 gate
    sd[dst + "q_norm.weight"] = torch.zeros(d)
    sd[dst + "k_norm.weight"] = torch.zeros(d)


def copy_mlp_norms(sd, dst, src, W):
    for n in ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"):
        sd[dst + n] = W[src + n].clone()
    for n in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        sd[dst + n] = W[src + n] - 1.0


def warm_start(model, mimo_dir, log=print):
    """Overwrites model's parameters in place; returns the names initialised from MiMo."""
    W = load_mimo(mimo_dir)
    cfg = model.cfg
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    new = dict(sd)
    if W["model.embed_tokens.weight"].shape != sd["model.embed_tokens.weight"].shape:
        raise SystemExit("warm start: embedding shapes differ")
    new["model.embed_tokens.weight"] = W["model.embed_tokens.weight"].clone()
    new["model.norm.weight"] = W["model.norm.weight"] - 1.0
    nh, d = cfg.num_attention_heads, cfg.head_dim
    for j, kind in enumerate(cfg.layer_types()):
        dst = f"model.layers.{j}."
        if kind == "linear_attention":
            new[dst + "linear_attn.out_proj.weight"] = torch.zeros_like(sd[dst + "linear_attn.out_proj.weight"])
        if j not in LAYER_MAP:
            new[dst + "mlp.down_proj.weight"] = torch.zeros_like(sd[dst + "mlp.down_proj.weight"])
            continue
        src = f"model.layers.{LAYER_MAP[j]}."
        copy_mlp_norms(new, dst, src, W)
        if kind == "full_attention":
            copy_attention(new, dst + "self_attn.", src + "self_attn.", W, nh, d)
    m = "model.mtp_layers.0."
    H = cfg.hidden_size
    ip = W[m + "input_proj.weight"]                               # [H, 2H] over [hidden; embedding]
    new["mtp.fc.weight"] = torch.cat([ip[:, H:], ip[:, :H]], dim=1)
    new["mtp.pre_fc_norm_embedding.weight"] = W[m + "token_layernorm.weight"] - 1.0
    new["mtp.pre_fc_norm_hidden.weight"] = W[m + "hidden_layernorm.weight"] - 1.0
    new["mtp.norm.weight"] = W[m + "final_layernorm.weight"] - 1.0
    copy_mlp_norms(new, "mtp.layers.0.", m, W)
    copy_attention(new, "mtp.layers.0.self_attn.", m + "self_attn.", W, nh, d)
    model.load_state_dict(new)
    changed = [k for k in new if not torch.equal(new[k], sd[k])]
    log(f"warm start from {mimo_dir}: {len(changed)} of {len(new)} tensors set "
        f"({sum(new[k].numel() for k in changed)/1e6:.2f} M of "
        f"{sum(v.numel() for v in new.values())/1e6:.2f} M parameters)")
    return changed
