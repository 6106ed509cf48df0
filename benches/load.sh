#!/usr/bin/env bash
# Load benchmark: redlockd, redis-server 7 and valkey-server 8 (where benches/valkey.sh
# finds or builds one; NO_VALKEY=1 to leave it out) side by side in the same run,
# interleaved (the order turns every round), ROUNDS rounds (default 3), medians and ratios.
#
#   benches/load.sh [requests]        (default 200000 per measurement; ROUNDS=3)
#
# Lock traffic, 50 clients, keys lock:<random below 100000>:
#   - SET NX PX 30000 at P=1 and P=16 (redis-benchmark): rps
#   - GET at P=16 (redis-benchmark): rps (the per-command path, ACL check included)
#   - EVALSHA of the compare-and-delete release script at P=1 (redis-benchmark --csv):
#     rps, p99 latency, and the server's CPU per request (utime + stime of the server
#     process from /proc/PID/stat before and after the run, divided by the requests)
#   - MULTI / SET NX PX 30000 / EXEC at P=1, sent in one write per transaction as
#     redis-py's pipeline() does (benches/multi_load.rs; redis-benchmark sends one
#     command per request): transactions/s, p99, CPU per transaction
# Ratios are redlockd / redis-server and redlockd / valkey-server. The targets: EVALSHA rps >= 1.0x, CPU/req <= 1.0x,
# p99 <= 1.5x; MULTI+SET NX PX+EXEC rps >= 1.0x (results: docs/benchmarks.md).
# Needs redis-server and redis-benchmark (apt-get install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-200000}"
ROUNDS="${ROUNDS:-3}"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)"; exit 1; }
# REDLOCKD=path measures another build (say, main's) without building this one;
# NO_MULTI=1 leaves out the MULTI line (and the build of benches/multi_load.rs).
[[ -n "${REDLOCKD:-}" ]] || cargo build --release --quiet
MULTI_LOAD=""
if [[ -n "${NO_MULTI:-}" ]]; then
  echo "skipped: MULTI+SET NX PX+EXEC (NO_MULTI is set)"
else
  MULTI_LOAD=$(cargo bench --bench multi_load --no-run 2>&1 | grep -Eo 'target/release/deps/multi_load-[0-9a-f]+' | tail -1)
  [[ -x "$MULTI_LOAD" ]] || { echo "could not build benches/multi_load.rs"; exit 1; }
fi
VALKEY=""
if [[ -z "${NO_VALKEY:-}" ]]; then
  VALKEY=$(benches/valkey.sh) || VALKEY="" # it says "skipped: why" itself
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RL=$(free_port); RS=$(free_port); VK=$(free_port)
RL_DIR=$(mktemp -d)   # the node's --dir (token mark, lock file), not the checkout
OUT=$(mktemp -d)      # one file per metric and server: a value per round
REDLOCKD="${REDLOCKD:-target/release/redlockd}"
"$REDLOCKD" --port "$RL" --restart-delay 0 --dir "$RL_DIR" --log warn & RL_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & RS_PID=$!
VK_PID=""
if [[ -n "$VALKEY" ]]; then
  "$VALKEY" --port "$VK" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & VK_PID=$!
fi
trap 'kill $RL_PID $RS_PID $VK_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$RL_DIR" "$OUT"' EXIT
SERVERS=("redlockd $RL $RL_PID" "redis $RS $RS_PID")
[[ -n "$VALKEY" ]] && SERVERS+=("valkey $VK $VK_PID")
for s in "${SERVERS[@]}"; do
  p=$(cut -d' ' -f2 <<<"$s")
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
SCRIPT='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
SHA=$(redis-cli -p "$RL" SCRIPT LOAD "$SCRIPT")
for s in "${SERVERS[@]:1}"; do
  [[ "$(redis-cli -p "$(cut -d' ' -f2 <<<"$s")" SCRIPT LOAD "$SCRIPT")" == "$SHA" ]] || { echo "SHA1 differs"; exit 1; }
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, in clock ticks
TICK_US=$((1000000 / $(getconf CLK_TCK)))
note() { echo "$3" >>"$OUT/$1.$2"; } # metric server value
# redis-benchmark --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
# "p95_latency_ms","p99_latency_ms","max_latency_ms"
bench_csv() { redis-benchmark -p "$1" -c 50 -n "$N" -r 100000 --csv "${@:2}" 2>/dev/null | tail -1 | tr -d '"'; }

measure() { # name port pid
  local name=$1 port=$2 pid=$3 line before after
  for P in 1 16; do
    line=$(bench_csv "$port" -P "$P" SET lock:__rand_int__ v NX PX 30000)
    note "set_p$P" "$name" "$(cut -d, -f2 <<<"$line")"
  done
  line=$(bench_csv "$port" -P 16 GET lock:__rand_int__)
  note get_p16 "$name" "$(cut -d, -f2 <<<"$line")"
  before=$(cpu_ticks "$pid")
  line=$(bench_csv "$port" EVALSHA "$SHA" 1 lock:__rand_int__ token)
  after=$(cpu_ticks "$pid")
  note evalsha_rps "$name" "$(cut -d, -f2 <<<"$line")"
  note evalsha_p99 "$name" "$(cut -d, -f7 <<<"$line")"
  note evalsha_cpu "$name" "$(awk -v t=$((after - before)) -v u="$TICK_US" -v n="$N" 'BEGIN{printf "%.2f", t*u/n}')"
  [[ -n "$MULTI_LOAD" ]] || { redis-cli -p "$port" FLUSHALL >/dev/null; return; }
  before=$(cpu_ticks "$pid")
  line=$("$MULTI_LOAD" --addr "127.0.0.1:$port" --clients 50 --requests "$N" --keyspace 100000)
  after=$(cpu_ticks "$pid")
  note multi_rps "$name" "$(grep -Eo 'rps=[0-9.]+' <<<"$line" | cut -d= -f2)"
  note multi_p99 "$name" "$(grep -Eo 'p99_ms=[0-9.]+' <<<"$line" | cut -d= -f2)"
  note multi_cpu "$name" "$(awk -v t=$((after - before)) -v u="$TICK_US" -v n="$N" 'BEGIN{printf "%.2f", t*u/n}')"
  redis-cli -p "$port" FLUSHALL >/dev/null # every round starts from an empty keyspace
}

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  n=${#SERVERS[@]}
  for k in $(seq 0 $((n - 1))); do
    # shellcheck disable=SC2086 # name port pid
    measure ${SERVERS[$(((round - 1 + k) % n))]}
  done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a/b}'; }
row() { # label metric
  local a b v="" vr=""
  a=$(median "$OUT/$2.redlockd"); b=$(median "$OUT/$2.redis")
  if [[ -n "$VALKEY" ]]; then
    v=$(median "$OUT/$2.valkey"); vr=$(ratio "$a" "$v")
  fi
  printf '%-46s %10s %10s %10s %9s %9s   (redlockd rounds: %s)\n' "$1" "$a" "$b" "$v" \
    "$(ratio "$a" "$b")" "$vr" "$(paste -sd' ' "$OUT/$2.redlockd")"
}
echo
echo "50 clients, $N requests per measurement, median of $ROUNDS interleaved rounds"
printf '%-46s %10s %10s %10s %9s %9s\n' "" redlockd redis valkey "vs redis" "vs valkey"
row "SET lock:rand v NX PX 30000, P=1: rps" set_p1
row "SET lock:rand v NX PX 30000, P=16: rps" set_p16
row "GET lock:rand, P=16: rps" get_p16
row "EVALSHA compare-and-delete, P=1: rps" evalsha_rps
row "EVALSHA compare-and-delete: server CPU us/req" evalsha_cpu
row "EVALSHA compare-and-delete: p99 ms" evalsha_p99
if [[ -n "$MULTI_LOAD" ]]; then
  row "MULTI+SET NX PX+EXEC, P=1: transactions/s" multi_rps
  row "MULTI+SET NX PX+EXEC: server CPU us/txn" multi_cpu
  row "MULTI+SET NX PX+EXEC: p99 ms" multi_p99
fi
