#!/bin/bash
# SPDX-License-Identifier: MIT
# The replay's engine share (issue #12: engine_s / cache_s <= 0.10): N replays of one built-in
# workload on a saved corpus, each alone under the bench lock at real-time priority, sorted by
# engine_s / cache_s; prints the median line.
#   scripts/replay-engine-share.sh BIN [N] [WORKLOAD] [CORPUS]
# Save the corpus once with `uzswap replay --workload build --memory-max 256M --save-corpus FILE`.
set -euo pipefail
BIN=$1; N=${2:-5}; W=${3:-build}; CORPUS=${4:-/tmp/def-corpus.pages}
out=$(mktemp)
for _ in $(seq "$N"); do
  flock /tmp/uzswap-bench.lock chrt -f 10 "$BIN" replay --workload "$W" --memory-max 256M \
    --corpus "$CORPUS" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%.4f %.3f %.4f" % (d["engine_s"], d["cache_s"], d["engine_s"] / d["cache_s"]))'
done | sort -k3 -n > "$out"
echo "engine_s cache_s engine/cache (sorted)"
cat "$out"
echo "median: $(sed -n "$(( (N + 1) / 2 ))p" "$out")"
rm -f "$out"
