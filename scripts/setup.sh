#!/usr/bin/env bash
# Installs what nextn needs from Debian (and npm for test references).
# Idempotent and fast when everything is present.
#   scripts/setup.sh            build + run dependencies
#   scripts/setup.sh --tests    also the test references (numpy, jinja2, npm packages, Chromium, Firefox)
#   scripts/setup.sh --train    also the training pipeline (torch, regex, corpora)
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0; want_train=0
for arg in "$@"; do
  case "$arg" in
    --tests) want_tests=1 ;;
    --train) want_train=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

pkgs=(build-essential cmake ninja-build pkg-config
      nlohmann-json3-dev libcli11-dev libfmt-dev libhwy-dev libpcre2-dev libcpp-httplib-dev
      libicu-dev
      libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev
      libgtest-dev)
if [[ $want_tests == 1 ]]; then
  pkgs+=(python3 python3-numpy python3-jinja2 curl)
  # The image processor test checks its bicubic reference against Pillow's resize.
  pkgs+=(python3-pil)
  # Structured output: an independent JSON Schema validator (tests/grammar/test_schema_outputs.py).
  pkgs+=(python3-jsonschema)
  # The cluster tests (tests/cluster): replicas behind Debian's HAProxy, and the Kubernetes
  # manifests parsed with PyYAML (scripts/cluster.sh needs haproxy too).
  pkgs+=(haproxy python3-yaml)
  # The chat page's browser tests (tests/server/webui_browser.test.mjs, puppeteer-core:
  # Chromium over the DevTools protocol, Firefox over WebDriver BiDi).
  pkgs+=(chromium firefox-esr)
  # The sanitizer build and the libFuzzer targets (scripts/test.sh parts 3 and 4).
  pkgs+=(clang libclang-rt-14-dev)
  # Node.js may come from Debian (nodejs + npm) or from a vendor package that
  # bundles npm: only install Debian's when the commands are missing.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then pkgs+=(nodejs npm); fi
fi
if [[ $want_train == 1 ]]; then
  # tools/train: PyTorch (CPU), regex (\p{L} classes); the corpus: KJV, Jargon File, Devil's
  # Dictionary, Python and Linux docs (prose); Python stdlib, libstdc++/glibc/UAPI headers (code)
  pkgs+=(python3-torch python3-numpy python3-regex libopenblas0-openmp
         bible-kjv bible-kjv-text python3.11-doc linux-doc-6.1 dict-jargon dict-devil
         libpython3.11-stdlib libstdc++-12-dev libc6-dev linux-libc-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ $want_tests == 1 ]]; then
  # Test references from npm, pinned in tests/package.json (lock file committed).
  if [[ ! -d tests/node_modules ]] || [[ tests/package-lock.json -nt tests/node_modules ]]; then
    (cd tests && npm ci --no-audit --no-fund --loglevel=error)
    touch tests/node_modules
  fi
  /usr/bin/python3 -c "import numpy, jinja2" || { echo "setup: python3 numpy/jinja2 missing" >&2; exit 1; }
fi
