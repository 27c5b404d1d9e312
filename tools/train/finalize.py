"""finalize.py — turns a training output directory into the shipped model directory.

Merges a sharded export into one BF16 model.safetensors, copies config.json,
generation_config.json and the tokenizer files, keeps the training log and eval.json, and
writes the README model card from eval.json + the corpus statistics.

    /usr/bin/python3 tools/train/finalize.py --run RUN_DIR --work tools/train/work --out models/nextn-tiny
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_card  # noqa: E402
import st  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="train.py --out directory")
    ap.add_argument("--work", required=True, help="corpus work dir (sources.json, data_stats.json, tokenizer/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hardware", default="", help="hardware line for the card")
    ap.add_argument("--command", default="", help="command line that produced the run")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tensors = st.read_dir(args.run)
    for fn in os.listdir(args.out):
        if fn.startswith("model") and fn.endswith((".safetensors", ".index.json")):
            os.remove(os.path.join(args.out, fn))
    st.write(os.path.join(args.out, "model.safetensors"), tensors, {"format": "pt"})
    for fn in ("config.json", "generation_config.json"):
        shutil.copy(os.path.join(args.run, fn), os.path.join(args.out, fn))
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(args.run, fn)
        if not os.path.exists(src):
            src = os.path.join(args.work, "tokenizer", fn)
        shutil.copy(src, os.path.join(args.out, fn))
    os.makedirs(os.path.join(args.out, "training"), exist_ok=True)
    for fn in ("train_log.txt", "eval.json", "checks.txt"):
        if os.path.exists(os.path.join(args.run, fn)):
            shutil.copy(os.path.join(args.run, fn), os.path.join(args.out, "training", fn))
    for fn in ("sources.json", "data_stats.json"):
        shutil.copy(os.path.join(args.work, fn), os.path.join(args.out, "training", fn))
    with open(os.path.join(args.run, "eval.json")) as f:
        ev = json.load(f)
    with open(os.path.join(args.work, "sources.json")) as f:
        sources = json.load(f)
    with open(os.path.join(args.work, "data_stats.json")) as f:
        stats = json.load(f)
    with open(os.path.join(args.out, "config.json")) as f:
        config = json.load(f)
    checks = ""
    if os.path.exists(os.path.join(args.run, "checks.txt")):
        checks = open(os.path.join(args.run, "checks.txt")).read()
    log_path = os.path.join(args.run, "train_log.txt")
    train_log = open(log_path).read() if os.path.exists(log_path) else ""
    acc_path = os.path.join(args.out, "training", "nextn_acceptance.md")
    acc = open(acc_path).read() if os.path.exists(acc_path) else ""
    card = model_card.render(ev, sources, stats, config, args.hardware, args.command, checks, train_log, acc)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(card)
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(args.out) for fn in fns)
    print(f"{args.out}: {total/1e6:.2f} MB")


if __name__ == "__main__":
    main()
