#!/usr/bin/env bash
# The long-script, BUSY and SCRIPT KILL tests, RUNS times in a row (default 50) with
# both cores loaded by two busy loops (no hang allowed):
#
#   tests/busy_stress.sh [runs]          (LOAD=0 runs them without the busy loops)
#
# The test binaries are built once (cargo test --no-run); each round runs every test
# below through its binary with --exact, bounded by `timeout` (a hang is a failure,
# reported as exit 124). The busy loops are this script's children and are killed on
# exit. Prints one line per failure and a summary; exit status 1 if anything failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS="${1:-50}"
PER_TEST_TIMEOUT="${PER_TEST_TIMEOUT:-120}"
# binary:test (the integrations binary names its tests module::name), every test that runs a script past --busy-script-time, kills one, or
# waits on one.
TESTS=(
  integrations:scripting::busy_script_gets_killed_by_script_kill
  integrations:scripting::script_kill_cannot_be_escaped_with_pcall
  integrations:scripting::a_script_that_wrote_is_unkillable
  hostile:a_loop_inside_a_coroutine_is_killed_by_script_kill_within_100_ms
  hostile:shutdown_nosave_stops_a_server_whose_script_loops_in_a_coroutine
  hostile:a_backtracking_pattern_match_is_killed_by_script_kill
  integrations:functions::a_library_that_loops_at_load_times_out_and_names_are_case_insensitive
  integrations:functions::the_busy_threshold_can_be_set_at_run_time
  integrations:multi::a_transaction_around_a_busy_script_runs_whole_or_not_at_all
)
declare -A BIN
for file in $(printf '%s\n' "${TESTS[@]}" | cut -d: -f1 | sort -u); do
  BIN[$file]=$(cargo test --test "$file" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])' | tail -1)
  [[ -x "${BIN[$file]}" ]] || { echo "could not build the test binary $file"; exit 1; }
done

LOOPS=()
cleanup() { for pid in "${LOOPS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
if [[ "${LOAD:-1}" != 0 ]]; then
  for _ in 1 2; do (while :; do :; done) & LOOPS+=($!); done
  echo "two busy loops running: ${LOOPS[*]}"
fi

FAILS=0
START=$(date +%s)
for run in $(seq 1 "$RUNS"); do
  for t in "${TESTS[@]}"; do
    file=${t%%:*} name=${t#*:}
    set +e
    out=$(timeout -k 5 "$PER_TEST_TIMEOUT" "${BIN[$file]}" --exact "$name" --test-threads 1 2>&1)
    rc=$?
    set -e
    if [[ $rc -ne 0 ]] || ! grep -q "test result: ok. 1 passed" <<<"$out"; then
      FAILS=$((FAILS + 1))
      echo "run $run: FAIL $file::$name (exit $rc)"
      grep -E "panicked|assert|Error|error" <<<"$out" | head -5 | sed 's/^/    /'
    fi
  done
  echo "run $run of $RUNS done, $FAILS failure(s) so far, $(( $(date +%s) - START )) s"
done
echo "busy_stress: $RUNS runs x ${#TESTS[@]} tests, load=${LOAD:-1}: $FAILS failure(s)"
[[ $FAILS -eq 0 ]]
