#!/usr/bin/python3
"""tools/make_checkpoint.py — writes random Hugging Face checkpoints for tests and benchmarks.

Deterministic from --seed (each tensor has its own RNG stream keyed by seed and tensor name,
so adding MTP layers or changing dtype/sharding never changes the other weights). Exact HF
layout: config.json, generation_config.json, model.safetensors or
model-0000k-of-0000n.safetensors + model.safetensors.index.json, and a small byte-level BPE
tokenizer (tokenizer.json + tokenizer_config.json with a ChatML template).

  make_checkpoint.py --arch {llama,qwen2,qwen3,mimo,qwen3_5,qwen3_5_moe,glm4_moe,gemma4} [--mtp {none,mimo,deepseek,qwen35}]
      [--preset {tiny,qwen3-0.6b,llama-3.2-1b,qwen3.5-0.8b,qwen3.5-2b,gemma4-e2b}] [--vision-language]
      [--k-eq-v] [--dtype {f32,bf16,f16}] [--shards N] [--seed S] [--vocab V] [--layers L] [--mtp-layers K]
      [--mtp-only] [--fp8 BLOCK] [--config-form {flat,nested}] [--hidden H] --out DIR
  make_checkpoint.py --assistant-of TARGET_DIR --out DIR   # MTP-only assistant checkpoint
                                                           # (Gemma 4 target: a Gemma4AssistantForCausalLM)
  make_checkpoint.py --eagle3-of TARGET_DIR [--eagle3-form {official,speculators}] [--draft-vocab N]
      [--eagle3-layers A,B,C] [--norm-before-fc] [--norm-before-residual] [--own-embedding] --out DIR
  make_checkpoint.py --dflash-of TARGET_DIR [--dflash-layers N] [--block-size B] [--hidden H] --out DIR
                                                           # a DFlash block-diffusion drafter (DFlashDraftModel)
"""
import argparse
import json
import os
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint"))
import architectures as A  # noqa: E402
import eagle3 as E3  # noqa: E402
import fp8 as F  # noqa: E402
import gemma4 as G  # noqa: E402
import glm4_moe as GLM  # noqa: E402
import safetensors_reader as R  # noqa: E402
import safetensors_writer as W  # noqa: E402
import tokenizer_files as T  # noqa: E402

CHUNK_ELEMS = 1 << 24


def tensor_rng(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def make_chunks(seed, name, shape, init):
    """Generator factory: float32 chunks of `name`, drawn row-block by row-block.

    Values are uniform with the requested mean and standard deviation (uniform because it is
    4-7x faster to draw than normal, which matters at real-model sizes)."""
    def chunks():
        rng = tensor_rng(seed, name)
        rows = shape[0] if shape else 1  # a 0-d tensor: one value
        row = 1
        for d in shape[1:]:
            row *= d
        step = max(1, CHUNK_ELEMS // max(1, row))
        half_width = np.float32(init.std * np.sqrt(12.0))
        for r0 in range(0, rows, step):
            n = (min(rows, r0 + step) - r0) * row
            u = rng.integers(0, 1 << 32, n, dtype=np.uint32)
            u >>= np.uint32(9)
            u |= np.uint32(0x3F800000)  # float in [1, 2)
            a = u.view(np.float32)
            a -= np.float32(1.5)
            a *= half_width
            if init.mean != 0.0:
                a += np.float32(init.mean)
            yield a
    return chunks


def split_shards(specs, n):
    if n <= 1:
        return [specs]
    if n > len(specs):
        raise SystemExit(f"--shards {n} exceeds the number of tensors ({len(specs)})")
    total = sum(s.nbytes for s in specs)
    shards, cur, acc = [], [], 0
    for i, s in enumerate(specs):
        remaining_specs = len(specs) - i
        remaining_shards = n - len(shards)
        if cur and (acc >= total * (len(shards) + 1) / n or remaining_specs < remaining_shards):
            shards.append(cur)
            cur = []
        cur.append(s)
        acc += s.nbytes
    shards.append(cur)
    while len(shards) < n:  # split the largest multi-tensor shard
        k = max((i for i in range(len(shards)) if len(shards[i]) > 1),
                key=lambda i: len(shards[i]))
        shards[k:k + 1] = [shards[k][:len(shards[k]) // 2], shards[k][len(shards[k]) // 2:]]
    return shards


def write_weights(out_dir, specs, n_shards):
    groups = split_shards(specs, n_shards)
    if len(groups) == 1:
        W.write_file(os.path.join(out_dir, "model.safetensors"), specs)
        return
    weight_map, total = {}, 0
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        total += W.write_file(os.path.join(out_dir, fname), group)
        for s in group:
            weight_map[s.name] = fname
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def gemma4_shape(args):
    s = dict(G.TINY if args.preset == "tiny" else G.PRESETS[args.preset])
    if args.vocab:
        s["vocab"] = args.vocab
    if args.moe:  # 26B-A4B-style: routed experts beside every dense MLP
        s.update(G.TINY_MOE)
    if args.k_eq_v:  # 31B-style full layers: K=V with their own (fewer) key/value heads
        s["k_eq_v"], s["global_kv_heads"] = True, 1
    if args.hidden:
        s["hidden"] = args.hidden
    return s


def is_mtp_tensor(name, n_layers):
    """An MTP layer's tensor in any layout: mtp.* (Qwen3.5; also model.mtp.*),
    model.mtp_layers.* (MiMo), model.layers.{n_layers + i}.* (DeepSeek / GLM nextn)."""
    if name.startswith(("mtp.", "model.mtp.", "model.mtp_layers.")):
        return True
    parts = name.split(".")
    return name.startswith("model.layers.") and int(parts[2]) >= n_layers


def mtp_only(tensors, n_layers):
    """The tensors of llama.cpp's split MTP file (its converter's --mtp): the MTP layers
    plus copies of the embedding, final norm and output head; the trunk-only file is the
    same model with --mtp none."""
    keep = ("embed_tokens.weight", "model.norm.weight", "model.language_model.norm.weight", "lm_head.weight")
    return [t for t in tensors if is_mtp_tensor(t[0], n_layers) or t[0].endswith(keep) and
            not t[0].startswith("model.layers.")]


def fp8_specs(specs, block, scale_dtype):
    """Each linear weight as FP8 (fp8.py) with its weight_scale_inv; the rest unchanged."""
    out = []
    for sp in specs:
        if not F.converts(sp.name, sp.shape):
            out.append(sp)
            continue
        w = np.concatenate([c.reshape(-1) for c in sp.chunks()]).reshape(sp.shape)
        q, scale = F.quantize(w, block)
        out.append(W.TensorSpec(sp.name, sp.shape, "F8_E4M3", lambda q=q: iter([q])))
        out.append(W.TensorSpec(sp.name + "_scale_inv", scale.shape, scale_dtype, lambda s=scale: iter([s])))
    return out


def nested_config(config, arch):
    """The forms newer transformers save: rope_theta / partial_rotary_factor (and any
    rope_scaling) inside rope_parameters; Gemma 4's full-layer head geometry as a
    per_layer_config override instead of global_head_dim / num_global_key_value_heads."""
    t = config.get("text_config") or config
    if arch == "gemma4":
        full = [i for i, k in enumerate(t["layer_types"]) if k == "full_attention"]
        kv = t["num_global_key_value_heads"] if t.get("attention_k_eq_v") else t["num_key_value_heads"]
        t["per_layer_config"] = {str(i): {"head_dim": t["global_head_dim"], "num_key_value_heads": kv} for i in full}
        t.pop("global_head_dim")
        t.pop("num_global_key_value_heads", None)
        return config
    if "rope_theta" in t:
        rp = {"rope_type": "default", "rope_theta": t.pop("rope_theta")}
        if "partial_rotary_factor" in t:
            rp["partial_rotary_factor"] = t.pop("partial_rotary_factor")
        scaling = t.pop("rope_scaling", None)
        if scaling:
            rp.update(scaling)
            rp["rope_type"] = scaling.get("rope_type", scaling.get("type"))
            rp.pop("type", None)
        t["rope_parameters"] = rp
    return config


def shape_for(args):
    if args.arch == "gemma4":
        return gemma4_shape(args)
    if args.arch == "glm4_moe":
        s = dict(GLM.TINY if args.preset == "tiny" else GLM.PRESETS[args.preset])
        if args.vocab:
            s["vocab"] = args.vocab
        if args.layers:
            s["layers"] = args.layers
        return s
    if args.preset == "tiny":
        s = dict(A.TINY[args.arch])
    else:
        if A.PRESET_ARCH.get(args.preset, args.arch) != args.arch:
            raise SystemExit(f"--preset {args.preset} is a {A.PRESET_ARCH[args.preset]} shape, "
                             f"not --arch {args.arch}")
        s = dict(A.PRESETS[args.preset])
    if args.vocab:
        s["vocab"] = args.vocab
    if args.layers:
        s["layers"] = args.layers
    if args.tied is not None:
        s["tied"] = args.tied
    if args.experts_layout:
        s["experts_layout"] = args.experts_layout
    if args.vision_tower == "released":
        s.setdefault("vision", A.PRESETS["qwen3.5-0.8b"]["vision"])
    elif args.vision_tower == "tiny":
        s.pop("vision", None)
    if args.rope_scaling == "none":
        s["rope_scaling"] = None
    elif args.rope_scaling == "llama3" and not s["rope_scaling"]:
        s["rope_scaling"] = dict(A.TINY["llama"]["rope_scaling"])
    return s


def make_model(args):
    s = shape_for(args)
    mtp = args.mtp or (A.ARCHS[args.arch][4] if args.arch in A.ARCHS else
                       "deepseek" if args.arch == "glm4_moe" else "none")
    st_dtype = W.DTYPE_NAMES[args.dtype]
    os.makedirs(args.out, exist_ok=True)
    if args.arch == "gemma4":
        tensors = G.tensors(s, "model.language_model." if args.vision_language else "model.")
        if args.vision_language:  # a tiny real vision tower; an audio stub the text model ignores
            tensors += G.vision_tensors(G.vision_shape(args.preset, args.vision_tower), s["hidden"], args.vision_clipped,
                                        args.vision_standardize)
            tensors.append(("model.audio_tower.subsample_conv_projection.weight", (16, 12), A.Init(0.1)))
    elif args.arch == "glm4_moe":
        tensors = GLM.tensors(s, args.mtp_layers if mtp != "none" else 0)
    elif args.arch in ("qwen3_5", "qwen3_5_moe"):
        n_mtp = args.mtp_layers if mtp != "none" else 0
        tensors = A.qwen35_tensors(s, n_mtp, "model.language_model." if args.vision_language
                                   else "model.")
        if args.vision_language:  # a tiny vision tower (the text model ignores it)
            tensors += A.qwen35_vision_tensors(s)
    else:
        tensors = A.model_tensors(args.arch, s, mtp, args.mtp_layers, args.shared_head)
    inits = {name: init for name, _, init in tensors}
    if args.mtp_only:
        tensors = mtp_only(tensors, s["layers"])
    specs = []
    for name, shape, init in tensors:
        src = name
        if init.copy_of:
            src, init = init.copy_of, inits[init.copy_of]
        specs.append(W.TensorSpec(name, shape, st_dtype, make_chunks(args.seed, src, shape, init)))
    if args.fp8:  # Qwen's releases keep the scales BF16, DeepSeek's F32
        specs = fp8_specs(specs, args.fp8, "BF16" if args.arch.startswith("qwen3_5") else "F32")
    vision_kind = False
    if args.vision_language and args.arch in ("qwen3_5", "qwen3_5_moe"):
        vision_kind = "qwen3_5"
    elif args.vision_language and args.arch == "gemma4":
        vision_kind = "gemma4"
    specials = T.write_tokenizer(args.out, s["vocab"], s.get("max_pos", 4096), vision=vision_kind)
    dtype_name = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[args.dtype]
    if args.arch == "gemma4":
        vision = (G.vision_shape(args.preset, args.vision_tower), args.vision_clipped, args.vision_standardize) if args.vision_language else None
        config = G.config(s, dtype_name, specials, args.vision_language, vision,
                          "vision" if args.bidirectional_vision else None)
        if args.vision_language:
            shape = G.vision_shape(args.preset, args.vision_tower)
            budget = dict(shape, budget=args.image_budget or shape["budget"])
            write_json(os.path.join(args.out, "processor_config.json"), G.processor_config(budget))
    elif args.arch == "glm4_moe":
        config = GLM.config(s, args.mtp_layers if mtp != "none" else 0, dtype_name, specials)
    elif args.arch in ("qwen3_5", "qwen3_5_moe"):
        config = A.qwen35_config(s, args.mtp_layers if mtp != "none" else 0, dtype_name, specials,
                                 args.vision_language)
    else:
        config = A.config_json(args.arch, s, mtp, args.mtp_layers, dtype_name, specials)
    if args.config_form == "nested":
        config = nested_config(config, args.arch)
    if args.fp8:
        config["quantization_config"] = F.config(args.fp8)
    write_json(os.path.join(args.out, "config.json"), config)
    write_json(os.path.join(args.out, "generation_config.json"), {
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": [specials["<|im_end|>"], specials["<|endoftext|>"]],
        "transformers_version": "4.51.0"})
    write_weights(args.out, specs, args.shards)
    return sum(sp.nbytes for sp in specs)


def make_gemma4_assistant(args, tc):
    """A Gemma4AssistantForCausalLM drafter for a Gemma 4 target (shape from the target's config)."""
    t = tc.get("text_config") or tc
    target = dict(vocab=t["vocab_size"], hidden=t["hidden_size"], kv_heads=t["num_key_value_heads"],
                  head_dim=t["head_dim"], global_head_dim=t["global_head_dim"], eps=t["rms_norm_eps"],
                  window=t["sliding_window"],
                  local_theta=t["rope_parameters"]["sliding_attention"]["rope_theta"],
                  global_theta=t["rope_parameters"]["full_attention"]["rope_theta"],
                  partial=t["rope_parameters"]["full_attention"].get("partial_rotary_factor", 1.0),
                  k_eq_v=t.get("attention_k_eq_v", False),
                  global_kv_heads=t.get("num_global_key_value_heads"))
    a = dict(G.TINY_ASSISTANT if args.preset == "tiny" else G.ASSISTANT_PRESETS[args.preset])
    if args.no_centroids:  # the form llama.cpp's gemma4-assistant GGUF keeps (no masked_embedding)
        a["ordered"] = False
    st_dtype = W.DTYPE_NAMES[args.dtype]
    specs = []
    for name, shape, init in G.assistant_tensors(a, target):
        specs.append(W.TensorSpec(name, shape, st_dtype, make_chunks(args.seed, name, shape, init)))
    if a["ordered"]:
        perm = tensor_rng(args.seed, "masked_embedding.token_ordering").permutation(target["vocab"])
        specs.append(W.TensorSpec("masked_embedding.token_ordering", (target["vocab"],), "I64",
                                  lambda p=perm: iter([p])))
    os.makedirs(args.out, exist_ok=True)
    dtype_name = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[args.dtype]
    write_json(os.path.join(args.out, "config.json"), G.assistant_config(a, target, dtype_name))
    write_weights(args.out, specs, args.shards)
    return sum(sp.nbytes for sp in specs)


def make_assistant(args):
    """MTP assistant for a target: its MTP layers re-indexed from 0 when it has them, else
    fresh random layers (layout --mtp, default deepseek) drawn from --seed."""
    with open(os.path.join(args.assistant_of, "config.json")) as f:
        tc = json.load(f)
    if tc["architectures"][0] in ("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"):
        return make_gemma4_assistant(args, tc)
    arch = {v[0]: k for k, v in A.ARCHS.items()}.get(tc["architectures"][0])
    if arch is None:
        raise SystemExit(f"--assistant-of: unsupported target architecture {tc['architectures']}")
    _, _, qkv_bias, qk_norm, _ = A.ARCHS[arch]
    L = tc["num_hidden_layers"]
    head_dim = tc.get("head_dim") or tc["hidden_size"] // tc["num_attention_heads"]
    target_mtp = tc.get("num_nextn_predict_layers", 0)
    dtypes = R.tensor_dtypes(args.assistant_of)
    if target_mtp > 0:
        layout = "mimo" if any(n.startswith("model.mtp_layers.") for n in dtypes) else "deepseek"
        n_layers = target_mtp
        src_dtype = next(iter(dtypes.values()))
        old_prefix = (lambda i: f"model.mtp_layers.{i}.") if layout == "mimo" else \
            (lambda i: f"model.layers.{L + i}.")
        new_prefix = (lambda i: f"model.mtp_layers.{i}.") if layout == "mimo" else \
            (lambda i: f"model.layers.{i}.")
        wanted = {n for n in dtypes if any(n.startswith(old_prefix(i)) for i in range(n_layers))}
        tensors = {}
        for fname in R.checkpoint_files(args.assistant_of):
            tensors.update(R.read_file(os.path.join(args.assistant_of, fname), None, wanted))
        specs = []
        for name in sorted(tensors):
            i = next(i for i in range(n_layers) if name.startswith(old_prefix(i)))
            new = new_prefix(i) + name[len(old_prefix(i)):]
            arr = np.asarray(tensors[name], dtype=np.float32)
            specs.append(W.TensorSpec(new, arr.shape, dtypes[name], lambda a=arr: iter([a])))
    else:
        layout = args.mtp if args.mtp in ("mimo", "deepseek") else "deepseek"
        n_layers = args.mtp_layers
        s = dict(hidden=tc["hidden_size"], heads=tc["num_attention_heads"],
                 kv_heads=tc["num_key_value_heads"], head_dim=head_dim,
                 inter=tc["intermediate_size"], vocab=tc["vocab_size"])
        st_dtype = W.DTYPE_NAMES[args.dtype]
        specs = []
        for i in range(n_layers):
            prefix = f"model.mtp_layers.{i}" if layout == "mimo" else f"model.layers.{i}"
            sh = args.shared_head if args.shared_head != "copy" else "none"
            for name, shape, init in A.mtp_tensors(layout, prefix, s, qkv_bias, qk_norm, sh, None):
                specs.append(W.TensorSpec(name, shape, st_dtype,
                                          make_chunks(args.seed, name, shape, init)))
    os.makedirs(args.out, exist_ok=True)
    cfg = {
        "architectures": ["NextnMTPAssistant"],
        "model_type": "mtp_assistant",
        "mtp_layout": layout,
        "target_model_type": tc["model_type"],
        "hidden_size": tc["hidden_size"],
        "vocab_size": tc["vocab_size"],
        "num_nextn_predict_layers": n_layers,
        "num_attention_heads": tc["num_attention_heads"],
        "num_key_value_heads": tc["num_key_value_heads"],
        "head_dim": head_dim,
        "intermediate_size": tc["intermediate_size"],
        "rms_norm_eps": tc["rms_norm_eps"],
        "rope_theta": tc["rope_theta"],
        "rope_scaling": tc.get("rope_scaling"),
        "attention_bias": qkv_bias,
        "qk_norm": qk_norm,
        "torch_dtype": tc.get("torch_dtype", "float32"),
    }
    write_json(os.path.join(args.out, "config.json"), cfg)
    write_weights(args.out, specs, args.shards)
    return sum(sp.nbytes for sp in specs)


def make_eagle3(args):
    """A random EAGLE-3 drafter for the target (tools/checkpoint/eagle3.py)."""
    with open(os.path.join(args.eagle3_of, "config.json")) as f:
        tc = json.load(f)
    tc = tc.get("text_config") or tc
    V, L = tc["vocab_size"], tc["num_hidden_layers"]
    H = args.hidden or tc["hidden_size"]
    dv = min(args.draft_vocab or V, V)
    ids = [int(i) for i in args.eagle3_layers.split(",")] if args.eagle3_layers else None
    ids = E3.layer_ids(L, ids)
    st_dtype = W.DTYPE_NAMES[args.dtype]
    specs = [W.TensorSpec(name, shape, st_dtype, make_chunks(args.seed, name, shape, init))
             for name, shape, init in E3.tensors(tc, H, dv, args.eagle3_form, args.norm_before_fc,
                                                 args.own_embedding or H != tc["hidden_size"])]
    used = E3.draft_vocabulary(args.seed, V, dv)
    d2t = used - np.arange(dv, dtype=np.int64)
    t2d = np.zeros(V, dtype=np.uint8)
    t2d[used] = 1
    specs.append(W.TensorSpec("d2t", (dv,), "I64", lambda: iter([d2t])))
    specs.append(W.TensorSpec("t2d", (V,), "BOOL", lambda: iter([t2d])))
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "config.json"),
               E3.config(tc, H, dv, args.eagle3_form, ids, args.norm_before_fc, args.norm_before_residual,
                         {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[args.dtype]))
    write_weights(args.out, specs, 1)
    return sum(sp.nbytes for sp in specs)


def dflash_target_layer_ids(n_target, n_draft):
    """The taps a DFlash drafter reads when its config does not list them: the OUTPUTS of
    these target layers (z-lab's default rule)."""
    if n_draft == 1:
        return [n_target // 2]
    return [int(round(1 + i * (n_target - 4) / (n_draft - 1))) for i in range(n_draft)]


def make_dflash(args):
    """A DFlash drafter for a target in the published layout: Nd Qwen3 layers under
    layers.{i}.*, fc [H, K*H_t], hidden_norm, norm, no embedding and no head (the target's
    are used); mask_token_id the target's last token id, target_layer_ids by the default
    rule (one tap per drafter layer)."""
    with open(os.path.join(args.dflash_of, "config.json")) as f:
        tc = json.load(f)
    tc = tc.get("text_config") or tc
    Ht, Nt, V = tc["hidden_size"], tc["num_hidden_layers"], tc["vocab_size"]
    nd = args.dflash_layers
    h = args.hidden or Ht
    heads, kv_heads = tc["num_attention_heads"], tc["num_key_value_heads"]
    head_dim = tc.get("head_dim") or Ht // heads
    s = dict(hidden=h, heads=heads, kv_heads=kv_heads, head_dim=head_dim, inter=E3.intermediate(tc))
    ids = dflash_target_layer_ids(Nt, nd)
    st_dtype = W.DTYPE_NAMES[args.dtype]
    t = [("fc.weight", (h, len(ids) * Ht), A.linear_init(len(ids) * Ht)),
         ("hidden_norm.weight", (h,), A.norm_init())]
    for i in range(nd):
        t += A.block_tensors(f"layers.{i}", s, False, True)
    t.append(("norm.weight", (h,), A.norm_init()))
    specs = [W.TensorSpec(name, shape, st_dtype, make_chunks(args.seed, name, shape, init))
             for name, shape, init in t]
    os.makedirs(args.out, exist_ok=True)
    dtype_name = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[args.dtype]
    write_json(os.path.join(args.out, "config.json"), {
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "model_type": "qwen3",
        "hidden_size": h,
        "intermediate_size": s["inter"],
        "num_hidden_layers": nd,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "attention_bias": False,
        "rms_norm_eps": tc["rms_norm_eps"],
        "rope_theta": tc.get("rope_theta", 1000000.0),
        "rope_scaling": None,
        "max_position_embeddings": tc.get("max_position_embeddings", 4096),
        "vocab_size": V,
        "tie_word_embeddings": False,
        "block_size": args.block_size,
        "num_target_layers": Nt,
        "dflash_config": {"mask_token_id": V - 1, "target_layer_ids": ids},
        "torch_dtype": dtype_name,
    })
    write_weights(args.out, specs, args.shards)
    return sum(sp.nbytes for sp in specs)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--arch", choices=sorted(A.ARCHS) + ["gemma4", "glm4_moe"])
    p.add_argument("--mtp", choices=["none", "mimo", "deepseek", "qwen35"],
                   help="MTP layers (default: mimo for --arch mimo, qwen35 for --arch qwen3_5, "
                        "none otherwise)")
    p.add_argument("--vision-language", action="store_true",
                   help="qwen3_5: Qwen3_5ForConditionalGeneration layout (text_config, "
                        "model.language_model.*, a tiny vision tower model.visual.*); gemma4: "
                        "Gemma4ForConditionalGeneration with a tiny vision tower model.vision_tower.* + "
                        "model.embed_vision.*, its image tokens and processor_config.json")
    p.add_argument("--vision-clipped", action="store_true",
                   help="gemma4 --vision-language: clipped linears in the tower (finite input/output bounds, the E-model form)")
    p.add_argument("--vision-standardize", action="store_true",
                   help="gemma4 --vision-language: std_bias / std_scale after pooling (the 26B/31B form)")
    p.add_argument("--bidirectional-vision", action="store_true",
                   help="gemma4: text_config.use_bidirectional_attention = \"vision\" (26B/31B: an image's tokens "
                        "see each other in sliding layers)")
    p.add_argument("--vision-tower", choices=["tiny", "released"],
                   help="--vision-language: the tiny test tower, or the released sizes (Qwen3.5-0.8B's, Gemma 4 "
                        "E2B's) beside any text shape, for measuring the encoder (default: released for real presets)")
    p.add_argument("--image-budget", type=int,
                   help=f"gemma4 --vision-language: processor_config.json max_soft_tokens (default {G.TINY_VISION['budget']})")
    p.add_argument("--mtp-layers", type=int, default=1)
    p.add_argument("--experts-layout", choices=["fused", "per_expert", "released"],
                   help="MoE: experts.gate_up_proj/down_proj stacked (default), one tensor per expert, or "
                        "released: the Qwen3.5/3.6-35B/122B layout (trunk fused, MTP layer per expert)")
    p.add_argument("--shared-head", choices=["copy", "random", "none"], default="copy",
                   help="DeepSeek layout: shared_head.head = copy of lm_head (default), "
                        "independent random weights, or absent")
    p.add_argument("--preset", choices=["tiny"] + sorted(A.PRESETS) + sorted(G.PRESETS) + sorted(GLM.PRESETS),
                   default="tiny")
    p.add_argument("--moe", action="store_true",
                   help="gemma4: routed experts beside each dense MLP (the 26B-A4B form; tiny: 16 of width 24, top 4)")
    p.add_argument("--k-eq-v", action="store_true",
                   help="gemma4: K=V full layers with one global key/value head (the 31B form)")
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"])
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--tied", dest="tied", action="store_true", default=None)
    p.add_argument("--untied", dest="tied", action="store_false")
    p.add_argument("--rope-scaling", choices=["default", "none", "llama3"], default="default")
    p.add_argument("--assistant-of", metavar="TARGET_DIR")
    p.add_argument("--eagle3-of", metavar="TARGET_DIR", help="write an EAGLE-3 drafter for this target")
    p.add_argument("--eagle3-form", choices=["official", "speculators"], default="official")
    p.add_argument("--draft-vocab", type=int, help="EAGLE-3: draft vocabulary size (default: the target's)")
    p.add_argument("--eagle3-layers", help="EAGLE-3: the three target layer inputs read, A,B,C")
    p.add_argument("--norm-before-fc", action="store_true", help="EAGLE-3: an RMSNorm on the taps before fc")
    p.add_argument("--norm-before-residual", action="store_true",
                   help="EAGLE-3 (speculators): the residual is RMS(g), not g")
    p.add_argument("--own-embedding", action="store_true", help="EAGLE-3: an embed_tokens of its own")
    p.add_argument("--dflash-of", metavar="TARGET_DIR", help="a random DFlash drafter for this target")
    p.add_argument("--dflash-layers", type=int, default=1, help="--dflash-of: drafter layers")
    p.add_argument("--block-size", type=int, default=16, help="--dflash-of: block size")
    p.add_argument("--no-centroids", action="store_true",
                   help="Gemma 4 assistant: no centroid masking (use_ordered_embeddings false)")
    p.add_argument("--mtp-only", action="store_true",
                   help="only the MTP layers plus embedding, final norm and output head (llama.cpp's split MTP "
                        "file); the trunk-only file is the same --seed with --mtp none")
    p.add_argument("--fp8", type=int, metavar="BLOCK",
                   help="linear weights as block-scaled FP8 (E4M3, weight_scale_inv per BLOCK x BLOCK tile), "
                        "as the official FP8 releases")
    p.add_argument("--config-form", choices=["flat", "nested"], default="flat",
                   help="nested: newer transformers' forms (rope_parameters; Gemma 4 per_layer_config)")
    p.add_argument("--hidden", type=int, help="gemma4: hidden size; --dflash-of: the drafter's (default: the target's)")
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.assistant_of is None and args.eagle3_of is None and args.dflash_of is None and args.arch is None:
        p.error("--arch is required (or --assistant-of, --eagle3-of, --dflash-of)")
    if args.dflash_of is not None and (args.dflash_layers < 1 or args.block_size < 2):
        p.error("--dflash-layers must be >= 1 and --block-size >= 2")
    if args.dtype is None:
        args.dtype = "f32" if args.preset == "tiny" else "bf16"
    if args.mtp_only and (args.arch in (None, "gemma4") or args.mtp == "none"):
        p.error("--mtp-only needs an --arch with MTP layers")
    if args.mtp_layers < 1:
        p.error("--mtp-layers must be >= 1")
    if args.arch in ("qwen3_5", "qwen3_5_moe") and args.mtp not in (None, "none", "qwen35"):
        p.error(f"--arch {args.arch} takes --mtp qwen35 or none")
    if args.arch not in ("qwen3_5", "qwen3_5_moe") and args.mtp == "qwen35":
        p.error("--mtp qwen35 needs --arch qwen3_5 or qwen3_5_moe")
    if args.experts_layout and args.arch not in ("qwen3_5_moe",):
        p.error("--experts-layout needs an MoE --arch")
    if args.arch == "gemma4" and args.mtp not in (None, "none"):
        p.error("--arch gemma4 has no MTP layers (its drafter is a separate --assistant-of checkpoint)")
    if args.arch == "gemma4" and args.preset != "tiny" and args.preset not in G.PRESETS:
        p.error(f"--preset {args.preset} is not a gemma4 shape")
    if args.arch == "glm4_moe" and args.mtp not in (None, "none", "deepseek"):
        p.error("--arch glm4_moe takes --mtp deepseek (its nextn layer, the default) or none")
    if (args.arch == "glm4_moe") != (args.preset in GLM.PRESETS) and args.preset != "tiny":
        p.error(f"--preset {args.preset} and --arch {args.arch} do not match")
    if args.arch != "gemma4" and args.preset in G.PRESETS:
        p.error(f"--preset {args.preset} needs --arch gemma4")
    return args


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    t0 = time.time()
    nbytes = make_eagle3(args) if args.eagle3_of else make_dflash(args) if args.dflash_of else \
        make_assistant(args) if args.assistant_of else make_model(args)
    if not args.quiet:
        what = f"EAGLE-3 drafter of {args.eagle3_of}" if args.eagle3_of else \
            f"DFlash drafter of {args.dflash_of}" if args.dflash_of else \
            f"assistant of {args.assistant_of}" if args.assistant_of else \
            f"{args.arch} {args.preset} {args.dtype}"
        print(f"wrote {what} to {args.out}: {nbytes / 1e6:.1f} MB in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
