#!/bin/sh
# make lint: formatting (clang-format, against .clang-format), then static
# analysis of src/ (cppcheck, clang-tidy's bugprone checks). Every phase runs
# even when an earlier one fails; one summary line at the end.
#
#   LINT_DIFF=1 scripts/lint.sh     also show the formatting diffs
#
# Exit status: non-zero when a file is not formatted, a tool reports a
# finding, or a tool is missing (scripts/deps.sh installs them).
set -u
cd "$(dirname "$0")/.." || exit 1

CFLAGS="-std=gnu17 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen" # build/gen: protoc-c output (make lint makes it)
# bugprone-*, without the checks that only produce noise on this code base:
# easily-swappable-parameters (every (const char *, const char *) function),
# reserved-identifier (_cleanup_*_ and friends are deliberate),
# macro-parentheses (CHECK(cond, ...) and format strings),
# narrowing-conversions (size_t <-> int at every syscall boundary), and
# implicit-widening-of-multiplication-result (it flags constant expressions
# like 64 * 1024 that cannot overflow).
TIDY_CHECKS="-*,bugprone-*,-bugprone-easily-swappable-parameters,-bugprone-reserved-identifier"
TIDY_CHECKS="$TIDY_CHECKS,-bugprone-macro-parentheses,-bugprone-narrowing-conversions"
TIDY_CHECKS="$TIDY_CHECKS,-bugprone-implicit-widening-of-multiplication-result"

failed=""
fail() { failed="$failed $1"; }
have() { command -v "$1" >/dev/null 2>&1 || { echo "lint: $1 not installed (scripts/deps.sh)"; fail "$1"; return 1; }; }

# ---- clang-format ----
if have clang-format; then
	bad=0 total=0
	for f in $(find src tests/unit tests/probe tests/fuzz include -name '*.[ch]' | sort); do
		total=$((total + 1))
		if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
			bad=$((bad + 1))
			echo "lint: clang-format: $f needs formatting"
			[ -n "${LINT_DIFF:-}" ] && clang-format "$f" | diff -u "$f" - | sed 1,2d
		fi
	done
	if [ "$bad" -gt 0 ]; then
		echo "lint: clang-format: $bad of $total files need formatting (clang-format -i FILE)"
		fail clang-format
	else
		echo "lint: clang-format: $total files ok"
	fi
fi

# ---- cppcheck ----
if have cppcheck; then
	if cppcheck --error-exitcode=1 --enable=warning,portability -q --inline-suppr -D_GNU_SOURCE -Isrc -Iinclude src/; then
		echo "lint: cppcheck: ok"
	else
		echo "lint: cppcheck: findings above"
		fail cppcheck
	fi
fi

# ---- clang-tidy ----
if have clang-tidy; then
	out=$(mktemp)
	# shellcheck disable=SC2046,SC2086 # file and flag lists split on purpose
	clang-tidy --quiet -checks="$TIDY_CHECKS" --warnings-as-errors='*' $(find src -name '*.c' | sort) \
		-- $CFLAGS >"$out" 2>&1
	rc=$?
	# clang-tidy prints "N warnings generated." for suppressed system-header
	# warnings: keep only what is about our files.
	grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' "$out"
	rm -f "$out"
	if [ "$rc" -eq 0 ]; then
		echo "lint: clang-tidy: ok"
	else
		echo "lint: clang-tidy: findings above"
		fail clang-tidy
	fi
fi

if [ -n "$failed" ]; then
	echo "lint: failed:$failed"
	exit 1
fi
echo "lint: all ok"
