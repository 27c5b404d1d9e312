#!/usr/bin/env bash
# Sets up, builds and runs the main job on the embedded default model (models/nextn-tiny-chat,
# a Qwen3.5 hybrid with an MTP head): one chat exchange decoded with MTP speculative decoding
# (the depth chosen per step from measured costs), with timing, the draft acceptance per
# position, and the speed of the same answer decoded without drafting on the same engine
# (three alternating runs each, the fastest of each reported).
#   scripts/demo.sh ["question" [max tokens]]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh nextn
question=${1:-What does the ls command do?}
echo "user: $question"
echo "assistant:"
exec "${BUILD_DIR:-build}"/nextn generate --mtp --chat "$question" -n "${2:-128}" --compare-plain --repeat 3
