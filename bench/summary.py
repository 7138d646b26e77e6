#!/usr/bin/env python3
"""The summary table of a bench/run.sh run, as markdown, from its results
directory: api.txt (apibench's "key value" lines), snap.txt (snapbench's, in
ms), criu.txt (criubench's, in ms), disk.txt (diskbench's, in ms), warm.txt
(warmbench's, in ms), life.txt (lifebench's, in ms), run.json,
exec.json and warm.json (hyperfine),
machine.txt.
Usage: summary.py RESULTS_DIR"""
import json
import os
import sys
import time

res = sys.argv[1]


def load_api(name="api.txt"):
    api = {}
    with open(os.path.join(res, name)) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            api[k] = float(v)
    return api


def load_hf(name):
    with open(os.path.join(res, name + ".json")) as f:
        return {r["command"]: r for r in json.load(f)["results"]}


def load_snap():
    snap = {}
    path = os.path.join(res, "snap.txt")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            if k:
                snap[k] = float(v)
    return snap


api = load_api()
io = load_api("io.txt") if os.path.exists(os.path.join(res, "io.txt")) else None
sdk = load_api("sdk.txt") if os.path.exists(os.path.join(res, "sdk.txt")) else None
e2b = load_api("e2b.txt") if os.path.exists(os.path.join(res, "e2b.txt")) else None
E2B_TTI = "0.4–0.5 s"  # E2B's published time-to-interactive of a sandbox (its create)
snap = load_snap()
ports_runs = [(pin, load_api(f"ports-{pin}.txt")) for pin in ("none", "split", "same")
              if os.path.exists(os.path.join(res, f"ports-{pin}.txt"))]
criu = load_api("criu.txt") if os.path.exists(os.path.join(res, "criu.txt")) else None
memsnap = load_api("memsnap.txt") if os.path.exists(os.path.join(res, "memsnap.txt")) else None
disk = load_api("disk.txt") if os.path.exists(os.path.join(res, "disk.txt")) else None
warm = load_api("warm.txt") if os.path.exists(os.path.join(res, "warm.txt")) else None
life = load_api("life.txt") if os.path.exists(os.path.join(res, "life.txt")) else None
warm_hf = load_hf("warm") if os.path.exists(os.path.join(res, "warm.json")) else None
run = load_hf("run")
exe = load_hf("exec")
with open(os.path.join(res, "machine.txt")) as f:
    machine = f.read().strip().splitlines()


def ms(x):
    return f"{x * 1000:.2f}"


def med(r):
    return r["median"]


out = []
p = out.append
p(f"## cove bench, {time.strftime('%Y-%m-%d %H:%M %Z')}")
p("")
for line in machine:
    p(f"- {line}")
p("")
p("### API (libcove over the unix socket, one kept-alive connection)")
p("")
p("| measure | p50 | p95 | p99 |")
p("|---|---:|---:|---:|")
p(f"| cold create → exec `true` → delete, {int(api['cold.runs'])} runs | **{api['cold.p50']:.2f} ms** "
  f"| {api['cold.p95']:.2f} ms | {api['cold.p99']:.2f} ms |")
p(f"| … of which create | {api['cold.create.p50']:.2f} ms | | |")
p(f"| … of which exec `true` | {api['cold.exec.p50']:.2f} ms | | |")
p(f"| … of which delete | {api['cold.delete.p50']:.2f} ms | | |")
if "paced.p50" in api:
    p(f"| the same cycle, paced (after a {int(api['paced.gap_ms'])} ms pause each), {int(api['paced.runs'])} runs "
      f"| {api['paced.p50']:.2f} ms | {api['paced.p95']:.2f} ms | |")
p(f"| exec `true` in a running sandbox, {int(api['exec.runs'])} runs | **{api['exec.p50']:.3f} ms** "
  f"| {api['exec.p95']:.3f} ms | {api['exec.p99']:.3f} ms |")
p("")
cpu = []
if "cold.cpu_ms" in api:
    cpu.append(f"{api['cold.cpu_ms']:.1f} ms per cold cycle (its threads, setup processes, cove-init and `true`)")
if "exec.cpu_ms" in api:
    cpu.append(f"{api['exec.cpu_ms']:.2f} ms per exec (coved itself)")
if cpu:
    p("CPU time of coved: " + "; ".join(cpu) + ".")
    p("")
n = int(api["idle.n"])
p(f"Memory per idle sandbox ({n} sandboxes): "
  f"**RSS {api['idle.rss_mb']:.2f} MB** (coved +{int(api['idle.coved_rss_growth_kb'])} kB, "
  f"cove-init RSS sum {int(api['idle.init_rss_sum_kb'])} kB)"
  + (f", PSS {api['idle.pss_mb']:.2f} MB" if "idle.pss_mb" in api else "")
  + (f", charged to its memory cgroup (user + kernel) {api['idle.cgroup_mb']:.2f} MB" if "idle.cgroup_mb" in api else "")
  + (f", host MemTotal−MemAvailable {api['idle.host_used_mb']:.2f} MB (system-wide, noisy)"
     if "idle.host_used_mb" in api else "")
  + ".")
p("")
if snap:
    p("### Snapshots (HTTP/JSON over the unix socket, one kept-alive connection; ms)")
    p("")
    p("Sandboxes with 10 files and with 10,000 files + a 1 GiB file of their own changes; "
      "only the request is timed (deleting what it made is not).")
    p("")
    p("| measure | 10 files p50 | p95 | 10,000 files + 1 GiB p50 | p95 | large ÷ small p50 |")
    p("|---|---:|---:|---:|---:|---:|")
    for key, label in (("snapshot", "snapshot (`POST /v1/sandboxes/{id}/snapshots`)"),
                       ("restore", "restore (`POST /v1/snapshots/{id}/restore`)"),
                       ("fork1", "fork into 1"), ("fork10", "fork into 10 (the whole request)")):
        sm, lg = f"small.{key}", f"large.{key}"
        p(f"| {label}, {int(snap[lg + '.runs'])} runs | **{snap[sm + '.p50']:.2f}** | {snap[sm + '.p95']:.2f} "
          f"| **{snap[lg + '.p50']:.2f}** | {snap[lg + '.p95']:.2f} | {snap[lg + '.p50'] / snap[sm + '.p50']:.2f}× |")
    p(f"| checkpoint (`POST /v1/sandboxes/{{id}}/checkpoints`) right after a one-file change, "
      f"{int(snap['large.checkpoint.runs'])} runs | | "
      f"| **{snap['large.checkpoint.p50']:.2f}** | {snap['large.checkpoint.p95']:.2f} | |")
    p(f"| raw `BTRFS_IOC_SNAP_CREATE_V2` (read-only) of a pool subvolume holding the same tree "
      f"| | | {snap['raw.ioctl.p50']:.2f} | {snap['raw.ioctl.p95']:.2f} | |")
    p(f"| … right after a one-file change | | | {snap['raw.ioctl_checkpoint.p50']:.2f} "
      f"| {snap['raw.ioctl_checkpoint.p95']:.2f} | |")
    p(f"| `btrfs subvolume snapshot -r` (the CLI, a process) | | | {snap['raw.cli.p50']:.2f} "
      f"| {snap['raw.cli.p95']:.2f} | |")
    cpn = int(snap["cp.runs"])
    p(f"| `cp -a` of the same tree on ext4 (page cache), {cpn} run{'s' if cpn > 1 else ''}: min, max | | "
      f"| {snap['cp.min']:.0f} | {snap['cp.max']:.0f} | |")
    p(f"| … and `syncfs` after it (durable, as a cove snapshot is): min, max | | "
      f"| {snap['cp_sync.min']:.0f} | {snap['cp_sync.max']:.0f} | |")
    if "export.tar.mb_s" in snap:
        p(f"| export of the large tree (`GET .../export`), MB/s: tar, zip | | "
          f"| {snap['export.tar.mb_s']:.0f} | {snap['export.zip.mb_s']:.0f} | |")
    p("")
if io:
    p("### Files, sessions, load (iobench, over the unix socket)")
    p("")
    p("| measure | cove | next to it, same run |")
    p("|---|---:|---|")
    p(f"| read a {io['read.mib']:.0f} MiB file: `GET /files` (best of 3, warm cache) | **{io['read.api_mbps']:.0f} MB/s** "
      f"| `cat > /dev/null` {io['read.cat_mbps']:.0f} MB/s, `dd bs=1M` {io['read.dd_mbps']:.0f} MB/s |")
    p(f"| write {io['write.mib']:.0f} MiB: `PUT /files` (best of 3, no fsync) | **{io['write.api_mbps']:.0f} MB/s** "
      f"| `dd if=/dev/zero bs=1M` to the pool {io['write.dd_mbps']:.0f} MB/s |")
    p(f"| `true` in a session, {io['session.runs']:.0f} runs | **p50 {io['session.p50']:.3f} ms**, "
      f"p99 {io['session.p99']:.3f} ms | |")
    p(f"| load: {io['load.requests']:.0f} mixed requests (exec, write, read, list) from 50 clients | "
      f"**p50 {io['load.p50']:.2f} ms**, p99 {io['load.p99']:.2f} ms | {io['load.rate']:.0f} requests/s, "
      f"{io['load.errors']:.0f} errors |")
    p("")
if criu:
    p(f"### Memory snapshots: a tree with {criu['criu.mib']:.0f} MiB touched, in a sandbox's namespaces")
    p("")
    p("| operation | sys/criu.c (swrk RPC) p50 / p95 ms | criu CLI p50 / p95 ms | module ÷ CLI |")
    p("|---|---:|---:|---:|")
    for op in ("dump", "restore"):
        m, c = f"criu.{op}.module", f"criu.{op}.cli"
        p(f"| {op} | **{criu[m + '.p50']:.1f}** / {criu[m + '.p95']:.1f} | {criu[c + '.p50']:.1f} / "
          f"{criu[c + '.p95']:.1f} | {criu[m + '.p50'] / criu[c + '.p50']:.2f}× |")
    p(f"| fsync of the images after a dump | {criu['criu.fsync.p50']:.1f} / {criu['criu.fsync.p95']:.1f} | | |")
    for lv in (1, 3):
        k = f"criu.zstd{lv}"
        p(f"| zstd -{lv} of the page images ({criu['criu.pages_mib']:.1f} → {criu[k + '.mib']:.1f} MiB) | "
          f"compress +{criu[k + '.compress_ms']:.1f}, decompress +{criu[k + '.decompress_ms']:.1f} | | |")
    p("")
if disk:
    p("### Disk limits: a sandbox of 10,000 files + 100 MiB, btrfs simple quotas on and off (bench/diskbench.py)")
    p("")
    p(f"Two coveds side by side, runs alternating: one whose pool counts simple quotas (the sandbox limited to "
      f"10G), one started with `--no-disk-quota`; {disk['disk_on.snapshot.runs']:.0f} runs each.")
    p("")
    p("| operation | limits on p50 / p95 ms | limits off p50 / p95 ms | on ÷ off (p50) |")
    p("|---|---:|---:|---:|")
    for op, label in (("snapshot", "snapshot"), ("restore", "restore"), ("fork1", "fork into 1")):
        on, off = f"disk_on.{op}", f"disk_off.{op}"
        p(f"| {label} | **{disk[on + '.p50']:.2f}** / {disk[on + '.p95']:.2f} | {disk[off + '.p50']:.2f} / "
          f"{disk[off + '.p95']:.2f} | {disk[on + '.p50'] / disk[off + '.p50']:.2f}× |")
    p("")
if sdk:
    p("### The SDKs: exec `true` in a running sandbox, next to what they wrap (bench/sdkbench.py)")
    p("")
    p(f"{sdk['sdk.n']:.0f} alternating pairs each; the SDK's cost is the median of the pairs' differences.")
    p("")
    p("| path | p50 | CPU per call | SDK − peer, median of pairs |")
    p("|---|---:|---:|---:|")
    for label, key, over in (("libcove (C, cove_exec)", "libcove", None), ("Python SDK `sb.run([\"true\"])`", "python", "python"),
                             ("node `http.request`, kept alive", "node_raw", None),
                             ("TypeScript SDK `sandbox.exec([\"true\"])`", "node_sdk", "ts")):
        diff = f"**{sdk[f'sdk.{over}.over']:+.3f} ms**" if over else ""
        p(f"| {label} | {sdk[f'sdk.{key}.p50']:.3f} ms | {sdk[f'sdk.{key}.cpu']:.3f} ms | {diff} |")
    p("")
if e2b:
    p("### E2B's SDK next to cove's API: create + `commands.run('true')` + kill (bench/e2bbench.mjs)")
    p("")
    p(f"{e2b['e2b.runs']:.0f} interleaved rounds in one node process, one coved (`--listen`); p50 of each step too. "
      f"E2B's published time-to-interactive (create alone): {E2B_TTI}.")
    p("")
    p("| path | p50 | p90 | create p50 | run p50 | kill p50 |")
    p("|---|---:|---:|---:|---:|---:|")
    for label, key in (("E2B SDK 2.51.0, template `base` (makes E2B's user)", "sdk"),
                       ("E2B SDK 2.51.0, template `host`", "sdk_host"),
                       ("cove REST on the same listener (fetch)", "native")):
        p(f"| {label} | **{e2b[f'e2b.{key}.p50']:.1f} ms** | {e2b[f'e2b.{key}.p90']:.1f} ms "
          f"| {e2b[f'e2b.{key}.create.p50']:.1f} ms | {e2b[f'e2b.{key}.run.p50']:.1f} ms "
          f"| {e2b[f'e2b.{key}.kill.p50']:.1f} ms |")
    p("")
p("### CLI, process to process (hyperfine -N)")
p("")
p("| command | median ms | mean ± sd ms | min ms | max ms | runs | peer median ÷ cove median |")
p("|---|---:|---:|---:|---:|---:|---|")


def rows(group, cove_key, peers):
    cove = group[cove_key]
    for name, r in group.items():
        ratio = ""
        if name == cove_key:
            ratio = ", ".join(f"{label} {med(group[k]) / med(cove):.2f}×" for label, k in peers if k in group)
        p(f"| `{name}` | **{ms(r['median'])}** | {ms(r['mean'])} ± {ms(r['stddev'])} | {ms(r['min'])} "
          f"| {ms(r['max'])} | {len(r['times'])} | {ratio} |")


RUN, CRUN, BWRAP = "cove run -- true", "crun run (busybox)", "bwrap --unshare-all (busybox)"
EXEC, CRUNX = "cove exec ID -- true", "crun exec CTR /bin/true"
rows(run, RUN, [("crun", CRUN), ("bwrap", BWRAP)])
rows(exe, EXEC, [("crun", CRUNX)])
WARMRUN = "cove run -- true (warm pool)"
if warm_hf:
    rows(warm_hf, WARMRUN, [("bwrap", BWRAP)])
p("")
p("(> 1× means cove is faster.)")
p("")
p("### Targets")
p("")
p("| target | measured | met |")
p("|---|---|---|")


def target(name, value, ok):
    p(f"| {name} | {value} | {'**yes**' if ok else '**NO**'} |")


target("cold create → exec `true` → delete, API p50 ≤ 5 ms", f"{api['cold.p50']:.2f} ms", api["cold.p50"] <= 5)
target("`cove run -- true` faster than `crun run`", f"{ms(med(run[RUN]))} vs {ms(med(run[CRUN]))} ms",
       med(run[RUN]) < med(run[CRUN]))
target("exec `true`, API p50 ≤ 0.5 ms", f"{api['exec.p50']:.3f} ms", api["exec.p50"] <= 0.5)
r = med(exe[CRUNX]) / med(exe[EXEC])
target("`cove exec` ≥ 3× faster than `crun exec`", f"{r:.2f}× ({ms(med(exe[EXEC]))} vs {ms(med(exe[CRUNX]))} ms)",
       r >= 3)
mem = api["idle.rss_mb"]
target("≤ 2 MB host memory per idle sandbox (RSS)", f"{mem:.2f} MB", mem <= 2)
if snap:
    for key, label in (("snapshot", "snapshot"), ("restore", "restore"), ("fork1", "fork into 1")):
        for size, what in (("small", "10 files"), ("large", "10,000 files + 1 GiB")):
            v = snap[f"{size}.{key}.p50"]
            target(f"{label} p50 ≤ 20 ms ({what})", f"{v:.2f} ms", v <= 20)
        sm, lg = snap[f"small.{key}.p50"], snap[f"large.{key}.p50"]
        target(f"{label}: the same for both sizes (large ≤ 1.25 × small p50)", f"{lg / sm:.2f}×", lg <= 1.25 * sm)
    for size, what in (("small", "10 files"), ("large", "10,000 files + 1 GiB")):
        v = snap[f"{size}.fork10.p50"]
        target(f"fork into 10 ≤ 100 ms total, p50 ({what})", f"{v:.2f} ms", v <= 100)
    v = snap["large.checkpoint.p50"]
    target("checkpoint after a one-file change ≤ 20 ms, p50 (large)", f"{v:.2f} ms", v <= 20)
if warm:
    target("create from a warm pool, API p50 ≤ 1 ms",
           f"{warm['warm.p50']:.3f} ms (cold, same spec: {warm['cold.p50']:.1f} ms; "
           f"{warm['warm.misses']:.0f} of {warm['runs']:.0f} not from the pool)",
           warm["warm.p50"] <= 1 and warm["warm.misses"] == 0)
if warm_hf:
    target("`cove run -- true` from a warm pool faster than `bwrap --unshare-all` of /bin/true",
           f"{ms(med(warm_hf[WARMRUN]))} vs {ms(med(warm_hf[BWRAP]))} ms", med(warm_hf[WARMRUN]) < med(warm_hf[BWRAP]))
if life:
    target("exec `true` on a paused sandbox within +2 ms of a running one, p50", f"{life['life.wake_delta.p50']:+.2f} ms "
           f"({life['life.exec_paused.p50']:.2f} vs {life['life.exec_running.p50']:.2f} ms)",
           life["life.wake_delta.p50"] <= 2)
    target("pause p50 ≤ 2 ms", f"{life['life.pause.p50']:.2f} ms", life["life.pause.p50"] <= 2)
    for key, label in (("archive", "archive"), ("wake", "wake (exec `true` on an archived one)")):
        target(f"{label} of a sandbox with 10,000 files, p50 ≤ 50 ms",
               f"{life[f'life.{key}.p50']:.1f} ms (create: {life['life.create.p50']:.1f} ms)", life[f"life.{key}.p50"] <= 50)
    if "life.density.n" in life:
        n = life["life.density.n"]
        target(f"≤ 1 MB host memory per paused sandbox ({n:.0f} paused)", f"{life['life.density.mb_per_sandbox']:.3f} MB",
               life["life.density.mb_per_sandbox"] <= 1)
        target(f"exec `true` next to {n:.0f} paused within 1.5× of an empty coved",
               f"{life['life.density.exec_ratio']:.2f}×", life["life.density.exec_ratio"] <= 1.5)
        if "life.density.create_ratio" in life:
            target(f"create next to {n:.0f} paused within 1.5× of an empty coved",
                   f"{life['life.density.create_ratio']:.2f}×", life["life.density.create_ratio"] <= 1.5)
if criu:
    for op in ("dump", "restore"):
        m, c = criu[f"criu.{op}.module.p50"], criu[f"criu.{op}.cli.p50"]
        target(f"memory {op}, {criu['criu.mib']:.0f} MiB touched, p50 ≤ 200 ms", f"{m:.1f} ms", m <= 200)
        target(f"memory {op} within 1.2× of plain criu", f"{m / c:.2f}× ({m:.1f} vs {c:.1f} ms)", m <= 1.2 * c)
if memsnap:
    m, c = memsnap["big.dump.p50"], memsnap["big.cli_dump.p50"]
    mib = memsnap["mib"]
    target(f"memory snapshot of a sandbox, {mib:.0f} MiB touched, API p50 ≤ 200 ms", f"{m:.1f} ms", m <= 200)
    target("... within 1.2× of `criu dump` of the same tree", f"{m / c:.2f}× ({m:.1f} vs {c:.1f} ms)", m <= 1.2 * c)
    n = memsnap["big.dump_nowait.p50"]
    target("... with wait_durable false (images synced after the answer), within 1.2× of `criu dump`",
           f"{n / c:.2f}× ({n:.1f} vs {c:.1f} ms)", n <= 1.2 * c)
    r = memsnap["big.restore.p50"]
    target(f"restore of it, API p50 ≤ 200 ms", f"{r:.1f} ms", r <= 200)
    if criu:
        c = criu["criu.restore.cli.p50"]
        target("... within 1.2× of `criu restore` (criubench's tree of the same size)",
               f"{r / c:.2f}× ({r:.1f} vs {c:.1f} ms)", r <= 1.2 * c)
    f = memsnap["fork3.p50"]
    target(f"fork into 3 with memory ({mib:.0f} MiB) ≤ 500 ms, p50",
           f"{f:.1f} ms (one snapshot {m:.1f} + one restore {r:.1f} ms)", f <= 500)
    f = memsnap["idle.fork3.p50"]
    target("fork into 3 with memory (idle small sandbox) ≤ 500 ms, p50",
           f"{f:.1f} ms (one restore: {memsnap['idle.restore.p50']:.1f} ms)", f <= 500)
    i = memsnap["idle.memory.p50"]
    target("memory snapshot of an idle small sandbox ≤ 50 ms, p50",
           f"{i:.1f} ms (files only: {memsnap['idle.files.p50']:.1f} ms; `criu dump` of its tree: "
           f"{memsnap['idle.cli_dump.p50']:.1f} ms)", i <= 50)
if disk:
    for op in ("snapshot", "restore", "fork1"):
        on, off = disk[f"disk_on.{op}.p50"], disk[f"disk_off.{op}.p50"]
        # as they are without: within 20% or 2 ms, whichever is larger (the load of 8 helpers moves a few ms)
        target(f"{op} with disk limits as without (p50 within 1.2× or +2 ms)", f"{on:.2f} vs {off:.2f} ms",
               on <= max(1.2 * off, off + 2))
if io:
    target("read a file through the API ≥ 1 GB/s", f"{io['read.api_mbps']:.0f} MB/s ({io['read.mib']:.0f} MiB)",
           io["read.api_mbps"] >= 1000)
    target("write a 1 GiB file through the API ≥ 1 GB/s",
           f"{io['write.api_mbps']:.0f} MB/s ({io['write.mib']:.0f} MiB, streamed to the file)",
           io["write.api_mbps"] >= 1000 and io["write.mib"] >= 1024)
    target("session round trip (`true`) p50 ≤ 1 ms", f"{io['session.p50']:.3f} ms", io["session.p50"] <= 1)
    target("load test: no errors", f"{io['load.errors']:.0f}", io["load.errors"] == 0)
if sdk:
    target("Python SDK exec `true` within +0.3 ms of libcove", f"{sdk['sdk.python.over']:+.3f} ms",
           sdk["sdk.python.over"] <= 0.3)
    target("TypeScript SDK exec `true` within +0.3 ms of node's http", f"{sdk['sdk.ts.over']:+.3f} ms",
           sdk["sdk.ts.over"] <= 0.3)
if e2b:
    target("E2B SDK create + run `true` + kill within 1.5× of cove's API, p50",
           f"{e2b['e2b.ratio']:.2f}× ({e2b['e2b.sdk.p50']:.1f} vs {e2b['e2b.native.p50']:.1f} ms)",
           e2b["e2b.ratio"] <= 1.5)
    target(f"… and under E2B's published time-to-interactive ({E2B_TTI})", f"{e2b['e2b.sdk.p50']:.1f} ms",
           e2b["e2b.sdk.p50"] < 400)
for pin, ports in ports_runs:
    how = {"none": "unpinned", "split": "wrk on CPU 0, the rest on CPU 1", "same": "all on CPU 1"}[pin]
    for name, label in (("tiny", "a C epoll server"), ("py", "Python's http.server")):
        k = name + "_cove_"
        r, d, x = ports[k + "ratio"], ports[name + "_direct_rps"], ports[k + "rps"]
        peers = ", ".join(f"{w} {100 * ports[f'{name}_{w}_ratio']:.0f}%" for w in ("nginx", "relay", "splice")
                          if f"{name}_{w}_ratio" in ports)
        target(f"port URL requests/s ≥ 80% of direct ({label}, wrk keep-alive, {how})",
               f"{100 * r:.0f}% ({x:.0f} vs {d:.0f}/s; {peers})", r >= 0.8)
        a = ports[k + "added_p50_us"]
        target(f"port URL added p50 latency ≤ 100 µs ({label}, {how})",
               f"{a:+.0f} µs ({ports[name + '_direct_p50_us']:.0f} → {ports[k + 'p50_us']:.0f} µs)", a <= 100)
    w = ports["ws_cove_ratio"]
    peers = ", ".join(f"{p} {ports[f'ws_{p}_ratio']:.2f}×" for p in ("nginx", "relay", "splice")
                      if f"ws_{p}_ratio" in ports)
    target(f"WebSocket echo round trip through the proxy ≤ 1.2× direct ({how})",
           f"{w:.2f}× ({ports['ws_cove_p50_us']:.0f} vs {ports['ws_direct_p50_us']:.0f} µs; {peers})", w <= 1.2)
failed = [(name, r) for g in (run, exe, warm_hf or {}) for name, r in g.items() if any(c != 0 for c in r.get("exit_codes", []))]
if failed:
    p("")
    p("### Failed runs")
    p("")
    for name, r in failed:
        codes = [c for c in r["exit_codes"] if c != 0]
        kinds = ", ".join(sorted({"killed by a signal" if c is None else f"exit {c}" for c in codes}))
        p(f"- `{name}`: {len(codes)} of {len(r['exit_codes'])} runs failed ({kinds})")
print("\n".join(out))
sys.exit(3 if failed else 0)
