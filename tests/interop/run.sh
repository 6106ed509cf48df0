#!/usr/bin/env bash
# The interop battery: real client libraries, with their default settings, against
# 5 independent nodes.
#
#   tests/interop/run.sh [path-to-redlockd]     (default: cargo build --release)
#   INTEROP_SERVER=redis tests/interop/run.sh [path-to-redis-server]
#
# Against redlockd the nodes run with --restart-delay 0 --clock manual
# --enable-debug-command, so expiry is tested with DEBUG CLOCK ADVANCE instead of
# sleeping; cases that need that (or the restart fence) are skipped against real Redis.
# Against redlockd the expiry cases then run again on nodes with --lock-delay 5s.
# Every process started here is stopped on exit. Exit status is non-zero on any failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KIND="${INTEROP_SERVER:-redlockd}"
NUM_NODES=5
PY_TIMEOUT="${INTEROP_PY_TIMEOUT:-300}"     # seconds, whole pytest run
NODE_TIMEOUT="${INTEROP_NODE_TIMEOUT:-180}" # seconds, whole node --test run

say() { printf '\n=== %s ===\n' "$*"; }
die() { printf 'interop: %s\n' "$*" >&2; exit 1; }

case "$KIND" in
  redlockd)
    if [[ $# -ge 1 ]]; then
      BIN="$1"
    else
      say "cargo build --release"
      (cd "$ROOT" && cargo build --release)
      BIN="$ROOT/target/release/redlockd"
    fi
    ;;
  redis)
    BIN="${1:-$(command -v redis-server || true)}"
    [[ -n "$BIN" ]] || die "INTEROP_SERVER=redis but no redis-server on PATH"
    ;;
  *) die "INTEROP_SERVER must be 'redlockd' or 'redis', not '$KIND'" ;;
esac
[[ -x "$BIN" ]] || die "server binary '$BIN' is not executable"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

command -v python3 >/dev/null || die "python3 is required"
command -v node >/dev/null || die "node is required"
command -v npm >/dev/null || die "npm is required"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/redlockd-interop.XXXXXX")"
PIDS=()
PORTS=()

NAME=interop
# shellcheck source=nodes.sh
source "$HERE/nodes.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Python venv (pinned), reused when requirements.txt is unchanged --------------
say "python clients"
VENV="$HERE/.venv"
REQ_SUM="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$REQ_SUM" ]]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check --no-input -q \
    -r "$HERE/requirements.txt" || die "pip install failed"
  echo "$REQ_SUM" >"$VENV/.requirements.sha256"
else
  echo "venv up to date ($VENV)"
fi
"$VENV/bin/python" -c 'import importlib.metadata as m
for p in ("redis", "pottery", "python-redis-lock", "limits", "pytest"):
    print(f"  {p}=={m.version(p)}")'

# --- Node modules (npm ci from the committed lockfile) -----------------------------
say "node clients"
LOCK_SUM="$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)"
if [[ ! -d "$HERE/node_modules" || "$(cat "$HERE/node_modules/.lock.sha256" 2>/dev/null)" != "$LOCK_SUM" ]]; then
  (cd "$HERE" && timeout 600 npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
  echo "$LOCK_SUM" >"$HERE/node_modules/.lock.sha256"
else
  echo "node_modules up to date"
fi
(cd "$HERE" && node -e 'const fs = require("fs");
for (const p of ["ioredis", "redlock", "redis"])
  console.log(`  ${p}@${JSON.parse(fs.readFileSync(`node_modules/${p}/package.json`)).version}`)')

# --- Servers ---------------------------------------------------------------------
say "starting $NUM_NODES $KIND nodes"
echo "binary: $BIN"
start_nodes "$NUM_NODES"
echo "nodes: $NODES"

# --- Nodes with default flags -----------------------------------------------------
# Clients whose defaults store long TTLs (Symfony's RedisStore: 300 s initialTtl; the
# limits and rate-limiter-flexible rate limiters: 60-120 s windows) run against three
# nodes of their own with redlockd's default flags (declared new with `redlockd init`,
# as an operator would), so the shared nodes keep their manual clock and 30 s max-ttl.
DEFAULT_NODES="$(echo "$NODES" | cut -d, -f1-3)"
if [[ "$KIND" == redlockd ]]; then
  say "starting 3 redlockd nodes with default flags"
  read -r -a DEFAULT_PORTS <<<"$(python3 "$HERE/tools.py" free-ports 3)"
  DEFAULT_NODES=""
  for port in "${DEFAULT_PORTS[@]}"; do
    "$BIN" init --dir "$WORK/default-dir-$port" >/dev/null || die "redlockd init failed"
    NO_COLOR=1 "$BIN" --bind 127.0.0.1 --port "$port" \
      --dir "$WORK/default-dir-$port" \
      >"$WORK/default-node-$port.log" 2>&1 </dev/null &
    PIDS+=("$!")
    PORTS+=("$port")
    DEFAULT_NODES="${DEFAULT_NODES:+$DEFAULT_NODES,}127.0.0.1:$port"
  done
  for port in "${DEFAULT_PORTS[@]}"; do
    python3 "$HERE/tools.py" wait-ping "127.0.0.1:$port" 20 || die "default node $port did not answer PING"
  done
fi
echo "default-flag nodes: $DEFAULT_NODES"

export INTEROP_SERVER="$KIND" INTEROP_SERVER_BIN="$BIN" INTEROP_NODES="$NODES" INTEROP_LOG_DIR="$WORK"
export INTEROP_DEFAULT_NODES="$DEFAULT_NODES"

# --- Runs ------------------------------------------------------------------------
RESULTS=()
FAILED=0
record() { # name rc
  if [[ "$2" -eq 0 ]]; then RESULTS+=("PASS  $1"); else RESULTS+=("FAIL  $1 (exit $2)"); FAILED=$((FAILED + 1)); fi
}

say "python: pytest (redis-py, pottery, python-redis-lock, limits)"
set +e
(cd "$HERE/python" && timeout -k 10 "$PY_TIMEOUT" "$VENV/bin/python" -m pytest \
  -p no:cacheprovider -v --tb=short --durations=5 .)
rc=$?
set -e
[[ $rc -eq 5 ]] && echo "interop: pytest collected no tests" >&2
record "python (pytest)" "$rc"

say "node: node --test (ioredis + redlock, node-redis, redis-semaphore, BullMQ; kill -9 keeps durable keys)"
set +e
# The spec report to the log, a TAP report to a file: node --test exits 0 when it finds
# no test file, so check_ran.sh fails the run unless every file's tests ran.
NODE_FILES=("$HERE"/node/*.test.js)
(cd "$HERE" && timeout -k 10 "$NODE_TIMEOUT" node --test --test-concurrency=1 \
  --test-timeout=60000 --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$WORK/node.tap" node/)
rc=$?
if [[ $rc -eq 0 ]]; then
  "$HERE/check_ran.sh" "$WORK/node.tap" "${#NODE_FILES[@]}"
  rc=$?
fi
set -e
record "node (node --test)" "$rc"

say "php: Symfony Lock (RedisStore, CombinedStore; phpredis and Predis)"
command -v php >/dev/null || die "php is required (Debian: php-cli php-redis php-symfony-lock php-predis)"
PHP_NODES="$DEFAULT_NODES"
set +e
INTEROP_PHP_NODES="$PHP_NODES" timeout -k 10 120 php "$HERE/php/symfony_lock.php"
rc=$?
set -e
record "php (Symfony Lock)" "$rc"

say "cluster clients: redis-py RedisCluster, ioredis Cluster, node-redis createCluster"
if [[ "$KIND" == redlockd ]]; then
  # Three clusters of 3 nodes (cluster mode map), one process each, on ports the system
  # picks; a ready line (JSON, first stdout line) names each one's nodes. The clients'
  # cases use the first; node-redlock votes over all three and kills the third.
  CLUSTERS=""
  for c in 1 2 3; do
    NO_COLOR=1 "$BIN" group --clusters 1 --nodes-per-cluster 3 --base-port 0 --bind 127.0.0.1 \
      --max-ttl 30s --restart-delay 0 --dir "$WORK/cluster$c" \
      >"$WORK/cluster$c.out" 2>"$WORK/cluster$c.log" </dev/null &
    PIDS+=("$!")
    DOWN_PID="$!"
    for _ in $(seq 1 200); do [[ -s "$WORK/cluster$c.out" ]] && break; sleep 0.05; done
    seeds="$(head -n 1 "$WORK/cluster$c.out" | python3 -c 'import json, sys
print(",".join(n["addr"] for n in json.load(sys.stdin)["nodes"]))')" || die "cluster $c printed no ready line"
    CLUSTERS="${CLUSTERS:+$CLUSTERS;}$seeds"
  done
  SEEDS="${CLUSTERS%%;*}"
  echo "cluster seeds: $CLUSTERS"
  set +e
  (cd "$HERE/python_cluster" && INTEROP_CLUSTER_SEEDS="$SEEDS" INTEROP_REDLOCKD="$BIN" timeout -k 10 120 \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -c "$HERE/python/pytest.ini" -v --tb=short .)
  rc=$?
  set -e
  record "python cluster (RedisCluster)" "$rc"
  set +e
  (cd "$HERE" && INTEROP_CLUSTER_SEEDS="$SEEDS" INTEROP_CLUSTERS="$CLUSTERS" INTEROP_REDLOCKD="$BIN" \
    INTEROP_CLUSTER_DOWN_PID="$DOWN_PID" timeout -k 10 120 node --test --test-concurrency=1 \
    --test-timeout=60000 --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$WORK/node-cluster.tap" node_cluster/)
  rc=$?
  [[ $rc -eq 0 ]] && { "$HERE/check_ran.sh" "$WORK/node-cluster.tap" 7; rc=$?; }
  set -e
  record "node cluster (ioredis Cluster, node-redis createCluster, node-redlock over 3 clusters, BullMQ and a stream in a moved slot)" "$rc"
else
  echo "skipped: the cluster clients run against a redlockd cluster only (a Redis Cluster needs its own setup)"
fi

say "lock-delay pass: the expiry cases again, on 5 nodes with --lock-delay 5s"
# The cases where a lock expires and a second client acquires it (pytest -m expiry; node
# tests named "expiry...") on nodes started with --lock-delay 5s: each checks that right
# after the expiry the second client is refused, still in the delay's last millisecond,
# and acquires once the manual clock passes the delay (INTEROP_LOCK_DELAY_MS).
if [[ "$KIND" == redlockd ]]; then
  start_nodes "$NUM_NODES" --lock-delay 5s
  echo "nodes: $NODES"
  set +e
  (cd "$HERE/python" && INTEROP_NODES="$NODES" INTEROP_LOCK_DELAY_MS=5000 timeout -k 10 120 \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -v --tb=short -m expiry .)
  rc=$?
  set -e
  record "python expiry cases with --lock-delay 5s (pytest -m expiry)" "$rc"
  mapfile -t EXPIRY_FILES < <(grep -l "^test('expiry" "$HERE"/node/*.test.js)
  set +e
  (cd "$HERE" && INTEROP_NODES="$NODES" INTEROP_LOCK_DELAY_MS=5000 timeout -k 10 120 \
    node --test --test-concurrency=1 --test-timeout=60000 --test-name-pattern='^expiry' \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$WORK/node-delay.tap" "${EXPIRY_FILES[@]}")
  rc=$?
  [[ $rc -eq 0 ]] && { "$HERE/check_ran.sh" "$WORK/node-delay.tap" "${#EXPIRY_FILES[@]}" pass; rc=$?; }
  set -e
  record "node expiry cases with --lock-delay 5s (node --test --test-name-pattern ^expiry)" "$rc"
else
  echo "skipped: redis-server has no lock-delay"
  RESULTS+=("SKIP  expiry cases with --lock-delay 5s (redis-server has no lock-delay)")
fi

say "summary ($KIND)"
for line in "${RESULTS[@]}"; do echo "$line"; done
if [[ -f "$WORK/latency.txt" ]]; then cat "$WORK/latency.txt"; fi
if [[ $FAILED -ne 0 ]]; then
  for log in "$WORK"/*.log; do
    [[ -s "$log" ]] || continue
    echo "--- $(basename "$log") (last 20 lines) ---"
    tail -n 20 "$log"
  done
  die "$FAILED suite(s) failed against $KIND"
fi
echo "interop: all suites passed against $KIND"
