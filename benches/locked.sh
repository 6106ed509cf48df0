#!/usr/bin/env bash
# Locked instructions per request: atomic read-modify-writes and SeqCst stores (x86
# `lock`-prefixed instructions and `xchg` with memory), each a full barrier, ~7-10 ns
# apiece in the request path on the machine this was written on. redis-server runs
# almost none (docs/ARCHITECTURE.md, "Atomic instructions").
#
#   benches/locked.sh [requests] [evalsha|get|setnx]
#                     (default 20000 evalsha; needs valgrind, objdump, redis-benchmark; x86-64)
#
# Runs the release build under callgrind (--dump-instr=yes) while redis-benchmark
# sends one workload (50 clients, P=1): compare-and-delete EVALSHAs, GETs of live
# locks, or contended SET NX PX on 100 keys (benches/memory.py's). Then weights every locked
# instruction of the binary (objdump -d) by how often it ran. Prints the total per
# request and the functions they ran in. Slow (callgrind): ~1 minute.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-20000}"
WORKLOAD="${2:-evalsha}"
case "$WORKLOAD" in evalsha|get|setnx) ;; *) echo "unknown workload: $WORKLOAD"; exit 2;; esac
for tool in valgrind callgrind_control objdump redis-benchmark redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "needs $tool"; exit 1; }
done
cargo build --release --quiet
BIN=$PWD/target/release/redlockd
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$DIR/cg.out" \
  "$BIN" --port "$PORT" --restart-delay 0 --dir "$DIR" --log warn >/dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
SHA=$(redis-cli -p "$PORT" SCRIPT LOAD 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end')
case "$WORKLOAD" in
  evalsha) bench() { redis-benchmark -p "$PORT" -c 50 -n "$1" -r 100000 -q EVALSHA "$SHA" 1 lock:__rand_int__ token >/dev/null 2>&1; } ;;
  get) redis-benchmark -p "$PORT" -c 50 -n 100000 -r 1000 -P 16 -q SET lock:__rand_int__ 0123456789abcdef012345 >/dev/null 2>&1
       bench() { redis-benchmark -p "$PORT" -c 50 -n "$1" -r 1000 -q GET lock:__rand_int__ >/dev/null 2>&1; } ;;
  setnx) bench() { redis-benchmark -p "$PORT" -c 50 -n "$1" -r 100 -q SET lock:__rand_int__ token NX PX 100000 >/dev/null 2>&1; } ;;
esac
bench 2000                       # warm up: connections, the script compiled
callgrind_control -z "$PID" >/dev/null 2>&1
bench "$N"
callgrind_control -d "$PID" >/dev/null 2>&1
sleep 1
objdump -d --no-show-raw-insn "$BIN" \
  | grep -E '^\s+[0-9a-f]+:\s+(lock |xchg\s.*\()' | awk '{sub(":","",$1); print $1}' >"$DIR/locked.txt"
DUMP=$(ls -S "$DIR"/cg.out* | head -1)
python3 - "$DUMP" "$DIR/locked.txt" "$N" "$WORKLOAD" <<'EOF'
import collections, re, sys
dump, locked_file, n, workload = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
locked = {int(a, 16) for a in open(locked_file).read().split()}
names, fn, obj, objs, pos, call_cost = {}, None, None, {}, 0, False
ran = collections.Counter()
for line in open(dump):
    m = re.match(r"^(ob|fn|cob|cfn|fl|fi|fe|cfi|cfl)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
    if m:
        kind, i, name = m.groups()
        table = objs if kind in ("ob", "cob") else names
        if name:
            table[i] = name
        if kind == "ob":
            obj = objs.get(i, "")
        elif kind == "fn":
            fn = names.get(i, "?")
        continue
    if line.startswith("calls="):
        call_cost = True  # the next cost line is the call's inclusive cost
        continue
    if line[:1] in "0123456789+-*":
        tok = line.split()
        p = tok[0]
        pos = int(p, 16) if p.startswith("0x") else pos if p == "*" else pos + int(p) if p[0] in "+-" else int(p)
        if call_cost:
            call_cost = False
            continue
        if obj.endswith("/redlockd") and pos in locked and len(tok) > 2:
            ran[fn] += int(tok[2])
total = sum(ran.values())
print(f"locked instructions per request ({workload}): {total / n:.1f}")
for f, c in ran.most_common(25):
    if c / n >= 0.05:
        print(f"  {c / n:6.2f}  {f[:110]}")
EOF
