# tools/checkpoint/eagle3.py — random EAGLE-3 drafters for a target checkpoint, in the
# layouts published drafters use: "official" (SafeAILab / SpecForge: LlamaForCausalLMEagle3,
# midlayer.*) and "speculators" (RedHat: Eagle3Speculator, layers.0.*, the layer config
# under transformer_layer_config). One Llama layer whose q/k/v read [embedding; g] (2H),
# fc [H, 3·H_t] over three target layer inputs, its own lm_head over a draft vocabulary
# of V_d target tokens (d2t: int64 offsets, target id = i + d2t[i]; t2d: bool [V]).
import numpy as np

from architectures import Init, linear_init, norm_init


def draft_vocabulary(seed, vocab, draft_vocab):
    """V_d distinct target ids in increasing order (as the reference's frequency-ranked set
    is stored): a seeded random subset that keeps ids 0..3 (special tokens)."""
    if draft_vocab >= vocab:
        return np.arange(vocab, dtype=np.int64)
    rng = np.random.default_rng([seed, 3])
    rest = rng.choice(np.arange(4, vocab), size=draft_vocab - 4, replace=False)
    return np.sort(np.concatenate([np.arange(4), rest])).astype(np.int64)


def layer_ids(target_layers, explicit):
    """The target layer inputs the drafter reads: explicit ids, else none written (the
    loaders' default 2, N/2, N-3) when the target is deep enough, else [0, 1, N]."""
    if explicit:
        return explicit
    return None if target_layers >= 8 else [0, 1, target_layers]


def intermediate(tc):
    """The drafter's MLP width: the target's dense width, else (routed targets) 3 × hidden."""
    return tc.get("intermediate_size") or 3 * tc["hidden_size"]


def tensors(tc, hidden, draft_vocab, form, norm_before_fc, own_embedding):
    """(name, shape, Init) of the float tensors."""
    H, Ht = hidden, tc["hidden_size"]
    heads, kv = tc["num_attention_heads"], tc["num_key_value_heads"]
    hd = tc.get("head_dim") or Ht // heads
    inter = intermediate(tc)
    p = "midlayer" if form == "official" else "layers.0"
    t = [
        ("fc.weight", (H, 3 * Ht), linear_init(3 * Ht)),
        (f"{p}.input_layernorm.weight", (H,), norm_init()),
        (f"{p}.hidden_norm.weight", (H,), norm_init()),
        (f"{p}.self_attn.q_proj.weight", (heads * hd, 2 * H), linear_init(2 * H)),
        (f"{p}.self_attn.k_proj.weight", (kv * hd, 2 * H), linear_init(2 * H)),
        (f"{p}.self_attn.v_proj.weight", (kv * hd, 2 * H), linear_init(2 * H)),
        (f"{p}.self_attn.o_proj.weight", (H, heads * hd), linear_init(heads * hd)),
        (f"{p}.post_attention_layernorm.weight", (H,), norm_init()),
        (f"{p}.mlp.gate_proj.weight", (inter, H), linear_init(H)),
        (f"{p}.mlp.up_proj.weight", (inter, H), linear_init(H)),
        (f"{p}.mlp.down_proj.weight", (H, inter), linear_init(inter)),
        ("norm.weight", (H,), norm_init()),
        ("lm_head.weight", (draft_vocab, H), linear_init(H)),
    ]
    if norm_before_fc:
        t.append(("input_norm.weight", (3 * Ht,), norm_init()))
    if own_embedding:
        t.append(("embed_tokens.weight", (tc["vocab_size"], H), Init(2.5 / np.sqrt(H))))
    return t


def config(tc, hidden, draft_vocab, form, ids, norm_before_fc, norm_before_residual, dtype_name):
    heads = tc["num_attention_heads"]
    layer = {
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate(tc),
        "num_hidden_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": tc["num_key_value_heads"],
        "head_dim": tc.get("head_dim") or tc["hidden_size"] // heads,
        "rms_norm_eps": tc["rms_norm_eps"],
        "rope_theta": tc.get("rope_theta", 10000.0),
        "rope_scaling": tc.get("rope_scaling"),
        "vocab_size": tc["vocab_size"],
        "tie_word_embeddings": False,
        "torch_dtype": dtype_name,
    }
    if form == "official":
        c = dict(layer, architectures=["LlamaForCausalLMEagle3"], draft_vocab_size=draft_vocab)
        if ids is not None:
            c["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
        return c
    c = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.1.0",
        "draft_vocab_size": draft_vocab,
        "norm_before_residual": norm_before_residual,
        "norm_before_fc": norm_before_fc,
        "target_hidden_size": tc["hidden_size"],
        "transformer_layer_config": layer,
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "verifier": {"name_or_path": "target", "architectures": tc["architectures"]},
        },
    }
    if ids is not None:
        c["eagle_aux_hidden_state_layer_ids"] = ids
    return c
