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
    shared = covetest.Coved().start()
    passed = failed = 0
    try:
        for i, (name, fn, _) in enumerate(tests, 1):
            t0 = time.time()
            try:
                fn(shared)
                passed += 1
                print("ok %d - %s (%.1fs)" % (i, name, time.time() - t0), flush=True)
            except Exception:
                failed += 1
                print("not ok %d - %s (%.1fs)" % (i, name, time.time() - t0), flush=True)
                for line in traceback.format_exc().splitlines():
                    print("#   " + line)
                if shared.proc is None or shared.proc.poll() is not None:
                    print("# shared coved died; log:\n# " + shared.read_log().replace("\n", "\n# "))
                    shared = covetest.Coved().start()
    finally:
        shared.cleanup()
    print("1..%d" % len(tests))
    print("integration: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
