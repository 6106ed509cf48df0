#!/usr/bin/env bash
# Fails unless a TAP report says at least MIN tests ran: a test runner that finds no
# test files exits 0 (node --test does), and a green CI must mean tests ran.
#
#   tests/interop/check_ran.sh REPORT.tap [MIN]     (MIN defaults to 1)
#
# Reads the summary line `# tests N` (node --test's TAP reporter writes it last).
set -euo pipefail
report="${1:?usage: check_ran.sh REPORT.tap [MIN]}"
min="${2:-1}"
[[ -s "$report" ]] || { echo "check_ran: no TAP report at $report: nothing ran" >&2; exit 1; }
ran="$(sed -n 's/^# tests \([0-9][0-9]*\)$/\1/p' "$report" | tail -n 1)"
[[ -n "$ran" ]] || { echo "check_ran: $report has no '# tests N' summary" >&2; exit 1; }
if (( ran < min )); then
  echo "check_ran: $report: $ran test(s) ran, expected at least $min" >&2
  exit 1
fi
echo "check_ran: $ran test(s) ran ($report)"
