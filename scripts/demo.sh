#!/usr/bin/env bash
# Sets up, builds and runs the main job on the embedded default model (models/nextn-tiny-chat,
# a Qwen3.5 hybrid with an MTP head): one chat exchange decoded with MTP speculative decoding,
# with timing and the draft acceptance per position.
#   scripts/demo.sh ["question" [max tokens]]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh nextn
question=${1:-What does the ls command do?}
echo "user: $question"
echo "assistant:"
exec "${BUILD_DIR:-build}"/nextn generate --mtp --chat "$question" -n "${2:-128}"
