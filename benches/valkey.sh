#!/usr/bin/env bash
# Prints the path of a valkey-server 8 to compare with: the one on PATH, else one built
# from Valkey's source and cached under target/valkey-$VALKEY_TAG/ (a build takes ~3 min
# on 2 cores). The source: $VALKEY_SRC (a checkout or a bare git directory), else the
# local mirror, else a clone from GitHub. When none of that works it prints
# "skipped: <why>" on stderr and exits 1; the benches then run without Valkey.
#
#   benches/valkey.sh            (VALKEY_TAG=8.0.1 by default)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TAG="${VALKEY_TAG:-8.0.1}"
if command -v valkey-server >/dev/null; then
  command -v valkey-server
  exit 0
fi
OUT="$PWD/target/valkey-$TAG"
if [[ -x "$OUT/valkey-server" ]]; then
  echo "$OUT/valkey-server"
  exit 0
fi
skip() { echo "skipped: valkey-server $TAG: $*" >&2; exit 1; }
command -v make >/dev/null && command -v cc >/dev/null || skip "no make or C compiler"
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
from_git() { # a git directory (bare or not) that has the tag
  git --git-dir="$1" archive "$TAG" 2>/dev/null | tar -x -C "$SRC"
}
if [[ -n "${VALKEY_SRC:-}" && -d "$VALKEY_SRC/.git" ]]; then
  from_git "$VALKEY_SRC/.git" || skip "tag $TAG not in $VALKEY_SRC"
elif [[ -n "${VALKEY_SRC:-}" ]]; then
  from_git "$VALKEY_SRC" || skip "tag $TAG not in $VALKEY_SRC"
elif [[ -d /work/.mirror/valkey-io+valkey/repo ]] && from_git /work/.mirror/valkey-io+valkey/repo; then
  :
elif timeout 120 git clone -q --depth 1 --branch "$TAG" https://github.com/valkey-io/valkey "$SRC/clone" 2>/dev/null; then
  mv "$SRC/clone"/* "$SRC/" && rm -rf "$SRC/clone"
else
  skip "no source (set VALKEY_SRC, or let git reach github.com)"
fi
echo "building valkey-server $TAG into $OUT (once)" >&2
LOG="$SRC/build.log"
if ! make -C "$SRC" -j"$(nproc)" BUILD_TLS=no >"$LOG" 2>&1; then
  tail -5 "$LOG" >&2
  skip "the build failed"
fi
mkdir -p "$OUT"
cp "$SRC/src/valkey-server" "$OUT/valkey-server"
echo "$OUT/valkey-server"
