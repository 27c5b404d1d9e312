"""train.py — trains the MiMo backbone + MTP head and exports a Hugging Face directory.

Objective: cross-entropy of the backbone on x_{t+1} plus --mtp-weight times the
cross-entropy of MTP layer 0 on x_{t+2} (from the post-final-norm hidden h_t and the
embedding of x_{t+1}, zeroed at position 0). AdamW, linear warmup then cosine decay to
--min-lr-frac of the peak, bf16 autocast, gradient clipping at 1.0, random windows of
--seq + 1 tokens from the training stream (numpy Generator seeded by --seed).

With --steps N the schedule is step-based and the run deterministic from --seed (up to
floating-point effects); otherwise --minutes M is a wall-clock budget and the cosine
follows the elapsed fraction of it (the step count reached is logged so the run can be
repeated with --steps).

    /usr/bin/python3 tools/train/train.py --data tools/train/work --out DIR --device cpu --minutes 75
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import evaluate  # noqa: E402
import model as M  # noqa: E402
import st  # noqa: E402


def log(msg, f=None):
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    if f:
        f.write(line + "\n")
        f.flush()


def export(model, cfg, tok_dir, out_dir, max_shard_mib=0, hf_config=None):
    """BF16 safetensors + config.json (hf_config, default the MiMo one) + generation_config.json
    + the tokenizer files of tok_dir."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {}
    for name, p in model.state_dict().items():
        a = p.detach().float().cpu().numpy()
        tensors[name] = ("BF16", a.shape, st.f32_to_bf16_bits(a).tobytes())
    st.write_dir(out_dir, tensors, int(max_shard_mib * 1024 * 1024) if max_shard_mib else None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config if hf_config is not None else M.hf_config(cfg), f, indent=2)
    eot = cfg.vocab_size - 5
    im_end = cfg.vocab_size - 3
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": None, "eos_token_id": [eot, im_end], "pad_token_id": eot,
                   "do_sample": False}, f, indent=2)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        if tok_dir and os.path.exists(os.path.join(tok_dir, fn)):
            shutil.copy(os.path.join(tok_dir, fn), os.path.join(out_dir, fn))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="dir with train_tokens.npy, val_*.npy, tokenizer/")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=7.0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0, help="sequences per step (default 128 cuda, 16 cpu)")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=0, help="warmup steps (default 150 cuda, 50 cpu)")
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--compile", choices=["auto", "yes", "no"], default="auto")
    ap.add_argument("--shard-mib", type=float, default=0, help="shard model.safetensors above this")
    ap.add_argument("--eval-windows", type=int, default=0, help="0 = all validation windows")
    ap.add_argument("--gen-prompts", type=int, default=32)
    ap.add_argument("--sample-tokens", type=int, default=80)
    ap.add_argument("--gen-new", type=int, default=96, help="greedy tokens per acceptance prompt")
    ap.add_argument("--val-every", type=int, default=0, help="steps between quick validation checks")
    ap.add_argument("--ckpt-minutes", type=float, default=0, help="checkpoint period (resumable)")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--no-export-tokenizer", action="store_true",
                    help="do not copy the tokenizer files into --out")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "train_log.txt"), "a")
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    batch = args.batch or (128 if cuda else 16)
    warmup = args.warmup or (150 if cuda else 50)
    torch.manual_seed(args.seed)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    tok_dir = os.path.join(args.data, "tokenizer")
    enc = bpe.load(tok_dir)
    vocab = len(enc.vocab) + len(enc.added)
    cfg = M.Config(vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.ffn,
                   num_hidden_layers=args.layers, num_attention_heads=args.heads,
                   num_key_value_heads=args.kv_heads, head_dim=args.hidden // args.heads,
                   max_position_embeddings=max(1024, args.seq))
    model = M.MiMoForCausalLM(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in model.model.mtp_layers.parameters())
    n_emb = model.model.embed_tokens.weight.numel()
    log(f"config {cfg.to_dict()}", logf)
    log(f"params total {n_params/1e6:.2f}M (embedding {n_emb/1e6:.2f}M, MTP {n_mtp/1e6:.2f}M, "
        f"backbone non-emb {(n_params-n_emb-n_mtp)/1e6:.2f}M); device {device} "
        f"{torch.cuda.get_device_name(0) if cuda else ''} torch {torch.__version__}", logf)

    train = np.load(os.path.join(args.data, "train_tokens.npy"))
    train_t = torch.from_numpy(train.astype(np.int64)).to(device)
    log(f"train tokens {len(train)/1e6:.2f}M; batch {batch} x seq {args.seq}; lr {args.lr}; "
        f"warmup {warmup}; mtp weight {args.mtp_weight}; seed {args.seed}", logf)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt_kwargs = {"lr": args.lr, "betas": (0.9, 0.95), "eps": 1e-8}
    if cuda:
        opt_kwargs["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}], **opt_kwargs)
    rng = np.random.default_rng(args.seed)
    step = 0
    elapsed_before = 0.0
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    if args.ckpt_minutes and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        rng.bit_generator.state = ck["rng"]
        step, elapsed_before = ck["step"], ck["elapsed"]
        log(f"resumed at step {step}, {elapsed_before/60:.1f} min", logf)

    fwd = model
    use_compile = cuda and hasattr(torch, "compile") and args.compile != "no"
    if use_compile:
        fwd = torch.compile(model)
    budget = args.minutes * 60.0

    def progress(elapsed):
        if args.steps:
            return step / args.steps
        return elapsed / budget

    def lr_at(p):
        w = min(1.0, (step + 1) / warmup)
        c = args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))
        return args.lr * w * c

    T = args.seq
    val_quick = {k: np.load(os.path.join(args.data, f"val_{k}.npy")) for k in ("prose", "code")}
    n_win = len(train) - T - 1
    t0 = time.time() - elapsed_before
    last_ckpt = time.time()
    tokens_seen = step * batch * T
    acc = {"main": 0.0, "mtp": 0.0, "n": 0}
    t_log = time.time()
    tok_log = 0
    model.train()
    while True:
        elapsed = time.time() - t0
        p = progress(elapsed)
        if p >= 1.0:
            break
        lr = lr_at(p)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.from_numpy(rng.integers(0, n_win, size=batch)).to(device)
        idx = starts[:, None] + torch.arange(T + 1, device=device)[None, :]
        x = train_t[idx]
        try:
            with evaluate.autocast(device):
                h, m = fwd(x[:, :-1])
                lm = model.logits(h)
                lt = model.logits(m)
            V = lm.shape[-1]
            loss_main = F.cross_entropy(lm.float().reshape(-1, V), x[:, 1:].reshape(-1))
            loss_mtp = F.cross_entropy(lt.float().reshape(-1, V), x[:, 2:].reshape(-1))
            loss = loss_main + args.mtp_weight * loss_mtp
            opt.zero_grad(set_to_none=True)
            loss.backward()
        except Exception as e:  # torch.compile trouble: fall back to eager once
            if fwd is model:
                raise
            log(f"compile failed ({type(e).__name__}: {e}); continuing eager", logf)
            fwd = model
            opt.zero_grad(set_to_none=True)
            continue
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += batch * T
        tok_log += batch * T
        if step % args.log_every == 0 or step == 1:
            lmv, ltv = loss_main.item(), loss_mtp.item()
            dt = time.time() - t_log
            log(f"step {step} t {elapsed/60:.2f}m lr {lr:.2e} loss {lmv:.4f} mtp {ltv:.4f} "
                f"tok/s {tok_log/max(dt,1e-9):.0f} seen {tokens_seen/1e6:.1f}M", logf)
            t_log = time.time()
            tok_log = 0
        if args.val_every and step % args.val_every == 0:
            model.eval()
            q = {k: evaluate.val_metrics(model, val_quick[k], T, device, 16)
                 for k in ("prose", "code")}
            model.train()
            log(f"val step {step}: " + " ".join(
                f"{k} main {v['loss_main']:.4f} mtp {v['loss_mtp']:.4f} agree {v['mtp_agreement']:.3f}"
                for k, v in q.items()), logf)
        if args.ckpt_minutes and time.time() - last_ckpt > args.ckpt_minutes * 60:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "rng": rng.bit_generator.state, "elapsed": time.time() - t0}, ckpt_path)
            last_ckpt = time.time()
    train_seconds = time.time() - t0
    log(f"training done: {step} steps, {tokens_seen/1e6:.1f}M tokens "
        f"({tokens_seen/len(train):.2f} epochs), {train_seconds/60:.2f} min", logf)

    model.eval()
    export(model, cfg, None if args.no_export_tokenizer else tok_dir, args.out, args.shard_mib)
    log("exported", logf)
    res = evaluate.run_all(model, args.data, enc, T, device, args.eval_windows, args.gen_prompts,
                           n_new=args.gen_new, sample_tokens=args.sample_tokens, log=lambda s: log(s, logf))
    res["training"] = {
        "steps": step, "tokens_seen": tokens_seen, "epochs": tokens_seen / len(train),
        "train_tokens": int(len(train)), "minutes": train_seconds / 60, "batch": batch, "seq": T,
        "lr": args.lr, "warmup": warmup, "min_lr_frac": args.min_lr_frac, "wd": args.wd,
        "mtp_weight": args.mtp_weight, "seed": args.seed,
        "device": str(device) + (f" ({torch.cuda.get_device_name(0)})" if cuda else ""),
        "torch": torch.__version__, "compiled": fwd is not model,
        "params": n_params, "params_mtp": n_mtp, "params_embedding": n_emb,
    }
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump(res, f, indent=2, ensure_ascii=False)
    log("done", logf)


if __name__ == "__main__":
    main()
