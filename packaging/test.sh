#!/usr/bin/env bash
# Installs the packages packaging/build.sh made into a fresh venv and a fresh npm
# folder (under OUT; the tests see only what was installed, never this repository's
# sources) and runs the packages' own tests:
#
#   packaging/test.sh [OUT]          (OUT default: target/packages)
#
# Every step is bounded; any failure exits non-zero.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(cd "${1:-$ROOT/target/packages}" && pwd)"
die() { printf 'packaging/test.sh: %s\n' "$*" >&2; exit 1; }

WHEEL="$(ls "$OUT"/redlockd-*.whl 2>/dev/null | head -1)"
NPM_MAIN="$(ls "$OUT"/redlockd-[0-9]*.tgz 2>/dev/null | head -1)"
NPM_PLATFORM="$(ls "$OUT"/redlockd-linux-x64-*.tgz 2>/dev/null | head -1)"
[[ -n "$WHEEL" && -n "$NPM_MAIN" && -n "$NPM_PLATFORM" ]] || die "no packages in $OUT (run packaging/build.sh)"

# Under the build tree, removed at the end; nothing there reads this repository.
SCRATCH="$(mktemp -d "$OUT/test.XXXXXX")"
cleanup() { rm -rf "$SCRATCH"; }
trap cleanup EXIT

echo "== Python: a fresh venv, the wheel from $OUT, the tests copied out"
python3 -m venv "$SCRATCH/venv"
PY="$SCRATCH/venv/bin/python"
timeout 300 "$PY" -m pip install -q --disable-pip-version-check -r "$ROOT/packaging/python/tests/requirements.txt" \
  || die "pip install the tests' requirements"
timeout 120 "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$OUT" redlockd \
  || die "pip install the wheel"
cp -r "$ROOT/packaging/python/tests" "$SCRATCH/pytests"
(
  cd "$SCRATCH/pytests"
  unset PYTHONPATH REDLOCKD_BIN
  "$SCRATCH/venv/bin/redlockd" --version
  "$PY" -m redlockd --version
  # -n 2: two workers, each with its own fixtures at the same time.
  timeout 600 "$PY" -m pytest -q -p xdist -n 2 -p no:cacheprovider
) || die "the Python package's tests"

echo "== Node: a fresh folder, the tarballs from $OUT, the tests copied out"
NODE_DIR="$SCRATCH/npm"
cp -r "$ROOT/packaging/npm/tests" "$NODE_DIR"
(
  cd "$NODE_DIR"
  unset REDLOCKD_BIN
  timeout 600 npm install --no-audit --no-fund --loglevel=error || die "npm install the tests' dependencies"
  # Offline: the platform package is not on the registry; its tarball satisfies the
  # main package's optional dependency.
  timeout 300 npm install --offline --no-audit --no-fund --no-save --loglevel=error "$NPM_PLATFORM" "$NPM_MAIN" \
    || die "npm install the tarballs"
  npx --offline redlockd --version
  timeout 300 node --test node/ || die "node --test"
  NO_COLOR=1 timeout 300 npx --offline vitest run --dir vitest || die "vitest"
) || die "the Node package's tests"

echo "== Node: without the platform package, a clear error"
mkdir "$SCRATCH/npm-missing"
(
  cd "$SCRATCH/npm-missing"
  npm init -y >/dev/null
  timeout 300 npm install --offline --no-audit --no-fund --loglevel=error "$NPM_MAIN" || die "npm install the main tarball"
  [[ ! -e node_modules/@redlockd/linux-x64 ]] || die "the platform package came along"
  if out="$(npx --offline redlockd --version 2>&1)"; then die "npx redlockd ran without its binary: $out"; fi
  grep -q "@redlockd/linux-x64, which holds the redlockd binary for this platform, is not installed" <<<"$out" \
    || die "unclear error without the platform package: $out"
  node -e 'require("redlockd").startServer().then(() => process.exit(1), (e) => {
    if (!/npm install --save-dev @redlockd\/linux-x64@/.test(e.message)) { console.error(e.message); process.exit(1); }
  })' || die "startServer() without the platform package"
  echo "clear error: ${out%%$'\n'*}"
)

# Every binary these tests ran lives under $SCRATCH: none may still be running.
left=""
for pid in $(pgrep -x redlockd || true); do
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  if [[ "$exe" == "$SCRATCH"/* ]]; then left+="$pid "; fi
done
[[ -z "$left" ]] || die "redlockd processes left running: $left"
echo "packages: all tests passed"
