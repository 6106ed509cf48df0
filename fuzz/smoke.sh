#!/usr/bin/env bash
# Builds every fuzz target and runs each briefly from its seeds, so the targets cannot
# rot unseen (fuzz/ is its own workspace: the main crate's build never compiles it).
#
#   fuzz/smoke.sh            FUZZ_SECONDS=20 per target (libFuzzer's -max_total_time)
#
# Needs cargo-fuzz (installed from crates.io if missing) and a nightly compiler's
# flags: stable with RUSTC_BOOTSTRAP=1 builds the sanitizer instrumentation.
# Exit status non-zero if a target fails to build, crashes, or finds nothing to run.
set -euo pipefail

FUZZ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SECS="${FUZZ_SECONDS:-20}"
export RUSTC_BOOTSTRAP=1

die() { printf 'fuzz smoke: %s\n' "$*" >&2; exit 1; }

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz (crates.io)"
  timeout 900 cargo install --locked cargo-fuzz || die "cargo install cargo-fuzz failed"
fi
cargo fuzz --version

cd "$FUZZ"
mapfile -t TARGETS < <(cargo fuzz list)
[[ ${#TARGETS[@]} -gt 0 ]] || die "cargo fuzz list found no target"
echo "targets: ${TARGETS[*]}"

started=$(date +%s)
timeout -k 10 1800 cargo fuzz build || die "cargo fuzz build failed"
echo "built in $(( $(date +%s) - started )) s"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/redlockd-fuzz.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
for t in "${TARGETS[@]}"; do
  corpus="$WORK/$t"
  mkdir -p "$corpus"
  # A copy of the seeds: new inputs found in the run do not land in the tree.
  if [[ -d "$FUZZ/seeds/$t" ]] && compgen -G "$FUZZ/seeds/$t/*" >/dev/null; then
    cp "$FUZZ/seeds/$t"/* "$corpus/"
  fi
  echo "=== $t: ${SECS} s from $(ls "$corpus" | wc -l) seed(s)"
  t0=$(date +%s)
  # libFuzzer exits non-zero on a crash, a leak or a timeout; the artifact goes to
  # fuzz/artifacts/$t/ (git-ignored), and its path is in the output.
  timeout -k 10 $((SECS + 120)) cargo fuzz run "$t" "$corpus" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    2>"$WORK/$t.log" || { tail -n 40 "$WORK/$t.log" >&2; die "$t failed"; }
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$t.log" | tail -n 1)"
  [[ -n "$runs" && "$runs" -gt 0 ]] || { tail -n 20 "$WORK/$t.log" >&2; die "$t ran no input"; }
  echo "$t: $runs inputs in $(( $(date +%s) - t0 )) s, no crash"
done
echo "fuzz smoke: ${#TARGETS[@]} targets built and run in $(( $(date +%s) - started )) s"
