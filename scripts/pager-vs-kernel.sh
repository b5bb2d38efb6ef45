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
Z=/sys/module/zswap/parameters
CG=/sys/fs/cgroup/memory/uzswap-run-bench
SWAP=${SWAPFILE:-/var/tmp/uzswap-run-bench.swap}
exec 9>/run/lock/uzswap-kernel-tests.lock
flock 9
old_en=$(cat $Z/enabled); old_alg=$(cat $Z/compressor); old_pool=$(cat $Z/max_pool_percent)
restore() {
    swapoff "$SWAP" 2>/dev/null || true; rm -f "$SWAP"
    echo N > $Z/enabled; echo "$old_alg" > $Z/compressor; echo "$old_pool" > $Z/max_pool_percent
    echo "$old_en" > $Z/enabled
    [ -d $CG ] && rmdir $CG 2>/dev/null || true
}
trap restore EXIT
# A signal must run the restore too (bash skips the EXIT trap when killed by an untrapped one).
trap 'exit 130' INT
trap 'exit 143' TERM HUP
fallocate -l 4G "$SWAP"; chmod 600 "$SWAP"; mkswap -q "$SWAP"; swapon "$SWAP"
echo N > $Z/enabled; echo "$ALG" > $Z/compressor; echo 20 > $Z/max_pool_percent; echo Y > $Z/enabled
mkdir -p $CG; echo $((SIZE << 20)) > $CG/memory.limit_in_bytes
vm() { awk '$1=="zswpin"||$1=="zswpout"||$1=="pswpin"||$1=="pswpout"||$1=="pgmajfault"{printf "%s=%s ", $1, $2}' /proc/vmstat; }
echo "kernel before: $(vm)"
t0=$(date +%s.%N)
# The kernel's run can be OOM-killed under the limit: say so and go on to uzswap's runs.
sh -c "echo \$\$ > $CG/tasks; exec \"\$@\"" sh "$@" > /tmp/uzswap-kernel.out ||
    echo "kernel run failed: status $?" > /tmp/uzswap-kernel.out
t1=$(date +%s.%N)
echo "kernel after:  $(vm)"
echo "kernel: $(echo "$t1 - $t0" | bc) s, max usage $(( $(cat $CG/memory.max_usage_in_bytes) >> 20 )) MiB; $(cat /tmp/uzswap-kernel.out)"
echo N > $Z/enabled
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
