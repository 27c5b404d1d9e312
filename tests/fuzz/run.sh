#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR SECONDS [JOBS] — runs every libFuzzer target built in
# BUILD_DIR for SECONDS each, from the seeds of tests/fuzz/seeds.py, JOBS targets at a
# time (default: the number of CPUs; each target is one process on one core). A crash,
# leak, sanitizer report or timeout fails the run; the input that caused it is kept in
# BUILD_DIR/fuzz/artifacts/ and printed (hex) so that it can be replayed:
#   BUILD_DIR/tests/fuzz/TARGET_fuzz BUILD_DIR/fuzz/artifacts/TARGET-crash-...
set -uo pipefail
build=$(cd "$1" && pwd); seconds=$2; jobs=${3:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
work=$build/fuzz; mkdir -p "$work/artifacts"
rm -rf "$work/seeds"; /usr/bin/python3 "$here/seeds.py" "$work/seeds"

fuzz_one() {  # fuzz_one NAME: runs one target, then prints its summary (or its failure)
  local name=$1 bin=$build/tests/fuzz/$1_fuzz corpus=$work/corpus/$1
  mkdir -p "$corpus"
  if "$bin" "$corpus" "$work/seeds/$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/$name-" \
       >"$work/$name.log" 2>&1; then
    echo "fuzz: $name passed: $(grep -E "stat::number_of_executed_units" "$work/$name.log" | tail -1)"
    return 0
  fi
  echo "fuzz: $name FAILED"; tail -40 "$work/$name.log"
  local a
  for a in "$work/artifacts/$name-"*; do [[ -f $a ]] && { echo "input $a:"; od -A x -t x1z "$a" | head -20; }; done
  return 1
}

passed=0; failed=0; running=0
count() { if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi; }
for bin in "$build"/tests/fuzz/*_fuzz; do
  name=$(basename "$bin" _fuzz)
  if (( running >= jobs )); then count wait -n; running=$((running - 1)); fi
  echo "fuzz: $name for ${seconds}s"
  fuzz_one "$name" & running=$((running + 1))
done
while (( running > 0 )); do count wait -n; running=$((running - 1)); done
echo "fuzz: $passed passed, $failed failed"
(( failed == 0 && passed > 0 ))
