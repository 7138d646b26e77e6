#!/usr/bin/env python3
"""The summary table of a bench/run.sh run, as markdown, from its results
directory: api.txt (apibench's "key value" lines), run.json and exec.json
(hyperfine), machine.txt. Usage: summary.py RESULTS_DIR"""
import json
import os
import sys
import time

res = sys.argv[1]


def load_api():
    api = {}
    with open(os.path.join(res, "api.txt")) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            api[k] = float(v)
    return api


def load_hf(name):
    with open(os.path.join(res, name + ".json")) as f:
        return {r["command"]: r for r in json.load(f)["results"]}


api = load_api()
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
failed = [(name, r) for g in (run, exe) for name, r in g.items() if any(c != 0 for c in r.get("exit_codes", []))]
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
