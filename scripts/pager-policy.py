#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Summary of scripts/pager-policy.sh output: per workload and configuration, the median run
# time, faults and re-evictions saved, and the median and range of the paired ratios (same
# invocation round) against the default configuration `clock`.
import json
import statistics
import sys
from collections import defaultdict

runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(dict)
for r in runs:
    by[(r["workload"], r["config"])][r["rep"]] = r
workloads = list(dict.fromkeys(r["workload"] for r in runs))
configs = list(dict.fromkeys(r["config"] for r in runs))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


print("| workload | config | n | time s (median) | time / clock (median, range) | faults (median)"
      " | faults / clock (median, range) | re-evictions saved | zswpout (median) |")
print("|---|---|---|---|---|---|---|---|---|")
for w in workloads:
    base = by[(w, "clock")]
    for c in configs:
        d = by[(w, c)]
        if not d:
            continue
        reps = sorted(d)
        t = [d[i]["elapsed_s"] for i in reps]
        f = [d[i]["faults"] for i in reps]
        paired = [i for i in reps if i in base]
        tr = [d[i]["elapsed_s"] / base[i]["elapsed_s"] for i in paired]
        fr = [d[i]["faults"] / base[i]["faults"] for i in paired]
        sv = [d[i]["pager_reevictions_saved"] for i in reps]
        zo = [d[i]["zswpout"] for i in reps]
        print(f"| {w} | {c} | {len(reps)} | {med(t):.2f} | {med(tr):.3f} ({min(tr):.3f}-{max(tr):.3f}) "
              f"| {med(f):.0f} | {med(fr):.3f} ({min(fr):.3f}-{max(fr):.3f}) | {100 * med(sv):.0f} % "
              f"| {med(zo):.0f} |")
loads = [float(r["loadavg"].split()[0]) for r in runs]
print(f"\n{len(runs)} runs; 1-minute load average during the series: {min(loads):.1f}-{max(loads):.1f}")
