#!/bin/sh
# make check: unit tests, integration tests, E2B's SDK against coved
# (scripts/e2b-check.sh), then the SDKs' tests (pytest for sdk/python,
# node's test runner for sdk/js, each against a coved it starts); one
# summary line for all.
cd "$(dirname "$0")/.."
# Each part's time, to see where a slow run (make asan) spends it.
t0=$(date +%s)
took() { echo "check: $1 took $(($(date +%s) - t0))s"; t0=$(date +%s); }
unit_out=$(scripts/run-unit.sh "$@" 2>&1); unit_rc=$?
echo "$unit_out"
took unit
it_out=$(python3 tests/integration/run.py 2>&1); it_rc=$?
echo "$it_out"
took integration
e2b_out=$(scripts/e2b-check.sh 2>&1); e2b_rc=$?
echo "$e2b_out"
took e2b
sum() { echo "$1" | grep -aE "$2" | tail -1; }
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

# pytest is Debian's python3-pytest (scripts/deps.sh), importable by
# /usr/bin/python3; `python3` may be another interpreter (a pyenv shim)
# without it. Take the first that has pytest; the tests run the SDK and
# the docs' examples with that same interpreter.
py=""
for p in ${COVE_PYTEST_PYTHON:-} python3 /usr/bin/python3; do
	"$p" -c 'import pytest' 2>/dev/null && { py=$p; break; }
done
if [ -n "$py" ]; then
	py_out=$("$py" -m pytest -q -p no:cacheprovider --durations=10 sdk/python/tests 2>&1); py_rc=$?
else
	py_out="sdk/python: no python3 with pytest (sh scripts/deps.sh installs python3-pytest)"; py_rc=1
fi
echo "$py_out"
took sdk/python
pl=$(echo "$py_out" | grep -aE '[0-9]+ (passed|failed)' | tail -1)
pp=$(echo "$pl" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
pf=$(( $(echo "$pl" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0) + $(echo "$pl" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || echo 0) ))
[ $py_rc -eq 0 ] || [ "$pf" -gt 0 ] || pf=1

# sdk/js: built with its devDependencies (npm ci in sdk/js, as .ci/run does).
if [ -d sdk/js/node_modules ]; then
	js_out=$(cd sdk/js && npm run --silent build 2>&1 && node --test test/*.test.mjs 2>&1); js_rc=$?
else
	js_out="sdk/js: no node_modules: run 'npm ci' in sdk/js first"; js_rc=1
fi
echo "$js_out"
took sdk/js
jp=$(echo "$js_out" | sed -n 's/^# pass \([0-9]*\)$/\1/p' | tail -1)
jf=$(echo "$js_out" | sed -n 's/^# fail \([0-9]*\)$/\1/p' | tail -1)
[ $js_rc -eq 0 ] || [ "${jf:-0}" -gt 0 ] || jf=1
echo "sdk: python ${pp:-0} passed, ${pf:-0} failed; js ${jp:-0} passed, ${jf:-0} failed"

# make asan (Makefile): every sanitizer report is a failure, whichever
# process made it (a CLI, coved or a child of it, the SDKs' coveds) and
# whether or not a test saw it.
sf=0
if [ -n "${COVE_SANITIZER_LOG:-}" ]; then
	for r in "$COVE_SANITIZER_LOG"/*; do
		[ -f "$r" ] || continue
		echo "# sanitizer report $r:"
		sed 's/^/#   /' "$r"
		sf=$((sf + 1))
	done
	echo "sanitizer: $sf reports"
fi

passed=$(( ${up:-0} + ${ip:-0} + ${ep:-0} + ${pp:-0} + ${jp:-0} ))
failed=$(( ${uf:-0} + ${if:-0} + ${ef:-0} + ${pf:-0} + ${jf:-0} + sf ))
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
