#!/usr/bin/env bash
# gpu_run.sh — the single command used for the shipped model's GPU run (device tool):
# trains from tools/train/work/gpu (tokens + tokenizer prepared locally), writes the sharded
# export, logs and eval into $OUT/model, then cross-checks with HF libraries if present.
# Extra arguments are passed to train.py (e.g. --device cpu --minutes 0.2 for a dry run).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUTDIR="${OUT:-/tmp/nextn-gpu-out}/model"
mkdir -p "$OUTDIR"
PY=${PY:-python3}
nvidia-smi -L 2>/dev/null || true
$PY tools/train/train.py --data tools/train/work/gpu --out "$OUTDIR" --minutes 7 --seed 1 \
  --shard-mib 14.9 --no-export-tokenizer --val-every 500 --compile no "$@" || exit 1
$PY tools/train/check_reference.py --data tools/train/work/gpu --model "$OUTDIR" 2>&1 \
  | tee "$OUTDIR/checks.txt"
ls -la "$OUTDIR"
