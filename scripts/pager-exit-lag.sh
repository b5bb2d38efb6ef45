#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How long a process under `uzswap run` takes to exit after its last output (the swap file's
# blocks are freed, and on a filesystem with online discard, discarded, in the exiting process).
# usage: scripts/pager-exit-lag.sh DIR_WITH_UZSWAP_AND_PRELOAD [ACCESSES] [SIZE]
set -euo pipefail
B=$1; N=${2:-1000000}; SIZE=${3:-64M}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cc -O2 -o "$T/randrw" "$(dirname "$0")/pager-workloads/randrw.c"
out=$("$B/uzswap" run --memory-max "$SIZE" --report "$T/r.json" -- "$T/randrw" 300 "$N" 2>/dev/null
      python3 -c "import time; print('end', time.clock_gettime(time.CLOCK_MONOTONIC))")
last=$(sed -n 's/.*done at \([0-9.]*\).*/\1/p' <<<"$out")
end=$(sed -n 's/^end \([0-9.]*\)/\1/p' <<<"$out")
python3 - "$T/r.json" "$last" "$end" "$B" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[4]}: elapsed {d['elapsed_s']:.2f} s, exit lag {float(sys.argv[3]) - float(sys.argv[2]):.2f} s, "
      f"faults {d['faults']['count']} (swap file {d['faults']['from_swapfile']})")
PY
