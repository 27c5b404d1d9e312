#!/usr/bin/env bash
# scripts/cluster.sh — N `nextn serve` replicas behind HAProxy on one machine, for trying
# the cluster setup of docs/cluster.md (prefix affinity, health checks, draining).
#
#   scripts/cluster.sh N [-- SERVE_ARGS...]
#       N replicas of build/nextn serve (the embedded tiny model unless SERVE_ARGS name
#       --model), each pinned with taskset to its own core where the machine has enough
#       (replica i on core i mod nproc), each on a free port it picks itself; then HAProxy
#       in the foreground with deploy/haproxy.cfg's replica list replaced by these.
#       Ctrl-C or SIGTERM stops HAProxy and every replica (SIGTERM: they drain and exit).
#
#   Environment: PORT (balancer, default 8080), STATS_PORT (HAProxy's /metrics and /stats,
#   default 8404), NEXTN_BIN (default build/nextn), HAPROXY (default haproxy),
#   BALANCE=roundrobin (compare with plain round robin instead of prefix hashing),
#   PIN=0 (no taskset: e.g. one replica with --threads 2 using every core).
#
# The replicas' logs and the generated config are in a temporary folder printed at start
# and removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/cluster.sh N [-- SERVE_ARGS...]   (N: replicas, 1..64)" >&2; exit 2; }
(( $# >= 1 )) || usage
n=$1; shift
[[ $n =~ ^[0-9]+$ ]] && (( n >= 1 && n <= 64 )) || usage
if (( $# )); then
  [[ $1 == -- ]] || usage
  shift
fi
serve_args=("$@")

bin=${NEXTN_BIN:-build/nextn}
haproxy=${HAPROXY:-haproxy}
port=${PORT:-8080}
stats_port=${STATS_PORT:-8404}
[[ -x $bin ]] || { echo "cluster.sh: $bin not found: build it first (scripts/build.sh nextn)" >&2; exit 1; }
command -v "$haproxy" >/dev/null ||
  { echo "cluster.sh: haproxy not found: scripts/setup.sh --tests installs Debian's haproxy" >&2; exit 1; }

tmp=$(mktemp -d -t nextn-cluster.XXXXXX)
pids=()
cleanup() {
  trap - INT TERM EXIT
  # Replicas get SIGTERM so they finish what they are answering; HAProxy goes first so no
  # new work reaches them.
  [[ -n ${lb_pid:-} ]] && kill -TERM "$lb_pid" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One core each while there are cores to give; with more replicas than cores they share
# (pinning two busy replicas to one core would only make them take turns).
cores=$(nproc)
pin=()
if [[ ${PIN:-1} == 1 ]] && command -v taskset >/dev/null; then pin=(taskset -c); fi
# One thread each unless the replicas' arguments say otherwise (pinned to one core, more
# threads would only take turns).
threads=(--threads 1)
for a in "${serve_args[@]}"; do
  case "$a" in -t|--threads|--threads=*|-t*) threads=() ;; esac
done

echo "cluster: $n replica(s), logs in $tmp" >&2
for (( i = 0; i < n; i++ )); do
  cmd=("$bin" serve --port 0 "${threads[@]}" "${serve_args[@]}")
  if (( ${#pin[@]} )); then cmd=("${pin[@]}" "$(( i % cores ))" "${cmd[@]}"); fi
  "${cmd[@]}" >"$tmp/replica$((i + 1)).out" 2>"$tmp/replica$((i + 1)).log" &
  pids+=($!)
done

# Each replica prints one JSON line with the port it bound once its model is loaded.
ports=()
for (( i = 0; i < n; i++ )); do
  out="$tmp/replica$((i + 1)).out"
  for (( t = 0; t < 1200; t++ )); do
    grep -q '"port"' "$out" 2>/dev/null && break
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "cluster: replica $((i + 1)) exited:" >&2; tail -5 "$tmp/replica$((i + 1)).log" >&2; exit 1; }
    sleep 0.1
  done
  p=$(grep -o '"port":[0-9]*' "$out" | head -1 | cut -d: -f2)
  [[ -n $p ]] || { echo "cluster: replica $((i + 1)) not ready after 120 s" >&2; exit 1; }
  ports+=("$p")
  echo "cluster: replica$((i + 1)) pid ${pids[$i]} at http://127.0.0.1:$p$( (( ${#pin[@]} )) && echo " (core $(( i % cores )))")" >&2
done

# deploy/haproxy.cfg with this cluster's addresses: the replica block between the markers
# is replaced, the listening ports set, and the balance line swapped when asked.
cfg="$tmp/haproxy.cfg"
servers=""
for (( i = 0; i < n; i++ )); do servers+="    server replica$((i + 1)) 127.0.0.1:${ports[$i]}"$'\n'; done
awk -v servers="$servers" -v port="$port" -v stats="$stats_port" -v balance="${BALANCE:-}" '
  /# ---- replicas/ { print; printf "%s", servers; skip = 1; next }
  /# ---- end of replicas/ { skip = 0 }
  skip { next }
  /^    bind :8080$/ { print "    bind :" port; next }
  /^    bind 127.0.0.1:8404$/ { print "    bind 127.0.0.1:" stats; next }
  balance != "" && /^    balance hash / { print "    balance " balance; next }
  { print }' deploy/haproxy.cfg >"$cfg"
"$haproxy" -c -q -f "$cfg" || { echo "cluster: generated config $cfg is invalid" >&2; exit 1; }

echo "cluster: HAProxy at http://127.0.0.1:$port/v1 (stats http://127.0.0.1:$stats_port/stats, metrics /metrics); Ctrl-C stops all" >&2
"$haproxy" -db -f "$cfg" &
lb_pid=$!
wait "$lb_pid"
