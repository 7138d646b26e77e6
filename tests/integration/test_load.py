"""Load: 50 concurrent clients x 200 mixed requests (exec, write, read,
list) over 20 sandboxes, each client on its own kept-alive connection: no
errors, every answer right, and coved's fd count and memory back near where
they started afterwards. Runs on its own coved (fds and RSS are counted)."""
import json
import os
import random
import threading
import time

import covetest

CLIENTS = 50
REQUESTS = 200
SANDBOXES = 20


def _fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _client(cv, n, sids, errors, latencies):
    rnd = random.Random(n)
    conn = cv.conn(120)
    sid = None

    def call(method, path, body=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        t0 = time.perf_counter()
        conn.request(method, path, body=data)
        r = conn.getresponse()
        text = r.read()
        latencies.append(time.perf_counter() - t0)
        return r.status, text

    try:
        for i in range(REQUESTS):
            if i % 4 == 0:  # a write, its read and a list go to the same sandbox
                sid = sids[rnd.randrange(len(sids))]
            base = "/v1/sandboxes/" + sid
            kind = i % 4
            path = "/tmp/load-%d-%d" % (n, i)
            if kind == 0:
                st, text = call("POST", base + "/exec", {"cmd": ["echo", "c%d-%d" % (n, i)]})
                ok = st == 200 and json.loads(text)["stdout"] == "c%d-%d\n" % (n, i)
            elif kind == 1:
                st, text = call("PUT", base + "/files?path=" + path, raw=b"x%d-%d" % (n, i))
                ok = st in (200, 201)
            elif kind == 2:
                prev = "/tmp/load-%d-%d" % (n, i - 1)  # written by this client just before
                st, text = call("GET", base + "/files?path=" + prev)
                ok = st == 200 and text == b"x%d-%d" % (n, i - 1)
            else:
                st, text = call("GET", base + "/files?path=/tmp")
                ok = st == 200 and b"load-%d-%d" % (n, i - 2) in text
            if not ok:
                errors.append((n, i, kind, st, text[:200]))
    except Exception as e:  # noqa: BLE001 - reported as a failure below
        errors.append((n, "exception", repr(e)))
    finally:
        conn.close()


def test_fifty_clients_two_hundred_requests_each(_cv):
    cv = covetest.Coved().start()
    try:
        sids = [cv.create() for _ in range(SANDBOXES)]
        pid = cv.pid()
        # one round to warm up allocations, then the baseline
        warm_err, warm_lat = [], []
        _client(cv, 999, sids, warm_err, warm_lat)
        assert not warm_err, warm_err[:5]
        time.sleep(0.5)
        fds0, rss0 = _fds(pid), _rss_kb(pid)
        errors, latencies = [], []
        threads = [threading.Thread(target=_client, args=(cv, n, sids, errors, latencies)) for n in range(CLIENTS)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - t0
        assert not errors, "%d errors, first: %s" % (len(errors), errors[:5])
        assert len(latencies) == CLIENTS * REQUESTS
        latencies.sort()
        p50, p99 = latencies[len(latencies) // 2], latencies[len(latencies) * 99 // 100]
        print("# load: %d requests in %.1f s, p50 %.2f ms, p99 %.2f ms"
              % (len(latencies), took, p50 * 1e3, p99 * 1e3))
        time.sleep(1)
        fds1, rss1 = _fds(pid), _rss_kb(pid)
        assert fds1 <= fds0 + 2, (fds0, fds1)
        assert rss1 <= rss0 + 8192, (rss0, rss1)  # kB
        for sid in sids:
            assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
    finally:
        cv.teardown()
