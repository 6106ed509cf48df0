#!/usr/bin/env bash
# What lock introspection's side table costs one node: SET lock:rand token NX PX 30000
# at P=16 (redis-benchmark, 50 clients, keys below 100000, from an empty keyspace:
# about 63% grants, the rest refused), with `lock-introspection` off and on (CONFIG
# SET, interleaved, ROUNDS rounds, default 5): requests/s and the server's CPU per
# request (utime + stime from /proc/PID/stat around the run; 10 ms ticks, so N should
# keep a run above ~0.3 s of CPU). First, on the fresh node, bytes per lock: INFO
# used_memory before and after 100,000 SET NX PX locks (12-byte keys, 26-byte tokens),
# off and on.
#
#   benches/introspection_cost.sh [requests]   (default 400000 per measurement; ROUNDS=5)
#   REDLOCKD=path measures another build without building this one
#
# Results: docs/benchmarks.md, "Lock introspection's side table".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-400000}"
ROUNDS="${ROUNDS:-5}"
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null \
  || { echo "needs redis-benchmark and redis-cli (apt-get install redis-tools)"; exit 1; }
[[ -n "${REDLOCKD:-}" ]] || cargo build --release --quiet
REDLOCKD="${REDLOCKD:-target/release/redlockd}"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d) # the node's --dir, and the measurements
"$REDLOCKD" --port "$PORT" --restart-delay 0 --dir "$DIR" --log warn >/dev/null & PID=$!
trap 'kill $PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
cli() { redis-cli -p "$PORT" "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
TICK_NS=$((1000000000 / $(getconf CLK_TCK)))

python3 -c '
for i in range(100000):
    print("SET lock:%07d t%025d NX PX 200000" % (i, i))' >"$DIR/locks.txt"
used() { cli INFO memory | awk -F: '/^used_memory:/{print $2+0}'; }
for intro in no yes; do
  cli CONFIG SET lock-introspection "$intro" >/dev/null
  cli FLUSHALL >/dev/null
  a=$(used)
  cli <"$DIR/locks.txt" >/dev/null
  b=$(used)
  echo $(((b - a) / 100000)) >"$DIR/bytes.$intro"
done

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  for intro in no yes; do
    [[ "$(cli CONFIG SET lock-introspection "$intro")" == OK ]] || { echo "CONFIG SET failed"; exit 1; }
    cli FLUSHALL >/dev/null
    before=$(cpu_ticks)
    rps=$(redis-benchmark -p "$PORT" -c 50 -n "$N" -r 100000 -P 16 --csv \
      SET lock:__rand_int__ token NX PX 30000 2>/dev/null | tail -1 | tr -d '"' | cut -d, -f2)
    after=$(cpu_ticks)
    echo "$rps" >>"$DIR/rps.$intro"
    echo $(((after - before) * TICK_NS / N)) >>"$DIR/cpu.$intro"
  done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo
echo "SET NX PX P=16, 50 clients, $N requests, median of $ROUNDS interleaved rounds"
printf '%-16s %12s %14s %14s\n' introspection "rps" "CPU ns/req" "bytes/lock"
for intro in no yes; do
  printf '%-16s %12s %14s %14s   (rps: %s; CPU: %s)\n' "$([[ $intro == yes ]] && echo on || echo off)" \
    "$(median "$DIR/rps.$intro")" "$(median "$DIR/cpu.$intro")" "$(cat "$DIR/bytes.$intro")" \
    "$(paste -sd' ' "$DIR/rps.$intro")" "$(paste -sd' ' "$DIR/cpu.$intro")"
done
