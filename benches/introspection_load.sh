#!/usr/bin/env bash
# Lock introspection and keyspace notifications over the network: redlockd with
# introspection off / on and notifications off / on (with nobody subscribed, and with
# one subscriber reading every event), beside redis-server 7 with notifications off / on,
# interleaved (the order turns every round), ROUNDS rounds (default 3), medians.
#
#   benches/introspection_load.sh [requests]   (default 100000 per measurement; ROUNDS=3)
#   REDLOCKD=path measures another build without building this one
#
# 50 clients (redis-benchmark), keys lock:<random below 100000>, every measurement on an
# empty keyspace (FLUSHALL), one node of each set by CONFIG SET between measurements:
#   - SET lock:rand token NX PX 30000 at P=16: rps
#   - then EVALSHA of the compare-and-delete release script with that token at P=1 and
#     P=16: rps. It runs on the keys the SET left (about 63% of the key range), so
#     about half the calls release a lock (a DEL, and its `del` event), the rest find
#     no lock.
# Notifications on is `notify-keyspace-events KEA` (every class: per lock `set`,
# `expire`, `del`, on both channel kinds); the subscriber is `redis-cli PSUBSCRIBE
# __key*__:*` writing to /dev/null (it takes CPU of the same 2 cores, on both servers).
# Results: docs/benchmarks.md, "Lock introspection and keyspace notifications".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-100000}"
ROUNDS="${ROUNDS:-3}"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)"; exit 1; }
[[ -n "${REDLOCKD:-}" ]] || cargo build --release --quiet
REDLOCKD="${REDLOCKD:-target/release/redlockd}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RL=$(free_port); RS=$(free_port)
RL_DIR=$(mktemp -d) # the node's --dir (token mark, lock file), not the checkout
OUT=$(mktemp -d)    # one file per metric and configuration: a value per round
SUB_PID=""
"$REDLOCKD" --port "$RL" --restart-delay 0 --dir "$RL_DIR" --log warn >/dev/null & RL_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & RS_PID=$!
trap 'kill $RL_PID $RS_PID $SUB_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$RL_DIR" "$OUT"' EXIT
for p in "$RL" "$RS"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
SCRIPT='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
SHA=$(redis-cli -p "$RL" SCRIPT LOAD "$SCRIPT")
[[ "$(redis-cli -p "$RS" SCRIPT LOAD "$SCRIPT")" == "$SHA" ]] || { echo "SHA1 differs"; exit 1; }

# name port introspection(yes|no|-) notifications subscriber(0|1)
CONFIGS=(
  "rl-off-off $RL no '' 0"
  "rl-on-off $RL yes '' 0"
  "rl-off-kea $RL no KEA 0"
  "rl-on-kea $RL yes KEA 0"
  "rl-on-kea-sub $RL yes KEA 1"
  "rs-off $RS - '' 0"
  "rs-kea $RS - KEA 0"
  "rs-kea-sub $RS - KEA 1"
)
rps() { # port P command...: requests/s from redis-benchmark --csv
  redis-benchmark -p "$1" -c 50 -n "$N" -r 100000 --csv -P "$2" "${@:3}" 2>/dev/null \
    | tail -1 | tr -d '"' | cut -d, -f2
}
measure() { # name port introspection notifications subscriber
  local name=$1 port=$2 intro=$3 kea=$4 sub=$5
  [[ "$intro" == - || "$(redis-cli -p "$port" CONFIG SET lock-introspection "$intro")" == OK ]] \
    || { echo "CONFIG SET lock-introspection failed"; exit 1; }
  [[ "$(redis-cli -p "$port" CONFIG SET notify-keyspace-events "$kea")" == OK ]] || { echo "CONFIG SET notify-keyspace-events failed"; exit 1; }
  redis-cli -p "$port" FLUSHALL >/dev/null
  if [[ "$sub" == 1 ]]; then
    redis-cli -p "$port" PSUBSCRIBE '__key*__:*' >/dev/null & SUB_PID=$!
    sleep 0.2
  fi
  echo "$(rps "$port" 16 SET lock:__rand_int__ token NX PX 30000)" >>"$OUT/set16.$name"
  echo "$(rps "$port" 1 EVALSHA "$SHA" 1 lock:__rand_int__ token)" >>"$OUT/eval1.$name"
  echo "$(rps "$port" 16 EVALSHA "$SHA" 1 lock:__rand_int__ token)" >>"$OUT/eval16.$name"
  if [[ -n "$SUB_PID" ]]; then
    kill "$SUB_PID" 2>/dev/null || true
    wait "$SUB_PID" 2>/dev/null || true
    SUB_PID=""
  fi
}

n=${#CONFIGS[@]}
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  for k in $(seq 0 $((n - 1))); do
    eval "measure ${CONFIGS[$(((round - 1 + k) % n))]}"
  done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo
echo "50 clients, $N requests per measurement, median of $ROUNDS interleaved rounds (rps)"
printf '%-48s %12s %14s %14s\n' "" "SET NX PX P=16" "EVALSHA P=1" "EVALSHA P=16"
label() {
  case "$1" in
    rl-off-off) echo "redlockd: introspection off, notifications off" ;;
    rl-on-off) echo "redlockd: introspection on (default), off" ;;
    rl-off-kea) echo "redlockd: introspection off, KEA, no subscriber" ;;
    rl-on-kea) echo "redlockd: introspection on, KEA, no subscriber" ;;
    rl-on-kea-sub) echo "redlockd: introspection on, KEA, 1 subscriber" ;;
    rs-off) echo "redis-server: notifications off" ;;
    rs-kea) echo "redis-server: KEA, no subscriber" ;;
    rs-kea-sub) echo "redis-server: KEA, 1 subscriber" ;;
  esac
}
for c in "${CONFIGS[@]}"; do
  name=${c%% *}
  printf '%-48s %12s %14s %14s   (rounds: %s / %s / %s)\n' "$(label "$name")" \
    "$(median "$OUT/set16.$name")" "$(median "$OUT/eval1.$name")" "$(median "$OUT/eval16.$name")" \
    "$(paste -sd' ' "$OUT/set16.$name")" "$(paste -sd' ' "$OUT/eval1.$name")" "$(paste -sd' ' "$OUT/eval16.$name")"
done
