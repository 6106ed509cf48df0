#!/usr/bin/env bash
# What the append-only log costs the short lock, counted rather than timed: user-space
# instructions per `SET lock:<n> token NX PX 30000` (a memory-only grant, never
# logged) of the whole redlockd process under callgrind, with `--appendonly yes --dir D`
# (the default) and with `--appendonly no`, in alternate rounds. Throughput on a shared
# machine moves by more than the 2% this must show; instruction counts do not.
#
#   benches/lock_log_cost.sh [requests] [rounds] [clients]
#                            (default 10000 requests, 2 rounds, 1 client)
#
# redis-benchmark, P=1, keys __rand_int__ below 100000 (as benches/durable.sh). One
# client by default: each request then costs one wakeup, one read and one write; with
# 50 clients how many requests a wakeup carries moves the count by ~2% between rounds.
# Counted from after a warm-up of 2000 requests (connections made, tables grown) to the
# end of the measured run (callgrind_control -z / -d). Needs valgrind, redis-benchmark.
# REDLOCKD=path measures that binary (default target/release/redlockd, built unless
# REDLOCKD is set). Slow: ~1 minute a round.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-10000}"
ROUNDS="${2:-2}"
CLIENTS="${3:-1}"
for tool in valgrind callgrind_control redis-benchmark redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "skipped: needs $tool"; exit 0; }
done
[[ -n "${REDLOCKD:-}" ]] || cargo build --release --quiet
BIN="${REDLOCKD:-target/release/redlockd}"
TMP=$(mktemp -d)
PID=
trap '[[ -n "$PID" ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
measure() { # label, flags...: prints instructions per request
  local label=$1; shift
  local port dir
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  dir="$TMP/$label.$RANDOM"; mkdir -p "$dir"
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    "$BIN" --port "$port" --restart-delay 0 --dir "$dir" --log warn "$@" >/dev/null 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null 2>&1 || { echo "redlockd under valgrind did not start" >&2; exit 1; }
  bench() {
    timeout 600 redis-benchmark -p "$port" -c "$CLIENTS" -n "$1" -r 100000 -q \
      SET lock:__rand_int__ token NX PX 30000 >/dev/null 2>&1
  }
  bench 2000
  callgrind_control -z "$PID" >/dev/null 2>&1
  bench "$N"
  callgrind_control -d "$PID" >/dev/null 2>&1
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
  # The dump taken by -d: the largest file with a totals line after the zeroing.
  python3 - "$dir" "$N" <<'EOF'
import glob, sys
best = 0
for f in glob.glob(sys.argv[1] + "/cg.out*"):
    for line in open(f, errors="replace"):
        if line.startswith(("summary:", "totals:")):
            best = max(best, int(line.split()[1]))
print(f"{best / int(sys.argv[2]):.0f}")
EOF
}
printf '%-6s %16s %16s %8s\n' round appendonly-yes appendonly-no ratio
for r in $(seq 1 "$ROUNDS"); do
  yes=$(measure yes --appendonly yes)
  no=$(measure no --appendonly no)
  printf '%-6s %16s %16s %8s\n' "$r" "$yes" "$no" "$(python3 -c "print(f'{$yes/$no:.4f}')")"
done
