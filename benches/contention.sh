#!/usr/bin/env bash
# Contended Redlock: 5 redis-server nodes and 5 redlockd nodes side by side in one run,
# interleaved rounds, one table per kind of client:
#   rust     the crate's client, threads of one process (examples/redlock_contention.rs)
#   procs    separate OS processes, one redis-py client each   (benches/contention_clients.py)
#   node     node-redlock with its default retry policy        (benches/contention_clients.py)
#   redsync  redsync (Go) with its default retry policy        (benches/contention_clients.py)
#
#   benches/contention.sh   (ROUNDS=3 SECONDS=2 CLIENT_SECONDS=2 CLIENTS=2,8,32,128
#                            FENCING=both KINDS=rust,procs,node,redsync)
#
# Prints per number of contending clients: lock cycles/s (median and min-max over the
# rounds), its ratio to Redis's (median of the per-round ratios), the split-vote rate
# (attempts granted by 1-4 of the 5 nodes); for rust also the share of attempts won and
# the latency of one attempt (p50, p99, p99.9), with and without fencing tokens.
# procs, node and redsync use the interop clients (tests/interop/run.sh installs them);
# a kind whose client is missing is skipped with a message.
# Every process shares this machine: absolute numbers are noisy, the ratios of one run
# are what to compare. Needs redis-server (apt-get install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
  || { echo "needs redis-server and redis-cli (apt-get install redis-server redis-tools)"; exit 1; }
KINDS="${KINDS:-rust,procs,node,redsync}"
if [[ ",$KINDS," == *,rust,* ]]; then
  cargo build --release --quiet --bin redlockd --example redlock_contention
else
  cargo build --release --quiet --bin redlockd
fi
ulimit -n 65536 2>/dev/null || true
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DIRS=$(mktemp -d) # the redlockd nodes' --dir (token mark, lock file), not the checkout
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIRS"' EXIT
REDIS=() REDLOCKD=()
for i in 1 2 3 4 5; do
  p=$(free_port)
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & PIDS+=($!)
  REDIS+=("127.0.0.1:$p")
  p=$(free_port)
  mkdir "$DIRS/$i"
  target/release/redlockd --port "$p" --restart-delay 0 --dir "$DIRS/$i" --log warn >/dev/null & PIDS+=($!)
  REDLOCKD+=("127.0.0.1:$p")
done
for a in "${REDIS[@]}" "${REDLOCKD[@]}"; do
  up=
  for _ in $(seq 1 100); do redis-cli -p "${a##*:}" ping >/dev/null 2>&1 && { up=1; break; }; sleep 0.05; done
  [[ -n "$up" ]] || { echo "node $a did not start"; exit 1; }
done
join() { local IFS=,; echo "$*"; }
if [[ ",$KINDS," == *,rust,* ]]; then
  target/release/examples/redlock_contention "$(join "${REDIS[@]}")" "$(join "${REDLOCKD[@]}")"
fi
OTHERS=$(tr ',' '\n' <<<"$KINDS" | grep -vx rust | paste -sd, || true)
if [[ -n "$OTHERS" ]]; then
  KINDS="$OTHERS" python3 benches/contention_clients.py "$(join "${REDIS[@]}")" "$(join "${REDLOCKD[@]}")"
fi
