"""The tree shows the architecture (issue 9): front ends over one engine
over stores and system code. Checked from the sources themselves: which
folder includes which, the direction of every include between folders, no
include loop between folders, and the size limits of files and functions."""
import os
import re

import covetest

SRC = os.path.join(covetest.ROOT, "src")
# Who may include whom: a folder's own files, and the folders listed.
ALLOWED = {
    "include": set(),
    "common": set(),
    "sys": {"common"},
    "sandbox": {"common", "sys"},
    "image": {"common", "sys", "sandbox"},
    "net": {"common", "sys"},
    "store": {"common", "sys"},
    "engine": {"common", "sys", "image", "sandbox", "store", "net"},
    "daemon/http": {"common"},
    "daemon/proxy": {"common", "engine", "store", "sys", "daemon/http"},
    "daemon/api": {"common", "engine", "store", "sys", "daemon/http", "daemon/proxy"},
    "daemon/e2b": {"common", "engine", "store", "sys", "daemon/http", "daemon/api", "daemon/proxy"},
    "daemon": {"common", "engine", "store", "sys", "image", "net", "daemon/http", "daemon/api", "daemon/e2b",
               "daemon/proxy"},
    "init": {"common"},
    "client": {"common", "include"},
    "cli": {"common", "client", "include"},
}
MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 80


def folder_of(rel):
    if "/" not in rel:
        # include/cove.h, the public header; else a header made at build
        # time (build/gen: CRIU's RPC messages), which is its includer's own
        return "include" if os.path.exists(os.path.join(covetest.ROOT, "include", rel)) else None
    parts = rel.split("/")[:-1]
    while parts and "/".join(parts) not in ALLOWED:
        parts.pop()
    return "/".join(parts)


def sources():
    for dirpath, _, names in os.walk(SRC):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                path = os.path.join(dirpath, n)
                yield os.path.relpath(path, SRC), path


def includes(path):
    with open(path) as f:
        return re.findall(r'^#include "([^"]+)"', f.read(), re.M)


def test_every_include_goes_down_the_layers(coved):
    bad = []
    for rel, path in sources():
        mine = folder_of(rel)
        assert mine in ALLOWED, "a folder the layers do not know: " + rel
        for inc in includes(path):
            theirs = folder_of(inc)
            if theirs is not None and theirs != mine and theirs not in ALLOWED[mine]:
                bad.append("%s includes %s (%s -> %s)" % (rel, inc, mine, theirs))
    assert not bad, "includes against the layers:\n" + "\n".join(bad)


def test_no_include_loop_between_folders(coved):
    edges = {}
    for rel, path in sources():
        mine = folder_of(rel)
        for inc in includes(path):
            theirs = folder_of(inc)
            if theirs is not None and theirs != mine:
                edges.setdefault(mine, set()).add(theirs)
    state = {}

    def visit(n, trail):
        if state.get(n) == "done":
            return
        assert state.get(n) != "open", "include loop: " + " -> ".join(trail + [n])
        state[n] = "open"
        for m in sorted(edges.get(n, ())):
            visit(m, trail + [n])
        state[n] = "done"

    for n in sorted(edges):
        visit(n, [])


def test_no_engine_file_knows_http(coved):
    for rel, path in sources():
        if folder_of(rel) in ("engine", "store"):
            with open(path) as f:
                text = f.read()
            for word in ("http_req", "http_conn", "evhttp", "httpd.h"):
                assert word not in text, "%s mentions %s" % (rel, word)


def functions(text):
    """(name, first line, length) of each function defined at column 0."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(?:static |inline )*[a-z_][\w \*]*?\b(\w+)\(", lines[i])
        if m and not lines[i].rstrip().endswith(";"):
            j = i
            while j < len(lines) and lines[j] != "{" and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j] == "{":
                k = j
                while k < len(lines) and lines[k] != "}":
                    k += 1
                out.append((m.group(1), i + 1, k - j + 1))
                i = k
        i += 1
    return out


def test_files_and_functions_stay_small(coved):
    big = []
    for rel, path in sources():
        with open(path) as f:
            text = f.read()
        n = text.count("\n")
        if n > MAX_FILE_LINES:
            big.append("%s: %d lines" % (rel, n))
        for name, line, length in functions(text):
            if length > MAX_FUNCTION_LINES:
                big.append("%s:%d: %s() is %d lines" % (rel, line, name, length))
    assert not big, "over the limits (%d lines a file, %d a function):\n%s" % (
        MAX_FILE_LINES, MAX_FUNCTION_LINES, "\n".join(big))


def test_the_checker_sees_what_it_checks(coved):
    # The parsers above must find the things they judge, or they pass on nothing.
    found = dict((name, n) for name, _, n in functions(open(os.path.join(SRC, "engine", "engine.c")).read()))
    assert "engine_open" in found and found["engine_open"] > 10, found
    assert "engine/engine.h" in includes(os.path.join(SRC, "engine", "engine.c"))
