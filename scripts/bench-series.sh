#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The BENCHMARKS.md section 1 protocol in one command: N separate `uzswap bench` invocations
# (each its own process, one cache, a warm-up and RUNS timed runs) on a saved corpus, then the
# median and range over invocations of each paired ratio, of the per-load overhead in ns
# (`load_overhead_ns`), of the first run's cold pair, and with --scaling of every operation's
# 2-thread scaling next to its reference's.
#
#   scripts/bench-series.sh [-n N] [-r RUNS] [-b UZSWAP_BINARY] CORPUS COMPRESSOR [bench flags...]
#   scripts/bench-series.sh -n 5 /tmp/default.pages lzo-rle --kernel
#
# Runs under SCHED_FIFO (chrt -f 10) when allowed, so nothing else takes the CPU mid-phase.
# Capture a corpus once with: uzswap bench --save-corpus /tmp/default.pages
set -euo pipefail
n=5 runs=9 bin=""
while getopts "n:r:b:" o; do
  case $o in
    n) n=$OPTARG ;; r) runs=$OPTARG ;; b) bin=$OPTARG ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { sed -n '2,10p' "$0"; exit 2; }
corpus=$1 comp=$2; shift 2
if [ -z "$bin" ]; then
  cargo build --release -q -p uzswap-cli
  bin="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/uzswap"
fi
fifo=(); chrt -f 10 true 2>/dev/null && fifo=(chrt -f 10)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for i in $(seq "$n"); do
  "${fifo[@]}" "$bin" bench --corpus "$corpus" --compressor "$comp" --runs "$runs" --json "$@" > "$out/$i.json"
  echo "invocation $i/$n done" >&2
done
python3 - "$out"/*.json <<'PY'
import json, statistics, sys
docs = [json.load(open(f)) for f in sys.argv[1:]]
print(f"{len(docs)} invocations, compressor {docs[0]['compressor']}, {docs[0]['pages']} pages, "
      f"verified: {all(d['verified'] for d in docs)}")
def series(name, values):
    v = [x for x in values if isinstance(x, (int, float))]
    if v:
        print(f"  {name:40s} median {statistics.median(v):8.3f}  range {min(v):.3f}-{max(v):.3f}  "
              + " ".join(f"{x:.3f}" for x in v))
# The paired ratios, the cache's own cost per load (ns), the first run's cold pair, and with
# --scaling each operation's scaling next to its reference's.
for group in ("paired_ratios", "load_overhead_ns", "first_run"):
    keys = sorted({k for d in docs for k in d.get(group, {})})
    for k in keys:
        if group == "first_run" and not k.endswith("_vs_zram_write_cold"):
            continue
        series(f"{group}.{k}", [d.get(group, {}).get(k) for d in docs])
for op in sorted({k for d in docs for k in d.get("scaling", {})}):
    series(f"scaling.{op}", [d["scaling"][op]["scaling"] for d in docs if op in d.get("scaling", {})])
    series(f"scaling.{op} reference ({docs[0]['scaling'][op]['reference']})",
           [d["scaling"][op]["reference_scaling"] for d in docs if op in d.get("scaling", {})])
PY
