#!/usr/bin/env bash
# Redis 7.0's own Tcl units that redlockd passes, one after another, against a node each
# (tests/interop/redis_suite.sh runs one unit; read its header for the skips).
#
#   tests/interop/redis_units.sh [redlockd-binary] [unit ...]
#
# The Redis source comes from Debian's source package of the installed redis-server
# (the upstream 7.0.15 tarball; only its tests/ and runtest are used, nothing is built),
# downloaded once into target/redis-src with a private apt state (no change to the
# machine's apt configuration). REDIS_SRC=DIR uses a tree you already have. Needs tclsh
# (Debian: tcl). Exit status is non-zero when any unit fails.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${1:-$ROOT/target/release/redlockd}"
shift || true
# unit, and whether it needs LENIENT=1 (encodings asserted after CONFIG SET of encoding
# thresholds, which redlockd stores but OBJECT ENCODING does not follow; DEBUG RELOAD)
UNITS=(
  "unit/multi 0"
  "unit/expire 0"
  "unit/keyspace 1"
  "unit/type/incr 0"
  "unit/type/string 1"
  "unit/type/hash 1"
  "unit/type/set 1"
  "unit/type/list 1"
  "unit/type/zset 1"
  "unit/type/stream 0"
  "unit/type/stream-cgroups 0"
  "unit/sort 0"
  "unit/dump 0"
  "unit/bitops 0"
  "unit/bitfield 0"
  "unit/hyperloglog 0"
  "unit/geo 0"
)
if [[ $# -gt 0 ]]; then
  WANTED=("$@")
  SELECTED=()
  for u in "${UNITS[@]}"; do
    for w in "${WANTED[@]}"; do [[ "${u%% *}" == "$w" ]] && SELECTED+=("$u"); done
  done
  [[ ${#SELECTED[@]} -eq ${#WANTED[@]} ]] || { echo "unknown unit in: $*"; exit 2; }
  UNITS=("${SELECTED[@]}")
fi

fetch_source() { # dest
  local dest="$1" state version tarball
  state="$(mktemp -d)"
  trap 'rm -rf "$state"' RETURN
  version="$(dpkg-query -W -f '${Version}' redis-server 2>/dev/null)" \
    || { echo "redis-server's Debian package is not installed"; return 1; }
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/dl"
  printf '%s\n' \
    "deb-src http://deb.debian.org/debian bookworm main" \
    "deb-src http://deb.debian.org/debian bookworm-updates main" \
    "deb-src http://deb.debian.org/debian-security bookworm-security main" >"$state/sources.list"
  local opts=(-q -o "Dir::Etc::sourcelist=$state/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache"
    -o APT::Sandbox::User=root)
  timeout 300 apt-get "${opts[@]}" update >/dev/null
  (cd "$state/dl" && timeout 300 apt-get "${opts[@]}" source --download-only "redis=$version" >/dev/null)
  tarball="$(ls "$state"/dl/redis_*.orig.tar.gz)"
  mkdir -p "$dest.tmp"
  tar -xzf "$tarball" -C "$dest.tmp" --strip-components=1
  mv "$dest.tmp" "$dest"
  echo "Redis source $(basename "$tarball") from Debian's redis $version -> $dest"
}

SRC="${REDIS_SRC:-$ROOT/target/redis-src}"
if [[ ! -x "$SRC/runtest" ]]; then
  [[ -z "${REDIS_SRC:-}" ]] || { echo "no runtest in REDIS_SRC=$SRC"; exit 1; }
  rm -rf "$SRC" "$SRC.tmp"
  fetch_source "$SRC" || { echo "could not fetch Redis's source (Debian deb-src)"; exit 1; }
fi
grep -q '"7.0.15"' "$SRC/src/version.h" || { echo "$SRC is not Redis 7.0.15"; exit 1; }

RESULTS=()
FAILED=0
for entry in "${UNITS[@]}"; do
  unit="${entry%% *}" lenient="${entry##* }"
  log="$(mktemp)"
  start=$SECONDS
  set +e
  LENIENT="$lenient" "$HERE/redis_suite.sh" "$SRC" "$BIN" "$unit" >"$log" 2>&1
  rc=$?
  set -e
  clean="$(sed 's/\x1b\[[0-9;]*m//g' "$log")"
  ok=$(grep -c '^\[ok\]' <<<"$clean" || true)
  err=$(grep -c '^\[err\]\|^\[exception\]' <<<"$clean" || true)
  line="$(printf '%-20s %4d ok %3d failed  %3ds' "$unit" "$ok" "$err" $((SECONDS - start)))"
  if [[ $rc -ne 0 || $err -ne 0 || $ok -eq 0 ]]; then
    FAILED=$((FAILED + 1))
    RESULTS+=("FAIL  $line (exit $rc)")
    grep -A3 '^\[err\]\|^\[exception\]' <<<"$clean" | head -40 || true
    tail -n 15 <<<"$clean"
  else
    RESULTS+=("PASS  $line")
  fi
  rm -f "$log"
done
printf '%s\n' "${RESULTS[@]}"
[[ $FAILED -eq 0 ]] || { echo "redis_units: $FAILED unit(s) failed"; exit 1; }
echo "redis_units: all ${#UNITS[@]} units passed"
