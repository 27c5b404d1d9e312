#!/usr/bin/env bash
# Assembles the benchmark prompt texts shipped in data/bench/ from public-domain
# text in Debian packages:
#   prose.txt  The Devil's Dictionary (Ambrose Bierce, dict-devil) followed by the
#              King James Version of the Bible (bible-kjv-text), verse numbers removed
#   code.txt   SQLite's public-domain C API header and its extension header (libsqlite3-dev)
# Run once by a maintainer; the outputs are committed.
set -euo pipefail
cd "$(dirname "$0")/.."
need=(dict-devil bible-kjv bible-kjv-text libsqlite3-dev)
missing=()
for p in "${need[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if (( ${#missing[@]} )); then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; fi
out=data/bench
mkdir -p "$out"
tmp=$(mktemp -d)
# dictd data: start at the book's preface, skipping dictd's own header entries.
zcat /usr/share/dictd/devil.dict.dz | sed -n '/^ *PREFACE$/,$p' > "$tmp/devil.txt"
bible -f gen1:1-rev22:21 | sed -E 's/^[0-9A-Za-z]+[0-9]+:[0-9]+ //' > "$tmp/kjv.txt"
cat "$tmp/devil.txt" <(printf '\n\n') "$tmp/kjv.txt" > "$tmp/prose.txt"
cat /usr/include/sqlite3.h /usr/include/sqlite3ext.h > "$tmp/code.txt"
head -c 640000 "$tmp/prose.txt" > "$out/prose.txt"
head -c 640000 "$tmp/code.txt" > "$out/code.txt"
rm -rf "$tmp"
wc -c "$out"/*.txt
