#!/usr/bin/env bash
# SET NX PX throughput and bytes per lock of one redlockd cluster of 1, 2 and 3 nodes
# (cluster mode map, one process per node, each pinned to a core, one worker thread),
# driven by redis-benchmark --cluster.
#
#   benches/cluster.sh [path-to-redlockd]    (default: target/release/redlockd)
#   NODES="1 2 3" REQUESTS=400000 CLIENTS=50 PIPELINE=16 benches/cluster.sh
#
# Prints, per cluster size: requests/s, and bytes of RSS per lock after REQUESTS
# random-key grants (RSS after minus RSS before, summed over the nodes, divided by the
# keys the nodes hold). Every process started here is stopped on exit, by its pid.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-$ROOT/target/release/redlockd}"
[[ -x "$BIN" ]] || { echo "cluster.sh: no binary at $BIN (cargo build --release)" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "skipped: redis-benchmark not on PATH" >&2; exit 0; }
SIZES="${NODES:-1 2 3}"
REQUESTS="${REQUESTS:-400000}"
CLIENTS="${CLIENTS:-50}"
PIPELINE="${PIPELINE:-16}"
BASE="${BASE_PORT:-23100}"
CPUS="$(nproc)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/redlockd-cluster-bench.XXXXXX")"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

printf '%-6s %14s %14s %10s\n' nodes 'SET NX PX/s' 'bytes/lock' keys
for m in $SIZES; do
  PIDS=()
  ports=()
  for ((i = 0; i < m; i++)); do
    port=$((BASE + i))
    ports+=("$port")
    id="$(printf '%040x' $((i + 1)))"
    taskset -c $((i % CPUS)) "$BIN" --port "$port" --cluster-mode map --cluster-node-id "$id" \
      --threads 1 --max-ttl 60s --restart-delay 0 --dir "$WORK/n$m-$i" --log warn \
      >"$WORK/n$m-$i.log" 2>&1 &
    PIDS+=("$!")
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  done
  nodes=""
  for ((i = 0; i < m; i++)); do
    first=$((16384 * i / m)); last=$((16384 * (i + 1) / m - 1))
    nodes+="${nodes:+,}{\"id\":\"$(printf '%040x' $((i + 1)))\",\"host\":\"127.0.0.1\",\"port\":${ports[$i]},\"slots\":[[$first,$last]]}"
  done
  map="{\"version\":1,\"nodes\":[$nodes]}"
  for port in "${ports[@]}"; do
    [[ "$(redis-cli -p "$port" cluster setmap "$map")" == OK ]] || { echo "setmap failed on $port" >&2; exit 1; }
  done
  before=0
  for p in "${PIDS[@]}"; do before=$((before + $(rss_kb "$p"))); done
  # redis-benchmark --cluster wants at least 2 masters; one node is benchmarked plainly
  # (its keys' literal {tag} lands in one slot, which it serves).
  cluster=(--cluster)
  [[ $m -eq 1 ]] && cluster=()
  out="$(redis-benchmark "${cluster[@]}" -p "${ports[0]}" -c "$CLIENTS" -P "$PIPELINE" -n "$REQUESTS" \
    -r 100000000 -q SET 'lock:{tag}:__rand_int__' 0123456789abcdefghijkl NX PX 60000 2>&1 || true)"
  rps="$(echo "$out" | tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)"
  after=0
  keys=0
  for ((i = 0; i < m; i++)); do
    after=$((after + $(rss_kb "${PIDS[$i]}")))
    keys=$((keys + $(redis-cli -p "${ports[$i]}" dbsize)))
  done
  printf '%-6s %14s %14s %10s\n' "$m" "${rps:-?}" "$(( (after - before) * 1024 / (keys > 0 ? keys : 1) ))" "$keys"
  for p in "${PIDS[@]}"; do kill "$p"; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
done
