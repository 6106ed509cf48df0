#!/usr/bin/env bash
# Builds the Python wheel and the npm tarballs from a release binary of redlockd:
#
#   packaging/build.sh BINARY [OUT]        (OUT default: target/packages)
#
# OUT/ gets redlockd-VERSION-py3-none-TAG.whl, redlockd-VERSION.tgz and
# redlockd-linux-x64-VERSION.tgz; VERSION is Cargo.toml's. The binary is stripped
# into the packages. The wheel's metadata comes from maturin (pinned, from PyPI, in
# a venv under OUT/work); its platform tag from the glibc the binary needs.
# packaging/test.sh OUT installs and tests them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:?usage: packaging/build.sh BINARY [OUT]}"
OUT="${2:-$ROOT/target/packages}"
# Absolute: later steps run from other directories.
mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)"
MATURIN_VERSION=1.16.0

die() { printf 'packaging/build.sh: %s\n' "$*" >&2; exit 1; }
[[ -x "$BIN" ]] || die "$BIN is not an executable file"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
[[ "$(uname -s) $(uname -m)" == "Linux x86_64" ]] || die "builds linux-x64 packages only, on Linux x86-64"
command -v strip >/dev/null || die "strip (binutils) is required"
command -v objdump >/dev/null || die "objdump (binutils) is required"
command -v npm >/dev/null || die "npm is required"

VERSION="$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml")"
[[ -n "$VERSION" ]] || die "no version in Cargo.toml"
"$BIN" --version | grep -qx "redlockd $VERSION" || die "$BIN is not redlockd $VERSION ($("$BIN" --version))"

WORK="$OUT/work"
rm -rf "$WORK"
mkdir -p "$WORK"
rm -f "$OUT"/redlockd-*.whl "$OUT"/redlockd-*.tgz

strip -o "$WORK/redlockd" "$BIN"
chmod 755 "$WORK/redlockd"
"$WORK/redlockd" --version >/dev/null || die "the stripped binary does not run"

echo "== wheel"
if [[ ! -x "$OUT/venv/bin/maturin" ]]; then
  python3 -m venv "$OUT/venv"
  timeout 300 "$OUT/venv/bin/pip" install -q --disable-pip-version-check "maturin==$MATURIN_VERSION" \
    || die "pip install maturin==$MATURIN_VERSION"
fi
(cd "$ROOT/packaging/python" && timeout 300 "$OUT/venv/bin/maturin" pep517 write-dist-info \
  --metadata-directory "$WORK/meta" >/dev/null) || die "maturin: cannot make the wheel's metadata"
python3 "$ROOT/packaging/python/assemble_wheel.py" \
  --dist-info "$WORK/meta/redlockd-$VERSION.dist-info" --binary "$WORK/redlockd" \
  --python-src "$ROOT/packaging/python/python" --out "$OUT" || die "cannot assemble the wheel"

echo "== npm"
for pkg in redlockd linux-x64; do
  cp -r "$ROOT/packaging/npm/$pkg" "$WORK/npm-$pkg"
done
mkdir -p "$WORK/npm-linux-x64/bin"
cp "$WORK/redlockd" "$WORK/npm-linux-x64/bin/redlockd"
# The versions follow Cargo.toml's; the main package pins its platform package.
node -e '
  const fs = require("fs"); const [version, ...files] = process.argv.slice(1);
  for (const f of files) {
    const p = JSON.parse(fs.readFileSync(f, "utf8")); p.version = version;
    if (p.optionalDependencies) for (const k of Object.keys(p.optionalDependencies)) p.optionalDependencies[k] = version;
    fs.writeFileSync(f, JSON.stringify(p, null, 2) + "\n");
  }' "$VERSION" "$WORK/npm-redlockd/package.json" "$WORK/npm-linux-x64/package.json"
for pkg in linux-x64 redlockd; do
  (cd "$WORK/npm-$pkg" && npm pack --silent --pack-destination "$OUT" >/dev/null) || die "npm pack $pkg"
done

ls -l "$OUT"/redlockd-*.whl "$OUT"/redlockd-*.tgz
