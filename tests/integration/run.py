#!/usr/bin/env python3
"""Integration test runner: every test_* function of every test_*.py here,
against the real coved and cove. Prints TAP lines and a summary:
'integration: N passed, N failed'. A test gets a shared running Coved as
its argument (or makes its own when it needs a fresh daemon).

  python3 tests/integration/run.py [-k substring]"""
import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import covetest  # noqa: E402


def main():
    pattern = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv else ""
    tests = []
    for name in sorted(os.listdir(HERE)):
        if name.startswith("test_") and name.endswith(".py"):
            mod = importlib.import_module(name[:-3])
            for attr in dir(mod):
                if attr.startswith("test_") and pattern in name[:-3] + "." + attr:
                    fn = getattr(mod, attr)
                    tests.append((name[:-3] + "." + attr, fn, fn.__code__.co_firstlineno))
    tests.sort(key=lambda t: (t[0].split(".")[0], t[2]))
    covetest.sanitizer_reports()  # the unit tests' (check.sh counts every one)
    shared = covetest.Coved().start()
    passed = failed = 0
    try:
        for i, (name, fn, _) in enumerate(tests, 1):
            t0 = time.time()
            error = None
            try:
                fn(shared)
            except Exception:
                error = traceback.format_exc()
            # make asan: a sanitizer report written during the test fails it.
            for path, text in covetest.sanitizer_reports():
                error = (error or "") + "sanitizer report %s:\n%s" % (path, text)
            if error is None:
                passed += 1
                print("ok %d - %s (%.1fs)" % (i, name, time.time() - t0), flush=True)
            else:
                failed += 1
                print("not ok %d - %s (%.1fs)" % (i, name, time.time() - t0), flush=True)
                for line in error.splitlines():
                    print("#   " + line)
                if shared.proc is None or shared.proc.poll() is not None:
                    print("# shared coved died; log:\n# " + shared.read_log().replace("\n", "\n# "))
                    shared.cleanup()  # its pool and dir; under make asan, its log's reports
                    shared = covetest.Coved().start()
    finally:
        shared.cleanup()
    # The shared coved's leaks are reported as it exits.
    for path, text in covetest.sanitizer_reports():
        failed += 1
        print("not ok - sanitizer report %s after the last test:" % path)
        print("#   " + text.replace("\n", "\n#   "))
    print("1..%d" % len(tests))
    print("integration: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
