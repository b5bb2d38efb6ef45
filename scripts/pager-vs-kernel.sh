#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The same program under the kernel's zswap (cgroup v1 memory limit, a swap file on disk, zswap
# enabled with the same compressor) and under `uzswap run`; see docs/benchmarks/run.md.
# Usage: scripts/pager-vs-kernel.sh SIZE_MiB COMPRESSOR -- CMD ARGS...
# UZSWAP_ARGS (split on spaces) adds flags to both `uzswap run`s, e.g. "--background-reclaim off".
# Needs root; takes the kernel-test lock and restores every setting it changes.
set -euo pipefail
SIZE=$1; ALG=$2; shift 3
UZSWAP=${UZSWAP:-target/release/uzswap}
CG=/sys/fs/cgroup/memory/uzswap-run-bench
# shellcheck source=scripts/kernel-side.sh
. "$(dirname "$0")/kernel-side.sh"
kernel_side_begin $CG "${SWAPFILE:-/var/tmp/uzswap-run-bench.swap}" "$SIZE"
zswap_on "$ALG"
before=$(vm)
echo "kernel before: $before"
oom0=$(oom_kills)
t0=$(date +%s.%N)
# The kernel's run can be OOM-killed under the limit: say so and go on to uzswap's runs.
sh -c "echo \$\$ > $CG/tasks; exec \"\$@\"" sh "$@" > /tmp/uzswap-kernel.out ||
    echo "kernel run failed: status $?" > /tmp/uzswap-kernel.out
t1=$(date +%s.%N)
after=$(vm)
echo "kernel after:  $after"
# The run's deltas, as the uzswap lines below give theirs.
echo "kernel deltas: $(printf '%s\n%s\n' "$before" "$after" | tr ' ' '\n' | awk -F= 'NF==2 {
    if ($1 in a) printf "%s %d ", $1, $2 - a[$1]; else a[$1] = $2 }')"
oom=$(( $(oom_kills) - oom0 ))
[ "$oom" = 0 ] || echo "kernel run: $oom process(es) OOM-killed in the cgroup" >> /tmp/uzswap-kernel.out
echo "kernel: $(echo "$t1 - $t0" | bc) s, max usage $(( $(cat $CG/memory.max_usage_in_bytes) >> 20 )) MiB; $(cat /tmp/uzswap-kernel.out)"
zswap_off
for covers in resident resident+pool; do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$UZSWAP" run --memory-max ${SIZE}M --compressor "$ALG" --budget-covers $covers ${UZSWAP_ARGS:-} \
        --report /tmp/uzswap-run-$covers.json -- "$@" > /tmp/uzswap-run.out
    t1=$(date +%s.%N)
    echo "uzswap ($covers): $(echo "$t1 - $t0" | bc) s; $(cat /tmp/uzswap-run.out)"
    python3 - "$covers" <<'PY'
import json, sys
r = json.load(open(f"/tmp/uzswap-run-{sys.argv[1]}.json"))
c, f = r["counters"], r["faults"]
print(f"  faults {f['count']} p50 {f['p50_us']:.2f} us p99 {f['p99_us']:.2f} us pool {f['from_pool']} file {f['from_swapfile']} zero {f['zero']}; "
      f"zswpin {c.get('zswpin')} zswpout {c.get('zswpout')} pswpin {c.get('pswpin')} pswpout {c.get('pswpout')}; "
      f"peak RSS {r['peak_rss_bytes']>>20} MiB, peak charged {r['budget']['peak_charged_bytes']>>20} MiB")
PY
done
