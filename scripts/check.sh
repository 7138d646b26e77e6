#!/bin/sh
# make check: unit tests, then integration tests; one summary line for both.
cd "$(dirname "$0")/.."
unit_out=$(scripts/run-unit.sh "$@" 2>&1); unit_rc=$?
echo "$unit_out"
it_out=$(python3 tests/integration/run.py 2>&1); it_rc=$?
echo "$it_out"
sum() { echo "$1" | grep -E "$2" | tail -1; }
u=$(sum "$unit_out" '^unit: [0-9]+ passed'); i=$(sum "$it_out" '^integration: [0-9]+ passed')
up=$(echo "$u" | sed -n 's/^unit: \([0-9]*\) passed.*/\1/p'); uf=$(echo "$u" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
ip=$(echo "$i" | sed -n 's/^integration: \([0-9]*\) passed.*/\1/p'); if=$(echo "$i" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
[ -n "$u" ] || uf=1
[ -n "$i" ] || if=1
[ $unit_rc -eq 0 ] || [ "${uf:-0}" -gt 0 ] || uf=1
[ $it_rc -eq 0 ] || [ "${if:-0}" -gt 0 ] || if=1
echo "$(( ${up:-0} + ${ip:-0} )) passed, $(( ${uf:-0} + ${if:-0} )) failed"
[ $(( ${uf:-0} + ${if:-0} )) -eq 0 ]
