#!/usr/bin/env bash
# Sets up, builds and runs every test, in four timed parts:
#   1. the release build and every CTest test (GoogleTest, numpy/Jinja2/npm references,
#      real HTTP clients);
#   2. the numerics tests again under every other SIMD target this machine offers
#      (NEXTN_SIMD=AVX2, SSE4, SCALAR, ...), so results do not hinge on the CI CPU;
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build (clang, build-sanitize/):
#      the GoogleTest binaries and the server's HTTP tests;
#   4. each libFuzzer target of tests/fuzz/ for FUZZ_SECONDS (default 60) in that build.
# The tests run one process at a time, so the sanitizer build compiles on the other core
# during parts 1 and 2 (niced), and the fuzzers run beside part 3, two at a time (a fuzzer
# runs for its seconds however much of a core it gets).
# The last line sums up the parts: "tests: N passed, M failed".
#   scripts/test.sh              all four parts
#   scripts/test.sh -R server    part 1 only, with these CTest arguments
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests || exit 1
BUILD_DIR=${BUILD_DIR:-build}
SAN_DIR=${SANITIZE_BUILD_DIR:-build-sanitize}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
passed=0; failed=0; report=()

part() {  # part NAME COMMAND...: runs, times and counts one part
  local name=$1; shift
  local start=$SECONDS
  echo "=== $name"
  if "$@"; then passed=$((passed + 1)); report+=("$name: passed in $((SECONDS - start)) s")
  else failed=$((failed + 1)); report+=("$name: FAILED after $((SECONDS - start)) s"); fi
}

scripts/build.sh || exit 1
if (( $# )); then
  cd "$BUILD_DIR" && exec ctest --output-on-failure -j1 --timeout 1500 "$@"
fi

# 3 and 4. One sanitizer build serves both; it starts now, on one core, at low priority.
if [[ ! -f $SAN_DIR/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTN_SANITIZE=ON \
    >/dev/null || exit 1
fi
setsid nice -n 10 cmake --build "$SAN_DIR" -j1 >"$SAN_DIR/background-build.log" 2>&1 &
san_pid=$!
trap 'kill -TERM -- "-$san_pid" 2>/dev/null' EXIT  # an interrupted run leaves no compiler behind

part "all tests (release build)" bash -c "cd '$BUILD_DIR' && ctest --output-on-failure -j1 --timeout 1500"

# 2. The tests whose results depend on floating-point code paths, on each other target.
numerics='^(kernels\.gtest|kv\.|state\.|model\.gtest|model\.test_reference$|model\.test_qwen3_5_reference$|model\.test_gemma4_reference$|model\.test_gemma4_assistant$|model\.test_qwen3_5_moe_reference$|model\.test_glm4_moe_reference$|model\.test_gguf_moe$|model\.test_gguf_qwen35$|model\.test_gguf_qwen35_moe$|model\.test_gguf_gemma4$|model\.test_checkpoint_forms$|engine\.gtest|speculative\.gtest)'
best=$("$BUILD_DIR/nextn" perf --simd-targets | head -1)
for target in $("$BUILD_DIR/nextn" perf --simd-targets); do
  [[ $target == "$best" ]] && continue
  # Distribution.* is statistics over sampled tokens, not arithmetic: part 1 runs it once.
  part "numerics on $target" bash -c \
    "cd '$BUILD_DIR' && NEXTN_SIMD=$target GTEST_FILTER='-Distribution.*' ctest --output-on-failure -j1 --timeout 1500 -R '$numerics'"
done

# The rest of the sanitizer build on every core: the background one stops (ninja keeps
# what it finished) and the build resumes.
sanitize_build() {
  kill -TERM -- "-$san_pid" 2>/dev/null
  wait "$san_pid" 2>/dev/null
  cmake --build "$SAN_DIR" -j"$(nproc)"
}
part "sanitizer build (ASan + UBSan, clang)" sanitize_build
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The fuzzers, two at a time, beside part 3's tests (one process at a time).
tests/fuzz/run.sh "$SAN_DIR" "$FUZZ_SECONDS" 2 >"$SAN_DIR/fuzz.log" 2>&1 &
fuzz_pid=$!
# The statistical tests (Distribution.*: 100,000 sampled tokens per drafter) take many
# minutes under the sanitizers and exercise no code the greedy tests do not; parts 1
# and 2 run them.
part "sanitizers: GoogleTest and server HTTP tests" bash -c \
  "cd '$SAN_DIR' && GTEST_FILTER='-Distribution.*' ctest --output-on-failure -j1 --timeout 1500 -R '(\.gtest$|^server\.)'"
fuzz_result() { wait "$fuzz_pid"; local rc=$?; cat "$SAN_DIR/fuzz.log"; return $rc; }
part "fuzzing (${FUZZ_SECONDS} s per target, beside part 3)" fuzz_result

echo
printf '%s\n' "${report[@]}"
echo "tests: $passed passed, $failed failed"
(( failed == 0 ))
