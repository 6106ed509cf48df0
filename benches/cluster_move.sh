#!/usr/bin/env bash
# Live slot move: write pause and total move time for a slot holding N lock keys
# (docs/cluster.md, "Moving slots"). Two map-mode nodes on loopback; N keys
# `{b}lock:i` (slot 3300) set with SET NX PX 60000 on node A; then
# `redlockd slots move --slots 3300 --to B`, which prints the keys moved, the pause on
# A (its SETMAP, under the exclusive gate) and the whole step.
#
#   benches/cluster_move.sh [N...]       (default: 1000 100000)
#   REDLOCKD=target/release/redlockd benches/cluster_move.sh 1000
#
# CONTENDED=1: instead, lock cycles/s of one contended lock ("job", slot 2906, on A)
# taken by CLIENTS (8) redis-py RedisCluster processes for SECONDS (10), once without a
# move and once with `redlockd slots move` of its slot to B half-way
# (benches/cluster_move_contended.py; PYTHON defaults to tests/interop/.venv's).
set -uo pipefail
B=${REDLOCKD:-target/debug/redlockd}
PA=${PORT_A:-23661}
PB=${PORT_B:-23662}
idof() { printf '%040x' "$1"; }
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
pids=()
start_nodes() { # $1: dir; writes v1.json, starts A and B, waits for both
  echo "{\"version\":1,\"nodes\":[{\"id\":\"$(idof $PA)\",\"host\":\"127.0.0.1\",\"port\":$PA,\"slots\":[[0,8191]]},{\"id\":\"$(idof $PB)\",\"host\":\"127.0.0.1\",\"port\":$PB,\"slots\":[[8192,16383]]}]}" >"$1/v1.json"
  pids=()
  for p in $PA $PB; do
    $B init --dir "$1/$p" >/dev/null
    $B --port $p --dir "$1/$p" --cluster-mode map --cluster-node-id "$(idof $p)" \
      --max-ttl 120s --cluster-map "$1/v1.json" >"$1/$p.log" 2>&1 &
    pids+=($!)
  done
  for p in $PA $PB; do
    for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.05; done
  done
}
if [ -n "${CONTENDED:-}" ]; then
  PY=${PYTHON:-tests/interop/.venv/bin/python}
  for mode in still move; do
    D=$(mktemp -d /tmp/redlockd-bench-move-XXXX)
    start_nodes "$D"
    "$PY" benches/cluster_move_contended.py "$B" 127.0.0.1:$PA 127.0.0.1:$PB \
      "${CLIENTS:-8}" "${SECONDS_RUN:-10}" $mode
    kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
    rm -rf "$D"
  done
  exit 0
fi
for n in "${@:-1000 100000}"; do
  for N in $n; do
    D=$(mktemp -d /tmp/redlockd-bench-move-XXXX)
    start_nodes "$D"
    seq 1 "$N" | awk '{printf "SET {b}lock:%d owner NX PX 60000\n", $1}' | redis-cli -p $PA --pipe >/dev/null
    echo "N=$N keys in slot 3300 on A: $(redis-cli -p $PA CLUSTER COUNTKEYSINSLOT 3300)"
    # Another slot of A under load while the slot moves: its worst latency is the
    # pause the move gave the rest of the node.
    redis-benchmark -p $PA -c 4 -n "${OTHER_REQUESTS:-200000}" --csv GET '{c}other' \
      >"$D/other.csv" 2>/dev/null &
    bench=$!
    sleep 0.3
    $B slots move --slots 3300 --to 127.0.0.1:$PB --seed 127.0.0.1:$PA
    wait $bench
    echo "GET of another slot on A during the move (4 clients): $(tail -1 "$D/other.csv" | awk -F, '{gsub(/"/,""); printf "%s req/s, p99 %s ms, max %s ms", $2, $7, $8}')"
    echo "after: A has $(redis-cli -p $PA DBSIZE) keys, B has $(redis-cli -p $PB CLUSTER COUNTKEYSINSLOT 3300) in slot 3300"
    kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$D"; echo "logs: $D"
  done
done
