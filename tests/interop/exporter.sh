#!/usr/bin/env bash
# Debian's prometheus-redis-exporter scrapes a redlockd node (INFO, CONFIG GET, SLOWLOG,
# LATENCY, ...) without errors, and redlockd's own --metrics-addr endpoint answers.
#
#   tests/interop/exporter.sh path-to-redlockd
#
# Every process started here is stopped on exit; non-zero exit on any failure.
set -euo pipefail

BIN="${1:?usage: exporter.sh path-to-redlockd}"
command -v prometheus-redis-exporter >/dev/null || { echo "exporter: prometheus-redis-exporter is not installed" >&2; exit 1; }
command -v curl >/dev/null || { echo "exporter: curl is required" >&2; exit 1; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/redlockd-exporter.XXXXXX")"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # url: bounded wait for a 200
  for _ in $(seq 1 100); do
    curl -sf "$1" -o /dev/null && return 0
    sleep 0.05
  done
  echo "exporter: $1 did not answer" >&2; return 1
}

PORT=$(free_port); METRICS=$(free_port); EXPORTER=$(free_port)
"$BIN" --port "$PORT" --restart-delay 0 --dir "$WORK/dir" --metrics-addr "127.0.0.1:$METRICS" --log warn >"$WORK/node.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$METRICS/metrics"
redis-cli -p "$PORT" SET lock:report token NX PX 10000 >/dev/null
redis-cli -p "$PORT" SET lock:report other NX PX 10000 >/dev/null

prometheus-redis-exporter --redis.addr "redis://127.0.0.1:$PORT" \
  --web.listen-address "127.0.0.1:$EXPORTER" >"$WORK/exporter.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$EXPORTER/metrics"
curl -sf "http://127.0.0.1:$EXPORTER/metrics" >"$WORK/scrape.txt"

fail() { echo "exporter: $*" >&2; cat "$WORK/exporter.log" >&2; exit 1; }
grep -qx 'redis_up 1' "$WORK/scrape.txt" || fail "redis_up is not 1"
grep -qx 'redis_exporter_last_scrape_error{err=""} 0' "$WORK/scrape.txt" || fail "the scrape reported an error: $(grep last_scrape_error "$WORK/scrape.txt")"
grep -q '^redis_db_keys{db="db0"} 1$' "$WORK/scrape.txt" || fail "redis_db_keys for db0 is not 1"
grep -q '^redis_commands_total{cmd="set"} 2$' "$WORK/scrape.txt" || fail "redis_commands_total for set is not 2"
if grep -E 'level=(error|warning)' "$WORK/exporter.log"; then fail "the exporter logged errors"; fi

curl -sf "http://127.0.0.1:$METRICS/metrics" >"$WORK/own.txt"
grep -qx 'redlockd_lock_grants_total 1' "$WORK/own.txt" || fail "redlockd_lock_grants_total is not 1"
grep -qx 'redlockd_lock_refusals_total{reason="held"} 1' "$WORK/own.txt" || fail "held refusals is not 1"
echo "exporter: prometheus-redis-exporter scraped redlockd cleanly; --metrics-addr answered"
