# tools/checkpoint/architectures.py — model shapes (tiny + real-size presets), the Hugging Face
# config.json of each architecture, and the full tensor list (name, shape, initialisation)
# of a checkpoint, including MTP layers in the MiMo and DeepSeek-V3 layouts.
import math

ARCHS = {
    # arch: (architectures[0], model_type, qkv bias, qk norm, default mtp layout)
    "llama": ("LlamaForCausalLM", "llama", False, False, "none"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2", True, False, "none"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", False, True, "none"),
    "mimo": ("MiMoForCausalLM", "mimo", True, False, "mimo"),
    # hybrid: 3 Gated DeltaNet layers per gated full-attention layer, (1+w) norms
    "qwen3_5": ("Qwen3_5ForCausalLM", "qwen3_5_text", False, True, "qwen35"),
    # the same hybrid with routed MLPs (Qwen3.5/3.6-35B-A3B), its MTP layer routed too
    "qwen3_5_moe": ("Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", False, True, "qwen35"),
}

TINY = {
    # Tiny shapes for tests; qwen3 uses head_dim 32 so that heads*head_dim != hidden (as in
    # the real Qwen3 models). llama uses llama3 rope scaling with a small original context
    # so that all three frequency bands (kept, smoothed, divided) occur at head_dim 16.
    "llama": dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, inter=128, vocab=384,
                  tied=False, rope_theta=10000.0, eps=1e-5,
                  rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                    high_freq_factor=4.0, original_max_position_embeddings=32)),
    "qwen2": dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, inter=128, vocab=384,
                  tied=True, rope_theta=10000.0, eps=1e-6, rope_scaling=None),
    "qwen3": dict(hidden=64, layers=3, heads=4, kv_heads=2, head_dim=32, inter=128, vocab=448,
                  tied=True, rope_theta=1000000.0, eps=1e-6, rope_scaling=None),
    "mimo": dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, inter=128, vocab=320,
                 tied=False, rope_theta=640000.0, eps=1e-5, rope_scaling=None),
    # Qwen3.5: every branch observable (docs/architectures.md, last section): 3 GDN + 1 full
    # attention layer, head_dim 32 with 8 rotary dims, Hv = 2 Hk (value heads share key
    # heads), dk != dv, untied head
    "qwen3_5": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=32, inter=128, vocab=384,
                    tied=False, rope_theta=10000000.0, eps=1e-6, rope_scaling=None,
                    linear_k_heads=2, linear_v_heads=4, linear_k_dim=16, linear_v_dim=24,
                    conv_kernel=4, full_interval=4),
    # Qwen3.5-MoE: 16 experts, top 4 (several rows of a batch share experts and others
    # stay unused), expert and shared widths differing from each other and from hidden
    "qwen3_5_moe": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=32, inter=128, vocab=384,
                        tied=False, rope_theta=10000000.0, eps=1e-6, rope_scaling=None,
                        linear_k_heads=2, linear_v_heads=4, linear_k_dim=16, linear_v_dim=24,
                        conv_kernel=4, full_interval=4, experts=16, top_k=4, moe_inter=32,
                        shared_inter=48),
}

PRESETS = {
    "qwen3-0.6b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, inter=3072,
                       vocab=151936, tied=True, rope_theta=1000000.0, eps=1e-6,
                       rope_scaling=None, max_pos=40960),
    "llama-3.2-1b": dict(hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, inter=8192,
                         vocab=128256, tied=True, rope_theta=500000.0, eps=1e-5,
                         rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0,
                                           original_max_position_embeddings=8192),
                         max_pos=131072),
    "qwen3.5-0.8b": dict(hidden=1024, layers=24, heads=8, kv_heads=2, head_dim=256, inter=3584,
                         vocab=248320, tied=True, rope_theta=10000000.0, eps=1e-6,
                         rope_scaling=None, max_pos=262144, linear_k_heads=16, linear_v_heads=16,
                         linear_k_dim=128, linear_v_dim=128, conv_kernel=4, full_interval=4,
                         vision=dict(depth=12, hidden_size=768, num_heads=12, intermediate_size=3072)),
    "qwen3.5-2b": dict(hidden=2048, layers=24, heads=8, kv_heads=2, head_dim=256, inter=6144,
                       vocab=248320, tied=True, rope_theta=10000000.0, eps=1e-6,
                       rope_scaling=None, max_pos=262144, linear_k_heads=16, linear_v_heads=16,
                       linear_k_dim=128, linear_v_dim=128, conv_kernel=4, full_interval=4,
                       vision=dict(depth=24, hidden_size=1024, num_heads=16, intermediate_size=4096)),
    # Qwen3.6-35B-A3B's widths, experts and top-k, but 2 layers (1 GDN + 1 full attention)
    # and a smaller vocabulary so it fits this machine: every MoE matrix has its real
    # shape (256 experts of 512 x 2048, top 8, shared expert 512); the MTP layer is routed too.
    "qwen3.6-35b-a3b-2l": dict(hidden=2048, layers=2, heads=16, kv_heads=2, head_dim=256, inter=512,
                               vocab=32768, tied=False, rope_theta=10000000.0, eps=1e-6,
                               rope_scaling=None, max_pos=262144, linear_k_heads=16,
                               linear_v_heads=32, linear_k_dim=128, linear_v_dim=128,
                               conv_kernel=4, full_interval=2, experts=256, top_k=8,
                               moe_inter=512, shared_inter=512),
}

PRESET_ARCH = {"qwen3.5-0.8b": "qwen3_5", "qwen3.5-2b": "qwen3_5",
               "qwen3.6-35b-a3b-2l": "qwen3_5_moe"}


class Init:
    """How a tensor is initialised: normal(std) around `mean`, or a copy of another tensor."""

    def __init__(self, std, mean=0.0, copy_of=None):
        self.std = std
        self.mean = mean
        self.copy_of = copy_of


def norm_init():
    return Init(0.1, 1.0)


def linear_init(fan_in, gain=2.0):
    # gain 2 (rather than 1) makes the blocks dominate the residual stream, so greedy
    # decoding of tiny random models does not settle on one repeated token at once
    return Init(gain / math.sqrt(fan_in))


def block_tensors(prefix, s, qkv_bias, qk_norm):
    """One decoder block (pre-norm attention + SwiGLU MLP) in HF naming."""
    h, hd, nh, nkv, inter = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"], s["inter"]
    t = [
        (f"{prefix}.input_layernorm.weight", (h,), norm_init()),
        (f"{prefix}.self_attn.q_proj.weight", (nh * hd, h), linear_init(h)),
        (f"{prefix}.self_attn.k_proj.weight", (nkv * hd, h), linear_init(h)),
        (f"{prefix}.self_attn.v_proj.weight", (nkv * hd, h), linear_init(h)),
    ]
    if qkv_bias:
        t += [
            (f"{prefix}.self_attn.q_proj.bias", (nh * hd,), Init(0.3)),
            (f"{prefix}.self_attn.k_proj.bias", (nkv * hd,), Init(0.3)),
            (f"{prefix}.self_attn.v_proj.bias", (nkv * hd,), Init(0.1)),
        ]
    t.append((f"{prefix}.self_attn.o_proj.weight", (h, nh * hd), linear_init(nh * hd)))
    if qk_norm:
        t += [
            (f"{prefix}.self_attn.q_norm.weight", (hd,), Init(0.2, 1.0)),
            (f"{prefix}.self_attn.k_norm.weight", (hd,), Init(0.2, 1.0)),
        ]
    t += [
        (f"{prefix}.post_attention_layernorm.weight", (h,), norm_init()),
        (f"{prefix}.mlp.gate_proj.weight", (inter, h), linear_init(h)),
        (f"{prefix}.mlp.up_proj.weight", (inter, h), linear_init(h)),
        (f"{prefix}.mlp.down_proj.weight", (h, inter), linear_init(inter)),
    ]
    return t


def mtp_tensors(layout, prefix, s, qkv_bias, qk_norm, shared_head, lm_head_name):
    """One MTP layer: the projection of [hidden; embedding] (MiMo) or [embedding; hidden]
    (DeepSeek) plus a decoder block of the backbone kind."""
    h, v = s["hidden"], s["vocab"]
    if layout == "mimo":
        t = [
            (f"{prefix}.token_layernorm.weight", (h,), norm_init()),
            (f"{prefix}.hidden_layernorm.weight", (h,), norm_init()),
            (f"{prefix}.input_proj.weight", (h, 2 * h), linear_init(2 * h)),
        ]
        t += block_tensors(prefix, s, qkv_bias, qk_norm)
        t.append((f"{prefix}.final_layernorm.weight", (h,), norm_init()))
        return t
    t = [
        (f"{prefix}.enorm.weight", (h,), norm_init()),
        (f"{prefix}.hnorm.weight", (h,), norm_init()),
        (f"{prefix}.eh_proj.weight", (h, 2 * h), linear_init(2 * h)),
    ]
    t += block_tensors(prefix, s, qkv_bias, qk_norm)
    t.append((f"{prefix}.shared_head.norm.weight", (h,), norm_init()))
    if shared_head == "copy":
        t.append((f"{prefix}.shared_head.head.weight", (v, h), Init(0, copy_of=lm_head_name)))
    elif shared_head == "random":
        t.append((f"{prefix}.shared_head.head.weight", (v, h), embed_init(h)))
    return t


def qwen35_norm():
    # stored scales of (1+w) norms cluster around 0; std 0.3 makes w and 1+w differ clearly
    return Init(0.3, 0.0)


def qwen35_attention_tensors(prefix, s):
    """A Qwen3.5 gated full-attention layer: q_proj rows per head [q_h | gate_h]."""
    h, hd, nh, nkv, inter = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"], s["inter"]
    return [
        (f"{prefix}.input_layernorm.weight", (h,), qwen35_norm()),
        (f"{prefix}.self_attn.q_proj.weight", (2 * nh * hd, h), linear_init(h)),
        (f"{prefix}.self_attn.k_proj.weight", (nkv * hd, h), linear_init(h)),
        (f"{prefix}.self_attn.v_proj.weight", (nkv * hd, h), linear_init(h)),
        (f"{prefix}.self_attn.o_proj.weight", (h, nh * hd), linear_init(nh * hd)),
        (f"{prefix}.self_attn.q_norm.weight", (hd,), qwen35_norm()),
        (f"{prefix}.self_attn.k_norm.weight", (hd,), qwen35_norm()),
    ] + qwen35_mlp_tensors(prefix, s)


def qwen35_mlp_tensors(prefix, s):
    h, inter = s["hidden"], s["inter"]
    if s.get("experts"):
        return qwen35_moe_tensors(prefix, s)
    return [
        (f"{prefix}.post_attention_layernorm.weight", (h,), qwen35_norm()),
        (f"{prefix}.mlp.gate_proj.weight", (inter, h), linear_init(h)),
        (f"{prefix}.mlp.up_proj.weight", (inter, h), linear_init(h)),
        (f"{prefix}.mlp.down_proj.weight", (h, inter), linear_init(inter)),
    ]


def qwen35_moe_tensors(prefix, s):
    """A Qwen3.5-MoE routed MLP: router, experts (fused gate_up_proj/down_proj as Qwen3.6
    ships them, one tensor per expert with s["experts_layout"] == "per_expert", or
    "released": the released 35B / 122B checkpoints' mix, trunk fused and the MTP layer's
    experts one tensor each), and
    the sigmoid-gated shared expert. The down projections have gain 1 (not 2): the
    routed sum plus the shared expert then adds about one dense MLP's output to the
    residual; at gain 2 the 150-token rows were ill-conditioned enough for float32 to
    reach 1e-4 relative error (SCALAR)."""
    h, e, i, sh = s["hidden"], s["experts"], s["moe_inter"], s["shared_inter"]
    m = f"{prefix}.mlp"
    t = [(f"{prefix}.post_attention_layernorm.weight", (h,), qwen35_norm()),
         (f"{m}.gate.weight", (e, h), linear_init(h))]
    layout = s.get("experts_layout", "fused")
    if layout == "released":  # Qwen3.5/3.6-35B-A3B / 122B-A10B: the trunk fused, the MTP layer per expert
        layout = "per_expert" if prefix.startswith("mtp.") else "fused"
    if layout == "fused":
        t += [(f"{m}.experts.gate_up_proj", (e, 2 * i, h), linear_init(h)),
              (f"{m}.experts.down_proj", (e, h, i), linear_init(i, 1.0))]
    else:
        for x in range(e):
            t += [(f"{m}.experts.{x}.gate_proj.weight", (i, h), linear_init(h)),
                  (f"{m}.experts.{x}.up_proj.weight", (i, h), linear_init(h)),
                  (f"{m}.experts.{x}.down_proj.weight", (h, i), linear_init(i, 1.0))]
    t += [(f"{m}.shared_expert.gate_proj.weight", (sh, h), linear_init(h)),
          (f"{m}.shared_expert.up_proj.weight", (sh, h), linear_init(h)),
          (f"{m}.shared_expert.down_proj.weight", (h, sh), linear_init(sh, 1.0)),
          (f"{m}.shared_expert_gate.weight", (1, h), linear_init(h))]
    return t


def qwen35_delta_net_tensors(prefix, s):
    """A Gated DeltaNet layer (linear_attn.*), Qwen3.5's split head-major layout."""
    h = s["hidden"]
    hk, hv, dk, dv, k = (s["linear_k_heads"], s["linear_v_heads"], s["linear_k_dim"],
                         s["linear_v_dim"], s["conv_kernel"])
    conv = 2 * hk * dk + hv * dv
    a = f"{prefix}.linear_attn"
    return [
        (f"{prefix}.input_layernorm.weight", (h,), qwen35_norm()),
        (f"{a}.in_proj_qkv.weight", (conv, h), linear_init(h)),
        (f"{a}.in_proj_z.weight", (hv * dv, h), linear_init(h)),
        (f"{a}.in_proj_b.weight", (hv, h), linear_init(h)),
        (f"{a}.in_proj_a.weight", (hv, h), linear_init(h)),
        (f"{a}.conv1d.weight", (conv, 1, k), Init(0.6)),
        # A = exp(A_log) in [0.5, 16] (uniform in log space), dt_bias ~ unit variance
        (f"{a}.A_log", (hv,), Init((math.log(16) - math.log(0.5)) / math.sqrt(12),
                                   (math.log(16) + math.log(0.5)) / 2)),
        (f"{a}.dt_bias", (hv,), Init(1.0)),
        (f"{a}.norm.weight", (dv,), Init(0.3, 1.0)),  # plain w (initialised at 1)
        (f"{a}.out_proj.weight", (h, hv * dv), linear_init(hv * dv)),
    ] + qwen35_mlp_tensors(prefix, s)


def qwen35_layer_types(s):
    n = s["full_interval"]
    return ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(s["layers"])]


def qwen35_tensors(s, mtp_layers, prefix="model."):
    h, v = s["hidden"], s["vocab"]
    t = [(f"{prefix}embed_tokens.weight", (v, h), embed_init(h))]
    for i, kind in enumerate(qwen35_layer_types(s)):
        p = f"{prefix}layers.{i}"
        t += qwen35_attention_tensors(p, s) if kind == "full_attention" else \
            qwen35_delta_net_tensors(p, s)
    t.append((f"{prefix}norm.weight", (h,), qwen35_norm()))
    if not s["tied"]:
        t.append(("lm_head.weight", (v, h), embed_init(h)))
    if mtp_layers:
        t += [
            ("mtp.pre_fc_norm_embedding.weight", (h,), qwen35_norm()),
            ("mtp.pre_fc_norm_hidden.weight", (h,), qwen35_norm()),
            ("mtp.fc.weight", (h, 2 * h), linear_init(2 * h)),
            ("mtp.norm.weight", (h,), qwen35_norm()),
        ]
        for i in range(mtp_layers):
            t += qwen35_attention_tensors(f"mtp.layers.{i}", s)
    return t


def qwen35_config(s, mtp_layers, dtype_name, specials, vision_language=False):
    text = {
        "model_type": "qwen3_5_text",
        "vocab_size": s["vocab"],
        "hidden_size": s["hidden"],
        "intermediate_size": s["inter"],
        "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": s.get("max_pos", 4096),
        "rms_norm_eps": s["eps"],
        "layer_types": qwen35_layer_types(s),
        "full_attention_interval": s["full_interval"],
        "linear_conv_kernel_dim": s["conv_kernel"],
        "linear_key_head_dim": s["linear_k_dim"],
        "linear_value_head_dim": s["linear_v_dim"],
        "linear_num_key_heads": s["linear_k_heads"],
        "linear_num_value_heads": s["linear_v_heads"],
        "attn_output_gate": True,
        "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": s["rope_theta"],
                            "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                            "mrope_interleaved": True},
        "tie_word_embeddings": s["tied"],
        "mtp_num_hidden_layers": mtp_layers,
        "mamba_ssm_dtype": "float32",
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|endoftext|>"],
        "torch_dtype": dtype_name,
    }
    moe = bool(s.get("experts"))
    if moe:  # no dense intermediate_size in the MoE configs
        del text["intermediate_size"]
        text.update(model_type="qwen3_5_moe_text", num_experts=s["experts"],
                    num_experts_per_tok=s["top_k"], moe_intermediate_size=s["moe_inter"],
                    shared_expert_intermediate_size=s["shared_inter"], router_aux_loss_coef=0.001)
    if not vision_language:
        return dict(text, architectures=["Qwen3_5MoeForCausalLM" if moe else "Qwen3_5ForCausalLM"],
                    transformers_version="4.57.0")
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration" if moe
                          else "Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5_moe" if moe else "qwen3_5",
        "text_config": text,
        "vision_config": qwen35_vision_config(s),
        # the tokenizer's own ids (the released checkpoints': 248056, 248053, 248054)
        "image_token_id": specials["<|image_pad|>"],
        "vision_start_token_id": specials["<|vision_start|>"],
        "vision_end_token_id": specials["<|vision_end|>"],
        "tie_word_embeddings": s["tied"],
        "transformers_version": "4.57.0",
    }


# A tiny Qwen3.5 vision tower (Qwen3-VL's ViT without DeepStack): the real tensor names and
# layouts, 16-pixel patches (so the processor's pixel_values fit as they are), a 4×4
# position table (so any real grid interpolates), 2 heads of 16 (4 RoPE frequencies per axis).
# The tiny tower of the tests; a preset's "vision" entry gives the released sizes (the
# 0.8B and 2B towers, with their real 48×48 position table) for measurements.
QWEN35_VISION = {"depth": 2, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "patch_size": 16,
                 "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 16,
                 "in_channels": 3}


def qwen35_vision_shape(s):
    if "vision" not in s:
        return QWEN35_VISION
    return dict(QWEN35_VISION, num_position_embeddings=2304, **s["vision"])


def qwen35_vision_config(s):
    return dict(qwen35_vision_shape(s), model_type="qwen3_5_vision", hidden_act="gelu_pytorch_tanh",
                out_hidden_size=s["hidden"], deepstack_visual_indexes=[])


def qwen35_vision_tensors(s, prefix="model.visual."):
    v = qwen35_vision_shape(s)
    D, I, p, t = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["temporal_patch_size"]
    fan_in = 3 * t * p * p
    out = [(prefix + "patch_embed.proj.weight", (D, 3, t, p, p), Init(2.0 / math.sqrt(fan_in))),
           (prefix + "patch_embed.proj.bias", (D,), Init(0.1)),
           (prefix + "pos_embed.weight", (v["num_position_embeddings"], D), Init(0.5))]
    for i in range(v["depth"]):
        b = f"{prefix}blocks.{i}."
        out += [(b + "norm1.weight", (D,), norm_init()), (b + "norm1.bias", (D,), Init(0.1)),
                (b + "attn.qkv.weight", (3 * D, D), Init(1.2 / math.sqrt(D))), (b + "attn.qkv.bias", (3 * D,), Init(0.1)),
                (b + "attn.proj.weight", (D, D), Init(1.0 / math.sqrt(D))), (b + "attn.proj.bias", (D,), Init(0.1)),
                (b + "norm2.weight", (D,), norm_init()), (b + "norm2.bias", (D,), Init(0.1)),
                (b + "mlp.linear_fc1.weight", (I, D), Init(1.5 / math.sqrt(D))), (b + "mlp.linear_fc1.bias", (I,), Init(0.1)),
                (b + "mlp.linear_fc2.weight", (D, I), Init(1.0 / math.sqrt(I))), (b + "mlp.linear_fc2.bias", (D,), Init(0.1))]
    out += [(prefix + "merger.norm.weight", (D,), norm_init()), (prefix + "merger.norm.bias", (D,), Init(0.1)),
            (prefix + "merger.linear_fc1.weight", (4 * D, 4 * D), Init(1.5 / math.sqrt(4 * D))),
            (prefix + "merger.linear_fc1.bias", (4 * D,), Init(0.1)),
            (prefix + "merger.linear_fc2.weight", (s["hidden"], 4 * D), Init(1.0 / math.sqrt(4 * D))),
            (prefix + "merger.linear_fc2.bias", (s["hidden"],), Init(0.1))]
    return out


def embed_init(h):
    # logits = rmsnorm(h) . E[v]: std ~ 2.5 keeps the logits varied but not saturated
    return Init(2.5 / math.sqrt(h))


def model_tensors(arch, s, mtp, mtp_layers, shared_head):
    _, _, qkv_bias, qk_norm, _ = ARCHS[arch]
    h, v, L = s["hidden"], s["vocab"], s["layers"]
    t = [("model.embed_tokens.weight", (v, h), embed_init(h))]
    for i in range(L):
        t += block_tensors(f"model.layers.{i}", s, qkv_bias, qk_norm)
    t.append(("model.norm.weight", (h,), norm_init()))
    lm_head = "model.embed_tokens.weight"
    if not s["tied"]:
        t.append(("lm_head.weight", (v, h), embed_init(h)))
        lm_head = "lm_head.weight"
    for i in range(mtp_layers if mtp != "none" else 0):
        prefix = f"model.mtp_layers.{i}" if mtp == "mimo" else f"model.layers.{L + i}"
        t += mtp_tensors(mtp, prefix, s, qkv_bias, qk_norm, shared_head, lm_head)
    return t


def config_json(arch, s, mtp, mtp_layers, dtype_name, specials):
    archname, model_type, qkv_bias, qk_norm, _ = ARCHS[arch]
    c = {
        "architectures": [archname],
        "model_type": model_type,
        "vocab_size": s["vocab"],
        "hidden_size": s["hidden"],
        "intermediate_size": s["inter"],
        "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"],
        "hidden_act": "silu",
        "max_position_embeddings": s.get("max_pos", 4096),
        "initializer_range": 0.02,
        "rms_norm_eps": s["eps"],
        "rope_theta": s["rope_theta"],
        "rope_scaling": s["rope_scaling"],
        "tie_word_embeddings": s["tied"],
        "attention_dropout": 0.0,
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|endoftext|>"],
        "torch_dtype": dtype_name,
        "use_cache": True,
        "transformers_version": "4.51.0",
    }
    if arch == "llama":
        c.update(head_dim=s["head_dim"], attention_bias=False, mlp_bias=False, pretraining_tp=1)
    elif arch == "qwen3":
        c.update(head_dim=s["head_dim"], attention_bias=False, use_sliding_window=False,
                 sliding_window=None, max_window_layers=s["layers"])
    else:  # qwen2, mimo: no head_dim key (hidden_size / num_attention_heads), q/k/v bias
        if s["head_dim"] * s["heads"] != s["hidden"]:
            raise ValueError(f"{arch}: head_dim must equal hidden/heads (no head_dim key)")
        c.update(use_sliding_window=False, sliding_window=None, max_window_layers=s["layers"])
    if mtp != "none":
        c["num_nextn_predict_layers"] = mtp_layers
    return c
