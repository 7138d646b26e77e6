#!/bin/sh
# make check: unit tests, integration tests, then E2B's SDK against coved
# (scripts/e2b-check.sh); one summary line for all.
cd "$(dirname "$0")/.."
unit_out=$(scripts/run-unit.sh "$@" 2>&1); unit_rc=$?
echo "$unit_out"
it_out=$(python3 tests/integration/run.py 2>&1); it_rc=$?
echo "$it_out"
e2b_out=$(scripts/e2b-check.sh 2>&1); e2b_rc=$?
echo "$e2b_out"
sum() { echo "$1" | grep -E "$2" | tail -1; }
u=$(sum "$unit_out" '^unit: [0-9]+ passed'); i=$(sum "$it_out" '^integration: [0-9]+ passed')
up=$(echo "$u" | sed -n 's/^unit: \([0-9]*\) passed.*/\1/p'); uf=$(echo "$u" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
ip=$(echo "$i" | sed -n 's/^integration: \([0-9]*\) passed.*/\1/p'); if=$(echo "$i" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
e=$(sum "$e2b_out" '^e2b: [0-9]+ passed')
ep=$(echo "$e" | sed -n 's/^e2b: \([0-9]*\) passed.*/\1/p'); ef=$(echo "$e" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
[ -n "$e" ] || ef=1
[ $e2b_rc -eq 0 ] || [ "${ef:-0}" -gt 0 ] || ef=1
[ -n "$u" ] || uf=1
[ -n "$i" ] || if=1
[ $unit_rc -eq 0 ] || [ "${uf:-0}" -gt 0 ] || uf=1
[ $it_rc -eq 0 ] || [ "${if:-0}" -gt 0 ] || if=1
echo "$(( ${up:-0} + ${ip:-0} + ${ep:-0} )) passed, $(( ${uf:-0} + ${if:-0} + ${ef:-0} )) failed"
[ $(( ${uf:-0} + ${if:-0} + ${ef:-0} )) -eq 0 ]
