"""train_chat.py — trains the Qwen3.5 hybrid (model_qwen35.py) with its MTP head on the chat
set (chat_data.py) and exports the Hugging Face directory nextn loads.

Objective: masked cross-entropy of the backbone on x_{t+1} plus --mtp-weight times the
masked cross-entropy of the MTP head on x_{t+2}; the mask keeps assistant answer tokens and
their <|im_end|> only (chat_data.py), so prompts and templates carry no loss. Optionally
--text TOKENS.npy mixes in windows of plain text (every token counted) with --text-frac.
AdamW, linear warmup then cosine decay to --min-lr-frac of the peak, bf16 autocast, gradient
clipping at 1.0, random windows of --seq + 1 tokens (numpy Generator seeded by --seed).
--init DIR warm-starts from the MiMo model (warm_start.py); --continue-from DIR instead starts
from a chat model this script exported (a second, shorter run on top of a first one). --minutes is a wall-clock
budget (the cosine follows its elapsed fraction) unless --steps is given. A checkpoint every
--ckpt-minutes; --resume continues from it; SIGTERM/SIGINT stop early and still export.

    /usr/bin/python3 tools/train/train_chat.py --chat tools/train/work/chat --init models/nextn-tiny \
        --tokenizer models/nextn-tiny --out RUN --device cpu --minutes 50 --threads 2
"""
import argparse
import json
import math
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_data  # noqa: E402
import evaluate  # noqa: E402
import model_qwen35 as Q  # noqa: E402
import train as T  # noqa: E402
import warm_start  # noqa: E402


def distill_loss(model, x, w):
    """The MTP head taught to draft what the backbone would choose: cross-entropy of its row p
    against the backbone's softmax at row p + 1 (both predict x_(p+2)), on answer tokens. The
    backbone runs without gradients; only the head learns, so the target's outputs stay as
    they were and only the drafts' acceptance moves."""
    ids = x[:, :-1]
    with torch.no_grad():
        h = model.backbone(ids)
    m = model.mtp_rows(h, ids)
    sel = w[:, 2:] > 0
    if not sel.any():
        return m.sum() * 0
    with torch.no_grad():
        teacher = F.softmax(model.logits(h[:, 1:][sel]).float(), dim=-1)
    student = F.log_softmax(model.logits(m[sel]).float(), dim=-1)
    return -(teacher * student).sum(-1).mean()


def masked_losses(model, x, w, metrics=True):
    """x [B, S+1] ids, w [B, S+1] loss weights of each token as a target. Without metrics the
    logits are computed only at rows that carry loss (cheaper: the lm_head is a third of a step)."""
    h, m = model(x[:, :-1])
    w1, w2 = w[:, 1:], w[:, 2:]
    if not metrics:
        sel1, sel2 = w1 > 0, w2 > 0
        lm = model.logits(h[sel1]).float()
        lt = model.logits(m[sel2]).float()
        main = F.cross_entropy(lm, x[:, 1:][sel1]) if sel1.any() else h.sum() * 0
        mtp = F.cross_entropy(lt, x[:, 2:][sel2]) if sel2.any() else m.sum() * 0
        return main, mtp
    lm = model.logits(h).float()
    lt = model.logits(m).float()
    V = lm.shape[-1]
    w1, w2 = w1.float(), w2.float()
    ce1 = F.cross_entropy(lm.reshape(-1, V), x[:, 1:].reshape(-1), reduction="none")
    ce2 = F.cross_entropy(lt.reshape(-1, V), x[:, 2:].reshape(-1), reduction="none")
    main = (ce1 * w1.reshape(-1)).sum() / w1.sum().clamp(min=1)
    mtp = (ce2 * w2.reshape(-1)).sum() / w2.sum().clamp(min=1)
    agree = ((lt.argmax(-1) == lm[:, 1:].argmax(-1)).float() * w2).sum() / w2.sum().clamp(min=1)
    acc = ((lm.argmax(-1) == x[:, 1:]).float() * w1).sum() / w1.sum().clamp(min=1)
    return main, mtp, agree, acc, w1.sum().item(), w2.sum().item()


@torch.no_grad()
def validate(model, tokens, mask, seq, device, max_windows=0, batch=16):
    n = (len(tokens) - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    sums = np.zeros(4)
    counts = np.zeros(2)
    for b0 in range(0, n, batch):
        idx = range(b0, min(n, b0 + batch))
        x = torch.stack([torch.from_numpy(tokens[i * seq:i * seq + seq + 1].astype(np.int64)) for i in idx]).to(device)
        w = torch.stack([torch.from_numpy(mask[i * seq:i * seq + seq + 1].astype(np.int64)) for i in idx]).to(device)
        with evaluate.autocast(device):
            main, mtp, agree, acc, n1, n2 = masked_losses(model, x, w)
        sums += np.array([main.item() * n1, mtp.item() * n2, agree.item() * n2, acc.item() * n1])
        counts += [n1, n2]
    return {"loss_main": sums[0] / counts[0], "loss_mtp": sums[1] / counts[1],
            "mtp_agreement": sums[2] / counts[1], "acc_main": sums[3] / counts[0],
            "answer_tokens": int(counts[0])}


def export(model, cfg, tokenizer_dir, out_dir):
    eos = 8189 if cfg.vocab_size == 8192 else cfg.vocab_size - 3     # <|im_end|>
    T.export(model, cfg, tokenizer_dir, out_dir, hf_config=Q.hf_config(cfg, eos))
    im_end, eot = cfg.vocab_size - 3, cfg.vocab_size - 5
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": None, "eos_token_id": [im_end, eot], "pad_token_id": eot,
                   "do_sample": False}, f, indent=2)
    path = os.path.join(out_dir, "tokenizer_config.json")
    with open(path) as f:
        tc = json.load(f)
    tc["chat_template"] = chat_data.CHAT_TEMPLATE
    tc["eos_token"] = "<|im_end|>"
    with open(path, "w") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chat", required=True, help="chat_data.py output dir (train/val tokens + masks)")
    ap.add_argument("--tokenizer", default="models/nextn-tiny")
    ap.add_argument("--init", default="", help="warm start from this MiMo model directory")
    ap.add_argument("--continue-from", default="",
                    help="start from the weights of a chat model this script exported (not --init)")
    ap.add_argument("--distill-mtp", action="store_true",
                    help="train only the MTP head, towards the backbone's own predictions")
    ap.add_argument("--text", default="", help="optional plain-text token stream (.npy) to mix in")
    ap.add_argument("--text-frac", type=float, default=0.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=50.0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0, help="sequences per step (default 64 cuda, 16 cpu)")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.5)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--val-every", type=int, default=100)
    ap.add_argument("--val-windows", type=int, default=48)
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--export-checkpoint", default="",
                    help="only export --out's checkpoint (a run in progress) into this directory")
    args = ap.parse_args()
    if args.export_checkpoint:
        ck = torch.load(os.path.join(args.out, "ckpt.pt"), map_location="cpu")
        model = Q.Qwen35ForCausalLM(Q.Config(num_hidden_layers=args.layers, max_position_embeddings=1024))
        model.load_state_dict(ck["model"])
        export(model.eval(), model.cfg, args.tokenizer, args.export_checkpoint)
        print(f"exported step {ck['step']} ({ck['tokens_seen']/1e6:.2f}M tokens) to {args.export_checkpoint}")
        return

    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "train_log.txt"), "a")
    log = lambda s: T.log(s, logf)  # noqa: E731
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # exp of long decays underflows; denormals are slow on x86
    batch = args.batch or (64 if cuda else 16)
    torch.manual_seed(args.seed)
    cfg = Q.Config(num_hidden_layers=args.layers, max_position_embeddings=1024)
    model = Q.Qwen35ForCausalLM(cfg)
    warm = []
    if args.init and args.continue_from:
        raise SystemExit("train_chat.py: --init and --continue-from exclude each other")
    # --resume without a checkpoint yet (a stage that never started) starts like a new run.
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    resuming = args.resume and os.path.exists(ckpt_path)
    if args.init and not resuming:
        warm = warm_start.warm_start(model, args.init, log)
    if args.continue_from and not resuming:
        start = Q.load_exported(args.continue_from)
        if start.cfg.to_dict() != cfg.to_dict():
            raise SystemExit(f"{args.continue_from}: its config differs from --layers {args.layers}")
        model.load_state_dict(start.state_dict())
        warm = sorted(start.state_dict())
        log(f"continuing from {args.continue_from} ({len(warm)} tensors, BF16 weights as exported)")
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in model.mtp.parameters())
    n_emb = model.model.embed_tokens.weight.numel()
    log(f"config {cfg.to_dict()}")
    log(f"params total {n_params/1e6:.2f}M (embedding {n_emb/1e6:.2f}M, MTP {n_mtp/1e6:.2f}M); "
        f"device {device} {torch.cuda.get_device_name(0) if cuda else ''} torch {torch.__version__} "
        f"threads {torch.get_num_threads()}")

    # A chat set of the model's own answers (chat_self.py) says where they came from.
    self_path = os.path.join(args.chat, "self_stats.json")
    self_answers = json.load(open(self_path)) if os.path.exists(self_path) else None
    tr = np.load(os.path.join(args.chat, "train_tokens.npy"))
    trm = np.load(os.path.join(args.chat, "train_mask.npy"))
    va = np.load(os.path.join(args.chat, "val_tokens.npy"))
    vam = np.load(os.path.join(args.chat, "val_mask.npy"))
    tr_t = torch.from_numpy(tr.astype(np.int64)).to(device)
    trm_t = torch.from_numpy(trm.astype(np.int64)).to(device)
    text_t = None
    if args.text and args.text_frac > 0:
        text_t = torch.from_numpy(np.load(args.text).astype(np.int64)).to(device)
    log(f"chat train tokens {len(tr)/1e6:.2f}M ({trm.sum()/1e6:.2f}M answer tokens); val {len(va)} "
        f"tokens; text {0 if text_t is None else len(text_t)/1e6:.2f}M at frac {args.text_frac}; "
        f"batch {batch} x seq {args.seq}; lr {args.lr}; warmup {args.warmup}; mtp weight "
        f"{args.mtp_weight}; seed {args.seed}")

    if args.distill_mtp:
        for n, p in model.named_parameters():
            p.requires_grad_(n.startswith("mtp."))
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in trained if p.dim() >= 2]
    no_decay = [p for n, p in trained if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(args.seed)
    step, elapsed_before, tokens_seen = 0, 0.0, 0
    if resuming:
        ck = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        rng.bit_generator.state = ck["rng"]
        step, elapsed_before, tokens_seen = ck["step"], ck["elapsed"], ck["tokens_seen"]
        warm = ck.get("warm", [])
        log(f"resumed at step {step}, {elapsed_before/60:.1f} min")

    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True
        log(f"signal {signum}: stopping after this step")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    budget = args.minutes * 60.0
    S = args.seq
    n_win = len(tr) - S - 1

    def save_ckpt():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "rng": rng.bit_generator.state, "elapsed": time.time() - t0,
                    "tokens_seen": tokens_seen, "warm": warm}, ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    t0 = time.time() - elapsed_before
    last_ckpt = time.time()
    t_log, tok_log = time.time(), 0
    history = []
    model.train()
    while not stop["now"]:
        elapsed = time.time() - t0
        p = step / args.steps if args.steps else elapsed / budget
        if p >= 1.0:
            break
        w_up = min(1.0, (step + 1) / args.warmup)
        lr = args.lr * w_up * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.from_numpy(rng.integers(0, n_win, size=batch)).to(device)
        idx = starts[:, None] + torch.arange(S + 1, device=device)[None, :]
        x, w = tr_t[idx], trm_t[idx]
        if text_t is not None:
            n_text = int(rng.binomial(batch, args.text_frac))
            if n_text:
                ts = torch.from_numpy(rng.integers(0, len(text_t) - S - 1, size=n_text)).to(device)
                x[:n_text] = text_t[ts[:, None] + torch.arange(S + 1, device=device)[None, :]]
                w[:n_text] = 1
        with evaluate.autocast(device):
            if args.distill_mtp:
                main = mtp = distill_loss(model, x, w)
                loss = mtp
            else:
                main, mtp = masked_losses(model, x, w, metrics=False)
                loss = main + args.mtp_weight * mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in trained], 1.0)
        opt.step()
        step += 1
        tokens_seen += batch * S
        tok_log += batch * S
        if step % args.log_every == 0 or step == 1:
            dt = time.time() - t_log
            log(f"step {step} t {elapsed/60:.2f}m lr {lr:.2e} loss {main.item():.4f} mtp {mtp.item():.4f} "
                f"tok/s {tok_log/max(dt, 1e-9):.0f} "
                f"seen {tokens_seen/1e6:.2f}M load {os.getloadavg()[0]:.1f}")
            t_log, tok_log = time.time(), 0
        if args.val_every and step % args.val_every == 0:
            model.eval()
            v = validate(model, va, vam, S, device, args.val_windows)
            model.train()
            history.append({"step": step, **v})
            log(f"val step {step}: main {v['loss_main']:.4f} mtp {v['loss_mtp']:.4f} "
                f"agree {v['mtp_agreement']:.3f} acc {v['acc_main']:.3f}")
        if args.ckpt_minutes and time.time() - last_ckpt > args.ckpt_minutes * 60:
            save_ckpt()
            last_ckpt = time.time()
    train_seconds = time.time() - t0
    save_ckpt()
    log(f"training done: {step} steps, {tokens_seen/1e6:.2f}M tokens "
        f"({tokens_seen/len(tr):.2f} passes over the chat set), {train_seconds/60:.2f} min")
    model.eval()
    export(model, cfg, args.tokenizer, args.out)
    log("exported")
    v = validate(model, va, vam, S, device, 0)
    log(f"final val (all held-out conversations): {v}")
    res = {"val_chat": v, "val_history": history, "training": {
        "steps": step, "tokens_seen": tokens_seen, "passes": tokens_seen / len(tr),
        "train_tokens": int(len(tr)), "answer_tokens": int(trm.sum()), "minutes": train_seconds / 60,
        "batch": batch, "seq": S, "lr": args.lr, "warmup": args.warmup, "min_lr_frac": args.min_lr_frac,
        "wd": args.wd, "mtp_weight": args.mtp_weight, "seed": args.seed, "text_frac": args.text_frac,
        "device": str(device) + (f" ({torch.cuda.get_device_name(0)})" if cuda else ""),
        "threads": torch.get_num_threads(), "torch": torch.__version__, "params": n_params,
        "params_mtp": n_mtp, "params_embedding": n_emb, "warm_start": args.init or None,
        "continued_from": args.continue_from or None, "distill_mtp": args.distill_mtp,
        "self_answers": self_answers,
        "warm_started_tensors": len(warm)}}
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump(res, f, indent=2, ensure_ascii=False)
    log("done")


if __name__ == "__main__":
    main()
