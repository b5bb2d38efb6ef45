#!/bin/bash
# SPDX-License-Identifier: MIT
# Victim selection and clean-page reuse of `uzswap run` on real programs (docs/pager.md):
# every workload under four configurations, interleaved, REPS invocations each, one JSON
# line per run (workload, configuration, the run report's figures) on stdout.
#   clock        --victim clock --keep-clean on (the default)
#   keep-off     --victim clock --keep-clean off (loads exclusive, as the kernel's)
#   clock-faults --victim clock-faults (no write references)
#   fifo         --victim fifo
# Timing: run under `flock /tmp/uzswap-bench.lock chrt -f 10` (the script takes both itself).
# Usage: scripts/pager-policy.sh [REPS [FIRST_REP]] > results.jsonl; summary:
# scripts/pager-policy.py results.jsonl. SKIP="workload:config ..." leaves pairs out (e.g.
# "sqlite:fifo", 20x slower than the rest); EXTRA_CONFIGS="name|flags;..." adds configurations,
# ONLY_CONFIGS="name|flags;..." replaces them, ONLY_WORKLOADS="sqlite;node" picks workloads.
set -euo pipefail
REPS=${1:-5}
FIRST=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
U=${UZSWAP:-$here/../target/release/uzswap}
PY=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
NODE=${NODE:-$(command -v node || true)}
W=$here/pager-workloads
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
workloads=(
  "reread|40M|$PY $W/reread.py 1000000 4"
  "rebytes|40M|$PY $W/rebytes.py 64 4"
  "sqlite|20M|$PY $W/sqlite_hot.py 150000 40000"
  "pythreads|96M|$PY $W/pythreads.py 4 150000 3"
)
[ -n "$NODE" ] && workloads+=("node|80M|$NODE $W/node_hot.js 300000 400000")
configs=("clock|--victim clock --keep-clean on" "keep-off|--victim clock --keep-clean off"
  "clock-faults|--victim clock-faults --keep-clean on" "fifo|--victim fifo --keep-clean on")
if [ -n "${EXTRA_CONFIGS:-}" ]; then IFS=';' read -ra extra <<<"$EXTRA_CONFIGS"; configs+=("${extra[@]}"); fi
if [ -n "${ONLY_WORKLOADS:-}" ]; then IFS=';' read -ra only <<<"$ONLY_WORKLOADS"; kept=(); for w in "${workloads[@]}"; do for o in "${only[@]}"; do [ "${w%%|*}" = "$o" ] && kept+=("$w"); done; done; workloads=("${kept[@]}"); fi
if [ -n "${ONLY_CONFIGS:-}" ]; then IFS=';' read -ra configs <<<"$ONLY_CONFIGS"; fi
for rep in $(seq "$FIRST" "$REPS"); do
  for w in "${workloads[@]}"; do
    IFS='|' read -r name budget cmd <<<"$w"
    for c in "${configs[@]}"; do
      IFS='|' read -r cname flags <<<"$c"
      case " ${SKIP:-} " in *" $name:$cname "*) continue ;; esac
      # shellcheck disable=SC2086
      flock /tmp/uzswap-bench.lock chrt -f 10 "$U" run --memory-max "$budget" $flags \
        --report "$out/r.json" -- $cmd >/dev/null || { echo "FAILED: $name $cname rep $rep" >&2; continue; }
      python3 - "$out/r.json" "$name" "$cname" "$rep" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"workload": sys.argv[2], "config": sys.argv[3], "rep": int(sys.argv[4]),
    "loadavg": sys.argv[5], "elapsed_s": r["elapsed_s"], "faults": r["faults"]["count"],
    "p50_us": r["faults"]["p50_us"], "p99_us": r["faults"]["p99_us"],
    "evictions": r["pager"]["evictions"], "reevictions": r["pager"]["reevictions"],
    "reevictions_saved": r["pager"]["reevictions_saved"],
    "pager_reevictions_saved": r["pager_reevictions_saved"],
    "zswpout": r["counters"]["zswpout"], "pswpout": r["counters"].get("pswpout", 0),
    "zswpwb": r["counters"].get("zswpwb", 0),
    "peak_charged_mib": r["budget"]["peak_charged_bytes"] / 1048576}), flush=True)
PYEOF
    done
  done
done
