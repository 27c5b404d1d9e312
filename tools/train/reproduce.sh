#!/usr/bin/env bash
# reproduce.sh — rebuilds models/nextn-tiny from scratch: Debian packages, corpus, tokenizer,
# pre-tokenized data, training (backbone + MTP head), export, evaluation, model card, and
# the test references in tests/train/data.
#
#   tools/train/reproduce.sh [--device cpu|cuda] [--minutes M | --steps N] [--seed S]
#                            [--out DIR] [--work DIR] [--resume] [--skip-setup] [-- TRAIN_ARGS...]
#
# Defaults: --device cuda when PyTorch sees a GPU else cpu; --minutes 7 on cuda, 75 on cpu;
# --seed 1; --out models/nextn-tiny; --work tools/train/work (git-ignored).
# Debian's python3-torch is CPU-only: for --device cuda run it with a CUDA PyTorch, e.g.
#   PY=python3 tools/train/reproduce.sh --device cuda --minutes 7     (the shipped run)
#   tools/train/reproduce.sh --device cpu --minutes 75                (2-core CPU, checkpoints)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-/usr/bin/python3}
device="" minutes="" steps="" seed=1 out=models/nextn-tiny work=tools/train/work resume=0 setup=1
extra=()
while (( $# )); do
  case "$1" in
    --) shift; extra=("$@"); break ;;
    --device) device=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --resume) resume=1; shift ;;
    --skip-setup) setup=0; shift ;;
    *) echo "reproduce.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if (( setup )); then scripts/setup.sh --train; fi
if [[ -z $device ]]; then
  device=$($PY -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
fi
if [[ -z $minutes ]]; then minutes=$([[ $device == cuda ]] && echo 7 || echo 75); fi

train_args=(--device "$device" --seed "$seed" --minutes "$minutes")
[[ -n $steps ]] && train_args+=(--steps "$steps")
if [[ $device == cpu ]]; then
  # glibc settings that avoid fresh-page faults (3.5x faster on small VMs), all cores,
  # a checkpoint every 10 minutes (--resume continues), a subset of validation windows.
  export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 MALLOC_TOP_PAD_=1000000000
  train_args+=(--threads "$(nproc)" --ckpt-minutes 10 --eval-windows 200 --gen-prompts 8 --val-every 250)
else
  train_args+=(--val-every 500 --compile no)
fi

train_args+=("${extra[@]}")

echo "== corpus"
$PY tools/train/corpus.py --work "$work"
echo "== tokenizer + pre-tokenized data"
$PY tools/train/prepare_data.py --work "$work"
run="$work/run"
if (( ! resume )); then rm -rf "$run"; fi
echo "== training: ${train_args[*]}"
PYTHONUNBUFFERED=1 $PY tools/train/train.py --data "$work" --out "$run" "${train_args[@]}"
$PY tools/train/check_reference.py --data "$work" --model "$run" | tee "$run/checks.txt"
hw=$($PY -c 'import torch,platform,os
d="'"$device"'"
print((torch.cuda.get_device_name(0) if d=="cuda" else f"{os.cpu_count()} CPU cores ({platform.machine()})")
      + f", torch {torch.__version__}, bf16 autocast")')
echo "== export to $out"
$PY tools/train/finalize.py --run "$run" --work "$work" --out "$out" --hardware "$hw" \
  --command "train.py ${train_args[*]} (via tools/train/reproduce.sh)"
if [[ $out == models/nextn-tiny ]]; then
  echo "== test references"
  $PY tools/train/make_reference.py --model "$out" --work "$work" --out tests/train/data
fi
echo "done: $out"
