#!/usr/bin/env bash
# The Java and Go batteries: Redisson, Jedis, Lettuce (Maven, JUnit 5) and redsync,
# bsm/redislock, rueidis + rueidislock, go-redis, asynq (go test), with their default
# settings, against 5 independent nodes.
#
#   tests/interop/jvm_go.sh path/to/redlockd
#   INTEROP_SERVER=redis tests/interop/jvm_go.sh [path/to/redis-server]
#   INTEROP_ONLY=java|go  runs one battery
#   INTEROP_JAVA_TEST=RedissonTest#semaphore  INTEROP_GO_RUN=Redsync  pick cases
#
# Nodes are started as run.sh starts them (redlockd: --max-ttl 30s --restart-delay 0
# --clock manual --enable-debug-command). Maven's repository and Go's module and
# build caches live under target/ of the checkout (target/interop-m2,
# target/interop-go): resolved once, reused by later runs, never needed from outside
# the build tree. Every process started here is stopped on exit. Against redlockd the
# expiry cases then run again on 5 nodes with --lock-delay 5s.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KIND="${INTEROP_SERVER:-redlockd}"
ONLY="${INTEROP_ONLY:-}"
NUM_NODES=5
JAVA_TIMEOUT="${INTEROP_JAVA_TIMEOUT:-600}" # seconds, whole mvn test (first run resolves)
GO_TIMEOUT="${INTEROP_GO_TIMEOUT:-600}"     # seconds, whole go test (first run downloads, builds)

say() { printf '\n=== %s ===\n' "$*"; }
die() { printf 'jvm_go: %s\n' "$*" >&2; exit 1; }

case "$KIND" in
  redlockd) BIN="${1:-}"; [[ -n "$BIN" ]] || die "usage: jvm_go.sh path/to/redlockd" ;;
  redis)
    BIN="${1:-$(command -v redis-server || true)}"
    [[ -n "$BIN" ]] || die "INTEROP_SERVER=redis but no redis-server on PATH"
    ;;
  *) die "INTEROP_SERVER must be 'redlockd' or 'redis', not '$KIND'" ;;
esac
[[ -x "$BIN" ]] || die "server binary '$BIN' is not executable"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
case "$ONLY" in ""|java|go) ;; *) die "INTEROP_ONLY must be java or go, not '$ONLY'" ;; esac

command -v python3 >/dev/null || die "python3 is required (tools.py)"
if [[ "$ONLY" != go ]]; then
  command -v java >/dev/null || die "java is required"
  command -v mvn >/dev/null || die "mvn is required"
fi
[[ "$ONLY" == java ]] || command -v go >/dev/null || die "go is required"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/redlockd-jvm-go.XXXXXX")"
PIDS=()
PORTS=()

NAME=jvm_go
# shellcheck source=nodes.sh
source "$HERE/nodes.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Build-tree caches ---------------------------------------------------------------
M2="$ROOT/target/interop-m2"
export GOPATH="$ROOT/target/interop-go"
export GOMODCACHE="$GOPATH/mod" GOCACHE="$GOPATH/cache" GOFLAGS="-modcacherw -mod=readonly"
export GOTOOLCHAIN=local
mkdir -p "$M2" "$GOMODCACHE" "$GOCACHE"
MVN=(mvn -B -ntp -Dmaven.repo.local="$M2")

if [[ "$ONLY" != go ]]; then
  say "java clients: resolve (Maven repository $M2)"
  # resolves and compiles, so the timed run below is mostly the cases (surefire's JUnit
  # provider is resolved by that run, once)
  (cd "$HERE/java" && timeout -k 10 "$JAVA_TIMEOUT" "${MVN[@]}" -q test-compile) \
    || die "mvn: resolving or compiling the Java battery failed"
  sed -n 's/^ *<\(redisson\|jedis\|lettuce\|junit\)\.version>\(.*\)<.*/  \1 \2/p' "$HERE/java/pom.xml"
fi
if [[ "$ONLY" != java ]]; then
  say "go clients: download and build (GOMODCACHE $GOMODCACHE)"
  (cd "$HERE/go" && timeout -k 10 "$GO_TIMEOUT" go mod download && timeout -k 10 "$GO_TIMEOUT" go test -count=1 -run '^$' .) \
    || die "go build of the Go battery failed"
  (cd "$HERE/go" && go list -m -f '  {{.Path}} {{.Version}}' github.com/go-redsync/redsync/v4 \
    github.com/bsm/redislock github.com/redis/rueidis github.com/redis/go-redis/v9 github.com/hibiken/asynq)
fi

# --- Servers ---------------------------------------------------------------------
say "starting $NUM_NODES $KIND nodes"
echo "binary: $BIN"
start_nodes "$NUM_NODES"
echo "nodes: $NODES"

export INTEROP_SERVER="$KIND" INTEROP_SERVER_BIN="$BIN" INTEROP_NODES="$NODES" INTEROP_LOG_DIR="$WORK"

# --- Runs ------------------------------------------------------------------------
RESULTS=()
FAILED=0
record() { # name rc seconds
  if [[ "$2" -eq 0 ]]; then RESULTS+=("PASS  $1 (${3}s)"); else RESULTS+=("FAIL  $1 (exit $2, ${3}s)"); FAILED=$((FAILED + 1)); fi
}

if [[ "$ONLY" != go ]]; then
  say "java: mvn test (Redisson, Jedis, Lettuce)"
  t0=$SECONDS
  set +e
  (cd "$HERE/java" && timeout -k 10 "$JAVA_TIMEOUT" "${MVN[@]}" test ${INTEROP_JAVA_TEST:+-Dtest="$INTEROP_JAVA_TEST"})
  rc=$?
  set -e
  record "java (mvn test: Redisson, Jedis, Lettuce, their cluster clients)" "$rc" "$((SECONDS - t0))"
fi

if [[ "$ONLY" != java ]]; then
  say "go: go test (redsync, bsm/redislock, rueidislock, go-redis, asynq)"
  t0=$SECONDS
  set +e
  (cd "$HERE/go" && timeout -k 10 "$GO_TIMEOUT" go test -count=1 -p 1 -timeout "$((GO_TIMEOUT - 20))s" ${INTEROP_GO_RUN:+-run "$INTEROP_GO_RUN"} -v .)
  rc=$?
  set -e
  record "go (go test: redsync, redislock, rueidislock, go-redis, ClusterClient, asynq)" "$rc" "$((SECONDS - t0))"
fi

# --- The lock-delay pass -----------------------------------------------------------
# The cases where a lock expires and a second client acquires it (JUnit tag "expiry";
# Go's Test*Expiry) again, on nodes started with --lock-delay 5s: each checks that right
# after the expiry the second client is refused, still in the delay's last millisecond,
# and acquires once the manual clock passes the delay (INTEROP_LOCK_DELAY_MS).
if [[ "$KIND" == redlockd ]]; then
  say "lock-delay pass: the expiry cases again, on $NUM_NODES nodes with --lock-delay 5s"
  start_nodes "$NUM_NODES" --lock-delay 5s
  echo "nodes: $NODES"
  if [[ "$ONLY" != go ]]; then
    t0=$SECONDS
    REPORTS="$HERE/java/target/surefire-reports"
    rm -rf "$REPORTS" # the first pass's reports: count only this pass's cases
    set +e
    (cd "$HERE/java" && INTEROP_NODES="$NODES" INTEROP_LOCK_DELAY_MS=5000 \
      timeout -k 10 "$JAVA_TIMEOUT" "${MVN[@]}" test -Dgroups=expiry)
    rc=$?
    if [[ $rc -eq 0 ]]; then
      # surefire runs no case and passes when no case has the tag: count them
      ran="$(cat "$REPORTS"/TEST-*.xml 2>/dev/null | grep -c '<testcase ' || true)"
      skipped="$(cat "$REPORTS"/TEST-*.xml 2>/dev/null | grep -c '<skipped' || true)"
      if [[ "$ran" -lt 1 || "$skipped" -ne 0 ]]; then
        echo "jvm_go: java lock-delay pass: $ran case(s) ran, $skipped skipped" >&2
        rc=1
      fi
    fi
    set -e
    record "java expiry cases with --lock-delay 5s (mvn test -Dgroups=expiry)" "$rc" "$((SECONDS - t0))"
  fi
  if [[ "$ONLY" != java ]]; then
    t0=$SECONDS
    set +e
    (cd "$HERE/go" && INTEROP_NODES="$NODES" INTEROP_LOCK_DELAY_MS=5000 timeout -k 10 "$GO_TIMEOUT" \
      go test -count=1 -p 1 -timeout "$((GO_TIMEOUT - 20))s" -run 'Expiry$' -v . | tee "$WORK/go-delay.out")
    rc=$?
    if [[ $rc -eq 0 ]] && { ! grep -q '^--- PASS: Test.*Expiry' "$WORK/go-delay.out" || grep -q '^--- SKIP' "$WORK/go-delay.out"; }; then
      echo "jvm_go: go lock-delay pass: no Test*Expiry case passed, or one was skipped" >&2
      rc=1
    fi
    set -e
    record "go expiry cases with --lock-delay 5s (go test -run 'Expiry\$')" "$rc" "$((SECONDS - t0))"
  fi
else
  RESULTS+=("SKIP  expiry cases with --lock-delay 5s (redis-server has no lock-delay)")
fi

say "summary ($KIND)"
for line in "${RESULTS[@]}"; do echo "$line"; done
if [[ $FAILED -ne 0 ]]; then
  for log in "$WORK"/*.log; do
    [[ -s "$log" ]] || continue
    echo "--- $(basename "$log") (last 20 lines) ---"
    tail -n 20 "$log"
  done
  die "$FAILED battery(ies) failed against $KIND"
fi
echo "jvm_go: all batteries passed against $KIND"
