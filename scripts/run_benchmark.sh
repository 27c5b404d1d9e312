#!/usr/bin/env bash
# nextn benchmark and regression suite (successor of SwiftLM's run_benchmark.sh).
# Interactive menu, or non-interactive:  SUITE_OPT=13 MODEL=models/nextn-tiny scripts/run_benchmark.sh
#   1   Context & memory profile: vanilla vs --turbo-kv across CONTEXTS
#   2   Prompt-cache regression: long -> short -> long -> identical long (last one a full cache hit)
#   9   Quantized-KV regression: kv_bits 4 and 8, short and long, plus baseline
#   13  MTP benchmark: `nextn bench` with mtp_bench's four configurations
#   13c The same model with CONCURRENCY (default 4) clients at once: vanilla and auto
#   14  Speculative-decoding equality: greedy output with and without each drafter must match
# Environment: MODEL (default: the embedded model), CONTEXTS (default 512,4096,16384),
# MAX_TOKENS (60), PORT (5431), NEXTN (binary, default build/nextn), OUT_DIR (bench-results).
set -uo pipefail
cd "$(dirname "$0")/.."

NEXTN=${NEXTN:-build/nextn}
MODEL=${MODEL:-models/nextn-tiny}
CONTEXTS=${CONTEXTS:-512,4096,16384}
MAX_TOKENS=${MAX_TOKENS:-60}
PORT=${PORT:-5431}
OUT_DIR=${OUT_DIR:-bench-results}
THREADS=${THREADS:-}
mkdir -p "$OUT_DIR"
[[ -x $NEXTN ]] || scripts/build.sh nextn >/dev/null || { echo "build failed"; exit 1; }
thread_flag=(); [[ -n $THREADS ]] && thread_flag=(--threads "$THREADS")

SERVER_PID=""
start_server() {  # start_server LOG FLAGS... ; waits for /health
  local log=$1; shift
  "$NEXTN" serve --model "$MODEL" --port "$PORT" "${thread_flag[@]}" "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "  server exited:"; tail -5 "$log"; SERVER_PID=""; return 1; fi
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0
    sleep 0.5
  done
  echo "  server not healthy"; return 1
}
stop_server() {  # by PID, never by name
  [[ -n $SERVER_PID ]] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""
}
trap stop_server EXIT

chat() {  # chat CONTENT MAX_TOKENS [EXTRA_JSON] -> response JSON on stdout
  local extra=${3:-}
  python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":sys.argv[1]}],"max_tokens":int(sys.argv[2]),"temperature":0, **(json.loads(sys.argv[3]) if sys.argv[3] else {})}))' \
    "$1" "$2" "$extra" |
    curl -s -m 1800 "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d @-
}
field() { python3 -c 'import json,sys
d=json.loads(sys.stdin.read() or "{}")
try:
  v=eval(sys.argv[1],{},{"d":d}); print(v if v is not None else "")
except Exception: print("")' "$1"; }
repeat_words() { python3 -c 'import sys; print((sys.argv[1]+" ")*int(sys.argv[2]))' "$1" "$2"; }

test_1() {
  echo "=== Test 1: context & memory profile (vanilla vs turbo-kv) ==="
  "$NEXTN" bench --model "$MODEL" --contexts "$CONTEXTS" --max-tokens "$MAX_TOKENS" --configs vanilla,turbo \
    --prompts prose --port "$PORT" "${thread_flag[@]}" --out "$OUT_DIR/profile.md" --json "$OUT_DIR/profile.json" \
    --svg "$OUT_DIR/profile.svg"
}

test_2() {
  echo "=== Test 2: prompt-cache regression ==="
  start_server "$OUT_DIR/test2_server.log" --ctx-size 16384 || return 1
  local long short pass=0 r
  long=$(repeat_words "The quick brown fox jumps over the lazy dog." 500)
  short="What is the capital of France?"
  local names=(long short long identical-long) prompts=("$long" "$short" "$long" "$long")
  for i in 0 1 2 3; do
    r=$(chat "${prompts[$i]}" 30)
    local content cache prompt_n
    content=$(field 'd["choices"][0]["message"]["content"]' <<<"$r")
    cache=$(field 'd["timings"]["cache_n"]' <<<"$r"); prompt_n=$(field 'd["usage"]["prompt_tokens"]' <<<"$r")
    if [[ -n $content ]]; then
      echo "  [$((i+1))/4] ${names[$i]}: OK (prompt $prompt_n tokens, cache_n $cache): ${content:0:60}"
      pass=$((pass+1))
    else
      echo "  [$((i+1))/4] ${names[$i]}: FAILED: ${r:0:200}"
    fi
    if [[ $i == 3 && -n $cache && -n $prompt_n ]] && (( cache < prompt_n - 1 )); then
      echo "  identical long prompt was not a full cache hit ($cache of $prompt_n)"; pass=$((pass-1))
    fi
  done
  stop_server
  [[ $pass == 4 ]] && echo "  ALL 4 PASSED" || { echo "  $pass/4 passed"; return 1; }
}

test_9() {
  echo "=== Test 9: quantized-KV regression (kv_bits) ==="
  start_server "$OUT_DIR/test9_server.log" --ctx-size 8192 || return 1
  local long; long=$(repeat_words "Tell me a story about a lighthouse keeper and the sea." 300)
  local labels=("kv_bits 4 short" "kv_bits 8 short" "kv_bits 4 long" "baseline")
  local contents=("Write a haiku about autumn." "Write a haiku about autumn." "$long" "Write a haiku about autumn.")
  local extras=('{"kv_bits":4}' '{"kv_bits":8}' '{"kv_bits":4}' '')
  local maxes=(40 40 120 40) pass=0
  for i in 0 1 2 3; do
    local t0 r content n
    t0=$(date +%s.%N)
    r=$(chat "${contents[$i]}" "${maxes[$i]}" "${extras[$i]}")
    content=$(field 'd["choices"][0]["message"]["content"]' <<<"$r"); n=$(field 'd["usage"]["completion_tokens"]' <<<"$r")
    local dt; dt=$(python3 -c "import time; print(f'{time.time()-$t0:.1f}')")
    if [[ ${#content} -gt 5 && ${n:-0} -ge 3 ]]; then
      echo "  [$((i+1))/4] ${labels[$i]} ✅ [${dt}s, $n tokens]: ${content:0:60}"; pass=$((pass+1))
    else
      echo "  [$((i+1))/4] ${labels[$i]} ❌ [${dt}s]: ${r:0:200}"
    fi
  done
  stop_server
  [[ $pass == 4 ]] && echo "  ALL 4 PASSED" || { echo "  $pass/4 passed"; return 1; }
}

test_13() {
  echo "=== Test 13: MTP benchmark (nextn bench, mtp_bench configurations) ==="
  "$NEXTN" bench --model "$MODEL" --contexts "$CONTEXTS" --max-tokens "$MAX_TOKENS" \
    --configs vanilla,mtp,turbo,mtp+turbo --num-mtp-tokens "${NUM_MTP_TOKENS:-4}" --port "$PORT" "${thread_flag[@]}" \
    --out "$OUT_DIR/mtp_bench.md" --json "$OUT_DIR/mtp_bench.json" --svg "$OUT_DIR/mtp_bench.svg"
}

test_13c() {
  echo "=== Test 13c: MTP benchmark with ${CONCURRENCY:-4} clients at once (nextn bench --concurrency) ==="
  "$NEXTN" bench --model "$MODEL" --contexts "$CONTEXTS" --max-tokens "$MAX_TOKENS" \
    --configs vanilla,auto --concurrency "${CONCURRENCY:-4}" --port "$PORT" "${thread_flag[@]}" \
    --out "$OUT_DIR/mtp_bench_concurrent.md" --json "$OUT_DIR/mtp_bench_concurrent.json" \
    --svg "$OUT_DIR/mtp_bench_concurrent.svg"
}

test_14() {
  echo "=== Test 14: speculative-decoding equality (greedy, with and without drafters) ==="
  local prompt="Write a short paragraph about rivers." fail=0 base out
  start_server "$OUT_DIR/test14_server.log" || return 1
  base=$(chat "$prompt" 64 | field 'd["choices"][0]["message"]["content"]'); stop_server
  for flags in "--mtp --num-mtp-tokens 1" "--mtp --num-mtp-tokens 3" "--mtp --num-mtp-tokens auto" "--spec-type ngram"; do
    # shellcheck disable=SC2086
    if ! start_server "$OUT_DIR/test14_server.log" $flags; then echo "  $flags: SKIPPED (server refused: see log)"; continue; fi
    out=$(chat "$prompt" 64 | field 'd["choices"][0]["message"]["content"]'); stop_server
    if [[ "$out" == "$base" && -n $out ]]; then echo "  $flags: identical ✅"; else echo "  $flags: DIFFERENT ❌"; fail=1; fi
  done
  return $fail
}

menu() {
  cat <<'MENU'
nextn benchmark suite
  1) Context & memory profile (vanilla vs turbo-kv)
  2) Prompt-cache regression
  9) Quantized-KV regression (kv_bits)
 13) MTP benchmark (nextn bench)
 13c) MTP benchmark, CONCURRENCY (default 4) clients at once: vanilla and auto, aggregate and per-client tok/s
 14) Speculative-decoding equality
MENU
  read -r -p "Select: " SUITE_OPT
}

[[ -n ${SUITE_OPT:-} ]] || menu
case "${SUITE_OPT}" in
  1) test_1 ;; 2) test_2 ;; 9) test_9 ;; 13) test_13 ;; 13c) test_13c ;; 14) test_14 ;;
  *) echo "unknown test '${SUITE_OPT}'"; exit 2 ;;
esac
