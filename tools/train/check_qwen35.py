"""check_qwen35.py — checks model_qwen35.py before any training time is spent on it:

  1. the chunked delta rule equals the token-by-token recurrence (T = 1, 63, 64, 65, 130,
     with and without an initial state, strong and weak decays);
  2. an exported random model (norm weights, gates and decays perturbed so every branch
     matters) gives the same logits, post-norm hidden and MTP logits in PyTorch (float32,
     chunked and recurrent) as tests/reference/numpy_qwen3_5.py (float64, from the equations);
  3. with --nextn BIN: `nextn debug-logits` on the same export matches PyTorch (prefill,
     hidden, MTP, greedy decode).

    /usr/bin/python3 tools/train/check_qwen35.py [--nextn build/nextn] [--out /tmp/q35check]
Exit status 1 on any mismatch.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import model_qwen35 as Q  # noqa: E402
import train  # noqa: E402

FAILED = []


def report(name, err, tol):
    ok = err <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |diff| {err:.3e} (tol {tol:.1e})")
    if not ok:
        FAILED.append(name)


def check_delta_rule():
    torch.manual_seed(0)
    for T in (1, 63, 64, 65, 130):
        for init in (False, True):
            for strong in (False, True):
                B, H, dk, dv = 2, 3, 8, 12
                q = Q.l2norm(torch.randn(B, H, T, dk, dtype=torch.float64)) * dk ** -0.5
                k = Q.l2norm(torch.randn(B, H, T, dk, dtype=torch.float64))
                v = torch.randn(B, H, T, dv, dtype=torch.float64)
                beta = torch.rand(B, H, T, dtype=torch.float64)
                g = -torch.rand(B, H, T, dtype=torch.float64) * (8.0 if strong else 0.1)
                S0 = torch.randn(B, H, dk, dv, dtype=torch.float64) if init else None
                o1, s1 = Q.delta_rule_recurrent(q, k, v, beta, g, S0)
                o2, s2 = Q.delta_rule_chunked(q, k, v, beta, g, S0)
                err = max((o1 - o2).abs().max().item(), (s1 - s2).abs().max().item())
                report(f"chunked = recurrent T={T} init={init} strong={strong}", err, 1e-9)


def random_model(cfg, seed):
    torch.manual_seed(seed)
    m = Q.Qwen35ForCausalLM(cfg)
    with torch.no_grad():  # move every parameter off its neutral start so each branch shows
        for name, p in m.named_parameters():
            if name.endswith("norm.weight") or "norm_" in name:
                p.add_(0.3 * torch.randn_like(p))
            elif name.endswith("A_log") or name.endswith("dt_bias"):
                p.add_(0.5 * torch.randn_like(p))
            elif p.dim() == 2 and "embed" not in name:
                p.mul_(3.0)
            elif "embed" in name:
                p.mul_(4.0)
    return m.eval()


def torch_ref(m, ids, n_decode):
    x = torch.tensor([ids])
    with torch.no_grad():
        h = m.backbone(x)
        out = {"prefill": m.logits(h)[0].numpy(), "hidden": h[0].numpy(),
               "mtp": m.logits(m.mtp_rows(h, x))[0].numpy()}
        seq, fed, dec = list(ids), [], []
        nxt = int(out["prefill"][-1].argmax())
        for _ in range(n_decode):
            fed.append(nxt)
            seq.append(nxt)
            row = m.logits(m.backbone(torch.tensor([seq])))[0, -1]
            dec.append(row.numpy())
            nxt = int(row.argmax())
    out["decode"] = np.stack(dec) if dec else np.zeros((0, out["prefill"].shape[1]))
    out["greedy"] = np.array(fed, dtype=np.int64)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nextn", default="", help="nextn binary for the debug-logits comparison")
    ap.add_argument("--out", default="/tmp/q35check")
    ap.add_argument("--full-size", action="store_true", help="the shipped shape instead of a small one")
    args = ap.parse_args()
    torch.set_num_threads(2)
    check_delta_rule()

    if args.full_size:
        cfg = Q.Config()
    else:  # every branch of the shipped shape, smaller: Hv = 2 Hk, dk != dv, 2 attention layers
        cfg = Q.Config(vocab_size=8192, hidden_size=96, intermediate_size=160, num_hidden_layers=8,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                       linear_value_head_dim=24)
    m = random_model(cfg, 1)
    tok_dir = os.path.join(HERE, "..", "..", "models", "nextn-tiny")
    train.export(m, cfg, tok_dir, args.out, hf_config=Q.hf_config(cfg, cfg.vocab_size - 5))
    m = Q.load_exported(args.out)  # the BF16-rounded weights, float32 math
    rng = np.random.default_rng(3)
    ids = rng.integers(0, cfg.vocab_size - 5, size=70).tolist()  # > one 64-token chunk
    ref = torch_ref(m, ids, 6)
    m.set_chunked(False)
    rec = torch_ref(m, ids, 0)
    m.set_chunked(True)
    scale = np.abs(ref["prefill"]).max()
    report("torch chunked vs recurrent prefill logits", np.abs(ref["prefill"] - rec["prefill"]).max(),
           1e-4 * scale)

    import numpy_qwen3_5 as NQ
    nq = NQ.Model(args.out)
    logits, hidden = nq.step(ids, nq.new_state())
    report("torch vs numpy float64 prefill logits", np.abs(ref["prefill"] - logits).max(), 1e-4 * scale)
    report("torch vs numpy hidden", np.abs(ref["hidden"] - hidden).max(), 1e-4 * np.abs(hidden).max())
    mtp = nq.mtp_logits(ids, hidden)
    report("torch vs numpy MTP logits", np.abs(ref["mtp"] - mtp).max(), 1e-4 * np.abs(mtp).max())
    print(f"logit scale {scale:.2f}; argmax equal on {np.mean(ref['prefill'].argmax(1) == logits.argmax(1)):.3f} of rows")

    if args.nextn:
        prefix = os.path.join(args.out, "nextn")
        r = subprocess.run([args.nextn, "debug-logits", "--model", args.out, "--prompt-tokens",
                            ",".join(map(str, ids)), "--decode", str(len(ref["greedy"])), "--mtp",
                            "--out", prefix], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr[-3000:])
            FAILED.append("nextn debug-logits")
        else:
            for k in ("prefill", "hidden", "mtp", "decode"):
                got = np.load(f"{prefix}.{k}.npy").astype(np.float64)
                report(f"nextn vs torch {k}", np.abs(got - ref[k]).max(), 1e-3 * np.abs(ref[k]).max())
            toks = np.load(f"{prefix}.tokens.npy").tolist()
            ok = toks == ref["greedy"].tolist()
            print(f"{'ok  ' if ok else 'FAIL'} nextn greedy tokens {toks} vs torch {ref['greedy'].tolist()}")
            if not ok:
                FAILED.append("nextn greedy")
    print("FAILED: " + ", ".join(FAILED) if FAILED else "all checks passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
