#!/usr/bin/env bash
# Mutation testing of the safety-critical code with cargo-mutants (crates.io): the
# fencing-token commands and the Redlock client's quorum, validity and fenced acquire,
# against the tests that cover them. Not part of every CI run (minutes per mutant).
#
#   tests/mutants.sh                     every mutant of the files below
#   MUTANTS_RE='mod\.rs:(425|442):' tests/mutants.sh   only names matching a regex
#   MUTANTS_BUDGET=3600 tests/mutants.sh   stop after this many seconds (default 2 h)
#
# Works on a scratch copy (the tree is never mutated in place). src/lib.rs declares
# every module with its own `#[cfg(...)]` attribute, not inside a macro: cargo-mutants
# walks `mod` lines and would find no mutant under a macro's. Results: $SCRATCH/mutants.out
# (caught.txt, missed.txt, timeout.txt, unviable.txt), printed at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUDGET="${MUTANTS_BUDGET:-7200}"
RE="${MUTANTS_RE:-.}"
SCRATCH="${MUTANTS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/redlockd-mutants.XXXXXX")}"

FILES=(
  src/commands/families/fencing.rs
  src/redlock/mod.rs
  src/redlock/fenced.rs
)
# The tests that cover them (integration test filters, and the lib's unit tests).
FILTERS=(redlock_inprocess redlock:: fenc mutual_exclusion --skip fencing_processes)

cargo mutants --version >/dev/null 2>&1 || {
  echo "installing cargo-mutants (crates.io)"
  timeout 900 cargo install --locked cargo-mutants
}

echo "scratch copy: $SCRATCH"
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$SCRATCH"
# Reuse a debug build if there is one: the first mutant then rebuilds only the crate.
if [[ -d "$ROOT/target/debug" && ! -e "$SCRATCH/target" ]]; then
  mkdir -p "$SCRATCH/target" && cp -a "$ROOT/target/debug" "$SCRATCH/target/"
fi

args=()
for f in "${FILES[@]}"; do args+=(--file "$f"); done
cd "$SCRATCH"
set +e
timeout -k 30 "$BUDGET" cargo mutants --in-place --timeout 240 --build-timeout 900 \
  -C --lib -C --test=integrations "${args[@]}" --re "$RE" -- -- "${FILTERS[@]}"
rc=$?
set -e
for kind in caught missed timeout unviable; do
  f="$SCRATCH/mutants.out/$kind.txt"
  [[ -f "$f" ]] && printf '%s: %s\n' "$kind" "$(wc -l <"$f")"
done
if [[ -s "$SCRATCH/mutants.out/missed.txt" ]]; then
  echo "missed:"; cat "$SCRATCH/mutants.out/missed.txt"
fi
[[ $rc -eq 124 ]] && echo "stopped by MUTANTS_BUDGET ($BUDGET s): the counts above are partial"
exit "$rc"
