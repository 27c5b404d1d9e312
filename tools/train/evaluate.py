"""evaluate.py — validation metrics and greedy samples for a MiMoForCausalLM.

Metrics (teacher-forced, over non-overlapping windows of the held-out documents):
  loss_main  mean cross-entropy of the backbone predicting x_{t+1}
  loss_mtp   mean cross-entropy of MTP layer 0 predicting x_{p+2} from (h_p, x_{p+1})
  agreement  fraction of rows p where argmax(MTP row p) == argmax(backbone row p+1)
Greedy generation: the MTP head's one-token draft acceptance along greedy text
(draft for x_{p+2} from (h_p, x_{p+1}) equals the greedy token), over all generated positions and
over non-repeating ones (positions whose trigram ending at the drafted token is new in the text).

Standalone: /usr/bin/python3 tools/train/evaluate.py --model models/nextn-tiny --data tools/train/work
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def autocast(device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", dtype=torch.bfloat16)


@torch.no_grad()
def val_metrics(model, tokens, seq, device, max_windows=0, batch=32, use_autocast=True):
    n = (len(tokens) - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    sums = {"main": 0.0, "mtp": 0.0, "agree": 0, "main_n": 0, "mtp_n": 0, "main_acc": 0}
    for b0 in range(0, n, batch):
        idx = range(b0, min(n, b0 + batch))
        x = torch.stack([torch.from_numpy(tokens[i * seq:i * seq + seq + 1].astype(np.int64))
                         for i in idx]).to(device)
        inp = x[:, :-1]
        if use_autocast:
            with autocast(device):
                h, m = model(inp)
                lm = model.logits(h).float()
                lt = model.logits(m).float()
        else:
            h, m = model(inp)
            lm = model.logits(h).float()
            lt = model.logits(m).float()
        V = lm.shape[-1]
        sums["main"] += F.cross_entropy(lm.reshape(-1, V), x[:, 1:].reshape(-1), reduction="sum").item()
        sums["main_n"] += x[:, 1:].numel()
        sums["main_acc"] += (lm.argmax(-1) == x[:, 1:]).sum().item()
        sums["mtp"] += F.cross_entropy(lt.reshape(-1, V), x[:, 2:].reshape(-1), reduction="sum").item()
        sums["mtp_n"] += x[:, 2:].numel()
        sums["agree"] += (lt.argmax(-1) == lm[:, 1:].argmax(-1)).sum().item()
    return {"loss_main": sums["main"] / sums["main_n"], "loss_mtp": sums["mtp"] / sums["mtp_n"],
            "acc_main": sums["main_acc"] / sums["main_n"],
            "mtp_agreement": sums["agree"] / sums["mtp_n"], "tokens": sums["main_n"]}


@torch.no_grad()
def greedy(model, prompts, n_new, device):
    """prompts: list of equal-length id lists -> LongTensor [B, P + n_new] (full recompute)."""
    x = torch.tensor(prompts, dtype=torch.long, device=device)
    for _ in range(n_new):
        with autocast(device):
            h = model.backbone(x)
            nxt = model.logits(h[:, -1]).float().argmax(-1)
        x = torch.cat([x, nxt[:, None]], dim=1)
    return x


@torch.no_grad()
def draft_acceptance(model, seqs, n_prompt, device):
    """One-token MTP draft acceptance along greedy sequences (all / non-repeating positions)."""
    with autocast(device):
        h, m = model(seqs)
        draft = model.logits(m).float().argmax(-1)  # row p predicts x_{p+2}
    seqs_np = seqs.cpu().numpy()
    draft = draft.cpu().numpy()
    acc = tot = acc_nr = tot_nr = 0
    for b in range(seqs_np.shape[0]):
        s = seqs_np[b]
        seen = set()
        for t in range(2, len(s)):
            tri = (int(s[t - 2]), int(s[t - 1]), int(s[t]))
            repeating = tri in seen
            seen.add(tri)
            if t < n_prompt + 1:  # x_t is generated from t >= n_prompt; its draft needs x_{t-1} known
                continue
            ok = int(draft[b, t - 2] == s[t])
            acc += ok
            tot += 1
            if not repeating:
                acc_nr += ok
                tot_nr += 1
    return {"acceptance_all": acc / max(tot, 1), "positions_all": tot,
            "acceptance_nonrepeating": acc_nr / max(tot_nr, 1), "positions_nonrepeating": tot_nr}


def sample_prompts(tokens, eot, n, plen):
    """First plen tokens of the first n held-out documents long enough."""
    starts = [0] + [int(i) + 1 for i in np.nonzero(tokens == eot)[0][:-1]]
    out = []
    for s in starts:
        if s + plen < len(tokens) and not np.any(tokens[s:s + plen] == eot):
            out.append(tokens[s:s + plen].astype(np.int64).tolist())
        if len(out) == n:
            break
    return out


SAMPLE_PROMPTS = {
    "prose": "The king called his servants and said unto them,",
    "prose2": "The scheduler keeps a list of runnable tasks for each CPU. When a task",
    "code": "def read_config(path):\n    \"\"\"Read a configuration file and return a dict.\"\"\"\n",
    "code2": "#include <stddef.h>\n\nstruct list_head {\n",
}


def run_all(model, data_dir, encoder, seq, device, max_windows=0, n_gen_prompts=32, n_new=96,
            sample_tokens=80, log=print):
    res = {}
    for kind in ("prose", "code"):
        toks = np.load(os.path.join(data_dir, f"val_{kind}.npy"))
        res[f"val_{kind}"] = val_metrics(model, toks, seq, device, max_windows)
        log(f"eval {kind}: {res[f'val_{kind}']}")
        eot = encoder.added["<|endoftext|>"]
        if n_gen_prompts:
            prompts = sample_prompts(toks, eot, n_gen_prompts, 32)
            seqs = greedy(model, prompts, n_new, device)
            res[f"greedy_{kind}"] = draft_acceptance(model, seqs, 32, device)
            log(f"greedy draft acceptance {kind}: {res[f'greedy_{kind}']}")
    samples = {}
    for name, text in SAMPLE_PROMPTS.items():
        ids = encoder.encode(text)
        out = greedy(model, [ids], sample_tokens, device)[0].tolist()
        samples[name] = {"prompt": text, "completion": encoder.decode(out[len(ids):])}
        log(f"--- sample {name} ---\n{text}{samples[name]['completion']}")
    res["samples"] = samples
    return res


def load_exported(model_dir, device):
    import model as M
    import st
    with open(os.path.join(model_dir, "config.json")) as f:
        hc = json.load(f)
    cfg = M.Config(**{k: hc[k] for k in M.Config.__dataclass_fields__})
    m = M.MiMoForCausalLM(cfg)
    tensors = st.read_dir(model_dir)
    sd = {k: torch.from_numpy(st.to_numpy(v).copy()) for k, v in tensors.items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise SystemExit(f"load: missing {missing}, unexpected {unexpected}")
    return m.to(device).eval()


def main():
    import bpe
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-windows", type=int, default=64)
    ap.add_argument("--gen-prompts", type=int, default=8)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    device = torch.device(args.device)
    model = load_exported(args.model, device)
    enc = bpe.load(args.model)
    res = run_all(model, args.data, enc, args.seq, device, args.max_windows, args.gen_prompts)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2, ensure_ascii=False)


if __name__ == "__main__":
    main()
