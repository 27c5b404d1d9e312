#!/usr/bin/env bash
# Sets up, builds and runs every test (GoogleTest, numpy/Jinja2/npm references,
# real HTTP clients). CTest prints the summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j1 --timeout 1500 "$@"
