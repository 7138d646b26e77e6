#!/bin/sh
# E2B's SDK against coved (tests/e2b/, node's test runner): prints the TAP
# and ends with "e2b: N passed, N failed". The SDK comes from
# tests/e2b/package-lock.json (npm ci, run by .ci/run; here too when it is
# not installed yet).
cd "$(dirname "$0")/../tests/e2b" || exit 1
if [ ! -d node_modules/e2b ]; then
	npm ci --no-audit --no-fund >/dev/null 2>&1 || { echo "e2b: 0 passed, 1 failed (npm ci failed)"; exit 1; }
fi
out=$(node --test --test-reporter=tap ./*.test.mjs 2>&1); rc=$?
echo "$out"
pass=$(echo "$out" | sed -n 's/^# pass \([0-9]*\)$/\1/p' | tail -1)
fail=$(echo "$out" | sed -n 's/^# fail \([0-9]*\)$/\1/p' | tail -1)
[ -n "$pass" ] || fail=1
[ $rc -eq 0 ] || [ "${fail:-0}" -gt 0 ] || fail=1
echo "e2b: ${pass:-0} passed, ${fail:-0} failed"
[ "${fail:-0}" -eq 0 ]
