#!/usr/bin/env bash
# Fails unless a TAP report says at least MIN tests ran: a test runner that finds no
# test files exits 0 (node --test does), and a green CI must mean tests ran.
#
#   tests/interop/check_ran.sh REPORT.tap [MIN] [FIELD]   (MIN 1, FIELD tests by default)
#
# Reads the summary line `# FIELD N` (node --test's TAP reporter writes it last). With
# --test-name-pattern the tests filtered out count in `# tests` as skipped: FIELD pass
# counts only those that ran and passed.
set -euo pipefail
report="${1:?usage: check_ran.sh REPORT.tap [MIN] [FIELD]}"
min="${2:-1}"
field="${3:-tests}"
[[ "$field" =~ ^[a-z]+$ ]] || { echo "check_ran: FIELD must be a word (tests, pass), not '$field'" >&2; exit 1; }
[[ -s "$report" ]] || { echo "check_ran: no TAP report at $report: nothing ran" >&2; exit 1; }
ran="$(sed -n "s/^# $field \([0-9][0-9]*\)\$/\1/p" "$report" | tail -n 1)"
[[ -n "$ran" ]] || { echo "check_ran: $report has no '# $field N' summary" >&2; exit 1; }
if (( ran < min )); then
  echo "check_ran: $report: $field $ran, expected at least $min" >&2
  exit 1
fi
echo "check_ran: $field $ran ($report)"
