#!/usr/bin/env bash
# tools/perf_weight_types.sh — `nextn perf` per weight type, side by side in one run:
# random BF16 weights at a preset shape, quantized by `nextn quantize`, then decode,
# prefill and verify cost for BF16, Q8_0, Q4_K_M and Q4_0 (2 threads by default).
#   tools/perf_weight_types.sh [PRESET (qwen3-0.6b|llama-3.2-1b)] [OUT_DIR] [extra nextn perf flags]
# Prints each `nextn perf` table with the load average before it (the machine may be shared).
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${1:-qwen3-0.6b}
OUT=${2:-/tmp/nextn-perf-$PRESET}
shift $(( $# > 2 ? 2 : $# )) || true
BIN=${NEXTN_BIN:-build/nextn}
ARCH=qwen3; EXTRA_GEN=()
if [[ $PRESET == llama-3.2-1b ]]; then ARCH=llama; EXTRA_GEN=(--rope-scaling none); fi  # GGUF llama3 rope: not yet
mkdir -p "$OUT"
[[ -f $OUT/bf16/config.json ]] || /usr/bin/python3 tools/make_checkpoint.py --arch "$ARCH" --preset "$PRESET" \
    --dtype bf16 "${EXTRA_GEN[@]}" --out "$OUT/bf16" --quiet
for t in q8_0 q4_k_m q4_0; do
  [[ -f $OUT/$t.gguf ]] || "$BIN" quantize "$OUT/bf16" --type $t --out "$OUT/$t.gguf" --no-progress
done
for m in "$OUT/bf16" "$OUT/q8_0.gguf" "$OUT/q4_k_m.gguf" "$OUT/q4_0.gguf"; do
  echo "== $m   (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$BIN" perf --model "$m" --threads "${THREADS:-2}" --repeats "${REPEATS:-3}" --bandwidth-mib 1024 "$@"
done
