#!/usr/bin/env bash
# Streams beside redis-server 7, in one run: XADD and XREADGROUP throughput
# (redis-benchmark with a custom command, 50 clients) and memory per entry.
#
#   benches/streams.sh [redlockd-binary] [requests]   (default target/release/redlockd, 200000)
#
#   - XADD bench:s * field <10 bytes>, P=1 and P=16: requests/s
#   - XREADGROUP GROUP g c COUNT 10 STREAMS bench:s > (each read moves 10 entries into
#     the group's pending list), P=1: requests/s, as many reads as it takes to deliver
#     the 2 x requests entries the XADD runs added (every read gets 10 entries)
#   - bytes per entry: 1,000,000 x XADD mem:s * f <10 bytes> into a fresh key (pipelined,
#     one client); used_memory (INFO memory) and RSS growth divided by the entries
# Ratios are redlockd / redis-server. Needs redis-server, redis-benchmark, redis-cli.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="${1:-target/release/redlockd}"
N="${2:-200000}"
ENTRIES="${ENTRIES:-1000000}"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "skipped: needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)"; exit 0; }
[[ -x "$BIN" ]] || { echo "no redlockd binary at $BIN (cargo build --release)"; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RL=$(free_port); RS=$(free_port)
RL_DIR=$(mktemp -d)
"$BIN" --port "$RL" --restart-delay 0 --dir "$RL_DIR" --log warn & RL_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & RS_PID=$!
trap 'kill $RL_PID $RS_PID 2>/dev/null || true; wait $RL_PID $RS_PID 2>/dev/null || true; rm -rf "$RL_DIR"' EXIT
for p in "$RL" "$RS"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done

rps() { # port, pipeline, requests, command...
  local port=$1 pipe=$2 n=$3; shift 3
  redis-benchmark -p "$port" -c 50 -P "$pipe" -n "$n" --csv "$@" | tail -1 | cut -d, -f2 | tr -d '"'
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}x')"; }
mem() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}'; }
rss() { awk '/VmRSS/{print $2 * 1024}' "/proc/$1/status"; }

printf '%-44s %14s %14s %8s\n' "metric" "redlockd" "redis-server" "ratio"
for pipe in 1 16; do
  a=$(rps "$RL" "$pipe" "$N" XADD bench:s '*' field 0123456789)
  b=$(rps "$RS" "$pipe" "$N" XADD bench:s '*' field 0123456789)
  printf '%-44s %14s %14s %8s\n' "XADD rps (P=$pipe)" "$a" "$b" "$(ratio "$a" "$b")"
done
for p in "$RL" "$RS"; do redis-cli -p "$p" XGROUP CREATE bench:s g 0 >/dev/null; done
READS=$((2 * N / 10))
a=$(rps "$RL" 1 "$READS" XREADGROUP GROUP g c COUNT 10 STREAMS bench:s '>')
b=$(rps "$RS" 1 "$READS" XREADGROUP GROUP g c COUNT 10 STREAMS bench:s '>')
for p in "$RL" "$RS"; do
  pending=$(redis-cli -p "$p" XPENDING bench:s g | head -1)
  [[ "$pending" == "$((2 * N))" ]] || { echo "XREADGROUP delivered $pending entries on $p, not $((2 * N))"; exit 1; }
done
printf '%-44s %14s %14s %8s\n' "XREADGROUP COUNT 10 rps (P=1)" "$a" "$b" "$(ratio "$a" "$b")"
for p in "$RL" "$RS"; do redis-cli -p "$p" FLUSHALL >/dev/null; done
sleep 0.5
declare -A before_mem before_rss
for pair in "$RL:$RL_PID" "$RS:$RS_PID"; do
  before_mem[${pair%%:*}]=$(mem "${pair%%:*}"); before_rss[${pair%%:*}]=$(rss "${pair##*:}")
done
for p in "$RL" "$RS"; do
  redis-benchmark -p "$p" -c 1 -P 64 -n "$ENTRIES" XADD mem:s '*' f 0123456789 >/dev/null
  [[ "$(redis-cli -p "$p" XLEN mem:s)" == "$ENTRIES" ]] || { echo "XLEN mem:s is not $ENTRIES on $p"; exit 1; }
done
per() { python3 -c "print(f'{($1 - $2) / $ENTRIES:.1f}')"; }
a=$(per "$(mem "$RL")" "${before_mem[$RL]}"); b=$(per "$(mem "$RS")" "${before_mem[$RS]}")
printf '%-44s %14s %14s %8s\n' "used_memory bytes/entry ($ENTRIES entries)" "$a" "$b" "$(ratio "$a" "$b")"
a=$(per "$(rss "$RL_PID")" "${before_rss[$RL]}"); b=$(per "$(rss "$RS_PID")" "${before_rss[$RS]}")
printf '%-44s %14s %14s %8s\n' "RSS bytes/entry ($ENTRIES entries)" "$a" "$b" "$(ratio "$a" "$b")"
