#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR SECONDS — runs every libFuzzer target built in BUILD_DIR
# for SECONDS each, from the seeds of tests/fuzz/seeds.py. A crash, leak, sanitizer
# report or timeout fails the run; the input that caused it is kept in
# BUILD_DIR/fuzz/artifacts/ and printed (hex) so that it can be replayed:
#   BUILD_DIR/tests/fuzz/TARGET_fuzz BUILD_DIR/fuzz/artifacts/TARGET-crash-...
set -uo pipefail
build=$(cd "$1" && pwd); seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$build/fuzz; mkdir -p "$work/artifacts"
rm -rf "$work/seeds"; /usr/bin/python3 "$here/seeds.py" "$work/seeds"
passed=0; failed=0
for bin in "$build"/tests/fuzz/*_fuzz; do
  name=$(basename "$bin" _fuzz)
  corpus=$work/corpus/$name; mkdir -p "$corpus"
  echo "fuzz: $name for ${seconds}s"
  if "$bin" "$corpus" "$work/seeds/$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/$name-" \
       >"$work/$name.log" 2>&1; then
    passed=$((passed + 1)); grep -E "stat::number_of_executed_units|cov:" "$work/$name.log" | tail -2
  else
    failed=$((failed + 1)); tail -40 "$work/$name.log"
    for a in "$work/artifacts/$name-"*; do [[ -f $a ]] && { echo "input $a:"; od -A x -t x1z "$a" | head -20; }; done
  fi
done
echo "fuzz: $passed passed, $failed failed"
(( failed == 0 ))
