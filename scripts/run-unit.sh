#!/bin/sh
# Run unit test binaries; print each one's TAP, then one summary line.
# Exit status: non-zero when any test failed or a binary crashed.
passed=0 failed=0 skipped=0 seen=""
for t in "$@"; do
	echo "# $t"
	t0=$(date +%s)
	out=$("$t" 2>&1)
	rc=$?
	echo "$out"
	echo "# $t took $(($(date +%s) - t0))s"
	line=$(echo "$out" | grep -aE '^[0-9]+ passed, [0-9]+ failed' | tail -1)
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	if [ -z "$line" ] || { [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; }; then
		echo "not ok - $t exited $rc without a summary"
		f=$(( ${f:-0} + 1 ))
	fi
	# make asan: a sanitizer report written meanwhile (by the test or a
	# child of it) fails the binary.
	if [ -n "${COVE_SANITIZER_LOG:-}" ]; then
		for r in "$COVE_SANITIZER_LOG"/*; do
			[ -f "$r" ] && ! echo "$seen" | grep -qxF "$r" || continue
			seen="$seen
$r"
			echo "not ok - $t: sanitizer report $r"
			sed 's/^/#   /' "$r"
			f=$(( ${f:-0} + 1 ))
		done
	fi
	passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0})) skipped=$((skipped + ${s:-0}))
done
echo "unit: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
