#!/usr/bin/env bash
# reproduce.sh — rebuilds models/nextn-tiny from scratch: Debian packages, corpus, tokenizer,
# pre-tokenized data, training (backbone + MTP head), export, evaluation, model card, and
# the test references in tests/train/data.
#
#   tools/train/reproduce.sh [--chat] [--device cpu|cuda] [--minutes M | --steps N] [--seed S]
#                            [--out DIR] [--work DIR] [--resume] [--skip-setup] [--then-minutes M2]
#                            [--then-steps N2] [--distill-minutes M3 | --distill-steps N3]
#                            [--distill-self K] [-- TRAIN_ARGS...]
#
# --chat rebuilds models/nextn-tiny-chat instead: the Qwen3.5 hybrid with an MTP head,
# warm-started from models/nextn-tiny and tuned on the chat set (chat_data.py), measured
# through `nextn serve` when $NEXTN (default build/nextn) exists, with its test references
# in tests/train/data_chat. Defaults there: --minutes 75 on cpu, 10 on cuda. --then-minutes M2
# adds a second stage: M2 more minutes from the first stage's export at a third of the peak
# learning rate, with its own warmup and cosine; --distill-minutes M3 then trains only the MTP
# head for M3 minutes towards the backbone's own predictions (train_chat.py --distill-mtp), which
# raises its acceptance without touching the target; with --distill-self K it distils on the
# model's own T = 0 answers to K training questions (chat_self.py, through $NEXTN) instead of
# the reference answers, the text it drafts on when it runs. --then-steps / --distill-steps
# give those stages a step count instead of minutes. The shipped model's card names the
# command that made it.
#
# Defaults: --device cuda when PyTorch sees a GPU else cpu; --minutes 7 on cuda, 75 on cpu;
# --seed 1; --out models/nextn-tiny; --work tools/train/work (git-ignored).
# Debian's python3-torch is CPU-only: for --device cuda run it with a CUDA PyTorch, e.g.
#   PY=python3 tools/train/reproduce.sh --device cuda --minutes 7     (the shipped run)
#   tools/train/reproduce.sh --device cpu --minutes 75                (2-core CPU, checkpoints)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-/usr/bin/python3}
device="" minutes="" steps="" seed=1 out="" work=tools/train/work resume=0 setup=1 chat=0 then_minutes=0 then_steps=0 distill_minutes=0 distill_steps=0 distill_self=0
extra=()
while (( $# )); do
  case "$1" in
    --) shift; extra=("$@"); break ;;
    --chat) chat=1; shift ;;
    --device) device=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --resume) resume=1; shift ;;
    --skip-setup) setup=0; shift ;;
    --then-minutes) then_minutes=$2; shift 2 ;;
    --distill-minutes) distill_minutes=$2; shift 2 ;;
    --then-steps) then_steps=$2; shift 2 ;;
    --distill-steps) distill_steps=$2; shift 2 ;;
    --distill-self) distill_self=$2; shift 2 ;;
    *) echo "reproduce.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if (( setup )); then scripts/setup.sh --train; fi
if [[ -z $device ]]; then
  device=$($PY -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
fi
if [[ -z $minutes ]]; then
  minutes=$([[ $device == cuda ]] && { (( chat )) && echo 10 || echo 7; } || echo 75)
fi
hw=$($PY -c 'import torch,platform,os
d="'"$device"'"
print((torch.cuda.get_device_name(0) if d=="cuda" else f"{os.cpu_count()} CPU cores ({platform.machine()})")
      + f", torch {torch.__version__}, bf16 autocast")')

if (( chat )); then
  out=${out:-models/nextn-tiny-chat}
  NEXTN=${NEXTN:-build/nextn}
  chat_args=(--device "$device" --seed "$seed" --minutes "$minutes")
  [[ -n $steps ]] && chat_args+=(--steps "$steps")
  if [[ $device == cpu ]]; then
    # OMP_WAIT_POLICY=PASSIVE: on shared cores OpenMP's spinning threads made each step ~8x
    # slower (measured: 7.8 CPU-s vs 1.0 per 512 tokens at load 7.4 with 2 threads)
    export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 MALLOC_TOP_PAD_=1000000000 OMP_WAIT_POLICY=PASSIVE
    chat_args+=(--threads "$(nproc)" --ckpt-minutes 5 --batch 8)
  else
    chat_args+=(--batch 64)
  fi
  (( resume )) && chat_args+=(--resume)
  chat_args+=("${extra[@]}")
  echo "== chat data"
  $PY tools/train/chat_data.py --tokenizer models/nextn-tiny --work "$work"
  run="$work/run_chat"
  if (( ! resume )); then rm -rf "$run"; fi
  echo "== chat training: ${chat_args[*]}"
  PYTHONUNBUFFERED=1 $PY tools/train/train_chat.py --chat "$work/chat" --init models/nextn-tiny \
    --tokenizer models/nextn-tiny --out "$run" "${chat_args[@]}"
  # Later stages start from the previous stage's export; their own arguments come after the
  # first stage's, so they override them.
  earlier=()
  next_stage() {  # NAME ARGS...: one more stage from $run
    local name=$1; shift
    local next="$work/run_chat_$name"
    if (( ! resume )); then rm -rf "$next"; fi
    echo "== chat training, stage $name: $*"
    PYTHONUNBUFFERED=1 $PY tools/train/train_chat.py --chat "$work/chat" --continue-from "$run" \
      --tokenizer models/nextn-tiny --out "$next" "${chat_args[@]}" "$@"
    earlier+=("$run")
    run=$next
  }
  # A stage's length: --steps N when given, else --minutes M ("" when neither: no stage).
  length() { if [[ $2 != 0 ]]; then echo "--steps $2"; elif [[ $1 != 0 ]]; then echo "--minutes $1"; fi; }
  then_len=$(length "$then_minutes" "$then_steps") distill_len=$(length "$distill_minutes" "$distill_steps")
  if [[ -n $then_len ]]; then
    # shellcheck disable=SC2086  # two words: the option and its value
    next_stage more $then_len --seed $((seed + 1)) --lr 3e-4 --warmup 20
  fi
  if [[ -n $distill_len ]]; then
    distill_data=()
    if (( distill_self )); then
      [[ -x $NEXTN ]] || { echo "reproduce.sh: --distill-self needs $NEXTN (build nextn first)" >&2; exit 2; }
      echo "== the model's own answers to $distill_self training questions"
      $PY tools/train/chat_self.py --nextn "$NEXTN" --model "$run" --chat "$work/chat" --out "$work/chat_self" \
        --count "$distill_self" --seed "$seed" --threads "$(nproc)"
      distill_data=(--chat "$work/chat_self")
    fi
    # shellcheck disable=SC2086
    next_stage distill $distill_len --seed $((seed + 2)) --lr "$([[ $distill_self != 0 ]] && echo 1e-3 || echo 5e-4)" \
      --warmup 20 --distill-mtp "${distill_data[@]}"
  fi
  evals=()
  if [[ -x $NEXTN ]]; then
    echo "== measured by nextn ($NEXTN)"
    $PY tools/train/chat_eval.py --nextn "$NEXTN" --model "$run" --questions "$work/chat/val_questions.jsonl" \
      --out "$run/nextn_eval.json"
    $PY tools/train/chat_eval.py --nextn "$NEXTN" --model models/nextn-tiny --what answers \
      --questions "$work/chat/val_questions.jsonl" --out "$run/nextn_eval_mimo.json"
    evals=(--nextn-eval "$run/nextn_eval.json" --baseline-eval "$run/nextn_eval_mimo.json")
  fi
  echo "== export to $out"
  $PY tools/train/chat_finalize.py --run "$run" --earlier "${earlier[@]}" --chat "$work/chat" --out "$out" "${evals[@]}" \
    --hardware "$hw" --machine "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" \
    --command "tools/train/reproduce.sh --chat --device $device --minutes $minutes${then_len:+ --then-${then_len#--}}${distill_len:+ --distill-${distill_len#--}}$( (( distill_self )) && echo " --distill-self $distill_self")"
  if [[ $out == models/nextn-tiny-chat ]]; then
    $PY tools/train/make_reference.py --chat --model "$out" --out tests/train/data_chat
  fi
  echo "done: $out"
  exit 0
fi
out=${out:-models/nextn-tiny}

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
echo "== export to $out"
$PY tools/train/finalize.py --run "$run" --work "$work" --out "$out" --hardware "$hw" \
  --command "train.py ${train_args[*]} (via tools/train/reproduce.sh)"
if [[ $out == models/nextn-tiny ]]; then
  echo "== test references"
  $PY tools/train/make_reference.py --model "$out" --work "$work" --out tests/train/data
fi
echo "done: $out"
