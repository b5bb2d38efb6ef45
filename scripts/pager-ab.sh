#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two or more uzswap binaries (each with its libuzswap_preload.so beside it) on the same real
# programs under `uzswap run`, budget on resident memory, alternating, ROUNDS rounds. Prints
# one line per run: round, binary directory, program, wall seconds, output digest, pinned futex
# waits. Every run takes the bench lock.
# Usage: scripts/pager-ab.sh ROUNDS BIN_A BIN_B ...
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-/root/.pyenv/versions/3.11.7/bin/python3.11}
R=$1; shift
for r in $(seq 1 "$R"); do
  for spec in "96|$PY scripts/pager-workloads/pythreads.py 4 150000 3" \
      "96|node scripts/pager-workloads/node_hot.js 300000 400000" \
      "20|$PY scripts/pager-workloads/sqlite_hot.py 150000 40000"; do
    IFS='|' read -r size cmd <<<"$spec"
    for b in "$@"; do
      t0=$(date +%s.%N)
      # shellcheck disable=SC2086
      flock /tmp/uzswap-bench.lock "$b" run --memory-max "${size}M" --compressor lzo \
        --budget-covers resident --report /tmp/uzswap-ab.json -- $cmd > /tmp/uzswap-ab.out 2>/dev/null
      t1=$(date +%s.%N)
      prog=$(basename "$(echo "$cmd" | awk '{print $2}')")
      echo "$r $(basename "$(dirname "$b")") $prog $(echo "$t1 - $t0" | bc) $(md5sum < /tmp/uzswap-ab.out | cut -c1-8) $(grep -o '"pinned_futex_waits": *[0-9]*' /tmp/uzswap-ab.json || true)"
    done
  done
done
