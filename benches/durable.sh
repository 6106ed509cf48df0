#!/usr/bin/env bash
# Durable writes: redlockd with its append-only log (the default: --appendonly yes,
# every reply after the fsync of what it depends on, group commit) beside redis-server 7
# with `appendonly yes` and `appendfsync always`, then `everysec`, in one run, and the
# short lock's SET NX PX beside redlockd with --appendonly no (today's memory-only node).
#
#   benches/durable.sh [requests]        (default 100000 per measurement)
#
# redis-benchmark, 50 clients, P=1 and P=16, keys __rand_int__ below 100000:
#   SET k v (no TTL), INCR, RPUSH, XADD * (durable: logged), SET NX PX 30000 (memory-only).
# Prints requests/s per server and the ratios redlockd / redis-always and
# redlockd / redis-everysec; for SET NX PX also redlockd / redlockd --appendonly no.
# REDLOCKD=path measures that binary (default target/release/redlockd, built unless
# REDLOCKD is set); BEFORE=path measures another one too, each cell just before
# REDLOCKD's (a before/after in one run: the disk's fsync time changes within minutes).
# For each redlockd the durable rows also give requests per fsync (INFO aof_fsyncs).
# STEADY_FSYNC_US=n: every server's files on tmpfs and each of their syncs n us long
# (benches/steady_fsync.c, LD_PRELOAD): a disk whose sync time does not change, to
# compare group commits where this VM's own disk flips between regimes.
# Needs redis-server and redis-benchmark (and cc for STEADY_FSYNC_US).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-100000}"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "skipped: needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)"; exit 0; }
[[ -n "${REDLOCKD:-}" ]] || cargo build --release --quiet
REDLOCKD="${REDLOCKD:-target/release/redlockd}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PRELOAD=()
if [[ -n "${STEADY_FSYNC_US:-}" ]]; then
  TMP=$(mktemp -d /dev/shm/durable-XXXX)
  cc -shared -fPIC -O2 -o "$TMP/steady_fsync.so" benches/steady_fsync.c -ldl
  PRELOAD=(env "LD_PRELOAD=$TMP/steady_fsync.so" "STEADY_FSYNC_US=$STEADY_FSYNC_US")
  echo "steady fsync: files on tmpfs, every sync ${STEADY_FSYNC_US} us"
else
  TMP=$(mktemp -d)
fi
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
declare -A PORT
start_redlockd() { # name, extra flags...
  local name=$1; shift
  PORT[$name]=$(free_port); mkdir -p "$TMP/$name"
  "${PRELOAD[@]}" "$REDLOCKD" --port "${PORT[$name]}" --restart-delay 0 --dir "$TMP/$name" --log warn "$@" >/dev/null 2>&1 &
  PIDS+=($!)
}
start_redis() { # name, appendfsync
  local name=$1
  PORT[$name]=$(free_port); mkdir -p "$TMP/$name"
  "${PRELOAD[@]}" redis-server --port "${PORT[$name]}" --bind 127.0.0.1 --save "" --dir "$TMP/$name" --appendonly yes \
    --appendfsync "$2" --logfile /dev/null >/dev/null 2>&1 &
  PIDS+=($!)
}
start_redlockd redlockd
start_redlockd redlockd-memory --appendonly no
if [[ -n "${BEFORE:-}" ]]; then
  REAL=$REDLOCKD; REDLOCKD=$BEFORE; start_redlockd before; REDLOCKD=$REAL
fi
start_redis redis-always always
start_redis redis-everysec everysec
for p in "${PORT[@]}"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
rps() { # port, pipeline, command...
  local port=$1 p=$2; shift 2
  redis-benchmark -p "$port" -c 50 -n "$N" -P "$p" -r 100000 --csv "$@" 2>/dev/null \
    | awk -F'"' 'NR==2 {print $4}'
}
ratio() { python3 -c "print(f'{$1/$2:.2f}x' if float($2) else '-')"; }
fsyncs() { redis-cli -p "$1" INFO persistence | tr -d '\r' | awk -F: '$1=="aof_fsyncs" {print $2}'; }
# rps and requests per fsync of a redlockd: "rps req/fsync".
rps_logged() { # port, pipeline, command...
  local f0 r f1
  f0=$(fsyncs "$1"); r=$(rps "$@"); f1=$(fsyncs "$1")
  echo "$r $(python3 -c "print(f'{$N/max(1,$f1-$f0):.1f}')")"
}
printf '%-22s %4s %12s %12s %14s %9s %9s %9s' workload P redlockd redis-always redis-everysec vs-always vs-everysec req/fsync
[[ -n "${BEFORE:-}" ]] && printf ' %12s %9s %9s' before before-vs-always before-req/fsync
echo
for P in 1 16; do
  for w in "SET key:__rand_int__ v" "INCR counter:__rand_int__" "RPUSH queue:__rand_int__ job" "XADD stream:__rand_int__ * f v"; do
    read -r -a cmd <<<"$w"
    [[ -n "${BEFORE:-}" ]] && read -r o of < <(rps_logged "${PORT[before]}" "$P" "${cmd[@]}")
    read -r a af < <(rps_logged "${PORT[redlockd]}" "$P" "${cmd[@]}")
    b=$(rps "${PORT[redis-always]}" "$P" "${cmd[@]}")
    c=$(rps "${PORT[redis-everysec]}" "$P" "${cmd[@]}")
    printf '%-22s %4s %12s %12s %14s %9s %9s %9s' "${cmd[0]} (durable)" "$P" "$a" "$b" "$c" "$(ratio "$a" "$b")" "$(ratio "$a" "$c")" "$af"
    [[ -n "${BEFORE:-}" ]] && printf ' %12s %9s %9s' "$o" "$(ratio "$o" "$b")" "$of"
    echo
  done
  cmd=(SET "lock:__rand_int__" x NX PX 30000)
  a=$(rps "${PORT[redlockd]}" "$P" "${cmd[@]}")
  m=$(rps "${PORT[redlockd-memory]}" "$P" "${cmd[@]}")
  b=$(rps "${PORT[redis-always]}" "$P" "${cmd[@]}")
  c=$(rps "${PORT[redis-everysec]}" "$P" "${cmd[@]}")
  printf '%-22s %4s %12s %12s %14s %9s %9s   appendonly-no: %s (%s)\n' "SET NX PX (memory)" "$P" "$a" "$b" "$c" \
    "$(ratio "$a" "$b")" "$(ratio "$a" "$c")" "$m" "$(ratio "$a" "$m")"
done
# Log sizes after a rewrite: every durable key once.
redis-cli -p "${PORT[redlockd]}" BGREWRITEAOF >/dev/null
redis-cli -p "${PORT[redis-always]}" BGREWRITEAOF >/dev/null
sleep 2
echo "log after rewrite: redlockd $(du -sb "$TMP/redlockd/appendonlydir" | cut -f1) B, redis $(du -sb "$TMP/redis-always/appendonlydir" | cut -f1) B"
