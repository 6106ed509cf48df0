#!/usr/bin/env bash
# Mutation testing of the safety-critical code with cargo-mutants (crates.io), module by
# module, each against the narrow set of unit tests that covers it (docs/testing.md,
# "Mutation testing"). Not part of every CI run.
#
#   tests/mutants.sh                       every module below, in turn
#   tests/mutants.sh fence tokens          only these modules, in this order
#   MUTANTS_RE='fencing\.rs:35' tests/mutants.sh fencing   only mutants matching a regex
#                                          (instead of the module's own, below)
#
# Works on a scratch copy of the committed tree (HEAD; never the tree itself):
# $MUTANTS_DIR, default ${TMPDIR:-/tmp}/redlockd-mutants, kept between runs so that its
# target/ (the `mutants` profile of Cargo.toml: no debug info, incremental) is reused;
# each mutant then recompiles only the crate's changed code and runs a few unit tests.
# Builds run at nice 10. Two lanes can run at once with two MUTANTS_DIRs. Results: $MUTANTS_DIR/out/<module>/mutants.out (caught.txt, missed.txt,
# timeout.txt, unviable.txt); a table of the counts is printed at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="${MUTANTS_DIR:-${TMPDIR:-/tmp}/redlockd-mutants}"

# module; files (space-separated); name regex ('.' for all); test filters of the lib's unit tests
MODULES=(
  "fencing;src/commands/families/fencing.rs;.;families::fencing"
  "tokens;src/durability/tokens.rs;.;durability:: families::fencing"
  "fence;src/durability/fence.rs;.;durability::"
  "restart;src/durability/restart.rs;.;durability::"
  "snapshot;src/durability/snapshot.rs;.;durability::"
  "reach;src/durability/reach.rs;.;durability::"
  "data_dir;src/durability/data_dir.rs;.;durability::"
  # The Redlock client's majority and validity rules: quorum, drift, one round plain and
  # fenced, extend, acquire_within's deadline, the TTL check, the reports' verdicts.
  "redlock;src/redlock/mod.rs src/redlock/fenced.rs;(in|replace) (quorum|drift|AttemptReport::majority_unreachable|RedlockError::nodes_unavailable|Redlock::(quorum|extend|attempt|attempt_fenced|acquire_within)|check_ttl)\\b;redlock::"
  # The flag and ACL-category constants (`1 << n`; a mutant makes one 0).
  "table_flags;src/commands/command_table.rs;command_table\\.rs:[0-9]+:[0-9]+: replace << with >>$;commands::command_table durability::fence"
  # The command table's flag code: flag names (COMMAND INFO), ALLOW_BUSY, ACL categories.
  "table;src/commands/command_table.rs;(in|replace) (Spec::(flag_names|allows_busy|subcommand)|cats::|with_implicit_cats);commands::command_table durability::fence"
)

cargo mutants --version >/dev/null 2>&1 || {
  echo "installing cargo-mutants (crates.io)"
  timeout 900 cargo install --locked cargo-mutants
}

# The modules to run, in the order given (all, in the table's order, by default).
order=("$@")
if [[ ${#order[@]} -eq 0 ]]; then
  for row in "${MODULES[@]}"; do order+=("${row%%;*}"); done
fi

mkdir -p "$SCRATCH"
echo "scratch copy: $SCRATCH"
# The committed tree (HEAD): what runs is what a commit holds, whatever is being edited.
(cd "$ROOT" && git archive --format=tar HEAD) | tar -xf - -C "$SCRATCH"
# The first time, start from this tree's `mutants` build (dependencies compiled).
if [[ -d "$ROOT/target/mutants" && ! -e "$SCRATCH/target/mutants" ]]; then
  mkdir -p "$SCRATCH/target" && cp -a "$ROOT/target/mutants" "$SCRATCH/target/"
fi

count() { [[ -f "$1" ]] && wc -l <"$1" || echo 0; }
summary=()
rc_all=0
cd "$SCRATCH"
for wanted in "${order[@]}"; do
  row=""
  for r in "${MODULES[@]}"; do [[ "${r%%;*}" == "$wanted" ]] && row="$r"; done
  [[ -n "$row" ]] || { echo "no module $wanted"; rc_all=1; continue; }
  IFS=';' read -r name files re filters <<<"$row"
  args=()
  for f in $files; do args+=(--file "$f"); done
  out="$SCRATCH/out/$name"
  mkdir -p "$out"
  echo "== $name: $files"
  start=$(date +%s)
  set +e
  # shellcheck disable=SC2086
  nice -n 10 cargo mutants --in-place --no-shuffle --profile mutants \
    --timeout 120 --build-timeout 900 --output "$out" "${args[@]}" \
    --re "${MUTANTS_RE:-$re}" -C --lib -- -- $filters
  rc=$?
  set -e
  # 0: all caught; 2: some missed; 3: some timed out. Anything else is a failed run.
  case $rc in 0 | 2 | 3) ;; *) echo "cargo mutants failed ($rc) for $name"; rc_all=1 ;; esac
  [[ $rc -eq 2 || $rc -eq 3 ]] && rc_all=2
  m="$out/mutants.out"
  caught=$(count "$m/caught.txt") missed=$(count "$m/missed.txt")
  unviable=$(count "$m/unviable.txt") timeouts=$(count "$m/timeout.txt")
  summary+=("$(printf '| %s | %d | %d | %d | %d | %d | %ds |' "$name" \
    $((caught + missed + unviable + timeouts)) "$caught" "$missed" "$unviable" "$timeouts" \
    $(($(date +%s) - start)))")
  if [[ -s "$m/missed.txt" ]]; then echo "missed:"; cat "$m/missed.txt"; fi
done

echo
echo "| module | mutants | caught | missed | unviable | timeouts | time |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
exit "$rc_all"
