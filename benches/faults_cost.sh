#!/usr/bin/env bash
# What scoped faults (src/node/faults/scoped.rs) cost when none is set: two redlockd
# binaries side by side in one run, interleaved (the order turns every round),
# ROUNDS rounds (default 5), medians and the ratio AFTER / BEFORE.
#
#   benches/faults_cost.sh BEFORE AFTER [requests]     (default 200000 per measurement)
#
# BEFORE: a release build without the hook (e.g. the commit before it), AFTER: with it.
# 50 clients, keys lock:<random below 100000> (as benches/load.sh):
#   - SET NX PX 30000 at P=16: rps
#   - EVALSHA of the compare-and-delete release script at P=1: rps and the server's CPU
#     per request (utime + stime from /proc/PID/stat)
# With CALLGRIND=1, instead: user-space instructions per request of each build under
# callgrind (instrumentation switched on after startup), for the same two workloads
# (CG_N requests each, default 20000): load-independent, where the rps are noisy.
# Needs redis-server's redis-benchmark and redis-cli (and valgrind for CALLGRIND=1).
# Results: docs/benchmarks.md.
set -euo pipefail
BEFORE="${1:?usage: benches/faults_cost.sh BEFORE AFTER [requests]}"
AFTER="${2:?usage: benches/faults_cost.sh BEFORE AFTER [requests]}"
N="${3:-200000}"
ROUNDS="${ROUNDS:-5}"
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null \
  || { echo "needs redis-benchmark and redis-cli (apt-get install redis-tools)"; exit 1; }
if [[ -n "${CALLGRIND:-}" ]]; then
  CG_N="${CG_N:-20000}"
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  SCRIPT='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
  instructions() { # binary workload -> instructions per request
    local dir port pid sha
    dir=$(mktemp -d); port=$(free_port)
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" \
      "$1" --port "$port" --restart-delay 0 --dir "$dir" --log warn >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$SCRIPT")
    callgrind_control -i on "$pid" >/dev/null 2>&1
    if [[ $2 == set ]]; then
      redis-benchmark -p "$port" -c 50 -n "$CG_N" -r 100000 -P 16 -q SET lock:__rand_int__ v NX PX 30000 >/dev/null
    else
      redis-benchmark -p "$port" -c 50 -n "$CG_N" -r 100000 -q EVALSHA "$sha" 1 lock:__rand_int__ token >/dev/null
    fi
    kill "$pid"; wait "$pid" 2>/dev/null || true
    awk -v n="$CG_N" '/^(summary|totals):/ {t=$2} END {printf "%.0f", t/n}' "$dir"/cg.out*
    rm -rf "$dir"
  }
  printf '%-44s %10s %10s %7s\n' "instructions per request ($CG_N requests)" before after "after/before"
  for w in set evalsha; do
    b=$(instructions "$BEFORE" "$w"); a=$(instructions "$AFTER" "$w")
    label="SET NX PX, P=16"; [[ $w == evalsha ]] && label="EVALSHA compare-and-delete, P=1"
    printf '%-44s %10s %10s %7s\n' "$label" "$b" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3fx", a/b}')"
  done
  exit 0
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
SERVERS=()
for name in before after; do
  bin=$BEFORE; [[ $name == after ]] && bin=$AFTER
  port=$(free_port)
  mkdir "$WORK/$name"
  "$bin" --port "$port" --restart-delay 0 --dir "$WORK/$name" --log warn & PIDS+=("$!")
  SERVERS+=("$name $port $!")
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
SCRIPT='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
for s in "${SERVERS[@]}"; do SHA=$(redis-cli -p "$(cut -d' ' -f2 <<<"$s")" SCRIPT LOAD "$SCRIPT"); done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
note() { echo "$3" >>"$WORK/$1.$2"; }
bench_csv() { redis-benchmark -p "$1" -c 50 -n "$N" -r 100000 --csv "${@:2}" 2>/dev/null | tail -1 | tr -d '"'; }
measure() { # name port pid
  local name=$1 port=$2 pid=$3 line before after
  line=$(bench_csv "$port" -P 16 SET lock:__rand_int__ v NX PX 30000)
  note set_p16 "$name" "$(cut -d, -f2 <<<"$line")"
  before=$(cpu_ticks "$pid")
  line=$(bench_csv "$port" EVALSHA "$SHA" 1 lock:__rand_int__ token)
  after=$(cpu_ticks "$pid")
  note evalsha_rps "$name" "$(cut -d, -f2 <<<"$line")"
  note evalsha_cpu "$name" "$(awk -v t=$((after - before)) -v u="$TICK_US" -v n="$N" 'BEGIN{printf "%.2f", t*u/n}')"
  redis-cli -p "$port" FLUSHALL >/dev/null
}
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  for k in 0 1; do
    # shellcheck disable=SC2086
    measure ${SERVERS[$(((round - 1 + k) % 2))]}
  done
done
median() { sort -g "$1" | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
row() {
  local a b
  b=$(median "$WORK/$2.before"); a=$(median "$WORK/$2.after")
  printf '%-44s %10s %10s %7s   (rounds before: %s; after: %s)\n' "$1" "$b" "$a" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3fx", a/b}')" \
    "$(paste -sd' ' "$WORK/$2.before")" "$(paste -sd' ' "$WORK/$2.after")"
}
echo
echo "50 clients, $N requests per measurement, median of $ROUNDS interleaved rounds"
printf '%-44s %10s %10s %7s\n' "" before after "after/before"
row "SET lock:rand v NX PX 30000, P=16: rps" set_p16
row "EVALSHA compare-and-delete, P=1: rps" evalsha_rps
row "EVALSHA: server CPU us/request" evalsha_cpu
