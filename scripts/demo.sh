#!/usr/bin/env bash
# Sets up, builds and runs the main job on the embedded default model:
# a speculative (MTP) generation from a prompt, with timing and acceptance.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh nextn
exec "${BUILD_DIR:-build}"/nextn generate --mtp --prompt "${1:-And God said unto Moses,}" -n "${2:-96}"
