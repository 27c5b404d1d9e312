# tools/checkpoint/gemma4.py — Gemma 4 shapes (tiny + the E2B preset), the Hugging Face
# config.json (Gemma4ForCausalLM, or Gemma4ForConditionalGeneration with text_config) and
# the tensor list, plus the matching "-assistant" drafter (Gemma4AssistantForCausalLM).
# The layout: docs/architectures.md, "Gemma 4".
import math

from architectures import Init, embed_init, linear_init

TINY = dict(
    # every branch observable (docs/architectures.md, last section): 7 layers S,S,S,F,S,S,F
    # (the last three share KV: donors 2 (sliding) and 3 (full)), head 16 / global 32,
    # window 8 (prompts cross it, the KV ring wraps), PLE P = 8, double-wide MLP on the
    # shared layers, proportional global RoPE (4 of 16 pairs), softcap 10 (visible at
    # these logit sizes)
    hidden=64, layers=7, heads=4, kv_heads=2, head_dim=16, global_head_dim=32, inter=64,
    vocab=384, window=8, eps=1e-6, local_theta=10000.0, global_theta=1000000.0,
    partial=0.25, softcap=10.0, ple=8, shared=3, double_wide=True, k_eq_v=False,
    global_kv_heads=None, layer_types=["sliding_attention"] * 3 + ["full_attention"] +
    ["sliding_attention"] * 2 + ["full_attention"], max_pos=4096)

# The tiny MoE form (--moe): 16 GeGLU experts of width 24, top 4, beside the dense MLP
TINY_MOE = dict(experts=16, top_k=4, moe_inter=24)

PRESETS = {
    # Gemma 4 26B-A4B's widths and experts (hidden 2816, 16 heads, 8 kv heads of 256 /
    # K=V full layers with 2 heads of 512, dense MLP 2112 beside 128 experts of 704, top 8)
    # in 2 layers (one sliding, one full) with a smaller vocabulary
    "gemma4-26b-a4b-2l": dict(
        hidden=2816, layers=2, heads=16, kv_heads=8, head_dim=256, global_head_dim=512,
        inter=2112, vocab=32768, window=1024, eps=1e-6, local_theta=10000.0,
        global_theta=1000000.0, partial=0.25, softcap=30.0, ple=0, shared=0,
        double_wide=False, k_eq_v=True, global_kv_heads=2,
        layer_types=["sliding_attention", "full_attention"], max_pos=262144,
        experts=128, top_k=8, moe_inter=704),
    "gemma4-e2b": dict(
        hidden=1536, layers=35, heads=8, kv_heads=1, head_dim=256, global_head_dim=512,
        inter=6144, vocab=262144, window=512, eps=1e-6, local_theta=10000.0,
        global_theta=1000000.0, partial=0.25, softcap=30.0, ple=256, shared=20,
        double_wide=True, k_eq_v=False, global_kv_heads=None,
        layer_types=[("full_attention" if (i + 1) % 5 == 0 else "sliding_attention")
                     for i in range(35)], max_pos=131072),
}

# The tiny assistant: 4 query-only layers S,S,S,F reading the target's donor layers,
# drafter width 32, 2 query heads (the target has 4: grouped differently over the same KV),
# centroid masking over 16 centroids (24 tokens each), top 4.
TINY_ASSISTANT = dict(hidden=32, layers=4, heads=2, inter=64, centroids=16, top_k=4,
                      ordered=True, softcap=None, num_assistant_tokens=3)
ASSISTANT_PRESETS = {
    "gemma4-e2b": dict(hidden=256, layers=4, heads=4, inter=2048, centroids=2048, top_k=32,
                       ordered=True, softcap=None, num_assistant_tokens=4),
}


# The tiny vision tower (--vision-language): depth 2, width 32, 2 heads of 16 (4 rotary
# frequencies per axis), MLP 64, 16-pixel patches pooled 3 × 3, a 64-row position table
# per axis; the processor's budget is small so test images stay small.
TINY_VISION = dict(depth=2, hidden=32, heads=2, head_dim=16, inter=64, patch=16, pool=3,
                   positions=64, eps=1e-6, theta=100.0, budget=16)
# The E2B / E4B tower at its released sizes (16 layers of 768, 12 heads of 64, a 10240-row
# position table, the default 280-token budget), for measurements.
E_MODEL_VISION = dict(TINY_VISION, depth=16, hidden=768, heads=12, head_dim=64, inter=3072, positions=10240,
                      budget=280)


def vision_shape(preset, tower=None):
    """The tower a --vision-language checkpoint gets: `tower` "tiny" or "released", else the
    preset's own (released for the E-model presets)."""
    if tower:
        return E_MODEL_VISION if tower == "released" else TINY_VISION
    return E_MODEL_VISION if preset in ("gemma4-e2b", "gemma4-e4b") else TINY_VISION

CLIP_NAMES = ("input_min", "input_max", "output_min", "output_max")


def vision_tensors(v, text_hidden, clipped=False, standardize=False):
    """model.vision_tower.* and model.embed_vision.* (Hugging Face names, docs/vision-models.md)."""
    D, I, A, p = v["hidden"], v["inter"], v["heads"] * v["head_dim"], v["patch"]
    tw = "model.vision_tower."
    t = [(f"{tw}patch_embedder.input_proj.weight", (D, 3 * p * p), linear_init(3 * p * p)),
         (f"{tw}patch_embedder.position_embedding_table", (2, v["positions"], D), Init(0.5))]

    def linear(name, out, inp):
        lt = [(f"{name}.linear.weight", (out, inp), linear_init(inp))]
        if clipped:  # finite bounds that bind: RMS-normed inputs and unit-scale outputs exceed them
            lt += [(f"{name}.input_min", (), Init(0.2, -1.5)), (f"{name}.input_max", (), Init(0.2, 1.5)),
                   (f"{name}.output_min", (), Init(0.2, -1.0)), (f"{name}.output_max", (), Init(0.2, 1.0))]
        return lt

    for i in range(v["depth"]):
        b = f"{tw}encoder.layers.{i}"
        t += [(f"{b}.input_layernorm.weight", (D,), norm())]
        for n in ("q", "k", "v"):
            t += linear(f"{b}.self_attn.{n}_proj", A, D)
        t += linear(f"{b}.self_attn.o_proj", D, A)
        t += [(f"{b}.self_attn.q_norm.weight", (v["head_dim"],), qk_norm()),
              (f"{b}.self_attn.k_norm.weight", (v["head_dim"],), qk_norm()),
              (f"{b}.post_attention_layernorm.weight", (D,), norm()),
              (f"{b}.pre_feedforward_layernorm.weight", (D,), norm()),
              (f"{b}.post_feedforward_layernorm.weight", (D,), norm())]
        t += linear(f"{b}.mlp.gate_proj", I, D) + linear(f"{b}.mlp.up_proj", I, D) + linear(f"{b}.mlp.down_proj", D, I)
    if standardize:
        t += [(f"{tw}std_bias", (D,), Init(0.3)), (f"{tw}std_scale", (D,), Init(0.3, 1.0))]
    t.append(("model.embed_vision.embedding_projection.weight", (text_hidden, D), linear_init(D, 1.0)))
    return t


def vision_config(v, clipped=False, standardize=False):
    return {
        "model_type": "gemma4_vision", "hidden_size": v["hidden"], "intermediate_size": v["inter"],
        "num_hidden_layers": v["depth"], "num_attention_heads": v["heads"],
        "num_key_value_heads": v["heads"], "head_dim": v["head_dim"],
        "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": v["eps"], "patch_size": v["patch"],
        "pooling_kernel_size": v["pool"], "position_embedding_size": v["positions"],
        "rope_parameters": {"rope_type": "default", "rope_theta": v["theta"]},
        "use_clipped_linears": clipped, "standardize": standardize,
    }


def processor_config(v):
    """processor_config.json as transformers >= 5 saves Gemma4Processor: the image
    processor's settings under "image_processor"."""
    return {"processor_class": "Gemma4Processor", "image_seq_length": v["budget"],
            "image_processor": {"image_processor_type": "Gemma4ImageProcessor", "do_resize": True,
                                "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255,
                                "do_normalize": False, "image_mean": [0.0, 0.0, 0.0],
                                "image_std": [1.0, 1.0, 1.0], "do_convert_rgb": True,
                                "patch_size": v["patch"], "pooling_kernel_size": v["pool"],
                                "max_soft_tokens": v["budget"]}}


def norm():
    # plain x̂·w norms: weights around 1, spread 0.3 so that w and 1+w differ clearly
    return Init(0.3, 1.0)


def qk_norm():
    # attention has no 1/sqrt(D) scale: q/k scales below 1 keep the tiny model's softmax
    # away from near-ties that float32 cannot resolve to 1e-4
    return Init(0.15, 0.6)


def layer_geometry(s, i):
    """(head_dim, kv_heads, full, shared, intermediate) of layer i."""
    full = s["layer_types"][i] == "full_attention"
    shared = i >= s["layers"] - s["shared"]
    d = s["global_head_dim"] if full else s["head_dim"]
    kv = s["global_kv_heads"] if (full and s["k_eq_v"]) else s["kv_heads"]
    inter = s["inter"] * (2 if (shared and s["double_wide"]) else 1)
    return d, kv, full, shared, inter


def layer_tensors(p, s, i, hidden, query_only, ple):
    d, kv, full, shared, inter = layer_geometry(s, i)
    h, nh = hidden, s["heads"]
    t = [
        (f"{p}.input_layernorm.weight", (h,), norm()),
        (f"{p}.self_attn.q_proj.weight", (nh * d, h), linear_init(h)),
        (f"{p}.self_attn.o_proj.weight", (h, nh * d), linear_init(nh * d)),
        (f"{p}.self_attn.q_norm.weight", (d,), qk_norm()),
    ]
    if not query_only:
        t.append((f"{p}.self_attn.k_proj.weight", (kv * d, h), linear_init(h)))
        if not (full and s["k_eq_v"]):
            t.append((f"{p}.self_attn.v_proj.weight", (kv * d, h), linear_init(h)))
        t.append((f"{p}.self_attn.k_norm.weight", (d,), qk_norm()))
    t += [
        (f"{p}.post_attention_layernorm.weight", (h,), norm()),
        (f"{p}.pre_feedforward_layernorm.weight", (h,), norm()),
        (f"{p}.post_feedforward_layernorm.weight", (h,), norm()),
        (f"{p}.mlp.gate_proj.weight", (inter, h), linear_init(h)),
        (f"{p}.mlp.up_proj.weight", (inter, h), linear_init(h)),
        (f"{p}.mlp.down_proj.weight", (h, inter), linear_init(inter)),
        (f"{p}.layer_scalar", (1,), Init(0.1, 0.8)),
    ]
    if s.get("experts"):
        e, mi = s["experts"], s["moe_inter"]
        t += [
            (f"{p}.post_feedforward_layernorm_1.weight", (h,), norm()),
            (f"{p}.pre_feedforward_layernorm_2.weight", (h,), norm()),
            (f"{p}.post_feedforward_layernorm_2.weight", (h,), norm()),
            (f"{p}.router.proj.weight", (e, h), linear_init(h)),
            (f"{p}.router.scale", (h,), Init(0.3, 1.0)),
            (f"{p}.router.per_expert_scale", (e,), Init(0.3, 1.0)),
            (f"{p}.experts.gate_up_proj", (e, 2 * mi, h), linear_init(h)),
            (f"{p}.experts.down_proj", (e, h, mi), linear_init(mi)),
        ]
    if ple:
        P = s["ple"]
        t += [
            (f"{p}.per_layer_input_gate.weight", (P, h), linear_init(h)),
            (f"{p}.per_layer_projection.weight", (h, P), linear_init(P)),
            (f"{p}.post_per_layer_input_norm.weight", (h,), norm()),
        ]
    return t


def tensors(s, prefix="model."):
    h, v, L = s["hidden"], s["vocab"], s["layers"]
    t = [(f"{prefix}embed_tokens.weight", (v, h), embed_init(h))]
    if s["ple"]:
        P = s["ple"]
        t += [
            (f"{prefix}embed_tokens_per_layer.weight", (v, L * P), Init(1.0 / math.sqrt(P))),
            (f"{prefix}per_layer_model_projection.weight", (L * P, h), linear_init(h, 1.0)),
            (f"{prefix}per_layer_projection_norm.weight", (P,), norm()),
        ]
    for i in range(L):
        shared = i >= L - s["shared"]
        t += layer_tensors(f"{prefix}layers.{i}", s, i, h, shared, s["ple"])
    t.append((f"{prefix}norm.weight", (h,), norm()))
    return t


def config(s, dtype_name, specials, multimodal=False, vision=None, bidirectional=None):
    """vision: (shape, clipped, standardize) for a real tower (Gemma 4's image tokens must
    then be among `specials`); bidirectional: text_config.use_bidirectional_attention."""
    text = {
        "model_type": "gemma4_text",
        "vocab_size": s["vocab"],
        "hidden_size": s["hidden"],
        "intermediate_size": s["inter"],
        "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"],
        "global_head_dim": s["global_head_dim"],
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": s["max_pos"],
        "rms_norm_eps": s["eps"],
        "sliding_window": s["window"],
        "layer_types": s["layer_types"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": s["local_theta"]},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": s["partial"],
                               "rope_theta": s["global_theta"]},
        },
        "final_logit_softcapping": s["softcap"],
        "hidden_size_per_layer_input": s["ple"],
        "vocab_size_per_layer_input": s["vocab"],
        "num_kv_shared_layers": s["shared"],
        "use_double_wide_mlp": s["double_wide"],
        "attention_k_eq_v": s["k_eq_v"],
        "num_global_key_value_heads": s["global_kv_heads"],
        "enable_moe_block": bool(s.get("experts")),
        "attention_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|endoftext|>"],
        "torch_dtype": dtype_name,
    }
    if s.get("experts"):
        text.update(num_experts=s["experts"], top_k_experts=s["top_k"],
                    moe_intermediate_size=s["moe_inter"])
    text["use_bidirectional_attention"] = bidirectional
    text["pad_token_id"] = 0
    if not multimodal:
        return dict(text, architectures=["Gemma4ForCausalLM"], transformers_version="5.5.0")
    out = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": {"hidden_size": 16, "model_type": "gemma4_vision"},
        "audio_config": {"hidden_size": 16, "model_type": "gemma4_audio"},
        "tie_word_embeddings": True,
        "transformers_version": "5.5.0",
    }
    if vision:
        shape, clipped, standardize = vision
        out["vision_config"] = vision_config(shape, clipped, standardize)
        out.update(boi_token_id=specials["<|image>"], image_token_id=specials["<|image|>"],
                   eoi_token_id=specials["<image|>"])
    return out


def assistant_tensors(a, target):
    """The drafter's tensors: query-only layers with the target's head geometry."""
    h, v, ht = a["hidden"], target["vocab"], target["hidden"]
    geo = dict(target, layers=a["layers"], shared=a["layers"], heads=a["heads"], inter=a["inter"],
               double_wide=False, layer_types=assistant_layer_types(a))
    t = [("model.embed_tokens.weight", (v, h), embed_init(h))]
    for i in range(a["layers"]):
        t += layer_tensors(f"model.layers.{i}", geo, i, h, True, 0)
    t += [
        ("model.norm.weight", (h,), norm()),
        ("pre_projection.weight", (h, 2 * ht), linear_init(2 * ht)),
        ("post_projection.weight", (ht, h), linear_init(h)),
    ]
    if a["ordered"]:
        t.append(("masked_embedding.centroids.weight", (a["centroids"], h), linear_init(h)))
    return t


def assistant_layer_types(a):
    return ["sliding_attention"] * (a["layers"] - 1) + ["full_attention"]


def assistant_config(a, target, dtype_name):
    text = {
        "model_type": "gemma4_text",
        "vocab_size": target["vocab"],
        "hidden_size": a["hidden"],
        "intermediate_size": a["inter"],
        "num_hidden_layers": a["layers"],
        "num_attention_heads": a["heads"],
        "num_key_value_heads": target["kv_heads"],
        "head_dim": target["head_dim"],
        "global_head_dim": target["global_head_dim"],
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": target["eps"],
        "sliding_window": target["window"],
        "layer_types": assistant_layer_types(a),
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": target["local_theta"]},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": target["partial"],
                               "rope_theta": target["global_theta"]},
        },
        "final_logit_softcapping": a["softcap"],
        "hidden_size_per_layer_input": 0,
        "num_kv_shared_layers": a["layers"],
        "attention_k_eq_v": target["k_eq_v"],
        "num_global_key_value_heads": target["global_kv_heads"],
        "enable_moe_block": False,
        "tie_word_embeddings": True,
    }
    return {
        "architectures": ["Gemma4AssistantForCausalLM"],
        "model_type": "gemma4_assistant",
        "backbone_hidden_size": target["hidden"],
        "use_ordered_embeddings": a["ordered"],
        "num_centroids": a["centroids"],
        "centroid_intermediate_top_k": a["top_k"],
        "num_assistant_tokens": a["num_assistant_tokens"],
        "tie_word_embeddings": True,
        "text_config": text,
        "torch_dtype": dtype_name,
        "transformers_version": "5.5.0",
    }
