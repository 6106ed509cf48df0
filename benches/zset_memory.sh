#!/usr/bin/env bash
# Memory per member of one sorted set of N members (default 1M), redlockd beside
# redis-server 7 in the same run: the growth of each process's RSS while the same
# pipelined ZADDs ("member:<i>", random scores, 100 a command) load into a fresh node.
# Usage: benches/zset_memory.sh [members] [redlockd binary]   (needs redis-server, redis-cli)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-1000000}"
BIN="${2:-target/release/redlockd}"
command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
  || { echo "needs redis-server and redis-cli (apt-get install redis-server redis-tools)"; exit 1; }
[[ -x "$BIN" ]] || cargo build --release --quiet
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RL=$(free_port); RS=$(free_port)
DATA=$(mktemp)
RL_DIR=$(mktemp -d)   # the node's --dir, not the checkout
"$BIN" --port "$RL" --restart-delay 0 --dir "$RL_DIR" --log warn & RL_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --save "" --appendonly no --logfile /dev/null & RS_PID=$!
trap 'kill $RL_PID $RS_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -f "$DATA"; rm -rf "$RL_DIR"' EXIT
for p in "$RL" "$RS"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
python3 - "$N" "$DATA" <<'PY'
import random, sys
n, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
with open(path, "wb") as out:
    for start in range(0, n, 100):
        args = [b"ZADD", b"big"]
        for i in range(start, min(n, start + 100)):
            args += [repr(rng.random() * 1e6).encode(), b"member:%d" % i]
        out.write(b"*%d\r\n" % len(args))
        for a in args:
            out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
printf '%-12s %10s %12s %16s %s\n' server members "rss growth" "bytes/member" encoding
for pair in "redlockd:$RL:$RL_PID" "redis-server:$RS:$RS_PID"; do
  IFS=: read -r name port pid <<<"$pair"
  before=$(rss_kb "$pid")
  redis-cli -p "$port" --pipe <"$DATA" >/dev/null
  after=$(rss_kb "$pid")
  printf '%-12s %10s %10s kB %16s %s\n' "$name" "$(redis-cli -p "$port" zcard big)" \
    "$((after - before))" "$(((after - before) * 1024 / N))" "$(redis-cli -p "$port" object encoding big)"
done
