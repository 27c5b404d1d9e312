# tools/checkpoint/glm4_moe.py — GLM-4.5 (glm4_moe) shapes (tiny + a scaled-down
# GLM-4.5-Air preset), the Hugging Face config.json (Glm4MoeForCausalLM) and the tensor
# list: q/k/v-biased GQA attention with partial rotary, first_k_dense_replace dense
# layers, then routed layers (sigmoid router with e_score_correction_bias, one tensor per
# expert, shared experts), and the nextn layer at model.layers.{L} in the DeepSeek layout
# (docs/architectures.md, "GLM-4.5" and "MTP heads").
from architectures import Init, embed_init, linear_init, norm_init

TINY = dict(
    # 3 layers: layer 0 dense, 1-2 routed (16 experts, top 4, 1 shared expert), head_dim 32
    # with 16 rotary dims, q/k/v bias, routed_scaling_factor 2.5 (visible), a correction
    # bias large enough to change the choice of experts
    hidden=64, layers=3, heads=4, kv_heads=2, head_dim=32, inter=96, vocab=384, eps=1e-5,
    rope_theta=1000000.0, partial=0.5, experts=16, top_k=4, moe_inter=32, shared=1,
    first_dense=1, scale=2.5, max_pos=4096, tied=False)

PRESETS = {
    # GLM-4.5-Air's widths, experts and top-k (hidden 4096, 96 heads of 128, 8 kv heads,
    # 128 experts of 1408, top 8, one shared expert, dense layer 0 of 10944) with 2 layers
    # (one dense, one routed) and a smaller vocabulary
    "glm-4.5-air-2l": dict(hidden=4096, layers=2, heads=96, kv_heads=8, head_dim=128, inter=10944,
                           vocab=32768, eps=1e-5, rope_theta=1000000.0, partial=0.5,
                           experts=128, top_k=8, moe_inter=1408, shared=1, first_dense=1,
                           scale=1.0, max_pos=131072, tied=False),
}


def layer_tensors(p, s, i):
    h, hd, nh, nkv = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"]
    t = [
        (f"{p}.input_layernorm.weight", (h,), norm_init()),
        (f"{p}.self_attn.q_proj.weight", (nh * hd, h), linear_init(h)),
        (f"{p}.self_attn.q_proj.bias", (nh * hd,), Init(0.3)),
        (f"{p}.self_attn.k_proj.weight", (nkv * hd, h), linear_init(h)),
        (f"{p}.self_attn.k_proj.bias", (nkv * hd,), Init(0.3)),
        (f"{p}.self_attn.v_proj.weight", (nkv * hd, h), linear_init(h)),
        (f"{p}.self_attn.v_proj.bias", (nkv * hd,), Init(0.1)),
        (f"{p}.self_attn.o_proj.weight", (h, nh * hd), linear_init(nh * hd)),
        (f"{p}.post_attention_layernorm.weight", (h,), norm_init()),
    ]
    m = f"{p}.mlp"
    if i < s["first_dense"]:
        inter = s["inter"]
        return t + [(f"{m}.gate_proj.weight", (inter, h), linear_init(h)),
                    (f"{m}.up_proj.weight", (inter, h), linear_init(h)),
                    (f"{m}.down_proj.weight", (h, inter), linear_init(inter))]
    e, mi, sh = s["experts"], s["moe_inter"], s["shared"] * s["moe_inter"]
    # sigmoid scores sit in (0, 1): a bias of std 0.3 reorders the top-k visibly
    t += [(f"{m}.gate.weight", (e, h), linear_init(h)),
          (f"{m}.gate.e_score_correction_bias", (e,), Init(0.3))]
    for x in range(e):
        t += [(f"{m}.experts.{x}.gate_proj.weight", (mi, h), linear_init(h)),
              (f"{m}.experts.{x}.up_proj.weight", (mi, h), linear_init(h)),
              (f"{m}.experts.{x}.down_proj.weight", (h, mi), linear_init(mi))]
    return t + [(f"{m}.shared_experts.gate_proj.weight", (sh, h), linear_init(h)),
                (f"{m}.shared_experts.up_proj.weight", (sh, h), linear_init(h)),
                (f"{m}.shared_experts.down_proj.weight", (h, sh), linear_init(sh))]


def tensors(s, mtp_layers):
    h, v, L = s["hidden"], s["vocab"], s["layers"]
    t = [("model.embed_tokens.weight", (v, h), embed_init(h))]
    for i in range(L):
        t += layer_tensors(f"model.layers.{i}", s, i)
    t.append(("model.norm.weight", (h,), norm_init()))
    t.append(("lm_head.weight", (v, h), embed_init(h)))
    for j in range(mtp_layers):
        p = f"model.layers.{L + j}"
        t += [(f"{p}.enorm.weight", (h,), norm_init()),
              (f"{p}.hnorm.weight", (h,), norm_init()),
              (f"{p}.eh_proj.weight", (h, 2 * h), linear_init(2 * h))]
        t += layer_tensors(p, s, L + j)  # a routed layer
        t += [(f"{p}.shared_head.norm.weight", (h,), norm_init()),
              (f"{p}.shared_head.head.weight", (v, h), Init(0, copy_of="lm_head.weight"))]
    return t


def config(s, mtp_layers, dtype_name, specials):
    return {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "vocab_size": s["vocab"],
        "hidden_size": s["hidden"],
        "intermediate_size": s["inter"],
        "moe_intermediate_size": s["moe_inter"],
        "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"],
        "partial_rotary_factor": s["partial"],
        "hidden_act": "silu",
        "attention_bias": True,
        "use_qk_norm": False,
        "max_position_embeddings": s["max_pos"],
        "rms_norm_eps": s["eps"],
        "rope_theta": s["rope_theta"],
        "rope_scaling": None,
        "n_routed_experts": s["experts"],
        "n_shared_experts": s["shared"],
        "num_experts_per_tok": s["top_k"],
        "first_k_dense_replace": s["first_dense"],
        "norm_topk_prob": True,
        "routed_scaling_factor": s["scale"],
        "n_group": 1,
        "topk_group": 1,
        "num_nextn_predict_layers": mtp_layers,
        "tie_word_embeddings": False,
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|endoftext|>"],
        "torch_dtype": dtype_name,
        "transformers_version": "4.54.0",
    }
