#!/usr/bin/env bash
# Load benchmark: redis-benchmark against redlockd and redis-server 7 in the same run.
# Lock traffic only: SET NX PX (P=1 and P=16) and EVALSHA of a compare-and-delete
# script. Usage: benches/load.sh [requests]   (needs redis-server and redis-benchmark)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-200000}"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)"; exit 1; }
cargo build --release --quiet
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RL=$(free_port); RS=$(free_port)
RL_DIR=$(mktemp -d)   # the node's --dir (token mark, lock file), not the checkout
target/release/redlockd --port "$RL" --restart-delay 0 --dir "$RL_DIR" --log warn & RL_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & RS_PID=$!
trap 'kill $RL_PID $RS_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$RL_DIR"' EXIT
for p in "$RL" "$RS"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
SCRIPT='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
rps() { redis-benchmark -q -p "$1" -c 50 -n "$N" -r 100000 "${@:2}" 2>/dev/null | tr '\r' '\n' | grep -Eo '[0-9.]+ requests per second' | tail -1 | cut -d' ' -f1; }
printf '%-40s %14s %14s\n' "requests/s (50 clients, $N requests)" redlockd redis-server
for P in 1 16; do
  printf '%-40s %14s %14s\n' "SET lock:rand v NX PX 30000, P=$P" \
    "$(rps "$RL" -P "$P" SET lock:__rand_int__ v NX PX 30000)" \
    "$(rps "$RS" -P "$P" SET lock:__rand_int__ v NX PX 30000)"
done
SHA_RL=$(redis-cli -p "$RL" SCRIPT LOAD "$SCRIPT"); SHA_RS=$(redis-cli -p "$RS" SCRIPT LOAD "$SCRIPT")
printf '%-40s %14s %14s\n' "EVALSHA compare-and-delete, P=1" \
  "$(rps "$RL" EVALSHA "$SHA_RL" 1 lock:__rand_int__ token)" \
  "$(rps "$RS" EVALSHA "$SHA_RS" 1 lock:__rand_int__ token)"
