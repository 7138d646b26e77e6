#!/bin/sh
# coved(8) from `coved --help`, the text coved prints itself, so that the
# manual never drifts from the daemon: the usage line is the synopsis, a
# line "  --flag ARG  text" an option (more indented lines go on with it),
# a line "heading:" a subsection.
set -eu
coved=${1:?usage: man-coved.sh path/to/coved}
"$coved" --help | awk '
function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.'\'']/, "\\\\&&", s); return s }
BEGIN {
	print ".TH COVED 8 \"\" \"cove\" \"System Administration\""
	print ".SH NAME\ncoved \\- the cove sandbox daemon"
}
NR == 1 {
	sub(/^usage: /, ""); print ".SH SYNOPSIS\n" esc($0)
	print ".SH DESCRIPTION\ncoved keeps the sandboxes of this machine and serves the cove API (HTTP/JSON) on a unix"
	print "socket, and on TCP when asked; the cove(1) command line starts it on demand.\n.SH OPTIONS"
	next
}
/^  --/ {
	line = substr($0, 3); split(line, parts, /  +/)
	print ".TP\n.B " esc(parts[1]); rest = line; sub(/^[^ ]+( [^ -][^ ]*)? +/, "", rest)
	if (rest != line) print esc(rest)
	next
}
/^ +/ { sub(/^ +/, ""); print esc($0); next }
/:$/ { print ".SS " esc($0); next }
{ print esc($0) }
END { print ".SH SEE ALSO\ncove(1)" }
'
